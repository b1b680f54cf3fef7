#!/usr/bin/env python
"""The paper's char-LM ablation (its Table 4), in small, on the bundled corpus, on CPU.

Beltagy et al. (2020), Table 4, small model on text8 after 150K steps, dev BPC:

    Decreasing w (from 512 to 32)     1.24
    Fixed w (= 230)                   1.23
    Increasing w (from 32 to 512)     1.21
    No dilation                       1.21
    Dilation on 2 heads               1.20

(the last two rows both have increasing windows). Here, scaled down to about 20 minutes of two
free CPU cores:

  1. the KJV corpus (data/kjv, 4.2M characters) at character level with
     ``longformer-preprocess-chars --format chars`` (the last 5% of the characters are valid);
  2. four ``longformer_lm`` models of LAYERS layers trained from scratch, SEEDS seeds each, every
     run with the same data, sequence length, batch, rate, number of updates and positions
     (``--positions``: the paper's relative ones by default, or learned):
       decreasing   windows from TOP down to BOTTOM (geometric, as the model's own
                    ``growing_windows``, reversed), no dilation
       fixed        every layer the mean of those windows, no dilation
       increasing   windows from BOTTOM up to TOP, no dilation
       + dilation   increasing, with the paper's dilation on 2 heads of the upper half of the
                    layers (``paper_dilation``: gaps 1..3, i.e. d = 2..4)
     All four have the same total window (the sum over layers), so the same number of
     attention scores; the stacked receptive field (sum of w * d) is the same for the first
     three and larger with dilation;
  3. every model scored identically with ``fairseq-eval-lm`` on the same valid characters,
     windows of SEQUENCE characters moving by SEQUENCE - CONTEXT, only the last characters of
     each scored, so every scored character has at least CONTEXT characters before it, more
     than any model's receptive field (``--context-window``); "Loss (base 2)" is bits per
     character.

Default scale (why): 4 layers of width 128 with windows 8 .. 64 (the paper's 12 layers with
32 .. 512; 4 layers are the fewest where "increasing" and "decreasing" differ in more than the
order of two windows), sequences of 512 characters, 8 per update, 300 updates (1.2M characters,
about 0.3 of an epoch), 2 seeds, two runs at a time with one thread each: each training is about
2.5 minutes of one core with learned positions, 3-6 with relative ones, so about 12 / 20 minutes
of two free cores in all (measured: learned 56 minutes while other work kept the load at 15-20;
relative 33 minutes one run at a time beside a benchmark).
Every scored character has at least 256 characters of context: more than twice the stacked
receptive field without dilation (8 + 16 + 32 + 64 = 120), about that of the dilated heads
(8 + 16 + 2 * 32 + 3 * 64 = 280). Dropout 0: a run
sees less than one epoch, so there is nothing to regularise.

Output: the table (markdown) with each row's mean and spread over seeds (half the range:
with two seeds, each seed lies at mean +- spread), one line saying whether the paper's ordering
holds, ``OUT/ablation.md`` and ``OUT/ablation.json``. The exit status is nonzero only when a
run fails or a value is not a finite number, never because of the ordering.

    bash recipes/charlm_ablation.sh          # or: python recipes/charlm_ablation.py --out DIR
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
PLUGIN = REPO / "fairseq_longformer"
PAPER = {"decreasing": 1.24, "fixed": 1.23, "increasing": 1.21, "dilated": 1.20}  # Table 4, dev BPC
ROWS = [  # key, label; the paper's "No dilation" row is "increasing" itself
    ("decreasing", "Decreasing w (from {top} to {bottom})"),
    ("fixed", "Fixed w (= {mean}, the mean)"),
    ("increasing", "Increasing w (from {bottom} to {top}), no dilation"),
    ("dilated", "Increasing w, dilation on 2 heads"),
]
TRAIN_DONE = "done training in"  # fairseq_cli.train logs it after the last checkpoint is saved
LOSS = re.compile(r"Loss \(base 2\): ([0-9.]+|nan|inf)")


def row_patterns(layers: int, heads: int, bottom: int, top: int) -> Dict[str, Tuple[str, str]]:
    """(--attention-window, --attention-dilation) of each row, from the model's own rules."""
    from fairseq_longformer.models.longformer_lm import dilation_flag, growing_windows, paper_dilation

    increasing = growing_windows(layers, bottom, top)
    mean = round(sum(increasing) / layers)
    flag = lambda windows: ",".join(map(str, windows))  # noqa: E731
    return {
        "decreasing": (flag(reversed(increasing)), "1"),
        "fixed": (str(mean), "1"),
        "increasing": (flag(increasing), "1"),
        "dilated": (flag(increasing), dilation_flag(paper_dilation(layers, heads))),
    }


