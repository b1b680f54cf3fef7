"""The LED family: fairseq's LED <-> HF ``LEDForConditionalGeneration``: key map, config both ways
(``LEDLayout``), checks, tensors both ways. fairseq's reserved position rows are dropped on export
and kept in ``RESERVED_ROWS`` so fairseq -> HF -> fairseq is exact; HF's ``led.shared`` is fairseq's
one shared embedding. Shapes: V vocabulary, C width, P_e / P_d encoder / decoder positions."""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from ..rules import from_hf_windows, is_exact_gelu, renamed, rule_problems, table_keys, to_hf_windows, window_problems

HF_ARCHITECTURE = "LEDForConditionalGeneration"

# fairseq module -> HF module, in every encoder layer
ENCODER_LAYER = (
    ("self_attn.q_proj", "self_attn.longformer_self_attn.query"),
    ("self_attn.k_proj", "self_attn.longformer_self_attn.key"),
    ("self_attn.v_proj", "self_attn.longformer_self_attn.value"),
    ("self_attn.q_global_proj", "self_attn.longformer_self_attn.query_global"),
    ("self_attn.k_global_proj", "self_attn.longformer_self_attn.key_global"),
    ("self_attn.v_global_proj", "self_attn.longformer_self_attn.value_global"),
    ("self_attn.out_proj", "self_attn.output"),
    ("self_attn_layer_norm", "self_attn_layer_norm"),
    ("fc1", "fc1"),
    ("fc2", "fc2"),
    ("final_layer_norm", "final_layer_norm"),
)
# the decoder layer is BART's on both sides: the same module names
DECODER_LAYER = tuple((name, name) for name in (
    "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj", "self_attn_layer_norm",
    "encoder_attn.q_proj", "encoder_attn.k_proj", "encoder_attn.v_proj", "encoder_attn.out_proj",
    "encoder_attn_layer_norm", "fc1", "fc2", "final_layer_norm",
))
TOP_LEVEL = (
    ("encoder.layernorm_embedding", "led.encoder.layernorm_embedding"),
    ("decoder.layernorm_embedding", "led.decoder.layernorm_embedding"),
)
_W = ()  # every row has a weight and a bias; their shapes are checked against the built models
KEY_TABLE = (  # rules.table_keys' rows: {e} / {d} an encoder / decoder layer
    *((f"encoder.layers.{{e}}.{fs}", f"led.encoder.layers.{{e}}.{hf}", _W, _W) for fs, hf in ENCODER_LAYER),
    *((f"decoder.layers.{{d}}.{fs}", f"led.decoder.layers.{{d}}.{hf}", _W, _W) for fs, hf in DECODER_LAYER),
    *((fs, hf, _W, _W) for fs, hf in TOP_LEVEL),
)
# single tensors: the shared token table, and the position tables (reserved rows dropped)
TOKENS = ("encoder.embed_tokens.weight", "led.shared.weight")
POSITIONS = (("encoder.embed_positions.weight", "led.encoder.embed_positions.weight"),
             ("decoder.embed_positions.weight", "led.decoder.embed_positions.weight"))
# fairseq tensors that are the shared token table again, or bookkeeping: not exported
FAIRSEQ_TIED = ("decoder.embed_tokens.weight", "decoder.output_projection.weight")
FAIRSEQ_BOOKKEEPING = ("encoder.version", "decoder.version")
# HF tensors tied to led.shared, and its zero logits bias: written by HF itself
HF_TIED = ("led.encoder.embed_tokens.weight", "led.decoder.embed_tokens.weight", "lm_head.weight")
HF_LOGITS_BIAS = "final_logits_bias"
# fairseq's reserved rows of both position tables (fairseq keys, (padding_idx + 1, C) each)
RESERVED_ROWS = "fairseq_reserved_positions.safetensors"
# LEDLayout's sizes -> their HF config.json entries (each in every config transformers writes)
HF_FIELDS = {"vocab": "vocab_size", "width": "d_model", "encoder_layers": "encoder_layers",
             "decoder_layers": "decoder_layers", "encoder_ffn": "encoder_ffn_dim", "decoder_ffn": "decoder_ffn_dim",
             "encoder_heads": "encoder_attention_heads", "decoder_heads": "decoder_attention_heads",
             "encoder_positions": "max_encoder_position_embeddings",
             "decoder_positions": "max_decoder_position_embeddings"}
