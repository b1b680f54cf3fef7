"""RoBERTa -> Longformer checkpoint conversion (paper, sec. 5, "Continued MLM Pretraining").

A stock fairseq RoBERTa checkpoint (``model.pt`` + ``dict.txt``) becomes a Longformer checkpoint
that ``fairseq-train --user-dir fairseq_longformer --restore-file OUT/model.pt`` and
``LongformerModel.from_pretrained(OUT)`` both load:

  * learned positions extended from the source's P positions to ``max_positions`` with
    ``extend_positions`` (``copy``: the P learned rows tiled in order, the paper's init;
    ``random``: its ablation);
  * global projections Q_g, K_g, V_g initialised as copies of Q, K, V;
  * the saved config (``cfg`` of a Hydra-era checkpoint, or ``args`` of an older one) rewritten to
    arch ``longformer_base`` with one attention window per layer, the new length in
    ``max_positions`` / ``tokens_per_sample`` and the batch padding multiple; the source's
    position count (``--train-new-positions-only`` needs it) is printed and kept in the
    checkpoint's ``extra_state["longformer_conversion"]``;
  * the training state reset (update 0, no optimizer state): continued pretraining starts fresh.

Both key layouts are read: fairseq >= 0.10 (``encoder.sentence_encoder.*``, ``layernorm_embedding``)
and the released 2019 checkpoints (``decoder.sentence_encoder.*``, ``emb_layer_norm``, possibly a
fused ``in_proj_weight``). The output always uses the current layout.

Everything is validated in memory before anything is written; files are written to temporary
names in the output folder and moved into place, ``model.pt`` last
(``fairseq_checkpoint.write_folder``).

Loading the result through fairseq's hub: ``LongformerModel.from_pretrained(OUT,
checkpoint_file="model.pt")``. fairseq's RoBERTa ``from_pretrained`` defaults to ``bpe="gpt2"``
(it fetches GPT-2's encoder.json unless cached); for a model with another vocabulary pass
``bpe=None`` (or the right bpe). Tokenizer files found next to the source (encoder.json,
vocab.bpe, sentencepiece.bpe.model, ...) are copied into OUT.

Security: fairseq checkpoints pickle ``argparse.Namespace`` / omegaconf objects, so they are read
with ``torch.load(weights_only=False)``, as fairseq itself does. Convert only files you trust.
"""
import argparse
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor

from longformer_kernels import AttentionPattern, parse_per_layer
from ..global_projections import add_missing_global_projections
from ..tasks.longformer_mlm import batch_pad_multiple
from .fairseq_checkpoint import (
    check_output, config_get as _get, config_sections, config_set as _set, load_checkpoint, resolve_source,
    write_folder,
)
from .positions import check_extendable, extend_positions
from .restore import ConvertedCheckpoint, fresh_training_state

logger = logging.getLogger(__name__)

ENCODER = "encoder.sentence_encoder."
OLD_ENCODER = "decoder.sentence_encoder."
POSITIONS_KEY = ENCODER + "embed_positions.weight"
TOKENS_KEY = ENCODER + "embed_tokens.weight"

EMBEDDING_KEYS = ("embed_tokens.weight", "embed_positions.weight",
                  "layernorm_embedding.weight", "layernorm_embedding.bias")
LAYER_MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj",
                 "self_attn_layer_norm", "fc1", "fc2", "final_layer_norm")
HEAD_KEYS = ("encoder.lm_head.weight", "encoder.lm_head.bias",
             "encoder.lm_head.dense.weight", "encoder.lm_head.dense.bias",
             "encoder.lm_head.layer_norm.weight", "encoder.lm_head.layer_norm.bias")

ARCH = "longformer_base"
TASK = "longformer_mlm"


@dataclass
class ConversionResult(ConvertedCheckpoint):
    """What ``convert_roberta_checkpoint`` wrote, and the numbers a training command needs."""

    source: Optional[Path] = None
    source_layout: str = "new"
    roberta_positions: int = 0
    init_positions: str = "copy"
    copied_files: List[str] = field(default_factory=list)
    dropped_keys: List[str] = field(default_factory=list)

    def train_flags(self) -> List[str]:
        """The fairseq-train flags that build a model this checkpoint loads into, with the
        --reset-* flags of continued pretraining (not needed by the fresh training state written
        here, but right for any RoBERTa checkpoint passed the same way)."""
        return super().train_flags() + ["--reset-optimizer", "--reset-dataloader", "--reset-meters"]


