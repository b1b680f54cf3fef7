"""The matmul peak (``bench/matmul_peak.py``): fractions of it from known numbers, the loud
failure of a fraction above 100%, the page's "of peak" column, and an older run's page (no peak:
"of limit (old definition)") still rendering."""

import pytest

from longformer_tools.bench import matmul_peak, ratios
from longformer_tools.cli import bench
from test_results_page import _replot_twice, _result, _store


def _row(impl="torch", useful=6e9, calls=(20.0, 30.0, 40.0)):
    return {"impl": impl, "length": 1024, "global_tokens": 0, "useful_flops_fwd_bwd": useful,
            "useful_gflops_fwd": 50.0, "useful_gflops_fwd_bwd": useful / (calls[1] * 1e6),
            "fwd_bwd_ms_all": list(calls)}


def test_fraction_of_the_peak_per_call_and_of_the_median():
    row = matmul_peak.add_fractions([_row()], peak_gflops=400.0)[0]
    assert row["peak_gflops"] == 400.0
    assert row["fraction_of_peak_fwd"] == pytest.approx(50.0 / 400.0)
    assert row["fraction_of_peak_fwd_bwd"] == pytest.approx(6e9 / 30e6 / 400.0)  # 200 GFLOP/s: 50%
    assert row["fraction_of_peak_fwd_bwd_all"] == pytest.approx([0.75, 0.5, 0.375])
    assert matmul_peak.check_fractions([row]) is None


def test_a_fraction_above_the_peak_is_a_measurement_bug():
    fast_call = matmul_peak.add_fractions([_row(calls=(10.0, 30.0, 40.0))], peak_gflops=400.0)  # one call 150%
    message = matmul_peak.check_fractions(fast_call)
    assert message and "150%" in message and "measurement bug" in message and "\n" not in message
    assert matmul_peak.check_fractions(matmul_peak.add_fractions([_row()], peak_gflops=100.0))  # median 200%


def test_the_peak_is_the_faster_of_start_and_end_and_measures_real_products():
    measured = matmul_peak.measure("float32", threads=1, sizes=(64, 128), repeats=2)
    assert measured["size"] in (64, 128) and measured["gflops"] == max(max(r) for r in measured["gflops_all"].values())
    slower = dict(measured, gflops=measured["gflops"] / 2)
    merged = matmul_peak.merge({"float32": slower}, {"float32": measured})["float32"]
    assert merged["gflops"] == measured["gflops"]
    assert merged["gflops_at_start"] == slower["gflops"] and merged["gflops_at_end"] == measured["gflops"]


def _page(tmp_path, **sections):
    pytest.importorskip("matplotlib")
    argv = ["--device", "cpu", "--lengths", "1024", "--heads", "2", "--window", "32", "--global-tokens", "0"]
    rows = ratios.add_ratios([_result("dense", 1024, fwd=30.0, fwd_bwd=90.0, mem=200.0, fwd_mem=100.0),
                              _result("torch", 1024, fwd=10.0, fwd_bwd=30.0, mem=50.0, fwd_mem=20.0)])
    for row, fraction in zip(rows, (0.1, 0.3)):
        row.update(useful_gflops_fwd_bwd=fraction * 400, fraction_of_peak_fwd_bwd=fraction,
                   fraction_of_limit_fwd_bwd=fraction * 4, limit_gflops_fwd=1.0, limit_gflops_fwd_bwd=2.0)
    return _replot_twice(bench, _store(bench, argv, rows, tmp_path, **sections), tmp_path / "page.md")


def test_the_page_against_the_peak(tmp_path):
    page = _page(tmp_path, matmul_peak={"float32": {"gflops": 400.0, "size": 4096},
                                        "bfloat16": {"gflops": 900.0, "size": 2048}})
    assert "| useful GFLOP/s | of peak |" in page and "| 120.0 | 30% |" in page
    assert "Matmul peak measured in the run: 400.0 GFLOP/s float32 (n = 4,096), 900.0 GFLOP/s bfloat16" in page
    assert "Rate of plain matmuls at the layer's shapes (not a ceiling) at N=1024" in page
    assert "matmul limit" not in page.lower().replace("matmul limit (old", "")


def test_an_older_page_renders_with_the_old_definition_named(tmp_path):
    page = _page(tmp_path)  # no matmul_peak in the JSON: a run from before the peak
    assert "| of limit (old definition) |" in page and "| 120.0 | 120% |" in page
    assert "this run predates the matmul peak, so the column can pass 100%" in page
    assert "Matmul limit (old definition) at N=1024: 1.0 GFLOP/s forward, 2.0 forward+backward." in page
    assert "of peak" not in page


def _far_too_low_peak(dtype, *args):
    """A peak measured wrongly low (module level: the command measures it in a forked child)."""
    return {dtype: {"gflops": 1e-6, "size": 1}}


def test_bench_refuses_a_fraction_above_the_peak_and_writes_nothing(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(matmul_peak, "peaks", _far_too_low_peak)
    code = bench.main(["--lengths", "64", "--heads", "2", "--head-dim", "16", "--window", "16", "--repeats", "1",
                       "--threads", "1", "--device", "cpu", "--impls", "dense", "torch", "--global-tokens", "0",
                       "--dropout", "0", "--out-dir", str(tmp_path / "out"), "--name", "run",
                       "--markdown", str(tmp_path / "out" / "run.md")])
    err = capsys.readouterr().err.strip().split("\n")[-1].split("\r")[-1]  # after the progress bar
    assert code == 3 and err.startswith("longformer-bench: error: ") and "measurement bug" in err
    assert "Traceback" not in capsys.readouterr().err
    assert list((tmp_path / "out").iterdir()) == []  # no JSON, no plot, no page
