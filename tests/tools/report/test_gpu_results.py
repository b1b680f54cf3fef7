"""The GPU results page is rebuilt from what the leases brought back (docs/results/gpu_h200/):
every number on it is a copy of a number the GPU printed (the committed page against its files:
test_results_pages.py)."""
import json
from pathlib import Path

from longformer_tools.report import gpu_results

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"


def test_page_and_figure_from_the_lease_files(tmp_path):
    assert gpu_results.main([str(RESULTS / "gpu_h200"), "--device", "NVIDIA H200", "--out", str(tmp_path)]) == 0
    page = (tmp_path / "gpu_h200.md").read_text()
    bench = json.loads((RESULTS / "gpu_h200" / "bench_bf16.json").read_text())["benchmark"]
    headline = next(r for r in bench["rows"] if (r["contender"], r["batch"], r["length"], r["globals"], r["dropout"],
                                                  r["passes"]) == ("triton", 8, 16384, 0, 0.0, "fwd+bwd"))
    flex = next(r for r in bench["rows"] if (r["contender"], r["batch"], r["length"], r["globals"], r["dropout"],
                                              r["passes"]) == ("flex", 8, 16384, 0, 0.0, "fwd+bwd"))
    row = next(line for line in page.splitlines() if line.startswith("| 8 | 16,384 | 0 | 0.0 | fwd+bwd |"))
    assert f"{headline['ms']:.3f}" in row and f"{flex['ms'] / headline['ms']:.2f}" in row
    # the checks: the renamed one-token case (second lease on), the production cases in every
    # dtype (third and fourth), lease 4's lines replacing lease 3's
    assert "| n1_one_token | 0.015 |" in page and "| n1 |" not in page
    prod = next(line for line in page.splitlines() if line.startswith("| prod_n4096_w256_80_global |"))
    assert "not run" not in prod and "FAIL" not in page and "0 failed" in page
    ab = next(line for line in page.splitlines() if line.startswith(" 8  16384  0  0.0 fwd "))
    assert ab.split()[-3:] == ["1.355", "1.256", "1.079"]  # lease 4's A/B, copied as printed
    figure = json.loads((tmp_path / "figure1_cuda.json").read_text())
    assert figure["device"] == "NVIDIA H200" and (tmp_path / "figure1_cuda.png").stat().st_size > 10_000
    assert {p["contender"] for p in figure["points"]} == {"triton", "flex", "sdpa_flash", "torch"}
