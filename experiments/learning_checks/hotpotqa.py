"""HotpotQA's heads, both stages, on hotpotqa_small's KJV bridge questions ("Where dwelt the brother of
A?": A's paragraph names A's own town and the brother B, B's paragraph B's town, another town: a
random town of the gold pair is right half the time). Per seed: stage one trained on all
the paragraphs, its selection (``longformer-select-paragraphs``), stage two trained on the selection;
the controls: stage two on a random selection of as many paragraphs, and on the gold selection
(the oracle). Three pages from the same runs: stage one's check (gold paragraphs kept against
a random selection), stage two's check (answer F1 against a random town of its input), and the
ordering (two stages against one, beside random and gold selection).

Stage two (seed 1, one fairseq-train run each with the flags FROM_SCRATCH, OMP_NUM_THREADS=1, load 1-5,
seconds of the run): F1 100 on the gold pair by update 100 (control 50): its two towns are told apart by their
sentence's pattern ("B dwelt in T." against "A, who dwelt in U, was the brother of B."). On the gold pair plus
three random paragraphs (control 25.8; a random town of a "Y dwelt in W." sentence scores about 45) every
reader tried stays near that pattern's score at update 300: 2 layers 50.5 (90 s), 3 layers 51.2 (121 s; 53.0
at update 600, 194 s), 4 layers 52.4 (133 s), window 32 44.4 (88 s), global and local Q, K shared and started
as the identity (``--no-global-projections``) 43.7, the sentence score read at the sentence's last token
instead of its global [s] 48.0 (the sentence loss stays at a constant predictor's, 4.8 nats, both ways), stage
two started from stage one's weights 45.8 (53 s). On stage one's selection (seed 1: 90.5% of valid keeps the
answer, with 4.0 "dwelt in" sentences per question) the random town, 24.0, is that pattern's score, and only
the second hop earns more: 2 layers 31.1 (the check's run), 3 layers 34.3 (83 s), stage one's weights 30.7
although their paragraph loss falls to 0.14 nats (a constant predictor's 5 x H(0.4) = 3.4): the brother's
title knows it is gold, the answer token does not; nor with a third layer put on stage one's two (started as a
near pass-through: its input holds the verdict) 32.6, 36.7 at lr 3e-3 (81 s); from scratch at lr 3e-3, 2
layers 31.1 with the paragraph loss at 0.20 (61 s), 3 layers 31.8 (69 s). The cause: the answer's start logit
is read at a local token, which meets far paragraphs only through the global tokens; to use its title's
verdict it must pick its own paragraph's title among the global ones (a query matching its subject B, or a
relative position), which a from-scratch encoder does not learn within 600 updates, 4 layers, the stage-one
start or a fresh layer over it; the span head itself (one Linear) reads whatever its token holds. The fix is
in decoding: the reader's paragraph head does find the bridge, so the answer is taken only inside the two
paragraphs of the decoded supporting facts (``--answer-decoding evidence``), where the pattern tells the
brother's town from the asked person's own. On the same selection (2 layers, seed 1, 1 thread, load about
3): 37.0 at lr 1e-3 and update 300 (its paragraph loss still 2.18: the bridge not yet found), 86.0 at lr 3e-3
(paragraph loss 0.20; 56 s); seeds 2 and 3 at lr 3e-3: 54.5 and 55.5 at update 300, 74.0 and 85.0 at 400
(96 s, two runs side by side): the bridge is found between updates 150 and 350. The check's stage two: lr
3e-3, 400 updates, every stage decoded with ``--answer-decoding evidence`` (``DECODING``).

Stage one stayed at a constant predictor's paragraph loss (10 x H(0.2) = 5.0 nats) on train and
valid, although it memorises 16 questions (train loss 5.0 -> 0.3-0.9 in 100 updates: targets, masks
and positions are sound). Two causes, both of a from-scratch encoder: the score was read at the
global ``<t>``, whose one query (the marker's embedding plus a position) has no view of its own
title; and with BERT's initialisation a global token's attention is uniform over the input, so
the title's match with the question's copy of its name gets almost no gradient (350 updates at
lr 2e-3, the score read at the title, titles global or local: still at 5.0). Reading the score at
the title's first token and starting global Q, K as a scaled identity (``FROM_SCRATCH``), the
asked person's paragraph is the top one on 99-100% of valid by update 100 (in-process, paragraph
loss alone, 2 layers): its title attends to the question's copy of its name. The brother's
paragraph needs a second hop (A's paragraph names B) and stayed near chance within 200 updates
(recall of the top 5: 75%, 2 or 3 layers; on the 1,600 train questions the valid loss rose from
update 150, memorising). On 6,400 train questions (none repeated within 400 updates) it moves:
top-5 recall 85% with 2 layers and 87% with 3 at update 400 (valid loss 3.02 and 2.92 against
3.14 for the asked paragraph alone), 72% at lr 2e-3; with 2 layers and 800 updates 92.7% at update
500, 91.1% at 600, 95.8% at 700, 94.8% at 800 (96 valid questions, seed 1, paragraph loss alone):
end to end (fairseq-train, the four losses, seed 1, 600 updates: 198 s at load about 4) the
selection kept 88.0% of valid's gold paragraphs with 4.98 of 10 (valid paragraph loss 3.17, 3.11,
2.96, 2.83 at updates 150-600, still falling); at 800 updates (the budget below; three seeds, load
about 1.5) it kept 91.75, 89.5 and 85.5% (mean 88.92, the criterion asks 90).

Why the four-loss stage one stays near 90%: not gradient competition. On seed 3's final checkpoint
(8 train batches of 16) the paragraph loss's gradient on the shared encoder (norm 10.2 per batch)
outweighs the span loss's (4.5) and the sentence loss's (2.0; the sentence loss never leaves its
constant predictor, 6.4 nats), and both are nearly orthogonal to it (cosine +0.01); and the
paragraph loss alone under fairseq-train (seed 1, 800 updates, the other weights 0) never left the
asked paragraph's plateau (valid paragraph loss 3.14 from update 150 to 800): 75.5% kept, the asked
paragraph and chance, where the four losses kept 91.75% on that seed (the answer losses, which need
the same hop, help it). What decides a seed is when it leaves that plateau, i.e. learns the bridge
hop: seeds 1 and 2 by update 350 (ending at 2.60), seed 3 not before 400 (2.94). A third layer in
stage one did not remove the plateau, it changed which seed is late: 88.0, 84.75 and 94.75% for
seeds 1-3 (mean 89.17; valid paragraph loss 2.84, 2.93, 2.36; 336-393 s each at load 3-5). The
polynomial decay did: a late seed leaves the plateau with its lr already decayed (seed 3 from
update 450, under half the peak). Held at the peak after warmup (``stage_one_flags``; same 800
updates, same four losses, so stage one's answer F1 is still the ordering's one-stage row) seed 3
left it by update 650 and kept 91.25% (loss 2.59), seed 1 91.75% (2.61), seed 2 98.0% (2.27):
mean 93.67 with 4.99 kept (stage one and selection only, one seed at a time, 168-215 s training
each at load 1-3; the end-to-end run with stage two not yet measured). Not yet 93 on every seed:
at a held lr the valid loss moves by 0.1-0.2 between validations after the hop (2.50-2.70); 1,000
updates (held) kept 93.0% on seed 3 and 91.75% on seed 1 (loss 2.52, 2.64 at the last point: 197
and 216 s at load 1-2), so the budget stays at 800. Untried: a short decay at the end of the held lr."""
import json
import random
from pathlib import Path
from typing import Dict, List

