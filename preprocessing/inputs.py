"""Which files a preprocessing run reads, and with which reader: one reader per source of the
paper's corpus (its Table 6) plus generic JSON lines and plain text."""
from __future__ import annotations

import os
from typing import Callable, List, Tuple

from .options import SOURCES
from .reader_books import read_books
from .reader_jsonl import read_jsonl
from .reader_realnews import read_realnews
from .reader_stories import read_stories
from .reader_text import read_text
from .reader_wikipedia import read_wikipedia
from .textio import list_input_files

READERS = {
    "books": read_books,
    "wikipedia": read_wikipedia,
    "realnews": read_realnews,
    "stories": read_stories,
    "jsonl": read_jsonl,
    "text": read_text,
}


def collect_inputs(args, log: Callable[[str], None]) -> List[Tuple[str, str, str]]:
    """(source, path, display name) of every input file of ``args``' sources, in a fixed order; a
    folder without files is kept as one entry (reported as bad input), documentation files found in
    input folders are skipped with one ``log`` line."""
    inputs = []
    skipped: List[str] = []
    for source in SOURCES:
        for root in getattr(args, source):
            files = list_input_files(root, skipped)
            if not files:
                inputs.append((source, root, root + " (folder without files)"))
            for path, rel in files:
                name = rel if os.path.isdir(root) else path
                inputs.append((source, path, name))
    if skipped:
        shown = ", ".join(skipped[:3]) + (f" and {len(skipped) - 3} more" if len(skipped) > 3 else "")
        log(f"not reading {len(skipped)} documentation file(s) found in input folders: {shown}")
    return inputs
