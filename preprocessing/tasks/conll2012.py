"""CoNLL-2012 coreference files (OntoNotes 5.0 ``*_conll``) as published, read the way the
official scorer (conll/reference-coreference-scorers v8.01, ``lib/CorScorer.pm``) reads them,
and predicted clusters written back in the same layout.

Layout: ``#begin document (ID); part NNN`` ... ``#end document`` blocks, each part one document;
one row per word, columns split on whitespace, sentences separated by blank lines. Columns
(0-based): 0 document id, 1 part, 2 word number, 3 word, 4 POS, 5 parse bit, 6 lemma, 7 frameset,
8 sense, 9 speaker, 10 named entities, then predicate arguments, and last the coreference column:
``-``, or marks joined with ``|``: ``(N`` opens a mention of entity N, ``N)`` closes the entity's
most recently opened one (nested mentions of one entity close last-in-first-out), ``(N)`` is a
one-word mention. The genre is the ID's first two letters (one of ``GENRES`` in OntoNotes). Rows
with fewer columns (the scorer's own test files have 2 or 5) are read too: the word is column 3
where there are at least 5 columns, the speaker column 9 where there are at least 11, else ``-``.

The scorer's order is kept because its duplicate handling depends on it: within one row, one-word
mentions first, then openings, then closings; an entity's place is where its id is first seen,
its mentions in the order they close. Entity ids are kept as written (strings: the scorer keys
them as text, ``(07`` and ``(7`` are two entities).

Bad records, reported by reason (``BadDocument``, a ``BadExample`` with the place) and dropped:
an unbalanced bracket (a mention never closed), a mention closed that was never opened, an empty
document, a sentence whose rows disagree in column count, an unreadable coreference mark, a
document without ``#end document``, a repeated document, and rows outside any document.

API:
    iter_documents(paths, min_columns=1) -> Iterator[CorefDocument | BadDocument]   (file/folder, or a list)
    read_documents(paths, min_columns=1) -> (List[CorefDocument], List[BadDocument])
    doc_key(doc_id, part) -> "ID_P" (mandarjoshi90/coref's key: the part as an int)
    write_document(stream, document, clusters)   the document's rows, coreference column = clusters
    coref_column(n_words, clusters) -> List[str]  the coreference marks of each word
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from .examples import BadExample

Span = Tuple[int, int]  # inclusive (first word, last word) over the document's words
# OntoNotes 5.0's genres, a document id's first two letters: broadcast conversation, broadcast news,
# magazine, newswire, pivot text (the Bible), telephone conversation, web text; in
# mandarjoshi90/coref's order (experiments.conf ``genres``), which the coreference head's genre
# embedding rows follow (fairseq_longformer/models/coref_head.py imports this tuple)
GENRES = ("bc", "bn", "mz", "nw", "pt", "tc", "wb")

BEGIN = re.compile(r"^#\s*begin document (.*)$")
END = re.compile(r"^#\s*end document")
HEADER = re.compile(r"^\((.*)\);\s*part\s+(\d+)\s*$")
ID_ONLY = re.compile(r"^\((.*)\);?\s*$")
# the scorer's marks, removed in this order: "(N+M)" (a double antecedent, discarded), "(N)", "(N", "N)"
DOUBLE_ANTECEDENT = re.compile(r"\((\d+\+\d)\)")
ONE_WORD = re.compile(r"\((\d+)\)")
OPEN = re.compile(r"\((\d+)")
CLOSE = re.compile(r"(\d+)\)")

UNBALANCED = "unbalanced bracket (a mention opened and never closed)"
NEVER_OPENED = "mention closed that was never opened"
EMPTY = "empty document"
COLUMNS_DISAGREE = "sentence whose rows disagree in column count"
UNREADABLE = "unreadable coreference mark"
UNTERMINATED = "document without #end document"
REPEATED = "repeated document"
OUTSIDE = "row outside any document"


def too_few_columns(n: int) -> str:
    return f"row with fewer than {n} columns"


class BadDocument(BadExample):
    """A bad record: ``reason`` is the counter it is reported under, ``where`` the file and line."""

    def __init__(self, reason: str, where: str):
        super().__init__(reason)
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


def doc_key(doc_id: str, part: Optional[str]) -> str:
    """``bc/cctv/00/cctv_0000`` part ``000`` -> ``bc/cctv/00/cctv_0000_0``; no part: the id."""
    return doc_id if part is None else f"{doc_id}_{int(part)}"


@dataclass
class CorefDocument:
    """One part of a CoNLL-2012 document. ``sentences``/``speakers``: words and their speakers per
    sentence; ``entities``: entity id -> mentions (inclusive spans over the document's words), in
    the scorer's order; ``header``: the ``#begin document`` line as read (written back as is: the
    scorer matches documents by it)."""

    doc_id: str
    part: Optional[str]
    header: str
    sentences: List[List[str]]
    speakers: List[List[str]]
    entities: Dict[str, List[Span]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return doc_key(self.doc_id, self.part)

    @property
    def genre(self) -> str:
        return self.doc_id[:2]

    @property
    def clusters(self) -> List[List[Span]]:
        return list(self.entities.values())

    @property
    def words(self) -> List[str]:
        return [w for sentence in self.sentences for w in sentence]

    def __len__(self) -> int:
        return sum(len(s) for s in self.sentences)


def _take(pattern: re.Pattern, text: str) -> Tuple[List[str], str]:
    """Remove the first match of ``pattern`` until none is left, as the scorer's ``while (s///)``
    loops do (a removal can make a new match); the captured ids in order, and what is left."""
    found = []
    while True:
        m = pattern.search(text)
        if m is None:
            return found, text
        found.append(m.group(1))
        text = text[:m.start()] + text[m.end():]


def parse_mark(cell: str) -> Tuple[List[str], List[str], List[str]]:
    """(one-word, opening, closing) entity ids of one coreference cell; ValueError if anything but
    marks, ``|`` and ``-`` is left."""
    if cell in ("-", "_"):
        return [], [], []
    _, rest = _take(DOUBLE_ANTECEDENT, cell)
    one_word, rest = _take(ONE_WORD, rest)
    opening, rest = _take(OPEN, rest)
    closing, rest = _take(CLOSE, rest)
    if rest.strip("|-"):
        raise ValueError(cell)
    return one_word, opening, closing


class _Builder:
    """The document being read: rows in, a CorefDocument or the first problem out."""

    def __init__(self, header: str, min_columns: int):
        name = BEGIN.match(header).group(1)
        m = HEADER.match(name) or ID_ONLY.match(name)
        self.doc_id, self.part = (m.group(1), m.group(2) if m.re is HEADER else None) if m else (name.strip(), None)
        self.header, self.name, self.min_columns = header, name, min_columns
        self.sentences: List[List[str]] = []
        self.speakers: List[List[str]] = []
        self.widths: List[int] = []  # column count of each row of the current sentence
        self.entities: Dict[str, List[Span]] = {}
        self.open: Dict[str, List[int]] = {}
        self.n_words = 0
        self.problem: Optional[BadDocument] = None

    def fail(self, reason: str, where: str) -> None:
        if self.problem is None:
            self.problem = BadDocument(reason, f"{where} (document {self.name.strip()})")

    def row(self, columns: List[str], where: str) -> None:
        if len(columns) < self.min_columns:
            self.fail(too_few_columns(self.min_columns), where)
        if self.widths and len(columns) != self.widths[0]:
            self.fail(COLUMNS_DISAGREE, where)
        if not self.widths:
            self.sentences.append([])
            self.speakers.append([])
        self.widths.append(len(columns))
        self.sentences[-1].append(columns[3] if len(columns) >= 5 else "-")
        self.speakers[-1].append(columns[9] if len(columns) >= 11 else "-")
        try:
            one_word, opening, closing = parse_mark(columns[-1])
        except ValueError:
            self.fail(UNREADABLE, where)
            one_word, opening, closing = [], [], []
        t = self.n_words
        for entity in one_word:
            self.entities.setdefault(entity, []).append((t, t))
        for entity in opening:
            self.entities.setdefault(entity, [])
            self.open.setdefault(entity, []).append(t)
        for entity in closing:
            self.entities.setdefault(entity, [])
            starts = self.open.get(entity)
            if not starts:
                self.fail(NEVER_OPENED, where)
                continue
            self.entities[entity].append((starts.pop(), t))
        self.n_words += 1

    def end_sentence(self) -> None:
        self.widths = []

    def finish(self, where: str) -> Union[CorefDocument, BadDocument]:
        if self.n_words == 0:
            self.fail(EMPTY, where)
        if any(self.open.values()):
            self.fail(UNBALANCED, where)
        if self.problem is not None:
            return self.problem
        return CorefDocument(self.doc_id, self.part, self.header, self.sentences, self.speakers, self.entities)


def parse_lines(lines: Iterable[str], source: str = "<lines>", min_columns: int = 1
                ) -> Iterator[Union[CorefDocument, BadDocument]]:
    """The documents of one file's lines, and its bad records, in file order."""
    doc: Optional[_Builder] = None
    lineno = 0
    for lineno, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        where = f"{source}:{lineno}"
        if BEGIN.match(line):
            if doc is not None:
                doc.fail(UNTERMINATED, where)
                yield doc.finish(where)
            doc = _Builder(line, min_columns)
        elif END.match(line):
            if doc is None:
                yield BadDocument(OUTSIDE, where)
            else:
                yield doc.finish(where)
                doc = None
        elif not line.strip():
            if doc is not None:
                doc.end_sentence()
        elif doc is None:
            yield BadDocument(OUTSIDE, where)
        else:
            doc.row(line.split(), where)
    if doc is not None:
        where = f"{source}:{lineno}"
        doc.fail(UNTERMINATED, where)
        yield doc.finish(where)


