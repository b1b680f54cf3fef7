"""Vectorized PyTorch Longformer attention (CPU and GPU): memory linear in N, no (N, N) tensor.

Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D); padding / is_global masks: (B, N).

How it works:
  * Local band. Queries are cut into chunks of c positions; chunk [s, s+c) can only see keys in
    [s-w, s+c+w), a window of L = c + 2w keys (c + w when causal; rounded up to a multiple of
    c) taken as a strided view of one flat, padded key buffer (``Tensor.as_strided``: no copy).
    Every chunk of every (batch, head) slice is one "window" of that buffer, so the band is a
    batched matmul over windows: scores (windows, c, L), linear in N.
  * Global keys. Every query also attends to the G global keys (local projections), under the
    same softmax. They are kept out of the band (each is counted once) and handled apart, for
    all queries at once ((S, M, G) scores): the band's output and log-sum-exp are merged with
    theirs by log-sum-exp, and backward adds their share from the joint log-sum-exp
    (``global_keys.py``). The window loop is the same with or without global tokens.
  * Memory. ``_BandAttention`` is an autograd.Function that keeps only q, k, v, the output and
    each row's log-sum-exp, and recomputes scores and probabilities in backward (as
    FlashAttention does): autograd holds O(N * D), not O(N * L).
  * Speed. Windows are processed a group at a time, the group sized so that its score blocks
    stay in cache (``GROUP_SCORES``), every step writing into buffers allocated once per call
    (fresh large allocations cost page faults on CPU). The additive bias (0 or -inf) for the
    band shape, the sequence ends and invalid keys is built once per call and added by the
    matmul itself (``baddbmm``).
  * Dilation d. Positions with the same residue modulo d form a subsequence in which the dilated
    window is an ordinary window, so heads of dilation d are reshaped (N -> d subsequences of
    N/d) and run through the same band code. Heads are grouped by their dilation. A head's
    global keys may sit in any of its residue subsequences: they are addressed by row in the
    flat key buffer, not by position in the subsequence.
  * Band bias (``pattern.py``). It is moved into the (windows, c, L) score layout once per call
    (Transformer-XL's skew: value o of query r lands on window column r + o) and folded into
    the additive 0 / -inf bias, which then is one (windows, c, L) tensor instead of two small
    ones; its gradient is read back off the diagonals of dS. Under dilation it goes through the
    same residue reshape as q (its columns count steps of d, i.e. steps of 1 in a residue).
  * Global queries. The G global rows attend every non-padding key with the global projections:
    (B, H, G, N) scores, linear in N; their rows replace the band's.
Everything runs in fp32 (fp64 for fp64 inputs) and is cast back to the input dtype at the end.
"""
from typing import Optional

import torch
from torch import Tensor

from .band_layout import BandDropout, BandLayout, dropout_pass, exp_and_lse
from .buffer_pool import PassBuffers
from .dilation_residues import from_residues, residue_global_keys, to_residues
from .dropout import AttentionDropout, global_rows_keep
from .global_keys import GlobalKeys
from .pattern import (MASKED_SCORE, AttentionMasks, AttentionPattern, check_band_bias, check_inputs,
                      default_scale)

# Scores are kept in base 2 (scaled by log2(e) inside the matmul): exp2 is about 1.5x faster
# than exp on CPU (measured), and exp2(s * log2(e)) = exp(s), so the softmax is unchanged.
_LOG2_E = 1.4426950408889634
def _scores_into(buffer: Tensor, band: Tensor, key_bias: Optional[Tensor], q_chunks: Tensor,
                 k_windows: Tensor, scale: float) -> Tensor:
    """buffer (T, c, L) <- band + key_bias + scale * q k^T for T windows (key_bias None: the
    whole bias is in ``band``, as with a band bias, ``BandLayout.scores_bias``)."""
    if key_bias is None:
        buffer.copy_(band)
    else:
        torch.add(band, key_bias, out=buffer)
    return buffer.baddbmm_(q_chunks, k_windows.transpose(1, 2), alpha=scale)


def _biases(band: Tensor, key_bias: Optional[Tensor], rows: slice):
    """The two bias operands of ``_scores_into`` for windows ``rows``: the shared (c, L) band
    shape and the per-window key bias, or the per-window (T, c, L) bias of a band bias."""
    if key_bias is None:
        return band[rows], None
    return band, key_bias[rows]


