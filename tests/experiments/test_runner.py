"""longformer_experiments.runner: commands and their logs, the seed convention (mean ± half the
range), comparisons over seeds and the markdown table every experiment writes."""
import sys

import pytest

from longformer_experiments import runner


def test_run_returns_the_log_and_fails_loudly_unless_the_work_was_done(tmp_path):
    text = runner.run("echo", [sys.executable, "-c", "import os; print('threads', os.environ['OMP_NUM_THREADS'])"],
                      tmp_path / "echo.log", threads=3)
    assert text == "threads 3\n" == (tmp_path / "echo.log").read_text()
    failing = [sys.executable, "-c", "import sys; print('step 1'); print('done training in 3 s'); sys.exit(134)"]
    with pytest.raises(RuntimeError, match=r"(?s)broken failed \(exit 134\).*step 1"):
        runner.run("broken", failing, tmp_path / "broken.log")
    # the same exit after the done marker: fairseq-train dying at teardown, its outputs saved
    assert "step 1" in runner.run("teardown", failing, tmp_path / "teardown.log", done_marker=runner.TRAIN_DONE)


def test_log_parsing_takes_the_last_value():
    eval_log = "| Loss (base 2): 3.1000, Perplexity: 8.57\n| Loss (base 2): 2.2500, Perplexity: 4.76\n"
    assert runner.eval_lm_bits(eval_log) == 2.25
    train_log = ("epoch 001 | valid on 'valid' subset | loss 1.2 | accuracy 50 | wps 3\n"
                 "epoch 002 | valid on 'valid' subset | loss 0.9 | accuracy 62.5 | wps 3\n")
    assert runner.last_valid(train_log, "accuracy") == 62.5 and runner.last_valid(train_log, "loss") == 0.9
    with pytest.raises(RuntimeError, match="no validation accuracy"):
        runner.last_valid("epoch 001 | train | loss 1.2", "accuracy")


def test_spread_is_half_the_range_and_every_seed_lies_within_it():
    summary = runner.summarize([1.0, 4.0, 2.0])
    assert summary == {"mean": pytest.approx(7 / 3), "spread": 1.5, "min": 1.0, "max": 4.0}
    assert runner.summarize([2.0])["spread"] == 0
    with pytest.raises(ValueError, match="finite"):
        runner.summarize([1.0, float("nan")])


def test_compare_resolves_only_ranges_that_are_apart():
    low, high = runner.summarize([1.0, 1.2]), runner.summarize([1.3, 1.5])
    check = runner.compare(low, high, seeds=2, lower_is_better=True)
    assert check["holds"] and check["resolved"] and check["gap"] == pytest.approx(0.3)
    overlapping = runner.summarize([1.1, 1.4])
    check = runner.compare(low, overlapping, seeds=2, lower_is_better=True)
    assert check["holds"] and check["resolved"] is False
    # higher is better (accuracy): the same rows the other way round
    check = runner.compare(high, low, seeds=2, lower_is_better=False)
    assert check["holds"] and check["resolved"]
    assert runner.compare(low, high, seeds=1, lower_is_better=True)["resolved"] is None
    assert runner.beats_every_seed(high, low, lower_is_better=False)
    assert not runner.beats_every_seed(overlapping, low, lower_is_better=False)


def test_markdown_table_aligns_columns_and_rejects_ragged_rows():
    assert runner.markdown_table(["row", "value"], [["a", "1.00"]], "lr") == ["| row | value |", "|---|---:|",
                                                                           "| a | 1.00 |"]
    with pytest.raises(ValueError, match="columns"):
        runner.markdown_table(["row", "value"], [["a"]], "lr")
