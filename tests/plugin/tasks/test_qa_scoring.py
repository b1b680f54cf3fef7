"""The QA criterion's pieces: the loss sums every answer occurrence, spans stay inside a window's
context, windows of one example are combined, SQuAD's EM/F1."""
import math

import torch

from fairseq_longformer.criterions.longformer_qa import LongformerQACriterion, best_window_spans
from longformer_preprocessing.evaluation.answers import exact_match, f1_score


def test_squad_normalisation():
    assert exact_match("The Abel.", "abel") == 1.0 and exact_match("Cain", "Abel") == 0.0
    assert math.isclose(f1_score("Abel his brother", "Abel"), 0.5)


def test_best_span_stays_in_the_context_and_under_the_length_limit():
    lp = torch.full((1, 10), -10.0)
    start, end = lp.clone(), lp.clone()
    start[0, 1] = end[0, 1] = 0.0  # a question position: not allowed
    start[0, 4], end[0, 8] = -1.0, -1.0  # 5 tokens long: over the limit of 3
    start[0, 5], end[0, 6] = -0.5, -3.0  # (5, 6): -3.5 beats (4, 6): -4.0
    score, first, last = best_window_spans(start, end, torch.tensor([3]), torch.tensor([5]), max_answer=3)
    assert (int(first), int(last)) == (5, 6) and float(score) == -3.5


def test_windows_of_one_example_are_combined():
    criterion = LongformerQACriterion.__new__(LongformerQACriterion)
    criterion.max_answer = 2
    context = "w0 w1 w2 w3 w4 w5"
    chars = [[3 * i, 3 * i + 2] for i in range(6)]
    # one example, two windows: prefix 2, 4 context tokens each, offsets 0 and 2
    start = torch.full((2, 7), -9.0)
    end = torch.full((2, 7), -9.0)
    start[0, 2] = end[0, 2] = -1.0  # window 0: "w0", score -2
    start[1, 4] = end[1, 5] = -0.5  # window 1: context tokens 4..5 = "w4 w5", score -1 (best)
    sample = {"window_prefix": torch.tensor([2, 2]), "window_offset": torch.tensor([0, 2]),
              "window_length": torch.tensor([4, 4]), "window_example": torch.tensor([0, 0]),
              "records": [{"context": context, "token_chars": chars, "answers": ["w4 w5", "w0"]}]}
    assert criterion.score(sample, start, end) == (1.0, 1.0)
    sample["records"][0]["answers"] = ["w0"]
    assert criterion.score(sample, start, end) == (0.0, 0.0)


def test_loss_sums_the_probability_of_every_occurrence():
    """One window, two gold starts: the loss is -log(p1 + p2) for starts (ends at <s> here)."""
    logits = torch.randn(1, 6, 2)
    criterion = LongformerQACriterion.__new__(LongformerQACriterion)
    torch.nn.Module.__init__(criterion)
    criterion.padding_idx, criterion.head_name, criterion.max_answer = 1, "qa", 3
    class Model:
        training = True

        def __call__(self, **kwargs):
            assert kwargs["span_head_name"] == "qa"
            return logits, None

    model = Model()
    start_gold = torch.zeros(1, 6, dtype=torch.bool)
    start_gold[0, [2, 4]] = True
    end_gold = torch.zeros(1, 6, dtype=torch.bool)
    end_gold[0, 0] = True
    sample = {"net_input": {"src_tokens": torch.tensor([[0, 5, 6, 7, 8, 2]])}, "start_gold": start_gold,
              "end_gold": end_gold, "ntokens": 6, "nsentences": 1}
    loss, size, _ = criterion.forward(model, sample)
    p_start, p_end = logits[0, :, 0].softmax(-1), logits[0, :, 1].softmax(-1)
    assert size == 1
    torch.testing.assert_close(loss, -(p_start[2] + p_start[4]).log() - p_end[0].log())


def test_em_and_f1_are_percent_of_examples_over_batches():
    """Two validation batches, 3 of 4 exact, F1 sum 3.5: EM 75 and F1 87.5 (the shared example
    count summed once; summed per metric, it halved both)."""
    from fairseq.logging import metrics

    batches = [{"loss": 1.0, "sample_size": 2, "_em": 2.0, "_f1": 2.0, "_nexamples": 2},
               {"loss": 1.0, "sample_size": 3, "_em": 1.0, "_f1": 1.5, "_nexamples": 2}]
    with metrics.aggregate(new_root=True) as meters:
        for logging_output in batches:  # fairseq reduces every validation batch on its own
            LongformerQACriterion.reduce_metrics([logging_output])
    values = meters.get_smoothed_values()
    assert (values["em"], values["f1"]) == (75.0, 87.5)
