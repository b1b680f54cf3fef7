"""The GPU harness runs here too (CPU smoke: Triton's interpreter, tiny shapes), so it cannot rot.

``scripts/gpu_check.sh`` is run as a user would, in a fresh interpreter with nothing but the
repository's kernels/ on PYTHONPATH (no fairseq, no plugin); a second run with a wrong
implementation swapped in shows that a failed check makes it exit non-zero.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import longformer_tools.gpu.gpu_check as gpu_check
from longformer_kernels.sliding_chunks import sliding_chunks_attention

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_script_cpu_smoke(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TRITON_INTERPRET")}
    # a module that fails to import if the harness imports fairseq or the plugin
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    for name in ("fairseq", "fairseq_longformer"):
        (blocker / f"{name}.py").write_text(f"raise ImportError('gpu_check must not import {name}')\n")
    env.update(PYTHON=sys.executable, PYTHONPATH=str(blocker), OMP_NUM_THREADS="1")
    out = tmp_path / "out"
    run = subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh"), str(out), "--cpu-smoke"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert (out / "gpu_check.log").read_text().splitlines()[-1].startswith("PASSED")
    assert report["mode"] == "cpu-smoke" and report["failed"] == 0
    # both implementations, every dtype, both dropouts, the oracle against the dense reference
    seen = {(r["impl"], r["dtype"], r["dropout"]) for r in report["checks"]}
    for dtype in ("fp32", "fp16"):
        for p in (0.0, 0.1):
            assert {("torch", dtype, p), ("triton", dtype, p), ("oracle_vs_reference", dtype, p)} <= seen
    assert ("torch", "bf16", 0.1) in seen and all(s["impl"] == "triton" for s in report["skipped_checks"])
    assert all(r["ok"] and r["rel_err"] <= r["tol"] for r in report["checks"])
    assert report["benchmark"]["flex_pattern_check"]["ok"]  # flex is timed on the same pattern
    rows = {(r["contender"], r["passes"]): r for r in report["benchmark"]["rows"]}
    for name in ("triton", "torch", "sdpa_flash", "sdpa_band", "flex"):
        assert rows[(name, "fwd")]["ms"] > 0, rows[(name, "fwd")]
    assert "backward on CPU" in rows[("flex", "fwd+bwd")]["skipped"]
    assert rows[("triton", "fwd+bwd")]["tflops"] > 0


def _wrong_scale(q, k, v, q_g, k_g, v_g, pattern, masks, dropout=None):
    """The PyTorch path with scores scaled 10% too high: close, but wrong."""
    return sliding_chunks_attention(q, k, v, q_g, k_g, v_g, pattern, masks, dropout=dropout,
                                    scale=1.1 * q.shape[-1] ** -0.5)


def test_gpu_check_fails_on_a_wrong_implementation(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(gpu_check.IMPLEMENTATIONS, "triton", _wrong_scale)
    monkeypatch.setattr(gpu_check, "CPU_SMOKE", gpu_check.CPU_SMOKE[:1])
    monkeypatch.setattr(gpu_check, "DTYPES", {"fp32": torch.float32})
    assert gpu_check.main([str(tmp_path), "--cpu-smoke", "--skip-bench"]) == 1
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    failed = [r for r in report["checks"] if not r["ok"]]
    assert failed and {r["impl"] for r in failed} == {"triton"} and report["failed"] == len(failed)
    assert "FAIL" in capsys.readouterr().out


def test_gpu_check_rejects_bad_arguments(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    for argv in ([str(tmp_path / "file")], [str(tmp_path), "--batches", "1,x"]):
        try:
            gpu_check.main(argv)
        except SystemExit as stop:
            assert stop.code == 2
        else:
            raise AssertionError(f"accepted {argv}")
    assert "error:" in capsys.readouterr().err
    assert not (tmp_path / "gpu_check.json").exists()


def test_one_token_case_measures_zero_gradients_against_dO():
    """N = 1 with dropout: dq and dk are zero in exact arithmetic and come out as rounding noise,
    which failed its relative error on the first GPU run (noise over noise). Measured against
    ||dO|| it passes; measured relative to itself, as before, it fails again."""
    case = next(c for c in gpu_check.GRID if c.name == "n1_one_token")
    assert case.zero_gradients == ("dq", "dk")
    for dtype in ("fp32", "fp16"):
        records = gpu_check.check_case(case, dtype, 0.1, torch.device("cpu"), ["torch", "triton"], seed=1003)
        assert records and all(r["ok"] for r in records), [r for r in records if not r["ok"]]
    # what the GPU saw: an oracle of 1e-17 noise and a result of 1e-8 noise, relative error 1e9;
    # against ||dO|| (the floor) it is the 1e-9 it really is
    generator = torch.Generator().manual_seed(0)
    oracle, result = (torch.randn(16, generator=generator, dtype=torch.float64) * s for s in (1e-17, 1e-8))
    assert gpu_check.relative_error(result, oracle) > 1e8
    assert gpu_check.relative_error(result, oracle, floor=4.0) < 1e-8
    assert gpu_check.relative_error(oracle + 1.0, torch.ones(16, dtype=torch.float64), floor=1e-3) < 1e-15


def test_gpu_check_case_and_dtype_filters(tmp_path, capsys):
    assert gpu_check.main([str(tmp_path), "--cpu-smoke", "--skip-bench", "--cases", "n33", "--dtypes", "fp32"]) == 0
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert {(r["case"], r["dtype"]) for r in report["checks"]} == {("n33_causal", "fp32")}
    assert gpu_check.main([str(tmp_path / "none"), "--cpu-smoke", "--cases", "no_such_case"]) == 2
    for argv in (["--dtypes", "fp64"], ["--contenders", "triton,tvm"], ["--globals", "-1"]):
        try:
            gpu_check.main([str(tmp_path)] + argv)
        except SystemExit as stop:
            assert stop.code == 2
        else:
            raise AssertionError(f"accepted {argv}")
    assert "unknown ['fp64']" in capsys.readouterr().err


def test_benchmark_without_global_tokens_passes_no_global_projections():
    """G = 0 rows: our implementations get no q_g, k_g, v_g (nothing global to differentiate)."""
    from longformer_tools.gpu.gpu_bench import run_benchmark

    bench = run_benchmark(torch.device("cpu"), True, lambda line: None, globals=(0,), contenders=("torch",))
    assert bench["errors"] == 0 and bench["flex_pattern_check"] == {"skipped": "flex is not among the contenders"}
    assert {(r["globals"], r["passes"]) for r in bench["rows"]} == {(0, "fwd"), (0, "fwd+bwd")}
    assert all(r["ms"] > 0 for r in bench["rows"])
    with pytest.raises(ValueError, match=r"unknown grid keys \['windows'\]"):
        run_benchmark(torch.device("cpu"), True, lambda line: None, windows=(1,))
