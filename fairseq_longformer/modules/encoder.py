"""fairseq's Transformer encoder with Longformer self-attention, through fairseq's builders.

``LongformerEncoder`` overrides ``build_encoder_layer`` (layers from ``layers.py``) and its
forward, which builds the typed ``AttentionMasks`` (padding and global tokens, with the index
lists and counts every layer needs) once per forward and carries it down to every layer.
``max_global_tokens`` (an int the caller knows on the host, e.g. the batch's largest global
count rounded up to a bucket) sizes the global tensors without reading the count from the
device: then the whole encoder compiles as one graph (``torch.compile(fullgraph=True)``), see
``AttentionMasks``.
fairseq's layer hands its ``encoder_padding_mask`` argument to ``self_attn(key_padding_mask=...)``
untouched, so the masks object travels that way.

Shapes: src_tokens (B, N); hidden states (N, B, C) as in fairseq.
"""
from typing import Optional, Sequence

import torch
from fairseq.models.transformer import TransformerEncoder
from torch import Tensor

from longformer_kernels import AttentionMasks
from .layers import LongformerEncoderLayer, wrap_layer
from .self_attention import LongformerAttentionConfig


class LongformerEncoder(TransformerEncoder):
    """TransformerEncoder whose layer i uses ``layer_configs[i]`` (window may differ per layer)."""

    def __init__(self, args, dictionary, embed_tokens, layer_configs: Sequence[LongformerAttentionConfig]):
        if len(layer_configs) != args.encoder_layers:
            raise ValueError(f"{len(layer_configs)} layer configs for {args.encoder_layers} layers")
        # fairseq builds the layers inside __init__ one call at a time, without an index:
        # hand them their configs in order.
        self._pending_layer_configs = iter(layer_configs)
        super().__init__(args, dictionary, embed_tokens)
        del self._pending_layer_configs

    def build_encoder_layer(self, args):
        return wrap_layer(LongformerEncoderLayer(args, next(self._pending_layer_configs)), args)

    def forward(
        self,
        src_tokens: Tensor,
        src_lengths: Optional[Tensor] = None,
        return_all_hiddens: bool = False,
        token_embeddings: Optional[Tensor] = None,
        global_attention_mask: Optional[Tensor] = None,
        max_global_tokens: Optional[int] = None,
    ):
        """src_tokens: (B, N); global_attention_mask: (B, N), nonzero = global; max_global_tokens:
        None, or a bound of every row's global count (``AttentionMasks``). Returns fairseq's dict."""
        length = src_tokens.size(1)
        if self.embed_positions is not None and length > self.max_source_positions:
            raise ValueError(
                f"input of {length} tokens is longer than the model's {self.max_source_positions} "
                "positions: lower --tokens-per-sample, or extend the positions (--max-positions when "
                "training from scratch, longformer-convert-roberta --max-positions for a checkpoint)"
            )
        if global_attention_mask is not None and global_attention_mask.shape != src_tokens.shape:
            raise ValueError(f"global_attention_mask has shape {tuple(global_attention_mask.shape)}, "
                             f"the tokens {tuple(src_tokens.shape)}: give one flag per token (B, N)")
        padding = src_tokens.eq(self.padding_idx)
        # the batch facts every layer needs, computed once here (eager: the host syncs of the
        # masks; none inside torch.compile when max_global_tokens is given)
        masks = AttentionMasks(padding=padding, is_global=global_attention_mask, max_global_tokens=max_global_tokens)
        x, encoder_embedding = self.forward_embedding(src_tokens, token_embeddings)
        if masks.padding is not None:
            x = x.masked_fill(padding.unsqueeze(-1), 0.0)
        x = x.transpose(0, 1)  # (B, N, C) -> (N, B, C)

        encoder_states = [x] if return_all_hiddens else []
        for layer in self.layers:
            x = layer(x, encoder_padding_mask=masks)
            if return_all_hiddens:
                encoder_states.append(x)
        if self.layer_norm is not None:
            x = self.layer_norm(x)
        return {
            "encoder_out": [x],  # (N, B, C)
            "encoder_padding_mask": [padding],  # (B, N)
            "encoder_embedding": [encoder_embedding],  # (B, N, C)
            "encoder_states": encoder_states,  # list of (N, B, C)
            "fc_results": [],
            "src_tokens": [],
            "src_lengths": [(~padding).sum(dim=1, dtype=torch.int32).reshape(-1, 1)],
        }
