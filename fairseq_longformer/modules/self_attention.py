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
from ..attention.pattern import MASKED_SCORE, default_scale


class _KeyMix(torch.autograd.Function):
    """mixed = P^T X with P = softmax over the N keys of (X F^T + query_bias + key_bias): the
    global rows' attention, in the model dimension (see ``_global_rows``).

    keys X: (B, N, C); folded F: (B, Q, C), Q = heads * global slots; query_bias: (B, 1, Q);
    key_bias: (B, N, 1), constant. Returns (B, Q, C).

    Why not autograd: X is used twice, so autograd makes two (B, N, C) gradients and adds them;
    here both parts come out of one matmul, [dS, P] @ [F; dM]. At N = 4096 the fresh (N, C)
    gradient and the add cost about as much as a matmul (measured).
    """

    @staticmethod
    def forward(ctx, keys, folded, query_bias, key_bias):
        # key-major scores (B, N, Q): the matmuls below then produce row-major (B, N, ...) results
        scores = torch.baddbmm(query_bias + key_bias, keys, folded.transpose(1, 2))
        probs = torch.softmax(scores, dim=1)
        ctx.save_for_backward(keys, folded, probs)
        return torch.bmm(probs.transpose(1, 2), keys)

    @staticmethod
    def backward(ctx, grad_mixed):
        keys, folded, probs = ctx.saved_tensors
        grad_mixed = grad_mixed.contiguous()
        grad_probs = torch.bmm(keys, grad_mixed.transpose(1, 2))  # (B, N, Q)
        grad_scores = grad_probs.sub_((grad_probs * probs).sum(dim=1, keepdim=True)).mul_(probs)
        grad_keys = torch.bmm(torch.cat([grad_scores, probs], dim=2), torch.cat([folded, grad_mixed], dim=1))
        grad_folded = torch.bmm(grad_scores.transpose(1, 2), keys)
        return grad_keys, grad_folded, grad_scores.sum(dim=1, keepdim=True), None


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

    def _global_rows(self, x: Tensor, is_global: Tensor, padding: Optional[Tensor]):
        """The output rows of the global tokens: attention over every non-padding key with the
        global projections, computed through the weights instead of through K_g and V_g.

        With Kg = X Wk^T + bk and Vg = X Wv^T + bv per head, softmax(qg Kg^T) Vg equals
        softmax((qg Wk) X^T + qg.bk) (P X) Wv^T + bv, because each row of P sums to 1. That costs
        O(H G N C) for G global tokens instead of the O(N C^2) of projecting all N tokens twice:
        8 global tokens, 12 heads and C = 768 need 8x fewer flops, and nothing of size N x C is
        kept for backward. Same function, same parameters used (qg.bk only shifts a row's scores,
        as in the unfactorised form where its gradient is likewise zero up to rounding).

        x: (N, B, C); is_global, padding: (B, N) bool. Returns positions (K,), batch rows (K,)
        and values (K, C) for the K global tokens.
        """
        heads, head_dim = self.num_heads, self.head_dim
        batch = x.shape[1]
        rows, positions = is_global.nonzero(as_tuple=True)  # by batch row, then position
        counts = is_global.sum(dim=1)
        slots = torch.arange(rows.numel(), device=x.device) - (torch.cumsum(counts, 0) - counts)[rows]
        most = int(counts.max())
        # (B, G, H, D) scaled global queries; empty slots (rows with fewer global tokens) stay 0
        q_rows = self.q_global_proj(x[positions, rows]) * default_scale(head_dim)
        queries = q_rows.new_zeros(batch, most, heads, head_dim)
        queries[rows, slots] = q_rows.view(-1, heads, head_dim)
        # scores and softmax in fp32 whatever the input dtype, as in every attention path
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        keys_in = x.transpose(0, 1).to(compute)  # (B, N, C), a view when x is fp32
        queries = queries.to(compute)
        w_key = self.k_global_proj.weight.to(compute).view(heads, head_dim, -1)
        folded = torch.einsum("bghd,hdc->bhgc", queries, w_key).reshape(batch, heads * most, -1)
        if self.k_global_proj.bias is not None:
            bias = self.k_global_proj.bias.to(compute).view(heads, head_dim)
            query_bias = torch.einsum("bghd,hd->bhg", queries, bias).reshape(batch, 1, -1)
        else:
            query_bias = torch.zeros(batch, 1, heads * most, dtype=compute, device=x.device)
        key_bias = torch.zeros(batch, x.shape[0], 1, dtype=compute, device=x.device)
        if padding is not None:
            key_bias.masked_fill_(padding.unsqueeze(-1), MASKED_SCORE)
        mixed = _KeyMix.apply(keys_in, folded, query_bias, key_bias).view(batch, heads, most, -1)
        w_value = self.v_global_proj.weight.to(compute).view(heads, head_dim, -1)
        values = torch.einsum("bhgc,hdc->bghd", mixed, w_value)
        if self.v_global_proj.bias is not None:
            values = values + self.v_global_proj.bias.to(compute).view(heads, head_dim)
        return positions, rows, values[rows, slots].reshape(-1, self.embed_dim).to(x.dtype)

    def attend(self, x: Tensor, masks: AttentionMasks) -> Tensor:
        """The heads' attention output before the output projection: (N, B, C) -> (N, B, C).

        This is the part Hugging Face's ``LongformerSelfAttention`` covers (q/k/v and global
        projections plus attention; its output projection lives in another module), so
        ``longformer-bench`` can compare the two at the same boundary.
        """
        length, batch, _ = x.shape
        is_global = masks.global_or_none()

        # Projections run on the time-first (N, B, C) input as it comes (no transpose copy), and
        # the output projection writes time-first directly.
        # (One matmul on the stacked q/k/v weights was measured too: no faster on CPU, and it
        # keeps the stacked weight and its gradient as extra memory.)
        q, k, v = (self._heads(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))
        if is_global is None:
            out = longformer_attention(q, k, v, None, None, None, self.config.pattern, masks,
                                       impl=self.config.impl)
        else:
            # Local rows attend the global keys with the local projections, in the attention
            # call. Its global rows are replaced below by rows computed with the global
            # projections (_global_rows), so it is told to skip them (global_rows=False; the
            # Triton kernel computes them anyway, from the detached q, k, v it gets in place of
            # q_g, k_g, v_g): no K_g, V_g over all N tokens is ever made, and the throw-away
            # rows cost no autograd memory.
            stand_ins = (q.detach(), k.detach(), v.detach())
            out = longformer_attention(q, k, v, *stand_ins, self.config.pattern, masks, impl=self.config.impl,
                                       global_rows=False)
        out = out.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim)  # (N, B, C)
        if is_global is not None:
            positions, rows, values = self._global_rows(x, is_global, masks.padding_or_none())
            out = out.index_put((positions, rows), values)
        return out

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
        out = self.attend(query, masks)

        bias = self.out_proj.bias
        if masks.global_or_none() is None and self.training and torch.is_grad_enabled():
            # No token is global (the usual case in MLM pretraining), so the global projections
            # get no gradient and DistributedDataParallel would stop with "parameters that were
            # not used in producing loss" (or need the slow find_unused_parameters=True).
            # Running them on an empty slice adds an exact 0 (to the output bias: a (C,) add,
            # not an (N, B, C) one) and gives them a zero gradient at no cost.
            empty = query[:0]
            zero = sum(p(empty).sum() for p in (self.q_global_proj, self.k_global_proj, self.v_global_proj))
            if bias is None:
                return F.linear(out, self.out_proj.weight) + zero, None
            bias = bias + zero
        return F.linear(out, self.out_proj.weight, bias), None
