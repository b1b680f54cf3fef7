"""The benchmarks' ratios, tables and plot on results whose numbers are known, so that a ratio
upside down or a plot of the wrong column fails."""
import pytest

from longformer_tools.bench import figure1, ratios
from longformer_tools.bench.contenders import Case
from longformer_tools.bench.measure import Result


def _result(impl, length=1024, global_tokens=0, status="ok", fwd=None, fwd_bwd=None, mem=None, fwd_mem=None,
            fingerprint=None, dropout=None):
    case = Case(impl=impl, length=length, global_tokens=global_tokens, dropout=dropout)
    return Result(case, status=status, fwd_ms=fwd, fwd_bwd_ms=fwd_bwd, peak_fwd_mb=fwd_mem,
                  peak_fwd_bwd_mb=mem, fingerprint=fingerprint)


def _known_results():
    return [
        _result("dense", fwd=30.0, fwd_bwd=90.0, mem=200.0, fwd_mem=100.0, fingerprint=[1.0, 2.0]),
        _result("torch", fwd=10.0, fwd_bwd=30.0, mem=50.0, fwd_mem=20.0, fingerprint=[1.0, 2.5]),
        _result("hf", fwd=40.0, fwd_bwd=120.0, mem=400.0, fwd_mem=300.0, fingerprint=[0.0, 2.0]),
        _result("torch", length=2048, fwd=20.0, fwd_bwd=60.0, mem=100.0, fwd_mem=40.0),
        _result("dense", length=2048, status="oom"),
    ]


def test_ratios_are_baseline_time_over_this_and_this_memory_over_baseline():
    rows = {(r["impl"], r["length"]): r for r in ratios.add_ratios(_known_results())}
    torch_row = rows["torch", 1024]["ratios"]
    assert torch_row["fwd_bwd_speedup_vs_dense"] == pytest.approx(3.0)  # 90 / 30: 3x faster
    assert torch_row["fwd_speedup_vs_dense"] == pytest.approx(3.0)
    assert torch_row["fwd_bwd_speedup_vs_hf"] == pytest.approx(4.0)
    assert torch_row["peak_fwd_bwd_mem_ratio_vs_dense"] == pytest.approx(0.25)  # 50 / 200
    assert torch_row["peak_fwd_mem_ratio_vs_hf"] == pytest.approx(20.0 / 300.0)
    assert rows["hf", 1024]["ratios"]["fwd_bwd_speedup_vs_dense"] == pytest.approx(0.75)  # slower
    # fingerprints: the largest difference to any other contender of the same point
    assert rows["torch", 1024]["max_abs_diff_vs_others"] == pytest.approx(1.0)  # vs hf's first value
    assert rows["dense", 1024]["max_abs_diff_vs_others"] == pytest.approx(1.0)
    # a baseline that failed gives no ratio, never a number against a missing time
    assert rows["torch", 2048]["ratios"]["fwd_bwd_speedup_vs_dense"] is None
    assert rows["torch", 2048]["ratios"]["fwd_bwd_speedup_vs_hf"] is None


def test_model_vs_baseline_rows_and_table_of_the_lm_and_led_benchmarks():
    """``longformer-bench-lm`` and ``-led``'s ratios, the convention above: speedup = baseline time
    / model time, memory ratio = model peak / baseline peak; only the model's row has them."""
    results = [r for r in _known_results() if r.case.impl != "hf"]
    rows = {(r["impl"], r["length"]): r for r in ratios.model_vs_baseline_rows(results, "torch", "dense")}
    assert rows["torch", 1024]["ratios"] == pytest.approx(
        {"fwd_bwd_speedup": 3.0, "fwd_speedup": 3.0, "fwd_bwd_mem_ratio": 0.25, "fwd_mem_ratio": 0.2})
    assert rows["dense", 1024]["ratios"] == {}
    assert set(rows["torch", 2048]["ratios"].values()) == {None}  # the baseline ran out of memory
    table = ratios.format_model_rows(list(rows.values()), ("torch", "dense"))
    assert table.splitlines()[0].startswith("speedup = dense time / torch time (> 1: torch faster); "
                                            "mem = torch peak / dense peak (< 1: torch needs less)")
    torch_line = next(line for line in table.splitlines() if line.split()[:3] == ["1024", "torch", "ok"])
    # N model status f+b-ms fwd-ms f+b-MB fwd-MB speedup mem fwd-speedup fwd-mem busy
    assert torch_line.split()[3:11] == ["30", "10", "50", "20", "3.00", "0.25", "3.00", "0.20"]
    assert "dense N=2048: oom" in table


def test_table_shows_the_ratios_and_the_failures():
    table = ratios.format_table(ratios.add_ratios(_known_results()))
    torch_line = next(line for line in table.splitlines() if line.split()[:4] == ["1024", "torch", "-", "ok"])
    # N impl p status fwd f+b fwdMB f+bMB xHF xDense mem/HF mem/dense |diff| busy GFLOP/s limit
    assert torch_line.split()[4:12] == ["10", "30", "20", "50", "4.00", "3.00", "0.12", "0.25"]
    assert "dense N=2048 G=0: oom" in table


def test_ratios_pair_rows_of_the_same_dropout_rate():
    """At two rates the baselines of each row are the ones at its rate; outputs (eval mode) are
    compared across rates."""
    rows = ratios.add_ratios([
        _result("dense", fwd=30.0, fwd_bwd=90.0, dropout=0.0, fingerprint=[1.0]),
        _result("torch", fwd=10.0, fwd_bwd=30.0, dropout=0.0, fingerprint=[1.0]),
        _result("dense", fwd=60.0, fwd_bwd=150.0, dropout=0.1, fingerprint=[1.5]),
        _result("torch", fwd=20.0, fwd_bwd=50.0, dropout=0.1, fingerprint=[1.0])])
    torch_rows = {r["dropout"]: r for r in rows if r["impl"] == "torch"}
    assert torch_rows[0.0]["ratios"]["fwd_bwd_speedup_vs_dense"] == pytest.approx(3.0)  # 90 / 30
    assert torch_rows[0.1]["ratios"]["fwd_bwd_speedup_vs_dense"] == pytest.approx(3.0)  # 150 / 50
    assert torch_rows[0.1]["max_abs_diff_vs_others"] == pytest.approx(0.5)  # against dense at p = 0.1
    table = ratios.format_table(rows)
    assert [line.split()[:3] for line in table.splitlines() if line.split()[:1] == ["1024"]] == [
        ["1024", "dense", "0"], ["1024", "torch", "0"], ["1024", "dense", "0.1"], ["1024", "torch", "0.1"]]


def test_plot_draws_each_contenders_measured_values():
    pytest.importorskip("matplotlib")
    rows = ratios.add_ratios(_known_results())
    figure = figure1.figure1(rows, "test")
    try:
        time_axis, memory_axis = figure.axes
        lines = {line.get_label(): line for line in time_axis.get_lines()}
        label = f"{figure1.LABELS['torch']}, 0 global"
        assert list(lines[label].get_xdata()) == [1024, 2048]
        assert list(lines[label].get_ydata()) == [30.0, 60.0]  # forward+backward times
        memory = {line.get_label(): line for line in memory_axis.get_lines()}
        assert list(memory[label].get_ydata()) == [50.0, 100.0]  # forward+backward peaks
        dense = f"{figure1.LABELS['dense']}, 0 global"
        assert list(lines[dense].get_xdata()) == [1024]  # the OOM point is not drawn as a value
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)
