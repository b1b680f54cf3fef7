"""longformer-bench-hf: transformers' stock Longformer and LED against the same models with this
project's attention swapped in (``longformer_kernels.hf.accelerate``), side by side on CPU:
Longformer forward and forward+backward at --length, the LED encoder at --led-length, LED
generation from a --gen-length source. Writes <--out-dir>/<--name>.json and .md (the page is
rendered from the stored JSON: ``--replot JSON`` re-renders it). The measuring code:
longformer_tools/bench/hf_accelerate.py.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict

from longformer_common import quiet

from ..bench.hf_accelerate import CASES, Sizes, page, run_case


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="longformer-bench-hf", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=1, help="layers of every model (default 1)")
    parser.add_argument("--hidden", type=int, default=768)
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--ffn", type=int, default=3072)
    parser.add_argument("--window", type=int, default=256,
                        help="ONE-sided w (default 256: longformer-base's attention_window 512)")
    parser.add_argument("--led-window", type=int, default=512,
                        help="the LED's ONE-sided w (default 512: the released LED's attention_window 1024)")
    parser.add_argument("--length", type=int, default=4096, help="Longformer tokens (default 4096)")
    parser.add_argument("--led-length", type=int, default=16384, help="LED encoder tokens (default 16384)")
    parser.add_argument("--gen-length", type=int, default=4096, help="LED source tokens for generation")
    parser.add_argument("--new-tokens", type=int, default=16, help="tokens LED generates (default 16)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per model (default 5)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--out-dir", default="docs/results")
    parser.add_argument("--name", default="hf_accelerate_cpu")
    parser.add_argument("--replot", metavar="JSON", help="re-render the page of a stored run and exit")
    quiet.add_load_arguments(parser)
    return parser


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.replot:
        try:
            with open(args.replot) as handle:
                report = json.load(handle)
            text = page(report)
        except (OSError, ValueError, KeyError) as error:
            print(f"longformer-bench-hf: error: --replot {args.replot}: not a report of this command "
                  f"({type(error).__name__}: {error}); give the .json a run of longformer-bench-hf wrote", file=sys.stderr)
            return 2
        with open(os.path.splitext(args.replot)[0] + ".md", "w") as handle:
            handle.write(text)
        print(text)
        return 0
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown or args.runs < 1 or args.threads < 1:
        parser.error(f"--cases takes {', '.join(CASES)} (got {unknown}); --runs and --threads must be >= 1")
    load_start = quiet.load_at_start("longformer-bench-hf", [args.out_dir], args.load_wait, args.allow_load)
    if load_start is None:
        return 2  # refused: the machine stayed busy (the line is printed)
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    sizes = Sizes(args.layers, args.hidden, args.heads, args.ffn, args.window, args.length, args.led_length,
                  args.gen_length, args.new_tokens, args.led_window)
    rows = []
    for case in cases:
        row = run_case(case, sizes, args.runs)
        print(f"{case}: stock {row['stock']['median_s']:.3f} s, accelerated {row['accelerated']['median_s']:.3f} s, "
              f"speedup {row['speedup']:.2f}, max |diff| {row['max_abs_difference']:.2g}, load {row['load_average_after']}",
              flush=True)
        rows.append(row)
    report = {
        "command": "longformer-bench-hf " + " ".join(argv if argv is not None else sys.argv[1:]),
        "settings": {**asdict(sizes), "runs": args.runs, "threads": args.threads},
        "environment": {"commit": _commit(), "date": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"), "processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "load_average_at_start": load_start,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None},
        "results": rows,
    }
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, args.name)
    with open(path + ".json", "w") as handle:
        json.dump(report, handle, indent=1)
    with open(path + ".md", "w") as handle:
        handle.write(page(report))
    print(f"wrote {path}.json and {path}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
