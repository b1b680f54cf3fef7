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
import os
import sys
import time

from ..bench.measure import MEMORY_HELP
from ..bench.mlm_step import MODELS, MLMStepCase, format_rows, import_models, loss_check, ratio_rows
from ..bench.workers import run_side_by_side
from ..bench import results_page
from .bench_args import (add_page_arguments, add_run_arguments, check_dropout, check_page_path, check_run_arguments,
                         load_at_start, load_report, memory_limit_mb, replot_model_report, write_report)

PROG = "longformer-bench-mlm"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Memory: " + MEMORY_HELP + "\n\nTime: median of --repeats calls after a warm-up call. A step "
               "is forward, masked-LM loss and backward into every weight, in training mode (--dropout, "
               "--attention-dropout); ours sends only the masked positions through the LM head (fairseq's "
               "criterion), transformers every position (its forward with labels). 'fwd' is the eval-mode "
               "forward without gradients, every position's logits in both.")
    add_run_arguments(parser, unit="model", lengths=[4096], lengths_help="tokens per sequence (default 4096)",
                      repeats=3, threads=2, time_cap=900.0, name="mlm_step_cpu", step="step")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--window", type=int, default=256,
                        help="ONE-sided window w (default 256 = Hugging Face attention_window 512)")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=768, help="width; the feed-forward is 4x (default 768)")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--vocab", type=int, default=50265,
                        help="dictionary size, specials and <mask> included (default 50265, RoBERTa's)")
    parser.add_argument("--dropout", type=float, default=0.1, help="hidden dropout of both models (default 0.1)")
    parser.add_argument("--attention-dropout", type=float, default=0.1,
                        help="attention-probability dropout of both models (default 0.1)")
    parser.add_argument("--loss-tolerance", type=float, default=1e-4,
                        help="largest |our loss - transformers' loss| / transformers' loss accepted before timing")
    parser.add_argument("--seed", type=int, default=0)
    add_page_arguments(parser)
    return parser


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
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
    try:
        check_page_path(args)
    except ValueError as error:
        parser.error(str(error))
    return args


def page(report: dict, json_path: str, markdown_path: str) -> str:
    """The results page of a stored run (``bench.results_page``)."""
    s = report["settings"]
    title = (f"Masked-LM training step, {s['layers']} layers x {s['hidden']}, {s['heads']} heads, w = {s['window']}, "
             f"vocabulary {s['vocab']:,}: ours against transformers' LongformerForMaskedLM")
    return results_page.model_page(report, build_parser(), PROG, title, MODELS, json_path, markdown_path, step="step")


def main(argv=None) -> int:
    from tqdm import tqdm

    args = parse_args(argv)
    if args.replot:
        return replot_model_report(PROG, args.replot, MODELS, format_rows, page, args.markdown)
    try:
        import_models()  # fail now, not after the first model is built
    except ImportError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    load_start = load_at_start(args, PROG)
    if load_start is None:
        return 2
    os.makedirs(args.out_dir, exist_ok=True)
    limit_mb = memory_limit_mb(args)
    started = time.time()
    results, checks = [], {}
    with tqdm(total=len(args.lengths) * len(MODELS), desc=PROG, unit="model", dynamic_ncols=True) as progress:
        for length in sorted(args.lengths):
            cases = [MLMStepCase(impl=impl, length=length, global_tokens=0, batch=args.batch, window=args.window,
                                 layers=args.layers, heads=args.heads, head_dim=args.hidden // args.heads,
                                 vocab=args.vocab, hidden_dropout=args.dropout,
                                 attention_dropout=args.attention_dropout, seed=args.seed, repeats=args.repeats,
                                 threads=args.threads, time_cap=args.time_cap, memory_limit_mb=limit_mb)
                     for impl in MODELS]
            progress.set_postfix_str(f"N={length}: checking that both models give the same loss")
            ours, theirs, logit_difference = loss_check(cases[0])
            difference = abs(ours - theirs) / abs(theirs) if theirs else float("inf")
            checks[length] = {"longformer_loss": ours, "transformers_loss": theirs, "relative_difference": difference,
                              "max_logit_difference": logit_difference}
            progress.write(f"N={length}: masked-LM loss longformer {ours:.6f}, transformers {theirs:.6f} nats "
                           f"(relative difference {difference:.2e}, tolerance {args.loss_tolerance:g}; largest "
                           f"logit difference {logit_difference:.2e})")
            if not difference <= args.loss_tolerance:  # a NaN fails too
                print(f"{PROG}: error: at N={length} the two models disagree (relative loss difference "
                      f"{difference:.3g} > {args.loss_tolerance:g}): the weights did not carry over; nothing timed",
                      file=sys.stderr)
                return 1
            progress.set_postfix_str(f"N={length}: peak memory, then {args.repeats} steps of each side by side")
            for result in run_side_by_side(cases, quiet_below=args.quiet_below, quiet_wait=args.quiet_wait):
                if result.status != "ok":
                    progress.write(f"{result.case.impl} N={length}: {result.status} {result.note}")
                results.append(result)
                progress.update(1)
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