HF_LAYOUT_KEYS = (*HF_FIELDS.values(), "attention_window")  # what the import reads
# config.json entry -> the HF tensor (any of the names, all one tied table) and dimension that hold
# the same number: checked against the tensors before anything is sized by the config.
HF_SIZES = {
    "vocab_size": ((TOKENS[1], *HF_TIED), 0),
    "d_model": ((TOKENS[1], *HF_TIED), 1),
    "max_encoder_position_embeddings": (POSITIONS[0][1], 0),
    "max_decoder_position_embeddings": (POSITIONS[1][1], 0),
    "encoder_ffn_dim": ("led.encoder.layers.0.fc1.weight", 0),
    "decoder_ffn_dim": ("led.decoder.layers.0.fc1.weight", 0),
}
HF_LAYER_COUNTS = {"encoder_layers": "led.encoder.layers.", "decoder_layers": "led.decoder.layers."}
HF_HEAD_COUNTS = ("encoder_attention_heads", "decoder_attention_heads")
CONFIG_RULES = (  # (config.json entry, its default, ok, why)
    ("activation_function", "gelu", lambda v: v == "gelu", "the fairseq LED is built with exact gelu only"),
    ("scale_embedding", False, lambda v: not v, "fairseq's BART does not scale embeddings"),
    ("tie_word_embeddings", True, bool, "fairseq's BART shares one token table (--share-all-embeddings)"),
    *((name, i, lambda v, i=i: v == i, f"fairseq's dictionary and decoder fix it to {i}")  # the decoder starts with </s>
      for name, i in (("pad_token_id", 1), ("bos_token_id", 0), ("eos_token_id", 2), ("decoder_start_token_id", 2))),
)


def led_key_map(encoder_layers: int, decoder_layers: int) -> Dict[str, str]:
    """fairseq key -> HF key for every tensor copied as it is (weights and biases); the token
    table and the position tables (``TOKENS``, ``POSITIONS``) are handled apart."""
    return {fs: hf for fs, (hf, _) in table_keys(KEY_TABLE, {"e": encoder_layers, "d": decoder_layers}).items()}


@dataclass
class LEDLayout:
    """What the HF config needs, read from the built fairseq LED (not from flags)."""

    vocab: int
    width: int
    encoder_layers: int
    decoder_layers: int
    encoder_ffn: int
    decoder_ffn: int
    encoder_heads: int
    decoder_heads: int
    encoder_positions: int  # P_e, without the reserved rows
    decoder_positions: int  # P_d
    windows: Tuple[int, ...]  # one-sided w per encoder layer
    dropout: float
    attention_dropout: float
    activation_dropout: float
    padding_idx: int

    def hf_config(self, dictionary) -> Dict[str, object]:
        return {
            "architectures": [HF_ARCHITECTURE], "model_type": "led",
            **{hf: getattr(self, name) for name, hf in HF_FIELDS.items()},
            "attention_window": to_hf_windows(self.windows),
            "activation_function": "gelu", "dropout": self.dropout, "attention_dropout": self.attention_dropout,
            "activation_dropout": self.activation_dropout,
            "pad_token_id": dictionary.pad(), "bos_token_id": dictionary.bos(), "eos_token_id": dictionary.eos(),
            "decoder_start_token_id": dictionary.eos(),  # fairseq's prev_output_tokens start with </s>
            "is_encoder_decoder": True, "tie_word_embeddings": True,
        }

    @classmethod
    def from_hf_config(cls, config: Dict[str, object], where: str) -> "LEDLayout":
        """The layout an HF LED config.json describes; ValueError naming every entry the fairseq
        LED cannot take (nothing is written by then)."""
        missing = [key for key in HF_LAYOUT_KEYS if key not in config]
        if missing:
            raise ValueError(f"{where}: config.json lacks {missing}: not a complete LED config")
        problems = rule_problems(config, CONFIG_RULES)
        layers = int(config["encoder_layers"])
        windows, window_problem = from_hf_windows(config["attention_window"], layers)
        if window_problem:
            problems.append(window_problem)
        for stack in ("encoder", "decoder"):
            heads = int(config[f"{stack}_attention_heads"])
            if heads < 1 or int(config["d_model"]) % heads:
                problems.append(f"{stack}_attention_heads = {heads} does not divide d_model {config['d_model']}")
        if problems:
            raise ValueError(f"cannot import {where} as a fairseq LED, nothing was written: " + "; ".join(problems))
        return cls(
            **{name: int(config[hf]) for name, hf in HF_FIELDS.items()}, windows=windows, dropout=float(config.get("dropout", 0.1)),
            attention_dropout=float(config.get("attention_dropout", 0.0)),
            activation_dropout=float(config.get("activation_dropout", 0.0)), padding_idx=1,
        )

    def model_dims(self) -> Dict[str, int]:
        """The sizes as fairseq's flags name them (``LEDConversionResult.model_dims``)."""
        return {"encoder_layers": self.encoder_layers, "decoder_layers": self.decoder_layers,
                "encoder_embed_dim": self.width, "decoder_embed_dim": self.width,
                "encoder_ffn_embed_dim": self.encoder_ffn, "decoder_ffn_embed_dim": self.decoder_ffn,
                "encoder_attention_heads": self.encoder_heads, "decoder_attention_heads": self.decoder_heads}

    def arch(self) -> str:
        """led_large for bart.large's sizes, else led_base (the sizes are given explicitly anyway:
        the two architectures differ in nothing else)."""
        return "led_large" if (self.width, self.encoder_layers) == (1024, 12) else "led_base"


