"""longformer-bench: the paper's Figure 1 (time and memory of self-attention against sequence
length) measured on the machine at hand.

Whole modules are measured from input hidden states (B, N, heads * head_dim), q/k/v projections
included, up to the heads' output (Hugging Face's LongformerSelfAttention boundary;
--output-projection adds the output projection to every contender): full self-attention (dense SDPA with the Longformer
pattern as a boolean mask), our module with each implementation, and Hugging Face's
LongformerSelfAttention, each at every --dropout rate (attention dropout in training mode).
Beside them a worker times plain matmuls at the layer's own shapes: the machine's matmul limit,
against which every row's useful GFLOP/s is reported as a fraction (``bench/flops.py``,
``bench/matmul_limit.py``). Writes a table to stdout, ``<name>.json`` and ``<name>.png`` to
--out-dir, and with --markdown PATH the results page (the plot needs matplotlib: pip install
'fairseq-longformer[bench]'). The measuring code is in the package ``longformer_tools/bench/``.
"""
import argparse
import os
import platform
import sys
import time
from dataclasses import replace

import torch

from ..bench import matmul_limit, results_page
from ..bench.contenders import CONTENDERS, Case
from ..bench.measure import MEMORY_HELP, Result
from ..bench.figure1 import plot, require_matplotlib
from ..bench.ratios import add_ratios, format_table
from ..bench.workers import run_side_by_side
from .bench_args import (add_page_arguments, add_run_arguments, check_dropout, check_run_arguments, load_report,
                         load_at_start, memory_limit_mb, settings, write_report)

CPU_LENGTHS = [512, 1024, 2048, 4096, 8192, 16384]
GPU_LENGTHS = CPU_LENGTHS + [32768]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="longformer-bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Memory: " + MEMORY_HELP + "\n\nTime: median of --repeats calls after a warm-up "
               "call, forward under torch.no_grad(), forward+backward with gradients of the input "
               "and all weights. On CPU the contenders of one length are timed side by side: each "
               "has a worker process with its module set up, and the workers are called in turn, "
               "round-robin, so a slow spell of a shared machine falls on all of them alike (every "
               "--dropout rate, and the matmul limit's worker, in the same round). A "
               "case whose first forward+backward exceeds --time-cap is recorded as too slow and "
               "longer lengths of that contender are skipped; an allocation failure is recorded "
               "as OOM, likewise.",
    )
    add_run_arguments(
        parser, unit="case", lengths=None,
        lengths_help=f"sequence lengths, e.g. '512,1024' (default: {','.join(map(str, CPU_LENGTHS))} on CPU, "
                     "up to 32768 on CUDA)",
        repeats=5, threads=2, time_cap=None, name=None, files="the JSON and PNG",
        time_cap_help="seconds one forward+backward may take before the case counts as too slow (default "
                      "60 on CPU, 30 on CUDA)",
        name_help="file name stem (default figure1_<device>)")
    parser.add_argument("--impls", nargs="+", default=None, choices=CONTENDERS,
                        help="contenders (default: dense torch hf, plus triton on CUDA)")
    parser.add_argument("--global-tokens", nargs="+", type=int, default=[0, 8],
                        help="numbers of global tokens (the first tokens of the sequence), default 0 8")
    parser.add_argument("--dropout", nargs="+", type=float, default=[0.0, 0.1],
                        help="attention-dropout rates, each timed side by side with the others (training "
                             "mode: ours' attention dropout, SDPA's dropout_p, HF's "
                             "attention_probs_dropout_prob), default 0 0.1")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="auto: cuda when available")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float16", "bfloat16"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--window", type=int, default=256,
                        help="ONE-sided window w (default 256 = Hugging Face attention_window 512)")
    parser.add_argument("--output-projection", action="store_true",
                        help="end every contender in the output projection (a whole attention "
                             "block); default: stop at the heads' output, as Hugging Face's "
                             "LongformerSelfAttention does")
    add_page_arguments(parser, redraws=", re-draw <JSON minus .json>.png")
    parser.epilog += ("\n\nWhole training steps instead (tokens/s, peak memory, MFU; CUDA or tiny on CPU): "
                      "longformer-bench train-steps --help")
    return parser


