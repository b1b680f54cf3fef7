"""LongformerSelfAttention: the drop-in for fairseq's MultiheadAttention, and its config.

One module for every place a model needs Longformer self-attention: RoBERTa's and BART's
encoder layers (``self_attn(query=x, key=x, value=x, key_padding_mask=..., need_weights=False,
attn_mask=None)``) and a causal decoder layer's full-sequence call (fairseq's
``TransformerDecoderLayer`` adds ``incremental_state=None`` and the (N, N) future mask).
x is (N, B, C); anything else is rejected loudly.
"""
from dataclasses import dataclass
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from longformer_kernels import (
    IMPLEMENTATIONS, AttentionDropout, AttentionMasks, AttentionPattern, longformer_attention,
)
from longformer_kernels.dropout import global_rows_keep
from longformer_kernels.pattern import MASKED_SCORE, default_scale, raise_causal_global

from .relative_positions import RelativePositionBiases, RelativePositionScores


class _KeyMix(torch.autograd.Function):
    """mixed = D^T X and mass = rowsum(D) with D = softmax over the N keys of (X F^T + query_bias
    + key_bias), times the dropout multipliers if any: the global rows' attention, in the model
    dimension (see ``_global_rows``).

    keys X: (B, N, C); folded F: (B, Q, C), Q = heads * global slots; query_bias: (B, 1, Q);
    key_bias: (B, N, 1), constant; dropped: (B, N, Q) multipliers (0 or 1 / (1 - p)) or None.
    Returns mixed (B, Q, C) and mass (B, 1, Q) (all ones without dropout).

    Why not autograd: X is used twice, so autograd makes two (B, N, C) gradients and adds them;
    here both parts come out of one matmul, [dS, D] @ [F; dM]. At N = 4096 the fresh (N, C)
    gradient and the add cost about as much as a matmul (measured).
    """

    @staticmethod
    def forward(ctx, keys, folded, query_bias, key_bias, dropped):
        # key-major scores (B, N, Q): the matmuls below then produce row-major (B, N, ...) results
        scores = torch.baddbmm(query_bias + key_bias, keys, folded.transpose(1, 2))
        probs = torch.softmax(scores, dim=1)
        kept = probs if dropped is None else probs * dropped
        ctx.save_for_backward(keys, folded, probs, dropped)
        mass = probs.new_ones(probs.shape[0], 1, probs.shape[2]) if dropped is None else kept.sum(1, keepdim=True)
        return torch.bmm(kept.transpose(1, 2), keys), mass

    @staticmethod
    def backward(ctx, grad_mixed, grad_mass):
        keys, folded, probs, dropped = ctx.saved_tensors
        grad_mixed = grad_mixed.contiguous()
        grad_kept = torch.bmm(keys, grad_mixed.transpose(1, 2))  # (B, N, Q)
        if dropped is None:  # mass is constant: rows of a softmax sum to 1
            kept, grad_probs = probs, grad_kept
        else:
            kept = probs * dropped
            grad_probs = grad_kept.add_(grad_mass).mul_(dropped)
        grad_scores = grad_probs.sub_((grad_probs * probs).sum(dim=1, keepdim=True)).mul_(probs)
        grad_keys = torch.bmm(torch.cat([grad_scores, kept], dim=2), torch.cat([folded, grad_mixed], dim=1))
        grad_folded = torch.bmm(grad_scores.transpose(1, 2), keys)
        return grad_keys, grad_folded, grad_scores.sum(dim=1, keepdim=True), None, None


