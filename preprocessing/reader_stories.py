"""Stories (the CC-Stories subset of Trinh & Le, 2018): text files, one story per file.

A corpus with one story per line or per JSON line can be given with ``--text``/``--jsonl``
instead; only ``--stories`` is subsampled by ``--stories-fraction``.
"""
from __future__ import annotations

from typing import Iterator

from .document import Document, ReaderConfig
from .reader_books import read_file_as_document


def read_stories(path: str, name: str, cfg: ReaderConfig) -> Iterator[Document]:
    """One story per file."""
    return read_file_as_document(path, name, cfg)
