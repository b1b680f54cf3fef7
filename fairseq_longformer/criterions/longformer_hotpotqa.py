"""Criterion ``longformer_hotpotqa``: the four HotpotQA losses combined linearly, and in evaluation
the official answer, supporting-fact and joint EM/F1 (``longformer_preprocessing.evaluation.hotpotqa``).

Loss of an example: ``--span-loss-weight`` x (-log sum_{gold starts} p(start) - log sum_{gold ends}
p(end)), the softmax over the sentences' tokens, only when a span answer is left in the input;
``--type-loss-weight`` x cross entropy of the question type (span / yes / no); the
``--paragraph-loss-weight`` and ``--sentence-loss-weight`` x binary cross entropy summed over the
example's ``<t>`` (paragraph supports the answer) and ``[s]`` (sentence is a supporting fact)
logits. Logged: ``loss`` in bits per example.
Prediction (``hotpotqa_decoding``): the answer, and the supporting facts from exactly two
paragraphs (``--evidence-decoding two_paragraphs``, the paper's) or every sentence above
probability 1/2 (``threshold``).
Metrics in percent of the file's questions: ``em``/``f1`` (answer), ``sp_em``/``sp_f1``,
``joint_em``/``joint_f1``, the gold facts being all the record's, also those the input cut away; a
question the reader dropped scores 0 (the batches' ``questions`` count it, see
``tasks/longformer_hotpotqa.py``). Logged beside them: ``questions`` (the denominator) and
``unscored`` (those of them the reader dropped).
"""
import math

import torch
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.logging import metrics

from longformer_preprocessing.evaluation.hotpotqa import example_scores

from .hotpotqa_decoding import decode, span_log_probs
from .metric_logging import log_loss, log_percents

METRICS = {"em": "_em", "f1": "_f1", "sp_em": "_sp_em", "sp_f1": "_sp_f1", "joint_em": "_joint_em",
           "joint_f1": "_joint_f1"}


def marker_losses(logits: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor,
                  target: torch.Tensor) -> torch.Tensor:
    """logits (B, N), positions/valid/target (B, K) -> (B,) binary cross entropy summed over each
    row's valid markers."""
    picked = logits.float().gather(1, positions)
    loss = F.binary_cross_entropy_with_logits(picked, target.to(picked), reduction="none")
    return loss.masked_fill(~valid, 0.0).sum(dim=1)


@register_criterion("longformer_hotpotqa")
class LongformerHotpotQACriterion(FairseqCriterion):
    def __init__(self, task):
        super().__init__(task)
        cfg = task.cfg
        self.head_name, self.max_answer = cfg.hotpotqa_head_name, cfg.max_answer_tokens
        self.evidence, self.answer_decoding = cfg.evidence_decoding, cfg.answer_decoding
        self.weights = {"span": cfg.span_loss_weight, "type": cfg.type_loss_weight,
                        "paragraph": cfg.paragraph_loss_weight, "sentence": cfg.sentence_loss_weight}

    def forward(self, model, sample, reduce=True):
        out, _ = model(**sample["net_input"], span_head_name=self.head_name)
        start_lp, end_lp = span_log_probs(out["span"], sample["context_token"])
        # only rows with a span answer: another row's gold sum is log(0), whose gradient is NaN
        # even when the row's loss is masked out afterwards
        has_span = sample["has_span"]
        span = -(start_lp[has_span].masked_fill(~sample["start_gold"][has_span], -math.inf).logsumexp(-1)
                 + end_lp[has_span].masked_fill(~sample["end_gold"][has_span], -math.inf).logsumexp(-1))
        losses = {
            "span": span.sum(),
            "type": F.cross_entropy(out["type"].float(), sample["type_target"], reduction="sum"),
            "paragraph": marker_losses(out["paragraph"], sample["paragraph_positions"], sample["paragraph_valid"],
                                       sample["paragraph_target"]).sum(),
            "sentence": marker_losses(out["sentence"], sample["sentence_positions"], sample["sentence_valid"],
                                      sample["sentence_target"]).sum(),
        }
        loss = sum(self.weights[name] * value for name, value in losses.items())
        examples = sample["nsentences"]
        logging_output = {"loss": loss.data, "ntokens": sample["ntokens"], "nsentences": examples,
                          "sample_size": examples, **{f"{name}_loss": value.data for name, value in losses.items()}}
        if not model.training:
            logging_output.update(self.score(sample, out, start_lp.detach(), end_lp.detach()))
            logging_output.update(_nexamples=examples, _nquestions=sample["questions"])
        return loss, examples, logging_output

    def score(self, sample, out, start_lp, end_lp) -> dict:
        """Summed official scores of the batch's examples."""
        sums = dict.fromkeys(METRICS.values(), 0.0)
        predictions = decode(sample, out, start_lp, end_lp, self.max_answer, self.evidence, self.answer_decoding)
        for (prediction, predicted), record in zip(predictions, sample["records"]):
            answer, supporting, joint = example_scores(prediction, record["answer"], predicted, record["supporting"])
            for name, scores in (("", answer), ("sp_", supporting), ("joint_", joint)):
                sums[f"_{name}em"] += scores.em
                sums[f"_{name}f1"] += scores.f1
        return sums

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = log_loss(logging_outputs)
        if total is None:
            return
        examples = max(total("sample_size"), 1)
        for name in ("span", "type", "paragraph", "sentence"):  # each loss in nats per example
            metrics.log_scalar(f"{name}_loss", total(f"{name}_loss") / examples, examples, round=3)
        if total("_nexamples") > 0:  # evaluation only
            log_percents(METRICS, "_nquestions", total)
            metrics.log_scalar_sum("_nexamples", total("_nexamples"))
            metrics.log_derived("questions", lambda m: int(m["_nquestions"].sum))
            metrics.log_derived("unscored", lambda m: int(m["_nquestions"].sum - m["_nexamples"].sum))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
