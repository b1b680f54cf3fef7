"""The LED demo's command line: ``build`` (the task's data) and ``score`` (ROUGE)."""
import argparse
from pathlib import Path

import longformer_experiments.led_demo as package
from longformer_experiments.led_demo.score import score
from longformer_experiments.led_demo.task import build
from longformer_experiments.runner import KJV


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m longformer_experiments.led_demo", description=package.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="the task's data")
    b.add_argument("work", type=Path)
    b.add_argument("--kjv", type=Path, default=KJV)
    b.add_argument("--positions", type=int, default=256, help="the BART's positions; sources are 2-3x this")
    b.add_argument("--vocab", type=int, default=2000, help="sentencepiece pieces")
    b.add_argument("--valid-books", type=int, default=4)
    b.add_argument("--test-books", type=int, default=6)
    b.add_argument("--max-train", type=int, default=0, help="at most this many train passages (0: all)")
    b.add_argument("--max-eval", type=int, default=0, help="at most this many passages per valid/test book (0: all)")
    b.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("score", help="ROUGE of the lead baseline and of fairseq-generate logs")
    s.add_argument("work", type=Path)
    s.add_argument("--system", action="append", default=[], help="NAME=fairseq-generate log")
    s.add_argument("--regenerate", default="", help="the command that made the logs, named under the table")
    args = p.parse_args(argv)
    build(args) if args.command == "build" else score(args)

