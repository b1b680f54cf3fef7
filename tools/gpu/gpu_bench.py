"""Benchmark of Longformer attention against dense SDPA and FlexAttention (``gpu_check.py`` runs it).

The pattern: one-sided window w = 256, dilation 1, G global tokens in every row (G = 0 and 8:
the first G positions of a row, as a task's question tokens), no padding;
q, k, v (and q_g, k_g, v_g for the Longformer implementations): (B, H, N, D), H = 12, D = 64.
Contenders:
    triton         the project's Triton kernel
    torch          the project's PyTorch path (sliding chunks)
    sdpa_flash     dense SDPA, no mask, flash backend on CUDA: full N x N attention, the dense baseline
    sdpa_band      dense SDPA with the pattern as a boolean (N, N) mask (backend chosen by torch)
    flex           FlexAttention with a block mask built from the same pattern (band through the
                   block mask; dilation and global tokens through ``mask_mod``), compiled on CUDA
SDPA and Flex use q, k, v for the global row too (one projection set; the cost is the same).
A contender that cannot run (missing, out of memory, no dropout, no CPU backward) is skipped
with the reason; an error of the project's own implementations counts as a failure.

Useful FLOPs: ``flops.attention_flops``, the project's one count (its docstring states the
convention: the band and the global rows and columns, 4D per pair and head forward,
forward+backward 3x forward; a dense contender's TFLOP/s is the pattern's work over its time).
The fraction is of this GPU's matmul rate at the same dtype, measured in the same run (8192^3 on
CUDA). Times: CUDA events, warmup, median of the repeats. Peak memory: the most the
call allocates beyond what was allocated before it (inputs excluded).
"""
import statistics
import time
import warnings
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F

from longformer_kernels import (AttentionDropout, AttentionMasks, AttentionPattern, longformer_attention,
                                sliding_chunks_attention)
from longformer_tools.flops import attention_flops

WINDOW, HEADS, HEAD_DIM = 256, 12, 64
CONTENDERS = ("triton", "torch", "sdpa_flash", "sdpa_band", "flex")
CUDA_SHAPES = dict(batches=(1, 2, 4, 8), lengths=(4096, 16384), dtypes=("fp16", "bf16"), matmul=8192,
                   window=WINDOW, heads=HEADS, head_dim=HEAD_DIM, dropouts=(0.0, 0.1), globals=(0, 8),
                   contenders=CONTENDERS, warmup=3, repeats=10)
# the CPU smoke only proves the harness runs: Triton's interpreter takes seconds per call
CPU_SHAPES = dict(batches=(1,), lengths=(64,), dtypes=("fp16",), matmul=128, window=4, heads=2, head_dim=16,
                  dropouts=(0.0,), globals=(1,), contenders=CONTENDERS, warmup=0, repeats=1)
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
OWN = ("triton", "torch")  # failures of these are errors; of the others, skips


class Skip(Exception):
    """A contender that cannot run here; the message says why."""


def call_times_ms(fn: Callable, device: torch.device, repeats: int) -> List[float]:
    """Milliseconds of each of ``repeats`` calls of ``fn`` (CUDA events on a GPU, the host clock
    on the CPU)."""
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
    return times


def time_ms(fn: Callable, device: torch.device, warmup: int, repeats: int) -> float:
    """Median milliseconds of ``fn`` over ``repeats`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        fn()
    return statistics.median(call_times_ms(fn, device, repeats))


def peak_mib(fn: Callable, device: torch.device) -> Optional[float]:
    """MiB the call allocates beyond what was allocated before it (None on the CPU)."""
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    torch.cuda.synchronize(device)
    return (torch.cuda.max_memory_allocated(device) - before) / 2 ** 20


def matmul_tflops(dtype: torch.dtype, device: torch.device, size: int, warmup: int, repeats: int) -> float:
    """This device's measured (size x size) @ (size x size) rate, random data."""
    a, b = (torch.randn(size, size, device=device).to(dtype) for _ in range(2))
    ms = time_ms(lambda: a @ b, device, warmup, repeats)
    return 2.0 * size ** 3 / (ms * 1e-3) / 1e12


