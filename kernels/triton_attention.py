"""Longformer attention in Triton, forward and backward (FlashAttention-2 style).

Shape legend (the one of ``fairseq_longformer/attention/pattern.py``, whose docstring defines
the semantics implemented here):
    B batch    H heads    N sequence length    D head dimension
    G          global tokens in the row that has the most of them
    q, k, v, q_g, k_g, v_g, out, and their gradients: (B, H, N, D), contiguous, so row n of
               head (b, h) starts at element ((b * H + h) * N + n) * D
    kind:      (B, N) int8   LOCAL / GLOBAL / PAD for every position (padding wins over global)
    gidx:      (B, G) int32  positions of each batch row's global tokens, ascending; slots at and
               after gcount[b] are unused (0)
    gcount:    (B,) int32    number of global tokens of each batch row
    dil:       (H,) int32    dilation of each head
    lse:       (B, H, N) fp32  log-sum-exp of each row's scaled scores, in log2 units
    delta:     (B, H, N) fp32  rowsum(dO * O), the softmax backward's correction term

Kernels. Every output row is written by exactly one program of one kernel (no atomics, no
races, deterministic):
    _band_fwd_kernel          out, lse of LOCAL rows (and zeros for PAD rows): band + global keys
    _global_rows_fwd_kernel   out, lse of GLOBAL rows: q_g against every non-padding k_g, v_g
    _band_bwd_dq_kernel       dq of every row (zero where the row is not LOCAL)
    _band_bwd_dkdv_kernel     dk, dv of every non-GLOBAL row: contributions of the band
    _cross_bwd_dkdv_kernel    GLOBAL_KEYS=True:  dk, dv of GLOBAL rows (local queries, global keys)
                              GLOBAL_KEYS=False: dk_g, dv_g of every row (global queries, all keys)
    _global_rows_bwd_dq_kernel  dq_g of GLOBAL rows (dq_g is zero elsewhere)

Dilation: the "residue layout". Positions with the same residue r = n mod d form a subsequence
r, r + d, r + 2d, ... in which the dilated window is an ordinary window of w. The band kernels
walk an index t over these subsequences laid end to end (t = r * M + m, position m * d + r,
M = ceil(N / d)), so a head of dilation d costs exactly what an undilated head costs, key blocks
outside the band are skipped in t, and heads with different dilations share one launch. This is
the reshape trick of ``sliding_chunks.py`` done by index arithmetic on the loads: no copy of
q, k, v and no (d - 1) / d of wasted work, which masking ``(j - i) % d == 0`` inside a band of
width w * d would cost. For d = 1, t is the position and the residue is always 0.

Numerics: q.k runs in tl.dot with its fp32 accumulator (fp16 products are exact in fp32, so
scores beyond fp16's 65504 stay finite) and is scaled in fp32; the softmax runs in fp32 in log2
units (qk_scale = scale * log2(e), exp2 being the hardware instruction). As in FlashAttention,
probabilities and dS are rounded to the input dtype before their matmuls with v / k / q / dO;
accumulators stay fp32. fp32 inputs use input_precision="ieee" (no tf32 rounding on GPUs).
"""
import os
from dataclasses import dataclass
from typing import Optional

import torch
import triton
import triton.language as tl
from torch import Tensor

from fairseq_longformer.attention.pattern import (
    AttentionMasks, AttentionPattern, check_inputs, default_scale,
)

# Values of ``kind``. A global must be a tl.constexpr to be readable inside @triton.jit code.
LOCAL = tl.constexpr(0)
GLOBAL = tl.constexpr(1)
PAD = tl.constexpr(2)
# Running max of a row before it has seen a key: finite, so exp2(m_old - m_new) is 0 or 1 and
# never exp2(-inf - -inf) = NaN for a row whose keys are all masked so far.
NEG_BIG = tl.constexpr(-1.0e30)

LOG2E = 1.4426950408889634
SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
MAX_HEAD_DIM = 256  # one (BLOCK, D) tile per operand lives in registers / shared memory


# --------------------------------------------------------------------------------------------
# Device helpers
# --------------------------------------------------------------------------------------------
@triton.jit
def _residue_positions(t, M, dil):
    """t-space index -> (residue, position): residue r holds positions r, r + d, r + 2d, ..."""
    r = t // M
    return r, (t - r * M) * dil + r


@triton.jit
def _load_rows(base, pos, ok, offs_d, D):
    """(len(pos), BLOCK_D) tile of rows ``pos`` of a (N, D) matrix; zeros where not ``ok`` or
    beyond D (D is padded to a power of two >= 16 for tl.dot)."""
    return tl.load(base + pos[:, None] * D + offs_d[None, :],
                   mask=ok[:, None] & (offs_d[None, :] < D), other=0.0)


