"""The paper's Table 10 ordering on the WikiHop check's data: global attention with its own
projections above shared projections above no global attention (3 seeds; a gap inside the seed
spread is undetermined). The candidates sit beyond the needles' local reach, so without global
attention the head can only guess: that row is the floor. Every row trains with the check's
FROM_SCRATCH flags (``wikihop.train_rows``); under ``--no-global-projections`` the identity start
sets the shared Q and K."""
from pathlib import Path

from longformer_experiments.learning_checks import common, wikihop
from longformer_experiments.learning_checks.page import ordering_sentence

ROWS = {"own global projections": ["--global-classes", "question,candidate"],
        "shared projections": ["--global-classes", "question,candidate", "--no-global-projections"],
        "no global attention": ["--global-attention", "none"]}


def run(work: Path, budget_name: str, seeds) -> dict:
    budget = wikihop.BUDGETS[budget_name]
    runs = wikihop.train_rows(work, budget_name, seeds, ROWS)
    table = [common.row(row, "row", {s: r["accuracy"] for s, r in runs[row].items()}) for row in ROWS]
    table.append(common.row("random candidate", "baseline", {s: 100.0 / wikihop.CANDIDATES for s in map(str, seeds)}))
    own, shared, none, _ = table
    verdicts = [ordering_sentence("own projections above shared (paper: shared -1.6 points)", own, shared),
                ordering_sentence("shared projections above no global attention (paper: none -8.3 points)", shared,
                                  none),
                ordering_sentence("own projections above no global attention", own, none)]
    return common.result("ordering_wikihop", "Ordering: WikiHop global projections (own, shared, none)",
                         wikihop.about(budget, wikihop.Model()), "the paper's Table 10 ordering: own global "
                         "projections > shared projections > no global attention; valid accuracy",
                         "valid accuracy (%)", table,
                         {f"{row} seed {s}": r["curve"] for row in ROWS for s, r in runs[row].items()},
                         {**budget, "layers": 2, "dim": 64, "window": 16}, seeds, {"passed": None}, verdicts)
