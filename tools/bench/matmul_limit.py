"""The rate of plain matmuls at the layer's shapes at each point of ``longformer-bench``,
measured in the same run, and every contender's useful GFLOP/s beside it. (It was once called
the "matmul limit"; it is not one: the layer's fused work can beat plain matmuls of its small
shapes. The ceiling is the machine's matmul peak, ``matmul_peak``.)

A worker with the contenders' thread count, device and dtype times plain matmuls at the layer's
own shapes (``limit_shapes``: the projections' GEMM, its weight gradient, the PyTorch
path's band matmuls). It is one more worker of the point's round-robin (``workers``), so a busy
spell of a shared machine slows it as much as the contenders. The rate of a call (forward, or
forward+backward) is the harmonic combination of the shapes' measured rates r_i (FLOPs of one
timed matmul / its time), each weighted by the useful FLOPs W_i of the layer that shape stands
for:

    shape time = sum_i W_i / r_i,        shape rate GFLOP/s = sum_i W_i / shape time

(harmonic, not arithmetic: times add, rates do not). The worker answers each timed call with
that time, so the median of --repeats calls is taken as for a contender. No memory is measured
for it.
"""
import time
from dataclasses import dataclass, fields, replace
from typing import ClassVar, List, Optional

import torch

from longformer_tools import flops

from .contenders import Case
from .measure import Result

IMPL = "matmul"  # the worker's name in the round-robin; never a row of the results
FLOPS_DEFINITION = (
    "useful FLOPs of one call: projections 2*B*N*C*C each (q, k, v; with global tokens k_g, v_g over "
    "all N rows and q_g over the G global rows; the output projection when included) plus 4*D per "
    "head for every attended pair (q.k and p.v): the band |i-j| <= w clipped at the sequence ends and "
    "the global rows and columns, each pair once; forward+backward = 3x forward. Useful GFLOP/s = "
    "useful FLOPs / median time; rate of plain matmuls at the layer's shapes (shape_rate GFLOP/s) = the "
    "same FLOPs over the time plain matmuls at the layer's shapes (projection GEMM, its weight gradient, "
    "the band's batched matmuls) take, each shape weighted by the FLOPs it stands for (a harmonic "
    "combination), timed in the same round-robin with the same threads: not a ceiling; the ceiling is "
    "the matmul peak (peak_definition)")


@dataclass(frozen=True)
class MatmulShape:
    """One matmul timed for the limit: (batch, m, k) @ (batch, k, n), and how many useful FLOPs of
    the layer it stands for in the forward and in the backward."""

    name: str
    batch: int
    m: int
    k: int
    n: int
    forward_weight: int
    backward_weight: int

    @property
    def flops(self) -> int:
        """FLOPs of one timed call."""
        return 2 * self.batch * self.m * self.k * self.n


