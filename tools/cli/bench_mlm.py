"""longformer-bench-mlm: one masked-LM training step of our ``longformer_base``-shaped masked LM
against Hugging Face's LongformerForMaskedLM holding the same weights, side by side in one run.

    longformer-bench-mlm --lengths 4096

Both models are one function: ours is built through fairseq's registries (the plugin's
``longformer_base`` with these sizes, random weights from --seed) and copied into
transformers' model by the plugin's exporter (attention_window = 2 * --window, the same vocabulary,
layers, width and dropout). For each length: both losses on the same random tokens (15% of them
masked) are compared in eval mode and the run stops with exit status 1 when they differ by more
than --loss-tolerance (relative); then peak memory of each in a fresh process, then the two timed
side by side, round-robin (``longformer_tools/bench/``: ``mlm_step``, ``workers``, ``measure``).
Writes the table (seconds per step, tokens per second, our speedup) to stdout and
``<out-dir>/<name>.json``, and with --markdown PATH the results page (--replot JSON re-renders it).
"""
import argparse
import sys

from longformer_common.cli import one_line_errors

from ..bench import model_benchmark
from ..bench.mlm_step import MODELS, MLMStepCase, format_rows, import_models, loss_check, ratio_rows
from ..bench.commands import mlm_page, mlm_parser
from ..bench.workers import run_side_by_side
from ..bench.bench_args import check_dropout, check_run_arguments

# the check before timing: both models' eval losses on the same inputs, at every length
LOSSES = model_benchmark.LossComparison(
    baseline="transformers", relative=True, loss="masked-LM loss", cause="the weights did not carry over")


def build_parser() -> argparse.ArgumentParser:
    return mlm_parser(__doc__)


def check_args(parser, args) -> None:
    check_run_arguments(parser, args, min_length=4)  # 15% of 4 tokens: at least one target
    for name in ("batch", "window", "layers", "hidden", "heads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if args.hidden % args.heads:
        parser.error(f"--hidden {args.hidden} must be a multiple of --heads {args.heads}")
    if args.vocab < 6:
        parser.error(f"--vocab must be >= 6 (fairseq's 4 specials, <mask> and a word), got {args.vocab}")
    check_dropout(parser, "--dropout", [args.dropout])
    check_dropout(parser, "--attention-dropout", [args.attention_dropout])


def cases(args, length: int, limit_mb) -> list:
    """Both models at ``length``, the same seed: ours random, copied into transformers'."""
    return [MLMStepCase(impl=impl, length=length, global_tokens=0, batch=args.batch, window=args.window,
                        layers=args.layers, heads=args.heads, head_dim=args.hidden // args.heads, vocab=args.vocab,
                        hidden_dropout=args.dropout, attention_dropout=args.attention_dropout, seed=args.seed,
                        repeats=args.repeats, threads=args.threads, time_cap=args.time_cap, memory_limit_mb=limit_mb)
            for impl in MODELS]


BENCHMARK = model_benchmark.ModelBenchmark(
    prog="longformer-bench-mlm", build_parser=build_parser, check_args=check_args, impls=MODELS, cases=cases,
    check=lambda args, cases_at, say: model_benchmark.loss_checks(args, cases_at, say, loss_check, LOSSES),
    ratio_rows=ratio_rows, format_rows=format_rows, page=mlm_page, prepare=import_models,
    run_side_by_side=lambda cases, **how: run_side_by_side(cases, **how))  # looked up late: tests replace it
parse_args, main = BENCHMARK.parse_args, one_line_errors(BENCHMARK.main)

if __name__ == "__main__":
    sys.exit(main())
