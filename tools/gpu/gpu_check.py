"""One-command self-check of the attention core on a GPU: correctness, then a benchmark.

    python -m longformer_tools.gpu.gpu_check OUTDIR              # CUDA: full grid + benchmark
    python -m longformer_tools.gpu.gpu_check OUTDIR --cpu-smoke  # tiny shapes, Triton's interpreter
    bash scripts/gpu_check.sh OUTDIR                           # the same, from a bare repository

Needs torch, triton and this package only (no fairseq, no pytest, no network), so a copy of the
repository is all a GPU machine needs. Without CUDA it runs the CPU smoke automatically.

Checks: every implementation (Triton kernel, PyTorch path) in fp32, fp16 and bf16, output and the
gradients of all six inputs (q, k, v, q_g, k_g, v_g: (B, H, N, D)), against the PyTorch path in
float64 on the same rounded inputs; at small shapes that float64 oracle is itself checked against
the slow dense reference. Error: ||x - x64|| / ||x64|| (Frobenius, per tensor). Tolerance,
relative to PyTorch's own error at that precision: the PyTorch path must stay under a fixed bound
per dtype (``TORCH_PATH_BOUND``, about 10x the rounding of its output), and the Triton kernel
within ``2 x`` the PyTorch path's error on the same tensor plus a floor per dtype
(``TRITON_FLOOR``). Writes ``gpu_check.log`` and ``gpu_check.json`` into OUTDIR and exits 1 when
any check fails (2 on bad arguments). The benchmark is ``gpu_bench.py``.
"""
import argparse
import json
import os
import platform
import sys
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch

from longformer_common.cli import one_line_errors
from longformer_kernels import (AttentionDropout, AttentionMasks, AttentionPattern, reference_attention,
                                sliding_chunks_attention)
from longformer_tools.gpu.gpu_bench import CONTENDERS, DTYPES as BENCH_DTYPES, run_benchmark

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
TORCH_PATH_BOUND = {"fp32": 1e-5, "fp16": 5e-3, "bf16": 4e-2}
TRITON_FLOOR = {"fp32": 1e-5, "fp16": 1e-3, "bf16": 8e-3}
ORACLE_BOUND = 1e-10  # float64 PyTorch path against the float64 dense reference: summation order only
GRAD_NAMES = ("out", "dq", "dk", "dv", "dq_g", "dk_g", "dv_g")
DROPOUT_SEED = 20240917


@dataclass(frozen=True)
class CheckCase:
    """One input configuration; global tokens: ``globals_per_row`` random non-padding positions
    per batch row (0: none), ``valid_lengths``: per row, positions beyond are padding."""

    name: str
    batch: int
    heads: int
    length: int
    window: int
    head_dim: int
    dilation: Tuple[int, ...] = (1,)
    causal: bool = False
    valid_lengths: Optional[Tuple[int, ...]] = None
    globals_per_row: int = 0
    slow_reference: bool = False  # also check the float64 oracle against the dense reference
    # gradients that are exactly zero (every row attends one key: a softmax of one score has
    # zero slope); with dropout they come out as rounding noise, measured against ||dO||
    zero_gradients: Tuple[str, ...] = ()

    def pattern(self) -> AttentionPattern:
        return AttentionPattern(self.window, self.dilation, self.causal)

    def masks(self, generator: torch.Generator) -> AttentionMasks:
        """CPU masks; the global positions are drawn from ``generator``."""
        positions = torch.arange(self.length)
        valid = self.valid_lengths or (self.length,) * self.batch
        padding = torch.stack([positions >= n for n in valid])
        is_global = torch.zeros(self.batch, self.length, dtype=torch.bool)
        for row, n in enumerate(valid):
            chosen = torch.randperm(max(n, 1), generator=generator)[:min(self.globals_per_row, n)]
            is_global[row, chosen] = self.globals_per_row > 0
        return AttentionMasks(padding=padding, is_global=is_global if self.globals_per_row else None)


