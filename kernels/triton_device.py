"""The Triton kernels of the Longformer attention, forward and backward (FlashAttention-2 style):
device code only, every @triton.jit function and the tl.constexpr globals they read. The host
side is ``triton_tiles.py`` (tiles, launch configurations) and ``triton_attention.py`` (layouts,
launchers, autograd).

The text of the jit functions is what ``longformer_tools.gpu.compile_table`` hashes (``_source_hash``)
to key the compile results committed in tests/kernels/triton_compile_results.json: editing any
of them (even whitespace) or a tl.constexpr global here compiles every kernel again.

Shape legend (the one of ``pattern.py``, whose docstring defines the semantics implemented here):
    B batch    H heads    N sequence length    D head dimension
    G          global tokens in the row that has the most of them
    q, k, v, out, dO and their gradients: (B, H, N, D), any strides with a unit last stride;
               row n of head (b, h) starts at element b * stride_b + h * stride_h + n * stride_n.
               One (stride_b, stride_h, stride_n) triple serves q, k, v, out, dO, dq, dk, dv
               (the "local family"), another q_g, k_g, v_g, dq_g, dk_g, dv_g (the "global
               family"); a tensor whose strides differ from its family's is copied to match.
               The self-attention module's permuted views of (N, B, H, D) projections, strides
               (H*D, D, B*H*D, 1), are used as they are, and out / grads keep that layout.
    kind:      (B, N) int8   LOCAL / GLOBAL / PAD for every position (padding wins over global)
    gidx:      (B, G) int64  positions of each batch row's global tokens, ascending; slots at and
               after gcount[b] are unused (0)  (``AttentionMasks.global_index``)
    gcount:    (B,) int64    number of global tokens of each batch row (``global_count``)
    dil:       (H,) int32    dilation of each head
    lse:       (B, H, N) fp32  log-sum-exp of each row's scaled scores, in log2 units
    delta:     (B, H, N) fp32  rowsum(dO * O), the softmax backward's correction term

Kernels. Every output row is written by exactly one program of one kernel, or by the band kernel
first and then overwritten by a kernel launched after it (no atomics, no races, deterministic):
    _delta_kernel             delta of every row, before the other backward kernels
    _band_fwd_kernel          out, lse of every row: band + global keys for LOCAL rows, zeros for
                              PAD rows and for GLOBAL rows (overwritten by the next kernel)
    _global_rows_fwd_kernel   the online-softmax state of GLOBAL rows, one program per chunk of
                              keys (q_g against the chunk's non-padding k_g, v_g), into fp32 parts
    _global_rows_combine_kernel  out, lse of GLOBAL rows from those parts, in chunk order (both
                              skipped under global_rows=False: those rows then stay zero)
    _band_bwd_dq_kernel       dq of every row (zero where the row is not LOCAL), and the band
                              bias's gradient (dS of each allowed band pair, written once)
    _band_bwd_dkdv_kernel     dk, dv of every non-GLOBAL row: contributions of the band
    _cross_bwd_dkdv_kernel    GLOBAL_KEYS=True:  parts of dk, dv of GLOBAL rows, one program per
                              chunk of local queries (global keys); GLOBAL_KEYS=False: dk_g, dv_g
                              of every row (global queries, all keys)
    _global_rows_bwd_dq_kernel  parts of dq_g of GLOBAL rows, one program per chunk of keys
    _sum_rows_kernel          dk, dv (then dq_g) of GLOBAL rows: the parts added in chunk order
                              (dq_g is zero elsewhere)
The global rows' work (all N keys or queries for a few rows) is split into chunks so that a
handful of global tokens still occupies the whole GPU; the parts are fp32 and are reduced by a
second kernel in a fixed order: no atomics, the same bits on every run.

Dilation: the "residue layout". Positions with the same residue r = n mod d form a subsequence
r, r + d, r + 2d, ... in which the dilated window is an ordinary window of w. The band kernels
walk an index t over these subsequences laid end to end (t = r * M + m, position m * d + r,
M = ceil(N / d)), so a head of dilation d costs exactly what an undilated head costs, key blocks
outside the band are skipped in t, and heads with different dilations share one launch. This is
the reshape trick of ``sliding_chunks.py`` done by index arithmetic on the loads: no copy of
q, k, v and no (d - 1) / d of wasted work, which masking ``(j - i) % d == 0`` inside a band of
width w * d would cost. For d = 1, t is the position and the residue is always 0. The band walk
(which tiles to visit: ``_band_range``; which entries of a tile are in the band:
``_band_allowed``; a tile's positions: ``_band_tile``; a key tile with its mask: ``_band_keys``)
is shared by the three band kernels, the global keys of local rows (``_global_keys``) by the
forward and dq kernels.

Dropout (``dropout.py``): the keep mask is recomputed from (seed, b, h, i, j) in every kernel
(``_row_hash``, ``_key_weights``), i and j being sequence positions, so forward and backward
agree without storing it. Where a tile's keys are consecutive positions (an undilated band,
the blocks of all positions) one hash serves four keys (``_consecutive_draws``); global keys
and dilated heads take one hash per entry (``_draws``). The softmax normaliser counts every allowed key; the kept
probabilities, scaled by 1 / (1 - p), multiply v. Under DROPOUT=False (a tl.constexpr) none of
that code is compiled.

Band bias (``pattern.py``, HAS_BIAS=True): a contiguous (B, H, N, W) tensor; the band kernels
read entry (i, c) of each allowed band pair (c from the t-space distance, ``_bias_ptrs``),
add it in fp32 to the score (as the accumulator of the q.k dot, ``_scores``) before the softmax
(forward) or the recomputation of P (backward); global keys and GLOBAL rows never read it. Its
gradient is dS, stored by the dq kernel, the one kernel in which each (i, j) band pair is
visited exactly once and by the program owning row i: no atomics. Under HAS_BIAS=False none of
that is compiled.

Numerics: q.k runs in tl.dot with its fp32 accumulator (fp16 products are exact in fp32, so
scores beyond fp16's 65504 stay finite) and is scaled in fp32; the softmax runs in fp32 in log2
units (qk_scale = scale * log2(e), exp2 being the hardware instruction). As in FlashAttention,
probabilities and dS are rounded to the input dtype before their matmuls with v / k / q / dO;
accumulators stay fp32. fp32 inputs use input_precision="ieee" (no tf32 rounding on GPUs).
"""
import triton
import triton.language as tl

from .dropout import DRAW_BITS, KEYS_PER_WORD, MIX_MUL_1, MIX_MUL_2

# Values of ``kind``. A global must be a tl.constexpr to be readable inside @triton.jit code.
LOCAL = tl.constexpr(0)
GLOBAL = tl.constexpr(1)
PAD = tl.constexpr(2)
# Running max of a row before it has seen a key: finite, so exp2(m_old - m_new) is 0 or 1 and
# never exp2(-inf - -inf) = NaN for a row whose keys are all masked so far.
NEG_BIG = tl.constexpr(-1.0e30)
# Width of the band kernels' global-key tiles: tasks usually mark a few global tokens (a CLS
# token, a question), which a BLOCK_N-wide tile (32 or 64 slots) would mostly leave masked. 16 is
# tl.dot's smallest width.
GLOBAL_KEY_TILE = tl.constexpr(16)
# The dropout hash's constants (dropout.py). Both are used as uint32 operands: 0x846CA68B does
# not fit an int32, and the multiplies must wrap modulo 2^32 (a uint32 multiply does).
_MUL_1 = tl.constexpr(MIX_MUL_1)
_MUL_2 = tl.constexpr(MIX_MUL_2)
_DRAW_BITS = tl.constexpr(DRAW_BITS)
_KEYS_PER_WORD = tl.constexpr(KEYS_PER_WORD)
_DRAW_MASK = tl.constexpr((1 << DRAW_BITS) - 1)
# The band bias is in natural units; the scores are in log2 units.
_LOG2E = tl.constexpr(1.4426950408889634)
# Arguments that change every call (a fresh seed per step): no specialisation on their values
# (Triton would otherwise compile one variant for 1, one for multiples of 16, one for the rest).
_PER_CALL = ["seed", "threshold"]


