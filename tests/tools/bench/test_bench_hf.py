"""longformer-bench-hf: a tiny run writes a JSON whose page the same code renders, and the
committed pages are what their committed JSON renders to. (The other cases' models are those of
tests/kernels/test_hf_accelerate.py and test_onnx.py; the tiny run runs longformer_fwd_bwd and
onnx_forward, the path that writes onnx_cpu.md.)"""
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("onnxruntime")

from longformer_tools.bench.hf_accelerate import page  # noqa: E402
from longformer_tools.cli import bench_hf  # noqa: E402

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"


def test_tiny_run(tmp_path):
    assert bench_hf.main(["--layers", "1", "--hidden", "16", "--heads", "2", "--ffn", "32", "--window", "4",
                          "--led-window", "4", "--length", "21", "--led-length", "30", "--gen-length", "17",
                          "--new-tokens", "2", "--runs", "1", "--out-dir", str(tmp_path), "--name", "t",
                          "--cases", "longformer_fwd_bwd,onnx_forward"]) == 0
    report = json.loads((tmp_path / "t.json").read_text())
    assert [row["case"] for row in report["results"]] == ["longformer_fwd_bwd", "onnx_forward"]
    for row in report["results"]:  # the two models compute the same function
        assert row["max_abs_difference"] < 1e-4, row
        assert len(row["stock"]["runs_s"]) == len(row["accelerated"]["runs_s"]) == 1
    assert (tmp_path / "t.md").read_text() == page(report)


@pytest.mark.parametrize("name", sorted(p.stem for p in RESULTS.glob("*.json")
                                        if p.stem.startswith(("hf_accelerate_cpu", "onnx_cpu"))))
def test_committed_pages_render_from_their_json(name):
    report = json.loads((RESULTS / f"{name}.json").read_text())
    assert (RESULTS / f"{name}.md").read_text() == page(report)
