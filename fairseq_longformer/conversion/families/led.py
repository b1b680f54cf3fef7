"""fairseq's LED <-> HF ``LEDForConditionalGeneration``; the reserved position rows HF lacks travel in
``RESERVED_ROWS`` so fairseq -> HF -> fairseq is exact."""
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from ..rules import CROSS_MODULES, LAYER_MODULES, QKV, from_hf_windows, renamed, rule_problems, stack_problems, \
    table_keys, window_problems

_HF_ATTN = "self_attn.longformer_self_attn."
ENCODER_LAYER = (  # fairseq module -> HF module, in every encoder layer
    *((f"self_attn.{fs}{kind}_proj", f"{_HF_ATTN}{hf}{kind}") for kind in ("", "_global") for fs, hf in QKV),
    ("self_attn.out_proj", "self_attn.output"),
    *((name, name) for name in LAYER_MODULES[4:]),  # the layer norms and the FFN
)
DECODER_LAYER = tuple((name, name) for name in LAYER_MODULES + CROSS_MODULES)  # BART's layer on both sides
KEY_TABLE = (  # rules.table_keys' rows ({e} / {d}: an encoder / decoder layer); shapes checked on the built models
    *((f"encoder.layers.{{e}}.{fs}", f"led.encoder.layers.{{e}}.{hf}", (), ()) for fs, hf in ENCODER_LAYER),
    *((f"decoder.layers.{{d}}.{fs}", f"led.decoder.layers.{{d}}.{hf}", (), ()) for fs, hf in DECODER_LAYER),
    *((f"{stack}.layernorm_embedding", f"led.{stack}.layernorm_embedding", (), ()) for stack in ("encoder", "decoder")),
)
TOKENS = ("encoder.embed_tokens.weight", "led.shared.weight")
POSITIONS = tuple((f"{stack}.embed_positions.weight", f"led.{stack}.embed_positions.weight")
                  for stack in ("encoder", "decoder"))  # reserved rows dropped
FAIRSEQ_TIED = ("decoder.embed_tokens.weight", "decoder.output_projection.weight")  # the token table again
HF_TIED = ("led.encoder.embed_tokens.weight", "led.decoder.embed_tokens.weight", "lm_head.weight")
HF_LOGITS_BIAS = "final_logits_bias"  # zero: fairseq's output projection has no bias
RESERVED_ROWS = "fairseq_reserved_positions.safetensors"  # fairseq key -> (padding_idx + 1, C)
HF_FIELDS = {"vocab": "vocab_size", "width": "d_model", "encoder_layers": "encoder_layers",
             "decoder_layers": "decoder_layers", "encoder_ffn": "encoder_ffn_dim", "decoder_ffn": "decoder_ffn_dim",
             "encoder_heads": "encoder_attention_heads", "decoder_heads": "decoder_attention_heads",
             "encoder_positions": "max_encoder_position_embeddings",
             "decoder_positions": "max_decoder_position_embeddings"}
DROPOUTS = {"dropout": 0.1, "attention_dropout": 0.0, "activation_dropout": 0.0}  # HF's name and default
# config.json entry -> the HF tensor (any of the names: one tied table) and dimension holding the same number
HF_SIZES = {
    "vocab_size": ((TOKENS[1], *HF_TIED), 0), "d_model": ((TOKENS[1], *HF_TIED), 1),
    **{f"max_{stack}_position_embeddings": (hf, 0) for (_, hf), stack in zip(POSITIONS, ("encoder", "decoder"))},
    **{f"{stack}_ffn_dim": (f"led.{stack}.layers.0.fc1.weight", 0) for stack in ("encoder", "decoder")}}
