"""fairseq -> fairseq conversion: ONE driver (``convert_checkpoint``) and a spec per source family
(``fairseq_sources``): state checked, positions extended, global Q/K/V copied from Q, K, V,
heads dropped, config rewritten, training state reset; all in memory before anything is written."""
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Dict, List, Tuple

import torch
from torch import Tensor

from longformer_kernels import AttentionPattern, parse_per_layer
from ..models.global_projections import add_missing_global_projections
from .fairseq_checkpoint import (
    check_output, config_get, config_sections, config_set, load_checkpoint, resolve_source, write_folder,
)
from .restore import fresh_training_state
from .rules import extend_positions

logger = logging.getLogger(__name__)

LED_CRITERION = "LabelSmoothedCrossEntropyCriterion"  # what fairseq records for an LED's training


def count_layers(model_state: Mapping, prefix: str) -> int:
    """Number of ``{prefix}layers.N.`` layers in the state dict (0 if none)."""
    pattern = re.compile(re.escape(prefix) + r"layers\.(\d+)\.")
    indices = {int(m.group(1)) for k in model_state for m in [pattern.match(k)] if m}
    return max(indices) + 1 if indices else 0


def missing_keys_error(path, kind: str, what: str, missing: List[str]) -> ValueError:
    shown = ", ".join(missing[:12]) + (f", ... ({len(missing)} in all)" if len(missing) > 12 else "")
    return ValueError(f"{str(path)!r} is not a {kind} checkpoint ({what}): missing keys {shown}")


def expected_vocab_rows(dict_path: Path) -> Tuple[int, int, int]:
    """(rows with <mask>, symbols read from dict.txt, padding index): fairseq's 4 specials, the
    file's symbols, and the ``<mask>`` the masked_lm and denoising tasks append unless present."""
    from fairseq.data import Dictionary

    try:
        dictionary = Dictionary.load(str(dict_path))
    except Exception as error:
        raise ValueError(f"dictionary {str(dict_path)!r} is not a fairseq dict.txt: {error}") from error
    symbols = len(dictionary)
    rows = symbols + (0 if "<mask>" in dictionary.indices else 1)
    return rows, symbols, dictionary.pad()


def check_vocabulary(model_state: Mapping, dict_path: Path, source, layout: str = "new") -> int:
    """Raise ValueError when dict.txt does not match the embeddings of ``source``'s vocabulary keys; return
    the padding index."""
    with_mask, symbols, pad = expected_vocab_rows(dict_path)
    for key in source.vocab_keys:
        have = model_state[key].shape[0]
        if have == with_mask or (source.mask_optional and have == symbols):
            continue
        if source.mask_optional:
            raise ValueError(
                f"dictionary {str(dict_path)!r} does not match the checkpoint: it gives {symbols} symbols "
                f"(4 specials + {symbols - 4} lines), so {source.spelled(key, layout)} should have {symbols} rows (or "
                f"{with_mask} with <mask>), but it has {have}")
        raise ValueError(
            f"dictionary {str(dict_path)!r} does not match the checkpoint: it gives {symbols} "
            f"symbols (4 specials + {symbols - 4} lines) plus <mask> added by the {source.task} task "
            f"= {with_mask} rows expected, but {source.spelled(key, layout)} has {have}")
    if pad != 1:
        raise ValueError(f"dictionary {str(dict_path)!r} has padding index {pad}; fairseq {source.kind} uses 1")
    return pad


def parse_windows(attention_window, layers: int) -> Tuple[int, ...]:
    """One one-sided window per (encoder) layer, each validated (an int >= 0)."""
    try:
        windows = parse_per_layer(attention_window, layers, "attention-window")
    except ValueError as error:
        raise ValueError(f"--attention-window {attention_window!r}: {error}") from error
    for w in windows:
        AttentionPattern(window=w)
    return tuple(windows)


def stack_dims(model_section, model_state: Mapping, stack: str, layers: int, tokens_key: str,
               layer_prefix: str) -> Dict[str, int]:
    """``{stack}_layers`` / ``_embed_dim`` / ``_ffn_embed_dim`` from the state dict (authoritative)
    and ``_attention_heads`` from the config, checked to divide the width."""
    width = int(model_state[tokens_key].shape[1])
    heads = config_get(model_section, f"{stack}_attention_heads")
    if heads is None:
        raise ValueError(f"the checkpoint's config does not say {stack}_attention_heads")
    if width % int(heads):
        raise ValueError(f"{stack}_attention_heads {heads} does not divide the {stack} width {width}")
    return {f"{stack}_layers": layers, f"{stack}_embed_dim": width,
            f"{stack}_ffn_embed_dim": int(model_state[layer_prefix + "layers.0.fc1.weight"].shape[0]),
            f"{stack}_attention_heads": int(heads)}


