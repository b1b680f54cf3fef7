"""The main of the whole-model benchmarks (longformer-bench-lm, -led and -mlm), one model against a
baseline: read and check the flags; --replot a stored run, or refuse a busy machine; check that
the two models compute the same function before anything is timed; then, length by length, peak
memory of each in a fresh process and the two timed side by side (``workers.run_side_by_side``);
last, the table, the JSON report and the page (``bench_args.finish_model_report``). Each command
describes itself in a ``ModelBenchmark``."""
import argparse
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from . import workers
from .bench_args import finish_model_report, load_at_start, memory_limit_mb, replot_model_report

CasesAt = Callable[[int], list]  # a length -> one case per model, in ModelBenchmark.impls order
Say = Callable[[str], None]  # prints a line of progress on stdout


class Disagreement(Exception):
    """The models differ where they must compute the same function: the run stops, nothing timed."""


@dataclass(frozen=True)
class ModelBenchmark:
    """What one whole-model benchmark gives ``main``.

    prog: the command's name; build_parser: its flags; check_args(parser, args): parser.error on a
    bad combination; impls: (model, baseline); cases(args, length, memory_limit_mb): one case per
    model; check(args, cases_at, say): the report's sections recording the correctness check, or a
    Disagreement; ratio_rows, format_rows, page: the report's rows, table and results page;
    prepare(): imports needed before anything runs, an ImportError saying how to install them;
    run_side_by_side: ``workers.run_side_by_side``, or the command's own name for it (a test may
    replace it there)."""
    prog: str
    build_parser: Callable[[], argparse.ArgumentParser]
    check_args: Callable[[argparse.ArgumentParser, argparse.Namespace], None]
    impls: Sequence[str]
    cases: Callable[[argparse.Namespace, int, Optional[float]], list]
    check: Callable[[argparse.Namespace, CasesAt, Say], dict]
    ratio_rows: Callable[[list], List[dict]]
    format_rows: Callable[[List[dict]], str]
    page: Callable[[dict, str, str], str]
    prepare: Optional[Callable[[], None]] = None
    run_side_by_side: Callable[..., list] = workers.run_side_by_side

    def parse_args(self, argv=None) -> argparse.Namespace:
        """The flags of ``argv``; a bad one stops with the parser's one-line error (exit status 2)."""
        parser = self.build_parser()
        args = parser.parse_args(argv)
        self.check_args(parser, args)
        return args

    def main(self, argv=None) -> int:
        """Run the benchmark with the flags of ``argv``: 0, 1 when the models disagree (nothing timed or
        written), 2 when it refuses to start."""
        from tqdm import tqdm

        args = self.parse_args(argv)
        if args.replot:
            return replot_model_report(self.prog, args.replot, self.impls, self.format_rows, self.page, args.markdown)
        try:
            if self.prepare:
                self.prepare()  # fail now, not after the first model is built
        except ImportError as error:
            print(f"{self.prog}: error: {error}", file=sys.stderr)
            return 2
        load_start = load_at_start(args, self.prog)
        if load_start is None:
            return 2
        os.makedirs(args.out_dir, exist_ok=True)
        limit_mb = memory_limit_mb(args)
        started = time.time()
        results = []
        with tqdm(total=len(args.lengths) * len(self.impls), desc=self.prog, unit="model",
                  dynamic_ncols=True) as progress:
            progress.set_postfix_str("checking that the models compute the same function")
            try:
                sections = self.check(args, lambda length: self.cases(args, length, limit_mb), progress.write)
            except Disagreement as error:
                print(f"{self.prog}: error: {error}; nothing timed", file=sys.stderr)
                return 1
            for length in sorted(args.lengths):
                progress.set_postfix_str(f"N={length}: peak memory, then {args.repeats} calls of each side by side")
                for result in self.run_side_by_side(self.cases(args, length, limit_mb), quiet_below=args.quiet_below,
                                                    quiet_wait=args.quiet_wait):
                    if result.status != "ok":
                        progress.write(f"{result.case.impl} N={length}: {result.status} {result.note}")
                    results.append(result)
                    progress.update(1)
                progress.write(f"N={length} done ({time.time() - started:.0f} s, load average {os.getloadavg()[0]:.1f})")
        print("load average (1, 5, 15 min) at start {:.1f} {:.1f} {:.1f}, at end {:.1f} {:.1f} {:.1f}; {} cores".format(
            *load_start, *os.getloadavg(), os.cpu_count()))
        return finish_model_report(args, self.ratio_rows(results), started, self.impls, self.format_rows, self.page,
                                   environment={"load_average_at_start": load_start}, **sections)


@dataclass(frozen=True)
class LossComparison:
    """How a language-model benchmark holds its two models' eval losses on the same inputs against
    each other before timing: ``baseline`` names the second model; ``relative``: the difference
    divided by the baseline's loss (else in nats); ``loss``: what the loss is called; ``cause``:
    what a difference beyond --loss-tolerance means."""
    baseline: str
    relative: bool
    loss: str
    cause: str


def loss_checks(args, cases_at: CasesAt, say: Say, loss_check, comparison: LossComparison) -> dict:
    """The report's ``loss_checks``: at every length, ``loss_check(first case)`` -> (our loss, the
    baseline's, the largest logit difference), said as a line; a Disagreement when the losses
    differ by more than --loss-tolerance (a NaN too)."""
    checks = {}
    key, said = ("relative_difference", "relative difference") if comparison.relative else ("difference", "|difference|")
    for length in sorted(args.lengths):
        ours, theirs, logit_difference = loss_check(cases_at(length)[0])
        difference = abs(ours - theirs)
        if comparison.relative:
            difference = difference / abs(theirs) if theirs else float("inf")
        checks[length] = {"longformer_loss": ours, f"{comparison.baseline}_loss": theirs, key: difference,
                          "max_logit_difference": logit_difference}
        say(f"N={length}: {comparison.loss} longformer {ours:.6f}, {comparison.baseline} {theirs:.6f} nats ({said} "
            f"{difference:.2e}, tolerance {args.loss_tolerance:g}; largest logit difference {logit_difference:.2e})")
        if not difference <= args.loss_tolerance:  # a NaN fails too
            raise Disagreement(f"at N={length} the two models disagree ({said.replace('difference', 'loss difference')} "
                               f"{difference:.3g} > {args.loss_tolerance:g}): {comparison.cause}")
    return {"loss_checks": checks}
