"""The slow, exact reference: the oracle every other implementation is tested against.

It builds the full (N, N) "may attend" matrix from the rules in ``pattern.py`` one position at
a time and computes in float64. Memory is quadratic and speed is poor on purpose: nothing here
is clever, so it can be checked by reading. Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D).
"""
from typing import Optional

import torch
from torch import Tensor

from .dropout import AttentionDropout, keep_matrix
from .pattern import AttentionMasks, AttentionPattern, check_inputs, default_scale


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


def _attend(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor, scale: float,
            keep: Optional[Tensor], keep_scale: float) -> Tensor:
    """softmax(scale * q k^T) v over the allowed keys of each row; rows with none give zeros.
    ``keep`` (N, N) bool, if given, drops probabilities after the softmax (kept ones scaled)."""
    scores = (q @ k.transpose(-1, -2)) * scale
    scores = scores.masked_fill(~allowed, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    probs = torch.where(allowed.any(-1, keepdim=True), probs, torch.zeros_like(probs))
    if keep is not None:
        probs = torch.where(keep, probs * keep_scale, torch.zeros_like(probs))
    return probs @ v


def reference_attention(q: Tensor, k: Tensor, v: Tensor,
                        q_g: Optional[Tensor], k_g: Optional[Tensor], v_g: Optional[Tensor],
                        pattern: AttentionPattern, masks: AttentionMasks = AttentionMasks(),
                        scale: Optional[float] = None, dropout: Optional[AttentionDropout] = None) -> Tensor:
    """Longformer attention computed densely in float64. Returns (B, H, N, D) in q's dtype.

    Differentiable (autograd through the dense float64 computation), so it also gives the
    reference gradients of all six inputs. ``dropout``: see ``dropout.py``.
    """
    check_inputs(q, k, v, q_g, k_g, v_g, pattern, masks)
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
            local = _attend(q[b, h].double(), k[b, h].double(), v[b, h].double(), local_allowed, scale,
                            keep_bh, keep_scale)
            glob = _attend(q_g[b, h].double(), k_g[b, h].double(), v_g[b, h].double(), global_allowed, scale,
                           keep_bh, keep_scale)
            heads_out.append(torch.where(global_rows.unsqueeze(-1), glob, local))
        rows.append(torch.stack(heads_out))
    return torch.stack(rows).to(q.dtype)
