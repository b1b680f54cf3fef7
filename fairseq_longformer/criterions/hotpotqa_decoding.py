"""HotpotQA's predictions from the head's outputs: the answer text and the supporting facts, for
validation (criterion ``longformer_hotpotqa``) and for ``longformer-select-paragraphs``.

Answer: "yes" / "no" when the type head says so, else the best span (s <= e < s +
``max_answer`` tokens, both on sentence tokens, largest log p(start) + log p(end)).

Evidence (``--evidence-decoding``, the choices ``models.heads.EVIDENCE_DECODINGS``):
  * ``two_paragraphs`` (the paper's, after Groeneveld et al. 2020: HotpotQA's supporting facts
    always come from exactly two paragraphs): each paragraph holding a kept sentence is scored by
    its ``<t>`` logit plus the logit of its best ``[s]``; the two best paragraphs form the pair (the
    score is a sum over the pair, so the best pair is the top two); the facts are the pair's
    sentences whose logit is above 0 (probability 1/2), at least the best one of each paragraph.
    With fewer than two paragraphs in the input, those there are.
  * ``threshold``: every sentence whose logit is above 0, from any number of paragraphs.
"""
import math
from typing import List, Sequence, Tuple

import torch

from .longformer_qa import best_window_spans

ANSWERS = {1: "yes", 2: "no"}  # question types with a fixed answer; 0 is a span
SENTENCE_THRESHOLD = 0.0  # a sentence logit above it: probability above 1/2


def two_paragraph_evidence(paragraph_scores: Sequence[float], sentence_scores: Sequence[float],
                           sentence_paragraph: Sequence[int]) -> List[int]:
    """paragraph_scores (P,), sentence_scores (S,) logits, sentence_paragraph (S,) each sentence's
    paragraph -> the chosen sentences' indices (sorted), from exactly two paragraphs when two hold
    sentences."""
    best = {}  # paragraph -> its best sentence logit
    for k, p in enumerate(sentence_paragraph):
        best[p] = max(best.get(p, -math.inf), sentence_scores[k])
    ranked = sorted(best, key=lambda p: -(paragraph_scores[p] + best[p]))  # stable: ties in input order
    chosen = []
    for p in ranked[:2]:
        mine = [k for k, q in enumerate(sentence_paragraph) if q == p]
        above = [k for k in mine if sentence_scores[k] > SENTENCE_THRESHOLD]
        chosen += above or [max(mine, key=lambda k: sentence_scores[k])]
    return sorted(chosen)


def threshold_evidence(sentence_scores: Sequence[float]) -> List[int]:
    return [k for k, score in enumerate(sentence_scores) if score > SENTENCE_THRESHOLD]


def span_log_probs(span_logits: torch.Tensor, context_token: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """span_logits (B, N, 2), context_token (B, N) -> log p(start), log p(end) (B, N) over the
    sentences' tokens (-inf elsewhere)."""
    context = context_token.ge(0)
    return tuple(torch.log_softmax(span_logits[..., i].float().masked_fill(~context, -math.inf), dim=-1)
                 for i in (0, 1))


def marker_scores(logits: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor) -> List[List[float]]:
    """logits (B, N), positions/valid (B, K) -> per row, the logits at its valid markers."""
    picked = logits.float().gather(1, positions).tolist()
    return [[x for x, ok in zip(row, keep) if ok] for row, keep in zip(picked, valid.tolist())]


def decode(sample: dict, out: dict, start_lp: torch.Tensor, end_lp: torch.Tensor, max_answer: int,
           evidence: str) -> List[Tuple[str, List[Tuple[str, int]]]]:
    """Per row of the batch: (answer text, supporting facts as (title, sentence index))."""
    rows, n = start_lp.shape
    zeros = torch.zeros(rows, dtype=torch.long)
    _, first, last = best_window_spans(start_lp, end_lp, zeros, torch.full((rows,), n), max_answer)
    kinds = out["type"].argmax(-1).tolist()
    paragraphs = marker_scores(out["paragraph"], sample["paragraph_positions"], sample["paragraph_valid"])
    sentences = marker_scores(out["sentence"], sample["sentence_positions"], sample["sentence_valid"])
    predictions = []
    for row, record in enumerate(sample["records"]):
        answer = ANSWERS.get(kinds[row])
        if answer is None:
            s, e = int(sample["context_token"][row, first[row]]), int(sample["context_token"][row, last[row]])
            chars = record["token_chars"]
            answer = record["text"][chars[s][0]:chars[e][1]] if 0 <= s <= e else ""
        facts = [(title, k) for title, count in record["paragraphs"] for k in range(count)]
        if evidence == "two_paragraphs":
            owner = [p for p, (_, count) in enumerate(record["paragraphs"]) for _ in range(count)]
            chosen = two_paragraph_evidence(paragraphs[row], sentences[row], owner)
        else:
            chosen = threshold_evidence(sentences[row])
        predictions.append((answer, [facts[k] for k in chosen]))
    return predictions
