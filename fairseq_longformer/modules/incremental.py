"""Causal Longformer self-attention with a bounded key/value cache, for step-by-step decoding.

``IncrementalLongformerSelfAttention`` is ``LongformerSelfAttention`` plus fairseq's incremental
protocol (``incremental_state``, ``_get_input_buffer`` / ``_set_input_buffer``,
``reorder_incremental_state``), which ``SequenceGenerator`` and sampling drive one token at a
time. It is what the causal decoder layer of ``longformer_lm`` builds; encoders never need it.

Why the cache is bounded: under the causal pattern a query at position i attends only the keys
i - s*d for s = 0 .. w (``kernels/pattern.py``), so no query from position i on can ever reach
further back than i - w*d. Each layer keeps the keys and values of its last ``w * max(d)``
positions (max over its heads, the farthest any head reaches) and drops older ones: the memory
of a generation does not grow with its length.

Shapes (legend in ``kernels/pattern.py``): x (T, B, C) time-first, T new positions per call
(fairseq's decoder passes T = 1; a first call may pass a whole prompt); cache "prev_key" and
"prev_value" (B, H, L, D) with L <= w * max(d); with relative positions also "relative_table"
(H, w + 1, D), which has no batch dimension, so beam reordering leaves it as it is.

Relative positions need nothing more from the cache: the position term depends on the distance
only, and key j of a query at i sits at distance s*d with s its index in the gathered band below,
whatever the absolute positions; so step s gets the same ``band_bias`` column as in the full
forward (``relative_positions.py``).
"""
from typing import Dict, Optional

import torch
from fairseq.incremental_decoding_utils import with_incremental_state
from torch import Tensor

from longformer_kernels.pattern import default_scale

from .relative_positions import RelativePositionBiases
from .self_attention import LongformerAttentionConfig, LongformerSelfAttention

_CACHE_KEY = "attn_state"