def conll_files(path: str) -> List[str]:
    """``path`` itself, or the ``*_conll`` files under a folder, sorted; where a folder holds the
    published pair ``X_gold_conll`` and ``X_auto_conll`` (the same documents), the gold one."""
    if not os.path.isdir(path):
        return [path]
    found = sorted(os.path.join(root, name) for root, _, names in os.walk(path) for name in names
                   if name.endswith("_conll"))
    gold = {f[:-len("gold_conll")] for f in found if f.endswith("gold_conll")}
    return [f for f in found if not (f.endswith("auto_conll") and f[:-len("auto_conll")] in gold)]


def iter_documents(paths: Union[str, Sequence[str]], min_columns: int = 1
                   ) -> Iterator[Union[CorefDocument, BadDocument]]:
    """Every document of the files and folders given (``conll_files``), and the bad records; a
    document key seen before is a bad record (the first one is kept). ``min_columns``: rows with
    fewer columns are bad (12 for OntoNotes training data; 1 reads whatever the scorer reads).
    A file that is not UTF-8 text raises ValueError naming it."""
    seen = set()
    for path in [paths] if isinstance(paths, (str, os.PathLike)) else paths:
        for name in conll_files(os.fspath(path)):
            with open(name, encoding="utf-8") as f:
                try:
                    for item in parse_lines(f, name, min_columns):
                        if isinstance(item, CorefDocument):
                            if item.key in seen:
                                item = BadDocument(REPEATED, f"{name} (document {BEGIN.match(item.header).group(1).strip()})")
                            else:
                                seen.add(item.key)
                        yield item
                except UnicodeDecodeError as e:
                    raise ValueError(f"{name} is not UTF-8 text ({e.reason}); give the "
                                     "CoNLL-2012 file in UTF-8, as published") from None


