"""@register_model("longformer"): RoBERTa whose encoder layers use Longformer self-attention.

Configuration enters once: ``add_args`` extends RoBERTa's flags, the architecture functions
hold the defaults, and ``build_model`` turns ``args`` into one frozen ``LongformerAttentionConfig``
per layer (``modules/attention_configs.py``); nothing at or below the layer reads ``args`` for
the attention. A causal model (``--attention-causal``) has no global projections and refuses
a global-attention mask.
"""
import logging

from torch import nn
from fairseq.models import register_model, register_model_architecture
from fairseq.models.roberta import RobertaEncoder, RobertaModel
from fairseq.models.roberta.model import base_architecture as roberta_base_architecture
from fairseq.modules.transformer_sentence_encoder import init_bert_params
from fairseq.utils import safe_getattr, safe_hasattr

from .arch_defaults import set_defaults
from .global_projections import (
    GLOBAL_INITS, add_missing_global_projections, copy_local_to_global, identity_global_queries_keys,
)
from ..modules.attention_configs import add_attention_args, attention_configs
from ..modules.encoder import LongformerEncoder
from ..modules.self_attention import LongformerSelfAttention
from .freezing import apply_from_args as apply_freezing_from_args
from .global_sharing import share_global_projections
from .heads import LongformerSpanHead, upgrade_span_heads
from .vocabulary import grow_token_rows

logger = logging.getLogger(__name__)

class LongformerRobertaEncoder(RobertaEncoder):
    """RoBERTa's encoder (embeddings + LM head) around a LongformerEncoder; threads the
    global-attention mask (and the optional bound of its count, ``max_global_tokens``: see
    ``LongformerEncoder``) from ``model(src_tokens, global_attention_mask=...)`` down."""

    def build_encoder(self, args, dictionary, embed_tokens):
        encoder = LongformerEncoder(args, dictionary, embed_tokens, attention_configs(args, "encoder"))
        encoder.apply(init_bert_params)
        return encoder

    def forward(self, src_tokens, features_only=False, return_all_hiddens=False, masked_tokens=None,
                global_attention_mask=None, max_global_tokens=None, **unused):
        x, extra = self.extract_features(src_tokens, return_all_hiddens, global_attention_mask=global_attention_mask,
                                         max_global_tokens=max_global_tokens)
        if not features_only:
            x = self.output_layer(x, masked_tokens=masked_tokens)
        return x, extra

    def extract_features(self, src_tokens, return_all_hiddens=False, global_attention_mask=None,
                         max_global_tokens=None, **kwargs):
        encoder_out = self.sentence_encoder(
            src_tokens,
            return_all_hiddens=return_all_hiddens,
            token_embeddings=kwargs.get("token_embeddings", None),
            global_attention_mask=global_attention_mask,
            max_global_tokens=max_global_tokens,
        )
        features = encoder_out["encoder_out"][0].transpose(0, 1)  # (N, B, C) -> (B, N, C)
        return features, {"inner_states": encoder_out["encoder_states"] if return_all_hiddens else None}


