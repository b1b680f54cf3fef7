"""BART -> LED checkpoint conversion (paper, sec. 7, "Longformer-Encoder-Decoder").

A stock fairseq BART folder (``model.pt`` + ``dict.txt``; bart.base and bart.large layouts, a
pretrained or a fine-tuned model) becomes an LED checkpoint folder that ``fairseq-train --user-dir
fairseq_longformer --arch led_base --task translation --restore-file OUT/model.pt`` and
``fairseq-generate --path OUT/model.pt`` load:

  * the encoder's learned positions tiled from BART's P positions to ``max_positions`` (a multiple
    of P: 16,384 = 16 x 1,024), fairseq's reserved rows 0 .. padding_idx kept as they are (the
    paper's copy initialisation; allenai's converter tiles the same rows);
  * global projections Q_g, K_g, V_g of every encoder layer initialised as copies of its Q, K, V;
  * the decoder, the embeddings and everything else untouched;
  * the saved config (``cfg`` of a Hydra-era checkpoint, or ``args`` of an older one) rewritten to
    arch ``led_base`` (``led_large`` from ``bart_large``; the sizes are the checkpoint's own), with
    the one-sided window per encoder layer and ``max_source_positions``; provenance in
    ``extra_state["led_conversion"]``;
  * the training state reset (update 0, no optimizer state): fine-tuning starts fresh.

Everything is validated in memory before anything is written; the folder is written by
``fairseq_checkpoint.write_folder`` (temporary names moved into place, model.pt last).

With every window at least as long as the input and the default global token (or none), the
LED computes exactly BART's function (tests/led/test_led_model.py).
"""
import logging
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from torch import Tensor

from longformer_kernels import AttentionPattern, parse_per_layer
from ..global_projections import add_missing_global_projections
from .fairseq_checkpoint import (
    check_output, config_get, config_sections, config_set, load_checkpoint, resolve_source, write_folder,
)
from .positions import extend_positions
from .restore import fresh_training_state
from .roberta import expected_vocab_rows

logger = logging.getLogger(__name__)

POSITIONS_KEY = "encoder.embed_positions.weight"
DECODER_POSITIONS_KEY = "decoder.embed_positions.weight"
TOKENS_KEY = "encoder.embed_tokens.weight"
# per layer, in both stacks; the decoder adds cross-attention
LAYER_MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj",
                 "self_attn_layer_norm", "fc1", "fc2", "final_layer_norm")
CROSS_MODULES = ("encoder_attn.q_proj", "encoder_attn.k_proj", "encoder_attn.v_proj",
                 "encoder_attn.out_proj", "encoder_attn_layer_norm")
ARCHS = {"bart_large": "led_large", "mbart_large": "led_large"}  # anything else: led_base
DEFAULT_MAX_POSITIONS = 16384
DEFAULT_WINDOW = "512"
CRITERION = "LabelSmoothedCrossEntropyCriterion"


@dataclass
class LEDConversionResult:
    """What ``convert_bart_checkpoint`` wrote, and the numbers a training command needs.
    model_dims: encoder/decoder layers, embed dims, ffn dims and attention heads."""

    checkpoint: Path
    dictionary: Path
    arch: str
    attention_window: Tuple[int, ...]
    max_positions: int  # the encoder's
    decoder_positions: int
    bart_positions: int
    model_dims: Dict[str, int]
    source: Optional[Path] = None
    copied_files: List[str] = field(default_factory=list)
    dropped_keys: List[str] = field(default_factory=list)

    def model_flags(self) -> List[str]:
        """The flags that build a model this checkpoint loads into (sizes given explicitly, so a
        BART of any size works; the rest are the architecture's defaults, i.e. BART's)."""
        flags = ["--arch", self.arch]
        for name, value in self.model_dims.items():
            flags += ["--" + name.replace("_", "-"), str(value)]
        return flags + ["--attention-window", ",".join(str(w) for w in self.attention_window),
                        "--max-source-positions", str(self.max_positions),
                        "--max-target-positions", str(self.decoder_positions)]

    def train_flags(self) -> List[str]:
        """fairseq-train flags for fine-tuning on document -> summary pairs (fairseq's translation
        task), starting from this checkpoint."""
        return self.model_flags() + ["--task", "translation", "--criterion", "label_smoothed_cross_entropy",
                                     "--restore-file", str(self.checkpoint)]

    def generate_flags(self) -> List[str]:
        """fairseq-generate flags: the task's source limit must be raised to the encoder's too
        (fairseq filters sources by the smaller of the task's and the model's limits).

        ``--required-batch-size-multiple 1``: batches of exactly --batch-size. (fairseq-fixed
        0.12.3.1 drops the last batch when its size is not a multiple of this, default 8; the
        plugin's compat.py gives it back, and stock fairseq-generate without --user-dir needs this
        flag not to skip documents.)"""
        return ["--task", "translation", "--path", str(self.checkpoint),
                "--max-source-positions", str(self.max_positions),
                "--max-target-positions", str(self.decoder_positions), "--required-batch-size-multiple", "1"]


