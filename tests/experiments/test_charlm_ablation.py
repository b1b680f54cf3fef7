"""longformer_experiments.charlm_ablation (the paper's Table 4 in small): the rows' windows and dilations, the
ordering check and its verdict on known numbers, and the recipe end to end in a tiny setting
(one seed, a few updates: the table is produced and every value is finite)."""
import json
import math
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from longformer_experiments.charlm_ablation import main as ablation
from longformer_experiments.runner import summarize
from tests.conftest import KJV, REPO


def test_rows_are_the_papers_windows_and_dilation():
    patterns = ablation.row_patterns(layers=4, heads=4, bottom=16, top=128)
    assert patterns["increasing"] == ("16,32,64,128", "1")
    assert patterns["decreasing"] == ("128,64,32,16", "1")
    assert patterns["fixed"] == ("60", "1")  # the mean of the increasing windows
    # dilation on the last 2 heads of the upper half of the layers, gaps 1 and 2 (d = 2, 3)
    assert patterns["dilated"] == ("16,32,64,128", "1:1:1:1,1:1:1:1,1:1:2:2,1:1:3:3")


def test_relative_positions_by_default_learned_on_request(tmp_path):
    """Every run of a table uses the same positions: the paper's relative ones unless --positions
    learned; the checkpoints' saved flags say which (fairseq-eval-lm builds the model from them)."""
    for extra, relative in (([], True), (["--positions", "learned"], False)):
        a = ablation.build_parser().parse_args(extra)
        command = ablation.train_cmd(a, tmp_path, tmp_path / "save", "8,16", "1", seed=1)
        assert ("--relative-positions" in command) == relative
        assert f"{a.positions} positions" in ablation.markdown(
            {k: {"values": [2.0], **summarize([2.0])} for k, _ in ablation.ROWS}, _settings(a),
            {k: k for k, _ in ablation.ROWS}, {k: ("8,16", "1") for k, _ in ablation.ROWS}, {})


def _settings(a):
    a.seeds = [1]
    return a


def _table(means, spread=0.01):
    """Rows as two seeds at mean - spread and mean + spread would give."""
    return {key: {"mean": mean, "spread": spread, "min": mean - spread, "max": mean + spread}
            for key, mean in means.items()}


def test_ordering_and_verdict_on_known_numbers():
    paper = _table({"decreasing": 1.24, "fixed": 1.23, "increasing": 1.21, "dilated": 1.20}, spread=0.001)
    checks = ablation.ordering(paper, seeds=2)
    assert all(c["holds"] and c["resolved"] for c in checks.values())
    assert checks["increasing < fixed"]["gap"] == pytest.approx(0.02)
    assert ablation.verdict(checks).startswith("The paper's ordering holds")
    # increasing worse than fixed on the means, every gap inside the seed spread: undetermined, not "does not hold"
    swapped = _table({"decreasing": 1.24, "fixed": 1.21, "increasing": 1.23, "dilated": 1.22}, spread=0.05)
    checks = ablation.ordering(swapped, seeds=2)
    assert not checks["increasing < fixed"]["holds"] and checks["fixed < decreasing"]["holds"]
    text = ablation.verdict(checks)
    assert text.startswith("The paper's ordering is undetermined") and "does NOT hold" not in text
    assert "increasing < fixed (against the paper on the means)" in text
    assert "fixed < decreasing (with the paper on the means)" in text
    # the same gaps beyond the seed spread: increasing < fixed does not hold, the others hold
    apart = _table({"decreasing": 1.24, "fixed": 1.21, "increasing": 1.23, "dilated": 1.22}, spread=0.001)
    checks = ablation.ordering(apart, seeds=2)
    text = ablation.verdict(checks)
    assert text == "The paper's ordering does NOT hold at this scale: not increasing < fixed (beyond the seed spread)."
    # one gap against the paper beyond the spread, one inside it
    mixed = {**apart, **_table({"dilated": 1.225}, spread=0.01)}
    text = ablation.verdict(ablation.ordering(mixed, seeds=2))
    assert text.startswith("The paper's ordering does NOT hold at this scale: not increasing < fixed")
    assert text.endswith("within the seed spread (undetermined): dilated < increasing (with the paper on the means).")
    # one seed: no spread, so nothing is called resolved or unresolved
    checks = ablation.ordering(_table({"decreasing": 3, "fixed": 2, "increasing": 1, "dilated": 0}, 0), seeds=1)
    assert {c["resolved"] for c in checks.values()} == {None}
    assert "undetermined" in ablation.verdict(checks) and "one seed only" in ablation.verdict(checks)


def test_tiny_recipe_prints_a_finite_table(tmp_path):
    books = tmp_path / "kjv"
    books.mkdir()
    for name in ("08-Ruth.txt", "65-Jude.txt"):
        shutil.copy(KJV / name, books / name)
    out = tmp_path / "out"
    flags = ["--out", str(out), "--kjv", str(books), "--seeds", "1", "--updates", "3", "--layers", "3", "--dim", "32",
             "--heads", "4", "--bottom", "4", "--top", "16", "--sequence", "128", "--context", "64",
             "--batch-size", "4", "--parallel", "2"]
    command = [sys.executable, "-m", "longformer_experiments.charlm_ablation", *flags]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO,
                               env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    report = json.loads((out / "ablation.json").read_text())
    assert list(report["table"]) == ["decreasing", "fixed", "increasing", "dilated"]
    for row in report["table"].values():
        assert len(row["values"]) == 1 and all(math.isfinite(v) and 0 < v < 10 for v in row["values"])
        assert row["spread"] == 0
    table = (out / "ablation.md").read_text()
    assert table.strip() in completed.stdout
    lines = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(lines) == 5  # header + 4 rows
    assert "Decreasing w (from 16 to 4)" in table and "Fixed w (= 9, the mean)" in table
    assert report["verdict"] in table and "one seed only" in report["verdict"]
    # the table names the command that regenerates it
    assert table.strip().endswith(f"`{shlex.join(['python', '-m', 'longformer_experiments.charlm_ablation', *flags])}`"
                                  " (from the repository root).")
