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
import os
import sys
import time

from ..bench.lm_step import MODELS, LMStepCase, format_rows, loss_check, ratio_rows
from ..bench import results_page
from ..bench.measure import MEMORY_HELP
from ..bench.workers import run_side_by_side
from .bench_args import (add_page_arguments, add_run_arguments, check_run_arguments, load_at_start, load_report,
                         memory_limit_mb, replot_model_report, write_report)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="longformer-bench-lm", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Memory: " + MEMORY_HELP + "\n\nTime: median of --repeats calls after a warm-up call. "
               "A step is forward, cross-entropy and backward into every weight, in training mode "
               "(dropout as the architecture's); 'fwd' is the eval-mode forward without gradients.")
    add_run_arguments(parser, unit="model", lengths=[4096, 16384],
                      lengths_help="characters per sequence (default 4096,16384)", repeats=3, threads=1,
                      time_cap=900.0, name="charlm_step_cpu", step="step")
    parser.add_argument("--arch", default="longformer_lm_small")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--checkpoint-activations", action="store_true",
                        help="both models recompute each layer in backward (fairseq's flag; the "
                             "char-LM recipes train with it)")
    parser.add_argument("--relative-positions", action="store_true",
                        help="both models with Transformer-XL's relative positions (the recipes' "
                             "setting): the dense one adds its (N, N) position scores as a float mask")
    parser.add_argument("--loss-tolerance", type=float, default=1e-4,
                        help="largest |longformer loss - dense loss| (nats) accepted before timing")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dense-window-offset", type=int, default=0, help=argparse.SUPPRESS)  # tests only
    add_page_arguments(parser)
    return parser


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    check_run_arguments(parser, args, min_length=2)
    if args.batch < 1:
        parser.error(f"--batch must be >= 1, got {args.batch}")
    return args


def page(report: dict, json_path: str, markdown_path: str) -> str:
    """The results page of a stored run (``bench.results_page``)."""
    s = report["settings"]
    title = (f"Char-LM training step, {s['arch']}, {'relative' if s.get('relative_positions') else 'learned'} "
             f"positions, activations {'checkpointed' if s.get('checkpoint_activations') else 'kept'}: "
             "Longformer against dense attention")
    return results_page.model_page(report, build_parser(), "longformer-bench-lm", title, MODELS, json_path,
                                   markdown_path, step="step")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.replot:
        return replot_model_report("longformer-bench-lm", args.replot, MODELS, format_rows, page, args.markdown)
    load_start = load_at_start(args, "longformer-bench-lm")
    if load_start is None:
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    limit_mb = memory_limit_mb(args)
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
        print(f"N={length}: peak memory, each model in a fresh process, then timing both side by side "
              f"({args.repeats} steps each)", flush=True)
        results += run_side_by_side(cases, quiet_below=args.quiet_below, quiet_wait=args.quiet_wait)
    rows = ratio_rows(results)
    print()
    print(format_rows(rows))
    path = write_report(args, rows, started, environment={"load_average_at_start": load_start}, loss_checks=checks)
    if args.markdown:
        results_page.write_page(page(load_report(path, MODELS), path, args.markdown), args.markdown)
    print(f"\nwrote {path}" + (f" and {args.markdown}" if args.markdown else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