from longformer_experiments.hotpotqa_small.data import TOWNS, records
from longformer_experiments.hotpotqa_small.main import select
from longformer_experiments.learning_checks import common
from longformer_experiments.learning_checks.page import ordering_sentence
from longformer_experiments.learning_checks.training import Model, curve, fine_tune
from longformer_experiments.runner import KJV, last_valid, summarize

RECALL, MARGIN = 90.0, 20.0
PUNCTUATION = ".,;:!?"  # stripped from a word before it is matched against TOWNS
# stage one: 6,400 questions, none repeated before update 400 (on 1,600 it memorised the brother's
# paragraph, the module docstring says); stage two ("updates") learns within 100 on the gold pair
BUDGETS = {"full": {"paragraphs": 10, "train": 6400, "valid": 200, "stage_one_updates": 800, "updates": 400,
                    "batch_size": 16, "lr": 1e-3, "stage_two_lr": 3e-3, "validate_every": 50, "vocab": 800},
           "tiny": {"paragraphs": 4, "train": 24, "valid": 8, "stage_one_updates": 2, "updates": 2, "batch_size": 8,
                    "lr": 1e-3, "stage_two_lr": 3e-3, "validate_every": 1, "vocab": 500}}
MODEL = Model(positions=512)
# every stage, from scratch: the paragraph score read at the title's first token, and global Q, K
# started as a scaled identity (the module docstring says why)
FROM_SCRATCH = ["--paragraph-score-token", "title", "--global-init", "identity"]
# every stage: the answer only inside the decoded supporting paragraphs (the module docstring says why)
DECODING = ["--answer-decoding", "evidence"]


