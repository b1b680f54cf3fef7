"""fairseq -> fairseq conversion: one driver (``convert_checkpoint``) walking a spec per source family
(``ROBERTA`` -> Longformer, ``BART`` -> LED), everything checked in memory before anything is written."""
import argparse
import logging
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import torch
from fairseq.data import Dictionary
from torch import Tensor

from longformer_common.atomic import check_output_dir
from longformer_kernels import AttentionPattern, parse_per_layer
from ..models.global_projections import add_missing_global_projections
from ..tasks.longformer_mlm import batch_pad_multiple
from .fairseq_checkpoint import TOKENIZER_FILES, ConvertedCheckpoint, config_get, config_sections, config_set, \
    fresh_training_state, load_checkpoint, resolve_source, write_checkpoint_folder
from .rules import CROSS_MODULES, LAYER_MODULES, check_extendable, extend_positions

logger = logging.getLogger(__name__)

LED_CRITERION = "LabelSmoothedCrossEntropyCriterion"  # what fairseq records for an LED's training


@dataclass
class ConversionResult(ConvertedCheckpoint):
    source_layout: str = "new"
    roberta_positions: int = 0
    init_positions: str = "copy"

    def train_flags(self) -> List[str]:  # with the --reset-* flags of continued pretraining
        return super().train_flags() + ["--reset-optimizer", "--reset-dataloader", "--reset-meters"]


@dataclass
class LEDConversionResult(ConvertedCheckpoint):
    decoder_positions: int = 0
    bart_positions: int = 0

    def model_flags(self) -> List[str]:  # sizes explicit: any BART works
        return ["--arch", self.arch, *self.size_flags(), "--max-source-positions", str(self.max_positions),
                "--max-target-positions", str(self.decoder_positions),
                "--attention-window", ",".join(map(str, self.attention_window))]

    def train_flags(self) -> List[str]:  # document -> summary fine-tuning (fairseq's translation task)
        return self.model_flags() + ["--task", "translation", "--criterion", "label_smoothed_cross_entropy",
                                     "--restore-file", str(self.checkpoint)]

    def generate_flags(self) -> List[str]:  # batch multiple 1: stock fairseq-generate drops a short last batch
        return ["--task", "translation", "--path", str(self.checkpoint), "--required-batch-size-multiple", "1",
                "--max-source-positions", str(self.max_positions),
                "--max-target-positions", str(self.decoder_positions)]


@dataclass(frozen=True)
class SourceFamily:
    """``stacks``: (name, key prefix, layer modules), encoder first; each has embed_tokens and learned positions."""
    kind: str
    target: str
    task: str  # the source's task, which appends <mask>
    stacks: Tuple[Tuple[str, str, Tuple[str, ...]], ...]
    mask_optional: bool  # whether the <mask> row may be absent (a fine-tuned BART)
    dropped_prefixes: Tuple[str, ...]
    archs: Dict[str, str]  # the source's arch -> the target's
    default_arch: str
    criterion: str
    tile_whole: bool  # positions a whole number of the source's table (BART's)
    more_keys: Tuple[str, ...] = ()  # required besides the stacks' tables and layers
    vocab_rows: Tuple[str, ...] = ()  # besides embed_tokens, tensors with one row per symbol (required too)
    rewrite_config: Callable = lambda args, cfg, windows, max_positions: None  # the family's own config entries
    read: Callable = lambda model_state: (model_state, "new")  # -> (current key layout, "new" | "old")
    refused: Tuple[Tuple[str, str], ...] = ()  # (a key part, what a checkpoint with such keys is instead)
    spelled: Callable = lambda key, layout: key  # a current-layout key as the source spells it

    def stack_keys(self, name: str) -> Tuple[str, ...]:
        return tuple(prefix + name for _, prefix, _ in self.stacks)