def band_chunk(length: int, window: int):
    """(c, L): query positions per chunk and keys per window of the vectorized PyTorch path,
    c = max(w // 4, 32) (at most N) and L = c + 2w rounded up to a multiple of c, as its band
    layout has them (w at most N - 1)."""
    window = min(window, max(length - 1, 0))
    chunk = max(1, min(length, max(window // 4, 32)))
    return chunk, (1 + -(-2 * window // chunk)) * chunk


def limit_shapes(batch: int, length: int, heads: int, head_dim: int, window: int, global_tokens: int,
                 output_projection: bool = False) -> List[MatmulShape]:
    """The layer's own matmul shapes, weighted by the useful FLOPs each stands for:

      projection         (B*N, C) @ (C, C): every projection forward, and its input gradient
      projection weight  (C, B*N) @ (B*N, C): the weight gradients (backward only)
      band scores        (windows, c, D) @ (D, L): q.k forward, dP = dO.V^T backward
      band mixing        (windows, c, L) @ (L, D): p.v forward, dQ = dS.K backward
      band transposed    (windows, L, c) @ (c, D): dV = P^T.dO and dK = dS^T.Q (backward only)

    with windows = B*H*ceil(N/c), c and L as ``band_chunk`` has them. The pairs' FLOPs (global ones included) are
    split half to q.k, half to p.v; each backward weight is what that backward matmul does, so the
    backward weights sum to twice the forward's."""
    counted = flops.layer_flops(batch, length, heads, head_dim, window, global_tokens, output_projection)
    hidden, rows = heads * head_dim, batch * length
    chunk, keys = band_chunk(length, window)
    windows = batch * heads * -(-length // chunk)
    half = counted.pairs // 2
    return [
        MatmulShape("projection", 1, rows, hidden, hidden, counted.projections, counted.projections),
        MatmulShape("projection weight", 1, hidden, rows, hidden, 0, counted.projections),
        MatmulShape("band scores", windows, chunk, head_dim, keys, half, half),
        MatmulShape("band mixing", windows, chunk, keys, head_dim, counted.pairs - half, counted.pairs - half),
        MatmulShape("band transposed", windows, keys, chunk, head_dim, 0, counted.pairs),
    ]


def layer_flops(case: Case) -> flops.LayerFlops:
    """The useful FLOPs of one call of ``case``'s layer."""
    return flops.layer_flops(case.batch, case.length, case.heads, case.head_dim, case.window, case.global_tokens,
                             case.output_projection)


@dataclass
class MatmulCase(Case):
    """The shape rates' worker at one point (length, global tokens): the contenders' sizes, threads,
    device and dtype; its ``impl`` is ``IMPL``."""

    measures_memory: ClassVar[bool] = False

    def make_runner(self) -> "MatmulRunner":
        return MatmulRunner(self)


class MatmulRunner:
    """Answers ``timed("fwd")`` / ``timed("fwd_bwd")`` with the shape time in ms of that call
    (module docstring): each shape with a weight in the call is timed once.

    Operands are views of three buffers allocated once, sized for the largest shape (fresh large
    allocations cost page faults, which are no part of a matmul's speed)."""

    def __init__(self, case: MatmulCase):
        self.case = case
        torch.set_num_threads(case.threads)
        device, dtype = torch.device(case.device), getattr(torch, case.dtype)
        self.sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        self.shapes = limit_shapes(case.batch, case.length, case.heads, case.head_dim, case.window,
                                         case.global_tokens, case.output_projection)
        gen = torch.Generator().manual_seed(0)
        sizes = [((s.batch, s.m, s.k), (s.batch, s.k, s.n), (s.batch, s.m, s.n)) for s in self.shapes]
        buffers = [torch.randn(max(torch.Size(shape[role]).numel() for shape in sizes), generator=gen).to(device, dtype)
                   for role in range(3)]  # left operand, right operand, output
        self.operands = [tuple(buffer[:torch.Size(size).numel()].view(size) for buffer, size in zip(buffers, shape))
                         for shape in sizes]
        self.timed("fwd_bwd")  # warm-up: thread pools, the BLAS's first calls

    def _seconds(self, index: int) -> float:
        a, b, out = self.operands[index]
        self.sync()
        start = time.perf_counter()
        torch.bmm(a, b, out=out)
        self.sync()
        return time.perf_counter() - start

    def timed(self, call: str) -> float:
        """The shape time of ``call`` ("fwd" or "fwd_bwd") in ms: sum of W_i * t_i / FLOPs_i."""
        seconds = 0.0
        for index, shape in enumerate(self.shapes):
            weight = shape.forward_weight + (shape.backward_weight if call == "fwd_bwd" else 0)
            if weight:
                seconds += weight * self._seconds(index) / shape.flops
        return seconds * 1e3

    def first_timing(self) -> Optional[str]:
        """Never too slow: the worker's time is a reference, not a contender's."""
        self.timed("fwd_bwd")
        return None


def limit_case(sizes: Case, length: int, global_tokens: int) -> MatmulCase:
    """The shape rates' worker at one point, with the sizes, threads, device and dtype of ``sizes``."""
    same = {f.name: getattr(sizes, f.name) for f in fields(Case)}
    return MatmulCase(**{**same, "impl": IMPL, "length": length, "global_tokens": global_tokens, "dropout": None})


def _gflops(useful: int, ms: Optional[float]) -> Optional[float]:
    return useful / (ms * 1e6) if ms else None


def limit_row(result: Result) -> dict:
    """The JSON entry of one point's shape rate: the worker's timed calls (ms) and the rate in GFLOP/s
    of the forward and of the forward+backward."""
    counted = layer_flops(result.case)
    return {"length": result.case.length, "global_tokens": result.case.global_tokens, "status": result.status,
            "note": result.note, "fwd_ms": result.fwd_ms, "fwd_bwd_ms": result.fwd_bwd_ms,
            "fwd_ms_all": result.fwd_ms_all, "fwd_bwd_ms_all": result.fwd_bwd_ms_all,
            "shape_rate_gflops_fwd": _gflops(counted.forward, result.fwd_ms),
            "shape_rate_gflops_fwd_bwd": _gflops(counted.forward_backward, result.fwd_bwd_ms),
            "busy_cores_before": result.busy_cores_before}


def add_efficiency(rows: List[dict], limits: List[dict], sizes: Case) -> List[dict]:
    """Give every contender row (``ratios.add_ratios``) its useful FLOPs, useful GFLOP/s, the
    shape rate of its point (``limit_row``) and its fraction of it, forward and forward+backward.
    ``sizes``: a case of the run (batch, heads, head dim, window, output projection); a missing
    time or limit gives None."""
    by_point = {(limit["length"], limit["global_tokens"]): limit for limit in limits}
    for row in rows:
        counted = layer_flops(replace(sizes, length=row["length"], global_tokens=row["global_tokens"]))
        limit = by_point.get((row["length"], row["global_tokens"]), {})
        for call, useful in (("fwd", counted.forward), ("fwd_bwd", counted.forward_backward)):
            achieved = _gflops(useful, row[f"{call}_ms"])
            ceiling = limit.get(f"shape_rate_gflops_{call}")
            row[f"useful_flops_{call}"] = useful
            row[f"useful_gflops_{call}"] = achieved
            row[f"shape_rate_gflops_{call}"] = ceiling
            row[f"fraction_of_shape_rate_{call}"] = achieved / ceiling if achieved and ceiling else None
    return rows
