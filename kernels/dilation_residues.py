"""A dilated head as d undilated ones: the residue classes of its positions.

With dilation d, query i attends keys i + t*d only, so positions congruent mod d never meet: a
(B, H, N, ...) tensor regrouped as (B, H*d, ceil(N/d), ...) turns each dilated head into d
undilated heads of N/d positions, which the sliding-chunks path then attends with window w and
no waste. Global keys, which every query reaches whatever its residue, get their row index in
that regrouped layout from ``residue_global_keys``.
"""
import torch
import torch.nn.functional as F
from torch import Tensor


def to_residues(x: Tensor, dilation: int, fill=0.0) -> Tensor:
    """(B, H, N, ...) -> (B, H*d, ceil(N/d), ...): subsequence r holds positions r, r+d, r+2d, ..."""
    batch, heads, length = x.shape[:3]
    padded = -(-length // dilation) * dilation
    pad = [0, 0] * (x.dim() - 3) + [0, padded - length]
    x = F.pad(x, pad, value=fill)
    x = x.view(batch, heads, padded // dilation, dilation, *x.shape[3:]).transpose(2, 3)
    return x.reshape(batch, heads * dilation, padded // dilation, *x.shape[4:])


def from_residues(x: Tensor, heads: int, dilation: int, length: int) -> Tensor:
    """Inverse of ``to_residues`` for (B, H*d, M, ...) tensors, cropped back to ``length``."""
    batch, _, per_residue = x.shape[:3]
    x = x.view(batch, heads, dilation, per_residue, *x.shape[3:]).transpose(2, 3)
    return x.reshape(batch, heads, dilation * per_residue, *x.shape[4:])[:, :, :length]


def residue_global_keys(index: Tensor, heads: int, dilation: int, length: int) -> Tensor:
    """Global positions (B, G) -> (B, H*d, G) rows of the keys of ``to_residues`` flattened to
    (B * H*d * M, D), M = ceil(N/d): position p of head h lives in subsequence h*d + p % d at
    index p // d, whichever subsequence the query is in."""
    batch = index.shape[0]
    per_residue = -(-length // dilation)
    sequences = heads * dilation
    first_of_head = (torch.arange(sequences, device=index.device) // dilation * dilation)[None, :, None]
    row_start = torch.arange(batch, device=index.device)[:, None, None] * sequences
    index = index[:, None, :]
    return (row_start + first_of_head + index % dilation) * per_residue + index // dilation
