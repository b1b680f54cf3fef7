"""The global-attention ablation's runs, table and check; see the package's docstring."""
import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import longformer_experiments.global_ablation as package
from longformer_experiments.global_ablation.needles import NAMES, build_examples, corpus_pools, receptive_field
from longformer_experiments.runner import (REPO, add_needle_ablation_arguments, beats_every_seed,
                                           check_needle_ablation_arguments, last_valid, longest_input, markdown_table,
                                           regenerate_note, run, summarize, train_rows)

MODULE = "longformer_experiments.global_ablation"
ROWS = {  # name: environment for recipes/finetune.sh ({short}: --short)
    "global": {"GLOBAL_ATTENTION": "task"},
    "global (shared Q/K/V)": {"GLOBAL_ATTENTION": "task", "NO_GLOBAL_PROJECTIONS": "1"},
    "no global": {"GLOBAL_ATTENTION": "none"},
    "RoBERTa-length": {"GLOBAL_ATTENTION": "none", "MAX_POSITIONS": "{short}", "ATTENTION_WINDOW": "{short}"},
}
NO_GLOBAL = "no global"


def build(a) -> Path:
    """JSON lines for longformer-prepare-task, then its binaries; returns the data folder. The
    binaries are reused when the JSON lines and the vocabulary size are what they were."""
    pools = corpus_pools(a.kjv, NAMES, a.seed)
    rng = random.Random(a.seed)
    lines = {split: "".join(json.dumps(e) + "\n" for e in build_examples(pools[split], count, a.doc_words,
                                                                          a.min_word, a.needles, rng))
             for split, count in (("train", a.train_examples), ("valid", a.valid_examples))}
    folder, data, stamp = a.out / "json", a.out / "data", a.out / "data.vocab"
    same = all((folder / f"{split}.jsonl").is_file() and (folder / f"{split}.jsonl").read_text() == text
               for split, text in lines.items())
    if same and (data / "stats.json").is_file() and stamp.is_file() and stamp.read_text() == str(a.vocab):
        return data
    folder.mkdir(parents=True, exist_ok=True)
    for split, text in lines.items():
        (folder / f"{split}.jsonl").write_text(text)
    done = subprocess.run([sys.executable, "-m", "longformer_preprocessing.task_data", "classification",
                           "--train", str(folder / "train.jsonl"), "--valid", str(folder / "valid.jsonl"),
                           "--train-sentencepiece", str(a.vocab), "--destdir", str(data), "--overwrite"])
    if done.returncode != 0:
        raise SystemExit(f"longformer-prepare-task failed (exit {done.returncode}, its error above)")
    stamp.write_text(str(a.vocab))
    return data


