"""The WikiHop-style ablation's data, runs and table; see the package's docstring."""
import json
import random
import subprocess
import sys
import time
from pathlib import Path

from longformer_common.results import stamped, write_page
import longformer_experiments.wikihop_small as package
from longformer_experiments.global_ablation.needles import NAMES, build_examples, corpus_pools, receptive_field
from longformer_experiments.runner import (PLUGIN, REPO, needle_ablation_parser, beats_every_seed,
                                           needle_ablation_main, check_needle_ablation_arguments, last_valid,
                                           markdown_table, regenerate_note, run, settings)


MODULE = "longformer_experiments.wikihop_small"
QUERY = "named_in_supports"
ROWS = {  # name: fairseq-train flags of the row
    "global (question + candidates)": ["--global-classes", "question,candidate"],
    "global (shared Q/K/V)": ["--global-classes", "question,candidate", "--no-global-projections"],
    "no global": ["--global-attention", "none"],
}
NO_GLOBAL = "no global"


def wikihop_records(examples, candidates: int, rng: random.Random, split: str, shuffle: bool = True):
    """Needle documents -> qangaroo WikiHop records: the needles' name among ``candidates`` names,
    in a random order (``shuffle``) or in NAMES' order."""
    records = []
    for i, example in enumerate(examples):
        others = rng.sample([n for n in NAMES if n != example["label"]], candidates - 1)
        names = others + [example["label"]]
        if shuffle:
            rng.shuffle(names)
        else:
            names.sort(key=NAMES.index)
        records.append({"id": f"KJV_{split}_{i}", "query": QUERY, "answer": example["label"],
                        "candidates": names, "supports": [example["text"]]})
    return records


