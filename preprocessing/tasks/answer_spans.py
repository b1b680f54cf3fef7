"""Every occurrence of every answer in a context, as spans of the context's whitespace words, in
time linear in the context (plus the occurrences).

Two matchers, one per annotation style:
- ``text_occurrences`` (SQuAD-style JSON lines): the answer's exact text wherever it occurs with
  no letter or digit glued to either side ("Abel" in "Abel," counts, "cat" in "concatenate" does
  not), plus the annotated offset, which may cut a word. ``str.find`` steps through the context
  once per answer and each hit is mapped to its words by binary search: O(n + k log n).
- ``alias_occurrences`` (TriviaQA): the context's words normalized as TriviaQA's evaluation
  normalizes answers (lower case, punctuation to spaces, articles dropped), then every alias's
  normalized words looked up through an index of the context's normalized words: O(n + k·m) for
  k occurrences of m-word aliases. Matching in the normalized space finds "U.S." for the alias
  "u s" and "The Beatles" for "beatles", which a raw text search misses.
The earlier search scanned all words for each occurrence inside a word: quadratic (0.9 s for one
answer in a 4k-word context, minutes for a 100k-word TriviaQA page).
"""
from __future__ import annotations

import bisect
import re
from collections import defaultdict
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..evaluation.answers import triviaqa_normalize

_WORD = re.compile(r"\S+")

Span = Tuple[int, int]


def words_of(text: str) -> List[Span]:
    """Character spans (start, end) of the whitespace-separated words of ``text``."""
    return [m.span() for m in _WORD.finditer(text)]


def word_of_char(word_starts: Sequence[int], char: int) -> int:
    """Index of the word that holds (or, between words, precedes) character ``char``."""
    return max(bisect.bisect_right(word_starts, char) - 1, 0)


def _glued(text: str, index: int) -> bool:
    return 0 <= index < len(text) and text[index].isalnum()


def text_occurrences(context: str, spans: Sequence[Span], answers: Iterable[Tuple[str, Optional[int]]]) -> List[Span]:
    """Word spans (first, last; inclusive) of every free-standing occurrence of each answer text,
    and of each given offset (``None``: no offset)."""
    starts = [s for s, _ in spans]
    found = set()
    for text, given in answers:
        offsets = set() if given is None else {given}
        position = context.find(text)
        while position >= 0:
            free_left = not text[0].isalnum() or not _glued(context, position - 1)
            free_right = not text[-1].isalnum() or not _glued(context, position + len(text))
            if free_left and free_right:
                offsets.add(position)
            position = context.find(text, position + 1)
        for offset in offsets:
            found.add((word_of_char(starts, offset), word_of_char(starts, offset + len(text) - 1)))
    return sorted(found)


def alias_occurrences(spans_text: Sequence[str], aliases: Iterable[str]) -> List[Span]:
    """Word spans of every occurrence of every alias in the words ``spans_text`` (the context's
    whitespace words), both sides normalized by ``triviaqa_normalize``."""
    stream: List[str] = []  # normalized tokens of the context
    owner: List[int] = []  # the context word each normalized token comes from
    normalized: Dict[str, List[str]] = {}  # a page repeats its words: normalize each once
    for index, word in enumerate(spans_text):
        tokens = normalized.get(word)
        if tokens is None:
            tokens = normalized[word] = triviaqa_normalize(word).split()
        for token in tokens:
            stream.append(token)
            owner.append(index)
    where: Dict[str, List[int]] = defaultdict(list)
    for position, token in enumerate(stream):
        where[token].append(position)
    found = set()
    for alias in aliases:
        tokens = triviaqa_normalize(alias).split()
        if not tokens:
            continue
        m = len(tokens)
        for position in where.get(tokens[0], ()):
            if stream[position:position + m] == tokens:
                found.add((owner[position], owner[position + m - 1]))
    return sorted(found)
