"""The JSON readers: a file holding one list of records (HotpotQA's, WikiHop's); the project's own
JSON lines, one example per line:
  classification  {"text": str, "label": str}   (a label is one word: no whitespace)
  qa              {"question": str, "context": str, "answers": [{"text": str, "start": int}]}
                  (``start``: character offset into ``context``, the SQuAD convention)
Bad lines: not UTF-8, broken JSON, missing or mistyped fields, empty text, a label with whitespace, an
answer not at its offset.
"""
from __future__ import annotations

import json
from typing import Callable, Iterator, List, Tuple, Union

from .answer_spans import text_occurrences, words_of
from .examples import QA, BadExample, Classification, check_label


def read_json_list(path: str, example_of: Callable[[dict], object], dataset: str,
                   files: str) -> Iterator[object]:
    """``example_of(record)`` of every record of ``path``, a JSON file holding ``dataset``'s list of
    records, or the BadExample it raised; a ValueError naming ``files`` (what to pass instead) when
    the file is not JSON or holds no list."""
    with open(path, encoding="utf-8") as f:
        try:
            records = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not JSON ({e}): pass {files}")
    if not isinstance(records, list):
        raise ValueError(f"{path} holds a JSON {type(records).__name__}, not {dataset}'s list of records")
    for record in records:
        try:
            yield example_of(record)
        except BadExample as bad:
            yield bad


def read_jsonl(path: str) -> Iterator[Union[dict, BadExample]]:
    """Every line's JSON object (its line number under ``"__line__"``), or a BadExample for a line
    that is not one."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                yield BadExample("not UTF-8")
                continue
            except ValueError:
                yield BadExample("broken JSON")
                continue
            yield {**obj, "__line__": number} if isinstance(obj, dict) else BadExample("broken JSON")


def text_field(obj: dict, name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise BadExample(f"missing or non-string '{name}'")
    if not value.strip():
        raise BadExample(f"empty '{name}'")
    return value


def check_classification(obj: dict) -> Classification:
    return Classification(text_field(obj, "text"), check_label(text_field(obj, "label")))


def check_qa(obj: dict) -> QA:
    question, context = text_field(obj, "question"), text_field(obj, "context")
    answers = obj.get("answers")
    if not isinstance(answers, list) or not answers:
        raise BadExample("missing or empty 'answers'")
    checked: List[Tuple[str, int]] = []
    for answer in answers:
        if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) \
                or not isinstance(answer.get("start"), int) or not answer["text"].strip():
            raise BadExample("answer without 'text' (str) and 'start' (int)")
        text, start = answer["text"], answer["start"]
        if start < 0 or context[start:start + len(text)] != text:
            raise BadExample("answer not at its offset")
        checked.append((text, start))
    spans = text_occurrences(context, words_of(context), checked)
    return QA(question, context, spans, gold=[t for t, _ in checked], key={"line": obj["__line__"]})


def read(path: str, kind: str) -> Iterator[Union[Classification, QA, BadExample]]:
    check = check_classification if kind == "classification" else check_qa
    for obj in read_jsonl(path):
        if isinstance(obj, BadExample):
            yield obj
            continue
        try:
            yield check(obj)
        except BadExample as e:
            yield e

