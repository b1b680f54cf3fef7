"""``longformer-bench``: what it computes, never how fast it is.

One smoke run of the console script at tiny lengths checks that every case is measured and that
the contenders compute the same function; then --replot, the missing optional matplotlib and the
flags' defaults and refusals. (Ratios, tables and the plot on known numbers: bench/test_ratios.py.)
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from longformer_tools.bench import ratios
from longformer_tools.bench.contenders import hf_available
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