def pattern_mask(length: int, window: int, is_global: torch.Tensor) -> torch.Tensor:
    """(N, N) bool, True where query i may attend key j: the band (dilation 1) or a global i or j."""
    i = torch.arange(length, device=is_global.device)
    band = (i[:, None] - i[None, :]).abs() <= window
    return band | is_global[None, :] | is_global[:, None]


def contender(name: str, shape: dict, length: int, p_drop: float, is_global: torch.Tensor) -> Callable:
    """f(q, k, v, q_g, k_g, v_g) -> (B, H, N, D) for ``name``; raises Skip when it cannot run."""
    window, device = shape["window"], is_global.device
    if name in OWN:
        pattern = AttentionPattern(window)
        masks = AttentionMasks(is_global=is_global[None].expand(shape["batch"], -1) if is_global.any() else None)
        dropout = AttentionDropout(p_drop, seed=1) if p_drop else None
        if masks.is_global is None:  # no global projections to pass, and none to differentiate
            return lambda q, k, v, *_: longformer_attention(q, k, v, None, None, None, pattern, masks, impl=name,
                                                             dropout=dropout)
        return lambda *x: longformer_attention(*x, pattern, masks, impl=name, dropout=dropout)
    if name == "sdpa_flash":
        def sdpa_flash(q, k, v, *_):
            if device.type != "cuda":
                return F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop)
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, dropout_p=p_drop)
        return sdpa_flash
    if name == "sdpa_band":
        mask = pattern_mask(length, window, is_global)
        return lambda q, k, v, *_: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p_drop)
    if name == "flex":
        return flex_contender(length, window, is_global, p_drop)
    raise ValueError(f"unknown contender {name!r}")


def flex_contender(length: int, window: int, is_global: torch.Tensor, p_drop: float,
                   dilation: Optional[torch.Tensor] = None) -> Callable:
    """FlexAttention with the Longformer pattern: ``mask_mod`` allows |i - j| <= w d with
    (i - j) divisible by the head's dilation d (``dilation``: (H,) int, None = 1), or a global i
    or j; the block mask skips the tiles that allow nothing.

    The mask is written in the fastest form that is exact for ``is_global``: the band alone when
    no token is global, a position range when the global tokens are the first G positions (the
    benchmark's), lookups in ``is_global`` otherwise. On an H200 (bf16, B = 8, N = 16,384,
    w = 256) a mask_mod reading is_global[i] | is_global[j] made Flex's forward 14x slower than
    the band alone (14.5 ms against 1.05 ms), with no token global; its backward barely changed.
    """
    if p_drop:
        raise Skip("FlexAttention has no attention dropout")
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    except ImportError as error:
        raise Skip(f"FlexAttention missing in torch {torch.__version__}: {error}")

    def band(h, diff):
        if dilation is None:
            return diff.abs() <= window
        step = dilation[h]
        return (diff.abs() <= window * step) & (diff % step == 0)

    count = int(is_global.sum())
    if count == 0:
        def mask_mod(b, h, q_idx, kv_idx):
            return band(h, q_idx - kv_idx)
    elif bool(is_global[:count].all()):
        def mask_mod(b, h, q_idx, kv_idx):
            return band(h, q_idx - kv_idx) | (kv_idx < count) | (q_idx < count)
    else:
        def mask_mod(b, h, q_idx, kv_idx):
            return band(h, q_idx - kv_idx) | is_global[kv_idx] | is_global[q_idx]

    device = is_global.device
    block_mask = create_block_mask(mask_mod, None, None if dilation is None else dilation.numel(), length, length,
                                   device=str(device))
    if device.type == "cuda":
        # one compile per (B, N, dtype): past dynamo's recompile limit (8 by default) flex would
        # silently fall back to its eager, dense form and the table would time that instead
        import torch._dynamo

        for limit in ("recompile_limit", "cache_size_limit",  # the second name of each: older torch
                      "accumulated_recompile_limit", "accumulated_cache_size_limit"):
            if hasattr(torch._dynamo.config, limit):
                setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 256))
        attend = torch.compile(flex_attention, dynamic=False)
        return lambda q, k, v, *_: attend(q, k, v, block_mask=block_mask)

    def eager(q, k, v, *_):
        # the CPU smoke runs flex eagerly (a dense decomposition; compiling takes minutes on 2 cores):
        # silence its "called without torch.compile()" warning, which is the point here
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return flex_attention(q, k, v, block_mask=block_mask)
    return eager


