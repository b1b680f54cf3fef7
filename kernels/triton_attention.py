"""Longformer attention in Triton, forward and backward: the host side.

This module holds the per-call layout (``_Layout``), the launcher (``_launch``), the autograd
Function and the public entry ``triton_longformer_attention``. The tiles and the list of every
launch configuration are in ``triton_tiles.py`` (re-exported here); the kernels themselves, and
the account of their algorithm (tensor shapes, which kernel writes which rows, the dilation's
residue layout, dropout, band bias, numerics), are in ``triton_device.py``, whose kernels and
device helpers are re-exported here under their old names.
"""
import functools
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from . import triton_tiles
from .dropout import AttentionDropout
from .pattern import AttentionMasks, AttentionPattern, check_band_bias, check_inputs, default_scale
from .triton_device import (  # noqa: F401  (re-exported: tests call the dropout hash helpers)
    GLOBAL, LOCAL, PAD, _band_bwd_dkdv_kernel, _band_bwd_dq_kernel, _band_fwd_kernel,
    _consecutive_draws, _cross_bwd_dkdv_kernel, _delta_kernel, _draws, _global_rows_bwd_dq_kernel,
    _global_rows_combine_kernel, _global_rows_fwd_kernel, _key_weights, _mix32, _row_hash,
    _sum_rows_kernel,
)
# re-exported: the tests, gpu_tune and compile_table read the tiles here; a test that patches
# block_config or _known_configs on this module changes what the launchers below pick or accept
from .triton_tiles import (  # noqa: F401
    BLOCK_DS, GPU_TILES_ENV, KERNEL_FLAGS, MAX_HEAD_DIM, PRECISION, SUPPORTED_DTYPES, TILES_16BIT_D64, TILES_ENV,
    WARPS_STAGES_16BIT_D64, BlockConfig, LaunchConfig, _gpu_tiles_forced, _interpreting, _known_configs,
    _tile_overrides, block_config, launch_configurations, short_name,
)

LOG2E = 1.4426950408889634
# The global rows' kernels split their N keys (queries) into chunks until about this many
# programs run per GPU multiprocessor (the interpreter: in all), so that a few global tokens
# still fill the GPU (``_global_splits``).
PROGRAMS_PER_SM = 2
INTERPRETER_PROGRAMS = 8


# --------------------------------------------------------------------------------------------
# Host side: the layout of one call, launchers
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Layout:
    """Everything about the pattern of one call that the kernels read, built once per forward."""

    kind: Tensor  # (B, N) int8
    gidx: Tensor  # (B, max(G, 1)) int64
    gcount: Tensor  # (B,) int64
    dil: Tensor  # (H,) int32, clamped to N (a dilation >= N only ever reaches the token itself)
    dilated: bool  # some head has d > 1: the band kernels compile the residue layout
    max_global: int  # G
    t_len: int  # longest t-space of any head: d * ceil(N / d) (sizes the band kernels' grids)
    window: int  # clamped to N: a longer window reaches nothing more
    causal: bool
    scale: float
    dtype: torch.dtype
    configs: Dict[str, BlockConfig]  # kernel name -> its tiles
    interpret: bool
    dropout: Optional[AttentionDropout]


