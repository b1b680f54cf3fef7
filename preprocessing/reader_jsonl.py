"""Generic JSON lines: one JSON object per line, the document in a text field (``--jsonl-text-field``)."""
from __future__ import annotations

import json
from typing import Iterator, Optional

from .document import (
    EMPTY_DOCUMENT,
    EMPTY_FILE,
    JSON_ERROR,
    MISSING_TEXT,
    TOO_LONG,
    UNREADABLE_FILE,
    Document,
    ReaderConfig,
)
from .textio import UnreadableFile, iter_lines, sanitize_surrogates


def parse_json_document(line, name: str, cfg: ReaderConfig, text_field: str, title_field: Optional[str] = None) -> Document:
    """Turn one ``textio.Line`` holding a JSON object into a Document (or a bad-input record)."""
    if line.too_long:
        return Document(name, problem=TOO_LONG, detail=f"JSON line over {cfg.max_json_line_bytes} bytes")
    try:
        obj = json.loads(line.text)
    except ValueError as e:
        return Document(name, problem=JSON_ERROR, detail=str(e)[:200])
    if not isinstance(obj, dict):
        return Document(name, problem=JSON_ERROR, detail=f"a JSON {type(obj).__name__}, not an object")
    text = obj.get(text_field)
    if not isinstance(text, str):
        what = "missing" if text is None else f"a {type(text).__name__}, not a string"
        return Document(name, problem=MISSING_TEXT, detail=f"field {text_field!r} is {what}")
    if title_field is not None:
        title = obj.get(title_field)
        if isinstance(title, str) and title.strip():
            text = title.strip() + "\n" + text
    if len(text) > cfg.max_doc_chars:
        return Document(name, problem=TOO_LONG, detail=f"more than {cfg.max_doc_chars} characters")
    if not text.strip():
        return Document(name, problem=EMPTY_DOCUMENT)
    text, had_surrogates = sanitize_surrogates(text)
    return Document(name, text=text, bad_utf8=line.bad_utf8 or had_surrogates)


def iter_json_documents(path: str, name: str, cfg: ReaderConfig, text_field: str, title_field: Optional[str] = None) -> Iterator[Document]:
    produced = False
    try:
        for line in iter_lines(path, cfg.max_json_line_bytes):
            if line.text is not None and not line.text.strip():
                continue
            produced = True
            yield parse_json_document(line, f"{name}:{line.lineno}", cfg, text_field, title_field)
    except UnreadableFile as e:
        yield Document(name, problem=UNREADABLE_FILE, detail=str(e))
        return
    if not produced:
        yield Document(name, problem=EMPTY_FILE)


def read_jsonl(path: str, name: str, cfg: ReaderConfig) -> Iterator[Document]:
    return iter_json_documents(path, name, cfg, cfg.jsonl_text_field)