def _fold(blocks: Tensor, padded: Tensor, start: int, count: int, summed: Tensor) -> None:
    """Add the gradients of ``count`` overlapping key windows (T, L, D), L = R * c, back into the
    flat key buffer seen as (rows / c, c, D) blocks: block u of window t is block start + t + u.

    padded: (R - 1 + T + R - 1, L, D), the T windows between R - 1 windows of zeros on either
    side; summed: (>= T + R - 1, c, D) scratch. Why not one add per block offset u (R passes over
    the blocks, R parallel regions): target block b collects block u of window b - u for every u,
    and with the zero windows around them those R blocks are one strided view (block R - 1 - u'
    of padded window b + u' lies at b * L + u' * (L - c) + (R - 1) * c rows of D), so one sum
    over u' and one add do it."""
    _, width, head_dim = padded.shape
    chunk = blocks.shape[1]
    reach = width // chunk  # R blocks per window
    targets = count + reach - 1
    # as_strided without a storage offset starts where its input does: no storage_offset() read,
    # which torch.compile cannot trace (an int out of a tensor) and would break the whole graph at
    # this line: a fullgraph compile of the encoder would then fail
    first = padded.view(-1)[(reach - 1) * chunk * head_dim:]
    view = first.as_strided((targets, reach, chunk, head_dim),
                            (width * head_dim, (width - chunk) * head_dim, head_dim, 1))
    blocks[start:start + targets].add_(torch.sum(view, dim=1, out=summed[:targets]))


