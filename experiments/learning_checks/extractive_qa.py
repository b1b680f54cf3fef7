"""Extractive QA head: a question by relation ("Where dwelt X?", "Where was Y born?", "Where died
Z?") over KJV text holding three facts, one per relation ("X dwelt in T.", "Y was born in U.", "Z died
in V."; three people, three different towns), the answer the asked fact's town. Control: a random
town of the context's facts (expected EM and F1 100/3, computed exactly).

Why one fact per relation: with three facts of one relation ("Where dwelt X?" among three "dwelt"
facts) the answer turns on binding the question's name (16 possible) to the name three tokens
before a town, which a 2-layer encoder trained from scratch (learned absolute positions, no
pretraining) did not learn within minutes (F1 near the control's after 750 updates on 8,000
questions), although the same encoder and head fit 16 such questions exactly (train F1 100 within
50 updates: inputs, gold spans, loss and span decoding are sound); asked by relation, the question
still picks one of three towns that all look alike, so the control stays at 100/3 and the span
extraction is the head's."""
import json
import random
from pathlib import Path

from longformer_experiments.global_ablation.needles import NAMES, corpus_pools, running_sentences
from longformer_experiments.hotpotqa_small.data import PEOPLE, TOWNS
from longformer_experiments.learning_checks import common
from longformer_experiments.learning_checks.training import Model, curve, fine_tune, timed
from longformer_experiments.runner import KJV, last_valid

NAME = "learning_qa"
MARGIN = 20.0
# (fact, question): the relation the question asks picks its fact among the context's FACTS
RELATIONS = (("{} dwelt in {}.", "Where dwelt {}?"), ("{} was born in {}.", "Where was {} born?"),
             ("{} died in {}.", "Where died {}?"))
FACTS = len(RELATIONS)
BUDGETS = {"full": {"train": 8000, "valid": 200, "context_words": 100, "updates": 2000, "batch_size": 16,
                    "lr": 1e-3, "validate_every": 250, "vocab": 800},
           "tiny": {"train": 32, "valid": 16, "context_words": 40, "updates": 2, "batch_size": 8, "lr": 1e-3,
                    "validate_every": 1, "vocab": 500}}


def example(rng: random.Random, hay, words: int) -> dict:
    """One question: KJV sentences up to ``words`` words with one fact sentence per relation at
    random sentence boundaries (three people, three towns, all different); the question asks one
    relation of its person; the answer's character offset in the context."""
    people, towns = rng.sample(PEOPLE, FACTS), rng.sample(TOWNS, FACTS)
    chapter = rng.randrange(len(hay))
    sentences, count = [], 0
    for sentence in running_sentences(hay, chapter, rng.randrange(len(hay[chapter]))):
        if count + len(sentence.split()) > words and sentences:
            break
        sentences.append(sentence)
        count += len(sentence.split())
    facts = [fact.format(person, town) for (fact, _), person, town in zip(RELATIONS, people, towns)]
    for fact in facts:
        sentences.insert(rng.randrange(len(sentences) + 1), fact)
    context = " ".join(sentences)
    asked = rng.randrange(FACTS)
    start = context.index(facts[asked]) + len(facts[asked]) - len(towns[asked]) - 1
    return {"question": RELATIONS[asked][1].format(people[asked]), "context": context,
            "answers": [{"text": towns[asked], "start": start}]}


def build(work: Path, budget: dict) -> Path:
    pools, rng = corpus_pools(KJV, NAMES, 1), random.Random(1)
    raw = work / "json"
    raw.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid"):
        items = [example(rng, pools[split]["hay"], budget["context_words"]) for _ in range(budget[split])]
        (raw / f"{split}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in items))
    return common.prepare("qa", {"train": raw / "train.jsonl", "valid": raw / "valid.jsonl"}, work / "data",
                          "--train-sentencepiece", str(budget["vocab"]))


def run(work: Path, budget_name: str, seeds) -> dict:
    budget, model = BUDGETS[budget_name], Model()
    data = build(work, budget)

    def one(seed):
        log, seconds = timed(fine_tune, data, "longformer_qa", work / "logs" / f"seed{seed}.log", model,
                             updates=budget["updates"], batch_size=budget["batch_size"], lr=budget["lr"], seed=seed,
                             validate_every=budget["validate_every"])
        return {"f1": last_valid(log, "f1"), "em": last_valid(log, "em"), "curve": curve(log, "f1"),
                "seconds": seconds}
    runs = common.per_seed(one, seeds)
    f1 = {s: r["f1"] for s, r in runs.items()}
    chance = {s: 100.0 / FACTS for s in runs}  # the three towns are different words: EM = F1 = 1/3
    criterion = (f"answer F1 on valid, mean over seeds, at least {MARGIN:.0f} points above answering a random town "
                 f"of the context's {FACTS} facts")
    about = (f"{budget['train']} train / {budget['valid']} valid questions \"Where dwelt X?\", \"Where was Y born?\" "
             f"or \"Where died Z?\" over about {budget['context_words']} KJV words holding {FACTS} facts, one per "
             f"relation: \"X dwelt in T.\", \"Y was born in U.\", \"Z died in V.\" ({len(PEOPLE)} people, "
             f"{len(TOWNS)} towns, the facts' people and towns all different; the question names the relation and the "
             f"person of its fact); a {model.layers}-layer x {model.dim} Longformer "
             f"from scratch, window {model.window}, global attention on <s> and the question.")
    return common.result(NAME, "Learning check: extractive QA head", about, criterion, "answer F1 (%)",
                         [common.row("model", "model", f1), common.row("model (EM)", "model", {s: r["em"] for s, r
                                                                                               in runs.items()}),
                          common.row("random town of the context", "baseline", chance)],
                         {f"seed {s}": r["curve"] for s, r in runs.items()},
                         {**budget, "layers": model.layers, "dim": model.dim, "window": model.window}, seeds,
                         common.margin_check(f1, chance, MARGIN))