# --------------------------------------------------------------------------------------------
# Device helpers
# --------------------------------------------------------------------------------------------
@triton.jit
def _mix32(x):
    """The lowbias32 finaliser of dropout.py on uint32 (logical shifts, wrapping multiplies)."""
    x = x ^ (x >> 16)
    x = x * _MUL_1  # uint32 * int constant: uint32, wraps
    x = x ^ (x >> 15)
    x = x * _MUL_2  # (0x846CA68B is a uint32 constant)
    return x ^ (x >> 16)


@triton.jit
def _row_hash(seed, b, h, pos_q, DROPOUT: tl.constexpr):
    """uint32 hash of each query row: mix(mix(mix(seed ^ b) ^ h) ^ i), i = pos_q (dropout.py).
    Without dropout a placeholder the compiler drops (nothing reads it)."""
    rows = pos_q.to(tl.uint32)
    if DROPOUT:
        x = _mix32((b ^ seed).to(tl.uint32))
        x = _mix32(x ^ h.to(tl.uint32))
        rows = _mix32(x ^ rows)
    return rows


@triton.jit
def _draws(rows, pos_k):
    """8-bit draws of entries (dropout.py), ``rows`` (row hashes) and ``pos_k`` (key positions)
    broadcast against each other: byte j & 3 of mix(row ^ (j >> 2)). One hash per entry: for
    keys in any order (global keys, dilated heads)."""
    pos = pos_k.to(tl.uint32)
    word = _mix32(rows ^ (pos >> 2))
    return (word >> ((pos & (_KEYS_PER_WORD - 1)) * _DRAW_BITS)) & _DRAW_MASK