def _cdiv(a: int, b: int) -> int:
    """ceil(a / b) for the grids: plain Python (``triton.cdiv`` is a constexpr function whose
    host call costs microseconds, and a call of the attention makes dozens of them)."""
    return -(-a // b)


@functools.lru_cache(maxsize=32)
def _layout_configs(choose, head_dim: int, element_size: int, interpret: bool,
                    overrides: Tuple) -> Dict[str, BlockConfig]:
    """{kernel: choose(head_dim, element_size, interpret, kernel)}, once per distinct input:
    ``choose`` (block_config, or what a test puts in its place) and the tile overrides are part
    of the key, so a patched chooser or a new override is never answered from the cache."""
    return {name: choose(head_dim, element_size, interpret, name) for name in KERNEL_FLAGS}


@functools.lru_cache(maxsize=8)
def _multiprocessors(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


def _global_splits(length: int, block: int, slot_blocks: int, programs: int, lay: "_Layout",
                   device: torch.device) -> Tuple[int, int]:
    """(SPLITS, CHUNK): how a global-rows kernel with ``slot_blocks * programs`` programs of
    its own splits its N positions: CHUNK a multiple of ``block``, SPLITS = ceil(N / CHUNK)
    chunks, enough that the programs reach PROGRAMS_PER_SM per multiprocessor."""
    target = INTERPRETER_PROGRAMS if lay.interpret or device.type != "cuda" else (
        PROGRAMS_PER_SM * _multiprocessors(device))
    splits = max(1, min(_cdiv(length, block), _cdiv(target, slot_blocks * programs)))
    chunk = _cdiv(_cdiv(length, splits), block) * block
    return _cdiv(length, chunk), chunk


@functools.lru_cache(maxsize=64)
def _dilation_tensor(dilations: Tuple[int, ...], device: torch.device) -> Tensor:
    return torch.tensor(dilations, dtype=torch.int32, device=device)


def _position_tensors(masks: AttentionMasks, batch: int, length: int,
                      device: torch.device) -> Tuple[Tensor, Tensor, Tensor]:
    """What the kernels read of the masks: kind (B, N) int8 (LOCAL, GLOBAL or PAD), the global
    positions gidx (B, max(G, 1)) long and their counts gcount (B,) long, on ``device``. Made
    once per forward (``AttentionMasks.derived``): on a GPU host each small tensor costs tens of
    microseconds a layer, as much as a kernel launch."""
    kind = torch.full((batch, length), LOCAL.value, dtype=torch.int8, device=device)
    if masks.padding is not None:
        kind.masked_fill_(masks.padding.to(device), PAD.value)
    if masks.is_global is not None:  # AttentionMasks excludes padding from it
        kind.masked_fill_(masks.is_global.to(device), GLOBAL.value)
        return kind, masks.global_index.to(device), masks.global_count.to(device)
    return (kind, torch.zeros(batch, 1, dtype=torch.long, device=device),
            torch.zeros(batch, dtype=torch.long, device=device))


def _build_layout(q: Tensor, pattern: AttentionPattern, masks: AttentionMasks, scale: float,
                  dropout: Optional[AttentionDropout]) -> _Layout:
    batch, heads, length, head_dim = q.shape
    device = q.device
    interpret = _interpreting() and not _gpu_tiles_forced()
    configs = _layout_configs(block_config, head_dim, q.element_size(), interpret,
                              tuple(sorted(triton_tiles._TILE_OVERRIDES.items())))
    kind, gidx, gcount = masks.derived(("triton_positions", batch, length, device),
                                       lambda: _position_tensors(masks, batch, length, device))
    dilations = tuple(min(d, max(length, 1)) for d in pattern.dilation_per_head(heads))
    return _Layout(
        kind=kind, gidx=gidx, gcount=gcount, dil=_dilation_tensor(dilations, device),
        dilated=any(d > 1 for d in dilations),
        max_global=masks.max_global, t_len=max(d * _cdiv(length, d) for d in dilations),
        window=min(pattern.window, length), causal=pattern.causal, scale=scale, dtype=q.dtype,
        configs=configs, interpret=interpret, dropout=dropout,
    )


def _launch(kernel, grid, args, lay: _Layout, **flags) -> None:
    """Launch ``kernel`` with its tiles, the call's dropout arguments and flags, refusing any
    configuration ``launch_configurations`` does not list (the compile test covers exactly it).
    ``grid``: f(tiles) -> the launch grid."""
    name = kernel.fn.__name__
    c = lay.configs[name]
    grid = grid(c)
    assert set(flags) == set(KERNEL_FLAGS[name]), (name, flags)
    config = LaunchConfig(name, lay.dtype, tuple((f, flags[f]) for f in KERNEL_FLAGS[name]), c)
    if config not in _known_configs(lay.interpret):
        raise RuntimeError(f"launch configuration {config.name} is not in launch_configurations()")
    drop = lay.dropout
    dropout_args = (0, 0, 1.0) if drop is None else (drop.seed, drop.threshold, drop.keep_scale)
    if "seed" not in kernel.arg_names:  # a kernel without the mask (delta)
        dropout_args = ()
    kernel[grid](*args, *dropout_args, **config.constexprs, num_warps=c.num_warps,
                 num_stages=c.num_stages)


def _strides(t: Tensor) -> Tuple[int, int, int]:
    return t.stride(0), t.stride(1), t.stride(2)


def _same_layout(a: Tensor, b: Tensor) -> bool:
    """Same strides wherever the size is > 1 (a size-1 dimension is never stepped over)."""
    return all(size == 1 or sa == sb for size, sa, sb in zip(a.shape, a.stride(), b.stride()))


def _dense(t: Tensor) -> bool:
    """Unit last stride, and the elements fill one block of memory with no gaps or overlaps
    (then ``torch.empty_like`` keeps the strides: out and grads share the inputs' layout)."""
    if t.stride(-1) != 1 and t.shape[-1] != 1:
        return False
    expected = 1
    dims = sorted(((st, s) for s, st in zip(t.shape, t.stride()) if s != 1))
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def _family(first: Tensor, *others: Optional[Tensor]) -> List[Optional[Tensor]]:
    """``first`` and ``others`` (None stays None) in one layout with a unit last stride: the
    first's own when its last stride is 1 and it is dense (else contiguous); a tensor in another
    layout is copied into this one. No copy at all in the usual case."""
    if not _dense(first):
        first = first.contiguous()
    return [first] + [t if t is None or _same_layout(t, first) else _like(first, t) for t in others]


def _like(layout: Tensor, t: Tensor) -> Tensor:
    """A copy of ``t`` with the strides of ``layout`` (same shape)."""
    return torch.empty_like(layout, dtype=t.dtype).copy_(t)


def _sum_global_rows(part: Tensor, out: Tensor, splits: int, lay: _Layout, scale: float) -> None:
    """Rows of ``out`` (B, H, N, D) at the global tokens <- scale * the sum of ``part``
    (SPLITS, B * H, G, D) fp32 over its chunks (``_sum_rows_kernel``)."""
    batch, heads, length, head_dim = out.shape
    _launch(_sum_rows_kernel, lambda c: (_cdiv(lay.max_global, c.block_m), batch * heads),
            (part, out, lay.gidx, lay.gcount, *_strides(out), heads, head_dim, lay.gidx.stride(0),
             lay.max_global, splits, scale),
            lay)


# --------------------------------------------------------------------------------------------
# Autograd
# --------------------------------------------------------------------------------------------
class LongformerAttentionFunction(torch.autograd.Function):
    """out = Longformer attention of (q, k, v, q_g, k_g, v_g) under a prepared ``_Layout``.

    q, k, v: (B, H, N, D); q_g, k_g, v_g: (B, H, N, D), or all None. ``global_rows``: compute
    the GLOBAL rows (needs q_g, k_g, v_g); else they are left zero and q_g, k_g, v_g unused.
    band_bias: (B, H, N, W) in q's dtype, or None (``pattern.py``). Saves q, k, v, the output,
    the (B, H, N) fp32 lse, the band bias, and q_g, k_g, v_g only when the global rows are
    computed; the backward recomputes P and the dropout mask.
    """

    @staticmethod
    def forward(ctx, q, k, v, q_g, k_g, v_g, band_bias, lay: _Layout, global_rows: bool):
        q, k, v = _family(q, k, v)
        batch, heads, length, head_dim = q.shape
        do_global = global_rows and lay.max_global > 0
        has_bias = band_bias is not None
        # the kernels address the bias as a contiguous (B, H, N, W) block; without one they
        # get q in its place (a pointer of the same type, never read: HAS_BIAS=False)
        bias = band_bias.contiguous() if has_bias else q
        bias_w = band_bias.shape[-1] if has_bias else 1
        out = torch.empty_like(q)  # q's strides: the caller's permute back is a view
        lse = torch.empty(batch, heads, length, dtype=torch.float32, device=q.device)
        _launch(_band_fwd_kernel, lambda c: (_cdiv(lay.t_len, c.block_m), batch * heads),
                (q, k, v, out, lse, lay.kind, lay.gidx, lay.gcount, lay.dil, bias, *_strides(q),
                 heads, length, head_dim, lay.gidx.stride(0), lay.window, bias_w,
                 lay.scale * LOG2E),
                lay, CAUSAL=lay.causal, DROPOUT=lay.dropout is not None, HAS_BIAS=has_bias,
                DILATED=lay.dilated)
        if do_global:
            q_g, k_g, v_g = _family(q_g, k_g, v_g)
            c = lay.configs["_global_rows_fwd_kernel"]
            slot_blocks = _cdiv(lay.max_global, c.block_m)
            splits, chunk = _global_splits(length, c.block_n, slot_blocks, batch * heads, lay, q.device)
            state = torch.empty(2, splits, batch * heads, lay.max_global, dtype=torch.float32, device=q.device)
            parts = torch.empty(splits, batch * heads, lay.max_global, head_dim, dtype=torch.float32,
                                device=q.device)
            _launch(_global_rows_fwd_kernel, lambda c: (slot_blocks * splits, batch * heads),
                    (q_g, k_g, v_g, state[0], state[1], parts, lay.kind, lay.gidx, lay.gcount, *_strides(q_g),
                     heads, length, head_dim, lay.gidx.stride(0), lay.max_global, splits, chunk,
                     lay.scale * LOG2E),
                    lay, DROPOUT=lay.dropout is not None)
            _launch(_global_rows_combine_kernel, lambda c: (_cdiv(lay.max_global, c.block_m), batch * heads),
                    (state[0], state[1], parts, out, lse, lay.gidx, lay.gcount, *_strides(out), heads, length,
                     head_dim, lay.gidx.stride(0), lay.max_global, splits),
                    lay)
            ctx.save_for_backward(q, k, v, out, lse, bias, q_g, k_g, v_g)
        else:
            ctx.save_for_backward(q, k, v, out, lse, bias)
        ctx.has_bias, ctx.bias_w = has_bias, bias_w
        ctx.lay = lay
        ctx.do_global = do_global
        # q_g given but its rows not computed (global_rows=False), or no token global: their
        # gradient is zero: None where the rows are skipped, zeros where rows were asked for
        ctx.global_grad = "kernels" if do_global else ("zeros" if global_rows else "none")
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse, bias = ctx.saved_tensors[:6]
        has_bias, bias_w = ctx.has_bias, ctx.bias_w
        lay: _Layout = ctx.lay
        batch, heads, length, head_dim = q.shape
        needs = ctx.needs_input_grad
        drop = dict(DROPOUT=lay.dropout is not None)
        do = grad_out.to(q.dtype)
        if do.stride(-1) != 1 or not _same_layout(do, out):
            do = _like(out, do)
        # delta_i = sum_j P_ij dP_ij = dO_i . O_i, in fp32, read once from dO and O as they are
        delta = torch.empty(batch, heads, length, dtype=torch.float32, device=q.device)
        _launch(_delta_kernel, lambda c: (_cdiv(length, c.block_m), batch * heads),
                (out, do, delta, *_strides(out), heads, length, head_dim), lay)
        dq = dk = dv = dq_g = dk_g = dv_g = dbias = None
        band_grid = lambda c: (_cdiv(lay.t_len, c.block_m), batch * heads)  # noqa: E731
        key_grid = lambda c: (_cdiv(lay.t_len, c.block_n), batch * heads)  # noqa: E731
        glob = (lay.kind, lay.gidx, lay.gcount)
        dims = (heads, length, head_dim)
        bias_needed = has_bias and needs[6]
        if needs[0] or bias_needed:  # the dq kernel also writes the bias's gradient
            dq = torch.empty_like(q)
            # zeros: the kernel writes only the allowed band entries of the gradient
            dbias = torch.zeros_like(bias) if bias_needed else dq
            _launch(_band_bwd_dq_kernel, band_grid,
                    (q, k, v, do, dq, lse, delta, *glob, lay.dil, bias, dbias, *_strides(q), *dims,
                     lay.gidx.stride(0), lay.window, bias_w, lay.scale * LOG2E, lay.scale),
                    lay, CAUSAL=lay.causal, HAS_BIAS=has_bias, DILATED=lay.dilated, **drop)
            dbias = dbias if bias_needed else None
        if needs[1] or needs[2]:
            dk, dv = torch.empty_like(q), torch.empty_like(q)
            _launch(_band_bwd_dkdv_kernel, key_grid,
                    (q, k, v, do, dk, dv, lse, delta, lay.kind, lay.dil, bias, *_strides(q), *dims,
                     lay.window, bias_w, lay.scale * LOG2E, lay.scale),
                    lay, CAUSAL=lay.causal, HAS_BIAS=has_bias, DILATED=lay.dilated, **drop)
            if lay.max_global > 0:  # dk, dv of the GLOBAL rows, from the local queries
                c = lay.configs["_cross_bwd_dkdv_kernel"]
                slot_blocks = _cdiv(lay.max_global, c.block_n)
                splits, chunk = _global_splits(length, c.block_m, slot_blocks, batch * heads, lay, q.device)
                parts = torch.empty(2, splits, batch * heads, lay.max_global, head_dim, dtype=torch.float32,
                                    device=q.device)
                _launch(_cross_bwd_dkdv_kernel, lambda c: (slot_blocks * splits, batch * heads),
                        (q, k, v, do, dk, dv, parts[0], parts[1], lse, delta, *glob, *_strides(q), *_strides(do),
                         *dims, lay.gidx.stride(0), lay.max_global, splits, chunk, lay.scale * LOG2E,
                         lay.scale),
                        lay, GLOBAL_KEYS=True, **drop)
                for part, grad, scale in ((parts[0], dk, lay.scale), (parts[1], dv, 1.0)):
                    _sum_global_rows(part, grad, splits, lay, scale)
        if ctx.do_global:
            q_g, k_g, v_g = ctx.saved_tensors[6:]
            if needs[3]:
                dq_g = torch.zeros_like(q_g)  # only GLOBAL rows are written
                c = lay.configs["_global_rows_bwd_dq_kernel"]
                slot_blocks = _cdiv(lay.max_global, c.block_m)
                splits, chunk = _global_splits(length, c.block_n, slot_blocks, batch * heads, lay, q.device)
                part = torch.empty(splits, batch * heads, lay.max_global, head_dim, dtype=torch.float32,
                                   device=q.device)
                _launch(_global_rows_bwd_dq_kernel, lambda c: (slot_blocks * splits, batch * heads),
                        (q_g, k_g, v_g, do, part, lse, delta, *glob, *_strides(q_g),
                         *_strides(do), *dims, lay.gidx.stride(0), lay.max_global, splits, chunk,
                         lay.scale * LOG2E),
                        lay, **drop)
                _sum_global_rows(part, dq_g, splits, lay, lay.scale)
            if needs[4] or needs[5]:
                dk_g, dv_g = torch.empty_like(q_g), torch.empty_like(q_g)
                _launch(_cross_bwd_dkdv_kernel, lambda c: (_cdiv(length, c.block_n), batch * heads),
                        (q_g, k_g, v_g, do, dk_g, dv_g, lse, lse, lse, delta, *glob, *_strides(q_g),
                         *_strides(do), *dims, lay.gidx.stride(0), 0, 1, length, lay.scale * LOG2E,
                         lay.scale),
                        lay, GLOBAL_KEYS=False, **drop)
        elif ctx.global_grad == "zeros":  # global projections given, no token global
            dq_g, dk_g, dv_g = (torch.zeros_like(q) if n else None for n in needs[3:6])
        grads = (dq, dk, dv, dq_g, dk_g, dv_g, dbias)
        return tuple(g if n else None for g, n in zip(grads, needs[:7])) + (None, None)


# --------------------------------------------------------------------------------------------
# Public entry
# --------------------------------------------------------------------------------------------
def triton_longformer_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    q_g: Optional[Tensor],
    k_g: Optional[Tensor],
    v_g: Optional[Tensor],
    pattern: AttentionPattern,
    masks: AttentionMasks = AttentionMasks(),
    scale: Optional[float] = None,
    global_rows: bool = True,
    dropout: Optional[AttentionDropout] = None,
    band_bias: Optional[Tensor] = None,
) -> Tensor:
    """Longformer attention with Triton kernels. Inputs (B, H, N, D); returns (B, H, N, D).

    Same signature and semantics as ``sliding_chunks_attention`` (see ``pattern.py``):
    q_g, k_g, v_g may be None when no token is global, or when ``global_rows`` is False: the
    caller computes the global tokens' rows itself, and they come back zero here (no global-row
    kernel runs, forward or backward). Any N; fp16, bf16 or fp32 inputs with fp32 softmax and
    accumulation; the output has the input dtype and q's strides when q's last stride is 1.
    ``dropout``: attention dropout (``dropout.py``), the same mask as every implementation.
    ``band_bias``: (B, H, N, W) additive scores of the window keys in q's dtype ("Band bias"
    in ``pattern.py``), or None.
    Differentiable in all six inputs and the bias; inputs that need no gradient get none
    computed.
    Tensors must be on a CUDA device, or on the CPU with TRITON_INTERPRET=1 set before this
    module was imported.
    """
    check_inputs(q, k, v, q_g, k_g, v_g, pattern, masks, need_global=global_rows)
    check_band_bias(band_bias, q, pattern)
    if q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"q, k, v must be one of {SUPPORTED_DTYPES}, got {q.dtype}")
    batch, heads, length, head_dim = q.shape
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head dim D must be in [1, {MAX_HEAD_DIM}], got {head_dim}")
    if q.device.type != "cuda" and not _interpreting():
        raise ValueError(
            f"triton_longformer_attention needs CUDA tensors, got device {q.device}; on a CPU set "
            "TRITON_INTERPRET=1 before importing longformer_kernels (Triton's interpreter)")
    if band_bias is not None and length * band_bias.shape[-1] >= 2 ** 31:
        raise ValueError(f"band_bias: N * W must be < 2^31 (int32 offsets within one head), got "
                         f"N = {length}, W = {band_bias.shape[-1]}")
    if batch * heads > 65535:
        raise ValueError(f"B * H must be <= 65535 (CUDA grid axis 1), got {batch * heads}")
    if length == 0 or batch == 0 or heads == 0:
        return q.new_zeros(q.shape)
    scale = default_scale(head_dim) if scale is None else float(scale)
    if band_bias is not None and scale == 0.0:  # the kernels add bias / scale to q.k
        raise ValueError("scale must be nonzero when a band_bias is given to the Triton kernels")
    if dropout is not None and dropout.p == 0.0:
        dropout = None
    lay = _build_layout(q, pattern, masks, scale, dropout)
    return LongformerAttentionFunction.apply(q, k, v, q_g, k_g, v_g, band_bias, lay, global_rows)
