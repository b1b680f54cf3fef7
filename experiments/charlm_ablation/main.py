"""The char-LM ablation's rows, runs and table; see the package's docstring."""
import argparse
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import longformer_experiments.charlm_ablation as package
from longformer_experiments.runner import (KJV, PLUGIN, TRAIN_DONE, Run, compare, eval_lm_bits, markdown_table,
                                           ordering_verdict, regenerate_note, summarize)
from longformer_common import quiet
from longformer_common.provenance import provenance, provenance_line
from longformer_common.staleness import CPU_MODEL_CODE, stale_banner
from longformer_common.results import write_page

MODULE = "longformer_experiments.charlm_ablation"

PAPER = {"decreasing": 1.24, "fixed": 1.23, "increasing": 1.21, "dilated": 1.20}  # Table 4, dev BPC
ROWS = [  # key, label; the paper's "No dilation" row is "increasing" itself
    ("decreasing", "Decreasing w (from {top} to {bottom})"),
    ("fixed", "Fixed w (= {mean}, the mean)"),
    ("increasing", "Increasing w (from {bottom} to {top}), no dilation"),
    ("dilated", "Increasing w, dilation on 2 heads"),
]


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
        self.stage, self.run = "pending", None
        self.started = self.seconds = None
        self.bpc: Optional[float] = None

    def _launch(self, cmd: List[str], log: Path, done_marker: Optional[str] = None) -> None:
        self.run = Run(f"{self.row} seed {self.seed}: {self.stage}", cmd, log, threads=self.a.threads,
                       done_marker=done_marker)

    def start(self) -> None:
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        self.started = time.time()
        self.stage = "train"
        self._launch(train_cmd(self.a, self.data, self.dir, self.window, self.dilation, self.seed),
                     self.dir / "train.log", done_marker=TRAIN_DONE)

    def poll(self) -> bool:
        """Advance when the current process is done; True once the job is finished."""
        if self.run is None or not self.run.finished():
            return False
        text = self.run.wait()  # raises when it failed
        if self.stage == "train":
            self.stage = "eval"
            self._launch(eval_cmd(self.a, self.data, self.dir / "checkpoint_last.pt"), self.dir / "eval.log")
            return False
        self.bpc = eval_lm_bits(text)
        self.seconds = round(time.time() - self.started, 1)
        self.stage, self.run = "done", None
        return True

    def stop(self) -> None:
        if self.run is not None:
            self.run.kill()


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
            job.stop()


COMPARISONS = (("increasing", "fixed"), ("fixed", "decreasing"), ("dilated", "increasing"))  # better, worse
CLAIM = "increasing < fixed < decreasing, dilation < none"


def ordering(table: Dict[str, Dict], seeds: int) -> Dict[str, Dict]:
    """The paper's three comparisons (``runner.compare``, lower bits are better): each holds when
    the first row's mean is lower; it is resolved when the two rows' seed ranges are apart."""
    return {f"{better} < {worse}": compare(table[better], table[worse], seeds, lower_is_better=True)
            for better, worse in COMPARISONS}


def verdict(checks: Dict[str, Dict]) -> str:
    return ordering_verdict(checks, CLAIM)


def markdown(table: Dict[str, Dict], a, labels: Dict[str, str], patterns: Dict[str, Tuple[str, str]],
             checks: Dict[str, Dict]) -> str:
    """The table: one line per row (its windows, dilation, each seed, mean ± spread, the paper),
    the settings, the gaps and the verdict."""
    seeds = a.seeds
    rows = []
    for key, _ in ROWS:
        t = table[key]
        window, dilation = patterns[key]
        rows.append([labels[key], window, dilation, *(f"{v:.4f}" for v in t["values"]),
                     f"{t['mean']:.4f} ± {t['spread']:.4f}", f"{PAPER[key]:.2f}"])
    lines = markdown_table(["Model", "windows (bottom to top)", "dilation", *(f"seed {s}" for s in seeds),
                            "BPC mean ± spread", "paper"], rows, "lll" + "r" * len(seeds) + "rr")
    lines += ["", f"Valid bits per character (fairseq-eval-lm, windows of {a.sequence} characters, the first "
              f"{a.context} of each only context), {a.layers} layers x {a.dim}, {a.heads} heads, {a.positions} "
              f"positions, {a.updates} "
              f"updates of {a.batch_size} x {a.sequence} characters; spread = half the range over seeds. "
              "Paper: Table 4 (text8, 12 layers, 150K steps).", "",
              "Gaps (worse - better, bits): " + "; ".join(
                  f"{name}: {c['gap']:+.4f}{' (within spread)' if c['resolved'] is False else ''}" for name, c in checks.items()),
              "", verdict(checks)]
    return "\n".join(lines)


