"""longformer-bench train-steps: the model-FLOPs count against brute force, and the command's CPU
mode (the same code as on CUDA at tiny sizes: every row, checkpointing off and on)."""
import json

import pytest

from longformer_tools import flops as model_flops
from longformer_tools.flops import band_pairs
from longformer_tools.cli import bench


def _brute_pairs(length, window, dilation, causal):
    return sum(1 for i in range(length) for k in range(-window, 1 if causal else window + 1)
               if 0 <= i + dilation * k < length)


@pytest.mark.parametrize("length,window,dilation", [(1, 3, 1), (7, 3, 1), (40, 4, 3), (50, 8, 2), (9, 20, 2)])
def test_dilated_pairs_count_every_attended_pair(length, window, dilation):
    for causal in (False, True):
        assert model_flops.dilated_pairs(length, window, dilation, causal) == _brute_pairs(length, window, dilation, causal)
    if window < length:
        assert model_flops.dilated_pairs(length, window) == band_pairs(length, window)


def test_train_steps_on_cpu_every_row_both_checkpointing_modes(tmp_path):
    out = tmp_path / "steps.json"
    assert bench.main(["train-steps", "--device", "cpu", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    rows = {(r["name"], r["checkpointing"]): r for r in report["rows"]}
    assert set(rows) == {(name, ckpt) for name in ("longformer_mlm", "transformers_mlm", "roberta_sdpa_mlm",
                                                   "led_encoder", "char_lm") for ckpt in (False, True)}
    for row in rows.values():
        assert row["status"] == "ok" and row["batch"] == 1, row
        assert row["tokens_per_s"] > 0 and 0 < row["mfu"], row
    # the same function, the same useful FLOPs; dense attention over all N x N pairs counts more
    assert rows["longformer_mlm", False]["step_tflop"] == rows["transformers_mlm", False]["step_tflop"]
    assert rows["roberta_sdpa_mlm", False]["step_tflop"] > rows["longformer_mlm", False]["step_tflop"]
    assert report["matmul_tflops"] > 0 and report["environment"]["commit"]


def test_train_steps_refuses_unknown_rows_and_existing_output(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["train-steps", "--device", "cpu", "--rows", "gpt5"])
    assert exit_info.value.code == 2 and "--rows: unknown gpt5" in capsys.readouterr().err
    (tmp_path / "taken.json").write_text("{}")
    with pytest.raises(SystemExit):
        bench.main(["train-steps", "--device", "cpu", "--out", str(tmp_path / "taken.json")])
    assert (tmp_path / "taken.json").read_text() == "{}"


def test_train_steps_busy_measures_each_row_again_beside_the_load(tmp_path, capsys):
    out = tmp_path / "busy.json"
    assert bench.main(["train-steps", "--device", "cpu", "--rows", "longformer_mlm,roberta_sdpa_mlm",
                       "--checkpointing", "off", "--repeats", "2", "--busy", "1", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["busy_processes"] == 1 and len(report["busy_rows"]) == 2
    entries = {e["name"]: e for e in report["busy_summary"]}
    assert set(entries) == {"longformer_mlm", "roberta_sdpa_mlm"}
    for row in report["rows"]:
        busy = next(r for r in report["busy_rows"] if r["name"] == row["name"])
        assert entries[row["name"]]["slowdown"] == pytest.approx(row["tokens_per_s"] / busy["tokens_per_s"])
    assert "again beside 1 spin process(es):" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench.main(["train-steps", "--device", "cpu", "--busy", "-1"])