# The interpreter grid of tests/kernels (D = 16, awkward lengths, every feature), then the
# production shapes of longformer_base (w = 256, D = 64) with per-head dilation and padding.
GRID = [
    CheckCase("n1_one_token", 1, 1, 1, window=1, head_dim=16, slow_reference=True, zero_gradients=("dq", "dk")),
    CheckCase("n97_w1_dil123_padding", 2, 3, 97, 1, 16, (1, 2, 3), valid_lengths=(97, 80), slow_reference=True),
    CheckCase("n97_w0_globals", 2, 2, 97, 0, 16, valid_lengths=(97, 85), globals_per_row=4, slow_reference=True),
    CheckCase("n97_window_beyond_n", 2, 1, 97, 120, 16, valid_lengths=(97, 60), globals_per_row=1,
              slow_reference=True),
    CheckCase("n97_causal_dil123_padding", 2, 3, 97, 4, 16, (1, 2, 3), causal=True, valid_lengths=(97, 70),
              slow_reference=True),
    CheckCase("n150_dil123_39_globals", 2, 3, 150, 20, 16, (1, 2, 3), valid_lengths=(150, 140),
              globals_per_row=39, slow_reference=True),
    CheckCase("n1025_causal_dil123_padding", 1, 3, 1025, 8, 16, (1, 2, 3), causal=True, valid_lengths=(1000,),
              slow_reference=True),
    CheckCase("n1025_dil123_padding_globals", 1, 3, 1025, 8, 64, (1, 2, 3), valid_lengths=(1000,),
              globals_per_row=3, slow_reference=True),
]
PRODUCTION_DILATION = (1,) * 6 + (2,) * 2 + (3,) * 2 + (4,) * 2
PRODUCTION = [
    CheckCase(f"prod_n4096_w256_{g}_global", 2, 12, 4096, 256, 64, PRODUCTION_DILATION,
              valid_lengths=(4096, 3000), globals_per_row=g)
    for g in (1, 80)
]
# Triton's interpreter is slow: a few small cases cover padding, dilation, global and causal.
CPU_SMOKE = [
    CheckCase("n64_dil12_padding_globals", 2, 2, 64, 4, 16, (1, 2), valid_lengths=(64, 50), globals_per_row=2,
              slow_reference=True),
    CheckCase("n33_causal", 1, 2, 33, 3, 16, causal=True, slow_reference=True),
]


def _triton(*args, **kwargs):
    from longformer_kernels import triton_longformer_attention  # triton loads on first use

    return triton_longformer_attention(*args, **kwargs)


# name -> f(q, k, v, q_g, k_g, v_g, pattern, masks, dropout=...); a test swaps in a wrong one
IMPLEMENTATIONS: Dict[str, Callable] = {"torch": sliding_chunks_attention, "triton": _triton}


class Log:
    """Prints and keeps every line for OUTDIR/gpu_check.log."""

    def __init__(self):
        self.lines: List[str] = []

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)


def relative_error(x: Optional[torch.Tensor], ref: Optional[torch.Tensor], floor: float = 0.0) -> Optional[float]:
    """||x - ref|| / max(||ref||, floor) in float64 (inf when x holds NaN/inf; the absolute error
    when both are 0). ``floor``: the scale below which ref counts as zero (see ``check_case``)."""
    if x is None or ref is None:
        return None
    x, ref = x.double(), ref.double().to(x.device)
    if not torch.isfinite(x).all():
        return float("inf")
    denominator = max(ref.norm().item(), floor)
    return (x - ref).norm().item() / (denominator if denominator > 0 else 1.0)


