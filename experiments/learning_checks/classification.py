"""Classification head: which of four KJV names the needle sentences of a document name, the needles
beyond <s>'s local reach (global_ablation's needle documents), so the head must learn through <s>'s
global attention. Control: the majority class of train."""
import collections
import json
import random
from pathlib import Path

from longformer_experiments.global_ablation.needles import build_examples, corpus_pools, NAMES, receptive_field
from longformer_experiments.learning_checks import common
from longformer_experiments.learning_checks.training import Model, curve, fine_tune, timed
from longformer_experiments.runner import KJV, last_valid

NAME = "learning_classification"
MARGIN = 20.0
BUDGETS = {"full": {"train": 800, "valid": 200, "doc_words": 120, "updates": 200, "batch_size": 16, "lr": 1e-3,
                    "validate_every": 40, "vocab": 800},
           "tiny": {"train": 32, "valid": 16, "doc_words": 60, "updates": 2, "batch_size": 8, "lr": 1e-3,
                    "validate_every": 1, "vocab": 500}}


def build(work: Path, budget: dict, model: Model) -> tuple:
    """The JSON lines and binaries; (data folder, majority-class accuracy on valid)."""
    pools, rng = corpus_pools(KJV, NAMES, 1), random.Random(1)
    raw = work / "json"
    raw.mkdir(parents=True, exist_ok=True)
    split = {}
    for name in ("train", "valid"):
        split[name] = build_examples(pools[name], budget[name], budget["doc_words"],
                                     receptive_field(model.layers, model.window), 2, rng)
        (raw / f"{name}.jsonl").write_text("".join(json.dumps({"text": e["text"], "label": e["label"]}) + "\n"
                                                   for e in split[name]))
    majority, _ = collections.Counter(e["label"] for e in split["train"]).most_common(1)[0]
    baseline = 100.0 * sum(e["label"] == majority for e in split["valid"]) / len(split["valid"])
    data = common.prepare("classification", {"train": raw / "train.jsonl", "valid": raw / "valid.jsonl"},
                          work / "data", "--train-sentencepiece", str(budget["vocab"]))
    return data, baseline


def run(work: Path, budget_name: str, seeds) -> dict:
    budget, model = BUDGETS[budget_name], Model()
    data, baseline = build(work, budget, model)

    def one(seed):
        log, seconds = timed(fine_tune, data, "longformer_classification", work / "logs" / f"seed{seed}.log", model,
                             updates=budget["updates"], batch_size=budget["batch_size"], lr=budget["lr"], seed=seed,
                             validate_every=budget["validate_every"])
        return {"accuracy": last_valid(log, "accuracy"), "curve": curve(log, "accuracy"), "seconds": seconds}
    runs = common.per_seed(one, seeds)
    accuracy = {s: r["accuracy"] for s, r in runs.items()}
    majority = {s: baseline for s in runs}
    criterion = (f"valid accuracy, mean over seeds, at least {MARGIN:.0f} points above the majority class of "
                 "train (chance for balanced labels)")
    about = (f"Four-way needle classification: {budget['train']} train / {budget['valid']} valid documents of "
             f"<= {budget['doc_words']} KJV words, two sentences naming the label ({', '.join(NAMES)}) at word >= "
             f"{receptive_field(model.layers, model.window)} (beyond <s>'s {model.layers} x {model.window}-token "
             f"local reach); a {model.layers}-layer x {model.dim} Longformer from scratch, window {model.window}, "
             "global attention on <s>.")
    return common.result(NAME, "Learning check: classification head", about, criterion, "valid accuracy (%)",
                         [common.row("model", "model", accuracy), common.row("majority class", "baseline", majority)],
                         {f"seed {s}": r["curve"] for s, r in runs.items()},
                         {**budget, "layers": model.layers, "dim": model.dim, "window": model.window}, seeds,
                         common.margin_check(accuracy, majority, MARGIN))
