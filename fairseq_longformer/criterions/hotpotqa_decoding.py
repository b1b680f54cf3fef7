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

Answer span (``--answer-decoding``): ``anywhere`` in the input's sentences (the default), or
``evidence``: only inside the paragraphs the evidence decoding chose, so that the answer agrees with
the predicted supporting facts (a HotpotQA answer always lies in its supporting paragraphs). A reader
whose paragraph head has found the bridge but whose span head only knows where a town of the right
kind stands then answers from the right paragraph (docs/finetuning.md, the HotpotQA learning check).
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


def sentence_owners(record: dict) -> List[int]:
    """Each sentence's paragraph index, in input order."""
    return [p for p, (_, count) in enumerate(record["paragraphs"]) for _ in range(count)]


def evidence_tokens(sample: dict, chosen: List[List[int]], n: int) -> torch.Tensor:
    """chosen[row]: the row's evidence sentences -> (B, N) True on the tokens of every sentence of
    their paragraphs (an ``[s]`` follows its sentence: sentence k's tokens lie after the ``[s]`` before
    it, up to its own; the span's log-probabilities are already -inf on titles and markers)."""
    allowed = torch.zeros(len(chosen), n, dtype=torch.bool)
    positions, valid = sample["sentence_positions"].tolist(), sample["sentence_valid"].tolist()
    for row, (record, picked) in enumerate(zip(sample["records"], chosen)):
        owner = sentence_owners(record)
        ends = [position for position, ok in zip(positions[row], valid[row]) if ok]
        paragraphs = {owner[k] for k in picked}
        for k, end in enumerate(ends):
            if owner[k] in paragraphs:
                allowed[row, ends[k - 1] + 1 if k else 0:end] = True
    return allowed


def decode(sample: dict, out: dict, start_lp: torch.Tensor, end_lp: torch.Tensor, max_answer: int,
           evidence: str, answer_decoding: str = "anywhere") -> List[Tuple[str, List[Tuple[str, int]]]]:
    """Per row of the batch: (answer text, supporting facts as (title, sentence index))."""
    rows, n = start_lp.shape
    paragraphs = marker_scores(out["paragraph"], sample["paragraph_positions"], sample["paragraph_valid"])
    sentences = marker_scores(out["sentence"], sample["sentence_positions"], sample["sentence_valid"])
    chosen = [two_paragraph_evidence(paragraphs[row], sentences[row], sentence_owners(record))
              if evidence == "two_paragraphs" else threshold_evidence(sentences[row])
              for row, record in enumerate(sample["records"])]
    if answer_decoding == "evidence":
        allowed = evidence_tokens(sample, chosen, n) & start_lp.isfinite()
        allowed |= ~allowed.any(dim=1, keepdim=True)  # no evidence among the sentences: anywhere
        start_lp, end_lp = start_lp.masked_fill(~allowed, -math.inf), end_lp.masked_fill(~allowed, -math.inf)
    zeros = torch.zeros(rows, dtype=torch.long)
    _, first, last = best_window_spans(start_lp, end_lp, zeros, torch.full((rows,), n), max_answer)
    kinds = out["type"].argmax(-1).tolist()
    predictions = []
    for row, record in enumerate(sample["records"]):
        answer = ANSWERS.get(kinds[row])
        if answer is None:
            s, e = int(sample["context_token"][row, first[row]]), int(sample["context_token"][row, last[row]])
            chars = record["token_chars"]
            answer = record["text"][chars[s][0]:chars[e][1]] if 0 <= s <= e else ""
        facts = [(title, k) for title, count in record["paragraphs"] for k in range(count)]
        predictions.append((answer, [facts[k] for k in chosen[row]]))
    return predictions
