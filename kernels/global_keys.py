"""The global keys of the vectorized PyTorch path (``sliding_chunks.py``): every query's extra
softmax columns, one per global token of its slice, merged with the band's by log-sum-exp.

Shapes: S = B * H slices, M' = nb * c positions per slice (``band_layout.BandLayout``), G global
keys per slice, D the head dim.
"""
from typing import Optional

import torch
from torch import Tensor

from .band_layout import BAND_MASKED, BandDropout, BandLayout, exp_and_lse


class GlobalKeys:
    """The G global keys of every slice as extra softmax columns of every query, handled for all
    queries at once (a few batched matmuls over (S, M', G) with M' = nb * c), never inside the
    window loop, where they would add small matmuls to every group.

    rows: (S, G) rows of the flat key buffer; valid: (B, H or 1, G) bool.
    """

    def __init__(self, layout: BandLayout, rows: Tensor, valid: Tensor, k_flat: Tensor, v_flat: Tensor):
        self.layout, self.rows = layout, rows
        self.k, self.v = k_flat[rows], v_flat[rows]  # (S, G, D)
        valid = valid.expand(layout.batch, layout.heads, -1).reshape(layout.slices, 1, -1)
        self.bias = torch.zeros(valid.shape, dtype=k_flat.dtype, device=k_flat.device)
        self.bias.masked_fill_(~valid, BAND_MASKED)

    def per_slice(self, x: Tensor) -> Tensor:
        """(S * nb, c, X) chunks -> (S, nb * c, X) view."""
        return x.view(self.layout.slices, -1, x.shape[-1])

    def scores(self, q_chunks: Tensor, scale2: float) -> Tensor:
        """(S, M', G) base-2 scores of every query against the slice's global keys."""
        return torch.baddbmm(self.bias, self.per_slice(q_chunks), self.k.transpose(1, 2), alpha=scale2)

    def merge_into(self, out: Tensor, lse: Tensor, q_chunks: Tensor, scale2: float,
                   drop: Optional[BandDropout]) -> None:
        """In place: out (S * nb, c, D) and lse (S * nb, c, 1), the band's normalised output and
        base-2 log-sum-exp, become those of one softmax over band and global keys together:
        lse = log2(2^lse_band + 2^lse_global), out = 2^(lse_band - lse) out_band
        + 2^(lse_global - lse) out_global. Rows without any allowed key stay 0 (both parts are 0
        and their lse finite, see exp_and_lse)."""
        scores = self.scores(q_chunks, scale2)  # (S, M', G)
        lse_global = scores.new_empty(scores.shape[:2] + (1,))
        exp_and_lse(scores.clone(), lse_global)
        out_s, lse_s = self.per_slice(out), self.per_slice(lse)
        merged = torch.logaddexp2(lse_s, lse_global)
        out_s.mul_(lse_s.sub_(merged).exp2_())  # lse_s is reused as the band's weight
        probs = scores.sub_(merged).exp2_()  # the global keys' joint probabilities
        if drop is not None:
            probs.mul_(drop.global_keys(probs.dtype))
        out_s.baddbmm_(probs, self.v)
        lse_s.copy_(merged)

    def backward(self, q_chunks, grad_chunks, delta, lse, scale2, grad_q, grad_k, grad_v,
                 drop: Optional[BandDropout]) -> None:
        """Add the global columns' share of the gradients: grad_q (S * nb, c, D) in place, and
        the global keys' and values' gradients into the flat grad_k, grad_v buffers (rows, D).
        delta: (S * nb, c, 1) = rowsum(dO * O); lse: the joint base-2 log-sum-exp."""
        q, grad_o = self.per_slice(q_chunks), self.per_slice(grad_chunks)
        probs = self.scores(q_chunks, scale2).sub_(self.per_slice(lse)).exp2_()  # (S, M', G)
        factor = None if drop is None else drop.global_keys(probs.dtype)
        kept = probs if factor is None else probs * factor
        grad_v_glob = torch.bmm(kept.transpose(1, 2), grad_o)  # (S, G, D)
        grad_scores = torch.bmm(grad_o, self.v.transpose(1, 2))  # dP of the kept probabilities
        if factor is not None:
            grad_scores.mul_(factor)  # dP of the probabilities before dropout
        grad_scores.sub_(self.per_slice(delta)).mul_(probs)  # dS = P * (dP - delta)
        self.per_slice(grad_q).baddbmm_(grad_scores, self.k)
        grad_k_glob = torch.bmm(grad_scores.transpose(1, 2), q)
        rows = self.rows.flatten()
        grad_k.index_add_(0, rows, grad_k_glob.view(-1, grad_k.shape[1]))
        grad_v.index_add_(0, rows, grad_v_glob.view(-1, grad_v.shape[1]))
