"""Transformer-XL's relative positions (Dai et al., 2019, section 3.3) on a causal dilated window.

The score of query i and key j = i - s*d_h (step s of head h's band, d_h its dilation) is

    score(i, j) = scale * [(q_i + u) . k_j + (q_i + v) . R[h, s]],   R[h, s] = W_R^h r_{s * d_h}

with r_delta Transformer-XL's sinusoid of the distance delta = i - j (``sinusoid``), W_R a
per-layer projection without bias (Transformer-XL's ``r_net``), and u, v per-head biases
(Transformer-XL's ``r_w_bias``, ``r_r_bias``). The position term depends on the distance only,
and within a head's band the distance of step s is always s * d_h: so the whole term is a
(H, w + 1, D) table per layer and one einsum with the queries, handed to the attention core as
``band_bias`` (B, H, N, w + 1), added to the already-scaled score of the window keys. Nothing is
N x N, nothing depends on the absolute position, and a model evaluates at any length.

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

from longformer_kernels import AttentionPattern
from longformer_kernels.pattern import default_scale

# Transformer-XL's init of r_w_bias / r_r_bias: normal with its --init_std 0.02
BIAS_INIT_STD = 0.02


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
                 biases: Optional[RelativePositionBiases] = None):
        super().__init__()
        if not pattern.causal:
            # Transformer-XL's positions are for a left-to-right model; the band bias of a
            # two-sided window would need signed distances, which nothing here defines
            raise ValueError("relative positions need a causal pattern (a left-to-right language model)")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
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
        table = self.table() if table is None else table
        u = self.biases.content_bias[None, :, None, :]
        v = self.biases.position_bias[None, :, None, :]
        band_bias = torch.einsum("bhtd,hsd->bhts", (q + v) * self.scale, table)
        return q + u, band_bias

