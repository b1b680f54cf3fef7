"""recipes/table5_small.sh -> python -m longformer_experiments.table5_small (the paper's Table 5
in small): the shell recipe passes its settings and stops on bad ones, and the shape checks
decide the exit status (the run itself takes 15-25 minutes: not run here)."""
import os
import subprocess

from longformer_experiments.table5_small import table as t5_table
from longformer_experiments.table5_small.main import build_parser, page
from tests.conftest import REPO

TABLE5 = REPO / "recipes" / "table5_small.sh"


def test_table5_recipe_passes_its_settings_and_stops_on_bad_ones(tmp_path):
    """The shell recipe reaches the script with the environment as flags; a bad combination stops
    before anything is written (the run itself takes 15-25 minutes: not run here)."""
    out = tmp_path / "t5"
    env = dict(os.environ, OMP_NUM_THREADS="1", OUT=str(out), LENGTH="30", BATCH_TOKENS="1000")
    done = subprocess.run(["bash", str(TABLE5)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode != 0
    assert "--batch-tokens 1000 must be a multiple of 4L = 120" in done.stderr
    assert not out.exists()
    helped = subprocess.run(["bash", str(TABLE5), "--help"], capture_output=True, text=True,
                            timeout=120)
    assert helped.returncode == 0 and "--roberta-updates" in helped.stdout
    assert "python -m longformer_experiments.table5_small" in helped.stdout


def _bpc(bpc, without=None):
    return {"bpc": bpc, "bpc_without_tile_starts": bpc if without is None else without, "tile_start_bpc": None,
            "masked_tokens": 100, "tile_start_tokens": 3}


def test_table5_shape_checks_decide_the_exit_status():
    # the paper's shape (its Table 5, base): copy near RoBERTa, random far; more updates help
    paper = {key: _bpc(value) for key, value in t5_table.PAPER.items()}
    checks = t5_table.shape_checks(paper)
    assert all(checks[name] for name in t5_table.REQUIRED_CHECKS), checks
    # a copy no better than random initialisation fails the table
    broken = dict(paper, copy=_bpc(11.0))  # further from RoBERTa (1.846) than random (10.299)
    checks = t5_table.shape_checks(broken)
    assert not checks["copy_closer_than_random"] and not checks["copy_far_closer_than_random_without_tile_starts"]
    # continued pretraining that does not improve on the copy fails it too
    stalled = dict(paper, short=_bpc(2.0), long=_bpc(2.0))
    checks = t5_table.shape_checks(stalled)
    assert not checks["short_better_than_copy"] and not checks["long_better_than_copy"]
    args = build_parser().parse_args([])
    table = t5_table.markdown(paper, args)
    assert table.count("\n| ") == len(t5_table.ROWS) and "| 1.846 |" in table  # one line per row after the header


def test_table5_page_is_rendered_from_its_report_alone():
    """The page --results-page writes (docs/results/table5_small.md) comes from the stored report:
    the table, where it was measured and the command as run."""
    paper = {key: _bpc(value) for key, value in t5_table.PAPER.items()}
    argv = ["--length", "16", "--results-page", "docs/results/table5_small.md"]
    report = {"results": paper, "settings": vars(build_parser().parse_args(argv)), "argv": argv,
              "provenance": {"commit": "abc123", "cpu": "some CPU", "date": "2026-11-26 22:00 UTC"}}
    text = page(report)
    assert text.startswith(t5_table.markdown(paper, build_parser().parse_args(argv)))
    assert "Measured on commit abc123, some CPU, 2026-11-26 22:00 UTC." in text
    assert text.rstrip().endswith("`python -m longformer_experiments.table5_small --length 16 --results-page "
                                  "docs/results/table5_small.md` (from the repository root).")
