"""Plain typed command-line flags from their defaults, so that a program with many of them
(sizes, counts, rates) lists each once: ``add_flags(parser, updates=40, lr=3e-3)`` adds
``--updates`` (int, default 40) and ``--lr`` (float, default 0.003)."""
import argparse


def add_flags(parser: argparse.ArgumentParser, **defaults) -> None:
    """One ``--name`` per keyword (underscores become dashes), of its default's type (int, float
    or str), with that default."""
    for name, default in defaults.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
