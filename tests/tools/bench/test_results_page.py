"""The benchmarks' results pages (``--markdown``, ``--replot``) on stored reports whose numbers are
known: the page names a command that, parsed by the benchmark's own parser, gives back the stored
settings; it holds every row with the ratios in the tools' convention; --replot writes the same
bytes again; a report of another benchmark, or a page over the run's own JSON, is refused with one line
and nothing written."""
import json
import shlex

import pytest

from longformer_tools.bench import ratios
from longformer_tools.bench.contenders import Case
from longformer_tools.bench.measure import Result
from longformer_tools.bench import bench_args
from longformer_tools.cli import bench, bench_led, bench_lm


def _result(impl, length, fwd, fwd_bwd, mem, fwd_mem, status="ok"):
    return Result(Case(impl=impl, length=length, global_tokens=0), status=status, fwd_ms=fwd, fwd_bwd_ms=fwd_bwd,
                  peak_fwd_mb=fwd_mem, peak_fwd_bwd_mb=mem, note="" if status == "ok" else "out of memory")


def _store(cli, argv, rows, tmp_path, **sections):
    """Write ``rows`` as the report ``cli`` would with ``argv`` (to tmp_path/run.json); its path."""
    args = cli.parse_args(argv + ["--out-dir", str(tmp_path), "--name", "run"])
    return bench_args.write_report(args, rows, started=0.0, **sections)


def _command_in(page: str, prog: str) -> list:
    """The words of the first command block of ``page`` (the one that measures again)."""
    line = page.split("```bash\n")[1].split("\n")[0]
    words = shlex.split(line)
    assert words[0] == prog
    return words[1:]


def _replot_twice(cli, json_path, markdown_path):
    assert cli.main(["--replot", json_path, "--markdown", str(markdown_path)]) == 0
    first = markdown_path.read_bytes()
    assert cli.main(["--replot", json_path, "--markdown", str(markdown_path)]) == 0
    assert markdown_path.read_bytes() == first  # nothing in the page depends on when it was written
    return first.decode()


def test_figure1_page_names_its_command_and_holds_the_rows(tmp_path):
    pytest.importorskip("matplotlib")
    argv = ["--device", "cpu", "--lengths", "1024,2048", "--heads", "2", "--window", "32", "--global-tokens", "0"]
    rows = ratios.add_ratios([
        _result("dense", 1024, fwd=30.0, fwd_bwd=90.0, mem=200.0, fwd_mem=100.0),
        _result("torch", 1024, fwd=10.0, fwd_bwd=30.0, mem=50.0, fwd_mem=20.0),
        _result("hf", 1024, fwd=40.0, fwd_bwd=120.0, mem=400.0, fwd_mem=300.0),
        _result("dense", 2048, None, None, None, None, status="oom"),
    ])
    json_path = _store(bench, argv, rows, tmp_path)
    page = _replot_twice(bench, json_path, tmp_path / "page.md")
    words = _command_in(page, "longformer-bench")
    stored = json.loads(open(json_path).read())["settings"]
    assert bench_args.settings(bench.parse_args(words)) == stored
    assert words[words.index("--markdown") + 1] == str(tmp_path / "page.md")
    assert f"longformer-bench --replot {json_path} --markdown {tmp_path / 'page.md'}" in page
    assert "![time and peak memory against sequence length](run.png)" in page
    # N contender p status fwd f+b fwd-MB f+b-MB xhf xdense mem/hf mem/dense GFLOP/s limit: torch 4x hf, 3x
    # dense, 1/4 of dense (no dropout rate, GFLOP/s or limit in these rows: "-")
    assert "| 1,024 | torch | - | ok | 10 | 30 | 20 | 50 | 4.00 | 3.00 | 0.12 | 0.25 | - | - |" in page
    assert "| 2,048 | dense | - | oom | - | - | - | - | - | - | - | - | - | - |" in page
    assert "dense at N = 2,048: oom: out of memory" in page


def test_lm_page_names_its_command_and_holds_the_rows(tmp_path):
    argv = ["--lengths", "1024", "--checkpoint-activations", "--repeats", "1", "--threads", "2"]
    rows = ratios.model_vs_baseline_rows([
        _result("longformer", 1024, fwd=10.0, fwd_bwd=30.0, mem=50.0, fwd_mem=20.0),
        _result("dense", 1024, fwd=30.0, fwd_bwd=90.0, mem=200.0, fwd_mem=100.0)], "longformer", "dense")
    checks = {1024: {"longformer_loss": 4.5, "dense_loss": 4.5, "difference": 0.0, "max_logit_difference": 0.0}}
    json_path = _store(bench_lm, argv, rows, tmp_path, loss_checks=checks)
    page = _replot_twice(bench_lm, json_path, tmp_path / "lm.md")
    words = _command_in(page, "longformer-bench-lm")
    assert bench_args.settings(bench_lm.parse_args(words)) == json.loads(open(json_path).read())["settings"]
    assert "--checkpoint-activations" in words and "--time-cap" not in words  # defaults are left out
    assert "activations checkpointed" in page.splitlines()[0]
    assert "| 1,024 | longformer | ok | 30 | 10 | 50 | 20 | 3.00 | 0.25 | 3.00 | 0.20 |" in page
    assert "speedup (dense / longformer time)" in page and "N = 1,024: 4.500000 against 4.500000" in page


def test_led_page_and_a_report_of_another_benchmark_refused(tmp_path, capsys):
    rows = ratios.model_vs_baseline_rows([
        _result("led", 4096, fwd=20.0, fwd_bwd=60.0, mem=90.0, fwd_mem=30.0),
        _result("dense", 4096, fwd=30.0, fwd_bwd=90.0, mem=100.0, fwd_mem=30.0)], "led", "dense")
    json_path = _store(bench_led, ["--lengths", "4096", "--layers", "1"], rows, tmp_path,
                       check={"length": 512, "max_abs_diff": 1e-6})
    page = _replot_twice(bench_led, json_path, tmp_path / "led.md")
    words = _command_in(page, "longformer-bench-led")
    assert bench_args.settings(bench_led.parse_args(words)) == json.loads(open(json_path).read())["settings"]
    assert "| 4,096 | led | ok | 60 | 20 | 90 | 30 | 1.50 | 0.90 | 1.50 | 1.00 |" in page
    # a page over the run's own JSON: refused before anything is written, the JSON untouched
    stored = open(json_path, "rb").read()
    with pytest.raises(SystemExit) as stopped:
        bench_led.main(["--replot", json_path, "--markdown", json_path])
    assert stopped.value.code == 2 and "is the run's own run.json" in capsys.readouterr().err
    assert open(json_path, "rb").read() == stored
    # the LED report handed to the char-LM benchmark: one line naming the file, no page
    capsys.readouterr()
    assert bench_lm.main(["--replot", json_path, "--markdown", str(tmp_path / "wrong.md")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("longformer-bench-lm: error: --replot") and "rows of led" in error
    assert len(error.splitlines()) == 1 and not (tmp_path / "wrong.md").exists()