@register_model("longformer")
class LongformerModel(RobertaModel):
    """Longformer (Beltagy et al., 2020): RoBERTa with sliding-window + global attention."""

    @classmethod
    def hub_models(cls):
        # RoBERTa's map names plain-http downloads of RoBERTa weights, which from_pretrained would
        # fetch unverified under a Longformer's name: no Longformer is published that way.
        return {}

    @staticmethod
    def add_args(parser):
        RobertaModel.add_args(parser)
        add_attention_args(parser)
        # fairseq's transformer declares these, RoBERTa's add_args does not; the encoder's
        # build_encoder_layer reads them (activation checkpointing per layer).
        parser.add_argument("--checkpoint-activations", action="store_true",
                            help="recompute each layer's activations in the backward pass")
        parser.add_argument("--offload-activations", action="store_true",
                            help="with --checkpoint-activations, keep the saved inputs on the CPU")
        parser.add_argument("--train-new-positions-only", type=int, metavar="N",
                            help="freeze every weight but the position embeddings past the first N "
                                 "(RoBERTa's positions, e.g. 512); see models/freezing.py")
        parser.add_argument("--no-global-projections", action="store_true",
                            help="global attention through the local Q, K, V instead of separate "
                                 "Q_g, K_g, V_g (the paper's 'no linear proj.' ablation)")
        parser.add_argument("--global-init", choices=GLOBAL_INITS, default="copy",
                            help="initial Q_g, K_g of a model built from scratch: copies of Q, K (the "
                                 "paper's rule) or a scaled identity, so global tokens start attending "
                                 "to copies of their own token (models/global_projections.py); a "
                                 "restored checkpoint's weights replace either")

    @classmethod
    def build_model(cls, args, task):
        from omegaconf import OmegaConf

        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, False)
        base_architecture(args)
        if not safe_hasattr(args, "max_positions"):
            args.max_positions = safe_getattr(args, "tokens_per_sample", task.max_positions())
        encoder = LongformerRobertaEncoder(args, task.source_dictionary)
        if OmegaConf.is_config(args):
            OmegaConf.set_struct(args, True)
        model = cls(args, encoder)
        if bool(safe_getattr(args, "no_global_projections", False)):
            share_global_projections(model)
        if safe_getattr(args, "global_init", "copy") == "identity":
            for module in model.modules():
                if isinstance(module, LongformerSelfAttention) and hasattr(module, "q_global_proj"):
                    identity_global_queries_keys(module)
        return apply_freezing_from_args(model, args)

    def __init__(self, args, encoder):
        super().__init__(args, encoder)  # applies BERT's random init to every Linear
        for module in self.modules():
            if isinstance(module, LongformerSelfAttention):
                copy_local_to_global(module)
        self.span_heads = nn.ModuleDict()  # extractive-QA heads (models/heads.py)

    def register_span_head(self, name: str) -> None:
        """Add (or keep) the start/end span head ``name`` (task longformer_qa)."""
        if name not in self.span_heads:
            self.span_heads[name] = LongformerSpanHead(self.args.encoder_embed_dim)

    def forward(self, src_tokens, features_only=False, return_all_hiddens=False,
                classification_head_name=None, span_head_name=None, **kwargs):
        """RoBERTa's forward; ``span_head_name`` returns that span head's (B, N, 2) logits."""
        if span_head_name is None:
            return super().forward(src_tokens, features_only, return_all_hiddens, classification_head_name, **kwargs)
        x, extra = self.encoder(src_tokens, True, return_all_hiddens, **kwargs)
        return self.span_heads[span_head_name](x), extra

    def upgrade_state_dict_named(self, state_dict, name):
        """A RoBERTa state dict has no global projections: start them as copies of Q, K, V."""
        super().upgrade_state_dict_named(state_dict, name)
        upgrade_span_heads(self.span_heads, state_dict, name + "." if name else "")
        grow_token_rows(self.state_dict(), state_dict, name + "." if name else "")  # a task added symbols
        if bool(safe_getattr(self.args, "attention_causal", False)):
            return  # a causal model has no global projections
        prefix = name + "." if name else ""
        add_missing_global_projections(state_dict, prefix=prefix + "encoder.sentence_encoder.layers.")


@register_model_architecture("longformer", "longformer")
def base_architecture(args):
    args.attention_window = safe_getattr(args, "attention_window", "256")
    args.attention_dilation = safe_getattr(args, "attention_dilation", "1")
    args.attention_causal = safe_getattr(args, "attention_causal", False)
    args.attention_impl = safe_getattr(args, "attention_impl", "auto")
    args.max_positions = safe_getattr(args, "max_positions", 4096)
    # --attention-dropout: RoBERTa's 0.1, which the paper keeps for continued pretraining
    roberta_base_architecture(args)


@register_model_architecture("longformer", "longformer_base")
def longformer_base_architecture(args):
    base_architecture(args)


@register_model_architecture("longformer", "longformer_large")
def longformer_large_architecture(args):
    set_defaults(args, encoder_layers=24, encoder_embed_dim=1024, encoder_ffn_embed_dim=4096,
                 encoder_attention_heads=16)
    base_architecture(args)
