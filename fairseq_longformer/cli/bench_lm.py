"""One training step of the char-LM: ``longformer_lm_small`` against the same model with dense
causal attention (SDPA with the layer's causal dilated window as a boolean mask), time and peak
memory, side by side in one run, printed as ratios.

    longformer-bench-lm --lengths 4096,16384

For each length: both models are built from the same seed (the same weights) and their losses on
the same characters compared (eval mode); the run stops with exit status 1 when they differ by
more than --loss-tolerance. Then peak memory of each in a fresh process, then the two timed side
by side, round-robin (``fairseq_longformer/bench/``: ``lm_step``, ``workers``, ``measure``).
Writes the table to stdout and ``<out-dir>/<name>.json``.
"""
import argparse
import json
import os
import platform
import sys
import time

import torch

from ..bench.lm_step import MODELS, LMStepCase, format_rows, loss_check, ratio_rows
from ..bench.measure import MEMORY_HELP
from ..bench.workers import default_memory_limit_mb, measure_memory, time_side_by_side, wait_until_quiet


def _int_list(text: str):
    return [int(v) for v in text.replace(",", " ").split()]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="longformer-bench-lm", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Memory: " + MEMORY_HELP + "\n\nTime: median of --repeats calls after a warm-up call. "
               "A step is forward, cross-entropy and backward into every weight, in training mode "
               "(dropout as the architecture's); 'fwd' is the eval-mode forward without gradients.")
    parser.add_argument("--lengths", type=_int_list, default=[4096, 16384], help="characters per sequence")
    parser.add_argument("--arch", default="longformer_lm_small")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per model (median reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads in each worker")
    parser.add_argument("--checkpoint-activations", action="store_true",
                        help="both models recompute each layer in backward (fairseq's flag; the "
                             "char-LM recipes train with it)")
    parser.add_argument("--relative-positions", action="store_true",
                        help="both models with Transformer-XL's relative positions (the recipes' "
                             "setting): the dense one adds its (N, N) position scores as a float mask")
    parser.add_argument("--loss-tolerance", type=float, default=1e-4,
                        help="largest |longformer loss - dense loss| (nats) accepted before timing")
    parser.add_argument("--time-cap", type=float, default=900.0,
                        help="seconds one step may take before the model counts as too slow")
    parser.add_argument("--memory-limit-gb", type=float, default=None,
                        help="address-space headroom of each worker (default: 60%% of the memory "
                             "available at start), so that an oversized case fails as OOM")
    parser.add_argument("--quiet-wait", type=float, default=0.0,
                        help="before timing, wait up to this many seconds for other work to use "
                             "fewer than 0.5 cores (the busy cores are recorded either way)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dense-window-offset", type=int, default=0, help=argparse.SUPPRESS)  # tests only
    parser.add_argument("--out-dir", default="bench")
    parser.add_argument("--name", default="charlm_step_cpu")
    args = parser.parse_args(argv)
    for name in ("batch", "repeats", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    if not args.lengths or min(args.lengths) < 2:
        parser.error("--lengths must be >= 2")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    limit_mb = args.memory_limit_gb * 1024 if args.memory_limit_gb else default_memory_limit_mb()
    started = time.time()
    results, checks = [], {}
    for length in sorted(args.lengths):
        cases = [LMStepCase(impl=impl, length=length, global_tokens=0, arch=args.arch, batch=args.batch,
                            repeats=args.repeats, threads=args.threads, time_cap=args.time_cap,
                            memory_limit_mb=limit_mb, seed=args.seed,
                            checkpoint_activations=args.checkpoint_activations,
                            relative_positions=args.relative_positions,
                            dense_window_offset=args.dense_window_offset)
                 for impl in MODELS]
        print(f"N={length}: checking that both models give the same loss", flush=True)
        longformer_loss, dense_loss, logit_difference = loss_check(cases[0])
        difference = abs(longformer_loss - dense_loss)
        checks[length] = {"longformer_loss": longformer_loss, "dense_loss": dense_loss, "difference": difference,
                          "max_logit_difference": logit_difference}
        print(f"N={length}: loss longformer {longformer_loss:.6f}, dense {dense_loss:.6f} nats "
              f"(|difference| {difference:.2e}, tolerance {args.loss_tolerance:g}; largest logit "
              f"difference {logit_difference:.2e})", flush=True)
        if not difference <= args.loss_tolerance:  # a NaN fails too
            print(f"error: at N={length} the two models disagree (|loss difference| {difference:.3g} > "
                  f"{args.loss_tolerance:g}): the dense mask is not the Longformer pattern; nothing timed",
                  file=sys.stderr)
            return 1
        print(f"N={length}: peak memory, each model in a fresh process", flush=True)
        memory = [measure_memory(case) for case in cases]
        runnable = [i for i, r in enumerate(memory) if r.status == "ok"]
        busy = wait_until_quiet(0.5, args.quiet_wait)
        print(f"N={length}: timing {' and '.join(cases[i].impl for i in runnable)} side by side "
              f"({args.repeats} steps each)", flush=True)
        timings = time_side_by_side([cases[i] for i in runnable])
        for position, index in enumerate(runnable):
            timing = timings[position]
            timing.busy_cores_before = busy
            timing.peak_fwd_mb, timing.peak_fwd_bwd_mb = memory[index].peak_fwd_mb, memory[index].peak_fwd_bwd_mb
            timing.fingerprint = memory[index].fingerprint
            memory[index] = timing
        results += memory
    rows = ratio_rows(results)
    print()
    print(format_rows(rows))
    report = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("out_dir", "name")},
        "loss_checks": checks, "results": rows, "memory_method": MEMORY_HELP,
        "environment": {"torch": torch.__version__, "python": platform.python_version(),
                        "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                        "load_average_at_end": os.getloadavg(), "seconds": round(time.time() - started, 1)},
    }
    path = os.path.join(args.out_dir, args.name + ".json")
    with open(path, "w") as handle:
        json.dump(report, handle, indent=1)
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