def check_flex_pattern(device: torch.device, smoke: bool) -> dict:
    """FlexAttention's mask (per-head dilation 1 and 2) against the PyTorch path on the same
    q, k, v (global rows with the local projections), with the global tokens written each way
    ``flex_contender`` can write them (none, the first two positions, two scattered ones): proof
    that the benchmark times the same pattern. {"rel_err" (the worst), "tol", "ok"} or
    {"skipped"}."""
    heads, length, window, head_dim = (2, 64, 4, 16) if smoke else (4, 1024, 32, 64)
    dtype = torch.float32 if smoke else torch.float16
    dilation = (1, 2) * (heads // 2)
    generator = torch.Generator(device=device).manual_seed(5)
    q, k, v = (torch.randn(1, heads, length, head_dim, device=device, generator=generator, dtype=dtype)
               for _ in range(3))
    worst = 0.0
    for positions in ([], [0, 1], [0, length // 3]):
        is_global = torch.zeros(length, dtype=torch.bool, device=device)
        is_global[positions] = True
        try:
            flex = flex_contender(length, window, is_global, 0.0, torch.tensor(dilation, device=device))(q, k, v)
        except Skip as why:
            return dict(skipped=str(why))
        masks = AttentionMasks(is_global=is_global[None] if positions else None)
        expected = sliding_chunks_attention(q, k, v, q, k, v, AttentionPattern(window, dilation), masks)
        err = ((flex.double() - expected.double()).norm() / expected.double().norm()).item()
        worst = max(worst, err)
    tol = 1e-5 if dtype == torch.float32 else 1e-2
    return dict(rel_err=worst, tol=tol, ok=worst <= tol, dtype=str(dtype), length=length, dilation=dilation)


def measure(fn: Callable, inputs: List[torch.Tensor], used: int, backward: bool, device: torch.device,
            shape: dict) -> Dict[str, float]:
    """{"ms", "peak_mib"} of forward (+ backward from a random dO through the first ``used`` inputs)."""
    leaves = [t.detach().requires_grad_(backward) for t in inputs]
    grad_out = torch.randn_like(inputs[0])

    def step():
        out = fn(*leaves)
        if backward:
            torch.autograd.grad(out, leaves[:used], grad_out)

    if not backward:
        step = torch.no_grad()(step)
    ms = time_ms(step, device, shape["warmup"], shape["repeats"])
    return dict(ms=ms, peak_mib=peak_mib(step, device))


def run_benchmark(device: torch.device, smoke: bool, log, **only) -> dict:
    """Every (N, G, B, dtype, dropout, contender, forward / forward+backward): time, TFLOP/s,
    fraction of the matmul rate, peak memory; returns {"conventions", "matmul_tflops", "rows",
    "errors"}. ``only``: keys of CUDA_SHAPES (batches, lengths, dtypes, globals, contenders,
    repeats) that narrow the grid; None keeps the default."""
    shape = dict(CPU_SHAPES if smoke else CUDA_SHAPES)
    unknown = set(only) - set(shape)
    if unknown:
        raise ValueError(f"run_benchmark: unknown grid keys {sorted(unknown)}")
    shape.update({k: v for k, v in only.items() if v is not None})
    rates = {d: matmul_tflops(DTYPES[d], device, shape["matmul"], 2, 5) for d in shape["dtypes"]}
    log(f"matmul {shape['matmul']}^3: " + ", ".join(f"{d} {r:.3g} TFLOP/s" for d, r in rates.items()))
    rows, errors = [], 0
    try:
        if "flex" not in shape["contenders"]:
            raise Skip("flex is not among the contenders")
        flex_check = check_flex_pattern(device, smoke)
    except Skip as why:
        flex_check = dict(skipped=str(why))
    except Exception as error:  # noqa: BLE001 (a broken flex is a skipped contender, not a crash)
        flex_check = dict(skipped=f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}")
    if "skipped" in flex_check:
        log(f"FlexAttention pattern check skipped: {flex_check['skipped']}")
    else:
        errors += not flex_check["ok"]
        log(f"FlexAttention pattern = Longformer pattern: rel err {flex_check['rel_err']:.2g} "
            f"(tol {flex_check['tol']:.0g}) {'ok' if flex_check['ok'] else 'FAIL'}")
    log(f"{'contender':10} {'B':>2} {'N':>6} {'G':>2} {'dtype':5} {'drop':>4} {'pass':8} {'ms':>9} {'TFLOP/s':>8} "
        f"{'of mm':>6} {'peak MiB':>9}  note")
    heads, head_dim, window = shape["heads"], shape["head_dim"], shape["window"]
    for length, n_global in ((n, g) for n in shape["lengths"] for g in shape["globals"]):
        is_global = torch.zeros(length, dtype=torch.bool, device=device)
        is_global[:n_global] = True
        for batch in shape["batches"]:
            for dtype_name in shape["dtypes"]:
                generator = torch.Generator(device=device).manual_seed(batch * 7 + length)
                inputs = [torch.randn(batch, heads, length, head_dim, device=device, generator=generator,
                                      dtype=DTYPES[dtype_name]) for _ in range(6)]
                for p_drop in shape["dropouts"]:
                    for name in shape["contenders"]:
                        for backward in (False, True):
                            row = dict(contender=name, batch=batch, length=length, globals=n_global,
                                       dtype=dtype_name,
                                       dropout=p_drop, passes="fwd+bwd" if backward else "fwd",
                                       heads=heads, head_dim=head_dim, window=window)
                            try:
                                fn = contender(name, dict(shape, batch=batch), length, p_drop, is_global)
                                row.update(measure(fn, inputs, 6 if name in OWN and n_global else 3, backward, device,
                                                   shape))
                                flops = attention_flops(batch, heads, length, head_dim, window, n_global, backward)
                                row["tflops"] = flops / (row["ms"] * 1e-3) / 1e12
                                row["fraction_of_matmul"] = row["tflops"] / rates[dtype_name]
                            except Skip as why:
                                row["skipped"] = str(why)
                            except torch.OutOfMemoryError:
                                row["skipped"] = "out of memory"
                            except Exception as error:  # noqa: BLE001 (reported per row, never a traceback)
                                reason = f"{type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
                                if name in OWN:
                                    row["error"] = reason
                                    errors += 1
                                else:
                                    row["skipped"] = reason
                            if device.type == "cuda":
                                torch.cuda.empty_cache()
                            rows.append(row)
                            log(format_row(row))
                del inputs
    conventions = ("useful FLOPs: longformer_tools.flops.attention_flops (band and global rows/columns, 4D per "
                   "pair and head forward, fwd+bwd 3x forward); fraction: of the measured matmul rate at that dtype; "
                   "peak MiB: allocated by the call beyond its inputs; ms: median of CUDA-event times")
    return dict(conventions=conventions, shape=shape, matmul_tflops=rates, flex_pattern_check=flex_check, rows=rows,
                errors=errors)


def format_row(row: dict) -> str:
    head = (f"{row['contender']:10} {row['batch']:>2} {row['length']:>6} {row['globals']:>2} {row['dtype']:5} "
            f"{row['dropout']:4.1f} "
            f"{row['passes']:8}")
    if "ms" not in row:
        return f"{head} {'-':>9} {'-':>8} {'-':>6} {'-':>9}  " + (
            f"ERROR {row['error']}" if "error" in row else f"skipped: {row['skipped']}")
    peak = "-" if row["peak_mib"] is None else f"{row['peak_mib']:.0f}"
    return (f"{head} {row['ms']:9.3f} {row['tflops']:8.3g} {row['fraction_of_matmul']:6.1%} {peak:>9}")
