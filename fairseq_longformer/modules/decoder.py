"""fairseq's Transformer decoder with causal Longformer self-attention, through its builder.

``LongformerLMDecoder`` overrides ``build_decoder_layer`` only: layer i is a
``LongformerDecoderLayer`` with ``layer_configs[i]`` (window and per-head dilation per layer).
Embeddings, positions, the future mask, the output projection and the incremental-decoding
plumbing are fairseq's own. The padding mask fairseq computes is handed to each layer's
attention as it is (only batches with padding carry one).

Shapes: prev_output_tokens (B, N); hidden states (N, B, C) as in fairseq.
"""
from typing import Sequence

from fairseq.models.transformer import TransformerDecoder

from .layers import LongformerDecoderLayer, wrap_layer
from .self_attention import LongformerAttentionConfig


class LongformerLMDecoder(TransformerDecoder):
    """A decoder-only (no encoder attention) TransformerDecoder whose layer i uses ``layer_configs[i]``."""

    def __init__(self, args, dictionary, embed_tokens, layer_configs: Sequence[LongformerAttentionConfig]):
        if len(layer_configs) != args.decoder_layers:
            raise ValueError(f"{len(layer_configs)} layer configs for {args.decoder_layers} layers")
        # fairseq builds the layers inside __init__, one call per layer and without an index:
        # hand them their configs in order
        self._pending_layer_configs = iter(layer_configs)
        super().__init__(args, dictionary, embed_tokens, no_encoder_attn=True)
        del self._pending_layer_configs

    def build_decoder_layer(self, args, no_encoder_attn=False):
        layer = LongformerDecoderLayer(args, next(self._pending_layer_configs), no_encoder_attn=no_encoder_attn)
        return wrap_layer(layer, args)
