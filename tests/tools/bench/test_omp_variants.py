"""longformer-bench train-steps --omp-variants: the rows timed quiet under several OpenMP wait
policies, each in processes of its own. What runs where and what the page says, never how fast:
the plumbing at the tiny size with one round, the summary and page from a record of known
numbers, and a bad variant as one line."""
import json

import pytest

from longformer_tools.bench import omp_variants
from longformer_tools.cli import bench
from longformer_tools.report import results_pages

VARIANTS = "spin10000,libgomp-default,passive"


def test_each_variant_runs_in_a_child_of_its_own_environment_and_the_page_renders_from_the_json(
        tmp_path, monkeypatch, capsys):
    out = tmp_path / "train_step_quickstart_omp.json"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # a caller's own choice reaches no child
    assert bench.main(["train-steps", "--device", "cpu", "--size", "tiny", "--rows", "longformer_mlm",
                       "--checkpointing", "off", "--max-batch", "2", "--repeats", "1", "--threads", "1",
                       "--omp-variants", VARIANTS, "--omp-rounds", "1", "--busy", "1", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    [only_round] = record["rounds"]
    assert sorted(only_round["order"]) == sorted(VARIANTS.split(","))
    for variant, run in only_round["runs"].items():
        # what the child's own os.environ held: the variant's variables and no other wait-policy one
        assert {k: v for k, v in run["omp_environment"].items() if v is not None} == omp_variants.variables(variant)
        assert run["threads"] == 1  # the parent's count in every child
        [row] = run["rows"]
        assert row["status"] == "ok" and row["batch"] == 2 and row["repeats"] == 1, row
        [busy_row] = run["busy_rows"]  # the same row again, beside the spin process
        assert busy_row["status"] == "ok" and busy_row["batch"] == 2, busy_row
    entries = {e["variant"]: e for e in record["summary"]}
    assert set(entries) == set(VARIANTS.split(","))
    assert entries["libgomp-default"]["ratio_median"] == 1.0
    spin = only_round["runs"]["spin10000"]["rows"][0]["tokens_per_s"]
    baseline = only_round["runs"]["libgomp-default"]["rows"][0]["tokens_per_s"]
    assert entries["spin10000"]["ratio_median"] == pytest.approx(spin / baseline)
    assert entries["spin10000"]["slowdown_median"] == pytest.approx(
        spin / only_round["runs"]["spin10000"]["busy_rows"][0]["tokens_per_s"])
    assert record["provenance"]["commit"]
    assert record["environment"]["command"].startswith("longformer-bench train-steps")
    # the page beside it is what results_pages renders from the JSON alone
    monkeypatch.setattr(results_pages, "RESULTS", str(tmp_path))
    page = out.with_suffix(".md").read_text()
    assert results_pages.render("train_step_quickstart_omp.md") == page
    assert "| longformer_mlm | off | passive |" in page and "slowdown beside the busy process(es)" in page
    assert "train_step_quickstart_omp.md" in results_pages.FIRST_WRITTEN_BY_REGENERATE  # until its first run
    assert "round 1 passive" in capsys.readouterr().out


def test_a_child_environment_holds_only_its_variants_wait_policy():
    caller = {"OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "5", "KMP_BLOCKTIME": "0", "PATH": "/bin"}
    assert omp_variants.variant_environment("passive", caller) == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE"}
    assert omp_variants.variant_environment("spin10000", caller) == {"PATH": "/bin", "GOMP_SPINCOUNT": "10000"}
    assert omp_variants.variant_environment("libgomp-default", caller) == {"PATH": "/bin", "GOMP_SPINCOUNT": "300000"}



def test_the_parent_waits_for_a_child_as_long_as_its_quiet_and_busy_timings_may_take(monkeypatch):
    """The bound of one timing (train_steps.time_bound) is also its spinners' own; with --busy a
    child times twice, so the parent waits twice that before it kills the child."""
    from longformer_tools.bench import train_steps

    waits = []
    monkeypatch.setattr(omp_variants, "_child_run", lambda variant, spec, timeout_s: (
        waits.append(timeout_s), {"status": "error", "note": "not started"})[1])
    spec = dict(rows=["longformer_mlm", "char_lm"], checkpointing=[False, True], time_cap=60.0, threads=1)
    bound = train_steps.time_bound(spec["time_cap"], spec["rows"], spec["checkpointing"])
    assert bound == 600 + 4 * 60.0 * 2 * 2
    for busy, wait in ((0, bound), (1, 2 * bound)):
        waits.clear()
        omp_variants.compare(["libgomp-default"], 1, dict(spec, busy=busy), progress=lambda line: None)
        assert waits == [wait]

def _row(tokens_per_s: float) -> dict:
    return {"name": "longformer_mlm", "checkpointing": False, "status": "ok", "note": "", "tokens_per_s": tokens_per_s}


def _run(variant: str, tokens_per_s: float, threads: int = 2) -> dict:
    return {"rows": [_row(tokens_per_s)], "threads": threads}


def test_a_spin_variant_sets_that_spin_count_and_only_it():
    assert omp_variants.parse_variants("spin100000,libgomp-default") == ["spin100000", "libgomp-default"]
    assert omp_variants.variant_environment("spin030000", {"OMP_WAIT_POLICY": "PASSIVE", "PATH": "/bin"}) == {
        "PATH": "/bin", "GOMP_SPINCOUNT": "30000"}


def test_with_busy_rows_each_variant_reports_its_own_quiet_over_busy_slowdown():
    variants = ["spin100000", "libgomp-default"]
    quiet = {"spin100000": [100, 90, 110], "libgomp-default": [100, 100, 100]}
    busy = {"spin100000": [50, 45, 22], "libgomp-default": [10, 20, 25]}
    rounds = [{"order": variants, "runs": {v: dict(_run(v, quiet[v][r]), busy_rows=[_row(busy[v][r])])
                                           for v in variants}} for r in range(3)]
    rounds[1]["runs"]["libgomp-default"]["busy_rows"][0].update(status="error", note="out of memory")
    record = {"omp_variants": variants, "variant_environment": {v: omp_variants.variables(v) for v in variants},
              "omp_rounds": 3, "settings": {"repeats": 5, "threads": 2, "busy": 1}, "rounds": rounds,
              "environment": {"command": "longformer-bench train-steps --busy 1 --omp-variants spin100000,libgomp-default",
                              "thread_policy": "2 (--threads)"}}
    record["summary"] = omp_variants.summary(record)
    entries = {e["variant"]: e for e in record["summary"]}
    assert (entries["spin100000"]["slowdown_median"], entries["spin100000"]["slowdown_max"]) == (2, 5)
    assert entries["libgomp-default"]["slowdown_median"] == 7  # of rounds 1 and 3: 10 and 4
    assert omp_variants.failures(record) == ["round 2 libgomp-default longformer_mlm busy: error out of memory"]
    page = omp_variants.page(record, "docs/results/x.json")
    assert "quiet and busy tokens/s" in page and "beside 1 spin process(es)" in page
    assert "| longformer_mlm | off | spin100000 | 100 (90-110) | 1.000 (0.900-1.100) | 2.00 (2.00-5.00) |" in page


def test_the_summary_takes_ratios_per_round_and_leaves_out_what_was_not_measured_as_asked():
    variants = ["spin10000", "libgomp-default", "passive"]
    tokens = {"spin10000": [96, 100, 104, 90, 98], "libgomp-default": [100, 100, 100, 100, 100],
              "passive": [50, 60, 40, 70, 55]}
    rounds = [{"order": variants, "runs": {v: _run(v, tokens[v][r]) for v in variants}} for r in range(5)]
    rounds[4]["runs"]["passive"] = {"status": "error", "note": "the child exited 1: boom"}
    rounds[3]["runs"]["spin10000"] = _run("spin10000", 1000, threads=1)  # not the count asked: left out
    record = {"omp_variants": variants, "variant_environment": {v: omp_variants.variables(v) for v in variants},
              "omp_rounds": 5, "settings": {"repeats": 5, "threads": 2}, "rounds": rounds,
              "environment": {"command": "longformer-bench train-steps --omp-variants " + ",".join(variants),
                              "thread_policy": "2 (--threads)"}}
    record["summary"] = omp_variants.summary(record)
    entries = {e["variant"]: e for e in record["summary"]}
    assert entries["spin10000"]["rounds"] == 4 and entries["spin10000"]["tokens_per_s_median"] == 99
    assert (entries["spin10000"]["ratio_min"], entries["spin10000"]["ratio_max"]) == (0.96, 1.04)
    assert entries["passive"]["rounds"] == 4 and entries["passive"]["tokens_per_s_median"] == 55
    assert omp_variants.failures(record) == ["round 4 spin10000: ran at 1 threads, not 2",
                                             "round 5 passive: the child exited 1: boom"]
    page = omp_variants.page(record, "docs/results/x.json")
    assert "| longformer_mlm | off | spin10000 | 99 (96-104) | 0.990 (0.960-1.040) |" in page
    assert "run at 0.990x libgomp-default's tokens/s" in page and ": within the 5% of issue 51" in page
    assert "Left out above: round 4 spin10000: ran at 1 threads, not 2; round 5 passive" in page


@pytest.mark.parametrize("flags,message", [
    (["--omp-variants", "spin10000,spinny,libgomp-default"], "--omp-variants: unknown spinny; choose from "),
    (["--omp-variants", "spin10000,passive"], "--omp-variants: add libgomp-default"),
    # the project sets no wait policy of its own: libgomp-default is what its processes run under
    (["--omp-variants", "project,libgomp-default"], "--omp-variants: unknown project; choose from "),
    (["--omp-variants", "spin-5,libgomp-default"], "--omp-variants: unknown spin-5; choose from "),
    (["--omp-variants", VARIANTS, "--omp-rounds", "0"], "--omp-rounds must be >= 1"),
])
def test_a_bad_omp_option_is_one_line_and_measures_nothing(flags, message, tmp_path, capsys):
    out = tmp_path / "omp.json"
    assert bench.main(["train-steps", "--device", "cpu", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())