class _BandAttention(torch.autograd.Function):
    """Sliding-window attention plus global keys, with recomputation in backward.

    forward(q, k, v: (B, H, M, D), key_valid: (B, H or 1, M) bool (keys allowed in the band),
    global_keys: (B, H, G) long or None (global key g of slice (b, h) is row global_keys[b, h, g]
    of the keys flattened to (B * H * M, D)), global_valid: (B, H or 1, G) bool or None, window,
    causal, scale, dropout: a function (layout) -> BandDropout, or None, band_bias:
    (B, H, M, span + 1) or None, added to the band's natural-unit scores, column o holding
    the key j = i + o - w' of query i, w' = ``layout.window``, the clamped window)
    -> (B, H, M, D). A row with no allowed key gives zeros.
    """

    @staticmethod
    def forward(ctx, q, k, v, key_valid, global_keys, global_valid, window, causal, scale, dropout,
                band_bias=None):
        batch, heads, length, head_dim = q.shape
        layout = BandLayout(batch, heads, length, head_dim, window, causal, q.device)
        drop = None if dropout is None else dropout(layout)
        q_chunks = layout.queries(q)
        k_flat, v_flat = layout.keys(k), layout.keys(v)
        k_windows, v_windows = layout.key_windows(k_flat), layout.key_windows(v_flat)
        band, key_bias = layout.bias(key_valid, q.dtype)
        if band_bias is not None:  # one (T, c, L) bias of the scores, kept for backward
            band = layout.scores_bias(band, key_bias, band_bias * _LOG2_E)  # base-2 scores
            key_bias = None

        scale2 = scale * _LOG2_E  # base-2 scores
        out = torch.empty_like(q_chunks)
        lse = q.new_empty(layout.windows, layout.chunk, 1)
        # pooled buffers (buffer_pool.py), given back however the pass ends
        with PassBuffers(q) as buffers, dropout_pass(drop, last=False):
            scores = buffers.take((layout.group, layout.chunk, layout.width))
            for start, end in layout.groups():
                block = scores[:end - start]
                _scores_into(block, *_biases(band, key_bias, slice(start, end)), q_chunks[start:end],
                             k_windows[start:end], scale2)
                total = exp_and_lse(block, lse[start:end])  # the normaliser counts every key
                if drop is not None:  # kept probabilities, times 1 / (1 - rate) through the (T, c, 1) sums
                    drop.keep_times(start, end, block, out=block)
                    total.mul_(1.0 - drop.dropout.rate)
                torch.bmm(block, v_windows[start:end], out=out[start:end]).div_(total)
            if global_keys is not None:
                glob = GlobalKeys(layout, layout.global_rows(global_keys), global_valid, k_flat, v_flat)
                glob.merge_into(out, lse, q_chunks, scale2, drop)

        ctx.layout, ctx.scale, ctx.drop = layout, scale, drop
        ctx.save_for_backward(q_chunks, k_flat, v_flat, key_valid, global_keys, global_valid, out, lse,
                              band if key_bias is None else None)
        return layout.unqueries(out)

    @staticmethod
    def backward(ctx, grad_out):
        q_chunks, k_flat, v_flat, key_valid, global_keys, global_valid, out, lse, biased = ctx.saved_tensors
        layout, scale, drop = ctx.layout, ctx.scale, ctx.drop
        scale2 = scale * _LOG2_E
        k_windows, v_windows = layout.key_windows(k_flat), layout.key_windows(v_flat)
        if biased is None:
            band, key_bias = layout.bias(key_valid, q_chunks.dtype)
            grad_bias = None
        else:  # the band bias's gradient is dS at the band positions, (T, c, span + 1)
            band, key_bias = biased, None
            grad_bias = None
            if ctx.needs_input_grad[10]:
                grad_bias = q_chunks.new_empty(layout.windows, layout.chunk, layout.span + 1)

        with PassBuffers(q_chunks) as buffers, dropout_pass(drop, last=True):  # given back however it ends
            grad_chunks = layout.queries(grad_out, buffers.take(q_chunks.shape))
            # softmax backward: dS = P * (dP - delta), delta = rowsum(dO * O), O the joint output
            delta = torch.einsum("tcd,tcd->tc", grad_chunks, out).unsqueeze(-1)  # no (T, c, D) temporary
            del out
            grad_q = torch.empty_like(q_chunks)
            grad_k, grad_v = torch.zeros_like(k_flat), torch.zeros_like(v_flat)
            grad_k_blocks = grad_k.view(-1, layout.chunk, layout.head_dim)
            grad_v_blocks = grad_v.view(-1, layout.chunk, layout.head_dim)
            # the per-group buffers come from the pool: fresh ones of this size (tens of MiB with
            # threads) would cost a page fault per 4 KiB on every call (buffer_pool.py)
            probs = buffers.take((layout.group, layout.chunk, layout.width))
            grad_scores = buffers.take((layout.group, layout.chunk, layout.width))
            # dK and dV of a group's windows, between R - 1 windows of zeros on either side (``_fold``)
            pad = layout.blocks - 1
            padded = buffers.take((layout.group + 2 * pad, layout.width, layout.head_dim))
            padded[:pad].zero_()
            padded[pad + layout.group:].zero_()
            summed = buffers.take((layout.group + pad, layout.chunk, layout.head_dim))
            # With dropout, dP and dV see the kept probabilities scaled by 1 / (1 - rate): the scale
            # rides on a group's dO, (T, c, D), not on its (T, c, L) blocks nor on a whole copy of dO.
            scaled = None if drop is None else buffers.take((layout.group, layout.chunk, layout.head_dim))
            for start, end in layout.groups():
                count = end - start
                rows = slice(start, end)
                p, ds, win = probs[:count], grad_scores[:count], padded[pad:pad + count]
                if count < layout.group:  # the last group: zeros after its windows, not a larger group's
                    padded[pad + count:2 * pad + count].zero_()
                _scores_into(p, *_biases(band, key_bias, rows), q_chunks[rows], k_windows[rows], scale2)
                p.sub_(lse[rows]).exp2_()  # the joint lse: band probabilities of the joint softmax
                if drop is None:
                    torch.bmm(grad_chunks[rows], v_windows[rows].transpose(1, 2), out=ds)  # dP
                    torch.bmm(p.transpose(1, 2), grad_chunks[rows], out=win)
                    ds.sub_(delta[rows]).mul_(p)
                else:  # out used the kept probabilities P * keep / (1 - rate)
                    grad_kept = torch.mul(grad_chunks[rows], drop.dropout.keep_scale, out=scaled[:count])
                    torch.bmm(grad_kept, v_windows[rows].transpose(1, 2), out=ds)  # dP of the kept ones
                    # dS = P * (keep * dP - delta) = kept * dP - P * delta, kept = P * keep
                    kept = drop.softmax_grad_(start, end, p, ds, delta[rows])
                    torch.bmm(kept.transpose(1, 2), grad_kept, out=win)
                _fold(grad_v_blocks, padded[:count + 2 * pad], start, count, summed)
                if grad_bias is not None:
                    layout.unskew(ds, grad_bias[rows])
                torch.bmm(ds, k_windows[rows], out=grad_q[rows])
                torch.bmm(ds.transpose(1, 2), q_chunks[rows], out=win)
                _fold(grad_k_blocks, padded[:count + 2 * pad], start, count, summed)
            if global_keys is not None:
                glob = GlobalKeys(layout, layout.global_rows(global_keys), global_valid, k_flat, v_flat)
                glob.backward(q_chunks, grad_chunks, delta, lse, scale2, grad_q, grad_k, grad_v, drop)
        grad_q.mul_(scale)
        grad_k.mul_(scale)
        return (layout.unqueries(grad_q), layout.unkeys(grad_k), layout.unkeys(grad_v),
                None, None, None, None, None, None, None,
                None if grad_bias is None else layout.unqueries(grad_bias))