# ----------------------------------------------------------------------------------------------
# checking the source


def count_layers(model_state: Mapping, stack: str) -> int:
    """Number of ``{stack}.layers.N.`` layers in the state dict (0 if none)."""
    pattern = re.compile(re.escape(stack) + r"\.layers\.(\d+)\.")
    indices = {int(m.group(1)) for k in model_state for m in [pattern.match(k)] if m}
    return max(indices) + 1 if indices else 0


def check_bart_state(model_state: Mapping, path) -> Tuple[int, int]:
    """Raise ValueError unless ``model_state`` is a fairseq BART with learned positions; return
    (encoder layers, decoder layers)."""
    if any(".sentence_encoder." in k for k in model_state):
        raise ValueError(f"{str(path)!r} is a RoBERTa (encoder-only) checkpoint: convert it with "
                         "longformer-convert-roberta")
    if any("_global_proj." in k for k in model_state):
        raise ValueError(f"{str(path)!r} already has global projections: it is a Longformer/LED "
                         "checkpoint, not a BART one")
    encoder_layers, decoder_layers = count_layers(model_state, "encoder"), count_layers(model_state, "decoder")
    if not encoder_layers or not decoder_layers:
        raise ValueError(f"{str(path)!r} is not a BART checkpoint: it has {encoder_layers} encoder and "
                         f"{decoder_layers} decoder layers (encoder.layers.N.*, decoder.layers.N.*)")
    required = [f"{stack}.{key}" for stack in ("encoder", "decoder")
                for key in ("embed_tokens.weight", "embed_positions.weight")]
    required += [f"encoder.layers.{i}.{m}.{p}" for i in range(encoder_layers)
                 for m in LAYER_MODULES for p in ("weight", "bias")]
    required += [f"decoder.layers.{i}.{m}.{p}" for i in range(decoder_layers)
                 for m in LAYER_MODULES + CROSS_MODULES for p in ("weight", "bias")]
    missing = [k for k in required if k not in model_state]
    if missing:
        shown = ", ".join(missing[:12]) + (f", ... ({len(missing)} in all)" if len(missing) > 12 else "")
        raise ValueError(f"{str(path)!r} is not a BART checkpoint (fairseq encoder-decoder with learned "
                         f"positions and separate q/k/v projections): missing keys {shown}")
    width = model_state[TOKENS_KEY].shape[1]
    for key in (POSITIONS_KEY, DECODER_POSITIONS_KEY):
        table = model_state[key]
        if table.dim() != 2 or table.shape[1] != width or table.shape[0] < 3:
            raise ValueError(f"{key} has shape {tuple(table.shape)}: expected (positions + 2, {width}), "
                             "fairseq's learned positions with their 2 reserved rows")
    return encoder_layers, decoder_layers


