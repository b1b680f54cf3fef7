"""fairseq's Transformer layers with Longformer self-attention: each overrides one builder.

``LongformerEncoderLayer`` (RoBERTa's and BART's encoders) and ``LongformerDecoderLayer`` (a
decoder-only, causal LM: ``longformer_lm``) build their self-attention from a
``LongformerAttentionConfig`` given at construction (the decoder layer's also decodes step by
step with a bounded cache: ``incremental.py``); everything else (feed-forward, layer norms,
cross-attention) is fairseq's own.
fairseq's ``__init__`` calls ``build_self_attention``, so the config is set before it runs.
"""
from typing import Optional

from fairseq.distributed import fsdp_wrap
from fairseq.modules import TransformerDecoderLayer, TransformerEncoderLayer
from fairseq.modules.checkpoint_activations import checkpoint_wrapper

from .incremental import IncrementalLongformerSelfAttention
from .relative_positions import RelativePositionBiases
from .self_attention import LongformerAttentionConfig, LongformerSelfAttention


class LongformerEncoderLayer(TransformerEncoderLayer):
    """A fairseq encoder layer whose self-attention is LongformerSelfAttention."""

    def __init__(self, args, attention: LongformerAttentionConfig):
        self.attention_config = attention
        super().__init__(args)

    def build_self_attention(self, embed_dim, args):
        return LongformerSelfAttention(embed_dim, args.encoder_attention_heads, self.attention_config)


class LongformerDecoderLayer(TransformerDecoderLayer):
    """A fairseq decoder layer whose self-attention is causal Longformer attention that also
    decodes step by step (``IncrementalLongformerSelfAttention``)."""

    def __init__(self, args, attention: LongformerAttentionConfig, no_encoder_attn: bool = False,
                 relative_biases: Optional[RelativePositionBiases] = None):
        if not attention.pattern.causal:
            raise ValueError("a decoder layer's Longformer self-attention must be causal (--attention-causal)")
        self.attention_config = attention
        # held in a tuple until fairseq's __init__ has called build_self_attention: nn.Module
        # refuses a module attribute before its own __init__ (the attention registers it)
        self._pending_relative_biases = (relative_biases,)
        super().__init__(args, no_encoder_attn=no_encoder_attn)
        del self._pending_relative_biases

    def build_self_attention(self, embed_dim, args, add_bias_kv=False, add_zero_attn=False):
        if add_bias_kv or add_zero_attn:
            raise ValueError("LongformerSelfAttention does not support add_bias_kv / add_zero_attn")
        return IncrementalLongformerSelfAttention(embed_dim, args.decoder_attention_heads, self.attention_config,
                                                  relative_biases=self._pending_relative_biases[0])


def wrap_layer(layer, args):
    """The wrapping fairseq's own build_encoder_layer / build_decoder_layer give a layer:
    activation checkpointing (--checkpoint-activations, --offload-activations), then FSDP."""
    checkpoint = getattr(args, "checkpoint_activations", False)
    if checkpoint:
        layer = checkpoint_wrapper(layer, offload_to_cpu=getattr(args, "offload_activations", False))
    # a checkpointed layer is always FSDP-wrapped, as fairseq does
    min_params_to_wrap = 0 if checkpoint else getattr(args, "min_params_to_wrap", 100_000_000)
    return fsdp_wrap(layer, min_num_params=min_params_to_wrap)
