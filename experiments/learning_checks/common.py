"""Pieces every check's pipeline uses: preparing a task's binaries, running the seeds two at a time
(one per core), and a check's result in the shape ``page`` renders."""
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Dict, List, Sequence

from longformer_experiments.learning_checks.training import BIN
from longformer_experiments.runner import run, summarize

PARALLEL_RUNS = 2  # the machine's cores; every fairseq process runs one thread


def prepare(task: str, files: Dict[str, Path], destdir: Path, *flags: str) -> Path:
    """longformer-prepare-task ``task`` from ``files`` (split -> file) into ``destdir``."""
    cmd = [str(BIN / "longformer-prepare-task"), task, "--destdir", str(destdir), "--overwrite", *flags]
    for split, path in files.items():
        cmd += [f"--{split}", str(path)]
    run(f"prepare {destdir.name}", cmd, destdir.parent / f"{destdir.name}.prepare.log")
    return destdir


def per_seed(function: Callable[[int], dict], seeds: Sequence[int]) -> Dict[str, dict]:
    """str(seed) -> ``function(seed)``, PARALLEL_RUNS seeds at a time."""
    with ThreadPoolExecutor(PARALLEL_RUNS) as pool:
        done = list(pool.map(function, seeds))
    return {str(s): d for s, d in zip(seeds, done)}


def margin_check(model: Dict[str, float], baseline: Dict[str, float], margin: float) -> Dict:
    """The criterion "the model's mean at least ``margin`` points above the baseline's mean":
    passed and the sentence saying by how much."""
    m, b = summarize(list(model.values()))["mean"], summarize(list(baseline.values()))["mean"]
    passed = m >= b + margin
    return {"passed": passed, "criterion_check": f"model {m:.2f} against baseline {b:.2f}: {m - b:+.2f} points "
                                                  f"({'at least' if passed else 'LESS than'} the {margin:.0f} asked)"}


def result(name: str, title: str, about: str, criterion: str, metric: str, rows: List[dict],
           curves: Dict[str, list], budget: dict, seeds: Sequence[int], check: Dict, verdicts=()) -> dict:
    """A check's result (page.py's shape) without the run's provenance, load and argv."""
    return {"name": name, "title": title, "about": about, "criterion": criterion, "metric": metric, "rows": rows,
            "curves": curves, "budget": budget, "seeds": list(seeds), "verdicts": list(verdicts), **check}


def row(label: str, kind: str, values: Dict[str, float]) -> dict:
    return {"label": label, "kind": kind, "values": {str(k): round(float(v), 2) for k, v in values.items()}}