def fairseq_args(data, flags: List[str], layout: LEDLayout):
    """fairseq's parsed training args for the LED ``flags`` describe (translation task)."""
    from fairseq import options

    parser = options.get_training_parser(default_task="translation")
    return options.parse_args_and_arch(parser, input_args=[
        str(data), "--task", "translation", *flags, "--activation-fn", "gelu", "--dropout", repr(layout.dropout),
        "--attention-dropout", repr(layout.attention_dropout), "--activation-dropout", repr(layout.activation_dropout)])


def inspect_led(model) -> LEDLayout:
    """The layout of a built fairseq LED; raise ValueError naming every setting HF's
    LEDForConditionalGeneration cannot represent."""
    from ...models.led import LEDModel

    if not isinstance(model, LEDModel):
        raise ValueError(f"not an LED model ({type(model).__name__}): export it with the Longformer export")
    encoder, decoder = model.encoder, model.decoder
    windows = [layer.self_attn.config.pattern.window for layer in encoder.layers]
    problems = window_problems(windows, "encoder layer")
    for i, layer in enumerate(encoder.layers):
        config = layer.self_attn.config
        pattern = config.pattern
        if any(d != 1 for d in pattern.dilation_per_head(layer.self_attn.num_heads)):
            problems.append(f"encoder layer {i}: dilation {pattern.dilation} (HF's LED has none)")
        if not config.global_projections:
            problems.append(f"encoder layer {i}: no global projections (HF's LED always has them)")
    for name, stack in (("encoder", encoder), ("decoder", decoder)):
        if stack.layer_norm is not None:
            problems.append(f"{name}: pre-layernorm (--{name}-normalize-before; HF's LED is post-layernorm)")
        if stack.layernorm_embedding is None:
            problems.append(f"{name}: no layernorm_embedding (HF's LED always has one)")
        if stack.embed_scale != 1.0:
            problems.append(f"{name}: embeddings scaled by {stack.embed_scale} (HF's LED does not scale: "
                            "--no-scale-embedding, as BART)")
        if stack.embed_positions is None or not isinstance(stack.embed_positions, torch.nn.Embedding):
            problems.append(f"{name}: no learned positions (HF's LED has learned positions)")
        if not all(is_exact_gelu(layer.activation_fn) for layer in stack.layers):
            problems.append(f"{name}: activation is not gelu")
    if decoder.embed_tokens is not encoder.embed_tokens or decoder.output_projection.weight is not encoder.embed_tokens.weight:
        problems.append("embeddings not shared between encoder, decoder and output (--share-all-embeddings, as BART)")
    if getattr(decoder, "project_in_dim", None) is not None or getattr(decoder, "project_out_dim", None) is not None:
        problems.append("decoder input/output dims differ from its width")
    if getattr(decoder, "cross_self_attention", False):
        problems.append("--cross-self-attention")
    if problems:
        raise ValueError("this LED cannot be represented as HF's LEDForConditionalGeneration: " + "; ".join(problems))
    reserved = encoder.padding_idx + 1
    args = model.args
    return LEDLayout(
        vocab=encoder.embed_tokens.weight.shape[0], width=encoder.embed_tokens.weight.shape[1],
        encoder_layers=len(encoder.layers), decoder_layers=len(decoder.layers),
        encoder_ffn=encoder.layers[0].fc1.out_features, decoder_ffn=decoder.layers[0].fc1.out_features,
        encoder_heads=encoder.layers[0].self_attn.num_heads, decoder_heads=decoder.layers[0].self_attn.num_heads,
        encoder_positions=encoder.embed_positions.weight.shape[0] - reserved,
        decoder_positions=decoder.embed_positions.weight.shape[0] - reserved,
        windows=tuple(windows), dropout=float(args.dropout), attention_dropout=float(args.attention_dropout),
        activation_dropout=float(getattr(args, "activation_dropout", 0.0) or 0.0), padding_idx=encoder.padding_idx,
    )


