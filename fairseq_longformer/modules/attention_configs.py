"""One frozen attention config per layer, from fairseq args: the one place that reads the
``--attention-*`` flags, for encoders and decoders alike.

    attention_configs(args, "encoder")   reads encoder_layers, encoder_attention_heads
    attention_configs(args, "decoder")   reads decoder_layers, decoder_attention_heads

plus --attention-window (one value or one per layer), --attention-dilation (per layer, or per
layer and head), --attention-causal, --attention-impl and --attention-dropout, and
--relative-positions (declared by the causal LM, the one model that has it).
"""
from typing import Optional, Tuple

from fairseq.utils import safe_getattr

from longformer_kernels import IMPLEMENTATIONS, AttentionPattern, parse_dilation, parse_per_layer

from .self_attention import LongformerAttentionConfig


def add_attention_args(parser, causal: bool = True) -> None:
    """Declare the ``--attention-*`` flags ``attention_configs`` reads, for every model that
    builds Longformer attention. ``causal=False`` leaves out --attention-causal, for a stack that
    is never causal (LED's encoder: its decoder is fairseq's own)."""
    parser.add_argument("--attention-window", type=str, metavar="W",
                        help="one-sided attention window w (each token sees w tokens on each "
                             "side): one value, or one per layer separated by commas")
    parser.add_argument("--attention-dilation", type=str, metavar="D",
                        help="dilation: one value, one per layer ('1,1,2,2'), or per layer "
                             "and head ('1:2:1:2,...')")
    if causal:
        parser.add_argument("--attention-causal", action="store_true",
                            help="left-to-right sliding window (token i sees i-w .. i)")
    parser.add_argument("--attention-impl", choices=IMPLEMENTATIONS,
                        help="attention implementation: auto = Triton on CUDA, PyTorch on CPU")


def attention_configs(args, side: str, global_projections: Optional[bool] = None,
                      ) -> Tuple[LongformerAttentionConfig, ...]:
    """One config per layer of the ``side`` ("encoder" or "decoder") stack.

    ``global_projections`` defaults to "not causal": a causal model has no global attention
    (pattern.py), so its layers carry no Q_g, K_g, V_g.
    """
    if side not in ("encoder", "decoder"):
        raise ValueError(f"side must be 'encoder' or 'decoder', got {side!r}")
    layers = getattr(args, f"{side}_layers")
    heads = getattr(args, f"{side}_attention_heads")
    causal = bool(safe_getattr(args, "attention_causal", False))
    if global_projections is None:
        global_projections = not causal
    windows = parse_per_layer(args.attention_window, layers, "attention-window")
    dilations = parse_dilation(args.attention_dilation, layers, heads)
    return tuple(
        LongformerAttentionConfig(
            pattern=AttentionPattern(window=w, dilation=d, causal=causal),
            impl=safe_getattr(args, "attention_impl", "auto"),
            global_projections=global_projections,
            dropout=float(safe_getattr(args, "attention_dropout", 0.0) or 0.0),
            relative_positions=bool(safe_getattr(args, "relative_positions", False)),
            relative_bias_budget_mb=safe_getattr(args, "relative_bias_budget_mb", None),
        )
        for w, d in zip(windows, dilations)
    )