@triton.jit
def _consecutive_draws(rows, first, BLOCK_N: tl.constexpr):
    """(len(rows), BLOCK_N) draws of the rows against keys first .. first + BLOCK_N - 1, first
    a multiple of 4: one hash per four keys, its bytes interleaved back into key order
    (interleave(interleave(byte 0, byte 2), interleave(byte 1, byte 3)) puts byte k of word g
    at column 4 g + k)."""
    groups = (tl.arange(0, BLOCK_N // _KEYS_PER_WORD) + first // _KEYS_PER_WORD).to(tl.uint32)
    word = _mix32(rows[:, None] ^ groups[None, :])
    even = tl.interleave(word & _DRAW_MASK, (word >> 16) & _DRAW_MASK)
    odd = tl.interleave((word >> 8) & _DRAW_MASK, word >> 24)
    return tl.interleave(even, odd)


@triton.jit
def _key_weights(rows, pos_k, first, threshold, keep_scale, DROPOUT: tl.constexpr,
                 SCATTERED: tl.constexpr, KEYS_ON_ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    """fp32 tile of the dropout multipliers, keep_scale where kept and 0 where dropped, of the
    query rows' hashes ``rows`` (1-D) against the keys ``pos_k`` (1-D positions): (queries,
    keys), or (keys, queries) under KEYS_ON_ROWS (the dk/dv kernels' orientation).
    Unless SCATTERED, the keys are first .. first + BLOCK_N - 1 with first a multiple of 4 (an
    undilated band tile, a block of all positions), drawn one hash per four keys; SCATTERED
    keys (global tokens, a dilated band) one hash per entry. Without DROPOUT a placeholder
    nothing reads."""
    weights = keep_scale
    if DROPOUT:
        if not SCATTERED:
            weights = tl.where(_consecutive_draws(rows, first, BLOCK_N) >= threshold, keep_scale, 0.0)
            if KEYS_ON_ROWS:
                weights = tl.trans(weights)
        else:
            if KEYS_ON_ROWS:
                draws = _draws(rows[None, :], pos_k[:, None])
            else:
                draws = _draws(rows[:, None], pos_k[None, :])
            weights = tl.where(draws >= threshold, keep_scale, 0.0)  # uint32 compare
    return weights


@triton.jit
def _head(H, N, DIL):
    """(b, h) of this program (grid axis 1 = B * H) and the t-space of the head's dilation."""
    bh = tl.program_id(1)
    b = bh // H
    h = bh - b * H
    dil = tl.load(DIL + h)
    M = tl.cdiv(N, dil)
    return b, h, dil, M, M * dil  # T = M * d >= N when d does not divide N


@triton.jit
def _band_tile(offs_t, M, dil, T, N, KIND_ROW, DILATED: tl.constexpr):
    """Positions of t-space indices ``offs_t``: residue, position, in range, kind (PAD beyond).
    Residue r holds positions r, r + d, r + 2d, ... Without DILATED (every head of the launch
    has d = 1) t is the position and the residue 0, and none of that arithmetic is compiled."""
    if DILATED:
        r = offs_t // M
        pos = (offs_t - r * M) * dil + r
        ok = (offs_t < T) & (pos < N)
    else:
        r = tl.zeros_like(offs_t)
        pos = offs_t
        ok = offs_t < N
    return r, pos, ok, tl.load(KIND_ROW + pos, mask=ok, other=PAD)


@triton.jit
def _band_range(first, last, M, window, CAUSAL: tl.constexpr, FIND_KEYS: tl.constexpr,
                BLOCK: tl.constexpr):
    """[start, end) of the t-space tiles of size BLOCK the band reaches from the block of
    indices [first, last]: within ``window`` and in the residues the block touches. FIND_KEYS:
    the block holds queries, the range keys (causal: keys at or before the query); else the
    block holds keys, the range queries (causal: queries at or after the key)."""
    lo = tl.maximum(first - window, (first // M) * M)
    hi = tl.minimum(last + window, (last // M) * M + M - 1)
    if CAUSAL:
        if FIND_KEYS:
            hi = last
        else:
            lo = first
    return (lo // BLOCK) * BLOCK, hi + 1


@triton.jit
def _band_allowed(t_q, r_q, t_k, r_k, window, CAUSAL: tl.constexpr):
    """True where query index t_q sees key index t_k through the band (broadcast inputs, any
    orientation): same residue and -w <= t_q - t_k <= w (causal: 0 <= t_q - t_k <= w)."""
    diff = t_q - t_k
    ok = (r_q == r_k) & (diff <= window)
    if CAUSAL:
        ok = ok & (diff >= 0)
    else:
        ok = ok & (diff >= -window)
    return ok


@triton.jit
def _global_tile(GIDX_ROW, start, count, BLOCK: tl.constexpr):
    """Slots [start, start + BLOCK) of a row's global tokens: (position, slot in use)."""
    offs = start + tl.arange(0, BLOCK)
    ok = offs < count
    return tl.load(GIDX_ROW + offs, mask=ok, other=0).to(tl.int32), ok


@triton.jit
def _slot_block(GIDX, GCOUNT, H, G, BLOCK: tl.constexpr):
    """The (batch x head) and block of global slots of a program of grid (slot blocks, B * H):
    bh, b, h, the row's global count, the first slot, and the slots' (position, in use)."""
    bh = tl.program_id(1)
    b = bh // H
    h = bh - b * H
    count = tl.load(GCOUNT + b).to(tl.int32)
    g0 = tl.program_id(0) * BLOCK
    pos, ok = _global_tile(GIDX + b * G, g0, count, BLOCK)
    return bh, b, h, count, g0, pos, ok


@triton.jit
def _load_rows(base, pos, ok, offs_d, D, stride_n):
    """(len(pos), BLOCK_D) tile of rows ``pos`` of an (N, D) matrix with row stride stride_n;
    zeros where not ``ok`` or beyond D (D is padded to a power of two >= 16 for tl.dot).
    Offsets in int64: pos * stride_n can pass 2^31 for a permuted view of a large tensor."""
    return tl.load(base + pos.to(tl.int64)[:, None] * stride_n + offs_d[None, :],
                   mask=ok[:, None] & (offs_d[None, :] < D), other=0.0)


@triton.jit
def _store_rows(base, pos, ok, offs_d, D, stride_n, tile):
    tl.store(base + pos.to(tl.int64)[:, None] * stride_n + offs_d[None, :],
             tile.to(base.dtype.element_ty), mask=ok[:, None] & (offs_d[None, :] < D))


@triton.jit
def _band_keys(start, M, dil, T, N, KIND_ROW, K, V, offs_d, D, s_n, DILATED: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """Key tile [start, start + BLOCK_N) of the band, in t-space: k, v, the keys' residues,
    positions and kinds (PAD beyond the sequence)."""
    offs_n = start + tl.arange(0, BLOCK_N)
    r_k, pos_k, k_in, kind_k = _band_tile(offs_n, M, dil, T, N, KIND_ROW, DILATED)
    k = _load_rows(K, pos_k, k_in, offs_d, D, s_n)
    v = _load_rows(V, pos_k, k_in, offs_d, D, s_n)
    return k, v, r_k, pos_k, kind_k


@triton.jit
def _band_mask(t_q, r_q, kind_q, t_k, r_k, kind_k, window, CAUSAL: tl.constexpr):
    """Allowed entries of a band tile (broadcast inputs, any orientation): in the band and both
    ends LOCAL. Global keys are left out of the band: they are attended once, as global keys
    (``_global_keys``); GLOBAL and PAD query rows get no band keys."""
    return (_band_allowed(t_q, r_q, t_k, r_k, window, CAUSAL)
            & (kind_q == LOCAL) & (kind_k == LOCAL))


@triton.jit
def _all_local(kind):
    """True (a scalar) when every entry of a 1-D tile of kinds is LOCAL (LOCAL is the least kind)."""
    return tl.max(kind, 0) == LOCAL


@triton.jit
def _no_local(kind):
    """True (a scalar) when no entry of a 1-D tile of kinds is LOCAL."""
    return tl.min(kind, 0) != LOCAL


@triton.jit
def _any_local(kind):
    """True (a scalar) when some entry of a 1-D tile of kinds is LOCAL: a tile without one adds
    nothing to a band walk (every entry masked), so it is skipped."""
    return tl.min(kind, 0) == LOCAL


@triton.jit
def _interior_range(first, last, lo, hi, M, window, all_local, CAUSAL: tl.constexpr,
                    FIND_KEYS: tl.constexpr, BLOCK: tl.constexpr):
    """[ilo, ihi): the tiles of size BLOCK of the band walk [lo, hi) (``_band_range``; lo a
    multiple of BLOCK) whose every index x pairs with every index of the block [first, last]
    inside the band: last - w <= x <= first + w (causal, FIND_KEYS: x <= first; causal keys'
    queries: x >= last), all in the block's residue. Empty (ilo = ihi = lo) unless
    ``all_local`` (a scalar: every row of the block is LOCAL) and the block lies in one residue.
    Such tiles need no band mask, only their own entries' kinds. The forward walks [lo, ilo)
    and [ihi, hi) with the full mask and [ilo, ihi) masked by the keys' kinds alone, three
    loops with no branch on the tile's class inside them; the backward kernels walk one loop
    and run a tile of the range whose entries are all LOCAL with no mask at all, any other with
    the full mask (each measured the faster on an H200). Scalar arithmetic once per block."""
    residue = first // M
    x_lo = tl.maximum(tl.maximum(last - window, residue * M), lo)
    x_hi = tl.minimum(first + window, residue * M + M - 1)
    if CAUSAL:
        if FIND_KEYS:
            x_hi = tl.minimum(x_hi, first)
        else:
            x_lo = tl.maximum(x_lo, last)
    ilo = lo + (x_lo - lo + BLOCK - 1) // BLOCK * BLOCK  # first tile starting at or after x_lo
    ihi = lo + tl.maximum(x_hi + 1 - lo, 0) // BLOCK * BLOCK  # after the last tile ending by x_hi
    ok = all_local & (last // M == residue) & (ilo < ihi)
    return tl.where(ok, ilo, lo), tl.where(ok, ihi, lo)


@triton.jit
def _bias_ptrs(BIAS_ROWS, pos_q, t_q, t_k, bias_w, CAUSAL: tl.constexpr):
    """Pointers to the entries of one (b, h)'s (N, W) band bias (or its gradient) for queries
    ``pos_q`` (t-space ``t_q``) and keys ``t_k``: broadcast inputs, any orientation, meaningful
    where the band allows the pair. Same residue, so t_q - t_k = (i - j) / d: causal column
    c = (i - j) / d, two-sided c = w + (j - i) / d with w = (W - 1) / 2 the pattern's own
    (unclamped) window. BIAS_ROWS is the (b, h)'s first entry (an int64 offset); within it
    int32 offsets (N * W < 2^31, checked by the launcher), which spilled fewer registers than
    int64 ones when compiled for sm_80. Built where used, not kept across the dots."""
    if CAUSAL:
        col = t_q - t_k
    else:
        col = (bias_w - 1) // 2 + (t_k - t_q)
    return BIAS_ROWS + (pos_q * bias_w + col)


@triton.jit
def _scores(a, b_t, qk_scale, BIAS_ROWS, pos_b, t_q, t_k, bias_w, allowed, HAS_BIAS: tl.constexpr,
            CAUSAL: tl.constexpr, MASKED: tl.constexpr, PRECISION: tl.constexpr):
    """The log2-unit scores (a @ b_t^T) * qk_scale of a tile, fp32, plus the band bias of
    (pos_b, t_q, t_k) (``_bias_ptrs``) under HAS_BIAS. The bias enters as tl.dot's accumulator,
    bias / scale, so that (a.b + bias / scale) * scale * log2(e) is the biased score: loaded
    straight into the dot's layout this way, the forward kernel compiled for sm_86 (fp16,
    D = 32, 64 x 64) spilled 28 to 164 bytes a thread where adding the loaded tile to the
    dot's result spilled 532 to 840 and needed 8 KiB more shared memory. Entries that are not
    ``allowed`` (the tile's mask, any shape that broadcasts) are never read: what lies there
    (even NaN) cannot matter. Without MASKED (a backward kernel's interior tile of LOCAL keys)
    every entry is an allowed band pair and ``allowed`` is not read."""
    if HAS_BIAS:
        ptrs = _bias_ptrs(BIAS_ROWS, pos_b, t_q, t_k, bias_w, CAUSAL)
        if MASKED:
            bias = tl.load(ptrs, mask=allowed, other=0.0)
        else:
            bias = tl.load(ptrs)
        inverse_scale = _LOG2E / qk_scale  # 1 / scale
        s = tl.dot(a, tl.trans(b_t), bias.to(tl.float32) * inverse_scale, input_precision=PRECISION)
    else:
        s = tl.dot(a, tl.trans(b_t), input_precision=PRECISION)
    return s * qk_scale


@triton.jit
def _global_keys(GIDX_ROW, start, count, q_ok, K, V, offs_d, D, s_n, BLOCK_N: tl.constexpr):
    """Global-key tile (slots [start, start + BLOCK_N)) seen by LOCAL queries with the local
    projections: k, v, key positions, allowed mask."""
    pos_k, g_ok = _global_tile(GIDX_ROW, start, count, BLOCK_N)
    k = _load_rows(K, pos_k, g_ok, offs_d, D, s_n)
    v = _load_rows(V, pos_k, g_ok, offs_d, D, s_n)
    return k, v, pos_k, q_ok[:, None] & g_ok[None, :]


@triton.jit
def _fwd_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, weights, BIAS_ROWS, pos_b, t_q, t_k,
              bias_w, DROPOUT: tl.constexpr, HAS_BIAS: tl.constexpr,
              CAUSAL: tl.constexpr, PRECISION: tl.constexpr):
    """One online-softmax step over a key tile; all state in fp32, log2 units. ``weights``:
    the tile's dropout multipliers (``_key_weights``). ``allowed``: the tile's mask, (BLOCK_M,
    BLOCK_N) or a (1, BLOCK_N) row of the keys' kinds for an interior tile (``_fwd_band_tile``).
    Under HAS_BIAS the band bias of (pos_b, t_q, t_k) is added to the scores (``_scores``)."""
    s = _scores(q, k, qk_scale, BIAS_ROWS, pos_b, t_q, t_k, bias_w, allowed, HAS_BIAS, CAUSAL,
                True, PRECISION)
    s = tl.where(allowed, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, 1))
    alpha = tl.math.exp2(m_i - m_new)
    p = tl.math.exp2(s - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)  # the normaliser counts dropped keys too
    if DROPOUT:
        p = p * weights
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
def _dq_step(q, do, k, v, lse, delta, allowed, dq, qk_scale, weights, BIAS_ROWS, DBIAS_ROWS,
             pos_b, t_q, t_k, bias_w, DROPOUT: tl.constexpr,
             HAS_BIAS: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr,
             PRECISION: tl.constexpr):
    """dq += dS k for one key tile, with P recomputed from the saved lse. With dropout
    dS = P * (dP' * keep * keep_scale - delta), dP' = dO v^T. Under HAS_BIAS, P includes the
    band bias of (pos_b, t_q, t_k), and dS, the gradient of the natural-unit score and so the
    bias's own, is stored to DBIAS_ROWS at the allowed entries. ``allowed`` is read only under
    MASKED (``_scores``)."""
    s = _scores(q, k, qk_scale, BIAS_ROWS, pos_b, t_q, t_k, bias_w, allowed, HAS_BIAS, CAUSAL,
                MASKED, PRECISION)
    if MASKED:
        s = tl.where(allowed, s, float("-inf"))
    p = tl.math.exp2(s - lse[:, None])
    dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
    if DROPOUT:
        dp = dp * weights
    ds = p * (dp - delta[:, None])
    if HAS_BIAS:  # d(score)/d(bias) = 1
        ptrs = _bias_ptrs(DBIAS_ROWS, pos_b, t_q, t_k, bias_w, CAUSAL)
        if MASKED:
            tl.store(ptrs, ds.to(DBIAS_ROWS.dtype.element_ty), mask=allowed)
        else:
            tl.store(ptrs, ds.to(DBIAS_ROWS.dtype.element_ty))
    return dq + tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)


@triton.jit
def _dkdv_step(k, v, q, do, lse, delta, allowed_t, dk, dv, qk_scale, weights, BIAS_ROWS, pos_b,
               t_q, t_k, bias_w, DROPOUT: tl.constexpr,
               HAS_BIAS: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr,
               PRECISION: tl.constexpr):
    """dk += dS^T q and dv += (P * keep * keep_scale)^T dO for one query tile, computed
    transposed (keys on rows, as ``weights``, (BLOCK_N, BLOCK_M)) so the key tile's
    accumulators never need a transpose. Under HAS_BIAS P includes the band bias
    of (pos_b, t_q, t_k), given transposed as well. ``allowed_t`` is read only under MASKED."""
    s_t = _scores(k, q, qk_scale, BIAS_ROWS, pos_b, t_q, t_k, bias_w, allowed_t, HAS_BIAS, CAUSAL,
                  MASKED, PRECISION)
    if MASKED:
        s_t = tl.where(allowed_t, s_t, float("-inf"))
    p_t = tl.math.exp2(s_t - lse[None, :])
    dp_t = tl.dot(v, tl.trans(do), input_precision=PRECISION)
    if DROPOUT:
        dv = dv + tl.dot((p_t * weights).to(do.dtype), do, input_precision=PRECISION)
        dp_t = dp_t * weights
    else:
        dv = dv + tl.dot(p_t.to(do.dtype), do, input_precision=PRECISION)
    ds_t = p_t * (dp_t - delta[None, :])
    dk = dk + tl.dot(ds_t.to(q.dtype), q, input_precision=PRECISION)
    return dk, dv


@triton.jit
def _fwd_band_tile(start, q, m_i, l_i, acc, rows, offs_m, r_q, pos_q, kind_q, M, dil, T, N, KIND_ROW,
                   K, V, offs_d, D, s_n, window, qk_scale, threshold, keep_scale, bias_rows, bias_w,
                   CAUSAL: tl.constexpr, DROPOUT: tl.constexpr, HAS_BIAS: tl.constexpr,
                   DILATED: tl.constexpr, INTERIOR: tl.constexpr, BLOCK_N: tl.constexpr,
                   PRECISION: tl.constexpr):
    """The forward's step over the band's key tile [start, start + BLOCK_N). INTERIOR (a tile
    of ``_interior_range``): every pair is in the band and only the keys' kinds mask (global
    keys are attended as such, later; padding never); else the full band mask, and a tile
    without a LOCAL key is skipped (it would leave the online softmax as it is)."""
    k, v, r_k, pos_k, kind_k = _band_keys(start, M, dil, T, N, KIND_ROW, K, V, offs_d, D, s_n,
                                          DILATED, BLOCK_N)
    offs_n = start + tl.arange(0, BLOCK_N)
    if INTERIOR:
        weights = _key_weights(rows, pos_k, start, threshold, keep_scale, DROPOUT, DILATED, False,
                               BLOCK_N)
        m_i, l_i, acc = _fwd_step(q, k, v, (kind_k == LOCAL)[None, :], m_i, l_i, acc, qk_scale,
                                  weights, bias_rows, pos_q[:, None], offs_m[:, None],
                                  offs_n[None, :], bias_w, DROPOUT, HAS_BIAS, CAUSAL, PRECISION)
    else:
        if _any_local(kind_k):
            weights = _key_weights(rows, pos_k, start, threshold, keep_scale, DROPOUT, DILATED,
                                   False, BLOCK_N)
            allowed = _band_mask(offs_m[:, None], r_q[:, None], kind_q[:, None], offs_n[None, :],
                                 r_k[None, :], kind_k[None, :], window, CAUSAL)
            m_i, l_i, acc = _fwd_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, weights,
                                      bias_rows, pos_q[:, None], offs_m[:, None], offs_n[None, :],
                                      bias_w, DROPOUT, HAS_BIAS, CAUSAL, PRECISION)
    return m_i, l_i, acc


# --------------------------------------------------------------------------------------------
# Forward kernels
# --------------------------------------------------------------------------------------------
@triton.jit(do_not_specialize=_PER_CALL)
def _band_fwd_kernel(Q, K, V, O, LSE, KIND, GIDX, GCOUNT, DIL, BIAS,
                     s_b, s_h, s_n, H, N, D, G, window, bias_w, qk_scale, seed, threshold,
                     keep_scale, CAUSAL: tl.constexpr, DROPOUT: tl.constexpr,
                     HAS_BIAS: tl.constexpr, DILATED: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Grid (query blocks in t-space, B * H). LOCAL rows: band keys then global keys.
    BIAS: the (B, H, N, W) contiguous band bias, W = bias_w (read only under HAS_BIAS)."""
    b, h, dil, M, T = _head(H, N, DIL)
    t0 = tl.program_id(0) * BLOCK_M
    if t0 >= T:  # heads with a smaller T need fewer blocks than the grid has
        return
    mat = b.to(tl.int64) * s_b + h.to(tl.int64) * s_h  # this (b, h)'s (N, D) matrices
    vec = (b * H + h).to(tl.int64) * N  # this (b, h)'s lse row

    offs_d = tl.arange(0, BLOCK_D)
    offs_m = t0 + tl.arange(0, BLOCK_M)
    r_q, pos_q, q_in, kind_q = _band_tile(offs_m, M, dil, T, N, KIND + b * N, DILATED)
    if _no_local(kind_q):  # PAD / GLOBAL rows only: zeros (GLOBAL rows come later)
        _store_rows(O + mat, pos_q, q_in, offs_d, D, s_n, tl.zeros([BLOCK_M, BLOCK_D], tl.float32))
        tl.store(LSE + vec + pos_q, tl.zeros([BLOCK_M], tl.float32), mask=q_in)
        return
    q_ok = kind_q == LOCAL
    q = _load_rows(Q + mat, pos_q, q_in, offs_d, D, s_n)
    rows = _row_hash(seed, b, h, pos_q, DROPOUT)
    bias_rows = BIAS + vec * bias_w  # this (b, h)'s (N, W) band bias

    m_i = tl.full([BLOCK_M], NEG_BIG, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    # Band keys: only the key tiles meeting the band of the block's queries, edge tiles before
    # and after the interior ones (``_interior_range``), in key order.
    lo, hi = _band_range(t0, tl.minimum(t0 + BLOCK_M, T) - 1, M, window, CAUSAL, True, BLOCK_N)
    ilo, ihi = _interior_range(t0, t0 + BLOCK_M - 1, lo, hi, M, window, _all_local(kind_q), CAUSAL,
                               True, BLOCK_N)
    for start in tl.range(lo, ilo, BLOCK_N):
        m_i, l_i, acc = _fwd_band_tile(start, q, m_i, l_i, acc, rows, offs_m, r_q, pos_q, kind_q, M, dil,
                                       T, N, KIND + b * N, K + mat, V + mat, offs_d, D, s_n, window,
                                       qk_scale, threshold, keep_scale, bias_rows, bias_w, CAUSAL,
                                       DROPOUT, HAS_BIAS, DILATED, False, BLOCK_N, PRECISION)
    for start in tl.range(ilo, ihi, BLOCK_N):
        m_i, l_i, acc = _fwd_band_tile(start, q, m_i, l_i, acc, rows, offs_m, r_q, pos_q, kind_q, M, dil,
                                       T, N, KIND + b * N, K + mat, V + mat, offs_d, D, s_n, window,
                                       qk_scale, threshold, keep_scale, bias_rows, bias_w, CAUSAL,
                                       DROPOUT, HAS_BIAS, DILATED, True, BLOCK_N, PRECISION)
    for start in tl.range(ihi, hi, BLOCK_N):
        m_i, l_i, acc = _fwd_band_tile(start, q, m_i, l_i, acc, rows, offs_m, r_q, pos_q, kind_q, M, dil,
                                       T, N, KIND + b * N, K + mat, V + mat, offs_d, D, s_n, window,
                                       qk_scale, threshold, keep_scale, bias_rows, bias_w, CAUSAL,
                                       DROPOUT, HAS_BIAS, DILATED, False, BLOCK_N, PRECISION)

    # Global keys (local projections): every LOCAL query attends every global token, unbiased.
    # Tiles of GLOBAL_KEY_TILE slots, not BLOCK_N: most rows have a few global tokens.
    count = tl.load(GCOUNT + b).to(tl.int32)
    for start in tl.range(0, count, GLOBAL_KEY_TILE):
        k, v, pos_k, allowed = _global_keys(GIDX + b * G, start, count, q_ok, K + mat, V + mat,
                                            offs_d, D, s_n, GLOBAL_KEY_TILE)
        weights = _key_weights(rows, pos_k, start, threshold, keep_scale, DROPOUT, True, False,
                               GLOBAL_KEY_TILE)
        m_i, l_i, acc = _fwd_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, weights, bias_rows,
                                  0, 0, 0, 0, DROPOUT, False, CAUSAL, PRECISION)

    out, lse = _fwd_finish(m_i, l_i, acc)
    # Every row: PAD and GLOBAL rows get the zeros computed here; GLOBAL rows are overwritten
    # by _global_rows_fwd_kernel, launched after this one, when the caller wants them.
    _store_rows(O + mat, pos_q, q_in, offs_d, D, s_n, out)
    tl.store(LSE + vec + pos_q, lse, mask=q_in)


@triton.jit(do_not_specialize=_PER_CALL)
def _global_rows_fwd_kernel(QG, KG, VG, PM, PL, PACC, KIND, GIDX, GCOUNT,
                            g_b, g_h, g_n, H, N, D, G, GP, SPLITS, CHUNK, qk_scale,
                            seed, threshold, keep_scale,
                            DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Grid (blocks of global slots x SPLITS, B * H). GLOBAL rows: q_g against the non-padding
    keys of one chunk of CHUNK positions (a multiple of BLOCK_N); the chunks of a row are
    separate programs, so a few global rows still fill the GPU. Writes the chunk's online-
    softmax state, unnormalised: PM, PL (SPLITS, B * H, GP) and PACC (SPLITS, B * H, GP, D),
    fp32, at the row's slot; ``_global_rows_combine_kernel`` merges the chunks in order.
    (g_b, g_h, g_n): strides of the global family."""
    bh = tl.program_id(1)
    b = bh // H
    h = bh - b * H
    count = tl.load(GCOUNT + b).to(tl.int32)
    slot_block = tl.program_id(0) // SPLITS
    chunk = tl.program_id(0) - slot_block * SPLITS
    g0 = slot_block * BLOCK_M
    if g0 >= count:
        return
    mat = b.to(tl.int64) * g_b + h.to(tl.int64) * g_h

    offs_d = tl.arange(0, BLOCK_D)
    pos_q, g_ok = _global_tile(GIDX + b * G, g0, count, BLOCK_M)
    q = _load_rows(QG + mat, pos_q, g_ok, offs_d, D, g_n)
    rows = _row_hash(seed, b, h, pos_q, DROPOUT)

    m_i = tl.full([BLOCK_M], NEG_BIG, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    first = chunk * CHUNK
    for start in tl.range(first, tl.minimum(first + CHUNK, N), BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        k_in = offs_n < N
        kind_k = tl.load(KIND + b * N + offs_n, mask=k_in, other=PAD)
        k = _load_rows(KG + mat, offs_n, k_in, offs_d, D, g_n)
        v = _load_rows(VG + mat, offs_n, k_in, offs_d, D, g_n)
        allowed = g_ok[:, None] & (kind_k != PAD)[None, :]
        weights = _key_weights(rows, offs_n, start, threshold, keep_scale, DROPOUT, False, False,
                               BLOCK_N)
        m_i, l_i, acc = _fwd_step(q, k, v, allowed, m_i, l_i, acc, qk_scale, weights, KG,
                                  0, 0, 0, 0, DROPOUT, False, False, PRECISION)

    slots = g0 + tl.arange(0, BLOCK_M)
    part = (chunk * tl.num_programs(1) + bh).to(tl.int64) * GP
    tl.store(PM + part + slots, m_i, mask=g_ok)
    tl.store(PL + part + slots, l_i, mask=g_ok)
    _store_rows(PACC + part * D, slots, g_ok, offs_d, D, D, acc)


@triton.jit
def _global_rows_combine_kernel(PM, PL, PACC, O, LSE, GIDX, GCOUNT, s_b, s_h, s_n, H, N, D, G, GP,
                                SPLITS, BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """Grid (blocks of global slots, B * H). out and lse of GLOBAL rows from the SPLITS chunk
    states of ``_global_rows_fwd_kernel``, merged in chunk order (deterministic): the online
    softmax's rescaling, applied once per chunk. (s_b, s_h, s_n): strides of out."""
    bh, b, h, count, g0, pos_q, g_ok = _slot_block(GIDX, GCOUNT, H, G, BLOCK_M)
    if g0 >= count:
        return
    offs_d = tl.arange(0, BLOCK_D)
    slots = g0 + tl.arange(0, BLOCK_M)
    m_i = tl.full([BLOCK_M], NEG_BIG, tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for chunk in tl.range(0, SPLITS):
        part = (chunk * tl.num_programs(1) + bh).to(tl.int64) * GP
        m_c = tl.load(PM + part + slots, mask=g_ok, other=NEG_BIG)
        l_c = tl.load(PL + part + slots, mask=g_ok, other=0.0)
        acc_c = _load_rows(PACC + part * D, slots, g_ok, offs_d, D, D)
        m_new = tl.maximum(m_i, m_c)
        alpha = tl.math.exp2(m_i - m_new)
        beta = tl.math.exp2(m_c - m_new)
        l_i = l_i * alpha + l_c * beta
        acc = acc * alpha[:, None] + acc_c * beta[:, None]
        m_i = m_new
    out, lse = _fwd_finish(m_i, l_i, acc)
    _store_rows(O + b.to(tl.int64) * s_b + h.to(tl.int64) * s_h, pos_q, g_ok, offs_d, D, s_n, out)
    tl.store(LSE + bh.to(tl.int64) * N + pos_q, lse, mask=g_ok)


# --------------------------------------------------------------------------------------------
# Backward kernels (P recomputed from lse; delta = rowsum(dO * O) by _delta_kernel first)
# --------------------------------------------------------------------------------------------
@triton.jit
def _delta_kernel(O, DO, DELTA, s_b, s_h, s_n, H, N, D, BLOCK_M: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    """Grid (row blocks, B * H). delta = rowsum(dO * O) in fp32, (B, H, N) contiguous: read
    once from O and dO in their own dtype and layout (one stride triple: dO is given O's)."""
    bh = tl.program_id(1)
    b = bh // H
    h = bh - b * H
    mat = b.to(tl.int64) * s_b + h.to(tl.int64) * s_h
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    ok = offs_m < N
    out = _load_rows(O + mat, offs_m, ok, offs_d, D, s_n).to(tl.float32)
    grad = _load_rows(DO + mat, offs_m, ok, offs_d, D, s_n).to(tl.float32)
    tl.store(DELTA + bh.to(tl.int64) * N + offs_m, tl.sum(out * grad, 1), mask=ok)


@triton.jit(do_not_specialize=_PER_CALL)
def _band_bwd_dq_kernel(Q, K, V, DO, DQ, LSE, DELTA, KIND, GIDX, GCOUNT, DIL, BIAS, DBIAS,
                        s_b, s_h, s_n, H, N, D, G, window, bias_w, qk_scale, sm_scale,
                        seed, threshold, keep_scale,
                        CAUSAL: tl.constexpr, DROPOUT: tl.constexpr, HAS_BIAS: tl.constexpr,
                        DILATED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Grid as _band_fwd_kernel. dq of every row: band keys then global keys. Under HAS_BIAS
    also the band bias's gradient DBIAS (B, H, N, W), contiguous, zero-filled by the caller:
    dS of each allowed band pair, which this program alone visits (its queries' rows), once."""
    b, h, dil, M, T = _head(H, N, DIL)
    t0 = tl.program_id(0) * BLOCK_M
    if t0 >= T:
        return
    mat = b.to(tl.int64) * s_b + h.to(tl.int64) * s_h
    vec = (b * H + h).to(tl.int64) * N

    offs_d = tl.arange(0, BLOCK_D)
    offs_m = t0 + tl.arange(0, BLOCK_M)
    r_q, pos_q, q_in, kind_q = _band_tile(offs_m, M, dil, T, N, KIND + b * N, DILATED)
    if _no_local(kind_q):  # PAD / GLOBAL rows only: their dq here is zero
        _store_rows(DQ + mat, pos_q, q_in, offs_d, D, s_n, tl.zeros([BLOCK_M, BLOCK_D], tl.float32))
        return
    q_ok = kind_q == LOCAL
    q = _load_rows(Q + mat, pos_q, q_in, offs_d, D, s_n)
    do = _load_rows(DO + mat, pos_q, q_in, offs_d, D, s_n)
    lse = tl.load(LSE + vec + pos_q, mask=q_in, other=0.0)
    delta = tl.load(DELTA + vec + pos_q, mask=q_in, other=0.0)
    rows = _row_hash(seed, b, h, pos_q, DROPOUT)
    bias_rows = BIAS + vec * bias_w  # this (b, h)'s (N, W) band bias and its gradient
    dbias_rows = DBIAS + vec * bias_w
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    # One loop that picks each tile's class, not the forward's three loops: three measured 3-10%
    # slower forward+backward on an H200 (bf16, N = 16,384, w = 256). An interior tile whose
    # keys are all LOCAL runs unmasked, any other the full mask; tiles without a LOCAL key skip.
    lo, hi = _band_range(t0, tl.minimum(t0 + BLOCK_M, T) - 1, M, window, CAUSAL, True, BLOCK_N)
    ilo, ihi = _interior_range(t0, t0 + BLOCK_M - 1, lo, hi, M, window, _all_local(kind_q), CAUSAL,
                               True, BLOCK_N)
    for start in tl.range(lo, hi, BLOCK_N):
        k, v, r_k, pos_k, kind_k = _band_keys(start, M, dil, T, N, KIND + b * N, K + mat, V + mat,
                                              offs_d, D, s_n, DILATED, BLOCK_N)
        offs_n = start + tl.arange(0, BLOCK_N)
        if _any_local(kind_k):
            weights = _key_weights(rows, pos_k, start, threshold, keep_scale, DROPOUT, DILATED,
                                   False, BLOCK_N)
            if (start >= ilo) & (start < ihi) & _all_local(kind_k):
                dq = _dq_step(q, do, k, v, lse, delta, 0, dq, qk_scale, weights, bias_rows,
                              dbias_rows, pos_q[:, None], offs_m[:, None], offs_n[None, :], bias_w,
                              DROPOUT, HAS_BIAS, CAUSAL, False, PRECISION)
            else:
                allowed = _band_mask(offs_m[:, None], r_q[:, None], kind_q[:, None],
                                     offs_n[None, :], r_k[None, :], kind_k[None, :], window, CAUSAL)
                dq = _dq_step(q, do, k, v, lse, delta, allowed, dq, qk_scale, weights, bias_rows,
                              dbias_rows, pos_q[:, None], offs_m[:, None], offs_n[None, :], bias_w,
                              DROPOUT, HAS_BIAS, CAUSAL, True, PRECISION)

    count = tl.load(GCOUNT + b).to(tl.int32)  # global keys: narrow tiles, as in the forward
    for start in tl.range(0, count, GLOBAL_KEY_TILE):
        k, v, pos_k, allowed = _global_keys(GIDX + b * G, start, count, q_ok, K + mat, V + mat,
                                            offs_d, D, s_n, GLOBAL_KEY_TILE)
        weights = _key_weights(rows, pos_k, start, threshold, keep_scale, DROPOUT, True, False,
                               GLOBAL_KEY_TILE)
        dq = _dq_step(q, do, k, v, lse, delta, allowed, dq, qk_scale, weights, bias_rows,
                      dbias_rows, 0, 0, 0, 0, DROPOUT, False, CAUSAL, True, PRECISION)

    # d(scores)/dq = scale * k: the scale (natural units) is applied once, here.
    _store_rows(DQ + mat, pos_q, q_in, offs_d, D, s_n, dq * sm_scale)


@triton.jit(do_not_specialize=_PER_CALL)
def _band_bwd_dkdv_kernel(Q, K, V, DO, DK, DV, LSE, DELTA, KIND, DIL, BIAS,
                          s_b, s_h, s_n, H, N, D, window, bias_w, qk_scale, sm_scale,
                          seed, threshold, keep_scale,
                          CAUSAL: tl.constexpr, DROPOUT: tl.constexpr, HAS_BIAS: tl.constexpr,
                          DILATED: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_D: tl.constexpr, PRECISION: tl.constexpr):
    """Grid (key blocks in t-space, B * H). dk, dv from the band's LOCAL queries (P recomputed
    with the band bias under HAS_BIAS)."""
    b, h, dil, M, T = _head(H, N, DIL)
    s0 = tl.program_id(0) * BLOCK_N
    if s0 >= T:
        return
    mat = b.to(tl.int64) * s_b + h.to(tl.int64) * s_h
    vec = (b * H + h).to(tl.int64) * N

    offs_d = tl.arange(0, BLOCK_D)
    offs_n = s0 + tl.arange(0, BLOCK_N)
    r_k, pos_k, k_in, kind_k = _band_tile(offs_n, M, dil, T, N, KIND + b * N, DILATED)
    # GLOBAL key rows belong to _cross_bwd_dkdv_kernel (GLOBAL_KEYS=True); PAD rows get zeros.
    mine = k_in & (kind_k != GLOBAL)
    if _no_local(kind_k):  # no band key here: zeros
        zeros = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
        _store_rows(DK + mat, pos_k, mine, offs_d, D, s_n, zeros)
        _store_rows(DV + mat, pos_k, mine, offs_d, D, s_n, zeros)
        return
    k = _load_rows(K + mat, pos_k, k_in, offs_d, D, s_n)
    v = _load_rows(V + mat, pos_k, k_in, offs_d, D, s_n)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    bias_rows = BIAS + vec * bias_w

    lo, hi = _band_range(s0, tl.minimum(s0 + BLOCK_N, T) - 1, M, window, CAUSAL, False, BLOCK_M)
    ilo, ihi = _interior_range(s0, s0 + BLOCK_N - 1, lo, hi, M, window, _all_local(kind_k), CAUSAL,
                               False, BLOCK_M)
    for start in tl.range(lo, hi, BLOCK_M):  # query tiles, one loop as in _band_bwd_dq_kernel
        offs_m = start + tl.arange(0, BLOCK_M)
        r_q, pos_q, q_in, kind_q = _band_tile(offs_m, M, dil, T, N, KIND + b * N, DILATED)
        q = _load_rows(Q + mat, pos_q, q_in, offs_d, D, s_n)
        do = _load_rows(DO + mat, pos_q, q_in, offs_d, D, s_n)
        lse = tl.load(LSE + vec + pos_q, mask=q_in, other=0.0)
        delta = tl.load(DELTA + vec + pos_q, mask=q_in, other=0.0)
        if _any_local(kind_q):
            rows = _row_hash(seed, b, h, pos_q, DROPOUT)
            weights_t = _key_weights(rows, pos_k, s0, threshold, keep_scale, DROPOUT, DILATED,
                                     True, BLOCK_N)
            if (start >= ilo) & (start < ihi) & _all_local(kind_q):
                dk, dv = _dkdv_step(k, v, q, do, lse, delta, 0, dk, dv, qk_scale, weights_t,
                                    bias_rows, pos_q[None, :], offs_m[None, :], offs_n[:, None],
                                    bias_w, DROPOUT, HAS_BIAS, CAUSAL, False, PRECISION)
            else:
                allowed_t = _band_mask(offs_m[None, :], r_q[None, :], kind_q[None, :],
                                       offs_n[:, None], r_k[:, None], kind_k[:, None], window,
                                       CAUSAL)
                dk, dv = _dkdv_step(k, v, q, do, lse, delta, allowed_t, dk, dv, qk_scale,
                                    weights_t, bias_rows, pos_q[None, :], offs_m[None, :],
                                    offs_n[:, None], bias_w, DROPOUT, HAS_BIAS, CAUSAL, True,
                                    PRECISION)

    _store_rows(DK + mat, pos_k, mine, offs_d, D, s_n, dk * sm_scale)
    _store_rows(DV + mat, pos_k, mine, offs_d, D, s_n, dv)


@triton.jit(do_not_specialize=_PER_CALL)
def _cross_bwd_dkdv_kernel(Q, K, V, DO, DK, DV, PDK, PDV, LSE, DELTA, KIND, GIDX, GCOUNT,
                           s_b, s_h, s_n, o_b, o_h, o_n, H, N, D, G, GP, SPLITS, CHUNK,
                           qk_scale, sm_scale, seed, threshold, keep_scale,
                           GLOBAL_KEYS: tl.constexpr, DROPOUT: tl.constexpr,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                           PRECISION: tl.constexpr):
    """dk, dv for the two dense (not banded) parts of the pattern. (s_b, s_h, s_n): strides of
    Q, K, V, DK, DV; (o_b, o_h, o_n): strides of DO.

    GLOBAL_KEYS=True (local projections): keys = the global tokens, queries = the LOCAL rows
        of one chunk of CHUNK positions (a multiple of BLOCK_M); grid (slot blocks x SPLITS,
        B * H). Writes PDK, PDV, (SPLITS, B * H, GP, D) fp32 parts, unscaled, at the keys'
        slots (``_sum_rows_kernel`` adds them into dk, dv of the GLOBAL rows); DK, DV unused.
    GLOBAL_KEYS=False (global projections): keys = every position (grid over key blocks),
        queries = the global rows. Writes DK, DV = dk_g, dv_g of every row (zero for padding);
        SPLITS = 1, PDK, PDV unused.
    """
    bh = tl.program_id(1)
    b = bh // H
    h = bh - b * H
    count = tl.load(GCOUNT + b).to(tl.int32)
    key_block = tl.program_id(0) // SPLITS
    chunk = tl.program_id(0) - key_block * SPLITS
    s0 = key_block * BLOCK_N
    mat = b.to(tl.int64) * s_b + h.to(tl.int64) * s_h
    mat_do = b.to(tl.int64) * o_b + h.to(tl.int64) * o_h
    vec = bh.to(tl.int64) * N
    offs_d = tl.arange(0, BLOCK_D)
    if GLOBAL_KEYS:
        if s0 >= count:
            return
        pos_k, k_in = _global_tile(GIDX + b * G, s0, count, BLOCK_N)
        k_ok = k_in
        first = chunk * CHUNK
        last = tl.minimum(first + CHUNK, N)
    else:
        pos_k = s0 + tl.arange(0, BLOCK_N)
        k_in = pos_k < N
        k_ok = tl.load(KIND + b * N + pos_k, mask=k_in, other=PAD) != PAD
        first = 0
        last = count
    k = _load_rows(K + mat, pos_k, k_in, offs_d, D, s_n)
    v = _load_rows(V + mat, pos_k, k_in, offs_d, D, s_n)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)

    for start in tl.range(first, last, BLOCK_M):
        if GLOBAL_KEYS:
            pos_q = start + tl.arange(0, BLOCK_M)
            q_in = pos_q < N
            q_ok = tl.load(KIND + b * N + pos_q, mask=q_in, other=PAD) == LOCAL
        else:
            pos_q, q_in = _global_tile(GIDX + b * G, start, count, BLOCK_M)
            q_ok = q_in
        q = _load_rows(Q + mat, pos_q, q_in, offs_d, D, s_n)
        do = _load_rows(DO + mat_do, pos_q, q_in, offs_d, D, o_n)
        lse = tl.load(LSE + vec + pos_q, mask=q_in, other=0.0)
        delta = tl.load(DELTA + vec + pos_q, mask=q_in, other=0.0)
        allowed_t = k_ok[:, None] & q_ok[None, :]
        rows = _row_hash(seed, b, h, pos_q, DROPOUT)
        # global keys lie anywhere; all positions come in consecutive blocks from s0
        weights_t = _key_weights(rows, pos_k, s0, threshold, keep_scale, DROPOUT, GLOBAL_KEYS,
                                 True, BLOCK_N)
        dk, dv = _dkdv_step(k, v, q, do, lse, delta, allowed_t, dk, dv, qk_scale, weights_t,
                            K, 0, 0, 0, 0, DROPOUT,
                            False, False, True, PRECISION)

    if GLOBAL_KEYS:
        part = (chunk * tl.num_programs(1) + bh).to(tl.int64) * GP * D
        slots = s0 + tl.arange(0, BLOCK_N)
        _store_rows(PDK + part, slots, k_in, offs_d, D, D, dk)
        _store_rows(PDV + part, slots, k_in, offs_d, D, D, dv)
    else:
        _store_rows(DK + mat, pos_k, k_in, offs_d, D, s_n, dk * sm_scale)
        _store_rows(DV + mat, pos_k, k_in, offs_d, D, s_n, dv)


@triton.jit(do_not_specialize=_PER_CALL)
def _global_rows_bwd_dq_kernel(QG, KG, VG, DO, PDQ, LSE, DELTA, KIND, GIDX, GCOUNT,
                               g_b, g_h, g_n, o_b, o_h, o_n, H, N, D, G, GP, SPLITS, CHUNK, qk_scale,
                               seed, threshold, keep_scale,
                               DROPOUT: tl.constexpr, BLOCK_M: tl.constexpr,
                               BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                               PRECISION: tl.constexpr):
    """Grid as _global_rows_fwd_kernel (slot blocks x SPLITS chunks of keys). The chunk's part
    of dq_g of GLOBAL rows, unscaled, into PDQ (SPLITS, B * H, GP, D) fp32 at the row's slot
    (``_sum_rows_kernel`` adds the chunks). (g_b, g_h, g_n): strides of the global family,
    (o_b, o_h, o_n): of DO."""
    bh = tl.program_id(1)
    b = bh // H
    h = bh - b * H
    count = tl.load(GCOUNT + b).to(tl.int32)
    slot_block = tl.program_id(0) // SPLITS
    chunk = tl.program_id(0) - slot_block * SPLITS
    g0 = slot_block * BLOCK_M
    if g0 >= count:
        return
    mat = b.to(tl.int64) * g_b + h.to(tl.int64) * g_h
    vec = bh.to(tl.int64) * N

    offs_d = tl.arange(0, BLOCK_D)
    pos_q, g_ok = _global_tile(GIDX + b * G, g0, count, BLOCK_M)
    q = _load_rows(QG + mat, pos_q, g_ok, offs_d, D, g_n)
    do = _load_rows(DO + b.to(tl.int64) * o_b + h.to(tl.int64) * o_h, pos_q, g_ok, offs_d, D, o_n)
    lse = tl.load(LSE + vec + pos_q, mask=g_ok, other=0.0)
    delta = tl.load(DELTA + vec + pos_q, mask=g_ok, other=0.0)
    rows = _row_hash(seed, b, h, pos_q, DROPOUT)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    first = chunk * CHUNK
    for start in tl.range(first, tl.minimum(first + CHUNK, N), BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        k_in = offs_n < N
        kind_k = tl.load(KIND + b * N + offs_n, mask=k_in, other=PAD)
        k = _load_rows(KG + mat, offs_n, k_in, offs_d, D, g_n)
        v = _load_rows(VG + mat, offs_n, k_in, offs_d, D, g_n)
        allowed = g_ok[:, None] & (kind_k != PAD)[None, :]
        weights = _key_weights(rows, offs_n, start, threshold, keep_scale, DROPOUT, False, False,
                               BLOCK_N)
        dq = _dq_step(q, do, k, v, lse, delta, allowed, dq, qk_scale, weights, KG, KG, 0, 0, 0, 0,
                      DROPOUT, False, False, True, PRECISION)
    part = (chunk * tl.num_programs(1) + bh).to(tl.int64) * GP
    _store_rows(PDQ + part * D, g0 + tl.arange(0, BLOCK_M), g_ok, offs_d, D, D, dq)


@triton.jit
def _sum_rows_kernel(PART, OUT, GIDX, GCOUNT, o_b, o_h, o_n, H, D, G, GP, SPLITS, scale,
                     BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr):
    """Grid (blocks of global slots, B * H). Row ``pos`` of OUT (strides o_b, o_h, o_n) of
    each GLOBAL token <- scale * the sum over the SPLITS chunks of PART (SPLITS, B * H, GP, D)
    fp32 at the token's slot, added in chunk order (deterministic, no atomics)."""
    bh, b, h, count, g0, pos, ok = _slot_block(GIDX, GCOUNT, H, G, BLOCK_M)
    if g0 >= count:
        return
    offs_d = tl.arange(0, BLOCK_D)
    slots = g0 + tl.arange(0, BLOCK_M)
    total = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    for chunk in tl.range(0, SPLITS):
        part = (chunk * tl.num_programs(1) + bh).to(tl.int64) * GP
        total += _load_rows(PART + part * D, slots, ok, offs_d, D, D)
    _store_rows(OUT + b.to(tl.int64) * o_b + h.to(tl.int64) * o_h, pos, ok, offs_d, D, o_n, total * scale)
