"""Export of an LED checkpoint (``models/led.py``) to Hugging Face's ``LEDForConditionalGeneration``.

The conventions at this boundary, each converted here and nowhere else:
  * window: fairseq's is one-sided (w per layer); HF's ``attention_window`` is two-sided (2w);
  * positions: fairseq's learned tables have ``padding_idx + 1`` reserved rows before position 0;
    HF's ``LEDLearnedPositionalEmbedding`` indexes from 0, so the export drops those rows
    (``max_encoder_position_embeddings`` = the encoder's positions, 16,384 for the released LED);
  * embeddings: fairseq BART shares one table between encoder, decoder and output projection; HF
    keeps it as ``led.shared`` (tied to both ``embed_tokens`` and ``lm_head``), and adds a zero
    ``final_logits_bias``;
  * the decoder starts from ``</s>`` in fairseq (``prev_output_tokens``), so
    ``decoder_start_token_id`` is the eos id;
  * global attention: fairseq's LED makes the first source token global when no mask is given;
    HF takes an explicit ``global_attention_mask`` (pass 1 on token 0 to match);
  * padding: fairseq's positions skip padding (left or right), HF's count from 0 whatever the
    padding, so the two agree on right-padded (or unpadded) input, which is HF's convention.

The key map is declarative (``{}`` = layer index), its reverse derived; the fairseq model is
built through fairseq (``load_led``), every setting HF's LED cannot represent is named before
anything is written, and the folder is assembled next to the output and renamed into place
(``atomic.staged_folder``). The export also keeps fairseq's reserved position rows, which HF has
no place for, in ``fairseq_reserved_positions.safetensors`` (no effect on any output: position
ids start after them), so that the import gives them back.

The import (HF -> fairseq, ``hf_led_import.py``) reads the conventions from here: the key map and
its reverse, the tensor names, ``LEDLayout`` (with ``LEDLayout.from_hf_config``) and ``load_led``.

Shapes: V vocabulary, C width, P_e / P_d encoder / decoder positions (without reserved rows).
"""
import logging
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from .. import checkpoints
from ..atomic import check_output_dir, staged_folder
from .hf_tokenizer import TokenizerFiles, build_tokenizer, save_tokenizer

logger = logging.getLogger(__name__)

HF_ARCHITECTURE = "LEDForConditionalGeneration"
DICT_COPY = "fairseq_dict.txt"  # the fairseq dictionary, as the Longformer export writes it

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
# HF config entries the import reads; each is in every config.json transformers writes for an LED
HF_LAYOUT_KEYS = ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_ffn_dim",
                  "decoder_ffn_dim", "encoder_attention_heads", "decoder_attention_heads",
                  "max_encoder_position_embeddings", "max_decoder_position_embeddings", "attention_window")


def led_key_map(encoder_layers: int, decoder_layers: int) -> Dict[str, str]:
    """fairseq key -> HF key for every tensor copied as it is (weights and biases); the token
    table and the position tables (``TOKENS``, ``POSITIONS``) are handled apart."""
    modules = list(TOP_LEVEL)
    modules += [(f"encoder.layers.{i}.{fs}", f"led.encoder.layers.{i}.{hf}")
                for i in range(encoder_layers) for fs, hf in ENCODER_LAYER]
    modules += [(f"decoder.layers.{i}.{fs}", f"led.decoder.layers.{i}.{hf}")
                for i in range(decoder_layers) for fs, hf in DECODER_LAYER]
    return {f"{fs}.{part}": f"{hf}.{part}" for fs, hf in modules for part in ("weight", "bias")}


