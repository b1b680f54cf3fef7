"""Plain text with blank-line document breaks: a run of non-blank lines is one document."""
from __future__ import annotations

from typing import Iterator

from .document import EMPTY_FILE, UNREADABLE_FILE, Document, DocumentBuilder, ReaderConfig
from .textio import UnreadableFile, iter_lines


def read_text(path: str, name: str, cfg: ReaderConfig) -> Iterator[Document]:
    builder = None
    produced = False
    try:
        for line in iter_lines(path, cfg.max_line_bytes):
            if line.text is not None and not line.text.strip():
                if builder is not None:
                    produced = True
                    yield builder.build()
                    builder = None
                continue
            if builder is None:
                builder = DocumentBuilder(f"{name}:{line.lineno}", cfg.max_doc_chars)
            builder.add(line)
    except UnreadableFile as e:
        # Documents completed before the error were yielded; the one in progress is dropped.
        yield Document(name, problem=UNREADABLE_FILE, detail=str(e))
        return
    if builder is not None:
        produced = True
        yield builder.build()
    if not produced:
        yield Document(name, problem=EMPTY_FILE)
