#!/usr/bin/env python
"""The paper's WikiHop ablation of global attention (Beltagy et al. 2020, Table 10), in small,
on CPU: does <s> need global attention to classify a document by what lies far from it?

The paper (WikiHop dev accuracy, differences to Longformer): global attention through the local
Q, K, V instead of its own projections -1.6; no global attention (nor projections) -8.3, below
RoBERTa-base reading only its 512 tokens. Without global attention the model is clearly worst.

The task (``build_examples``), from the bundled corpus: a document is up to ``--doc-words`` words
of consecutive KJV sentences that name none of ``NAMES`` (about 500 tokens at 300 words), with
``--needles`` corpus sentences inserted that each name the same one of them; the label is that
name (four balanced classes, chance 25%). Every needle starts at word ``--min-word`` or later
(uniformly over the sentence boundaries there), by default the receptive field of <s> without
global attention: with L layers and a one-sided window w, <s> sees tokens 0 .. L x w after L
layers (``receptive_field``), and word i is token i + 1 or later (<s> first, each word at least
one token). The rest of the document says nothing about the label: without global attention <s>
cannot do better than chance, by construction; the table shows that the implementation does
keep it so, and that with global attention <s> learns to read the whole document. Train and
valid documents come from different chapters (kjv_tasks.split_of), needles too.

Rows, each trained from scratch for ``--updates`` updates with each seed, scored on valid after
the last update (no best-of selection):
  global                 --global-attention task: <s> global, with its own Q_g, K_g, V_g
  global (shared Q/K/V)  --no-global-projections: <s> global through the local Q, K, V
  no global              --global-attention none: local attention only
  RoBERTa-length         the input cut to --short tokens (256: about half a document) with full
                         attention over them (window = --short), no global token: it sees the
                         label only in documents with a needle inside its input

Check (exit status 1 when it fails): every seed of "no global" is below every seed of every other
row. "global (shared Q/K/V)" against "global" is reported, not checked (the paper: -1.6).

Output: OUT/ablation.md and OUT/ablation.json (the table, per-seed accuracies, runtimes), logs
under OUT/logs, data under OUT/json and OUT/data (binaries reused while the JSON lines are the
same). ``recipes/global_ablation.sh`` runs it with environment-variable settings.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from kjv_tasks import chapters, split_of  # noqa: E402

NAMES = ("Moses", "David", "Jesus", "Jacob")
SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
NEEDLE_MAX_WORDS = 40
ROWS = {  # name: environment for recipes/finetune.sh ({short}: --short)
    "global": {"GLOBAL_ATTENTION": "task"},
    "global (shared Q/K/V)": {"GLOBAL_ATTENTION": "task", "NO_GLOBAL_PROJECTIONS": "1"},
    "no global": {"GLOBAL_ATTENTION": "none"},
    "RoBERTa-length": {"GLOBAL_ATTENTION": "none", "MAX_POSITIONS": "{short}", "ATTENTION_WINDOW": "{short}"},
}
NO_GLOBAL = "no global"


def receptive_field(layers: int, window: int) -> int:
    """The last token position that <s> (position 0) can see after ``layers`` layers of one-sided
    window ``window`` without global attention."""
    return layers * window


def names_in(sentence: str, names) -> set:
    return {n for n in names if re.search(rf"\b{n}\b", sentence)}


def corpus_pools(kjv: Path, names, seed: int) -> dict:
    """Per split: ``hay``, the chapters as lists of sentences naming none of ``names`` (in order),
    and ``needles``, per name the sentences of at most NEEDLE_MAX_WORDS words naming only it.
    Chapters go to train or valid as in kjv_tasks.py (a seeded hash of the title)."""
    pools = {split: {"hay": [], "needles": {n: [] for n in names}} for split in ("train", "valid")}
    for _, title, text in chapters(kjv):
        pool = pools[split_of(title, seed)]
        hay = []
        for sentence in SENTENCE_END.split(text):
            found = names_in(sentence, names)
            if not found:
                hay.append(sentence)
            elif len(found) == 1 and len(sentence.split()) <= NEEDLE_MAX_WORDS:
                pool["needles"][found.pop()].append(sentence)
        if hay:
            pool["hay"].append(hay)
    for split, pool in pools.items():
        empty = [n for n, s in pool["needles"].items() if not s]
        if empty or not pool["hay"]:
            raise SystemExit(f"{split}: no sentence naming {empty} (or no other sentence) under {kjv}")
    return pools


def running_sentences(hay, chapter: int, start: int):
    """The haystack sentences from sentence ``start`` of ``chapter`` on, running into the next
    chapters (wrapping around)."""
    for k in range(len(hay)):
        yield from hay[(chapter + k) % len(hay)][start if k == 0 else 0:]


def build_examples(pool: dict, count: int, doc_words: int, min_word: int, needles: int, rng: random.Random):
    """``count`` examples {"text", "label", "needle_words", "name_words"} with balanced labels:
    consecutive haystack sentences from a random place, as many as fit in ``doc_words`` words,
    and ``needles`` different sentences naming the label inserted at different sentence
    boundaries at word ``min_word`` or later (uniformly over those boundaries);
    ``needle_words``/``name_words`` are the word indices (in the text) of each needle's first
    word and of the word holding the name."""
    if doc_words <= min_word:
        raise ValueError(f"--doc-words {doc_words} must be more than the first allowed needle word {min_word}")
    names = sorted(pool["needles"])
    hay = pool["hay"]
    examples = []
    for i in range(count):
        label = names[i % len(names)]
        boundaries = []
        while len(boundaries) < needles:  # a start whose sentences leave room past min_word
            chapter = rng.randrange(len(hay))
            sentences, words = [], 0
            for sentence in running_sentences(hay, chapter, rng.randrange(len(hay[chapter]))):
                if words + len(sentence.split()) > doc_words:
                    break
                sentences.append(sentence)
                words += len(sentence.split())
            offsets = [sum(len(x.split()) for x in sentences[:j]) for j in range(len(sentences) + 1)]
            boundaries = [j for j, offset in enumerate(offsets) if offset >= min_word]
        chosen = sorted(rng.sample(boundaries, needles))
        text, needle_words, name_words = [], [], []
        for j, sentence in enumerate(sentences + [None]):
            if j in chosen:
                needle = rng.choice(pool["needles"][label])
                at = sum(len(x.split()) for x in text)
                needle_words.append(at)
                name_words.append(at + next(k for k, w in enumerate(needle.split()) if names_in(w, (label,))))
                text.append(needle)
            if sentence is not None:
                text.append(sentence)
        examples.append({"text": " ".join(text), "label": label, "needle_words": needle_words,
                         "name_words": name_words})
    rng.shuffle(examples)
    return examples


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


def last_valid_accuracy(log: str) -> float:
    lines = [line for line in log.splitlines() if "valid on 'valid' subset" in line]
    found = re.search(r"\| accuracy ([\d.]+)", lines[-1]) if lines else None
    if found is None:
        raise RuntimeError("no validation accuracy in the training log:\n" + log[-3000:])
    return float(found.group(1))


def train(a, data: Path, row: str, seed: int) -> dict:
    env = {**os.environ, "DATA": str(data), "SEED": str(seed), "CPU": "1", "ARCH": "longformer_base",
           "MAX_POSITIONS": str(a.long), "ATTENTION_WINDOW": str(a.window), "LR": str(a.lr),
           "BATCH_SIZE": str(a.batch_size), "MAX_EPOCH": "1000", "SAVE_DIR": str(a.out / "checkpoints"),
           "MODEL_ARGS": f"--encoder-layers {a.layers} --encoder-embed-dim {a.dim} "
                         f"--encoder-ffn-embed-dim {2 * a.dim} --encoder-attention-heads {a.heads}",
           "NO_GLOBAL_PROJECTIONS": "0", "LOG_INTERVAL": "50"}
    env.update({k: v.format(short=a.short) for k, v in ROWS[row].items()})
    # validation only once, after the last update (--validate-interval in epochs never comes)
    extra = ["--max-update", str(a.updates), "--total-num-update", str(a.updates),
             "--warmup-updates", str(max(1, a.updates // 10)), "--no-save", "--validate-interval", "100000"]
    started = time.time()
    done = subprocess.run(["bash", str(REPO / "recipes" / "finetune.sh"), "classification", *extra], env=env,
                          capture_output=True, text=True)
    seconds = time.time() - started
    log = a.out / "logs" / f"{row.replace(' ', '_').replace(',', '').replace('/', '')}.seed{seed}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"{row} seed {seed} failed (exit {done.returncode}), log {log}:\n{done.stderr[-3000:]}")
    return {"accuracy": last_valid_accuracy(done.stdout + done.stderr), "seconds": round(seconds, 1)}


def summarize(results: dict) -> dict:
    """Per row: accuracies by seed, mean, sample standard deviation, min, max."""
    table = {}
    for row, by_seed in results.items():
        acc = [r["accuracy"] for r in by_seed.values()]
        table[row] = {"seeds": {s: r["accuracy"] for s, r in by_seed.items()}, "mean": round(statistics.mean(acc), 2),
                      "std": round(statistics.stdev(acc), 2) if len(acc) > 1 else 0.0,
                      "min": min(acc), "max": max(acc), "seconds": round(sum(r["seconds"] for r in by_seed.values()), 1)}
    return table


def no_global_clearly_worst(table: dict) -> bool:
    """Every seed of "no global" below every seed of every other row (non-overlapping ranges)."""
    others = [t["min"] for row, t in table.items() if row != NO_GLOBAL]
    return NO_GLOBAL in table and bool(others) and table[NO_GLOBAL]["max"] < min(others)


def projections_verdict(table: dict) -> str:
    """How "global (shared Q/K/V)" compares with "global" (reported; the paper: -1.6)."""
    shared, own = table.get("global (shared Q/K/V)"), table.get("global")
    if shared is None or own is None:
        return "not run"
    diff = shared["mean"] - own["mean"]
    overlap = shared["min"] <= own["max"] and own["min"] <= shared["max"]
    where = "the seed ranges overlap: no difference at this scale" if overlap else \
        ("below" if diff < 0 else "above") + " \"global\" on every seed"
    return f"{diff:+.2f} points (paper: -1.6); {where}"


def markdown(table: dict, a, chance: float, verdict: bool) -> str:
    seeds = sorted({s for t in table.values() for s in t["seeds"]}, key=int)
    lines = [f"Global-attention ablation: {len(NAMES)}-way needle classification, documents of {a.doc_words} words "
             f"(<= {a.long} tokens), needle at word >= {a.min_word}; {a.layers} layers x {a.dim}, window {a.window} "
             f"(<s> sees {receptive_field(a.layers, a.window)} tokens without global attention), {a.updates} updates "
             f"of {a.batch_size}; valid accuracy (%) after the last update, chance {chance:.1f}.", "",
             "| model | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± std | min-max | seconds |",
             "|---|" + "---:|" * (len(seeds) + 3)]
    for row, t in table.items():
        label = f"{row} ({a.short} tokens)" if row == "RoBERTa-length" else row
        cells = [f"{t['seeds'][s]:.2f}" if s in t["seeds"] else "" for s in seeds]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {t['mean']:.2f} ± {t['std']:.2f} "
                     f"| {t['min']:.2f}-{t['max']:.2f} | {t['seconds']:.0f} |")
    lines += ["", f"no global clearly worst (each of its seeds below every other seed): {'yes' if verdict else 'NO'}",
              f"global (shared Q/K/V) against global: {projections_verdict(table)}"]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=REPO / "work" / "global_ablation")
    p.add_argument("--kjv", type=Path, default=REPO / "data" / "kjv")
    p.add_argument("--seeds", default="1,2,3", help="comma-separated training seeds")
    p.add_argument("--rows", default=",".join(ROWS), help="comma-separated rows to run: " + ", ".join(ROWS))
    p.add_argument("--updates", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--window", type=int, default=32, help="one-sided attention window of the long models")
    p.add_argument("--long", type=int, default=1024, help="tokens of the long models' input (documents must fit)")
    p.add_argument("--short", type=int, default=256, help="tokens of the RoBERTa-length input (full attention)")
    p.add_argument("--doc-words", type=int, default=300, help="haystack words per document, at most")
    p.add_argument("--min-word", type=int, help="first word the needle may start at "
                                                "(default: the receptive field, layers x window)")
    p.add_argument("--needles", type=int, default=3, help="sentences naming the label per document")
    p.add_argument("--train-examples", type=int, default=3200)
    p.add_argument("--valid-examples", type=int, default=400)
    p.add_argument("--vocab", type=int, default=2000, help="sentencepiece pieces")
    p.add_argument("--seed", type=int, default=1, help="seed of the data (split and examples)")
    a = p.parse_args(argv)
    a.seeds = [s for s in a.seeds.split(",") if s]
    a.rows = [r.strip() for r in a.rows.split(",") if r.strip()]
    unknown = [r for r in a.rows if r not in ROWS]
    if unknown or not a.rows or not a.seeds:
        p.error(f"--rows from {list(ROWS)} (got {unknown or 'none'}), --seeds not empty")
    if a.min_word is None:
        a.min_word = receptive_field(a.layers, a.window)
    if a.min_word < receptive_field(a.layers, a.window):
        p.error(f"--min-word {a.min_word} is inside the receptive field of <s> "
                f"({receptive_field(a.layers, a.window)} tokens): the ablation would not test global attention")
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    data = build(a)
    longest = json.loads((data / "stats.json").read_text())["splits"]
    longest = max(s["tokens"]["max"] for s in longest.values())
    if longest > a.long:  # a cut document could lose its needle: the long models must see it all
        raise SystemExit(f"the longest document has {longest} tokens, more than --long {a.long}: "
                         "lower --doc-words or raise --long")
    results = {}
    for row in a.rows:
        results[row] = {}
        for seed in a.seeds:
            results[row][seed] = train(a, data, row, int(seed))
            print(f"{row:22s} seed {seed}: accuracy {results[row][seed]['accuracy']:6.2f} "
                  f"({results[row][seed]['seconds']:.0f} s)", flush=True)
    table = summarize(results)
    verdict = no_global_clearly_worst(table)
    chance = 100.0 / len(NAMES)
    text = markdown(table, a, chance, verdict)
    total = round(time.time() - started)
    text += f"total {total} s\n"
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


if __name__ == "__main__":
    sys.exit(main())