# ----------------------------------------------------------------------------------------------
# reading and checking the source


def detect_layout(model_state: Mapping) -> str:
    """'new' (encoder.sentence_encoder.*) or 'old' (decoder.sentence_encoder.*)."""
    has_new = any(k.startswith(ENCODER) for k in model_state)
    has_old = any(k.startswith(OLD_ENCODER) for k in model_state)
    if has_new and has_old:
        raise ValueError("the checkpoint mixes both key layouts (encoder.sentence_encoder.* and "
                         "decoder.sentence_encoder.*): not a RoBERTa checkpoint fairseq wrote")
    return "old" if has_old else "new"


def to_current_layout(model_state: Mapping) -> Dict[str, Tensor]:
    """Rename an old-layout state dict to fairseq's current names (what RobertaModel's
    ``upgrade_state_dict_named`` and MultiheadAttention's do at load time, done explicitly):
    ``decoder.`` -> ``encoder.``, ``emb_layer_norm`` -> ``layernorm_embedding``, and a fused
    ``in_proj_weight``/``in_proj_bias`` (rows [q; k; v]) split into q_proj, k_proj, v_proj."""
    out: Dict[str, Tensor] = {}
    for key, value in model_state.items():
        if key.startswith("decoder."):
            key = "encoder." + key[len("decoder."):]
        key = key.replace(".emb_layer_norm.", ".layernorm_embedding.")
        out[key] = value
    for key in [k for k in out if re.search(r"\.self_attn\.in_proj_(weight|bias)$", k)]:
        fused = out.pop(key)
        base, kind = key.rsplit(".in_proj_", 1)
        if fused.shape[0] % 3:
            raise ValueError(f"{key}: fused projection of {fused.shape[0]} rows is not 3 x embed_dim")
        dim = fused.shape[0] // 3
        for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
            out[f"{base}.{name}.{kind}"] = fused[i * dim:(i + 1) * dim].clone()
    return out


def _source_name(key: str, layout: str) -> str:
    """A current-layout key as the source checkpoint would spell it (for error messages)."""
    if layout == "old":
        key = "decoder." + key[len("encoder."):] if key.startswith("encoder.") else key
        key = key.replace(".layernorm_embedding.", ".emb_layer_norm.")
    return key


def count_layers(model_state: Mapping) -> int:
    indices = {int(m.group(1)) for k in model_state for m in [re.match(re.escape(ENCODER) + r"layers\.(\d+)\.", k)] if m}
    return max(indices) + 1 if indices else 0


def check_roberta_state(model_state: Mapping, layout: str, expected_layers: Optional[int], path) -> int:
    """Raise ValueError naming every missing key; return the number of layers."""
    layers = max(count_layers(model_state), expected_layers or 0, 1)
    required = [ENCODER + k for k in EMBEDDING_KEYS]
    required += [f"{ENCODER}layers.{i}.{m}.{p}" for i in range(layers) for m in LAYER_MODULES for p in ("weight", "bias")]
    required += list(HEAD_KEYS)
    missing = [_source_name(k, layout) for k in required if k not in model_state]
    if missing:
        shown = ", ".join(missing[:12]) + (f", ... ({len(missing)} in all)" if len(missing) > 12 else "")
        raise ValueError(f"{str(path)!r} is not a RoBERTa checkpoint (fairseq masked LM with learned "
                         f"positions): missing keys {shown}")
    positions = model_state[POSITIONS_KEY]
    if positions.dim() != 2 or positions.shape[1] != model_state[TOKENS_KEY].shape[1]:
        raise ValueError(f"{_source_name(POSITIONS_KEY, layout)} has shape {tuple(positions.shape)}: "
                         f"expected (positions + 2, {model_state[TOKENS_KEY].shape[1]})")
    return layers