def fairseq_to_hf_state(state: Dict[str, Tensor], layout: LEDLayout) -> Dict[str, Tensor]:
    """The fairseq LED state dict -> HF tensors (tied copies and the logits bias left to HF).
    Raises ValueError if a fairseq tensor would be left behind."""
    mapping = {**led_key_map(layout.encoder_layers, layout.decoder_layers), TOKENS[0]: TOKENS[1], **dict(POSITIONS)}
    out = renamed(state, mapping, "fairseq tensors with no place in HF's LED",
                  ignored=(*FAIRSEQ_TIED, *FAIRSEQ_BOOKKEEPING))
    for _, hf in POSITIONS:
        out[hf] = out[hf][layout.padding_idx + 1:]
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def reserved_rows(state: Dict[str, Tensor], layout: LEDLayout) -> Dict[str, Tensor]:
    """fairseq key -> the (padding_idx + 1, C) reserved rows of each position table, which HF has
    no place for (kept beside the export as ``RESERVED_ROWS``)."""
    return {fs: state[fs][:layout.padding_idx + 1].contiguous() for fs, _ in POSITIONS}


def hf_to_fairseq_state(hf_state: Dict[str, Tensor], layout: LEDLayout,
                        reserved: Optional[Dict[str, Tensor]] = None) -> Dict[str, Tensor]:
    """HF LED tensors -> the fairseq LED state dict (every key of the built model but the version
    buffers): ``fairseq_to_hf_state``'s table reversed, the tied copies checked equal."""
    tables = [key for key in (TOKENS[1], *HF_TIED) if key in hf_state] or [TOKENS[1]]
    forward = {**led_key_map(layout.encoder_layers, layout.decoder_layers), **dict(POSITIONS)}
    out = renamed(hf_state, {**{hf: fs for fs, hf in forward.items()}, tables[0]: TOKENS[0]},
                  f"the tensors are not those of an LED with {layout.encoder_layers} + {layout.decoder_layers} layers",
                  ignored=(*tables[1:], HF_LOGITS_BIAS))
    if any(not torch.equal(hf_state[key], out[TOKENS[0]]) for key in tables[1:]):
        raise ValueError(f"{tables} differ: HF ties them to one token table, fairseq's BART has one")
    bias = hf_state.get(HF_LOGITS_BIAS)
    if bias is not None and bool(bias.ne(0).any()):
        raise ValueError(f"{HF_LOGITS_BIAS} is not zero: fairseq's output projection has no bias")
    for fs in FAIRSEQ_TIED:
        out[fs] = out[TOKENS[0]]
    rows = layout.padding_idx + 1
    for fs, hf in POSITIONS:
        kept = (reserved or {}).get(fs)
        if kept is None or tuple(kept.shape) != (rows, layout.width):
            kept = torch.zeros(rows, layout.width, dtype=hf_state[hf].dtype)  # rows no position id reaches
        out[fs] = torch.cat([kept, hf_state[hf]])
    return {k: v.detach().clone().contiguous() for k, v in out.items()}
