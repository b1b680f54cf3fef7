"""Books: a folder of plain-text files (.txt, or compressed .gz/.xz/.bz2), one book per file.

Every line of the file is kept as one line of the document (blank lines are dropped later).
"""
from __future__ import annotations

from typing import Iterator

from .document import EMPTY_FILE, UNREADABLE_FILE, Document, DocumentBuilder, ReaderConfig
from .textio import UnreadableFile, iter_lines


def read_file_as_document(path: str, name: str, cfg: ReaderConfig) -> Iterator[Document]:
    """Yield the whole file as a single document (or one bad-input record)."""
    builder = DocumentBuilder(name, cfg.max_doc_chars)
    try:
        for line in iter_lines(path, cfg.max_line_bytes):
            builder.add(line)
    except UnreadableFile as e:
        yield Document(name, problem=UNREADABLE_FILE, detail=str(e))
        return
    yield builder.build(empty_problem=EMPTY_FILE)


def read_books(path: str, name: str, cfg: ReaderConfig) -> Iterator[Document]:
    """One book per file."""
    return read_file_as_document(path, name, cfg)
