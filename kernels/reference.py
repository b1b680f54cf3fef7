"""The slow, exact reference: the oracle every other implementation is tested against.

It builds the full (N, N) "may attend" matrix from the rules in ``pattern.py`` one position at
a time and computes in float64. Memory is quadratic and speed is poor on purpose: nothing here
is clever, so it can be checked by reading. Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D).
"""
from typing import Optional

import torch
from torch import Tensor

from .dropout import AttentionDropout, keep_matrix
from .pattern import AttentionMasks, AttentionPattern, check_band_bias, check_inputs, default_scale


def allowed_keys(pattern: AttentionPattern, dilation: int, padding, is_global) -> Tensor:
    """(N, N) bool: entry [i, j] is True where query i may attend key j with the LOCAL projections.

    ``padding`` and ``is_global`` are (N,) bool lists for one batch row. Rows of global and
    padding queries are all False here (global rows use the global projections).
    """
    n = len(padding)
    allowed = torch.zeros(n, n, dtype=torch.bool)
    lowest_step = -pattern.window
    highest_step = 0 if pattern.causal else pattern.window
    for i in range(n):
        if padding[i] or is_global[i]:
            continue
        for step in range(lowest_step, highest_step + 1):
            j = i + step * dilation
            if 0 <= j < n and not padding[j]:
                allowed[i, j] = True
        for j in range(n):
            if is_global[j] and not padding[j]:
                allowed[i, j] = True
    return allowed


def dense_band_bias(bias: Tensor, pattern: AttentionPattern, dilation: int, padding, is_global) -> Tensor:
    """The (N, N) additive score matrix of one (batch row, head)'s band bias (``pattern.py``).

    bias: (N, W) for that row and head; ``padding`` and ``is_global``: (N,) bool lists.
    Entry [i, j] is bias[i, c] where key j = i + (c - w) * d (causal: i - c * d) is a window
    key of the local query i (j in [0, N), neither padding nor global); 0 elsewhere, so the
    gradient of every other column is zero. Differentiable in ``bias``.
    """
    n = len(padding)
    rows, keys, columns = [], [], []
    for c in range(bias.shape[1]):
        step = -c if pattern.causal else c - pattern.window
        for i in range(n):
            j = i + step * dilation
            if padding[i] or is_global[i] or not 0 <= j < n or padding[j] or is_global[j]:
                continue
            rows.append(i)
            keys.append(j)
            columns.append(c)
    dense = bias.new_zeros(n, n)
    if rows:  # each (i, j) comes from exactly one column c, so nothing is overwritten
        rows, keys, columns = (torch.tensor(x, device=bias.device) for x in (rows, keys, columns))
        dense = dense.index_put((rows, keys), bias[rows, columns])
    return dense


def _attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor, scale: float,
            keep: Optional[Tensor], keep_scale: float, bias: Optional[Tensor] = None) -> Tensor:
    """softmax(scale * q k^T + bias) v over the allowed keys of each row; rows with none give
    zeros. ``keep`` (N, N) bool, if given, drops probabilities after the softmax (kept ones
    scaled); ``bias`` (N, N), if given, is added to the scaled scores."""
    scores = (q @ k.transpose(-1, -2)) * scale
    if bias is not None:
        scores = scores + bias
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    probs = torch.where(allowed.any(-1, keepdim=True), probs, torch.zeros_like(probs))
    if keep is not None:
        probs = torch.where(keep, probs * keep_scale, torch.zeros_like(probs))
    return probs @ v


def reference_attention(q: Tensor, k: Tensor, v: Tensor,
                        q_g: Optional[Tensor], k_g: Optional[Tensor], v_g: Optional[Tensor],
                        pattern: AttentionPattern, masks: AttentionMasks = AttentionMasks(),
                        scale: Optional[float] = None, dropout: Optional[AttentionDropout] = None,
                        band_bias: Optional[Tensor] = None) -> Tensor:
    """Longformer attention computed densely in float64. Returns (B, H, N, D) in q's dtype.

    Differentiable (autograd through the dense float64 computation), so it also gives the
    reference gradients of all six inputs and of ``band_bias``. ``dropout``: see
    ``dropout.py``. ``band_bias``: (B, H, N, W) or None, see "Band bias" in ``pattern.py``.
    """
    check_inputs(q, k, v, q_g, k_g, v_g, pattern, masks)
    check_band_bias(band_bias, q, pattern)
    batch, heads, length, head_dim = q.shape
    if q_g is None:  # no global tokens: the global projections are never read
        q_g, k_g, v_g = q, k, v
    scale = default_scale(head_dim) if scale is None else scale
    dilations = pattern.dilation_per_head(heads)
    no = torch.zeros(batch, length, dtype=torch.bool)
    padding = no if masks.padding is None else masks.padding.bool().cpu()
    is_global = no if masks.is_global is None else masks.is_global.bool().cpu() & ~padding

    keep = None if dropout is None else keep_matrix(dropout, batch, heads, length, q.device)
    keep_scale = 1.0 if dropout is None else dropout.keep_scale
    rows = []
    for b in range(batch):
        pad_b, glob_b = padding[b].tolist(), is_global[b].tolist()
        global_rows = torch.tensor(glob_b, device=q.device)
        global_allowed = (~padding[b]).expand(length, length) & is_global[b].unsqueeze(1)
        global_allowed = global_allowed.to(q.device)
        heads_out = []
        for h in range(heads):
            local_allowed = allowed_keys(pattern, dilations[h], pad_b, glob_b).to(q.device)
            keep_bh = None if keep is None else keep[b, h]
            bias = None
            if band_bias is not None:
                bias = dense_band_bias(band_bias[b, h].double(), pattern, dilations[h], pad_b, glob_b)
            local = _attend(q[b, h].double(), k[b, h].double(), v[b, h].double(), local_allowed, scale,
                            keep_bh, keep_scale, bias)
            glob = _attend(q_g[b, h].double(), k_g[b, h].double(), v_g[b, h].double(), global_allowed, scale,
                           keep_bh, keep_scale)
            heads_out.append(torch.where(global_rows.unsqueeze(-1), glob, local))
        rows.append(torch.stack(heads_out))
    return torch.stack(rows).to(q.dtype)