def reverse_led_key_map(encoder_layers: int, decoder_layers: int) -> Dict[str, str]:
    """HF key -> fairseq key (the import direction), derived from ``led_key_map``."""
    return {hf: fs for fs, hf in led_key_map(encoder_layers, decoder_layers).items()}


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
            "architectures": [HF_ARCHITECTURE], "model_type": "led", "vocab_size": self.vocab,
            "d_model": self.width, "encoder_layers": self.encoder_layers, "decoder_layers": self.decoder_layers,
            "encoder_ffn_dim": self.encoder_ffn, "decoder_ffn_dim": self.decoder_ffn,
            "encoder_attention_heads": self.encoder_heads, "decoder_attention_heads": self.decoder_heads,
            "max_encoder_position_embeddings": self.encoder_positions,
            "max_decoder_position_embeddings": self.decoder_positions,
            "attention_window": [2 * w for w in self.windows],  # HF: two-sided
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
        problems = []

        def want(name, default, ok, why):
            if not ok(config.get(name, default)):
                problems.append(f"{name} = {config.get(name, default)!r}: {why}")

        want("activation_function", "gelu", lambda v: v == "gelu", "the fairseq LED is built with exact gelu only")
        want("scale_embedding", False, lambda v: not v, "fairseq's BART does not scale embeddings")
        want("tie_word_embeddings", True, bool, "fairseq's BART shares one token table (--share-all-embeddings)")
        for name, fairseq_id in (("pad_token_id", 1), ("bos_token_id", 0), ("eos_token_id", 2),
                                 ("decoder_start_token_id", 2)):  # fairseq's decoder starts with </s>
            want(name, fairseq_id, lambda v, i=fairseq_id: v == i, f"fairseq's dictionary and decoder fix it to {fairseq_id}")
        layers = int(config["encoder_layers"])
        windows = config["attention_window"]
        windows = windows if isinstance(windows, list) else [windows] * layers
        if len(windows) != layers or any(not isinstance(w, int) or w < 2 or w % 2 for w in windows):
            problems.append(f"attention_window = {config['attention_window']!r}: expected a positive even number "
                            f"(two-sided) or one per encoder layer ({layers})")
        for stack in ("encoder", "decoder"):
            heads = int(config[f"{stack}_attention_heads"])
            if heads < 1 or int(config["d_model"]) % heads:
                problems.append(f"{stack}_attention_heads = {heads} does not divide d_model {config['d_model']}")
        if problems:
            raise ValueError(f"cannot import {where} as a fairseq LED, nothing was written:\n  - "
                             + "\n  - ".join(problems))
        return cls(
            vocab=int(config["vocab_size"]), width=int(config["d_model"]), encoder_layers=layers,
            decoder_layers=int(config["decoder_layers"]), encoder_ffn=int(config["encoder_ffn_dim"]),
            decoder_ffn=int(config["decoder_ffn_dim"]), encoder_heads=int(config["encoder_attention_heads"]),
            decoder_heads=int(config["decoder_attention_heads"]),
            encoder_positions=int(config["max_encoder_position_embeddings"]),
            decoder_positions=int(config["max_decoder_position_embeddings"]),
            windows=tuple(w // 2 for w in windows), dropout=float(config.get("dropout", 0.1)),
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


@dataclass
class LEDExportResult:
    out_dir: Path
    config: Dict[str, object]
    tokenizer: Optional[str] = None
    notes: List[str] = field(default_factory=list)


def _is_exact_gelu(fn) -> bool:
    """HF's "gelu" is the erf form; fairseq's "gelu" is the same function (gelu_accurate is not)."""
    from fairseq import utils

    return fn is utils.get_activation_fn("gelu") or fn is torch.nn.functional.gelu


def inspect_led(model) -> LEDLayout:
    """The layout of a built fairseq LED; raise ValueError naming every setting HF's
    LEDForConditionalGeneration cannot represent."""
    from ..models.led import LEDModel

    if not isinstance(model, LEDModel):
        raise ValueError(f"not an LED model ({type(model).__name__}): export it with the Longformer export")
    encoder, decoder = model.encoder, model.decoder
    problems = []
    windows = []
    for i, layer in enumerate(encoder.layers):
        config = layer.self_attn.config
        pattern = config.pattern
        if any(d != 1 for d in pattern.dilation_per_head(layer.self_attn.num_heads)):
            problems.append(f"encoder layer {i}: dilation {pattern.dilation} (HF's LED has none)")
        if pattern.window < 1:
            problems.append(f"encoder layer {i}: window {pattern.window} (HF's attention_window must be positive)")
        if not config.global_projections:
            problems.append(f"encoder layer {i}: no global projections (HF's LED always has them)")
        windows.append(pattern.window)
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
        if not all(_is_exact_gelu(layer.activation_fn) for layer in stack.layers):
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
    mapping = led_key_map(layout.encoder_layers, layout.decoder_layers)
    reserved = layout.padding_idx + 1
    out = {hf: state[fs] for fs, hf in mapping.items()}
    out[TOKENS[1]] = state[TOKENS[0]]
    for fs, hf in POSITIONS:
        out[hf] = state[fs][reserved:]
    left = set(state) - set(mapping) - {TOKENS[0], *(fs for fs, _ in POSITIONS), *FAIRSEQ_TIED, *FAIRSEQ_BOOKKEEPING}
    if left:
        raise ValueError(f"fairseq tensors with no place in HF's LED: {sorted(left)[:8]}")
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def load_led(checkpoint, dict_path=None):
    """(built fairseq LED in eval mode, its dictionary) from a checkpoint through fairseq's own
    loader and upgrades. The dictionary: ``dict_path``, else dict.txt next to the checkpoint;
    ``<mask>`` is added when the embeddings have its row (a model from the denoising task)."""
    import fairseq_longformer  # noqa: F401  (registers the model)
    from fairseq import checkpoint_utils
    from fairseq.data import Dictionary

    checkpoint = Path(checkpoint)
    if checkpoint.is_dir():
        checkpoint = checkpoint / "model.pt"
    if not checkpoint.is_file():
        raise FileNotFoundError(f"checkpoint {str(checkpoint)!r} not found")
    dict_file = Path(dict_path) if dict_path is not None else checkpoint.parent / "dict.txt"
    if not dict_file.is_file():
        raise FileNotFoundError(f"dictionary {str(dict_file)!r} not found (pass --dict: the dict.txt the "
                                "model was trained with)")
    state = checkpoint_utils.load_checkpoint_to_cpu(str(checkpoint))
    cfg = state.get("cfg")
    if cfg is None or not str(cfg.model.arch).startswith("led"):
        arch = None if cfg is None else cfg.model.arch
        raise ValueError(f"{str(checkpoint)!r} is not an LED checkpoint (arch {arch!r})")
    dictionary = Dictionary.load(str(dict_file))
    rows = state["model"]["encoder.embed_tokens.weight"].shape[0]
    if rows == len(dictionary) + 1 and "<mask>" not in dictionary.indices:
        dictionary.add_symbol("<mask>")
    # the model needs only the dictionaries of its task: no data folder to set up
    task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary, cfg=None)
    from ..models.led import LEDModel

    model = LEDModel.build_model(cfg.model, task)
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return model.eval(), dictionary


def export_led_model(model, dictionary, out_dir, tokenizer: Optional[TokenizerFiles] = None,
                     overwrite: bool = False) -> LEDExportResult:
    """Write a built fairseq LED as a Hugging Face LEDForConditionalGeneration folder
    (config.json, model.safetensors, fairseq_dict.txt, tokenizer files if given). All checks run
    before anything is written."""
    try:
        from safetensors.torch import save_file
        from transformers import LEDConfig, LEDForConditionalGeneration
    except ImportError as error:
        raise ImportError(f"export needs transformers (pip install 'fairseq-longformer[hf]'): {error}") from error
    layout = inspect_led(model)
    if len(dictionary) != layout.vocab:
        raise ValueError(f"the dictionary has {len(dictionary)} symbols, the model's embeddings {layout.vocab} rows: "
                         "pass the dict.txt the model was trained with")
    config = layout.hf_config(dictionary)
    tensors = fairseq_to_hf_state(model.state_dict(), layout)
    hf_model = LEDForConditionalGeneration(LEDConfig(**config))
    expected = {k: tuple(v.shape) for k, v in hf_model.state_dict().items()
                if k not in HF_TIED and k != HF_LOGITS_BIAS}
    got = {k: tuple(v.shape) for k, v in tensors.items()}
    if got != expected:
        wrong = sorted(k for k in set(got) | set(expected) if got.get(k) != expected.get(k))
        raise ValueError(f"exported tensors do not fit HF's LED: {[(k, got.get(k), expected.get(k)) for k in wrong[:6]]}")
    missing, unexpected = hf_model.load_state_dict(tensors, strict=False)
    assert set(missing) == {*HF_TIED, HF_LOGITS_BIAS} and not unexpected, (missing, unexpected)
    hf_model.final_logits_bias.zero_()
    hf_tokenizer, extra_files = build_tokenizer(tokenizer or TokenizerFiles(), dictionary, layout.encoder_positions)
    reserved = {fs: model.state_dict()[fs][:layout.padding_idx + 1].contiguous() for fs, _ in POSITIONS}
    with staged_folder(out_dir, overwrite) as tmp:
        hf_model.save_pretrained(str(tmp), safe_serialization=True)
        dictionary.save(str(tmp / DICT_COPY))
        save_file(reserved, str(tmp / RESERVED_ROWS), metadata={"format": "pt"})
        if hf_tokenizer is not None:
            save_tokenizer(tmp, hf_tokenizer, extra_files)
    out_dir = Path(out_dir).absolute()
    logger.info(f"exported the LED ({layout.encoder_layers} + {layout.decoder_layers} layers, one-sided windows "
                f"{list(layout.windows)} -> HF attention_window {config['attention_window']}) to {out_dir}")
    return LEDExportResult(out_dir, config, tokenizer.kind if tokenizer else None)


def export_led(checkpoint, out_dir, dict_path=None, tokenizer: Optional[TokenizerFiles] = None,
               overwrite: bool = False) -> LEDExportResult:
    """An LED checkpoint (+ its dict.txt) -> a Hugging Face LEDForConditionalGeneration folder."""
    check_output_dir(out_dir, overwrite)  # fail before the slow checkpoint load
    model, dictionary = load_led(checkpoint, dict_path)
    return export_led_model(model, dictionary, out_dir, tokenizer, overwrite)


def is_led_checkpoint(checkpoint) -> bool:
    """Whether ``checkpoint`` (a file, or a folder with model.pt) holds an LED (arch led_*): the
    test ``longformer-export-hf`` dispatches on."""
    path = Path(checkpoint)
    path = path / "model.pt" if path.is_dir() else path
    if not path.is_file():
        return False
    try:  # mmap: only the config is read, not the weights
        state = checkpoints.load_checkpoint(path, trust=checkpoints.checkpoints_trusted(), mmap=True)
    except Exception:  # not a checkpoint torch can map: the Longformer export reports what it is
        return False
    model = state["cfg"].get("model") if state.get("cfg") is not None else state.get("args")
    arch = model.get("arch") if hasattr(model, "get") else getattr(model, "arch", None)
    return isinstance(arch, str) and arch.startswith("led")
