"""Vectorized PyTorch Longformer attention (CPU and GPU): memory linear in N, no (N, N) tensor.

Shapes: q, k, v, q_g, k_g, v_g: (B, H, N, D); padding / is_global masks: (B, N).

How it works:
  * Local band. Queries are cut into chunks of c positions; chunk [s, s+c) can only see keys in
    [s-w, s+c+w), a window of c+2w keys (c+w when causal) taken as a strided view of the padded
    keys (``Tensor.unfold``: no copy). Inside a chunk the band is the same (c, c+2w) boolean
    pattern for every chunk, so scores are (B, H, N/c, c, c+2w): linear in N.
  * Dilation d. Positions with the same residue modulo d form a subsequence in which the dilated
    window is an ordinary window, so heads of dilation d are reshaped (N -> d subsequences of
    N/d) and run through the same band code. Heads are grouped by their dilation.
  * Global keys. Every query also attends to the G global keys (local projections). Their
    softmax is merged with the band's through log-sum-exp, which keeps the two parts separate
    (the band is computed in the reshaped space, global keys in the original one).
  * Global queries. The G global rows attend every non-padding key with the global projections:
    (B, H, G, N) scores, linear in N.
Everything runs in fp32 (fp64 for fp64 inputs) and is cast back to the input dtype at the end.
"""
from typing import Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .pattern import AttentionMasks, AttentionPattern, check_inputs, default_scale

# Masked scores get this finite value rather than -inf: a row whose every key is masked (only
# padding rows, which are zeroed at the end) then has finite softmax values and gradients
# instead of NaNs that would leak into the backward pass through 0 * NaN.
MASKED_SCORE = -1e30