def parse_args(argv=None):
    parser = build_parser()
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
    check_run_arguments(parser, args)
    for name in ("batch", "heads", "head_dim", "window"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if any(g < 0 for g in args.global_tokens):
        parser.error("--global-tokens must be >= 0")
    check_dropout(parser, "--dropout", args.dropout)
    return args


def environment(args, load_start) -> dict:
    info = {"python": platform.python_version(), "torch": torch.__version__, "machine": platform.machine(),
            "processor": platform.processor(), "cpu_count": os.cpu_count(), "threads": args.threads,
            "load_average_at_start": load_start}
    if args.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except Exception:  # noqa: BLE001
        info["transformers"] = None
    return info


def plot_title(settings: dict, info: dict) -> str:
    s = settings
    where = info.get("gpu") or info.get("processor") or info.get("machine")
    return (f"Longformer self-attention, {s['device']} ({where}, {s['threads']} threads), {s['dtype']}, "
            f"B={s['batch']}, H={s['heads']}, D={s['head_dim']}, w={s['window']} (HF {2 * s['window']}), "
            "q/k/v projections " + ("and output projection included" if s.get("output_projection") else "included"))


def write_page(report: dict, json_path: str, png_path: str, markdown_path: str) -> None:
    """The results page of ``report`` (stored at ``json_path``, drawn at ``png_path``)."""
    results_page.write_page(results_page.figure1_page(report, build_parser(), json_path, markdown_path, png_path),
                            markdown_path)


def replot(json_path: str, markdown_path=None) -> int:
    """Re-draw the PNG, re-print the table and (with ``markdown_path``) re-write the page of an
    earlier run from its JSON file."""
    try:
        report = load_report(json_path, CONTENDERS)
    except ValueError as error:
        print(f"longformer-bench: error: {error}", file=sys.stderr)
        return 2
    png_path = os.path.splitext(json_path)[0] + ".png"
    print(format_table(report["results"]))
    plot(report["results"], png_path, plot_title(report["settings"], report["environment"]))
    if markdown_path:
        write_page(report, json_path, png_path, markdown_path)
    print(f"\nwrote {png_path}" + (f" and {markdown_path}" if markdown_path else ""))
    return 0


def main(argv=None) -> int:
    from tqdm import tqdm

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["train-steps"]:  # whole training steps: tokens/s, memory, MFU (bench_train.py)
        from .bench_train import main as train_steps_main

        return train_steps_main(argv[1:])
    args = parse_args(argv)
    try:
        require_matplotlib()  # fail now, not after half an hour of measuring
    except ImportError as error:
        print(f"longformer-bench: error: {error}", file=sys.stderr)
        return 2
    if args.replot:
        return replot(args.replot, args.markdown)
    load_start = load_at_start(args, "longformer-bench")
    if load_start is None:
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    limit_mb = memory_limit_mb(args) if args.device == "cpu" else None
    # what every case of the run shares; each case sets its contender, length, global tokens and rate
    sizes = Case(impl="dense", length=0, global_tokens=0, batch=args.batch, heads=args.heads, head_dim=args.head_dim,
                 window=args.window, device=args.device, dtype=args.dtype, repeats=args.repeats,
                 threads=args.threads, time_cap=args.time_cap, memory_limit_mb=limit_mb,
                 output_projection=args.output_projection)
    cases = [replace(sizes, impl=impl, length=length, global_tokens=g, dropout=p)
             # length-major, contenders and rates adjacent: they run side by side in time
             for length in sorted(args.lengths) for g in args.global_tokens for p in args.dropout
             for impl in args.impls]
    info = environment(args, load_start)
    results, limits, given_up = [], [], {}
    started = time.time()
    # one point = the contenders at one length and global-token count, at every rate, timed side
    # by side with the matmul limit's worker
    points = {}
    for case in cases:
        points.setdefault((case.length, case.global_tokens), []).append(case)
    with tqdm(total=len(cases), desc="longformer-bench", unit="case", dynamic_ncols=True) as progress:
        for (length, global_tokens), point in points.items():
            progress.set_postfix_str(f"N={length} G={global_tokens}: {' '.join(args.impls)} at p="
                                     + " ".join(f"{p:g}" for p in args.dropout))
            skipped, to_run = {}, []
            for case in point:
                previous = given_up.get((case.impl, case.global_tokens, case.dropout))
                if previous is not None:
                    skipped[case.impl, case.dropout] = Result(
                        case, status=previous.status, note=f"skipped: {previous.status} already at N={previous.case.length}")
                else:
                    to_run.append(case)
            limit, *timed = run_side_by_side([matmul_limit.limit_case(sizes, length, global_tokens)] + to_run,
                                             quiet_below=args.quiet_below, quiet_wait=args.quiet_wait)
            limits.append(matmul_limit.limit_row(limit))
            measured = {(c.impl, c.dropout): r for c, r in zip(to_run, timed)}
            for case in point:
                key = (case.impl, case.dropout)
                result = skipped.get(key) or measured[key]
                if result.status in ("oom", "too_slow") and key not in skipped:
                    given_up[(case.impl, case.global_tokens, case.dropout)] = result
                if result.status not in ("ok", "n/a"):
                    progress.write(f"{case.impl} N={case.length} G={case.global_tokens} p={case.dropout:g}: "
                                   f"{result.status} {result.note}")
                results.append(result)
                progress.update(1)
    rows = matmul_limit.add_efficiency(add_ratios(results), limits, sizes)
    print(format_table(rows))

    json_path = write_report(args, rows, started, environment=info, matmul_limits=limits,
                             flops_definition=matmul_limit.FLOPS_DEFINITION)
    png_path = os.path.join(args.out_dir, args.name + ".png")
    plot(rows, png_path, plot_title(settings(args), info))
    if args.markdown:
        write_page(load_report(json_path, CONTENDERS), json_path, png_path, args.markdown)
    print(f"\nwrote {json_path} and {png_path}" + (f" and {args.markdown}" if args.markdown else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
