"""--threads of the benchmark commands under the thread policy (``bench_args.resolve_threads``):
the command's default gives way to OMP_NUM_THREADS and LONGFORMER_THREADS=auto, an explicit
--threads N to nothing; an auto run records "auto" and the counts, and its busy section says so."""
import argparse

import pytest

from longformer_common import free_cores
from longformer_tools.bench import bench_args, busy_mode


def _args(argv, monkeypatch, environ, free=1):
    for name in ("OMP_NUM_THREADS", "LONGFORMER_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(free_cores, "free_cores", lambda interval=0.2: free)
    monkeypatch.setattr(bench_args.torch, "get_num_threads", lambda: 2)
    parser = argparse.ArgumentParser()
    bench_args.add_run_arguments(parser, unit="case", lengths=[16], lengths_help="", repeats=1, threads=2,
                                 time_cap=1.0, name="x")
    args = parser.parse_args(argv)
    bench_args.resolve_threads(args)
    return args


@pytest.mark.parametrize("argv, environ, threads, auto", [
    ([], {}, 2, False),  # the command's default
    ([], {"OMP_NUM_THREADS": "1"}, 1, False),  # the user's count beats the default
    ([], {"LONGFORMER_THREADS": "auto"}, 1, True),  # ... and so does auto
    (["--threads", "2"], {"OMP_NUM_THREADS": "1", "LONGFORMER_THREADS": "auto"}, 2, False),  # explicit wins
    (["--threads", "auto"], {"OMP_NUM_THREADS": "1"}, 1, False),  # an explicit count beats auto
    (["--threads", "auto"], {}, 1, True),
])
def test_precedence_of_the_benchmarks_threads(monkeypatch, argv, environ, threads, auto):
    args = _args(argv, monkeypatch, environ)
    assert (args.threads, args.auto_threads) == (threads, auto)


def test_an_auto_run_records_auto_and_the_counts(monkeypatch):
    args = _args(["--threads", "auto"], monkeypatch, {}, free=2)
    recorded = bench_args.settings(args)
    assert recorded["threads"] == "auto" and recorded["threads_quiet"] == 2
    assert recorded["thread_policy"].startswith("auto (--threads auto")
    report = {"settings": recorded, "busy_results": [{"threads": 1}, {"threads": 1}]}
    assert busy_mode.threads_line(report).startswith(f"Threads: {recorded['thread_policy']}; 2 quiet, 1 beside")
    assert busy_mode.threads_line({"settings": {"threads": 2}}) == ""  # a run before the policy: no line