def _banded_attention(
    q: Tensor, k: Tensor, v: Tensor, key_valid: Tensor, global_keys: Optional[Tensor],
    global_valid: Optional[Tensor], window: int, causal: bool, scale: float, dropout=None,
    band_bias: Optional[Tensor] = None,
) -> Tensor:
    """Undilated sliding-window attention plus global keys. q, k, v: (B, H, M, D) fp32/fp64;
    key_valid: (B, H or 1, M); global_keys: (B, H, G) rows of the (B * H * M) keys or None;
    global_valid: (B, H or 1, G); dropout: (layout) -> BandDropout, or None; band_bias:
    (B, H, M, W) in the columns of ``pattern.py`` (with dilation 1 here), or None.
    Returns (B, H, M, D)."""
    length = q.shape[2]
    if length == 0:
        return q.clone()
    if band_bias is not None:
        # BandLayout clamps the window to w' <= M - 1 (nothing lies further) and wants column
        # o for the key j = i + o - w': the pattern's column w + o - w' (two-sided) or w' - o
        # (causal, hence the flip); columns beyond w' are never reached.
        reach = min(window, max(length - 1, 0))
        if causal:
            band_bias = band_bias[..., :reach + 1].flip(-1)
        else:
            band_bias = band_bias[..., window - reach:window + reach + 1]
    return _BandAttention.apply(q, k, v, key_valid, global_keys, global_valid, window, causal, scale, dropout,
                                band_bias)


def _dilated_banded_attention(q, k, v, key_valid, global_index, global_valid, window, dilation, causal, scale,
                              dropout: Optional[AttentionDropout], head_ids: Tensor,
                              band_bias: Optional[Tensor] = None):
    """``_banded_attention`` with dilation d, in the original layout: (B, H, N, D) in and out;
    key_valid (B, 1, N); global_index (B, G) positions or None; global_valid (B, 1, G);
    head_ids (H,): the original index of each of these heads (for the dropout mask);
    band_bias (B, H, N, W) or None (column c: key i + (c - w) * d, causal i - c * d)."""
    heads, length = q.shape[1], q.shape[2]
    global_keys = None
    if global_index is not None:
        global_keys = residue_global_keys(global_index, heads, dilation, length)
    band_dropout = None  # built by the band call, once it knows its layout
    if dropout is not None:
        band_dropout = lambda layout: BandDropout(dropout, layout, head_ids, dilation, global_index)  # noqa: E731
    if dilation == 1:
        return _banded_attention(q, k, v, key_valid, global_keys, global_valid, window, causal, scale,
                                 band_dropout, band_bias)
    parts = [to_residues(t, dilation) for t in (q, k, v)]
    # in a residue subsequence the key (c - w) * d positions away is c - w indices away: the
    # band bias's columns mean the same there with dilation 1
    residue_bias = None if band_bias is None else to_residues(band_bias, dilation)
    # key_valid is (B, 1, N): its residues (B, d, M) are shared by every head, whose residue
    # subsequences are laid out head-major (head * d + r), hence the repeat.
    valid = to_residues(key_valid.unsqueeze(-1), dilation, fill=False).squeeze(-1)
    valid = valid.repeat(1, heads, 1)
    out = _banded_attention(*parts, valid, global_keys, global_valid, window, causal, scale, band_dropout,
                            residue_bias)
    return from_residues(out, heads, dilation, length)


def _gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """x: (B, H, N, D), index: (B, G) -> (B, H, G, D)."""
    return x.gather(2, index[:, None, :, None].expand(-1, x.shape[1], -1, x.shape[3]))


