"""Criterion ``longformer_wikihop``: each candidate's logit is the candidate head's score at its
``[ent]`` token, averaged over the example's chunks (the paper's chunking); cross entropy over the
candidates, logged as ``loss`` (bits per example) and ``accuracy`` (percent of examples)."""
import torch
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion

from .metric_logging import log_loss, log_percents


def candidate_logits(token_logits: torch.Tensor, positions: torch.Tensor, chunk_example: torch.Tensor,
                     valid: torch.Tensor) -> torch.Tensor:
    """token_logits (R, N), positions (R, K), chunk_example (R,), valid (B, K) -> (B, K): the
    mean over each example's chunks of the logits at its candidates; -inf where no candidate."""
    per_chunk = token_logits.float().gather(1, positions)  # (R, K)
    sums = per_chunk.new_zeros(valid.shape).index_add(0, chunk_example, per_chunk)
    chunks = torch.bincount(chunk_example, minlength=valid.shape[0]).clamp(min=1).to(sums)
    return (sums / chunks[:, None]).masked_fill(~valid, float("-inf"))


@register_criterion("longformer_wikihop")
class LongformerWikiHopCriterion(FairseqCriterion):
    def __init__(self, task):
        super().__init__(task)
        self.head_name = task.cfg.candidate_head_name

    def forward(self, model, sample, reduce=True):
        token_logits, _ = model(**sample["net_input"], span_head_name=self.head_name)
        logits = candidate_logits(token_logits, sample["candidate_positions"], sample["chunk_example"],
                                  sample["candidate_valid"])
        targets = sample["target"]
        loss = F.cross_entropy(logits, targets, reduction="sum")
        logging_output = {"loss": loss.data, "ntokens": sample["ntokens"], "nsentences": targets.numel(),
                          "sample_size": targets.numel(), "_nexamples": targets.numel(),
                          "_ncorrect": (logits.argmax(-1) == targets).sum()}
        return loss, targets.numel(), logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = log_loss(logging_outputs)
        if total is not None:
            log_percents({"accuracy": "_ncorrect"}, "_nexamples", total)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
