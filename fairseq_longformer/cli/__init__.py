"""Console scripts (see setup.py ``entry_points``); each module only parses flags and prints."""
import argparse
import logging
import sys
from typing import Callable, Dict, Optional, Sequence, Tuple

from ..runtime.checkpoints import trust_checkpoints


def folder_parser(prog: str, description: str, source: str, source_help: str,
                  options: Sequence[Tuple[str, Dict[str, object]]] = ()) -> argparse.ArgumentParser:
    """The flags every converter that writes a whole output folder shares: the source, the
    output folder, and --overwrite (the folder is replaced as a whole: ``atomic.staged_folder``);
    then ``options``, (flag, add_argument keywords) each."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(source, help=source_help)
    parser.add_argument("outdir", help="output folder (must not exist or be empty, unless --overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty OUTDIR")
    add_options(parser, options)
    return parser


def add_options(parser, options: Sequence[Tuple[str, Dict[str, object]]]) -> None:
    for flag, keywords in options:
        parser.add_argument(flag, **keywords)


def run_folder_command(prog: str, outdir: str, overwrite: bool, inputs: Sequence[Optional[str]],
                       run: Callable[[], int], trust: bool = False) -> int:
    """Run ``run()`` with logging on, after checking the output folder (``--overwrite`` never
    deletes one of ``inputs``), with ``trust`` as the run's --trust-checkpoint; a bad input
    becomes one line ``PROG: error: ...`` on stderr and exit status 2."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from longformer_common.atomic import check_output_dir

    try:
        check_output_dir(outdir, overwrite, list(inputs))
        with trust_checkpoints(trust):
            return run()
    except (ValueError, FileNotFoundError, FileExistsError, ImportError) as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2


def checkpoint_converter_parser(prog: str, description: str, kind: str) -> argparse.ArgumentParser:
    """The flags the fairseq checkpoint converters (``longformer-convert-roberta``,
    ``longformer-convert-bart``) share: the ``kind`` source, the output folder, where the
    checkpoint and dictionary are, and --overwrite."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--source", required=True, help=f"{kind} folder (with model.pt and dict.txt) or checkpoint file")
    parser.add_argument("--output", required=True, help="output folder (model.pt + dict.txt are written there)")
    parser.add_argument("--checkpoint-file", default="model.pt",
                        help="checkpoint name inside a --source folder (default: model.pt)")
    parser.add_argument("--dict", default=None, help="dict.txt (default: next to the checkpoint)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a non-empty OUTPUT folder this tool wrote (its marker file is there)")
    add_trust_flag(parser)
    return parser


def add_trust_flag(parser: argparse.ArgumentParser) -> None:
    """``--trust-checkpoint``: see fairseq_longformer/runtime/checkpoints.py."""
    parser.add_argument("--trust-checkpoint", action="store_true",
                        help="load a checkpoint that holds types other than tensors and fairseq's "
                             "configuration (runs code from the file: only for files you trust)")


def run_converter(prog: str, convert: Callable[[], object], trust: bool = False):
    """Run ``convert()`` with logging on; a bad input (ValueError, FileNotFoundError) becomes one
    line ``PROG: error: ...`` on stderr; ``trust`` is the run's --trust-checkpoint. Returns the
    result, or None after an error (exit 2)."""
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s", level=logging.INFO)
    try:
        with trust_checkpoints(trust):
            return convert()
    except (ValueError, FileNotFoundError) as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return None
