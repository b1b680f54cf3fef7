"""Streaming input: compressed files, folder walking, UTF-8 decoding with error counting.

Nothing here holds more than one line (bounded by a byte limit) in memory.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import zlib
from dataclasses import dataclass
from typing import Iterator, List, Optional, Tuple

# Exceptions a truncated or corrupt compressed file raises while it is being read.
CORRUPT_FILE_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError)


def open_binary(path: str):
    """Open ``path`` for binary reading, decompressing .gz, .xz/.lzma and .bz2 on the fly."""
    lower = path.lower()
    if lower.endswith(".gz"):
        return gzip.open(path, "rb")
    if lower.endswith((".xz", ".lzma")):
        return lzma.open(path, "rb")
    if lower.endswith(".bz2"):
        return bz2.open(path, "rb")
    return open(path, "rb", buffering=1 << 20)


_SURROGATES = re.compile("[\ud800-\udfff]")


class UnreadableFile(Exception):
    """A file that could not be opened or decompressed (corrupt archive, permission...)."""


@dataclass
class Line:
    lineno: int  # 1-based
    text: Optional[str]  # None when the line was longer than the byte limit (then skipped)
    bad_utf8: bool = False  # invalid UTF-8 bytes were replaced by U+FFFD

    @property
    def too_long(self) -> bool:
        return self.text is None


def iter_lines(path: str, max_line_bytes: int) -> Iterator[Line]:
    """Yield the lines of ``path`` without their line terminator.

    A line longer than ``max_line_bytes`` is not held in memory: it is read in chunks, dropped
    and yielded as ``Line(text=None)``. Invalid UTF-8 is decoded with U+FFFD replacement and
    flagged. A UTF-8 byte order mark at the start of the file is removed. Raises
    ``UnreadableFile`` if the file cannot be opened or decompressed (possibly after some lines
    were yielded).
    """
    try:
        f = open_binary(path)
    except CORRUPT_FILE_ERRORS as e:
        raise UnreadableFile(f"{type(e).__name__}: {e}") from e
    with f:
        lineno = 0
        while True:
            try:
                raw = f.readline(max_line_bytes + 1)
            except CORRUPT_FILE_ERRORS as e:
                raise UnreadableFile(f"{type(e).__name__}: {e}") from e
            if not raw:
                return
            lineno += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                # Skip the rest of an over-long line without keeping it.
                try:
                    while True:
                        rest = f.readline(1 << 20)
                        if not rest or rest.endswith(b"\n"):
                            break
                except CORRUPT_FILE_ERRORS as e:
                    raise UnreadableFile(f"{type(e).__name__}: {e}") from e
                yield Line(lineno, None)
                continue
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                yield Line(lineno, raw.decode("utf-8"))
            except UnicodeDecodeError:
                yield Line(lineno, raw.decode("utf-8", errors="replace"), bad_utf8=True)


def sanitize_surrogates(text: str) -> Tuple[str, bool]:
    """Replace lone surrogates (which JSON escapes such as ``"\\ud800"`` can produce and which
    cannot be encoded as UTF-8) by U+FFFD. Returns (text, had_surrogates)."""
    try:
        text.encode("utf-8")
        return text, False
    except UnicodeEncodeError:
        return _SURROGATES.sub("\ufffd", text), True


# In a folder, these are a corpus' own documentation, not corpus documents (data/kjv/README.md).
_DOC_FILE = re.compile(r"^(readme|license|licence|copying|notice)([._-].*)?$|\.md$", re.IGNORECASE)


def is_documentation_file(name: str) -> bool:
    return bool(_DOC_FILE.search(name))


def list_input_files(path: str, skipped: Optional[List[str]] = None) -> List[Tuple[str, str]]:
    """Files under ``path`` as (path, display name), sorted by relative path.

    A file is returned as itself. A folder is walked recursively; names starting with '.' and
    documentation files (README*, LICENSE*, COPYING*, NOTICE*, *.md) are skipped (appended to
    ``skipped``). Sorting makes the order independent of the file system.
    """
    if os.path.isfile(path):
        return [(path, os.path.basename(path))]
    if not os.path.isdir(path):
        raise FileNotFoundError(path)
    found = []
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            if name.startswith("."):
                continue
            full = os.path.join(root, name)
            if is_documentation_file(name):
                if skipped is not None:
                    skipped.append(full)
                continue
            if os.path.isfile(full):
                found.append((full, os.path.relpath(full, path)))
    found.sort(key=lambda item: item[1])
    return found
