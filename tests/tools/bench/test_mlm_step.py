"""The masked-LM step benchmark (``python -m longformer_tools.cli.bench_mlm``): what it computes and
prints, never how fast it is.

One smoke run at tiny sizes (2 layers of width 32, w = 8, N = 64 and 128) checks the loss check,
the printed table and the JSON; the flags' refusals; a loss mismatch stops the run before timing;
the transformers model carries our sizes, window and dropout.
"""
import json
import subprocess
import sys

import pytest

from longformer_tools.bench import mlm_step
from longformer_tools.cli import bench_mlm

transformers = pytest.importorskip("transformers")

LENGTHS = (64, 128)
TINY = ["--window", "8", "--layers", "2", "--hidden", "32", "--heads", "2", "--vocab", "100", "--repeats", "1",
        "--threads", "1"]


def test_smoke_run_checks_the_losses_then_times_both_models(tmp_path):
    command = [sys.executable, "-m", "longformer_tools.cli.bench_mlm", "--lengths", ",".join(map(str, LENGTHS)),
               *TINY, "--out-dir", str(tmp_path), "--name", "smoke"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads((tmp_path / "smoke.json").read_text())
    assert report["settings"]["dropout"] == 0.1 and report["settings"]["attention_dropout"] == 0.1
    for length in LENGTHS:
        check = report["loss_checks"][str(length)]
        assert check["relative_difference"] <= 1e-4 and check["longformer_loss"] > 0
        assert check["max_logit_difference"] < 1e-4  # the same function, not only the same mean
    rows = {(row["impl"], row["length"]): row for row in report["results"]}
    assert set(rows) == {(impl, n) for impl in mlm_step.MODELS for n in LENGTHS}
    for (impl, length), row in rows.items():
        assert row["status"] == "ok" and len(row["fwd_bwd_ms_all"]) == 1, row
        assert row["tokens_per_s"] == pytest.approx(length / (row["fwd_bwd_ms"] / 1e3))  # B = 1
        assert row["max_abs_diff_vs_others"] < 1e-4  # eval-mode logits of the memory run agree
        if impl == "longformer":
            theirs = rows["transformers", length]
            assert row["ratios"]["fwd_bwd_speedup"] == pytest.approx(theirs["fwd_bwd_ms"] / row["fwd_bwd_ms"])
            assert row["ratios"]["fwd_bwd_speedup"] == pytest.approx(row["tokens_per_s"] / theirs["tokens_per_s"])
    assert mlm_step.format_rows(report["results"]) in completed.stdout
    assert f"N={LENGTHS[0]}: masked-LM loss longformer" in completed.stdout


@pytest.mark.parametrize("bad", [["--dropout", "-0.1"], ["--dropout", "1"], ["--attention-dropout", "1.5"],
                                 ["--batch", "0"], ["--hidden", "33"], ["--lengths", "2"]])
def test_bad_arguments_stop_with_one_line(bad, capsys):
    with pytest.raises(SystemExit) as stopped:
        bench_mlm.parse_args(TINY + bad)
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    flag = "--hidden" if bad[0] == "--hidden" else bad[0]
    assert error.startswith(f"longformer-bench-mlm: error: {flag}"), error


def test_a_loss_mismatch_stops_before_timing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_mlm, "loss_check", lambda case: (4.6, 4.5, 0.3))
    monkeypatch.setattr(bench_mlm, "run_side_by_side", lambda *a, **k: pytest.fail("timed after a failed check"))
    assert bench_mlm.main(["--lengths", "64", *TINY, "--out-dir", str(tmp_path), "--name", "bad"]) == 1
    assert "the two models disagree" in capsys.readouterr().err
    assert not (tmp_path / "bad.json").exists()


def test_transformers_model_has_our_sizes_window_and_dropout():
    case = mlm_step.MLMStepCase(impl="transformers", length=64, global_tokens=0, window=8, layers=2, heads=2,
                                head_dim=16, vocab=100, hidden_dropout=0.2, attention_dropout=0.3)
    model, dictionary = mlm_step.build_model(case)
    config = model.config
    assert isinstance(model, transformers.LongformerForMaskedLM) and len(dictionary) == config.vocab_size == 100
    assert config.attention_window == [16, 16] and config.num_hidden_layers == 2 and config.hidden_size == 32
    assert (config.hidden_dropout_prob, config.attention_probs_dropout_prob) == (0.2, 0.3)
    assert config.intermediate_size == 128
