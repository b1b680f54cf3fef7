"""The paper's coreference ordering, sized down: reading a document whole (Longformer) against
encoding it in segments of S subwords separately (RoBERTa's 512, here S = 128). Every later
mention lies 140-180 words (more than S subwords: every word is a subword or more) after the
previous one and names the entity by another word for its role ("the minister" for "NAME the
priest"), so string matching cannot link it (its row shows it), and the encoder's layers x window
(2 x 160 subwords each way) reach across the gap when it reads the document whole. 3 seeds; a gap
inside the seed spread is undetermined."""
from pathlib import Path

from longformer_experiments.learning_checks import common, coref
from longformer_experiments.learning_checks.page import ordering_sentence
from longformer_experiments.learning_checks.training import Model, curve, fine_tune
from longformer_experiments.runner import last_valid

SEGMENT = 128
GAP = (140, 180)  # words from one mention to the next
MODEL = Model(layers=2, window=160, positions=1280)
ROWS = {"whole document": [], f"{SEGMENT}-subword segments": ["--segment-length", str(SEGMENT)]}
BUDGETS = {"full": {"train": 300, "valid": 20, "mentions": 2, "updates": 800, "lr": 1e-3, "validate_every": 200,
                    "ffnn": 64, "vocab": 1000},
           "tiny": coref.BUDGETS["tiny"]}


def run(work: Path, budget_name: str, seeds) -> dict:
    budget = BUDGETS[budget_name]
    data, subsets = coref.prepare(work, budget, "far", {"valid": ("far", 21)}, GAP, aliases=True)
    jobs = [(row, seed) for row in ROWS for seed in seeds]

    def one(job):
        row, seed = job
        log = fine_tune(data, "longformer_coref", work / "logs" / f"{row.split()[0]}.seed{seed}.log", MODEL,
                        updates=budget["updates"], batch_size=1, lr=budget["lr"], seed=seed,
                        validate_every=budget["validate_every"], extra=coref.coref_flags(budget) + ROWS[row])
        return {"f1": last_valid(log, "conll_f1"), "curve": curve(log, "conll_f1")}
    done = dict(zip(jobs, common.per_seed(one, jobs).values()))
    table = [common.row(row, "row", {s: done[row, s]["f1"] for s in seeds}) for row in ROWS]
    baseline = coref.string_match_f1(subsets["valid"])
    table.append(common.row("string match on gold mentions", "baseline", {s: baseline for s in seeds}))
    whole, segmented, matched = table
    verdicts = [ordering_sentence("whole-document reading above segments", whole, segmented),
                ordering_sentence("whole-document reading above string match", whole, matched)]
    about = (f"{budget['train']} train / {budget['valid']} valid KJV documents, 3 entities of {budget['mentions']} "
             f"mentions, each next mention {GAP[0]}-{GAP[1]} words on as \"the ALIAS\" of the entity's role "
             f"(experiments/coref_small/documents.py, ALIASES); a {MODEL.layers}-layer x {MODEL.dim} Longformer from "
             f"scratch, window {MODEL.window}, the coarse-to-fine head (FFNN {budget['ffnn']}), {budget['updates']} "
             "updates of one document, reading each document whole or in segments.")
    return common.result("ordering_coref", f"Ordering: coreference, whole document against {SEGMENT}-subword segments",
                         about, "the paper's claim that reading the whole document resolves links beyond a segment "
                         "better than separate segments; CoNLL F1 on valid", "valid CoNLL F1 (%)", table,
                         {f"{row} seed {s}": done[row, s]["curve"] for row in ROWS for s in seeds},
                         {**budget, "layers": MODEL.layers, "dim": MODEL.dim, "window": MODEL.window,
                          "segment": SEGMENT}, seeds, {"passed": None}, verdicts)