HF_LAYER_COUNTS = {"encoder_layers": "led.encoder.layers.", "decoder_layers": "led.decoder.layers."}
HF_HEAD_COUNTS = ("encoder_attention_heads", "decoder_attention_heads")
CONFIG_RULES = (  # (config.json entry, its default, ok, why); fairseq's decoder starts with </s>
    ("activation_function", "gelu", lambda v: v == "gelu", "the fairseq LED is built with exact gelu only"),
    ("scale_embedding", False, lambda v: not v, "fairseq's BART does not scale embeddings"),
    ("tie_word_embeddings", True, bool, "fairseq's BART shares one token table (--share-all-embeddings)"),
    *((name, i, lambda v, i=i: v == i, f"fairseq's dictionary and decoder fix it to {i}")
      for name, i in (("pad_token_id", 1), ("bos_token_id", 0), ("eos_token_id", 2), ("decoder_start_token_id", 2))))


@dataclass
class LEDLayout:
    vocab: int
    width: int
    encoder_layers: int
    decoder_layers: int
    encoder_ffn: int
    decoder_ffn: int
    encoder_heads: int
    decoder_heads: int
    encoder_positions: int  # without the reserved rows
    decoder_positions: int
    windows: Tuple[int, ...]  # one-sided w per encoder layer
    dropout: float
    attention_dropout: float
    activation_dropout: float
    padding_idx: int = 1

    def key_map(self) -> Dict[str, str]:
        """fairseq key -> HF key of every tensor copied as it is (not the token and position tables)."""
        return {fs: hf for fs, (hf, _) in table_keys(KEY_TABLE, {"e": self.encoder_layers,
                                                                "d": self.decoder_layers}).items()}

    def hf_config(self) -> Dict[str, object]:
        fixed = {name: value for name, value, _, _ in CONFIG_RULES}  # what the import accepts: fairseq's ids, gelu
        return {"architectures": ["LEDForConditionalGeneration"], "model_type": "led", "is_encoder_decoder": True,
                **fixed, **{hf: getattr(self, name) for name, hf in HF_FIELDS.items()},
                **{name: getattr(self, name) for name in DROPOUTS}, "attention_window": [2 * w for w in self.windows]}

    @classmethod
    def from_hf_config(cls, config: Dict[str, object], where: str) -> "LEDLayout":
        """The layout an HF LED config.json describes; ValueError naming every entry fairseq's LED cannot take."""
        missing = [key for key in (*HF_FIELDS.values(), "attention_window") if key not in config]
        if missing:
            raise ValueError(f"{where}: config.json lacks {missing}: not a complete LED config")
        problems = rule_problems(config, CONFIG_RULES)
        windows, window_problem = from_hf_windows(config["attention_window"], int(config["encoder_layers"]))
        problems += [window_problem] if window_problem else []
        for stack in ("encoder", "decoder"):
            heads = int(config[f"{stack}_attention_heads"])
            if heads < 1 or int(config["d_model"]) % heads:
                problems.append(f"{stack}_attention_heads = {heads} does not divide d_model {config['d_model']}")
        if problems:
            raise ValueError(f"cannot import {where} as a fairseq LED, nothing was written: " + "; ".join(problems))
        return cls(**{name: int(config[hf]) for name, hf in HF_FIELDS.items()}, windows=windows,
                   **{name: float(config.get(name, default)) for name, default in DROPOUTS.items()})

    def model_dims(self) -> Dict[str, int]:  # as fairseq's flags name them
        return {"encoder_layers": self.encoder_layers, "decoder_layers": self.decoder_layers,
                "encoder_embed_dim": self.width, "decoder_embed_dim": self.width,
                "encoder_ffn_embed_dim": self.encoder_ffn, "decoder_ffn_embed_dim": self.decoder_ffn,
                "encoder_attention_heads": self.encoder_heads, "decoder_attention_heads": self.decoder_heads}

    def arch(self) -> str:  # the sizes are given explicitly anyway
        return "led_large" if (self.width, self.encoder_layers) == (1024, 12) else "led_base"


