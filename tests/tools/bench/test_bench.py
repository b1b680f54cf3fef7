"""``longformer-bench``: what it computes, never how fast it is.

One smoke run of the console script at tiny lengths checks that every case is measured and that
the contenders compute the same function; the ratios, the table and the plot are checked on
results whose numbers are known, so that a ratio upside down or a plot of the wrong column fails.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from longformer_tools.bench import contenders, figure1, ratios
from longformer_tools.bench.contenders import Case, hf_available
from longformer_tools.bench.measure import Result
from longformer_tools.cli import bench as bench_cli

BIN = Path(sys.executable).parent
LENGTHS = (64, 128)
GLOBAL_TOKENS = (0, 3)


def _command():
    script = BIN / "longformer-bench"
    # the console script declared in setup.py; the module itself when not installed as a script
    return [str(script)] if script.exists() else [sys.executable, "-m", "longformer_tools.cli.bench"]


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


def test_every_case_is_measured_and_written(bench_run):
    out_dir, stdout = bench_run
    assert (out_dir / "smoke.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report_json = json.loads((out_dir / "smoke.json").read_text())
    assert report_json["settings"]["window"] == 16 and report_json["settings"]["heads"] == 2
    rows = report_json["results"]
    have_hf = hf_available()[0]
    expected = {(impl, n, g) for impl in ("dense", "torch", "hf") for n in LENGTHS for g in GLOBAL_TOKENS}
    assert {(r["impl"], r["length"], r["global_tokens"]) for r in rows} == expected
    for row in rows:
        if row["impl"] == "hf" and not have_hf:
            assert row["status"] == "n/a"
            continue
        assert row["status"] == "ok", row
        assert len(row["fwd_ms_all"]) == 1 and len(row["fwd_bwd_ms_all"]) == 1  # --repeats 1
        assert row["fwd_ms"] == row["fwd_ms_all"][0] > 0 and row["fwd_bwd_ms"] == row["fwd_bwd_ms_all"][0] > 0
        assert row["peak_fwd_mb"] >= 0 and row["peak_fwd_bwd_mb"] > 0
    # the table on stdout is the one of these rows
    assert ratios.format_table(rows).strip() in stdout


def test_contenders_compute_the_same_function(bench_run):
    """Same weights and inputs everywhere: the output fingerprints agree (fp32)."""
    out_dir, _ = bench_run
    rows = json.loads((out_dir / "smoke.json").read_text())["results"]
    for row in rows:
        if row["status"] == "ok":
            assert row["max_abs_diff_vs_others"] is not None and row["max_abs_diff_vs_others"] < 1e-4, row


def test_replot_redraws_from_the_json(bench_run, tmp_path):
    out_dir, _ = bench_run
    copy = tmp_path / "again.json"
    copy.write_text((out_dir / "smoke.json").read_text())
    completed = subprocess.run(_command() + ["--replot", str(copy)], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert (tmp_path / "again.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = json.loads(copy.read_text())["results"]
    assert ratios.format_table(rows).strip() in completed.stdout


# ----------------------------------------------------------------------------------------------
# ratios, table and plot on known numbers


def _result(impl, length=1024, global_tokens=0, status="ok", fwd=None, fwd_bwd=None, mem=None, fwd_mem=None,
            fingerprint=None):
    case = Case(impl=impl, length=length, global_tokens=global_tokens)
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
    torch_line = next(line for line in table.splitlines() if line.split()[:3] == ["1024", "torch", "ok"])
    # N impl status fwd f+b fwdMB f+bMB xHF xDense mem/HF mem/dense |diff| busy
    assert torch_line.split()[3:11] == ["10", "30", "20", "50", "4.00", "3.00", "0.12", "0.25"]
    assert "dense N=2048 G=0: oom" in table


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


def test_missing_matplotlib_stops_with_the_install_command(tmp_path):
    """matplotlib is an optional extra: without it the CLI stops before measuring and says how to
    install it."""
    code = ("import sys; sys.modules['matplotlib'] = None\n"  # what a missing package looks like
            "from longformer_tools.cli import bench\n"
            f"sys.exit(bench.main(['--lengths', '64', '--out-dir', {str(tmp_path)!r}]))")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert completed.returncode == 2, completed.stderr[-2000:]
    assert "pip install 'fairseq-longformer[bench]'" in completed.stderr
    assert not any(tmp_path.iterdir())  # nothing measured, nothing written


def test_arguments_defaults_and_refusals(capsys):
    args = bench_cli.parse_args(["--device", "cpu"])
    assert args.lengths == bench_cli.CPU_LENGTHS and args.impls == ["dense", "torch", "hf"]
    assert args.name == "figure1_cpu" and args.time_cap == 60.0
    for bad in (["--window", "0"], ["--repeats", "0"], ["--lengths", "0"], ["--global-tokens", "-1"]):
        with pytest.raises(SystemExit) as stopped:
            bench_cli.parse_args(["--device", "cpu", *bad])
        assert stopped.value.code == 2
        assert bad[0] in capsys.readouterr().err


def test_contenders_agree_at_both_boundaries():
    """Every contender computes the same function without the output projection (HF's
    LongformerSelfAttention boundary, the default) and with it, and the second boundary is the
    first followed by the output projection."""
    impls = ["dense", "torch"] + (["hf"] if hf_available()[0] else [])
    outputs = {}
    for output_projection in (False, True):
        for impl in impls:
            case = Case(impl=impl, length=64, global_tokens=3, heads=2, head_dim=16, window=16,
                        output_projection=output_projection)
            x, _, is_global = contenders.make_inputs(case, case.length, torch.device("cpu"), torch.float32)
            weights = contenders.shared_weights(case.hidden)
            _, f = contenders.build_contender(case, torch.device("cpu"), torch.float32, weights, is_global)
            with torch.no_grad():
                outputs[impl, output_projection] = f(x)
    weight, bias = contenders.shared_weights(32)["out_proj"]
    for impl in impls:
        for output_projection in (False, True):
            torch.testing.assert_close(outputs[impl, output_projection], outputs["dense", output_projection],
                                       rtol=0, atol=1e-5)
        torch.testing.assert_close(outputs[impl, True], outputs[impl, False] @ weight.T + bias,
                                   rtol=0, atol=1e-5)