@triton.jit
def _store_rows(base, pos, ok, offs_d, D, tile):
    tl.store(base + pos[:, None] * D + offs_d[None, :], tile.to(base.dtype.element_ty),
             mask=ok[:, None] & (offs_d[None, :] < D))


@triton.jit
def _fwd_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, PRECISION: tl.constexpr):
    """One online-softmax step over a key tile; all state in fp32, log2 units."""
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
    s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
    return m_new, l_i, acc


@triton.jit
def _fwd_finish(m_i, l_i, acc):
    """Normalised output and lse. A row that saw no key (l = 0: padding rows) gives zeros and
    lse 0 rather than 0/0; the backward masks such rows, so their lse is never used."""
    has_keys = l_i > 0.0
    out = acc / tl.where(has_keys, l_i, 1.0)[:, None]
    lse = tl.where(has_keys, m_i + tl.math.log2(tl.where(has_keys, l_i, 1.0)), 0.0)
    return out, lse


@triton.jit
def _dq_step(q, do, k, v, lse, delta, allowed, dq, qk_scale, PRECISION: tl.constexpr):
    """dq += dS k for one key tile, with P recomputed from the saved lse."""
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * qk_scale
    p = tl.math.exp2(tl.where(allowed, s, float("-inf")) - lse[:, None])
    dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
    ds = p * (dp - delta[:, None])
    return dq + tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)


@triton.jit
def _dkdv_step(k, v, q, do, lse, delta, allowed_t, dk, dv, qk_scale, PRECISION: tl.constexpr):
    """dk += dS^T q and dv += P^T dO for one query tile, computed transposed (keys on rows) so
    the key tile's accumulators never need a transpose."""
    s_t = tl.dot(k, tl.trans(q), input_precision=PRECISION) * qk_scale
    p_t = tl.math.exp2(tl.where(allowed_t, s_t, float("-inf")) - lse[None, :])
    dv = dv + tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)
    dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
    ds_t = p_t * (dp_t - delta[None, :])
    dk = dk + tl.dot(ds_t.to(q.dtype), q, input_precision=PRECISION)
    return dk, dv


