"""Smoke test of ``longformer-bench``: tiny lengths, small heads and window. It checks what the
benchmark writes and that its contenders compute the same function, never how fast they are."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_longformer.benchmark import hf_available

BIN = Path(sys.executable).parent
LENGTHS = (64, 128)
GLOBAL_TOKENS = (0, 3)


def _command():
    script = BIN / "longformer-bench"
    # the console script declared in setup.py; the module itself when not installed as a script
    return [str(script)] if script.exists() else [sys.executable, "-m", "fairseq_longformer.cli.bench"]


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("bench")
    completed = subprocess.run(
        _command() + ["--lengths", ",".join(map(str, LENGTHS)), "--heads", "2", "--head-dim", "16",
                      "--window", "16", "--repeats", "1", "--threads", "1", "--device", "cpu",
                      "--global-tokens", *map(str, GLOBAL_TOKENS), "--out-dir", str(out_dir),
                      "--name", "smoke"],
        capture_output=True, text=True, timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return out_dir, completed.stdout


def test_writes_json_and_png(bench_run):
    out_dir, stdout = bench_run
    png = out_dir / "smoke.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000  # two panels with lines, not an empty canvas
    report = json.loads((out_dir / "smoke.json").read_text())
    assert report["settings"]["window"] == 16 and report["settings"]["heads"] == 2
    assert report["memory_method"]
    assert "fwd+bwd ms" in stdout and "xHF" in stdout and "xDense" in stdout


def test_replot_redraws_from_the_json(bench_run, tmp_path):
    out_dir, _ = bench_run
    copy = tmp_path / "again.json"
    copy.write_text((out_dir / "smoke.json").read_text())
    completed = subprocess.run(_command() + ["--replot", str(copy)], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert (tmp_path / "again.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "xHF" in completed.stdout  # the table again


def test_every_case_measured_with_ratios(bench_run):
    out_dir, _ = bench_run
    rows = json.loads((out_dir / "smoke.json").read_text())["results"]
    have_hf = hf_available()[0]
    expected = {(impl, n, g) for impl in ("dense", "torch", "hf") for n in LENGTHS for g in GLOBAL_TOKENS}
    assert {(r["impl"], r["length"], r["global_tokens"]) for r in rows} == expected
    for row in rows:
        if row["impl"] == "hf" and not have_hf:
            assert row["status"] == "n/a"
            continue
        assert row["status"] == "ok", row
        assert row["fwd_ms"] > 0 and row["fwd_bwd_ms"] > 0
        assert row["peak_fwd_mb"] >= 0 and row["peak_fwd_bwd_mb"] > 0
        ratios = row["ratios"]
        for key in ("fwd_bwd_speedup_vs_dense", "fwd_speedup_vs_dense", "peak_fwd_bwd_mem_ratio_vs_dense"):
            assert ratios[key] is not None and ratios[key] > 0, (row["impl"], key)
        if have_hf:
            assert ratios["fwd_bwd_speedup_vs_hf"] is not None and ratios["peak_fwd_bwd_mem_ratio_vs_hf"] > 0
        if row["impl"] == "dense":
            assert ratios["fwd_bwd_speedup_vs_dense"] == pytest.approx(1.0)


def test_contenders_compute_the_same_function(bench_run):
    """Same weights and inputs everywhere: the output fingerprints agree (fp32)."""
    out_dir, _ = bench_run
    rows = json.loads((out_dir / "smoke.json").read_text())["results"]
    for row in rows:
        if row["status"] == "ok":
            assert row["max_abs_diff_vs_others"] is not None and row["max_abs_diff_vs_others"] < 1e-4, row


def test_help_explains_memory_measurement():
    completed = subprocess.run(_command() + ["--help"], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0
    assert "Peak memory" in completed.stdout and "clear_refs" in completed.stdout



def test_contenders_agree_at_both_boundaries():
    """Every contender computes the same function without the output projection (HF's
    LongformerSelfAttention boundary, the default) and with it, and the second boundary is the
    first followed by the output projection."""
    import torch

    from fairseq_longformer import benchmark

    impls = ["dense", "torch"] + (["hf"] if hf_available()[0] else [])
    outputs = {}
    for output_projection in (False, True):
        for impl in impls:
            case = benchmark.Case(impl=impl, length=64, global_tokens=3, heads=2, head_dim=16, window=16,
                                  output_projection=output_projection)
            x, _, is_global = benchmark._inputs(case, case.length, torch.device("cpu"), torch.float32)
            weights = benchmark.shared_weights(case.hidden)
            _, f = benchmark.build_contender(case, torch.device("cpu"), torch.float32, weights, is_global)
            with torch.no_grad():
                outputs[impl, output_projection] = f(x)
    weight, bias = benchmark.shared_weights(32)["out_proj"]
    for impl in impls:
        for output_projection in (False, True):
            torch.testing.assert_close(outputs[impl, output_projection], outputs["dense", output_projection],
                                       rtol=0, atol=1e-5)
        torch.testing.assert_close(outputs[impl, True], outputs[impl, False] @ weight.T + bias,
                                   rtol=0, atol=1e-5)
