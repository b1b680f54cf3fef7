"""Coreference head on coref_small's KJV documents whose every next mention lies 8-64 words after the
previous one (inside one segment): entities mentioned first as ``NAME the ROLE``, then as ``NAME``
or ``the ROLE``. Control: string match over the gold mentions (mentions sharing a word other than
"the" are one entity), scored by the same CoNLL scorer."""
import random
from pathlib import Path
from typing import Dict, List, Tuple

from longformer_experiments.coref_small.documents import DISTANCES, document, verses
from longformer_experiments.learning_checks import common
from longformer_experiments.learning_checks.training import Model, curve, fine_tune, timed
from longformer_experiments.runner import KJV, last_valid
from longformer_preprocessing.evaluation.coref import conll_f1, score_documents

NAME = "learning_coref"
CRITERION_F1 = 60.0
BUDGETS = {"full": {"train": 400, "valid": 20, "mentions": 3, "updates": 3000, "lr": 1e-3, "validate_every": 500,
                    "ffnn": 64, "vocab": 1000},
           "tiny": {"train": 4, "valid": 2, "mentions": 2, "updates": 2, "lr": 1e-3, "validate_every": 1, "ffnn": 16,
                    "vocab": 500}}
MODEL = Model(window=32, positions=1024)
Span = Tuple[int, int]


def write_documents(path: Path, kind: str, count: int, seed: int, pool, mentions: int, distances=None,
                    aliases: bool = False) -> Dict[str, Tuple[List[List[str]], Dict[str, List[Span]]]]:
    """``count`` documents into one CoNLL-2012 file (coref_small's layout); doc key -> (sentences,
    entity -> word spans), for the baselines."""
    from longformer_preprocessing.tasks.conll2012 import CorefDocument, write_document

    rng, docs = random.Random(seed), {}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            sentences, entities = document(rng, pool, distances or DISTANCES[kind], 3, mentions, aliases)
            doc_id = f"nw/kjv/{kind}/doc_{seed}_{i:04d}"
            doc = CorefDocument(doc_id, "000", f"#begin document ({doc_id}); part 000", sentences,
                                [["-"] * len(s) for s in sentences])
            write_document(f, doc, entities)
            docs[f"{doc_id}_0"] = (sentences, entities)  # the scorer's key: document id and part number
    return docs


def string_match(sentences: List[List[str]], entities: Dict[str, List[Span]]) -> List[List[Span]]:
    """The gold mentions clustered by their words: mentions sharing a word other than "the" are one
    entity (transitively)."""
    words = [w for s in sentences for w in s]
    mentions = sorted(span for spans in entities.values() for span in spans)
    parent = list(range(len(mentions)))

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i
    bags = [set(words[a:b + 1]) - {"the"} for a, b in mentions]
    for i in range(len(mentions)):
        for j in range(i):
            if bags[i] & bags[j]:
                parent[root(i)] = root(j)
    clusters: Dict[int, List[Span]] = {}
    for i, span in enumerate(mentions):
        clusters.setdefault(root(i), []).append(span)
    return list(clusters.values())


def string_match_f1(docs) -> float:
    keys = {k: [spans for spans in e.values()] for k, (_, e) in docs.items()}
    responses = {k: string_match(s, e) for k, (s, e) in docs.items()}
    return round(100 * conll_f1(score_documents(keys, responses)), 2)


def prepare(work: Path, budget: dict, train_kind: str, valid: Dict[str, Tuple[str, int]], distances=None,
            aliases: bool = False) -> tuple:
    """The CoNLL files and binaries: train documents of ``train_kind``, and per valid subset name
    (kind, seed); (data folder, subset -> its documents)."""
    pool, conll = verses(KJV), work / "conll"
    write_documents(conll / "train" / "train_gold_conll", train_kind, budget["train"], 11, pool, budget["mentions"],
                    distances, aliases)
    subsets = {name: write_documents(conll / f"{name}_gold_conll", kind, budget["valid"], seed, pool,
                                     budget["mentions"], distances, aliases) for name, (kind, seed) in valid.items()}
    files = {"train": conll / "train", **{("valid" if i == 0 else "test"): conll / f"{name}_gold_conll"
                                          for i, name in enumerate(valid)}}
    data = common.prepare("ontonotes", files, work / "data", "--train-sentencepiece", str(budget["vocab"]))
    return data, subsets


def coref_flags(budget: dict) -> List[str]:
    return ["--coref-ffnn-size", str(budget["ffnn"]), "--coref-max-span-width", "4", "--coref-dropout", "0",
            "--batch-size", "1"]


def run(work: Path, budget_name: str, seeds) -> dict:
    budget = BUDGETS[budget_name]
    data, subsets = prepare(work, budget, "near", {"valid": ("near", 21)})

    def one(seed):
        log, seconds = timed(fine_tune, data, "longformer_coref", work / "logs" / f"seed{seed}.log", MODEL,
                             updates=budget["updates"], batch_size=1, lr=budget["lr"], seed=seed,
                             validate_every=budget["validate_every"], extra=coref_flags(budget))
        return {"f1": last_valid(log, "conll_f1"), "curve": curve(log, "conll_f1"), "seconds": seconds}
    runs = common.per_seed(one, seeds)
    f1 = {s: r["f1"] for s, r in runs.items()}
    baseline = string_match_f1(subsets["valid"])
    passed = common.summarize(list(f1.values()))["mean"] >= CRITERION_F1
    check = {"passed": passed, "criterion_check": f"CoNLL F1 {common.summarize(list(f1.values()))['mean']:.2f} "
                                                  f"({'at least' if passed else 'BELOW'} {CRITERION_F1:.0f})"}
    about = (f"{budget['train']} train / {budget['valid']} valid KJV documents with 3 entities of "
             f"{budget['mentions']} mentions each, every next mention 8-64 words on (inside one segment; "
             f"experiments/coref_small/documents.py); a {MODEL.layers}-layer x {MODEL.dim} Longformer from scratch, "
             f"window {MODEL.window}, the coarse-to-fine head (FFNN {budget['ffnn']}, spans <= 4 subwords), "
             f"{budget['updates']} updates of one document. The string-match control clusters the GOLD mentions "
             "(it is given what the model must find).")
    return common.result(NAME, "Learning check: coreference head", about,
                         f"CoNLL F1 on valid (mean over seeds) at least {CRITERION_F1:.0f}", "valid CoNLL F1 (%)",
                         [common.row("model", "model", f1),
                          common.row("string match on gold mentions", "baseline", {s: baseline for s in runs})],
                         {f"seed {s}": r["curve"] for s, r in runs.items()},
                         {**budget, "layers": MODEL.layers, "dim": MODEL.dim, "window": MODEL.window}, seeds, check)