def stage_one_flags(budget: dict) -> list:
    """Stage one's schedule: warmup, then the peak lr to the end (no decay). A seed that learns the
    bridge hop late (the module docstring) still has its full lr when it does."""
    return ["--end-learning-rate", str(budget["lr"])]


def kept_only(items: List[dict], keep) -> List[dict]:
    """The records with each context cut to the paragraphs ``keep(record)`` names (indices)."""
    return [{**r, "context": [r["context"][p] for p in sorted(keep(r))]} for r in items]


def gold(record: dict) -> set:
    titles = {t for t, _ in record["supporting_facts"]}
    return {p for p, (title, _) in enumerate(record["context"]) if title in titles}


def random_keep(count: int, seed: int):
    """keep(record): ``count`` paragraphs at random (seeded by the record's id)."""
    return lambda r: set(random.Random(f"{seed}:{r['_id']}").sample(range(len(r["context"])), count))


def random_town_f1(items: List[dict]) -> float:
    """Expected answer F1 (%) of answering a town of the record's context at random (towns are one
    word: F1 is 1 for the right town, 0 for another; 0 when the context lost the answer). Every town
    counts, the brother's own ("A, who dwelt in U, ...") and any in the KJV clauses."""
    total = 0.0
    for r in items:
        words = (w.strip(PUNCTUATION) for _, sentences in r["context"] for s in sentences for w in s.split())
        towns = {w for w in words if w in TOWNS}
        total += (r["answer"] in towns) / max(len(towns), 1)
    return 100.0 * total / len(items)


def write_json(folder: Path, splits: Dict[str, list]) -> Dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    for split, items in splits.items():
        (folder / f"{split}.json").write_text(json.dumps(items))
    return {split: folder / f"{split}.json" for split in splits}


def stage_two(work: Path, name: str, files: Dict[str, Path], tokenizer: List[str], budget: dict, seed: int,
              prepared: Dict[str, Path]) -> dict:
    """Stage two's reader trained on ``files`` (prepared once per name); its curve and valid answer F1
    (every valid question is in the file: a cut context just scores lower)."""
    if name not in prepared:
        prepared[name] = common.prepare("hotpotqa", files, work / f"data_{name}", "--max-input-tokens",
                                        str(MODEL.positions), *tokenizer)
    log = fine_tune(prepared[name], "longformer_hotpotqa", work / "logs" / f"{name}.seed{seed}.log", MODEL,
                    updates=budget["updates"], batch_size=budget["batch_size"], lr=budget["stage_two_lr"], seed=seed,
                    validate_every=budget["validate_every"], extra=FROM_SCRATCH + DECODING)
    return {"f1": last_valid(log, "f1"), "curve": curve(log, "f1")}


