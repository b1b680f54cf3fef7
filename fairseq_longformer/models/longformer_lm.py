"""@register_model("longformer_lm"): the paper's autoregressive character-level Longformer.

A decoder-only fairseq language model (``--task language_modeling``): fairseq's
``TransformerLanguageModel`` whose decoder layers use causal Longformer self-attention with a
window per layer and a dilation per layer and head (``modules/decoder.py``). Pre-layernorm and
GeLU as the paper's appendix B. Positions: learned absolute ones (fairseq's, the default), or
with ``--relative-positions`` the paper's: Transformer-XL's relative sinusoidal positions with
its u, v biases in every layer (``modules/relative_positions.py``), no position embeddings, and
no length limit (the model evaluates at lengths it never trained on).

    fairseq-train DATA --task language_modeling --user-dir fairseq_longformer \\
        --arch longformer_lm_small --relative-positions --tokens-per-sample 2048 \\
        --sample-break-mode none ...

Configuration enters once: ``add_args`` extends ``TransformerLanguageModel``'s flags with the
``--attention-*`` flags, the architecture functions hold the defaults, and ``build_model`` turns
``args`` into one frozen ``LongformerAttentionConfig`` per layer. The attention is always causal
(there is no --attention-causal flag to forget) and has no global tokens, so no global
projections.

Step-by-step decoding (``fairseq-generate``/sampling, ``incremental_state``) keeps per layer
only the keys and values of the last w * max(d) positions (``modules/incremental.py``).
"""
from typing import Tuple

from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer_lm import TransformerLanguageModel, base_lm_architecture
from fairseq.utils import safe_getattr

from .arch_defaults import set_defaults
from ..modules.attention_configs import add_attention_args, attention_configs
from ..modules.decoder import LongformerLMDecoder

# The paper's phase-1 windows (appendix B, Table 12): 32 in the bottom layer up to 8,192 in the
# top one; each later phase doubles them. How the windows between grow is not given: here they
# grow geometrically (w_i = 32 * 256 ** (i / (L - 1))), so the lower layers stay local.
PAPER_BOTTOM_WINDOW, PAPER_TOP_WINDOW = 32, 8192
# The paper's dilation is on 2 heads only (appendix B).
PAPER_DILATED_HEADS = 2


def growing_windows(num_layers: int, bottom: int = PAPER_BOTTOM_WINDOW, top: int = PAPER_TOP_WINDOW,
                    cap: int = 0) -> Tuple[int, ...]:
    """One window per layer, from ``bottom`` (layer 0) to ``top`` (last layer), geometrically.

    ``cap`` > 0 limits every window to it: a window reaching past the first position of the
    longest sequence the model sees is full causal attention already, so capping changes nothing.
    """
    if num_layers < 1 or not 0 < bottom <= top:
        raise ValueError(f"need num_layers >= 1 and 0 < bottom <= top, got {num_layers}, {bottom}, {top}")
    if num_layers == 1:
        windows = [bottom]
    else:
        ratio = top / bottom
        windows = [round(bottom * ratio ** (i / (num_layers - 1))) for i in range(num_layers)]
    return tuple(min(w, cap) if cap > 0 else w for w in windows)


def paper_dilation(num_layers: int, num_heads: int, dilated_heads: int = PAPER_DILATED_HEADS) -> Tuple[Tuple[int, ...], ...]:
    """The paper's dilation per layer and head, as this project's d (one tuple of H values per layer).

    The paper gives dilation as a *gap*: the number of positions skipped between two attended
    ones, "0 (layers 0-5), 1 (6-7), 2 (8-9), 3 (10-11)" for 12 layers and 0 (0-14), 1 (15-19),
    2 (20-24), 3 (25-29) for 30. Here a head attends i - s*d for s = 0..w, so gap g is d = g + 1:
    gap 0 (contiguous window) is d = 1, gap 3 is d = 4. The lower half of the layers has gap 0;
    the upper half is split into three equal runs with gaps 1, 2 and 3, on the last
    ``dilated_heads`` heads of each layer (the other heads keep d = 1).
    """
    if not 1 <= dilated_heads <= num_heads:
        raise ValueError(
            f"the paper's dilation is on {dilated_heads} heads, but the model has {num_heads} head(s): "
            "use more heads (--decoder-attention-heads) or give --attention-dilation explicitly")
    lower = num_layers // 2
    upper = num_layers - lower
    layers = []
    for i in range(num_layers):
        gap = 0 if i < lower else 1 + (i - lower) * 3 // upper
        layers.append((1,) * (num_heads - dilated_heads) + (gap + 1,) * dilated_heads)
    return tuple(layers)


def dilation_flag(per_layer: Tuple[Tuple[int, ...], ...]) -> str:
    """The --attention-dilation string of per-layer, per-head dilations ('1:1:2:2,...')."""
    return ",".join(":".join(str(d) for d in heads) for heads in per_layer)