def sliding_chunks_attention(q: Tensor, k: Tensor, v: Tensor,
                             q_g: Optional[Tensor], k_g: Optional[Tensor], v_g: Optional[Tensor],
                             pattern: AttentionPattern, masks: AttentionMasks = AttentionMasks(),
                             scale: Optional[float] = None, global_rows: bool = True,
                             dropout: Optional[AttentionDropout] = None,
                             band_bias: Optional[Tensor] = None) -> Tensor:
    """Longformer attention in vectorized PyTorch. Inputs (B, H, N, D); returns (B, H, N, D).

    q_g, k_g, v_g may be None when no token is global; only the rows of global tokens of q_g
    are read. Any N works (padded internally). ``global_rows=False``: the rows of the global
    tokens are left unspecified (for a caller that computes them itself) and q_g, k_g, v_g
    are not read. ``dropout``: attention dropout with the keep mask of ``dropout.py``.
    ``band_bias``: (B, H, N, W) additive scores of the window keys ("Band bias" in
    ``pattern.py``), differentiable, or None.
    """
    is_global = check_inputs(q, k, v, q_g, k_g, v_g, pattern, masks, need_global=global_rows)
    check_band_bias(band_bias, q, pattern)
    padding = masks.padding
    batch, heads, length, head_dim = q.shape
    scale = default_scale(head_dim) if scale is None else scale
    out_dtype = q.dtype
    # fp16/bf16 are computed in fp32 (the softmax must not overflow); fp64 stays fp64.
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    q, k, v = q.to(compute), k.to(compute), v.to(compute)

    # Global keys leave the band (they are attended as global keys, once).
    key_valid = torch.ones(batch, length, dtype=torch.bool, device=q.device)
    if padding is not None:
        key_valid &= ~padding
    index = slot_valid = None
    if is_global is not None:
        key_valid &= ~is_global
        index, slot_valid = masks.global_index, masks.global_slot_used
    if band_bias is not None:
        band_bias = band_bias.to(compute)
        if padding is not None or is_global is not None:
            # only local query rows have a band bias: zero elsewhere (any value, even NaN, is
            # ignored there, and those rows' bias gradient is zero by the masked_fill)
            band_bias = band_bias.masked_fill(~key_valid[:, None, :, None], 0.0)

    dilations = pattern.dilation_per_head(heads)
    groups = [[h for h in range(heads) if dilations[h] == d] for d in sorted(set(dilations))]
    outs = []
    for group in groups:
        # one group (a single dilation for every head, the usual case) runs on the tensors as
        # they are: indexing heads out and back would cost copies forward and backward
        select = (lambda t: t) if len(group) == heads else (lambda t: t[:, group])
        outs.append(_dilated_banded_attention(
            select(q), select(k), select(v), key_valid.unsqueeze(1), index,
            None if slot_valid is None else slot_valid.unsqueeze(1), pattern.window,
            dilations[group[0]], pattern.causal, scale, dropout, torch.tensor(group, device=q.device),
            None if band_bias is None else select(band_bias),
        ))
    if len(groups) == 1:
        out = outs[0]
    else:  # concatenate the groups, then put the heads back in their order
        order = torch.argsort(torch.tensor([h for group in groups for h in group], device=q.device))
        out = torch.cat(outs, dim=1).index_select(1, order)

    if is_global is not None and global_rows:
        # global queries attend every non-padding key with the global projections
        q_rows = _gather_rows(q_g.to(compute), index) * scale
        scores = torch.matmul(q_rows, k_g.to(compute).transpose(-1, -2))  # (B, H, G, N)
        if padding is not None:
            scores = scores.masked_fill(padding[:, None, None, :], MASKED_SCORE)
        probs = torch.softmax(scores, dim=-1)
        if dropout is not None:
            keep = global_rows_keep(dropout, index, heads, length)
            probs = probs * keep.to(probs.dtype).mul_(dropout.keep_scale)
        global_out = torch.matmul(probs, v_g.to(compute))  # (B, H, G, D)
        # their rows replace the band's, out of place
        out = masks.put_global_rows(out.transpose(1, 2), global_out.transpose(1, 2)).transpose(1, 2)

    if padding is not None:
        out = out.masked_fill(padding[:, None, :, None], 0.0)
    return out.to(out_dtype)
