"""Criterion ``longformer_qa``: start/end span loss over every answer occurrence, and exact
match / F1 of the predicted answer text (SQuAD's normalisation), combined across windows.

Loss of a window: -log sum_{gold starts} p(start) - log sum_{gold ends} p(end), the softmax over
the window's non-padding positions; "every gold start" sums the probability of all occurrences
of an answer (the paper's TriviaQA loss). A window without an answer has ``<s>`` as gold.
Prediction (in evaluation): per window the span (s <= e < s + --max-answer-tokens, both in the
window's context) with the largest log p(start) + log p(end); per example the best over its
windows; ``em`` and ``f1`` in percent of examples, max over the gold answers, both texts
normalized as the record says: SQuAD v1.1's evaluation (punctuation removed) or TriviaQA's
(``triviaqa_evaluation.py``: underscores and punctuation to spaces), the gold answers of a
TriviaQA record being its normalized aliases (``longformer_preprocessing.evaluation.answers``).
"""
import math

import torch
import torch.nn.functional as F
from fairseq.criterions import FairseqCriterion, register_criterion

from longformer_preprocessing.evaluation.answers import NORMALIZERS, exact_match, f1_score

from .metric_logging import log_loss, log_percents


def best_window_spans(start_lp, end_lp, prefix, length, max_answer: int):
    """Per window (W rows of log-probabilities over N positions), the best span inside the context
    part [prefix, prefix + length): returns score (W,), start (W,), end (W,) positions."""
    rows, n = start_lp.shape
    positions = torch.arange(n, device=start_lp.device)
    inside = (positions >= prefix[:, None]) & (positions < (prefix + length)[:, None])
    start = start_lp.masked_fill(~inside, -math.inf)
    end = F.pad(end_lp.masked_fill(~inside, -math.inf), (0, max_answer - 1), value=-math.inf)
    scores = start[:, :, None] + end.unfold(1, max_answer, 1)  # (W, N, A): span (i, i + a)
    best, flat = scores.flatten(1).max(dim=1)
    first = flat // max_answer
    return best, first, first + flat % max_answer


@register_criterion("longformer_qa")
class LongformerQACriterion(FairseqCriterion):
    def __init__(self, task):
        super().__init__(task)
        self.head_name = task.cfg.span_head_name
        self.max_answer = task.cfg.max_answer_tokens

    def forward(self, model, sample, reduce=True):
        logits, _ = model(**sample["net_input"], span_head_name=self.head_name)
        padding = sample["net_input"]["src_tokens"].eq(self.padding_idx)
        start_lp = torch.log_softmax(logits[..., 0].float().masked_fill(padding, -math.inf), dim=-1)
        end_lp = torch.log_softmax(logits[..., 1].float().masked_fill(padding, -math.inf), dim=-1)
        loss = -(start_lp.masked_fill(~sample["start_gold"], -math.inf).logsumexp(-1)
                 + end_lp.masked_fill(~sample["end_gold"], -math.inf).logsumexp(-1)).sum()
        windows = start_lp.shape[0]
        logging_output = {"loss": loss.data, "ntokens": sample["ntokens"], "nsentences": sample["nsentences"],
                          "sample_size": windows}
        if not model.training:
            em, f1 = self.score(sample, start_lp.detach(), end_lp.detach())
            logging_output.update({"_em": em, "_f1": f1, "_nexamples": sample["nsentences"]})
        return loss, windows, logging_output

    def score(self, sample, start_lp, end_lp):
        """Summed exact match and F1 of the batch's examples (windows combined)."""
        prefix, offset = sample["window_prefix"], sample["window_offset"]
        best, first, last = best_window_spans(start_lp, end_lp, prefix, sample["window_length"], self.max_answer)
        chosen = {}
        for row, example in enumerate(sample["window_example"].tolist()):
            if example not in chosen or best[row] > best[chosen[example]]:
                chosen[example] = row
        em = f1 = 0.0
        for example, record in enumerate(sample["records"]):
            row = chosen[example]
            if "window_records" in sample:  # the chosen window's page (an item may hold several)
                record = {**sample["window_records"][row], "answers": record["answers"]}
            s = int(first[row] - prefix[row] + offset[row])
            e = int(last[row] - prefix[row] + offset[row])
            chars = record["token_chars"]
            predicted = record["context"][chars[s][0]:chars[e][1]]
            normalize = NORMALIZERS[record.get("normalization", "squad")]
            em += max(exact_match(predicted, gold, normalize) for gold in record["answers"])
            f1 += max(f1_score(predicted, gold, normalize) for gold in record["answers"])
        return em, f1

    @staticmethod
    def reduce_metrics(logging_outputs) -> None:
        total = log_loss(logging_outputs)
        if total is not None and total("_nexamples") > 0:  # evaluation only
            log_percents({"em": "_em", "f1": "_f1"}, "_nexamples", total)

    @staticmethod
    def logging_outputs_can_be_summed() -> bool:
        return True
