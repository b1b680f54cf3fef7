"""longformer-bench-led: the LED encoder against BART's dense encoder on the same input, forward
and forward+backward, time and peak memory, on the machine at hand.

Both encoders hold the weights of one random BART (bart.base sizes by default: 6 layers, 768
wide, 12 heads, FFN 3072, BART's 50,265-token table) whose 1,024 learned positions are tiled to
the input's length, as longformer-convert-bart tiles them; the LED's window is --window (one-sided,
512 as in the released LED) with the first token global. Before anything is timed, both encoders
run at --check-length (inside the window, where the LED computes BART's function) and must agree
to --tolerance. Then, per length: peak memory of each encoder in a fresh process, and the two
timed side by side (round-robin, so a busy spell of a shared machine falls on both alike).
Writes a table to stdout and ``<name>.json`` to --out-dir (with --markdown PATH, the results page
too); speedup = dense time / LED time (> 1: the LED faster), memory ratio = LED peak / dense peak
(< 1: the LED needs less). The measuring code: longformer_tools/bench/led_encoder.py (and
workers.py, measure.py).
"""
import argparse
import os
import sys
import time

from ..bench.led_encoder import ENCODERS, EncoderCase, check_in_fresh_process, format_rows, ratio_rows
from ..bench import results_page
from ..bench.measure import MEMORY_HELP
from ..bench.workers import run_side_by_side
from .bench_args import (add_page_arguments, add_run_arguments, check_run_arguments, load_at_start, load_report,
                         memory_limit_mb, replot_model_report, write_report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="longformer-bench-led", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Memory: " + MEMORY_HELP)
    add_run_arguments(parser, unit="encoder", lengths=[4096, 16384],
                      lengths_help="source lengths N (default 4096,16384)", repeats=3, threads=2,
                      time_cap=3600.0, name="led_encoder_cpu")
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64, help="width = heads x head-dim (default 768)")
    parser.add_argument("--ffn", type=int, default=3072)
    parser.add_argument("--vocab", type=int, default=50265)
    parser.add_argument("--window", type=int, default=512, help="the LED's ONE-sided window w (default 512)")
    parser.add_argument("--bart-positions", type=int, default=1024, help="BART's learned positions (tiled)")
    parser.add_argument("--check-length", type=int, default=512,
                        help="N of the equality check before timing (at most w + 1; default 512)")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest |LED - dense| allowed there")
    add_page_arguments(parser)
    return parser


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    check_run_arguments(parser, args)
    if args.check_length > args.window + 1:
        parser.error(f"--check-length {args.check_length} must be at most --window + 1 = {args.window + 1}")
    return args


def page(report: dict, json_path: str, markdown_path: str) -> str:
    """The results page of a stored run (``bench.results_page``)."""
    s = report["settings"]
    title = (f"LED encoder against BART's dense encoder, {s['layers']} layer(s) of {s['heads'] * s['head_dim']}, "
             f"one-sided window w = {s['window']}, forward+backward")
    return results_page.model_page(report, build_parser(), "longformer-bench-led", title, ENCODERS, json_path,
                                   markdown_path)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.replot:
        return replot_model_report("longformer-bench-led", args.replot, ENCODERS, format_rows, page, args.markdown)
    load_start = load_at_start(args, "longformer-bench-led")
    if load_start is None:
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    limit_mb = memory_limit_mb(args)

    def case(impl, length):
        return EncoderCase(impl=impl, length=length, global_tokens=1, heads=args.heads, head_dim=args.head_dim,
                           layers=args.layers, ffn=args.ffn, vocab=args.vocab, window=args.window,
                           bart_positions=args.bart_positions, repeats=args.repeats, threads=args.threads,
                           time_cap=args.time_cap, memory_limit_mb=limit_mb)

    started = time.time()
    difference = check_in_fresh_process(case("led", args.check_length))
    print(f"check at N={args.check_length} (inside the window w={args.window}): largest |LED - dense| = "
          f"{difference:.2e} (tolerance {args.tolerance:g})")
    if not difference <= args.tolerance:
        print("longformer-bench-led: error: the encoders disagree where they must compute the same function",
              file=sys.stderr)
        return 1
    results = []
    for length in sorted(args.lengths):
        results += run_side_by_side([case(impl, length) for impl in ENCODERS], quiet_below=args.quiet_below,
                                    quiet_wait=args.quiet_wait)
        print(f"N={length} done ({time.time() - started:.0f} s, load average {os.getloadavg()[0]:.1f})", flush=True)
    rows = ratio_rows(results)
    print(format_rows(rows))
    load_end = os.getloadavg()
    print("load average (1, 5, 15 min) at start {:.1f} {:.1f} {:.1f}, at end {:.1f} {:.1f} {:.1f}; {} cores".format(
        *load_start, *load_end, os.cpu_count()))
    path = write_report(args, rows, started, environment={"load_average_at_start": load_start},
                        check={"length": args.check_length, "max_abs_diff": difference})
    if args.markdown:
        results_page.write_page(page(load_report(path, ENCODERS), path, args.markdown), args.markdown)
    print(f"wrote {path}" + (f" and {args.markdown}" if args.markdown else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
