"""One training step of the char-LM: ``longformer_lm_small`` against the same model with dense
causal attention (SDPA with the layer's causal dilated window as a boolean mask), time and peak
memory, side by side in one run, printed as ratios.

    longformer-bench-lm --lengths 4096,16384

For each length: both models are built from the same seed (the same weights) and their losses on
the same characters compared (eval mode); the run stops with exit status 1 when they differ by
more than --loss-tolerance. Then peak memory of each in a fresh process, then the two timed side
by side, round-robin (``longformer_tools/bench/``: ``lm_step``, ``workers``, ``measure``).
Writes the table to stdout and ``<out-dir>/<name>.json``, and with --markdown PATH the results page.
"""
import argparse
import sys

from longformer_common.cli import one_line_errors

from ..bench import model_benchmark
from ..bench.lm_step import MODELS, LMStepCase, format_rows, loss_check, ratio_rows
from ..bench.commands import lm_page, lm_parser
from ..bench.workers import run_side_by_side
from ..bench.bench_args import check_run_arguments

# the check before timing: both models' eval losses on the same inputs, at every length
LOSSES = model_benchmark.LossComparison(
    baseline="dense", relative=False, loss="loss", cause="the dense mask is not the Longformer pattern")


def build_parser() -> argparse.ArgumentParser:
    return lm_parser(__doc__)


def check_args(parser, args) -> None:
    check_run_arguments(parser, args, min_length=2)
    if args.batch < 1:
        parser.error(f"--batch must be >= 1, got {args.batch}")


def cases(args, length: int, limit_mb) -> list:
    """Both models at ``length``, the same seed: the same weights."""
    return [LMStepCase(impl=impl, length=length, global_tokens=0, arch=args.arch, batch=args.batch,
                       repeats=args.repeats, threads=args.threads, time_cap=args.time_cap, memory_limit_mb=limit_mb,
                       seed=args.seed, checkpoint_activations=args.checkpoint_activations,
                       relative_positions=args.relative_positions, dense_window_offset=args.dense_window_offset)
            for impl in MODELS]


BENCHMARK = model_benchmark.ModelBenchmark(
    prog="longformer-bench-lm", build_parser=build_parser, check_args=check_args, impls=MODELS, cases=cases,
    check=lambda args, cases_at, say: model_benchmark.loss_checks(args, cases_at, say, loss_check, LOSSES),
    ratio_rows=ratio_rows, format_rows=format_rows, page=lm_page,
    run_side_by_side=lambda cases, **how: run_side_by_side(cases, **how))  # looked up late: tests replace it
parse_args, main = BENCHMARK.parse_args, one_line_errors(BENCHMARK.main)

if __name__ == "__main__":
    sys.exit(main())
