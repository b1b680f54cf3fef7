"""What the benchmark commands (longformer-bench, -lm, -led and -mlm) share:
the flags of a run, their checks, the workers' memory limit and the JSON report."""
import json
import os
import platform
import sys
import time
from typing import Optional

import torch

from longformer_common import quiet
from longformer_common import threads as thread_policy
from longformer_common.provenance import provenance

from . import results_page
from .measure import MEMORY_HELP
from .ratios import MEMORY_RATIO_DEFINITION, SPEEDUP_DEFINITION
from .workers import default_memory_limit_mb


def int_list(text: str):
    """'512,1024' or '512 1024' -> [512, 1024]."""
    return [int(v) for v in text.replace(",", " ").split()]


class DefaultCount(int):
    """A command's default --threads: an int that says it was not given (the thread policy lets
    OMP_NUM_THREADS and LONGFORMER_THREADS=auto win over it, never over an explicit --threads N)."""


def add_run_arguments(parser, *, unit: str, lengths, lengths_help: str, repeats: int, threads: int,
                      time_cap: Optional[float], name: Optional[str], step: str = "forward+backward",
                      files: str = "the JSON", time_cap_help: Optional[str] = None,
                      name_help: Optional[str] = None) -> None:
    """Add --lengths, --repeats, --threads, --time-cap, --memory-limit-gb, --quiet-wait,
    --quiet-below, --out-dir, --name, --load-wait and --allow-load with this command's defaults. ``unit``: what one timing
    measures ("case", "model", "encoder"); ``step``: the timed call; ``files``: what --out-dir
    receives. A default worked out after parsing is None, with its help text given."""
    parser.add_argument("--lengths", type=int_list, default=lengths, help=lengths_help)
    parser.add_argument("--repeats", type=int, default=repeats,
                        help=f"timed calls per {unit} (median reported), default {repeats}")
    parser.add_argument("--threads", type=thread_policy.thread_count, default=DefaultCount(threads),
                        help=f"torch.set_num_threads in each worker (CPU): N, or auto (the cores other processes "
                             f"leave free, measured at the start and again beside --busy's load); default "
                             f"{threads}, or OMP_NUM_THREADS, or auto under LONGFORMER_THREADS=auto")
    parser.add_argument("--time-cap", type=float, default=time_cap,
                        help=time_cap_help or f"seconds one {step} may take before the {unit} counts as "
                                              f"too slow (default {time_cap:g})")
    parser.add_argument("--memory-limit-gb", type=float, default=None,
                        help="CPU: address-space headroom of each worker process, so that an "
                             "oversized case fails as OOM instead of starving the machine "
                             "(default: 60%% of the memory available at start)")
    parser.add_argument("--quiet-wait", type=float, default=0.0,
                        help="CPU: before timing a case, wait up to this many seconds for other "
                             "work on the machine to use fewer than --quiet-below cores (default 0: "
                             "do not wait). The busy cores seen before each timing are recorded in "
                             "the JSON either way.")
    parser.add_argument("--quiet-below", type=float, default=0.5,
                        help="cores of other work below which the machine counts as quiet (default 0.5)")
    parser.add_argument("--out-dir", default="bench", help=f"the folder for {files} (default bench/)")
    parser.add_argument("--name", default=name, help=name_help or f"file name stem (default {name})")
    quiet.add_load_arguments(parser)


def load_at_start(args, program: str):
    """The load average at the start of a run (``longformer_common.quiet.load_at_start``): after
    the quiet wait when --out-dir or --markdown is in docs/results/; None after the refusal."""
    return quiet.load_at_start(program, [args.out_dir, getattr(args, "markdown", None)], args.load_wait,
                               args.allow_load)


def add_page_arguments(parser, redraws: str = "") -> None:
    """Add --markdown PATH (the results page beside the JSON, ``bench.results_page``) and
    --replot JSON (measure nothing: re-print the table and re-write the page from a stored run;
    ``redraws`` names what else it redraws)."""
    parser.add_argument("--markdown", metavar="PATH", default=None,
                        help="also write the results as a markdown page, headed by the command that "
                             "regenerates it (e.g. docs/results/<name>.md)")
    parser.add_argument("--replot", metavar="JSON", default=None,
                        help=f"measure nothing: re-print the table{redraws} and, with --markdown, re-write "
                             "the page from an earlier run's JSON file")


def check_page_path(args) -> None:
    """A ValueError when --markdown would overwrite the run's own JSON or PNG (with --replot, the
    input): the page goes beside them, never over them."""
    if not getattr(args, "markdown", None):  # also a command without --markdown
        return
    stem = os.path.splitext(args.replot)[0] if args.replot else os.path.join(args.out_dir, args.name)
    for data in (stem + ".json", stem + ".png"):
        if os.path.abspath(args.markdown) == os.path.abspath(data):
            raise ValueError(f"--markdown {args.markdown} is the run's own {os.path.basename(data)}; "
                             "name a .md file beside it")


def check_run_arguments(parser, args, min_length: int = 1) -> None:
    """Stop with parser.error (exit status 2) on --repeats or --threads below 1, no length or
    one below ``min_length``, or a --markdown page aimed at the run's own JSON or PNG."""
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    resolve_threads(args)
    if not args.lengths or min(args.lengths) < min_length:
        parser.error(f"--lengths must be >= {min_length}")
    try:
        check_page_path(args)
    except ValueError as error:
        parser.error(str(error))


