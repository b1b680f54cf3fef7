"""WikiHop as published (Welbl et al. 2018, ``qangaroo_v1.1/wikihop/{train,dev}.json``): one JSON
list of records ``{"id", "query", "answer", "candidates", "supports", "annotations"?}``; the query
is a relation and its subject (``"country_of_citizenship john smith"``), the candidates and the
answer are lower-cased entity names, the supports are the documents to read.

Examples: the query as the question, the candidates, the supports, and the answer's index among
the candidates (compared case- and space-insensitively). Bad records, each counted under its
reason: not a record with those fields, no answer, answer not among the candidates, no candidates,
empty supports.
"""
from __future__ import annotations

from typing import Iterator, Union

from .jsonl import read_json_list
from .examples import BadExample, MultipleChoice

FIELDS = ("id", "query", "candidates", "supports")


def _key(text: str) -> str:
    return " ".join(text.lower().split())


def example_of(record) -> MultipleChoice:
    """One record -> its example; raises BadExample naming what is wrong."""
    if not isinstance(record, dict) or any(name not in record for name in FIELDS):
        raise BadExample("not a WikiHop record (id, query, candidates, supports)")
    answer = record.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise BadExample("no answer")
    candidates = [c for c in record["candidates"] if isinstance(c, str) and c.strip()]
    if not candidates:
        raise BadExample("no candidates")
    keys = [_key(c) for c in candidates]
    if _key(answer) not in keys:
        raise BadExample("answer not among candidates")
    supports = [s for s in record["supports"] if isinstance(s, str) and s.strip()]
    if not supports:
        raise BadExample("empty supports")
    return MultipleChoice(question=str(record["query"]), candidates=candidates, supports=supports,
                          answer=keys.index(_key(answer)), key={"id": str(record["id"])})


def read(path: str) -> Iterator[Union[MultipleChoice, BadExample]]:
    yield from read_json_list(path, example_of, "WikiHop", "qangaroo's wikihop/train.json or dev.json")