def convert_state_dict(model_state: Mapping, source, max_positions: int, init: str = "copy",
                       padding_idx: int = 1, seed: int = 1) -> Tuple[Dict[str, Tensor], List[str]]:
    """Source state dict (current layout) -> target state dict: classification heads dropped,
    positions extended, global projections copied from Q, K, V. Returns (state, dropped keys)."""
    out, dropped = {}, []
    for key, value in model_state.items():
        if key.startswith(source.dropped_prefixes):
            dropped.append(key)
        else:
            out[key] = value
    generator = torch.Generator().manual_seed(seed)
    out[source.positions_key] = extend_positions(model_state[source.positions_key], max_positions,
                                                 padding_idx=padding_idx, init=init, generator=generator)
    add_missing_global_projections(out, prefix=source.layer_prefix)
    return out, dropped


def rewrite_model_section(model_section, arch: str, dims: Mapping[str, int], windows, max_positions: int) -> None:
    """What every target's model config gets, in place: the architecture, the sizes, one window per
    layer, undilated, and the (encoder's) positions."""
    for key, value in dims.items():
        config_set(model_section, key, value)
    for key, value in (("_name", arch), ("arch", arch), ("attention_window", ",".join(map(str, windows))),
                       ("attention_dilation", "1"), ("attention_impl", "auto"),
                       ("max_source_positions", max_positions)):
        config_set(model_section, key, value)


def convert_checkpoint(source, source_dir, out_dir, max_positions: int, attention_window,
                       init_positions: str = "copy", checkpoint_file: str = "model.pt", dict_file=None,
                       seed: int = 1, overwrite: bool = False):
    """Convert the fairseq checkpoint of family ``source`` (a spec of ``fairseq_sources``) into a
    target checkpoint folder (model.pt + dict.txt). source_dir: a folder holding
    ``checkpoint_file`` and dict.txt, or a checkpoint file (dict.txt next to it unless
    ``dict_file``). attention_window: one-sided w, one value or one per (encoder) layer.
    Raises FileNotFoundError / ValueError, with nothing written, on bad input."""
    if init_positions not in ("copy", "random"):
        raise ValueError(f"--init-positions must be 'copy' or 'random', got {init_positions!r}")
    if not isinstance(max_positions, int) or isinstance(max_positions, bool) or max_positions < 1:
        raise ValueError(f"--max-positions must be a positive int, got {max_positions!r}")
    checkpoint_path, dict_path = resolve_source(source_dir, checkpoint_file, dict_file, kind=source.kind)
    out_dir = check_output(out_dir, checkpoint_path, overwrite)

    state = load_checkpoint(checkpoint_path, kind=source.kind)
    model_state, layout = source.read(state["model"])
    args, cfg = config_sections(state)
    model_section = args if args is not None else cfg["model"]
    layers = source.check_state(model_state, layout, model_section, checkpoint_path)
    padding_idx = check_vocabulary(model_state, dict_path, source, layout)
    source_positions = model_state[source.positions_key].shape[0] - (padding_idx + 1)
    source.check_positions(max_positions, source_positions)
    windows = parse_windows(attention_window, layers[0])
    dims = {name: value for (stack, tokens_key, prefix), count in zip(source.stacks, layers)
            for name, value in stack_dims(model_section, model_state, stack, count, tokens_key, prefix).items()}
    arch = source.archs.get(config_get(model_section, "arch"), source.default_arch)

    new_state, dropped = convert_state_dict(model_state, source, max_positions, init_positions, padding_idx, seed)
    rewrite_model_section(model_section, arch, dims, windows, max_positions)  # the copy config_sections made
    source.rewrite_config(args, cfg, windows, max_positions)
    provenance = {"source": str(checkpoint_path), "max_positions": max_positions,
                  "attention_window": list(windows), **source.provenance(layout, source_positions, init_positions, seed)}
    output = {"args": args, "cfg": cfg, "model": new_state,
              **fresh_training_state({source.provenance_key: provenance}, criterion_name=source.criterion)}
    copied = write_folder(out_dir, output, dict_path, checkpoint_path.parent)
    if dropped:
        logger.warning(f"dropped {len(dropped)} classification-head keys (the {source.target} has no heads): "
                       f"{dropped[:4]}")
    logger.info(f"converted {checkpoint_path} ({source_positions} positions) -> {out_dir / 'model.pt'} "
                f"({max_positions} positions, init {init_positions}, window {windows})")
    return source.result(
        checkpoint=out_dir / "model.pt", dictionary=out_dir / "dict.txt", arch=arch, attention_window=windows,
        max_positions=max_positions, model_dims=dims, source=checkpoint_path, copied_files=copied,
        dropped_keys=dropped, layout=layout, source_positions=source_positions, init_positions=init_positions,
        model_state=model_state, padding_idx=padding_idx)
