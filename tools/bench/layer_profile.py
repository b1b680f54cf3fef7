"""Where the attention layer's time goes: what stands between its fraction of the matmul peak and
the target, measured by the profiler in the same run as the fraction and the peak.

    python -m longformer_tools.bench.layer_profile [--length 4096] [--dropout 0.1] [--calls 5]
    python -m longformer_tools.bench.layer_profile --json R/attention_layer_4096_profile.json \
        --markdown R/attention_layer_4096_profile.md
    python -m longformer_tools.bench.layer_profile --replot R/attention_layer_4096_profile.json \
        --markdown R/attention_layer_4096_profile.md
    (R = docs/results: the page scripts/regenerate_timings.sh writes)

The layer is ``longformer-bench``'s ``torch`` contender with the output projection (projections,
band attention, output projection; fp32, B = 1, training mode). The run measures, in turn: the
matmul peak (``matmul_peak``: large square products, same threads); ``--calls`` timed
forward+backward calls (the layer's fraction of the peak: its useful FLOPs, ``longformer_tools.flops``,
over each call's time); then ``--calls`` more under ``torch.profiler``, whose per-operator self
times (summed over the profiled calls) are grouped into what a forward+backward spends its time
on. The FLOPs of the matrix products (from their shapes) give the matmuls' own rate and how many
FLOPs they compute per useful one (the band's chunks compute more than the band). The profiled
calls run slower than the timed ones (the profiler's own cost): shares are read from them, the
fraction from the timed calls.
"""
import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

import torch

from longformer_common import quiet

from longformer_common.atomic import atomic_files
from longformer_common.provenance import provenance, provenance_line

from . import matmul_peak
from .contenders import Case, build_contender, make_inputs, shared_weights
from ..flops import layer_flops

PROG = "python -m longformer_tools.bench.layer_profile"
TARGET = 0.75  # issue #51: the layer at 4,096 with dropout 0.1 at 75% of the matmul peak
NOT_SETTINGS = ("json", "markdown", "replot", "load_wait", "allow_load")
# operator group -> aten names (self time). Anything else is "other operators"; the time of a
# call outside every operator (Python, autograd's engine, numba's fused passes) is "outside operators".
GROUPS = {
    "matrix products": ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::baddbmm_", "aten::addmm_", "aten::matmul", "aten::linear",
                        "aten::einsum", "aten::_mkl_linear", "aten::mkldnn_linear"),
    "softmax": ("aten::_softmax", "aten::_softmax_backward_data", "aten::softmax", "aten::exp", "aten::exp_",
                "aten::logsumexp", "aten::exp2", "aten::exp2_", "aten::amax", "aten::max", "aten::sub", "aten::sub_"),
    "masks and dropout": ("aten::masked_fill", "aten::masked_fill_", "aten::where", "aten::bernoulli_",
                          "aten::native_dropout", "aten::native_dropout_backward", "aten::lt", "aten::ge",
                          "aten::le", "aten::gt", "aten::eq", "aten::logical_and", "aten::logical_or"),
    "copies and layout": ("aten::copy_", "aten::clone", "aten::contiguous", "aten::cat", "aten::stack",
                          "aten::constant_pad_nd", "aten::pad", "aten::index", "aten::index_select",
                          "aten::scatter_add_", "aten::index_add_", "aten::unfold", "aten::flip",
                          "aten::_unsafe_view", "aten::reshape", "aten::as_strided_scatter", "aten::slice_scatter",
                          "aten::new_zeros", "aten::zeros", "aten::zero_", "aten::fill_", "aten::empty",
                          "aten::empty_like", "aten::empty_strided", "aten::zeros_like", "aten::ones_like"),
    "elementwise sums and scaling": ("aten::add", "aten::add_", "aten::mul", "aten::mul_", "aten::div",
                                     "aten::div_", "aten::sum", "aten::addcmul_", "aten::neg"),
}
TOP_OPERATORS = 10
MATMUL_FLOP_OPS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::addmm_", "aten::baddbmm", "aten::baddbmm_")


def product_flops(name: str, shapes) -> int:
    """2 x m x k x n (x batch) of one matrix product from its operand shapes as the profiler
    records them: mm/bmm (a, b); addmm/baddbmm (bias or input, a, b)."""
    operands = [shape for shape in shapes if shape][-2:] if name not in ("aten::mm", "aten::bmm") else shapes[:2]
    if len(operands) < 2 or len(operands[0]) < 2 or len(operands[1]) < 2:
        return 0
    a, b = operands
    batch = a[0] if len(a) == 3 else 1
    return 2 * batch * a[-2] * a[-1] * b[-1]


