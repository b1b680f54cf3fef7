"""Document -> fairseq items (lines), with no line longer than --max-line-tokens.

fairseq's ``TokenBlockDataset`` in ``complete_doc`` mode never splits an item: an item longer
than the block becomes a block longer than --tokens-per-sample, which then fails in the position
embeddings (fairseq issue #5167). Long-document corpora have such paragraphs (a King James
chapter is one line of up to ~3,000 tokens), so every line longer than the limit is cut here,
preferably after a sentence end, else before a word start, else exactly at the limit.
"""
from __future__ import annotations

from typing import List, Tuple

import numpy as np

from .tokenizer import EOS, UNK


def document_lines(text: str) -> List[str]:
    """Non-blank lines, stripped (as fairseq's RoBERTa preprocessing encodes them)."""
    return [s for s in (line.strip() for line in text.split("\n")) if s]


def cut_points(ids: np.ndarray, max_len: int, word_start: np.ndarray, sentence_end: np.ndarray) -> List[int]:
    """Positions where ``ids`` (longer than ``max_len``) is cut so that no piece exceeds it.

    Each cut ``c`` is chosen within (start + max_len/2, start + max_len]: the last position after
    a sentence end followed by a word start; failing that (only in the last quarter) the last
    word start; failing that ``start + max_len``.
    """
    n = len(ids)
    starts = word_start[ids]
    ends = sentence_end[ids]
    # good_sentence[c] : a cut before position c closes a sentence and opens a word.
    good_sentence = np.zeros(n + 1, dtype=bool)
    good_sentence[1:n] = ends[:-1] & starts[1:]
    good_word = np.zeros(n + 1, dtype=bool)
    good_word[1:n] = starts[1:]
    cuts = []
    start = 0
    while n - start > max_len:
        hi = start + max_len
        cut = hi
        lo_sentence = start + max(1, max_len // 2)
        window = good_sentence[lo_sentence + 1 : hi + 1]
        hits = np.flatnonzero(window)
        if len(hits):
            cut = lo_sentence + 1 + int(hits[-1])
        else:
            lo_word = start + max(1, (3 * max_len) // 4)
            hits = np.flatnonzero(good_word[lo_word + 1 : hi + 1])
            if len(hits):
                cut = lo_word + 1 + int(hits[-1])
        cuts.append(cut)
        start = cut
    return cuts


def encode_document(tokenizer, text: str, max_line_tokens: int) -> Tuple[np.ndarray, np.ndarray, int, int, int]:
    """Tokenize one document into fairseq items.

    Returns (flat, sizes, n_tokens, n_unk, n_split_lines): ``flat`` is every item's tokens
    followed by </s>, concatenated (int32); ``sizes`` the item lengths including their </s>;
    ``n_tokens`` the number of text tokens (no </s>). The document separator (an empty item)
    is added by the caller.
    """
    lines = document_lines(text)
    pieces: List[np.ndarray] = []
    n_split = 0
    for ids in tokenizer.encode_lines(lines):
        if len(ids) == 0:
            continue
        if len(ids) <= max_line_tokens:
            pieces.append(ids)
            continue
        n_split += 1
        prev = 0
        for cut in cut_points(ids, max_line_tokens, tokenizer.word_start, tokenizer.sentence_end):
            pieces.append(ids[prev:cut])
            prev = cut
        pieces.append(ids[prev:])
    sizes = np.fromiter((len(p) + 1 for p in pieces), dtype=np.int32, count=len(pieces))
    flat = np.empty(int(sizes.sum()), dtype=np.int32)
    pos = 0
    n_unk = 0
    for p in pieces:
        flat[pos : pos + len(p)] = p
        pos += len(p)
        flat[pos] = EOS
        pos += 1
        n_unk += int(np.count_nonzero(p == UNK))
    n_tokens = int(len(flat) - len(sizes))
    return flat, sizes, n_tokens, n_unk, n_split
