"""What attention dropout costs the attention core: the PyTorch path's forward+backward with
dropout 0.1 (its mask fused in one native pass, and as eager tensor passes) against without,
timed in turn in one process.

    python -m longformer_tools.bench.core_dropout [--length 4096] [--rounds 15] [--threads 2]
    python -m longformer_tools.bench.core_dropout --json R/core_dropout.json --markdown R/core_dropout.md
    python -m longformer_tools.bench.core_dropout --replot R/core_dropout.json --markdown R/core_dropout.md
    (R = docs/results: the page scripts/regenerate_timings.sh writes)

``sliding_chunks_attention`` alone (no projections), fp32, B = 1, H = 12, D = 64, w = 256 by
default, on the CPU. Each round times one call of each contender (each goes first in turn, so
drift in the machine's speed falls on all), after a warm-up call of each; the fused mask needs
numba (``fused_dropout_mask``), without it only the eager one runs. Ratios to no dropout are
taken per round and the median reported with its range, beside the median times and page
faults per call (minor faults: memory the allocator had given back to the system and the call
touched again, about a microsecond each on a 2-core VM). The seed changes every
call, as in training. Waits for a quiet machine first (``--quiet-below`` busy cores).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time
from typing import Tuple

import torch

from longformer_kernels import AttentionDropout, AttentionPattern, fused_dropout_mask, sliding_chunks_attention

from longformer_common import quiet
from longformer_common.provenance import provenance, provenance_line
from .workers import wait_until_quiet

PROG = "python -m longformer_tools.bench.core_dropout"
# flags that say where to write, not what is measured: not in the page's command
NOT_SETTINGS = ("json", "markdown", "replot", "load_wait", "allow_load")


def one_call(q, k, v, pattern, grad_out, dropout) -> Tuple[float, int]:
    """Seconds and minor page faults of one forward+backward of the core."""
    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    start = time.perf_counter()
    out = sliding_chunks_attention(*leaves, None, None, None, pattern, dropout=dropout)
    torch.autograd.grad(out, leaves, grad_out)
    seconds = time.perf_counter() - start
    return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="core_dropout", description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--rate", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quiet-below", type=float, default=0.5)
    parser.add_argument("--json", metavar="PATH", help="also store every round's times and page faults here")
    parser.add_argument("--markdown", metavar="PATH", help="also write the results page (with --json or --replot)")
    parser.add_argument("--replot", metavar="JSON", help="measure nothing: re-write --markdown from a stored run")
    quiet.add_load_arguments(parser)
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.rounds < 1 or not 0.0 < args.rate < 1.0:
        parser.error("--rounds must be >= 1 and --rate in (0, 1)")
    if args.markdown and not (args.json or args.replot):
        parser.error("--markdown needs --json (a new run) or --replot (a stored one): the page links its data")
    if args.replot:
        with open(args.replot) as handle:
            report = json.load(handle)
        write_page(report, args.replot, args.markdown)
        return 0
    load_start = quiet.load_at_start(PROG, [args.json, args.markdown], args.load_wait, args.allow_load)
    if load_start is None:
        return 2  # refused: the machine stayed busy (the line is printed)
    torch.set_num_threads(args.threads)
    busy = wait_until_quiet(args.quiet_below, 120.0)
    generator = torch.Generator().manual_seed(0)
    shape = (1, args.heads, args.length, args.head_dim)
    q, k, v, grad_out = (torch.randn(shape, generator=generator) for _ in range(4))
    pattern = AttentionPattern(args.window)
    seeds = iter(range(1, 10 ** 6))

    fused = fused_dropout_mask()
    # label -> (with dropout, with the fused mask): no dropout; dropout with the mask as eager
    # tensor passes; and, with numba, dropout with the fused (one native pass) mask, the default
    contenders = {"no dropout": (False, False), f"dropout {args.rate}, eager mask": (True, False)}
    if fused:
        contenders[f"dropout {args.rate}, fused mask"] = (True, True)
    labels = list(contenders)

    def timed(label: str) -> Tuple[float, int]:
        with_dropout, fused_mask = contenders[label]
        fused_dropout_mask(fused_mask)
        dropout = AttentionDropout(args.rate, next(seeds)) if with_dropout else None
        return one_call(q, k, v, pattern, grad_out, dropout)

    for label in contenders:  # warm-up: allocator, thread pool, numba's compilation
        timed(label)
    runs = {label: [] for label in contenders}
    for round_index in range(args.rounds):
        shift = round_index % len(labels)  # each contender goes first in turn
        for label in labels[shift:] + labels[:shift]:
            runs[label].append(timed(label))
    fused_dropout_mask(fused)
    print(f"attention core, fp32, {args.threads} threads, B=1 H={args.heads} N={args.length} D={args.head_dim} "
          f"w={args.window}, {args.rounds} rounds of the contenders in turn (busy cores at start: {busy})")
    if not fused:
        print("  (numba is not installed: no fused mask; pip install fairseq-longformer[cpu])")
    for label in contenders:
        line = (f"  {label:<29} {statistics.median(t for t, _ in runs[label]) * 1e3:8.1f} ms  (median), "
                f"{statistics.median(f for _, f in runs[label]):8,.0f} page faults per call")
        if contenders[label][0]:  # with dropout
            ratios = [t / base for (t, _), (base, _) in zip(runs[label], runs["no dropout"])]
            line += (f"; ratio to no dropout per round: median {statistics.median(ratios):.3f}, "
                     f"range {min(ratios):.3f} .. {max(ratios):.3f}")
        print(line)
    if args.json:
        report = {"settings": {k: v for k, v in vars(args).items() if k not in NOT_SETTINGS},
                  "busy_cores_at_start": busy, "fused": fused, "provenance": provenance(),
                  "load_average_at_start": load_start,
                  "load_average_at_end": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else [],
                  "rounds": {label: [{"seconds": t, "page_faults": f} for t, f in runs[label]] for label in labels}}
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)
        write_page(report, args.json, args.markdown)
    return 0


def page(report: dict, json_path: str, markdown_path: str) -> str:
    """The results page of a stored run: per contender the median (min-max) time of a call and
    its ratio to no dropout per round, and the page faults per call."""
    s, rounds = report["settings"], report["rounds"]
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in s.items())
    banner = quiet.load_banner(report.get("load_average_at_start"), report.get("load_average_at_end"))
    lines = [f"# Attention dropout's cost in the attention core (CPU, N = {s['length']:,})", "",
             *([banner, ""] if banner else []),
             "Written by this command (it measures again):", "", "```bash",
             f"{PROG} {flags} --json {json_path} --markdown {markdown_path}",
             "```", "", "and re-rendered from the stored JSON, measuring nothing, by:", "", "```bash",
             f"{PROG} --replot {json_path} --markdown {markdown_path}", "```", "",
             provenance_line(report.get("provenance")), "",
             f"`sliding_chunks_attention` forward+backward (no projections), fp32, B = 1, H = {s['heads']}, "
             f"D = {s['head_dim']}, w = {s['window']}, {s['threads']} threads; {s['rounds']} rounds, one call of "
             "each contender per round, each going first in turn. Ratios are taken per round; median (min-max) "
             "over the rounds.", "",
             "| contender | fwd+bwd ms, median (min-max) | ratio to no dropout, median (min-max) "
             "| page faults per call |",
             "|---|---:|---:|---:|"]
    base = [r["seconds"] for r in rounds["no dropout"]]
    for label, calls in rounds.items():
        ms = [1e3 * r["seconds"] for r in calls]
        ratios = [r["seconds"] / b for r, b in zip(calls, base)]
        ratio = "" if label == "no dropout" else _median_range(ratios, "{:.3f}")
        lines.append(f"| {label} | {_median_range(ms, '{:,.1f}')} | {ratio} | "
                     f"{statistics.median(r['page_faults'] for r in calls):,.0f} |")
    return "\n".join(lines) + "\n"


def _median_range(values, spec: str) -> str:
    return f"{spec.format(statistics.median(values))} ({spec.format(min(values))}-{spec.format(max(values))})"


def write_page(report: dict, json_path: str, markdown_path) -> None:
    if markdown_path:
        with open(markdown_path, "w") as handle:
            handle.write(page(report, json_path, markdown_path))


if __name__ == "__main__":
    raise SystemExit(main())