def forward_backward(fn: Callable, inputs: Sequence[Optional[torch.Tensor]], grad_out: torch.Tensor):
    """[out, d(each input)] of ``fn`` run on leaf copies of ``inputs`` (None stays None)."""
    leaves = [None if t is None else t.detach().clone().requires_grad_() for t in inputs]
    out = fn(*leaves)
    present = [t for t in leaves if t is not None]
    grads = iter(torch.autograd.grad(out, present, grad_out.to(out.dtype)))
    return [out.detach()] + [None if t is None else next(grads).detach() for t in leaves]


def check_case(case: CheckCase, dtype_name: str, p_drop: float, device: torch.device,
               implementations: Sequence[str], seed: int) -> List[dict]:
    """One record per (implementation, tensor): rel_err, tol, ok."""
    generator = torch.Generator().manual_seed(seed)
    masks = case.masks(generator)
    on_device = AttentionMasks(*(None if m is None else m.to(device) for m in (masks.padding, masks.is_global)))
    pattern = case.pattern()
    dropout = AttentionDropout(p_drop, DROPOUT_SEED) if p_drop else None
    shape = (case.batch, case.heads, case.length, case.head_dim)
    dtype = DTYPES[dtype_name]
    inputs = [torch.randn(shape, generator=generator).to(device, dtype) for _ in range(6)]
    if masks.is_global is None:
        inputs[3:] = [None, None, None]
    grad_out = torch.randn(shape, generator=generator).to(device, dtype)

    def bound(fn, where_masks):
        return lambda *x: fn(*x, pattern, where_masks, dropout=dropout)

    # the oracle sees exactly the rounded inputs the implementations see
    wide = [None if t is None else t.double() for t in inputs]
    oracle = forward_backward(bound(sliding_chunks_attention, on_device), wide, grad_out.double())
    records = []

    # a gradient that is zero in exact arithmetic is rounding noise in every implementation:
    # its error is measured against ||dO|| instead of its own norm (noise over noise)
    scale_of = {name: grad_out.double().norm().item() if name in case.zero_gradients else 0.0 for name in GRAD_NAMES}

    def record(impl, results, tolerances):
        for name, result, ref, tol in zip(GRAD_NAMES, results, oracle, tolerances):
            err = relative_error(result, ref, scale_of[name])
            if err is not None:
                records.append(dict(case=case.name, dtype=dtype_name, dropout=p_drop, impl=impl, tensor=name,
                                    rel_err=err, tol=tol, ok=err <= tol))

    if case.slow_reference:
        cpu_wide = [None if t is None else t.cpu() for t in wide]
        ref = forward_backward(bound(reference_attention, masks), cpu_wide, grad_out.double().cpu())
        record("oracle_vs_reference", ref, [ORACLE_BOUND] * len(GRAD_NAMES))
    torch_errors = None
    for impl in implementations:
        results = forward_backward(bound(IMPLEMENTATIONS[impl], on_device), inputs, grad_out)
        if impl == "torch":
            torch_errors = [relative_error(r, o, scale_of[n]) for n, r, o in zip(GRAD_NAMES, results, oracle)]
            tolerances = [TORCH_PATH_BOUND[dtype_name]] * len(GRAD_NAMES)
        else:  # relative to the PyTorch path's own error on the same tensor at this precision
            base = torch_errors or [TORCH_PATH_BOUND[dtype_name]] * len(GRAD_NAMES)
            tolerances = [2 * (b or 0.0) + TRITON_FLOOR[dtype_name] for b in base]
        record(impl, results, tolerances)
    return records


