"""Console scripts (see setup.py ``entry_points``); each module only parses flags and prints."""
import argparse


def folder_parser(prog: str, description: str, source: str, source_help: str) -> argparse.ArgumentParser:
    """The flags every converter that writes a whole output folder shares: the source, the
    output folder, and --overwrite (the folder is replaced as a whole: ``atomic.staged_folder``)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(source, help=source_help)
    parser.add_argument("outdir", help="output folder (must not exist or be empty, unless --overwrite)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty OUTDIR")
    return parser