def check_vocabulary(model_state: Mapping, dict_path: Path) -> int:
    """Raise ValueError when dict.txt does not match the token embeddings; return the padding
    index. A pretrained BART's embeddings have one row more than dict.txt gives (``<mask>``, added
    by the denoising task); a fine-tuned one's may not: both are accepted, BART's own
    ``upgrade_state_dict_named`` drops the extra row when the task's dictionary has no <mask>."""
    with_mask, symbols, pad = expected_vocab_rows(dict_path)
    for key in (TOKENS_KEY, "decoder.embed_tokens.weight"):
        have = model_state[key].shape[0]
        if have not in (symbols, with_mask):
            raise ValueError(
                f"dictionary {str(dict_path)!r} does not match the checkpoint: it gives {symbols} symbols "
                f"(4 specials + {symbols - 4} lines), so {key} should have {symbols} rows (or {with_mask} "
                f"with <mask>), but it has {have}"
            )
    if pad != 1:
        raise ValueError(f"dictionary {str(dict_path)!r} has padding index {pad}; fairseq BART uses 1")
    return pad


def check_max_positions(max_positions, bart_positions: int) -> None:
    """``max_positions`` must be a whole number of BART's position tables (at least one)."""
    if not isinstance(max_positions, int) or isinstance(max_positions, bool) or max_positions < 1:
        raise ValueError(f"--max-positions must be a positive int, got {max_positions!r}")
    if max_positions % bart_positions:
        raise ValueError(
            f"--max-positions {max_positions} is not a multiple of BART's {bart_positions} encoder "
            f"positions: the copy initialisation tiles BART's table whole (e.g. "
            f"{16 * bart_positions} = 16 x {bart_positions}, the released LED's)"
        )


def parse_windows(attention_window, layers: int) -> Tuple[int, ...]:
    """One one-sided window per encoder layer, each validated (an int >= 0)."""
    try:
        windows = parse_per_layer(attention_window, layers, "attention-window")
    except ValueError as error:
        raise ValueError(f"--attention-window {attention_window!r}: {error}") from error
    for w in windows:
        AttentionPattern(window=w)
    return windows


def model_dims(model_section, model_state: Mapping, encoder_layers: int, decoder_layers: int) -> Dict[str, int]:
    """Layer counts and widths from the state dict (authoritative), heads from the config."""
    dims = {
        "encoder_layers": encoder_layers,
        "decoder_layers": decoder_layers,
        "encoder_embed_dim": int(model_state[TOKENS_KEY].shape[1]),
        "decoder_embed_dim": int(model_state["decoder.embed_tokens.weight"].shape[1]),
        "encoder_ffn_embed_dim": int(model_state["encoder.layers.0.fc1.weight"].shape[0]),
        "decoder_ffn_embed_dim": int(model_state["decoder.layers.0.fc1.weight"].shape[0]),
    }
    for stack in ("encoder", "decoder"):
        heads = config_get(model_section, f"{stack}_attention_heads")
        if heads is None:
            raise ValueError(f"the checkpoint's config does not say {stack}_attention_heads")
        if dims[f"{stack}_embed_dim"] % int(heads):
            raise ValueError(f"{stack}_attention_heads {heads} does not divide the {stack} width "
                             f"{dims[f'{stack}_embed_dim']}")
        dims[f"{stack}_attention_heads"] = int(heads)
    return dims


# ----------------------------------------------------------------------------------------------
# the converted checkpoint


def rewrite_config(state: Mapping, arch: str, dims: Dict[str, int], windows, max_positions: int):
    """(args, cfg) of the LED checkpoint: the source's, with arch, sizes, window per layer and
    the encoder's positions (also in the task section, which fairseq's hub loader reads)."""
    args, cfg = config_sections(state)
    model_section = args if args is not None else cfg["model"]
    for key, value in dims.items():
        config_set(model_section, key, value)
    for key, value in (("_name", arch), ("arch", arch), ("attention_window", ",".join(map(str, windows))),
                       ("attention_dilation", "1"), ("attention_impl", "auto"),
                       ("max_source_positions", max_positions)):
        config_set(model_section, key, value)
    task = None if cfg is None else cfg.get("task")
    if task is not None and config_get(task, "max_source_positions") is not None:
        config_set(task, "max_source_positions", max_positions)
    return args, cfg


