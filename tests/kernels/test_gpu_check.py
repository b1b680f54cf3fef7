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

import torch

import longformer_kernels.gpu_check as gpu_check
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