def parse_args(argv):
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--window", type=int, default=256, help="one-sided window w (default 256)")
    parser.add_argument("--heads", type=int, default=12)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.1, help="attention dropout in training mode (default 0.1)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--calls", type=int, default=5, help="timed calls, and as many profiled (default 5)")
    parser.add_argument("--peak-sizes", type=lambda s: [int(x) for x in s.split(",")],
                        default=list(matmul_peak.SIZES), help="n of the square products timed for the peak")
    parser.add_argument("--json", metavar="PATH", help="store the run here (and write --markdown from it)")
    parser.add_argument("--markdown", metavar="PATH", help="the results page (with --json or --replot)")
    parser.add_argument("--replot", metavar="JSON", help="measure nothing: re-write --markdown from a stored run")
    quiet.add_load_arguments(parser)
    args = parser.parse_args(argv)
    if args.calls < 5:
        parser.error(f"--calls {args.calls}: a page's timings are the median and range of at least 5 calls; "
                     "pass --calls 5 or more")
    if args.markdown and not (args.json or args.replot):
        parser.error("--markdown needs --json (a new run) or --replot (a stored one): the page links its data")
    return args


def group_of(name: str) -> str:
    for group, names in GROUPS.items():
        if name in names:
            return group
    return "other operators"


def operator_times(events) -> Dict[str, dict]:
    """aten name -> {"self_s": summed self CPU seconds, "flops" (matrix products, from their
    shapes), "count"} from the profiler's averages grouped by input shape."""
    table: Dict[str, dict] = {}
    for event in events:
        if not event.key.startswith("aten::"):
            continue
        entry = table.setdefault(event.key, {"self_s": 0.0, "flops": 0, "count": 0})
        entry["self_s"] += event.self_cpu_time_total / 1e6
        entry["count"] += int(event.count)
        if event.key in MATMUL_FLOP_OPS:
            entry["flops"] += int(event.count) * product_flops(event.key, event.input_shapes)
    return table


def measure(args) -> dict:
    torch.set_num_threads(args.threads)
    case = Case("torch", args.length, 0, heads=args.heads, head_dim=args.head_dim, window=args.window,
                threads=args.threads, output_projection=True, dropout=args.dropout)
    peak_start = matmul_peak.measure("float32", args.threads, sizes=args.peak_sizes)
    x, grad_out, is_global = make_inputs(case, args.length, torch.device("cpu"), torch.float32)
    module, layer = build_contender(case, torch.device("cpu"), torch.float32, shared_weights(case.hidden), is_global)
    module.train()
    x = x.requires_grad_()

    def call() -> float:
        start = time.perf_counter()
        layer(x).backward(grad_out)
        return time.perf_counter() - start

    call()  # warm-up: allocator, thread pool, numba's compilation
    timed = [call() for _ in range(args.calls)]
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        profiled = [call() for _ in range(args.calls)]
    peak_end = matmul_peak.measure("float32", args.threads, sizes=args.peak_sizes)
    useful = layer_flops(1, args.length, args.heads, args.head_dim, args.window, 0, output_projection=True)
    return {"timed_s": timed, "profiled_s": profiled, "operators": operator_times(prof.key_averages(group_by_input_shape=True)),
            "useful_flops_fwd_bwd": useful.forward_backward, "peak_gflops": max(peak_start["gflops"], peak_end["gflops"]),
            "peak_at_start_gflops": peak_start["gflops"], "peak_at_end_gflops": peak_end["gflops"]}


def summary(run: dict) -> dict:
    """The page's numbers from a stored run: the layer's fraction of the peak (median, range over
    the timed calls), the share of the profiled time per group, the matmuls' rate and their FLOPs
    per useful FLOP, and the fraction the layer would reach if only its matmuls took time."""
    peak, useful = run["peak_gflops"], run["useful_flops_fwd_bwd"]
    fractions = [useful / s / 1e9 / peak for s in run["timed_s"]]
    profiled_total = sum(run["profiled_s"])
    groups = {group: 0.0 for group in [*GROUPS, "other operators"]}
    for name, op in run["operators"].items():
        groups[group_of(name)] += op["self_s"]
    groups["outside operators"] = max(0.0, profiled_total - sum(groups.values()))
    calls = len(run["profiled_s"])
    matmul_s = sum(op["self_s"] for name, op in run["operators"].items() if name in MATMUL_FLOP_OPS)
    matmul_flops = sum(op["flops"] for name, op in run["operators"].items() if name in MATMUL_FLOP_OPS)
    matmul_rate = matmul_flops / matmul_s / 1e9 if matmul_s else None
    return {"fraction_median": statistics.median(fractions), "fraction_min": min(fractions),
            "fraction_max": max(fractions),
            "shares": {g: t / profiled_total for g, t in groups.items()} if profiled_total else {},
            "matmul_rate_gflops": matmul_rate,
            "matmul_fraction_of_peak": matmul_rate / peak if matmul_rate else None,
            "matmul_flops_per_useful": matmul_flops / calls / useful if useful and calls else None,
            # the layer with every non-matmul operator free: its useful FLOPs over the matmuls' time alone
            "fraction_if_only_matmuls": (useful * calls / matmul_s / 1e9 / peak) if matmul_s else None}