def convert_state_dict(model_state: Mapping, max_positions: int,
                       padding_idx: int = 1) -> Tuple[Dict[str, Tensor], List[str]]:
    """BART state dict -> LED state dict. Returns (state, dropped keys): classification heads are
    dropped (the LED has none)."""
    out, dropped = {}, []
    for key, value in model_state.items():
        if key.startswith("classification_heads."):
            dropped.append(key)
        else:
            out[key] = value
    out[POSITIONS_KEY] = extend_positions(model_state[POSITIONS_KEY], max_positions, padding_idx=padding_idx,
                                          init="copy")
    add_missing_global_projections(out, prefix="encoder.layers.")
    return out, dropped


def convert_bart_checkpoint(source, out_dir, max_positions: int = DEFAULT_MAX_POSITIONS,
                            attention_window=DEFAULT_WINDOW, checkpoint_file: str = "model.pt",
                            dict_file=None, overwrite: bool = False) -> LEDConversionResult:
    """Convert a fairseq BART checkpoint into an LED checkpoint folder (model.pt + dict.txt).

    source: a folder holding ``checkpoint_file`` and dict.txt, or a checkpoint file (dict.txt next to
    it unless ``dict_file``). max_positions: the encoder's positions, a multiple of BART's.
    attention_window: one-sided w, one value or one per encoder layer ("512" or "256,512,...").
    Raises FileNotFoundError / ValueError, with nothing written, on bad input.
    """
    checkpoint_path, dict_path = resolve_source(source, checkpoint_file, dict_file, kind="BART")
    out_dir = check_output(out_dir, checkpoint_path, overwrite)

    state = load_checkpoint(checkpoint_path, kind="BART")
    model_state = state["model"]
    encoder_layers, decoder_layers = check_bart_state(model_state, checkpoint_path)
    padding_idx = check_vocabulary(model_state, dict_path)
    reserved = padding_idx + 1
    bart_positions = model_state[POSITIONS_KEY].shape[0] - reserved
    decoder_positions = model_state[DECODER_POSITIONS_KEY].shape[0] - reserved
    check_max_positions(max_positions, bart_positions)
    windows = parse_windows(attention_window, encoder_layers)
    args, cfg = config_sections(state)
    model_section = args if args is not None else cfg["model"]
    dims = model_dims(model_section, model_state, encoder_layers, decoder_layers)
    arch = ARCHS.get(config_get(model_section, "arch"), "led_base")

    new_state, dropped = convert_state_dict(model_state, max_positions, padding_idx)
    new_args, new_cfg = rewrite_config(state, arch, dims, windows, max_positions)
    provenance = {"source": str(checkpoint_path), "bart_positions": bart_positions,
                  "max_positions": max_positions, "attention_window": list(windows)}
    output = {"args": new_args, "cfg": new_cfg, "model": new_state,
              **fresh_training_state({"led_conversion": provenance}, criterion_name=CRITERION)}
    copied = write_folder(out_dir, output, dict_path, checkpoint_path.parent)
    if dropped:
        logger.warning(f"dropped {len(dropped)} classification-head keys (the LED has no heads): {dropped[:4]}")
    logger.info(f"converted {checkpoint_path} ({bart_positions} encoder positions) -> {out_dir / 'model.pt'} "
                f"({max_positions} positions, window {windows})")
    return LEDConversionResult(
        checkpoint=out_dir / "model.pt", dictionary=out_dir / "dict.txt", arch=arch,
        attention_window=tuple(windows), max_positions=max_positions, decoder_positions=decoder_positions,
        bart_positions=bart_positions, model_dims=dims, source=checkpoint_path, copied_files=copied,
        dropped_keys=dropped,
    )


def generate_command(result: LEDConversionResult) -> str:
    """The fairseq-generate command line for a converted (then fine-tuned) LED; --user-dir is the
    installed plugin's folder, so it works from any directory."""
    plugin = Path(__file__).resolve().parent.parent
    return "fairseq-generate DATA " + shlex.join(["--user-dir", str(plugin)] + result.generate_flags())
