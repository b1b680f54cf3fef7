"""Realnews as Grover writes it (``realnews.jsonl``): JSON lines with "title", "text", "url",
"domain", "publish_date", ... The document is the title line followed by the text.

Selection (longer than ``--realnews-min-tokens`` tokens, then ``--realnews-fraction``) happens in
the pipeline, since the length is counted in the output tokenizer's tokens.
"""
from __future__ import annotations

from typing import Iterator

from .document import Document, ReaderConfig
from .reader_jsonl import iter_json_documents


def read_realnews(path: str, name: str, cfg: ReaderConfig) -> Iterator[Document]:
    return iter_json_documents(path, name, cfg, "text", title_field="title")
