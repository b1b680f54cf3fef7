"""longformer-bench train-steps: whole training steps (AdamW, bf16 autocast, activation
checkpointing off and on, the batch filling the GPU) of our longformer_base masked LM against
transformers' LongformerForMaskedLM and a RoBERTa with dense SDPA attention at 4,096 tokens, the
LED-large encoder at 16,384 and the char-LM at its longest phase: tokens/s, peak memory, MFU
against the bf16 matmul rate measured in the same run. On the CPU the same code at tiny sizes.
The measuring code is ``longformer_tools/bench/train_steps.py``; the FLOP count ``longformer_tools/flops.py``.
With --busy N every row is measured again beside N spin processes (``bench/competing_load.py``)
and each row's slowdown (quiet tokens/s / busy tokens/s) reported; --size quickstart is
recipes/quickstart.sh's model (e.g. --rows longformer_mlm,roberta_sdpa_mlm --checkpointing off
--max-batch 2 --repeats 5 --busy 1: the main job's training step quiet and busy). With
--omp-variants libgomp-default,passive,spin100000 the same rows are timed quiet (and with
--busy N also beside N spin processes, at the same thread count) under each OpenMP wait policy, side
by side, one fresh process per variant and round (``bench/omp_variants.py``);
--out X.json then writes X.md beside it, the results page.
"""
import argparse
import json
import os
import platform
import sys
import time

import torch

from longformer_common import quiet
from longformer_common import threads as thread_policy
from longformer_common.errors import UserInputError
from longformer_common.provenance import cpu_model, provenance
from longformer_common.results import stamped, write_page

from ..bench import omp_variants, train_steps
from ..bench.bench_args import resolve_device
from ..bench.competing_load import competing_load


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="longformer-bench train-steps", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"), help="auto: cuda when available")
    parser.add_argument("--size", choices=tuple(train_steps.SIZES), default=None,
                        help="full (the real models; default on CUDA) or tiny (default on the CPU)")
    parser.add_argument("--rows", default=",".join(train_steps.ROWS),
                        help=f"comma-separated, from {','.join(train_steps.ROWS)} (default: all)")
    parser.add_argument("--checkpointing", default="off,on", help="activation checkpointing: off, on or off,on")
    parser.add_argument("--max-batch", type=int, default=None,
                        help="largest batch tried on CUDA; the CPU's batch (default 64 on CUDA, 1 on CPU)")
    parser.add_argument("--repeats", type=int, default=None, help="timed steps per row (default 5 on CUDA, 1 on CPU)")
    parser.add_argument("--time-cap", type=float, default=60.0,
                        help="seconds a row's batch search may take before it stops doubling (default 60)")
    parser.add_argument("--threads", type=thread_policy.thread_count, default=None,
                        help="CPU threads of torch during the run: N, or auto (the cores other processes leave free, "
                             "measured at the start and again beside --busy's load, every row alike); default: "
                             "OMP_NUM_THREADS, else auto under LONGFORMER_THREADS=auto, else 1 at the tiny sizes and "
                             "torch's own otherwise")
    parser.add_argument("--busy", type=int, default=0, metavar="N",
                        help="measure every row again beside N pure-Python spin processes (started and killed "
                             "here) and report each row's slowdown (default 0: quiet only)")
    parser.add_argument("--omp-variants", default=None, metavar="V1,V2,...",
                        help="time the rows quiet (and beside --busy's load) under each of these OpenMP wait "
                             f"policies, from {','.join(omp_variants.VARIANTS)} or spinN (GOMP_SPINCOUNT=N) "
                             f"({omp_variants.BASELINE} among them: the ratios are to it), each in fresh "
                             "processes, interleaved over --omp-rounds rounds")
    parser.add_argument("--omp-rounds", type=int, default=5,
                        help="with --omp-variants: rounds, each one process per variant (default 5)")
    parser.add_argument("--out", default=None, help="write the JSON report here (a new file; with --omp-variants "
                                                    "a .json, and its results page .md beside it)")
    quiet.add_load_arguments(parser)
    return parser