def page(report: dict, json_path: str, markdown_path: str) -> str:
    s, run = report["settings"], report["run"]
    numbers = summary(run)
    flags = " ".join(f"--{k.replace('_', '-')} {','.join(map(str, v)) if isinstance(v, list) else v}"
                     for k, v in s.items())
    banner = quiet.load_banner(report.get("load_average_at_start"), report.get("load_average_at_end"))
    ms = [1e3 * t for t in run["timed_s"]]
    gap = TARGET - numbers["fraction_median"]
    verdict = (f"{gap * 100:.0f} points short of the {TARGET:.0%} target" if gap > 0
               else f"at or above the {TARGET:.0%} target")
    lines = [f"# Where the attention layer's time goes (CPU, N = {s['length']:,}, dropout {s['dropout']})", "",
             *([banner, ""] if banner else []),
             "Written by this command (it measures again):", "", "```bash",
             f"{PROG} {flags} --json {json_path} --markdown {markdown_path}", "```", "",
             "and re-rendered from the stored JSON, measuring nothing, by:", "", "```bash",
             f"{PROG} --replot {json_path} --markdown {markdown_path}", "```", "",
             provenance_line(report.get("provenance")), "",
             f"Our layer (q/k/v projections, band attention, output projection; `longformer-bench`'s `torch` "
             f"contender), fp32, B = 1, H = {s['heads']}, D = {s['head_dim']}, w = {s['window']}, attention dropout "
             f"{s['dropout']} in training mode, {s['threads']} threads. Matmul peak in this run: "
             f"{run['peak_gflops']:.1f} GFLOP/s (large square products; {run['peak_at_start_gflops']:.1f} at the "
             f"start, {run['peak_at_end_gflops']:.1f} at the end).", "",
             f"**Fraction of the peak:** {numbers['fraction_median']:.0%} (range {numbers['fraction_min']:.0%}-"
             f"{numbers['fraction_max']:.0%}) over {len(ms)} timed forward+backward calls of "
             f"{statistics.median(ms):,.0f} ms (range {min(ms):,.0f}-{max(ms):,.0f}): {verdict}.", "",
             f"**What stands in the way**, from {len(run['profiled_s'])} profiled calls (self time of the operators, "
             "summed):", "",
             "| where the time goes | share of a forward+backward |", "|---|---:|"]
    for group, share in sorted(numbers["shares"].items(), key=lambda item: -item[1]):
        lines.append(f"| {group} | {share:.0%} |")
    lines.append("")
    total = sum(run["profiled_s"])
    top = sorted(run["operators"].items(), key=lambda item: -item[1]["self_s"])[:TOP_OPERATORS]
    lines += [f"The {len(top)} operators with the most self time:", "",
              "| operator | group | calls per forward+backward | share |", "|---|---|---:|---:|"]
    lines += [f"| `{name}` | {group_of(name)} | {op['count'] / len(run['profiled_s']):,.0f} | {op['self_s'] / total:.1%} |"
              for name, op in top]
    lines.append("")
    if numbers["matmul_rate_gflops"]:
        lines += [f"The matrix products run at {numbers['matmul_rate_gflops']:.1f} GFLOP/s "
                  f"({numbers['matmul_fraction_of_peak']:.0%} of the peak: the band's products have other shapes "
                  f"than the large square ones that set the peak) and compute {numbers['matmul_flops_per_useful']:.2f} "
                  "FLOPs per useful FLOP (above 1: products over pairs outside the band). With every "
                  f"other operator free, the layer would reach {numbers['fraction_if_only_matmuls']:.0%} of the "
                  "peak: the rest of the gap is the time outside the matrix products in the table.", ""]
    return "\n".join(lines)


def atomic_write_text(path: str, text: str) -> None:
    """``path`` holds its old content or all of ``text``, never a part (its folder is made)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_files(target.parent, [target.name]) as temps:
        temps[target.name].write_text(text)


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.replot:
        with open(args.replot) as handle:
            report = json.load(handle)
        if args.markdown:
            atomic_write_text(args.markdown, page(report, args.replot, args.markdown))
        return 0
    load_start = quiet.load_at_start(PROG, [args.json, args.markdown], args.load_wait, args.allow_load)
    if load_start is None:
        return 2  # refused: the machine stayed busy (the line is printed)
    run = measure(args)
    report = {"settings": {k: v for k, v in vars(args).items() if k not in NOT_SETTINGS}, "run": run,
              "provenance": provenance(), "load_average_at_start": load_start,
              "load_average_at_end": [round(x, 2) for x in os.getloadavg()]}
    numbers = summary(run)
    if numbers["fraction_max"] > 1.0 or (numbers["matmul_fraction_of_peak"] or 0) > 1.0:
        print(f"{PROG}: a fraction above 100% of the matmul peak ({numbers['fraction_max']:.0%} layer, "
              f"{numbers['matmul_fraction_of_peak'] or 0:.0%} matmuls): a measurement bug (FLOP count or peak), "
              "not a result; nothing written. Re-run on a quiet machine; if it repeats, report it", file=sys.stderr)
        return 3
    print(page(report, args.json or "-", args.markdown or "-"))
    if args.json:
        atomic_write_text(args.json, json.dumps(report, indent=1))
        if args.markdown:
            atomic_write_text(args.markdown, page(report, args.json, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
