"""Table 5 in small: the runs (RoBERTa, the two conversions, continued pretraining, the
extra-positions-only run), their scores and the table; see the package's docstring."""
import argparse
import logging
import shutil
import sys
import time
from pathlib import Path
from typing import List, Optional

import longformer_experiments.table5_small as package
from longformer_experiments.runner import KJV, PLUGIN, TRAIN_DONE, Run, regenerate_note, run
from longformer_experiments.table5_small.data import prepare_data
from longformer_experiments.table5_small.scoring import mlm_bits
from longformer_experiments.table5_small.table import PAPER, REQUIRED_CHECKS, markdown, shape_checks
from longformer_common.provenance import provenance, provenance_line
from longformer_common.results import write_page

MODULE = "longformer_experiments.table5_small"
logger = logging.getLogger("table5")


def train_cmd(data: Path, save_dir: Path, extra: List[str], a) -> List[str]:
    """fairseq-train flags shared by every run (Adam as in RoBERTa/Longformer, fp32 on CPU)."""
    return [
        sys.executable, "-m", "fairseq_cli.train", str(data), "--cpu", "--num-workers", "0",
        "--encoder-layers", str(a.layers), "--encoder-embed-dim", str(a.dim),
        "--encoder-ffn-embed-dim", str(4 * a.dim), "--encoder-attention-heads", str(a.heads),
        "--dropout", str(a.dropout), *(["--encoder-normalize-before"] if a.pre_ln else []),
        "--sample-break-mode", "none", "--optimizer", "adam", "--adam-betas", "(0.9,0.98)",
        "--adam-eps", "1e-6", "--clip-norm", "1.0", "--lr-scheduler", "polynomial_decay",
        "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--disable-validation",
        "--log-format", "simple", "--log-interval", "50", "--seed", str(a.seed),
    ] + extra


