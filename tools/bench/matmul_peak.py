"""The machine's matmul peak, measured in the benchmark's own run: the ceiling every fraction of
``longformer-bench`` is expressed against.

Large square products (``SIZES``: big enough that the BLAS runs at full speed) with the
benchmark's threads, fp32 always and bf16 where the CPU multiplies bf16 natively (avx512_bf16 or
AMX; a CUDA device always). The peak of a dtype is the fastest of its timed products, in GFLOP/s
(2*n^3 FLOPs per product): the best the machine showed, so a layer's fraction of it cannot pass
100% unless the measurement is wrong (``check_fractions``). The per-shape rates of
``matmul_limit`` stay beside it under their own name (the rate of plain matmuls at the layer's
shapes): they are not a ceiling (small shapes run slower than the layer's fused work).
"""
import time
from typing import Dict, Iterable, List, Optional

import torch

SIZES = (2048, 4096)
REPEATS = 3
PEAK_DEFINITION = (
    "matmul peak: the fastest of {repeats} timed (n x n) @ (n x n) products for each n in {sizes} in the run's "
    "dtype and threads (2*n^3 FLOPs each), measured at the start and the end of the run; fraction of peak = "
    "useful GFLOP/s / peak GFLOP/s, per timed call")


def native_bf16(device: str = "cpu") -> bool:
    """Whether ``device`` multiplies bf16 natively: CUDA, or a CPU with avx512_bf16 / amx_bf16."""
    if device.startswith("cuda"):
        return True
    try:
        with open("/proc/cpuinfo") as handle:
            flags = set(handle.read().split())
    except OSError:
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16"}) and torch.backends.mkldnn.is_available()


def _product_seconds(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, sync) -> float:
    sync()
    start = time.perf_counter()
    torch.mm(a, b, out=out)
    sync()
    return time.perf_counter() - start


def measure(dtype: str, threads: int, device: str = "cpu", sizes: Iterable[int] = SIZES,
            repeats: int = REPEATS) -> dict:
    """{"dtype", "gflops" (the peak), "size" (its n), "gflops_all" ({n: [each product's GFLOP/s]})}."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    rates: Dict[int, List[float]] = {}
    try:
        for n in sizes:
            gen = torch.Generator().manual_seed(n)
            a, b = (torch.randn(n, n, generator=gen).to(device, getattr(torch, dtype)) for _ in range(2))
            out = torch.empty_like(a)
            _product_seconds(a, b, out, sync)  # warm-up: the BLAS's first call, page faults of out
            rates[n] = [2 * n ** 3 / _product_seconds(a, b, out, sync) / 1e9 for _ in range(repeats)]
            del a, b, out
    finally:
        torch.set_num_threads(previous)
    size, best = max(((n, max(r)) for n, r in rates.items()), key=lambda pair: pair[1])
    return {"dtype": dtype, "gflops": best, "size": size, "gflops_all": {str(n): r for n, r in rates.items()}}


def peaks(run_dtype: str, threads: int, device: str = "cpu", sizes: Iterable[int] = SIZES) -> Dict[str, dict]:
    """The peak of ``run_dtype`` and, where the device has native bf16, of bfloat16 (by dtype)."""
    dtypes = [run_dtype] + (["bfloat16"] if run_dtype != "bfloat16" and native_bf16(device) else [])
    return {dtype: measure(dtype, threads, device, tuple(sizes)) for dtype in dtypes}


def merge(first: Dict[str, dict], second: Dict[str, dict]) -> Dict[str, dict]:
    """The peak of each dtype over two measurements (the run's start and end): the faster, with
    both products' rates kept."""
    merged = {}
    for dtype, start in first.items():
        end = second.get(dtype, start)
        best = max(start, end, key=lambda p: p["gflops"])
        merged[dtype] = dict(best, gflops_at_start=start["gflops"], gflops_at_end=end["gflops"])
    return merged


def add_fractions(rows: List[dict], peak_gflops: float) -> List[dict]:
    """Give every row (``matmul_limit.add_efficiency``'s useful FLOPs) the peak and its fraction
    of it, forward and forward+backward, and per timed forward+backward call."""
    for row in rows:
        row["peak_gflops"] = peak_gflops
        for call in ("fwd", "fwd_bwd"):
            achieved = row.get(f"useful_gflops_{call}")
            row[f"fraction_of_peak_{call}"] = achieved / peak_gflops if achieved and peak_gflops else None
        calls = row.get("fwd_bwd_ms_all") or []
        row["fraction_of_peak_fwd_bwd_all"] = [row["useful_flops_fwd_bwd"] / (ms * 1e6) / peak_gflops
                                               for ms in calls if ms] if peak_gflops else []
    return rows


def check_fractions(rows: List[dict]) -> Optional[str]:
    """The one-line error when any row's fraction of the peak (median or one call) is above 100%:
    a measurement bug (a wrong FLOP count, or a peak measured too low), never a result."""
    for row in rows:
        fractions = [row.get("fraction_of_peak_fwd"), row.get("fraction_of_peak_fwd_bwd"),
                     *row.get("fraction_of_peak_fwd_bwd_all", [])]
        worst = max((f for f in fractions if f is not None), default=None)
        if worst is not None and worst > 1.0:
            return (f"{row['impl']} at N = {row['length']}, {row['global_tokens']} global tokens reached {worst:.0%} of "
                    f"the matmul peak ({row['peak_gflops']:.1f} GFLOP/s): a measurement bug (FLOP count or peak), "
                    "not a result; nothing written. Re-run on a quiet machine; if it repeats, report it")
    return None
