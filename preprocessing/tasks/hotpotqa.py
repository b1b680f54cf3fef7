"""HotpotQA as published (Yang et al. 2018, ``hotpot_train_v1.1.json`` and
``hotpot_dev_distractor_v1.json``): one JSON list of records ``{"_id", "question", "answer",
"type", "level"?, "supporting_facts", "context"}``; ``type`` is the question's kind ("bridge" or
"comparison"), ``context`` the distractor setting's paragraphs as ``[title, [sentence, ...]]``
pairs (ten, two of them gold), ``supporting_facts`` ``[title, sentence index]`` pairs.

Examples: the question, the paragraphs, the answer's kind for the model's question-type head
("yes" and "no", compared case-insensitively, are their own kinds; any other answer is a span of
the context), every occurrence of a span answer inside one sentence (``answer_spans``: free-standing
exact text), and the supporting facts as (paragraph, sentence) indices. Bad records, each counted
under its reason: not a record with those fields, no answer, empty context, a supporting fact
naming a title the context lacks, a supporting fact's sentence index out of its paragraph's range,
a span answer found nowhere in the context.

A file written by ``longformer-select-paragraphs`` (stage two's input) is the same format with an
optional field per record, ``supporting_facts_removed``: the gold facts whose paragraphs the
selection removed; they are no training target but stay in the gold that evaluation scores.
"""
from __future__ import annotations

from typing import Iterator, List, Tuple, Union

from .answer_spans import text_occurrences, words_of
from .jsonl import read_json_list
from .examples import BadExample, MultiHop

FIELDS = ("_id", "question", "answer", "supporting_facts", "context")
ANSWER_TYPES = {"yes": 1, "no": 2}  # anything else: 0, a span of the context


def _paragraphs(context) -> List[Tuple[str, List[str]]]:
    if not isinstance(context, list):
        raise BadExample("not a HotpotQA record (_id, question, answer, supporting_facts, context)")
    paragraphs = []
    for entry in context:
        if (not isinstance(entry, (list, tuple)) or len(entry) != 2 or not isinstance(entry[0], str)
                or not isinstance(entry[1], list) or not all(isinstance(s, str) for s in entry[1])):
            raise BadExample("not a HotpotQA record (_id, question, answer, supporting_facts, context)")
        paragraphs.append((entry[0], list(entry[1])))
    if not any(sentence.strip() for _, sentences in paragraphs for sentence in sentences):
        raise BadExample("empty context")
    return paragraphs


def _supporting(facts, paragraphs) -> List[Tuple[int, int]]:
    where = {}
    for index, (title, _) in enumerate(paragraphs):
        where.setdefault(title, index)  # a title given twice: the first paragraph holds the facts
    found = []
    for fact in facts if isinstance(facts, list) else [None]:
        if not isinstance(fact, (list, tuple)) or len(fact) != 2 or not isinstance(fact[1], int):
            raise BadExample("not a HotpotQA record (_id, question, answer, supporting_facts, context)")
        title, sentence = fact
        if title not in where:
            raise BadExample("supporting fact names a title missing from the context")
        if not 0 <= sentence < len(paragraphs[where[title]][1]):
            raise BadExample("supporting fact's sentence index out of range")
        found.append((where[title], sentence))
    return sorted(set(found))


def _removed(facts) -> List[Tuple[str, int]]:
    if not isinstance(facts, list) or not all(isinstance(f, (list, tuple)) and len(f) == 2 and isinstance(f[0], str)
                                              and isinstance(f[1], int) for f in facts):
        raise BadExample("not a HotpotQA record (_id, question, answer, supporting_facts, context)")
    return [(title, sentence) for title, sentence in facts]


def example_of(record) -> MultiHop:
    """One record -> its example; raises BadExample naming what is wrong."""
    if not isinstance(record, dict) or any(name not in record for name in FIELDS) \
            or not isinstance(record["question"], str):
        raise BadExample("not a HotpotQA record (_id, question, answer, supporting_facts, context)")
    answer = record["answer"]
    if not isinstance(answer, str) or not answer.strip():
        raise BadExample("no answer")
    paragraphs = _paragraphs(record["context"])
    supporting = _supporting(record["supporting_facts"], paragraphs)
    answer = answer.strip()
    answer_type = ANSWER_TYPES.get(answer.lower(), 0)
    spans = []
    if answer_type == 0:
        for p, (_, sentences) in enumerate(paragraphs):
            for s, sentence in enumerate(sentences):
                spans += [(p, s, a, b) for a, b in text_occurrences(sentence, words_of(sentence), [(answer, None)])]
        if not spans:
            raise BadExample("answer not found in the context")
    return MultiHop(question=record["question"], paragraphs=paragraphs, answer=answer, answer_type=answer_type,
                    spans=spans, supporting=supporting,
                    key={"id": str(record["_id"]), "type": str(record.get("type", ""))},
                    removed_supporting=_removed(record.get("supporting_facts_removed", [])))


def read(path: str) -> Iterator[Union[MultiHop, BadExample]]:
    yield from read_json_list(path, example_of, "HotpotQA", "hotpot_train_v1.1.json or hotpot_dev_distractor_v1.json")