def resolve_threads(args) -> None:
    """--threads after the thread policy (``longformer_common.threads``): ``args.threads`` becomes
    the count to use now (auto: the free cores, at most torch's own count), ``args.thread_policy``
    says where it came from, ``args.auto_threads`` whether a busy phase measures it again."""
    given = None if isinstance(args.threads, DefaultCount) else args.threads
    policy = thread_policy.choose(given, default=int(args.threads) if given is None else None)
    args.thread_policy, args.auto_threads = policy.describe(), policy.auto
    args.threads = policy.threads(torch.get_num_threads(), interval=thread_policy.BENCH_INTERVAL)


def check_dropout(parser, flag: str, rates) -> None:
    """Stop with parser.error (exit status 2) on a dropout rate outside [0, 1)."""
    for rate in rates:
        if not 0.0 <= rate < 1.0:  # NaN fails too
            parser.error(f"{flag} must be in [0, 1) (a probability of dropping), got {rate:g}")


def memory_limit_mb(args) -> Optional[float]:
    """Each worker's address-space limit in MB: --memory-limit-gb, else 60% of the memory available."""
    return args.memory_limit_gb * 1024 if args.memory_limit_gb else default_memory_limit_mb()


def settings(args) -> dict:
    """The flags that describe the measurement (all but --out-dir, --name, --markdown, --replot)."""
    chosen = {k: v for k, v in vars(args).items()
              if k not in ("out_dir", "name", "markdown", "replot", "load_wait", "allow_load", "auto_threads")}
    if getattr(args, "auto_threads", False):  # the command line says auto; the count used is kept beside it
        chosen.update(threads="auto", threads_quiet=args.threads)
    return chosen


def load_report(path: str, impls) -> dict:
    """An earlier run's JSON report (``write_report``) whose rows are all of ``impls``, else a
    ValueError naming the file and what is wrong with it."""
    try:
        with open(path) as handle:
            report = json.load(handle)
    except (OSError, ValueError) as error:
        raise ValueError(f"--replot {path}: cannot read it as JSON ({error}); give the .json of an earlier run of this "
                         "command") from None
    if not isinstance(report, dict) or not isinstance(report.get("settings"), dict) or not report.get("results"):
        raise ValueError(f"--replot {path}: no 'settings' and 'results' in it; give the .json of an earlier run of this command")
    foreign = sorted({str(row.get("impl")) for row in report["results"]} - set(impls))
    if foreign:
        raise ValueError(f"--replot {path}: rows of {', '.join(foreign)}, not of this command's "
                         f"{', '.join(impls)}; give the .json of an earlier run of this command")
    return report


def write_report(args, rows, started: float, environment: Optional[dict] = None, **sections) -> str:
    """Write <--out-dir>/<--name>.json and return its path: settings, ``sections`` (e.g. the
    correctness checks), environment (torch, python, processor, cpus, load average at the end,
    seconds since ``started``; ``environment`` adds to it and wins), the memory method, the ratios'
    definitions (speedup = baseline time / this time, memory ratio = this peak / baseline peak)
    and the result rows."""
    info = {"torch": torch.__version__, "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "load_average_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "seconds": round(time.time() - started, 1)}
    info.update(environment or {})
    report = {"settings": settings(args), **sections, "environment": info, "provenance": provenance(),
              "memory_method": MEMORY_HELP,
              "speedup_definition": SPEEDUP_DEFINITION, "memory_ratio_definition": MEMORY_RATIO_DEFINITION,
              "results": rows}
    path = os.path.join(args.out_dir, args.name + ".json")
    with open(path, "w") as handle:
        json.dump(report, handle, indent=1)
    return path


def resolve_device(parser, args) -> None:
    """``--device auto`` becomes cuda where torch sees a GPU, else cpu; ``--device cuda`` without
    one is a usage error naming the fix."""
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda but torch.cuda.is_available() is False: use --device cpu")


def finish_model_report(args, rows, started: float, impls, format_rows, page, environment: Optional[dict] = None,
                        **sections) -> int:
    """The end of a whole-model benchmark: print its table, write its JSON report (``write_report``)
    and, with --markdown, its page rendered from that JSON; 0."""
    print()
    print(format_rows(rows))
    path = write_report(args, rows, started, environment, **sections)
    if args.markdown:
        results_page.write_page(page(load_report(path, impls), path, args.markdown), args.markdown)
    print(f"\nwrote {path}" + (f" and {args.markdown}" if args.markdown else ""))
    return 0


def replot_model_report(program: str, json_path: str, impls, format_rows, page, markdown_path=None) -> int:
    """``--replot`` of the whole-model benchmarks: re-print the table of a stored run and (with
    ``markdown_path``) re-write its page, ``page(report, json_path, markdown_path)``; 2 when the
    file is not a report of ``program``."""
    try:
        report = load_report(json_path, impls)
    except ValueError as error:
        print(f"{program}: error: {error}", file=sys.stderr)
        return 2
    print(format_rows(report["results"]))
    if markdown_path:
        results_page.write_page(page(report, json_path, markdown_path), markdown_path)
        print(f"\nwrote {markdown_path}")
    return 0