def build(a) -> Path:
    """qangaroo JSON for longformer-prepare-task wikihop, then its binaries; returns the data folder."""
    pools = corpus_pools(a.kjv, NAMES, a.seed)
    rng = random.Random(a.seed)
    raw, data = a.out / "json", a.out / "data"
    raw.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", a.train_examples), ("valid", a.valid_examples)):
        examples = build_examples(pools[split], count, a.doc_words, a.min_word, a.needles, rng)
        (raw / f"{split}.json").write_text(json.dumps(wikihop_records(examples, a.candidates, rng, split, a.shuffle)))
    done = subprocess.run([sys.executable, "-m", "longformer_preprocessing.task_data", "wikihop",
                           "--train", str(raw / "train.json"), "--valid", str(raw / "valid.json"),
                           "--train-sentencepiece", str(a.vocab), "--destdir", str(data), "--overwrite"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"longformer-prepare-task failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return data


def train(a, data: Path, row: str, seed: int) -> dict:
    """One row and seed through fairseq-train; its valid accuracy after the last update."""
    cmd = [str(Path(sys.executable).parent / "fairseq-train"), str(data), "--user-dir", str(PLUGIN),
           "--task", "longformer_wikihop", "--criterion", "longformer_wikihop", "--arch", "longformer_base",
           "--encoder-layers", str(a.layers), "--encoder-embed-dim", str(a.dim),
           "--encoder-ffn-embed-dim", str(2 * a.dim), "--encoder-attention-heads", str(a.heads),
           "--attention-window", str(a.window), "--max-positions", str(a.long), "--pad-to-multiple", str(a.window),
           "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--adam-eps", "1e-6",
           "--weight-decay", "0.01", "--clip-norm", "1.0", "--lr", str(a.lr), "--lr-scheduler", "polynomial_decay",
           "--total-num-update", str(a.updates), "--warmup-updates", str(max(1, a.updates // 10)),
           "--max-update", str(a.updates), "--batch-size", str(a.batch_size), "--dropout", "0",
           "--attention-dropout", "0", "--seed", str(seed), "--cpu", "--num-workers", "0", "--no-save",
           "--validate-interval", "100000", "--max-epoch", "1000", "--log-format", "simple",
           "--log-interval", "50", *ROWS[row]]
    log = a.out / "logs" / f"{''.join(c if c.isalnum() else '_' for c in row)}.seed{seed}.log"
    started = time.time()
    text = run(f"{row} seed {seed}", cmd, log, threads=1)
    return {"accuracy": last_valid(text, "accuracy"), "seconds": round(time.time() - started, 1)}


def markdown(table: dict, a, longest: int) -> str:
    """Table 10's layout: accuracy per row, its difference to the first row, per seed detail."""
    seeds = sorted({s for t in table.values() for s in t["seeds"]}, key=int)
    first = next(iter(table.values()))["mean"]
    rows = [[row, f"{t['mean']:.2f} ± {t['spread']:.2f}", f"{t['mean'] - first:+.2f}",
             *(f"{t['seeds'][s]:.2f}" for s in seeds), f"{t['seconds']:.0f}"] for row, t in table.items()]
    lines = [f"WikiHop-style ablation in small (the paper's Table 10: no global attention -8.3, shared "
             f"projections -1.6). {len(NAMES)} KJV names, {a.candidates} candidates per question (chance "
             f"{100 / a.candidates:.1f}%), supports of {a.doc_words} words (longest input {longest} tokens, "
             f"<= {a.long}: one chunk), {a.needles} needles at support word >= {a.min_word} (beyond every candidate's "
             f"{receptive_field(a.layers, a.window)}-token reach without global attention); {a.layers} layers x "
             f"{a.dim}, window {a.window}, {a.updates} updates of {a.batch_size}, {a.train_examples} train / "
             f"{a.valid_examples} valid questions; valid accuracy (%) after the last update; spread = half the "
             "range over seeds.", ""]
    lines += markdown_table(["model", "accuracy", "Δ", *(f"seed {s}" for s in seeds), "seconds"], rows,
                            "lrr" + "r" * len(seeds) + "r")
    lines += ["", verdict(table), at_chance(table, 100 / a.candidates)]
    return "\n".join(lines) + "\n"


def at_chance(table: dict, chance: float) -> str:
    """The seeds within 5 points of chance: they never left the plateau (not learnt, whatever row)."""
    stuck = [f"{row} seed {s} ({v:.2f})" for row, t in table.items() for s, v in t["seeds"].items()
             if v <= chance + 5]
    return (f"- at chance ({chance:.1f}% + 5 points, never left the plateau): " + ", ".join(stuck)) if stuck else \
        "- every seed of every row above chance + 5 points"


def verdict(table: dict) -> str:
    """The paper's ordering, said plainly where it holds and where it does not."""
    names = list(ROWS)
    own, shared, none = (table.get(n) for n in names)
    said = []
    if own and none:
        apart = beats_every_seed(own, none, lower_is_better=False)
        said.append(f"global above no global: {'yes, on every seed' if apart else 'NOT on every seed'} "
                    f"({own['mean'] - none['mean']:+.2f} points; paper +8.3)")
    if own and shared:
        if beats_every_seed(own, shared, lower_is_better=False):
            where = "own projections above shared on every seed"
        elif beats_every_seed(shared, own, lower_is_better=False):
            where = "shared projections ABOVE own on every seed: the paper's ordering does not hold here"
        else:
            where = "the seed ranges overlap" + (", shared higher on the mean: the paper's ordering does not hold "
                                                 "here" if shared["mean"] > own["mean"] else ": no clear difference")
        said.append(f"shared against own projections: {shared['mean'] - own['mean']:+.2f} points (paper -1.6); {where}")
    return "\n".join(f"- {s}" for s in said)


def parse_args(argv=None):
    p = needle_ablation_parser(package, ROWS, updates=400, dim=64, window=16, long=512, doc_words=120, needles=2,
                               train_examples=1600, valid_examples=200, vocab=1000)
    p.add_argument("--candidates", type=int, default=4, help=f"candidates per question (2..{len(NAMES)})")
    p.add_argument("--shuffle", action="store_true", help="candidates in a random order (default: NAMES' order)")
    p.add_argument("--write-docs", action="store_true", help="also write docs/results/wikihop_small.md")
    a = p.parse_args(argv)
    if not 2 <= a.candidates <= len(NAMES):
        p.error(f"--candidates must be 2..{len(NAMES)}, got {a.candidates}")
    check_needle_ablation_arguments(p, a, ROWS, receptive_field(a.layers, a.window), "the candidates' reach")
    return a


def report(a, argv, longest: int, table: dict, seconds: int) -> int:
    """Print and write the table (``runner.needle_ablation_main``), with --write-docs the docs' page too."""
    text = markdown(table, a, longest) + f"\ntotal {seconds} s\n\n{regenerate_note(MODULE, argv)}\n"
    print(text, end="")
    write_page("table", stamped({"settings": settings(a),
                                 "longest_tokens": longest, "table": table}), text, a.out)
    if a.write_docs:
        (REPO / "docs" / "results").mkdir(parents=True, exist_ok=True)
        (REPO / "docs" / "results" / "wikihop_small.md").write_text("# WikiHop ablation in small (Table 10)\n\n" + text)
    return 0


def main(argv=None) -> int:
    # a later chunk starts its supports right after the candidates: needles there are local
    return needle_ablation_main(argv, parse_args, build, train, 32, "raise --long or lower --doc-words (the "
                                "needles must stay beyond the candidates' windows)", report)
