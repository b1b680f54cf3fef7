"""What attention dropout costs the attention core: the PyTorch path's forward+backward with
dropout 0.1 (its mask fused in one native pass, and as eager tensor passes) against without,
timed in turn in one process.

    python -m longformer_tools.bench.core_dropout [--length 4096] [--rounds 15] [--threads 2]

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
import resource
import statistics
import sys
import time
from typing import Tuple

import torch

from longformer_kernels import AttentionDropout, AttentionPattern, fused_dropout_mask, sliding_chunks_attention

from .workers import wait_until_quiet


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
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.rounds < 1 or not 0.0 < args.rate < 1.0:
        parser.error("--rounds must be >= 1 and --rate in (0, 1)")
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
