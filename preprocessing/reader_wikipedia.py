"""English Wikipedia as WikiExtractor writes it (folders AA/wiki_00 ..., optionally compressed).

Two layouts, detected per file from its first non-blank line:
- ``<doc id="12" url="..." title="Anarchism">`` ... ``</doc>`` blocks (the default output);
  the first content line is the title, as WikiExtractor writes it;
- JSON lines (``--json``): {"id", "url", "title", "text"}; the text already starts with the title.
"""
from __future__ import annotations

import re
from typing import Iterator, Optional

from .document import (
    EMPTY_FILE,
    MALFORMED,
    UNREADABLE_FILE,
    Document,
    DocumentBuilder,
    ReaderConfig,
)
from .reader_jsonl import parse_json_document
from .textio import UnreadableFile, iter_lines

_DOC_OPEN = re.compile(r"^\s*<doc(\s[^>]*)?>\s*$")
_DOC_CLOSE = re.compile(r"^\s*</doc>\s*$")
_ID_ATTR = re.compile(r'\sid="([^"]*)"')


def read_wikipedia(path: str, name: str, cfg: ReaderConfig) -> Iterator[Document]:
    mode: Optional[str] = None
    builder: Optional[DocumentBuilder] = None
    produced = False
    stray_reported = False
    try:
        # Lines are read with the JSON limit (the larger one); DocumentBuilder still enforces
        # --max-doc-chars on <doc> blocks.
        for line in iter_lines(path, cfg.max_json_line_bytes):
            if mode is None:
                if line.text is not None and not line.text.strip():
                    continue
                mode = "json" if (line.text or "").lstrip().startswith("{") else "xml"
            if mode == "json":
                if line.text is not None and not line.text.strip():
                    continue
                produced = True
                yield parse_json_document(line, f"{name}:{line.lineno}", cfg, "text")
                continue
            text = line.text
            if text is not None and _DOC_OPEN.match(text):
                if builder is not None:
                    produced = True
                    yield Document(builder.name, problem=MALFORMED, detail="<doc> without </doc>")
                m = _ID_ATTR.search(text)
                label = f"{name}:{line.lineno}" + (f" (id {m.group(1)})" if m else "")
                builder = DocumentBuilder(label, cfg.max_doc_chars)
                continue
            if text is not None and _DOC_CLOSE.match(text):
                if builder is None:
                    produced = True
                    yield Document(f"{name}:{line.lineno}", problem=MALFORMED, detail="</doc> without <doc>")
                else:
                    produced = True
                    yield builder.build()
                    builder = None
                continue
            if builder is not None:
                builder.add(line)
            elif (text is None or text.strip()) and not stray_reported:
                # Text outside any <doc> block: report once per file, not once per line.
                stray_reported = True
                produced = True
                yield Document(f"{name}:{line.lineno}", problem=MALFORMED, detail="text outside <doc> blocks")
    except UnreadableFile as e:
        yield Document(name, problem=UNREADABLE_FILE, detail=str(e))
        return
    if builder is not None:
        produced = True
        yield Document(builder.name, problem=MALFORMED, detail="<doc> without </doc> at end of file")
    if not produced:
        yield Document(name, problem=EMPTY_FILE)
