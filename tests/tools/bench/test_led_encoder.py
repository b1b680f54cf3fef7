"""``longformer-bench-led`` (the LED encoder against BART's dense encoder): what it writes, never
how fast anything is. One run at tiny sizes and lengths, in a subprocess (it forks workers)."""
import json
import subprocess
import sys

import pytest

from longformer_tools.bench.led_encoder import EncoderCase, format_rows, ratio_rows
from longformer_tools.bench.measure import Result

LENGTHS = (48, 96)
TINY = ["--layers", "1", "--heads", "2", "--head-dim", "8", "--ffn", "32", "--vocab", "60", "--window", "8",
        "--bart-positions", "32", "--check-length", "9", "--repeats", "1", "--threads", "1"]


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("bench_led")
    completed = subprocess.run(
        [sys.executable, "-m", "longformer_tools.cli.bench_led", "--lengths", ",".join(map(str, LENGTHS)), *TINY,
         "--out-dir", str(out_dir), "--name", "smoke"], capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads((out_dir / "smoke.json").read_text()), completed.stdout


def test_both_encoders_are_measured_at_every_length(bench_run):
    report, stdout = bench_run
    assert report["check"]["length"] == 9 and report["check"]["max_abs_diff"] <= 1e-4
    assert "largest |LED - dense|" in stdout
    rows = report["results"]
    assert sorted((r["impl"], r["length"]) for r in rows) == sorted((i, n) for i in ("led", "dense") for n in LENGTHS)
    for row in rows:
        assert row["status"] == "ok", row
        assert row["fwd_ms"] > 0 and row["fwd_bwd_ms"] > 0 and row["peak_fwd_bwd_mb"] > 0
        assert len(row["fwd_bwd_ms_all"]) == 1 and row["busy_cores_before"] is not None
        if row["impl"] == "led":
            assert set(row["ratios"]) == {"fwd_speedup", "fwd_bwd_speedup", "fwd_mem_ratio", "fwd_bwd_mem_ratio"}
            assert all(value > 0 for value in row["ratios"].values())
            # beyond the window the two compute different functions: outputs differ, but not wildly
            assert 0 < row["max_abs_diff_vs_others"] < 10
    assert format_rows(rows).splitlines()[1] in stdout and "load average" in stdout


def test_speedup_is_dense_time_over_led_and_memory_led_over_dense():
    """On made-up numbers (the LED 4x faster, a quarter of the memory): a ratio the wrong way
    round fails here."""
    def result(impl, ms, mb):
        return Result(EncoderCase(impl=impl, length=64, global_tokens=1), fwd_ms=ms, fwd_bwd_ms=3 * ms,
                      peak_fwd_mb=mb, peak_fwd_bwd_mb=2 * mb)

    rows = ratio_rows([result("led", 10.0, 100.0), result("dense", 40.0, 400.0)])
    led = next(r for r in rows if r["impl"] == "led")
    assert led["ratios"] == {"fwd_speedup": 4.0, "fwd_bwd_speedup": 4.0, "fwd_mem_ratio": 0.25,
                             "fwd_bwd_mem_ratio": 0.25}
    assert next(r for r in rows if r["impl"] == "dense")["ratios"] == {}
    # N encoder status f+b ms fwd ms f+b MB fwd MB speedup mem fwd-speedup fwd-mem busy
    line = next(line for line in format_rows(rows).splitlines() if line.split()[:2] == ["64", "led"])
    assert line.split()[3:11] == ["30", "10", "200", "100", "4.00", "0.25", "4.00", "0.25"]
