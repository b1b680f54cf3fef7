"""longformer-bench: the paper's Figure 1 (time and memory of self-attention against sequence
length) measured on the machine at hand.

Whole modules are measured, q/k/v projections and the output projection included, on input
hidden states (B, N, heads * head_dim): full self-attention (dense SDPA with the Longformer
pattern as a boolean mask), our module with each implementation, and Hugging Face's
LongformerSelfAttention. Writes a table to stdout, ``<name>.json`` and ``<name>.png`` to
--out-dir. The measuring code is in ``fairseq_longformer/benchmark.py``.
"""
import argparse
import json
import os
import platform
import sys
import time

import torch

from .. import benchmark
from ..benchmark import CONTENDERS, MEMORY_HELP, Case

CPU_LENGTHS = [512, 1024, 2048, 4096, 8192, 16384]
GPU_LENGTHS = CPU_LENGTHS + [32768]


def _int_list(text: str):
    return [int(v) for v in text.replace(",", " ").split()]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="longformer-bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Memory: " + MEMORY_HELP + "\n\nTime: median of --repeats calls after a warm-up "
               "call, forward under torch.no_grad(), forward+backward with gradients of the input "
               "and all weights. A case whose first forward+backward exceeds --time-cap is "
               "recorded as too slow and longer lengths of that contender are skipped; an "
               "allocation failure is recorded as OOM, likewise.",
    )
    parser.add_argument("--lengths", type=_int_list, default=None,
                        help="sequence lengths, e.g. '512,1024' (default: "
                             f"{','.join(map(str, CPU_LENGTHS))} on CPU, up to 32768 on CUDA)")
    parser.add_argument("--impls", nargs="+", default=None, choices=CONTENDERS,
                        help="contenders (default: dense torch hf, plus triton on CUDA)")
    parser.add_argument("--global-tokens", nargs="+", type=int, default=[0, 8],
                        help="numbers of global tokens (the first tokens of the sequence), default 0 8")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per case (median reported)")
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (CPU), default 2")
    parser.add_argument("--out-dir", default="bench", help="where the JSON and PNG go (default bench/)")
    parser.add_argument("--name", default=None, help="file name stem (default figure1_<device>)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="auto: cuda when available")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--window", type=int, default=256,
                        help="ONE-sided window w (default 256 = Hugging Face attention_window 512)")
    parser.add_argument("--time-cap", type=float, default=None,
                        help="seconds one forward+backward may take before the case counts as too "
                             "slow (default 60 on CPU, 30 on CUDA)")
    parser.add_argument("--quiet-wait", type=float, default=0.0,
                        help="CPU: before timing a case, wait up to this many seconds for other "
                             "work on the machine to use fewer than --quiet-below cores (default 0: "
                             "do not wait). The busy cores seen before each timing are recorded in "
                             "the JSON either way.")
    parser.add_argument("--quiet-below", type=float, default=0.5,
                        help="cores of other work below which the machine counts as quiet (default 0.5)")
    parser.add_argument("--memory-limit-gb", type=float, default=None,
                        help="CPU: address-space headroom of each worker process, so that an "
                             "oversized case fails as OOM instead of starving the machine "
                             "(default: 60%% of the memory available at start)")
    args = parser.parse_args(argv)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch.cuda.is_available() is False")
    if args.lengths is None:
        args.lengths = GPU_LENGTHS if args.device == "cuda" else CPU_LENGTHS
    if args.impls is None:
        args.impls = ["dense", "torch", "hf"] + (["triton"] if args.device == "cuda" else [])
    if args.time_cap is None:
        args.time_cap = 30.0 if args.device == "cuda" else 60.0
    if args.name is None:
        args.name = f"figure1_{args.device}"
    for name in ("repeats", "threads", "batch", "heads", "head_dim"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if args.window < 1:
        parser.error(f"--window must be >= 1, got {args.window}")
    if any(n < 1 for n in args.lengths) or any(g < 0 for g in args.global_tokens):
        parser.error("--lengths must be >= 1 and --global-tokens >= 0")
    return args


def environment(args) -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
            "processor": platform.processor(), "cpu_count": os.cpu_count(), "threads": args.threads,
            "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None}
    if args.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except Exception:  # noqa: BLE001
        info["transformers"] = None
    return info


def main(argv=None) -> int:
    from tqdm import tqdm

    args = parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    memory_limit_mb = None
    if args.device == "cpu":
        memory_limit_mb = (args.memory_limit_gb * 1024 if args.memory_limit_gb
                           else benchmark.default_memory_limit_mb())
    cases = [Case(impl=impl, length=length, global_tokens=g, batch=args.batch, heads=args.heads,
                  head_dim=args.head_dim, window=args.window, device=args.device, dtype=args.dtype,
                  repeats=args.repeats, threads=args.threads, time_cap=args.time_cap,
                  memory_limit_mb=memory_limit_mb)
             # length-major, contenders adjacent: they run side by side in time
             for length in sorted(args.lengths) for g in args.global_tokens for impl in args.impls]
    info = environment(args)
    results, given_up = [], {}
    started = time.time()
    with tqdm(cases, desc="longformer-bench", unit="case", dynamic_ncols=True) as progress:
        for case in progress:
            progress.set_postfix_str(f"{case.impl} N={case.length} G={case.global_tokens}")
            previous = given_up.get((case.impl, case.global_tokens))
            if previous is not None:
                result = benchmark.Result(case, status=previous.status,
                                          note=f"skipped: {previous.status} already at N={previous.case.length}")
            else:
                result = benchmark.run_case(case, quiet_below=args.quiet_below, quiet_wait=args.quiet_wait)
                if result.status in ("oom", "too_slow"):
                    given_up[(case.impl, case.global_tokens)] = result
            if result.status not in ("ok", "n/a"):
                progress.write(f"{case.impl} N={case.length} G={case.global_tokens}: {result.status} {result.note}")
            results.append(result)
    rows = benchmark.add_ratios(results)
    print(benchmark.format_table(rows))

    info["load_average_at_end"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    info["seconds"] = round(time.time() - started, 1)
    settings = {k: v for k, v in vars(args).items() if k not in ("out_dir", "name")}
    report = {"settings": settings, "environment": info, "memory_method": MEMORY_HELP,
              "speedup_definition": "baseline time / this time (> 1: this is faster)",
              "memory_ratio_definition": "this peak / baseline peak (< 1: this uses less)",
              "results": rows}
    json_path = os.path.join(args.out_dir, args.name + ".json")
    png_path = os.path.join(args.out_dir, args.name + ".png")
    with open(json_path, "w") as handle:
        json.dump(report, handle, indent=1)
    title = (f"Longformer self-attention, {args.device} ({info.get('gpu') or info['processor'] or info['machine']}, "
             f"{args.threads} threads), {args.dtype}, B={args.batch}, H={args.heads}, D={args.head_dim}, "
             f"w={args.window} (HF {2 * args.window}), projections included")
    benchmark.plot(rows, png_path, title)
    print(f"\nwrote {json_path} and {png_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