def train(a, data: Path, row: str, seed: int) -> dict:
    """One row and seed through recipes/finetune.sh; its valid accuracy after the last update."""
    env = {**os.environ, "DATA": str(data), "SEED": str(seed), "CPU": "1", "ARCH": "longformer_base",
           "MAX_POSITIONS": str(a.long), "ATTENTION_WINDOW": str(a.window), "LR": str(a.lr),
           "BATCH_SIZE": str(a.batch_size), "MAX_EPOCH": "1000", "SAVE_DIR": str(a.out / "checkpoints"),
           "MODEL_ARGS": f"--encoder-layers {a.layers} --encoder-embed-dim {a.dim} "
                         f"--encoder-ffn-embed-dim {2 * a.dim} --encoder-attention-heads {a.heads}",
           "NO_GLOBAL_PROJECTIONS": "0", "LOG_INTERVAL": "50",
           "ATTENTION_DROPOUT": "0"}  # the recipe's default was 0 when docs/results/global_ablation.md ran
    env.update({k: v.format(short=a.short) for k, v in ROWS[row].items()})
    # validation only once, after the last update (--validate-interval in epochs never comes)
    extra = ["--max-update", str(a.updates), "--total-num-update", str(a.updates),
             "--warmup-updates", str(max(1, a.updates // 10)), "--no-save", "--validate-interval", "100000"]
    log = a.out / "logs" / f"{row.replace(' ', '_').replace(',', '').replace('/', '')}.seed{seed}.log"
    started = time.time()
    # in the caller's working folder, which relative paths in the settings are relative to, and
    # with the caller's threads (global_ablation.sh exports OMP_NUM_THREADS)
    text = run(f"{row} seed {seed}", ["bash", str(REPO / "recipes" / "finetune.sh"), "classification", *extra],
               log, env=env, cwd=None)
    return {"accuracy": last_valid(text, "accuracy"), "seconds": round(time.time() - started, 1)}


def summarize_rows(results: dict) -> dict:
    """Per row: accuracies by seed, and mean, spread, min, max over them (``runner.summarize``)."""
    table = {}
    for row, by_seed in results.items():
        table[row] = {"seeds": {s: r["accuracy"] for s, r in by_seed.items()},
                      **summarize([r["accuracy"] for r in by_seed.values()]),
                      "seconds": round(sum(r["seconds"] for r in by_seed.values()), 1)}
    return table


def no_global_clearly_worst(table: dict) -> bool:
    """Every seed of "no global" below every seed of every other row (non-overlapping ranges)."""
    others = [t for row, t in table.items() if row != NO_GLOBAL]
    return NO_GLOBAL in table and bool(others) and all(
        beats_every_seed(t, table[NO_GLOBAL], lower_is_better=False) for t in others)


def projections_verdict(table: dict) -> str:
    """How "global (shared Q/K/V)" compares with "global" (reported; the paper: -1.6)."""
    shared, own = table.get("global (shared Q/K/V)"), table.get("global")
    if shared is None or own is None:
        return "not run"
    diff = shared["mean"] - own["mean"]
    if beats_every_seed(own, shared, lower_is_better=False):
        where = "below \"global\" on every seed"
    elif beats_every_seed(shared, own, lower_is_better=False):
        where = "above \"global\" on every seed"
    else:
        where = "the seed ranges overlap: no difference at this scale"
    return f"{diff:+.2f} points (paper: -1.6); {where}"


def markdown(table: dict, a, chance: float, verdict: bool) -> str:
    """The settings, one line per row (each seed, mean ± spread, min-max, seconds) and the check."""
    seeds = sorted({s for t in table.values() for s in t["seeds"]}, key=int)
    rows = []
    for row, t in table.items():
        label = f"{row} ({a.short} tokens)" if row == "RoBERTa-length" else row
        rows.append([label, *(f"{t['seeds'][s]:.2f}" if s in t["seeds"] else "" for s in seeds),
                     f"{t['mean']:.2f} ± {t['spread']:.2f}", f"{t['min']:.2f}-{t['max']:.2f}", f"{t['seconds']:.0f}"])
    lines = [f"Global-attention ablation: {len(NAMES)}-way needle classification, documents of {a.doc_words} words "
             f"(<= {a.long} tokens), needle at word >= {a.min_word}; {a.layers} layers x {a.dim}, window {a.window} "
             f"(<s> sees {receptive_field(a.layers, a.window)} tokens without global attention), {a.updates} updates "
             f"of {a.batch_size}; valid accuracy (%) after the last update, chance {chance:.1f}; "
             "spread = half the range over seeds.", ""]
    lines += markdown_table(["model", *(f"seed {s}" for s in seeds), "mean ± spread", "min-max", "seconds"], rows,
                            "l" + "r" * (len(seeds) + 3))
    lines += ["", f"no global clearly worst (each of its seeds below every other seed): {'yes' if verdict else 'NO'}",
              f"global (shared Q/K/V) against global: {projections_verdict(table)}"]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=package.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_needle_ablation_arguments(p, ROWS, out=REPO / "work" / "global_ablation", updates=200, dim=128, window=32,
                                  long=1024, doc_words=300, needles=3, train_examples=3200, valid_examples=400,
                                  vocab=2000)
    p.add_argument("--short", type=int, default=256, help="tokens of the RoBERTa-length input (full attention)")
    a = p.parse_args(argv)
    check_needle_ablation_arguments(p, a, ROWS, receptive_field(a.layers, a.window), "the receptive field of <s>")
    return a


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    a = parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    data = build(a)
    longest = longest_input(data)
    if longest > a.long:  # a cut document could lose its needle: the long models must see it all
        raise SystemExit(f"the longest document has {longest} tokens, more than --long {a.long}: "
                         "lower --doc-words or raise --long")
    results = train_rows(a, lambda a, row, seed: train(a, data, row, seed), label_width=22)
    table = summarize_rows(results)
    verdict = no_global_clearly_worst(table)
    chance = 100.0 / len(NAMES)
    text = markdown(table, a, chance, verdict)
    total = round(time.time() - started)
    text += f"total {total} s\n\n{regenerate_note(MODULE, argv)}\n"
    print(text, end="")
    (a.out / "ablation.md").write_text(text)
    (a.out / "ablation.json").write_text(json.dumps({
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
        "chance": chance, "longest_tokens": longest, "table": table, "no_global_clearly_worst": verdict,
        "projections": projections_verdict(table), "seconds": total}, indent=2) + "\n")
    if NO_GLOBAL in table and len(table) > 1 and not verdict:
        print("FAILED: \"no global\" is not below every other row on every seed", file=sys.stderr)
        return 1
    return 0

