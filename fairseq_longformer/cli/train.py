"""``longformer-train``: ``fairseq-train`` with ``--user-dir`` pointing at the installed plugin.

fairseq's ``--user-dir fairseq_longformer`` is a path: it works from the repository root, but
from anywhere else fairseq cannot find the folder (and a second copy of the same module name is
refused as "not globally unique"). This wrapper passes the installed package's folder, so
``longformer-train DATA --arch longformer_base --task longformer_mlm ...`` works from any
directory. Every other flag is fairseq-train's.

``longformer-user-dir`` prints that folder, for fairseq's own commands:
``fairseq-train --user-dir "$(longformer-user-dir)" ...`` (likewise fairseq-generate, -eval-lm).
"""
import sys
from pathlib import Path

from longformer_common.cli import one_line_errors

USAGE_NOTE = """\
longformer-train: fairseq-train with the Longformer plugin loaded from the installed package
(--user-dir {user_dir}).
For fairseq's own commands, name the plugin with:  --user-dir "$(longformer-user-dir)"
Every flag below is fairseq-train's.
"""


def user_dir() -> str:
    """The installed ``fairseq_longformer`` folder: the value fairseq's ``--user-dir`` needs."""
    return str(Path(__file__).resolve().parent.parent)


@one_line_errors
def print_user_dir(argv=None):
    """``longformer-user-dir``: print the plugin folder for ``fairseq-* --user-dir``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["-h"], ["--help"]):
        print("usage: longformer-user-dir\n\nPrints the installed plugin's folder, for "
              "fairseq's commands: fairseq-train --user-dir \"$(longformer-user-dir)\" ...")
        return 0
    if argv:
        print(f"error: longformer-user-dir takes no arguments, got {' '.join(argv)!r}", file=sys.stderr)
        return 2
    print(user_dir())
    return 0


@one_line_errors
def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--user-dir" not in argv and not any(a.startswith("--user-dir=") for a in argv):
        argv = ["--user-dir", user_dir()] + argv
    if "-h" in argv or "--help" in argv:
        print(USAGE_NOTE.format(user_dir=user_dir()))
        sys.stdout.flush()
    sys.argv = ["fairseq-train"] + argv
    from fairseq_cli.train import cli_main

    cli_main()


if __name__ == "__main__":
    main()