def expected_vocab_rows(dict_path: Path) -> Tuple[int, int, int]:
    """(rows the embeddings must have, symbols read from dict.txt, padding index).

    fairseq's Dictionary starts with 4 specials (<s>, <pad>, </s>, <unk>), then one symbol per line
    of dict.txt (a line ending in ``#fairseq:overwrite`` replaces a symbol, adds none), and the
    masked_lm task appends ``<mask>`` unless it is already there.
    """
    from fairseq.data import Dictionary

    try:
        dictionary = Dictionary.load(str(dict_path))
    except Exception as error:
        raise ValueError(f"dictionary {str(dict_path)!r} is not a fairseq dict.txt: {error}") from error
    symbols = len(dictionary)
    rows = symbols + (0 if "<mask>" in dictionary.indices else 1)
    return rows, symbols, dictionary.pad()


def check_vocabulary(model_state: Mapping, dict_path: Path, layout: str) -> int:
    """Raise ValueError when dict.txt does not match the embeddings; return the padding index."""
    rows, symbols, pad = expected_vocab_rows(dict_path)
    for key in (TOKENS_KEY, "encoder.lm_head.weight", "encoder.lm_head.bias"):
        have = model_state[key].shape[0]
        if have != rows:
            raise ValueError(
                f"dictionary {str(dict_path)!r} does not match the checkpoint: it gives {symbols} "
                f"symbols (4 specials + {symbols - 4} lines) plus <mask> added by the masked_lm task "
                f"= {rows} rows expected, but {_source_name(key, layout)} has {have}"
            )
    if pad != 1:
        raise ValueError(f"dictionary {str(dict_path)!r} has padding index {pad}; fairseq RoBERTa uses 1")
    return pad


# ----------------------------------------------------------------------------------------------
# the saved configuration


def model_dims(model_section, model_state: Mapping, layers: int) -> Dict[str, int]:
    """Layer count and widths, from the state dict (authoritative) and the config (for heads)."""
    embed_dim = model_state[TOKENS_KEY].shape[1]
    heads = _get(model_section, "encoder_attention_heads")
    if heads is None:
        raise ValueError("the checkpoint's config does not say encoder_attention_heads")
    return {
        "encoder_layers": layers,
        "encoder_embed_dim": int(embed_dim),
        "encoder_ffn_embed_dim": int(model_state[ENCODER + "layers.0.fc1.weight"].shape[0]),
        "encoder_attention_heads": int(heads),
    }


def rewrite_model_section(model_section, dims, windows, max_positions) -> None:
    """Turn RoBERTa's model config into Longformer's (arch longformer_base), in place."""
    for key, value in dims.items():
        _set(model_section, key, value)
    _set(model_section, "_name", ARCH)
    _set(model_section, "arch", ARCH)
    _set(model_section, "attention_window", ",".join(str(w) for w in windows))
    _set(model_section, "attention_dilation", "1")
    _set(model_section, "attention_causal", False)
    _set(model_section, "attention_impl", "auto")
    # attention_dropout stays RoBERTa's (0.1 for roberta.base): the paper continues pretraining
    # with RoBERTa's hyperparameters, and the Longformer attention applies it.
    _set(model_section, "max_positions", max_positions)
    _set(model_section, "max_source_positions", max_positions)
    _set(model_section, "tokens_per_sample", max_positions)
    if _get(model_section, "task") is not None:  # a legacy Namespace holds every flag
        _set(model_section, "task", TASK)


def rewrite_config(state: Mapping, dims, windows, max_positions):
    """(args, cfg) of the converted checkpoint: model section as Longformer's, task longformer_mlm
    with blocks of ``max_positions`` and the batch padding multiple (``batch_pad_multiple``)."""
    pad_multiple = batch_pad_multiple(windows, max_positions)
    args, cfg = config_sections(state)
    if args is not None:
        rewrite_model_section(args, dims, windows, max_positions)
        args.task, args.pad_to_multiple = TASK, pad_multiple
    else:
        rewrite_model_section(cfg["model"], dims, windows, max_positions)
        task = cfg.get("task")
        if isinstance(task, Mapping):
            task["_name"] = TASK
            task["tokens_per_sample"] = max_positions
            task["pad_to_multiple"] = pad_multiple
        elif isinstance(task, argparse.Namespace):
            task._name, task.tokens_per_sample, task.pad_to_multiple = TASK, max_positions, pad_multiple
    return args, cfg


# ----------------------------------------------------------------------------------------------
# the state dict


