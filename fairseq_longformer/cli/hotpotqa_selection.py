"""HotpotQA's paragraph selection (the paper's first stage, its appendix): a trained HotpotQA model
scores every paragraph of a question (the ``<t>`` logit, "raw score"); the paragraphs scoring above
a threshold (-3.0), at most five, stay in the context in their original order; a second model is
trained and evaluated on the shortened contexts.

``keep_paragraphs`` is that rule, plus one choice the paper does not state: a question none of
whose paragraphs passes keeps its best one, so that every question stays a record the reader takes
(an empty context is a malformed record). ``shorten`` writes a record's selected form in the
published format: the kept context, the supporting facts inside it, and the facts whose paragraph
was removed under ``supporting_facts_removed`` (no training target, but part of the gold that
evaluation scores: a question whose gold paragraphs were not all kept stays, as it is now).
``score_split`` runs the model over a prepared split; ``SelectionReport`` counts what was kept,
the recall of the gold supporting paragraphs and the official scores of the model's predictions.
"""
import time
from collections import Counter
from typing import Dict, Iterator, List, Sequence, Tuple

import torch

from longformer_preprocessing.evaluation.hotpotqa import example_scores

from ..criterions.hotpotqa_decoding import decode, marker_scores, span_log_probs
from ..models.heads import EVIDENCE_DECODINGS

METRICS = ("em", "f1", "sp_em", "sp_f1", "joint_em", "joint_f1")


def keep_paragraphs(scores: Sequence[float], threshold: float, max_paragraphs: int) -> List[int]:
    """scores (P,) raw paragraph logits -> indices of the kept paragraphs, in their order: those
    above ``threshold``, the ``max_paragraphs`` best of them; the best one when none passes."""
    if not len(scores):
        return []
    ranked = sorted(range(len(scores)), key=lambda p: -scores[p])  # stable: ties in input order
    kept = [p for p in ranked if scores[p] > threshold][:max_paragraphs] or ranked[:1]
    return sorted(kept)


def gold_titles(record: dict) -> set:
    """The titles of a published record's gold supporting paragraphs (also those removed before)."""
    facts = record["supporting_facts"] + record.get("supporting_facts_removed", [])
    return {title for title, _ in facts}


def shorten(record: dict, kept: Sequence[int]) -> dict:
    """A published HotpotQA record with only the paragraphs ``kept`` (indices into its context)."""
    context = [record["context"][p] for p in kept]
    titles = {title for title, _ in context}
    facts = record["supporting_facts"]
    return {**record, "context": context, "supporting_facts": [f for f in facts if f[0] in titles],
            "supporting_facts_removed": record.get("supporting_facts_removed", [])
            + [f for f in facts if f[0] not in titles]}


def batches(dataset, batch_size: int) -> Iterator[List[int]]:
    """Indices of ``dataset`` by size, ``batch_size`` at a time (little padding per batch)."""
    order = sorted(range(len(dataset)), key=lambda i: int(dataset.sizes[i]))
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


def _to(value, device):
    return {k: _to(v, device) for k, v in value.items()} if isinstance(value, dict) else \
        value.to(device) if torch.is_tensor(value) else value


@torch.no_grad()
def score_split(model, dataset, head: str, max_answer: int, batch_size: int, device,
                answer_decoding: str = "anywhere") -> Iterator[Tuple[dict, dict]]:
    """Per example of a prepared split: (its side record, {"paragraphs": raw <t> logits of its
    input's paragraphs, and per evidence decoding its (answer, facts) prediction}); the answer
    decoded as ``answer_decoding`` says (the task's --answer-decoding)."""
    for indices in batches(dataset, batch_size):
        sample = dataset.collater([dataset[i] for i in indices])
        out, _ = model(**_to(sample["net_input"], device), span_head_name=head)
        out = {k: v.float().cpu() for k, v in out.items()}
        start_lp, end_lp = span_log_probs(out["span"], sample["context_token"])
        paragraphs = marker_scores(out["paragraph"], sample["paragraph_positions"], sample["paragraph_valid"])
        decoded = {name: decode(sample, out, start_lp, end_lp, max_answer, name, answer_decoding)
                   for name in EVIDENCE_DECODINGS}
        for row, record in enumerate(sample["records"]):
            yield record, {"paragraphs": paragraphs[row], **{name: decoded[name][row] for name in decoded}}


class SelectionReport:
    """What one split's selection kept, and how the model's predictions score."""

    def __init__(self, questions: int):
        self.questions, self.scored, self.started = questions, 0, time.time()
        self.kept, self.gold, self.gold_kept, self.all_gold_kept = Counter(), 0, 0, 0
        self.sums = {name: dict.fromkeys(METRICS, 0.0) for name in EVIDENCE_DECODINGS}
        self.dropped_next = Counter()  # reasons the reader will drop a shortened record for

    def add(self, record: dict, kept: Sequence[int], predictions: Dict[str, tuple], side: dict) -> None:
        """``record`` the published one, ``kept`` its kept paragraphs, ``side`` its prepared record."""
        self.scored += 1
        self.kept[len(kept)] += 1
        gold = gold_titles(record)
        kept_titles = {record["context"][p][0] for p in kept}
        self.gold += len(gold)
        self.gold_kept += len(gold & kept_titles)
        self.all_gold_kept += gold <= kept_titles
        for name, (answer, facts) in predictions.items():
            scores = example_scores(answer, side["answer"], facts, side["supporting"])
            for kind, s in zip(("", "sp_", "joint_"), scores):
                self.sums[name][f"{kind}em"] += s.em
                self.sums[name][f"{kind}f1"] += s.f1

    def summary(self, threshold: float, max_paragraphs: int, device: str) -> dict:
        scored = max(self.scored, 1)
        kept = sum(n * c for n, c in self.kept.items())
        return {
            "questions": self.questions, "scored": self.scored, "passed_unchanged": self.questions - self.scored,
            "threshold": threshold, "max_paragraphs": max_paragraphs,
            "paragraphs_kept": {"mean": round(kept / scored, 3), "histogram": dict(sorted(self.kept.items()))},
            "gold_paragraph_recall": round(100 * self.gold_kept / max(self.gold, 1), 2),
            "questions_with_all_gold_kept": round(100 * self.all_gold_kept / scored, 2),
            "dropped_by_the_reader_next": dict(self.dropped_next.most_common()),
            # official scores in percent over every question of the file (one the reader dropped, so
            # the model never saw, scores 0: over the scored ones alone, stage two, which loses the
            # questions whose answer selection cut away, would read high), and over the scored ones
            "scores": {name: {m: round(100 * v / max(self.questions, 1), 2) for m, v in sums.items()}
                       for name, sums in self.sums.items()},
            "scores_over_scored": {name: {m: round(100 * v / scored, 2) for m, v in sums.items()}
                                   for name, sums in self.sums.items()},
            "seconds": round(time.time() - self.started, 2), "device": device,
        }