def _chunk_size(window: int, length: int) -> int:
    # c = w/2 keeps the wasted (out-of-band) share of each key window at 1.25x the band while
    # the batched matmuls stay large enough to be efficient.
    return max(1, min(length, max(window // 2, 32)))


def _banded_attention(
    q: Tensor, k: Tensor, v: Tensor, key_valid: Tensor, window: int, causal: bool, scale: float,
    need_lse: bool,
) -> Tuple[Tensor, Optional[Tensor]]:
    """Undilated sliding-window attention. q, k, v: (B, H, M, D) fp32; key_valid: (B, H or 1, M).

    Returns the output (B, H, M, D) and, when ``need_lse``, the log-sum-exp of each row's
    scores (B, H, M) for merging with the global keys.
    """
    batch, heads, length, head_dim = q.shape
    chunk = _chunk_size(window, length)
    num_chunks = -(-length // chunk)
    tail = num_chunks * chunk - length
    right = tail if causal else tail + window
    span = window if causal else 2 * window  # keys per chunk = chunk + span
    q_chunks = F.pad(q, (0, 0, 0, tail)).view(batch, heads, num_chunks, chunk, head_dim)
    # (B, H, nb, D, c+span): a strided view, keys of chunk b are positions [b*c - w, b*c + c + w')
    k_windows = F.pad(k, (0, 0, window, right)).unfold(2, chunk + span, chunk)
    v_windows = F.pad(v, (0, 0, window, right)).unfold(2, chunk + span, chunk).transpose(-1, -2)
    valid = F.pad(key_valid, (window, right), value=False).unfold(2, chunk + span, chunk)

    # Query r of a chunk (position s+r) and key u of its window (position s-w+u) are within the
    # window when 0 <= u - r <= span.
    offset = torch.arange(chunk + span, device=q.device) - torch.arange(chunk, device=q.device)[:, None]
    band = (offset >= 0) & (offset <= span)  # (c, c+span)
    allowed = band & valid.unsqueeze(-2)  # (B, H or 1, nb, c, c+span)

    scores = torch.matmul(q_chunks * scale, k_windows).masked_fill(~allowed, MASKED_SCORE)
    lse = torch.logsumexp(scores, dim=-1).flatten(2, 3)[..., :length] if need_lse else None
    out = torch.matmul(torch.softmax(scores, dim=-1), v_windows)
    return out.flatten(2, 3)[:, :, :length], lse


def _to_residues(x: Tensor, dilation: int, fill=0.0) -> Tensor:
    """(B, H, N, ...) -> (B, H*d, ceil(N/d), ...): subsequence r holds positions r, r+d, r+2d, ..."""
    batch, heads, length = x.shape[:3]
    padded = -(-length // dilation) * dilation
    pad = [0, 0] * (x.dim() - 3) + [0, padded - length]
    x = F.pad(x, pad, value=fill)
    x = x.view(batch, heads, padded // dilation, dilation, *x.shape[3:]).transpose(2, 3)
    return x.reshape(batch, heads * dilation, padded // dilation, *x.shape[4:])


def _from_residues(x: Tensor, heads: int, dilation: int, length: int) -> Tensor:
    """Inverse of ``_to_residues`` for (B, H*d, M, ...) tensors, cropped back to ``length``."""
    batch, _, per_residue = x.shape[:3]
    x = x.view(batch, heads, dilation, per_residue, *x.shape[3:]).transpose(2, 3)
    return x.reshape(batch, heads, dilation * per_residue, *x.shape[4:])[:, :, :length]


def _dilated_banded_attention(q, k, v, key_valid, window, dilation, causal, scale, need_lse):
    """``_banded_attention`` with dilation d: (B, H, N, D) in, (B, H, N, D) and (B, H, N) out."""
    if dilation == 1:
        return _banded_attention(q, k, v, key_valid, window, causal, scale, need_lse)
    heads, length = q.shape[1], q.shape[2]
    parts = [_to_residues(t, dilation) for t in (q, k, v)]
    # key_valid is (B, 1, N): its residues (B, d, M) are shared by every head, whose residue
    # subsequences are laid out head-major (head * d + r), hence the repeat.
    valid = _to_residues(key_valid.unsqueeze(-1), dilation, fill=False).squeeze(-1)
    valid = valid.repeat(1, heads, 1)
    out, lse = _banded_attention(*parts, valid, window, causal, scale, need_lse)
    out = _from_residues(out, heads, dilation, length)
    if lse is not None:
        lse = _from_residues(lse, heads, dilation, length)
    return out, lse


def _global_indices(is_global: Tensor) -> Tuple[Tensor, Tensor]:
    """Positions of each row's global tokens, in order: (B, G) long, and (B, G) bool slot validity."""
    counts = is_global.sum(dim=1)
    most = int(counts.max())
    order = torch.argsort((~is_global).to(torch.int8), dim=1, stable=True)[:, :most]
    slot_valid = torch.arange(most, device=is_global.device) < counts[:, None]
    return order, slot_valid


def _gather_rows(x: Tensor, index: Tensor) -> Tensor:
    """x: (B, H, N, D), index: (B, G) -> (B, H, G, D)."""
    return x.gather(2, index[:, None, :, None].expand(-1, x.shape[1], -1, x.shape[3]))


def sliding_chunks_attention(
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
    """Longformer attention in vectorized PyTorch. Inputs (B, H, N, D); returns (B, H, N, D).

    q_g, k_g, v_g may be None when no token is global. Any N works (padded internally).
    """
    is_global = check_inputs(q, k, v, q_g, k_g, v_g, masks)
    padding = masks.padding_or_none()
    batch, heads, length, head_dim = q.shape
    scale = default_scale(head_dim) if scale is None else scale
    out_dtype = q.dtype
    # fp16/bf16 are computed in fp32 (the softmax must not overflow); fp64 stays fp64.
    compute = torch.float64 if q.dtype == torch.float64 else torch.float32
    q, k, v = q.to(compute), k.to(compute), v.to(compute)

    # Global keys leave the band (they are attended through the global-key part, once).
    key_valid = torch.ones(batch, length, dtype=torch.bool, device=q.device)
    if padding is not None:
        key_valid &= ~padding
    if is_global is not None:
        key_valid &= ~is_global
    need_lse = is_global is not None

    dilations = pattern.dilation_per_head(heads)
    groups = [[h for h in range(heads) if dilations[h] == d] for d in sorted(set(dilations))]
    outs, lses = [], []
    for group in groups:
        # one group (a single dilation for every head, the usual case) runs on the tensors as
        # they are: indexing heads out and back would cost copies forward and backward
        select = (lambda t: t) if len(group) == heads else (lambda t: t[:, group])
        out, lse = _dilated_banded_attention(
            select(q), select(k), select(v), key_valid.unsqueeze(1), pattern.window,
            dilations[group[0]], pattern.causal, scale, need_lse,
        )
        outs.append(out)
        lses.append(lse)
    if len(groups) == 1:
        out, lse_band = outs[0], lses[0]
    else:  # concatenate the groups, then put the heads back in their order
        order = torch.argsort(torch.tensor([h for group in groups for h in group], device=q.device))
        out = torch.cat(outs, dim=1).index_select(1, order)
        lse_band = torch.cat(lses, dim=1).index_select(1, order) if need_lse else None

    if is_global is not None:
        index, slot_valid = _global_indices(is_global)
        # every query attends the global keys with the local projections; merge by log-sum-exp
        k_glob, v_glob = _gather_rows(k, index), _gather_rows(v, index)
        scores = torch.matmul(q * scale, k_glob.transpose(-1, -2))
        scores = scores.masked_fill(~slot_valid[:, None, None, :], MASKED_SCORE)
        lse_glob = torch.logsumexp(scores, dim=-1)
        lse = torch.logaddexp(lse_band, lse_glob)
        out = (out * torch.exp(lse_band - lse).unsqueeze(-1)
               + torch.matmul(torch.exp(scores - lse.unsqueeze(-1)), v_glob))

        # global queries attend every non-padding key with the global projections
        q_rows = _gather_rows(q_g.to(compute), index) * scale
        scores = torch.matmul(q_rows, k_g.to(compute).transpose(-1, -2))  # (B, H, G, N)
        if padding is not None:
            scores = scores.masked_fill(padding[:, None, None, :], MASKED_SCORE)
        global_out = torch.matmul(torch.softmax(scores, dim=-1), v_g.to(compute))
        scattered = torch.zeros_like(out).scatter(
            2, index[:, None, :, None].expand(-1, heads, -1, head_dim), global_out)
        out = torch.where(is_global[:, None, :, None], scattered, out)

    if padding is not None:
        out = out.masked_fill(padding[:, None, :, None], 0.0)
    return out.to(out_dtype)