def check_state(source: SourceFamily, model_state: Mapping, layout: str, model_section, path, dict_path: Path):
    """(the layers of each stack, the padding index); ValueError naming every missing key, a position table of the
    wrong shape, or a dict.txt (+ the <mask> the task appends) that does not match the embeddings."""
    for part, instead in source.refused:
        if any(part in key for key in model_state):
            raise ValueError(f"{str(path)!r} {instead}")
    layers = []
    for _, prefix, _ in source.stacks:
        pattern = re.compile(re.escape(prefix) + r"layers\.(\d+)\.")
        layers.append(max({int(m.group(1)) + 1 for k in model_state for m in [pattern.match(k)] if m}, default=0))
    if len(layers) == 1:  # an encoder alone: layers missing from the end are named too
        layers = [max(layers[0], config_get(model_section, "encoder_layers") or 0, 1)]
    elif not all(layers):
        raise ValueError(f"{str(path)!r} is not a {source.kind} checkpoint: it has {layers[0]} encoder and "
                         f"{layers[1]} decoder layers (encoder.layers.N.*, decoder.layers.N.*)")
    required = [*source.stack_keys("embed_tokens.weight"), *source.stack_keys("embed_positions.weight"),
                *source.more_keys, *source.vocab_rows] + [
        f"{prefix}layers.{i}.{m}.{p}" for (_, prefix, modules), count in zip(source.stacks, layers)
        for i in range(count) for m in modules for p in ("weight", "bias")]
    missing = [source.spelled(k, layout) for k in required if k not in model_state]
    if missing:
        shown = ", ".join(missing[:12]) + (f", ... ({len(missing)} in all)" if len(missing) > 12 else "")
        what = ("fairseq masked LM with learned positions" if len(layers) == 1 else
                "fairseq encoder-decoder with learned positions and separate q/k/v projections")
        raise ValueError(f"{str(path)!r} is not a {source.kind} checkpoint ({what}): missing keys {shown}")
    width = model_state[source.stacks[0][1] + "embed_tokens.weight"].shape[1]
    for key in source.stack_keys("embed_positions.weight"):
        table = model_state[key]
        if table.dim() != 2 or table.shape[1] != width or table.shape[0] < 3:
            raise ValueError(f"{source.spelled(key, layout)} has shape {tuple(table.shape)}: expected "
                             f"(positions + 2, {width}), fairseq's learned positions with their 2 reserved rows")
    try:
        dictionary = Dictionary.load(str(dict_path))
    except Exception as error:
        raise ValueError(f"dictionary {str(dict_path)!r} is not a fairseq dict.txt: {error}") from error
    symbols, pad = len(dictionary), dictionary.pad()
    with_mask = symbols + (0 if "<mask>" in dictionary.indices else 1)
    for key in (*source.stack_keys("embed_tokens.weight"), *source.vocab_rows):
        have = model_state[key].shape[0]
        if have == with_mask or (source.mask_optional and have == symbols):
            continue
        given = (f"dictionary {str(dict_path)!r} does not match the checkpoint: it gives {symbols} symbols "
                 f"(4 specials + {symbols - 4} lines)")
        if source.mask_optional:
            raise ValueError(f"{given}, so {source.spelled(key, layout)} should have {symbols} rows (or "
                             f"{with_mask} with <mask>), but it has {have}")
        raise ValueError(f"{given} plus <mask> added by the {source.task} task = {with_mask} rows expected, but "
                         f"{source.spelled(key, layout)} has {have}")
    if pad != 1:
        raise ValueError(f"dictionary {str(dict_path)!r} has padding index {pad}; fairseq {source.kind} uses 1")
    return tuple(layers), pad


def parse_windows(attention_window, layers: int) -> Tuple[int, ...]:
    """One one-sided window per (encoder) layer, each validated (an int >= 0)."""
    try:
        windows = parse_per_layer(attention_window, layers, "attention-window")
    except ValueError as error:
        raise ValueError(f"--attention-window {attention_window!r}: {error}") from error
    for w in windows:
        AttentionPattern(window=w)
    return tuple(windows)


