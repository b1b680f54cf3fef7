"""``longformer-train``: ``fairseq-train`` with ``--user-dir`` pointing at the installed plugin.

fairseq's ``--user-dir fairseq_longformer`` is a path: it works from the repository root, but
from anywhere else fairseq cannot find the folder (and a second copy of the same module name is
refused as "not globally unique"). This wrapper passes the installed package's folder, so
``longformer-train DATA --arch longformer_base --task longformer_mlm ...`` works from any
directory. Every other flag is fairseq-train's.
"""
import sys
from pathlib import Path


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--user-dir" not in argv and not any(a.startswith("--user-dir=") for a in argv):
        argv = ["--user-dir", str(Path(__file__).resolve().parent.parent)] + argv
    sys.argv = ["fairseq-train"] + argv
    from fairseq_cli.train import cli_main

    cli_main()


if __name__ == "__main__":
    main()
