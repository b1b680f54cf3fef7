"""Criterion ``longformer_classification``: cross-entropy of the classification head, logged as
``loss`` (bits per document), ``accuracy`` and macro ``f1`` (percent, over the task's classes)."""
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.logging import metrics

from longformer_preprocessing.evaluation.classification import macro_f1

from .metric_logging import log_loss, log_percents


@register_criterion("longformer_classification")
class LongformerClassificationCriterion(FairseqCriterion):
    def __init__(self, task):
        super().__init__(task)
        self.head_name = task.cfg.classification_head_name
        self.num_classes = task.num_classes

    def forward(self, model, sample, reduce=True):
        logits, _ = model(**sample["net_input"], features_only=True, classification_head_name=self.head_name)
        targets = sample["target"].view(-1)
        loss = F.cross_entropy(logits.float(), targets, reduction="sum")
        predicted = logits.argmax(-1)
        logging_output = {"loss": loss.data, "ntokens": sample["ntokens"], "nsentences": targets.numel(),
                          "sample_size": targets.numel(), "_ndocs": targets.numel(),
                          "_ncorrect": (predicted == targets).sum()}
        for k in range(self.num_classes):  # per-class counts for the macro-F1
            logging_output[f"_tp{k}"] = ((predicted == k) & (targets == k)).sum()
            logging_output[f"_fp{k}"] = ((predicted == k) & (targets != k)).sum()
            logging_output[f"_fn{k}"] = ((predicted != k) & (targets == k)).sum()
        return loss, targets.numel(), logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = log_loss(logging_outputs)
        if total is None:
            return
        log_percents({"accuracy": "_ncorrect"}, "_ndocs", total)
        classes = sorted({int(key[3:]) for log in logging_outputs for key in log if key.startswith("_tp")})
        for k in classes:
            for kind in ("tp", "fp", "fn"):
                metrics.log_scalar_sum(f"_{kind}{k}", total(f"_{kind}{k}"))
        if classes:
            metrics.log_derived("f1", lambda m: round(100.0 * macro_f1(
                [(m[f"_tp{k}"].sum, m[f"_fp{k}"].sum, m[f"_fn{k}"].sum) for k in classes]), 2))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True