def longformer_flags(a, length: int, window: int) -> List[str]:
    return ["--user-dir", str(PLUGIN), "--arch", "longformer_base", "--task", "longformer_mlm",
            "--criterion", "longformer_mlm", "--attention-window", str(window),
            "--pad-to-multiple", str(window), "--tokens-per-sample", str(length),
            "--max-positions", str(length), "--batch-size", str(a.batch_tokens // length),
            "--required-batch-size-multiple", "1"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=package.__doc__.split("\n")[0])
    p.add_argument("--out", default="checkpoints/table5_small", help="work and result folder (recreated)")
    p.add_argument("--kjv", default=str(KJV), help="folder of the 66 KJV books")
    p.add_argument("--tokenizer", choices=("sentencepiece", "word"), default="sentencepiece")
    p.add_argument("--vocab", type=int, default=256, help="sentencepiece pieces, or words kept")
    p.add_argument("--valid-every", type=int, default=10, help="every N-th book is held out")
    p.add_argument("--length", type=int, default=32, help="RoBERTa's length L; Longformer gets 4L")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--dim", type=int, default=64, help="embedding width (FFN: 4x)")
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--pre-ln", action="store_true", help="layer norm before each block (--encoder-normalize-before)")
    p.add_argument("--dropout", type=float, default=0.0, help="0: a model this small underfits")
    p.add_argument("--batch-tokens", type=int, default=1024, help="token positions per update (all runs)")
    p.add_argument("--roberta-updates", type=int, default=8000)
    p.add_argument("--roberta-lr", type=float, default=1e-3)
    p.add_argument("--short-updates", type=int, default=250, help="'a few hundred' continued updates")
    p.add_argument("--long-updates", type=int, default=2000, help="'a few thousand' continued updates")
    p.add_argument("--continue-lr", type=float, default=3e-4)
    p.add_argument("--frozen-updates", type=int, default=250)
    p.add_argument("--frozen-lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--results-page", metavar="PATH",
                   help="also write the table as a results page here and its data beside it (PATH with .json), "
                        "e.g. docs/results/table5_small.md")
    return p


def page(report: dict) -> str:
    """The table of a stored run (``table5.json``), its commit and machine and the command that
    measures it again, from that JSON alone (docs/results/table5_small.md is rendered from its JSON)."""
    a = argparse.Namespace(**report["settings"])
    return (markdown(report["results"], a) + "\n\n" + provenance_line(report.get("provenance")) + "\n\n"
            + regenerate_note(MODULE, report["argv"]) + "\n")


def main(argv: Optional[List[str]] = None) -> int:
    logging.basicConfig(format="%(asctime)s | %(name)s | %(message)s", level=logging.INFO)
    logging.getLogger("fairseq").setLevel(logging.WARNING)  # scoring loads checkpoints in-process
    argv = sys.argv[1:] if argv is None else list(argv)
    a = build_parser().parse_args(argv)
    L, L4, window = a.length, 4 * a.length, a.length // 2
    if a.batch_tokens % L4 or a.length % 2:
        raise SystemExit(f"--batch-tokens {a.batch_tokens} must be a multiple of 4L = {L4}, and L even")
    if not 0 < a.short_updates < a.long_updates:
        raise SystemExit("need 0 < --short-updates < --long-updates")
    import torch

    torch.set_num_threads(a.threads)
    out = Path(a.out).resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    logs, timings, started = out / "logs", {}, time.time()

    def step(name):
        timings[name] = round(time.time() - started, 1)
        logger.info(f"[{timings[name]:7.1f} s] {name}")

    logger.info(f"tokens/update: RoBERTa {L} x {a.batch_tokens // L} = Longformer {L4} x "
                f"{a.batch_tokens // L4} = {a.batch_tokens}; window w = {window} (one-sided)")
    data = prepare_data(Path(a.kjv), out / "data", a.tokenizer, a.vocab, a.valid_every, a.seed, a.threads)
    step("data")

    # 1. RoBERTa with stock fairseq at length L
    warmup = max(1, a.roberta_updates // 10)
    run("RoBERTa pretraining", train_cmd(data, out / "roberta_train", [
        "--arch", "roberta_base", "--task", "masked_lm", "--criterion", "masked_lm",
        "--tokens-per-sample", str(L), "--max-positions", str(L), "--batch-size", str(a.batch_tokens // L),
        "--required-batch-size-multiple", "1", "--lr", str(a.roberta_lr), "--weight-decay", "0.01",
        "--warmup-updates", str(warmup), "--total-num-update", str(a.roberta_updates),
        "--max-update", str(a.roberta_updates)], a), logs / "roberta.log", threads=a.threads, done_marker=TRAIN_DONE)
    roberta = out / "roberta"
    roberta.mkdir()
    shutil.copy(out / "roberta_train" / "checkpoint_last.pt", roberta / "model.pt")
    shutil.copy(data / "dict.txt", roberta / "dict.txt")
    step("roberta pretrained")

    # 2. conversion, random and copied positions
    from fairseq_longformer.conversion.fairseq_sources import convert_roberta_checkpoint

    converted = {}
    for init in ("random", "copy"):
        converted[init] = convert_roberta_checkpoint(
            roberta, out / f"longformer_{init}", max_positions=L4, attention_window=str(window),
            init_positions=init, seed=a.seed).checkpoint
    step("converted")

    # 3. continued pretraining (in the background) and the extra-positions-only run
    restore = ["--reset-optimizer", "--reset-dataloader", "--reset-meters"]
    continued = Run("continued pretraining", train_cmd(data, out / "continued", longformer_flags(a, L4, window) + [
        "--restore-file", str(converted["copy"])] + restore + [
        "--lr", str(a.continue_lr), "--weight-decay", "0.01", "--power", "3",
        "--warmup-updates", str(max(1, a.long_updates // 20)), "--total-num-update", str(a.long_updates),
        "--max-update", str(a.long_updates), "--save-interval-updates", str(a.short_updates)], a),
        logs / "continued.log", threads=a.threads, done_marker=TRAIN_DONE)
    try:
        run("extra-positions-only training", train_cmd(data, out / "frozen", longformer_flags(a, L4, window) + [
            "--restore-file", str(converted["copy"])] + restore + [
            "--train-new-positions-only", str(L), "--lr", str(a.frozen_lr), "--weight-decay", "0",
            "--warmup-updates", str(max(1, a.frozen_updates // 10)), "--total-num-update", str(a.frozen_updates),
            "--max-update", str(a.frozen_updates)], a), logs / "frozen.log", threads=a.threads, done_marker=TRAIN_DONE)
        step("extra positions trained")

        results = {
            "roberta": mlm_bits(roberta / "model.pt", data, L, a.seed, L),
            "random": mlm_bits(converted["random"], data, L4, a.seed, L),
            "copy": mlm_bits(converted["copy"], data, L4, a.seed, L),
            "frozen": mlm_bits(out / "frozen" / "checkpoint_last.pt", data, L4, a.seed, L),
        }
        step("scored roberta, random, copy, frozen")
    except BaseException:  # stop the background run too, or it goes on after this process ends
        continued.kill()
        raise
    continued.wait()
    step("continued pretraining done")
    short = sorted((out / "continued").glob(f"checkpoint_*_{a.short_updates}.pt"))
    if not short:
        raise RuntimeError(f"no checkpoint at update {a.short_updates} in {out / 'continued'}")
    results["short"] = mlm_bits(short[0], data, L4, a.seed, L)
    results["long"] = mlm_bits(out / "continued" / "checkpoint_last.pt", data, L4, a.seed, L)
    step("scored continued")

    checks = shape_checks(results)
    report = {
        "results": results, "paper_table5_base": PAPER, "checks": checks, "timings_s": timings,
        "settings": {k: v for k, v in vars(a).items()}, "argv": argv, "provenance": provenance(),
        "notes": "MLM bits per masked token on held-out KJV books (every %d-th), %s vocabulary of %d; "
                 "RoBERTa scored on blocks of %d, Longformer on blocks of %d" % (a.valid_every, a.tokenizer, a.vocab, L, L4),
    }
    table = page(report).rstrip("\n")
    write_page("table5", report, table + "\n", out)
    if a.results_page:
        results_page = Path(a.results_page)
        write_page(results_page.stem, report, table + "\n", results_page.parent)
    print(table)
    print("\nshape checks: " + ", ".join(
        f"{k}={'ok' if v else ('FAILED' if k in REQUIRED_CHECKS else 'no')}" for k, v in checks.items()))
    print(f"wrote {out / 'table5.md'} and {out / 'table5.json'} in {time.time() - started:.0f} s")
    return 0 if all(checks[k] for k in REQUIRED_CHECKS) else 1