def convert_state_dict(model_state: Mapping, max_positions: int, init: str,
                       padding_idx: int = 1, seed: int = 1) -> Tuple[Dict[str, Tensor], List[str]]:
    """Current-layout RoBERTa state dict -> Longformer state dict. Returns (state, dropped keys).

    Classification heads of a fine-tuned RoBERTa are dropped (an MLM checkpoint has none)."""
    out, dropped = {}, []
    for key, value in model_state.items():
        if key.startswith("classification_heads.") or key.startswith("encoder.classification_heads."):
            dropped.append(key)
            continue
        out[key] = value
    generator = torch.Generator().manual_seed(seed)
    out[POSITIONS_KEY] = extend_positions(model_state[POSITIONS_KEY], max_positions,
                                          padding_idx=padding_idx, init=init, generator=generator)
    add_missing_global_projections(out, prefix=ENCODER + "layers.")
    return out, dropped


# ----------------------------------------------------------------------------------------------
# writing


def convert_roberta_checkpoint(source, out_dir, max_positions: int = 4096, attention_window="256",
                               init_positions: str = "copy", checkpoint_file: str = "model.pt",
                               dict_file=None, seed: int = 1, overwrite: bool = False) -> ConversionResult:
    """Convert a fairseq RoBERTa checkpoint into a Longformer checkpoint folder (model.pt + dict.txt).

    source: a folder holding ``checkpoint_file`` and dict.txt, or a checkpoint file (dict.txt next to
    it unless ``dict_file``). attention_window: one-sided w, one value or one per layer ("256" or
    "64,64,128,..."). Raises FileNotFoundError / ValueError, with nothing written, on bad input.
    """
    if init_positions not in ("copy", "random"):
        raise ValueError(f"--init-positions must be 'copy' or 'random', got {init_positions!r}")
    if not isinstance(max_positions, int) or max_positions < 1:
        raise ValueError(f"--max-positions must be a positive int, got {max_positions!r}")
    checkpoint_path, dict_path = resolve_source(source, checkpoint_file, dict_file)
    out_dir = check_output(out_dir, checkpoint_path, overwrite)

    state = load_checkpoint(checkpoint_path)
    layout = detect_layout(state["model"])
    model_state = to_current_layout(state["model"])
    args, cfg = config_sections(state)
    model_section = args if args is not None else cfg["model"]
    cfg_layers = _get(model_section, "encoder_layers")
    layers = check_roberta_state(model_state, layout, cfg_layers, checkpoint_path)
    padding_idx = check_vocabulary(model_state, dict_path, layout)

    source_positions = model_state[POSITIONS_KEY].shape[0] - (padding_idx + 1)
    check_extendable(source_positions, max_positions)
    windows = parse_per_layer(attention_window, layers, "attention-window")
    for w in windows:
        AttentionPattern(window=w)  # validates (int >= 0)
    dims = model_dims(model_section, model_state, layers)
    if dims["encoder_embed_dim"] % dims["encoder_attention_heads"]:
        raise ValueError(f"encoder_attention_heads {dims['encoder_attention_heads']} does not divide "
                         f"the embedding width {dims['encoder_embed_dim']}")

    new_state, dropped = convert_state_dict(model_state, max_positions, init_positions, padding_idx, seed)
    new_args, new_cfg = rewrite_config(state, dims, windows, max_positions)
    provenance = {
        "source": str(checkpoint_path), "source_layout": layout, "roberta_positions": source_positions,
        "max_positions": max_positions, "init_positions": init_positions,
        "attention_window": list(windows), "seed": seed,
    }
    output = {"args": new_args, "cfg": new_cfg, "model": new_state,
              **fresh_training_state({"longformer_conversion": provenance})}

    copied = write_folder(out_dir, output, dict_path, checkpoint_path.parent)
    if dropped:
        logger.warning(f"dropped {len(dropped)} keys not part of an MLM model: {dropped[:5]}")
    logger.info(f"converted {checkpoint_path} ({layout} layout, {source_positions} positions) -> "
                f"{out_dir / 'model.pt'} ({max_positions} positions, init {init_positions}, window {windows})")
    return ConversionResult(
        checkpoint=out_dir / "model.pt", dictionary=out_dir / "dict.txt", arch=ARCH,
        attention_window=tuple(windows), max_positions=max_positions, model_dims=dims, source=checkpoint_path,
        source_layout=layout, roberta_positions=source_positions, init_positions=init_positions,
        copied_files=copied, dropped_keys=dropped,
    )