def convert_checkpoint(source: SourceFamily, source_dir, out_dir, max_positions: int, attention_window,
                       init_positions: str = "copy", checkpoint_file: str = "model.pt", dict_file=None,
                       seed: int = 1, overwrite: bool = False):
    """A checkpoint (folder or file) of family ``source`` -> a target folder (model.pt + dict.txt)."""
    if init_positions not in ("copy", "random"):
        raise ValueError(f"--init-positions must be 'copy' or 'random', got {init_positions!r}")
    if not isinstance(max_positions, int) or isinstance(max_positions, bool) or max_positions < 1:
        raise ValueError(f"--max-positions must be a positive int, got {max_positions!r}")
    checkpoint_path, dict_path = resolve_source(source_dir, checkpoint_file, dict_file, kind=source.kind)
    out_dir = Path(out_dir)  # checked before the source is read
    if out_dir.is_dir() and out_dir.resolve() == checkpoint_path.parent.resolve():
        raise ValueError(f"--output {str(out_dir)!r} is the source folder: choose a new folder")
    if (out_dir / "model.pt").exists() and not overwrite:
        raise ValueError(f"--output {str(out_dir)!r} already holds model.pt: pass --overwrite to replace it")
    check_output_dir(out_dir, overwrite, (checkpoint_path, dict_path))
    state = load_checkpoint(checkpoint_path, kind=source.kind)
    model_state, layout = source.read(state["model"])
    args, cfg = config_sections(state)
    model_section = args if args is not None else cfg["model"]
    layers, padding_idx = check_state(source, model_state, layout, model_section, checkpoint_path, dict_path)
    tables = source.stack_keys("embed_positions.weight")
    positions_key = tables[0]
    source_positions = model_state[positions_key].shape[0] - (padding_idx + 1)
    if source.tile_whole and max_positions % source_positions:  # the copy init tiles the table whole
        raise ValueError(f"--max-positions {max_positions} is not a multiple of BART's {source_positions} encoder "
                         f"positions: the copy initialisation tiles BART's table whole (e.g. {16 * source_positions} "
                         f"= 16 x {source_positions}, the released LED's)")
    check_extendable(source_positions, max_positions)
    windows = parse_windows(attention_window, layers[0])
    dims: Dict[str, int] = {}  # each stack's sizes from the tensors, its heads from the config
    for (stack, prefix, _), count in zip(source.stacks, layers):
        width = int(model_state[prefix + "embed_tokens.weight"].shape[1])
        heads = config_get(model_section, f"{stack}_attention_heads")
        if heads is None:
            raise ValueError(f"the checkpoint's config does not say {stack}_attention_heads")
        if width % int(heads):
            raise ValueError(f"{stack}_attention_heads {heads} does not divide the {stack} width {width}")
        dims.update({f"{stack}_layers": count, f"{stack}_embed_dim": width, f"{stack}_attention_heads": int(heads),
                     f"{stack}_ffn_embed_dim": int(model_state[prefix + "layers.0.fc1.weight"].shape[0])})
    arch = source.archs.get(config_get(model_section, "arch"), source.default_arch)
    # the new state: heads dropped, positions extended, global projections copied from Q, K, V
    dropped = [key for key in model_state if key.startswith(source.dropped_prefixes)]
    new_state: Dict[str, Tensor] = {k: v for k, v in model_state.items() if k not in dropped}
    new_state[positions_key] = extend_positions(model_state[positions_key], max_positions, padding_idx=padding_idx,
                                                init=init_positions, generator=torch.Generator().manual_seed(seed))
    add_missing_global_projections(new_state, prefix=source.stacks[0][1] + "layers.")
    # the config (config_sections' copy): architecture, sizes, one undilated window per layer, positions
    for key, value in (*dims.items(), ("_name", arch), ("arch", arch),
                       ("attention_window", ",".join(map(str, windows))), ("attention_dilation", "1"),
                       ("attention_impl", "auto"), ("max_source_positions", max_positions)):
        config_set(model_section, key, value)
    source.rewrite_config(args, cfg, windows, max_positions)
    task = None if cfg is None else cfg.get("task")  # fairseq's hub loader reads the task's (BART's)
    if task is not None and config_get(task, "max_source_positions") is not None:
        config_set(task, "max_source_positions", max_positions)
    fields = dict(checkpoint=out_dir / "model.pt", dictionary=out_dir / "dict.txt", arch=arch,
                  attention_window=windows, max_positions=max_positions, model_dims=dims)
    provenance = {"source": str(checkpoint_path), "max_positions": max_positions, "attention_window": list(windows)}
    if source is ROBERTA:
        own = dict(source_layout=layout, roberta_positions=source_positions, init_positions=init_positions)
        result = ConversionResult(**fields, **own)
        provenance.update(own, seed=seed)
    else:
        result = LEDConversionResult(**fields, bart_positions=source_positions,
                                     decoder_positions=model_state[tables[1]].shape[0] - (padding_idx + 1))
        provenance.update(bart_positions=source_positions)
    output = {"args": args, "cfg": cfg, "model": new_state,
              **fresh_training_state({f"{source.target.lower()}_conversion": provenance}, source.criterion)}
    folder = checkpoint_path.parent  # the tokenizer files fairseq's hub loader looks for, copied along
    files = {"dict.txt": dict_path, **{name: folder / name for name in TOKENIZER_FILES if (folder / name).is_file()}}
    write_checkpoint_folder(out_dir, overwrite, output, files, (checkpoint_path, dict_path))
    if dropped:
        logger.warning(f"dropped {len(dropped)} classification-head keys (the {source.target} has no heads): "
                       f"{dropped[:4]}")
    logger.info(f"converted {checkpoint_path} ({source_positions} positions) -> {out_dir / 'model.pt'} "
                f"({max_positions} positions, init {init_positions}, window {windows})")
    return result


