"""Transformer-XL's relative positions (Dai et al., 2019, section 3.3) on a causal dilated window.

The score of query i and key j = i - s*d_h (step s of head h's band, d_h its dilation) is

    score(i, j) = scale * [(q_i + u) . k_j + (q_i + v) . R[h, s]],   R[h, s] = W_R^h r_{s * d_h}

with r_delta Transformer-XL's sinusoid of the distance delta = i - j (``sinusoid``), W_R a
per-layer projection without bias (Transformer-XL's ``r_net``), and u, v per-head biases
(Transformer-XL's ``r_w_bias``, ``r_r_bias``). The position term depends on the distance only,
and within a head's band the distance of step s is always s * d_h: so the whole term is a
(H, w + 1, D) table per layer and one einsum with the queries, handed to the attention core as
``band_bias`` (B, H, N, w + 1), added to the already-scaled score of the window keys. Nothing
depends on the absolute position, and a model evaluates at any length.

The band bias is as large as the band: (B, H, N, w + 1), 8.5 GB in fp16 per layer and sequence at
the char-LM's last phase (N = w = 23,040, 8 heads). Saved for backward by every layer it would
take ~100 GB. So ``RelativePositionScores.attend`` makes at most a budget of it at a time
(``BAND_BIAS_BUDGET_BYTES`` unless the model's ``--relative-bias-budget-mb`` says otherwise): above that, the heads are attended in groups, each group's bias made inside an
activation checkpoint (made, used and dropped in the forward; made again in the backward), so no
layer keeps a bias for backward and the largest one alive is one group's. The cost is one more
attention forward per layer in the backward of long sequences.

u and v are shared by every layer, as Transformer-XL's character-level models have them: its
PyTorch ``MemTransformerLM`` creates one ``r_w_bias`` and one ``r_r_bias`` of (n_head, d_head) and
passes them to each layer, and its TF code unties them only with ``--untie_r`` (default off), which
its word-level scripts (wt103, lm1b) set and its enwik8 / text8 scripts do not. The paper trained
its char-LM with Transformer-XL's code.

Shapes: B batch, H heads, N positions, D head dim, C = H * D the model dim, w the window.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from longformer_kernels import AttentionMasks, AttentionPattern, longformer_attention
from longformer_kernels.dropout import AttentionDropout
from longformer_kernels.pattern import default_scale

# Transformer-XL's init of r_w_bias / r_r_bias: normal with its --init_std 0.02
BIAS_INIT_STD = 0.02

# The default largest band bias made at once (bytes; a model's --relative-bias-budget-mb); above
# it the heads are attended in checkpointed groups (module docstring). 256 MiB keeps it well below
# a layer's other activations at 4,096 characters and makes one head's bias (about 1 GB fp16 at
# N = w = 23,040) the peak at the last phase.
BAND_BIAS_BUDGET_BYTES = 256 * 2 ** 20

# Odd 32-bit constant that moves each head group's dropout seed (Fibonacci hashing's 2^32 / phi)
_GROUP_SEED_STEP = 0x9E3779B1


def sinusoid(distances: Tensor, dim: int) -> Tensor:
    """Transformer-XL's r_delta: [sin(delta f), cos(delta f)], f_k = 1 / 10000 ** (2k / dim).

    distances: any shape (...) -> (..., dim) in float64. Float64 because the angles reach
    delta = w * d (tens of thousands of radians), where float32 keeps only about 3 digits of the
    phase; the caller casts the result.
    """
    if dim % 2:
        raise ValueError(f"the sinusoid needs an even model dimension, got {dim}")
    inv_freq = 1.0 / 10000 ** (torch.arange(0, dim, 2, dtype=torch.float64, device=distances.device) / dim)
    angles = distances.to(torch.float64)[..., None] * inv_freq
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class RelativePositionBiases(nn.Module):
    """u and v, one (D,) vector per head each: Transformer-XL's r_w_bias and r_r_bias.

    One instance is shared by every layer of a model (the decoder hands the same module to each
    layer's attention, as fairseq ties its input and output embeddings: the state dict lists it
    under every layer, the optimizer sees it once and its gradient sums over the layers).
    """

    def __init__(self, num_heads: int, head_dim: int):
        super().__init__()
        self.content_bias = nn.Parameter(torch.empty(num_heads, head_dim))   # u: added to q against k
        self.position_bias = nn.Parameter(torch.empty(num_heads, head_dim))  # v: added to q against R
        nn.init.normal_(self.content_bias, std=BIAS_INIT_STD)
        nn.init.normal_(self.position_bias, std=BIAS_INIT_STD)


class RelativePositionScores(nn.Module):
    """One causal layer's relative-position terms: the query against the keys, and the band bias.

    ``forward(q)`` -> (q + u, scale * (q + v) . R): the first is the query the attention core
    gets, the second its ``band_bias``; together they give Transformer-XL's score above.
    """

    def __init__(self, embed_dim: int, num_heads: int, pattern: AttentionPattern,
                 biases: Optional[RelativePositionBiases] = None, bias_budget_bytes: Optional[int] = None):
        super().__init__()
        # the largest band bias made at once (``attend``); None: BAND_BIAS_BUDGET_BYTES
        self.bias_budget_bytes = BAND_BIAS_BUDGET_BYTES if bias_budget_bytes is None else int(bias_budget_bytes)
        if self.bias_budget_bytes < 1:
            raise ValueError(f"the band-bias budget must be at least 1 byte, got {self.bias_budget_bytes}")
        if not pattern.causal:
            # Transformer-XL's positions are for a left-to-right model; the band bias of a
            # two-sided window would need signed distances, which nothing here defines
            raise ValueError("relative positions need a causal pattern (a left-to-right language model)")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.pattern = pattern
        self.window = pattern.window
        self.dilations: Tuple[int, ...] = pattern.dilation_per_head(num_heads)
        self.scale = default_scale(self.head_dim)
        self.r_proj = nn.Linear(embed_dim, embed_dim, bias=False)  # W_R, Transformer-XL's r_net
        # a layer built on its own owns its biases; a model passes one shared module to all layers
        self.biases = biases if biases is not None else RelativePositionBiases(num_heads, self.head_dim)
        if tuple(self.biases.content_bias.shape) != (num_heads, self.head_dim):
            raise ValueError(f"relative position biases of shape {tuple(self.biases.content_bias.shape)} "
                             f"for {num_heads} heads of {self.head_dim} dims")

    def table(self) -> Tensor:
        """R: (H, w + 1, D), R[h, s] = W_R^h r_{s * d_h}, in r_proj's dtype.

        Heads of equal dilation share one (w + 1, C) sinusoid (a layer has one or two distinct
        dilations), so no (H, w + 1, C) tensor is ever made: at w = 8,192 that would be 134 MB.
        """
        weight = self.r_proj.weight.view(self.num_heads, self.head_dim, -1)  # (H, D, C)
        steps = torch.arange(self.window + 1, device=weight.device)
        embedded = {}  # dilation -> (w + 1, C) sinusoid of the distances s * d
        rows = []
        for h, d in enumerate(self.dilations):
            if d not in embedded:
                embedded[d] = sinusoid(steps * d, weight.shape[-1]).to(weight.dtype)
            rows.append(torch.einsum("sc,dc->sd", embedded[d], weight[h]))
        return torch.stack(rows)

    def forward(self, q: Tensor, table: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """q: (B, H, T, D) unscaled queries -> (q + u: (B, H, T, D), band_bias: (B, H, T, w + 1)).

        ``band_bias[b, h, t, s]`` is the scaled position term of query t against the key s * d_h
        positions before it, whatever t's absolute position (so a full forward and a cached
        step-by-step one use the same values). ``table``: ``self.table()``, when computed already.
        """
        return self._terms(q, self.table() if table is None else table, slice(None))

    def _terms(self, q: Tensor, table: Tensor, heads: slice) -> Tuple[Tensor, Tensor]:
        """``forward`` for the heads ``heads``: q (B, h, T, D), table (h, w + 1, D)."""
        u = self.biases.content_bias[None, heads, None, :]
        v = self.biases.position_bias[None, heads, None, :]
        return q + u, torch.einsum("bhtd,hsd->bhts", (q + v) * self.scale, table)


    def heads_per_group(self, batch: int, length: int, element_size: int) -> int:
        """How many heads' band bias, (B, heads, N, w + 1), fit in ``self.bias_budget_bytes`` (>= 1)."""
        per_head = batch * length * (self.window + 1) * element_size
        return max(1, self.bias_budget_bytes // max(per_head, 1))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, masks: AttentionMasks, impl: str,
               dropout: Optional[AttentionDropout]) -> Tensor:
        """The attention core with the relative position terms: (B, H, N, D) unscaled q, k, v ->
        (B, H, N, D), Transformer-XL's score above over the causal dilated window.

        Heads in groups of ``heads_per_group`` (all at once when the whole bias fits the budget).
        Each group after the first draws its attention dropout from a seed of its own: a group's
        heads are numbered from 0 inside the core, and a shared seed would give heads h and
        h + group the same mask.
        """
        batch, heads, length, _ = q.shape
        table = self.table()
        group = self.heads_per_group(batch, length, q.element_size())
        if group >= heads:
            return self._attend_heads(q, k, v, table, 0, masks, impl, dropout)
        # a checkpoint only pays where a backward will run; without one, groups alone bound memory
        recompute = torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v, table))
        outputs = []
        for index, start in enumerate(range(0, heads, group)):
            heads_here = slice(start, start + group)
            group_dropout = dropout
            if dropout is not None and index:
                group_dropout = AttentionDropout(dropout.p, (dropout.seed + index * _GROUP_SEED_STEP) % 2 ** 31)
            inputs = (q[:, heads_here], k[:, heads_here], v[:, heads_here], table[heads_here], start,
                      masks, impl, group_dropout)
            if recompute:
                outputs.append(checkpoint(self._attend_heads, *inputs, use_reentrant=False))
            else:
                outputs.append(self._attend_heads(*inputs))
        return torch.cat(outputs, dim=1)

    def _attend_heads(self, q: Tensor, k: Tensor, v: Tensor, table: Tensor, first_head: int,
                      masks: AttentionMasks, impl: str, dropout: Optional[AttentionDropout]) -> Tensor:
        """Heads first_head .. first_head + h - 1: q, k, v (B, h, N, D), table (h, w + 1, D)."""
        heads = slice(first_head, first_head + q.shape[1])
        q_content, band_bias = self._terms(q, table, heads)
        pattern = AttentionPattern(self.window, self.dilations[heads], causal=True)
        return longformer_attention(q_content, k, v, None, None, None, pattern, masks, impl=impl,
                                    global_rows=False, dropout=dropout, band_bias=band_bias)