# --------------------------------------------------------------------------------------------
# Forward kernels
# --------------------------------------------------------------------------------------------
@triton.jit
def _band_fwd_kernel(Q, K, V, O, LSE, KIND, GIDX, GCOUNT, DIL,
                     H, N, D, G, window, qk_scale,
                     CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Grid (query blocks in t-space, B * H). LOCAL rows: band keys then global keys."""
    bh = tl.program_id(1)
    b = bh // H
    dil = tl.load(DIL + bh % H)
    M = tl.cdiv(N, dil)
    T = M * dil  # t-space length of this head (>= N when d does not divide N)
    t0 = tl.program_id(0) * BLOCK_M
    if t0 >= T:  # heads with a smaller T need fewer blocks than the grid has
        return
    mat = bh.to(tl.int64) * N * D  # start of this (b, h)'s (N, D) matrices
    vec = bh.to(tl.int64) * N  # start of this (b, h)'s lse row

    offs_d = tl.arange(0, BLOCK_D)
    offs_m = t0 + tl.arange(0, BLOCK_M)
    r_q, pos_q = _residue_positions(offs_m, M, dil)
    q_in = (offs_m < T) & (pos_q < N)
    kind_q = tl.load(KIND + b * N + pos_q, mask=q_in, other=PAD)
    q_ok = kind_q == LOCAL
    q = _load_rows(Q + mat, pos_q, q_in, offs_d, D)

    m_i = tl.full([BLOCK_M], NEG_BIG, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    # Band keys: t-space indices within `window` of the block's queries, in the residues the
    # block touches. Only key blocks meeting [lo, hi] are visited.
    t_last = tl.minimum(t0 + BLOCK_M, T) - 1
    lo = tl.maximum(t0 - window, (t0 // M) * M)
    if CAUSAL:
        hi = t_last
    else:
        hi = tl.minimum(t_last + window, (t_last // M) * M + M - 1)
    for start in tl.range((lo // BLOCK_N) * BLOCK_N, hi + 1, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        r_k, pos_k = _residue_positions(offs_n, M, dil)
        k_in = (offs_n < T) & (pos_k < N)
        kind_k = tl.load(KIND + b * N + pos_k, mask=k_in, other=PAD)
        k = _load_rows(K + mat, pos_k, k_in, offs_d, D)
        v = _load_rows(V + mat, pos_k, k_in, offs_d, D)
        diff = offs_m[:, None] - offs_n[None, :]  # query - key, in steps of d
        # Global keys are left out of the band: they are attended once, in the loop below.
        allowed = (q_ok[:, None] & (kind_k == LOCAL)[None, :] & (r_q[:, None] == r_k[None, :])
                   & (diff <= window))
        if CAUSAL:
            allowed = allowed & (diff >= 0)
        else:
            allowed = allowed & (diff >= -window)
        m_i, l_i, acc = _fwd_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, PRECISION)

    # Global keys (local projections): every LOCAL query attends every global token, causal
    # or not (pattern.py).
    count = tl.load(GCOUNT + b)
    for start in tl.range(0, count, BLOCK_N):
        offs_g = start + tl.arange(0, BLOCK_N)
        g_ok = offs_g < count
        pos_k = tl.load(GIDX + b * G + offs_g, mask=g_ok, other=0)
        k = _load_rows(K + mat, pos_k, g_ok, offs_d, D)
        v = _load_rows(V + mat, pos_k, g_ok, offs_d, D)
        allowed = q_ok[:, None] & g_ok[None, :]
        m_i, l_i, acc = _fwd_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, PRECISION)

    out, lse = _fwd_finish(m_i, l_i, acc)
    # GLOBAL rows belong to _global_rows_fwd_kernel; PAD rows get the zeros computed here.
    mine = q_in & (kind_q != GLOBAL)
    _store_rows(O + mat, pos_q, mine, offs_d, D, out)
    tl.store(LSE + vec + pos_q, lse, mask=mine)


@triton.jit
def _global_rows_fwd_kernel(QG, KG, VG, O, LSE, KIND, GIDX, GCOUNT,
                            H, N, D, G, qk_scale,
                            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Grid (blocks of global slots, B * H). GLOBAL rows: q_g against every non-padding key."""
    bh = tl.program_id(1)
    b = bh // H
    count = tl.load(GCOUNT + b)
    g0 = tl.program_id(0) * BLOCK_M
    if g0 >= count:
        return
    mat = bh.to(tl.int64) * N * D
    vec = bh.to(tl.int64) * N

    offs_d = tl.arange(0, BLOCK_D)
    offs_g = g0 + tl.arange(0, BLOCK_M)
    g_ok = offs_g < count
    pos_q = tl.load(GIDX + b * G + offs_g, mask=g_ok, other=0)
    q = _load_rows(QG + mat, pos_q, g_ok, offs_d, D)

    m_i = tl.full([BLOCK_M], NEG_BIG, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start in tl.range(0, N, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        k_in = offs_n < N
        kind_k = tl.load(KIND + b * N + offs_n, mask=k_in, other=PAD)
        k = _load_rows(KG + mat, offs_n, k_in, offs_d, D)
        v = _load_rows(VG + mat, offs_n, k_in, offs_d, D)
        allowed = g_ok[:, None] & (kind_k != PAD)[None, :]
        m_i, l_i, acc = _fwd_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, PRECISION)

    out, lse = _fwd_finish(m_i, l_i, acc)
    _store_rows(O + mat, pos_q, g_ok, offs_d, D, out)
    tl.store(LSE + vec + pos_q, lse, mask=g_ok)


# --------------------------------------------------------------------------------------------
# Backward kernels (P recomputed from lse; delta = rowsum(dO * O) computed beforehand)
# --------------------------------------------------------------------------------------------
@triton.jit
def _band_bwd_dq_kernel(Q, K, V, DO, DQ, LSE, DELTA, KIND, GIDX, GCOUNT, DIL,
                        H, N, D, G, window, qk_scale, sm_scale,
                        CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Grid as _band_fwd_kernel. dq of every row: band keys then global keys."""
    bh = tl.program_id(1)
    b = bh // H
    dil = tl.load(DIL + bh % H)
    M = tl.cdiv(N, dil)
    T = M * dil
    t0 = tl.program_id(0) * BLOCK_M
    if t0 >= T:
        return
    mat = bh.to(tl.int64) * N * D
    vec = bh.to(tl.int64) * N

    offs_d = tl.arange(0, BLOCK_D)
    offs_m = t0 + tl.arange(0, BLOCK_M)
    r_q, pos_q = _residue_positions(offs_m, M, dil)
    q_in = (offs_m < T) & (pos_q < N)
    kind_q = tl.load(KIND + b * N + pos_q, mask=q_in, other=PAD)
    q_ok = kind_q == LOCAL
    q = _load_rows(Q + mat, pos_q, q_in, offs_d, D)
    do = _load_rows(DO + mat, pos_q, q_in, offs_d, D)
    lse = tl.load(LSE + vec + pos_q, mask=q_in, other=0.0)
    delta = tl.load(DELTA + vec + pos_q, mask=q_in, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    t_last = tl.minimum(t0 + BLOCK_M, T) - 1
    lo = tl.maximum(t0 - window, (t0 // M) * M)
    if CAUSAL:
        hi = t_last
    else:
        hi = tl.minimum(t_last + window, (t_last // M) * M + M - 1)
    for start in tl.range((lo // BLOCK_N) * BLOCK_N, hi + 1, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        r_k, pos_k = _residue_positions(offs_n, M, dil)
        k_in = (offs_n < T) & (pos_k < N)
        kind_k = tl.load(KIND + b * N + pos_k, mask=k_in, other=PAD)
        k = _load_rows(K + mat, pos_k, k_in, offs_d, D)
        v = _load_rows(V + mat, pos_k, k_in, offs_d, D)
        diff = offs_m[:, None] - offs_n[None, :]
        allowed = (q_ok[:, None] & (kind_k == LOCAL)[None, :] & (r_q[:, None] == r_k[None, :])
                   & (diff <= window))
        if CAUSAL:
            allowed = allowed & (diff >= 0)
        else:
            allowed = allowed & (diff >= -window)
        dq = _dq_step(q, do, k, v, lse, delta, allowed, dq, qk_scale, PRECISION)

    count = tl.load(GCOUNT + b)
    for start in tl.range(0, count, BLOCK_N):
        offs_g = start + tl.arange(0, BLOCK_N)
        g_ok = offs_g < count
        pos_k = tl.load(GIDX + b * G + offs_g, mask=g_ok, other=0)
        k = _load_rows(K + mat, pos_k, g_ok, offs_d, D)
        v = _load_rows(V + mat, pos_k, g_ok, offs_d, D)
        allowed = q_ok[:, None] & g_ok[None, :]
        dq = _dq_step(q, do, k, v, lse, delta, allowed, dq, qk_scale, PRECISION)

    # d(scores)/dq = scale * k: the scale (natural units) is applied once, here.
    _store_rows(DQ + mat, pos_q, q_in, offs_d, D, dq * sm_scale)


@triton.jit
def _band_bwd_dkdv_kernel(Q, K, V, DO, DK, DV, LSE, DELTA, KIND, DIL,
                          H, N, D, window, qk_scale, sm_scale,
                          CAUSAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Grid (key blocks in t-space, B * H). dk, dv from the band's LOCAL queries."""
    bh = tl.program_id(1)
    b = bh // H
    dil = tl.load(DIL + bh % H)
    M = tl.cdiv(N, dil)
    T = M * dil
    s0 = tl.program_id(0) * BLOCK_N
    if s0 >= T:
        return
    mat = bh.to(tl.int64) * N * D
    vec = bh.to(tl.int64) * N

    offs_d = tl.arange(0, BLOCK_D)
    offs_n = s0 + tl.arange(0, BLOCK_N)
    r_k, pos_k = _residue_positions(offs_n, M, dil)
    k_in = (offs_n < T) & (pos_k < N)
    kind_k = tl.load(KIND + b * N + pos_k, mask=k_in, other=PAD)
    k_ok = kind_k == LOCAL
    k = _load_rows(K + mat, pos_k, k_in, offs_d, D)
    v = _load_rows(V + mat, pos_k, k_in, offs_d, D)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)

    # Queries t that see key s: s - w <= t <= s + w (causal: s <= t <= s + w), same residue.
    s_last = tl.minimum(s0 + BLOCK_N, T) - 1
    if CAUSAL:
        lo = s0
    else:
        lo = tl.maximum(s0 - window, (s0 // M) * M)
    hi = tl.minimum(s_last + window, (s_last // M) * M + M - 1)
    for start in tl.range((lo // BLOCK_M) * BLOCK_M, hi + 1, BLOCK_M):
        offs_m = start + tl.arange(0, BLOCK_M)
        r_q, pos_q = _residue_positions(offs_m, M, dil)
        q_in = (offs_m < T) & (pos_q < N)
        kind_q = tl.load(KIND + b * N + pos_q, mask=q_in, other=PAD)
        q = _load_rows(Q + mat, pos_q, q_in, offs_d, D)
        do = _load_rows(DO + mat, pos_q, q_in, offs_d, D)
        lse = tl.load(LSE + vec + pos_q, mask=q_in, other=0.0)
        delta = tl.load(DELTA + vec + pos_q, mask=q_in, other=0.0)
        diff = offs_m[None, :] - offs_n[:, None]  # query - key, (BLOCK_N, BLOCK_M)
        allowed_t = (k_ok[:, None] & (kind_q == LOCAL)[None, :]
                     & (r_k[:, None] == r_q[None, :]) & (diff <= window))
        if CAUSAL:
            allowed_t = allowed_t & (diff >= 0)
        else:
            allowed_t = allowed_t & (diff >= -window)
        dk, dv = _dkdv_step(k, v, q, do, lse, delta, allowed_t, dk, dv, qk_scale, PRECISION)

    # GLOBAL key rows belong to _cross_bwd_dkdv_kernel (GLOBAL_KEYS=True); PAD rows get zeros.
    mine = k_in & (kind_k != GLOBAL)
    _store_rows(DK + mat, pos_k, mine, offs_d, D, dk * sm_scale)
    _store_rows(DV + mat, pos_k, mine, offs_d, D, dv)


@triton.jit
def _cross_bwd_dkdv_kernel(Q, K, V, DO, DK, DV, LSE, DELTA, KIND, GIDX, GCOUNT,
                           H, N, D, G, qk_scale, sm_scale,
                           GLOBAL_KEYS: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                           PRECISION: tl.constexpr):
    """dk, dv for the two dense (not banded) parts of the pattern.

    GLOBAL_KEYS=True (local projections): keys = the global tokens (grid over slot blocks),
        queries = every LOCAL row. Writes dk, dv of GLOBAL rows.
    GLOBAL_KEYS=False (global projections): keys = every position (grid over key blocks),
        queries = the global rows. Writes dk_g, dv_g of every row (zero for padding).
    """
    bh = tl.program_id(1)
    b = bh // H
    count = tl.load(GCOUNT + b)
    s0 = tl.program_id(0) * BLOCK_N
    mat = bh.to(tl.int64) * N * D
    vec = bh.to(tl.int64) * N
    offs_d = tl.arange(0, BLOCK_D)
    offs_n = s0 + tl.arange(0, BLOCK_N)
    if GLOBAL_KEYS:
        if s0 >= count:
            return
        k_in = offs_n < count
        k_ok = k_in
        pos_k = tl.load(GIDX + b * G + offs_n, mask=k_in, other=0)
        num_queries = N
    else:
        k_in = offs_n < N
        pos_k = offs_n
        k_ok = tl.load(KIND + b * N + pos_k, mask=k_in, other=PAD) != PAD
        num_queries = count
    k = _load_rows(K + mat, pos_k, k_in, offs_d, D)
    v = _load_rows(V + mat, pos_k, k_in, offs_d, D)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)

    for start in tl.range(0, num_queries, BLOCK_M):
        offs_m = start + tl.arange(0, BLOCK_M)
        if GLOBAL_KEYS:
            q_in = offs_m < N
            pos_q = offs_m
            q_ok = tl.load(KIND + b * N + pos_q, mask=q_in, other=PAD) == LOCAL
        else:
            q_in = offs_m < count
            q_ok = q_in
            pos_q = tl.load(GIDX + b * G + offs_m, mask=q_in, other=0)
        q = _load_rows(Q + mat, pos_q, q_in, offs_d, D)
        do = _load_rows(DO + mat, pos_q, q_in, offs_d, D)
        lse = tl.load(LSE + vec + pos_q, mask=q_in, other=0.0)
        delta = tl.load(DELTA + vec + pos_q, mask=q_in, other=0.0)
        allowed_t = k_ok[:, None] & q_ok[None, :]
        dk, dv = _dkdv_step(k, v, q, do, lse, delta, allowed_t, dk, dv, qk_scale, PRECISION)

    _store_rows(DK + mat, pos_k, k_in, offs_d, D, dk * sm_scale)
    _store_rows(DV + mat, pos_k, k_in, offs_d, D, dv)


@triton.jit
def _global_rows_bwd_dq_kernel(QG, KG, VG, DO, DQG, LSE, DELTA, KIND, GIDX, GCOUNT,
                               H, N, D, G, qk_scale, sm_scale,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Grid as _global_rows_fwd_kernel. dq_g of GLOBAL rows."""
    bh = tl.program_id(1)
    b = bh // H
    count = tl.load(GCOUNT + b)
    g0 = tl.program_id(0) * BLOCK_M
    if g0 >= count:
        return
    mat = bh.to(tl.int64) * N * D
    vec = bh.to(tl.int64) * N

    offs_d = tl.arange(0, BLOCK_D)
    offs_g = g0 + tl.arange(0, BLOCK_M)
    g_ok = offs_g < count
    pos_q = tl.load(GIDX + b * G + offs_g, mask=g_ok, other=0)
    q = _load_rows(QG + mat, pos_q, g_ok, offs_d, D)
    do = _load_rows(DO + mat, pos_q, g_ok, offs_d, D)
    lse = tl.load(LSE + vec + pos_q, mask=g_ok, other=0.0)
    delta = tl.load(DELTA + vec + pos_q, mask=g_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for start in tl.range(0, N, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        k_in = offs_n < N
        kind_k = tl.load(KIND + b * N + offs_n, mask=k_in, other=PAD)
        k = _load_rows(KG + mat, offs_n, k_in, offs_d, D)
        v = _load_rows(VG + mat, offs_n, k_in, offs_d, D)
        allowed = g_ok[:, None] & (kind_k != PAD)[None, :]
        dq = _dq_step(q, do, k, v, lse, delta, allowed, dq, qk_scale, PRECISION)
    _store_rows(DQG + mat, pos_q, g_ok, offs_d, D, dq * sm_scale)


# --------------------------------------------------------------------------------------------
# Host side: the layout of one call, block sizes, launchers
# --------------------------------------------------------------------------------------------
def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@dataclass(frozen=True)
class BlockConfig:
    block_m: int
    block_n: int
    block_d: int
    num_warps: int
    num_stages: int


def block_config(head_dim: int, element_size: int, interpret: bool) -> BlockConfig:
    """Fixed tile sizes for a head dim and an input element size (2: fp16/bf16, 4: fp32).

    One fixed config per case: multi-config @triton.autotune does not run in the interpreter.
    D is padded to a power of two >= 16 (tl.dot's minimum). The interpreter's cost is per
    operation, not per element, so 32 x 32 tiles run about 3x faster there than 16 x 16.
    On GPUs the tiles shrink as a row of q / k / v / dO grows, so that every kernel fits the
    smallest shared memory of Ampere and later (99 KiB per block on sm_86/sm_89). Largest
    kernel (backward dk/dv), compiled for sm_86 with Triton 3.9: fp16 D=64 41 KiB, fp16 D=128
    58 KiB, fp32 D=64 82 KiB, fp32 D=128 70 KiB, fp16 D=256 74 KiB, fp32 D=256 67 KiB.
    """
    block_d = max(16, triton.next_power_of_2(head_dim))
    if interpret:
        return BlockConfig(32, 32, block_d, 1, 1)
    row_bytes = block_d * element_size
    if block_d <= 64:
        return BlockConfig(64, 64, block_d, 4, 2)
    if row_bytes <= 256:
        return BlockConfig(64, 32, block_d, 4, 2)
    if row_bytes <= 512:
        return BlockConfig(32, 32, block_d, 4, 1)
    return BlockConfig(16, 16, block_d, 4, 1)


@dataclass(frozen=True)
class _Layout:
    """Everything about the pattern of one call that the kernels read, built once per forward."""

    kind: Tensor  # (B, N) int8
    gidx: Tensor  # (B, max(G, 1)) int32
    gcount: Tensor  # (B,) int32
    dil: Tensor  # (H,) int32, clamped to N (a dilation >= N only ever reaches the token itself)
    max_global: int  # G
    t_len: int  # longest t-space of any head: d * ceil(N / d) (sizes the band kernels' grids)
    window: int  # clamped to N: a longer window reaches nothing more
    causal: bool
    scale: float
    config: BlockConfig
    precision: str


def _build_layout(q: Tensor, pattern: AttentionPattern, masks: AttentionMasks,
                  is_global: Optional[Tensor], scale: float) -> _Layout:
    batch, heads, length, head_dim = q.shape
    device = q.device
    config = block_config(head_dim, q.element_size(), _interpreting())
    kind = torch.full((batch, length), LOCAL.value, dtype=torch.int8, device=device)
    padding = masks.padding_or_none()
    if padding is not None:
        kind.masked_fill_(padding.to(device), PAD.value)
    if is_global is not None:  # check_inputs' mask already excludes padding positions
        is_global = is_global.to(device)
        kind.masked_fill_(is_global, GLOBAL.value)
        counts = is_global.sum(dim=1)
        max_global = int(counts.max())
        # stable sort puts each row's global positions first, in ascending order
        order = torch.argsort((~is_global).to(torch.int8), dim=1, stable=True)
        gidx = order[:, :max_global].to(torch.int32).contiguous()
        gcount = counts.to(torch.int32)
    else:
        max_global = 0
        gidx = torch.zeros(batch, 1, dtype=torch.int32, device=device)
        gcount = torch.zeros(batch, dtype=torch.int32, device=device)
    dilations = [min(d, max(length, 1)) for d in pattern.dilation_per_head(heads)]
    return _Layout(
        kind=kind, gidx=gidx, gcount=gcount,
        dil=torch.tensor(dilations, dtype=torch.int32, device=device),
        max_global=max_global, t_len=max(d * triton.cdiv(length, d) for d in dilations),
        window=min(pattern.window, length), causal=pattern.causal, scale=scale, config=config,
        precision="ieee",  # only read for fp32 operands: exact fp32 products, no tf32
    )


def _check_launch(*tensors: Tensor) -> None:
    # internal invariants: the autograd Function hands over contiguous tensors of one dtype
    for t in tensors:
        assert t.is_contiguous(), "kernels index (B, H, N, D) tensors as contiguous"


def _launch_band_fwd(q, k, v, out, lse, lay: _Layout) -> None:
    _check_launch(q, k, v, out, lse)
    batch, heads, length, head_dim = q.shape
    c = lay.config
    grid = (triton.cdiv(lay.t_len, c.block_m), batch * heads)
    _band_fwd_kernel[grid](
        q, k, v, out, lse, lay.kind, lay.gidx, lay.gcount, lay.dil,
        heads, length, head_dim, lay.gidx.shape[1], lay.window, lay.scale * LOG2E,
        CAUSAL=lay.causal, BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_D=c.block_d,
        PRECISION=lay.precision, num_warps=c.num_warps, num_stages=c.num_stages)


def _launch_global_rows_fwd(q_g, k_g, v_g, out, lse, lay: _Layout) -> None:
    _check_launch(q_g, k_g, v_g, out, lse)
    batch, heads, length, head_dim = q_g.shape
    c = lay.config
    grid = (triton.cdiv(lay.max_global, c.block_m), batch * heads)
    _global_rows_fwd_kernel[grid](
        q_g, k_g, v_g, out, lse, lay.kind, lay.gidx, lay.gcount,
        heads, length, head_dim, lay.gidx.shape[1], lay.scale * LOG2E,
        BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_D=c.block_d, PRECISION=lay.precision,
        num_warps=c.num_warps, num_stages=c.num_stages)


def _launch_band_bwd_dq(q, k, v, do, dq, lse, delta, lay: _Layout) -> None:
    _check_launch(q, k, v, do, dq, lse, delta)
    batch, heads, length, head_dim = q.shape
    c = lay.config
    grid = (triton.cdiv(lay.t_len, c.block_m), batch * heads)
    _band_bwd_dq_kernel[grid](
        q, k, v, do, dq, lse, delta, lay.kind, lay.gidx, lay.gcount, lay.dil,
        heads, length, head_dim, lay.gidx.shape[1], lay.window, lay.scale * LOG2E, lay.scale,
        CAUSAL=lay.causal, BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_D=c.block_d,
        PRECISION=lay.precision, num_warps=c.num_warps, num_stages=c.num_stages)


def _launch_band_bwd_dkdv(q, k, v, do, dk, dv, lse, delta, lay: _Layout) -> None:
    _check_launch(q, k, v, do, dk, dv, lse, delta)
    batch, heads, length, head_dim = q.shape
    c = lay.config
    grid = (triton.cdiv(lay.t_len, c.block_n), batch * heads)
    _band_bwd_dkdv_kernel[grid](
        q, k, v, do, dk, dv, lse, delta, lay.kind, lay.dil,
        heads, length, head_dim, lay.window, lay.scale * LOG2E, lay.scale,
        CAUSAL=lay.causal, BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_D=c.block_d,
        PRECISION=lay.precision, num_warps=c.num_warps, num_stages=c.num_stages)


def _launch_cross_bwd_dkdv(q, k, v, do, dk, dv, lse, delta, lay: _Layout,
                           global_keys: bool) -> None:
    _check_launch(q, k, v, do, dk, dv, lse, delta)
    batch, heads, length, head_dim = q.shape
    c = lay.config
    keys = lay.max_global if global_keys else length
    grid = (triton.cdiv(keys, c.block_n), batch * heads)
    _cross_bwd_dkdv_kernel[grid](
        q, k, v, do, dk, dv, lse, delta, lay.kind, lay.gidx, lay.gcount,
        heads, length, head_dim, lay.gidx.shape[1], lay.scale * LOG2E, lay.scale,
        GLOBAL_KEYS=global_keys, BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_D=c.block_d,
        PRECISION=lay.precision, num_warps=c.num_warps, num_stages=c.num_stages)


def _launch_global_rows_bwd_dq(q_g, k_g, v_g, do, dq_g, lse, delta, lay: _Layout) -> None:
    _check_launch(q_g, k_g, v_g, do, dq_g, lse, delta)
    batch, heads, length, head_dim = q_g.shape
    c = lay.config
    grid = (triton.cdiv(lay.max_global, c.block_m), batch * heads)
    _global_rows_bwd_dq_kernel[grid](
        q_g, k_g, v_g, do, dq_g, lse, delta, lay.kind, lay.gidx, lay.gcount,
        heads, length, head_dim, lay.gidx.shape[1], lay.scale * LOG2E, lay.scale,
        BLOCK_M=c.block_m, BLOCK_N=c.block_n, BLOCK_D=c.block_d, PRECISION=lay.precision,
        num_warps=c.num_warps, num_stages=c.num_stages)


# --------------------------------------------------------------------------------------------
# Autograd
# --------------------------------------------------------------------------------------------
class LongformerAttentionFunction(torch.autograd.Function):
    """out = Longformer attention of (q, k, v, q_g, k_g, v_g) under a prepared ``_Layout``.

    q, k, v: (B, H, N, D); q_g, k_g, v_g: (B, H, N, D) or all None (no global token).
    Saves the inputs, the output and the (B, H, N) fp32 lse; the backward recomputes P.
    """

    @staticmethod
    def forward(ctx, q, k, v, q_g, k_g, v_g, lay: _Layout):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        has_global_inputs = q_g is not None
        if has_global_inputs:
            q_g, k_g, v_g = q_g.contiguous(), k_g.contiguous(), v_g.contiguous()
        batch, heads, length, _ = q.shape
        # every row of out and lse is written by exactly one kernel (see the module docstring)
        out = torch.empty_like(q)
        lse = torch.empty(batch, heads, length, dtype=torch.float32, device=q.device)
        _launch_band_fwd(q, k, v, out, lse, lay)
        if lay.max_global > 0:
            _launch_global_rows_fwd(q_g, k_g, v_g, out, lse, lay)
        ctx.lay = lay
        ctx.has_global_inputs = has_global_inputs
        ctx.save_for_backward(q, k, v, q_g, k_g, v_g, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, q_g, k_g, v_g, out, lse = ctx.saved_tensors
        lay: _Layout = ctx.lay
        do = grad_out.to(q.dtype).contiguous()
        # delta_i = sum_j P_ij dP_ij = dO_i . O_i, in fp32 (one small reduction, left to torch)
        delta = (do.float() * out.float()).sum(dim=-1).contiguous()
        dq = torch.empty_like(q)
        dk = torch.empty_like(k)
        dv = torch.empty_like(v)
        _launch_band_bwd_dq(q, k, v, do, dq, lse, delta, lay)
        _launch_band_bwd_dkdv(q, k, v, do, dk, dv, lse, delta, lay)
        dq_g = dk_g = dv_g = None
        if ctx.has_global_inputs:
            # zeros: q_g is only read at global rows; k_g, v_g only when some row is global
            dq_g = torch.zeros_like(q_g)
            dk_g = torch.zeros_like(k_g)
            dv_g = torch.zeros_like(v_g)
        if lay.max_global > 0:
            _launch_cross_bwd_dkdv(q, k, v, do, dk, dv, lse, delta, lay, global_keys=True)
            _launch_cross_bwd_dkdv(q_g, k_g, v_g, do, dk_g, dv_g, lse, delta, lay,
                                   global_keys=False)
            _launch_global_rows_bwd_dq(q_g, k_g, v_g, do, dq_g, lse, delta, lay)
        return dq, dk, dv, dq_g, dk_g, dv_g, None


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
) -> Tensor:
    """Longformer attention with Triton kernels. Inputs (B, H, N, D); returns (B, H, N, D).

    Same signature and semantics as ``sliding_chunks_attention`` (see ``pattern.py``):
    q_g, k_g, v_g may be None when no token is global; any N; fp16, bf16 or fp32 inputs with
    fp32 softmax and accumulation; the output has the input dtype. Differentiable in all six
    inputs. Tensors must be on a CUDA device, or on the CPU with TRITON_INTERPRET=1 set before
    this module was imported.
    """
    is_global = check_inputs(q, k, v, q_g, k_g, v_g, masks)
    if q.dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"q, k, v must be one of {SUPPORTED_DTYPES}, got {q.dtype}")
    batch, heads, length, head_dim = q.shape
    if not 1 <= head_dim <= MAX_HEAD_DIM:
        raise ValueError(f"head dim D must be in [1, {MAX_HEAD_DIM}], got {head_dim}")
    if q.device.type != "cuda" and not _interpreting():
        raise ValueError(
            f"triton_longformer_attention needs CUDA tensors, got device {q.device}; on a CPU set "
            "TRITON_INTERPRET=1 before importing longformer_kernels (Triton's interpreter)")
    pattern.dilation_per_head(heads)  # raises ValueError on a wrong number of dilations
    if batch * heads > 65535:
        raise ValueError(f"B * H must be <= 65535 (CUDA grid axis 1), got {batch * heads}")
    out_shape = q.shape
    if length == 0 or batch == 0 or heads == 0:
        return q.new_zeros(out_shape)
    scale = default_scale(head_dim) if scale is None else float(scale)
    lay = _build_layout(q, pattern, masks, is_global, scale)
    return LongformerAttentionFunction.apply(q, k, v, q_g, k_g, v_g, lay)