# --- RoBERTa -> Longformer ---------------------------------------------------------------------
ENCODER, OLD_ENCODER = "encoder.sentence_encoder.", "decoder.sentence_encoder."


def read_roberta(model_state: Mapping) -> Tuple[Dict[str, Tensor], str]:
    """fairseq's load-time upgrades of the 2019 layout (``decoder.``, ``emb_layer_norm``, fused ``in_proj_*``)."""
    has_new = any(k.startswith(ENCODER) for k in model_state)
    has_old = any(k.startswith(OLD_ENCODER) for k in model_state)
    if has_new and has_old:
        raise ValueError("the checkpoint mixes both key layouts (encoder.sentence_encoder.* and "
                         "decoder.sentence_encoder.*): not a RoBERTa checkpoint fairseq wrote")
    out: Dict[str, Tensor] = {}
    for key, value in model_state.items():
        if key.startswith("decoder."):
            key = "encoder." + key[len("decoder."):]
        out[key.replace(".emb_layer_norm.", ".layernorm_embedding.")] = value
    for key in [k for k in out if re.search(r"\.self_attn\.in_proj_(weight|bias)$", k)]:
        fused = out.pop(key)  # rows [q; k; v]
        base, kind = key.rsplit(".in_proj_", 1)
        if fused.shape[0] % 3:
            raise ValueError(f"{key}: fused projection of {fused.shape[0]} rows is not 3 x embed_dim")
        dim = fused.shape[0] // 3
        for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
            out[f"{base}.{name}.{kind}"] = fused[i * dim:(i + 1) * dim].clone()
    return out, "old" if has_old else "new"