def run_checks(cases: Sequence[CheckCase], dtypes: Sequence[str], device: torch.device, interpreted: bool,
               log: Log) -> Tuple[List[dict], List[dict]]:
    """(records, skipped): every case x dtype x dropout (0, 0.1); an implementation that raises
    fails its check with the error as the reason."""
    records, skipped = [], []
    log(f"{'case':34} {'dtype':5} {'drop':>4} {'impl':20} {'worst err/tol':>13}  result")
    for index, (case, dtype_name, p_drop) in enumerate(
            (c, d, p) for c in cases for d in dtypes for p in (0.0, 0.1)):
        implementations = ["torch", "triton"]
        if interpreted and dtype_name == "bf16":  # the interpreter computes bf16 on raw bits
            implementations = ["torch"]
            skipped.append(dict(case=case.name, dtype=dtype_name, dropout=p_drop, impl="triton",
                                reason="Triton's CPU interpreter computes bf16 wrongly; checked on CUDA only"))
        try:
            found = check_case(case, dtype_name, p_drop, device, implementations, seed=1000 + index)
        except Exception as error:  # noqa: BLE001 (a crash is a failed check, reported, not a traceback)
            found = [dict(case=case.name, dtype=dtype_name, dropout=p_drop, impl="+".join(implementations),
                          tensor="-", rel_err=None, tol=None, ok=False,
                          error=f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}")]
        records += found
        for impl in dict.fromkeys(r["impl"] for r in found):
            mine = [r for r in found if r["impl"] == impl]
            worst = max(mine, key=lambda r: float("inf") if r["rel_err"] is None else r["rel_err"] / r["tol"])
            ratio = "-" if worst["rel_err"] is None else f"{worst['rel_err'] / worst['tol']:.3f}"
            status = "ok" if all(r["ok"] for r in mine) else f"FAIL {worst['tensor']} " + (
                worst.get("error") or f"rel err {worst['rel_err']:.3g} > tol {worst['tol']:.3g}")
            log(f"{case.name:34} {dtype_name:5} {p_drop:4.1f} {impl:20} {ratio:>13}  {status}")
    return records, skipped


def environment(device: torch.device) -> dict:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError as error:
        triton_version = f"missing ({error})"
    info = dict(python=platform.python_version(), torch=torch.__version__, triton=triton_version,
                cuda=torch.version.cuda, device=str(device),
                interpreter=os.environ.get("TRITON_INTERPRET") == "1")
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(gpu=props.name, multiprocessors=props.multi_processor_count,
                    memory_gib=round(props.total_memory / 2 ** 30, 1))
    return info


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="gpu_check", description="Check and benchmark Longformer attention on this machine's GPU "
        "(or a CPU smoke run under Triton's interpreter); writes gpu_check.log and gpu_check.json into OUTDIR.")
    parser.add_argument("outdir", help="folder for gpu_check.log and gpu_check.json (created if missing)")
    parser.add_argument("--cpu-smoke", action="store_true",
                        help="tiny shapes on the CPU under Triton's interpreter (automatic without CUDA)")
    parser.add_argument("--skip-checks", action="store_true", help="benchmark only")
    parser.add_argument("--skip-bench", action="store_true", help="correctness checks only")
    parser.add_argument("--batches", default=None, help="benchmark batch sizes, e.g. 1,2,4,8 (CUDA default)")
    parser.add_argument("--lengths", default=None, help="benchmark lengths, e.g. 4096,16384 (CUDA default)")
    parser.add_argument("--globals", default=None, help="benchmark global tokens per row, e.g. 0,8 (CUDA default)")
    parser.add_argument("--dtypes", default=None,
                        help="dtypes, e.g. fp16,bf16 (default: checks fp32,fp16,bf16; benchmark fp16,bf16)")
    parser.add_argument("--cases", default=None,
                        help="only the check cases whose name holds one of these texts, e.g. n1,prod_")
    parser.add_argument("--contenders", default=None,
                        help=f"benchmark contenders, a subset of {','.join(CONTENDERS)} (default all)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats per measurement (median)")
    args = parser.parse_args(argv)
    for flag, allowed in (("dtypes", DTYPES), ("contenders", CONTENDERS)):
        value = getattr(args, flag)
        if value is not None:
            parsed = tuple(value.split(","))
            wrong = [x for x in parsed if x not in allowed]
            if wrong:
                parser.error(f"--{flag}: unknown {wrong}; choose from {','.join(allowed)}")
            setattr(args, flag, parsed)
    if args.globals is not None:
        try:
            args.globals = tuple(int(x) for x in args.globals.split(","))
            assert min(args.globals) >= 0
        except (ValueError, AssertionError):
            parser.error(f"--globals must be integers >= 0 separated by commas, got {args.globals!r}")
    for flag in ("batches", "lengths"):
        value = getattr(args, flag)
        if value is not None:
            try:
                parsed = tuple(int(x) for x in value.split(","))
                assert parsed and min(parsed) > 0
            except (ValueError, AssertionError):
                parser.error(f"--{flag} must be positive integers separated by commas, got {value!r}")
            setattr(args, flag, parsed)
    if args.repeats is not None and args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    if os.path.exists(args.outdir) and not os.path.isdir(args.outdir):
        parser.error(f"OUTDIR {args.outdir!r} exists and is not a folder: give a folder path")
    return args


