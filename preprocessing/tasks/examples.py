"""The five shapes of fine-tuning example every reader yields, and the bad-record signal.

A reader is a generator over one split that yields examples or ``BadExample`` instances (a bad
record is data: counted under its reason, reported one line per reason, never fatal unless the
split ends up empty).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple


class BadExample(ValueError):
    """A record that cannot be used; ``reason`` is the counter it is reported under."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class Classification:
    text: str
    label: str


@dataclass
class QA:
    """A question over one context. ``spans``: every answer occurrence as inclusive spans of the
    context's whitespace words (``answer_spans.words_of``); ``gold``: the answer texts the metric
    compares against; ``normalization``: whose answer normalization the metric uses (``squad`` or
    ``triviaqa``); ``max_context_tokens``: training truncation (None: keep the whole context);
    ``require_answer``: drop the example when no span survives (training)."""

    question: str
    context: str
    spans: List[Tuple[int, int]]
    gold: List[str]
    normalization: str = "squad"
    max_context_tokens: Optional[int] = None
    require_answer: bool = True
    key: dict = field(default_factory=dict)  # identifiers written beside the example (question id, page)


@dataclass
class Summary:
    """A document and its summary (the LED's source and target)."""

    source: str
    target: str


@dataclass
class MultipleChoice:
    """A question, its answer candidates (``answer`` indexes the right one) and the supporting
    documents to read (WikiHop)."""

    question: str
    candidates: List[str]
    supports: List[str]
    answer: int
    key: dict = field(default_factory=dict)


@dataclass
class MultiHop:
    """A question over titled paragraphs of sentences, with an answer and the supporting sentences
    (HotpotQA, distractor setting). ``answer_type``: 0 a span of the context, 1 "yes", 2 "no";
    ``spans``: every occurrence of a span answer as (paragraph, sentence, first word, last word),
    the words being the sentence's whitespace words (``answer_spans.words_of``), inclusive;
    ``supporting``: the supporting facts as (paragraph, sentence) indices of ``paragraphs``;
    ``removed_supporting``: gold (title, sentence index) facts whose paragraph a paragraph-selection
    stage removed from the context (no target, but scored as missed by the evaluation)."""

    question: str
    paragraphs: List[Tuple[str, List[str]]]  # (title, sentences)
    answer: str
    answer_type: int
    spans: List[Tuple[int, int, int, int]]
    supporting: List[Tuple[int, int]]
    key: dict = field(default_factory=dict)
    removed_supporting: List[Tuple[str, int]] = field(default_factory=list)


def check_label(label: str) -> str:
    """A label is one dictionary word: whitespace inside it would corrupt ``label/dict.txt``."""
    if any(ch.isspace() for ch in label):
        raise BadExample("label with whitespace")
    return label