def rewrite_longformer_config(args, cfg, windows, max_positions: int) -> None:
    """Task longformer_mlm on blocks of ``max_positions``; the dropouts stay RoBERTa's (as the paper's)."""
    task_name, pad_multiple = "longformer_mlm", batch_pad_multiple(windows, max_positions)
    section = args if args is not None else cfg["model"]
    for key, value in (("attention_causal", False), ("max_positions", max_positions),
                       ("tokens_per_sample", max_positions)):
        config_set(section, key, value)
    if config_get(section, "task") is not None:  # a legacy Namespace holds every flag
        config_set(section, "task", task_name)
    if args is not None:
        args.task, args.pad_to_multiple = task_name, pad_multiple
    elif isinstance(cfg.get("task"), (Mapping, argparse.Namespace)):
        for key, value in ("_name", task_name), ("tokens_per_sample", max_positions), ("pad_to_multiple", pad_multiple):
            config_set(cfg["task"], key, value)


ROBERTA = SourceFamily(
    kind="RoBERTa", target="Longformer", task="masked_lm", stacks=(("encoder", ENCODER, LAYER_MODULES),),
    more_keys=(ENCODER + "layernorm_embedding.weight", ENCODER + "layernorm_embedding.bias",
               *(f"encoder.lm_head.{m}.{p}" for m in ("dense", "layer_norm") for p in ("weight", "bias"))),
    vocab_rows=("encoder.lm_head.weight", "encoder.lm_head.bias"),
    mask_optional=False,  # the masked_lm task always appends <mask>
    dropped_prefixes=("classification_heads.", "encoder.classification_heads."), archs={},
    default_arch="longformer_base", criterion="LongformerMLMLoss", tile_whole=False,
    rewrite_config=rewrite_longformer_config, read=read_roberta,
    spelled=lambda key, layout: key if layout == "new" else re.sub(r"^encoder\.", "decoder.", key).replace(
        ".layernorm_embedding.", ".emb_layer_norm."),  # a key as the 2019 layout spells it
)


BART = SourceFamily(
    kind="BART", target="LED", task="denoising",
    stacks=(("encoder", "encoder.", LAYER_MODULES), ("decoder", "decoder.", LAYER_MODULES + CROSS_MODULES)),
    mask_optional=True,  # a pretrained BART has the <mask> row, a fine-tuned one may not
    dropped_prefixes=("classification_heads.",),
    archs={"bart_large": "led_large", "mbart_large": "led_large"}, default_arch="led_base", criterion=LED_CRITERION,
    tile_whole=True, refused=(
        (".sentence_encoder.", "is a RoBERTa (encoder-only) checkpoint: convert it with longformer-convert-roberta"),
        ("_global_proj.", "already has global projections: it is a Longformer/LED checkpoint, not a BART one")))
DEFAULT_MAX_POSITIONS = 16384
DEFAULT_WINDOW = "512"


def convert_roberta_checkpoint(source, out_dir, max_positions: int = 4096, attention_window="256",
                               init_positions: str = "copy", checkpoint_file: str = "model.pt",
                               dict_file=None, seed: int = 1, overwrite: bool = False) -> ConversionResult:
    """RoBERTa -> Longformer folder; windows one-sided, one value or one per layer ("256", "64,64,128,...")."""
    return convert_checkpoint(ROBERTA, source, out_dir, max_positions, attention_window, init_positions,
                              checkpoint_file, dict_file, seed, overwrite)


def convert_bart_checkpoint(source, out_dir, max_positions: int = DEFAULT_MAX_POSITIONS,
                            attention_window=DEFAULT_WINDOW, checkpoint_file: str = "model.pt",
                            dict_file=None, overwrite: bool = False) -> LEDConversionResult:
    """BART -> LED folder: encoder positions tiled to ``max_positions`` (a multiple of BART's), windows one-sided."""
    return convert_checkpoint(BART, source, out_dir, max_positions, attention_window, "copy", checkpoint_file,
                              dict_file, 1, overwrite)


def generate_command(result: LEDConversionResult) -> str:
    plugin = Path(__file__).resolve().parent.parent
    return "fairseq-generate DATA " + shlex.join(["--user-dir", str(plugin)] + result.generate_flags())
