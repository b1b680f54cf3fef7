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
import sys

from longformer_common.cli import one_line_errors

from ..bench import model_benchmark
from ..bench.led_encoder import ENCODERS, EncoderCase, check_in_fresh_process, format_rows, ratio_rows
from ..bench.commands import led_page, led_parser
from ..bench.workers import run_side_by_side
from ..bench.bench_args import check_run_arguments


def build_parser() -> argparse.ArgumentParser:
    return led_parser(__doc__)


def check_args(parser, args) -> None:
    check_run_arguments(parser, args)
    if args.check_length > args.window + 1:
        parser.error(f"--check-length {args.check_length} must be at most --window + 1 = {args.window + 1}")


def cases(args, length: int, limit_mb) -> list:
    """Both encoders at ``length``, the first token global."""
    return [EncoderCase(impl=impl, length=length, global_tokens=1, heads=args.heads, head_dim=args.head_dim,
                        layers=args.layers, ffn=args.ffn, vocab=args.vocab, window=args.window,
                        bart_positions=args.bart_positions, repeats=args.repeats, threads=args.threads,
                        time_cap=args.time_cap, memory_limit_mb=limit_mb)
            for impl in ENCODERS]


def check(args, cases_at, say) -> dict:
    """Both encoders at --check-length, inside the window, where the LED computes BART's function."""
    difference = check_in_fresh_process(cases_at(args.check_length)[0])
    say(f"check at N={args.check_length} (inside the window w={args.window}): largest |LED - dense| = "
        f"{difference:.2e} (tolerance {args.tolerance:g})")
    if not difference <= args.tolerance:  # a NaN fails too
        raise model_benchmark.Disagreement("the encoders disagree where they must compute the same function")
    return {"check": {"length": args.check_length, "max_abs_diff": difference}}


BENCHMARK = model_benchmark.ModelBenchmark(
    prog="longformer-bench-led", build_parser=build_parser, check_args=check_args, impls=ENCODERS, cases=cases,
    check=check, ratio_rows=ratio_rows, format_rows=format_rows, page=led_page,
    run_side_by_side=lambda cases, **how: run_side_by_side(cases, **how))  # looked up late: tests replace it
parse_args, main = BENCHMARK.parse_args, one_line_errors(BENCHMARK.main)

if __name__ == "__main__":
    sys.exit(main())
