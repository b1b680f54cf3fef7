"""WikiHop head: which of four candidate names the needle sentences of a support name (wikihop_small's
qangaroo records), the needles beyond every candidate's local reach. Control: a random candidate
(100 / candidates). The rows of ``wikihop_ordering`` train the same data with other global
attention; this check trains the task's default (question and candidates global, own projections).

Every row trains a from-scratch model in the two ways the paper's pretrained start makes needless
(FROM_SCRATCH): its global Q and K start as a scaled identity (``--global-init identity``,
models/global_projections.py) and each candidate is scored at its name's first token instead of
its ``[ent]`` marker (``--score-at-name``). The paper copies Q_g, K_g from a pretrained RoBERTa's
Q, K; copies of a from-scratch model's random ones leave a global token's attention uniform over
the input, the name's mentions one key among hundreds, and the head stays at the uniform loss,
predicting one slot on every seed (valid 19.5, the share of slot 3). With the identity start a
global name token attends to the support's mentions of its own name; the ``[ent]`` marker, the
same token for every candidate, would first have to learn to attend to the name beside it (with
the identity start and [ent] scoring, training accuracy rose while valid stayed at chance)."""
import json
import random
from pathlib import Path

from longformer_experiments.global_ablation.needles import NAMES, build_examples, corpus_pools, receptive_field
from longformer_experiments.learning_checks import common
from longformer_experiments.learning_checks.training import Model, curve, fine_tune, timed
from longformer_experiments.runner import KJV, last_valid
from longformer_experiments.wikihop_small.main import wikihop_records

NAME = "learning_wikihop"
MARGIN = 20.0
CANDIDATES = 4
# what a from-scratch model needs that a pretrained one has (the module docstring says why), in every row
FROM_SCRATCH = ["--global-init", "identity", "--score-at-name"]
BUDGETS = {"full": {"train": 1600, "valid": 200, "doc_words": 120, "updates": 400, "batch_size": 16, "lr": 1e-3,
                    "validate_every": 50, "vocab": 1000},
           "tiny": {"train": 32, "valid": 16, "doc_words": 60, "updates": 2, "batch_size": 8, "lr": 1e-3,
                    "validate_every": 1, "vocab": 500}}


def build(work: Path, budget: dict, model: Model) -> Path:
    pools, rng = corpus_pools(KJV, NAMES, 1), random.Random(1)
    raw = work / "json"
    raw.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid"):
        examples = build_examples(pools[split], budget[split], budget["doc_words"],
                                  receptive_field(model.layers, model.window), 2, rng)
        (raw / f"{split}.json").write_text(json.dumps(wikihop_records(examples, CANDIDATES, rng, split)))
    return common.prepare("wikihop", {"train": raw / "train.json", "valid": raw / "valid.json"}, work / "data",
                          "--train-sentencepiece", str(budget["vocab"]))


def train_rows(work: Path, budget_name: str, seeds, rows: dict) -> dict:
    """row -> str(seed) -> {accuracy, curve, seconds}: each row (its fairseq-train flags) per seed."""
    budget, model = BUDGETS[budget_name], Model()
    data = build(work, budget, model)
    jobs = [(row, seed) for row in rows for seed in seeds]

    def one(job):
        row, seed = job
        tag = "".join(c if c.isalnum() else "_" for c in row)
        log, seconds = timed(fine_tune, data, "longformer_wikihop", work / "logs" / f"{tag}.seed{seed}.log", model,
                             updates=budget["updates"], batch_size=budget["batch_size"], lr=budget["lr"], seed=seed,
                             validate_every=budget["validate_every"], extra=[*FROM_SCRATCH, *rows[row]])
        return {"accuracy": last_valid(log, "accuracy"), "curve": curve(log, "accuracy"), "seconds": seconds}
    done = common.per_seed(one, jobs)
    out = {row: {} for row in rows}
    for (row, seed), result in zip(jobs, done.values()):
        out[row][str(seed)] = result
    return out


def about(budget: dict, model: Model) -> str:
    return (f"{budget['train']} train / {budget['valid']} valid qangaroo-format questions: one support of <= "
            f"{budget['doc_words']} KJV words with two sentences naming the answer among {CANDIDATES} candidates "
            f"({', '.join(NAMES)}) at support word >= {receptive_field(model.layers, model.window)} (beyond every "
            f"candidate's {model.layers} x {model.window}-token local reach); a {model.layers}-layer x {model.dim} "
            f"Longformer from scratch, window {model.window}, its global Q and K started as a scaled identity "
            f"(a global token first attends to copies of its own token; the paper copies a pretrained "
            f"RoBERTa's Q and K instead) and each candidate scored at its name's first token (the "
            f"paper: at its [ent] marker, which a from-scratch model would first have to link to its name).")


def run(work: Path, budget_name: str, seeds) -> dict:
    budget, model = BUDGETS[budget_name], Model()
    runs = train_rows(work, budget_name, seeds, {"default": []})["default"]
    accuracy = {s: r["accuracy"] for s, r in runs.items()}
    chance = {s: 100.0 / CANDIDATES for s in runs}
    criterion = (f"valid accuracy, mean over seeds, at least {MARGIN:.0f} points above choosing a random candidate "
                 f"({100.0 / CANDIDATES:.0f}%)")
    return common.result(NAME, "Learning check: WikiHop head", about(budget, model) + " Global attention on the "
                         "question and the candidates (own global projections).", criterion, "valid accuracy (%)",
                         [common.row("model", "model", accuracy), common.row("random candidate", "baseline", chance)],
                         {f"seed {s}": r["curve"] for s, r in runs.items()},
                         {**budget, "layers": model.layers, "dim": model.dim, "window": model.window}, seeds,
                         common.margin_check(accuracy, chance, MARGIN))
