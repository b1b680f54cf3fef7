"""The bundled King James Bible (data/kjv) as the experiments read it.

Each book is a file ``NN-Name.txt`` of blocks separated by blank lines, alternately a chapter's
title ("Genesis 1") and its text.
"""
import hashlib
from pathlib import Path
from typing import Iterator, List, Tuple

BOOK_GLOB = "[0-9][0-9]-*.txt"


def book_chapters(path: Path) -> List[Tuple[str, str]]:
    """(title, text on one line, whitespace normalised) of every chapter of one book."""
    blocks = [b.strip() for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    return [(title, " ".join(text.split())) for title, text in zip(blocks[::2], blocks[1::2])]


def book_text(path: Path) -> str:
    """A book's text without its chapter titles, as one line."""
    return " ".join(text for _, text in book_chapters(path))


def chapters(kjv: Path) -> Iterator[Tuple[int, str, str]]:
    """(book number, title, text) of every chapter under ``kjv``, in the Bible's order."""
    for path in sorted(kjv.glob(BOOK_GLOB)):
        for title, text in book_chapters(path):
            yield int(path.name[:2]), title, text


def split_of(title: str, seed: int) -> str:
    """"valid" for about 10% of the chapters (a seeded hash of the title), else "train": no valid
    passage comes from a train chapter."""
    return "valid" if int(hashlib.sha256(f"{seed}:{title}".encode()).hexdigest(), 16) % 10 == 0 else "train"
