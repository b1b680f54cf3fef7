"""What readers yield: documents, or records of bad input (never raised, never silent)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

# Kinds of bad input a reader reports (as a Document with ``problem`` set and ``text`` None).
UNREADABLE_FILE = "unreadable_file"  # cannot be opened/decompressed (corrupt .gz/.xz ...)
EMPTY_FILE = "empty_file"  # zero bytes, or nothing but whitespace
EMPTY_DOCUMENT = "empty_document"  # a document with no text (only whitespace)
TOO_LONG = "too_long_document"  # longer than --max-doc-chars: skipped
JSON_ERROR = "json_parse_error"  # a JSON line that does not parse (or is not an object)
MISSING_TEXT = "missing_text_field"  # a JSON object without a string text field
MALFORMED = "malformed_document"  # WikiExtractor <doc> block not closed, stray lines
# Not a reader problem but counted in the same table: a document containing bytes that are not
# UTF-8 (decoded with U+FFFD replacement; kept or skipped according to --invalid-utf8).
INVALID_UTF8 = "invalid_utf8_document"

BAD_INPUT_KINDS = (
    UNREADABLE_FILE,
    EMPTY_FILE,
    EMPTY_DOCUMENT,
    TOO_LONG,
    JSON_ERROR,
    MISSING_TEXT,
    MALFORMED,
    INVALID_UTF8,
)


@dataclass
class Document:
    name: str  # where it came from, for reports: "file", "file:line"
    text: Optional[str] = None
    bad_utf8: bool = False
    problem: Optional[str] = None  # one of BAD_INPUT_KINDS; then text is None
    detail: str = ""


@dataclass
class ReaderConfig:
    max_doc_chars: int = 10_000_000
    jsonl_text_field: str = "text"

    @property
    def max_line_bytes(self) -> int:
        # A line of a text document: at most 4 UTF-8 bytes per character.
        return 4 * self.max_doc_chars + 4

    @property
    def max_json_line_bytes(self) -> int:
        # A JSON line: "\uXXXX" escapes take 6 bytes per character, plus the other fields.
        return 6 * self.max_doc_chars + (1 << 16)


class DocumentBuilder:
    """Collects the lines of one document, dropping them once it exceeds ``max_doc_chars``."""

    def __init__(self, name: str, max_doc_chars: int):
        self.name = name
        self.max_doc_chars = max_doc_chars
        self.lines: List[str] = []
        self.chars = 0
        self.bad_utf8 = False
        self.too_long = False
        self.nonblank = False

    def add(self, line) -> None:
        """Add a ``textio.Line``."""
        if self.too_long:
            return
        if line.too_long:
            self._overflow()
            return
        self.bad_utf8 |= line.bad_utf8
        self.chars += len(line.text) + 1
        if self.chars - 1 > self.max_doc_chars:
            self._overflow()
            return
        if line.text.strip():
            self.nonblank = True
        self.lines.append(line.text)

    def _overflow(self) -> None:
        self.too_long = True
        self.lines = []

    def build(self, empty_problem: str = EMPTY_DOCUMENT) -> Document:
        if self.too_long:
            return Document(self.name, problem=TOO_LONG, detail=f"more than {self.max_doc_chars} characters")
        if not self.nonblank:
            return Document(self.name, problem=empty_problem)
        return Document(self.name, text="\n".join(self.lines), bad_utf8=self.bad_utf8)
