"""LongformerSelfAttention: the drop-in for fairseq's MultiheadAttention in an encoder layer.

It implements only the call fairseq's ``TransformerEncoderLayer`` makes,
``self_attn(query=x, key=x, value=x, key_padding_mask=..., need_weights=False, attn_mask=None)``
with x of shape (N, B, C), and rejects everything else loudly.

Parameter names follow fairseq's MultiheadAttention (q_proj, k_proj, v_proj, out_proj) so a
RoBERTa state dict loads as is; the global projections (q_global_proj, ...) are new.
"""
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import AttentionMasks, AttentionPattern, longformer_attention


@dataclass(frozen=True)
class LongformerLayerConfig:
    """Everything a layer's attention needs; built once from the fairseq args in build_model."""

    pattern: AttentionPattern
    impl: str = "auto"


class LongformerSelfAttention(nn.Module):
    """Multi-head Longformer self-attention.

    Input (N, B, C) time-first, as fairseq's encoder layers pass it; output (N, B, C).
    """

    def __init__(self, embed_dim: int, num_heads: int, config: LongformerLayerConfig, bias: bool = True):
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        config.pattern.dilation_per_head(num_heads)  # fail at build time, not at the first batch
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.config = config
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.q_global_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_global_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_global_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    @torch.no_grad()
    def copy_local_to_global(self) -> None:
        """Initialise Q_g, K_g, V_g as copies of Q, K, V (the paper's initialisation)."""
        for local, glob in ((self.q_proj, self.q_global_proj), (self.k_proj, self.k_global_proj),
                            (self.v_proj, self.v_global_proj)):
            glob.weight.copy_(local.weight)
            if local.bias is not None:
                glob.bias.copy_(local.bias)

    def _heads(self, x: Tensor) -> Tensor:
        """(N, B, C) -> (B, H, N, D), a view."""
        length, batch, _ = x.shape
        return x.view(length, batch, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        key_padding_mask: Union[AttentionMasks, Tensor, None] = None,
        need_weights: bool = False,
        attn_mask: Optional[Tensor] = None,
        **unsupported,
    ) -> Tuple[Tensor, None]:
        """query: (N, B, C); key_padding_mask: AttentionMasks, or a (B, N) bool padding mask."""
        if unsupported:
            raise TypeError(f"LongformerSelfAttention does not support {sorted(unsupported)}")
        if attn_mask is not None:
            raise ValueError("LongformerSelfAttention takes no attn_mask: the pattern defines the mask")
        if need_weights:
            raise ValueError("LongformerSelfAttention does not return attention weights (need_weights=False)")
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError("LongformerSelfAttention is self-attention only: key and value must be query")
        masks = key_padding_mask if isinstance(key_padding_mask, AttentionMasks) else AttentionMasks(key_padding_mask)

        # Projections run on the time-first (N, B, C) input as it comes (no transpose copy), and
        # the output projection writes time-first directly.
        x = query
        length, batch, _ = x.shape
        is_global = masks.global_or_none()
        # (One matmul on the stacked q/k/v weights was measured too: no faster on CPU, and it
        # keeps the stacked weight and its gradient as extra memory.)
        q, k, v = (self._heads(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))
        q_g = k_g = v_g = None
        if is_global is not None:
            k_g, v_g = self._heads(self.k_global_proj(x)), self._heads(self.v_global_proj(x))
            # Only the rows of global tokens of q_g are ever read: project just those rows
            # (G of N) and leave the rest zero, instead of a full (N, C) x (C, C) matmul.
            rows, positions = is_global.nonzero(as_tuple=True)
            q_rows = self.q_global_proj(x[positions, rows])
            q_g = self._heads(x.new_zeros(x.shape).index_put_((positions, rows), q_rows))
        out = longformer_attention(q, k, v, q_g, k_g, v_g, self.config.pattern, masks, impl=self.config.impl)
        out = out.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim)  # (N, B, C)

        bias = self.out_proj.bias
        if is_global is None and self.training and torch.is_grad_enabled():
            # No token is global (the usual case in MLM pretraining), so the global projections
            # get no gradient and DistributedDataParallel would stop with "parameters that were
            # not used in producing loss" (or need the slow find_unused_parameters=True).
            # Running them on an empty slice adds an exact 0 (to the output bias: a (C,) add,
            # not an (N, B, C) one) and gives them a zero gradient at no cost.
            empty = x[:0]
            zero = sum(p(empty).sum() for p in (self.q_global_proj, self.k_global_proj, self.v_global_proj))
            if bias is None:
                return F.linear(out, self.out_proj.weight) + zero, None
            bias = bias + zero
        return F.linear(out, self.out_proj.weight, bias), None