def prepare_data(kjv: Path, destdir: Path) -> Path:
    """Characters of every KJV book, the last 5% valid (reused while dict.txt exists)."""
    if (destdir / "dict.txt").exists():
        return destdir
    books = sorted(str(p) for p in kjv.glob("*.txt"))
    if not books:
        raise FileNotFoundError(f"--kjv {kjv}: no .txt files")
    from longformer_preprocessing.chars import prepare

    prepare("chars", books, str(destdir), overwrite=True)
    return destdir


def train_cmd(a, data: Path, save_dir: Path, window: str, dilation: str, seed: int) -> List[str]:
    """fairseq-train of one row and seed: AdamW, clip 0.25, weight decay 0.01 (the paper's
    appendix B), a constant rate after a linear warmup of a tenth of the updates."""
    return [
        sys.executable, "-m", "fairseq_cli.train", str(data), "--user-dir", str(PLUGIN),
        "--task", "language_modeling", "--arch", "longformer_lm",
        "--decoder-layers", str(a.layers), "--decoder-embed-dim", str(a.dim),
        "--decoder-ffn-embed-dim", str(4 * a.dim), "--decoder-attention-heads", str(a.heads),
        "--dropout", str(a.dropout), "--attention-window", window, "--attention-dilation", dilation,
        "--tokens-per-sample", str(a.sequence), "--sample-break-mode", "none",
        "--optimizer", "adam", "--adam-betas", "(0.9,0.999)", "--weight-decay", "0.01",
        "--clip-norm", "0.25", "--lr", str(a.lr), "--lr-scheduler", "fixed",
        "--warmup-updates", str(max(1, a.updates // 10)), "--max-update", str(a.updates),
        "--batch-size", str(a.batch_size), "--required-batch-size-multiple", "1",
        "--cpu", "--num-workers", "0", "--disable-validation", "--no-epoch-checkpoints",
        "--save-dir", str(save_dir), "--log-format", "simple", "--log-interval", "100",
        "--seed", str(seed),
    ] + (["--relative-positions"] if a.positions == "relative" else [])


def eval_cmd(a, data: Path, checkpoint: Path) -> List[str]:
    """fairseq-eval-lm on valid: windows of --sequence characters, the first --context of each
    only context (the same windows for every model)."""
    return [
        sys.executable, "-m", "fairseq_cli.eval_lm", str(data), "--path", str(checkpoint),
        "--user-dir", str(PLUGIN), "--gen-subset", "valid", "--tokens-per-sample", str(a.sequence),
        "--context-window", str(a.context), "--batch-size", "8", "--cpu", "--num-workers", "0",
    ]


class Job:
    """One row and seed: training, then its evaluation, each a subprocess logging to a file."""

    def __init__(self, a, data: Path, out: Path, row: str, seed: int, window: str, dilation: str):
        self.row, self.seed, self.a, self.data = row, seed, a, data
        self.dir = out / "runs" / f"{row}_seed{seed}"
        self.window, self.dilation = window, dilation
        self.stage, self.process, self.handle = "pending", None, None
        self.started = self.seconds = None
        self.bpc: Optional[float] = None

    def _launch(self, cmd: List[str], log: Path) -> None:
        env = dict(os.environ, OMP_NUM_THREADS=str(self.a.threads), MKL_NUM_THREADS=str(self.a.threads))
        self.handle = open(log, "w")
        self.process = subprocess.Popen(cmd, stdout=self.handle, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        self.log = log

    def start(self) -> None:
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        self.started = time.time()
        self.stage = "train"
        self._launch(train_cmd(self.a, self.data, self.dir, self.window, self.dilation, self.seed),
                     self.dir / "train.log")

    def poll(self) -> bool:
        """Advance when the current process is done; True once the job is finished."""
        if self.process is None or self.process.poll() is None:
            return False
        self.handle.close()
        text = self.log.read_text(errors="replace")
        # fairseq-train sometimes dies at interpreter exit after finishing ("terminate called
        # without an active exception"; seen here): with its done marker logged, the run is complete
        ok = self.process.returncode == 0 or (self.stage == "train" and TRAIN_DONE in text)
        if not ok:
            tail = "".join(text.splitlines(True)[-25:])
            raise RuntimeError(f"{self.row} seed {self.seed}: {self.stage} failed "
                               f"(exit {self.process.returncode}), {self.log}:\n{tail}")
        if self.stage == "train":
            self.stage = "eval"
            self._launch(eval_cmd(self.a, self.data, self.dir / "checkpoint_last.pt"), self.dir / "eval.log")
            return False
        found = LOSS.findall(text)
        if not found:
            raise RuntimeError(f"{self.row} seed {self.seed}: no 'Loss (base 2)' in {self.log}")
        self.bpc = float(found[-1])
        self.seconds = round(time.time() - self.started, 1)
        self.stage, self.process = "done", None
        return True


def run_jobs(jobs: Sequence[Job], parallel: int, log=print) -> None:
    """Run the jobs, ``parallel`` at a time, in the given order."""
    waiting, running = list(jobs), []
    try:
        while waiting or running:
            while waiting and len(running) < parallel:
                job = waiting.pop(0)
                job.start()
                running.append(job)
            time.sleep(1)
            for job in list(running):
                if job.poll():
                    running.remove(job)
                    log(f"{job.row} seed {job.seed}: {job.bpc:.4f} bits per character ({job.seconds:.0f} s)")
    finally:
        for job in running:  # a failure elsewhere: stop what is still running
            if job.process is not None and job.process.poll() is None:
                job.process.kill()
                job.process.wait()


def summarize(values: Sequence[float]) -> Dict[str, float]:
    """Mean and spread (half the range: every seed lies within mean +- spread)."""
    return {"mean": sum(values) / len(values), "spread": (max(values) - min(values)) / 2,
            "min": min(values), "max": max(values)}


def ordering(table: Dict[str, Dict], seeds: int) -> Dict[str, Dict]:
    """The paper's three comparisons: each holds when the first row's mean is lower; it is
    resolved when the gap also exceeds the two rows' spreads together (seed noise)."""
    checks = {}
    for better, worse in (("increasing", "fixed"), ("fixed", "decreasing"), ("dilated", "increasing")):
        gap = table[worse]["mean"] - table[better]["mean"]
        noise = table[worse]["spread"] + table[better]["spread"]
        # one seed has no spread: nothing to tell a gap from noise with
        resolved = abs(gap) > noise if seeds > 1 else None
        checks[f"{better} < {worse}"] = {"holds": gap > 0, "gap": gap, "resolved": resolved}
    return checks


def verdict(checks: Dict[str, Dict]) -> str:
    held = [name for name, c in checks.items() if c["holds"]]
    unresolved = [name for name, c in checks.items() if c["resolved"] is False]
    if len(held) == len(checks):
        head = "The paper's ordering holds at this scale (increasing < fixed < decreasing, dilation < none)"
    else:
        failed = [name for name in checks if name not in held]
        head = "The paper's ordering does NOT hold at this scale: not " + ", not ".join(failed)
    if any(c["resolved"] is None for c in checks.values()):
        tail = "; one seed only, so no spread to tell the gaps from seed noise"
    elif unresolved:
        tail = "; within the seed spread (not resolved): " + ", ".join(unresolved)
    else:
        tail = "; every gap exceeds the seed spread"
    return head + tail + "."


def markdown(table: Dict[str, Dict], a, labels: Dict[str, str], patterns: Dict[str, Tuple[str, str]],
             checks: Dict[str, Dict]) -> str:
    seeds = a.seeds
    lines = ["| Model | windows (bottom to top) | dilation | " + " | ".join(f"seed {s}" for s in seeds)
             + " | BPC mean ± spread | paper |",
             "|---|---|---|" + "---:|" * len(seeds) + "---:|---:|"]
    for key, _ in ROWS:
        t = table[key]
        cells = " | ".join(f"{v:.4f}" for v in t["values"])
        window, dilation = patterns[key]
        lines.append(f"| {labels[key]} | {window} | {dilation} | {cells} | {t['mean']:.4f} ± {t['spread']:.4f} "
                     f"| {PAPER[key]:.2f} |")
    lines += ["", f"Valid bits per character (fairseq-eval-lm, windows of {a.sequence} characters, the first "
              f"{a.context} of each only context), {a.layers} layers x {a.dim}, {a.heads} heads, {a.positions} "
              f"positions, {a.updates} "
              f"updates of {a.batch_size} x {a.sequence} characters; spread = half the range over seeds. "
              "Paper: Table 4 (text8, 12 layers, 150K steps).", "",
              "Gaps (worse - better, bits): " + "; ".join(
                  f"{name}: {c['gap']:+.4f}{' (within spread)' if c['resolved'] is False else ''}" for name, c in checks.items()),
              "", verdict(checks)]
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python recipes/charlm_ablation.py", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="work/charlm_ablation", help="work and result folder (runs/ recreated)")
    p.add_argument("--kjv", default=str(REPO / "data" / "kjv"), help="folder of the KJV books (.txt)")
    p.add_argument("--data", default=None, help="prepared character data (default OUT/data, prepared once)")
    p.add_argument("--seeds", default="1,2", help="comma-separated seeds")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=128, help="model width (FFN 4x)")
    p.add_argument("--heads", type=int, default=4, help="at least 3: the dilated row dilates 2 of them")
    p.add_argument("--bottom", type=int, default=8, help="smallest window (one-sided)")
    p.add_argument("--top", type=int, default=64, help="largest window (one-sided)")
    p.add_argument("--sequence", type=int, default=512, help="characters per training sequence and eval window")
    p.add_argument("--context", type=int, default=256, help="unscored context of each eval window")
    p.add_argument("--batch-size", type=int, default=8, help="sequences per update")
    p.add_argument("--updates", type=int, default=300)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--positions", choices=("relative", "learned"), default="relative",
                   help="Transformer-XL's relative positions (the paper's char-LM, --relative-positions) "
                        "or learned absolute ones")
    p.add_argument("--parallel", type=int, default=2, help="runs at a time")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per run")
    return p


def main(argv: Optional[List[str]] = None) -> int:
    a = build_parser().parse_args(argv)
    a.seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    if not a.seeds or a.heads < 3 or not 0 < a.context < a.sequence or a.top > a.sequence:
        raise SystemExit("need seeds, --heads >= 3, 0 < --context < --sequence and --top <= --sequence")
    started = time.time()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    data = prepare_data(Path(a.kjv), Path(a.data).resolve() if a.data else out / "data")
    patterns = row_patterns(a.layers, a.heads, a.bottom, a.top)
    mean_window = patterns["fixed"][0]
    labels = {key: label.format(top=a.top, bottom=a.bottom, mean=mean_window) for key, label in ROWS}
    for key, _ in ROWS:
        print(f"{labels[key]}: --attention-window {patterns[key][0]} --attention-dilation {patterns[key][1]}")
    # seed-major: the first seed of every row finishes before the second starts, so a run cut
    # short still has one value per row
    jobs = [Job(a, data, out, key, seed, *patterns[key]) for seed in a.seeds for key, _ in ROWS]
    run_jobs(jobs, a.parallel)

    table = {}
    for key, _ in ROWS:
        values = [job.bpc for job in jobs if job.row == key]
        if not all(math.isfinite(v) for v in values):
            raise SystemExit(f"{key}: a value is not finite: {values}")
        table[key] = {"values": values, **summarize(values),
                      "seconds": [job.seconds for job in jobs if job.row == key]}
    checks = ordering(table, len(a.seeds))
    text = markdown(table, a, labels, patterns, checks)
    report = {"table": table, "checks": checks, "verdict": verdict(checks), "paper_table4": PAPER,
              "patterns": {k: {"window": w, "dilation": d} for k, (w, d) in patterns.items()},
              "settings": vars(a), "unigram_bits_per_char": _unigram(data),
              "seconds": round(time.time() - started, 1), "load_average_at_end": os.getloadavg()}
    (out / "ablation.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "ablation.md").write_text(text + "\n")
    print()
    print(text)
    print(f"\nwrote {out / 'ablation.md'} and {out / 'ablation.json'} in {time.time() - started:.0f} s")
    return 0


def _unigram(data: Path) -> Optional[float]:
    try:
        return json.loads((data / "chars.json").read_text())["unigram_bits_per_char"]["valid"]
    except (OSError, KeyError, ValueError):
        return None


if __name__ == "__main__":
    sys.exit(main())
