"""longformer_common.quiet: the wait for a quiet machine, the refusal to write into docs/results/
under load, and the page's banner; and its wiring into the bench CLIs (--load-wait, --allow-load)."""
import argparse

from longformer_common import quiet
from longformer_tools.cli import bench_args


def test_wait_returns_as_soon_as_the_load_falls():
    loads, slept = iter([3.0, 2.0, 0.7, 0.1]), []
    assert quiet.wait_for_quiet(100, load=lambda: next(loads), sleep=slept.append, poll_s=10) == 0.7
    assert slept == [10, 10]


def test_wait_gives_up_after_max_wait_and_returns_the_last_load():
    slept = []
    assert quiet.wait_for_quiet(25, load=lambda: 4.0, sleep=slept.append, poll_s=10) == 4.0
    assert slept == [10, 10, 5]


def test_no_wait_on_a_quiet_machine_or_without_a_load_average():
    slept = []
    assert quiet.wait_for_quiet(600, load=lambda: 0.5, sleep=slept.append) == 0.5
    assert quiet.wait_for_quiet(600, load=lambda: None, sleep=slept.append) is None
    assert slept == []


def test_refusal_is_one_line_naming_the_load_and_the_way_out():
    assert quiet.refusal("prog", 0.9, 60) is None and quiet.refusal("prog", None, 60) is None
    message = quiet.refusal("prog", 2.34, 60)
    assert "\n" not in message and "2.3" in message and "--allow-load" in message and "docs/results/" in message


def test_banner_names_the_load_from_either_end_of_the_run():
    assert quiet.load_banner([0.5, 1, 1], [0.9, 1, 1]) == ""
    assert quiet.load_banner(None, None) == ""
    banner = quiet.load_banner([2.5, 1, 1], 0.4)
    assert banner.startswith("> Measured under load 2.5") and "start 2.5" in banner and "end 0.4" in banner
    assert quiet.load_banner(0.2, [3.0, 2, 1]).startswith("> Measured under load 3.0")


def test_writes_results_only_inside_docs_results(tmp_path):
    results = tmp_path / "docs" / "results"
    assert quiet.writes_results([str(results)], results)
    assert quiet.writes_results([None, str(results / "x.md")], results)
    assert not quiet.writes_results([str(tmp_path / "bench"), None], results)


def _args(out_dir, markdown=None, allow_load=False):
    return argparse.Namespace(out_dir=str(out_dir), markdown=markdown, load_wait=0.0, allow_load=allow_load)


def test_a_bench_refuses_docs_results_under_load(monkeypatch, capsys):
    monkeypatch.setattr(quiet, "wait_for_quiet", lambda max_wait_s: 3.0)
    assert bench_args.load_at_start(_args(quiet.RESULTS), "longformer-bench") is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("longformer-bench: error: the 1-minute load average is 3.0")
    assert len(bench_args.load_at_start(_args(quiet.RESULTS, allow_load=True), "longformer-bench")) == 3


def test_a_bench_elsewhere_neither_waits_nor_refuses(monkeypatch, tmp_path):
    def never(max_wait_s):
        raise AssertionError("waited for a run outside docs/results/")

    monkeypatch.setattr(quiet, "wait_for_quiet", never)
    assert len(bench_args.load_at_start(_args(tmp_path, markdown=str(tmp_path / "p.md")), "longformer-bench")) == 3


def test_a_markdown_page_into_docs_results_counts(monkeypatch):
    monkeypatch.setattr(quiet, "wait_for_quiet", lambda max_wait_s: 5.0)
    assert bench_args.load_at_start(_args("bench", markdown=str(quiet.RESULTS / "x.md")), "p") is None


def test_the_flags_are_not_settings_of_the_measurement():
    parser = argparse.ArgumentParser()
    bench_args.add_run_arguments(parser, unit="case", lengths=[8], lengths_help="", repeats=1, threads=1,
                                 time_cap=1.0, name="x")
    args = parser.parse_args(["--allow-load", "--load-wait", "5"])
    assert args.allow_load and args.load_wait == 5.0
    assert "allow_load" not in bench_args.settings(args) and "load_wait" not in bench_args.settings(args)
