"""Criterion ``longformer_coref``: the coarse-to-fine head's marginal log-likelihood of the gold
antecedents (summed over a document's kept spans), logged as ``loss`` in bits per document (as
the other fine-tuning criteria) and, in validation, the
official scorer's MUC, B³ and CEAF-e (recall, precision, F1 in percent) and ``conll_f1``, their F1
average: numerators and denominators summed over the documents of the whole validation, then
divided (the scorer's micro-average).

Predicted clusters: greedy antecedent linking over the kept spans (no singletons), mapped from
subwords to words (first subword's word to last subword's word), a mention repeated in one
cluster kept once, one that crosses an earlier mention of its own cluster dropped (CoNLL brackets
cannot write it), and clusters left with one mention dropped; the metrics score exactly these,
which is what ``--write-conll`` writes.
"""
from typing import Dict, List, Sequence, Tuple

import torch
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.logging import metrics

from longformer_preprocessing.evaluation.coref import score_document

from ..models.coref_head import HEAD_NAME, predicted_clusters
from .metric_logging import log_loss

METRICS = ("muc", "bcub", "ceafe")
PARTS = ("recall_num", "recall_den", "precision_num", "precision_den")


def document_features(features: torch.Tensor, document: dict) -> torch.Tensor:
    """features (S, L, C) of every segment of the batch -> (T, C) one document's subwords."""
    return features[document["rows"], document["cols"]]


def word_clusters(clusters: Sequence[Sequence[Tuple[int, int]]], word: Sequence[int]) -> List[List[Tuple[int, int]]]:
    """Subword-span clusters -> word-span clusters that CoNLL brackets can write (see the module)."""
    out = []
    for cluster in clusters:
        kept: List[Tuple[int, int]] = []
        for s, e in cluster:
            span = (int(word[s]), int(word[e]))
            crosses = any(a < span[0] <= b < span[1] or span[0] < a <= span[1] < b for a, b in kept)
            if span not in kept and not crosses:
                kept.append(span)
        if len(kept) > 1:
            out.append(kept)
    return out


def metric_counts(key, response) -> Dict[str, float]:
    """The official scorer's numerators and denominators of one document, to be summed."""
    counts, _ = score_document(key, response)
    return {f"_{m}_{part}": float(getattr(counts[m], part)) for m in METRICS for part in PARTS}


@register_criterion("longformer_coref")
class LongformerCorefCriterion(FairseqCriterion):
    def forward(self, model, sample, reduce=True):
        features, _ = model(**sample["net_input"], features_only=True)
        head = model.span_heads[HEAD_NAME]
        loss = features.new_zeros((), dtype=torch.float32)
        logging_output = {"ntokens": sample["ntokens"], "nsentences": sample["nsentences"],
                          "sample_size": sample["nsentences"], "_ndocs": sample["nsentences"]}
        records = self.task.datasets[sample["split"]].records if not model.training else None
        for document in sample["documents"]:
            out = head(document_features(features, document), document["sentence"], document["speaker"],
                       document["segment"], document["genre"], document["gold_starts"], document["gold_ends"],
                       document["gold_clusters"])
            loss = loss + out["loss"]
            if records is not None:
                record = records[document["id"]]
                clusters = word_clusters(predicted_clusters(out["starts"], out["ends"], out["antecedents"],
                                                            out["scores"].float()), record["word"])
                gold = [[tuple(m) for m in c] for c in record["clusters"]]
                for name, value in metric_counts(gold, clusters).items():
                    logging_output[name] = logging_output.get(name, 0.0) + value
                self.task.keep_prediction(sample["split"], document["id"], clusters)
        logging_output["loss"] = loss.data
        return loss, sample["nsentences"], logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = log_loss(logging_outputs)
        keys = [f"_{m}_{p}" for m in METRICS for p in PARTS]
        if total is None or not any(k in log for log in logging_outputs for k in keys):
            return
        for key in keys:
            metrics.log_scalar_sum(key, total(key))
        for m in METRICS:
            metrics.log_derived(f"{m}_f1", lambda meters, m=m: round(100 * f1(meters, m), 2))
        metrics.log_derived("conll_f1", lambda meters: round(100 * sum(f1(meters, m) for m in METRICS) / 3, 2))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True


def f1(meters, metric: str) -> float:
    """F1 of one metric from the summed counts (0 where a denominator is 0, as the scorer prints)."""
    def ratio(num, den):
        d = meters[f"_{metric}_{den}"].sum
        return meters[f"_{metric}_{num}"].sum / d if d else 0.0

    r, p = ratio("recall_num", "recall_den"), ratio("precision_num", "precision_den")
    return 2 * r * p / (r + p) if r + p else 0.0