@with_incremental_state
class IncrementalLongformerSelfAttention(LongformerSelfAttention):
    """Causal LongformerSelfAttention that also decodes step by step with a bounded cache.

    Without ``incremental_state`` it is exactly ``LongformerSelfAttention`` (training, scoring,
    ``fairseq-eval-lm``). With it (``forward`` checks the call, then ``incremental_forward``),
    each call attends its T new positions to the cached keys and values plus their own, and
    leaves the last ``cache_span`` positions in the cache.
    """

    def __init__(self, embed_dim: int, num_heads: int, config: LongformerAttentionConfig, bias: bool = True,
                 relative_biases: Optional[RelativePositionBiases] = None):
        if not config.pattern.causal:
            raise ValueError("step-by-step decoding needs a causal pattern (--attention-causal)")
        super().__init__(embed_dim, num_heads, config, bias=bias, relative_biases=relative_biases)
        dilations = config.pattern.dilation_per_head(num_heads)
        window = config.pattern.window
        self.cache_span = window * max(dilations)
        # (H, w + 1) how far back, in positions, step s of each head's band reaches: s * d_h
        steps = torch.arange(window + 1)
        self.register_buffer("band_offsets", torch.tensor(dilations)[:, None] * steps, persistent=False)

    # fairseq's decoder layer reads this buffer before every call (for cross_self_attention);
    # without incremental_state there is none.
    def _get_input_buffer(self, incremental_state) -> Dict[str, Optional[Tensor]]:
        buffer = self.get_incremental_state(incremental_state, _CACHE_KEY)
        return {} if buffer is None else buffer

    def _set_input_buffer(self, incremental_state, buffer: Dict[str, Optional[Tensor]]):
        return self.set_incremental_state(incremental_state, _CACHE_KEY, buffer)

    @torch.jit.unused
    def reorder_incremental_state(self, incremental_state, new_order: Tensor):
        """Beam search reorders (and prunes) hypotheses: follow them with the cache (batch dim)."""
        buffer = self._get_input_buffer(incremental_state)
        if buffer:
            for name in ("prev_key", "prev_value"):
                if buffer.get(name) is not None:
                    buffer[name] = buffer[name].index_select(0, new_order)
            self._set_input_buffer(incremental_state, buffer)
        return incremental_state

    def incremental_forward(self, query: Tensor, key_padding_mask, incremental_state: dict) -> Tensor:
        """query: (T, B, C) new positions -> (T, B, C); ``forward`` has checked the call already."""
        padding = getattr(key_padding_mask, "padding", key_padding_mask)
        if padding is not None and bool(padding.any()):
            # fairseq's generators never feed padding step by step (finished hypotheses leave the
            # batch); a cache with holes would need a padding buffer of its own
            raise ValueError("step-by-step decoding got padding tokens: feed only real tokens, or score "
                             "padded batches with a full forward (no incremental_state)")
        if self.training and self.config.dropout > 0:
            raise ValueError("step-by-step decoding is for inference: call model.eval() first (attention "
                             "dropout would make the cached steps differ from the full forward)")
        return self.out_proj(self._step(query, incremental_state))

    def _step(self, x: Tensor, incremental_state: dict) -> Tensor:
        """Attend T new positions to the cache and themselves; update the cache.

        x: (T, B, C). Returns the heads' output before the output projection, (T, B, C).
        """
        new, batch, _ = x.shape
        q, k, v = (self._heads(p(x)) for p in (self.q_proj, self.k_proj, self.v_proj))  # (B, H, T, D)
        buffer = self._get_input_buffer(incremental_state)
        band_bias = None
        if self.relative_positions is not None:
            # the (H, w + 1, D) table depends on the weights only: made once per generation and
            # kept with the cache, not remade for every token
            if buffer.get("relative_table") is None:
                buffer["relative_table"] = self.relative_positions.table()
            q, band_bias = self.relative_positions(q, buffer["relative_table"])  # q + u; (B, H, T, w + 1) by step s
        if buffer.get("prev_key") is not None:
            if buffer["prev_key"].shape[0] != batch:
                raise ValueError(f"the cache holds {buffer['prev_key'].shape[0]} sequences, this step "
                                 f"{batch}: reorder it with reorder_incremental_state first")
            k = torch.cat([buffer["prev_key"], k], dim=2)
            v = torch.cat([buffer["prev_value"], v], dim=2)
        total = k.shape[2]  # cached positions + T new ones
        # Key index of step s of head h for new query t: (total - T + t) - s * d_h, (H, T, w + 1).
        # An index below 0 lies before the first token and is masked; once the cache holds its
        # full span none is, since s * d_h <= w * max(d) = cache_span.
        rows = torch.arange(total - new, total, device=x.device)
        index = rows[None, :, None] - self.band_offsets.to(x.device)[:, None, :]
        outside = index < 0
        index = index.clamp(min=0)
        # fp32 scores and softmax whatever the input dtype (fp64 stays fp64), as every path does
        compute = torch.float64 if x.dtype == torch.float64 else torch.float32
        band = index.flatten(1)[None, :, :, None].expand(batch, -1, -1, self.head_dim)  # (B, H, T(w+1), D)
        keys = k.gather(2, band).view(batch, self.num_heads, new, -1, self.head_dim).to(compute)
        values = v.gather(2, band).view(batch, self.num_heads, new, -1, self.head_dim).to(compute)
        scores = torch.einsum("bhtd,bhtsd->bhts", q.to(compute) * default_scale(self.head_dim), keys)
        if band_bias is not None:
            scores = scores + band_bias.to(compute)
        scores = scores.masked_fill(outside, float("-inf"))  # step 0 (the query itself) is always in
        out = torch.einsum("bhts,bhtsd->bhtd", torch.softmax(scores, dim=-1), values).to(x.dtype)

        # keep only what a later query can reach: the last w * max(d) positions
        keep = min(total, self.cache_span)
        buffer["prev_key"] = k[:, :, total - keep:]
        buffer["prev_value"] = v[:, :, total - keep:]
        self._set_input_buffer(incremental_state, buffer)
        return out.permute(2, 0, 1, 3).reshape(new, batch, self.embed_dim)