def pipeline(work: Path, budget: dict, raw: Dict[str, Path], data1: Path, seed: int) -> dict:
    """One seed: stage one, its selection, stage two on it, on a random selection of as many
    paragraphs, and on the gold paragraphs."""
    seed_dir = work / f"seed{seed}"
    log = fine_tune(data1, "longformer_hotpotqa", work / "logs" / f"stage1.seed{seed}.log", MODEL,
                    updates=budget["stage_one_updates"], batch_size=budget["batch_size"], lr=budget["lr"], seed=seed,
                    validate_every=budget["validate_every"], extra=[*FROM_SCRATCH, *DECODING, *stage_one_flags(budget)],
                    save_dir=seed_dir / "stage1")
    selected = select(seed_dir / "stage1" / "checkpoint_last.pt", data1, raw, seed_dir / "selected")
    kept = max(1, round(selected["valid"]["paragraphs_kept"]["mean"]))
    tokenizer = ["--sentencepiece-model", str(data1 / "spm.model"), "--srcdict", str(data1 / "dict.txt")]
    published = {split: json.loads(path.read_text()) for split, path in raw.items()}
    sources = {"selected": {s: seed_dir / "selected" / f"{s}.json" for s in raw},
               "random": write_json(seed_dir / "random", {s: kept_only(v, random_keep(kept, seed))
                                                          for s, v in published.items()})}
    prepared: Dict[str, Path] = {}
    two = {name: stage_two(seed_dir, name, files, tokenizer, budget, seed, prepared) for name, files in sources.items()}
    selected_valid = json.loads((seed_dir / "selected" / "valid.json").read_text())
    return {"stage1_curve": curve(log, "paragraph_loss"), "one_stage_f1": last_valid(log, "f1"),
            "recall": selected["valid"]["gold_paragraph_recall"], "kept": selected["valid"]["paragraphs_kept"]["mean"],
            "random_recall": 100.0 * kept / budget["paragraphs"], "stage2": two,
            "random_town_selected": random_town_f1(selected_valid)}


def run(work: Path, budget_name: str, seeds) -> list:
    budget = BUDGETS[budget_name]
    made = records(KJV, 0, {"train": budget["train"], "valid": budget["valid"]}, budget["paragraphs"])
    raw = write_json(work / "json", made)
    data1 = common.prepare("hotpotqa", raw, work / "data", "--max-input-tokens", str(MODEL.positions),
                           "--train-sentencepiece", str(budget["vocab"]))
    gold_files = write_json(work / "gold", {s: kept_only(v, gold) for s, v in made.items()})
    tokenizer = ["--sentencepiece-model", str(data1 / "spm.model"), "--srcdict", str(data1 / "dict.txt")]
    prepared: Dict[str, Path] = {}
    runs = common.per_seed(lambda seed: pipeline(work, budget, raw, data1, seed), seeds)
    for seed in seeds:  # the oracle: one gold preparation, then a run per seed
        runs[str(seed)]["stage2"]["gold"] = stage_two(work, "gold", gold_files, tokenizer, budget, seed, prepared)
    return [stage_one_page(runs, budget, seeds), stage_two_page(runs, budget, seeds, made),
            ordering_page(runs, budget, seeds, made)]


def about(budget: dict) -> str:
    return (f"{budget['train']} train / {budget['valid']} valid KJV bridge questions over {budget['paragraphs']} "
            f"paragraphs titled by names (2 gold, holding two different towns: the brother's and the asked person's own; "
            f"experiments/hotpotqa_small/data.py); every stage a "
            f"{MODEL.layers}-layer x {MODEL.dim} Longformer from scratch, window {MODEL.window}, global attention on "
            f"the question, titles and sentence markers (global Q and K started as a scaled identity, the paragraph "
            f"score read at the title's first token), stage one {budget['stage_one_updates']} updates of "
            f"{budget['batch_size']} (its lr held at the peak after warmup), stage two {budget['updates']} at lr "
            f"{budget['stage_two_lr']:g}, every stage's answer decoded inside the supporting paragraphs "
            "(--answer-decoding evidence); "
            "selection by longformer-select-paragraphs (threshold -3.0, at most 5 paragraphs).")


def budget_of(budget: dict) -> dict:
    return {**budget, "layers": MODEL.layers, "dim": MODEL.dim, "window": MODEL.window}


