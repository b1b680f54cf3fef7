"""fairseq's Transformer decoder with causal Longformer self-attention, through its builder.

``LongformerLMDecoder`` overrides ``build_decoder_layer``: layer i is a
``LongformerDecoderLayer`` with ``layer_configs[i]`` (window and per-head dilation per layer).
Embeddings, positions, the output projection and the incremental-decoding plumbing are
fairseq's own; fairseq's (N, N) future mask is not made (``buffered_future_mask``). The padding
mask fairseq computes is handed to each layer's attention as it is (only batches with padding
carry one).

With relative positions (``config.relative_positions``) the decoder makes one
``RelativePositionBiases`` (u, v) and hands it to every layer, as Transformer-XL shares them;
it has no position embeddings then (the model turns them off), and ``max_positions`` sets no
limit: nothing in the model depends on the absolute position.

Shapes: prev_output_tokens (B, N); hidden states (N, B, C) as in fairseq.
"""
import sys
from typing import Sequence

import torch
from fairseq.models.transformer import TransformerDecoder

from .layers import LongformerDecoderLayer, wrap_layer
from .relative_positions import RelativePositionBiases
from .self_attention import LongformerAttentionConfig

# What max_positions() reports when positions are relative: no length limit (fairseq takes the
# minimum over the task and the models, and filters or refuses only longer samples).
UNBOUNDED_POSITIONS = sys.maxsize


class LongformerLMDecoder(TransformerDecoder):
    """A decoder-only (no encoder attention) TransformerDecoder whose layer i uses ``layer_configs[i]``."""

    def __init__(self, args, dictionary, embed_tokens, layer_configs: Sequence[LongformerAttentionConfig]):
        if len(layer_configs) != args.decoder_layers:
            raise ValueError(f"{len(layer_configs)} layer configs for {args.decoder_layers} layers")
        relative = {c.relative_positions for c in layer_configs}
        if len(relative) > 1:
            raise ValueError("relative positions must be in every layer or in none")
        self.relative_positions = relative == {True}
        if self.relative_positions and getattr(args, "ddp_backend", None) == "fully_sharded":
            # FSDP flattens each wrapped layer's parameters on its own; a parameter shared by
            # all layers cannot be flattened into each of them
            raise ValueError("relative positions share u, v across layers, which --ddp-backend "
                             "fully_sharded cannot shard: use another --ddp-backend")
        heads = args.decoder_attention_heads
        biases = RelativePositionBiases(heads, args.decoder_embed_dim // heads) if self.relative_positions else None
        # fairseq builds the layers inside __init__, one call per layer and without an index:
        # hand them their configs in order (a tuple: nn.Module refuses module attributes before
        # its __init__; every layer's attention registers the shared biases itself)
        self._pending_layer_configs = iter(layer_configs)
        self._pending_relative_biases = (biases,)
        super().__init__(args, dictionary, embed_tokens, no_encoder_attn=True)
        del self._pending_layer_configs, self._pending_relative_biases

    def build_decoder_layer(self, args, no_encoder_attn=False):
        layer = LongformerDecoderLayer(args, next(self._pending_layer_configs), no_encoder_attn=no_encoder_attn,
                                       relative_biases=self._pending_relative_biases[0])
        return wrap_layer(layer, args)

    @property
    def cross_self_attention(self) -> bool:
        """False in eager mode (the LM refuses --cross-self-attention), True inside torch.compile.

        fairseq's decoder reads the flag in one place only: it hands the layers its padding mask
        ``if self.cross_self_attention or prev_output_tokens.eq(pad).any()``, a host read that
        breaks a compiled graph. Saying True while compiling makes it hand the mask always, unread
        (all False without padding, which changes nothing: ``AttentionMasks`` keeps it)."""
        return torch.compiler.is_compiling()

    @cross_self_attention.setter
    def cross_self_attention(self, value: bool) -> None:
        # fairseq's __init__ sets cfg.cross_self_attention, which build_model has refused if True
        if value:
            raise ValueError("longformer_lm does not support --cross-self-attention")

    def buffered_future_mask(self, tensor):
        """None: every layer's causal pattern already hides the future. fairseq's own makes and
        keeps an (N, N) float mask on the input's device, 1 GiB at 16,384 positions and 3.9 GiB at
        the paper's 32,256-character evaluation, which the Longformer layers would only ignore."""
        return None

    def max_positions(self):
        """Learned positions: fairseq's (the rows of the position table). Relative ones: no limit,
        the model evaluates at lengths it never trained on."""
        return UNBOUNDED_POSITIONS if self.relative_positions else super().max_positions()