@one_line_errors
def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    smoke = args.cpu_smoke or not torch.cuda.is_available()
    if smoke:
        # read when the kernels are decorated: set before triton_attention is first imported
        os.environ.setdefault("TRITON_INTERPRET", "1")
    device = torch.device("cpu" if smoke else "cuda")
    log = Log()
    env = environment(device)
    log(f"gpu_check: {'CPU smoke (Triton interpreter, tiny shapes)' if smoke else 'CUDA'}; "
        + ", ".join(f"{k} {v}" for k, v in env.items()))
    from longformer_kernels import triton_tiles  # after the interpreter switch above

    if os.environ.get(triton_tiles.TILES_ENV):
        log(f"tiles from {triton_tiles.TILES_ENV}={os.environ[triton_tiles.TILES_ENV]}")
    report = dict(mode="cpu-smoke" if smoke else "cuda", environment=env,
                  tolerances=dict(error="||x - x64|| / ||x64|| per tensor, x64: PyTorch path in float64",
                                  torch_path_bound=TORCH_PATH_BOUND, oracle_vs_reference=ORACLE_BOUND,
                                  triton="2 x PyTorch path's error on the same tensor + floor",
                                  triton_floor=TRITON_FLOOR),
                  checks=[], skipped_checks=[], benchmark=None)
    failed = 0
    if not args.skip_checks:
        wanted = None if args.cases is None else args.cases.split(",")
        # production shapes first: the grid's float64 dense reference runs on the CPU and takes
        # most of the time (20 s per N = 1,025 case on a 16-core host), so a lease that ends
        # early has still checked what users run
        cases = [c for c in (CPU_SMOKE if smoke else PRODUCTION + GRID)
                 if wanted is None or any(text in c.name for text in wanted)]
        if not cases:
            log(f"error: no check case name holds {args.cases!r}")
            return 2
        records, skipped = run_checks(cases, list(args.dtypes or DTYPES), device, smoke, log)
        report.update(checks=records, skipped_checks=skipped)
        failed += sum(not r["ok"] for r in records)
        log(f"checks: {len(records) - failed} passed, {failed} failed, {len(skipped)} skipped")
    if not args.skip_bench:
        bench = run_benchmark(device, smoke, log, batches=args.batches, lengths=args.lengths, repeats=args.repeats,
                              globals=args.globals, contenders=args.contenders,
                              dtypes=args.dtypes and tuple(d for d in args.dtypes if d in BENCH_DTYPES) or None)
        report["benchmark"] = bench
        failed += bench["errors"]
    report["failed"] = failed
    os.makedirs(args.outdir, exist_ok=True)
    with open(os.path.join(args.outdir, "gpu_check.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    log(f"{'FAILED' if failed else 'PASSED'}: {failed} failed; wrote {os.path.join(args.outdir, 'gpu_check.json')}")
    with open(os.path.join(args.outdir, "gpu_check.log"), "w") as f:
        f.write("\n".join(log.lines) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