def stage_one_page(runs: dict, budget: dict, seeds) -> dict:
    recall = {s: r["recall"] for s, r in runs.items()}
    kept = {s: r["kept"] for s, r in runs.items()}
    chance = {s: r["random_recall"] for s, r in runs.items()}
    mean_recall, mean_kept = summarize(list(recall.values()))["mean"], summarize(list(kept.values()))["mean"]
    passed = mean_recall >= RECALL and mean_kept < budget["paragraphs"]
    check = {"passed": passed, "criterion_check": f"{mean_recall:.2f}% of the gold paragraphs kept, "
                                                  f"{mean_kept:.2f} of {budget['paragraphs']} paragraphs kept per question"}
    criterion = (f"stage one's selection keeps at least {RECALL:.0f}% of the gold paragraphs of valid (mean over "
                 f"seeds) while keeping fewer than all {budget['paragraphs']} paragraphs per question")
    return common.result("learning_hotpotqa_stage_one", "Learning check: HotpotQA stage one (paragraph head)",
                         about(budget) + " The curve: stage one's valid paragraph loss (nats per question; a "
                         "constant predictor of 2 gold in P paragraphs scores P x H(2/P)).", criterion,
                         "valid gold-paragraph recall (%)",
                         [common.row("stage one's selection", "model", recall),
                          common.row("paragraphs kept per question", "model", kept),
                          common.row("random selection of as many", "baseline", chance)],
                         {f"seed {s}": r["stage1_curve"] for s, r in runs.items()}, budget_of(budget), seeds, check)


def stage_two_page(runs: dict, budget: dict, seeds, made) -> dict:
    f1 = {s: r["stage2"]["selected"]["f1"] for s, r in runs.items()}
    chance = {s: r["random_town_selected"] for s, r in runs.items()}
    gold_f1 = {s: r["stage2"]["gold"]["f1"] for s, r in runs.items()}
    criterion = (f"stage two's answer F1 on valid (mean over seeds) at least {MARGIN:.0f} points above answering a "
                 "random town of its input (stage one's selection)")
    return common.result("learning_hotpotqa_stage_two", "Learning check: HotpotQA stage two (answer head)",
                         about(budget), criterion, "valid answer F1 (%)",
                         [common.row("stage two on stage one's selection", "model", f1),
                          common.row("random town of the input", "baseline", chance),
                          common.row("stage two on the gold paragraphs", "oracle", gold_f1)],
                         {f"seed {s}": r["stage2"]["selected"]["curve"] for s, r in runs.items()},
                         budget_of(budget), seeds, common.margin_check(f1, chance, MARGIN))


def ordering_page(runs: dict, budget: dict, seeds, made) -> dict:
    rows = {"one stage (all paragraphs)": ("row", {s: r["one_stage_f1"] for s, r in runs.items()}),
            "two stages (stage one's selection)": ("row", {s: r["stage2"]["selected"]["f1"] for s, r in runs.items()}),
            "two stages, random selection": ("control", {s: r["stage2"]["random"]["f1"] for s, r in runs.items()}),
            "two stages, gold selection": ("oracle", {s: r["stage2"]["gold"]["f1"] for s, r in runs.items()})}
    table = [common.row(label, kind, values) for label, (kind, values) in rows.items()]
    one, two, rand, gold_row = table
    verdicts = [ordering_sentence("two stages above one (paper: +4.2 joint F1 on HotpotQA)", two, one),
                ordering_sentence("stage one's selection above a random one", two, rand),
                ordering_sentence("the gold selection above stage one's", gold_row, two)]
    result = common.result("ordering_hotpotqa", "Ordering: HotpotQA two stages against one", about(budget),
                           "the paper's claim that the two-stage model reads better than one stage over all the "
                           "paragraphs, shown beside a random selection and the gold one; answer F1 on valid",
                           "valid answer F1 (%)", table,
                           {f"{label} seed {s}": runs[s]["stage2"][key]["curve"] for label, key in
                            (("selected", "selected"), ("random", "random"), ("gold", "gold")) for s in runs},
                           budget_of(budget), seeds, {"passed": None}, verdicts)
    return result
