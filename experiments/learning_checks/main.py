"""The command: every learning check and ordering (or those of --only), each page written with its
controls, curve and provenance; exit status 1 when a check missed its pass criterion."""
import argparse
import importlib
import sys
import time
from pathlib import Path

import longformer_experiments.learning_checks as package
from longformer_common import quiet
from longformer_common.provenance import provenance
from longformer_experiments.learning_checks import page
from longformer_experiments.learning_checks.training import LoadSampler
from longformer_experiments.runner import REPO

MODULE = "longformer_experiments.learning_checks"
# name -> module of longformer_experiments.learning_checks with run(work, budget, seeds) -> result(s)
CHECKS = {"classification": "classification", "qa": "extractive_qa", "wikihop": "wikihop",
          "hotpotqa": "hotpotqa", "coref": "coref"}
# (hotpotqa writes its ordering page too: two stages against one, from the same runs)
ORDERINGS = {"coref_ordering": "coref_ordering", "wikihop_ordering": "wikihop_ordering"}
ALL = {**CHECKS, **ORDERINGS}
DEFAULT_SEEDS = {**{name: [1, 2] for name in CHECKS}, **{name: [1, 2, 3] for name in ORDERINGS}, "hotpotqa": [1, 2, 3]}


def parse_args(argv):
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=package.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", choices=sorted(ALL), metavar="NAME",
                   help="run only these (default: all): " + ", ".join(ALL))
    p.add_argument("--write-docs", action="store_true", help="write the pages into docs/results/ (else into --out)")
    p.add_argument("--out", type=Path, default=REPO / "work" / "learning_checks",
                   help="working folder (data, logs; the pages under pages/ without --write-docs)")
    p.add_argument("--budget", choices=("full", "tiny"), default="full",
                   help="tiny: a few updates on a few examples, to show the pipeline runs (no learning)")
    p.add_argument("--seeds", type=int, nargs="+", help="training seeds (default: 2 per check, 3 per ordering)")
    quiet.add_load_arguments(p)
    return p.parse_args(argv)


def run_one(name: str, a, argv) -> list:
    """The results of one check or ordering, each with the run's provenance, load and argv."""
    module = importlib.import_module(f"{MODULE}.{ALL[name]}")
    seeds = a.seeds or DEFAULT_SEEDS[name]
    started = time.time()
    with LoadSampler() as load:
        found = module.run(a.out / name, a.budget, seeds)
    results = found if isinstance(found, list) else [found]
    for result in results:
        result.update({"load": load.summary(), "provenance": provenance(), "seconds": round(time.time() - started),
                       "argv": ["--write-docs", "--only", name] + (["--budget", a.budget] if a.budget != "full" else [])
                       + ([f"--seeds", *map(str, a.seeds)] if a.seeds else [])})
    return results


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parse_args(argv)
    folder = REPO / "docs" / "results" if a.write_docs else a.out / "pages"
    if quiet.load_at_start(f"python -m {MODULE}", [str(folder)], a.load_wait, a.allow_load) is None:
        return 2  # a busy machine and no --allow-load: nothing written (the refusal is printed)
    missed = []
    for name in a.only or list(ALL):
        for result in run_one(name, a, argv):
            written = page.write(result, folder)
            state = {True: "PASSED", False: "MISSED", None: "written"}[result.get("passed")]
            print(f"{result['name']}: {state} ({result.get('criterion_check', '')}) -> {written}", flush=True)
            if result.get("passed") is False:
                missed.append(result["name"])
    if missed:
        print("missed their pass criterion: " + ", ".join(missed), file=sys.stderr)
        return 1
    return 0
