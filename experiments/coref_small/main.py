"""The coreference ordering in small: one small Longformer trained from scratch on KJV coreference
documents (``documents``), reading each document whole (one encoder pass, the Longformer setting)
or in segments of 512 subwords encoded separately (the RoBERTa setting), a few seeds each; CoNLL
F1 on near documents (every antecedent 8-64 words back) and far ones (540-640 words back: across
a 512-subword segment boundary). Writes docs/results/coref_small.{md,json} with --write-docs."""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

from longformer_common import quiet
from longformer_experiments.coref_small.documents import verses, write_split
from longformer_experiments.runner import (KJV, PLUGIN, REPO, compare, markdown_table, ordering_verdict,
                                           regenerate_note, run, summarize)

MODULE = "longformer_experiments.coref_small"
ROWS = {"whole document (Longformer)": [], "512-subword segments (RoBERTa)": ["--segment-length", "512"]}
SUBSETS = ("valid", "valid_far")  # near, far
BIN = Path(sys.executable).parent


def prepare(a, work: Path) -> Path:
    pool = verses(KJV)
    conll = work / "conll"
    conll.mkdir(parents=True, exist_ok=True)
    plan = {"train_near": ("near", a.train_docs // 2, 11), "train_far": ("far", a.train_docs - a.train_docs // 2, 12),
            "valid": ("near", a.valid_docs, 21), "valid_far": ("far", a.valid_docs, 22)}
    for name, (kind, count, seed) in plan.items():
        write_split(conll / f"{name}_gold_conll", kind, count, seed, pool, mentions=a.mentions)
    (conll / "train").mkdir(exist_ok=True)
    for name in ("train_near", "train_far"):
        os.replace(conll / f"{name}_gold_conll", conll / "train" / f"{name}_gold_conll")
    data = work / "data"
    if not (data / "stats.json").exists():
        subprocess.run([str(BIN / "longformer-prepare-task"), "ontonotes", "--train", str(conll / "train"),
                        "--valid", str(conll / "valid_gold_conll"), "--test", str(conll / "valid_far_gold_conll"),
                        "--destdir", str(data), "--train-sentencepiece", "1000", "--overwrite"],
                       check=True, capture_output=True)
        for suffix in (".tokens.bin", ".tokens.idx", ".coref.jsonl"):  # the far documents: a second valid subset
            os.replace(data / f"test{suffix}", data / f"valid_far{suffix}")
    return data


def train_one(a, data: Path, row: str, seed: int, work: Path) -> dict:
    save = work / "runs" / f"{row.split()[0]}_{seed}"
    cmd = [str(BIN / "fairseq-train"), str(data), "--user-dir", str(PLUGIN), "--task", "longformer_coref",
           "--criterion", "longformer_coref", "--arch", "longformer_base", "--encoder-layers", "2",
           "--encoder-embed-dim", str(a.dim), "--encoder-ffn-embed-dim", str(2 * a.dim), "--encoder-attention-heads", "4",
           "--attention-window", str(a.window), "--max-positions", str(a.positions), "--pad-to-multiple", str(a.window),
           "--coref-ffnn-size", str(a.ffnn), "--coref-max-span-width", "4", "--coref-dropout", "0.1",
           "--optimizer", "adam", "--lr", str(a.lr), "--head-lr-multiplier", "10", "--lr-scheduler", "polynomial_decay",
           "--warmup-updates", str(max(1, a.updates // 10)), "--total-num-update", str(a.updates),
           "--max-update", str(a.updates), "--batch-size", "1", "--dropout", "0.1", "--seed", str(seed), "--cpu",
           "--num-workers", "0", "--valid-subset", ",".join(SUBSETS), "--validate-interval", "100000",
           "--max-epoch", "1000", "--no-save", "--log-format", "simple", "--log-interval", "50",
           "--save-dir", str(save), *ROWS[row]]
    start = time.time()
    log = run(f"{row} seed {seed}", cmd, work / "logs" / f"{row.split()[0]}_{seed}.log")
    scores = {}
    for subset in SUBSETS:
        lines = [line for line in log.splitlines() if f"valid on '{subset}' subset" in line]
        scores[subset] = float(re.search(r"\| conll_f1 ([\d.]+)", lines[-1]).group(1))
    return {**scores, "seconds": round(time.time() - start)}


def page(saved: dict) -> str:
    """The markdown page of a finished run from its stored report alone (docs/results/coref_small.json:
    ``args``, ``results``: row -> seed -> {subset: CoNLL F1, seconds}, ``tokens``: mean subwords per
    valid document near and far, ``seconds``, ``load``, ``commit``, ``date``)."""
    a = argparse.Namespace(**saved["args"])
    results, seconds, load = saved["results"], saved["seconds"], saved["load"]
    header = ["reading", "CoNLL F1 near", "CoNLL F1 far (> 512)", *[f"seed {s} near / far" for s in a.seeds]]
    rows, summaries = [], {}
    for row in ROWS:
        per = results[row]
        summaries[row] = {s: summarize([per[str(seed)][s] for seed in a.seeds]) for s in SUBSETS}
        rows.append([row, *(f"{summaries[row][s]['mean']:.2f} ± {summaries[row][s]['spread']:.2f}" for s in SUBSETS),
                     *(f"{per[str(seed)]['valid']:.2f} / {per[str(seed)]['valid_far']:.2f}" for seed in a.seeds)])
    whole, seg = summaries["whole document (Longformer)"], summaries["512-subword segments (RoBERTa)"]
    checks = {"whole above segmented on far documents": compare(whole["valid_far"], seg["valid_far"], len(a.seeds), False)}
    near = compare(whole["valid"], seg["valid"], len(a.seeds), False)
    tokens = saved["tokens"]
    banner = quiet.load_banner(saved.get("load_start"), load)
    lines = ["# Coreference in small: whole document against 512-subword segments", "", *([banner, ""] if banner else []),
             f"KJV verses with 3 inserted entities of {a.mentions} mentions each (`NAME the ROLE`, then `NAME` or "
             f"`the ROLE`; experiments/coref_small/documents.py). Train: {a.train_docs} documents, half near (next "
             f"mention 8-64 words on), half far (540-640 words on, beyond a 512-subword segment); valid: "
             f"{a.valid_docs} near and {a.valid_docs} far documents (subwords per document, <s> and </s> included: "
             f"mean {tokens['near']} near, {tokens['far']} far). A 2-layer x {a.dim} Longformer from scratch "
             f"(window {a.window}, {a.positions} positions, sentencepiece 1,000), the coarse-to-fine head (FFNN "
             f"{a.ffnn}, spans <= 4 subwords), {a.updates} updates of one document, lr {a.lr} (head x10). The same "
             "model reads each document whole or in 512-subword segments encoded separately. CoNLL F1 (mean of MUC, "
             "B³, CEAF-e, %) after the last update; spread = half the range over seeds.", "",
             *markdown_table(header, rows, "l" + "r" * (len(header) - 1)), "",
             "- " + ordering_verdict(checks, "the whole-document reading resolves far antecedents better"),
             f"- near documents (every antecedent inside one segment): whole minus segmented "
             f"{near['gap']:+.2f} points (no difference expected).",
             *(["- Every run scored 0: at this budget neither reading learned to link any mention (the "
                "models predict no links at all), so this table cannot tell the two readings apart; it "
                "needs more updates than the shared CPU allowed (see the arguments)."]
               if all(per[s] == 0 for row in ROWS for per in results[row].values() for s in SUBSETS) else []), "",
             f"Machine: {machine_text(saved.get('machine'))}, load average at "
             f"the end of training {'not recorded' if load is None else f'{load:.1f}'} (a machine shared with "
             f"other jobs); total {seconds:.0f} s. Measured on commit {saved['commit']}, {saved['date']}.", "",
             regenerate_note(MODULE, ["--write-docs"])]
    return "\n".join(lines) + "\n"


def machine() -> dict:
    """The machine of this run, stored in its JSON: the page renders what the run recorded."""
    return {"machine": platform.machine(), "processor": platform.processor() or "", "cpus": os.cpu_count()}


def machine_text(recorded) -> str:
    """The run's machine as stored, or "not recorded" (runs before it was stored)."""
    if not recorded:
        return "not recorded by the run"
    return f"{recorded['machine']} {recorded['processor']}".strip() + f", {recorded['cpus']} CPUs"


def commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__)
    p.add_argument("--work", type=Path, default=REPO / "work" / "coref_small")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    p.add_argument("--updates", type=int, default=40)
    p.add_argument("--train-docs", type=int, default=40)
    p.add_argument("--valid-docs", type=int, default=6)
    p.add_argument("--mentions", type=int, default=2)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--ffnn", type=int, default=32)
    p.add_argument("--window", type=int, default=32)
    p.add_argument("--positions", type=int, default=2048)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--write-docs", action="store_true", help="write docs/results/coref_small.{md,json}")
    p.add_argument("--render-only", action="store_true",
                   help="re-render the table from docs/results/coref_small.json and --work's data (no training)")
    quiet.add_load_arguments(p)
    a = p.parse_args(argv)
    load_start = quiet.load_at_start(f"python -m {MODULE}", [str(REPO / "docs" / "results")
                                                            if a.write_docs and not a.render_only else None],
                                     a.load_wait, a.allow_load)
    if load_start is None:
        return 2  # refused: the machine stayed busy (the line is printed)
    start = time.time()
    data = prepare(a, a.work)
    stats = json.loads((data / "stats.json").read_text())
    if a.render_only:
        saved = json.loads((REPO / "docs" / "results" / "coref_small.json").read_text())
    else:
        results = {row: {str(seed): train_one(a, data, row, seed, a.work) for seed in a.seeds} for row in ROWS}
        splits = stats["splits"]
        saved = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(a).items()},
                 "results": results, "seconds": time.time() - start, "load": os.getloadavg()[0], "load_start": load_start, "machine": machine(),
                 "tokens": {"near": splits["valid"]["tokens"]["mean"], "far": splits["test"]["tokens"]["mean"]},
                 "commit": commit(), "date": time.strftime("%Y-%m-%d", time.gmtime())}
    text = page(saved)
    print(text)
    if a.write_docs:
        out = REPO / "docs" / "results"
        (out / "coref_small.json").write_text(json.dumps(saved, indent=2) + "\n")
        (out / "coref_small.md").write_text(text)
    return 0