def read_documents(paths: Union[str, Sequence[str]], min_columns: int = 1
                   ) -> Tuple[List[CorefDocument], List[BadDocument]]:
    """(documents, bad records) of ``iter_documents``."""
    documents, bad = [], []
    for item in iter_documents(paths, min_columns):
        (documents if isinstance(item, CorefDocument) else bad).append(item)
    return documents, bad


def coref_column(n_words: int, clusters: Union[Sequence[Sequence[Span]], Mapping[str, Sequence[Span]]]
                 ) -> List[str]:
    """The coreference cell of each word for ``clusters`` (a list: entity ids 0, 1, ...; a mapping:
    its ids). Within a cell closings come first (longest-opened last: last-in-first-out), then
    one-word mentions, then openings (longest first). ValueError where the marks would not read
    back as the clusters (mentions of one entity that cross, a span outside the document)."""
    items = clusters.items() if isinstance(clusters, Mapping) else enumerate(clusters)
    opens: List[List[Tuple[int, str]]] = [[] for _ in range(n_words)]
    closes: List[List[Tuple[int, str]]] = [[] for _ in range(n_words)]
    singles: List[List[str]] = [[] for _ in range(n_words)]
    expected: Dict[str, List[Span]] = {}
    for entity, mentions in items:
        entity = str(entity)
        if not entity.isdigit():
            raise ValueError(f"entity id {entity!r} is not a number")
        for start, end in mentions:
            if not 0 <= start <= end < n_words:
                raise ValueError(f"mention ({start}, {end}) of entity {entity} is outside the document's "
                                 f"{n_words} words")
            expected.setdefault(entity, []).append((start, end))
            if start == end:
                singles[start].append(entity)
            else:
                opens[start].append((end, entity))
                closes[end].append((start, entity))
    cells = []
    for t in range(n_words):
        marks = [f"{e})" for _, e in sorted(closes[t], reverse=True)]  # the latest opened closes first
        marks += [f"({e})" for e in singles[t]]
        marks += [f"({e}" for _, e in sorted(opens[t], reverse=True)]  # the longest opens first
        cells.append("|".join(marks) or "-")
    read_back = _Builder("#begin document (check)", 1)
    for cell in cells:
        read_back.row([cell], "check")
    got = {e: sorted(m) for e, m in read_back.entities.items()}
    if read_back.problem or any(read_back.open.values()) or got != {e: sorted(m) for e, m in expected.items()}:
        raise ValueError("the clusters cannot be written in CoNLL brackets (mentions of one entity that cross "
                         "each other)")
    return cells


def write_document(stream, document: CorefDocument,
                   clusters: Union[Sequence[Sequence[Span]], Mapping[str, Sequence[Span]]]) -> None:
    """Write ``document`` in the CoNLL-2012 layout (12 columns: id, part, word number, word, five
    ``-``, speaker, ``-``, coreference) with ``clusters`` as its coreference column, under its own
    ``#begin document`` line, so the official scorer pairs it with the key it was read from."""
    cells = coref_column(len(document), clusters)
    stream.write(document.header + "\n")
    t = 0
    for words, speakers in zip(document.sentences, document.speakers):
        for i, (word, speaker) in enumerate(zip(words, speakers)):
            stream.write("\t".join([document.doc_id, str(int(document.part or 0)), str(i), word,
                                    "-", "-", "-", "-", "-", speaker, "-", cells[t]]) + "\n")
            t += 1
        stream.write("\n")
    stream.write("#end document\n")
