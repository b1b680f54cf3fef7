"""Criterion ``longformer_mlm``: masked-LM cross-entropy, logged in bits per masked token (the
paper's "MLM BPC", as ``loss`` and ``bpc``) with masked-token accuracy (``acc``, percent)."""
import math

import torch
from fairseq import modules, utils
from fairseq.criterions import FairseqCriterion, register_criterion
from fairseq.logging import metrics


@register_criterion("longformer_mlm")
class LongformerMLMLoss(FairseqCriterion):
    def forward(self, model, sample, reduce=True):
        masked_tokens = sample["target"].ne(self.padding_idx)  # (B, N)
        sample_size = int(masked_tokens.sum())
        if sample_size == 0:  # rare: nothing masked in the batch; score every position
            masked_tokens = None
        logits = model(**sample["net_input"], masked_tokens=masked_tokens)[0]
        targets = model.get_targets(sample, [logits])
        if masked_tokens is not None:
            targets = targets[masked_tokens]
        loss = modules.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                     reduction="sum", ignore_index=self.padding_idx)
        with torch.no_grad():
            scored = targets.view(-1).ne(self.padding_idx)
            correct = (logits.view(-1, logits.size(-1)).argmax(-1).eq(targets.view(-1)) & scored).sum()
        logging_output = {
            "loss": loss.data,
            "correct": correct,
            "ntokens": sample["ntokens"],
            "nsentences": sample["nsentences"],
            "sample_size": sample_size,
        }
        return loss, sample_size, logging_output

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        loss_sum = sum(log.get("loss", 0) for log in logging_outputs)
        sample_size = sum(log.get("sample_size", 0) for log in logging_outputs)
        correct = sum(log.get("correct", 0) for log in logging_outputs)
        if sample_size == 0:
            return
        # fairseq's convention: "loss" in bits (base 2), which is the paper's BPC
        metrics.log_scalar("loss", loss_sum / sample_size / math.log(2), sample_size, round=3)
        metrics.log_derived("bpc", lambda meters: round(float(meters["loss"].avg), 3))
        metrics.log_scalar_sum("_correct", correct)
        metrics.log_scalar_sum("_masked", sample_size)
        metrics.log_derived(
            "acc", lambda meters: round(100.0 * float(meters["_correct"].sum) / max(float(meters["_masked"].sum), 1.0), 2)
        )
        metrics.log_derived("ppl", lambda meters: utils.get_perplexity(meters["loss"].avg))

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
