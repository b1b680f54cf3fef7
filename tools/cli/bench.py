"""longformer-bench: the paper's Figure 1 (time and memory of self-attention against sequence
length) measured on the machine at hand.

Whole modules are measured from input hidden states (B, N, heads * head_dim), q/k/v projections
included, up to the heads' output (Hugging Face's LongformerSelfAttention boundary;
--output-projection adds the output projection to every contender): full self-attention (dense SDPA with the Longformer
pattern as a boolean mask), our module with each implementation, and Hugging Face's
LongformerSelfAttention, each at every --dropout rate (attention dropout in training mode).
Every row's useful GFLOP/s is reported as a fraction of the machine's matmul peak, measured in
the same run (large square products, ``bench/matmul_peak.py``; a fraction above 100% stops the
run as a measurement bug); beside it a worker times plain matmuls at the layer's own shapes
(``bench/matmul_limit.py``: a rate, not a ceiling). With --busy N each point is timed again
beside N spin processes (``bench/busy_mode.py``). Writes a table to stdout, ``<name>.json`` and ``<name>.png`` to
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

from longformer_common.cli import one_line_errors

from ..bench import busy_mode, matmul_limit, matmul_peak, results_page
from ..bench.contenders import CONTENDERS, Case
from ..bench.measure import Result
from ..bench.figure1 import plot, require_matplotlib
from ..bench.ratios import add_ratios, format_table
from ..bench.commands import CPU_LENGTHS, GPU_LENGTHS, figure1_page, figure1_parser
from ..bench.workers import call_in_fresh_process, run_side_by_side
from ..bench.bench_args import (check_dropout, check_run_arguments, load_at_start, load_report, memory_limit_mb,
                                resolve_device, settings, write_report)

def build_parser() -> argparse.ArgumentParser:
    return figure1_parser(__doc__)


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    resolve_device(parser, args)
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
    if args.busy < 0:
        parser.error(f"--busy must be >= 0 (spin processes), got {args.busy}")
    if args.busy and "dense" not in args.impls:
        parser.error("--busy compares every contender with dense: add dense to --impls")
    if not args.peak_sizes or min(args.peak_sizes) < 1:
        parser.error("--peak-sizes must be >= 1")
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
    results_page.write_page(figure1_page(report, json_path, markdown_path, png_path), markdown_path)


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


@one_line_errors
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
    # in a forked child: torch's parallel work in this process would hang the workers it forks later
    peaks = call_in_fresh_process(matmul_peak.peaks, args.dtype, args.threads, args.device, args.peak_sizes)
    results, limits, given_up, busy_results = [], [], {}, []
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
            if args.busy:  # the same contenders again, right away, beside the competing load
                ran = [c for c, r in zip(to_run, timed) if r.status == "ok"]
                busy_results += busy_mode.time_beside_load(
                    ran, args.busy, auto_most=torch.get_num_threads() if args.auto_threads else None)
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
    peaks = matmul_peak.merge(peaks, call_in_fresh_process(matmul_peak.peaks, args.dtype, args.threads, args.device,
                                                           args.peak_sizes))
    rows = matmul_limit.add_efficiency(add_ratios(results), limits, sizes)
    matmul_peak.add_fractions(rows, peaks[args.dtype]["gflops"])
    print(format_table(rows))
    print("\n" + results_page.peak_line(peaks))
    wrong = matmul_peak.check_fractions(rows)
    if wrong:
        print(f"longformer-bench: error: {wrong}", file=sys.stderr)
        return 3
    busy = {}
    if args.busy:
        busy_rows = add_ratios(busy_results)
        busy = {"busy_results": busy_rows, "busy_summary": busy_mode.summary(rows, busy_rows),
                "busy_definition": busy_mode.BUSY_DEFINITION.format(processes=args.busy)}
        print("\n" + "\n".join(busy_mode.table_lines(busy["busy_summary"])))

    json_path = write_report(args, rows, started, environment=info, matmul_peak=peaks, matmul_shape_rates=limits,
                             flops_definition=matmul_limit.FLOPS_DEFINITION,
                             peak_definition=matmul_peak.PEAK_DEFINITION.format(
                                 repeats=matmul_peak.REPEATS, sizes=args.peak_sizes), **busy)
    png_path = os.path.join(args.out_dir, args.name + ".png")
    plot(rows, png_path, plot_title(settings(args), info))
    if args.markdown:
        write_page(load_report(json_path, CONTENDERS), json_path, png_path, args.markdown)
    print(f"\nwrote {json_path} and {png_path}" + (f" and {args.markdown}" if args.markdown else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