# flags that say where and how fast to run, not what is measured: not in the page's command
NOT_MEASURED = ("out", "kjv", "data", "parallel", "threads", "help")


def _measured_flags(parser: argparse.ArgumentParser, a: argparse.Namespace) -> List[str]:
    """The flags of ``a`` that differ from the parser's defaults and say what is measured."""
    argv = []
    for action in parser._actions:
        value = getattr(a, action.dest, None)
        if action.option_strings and action.dest not in NOT_MEASURED and value != action.default:
            shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
            if shown != str(action.default):
                argv += [action.option_strings[-1], shown]
    return argv


def page(report: dict) -> str:
    """The page of a stored run (``ablation.json``: its table, checks, patterns and settings),
    from that JSON alone: docs/results/charlm_ablation_*.md are rendered again from theirs."""
    parser = build_parser()
    a = argparse.Namespace(**{**vars(parser.parse_args([])), "positions": "learned", **report["settings"]})
    patterns = {k: (v["window"], v["dilation"]) for k, v in report["patterns"].items()}
    mean_window = patterns["fixed"][0]
    labels = {key: label.format(top=a.top, bottom=a.bottom, mean=mean_window) for key, label in ROWS}
    argv = report.get("argv")  # the command as run; older reports: rebuilt from the settings
    if argv is None:
        argv = _measured_flags(parser, a)
    stale = stale_banner((report.get("provenance") or {}).get("commit"), CPU_MODEL_CODE)
    if stale and report.get("seconds"):  # why the quiet window of scripts/regenerate_pages.sh leaves it out
        stale += (f"\n\n> Not measured again in the quiet window of scripts/regenerate_pages.sh: the run takes "
                  f"{report['seconds'] / 60:.0f} minutes of 2 cores.")
    banners = [quiet.load_banner(None, report.get("load_average_at_end")), stale]
    return ("".join(banner + "\n\n" for banner in banners if banner) + markdown(report["table"], a, labels, patterns, report["checks"]) + "\n\n"
            + provenance_line(report.get("provenance")) + "\n\n" + regenerate_note(MODULE, argv) + "\n")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=package.__doc__.split("\n")[0])
    p.add_argument("--out", default="work/charlm_ablation", help="work and result folder (runs/ recreated)")
    p.add_argument("--kjv", default=str(KJV), help="folder of the KJV books (.txt)")
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
    argv = sys.argv[1:] if argv is None else list(argv)
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
    report = {"table": table, "checks": checks, "verdict": verdict(checks), "paper_table4": PAPER,
              "patterns": {k: {"window": w, "dilation": d} for k, (w, d) in patterns.items()},
              "settings": vars(a), "unigram_bits_per_char": _unigram(data),
              "seconds": round(time.time() - started, 1), "load_average_at_end": os.getloadavg(),
              "provenance": provenance(), "argv": argv}
    text = page(report)
    write_page("ablation", report, text, out)
    print()
    print(text)
    print(f"\nwrote {out / 'ablation.md'} and {out / 'ablation.json'} in {time.time() - started:.0f} s")
    return 0


def _unigram(data: Path) -> Optional[float]:
    try:
        return json.loads((data / "chars.json").read_text())["unigram_bits_per_char"]["valid"]
    except (OSError, KeyError, ValueError):
        return None

