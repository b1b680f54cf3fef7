"""fairseq's Transformer layers with Longformer self-attention: each overrides one builder.

``LongformerEncoderLayer`` (RoBERTa's and BART's encoders) and ``LongformerDecoderLayer`` (a
decoder-only, causal LM) build their self-attention from a ``LongformerAttentionConfig`` given
at construction; everything else (feed-forward, layer norms, cross-attention) is fairseq's own.
fairseq's ``__init__`` calls ``build_self_attention``, so the config is set before it runs.
"""
from fairseq.modules import TransformerDecoderLayer, TransformerEncoderLayer

from .self_attention import LongformerAttentionConfig, LongformerSelfAttention


class LongformerEncoderLayer(TransformerEncoderLayer):
    """A fairseq encoder layer whose self-attention is LongformerSelfAttention."""

    def __init__(self, args, attention: LongformerAttentionConfig):
        self.attention_config = attention
        super().__init__(args)

    def build_self_attention(self, embed_dim, args):
        return LongformerSelfAttention(embed_dim, args.encoder_attention_heads, self.attention_config)


class LongformerDecoderLayer(TransformerDecoderLayer):
    """A fairseq decoder layer whose self-attention is LongformerSelfAttention (causal)."""

    def __init__(self, args, attention: LongformerAttentionConfig, no_encoder_attn: bool = False):
        if not attention.pattern.causal:
            raise ValueError("a decoder layer's Longformer self-attention must be causal (--attention-causal)")
        self.attention_config = attention
        super().__init__(args, no_encoder_attn=no_encoder_attn)

    def build_self_attention(self, embed_dim, args, add_bias_kv=False, add_zero_attn=False):
        if add_bias_kv or add_zero_attn:
            raise ValueError("LongformerSelfAttention does not support add_bias_kv / add_zero_attn")
        return LongformerSelfAttention(embed_dim, args.decoder_attention_heads, self.attention_config)