@register_model("longformer_lm")
class LongformerLanguageModel(TransformerLanguageModel):
    """Autoregressive Longformer (Beltagy et al., 2020, section 4): causal dilated sliding windows."""

    @staticmethod
    def add_args(parser):
        TransformerLanguageModel.add_args(parser)
        add_attention_args(parser, causal=False)  # a language model is causal by definition
        parser.add_argument("--relative-positions", action="store_true",
                            help="Transformer-XL's relative sinusoidal positions (with its u, v biases) "
                                 "in every layer's attention, as the paper's char-LM, instead of "
                                 "learned position embeddings (implies --no-token-positional-embeddings). "
                                 "Nothing then depends on the absolute position, so the model reports no "
                                 "length limit and evaluates at lengths it never trained on (e.g. "
                                 "fairseq-eval-lm --tokens-per-sample beyond the training one); "
                                 "--max-target-positions then only bounds the --attention-window values")
        parser.add_argument("--relative-bias-budget-mb", type=float, metavar="MB",
                            help="with --relative-positions: the largest position-score band, (batch, "
                                 "heads, tokens, window + 1), a layer makes at once (default 256). Above "
                                 "it the heads are attended in groups whose band is made again in "
                                 "backward (one more attention forward per layer, no band kept for "
                                 "backward); raise it where memory is plentiful to skip that recompute")

    @classmethod
    def build_model(cls, args, task):
        """fairseq's ``TransformerLanguageModel.build_model`` builds a ``TransformerDecoder`` by name,
        with no builder to override, so this replaces it: the token embedding through fairseq's
        own ``build_embedding``, then ``LongformerLMDecoder``."""
        base_architecture(args)
        for flag, name in (("character_embeddings", "--character-embeddings"),
                           ("adaptive_input", "--adaptive-input"),
                           ("decoder_layers_to_keep", "--decoder-layers-to-keep"),
                           ("cross_self_attention", "--cross-self-attention")):
            if safe_getattr(args, flag, None):
                raise ValueError(f"longformer_lm does not support {name}: its layers are built one "
                                 "attention config per layer from plain token embeddings")
        if safe_getattr(args, "max_target_positions", None) is None:
            args.max_target_positions = safe_getattr(args, "tokens_per_sample", 1024)
        configs = attention_configs(args, "decoder")
        check_windows(configs, args.max_target_positions)
        embed_tokens = cls.build_embedding(args, task.source_dictionary, args.decoder_input_dim)
        return cls(LongformerLMDecoder(args, task.target_dictionary, embed_tokens, configs))


def check_windows(configs, positions: int) -> None:
    """A window longer than the model's positions can never be used: most likely a two-sided
    window or a sequence length given by mistake; refuse it with the fix."""
    for layer, config in enumerate(configs):
        if config.pattern.window > positions:
            raise ValueError(
                f"--attention-window {config.pattern.window} (layer {layer}) is larger than the model's "
                f"{positions} positions (--tokens-per-sample / --max-target-positions): a window of "
                f"{positions} already attends every earlier token; give at most {positions}, or "
                "raise --tokens-per-sample")


@register_model_architecture("longformer_lm", "longformer_lm")
def base_architecture(args):
    """The defaults of ``longformer_lm_small``; every value can be overridden by its flag."""
    args.decoder_layers = safe_getattr(args, "decoder_layers", 12)
    args.decoder_embed_dim = safe_getattr(args, "decoder_embed_dim", 512)
    args.decoder_ffn_embed_dim = safe_getattr(args, "decoder_ffn_embed_dim", 2048)
    args.decoder_attention_heads = safe_getattr(args, "decoder_attention_heads", 8)
    args.dropout = safe_getattr(args, "dropout", 0.2)
    args.activation_fn = safe_getattr(args, "activation_fn", "gelu")
    args.decoder_learned_pos = safe_getattr(args, "decoder_learned_pos", True)
    # off by default, so checkpoints trained with learned positions (before the flag) load as they were
    args.relative_positions = bool(safe_getattr(args, "relative_positions", False))
    if args.relative_positions:
        args.no_token_positional_embeddings = True  # the positions are in the attention
    elif safe_getattr(args, "relative_bias_budget_mb", None) is not None:
        raise ValueError("--relative-bias-budget-mb applies to --relative-positions only: add "
                         "--relative-positions or drop the budget")
    # one embedding matrix in and out, as Transformer-XL's character models (--tied)
    args.share_decoder_input_output_embed = safe_getattr(args, "share_decoder_input_output_embed", True)
    # causal, no global tokens: always, whatever a namespace loaded from elsewhere says
    args.attention_causal = True
    args.attention_impl = safe_getattr(args, "attention_impl", None) or "auto"
    if safe_getattr(args, "attention_window", None) is None:
        positions = safe_getattr(args, "max_target_positions", None) or safe_getattr(args, "tokens_per_sample", None)
        windows = growing_windows(args.decoder_layers, cap=positions or 0)
        args.attention_window = ",".join(str(w) for w in windows)
    if safe_getattr(args, "attention_dilation", None) is None:
        args.attention_dilation = dilation_flag(paper_dilation(args.decoder_layers, args.decoder_attention_heads))
    base_lm_architecture(args)  # pre-layernorm (decoder_normalize_before = True) and the rest


@register_model_architecture("longformer_lm", "longformer_lm_small")
def longformer_lm_small(args):
    """12 layers, 512 hidden, 8 heads, dropout 0.2 (the paper's small model, as Transformer-XL's)."""
    base_architecture(args)


@register_model_architecture("longformer_lm", "longformer_lm_large")
def longformer_lm_large(args):
    """30 layers, 512 hidden, 8 heads, dropout 0.4 (the paper's large model, as Child et al.'s)."""
    set_defaults(args, decoder_layers=30, dropout=0.4)
    base_architecture(args)