def inspect_led(model) -> LEDLayout:
    """The layout of a built fairseq LED; ValueError naming every setting HF's LED cannot represent."""
    from ...models.led import LEDModel
    if not isinstance(model, LEDModel):
        raise ValueError(f"not an LED model ({type(model).__name__}): export it with the Longformer export")
    encoder, decoder = model.encoder, model.decoder
    windows = [layer.self_attn.config.pattern.window for layer in encoder.layers]
    problems = window_problems(windows, "encoder layer") + stack_problems("encoder", encoder, "HF's LED") \
        + stack_problems("decoder", decoder, "HF's LED", longformer_layers=False)
    tokens = encoder.embed_tokens
    if decoder.embed_tokens is not tokens or decoder.output_projection.weight is not tokens.weight:
        problems.append("embeddings not shared between encoder, decoder and output (--share-all-embeddings, as BART)")
    if getattr(decoder, "project_in_dim", None) is not None or getattr(decoder, "project_out_dim", None) is not None:
        problems.append("decoder input/output dims differ from its width")
    if getattr(decoder, "cross_self_attention", False):
        problems.append("--cross-self-attention")
    if problems:
        raise ValueError("this LED cannot be represented as HF's LEDForConditionalGeneration: " + "; ".join(problems))
    reserved, args = encoder.padding_idx + 1, model.args
    return LEDLayout(
        *encoder.embed_tokens.weight.shape, len(encoder.layers), len(decoder.layers),
        encoder.layers[0].fc1.out_features, decoder.layers[0].fc1.out_features,
        encoder.layers[0].self_attn.num_heads, decoder.layers[0].self_attn.num_heads,
        encoder.embed_positions.weight.shape[0] - reserved, decoder.embed_positions.weight.shape[0] - reserved,
        tuple(windows), float(args.dropout), float(args.attention_dropout),
        float(getattr(args, "activation_dropout", 0.0) or 0.0), encoder.padding_idx)


def fairseq_to_hf_state(state: Dict[str, Tensor], layout: LEDLayout) -> Dict[str, Tensor]:
    """fairseq LED state dict -> HF tensors (tied copies and the logits bias are HF's); none left behind."""
    mapping = {**layout.key_map(), TOKENS[0]: TOKENS[1], **dict(POSITIONS)}
    out = renamed(state, mapping, "fairseq tensors with no place in HF's LED",
                  ignored=(*FAIRSEQ_TIED, "encoder.version", "decoder.version"))
    for _, hf in POSITIONS:
        out[hf] = out[hf][layout.padding_idx + 1:]
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def hf_to_fairseq_state(hf_state: Dict[str, Tensor], layout: LEDLayout,
                        reserved: Optional[Dict[str, Tensor]] = None) -> Dict[str, Tensor]:
    """HF LED tensors -> fairseq's (not the versions), tied copies checked equal, reserved rows ``reserved`` or 0."""
    tables = [key for key in (TOKENS[1], *HF_TIED) if key in hf_state] or [TOKENS[1]]
    forward = {**layout.key_map(), **dict(POSITIONS)}
    out = renamed(hf_state, {**{hf: fs for fs, hf in forward.items()}, tables[0]: TOKENS[0]}, f"the tensors are not "
                  f"those of an LED with {layout.encoder_layers} + {layout.decoder_layers} layers",
                  ignored=(*tables[1:], HF_LOGITS_BIAS))
    if any(not torch.equal(hf_state[key], out[TOKENS[0]]) for key in tables[1:]):
        raise ValueError(f"{tables} differ: HF ties them to one token table, fairseq's BART has one")
    bias = hf_state.get(HF_LOGITS_BIAS)
    if bias is not None and bool(bias.ne(0).any()):
        raise ValueError(f"{HF_LOGITS_BIAS} is not zero: fairseq's output projection has no bias")
    out.update({fs: out[TOKENS[0]] for fs in FAIRSEQ_TIED})
    rows = layout.padding_idx + 1
    for fs, hf in POSITIONS:
        kept = (reserved or {}).get(fs)
        if kept is None or tuple(kept.shape) != (rows, layout.width):
            kept = torch.zeros(rows, layout.width, dtype=hf_state[hf].dtype)
        out[fs] = torch.cat([kept, hf_state[hf]])
    return {k: v.detach().clone().contiguous() for k, v in out.items()}