@dataclass(frozen=True)
class LongformerAttentionConfig:
    """Everything one layer's attention needs; built once per layer by ``attention_configs``.

    pattern: window, dilation per head, causal. impl: auto / torch / triton / reference.
    global_projections: the layer has Q_g, K_g, V_g (a model that never uses global attention,
    such as a causal LM, must not carry their 3 C^2 weights). dropout: on the attention
    probabilities, in training only. relative_positions: Transformer-XL's relative position
    terms in the scores (``relative_positions.py``; causal patterns only), their band bias made
    at most ``relative_bias_budget_mb`` MiB at a time (None: that module's default).
    """

    pattern: AttentionPattern
    impl: str = "auto"
    global_projections: bool = True
    dropout: float = 0.0
    relative_positions: bool = False
    relative_bias_budget_mb: Optional[float] = None

    def __post_init__(self):
        if self.impl not in IMPLEMENTATIONS:
            raise ValueError(f"attention implementation must be one of {IMPLEMENTATIONS}, got {self.impl!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"--attention-dropout must be in [0, 1), got {self.dropout!r}")
        if self.pattern.causal and self.global_projections:
            raise_causal_global()
        if self.relative_positions and not self.pattern.causal:
            raise ValueError("relative positions need a causal pattern (a left-to-right language model)")
        if self.relative_bias_budget_mb is not None and not self.relative_bias_budget_mb > 0:
            raise ValueError(f"--relative-bias-budget-mb must be > 0, got {self.relative_bias_budget_mb!r}")


class LongformerSelfAttention(nn.Module):
    """Multi-head Longformer self-attention: the one module for every model that needs it.

    Input (N, B, C) time-first, as fairseq's layers pass it; output (N, B, C). It implements the
    call fairseq's ``TransformerEncoderLayer`` makes and the full-sequence (training) call of
    ``TransformerDecoderLayer``, and rejects everything else loudly.

    Parameter names follow fairseq's MultiheadAttention (q_proj, k_proj, v_proj, out_proj) so a
    RoBERTa or BART state dict loads as is; the global projections (q_global_proj, ...) exist
    only when ``config.global_projections``, the relative position terms (``relative_positions``:
    W_R and the u, v biases, ``relative_biases`` when a model shares them) only when
    ``config.relative_positions``.
    """

    def __init__(self, embed_dim: int, num_heads: int, config: LongformerAttentionConfig, bias: bool = True,
                 relative_biases: Optional[RelativePositionBiases] = None):
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
        if config.global_projections:
            self.q_global_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
            self.k_global_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
            self.v_global_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.relative_positions = None
        if config.relative_positions:
            budget = config.relative_bias_budget_mb
            self.relative_positions = RelativePositionScores(
                embed_dim, num_heads, config.pattern, relative_biases,
                bias_budget_bytes=None if budget is None else max(1, int(budget * 2 ** 20)))
        elif relative_biases is not None:
            raise ValueError("relative position biases were given to an attention without relative positions")

    def _heads(self, x: Tensor) -> Tensor:
        """(N, B, C) -> (B, H, N, D), a view."""
        length, batch, _ = x.shape
        return x.view(length, batch, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

    def _global_rows(self, x: Tensor, masks: AttentionMasks, dropout: Optional[AttentionDropout]):
        """The output rows of the global tokens: attention over every non-padding key with the
        global projections, computed through the weights instead of through K_g and V_g.

        With Kg = X Wk^T + bk and Vg = X Wv^T + bv per head, softmax(qg Kg^T) Vg equals
        softmax((qg Wk) X^T + qg.bk) (P X) Wv^T + rowsum(P) bv. That costs O(H G N C) for G
        global tokens instead of the O(N C^2) of projecting all N tokens twice: 8 global tokens,
        12 heads and C = 768 need 8x fewer flops, and nothing of size N x C is kept for backward.
        Same function, same parameters used (qg.bk only shifts a row's scores, as in the
        unfactorised form where its gradient is likewise zero up to rounding). rowsum(P) is 1
        without dropout; with it, P carries the keep mask of (b, h, global position, key).

        x: (N, B, C). Returns values (B, G, C), slot g of row b for its global token
        (masks.global_index); an unused slot holds a stand-in that ``put_global_rows`` drops.
        """
        heads, head_dim, most = self.num_heads, self.head_dim, masks.max_global
        batch = x.shape[1]
        # (B, G, H, D) scaled global queries; an unused slot (a row with fewer global tokens)
        # gets position 0's, whose row nothing reads: every slot is computed alike, so the
        # shapes depend on G only (a static G compiles without a host read)
        tokens = x.transpose(0, 1)[torch.arange(batch, device=x.device)[:, None], masks.global_index]
        queries = (self.q_global_proj(tokens) * default_scale(head_dim)).view(batch, most, heads, head_dim)
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
        if masks.padding is not None:
            key_bias.masked_fill_(masks.padding.unsqueeze(-1), MASKED_SCORE)
        dropped = None if dropout is None else self._global_rows_dropout(dropout, masks, x.shape[0], compute)
        mixed, mass = _KeyMix.apply(keys_in, folded, query_bias, key_bias, dropped)
        w_value = self.v_global_proj.weight.to(compute).view(heads, head_dim, -1)
        values = torch.einsum("bhgc,hdc->bghd", mixed.view(batch, heads, most, -1), w_value)
        if self.v_global_proj.bias is not None:
            bias = self.v_global_proj.bias.to(compute).view(heads, head_dim)
            if dropout is None:
                values = values + bias
            else:
                values = values + mass.view(batch, heads, most).transpose(1, 2)[..., None] * bias
        return values.reshape(batch, most, self.embed_dim).to(x.dtype)

    def _global_rows_dropout(self, dropout: AttentionDropout, masks: AttentionMasks, length: int, dtype) -> Tensor:
        """(B, N, H * G) key-major multipliers of the global rows: the mask of ``dropout.py``."""
        keep = global_rows_keep(dropout, masks.global_index, self.num_heads, length)  # (B, H, G, N)
        return keep.flatten(1, 2).transpose(1, 2).to(dtype).mul_(dropout.keep_scale)

    def _dropout(self) -> Optional[AttentionDropout]:
        """A fresh keep mask per call in training (seed from torch's CPU generator, so fairseq's
        --seed makes it reproducible and no device sync is needed); none in eval."""
        if not self.training or self.config.dropout == 0.0:
            return None
        return AttentionDropout(self.config.dropout, int(torch.randint(0, 2 ** 31 - 1, (1,))))

    def attend(self, x: Tensor, masks: AttentionMasks) -> Tensor:
        """The heads' attention output before the output projection: (N, B, C) -> (N, B, C).

        This is the part Hugging Face's ``LongformerSelfAttention`` covers (q/k/v and global
        projections plus attention; its output projection lives in another module), so
        ``longformer-bench`` can compare the two at the same boundary.
        """
        length, batch, _ = x.shape
        if masks.is_global is not None and not self.config.global_projections:
            if self.config.pattern.causal:
                raise_causal_global()
            raise ValueError("global tokens were given, but this attention was built without global "
                             "projections (LongformerAttentionConfig.global_projections=False)")
        dropout = self._dropout()

        # Projections run on the time-first (N, B, C) input as it comes (no transpose copy), and
        # the output projection writes time-first directly.
        # (One matmul on the stacked q/k/v weights was measured too: no faster on CPU, and it
        # keeps the stacked weight and its gradient as extra memory.)
        q, k, v = (self._heads(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))
        if self.relative_positions is not None:
            # Transformer-XL: the query q + u meets the keys, q + v the distances (a band bias);
            # causal, so no global tokens
            out = self.relative_positions.attend(q, k, v, masks, self.config.impl, dropout)
        else:
            # Local rows attend the global keys with the local projections, in the attention call.
            # Its global rows are replaced below by rows computed with the global projections
            # (_global_rows), so it is told to skip them (global_rows=False): no K_g, V_g over all
            # N tokens is ever made.
            out = longformer_attention(q, k, v, None, None, None, self.config.pattern, masks,
                                       impl=self.config.impl, global_rows=False, dropout=dropout)
        out = out.permute(2, 0, 1, 3).reshape(length, batch, self.embed_dim)  # (N, B, C)
        if masks.is_global is not None:
            with torch.autocast(x.device.type, enabled=False):  # it computes in fp32 itself, and
                values = self._global_rows(x, masks, dropout)  # its backward would meet autocast's bf16
            # the core's dtype: under autocast it runs in autocast's dtype while x stays fp32
            out = masks.put_global_rows(out.transpose(0, 1), values.to(out.dtype)).transpose(0, 1)
        return out

    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor] = None,
        value: Optional[Tensor] = None,
        key_padding_mask: Union[AttentionMasks, Tensor, None] = None,
        need_weights: bool = False,
        attn_mask: Optional[Tensor] = None,
        incremental_state: Optional[dict] = None,
        **unsupported,
    ) -> Tuple[Tensor, None]:
        """query: (N, B, C); key_padding_mask: AttentionMasks, or a (B, N) bool padding mask.

        ``attn_mask`` is accepted only from a causal layer, where it is the future mask fairseq's
        decoder passes ((N, N), -inf above the diagonal), which the causal pattern already
        implies; every other mask is refused, since the pattern defines the mask.
        """
        if unsupported:
            raise TypeError(f"LongformerSelfAttention does not support {sorted(unsupported)}")
        if attn_mask is not None and not (self.config.pattern.causal
                                          and tuple(attn_mask.shape) == (query.shape[0], query.shape[0])):
            raise ValueError("LongformerSelfAttention takes no attn_mask (the pattern defines the mask); a "
                             "causal layer accepts only the decoder's (N, N) future mask")
        if need_weights:
            raise ValueError("LongformerSelfAttention does not return attention weights (need_weights=False)")
        if (key is not None and key is not query) or (value is not None and value is not query):
            raise ValueError("LongformerSelfAttention is self-attention only: key and value must be query")
        if incremental_state is not None:
            return self.incremental_forward(query, key_padding_mask, incremental_state), None
        masks = key_padding_mask if isinstance(key_padding_mask, AttentionMasks) else AttentionMasks(key_padding_mask)
        out = self.attend(query, masks)

        bias = self.out_proj.bias
        if (masks.is_global is None and self.config.global_projections and self.training
                and torch.is_grad_enabled()):
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

    # Step-by-step decoding lives in the causal subclass (incremental.py,
    # IncrementalLongformerSelfAttention, which the decoder layer builds); this class has none.
    # fairseq's TransformerDecoderLayer asks every self-attention for its incremental-decoding
    # buffer before calling it.
    def incremental_forward(self, query: Tensor, key_padding_mask, incremental_state: dict) -> Tensor:
        """(T, B, C) new positions -> (T, B, C), with a cache in ``incremental_state``."""
        raise NotImplementedError(_NO_INCREMENTAL)

    def _get_input_buffer(self, incremental_state) -> dict:
        if incremental_state is not None:
            raise NotImplementedError(_NO_INCREMENTAL)
        return {}

    def _set_input_buffer(self, incremental_state, buffer) -> None:
        raise NotImplementedError(_NO_INCREMENTAL)


_NO_INCREMENTAL = ("this LongformerSelfAttention has no incremental (step-by-step) decoding; a causal "
                   "decoder layer's IncrementalLongformerSelfAttention (modules/incremental.py) has")

