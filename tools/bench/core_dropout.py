"""What attention dropout costs the attention core: the PyTorch path's forward+backward with
dropout 0.1 against without, timed alternately in one process.

    python -m longformer_tools.bench.core_dropout [--length 4096] [--rounds 15] [--threads 2]

``sliding_chunks_attention`` alone (no projections), fp32, B = 1, H = 12, D = 64, w = 256 by
default, on the CPU. Each round times one call without dropout and one with (their order
alternates between rounds, so drift in the machine's speed falls on both), after a warm-up call
of each; the ratio is taken per round and the median reported with its range, beside the median
times and page faults per call (minor faults: memory the allocator had given back to the system
and the call touched again, about a microsecond each on a 2-core VM). The seed changes every
call, as in training. Waits for a quiet machine first (``--quiet-below`` busy cores).
"""
import argparse
import resource
import statistics
import sys
import time
from typing import Tuple

import torch

from longformer_kernels import AttentionDropout, AttentionPattern, sliding_chunks_attention

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

    def timed(with_dropout: bool) -> Tuple[float, int]:
        dropout = AttentionDropout(args.rate, next(seeds)) if with_dropout else None
        return one_call(q, k, v, pattern, grad_out, dropout)

    timed(False), timed(True)  # warm-up: allocator, thread pool
    plain, dropped, ratios = [], [], []
    for round_index in range(args.rounds):
        order = (False, True) if round_index % 2 == 0 else (True, False)
        calls = {flag: timed(flag) for flag in order}
        plain.append(calls[False])
        dropped.append(calls[True])
        ratios.append(calls[True][0] / calls[False][0])
    print(f"attention core, fp32, {args.threads} threads, B=1 H={args.heads} N={args.length} D={args.head_dim} "
          f"w={args.window}, {args.rounds} alternating rounds (busy cores at start: {busy})")
    for label, runs in (("no dropout", plain), (f"dropout {args.rate}", dropped)):
        print(f"  {label:<15} {statistics.median(t for t, _ in runs) * 1e3:8.1f} ms  (median), "
              f"{statistics.median(f for _, f in runs):8,.0f} page faults per call")
    print(f"  ratio per round: median {statistics.median(ratios):.3f}, range {min(ratios):.3f} .. {max(ratios):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
