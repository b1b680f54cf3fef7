"""``longformer-bench``: what it computes, never how fast it is.

One smoke run of the console script at tiny lengths, at two attention-dropout rates, checks that
every case is measured, that the contenders compute the same function and that every row's useful
GFLOP/s, fraction of the matmul peak and busy-mode slowdown follow from its times; then --replot, the missing optional
matplotlib and the flags' defaults and refusals. (Ratios, tables and the plot on known numbers:
bench/test_ratios.py; the FLOP counts: tests/kernels/test_flops.py and bench/test_limit_shapes.py.)
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from longformer_tools import flops
from longformer_tools.bench import ratios
from longformer_tools.bench.contenders import hf_available
from longformer_tools.cli import bench as bench_cli

BIN = Path(sys.executable).parent
LENGTHS = (64, 128)
GLOBAL_TOKENS = (0, 3)
DROPOUT = (0.0, 0.1)  # the default rates


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
                      "--name", "smoke", "--peak-sizes", "128,256", "--busy", "1"],
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
    expected = {(impl, n, g, p) for impl in ("dense", "torch", "hf") for n in LENGTHS for g in GLOBAL_TOKENS
                for p in DROPOUT}
    assert {(r["impl"], r["length"], r["global_tokens"], r["dropout"]) for r in rows} == expected
    assert len(rows) == len(expected)
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


def test_useful_gflops_and_the_rate_of_plain_matmuls_at_the_layers_shapes(bench_run):
    """Every row: useful FLOPs as ``flops`` counts them, GFLOP/s = those FLOPs / its time, fraction =
    GFLOP/s / the shape rate of its point (not a ceiling), measured once per point in the same run."""
    out_dir, stdout = bench_run
    report_json = json.loads((out_dir / "smoke.json").read_text())
    limits = {(limit["length"], limit["global_tokens"]): limit for limit in report_json["matmul_shape_rates"]}
    assert set(limits) == {(n, g) for n in LENGTHS for g in GLOBAL_TOKENS}
    for limit in limits.values():
        assert limit["status"] == "ok" and len(limit["fwd_bwd_ms_all"]) == 1
        assert limit["shape_rate_gflops_fwd"] > 0 and limit["shape_rate_gflops_fwd_bwd"] > 0
    for row in report_json["results"]:
        if row["status"] != "ok":
            continue
        counted = flops.layer_flops(1, row["length"], 2, 16, 16, row["global_tokens"])  # B H D w of the run
        limit = limits[row["length"], row["global_tokens"]]
        for call, useful in (("fwd", counted.forward), ("fwd_bwd", counted.forward_backward)):
            assert row[f"useful_flops_{call}"] == useful
            assert row[f"useful_gflops_{call}"] == pytest.approx(useful / (row[f"{call}_ms"] * 1e6))
            assert row[f"shape_rate_gflops_{call}"] == limit[f"shape_rate_gflops_{call}"]
            assert row[f"fraction_of_shape_rate_{call}"] == pytest.approx(
                row[f"useful_gflops_{call}"] / limit[f"shape_rate_gflops_{call}"])
            assert row[f"fraction_of_shape_rate_{call}"] > 0
    assert f"rate of plain matmuls at the layer's shapes at N={LENGTHS[0]}: " in stdout
    assert "FLOPs" in report_json["flops_definition"]


def test_every_fraction_is_against_the_peak_measured_in_the_run(bench_run):
    out_dir, stdout = bench_run
    report_json = json.loads((out_dir / "smoke.json").read_text())
    peak = report_json["matmul_peak"]["float32"]
    assert peak["size"] in (128, 256) and peak["gflops"] == max(peak["gflops_at_start"], peak["gflops_at_end"]) > 0
    for row in report_json["results"]:
        if row["status"] == "ok":
            assert row["peak_gflops"] == peak["gflops"]
            assert row["fraction_of_peak_fwd_bwd"] == pytest.approx(row["useful_gflops_fwd_bwd"] / peak["gflops"])
            assert 0 < row["fraction_of_peak_fwd_bwd"] <= 1 and len(row["fraction_of_peak_fwd_bwd_all"]) == 1
    assert "Matmul peak measured in the run: " in stdout


def test_busy_mode_times_every_contender_again_beside_the_load(bench_run):
    out_dir, stdout = bench_run
    report_json = json.loads((out_dir / "smoke.json").read_text())
    quiet = {(r["impl"], r["length"], r["global_tokens"], r["dropout"]): r for r in report_json["results"]}
    entries = {(e["impl"], e["length"], e["global_tokens"], e["dropout"]): e for e in report_json["busy_summary"]}
    assert set(entries) == {k for k, r in quiet.items() if r["status"] == "ok"}
    busy = {(r["impl"], r["length"], r["global_tokens"], r["dropout"]): r for r in report_json["busy_results"]}
    for key, entry in entries.items():
        assert entry["slowdown"]["median"] == pytest.approx(busy[key]["fwd_bwd_ms"] / quiet[key]["fwd_bwd_ms"])
        if key[0] == "dense":
            assert entry["speedup_vs_dense_busy"]["median"] == 1.0
    assert "| slowdown (busy / quiet) |" in stdout


def test_ratios_are_taken_at_the_same_dropout_rate(bench_run):
    out_dir, _ = bench_run
    rows = json.loads((out_dir / "smoke.json").read_text())["results"]
    by_key = {(r["impl"], r["length"], r["global_tokens"], r["dropout"]): r for r in rows}
    for (impl, n, g, p), row in by_key.items():
        dense = by_key["dense", n, g, p]
        if row["status"] == "ok" and dense["status"] == "ok":
            assert row["ratios"]["fwd_bwd_speedup_vs_dense"] == pytest.approx(dense["fwd_bwd_ms"] / row["fwd_bwd_ms"])


def test_contenders_compute_the_same_function(bench_run):
    """Same weights and inputs everywhere: the output fingerprints (eval mode, at every dropout
    rate) agree (fp32)."""
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
    assert args.name == "figure1_cpu" and args.time_cap == 60.0 and args.dropout == [0.0, 0.1]
    for bad in (["--window", "0"], ["--repeats", "0"], ["--lengths", "0"], ["--global-tokens", "-1"],
                ["--batch", "0"], ["--dropout", "-0.1"], ["--dropout", "0", "1"], ["--dropout", "nan"],
                ["--busy", "-1"], ["--busy", "1", "--impls", "torch", "hf"], ["--peak-sizes", "0"]):
        with pytest.raises(SystemExit) as stopped:
            bench_cli.parse_args(["--device", "cpu", *bad])
        assert stopped.value.code == 2
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert error.startswith("longformer-bench: error: " + bad[0]), error