def parse_args(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    resolve_device(parser, args)
    args.size = args.size or ("full" if args.device == "cuda" else "tiny")
    args.max_batch = args.max_batch or (64 if args.device == "cuda" else 1)
    args.repeats = args.repeats or (5 if args.device == "cuda" else 1)
    args.rows = [r for r in args.rows.split(",") if r]
    unknown = sorted(set(args.rows) - set(train_steps.ROWS))
    if unknown or not args.rows:
        parser.error(f"--rows: unknown {','.join(unknown) or '(none given)'}; choose from {','.join(train_steps.ROWS)}")
    modes = {"off": False, "on": True}
    if any(m not in modes for m in args.checkpointing.split(",")):
        parser.error(f"--checkpointing takes off, on or off,on, got {args.checkpointing!r}")
    args.checkpointing = [modes[m] for m in args.checkpointing.split(",")]
    if args.busy < 0:
        parser.error(f"--busy must be >= 0 (spin processes), got {args.busy}")
    if args.max_batch < 1 or args.repeats < 1:
        parser.error("--max-batch and --repeats must be >= 1")
    if args.out and os.path.exists(args.out):
        parser.error(f"--out {args.out} exists: give a new file (nothing is overwritten)")
    if args.omp_variants is not None:
        _check_omp_variants(args)
    return args


def _check_omp_variants(args) -> None:
    """--omp-variants' own rules: one line (UserInputError) for each thing it cannot do."""
    args.omp_variants = omp_variants.parse_variants(args.omp_variants)
    if args.device != "cpu":
        raise UserInputError("--omp-variants times the CPU's OpenMP runtime: give --device cpu")
    if args.omp_rounds < 1:
        raise UserInputError(f"--omp-rounds must be >= 1, got {args.omp_rounds}")
    if args.out and not args.out.endswith(".json"):
        raise UserInputError(f"--out {args.out}: with --omp-variants give a NAME.json (NAME.md is written beside it)")
    if args.out and os.path.exists(args.out[:-len(".json")] + ".md"):
        raise UserInputError(f"--out {args.out}: {args.out[:-len('.json')]}.md exists; remove it or give a new name "
                             "(nothing is overwritten)")


def main(argv=None) -> int:
    args = parse_args(argv)
    load_start = quiet.load_at_start("longformer-bench train-steps", [args.out], args.load_wait, args.allow_load)
    if load_start is None:
        return 2
    device = torch.device(args.device)
    started = time.time()
    print(train_steps.HEADER)
    threads = torch.get_num_threads()
    policy = thread_policy.choose(args.threads, default=1 if args.size == "tiny" else None)
    environment = {
        **provenance(),  # the commit (COMMIT where no .git travels), CPU, date and load at the start
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model() or "cpu",
        "torch": torch.__version__, "python": platform.python_version(),
        "load_average_at_start": load_start,
        "threads": policy.threads(threads, interval=thread_policy.BENCH_INTERVAL), "thread_policy": policy.describe(),
        "command": "longformer-bench train-steps " + " ".join(sys.argv[2:] if argv is None else argv)}

    def save(report: dict) -> None:  # after every row: a run cut short keeps what it measured
        report["environment"] = dict(environment, seconds=round(time.time() - started, 1))
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out + ".partial", "w") as f:
                json.dump(report, f, indent=1)
            os.replace(args.out + ".partial", args.out)

    torch.set_num_threads(environment["threads"])
    print(f"threads: {environment['threads']} (policy: {environment['thread_policy']})")
    if args.omp_variants:
        return _compare_omp_variants(args, environment, started)
    try:
        report = train_steps.run(args.rows, args.checkpointing, device, args.size, args.max_batch, args.repeats,
                                 args.time_cap, save=save)
        if args.busy:
            print(f"again beside {args.busy} spin process(es):")
            with competing_load(args.busy, train_steps.time_bound(args.time_cap, args.rows, args.checkpointing)):
                # auto: the cores the spinners leave free, measured once they run (every row alike)
                environment["threads_busy"] = (policy.threads(threads, interval=thread_policy.BENCH_INTERVAL)
                                               if policy.auto else environment["threads"])
                torch.set_num_threads(environment["threads_busy"])
                print(f"threads beside the load: {environment['threads_busy']} (policy: {policy.describe()})")
                busy = train_steps.run(args.rows, args.checkpointing, device, args.size, args.max_batch,
                                       args.repeats, args.time_cap)
            report.update(busy_processes=args.busy, busy_rows=busy["rows"],
                          busy_summary=train_steps.busy_summary(report["rows"], busy["rows"]))
            for line in train_steps.format_busy(report["busy_summary"]):
                print(line)
    finally:
        torch.set_num_threads(threads)
    save(report)
    if args.out:
        print(f"wrote {args.out}")
    failed = [r for r in report["rows"] if r["status"] == "error"]
    return 1 if failed else 0


def _compare_omp_variants(args, environment: dict, started: float) -> int:
    """--omp-variants: the rows quiet under each wait policy, in processes of their own; the
    table, and with --out the record and its page."""
    spec = dict(rows=args.rows, checkpointing=args.checkpointing, size=args.size, max_batch=args.max_batch,
                repeats=args.repeats, time_cap=args.time_cap, threads=environment["threads"], busy=args.busy)
    record = omp_variants.compare(args.omp_variants, args.omp_rounds, spec)
    record["environment"] = dict(environment, seconds=round(time.time() - started, 1),
                                 load_average_at_end=[round(x, 2) for x in os.getloadavg()])
    record = stamped(record)
    for line in omp_variants.format_summary(record["summary"]):
        print(line)
    if args.out:
        folder, name = os.path.split(os.path.abspath(args.out[:-len(".json")]))
        json_path, markdown_path = write_page(name, record, omp_variants.page(record, args.out), folder)
        print(f"wrote {json_path} and {markdown_path}")
    return 1 if omp_variants.failures(record) else 0
