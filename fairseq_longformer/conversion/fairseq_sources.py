"""The two source families of fairseq -> fairseq conversion, each a spec ``from_fairseq`` runs:
``ROBERTA`` -> Longformer (the released 2019 key layout read too) and ``BART`` -> LED (the
encoder's positions tiled whole, the decoder untouched), with their results' train flags."""
import argparse
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Tuple

from torch import Tensor

from ..tasks.longformer_mlm import batch_pad_multiple
from .fairseq_checkpoint import config_get, config_set
from .from_fairseq import LED_CRITERION, convert_checkpoint, count_layers, missing_keys_error
from .restore import ConvertedCheckpoint
from .rules import check_extendable

LAYER_MODULES = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj",
                 "self_attn_layer_norm", "fc1", "fc2", "final_layer_norm")
CROSS_MODULES = ("encoder_attn.q_proj", "encoder_attn.k_proj", "encoder_attn.v_proj",
                 "encoder_attn.out_proj", "encoder_attn_layer_norm")


def _layer_keys(prefix: str, layers: int, modules) -> List[str]:
    return [f"{prefix}layers.{i}.{m}.{p}" for i in range(layers) for m in modules for p in ("weight", "bias")]


@dataclass
class ConversionResult(ConvertedCheckpoint):
    """What ``convert_roberta_checkpoint`` wrote, and the numbers a training command needs."""

    source_layout: str = "new"
    roberta_positions: int = 0
    init_positions: str = "copy"

    def train_flags(self) -> List[str]:
        """With the --reset-* flags of continued pretraining (right for any RoBERTa checkpoint)."""
        return super().train_flags() + ["--reset-optimizer", "--reset-dataloader", "--reset-meters"]


class RobertaSource:
    kind, target, task = "RoBERTa", "Longformer", "masked_lm"
    ENCODER, OLD_ENCODER = "encoder.sentence_encoder.", "decoder.sentence_encoder."
    layer_prefix = ENCODER + "layers."
    positions_key = ENCODER + "embed_positions.weight"
    tokens_key = ENCODER + "embed_tokens.weight"
    vocab_keys = (tokens_key, "encoder.lm_head.weight", "encoder.lm_head.bias")
    mask_optional = False  # the masked_lm task always appends <mask>
    dropped_prefixes = ("classification_heads.", "encoder.classification_heads.")
    embedding_keys = ("embed_tokens.weight", "embed_positions.weight",
                      "layernorm_embedding.weight", "layernorm_embedding.bias")
    head_keys = ("encoder.lm_head.weight", "encoder.lm_head.bias", "encoder.lm_head.dense.weight",
                 "encoder.lm_head.dense.bias", "encoder.lm_head.layer_norm.weight", "encoder.lm_head.layer_norm.bias")
    stacks = (("encoder", tokens_key, ENCODER),)  # (name, token table, layer prefix), one per layer count
    archs, default_arch = {}, "longformer_base"  # the source's arch -> the target's
    task_name, criterion, provenance_key = "longformer_mlm", "LongformerMLMLoss", "longformer_conversion"

    def read(self, model_state: Mapping) -> Tuple[Dict[str, Tensor], str]:
        """(state dict in the current layout, 'new' or 'old'): fairseq's load-time upgrades done
        explicitly (``decoder.`` -> ``encoder.``, ``emb_layer_norm`` -> ``layernorm_embedding``, a
        fused ``in_proj_*`` (rows [q; k; v]) split into q_proj, k_proj, v_proj)."""
        has_new = any(k.startswith(self.ENCODER) for k in model_state)
        has_old = any(k.startswith(self.OLD_ENCODER) for k in model_state)
        if has_new and has_old:
            raise ValueError("the checkpoint mixes both key layouts (encoder.sentence_encoder.* and "
                             "decoder.sentence_encoder.*): not a RoBERTa checkpoint fairseq wrote")
        out: Dict[str, Tensor] = {}
        for key, value in model_state.items():
            if key.startswith("decoder."):
                key = "encoder." + key[len("decoder."):]
            out[key.replace(".emb_layer_norm.", ".layernorm_embedding.")] = value
        for key in [k for k in out if re.search(r"\.self_attn\.in_proj_(weight|bias)$", k)]:
            fused = out.pop(key)
            base, kind = key.rsplit(".in_proj_", 1)
            if fused.shape[0] % 3:
                raise ValueError(f"{key}: fused projection of {fused.shape[0]} rows is not 3 x embed_dim")
            dim = fused.shape[0] // 3
            for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
                out[f"{base}.{name}.{kind}"] = fused[i * dim:(i + 1) * dim].clone()
        return out, "old" if has_old else "new"

    def spelled(self, key: str, layout: str) -> str:
        """A current-layout key as the source checkpoint spells it (for error messages)."""
        if layout == "old":
            key = "decoder." + key[len("encoder."):] if key.startswith("encoder.") else key
            key = key.replace(".layernorm_embedding.", ".emb_layer_norm.")
        return key

    def check_state(self, model_state: Mapping, layout: str, model_section, path) -> Tuple[int]:
        """Raise ValueError naming every missing key; return (layers,)."""
        layers = max(count_layers(model_state, self.ENCODER), config_get(model_section, "encoder_layers") or 0, 1)
        required = [self.ENCODER + k for k in self.embedding_keys]
        required += _layer_keys(self.ENCODER, layers, LAYER_MODULES) + list(self.head_keys)
        missing = [self.spelled(k, layout) for k in required if k not in model_state]
        if missing:
            raise missing_keys_error(path, "RoBERTa", "fairseq masked LM with learned positions", missing)
        positions, width = model_state[self.positions_key], model_state[self.tokens_key].shape[1]
        if positions.dim() != 2 or positions.shape[1] != width:
            raise ValueError(f"{self.spelled(self.positions_key, layout)} has shape {tuple(positions.shape)}: "
                             f"expected (positions + 2, {width})")
        return (layers,)

    def check_positions(self, max_positions: int, source_positions: int) -> None:
        check_extendable(source_positions, max_positions)

    def rewrite_config(self, args, cfg, windows, max_positions: int) -> None:
        """Blocks of ``max_positions`` in task longformer_mlm, with the batch padding multiple;
        attention_dropout stays RoBERTa's (the paper continues with RoBERTa's hyperparameters)."""
        pad_multiple = batch_pad_multiple(windows, max_positions)
        section = args if args is not None else cfg["model"]
        for key, value in (("attention_causal", False), ("max_positions", max_positions),
                           ("tokens_per_sample", max_positions)):
            config_set(section, key, value)
        if config_get(section, "task") is not None:  # a legacy Namespace holds every flag
            config_set(section, "task", self.task_name)
        if args is not None:
            args.task, args.pad_to_multiple = self.task_name, pad_multiple
            return
        task = cfg.get("task")
        if isinstance(task, Mapping):
            task["_name"], task["tokens_per_sample"], task["pad_to_multiple"] = \
                self.task_name, max_positions, pad_multiple
        elif isinstance(task, argparse.Namespace):
            task._name, task.tokens_per_sample, task.pad_to_multiple = self.task_name, max_positions, pad_multiple

    def provenance(self, layout, source_positions, init_positions, seed) -> Dict[str, object]:
        return {"source_layout": layout, "roberta_positions": source_positions, "init_positions": init_positions,
                "seed": seed}

    def result(self, layout, source_positions, model_state, padding_idx, **fields) -> ConversionResult:
        return ConversionResult(source_layout=layout, roberta_positions=source_positions, **fields)


ROBERTA = RobertaSource()


def convert_roberta_checkpoint(source, out_dir, max_positions: int = 4096, attention_window="256",
                               init_positions: str = "copy", checkpoint_file: str = "model.pt",
                               dict_file=None, seed: int = 1, overwrite: bool = False) -> ConversionResult:
    """A fairseq RoBERTa checkpoint -> a Longformer checkpoint folder (``from_fairseq``'s recipe):
    positions extended to ``max_positions`` (``init_positions`` copy or random, ``seed``), windows
    ``attention_window`` (one-sided, one value or one per layer, "256" or "64,64,128,...")."""
    return convert_checkpoint(ROBERTA, source, out_dir, max_positions, attention_window, init_positions,
                              checkpoint_file, dict_file, seed, overwrite)


@dataclass
class LEDConversionResult(ConvertedCheckpoint):
    """What ``convert_bart_checkpoint`` wrote; model_dims: encoder and decoder sizes."""

    decoder_positions: int = 0
    bart_positions: int = 0

    def model_flags(self) -> List[str]:
        """The flags that build a model this checkpoint loads into (sizes explicit: any BART works)."""
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
        """fairseq-generate flags: the task's source limit raised to the encoder's (fairseq filters
        by the smaller of the task's and the model's), and ``--required-batch-size-multiple 1``
        (fairseq-fixed 0.12.3.1 drops a last batch that is not a multiple of it; compat.py gives
        it back, stock fairseq-generate needs the flag)."""
        return ["--task", "translation", "--path", str(self.checkpoint),
                "--max-source-positions", str(self.max_positions),
                "--max-target-positions", str(self.decoder_positions), "--required-batch-size-multiple", "1"]


class BartSource:
    kind, target, task = "BART", "LED", "denoising"
    layer_prefix = "encoder.layers."
    positions_key = "encoder.embed_positions.weight"
    decoder_positions_key = "decoder.embed_positions.weight"
    tokens_key = "encoder.embed_tokens.weight"
    vocab_keys = (tokens_key, "decoder.embed_tokens.weight")
    mask_optional = True  # a pretrained BART has the <mask> row, a fine-tuned one may not
    dropped_prefixes = ("classification_heads.",)
    stacks = (("encoder", tokens_key, "encoder."), ("decoder", "decoder.embed_tokens.weight", "decoder."))
    archs, default_arch = {"bart_large": "led_large", "mbart_large": "led_large"}, "led_base"
    criterion, provenance_key = LED_CRITERION, "led_conversion"

    def read(self, model_state: Mapping) -> Tuple[Mapping, str]:
        return model_state, "new"

    def spelled(self, key: str, layout: str) -> str:
        return key

    def check_state(self, model_state: Mapping, layout: str, model_section, path) -> Tuple[int, int]:
        """Raise ValueError unless ``model_state`` is a fairseq BART with learned positions; return
        (encoder layers, decoder layers)."""
        if any(".sentence_encoder." in k for k in model_state):
            raise ValueError(f"{str(path)!r} is a RoBERTa (encoder-only) checkpoint: convert it with "
                             "longformer-convert-roberta")
        if any("_global_proj." in k for k in model_state):
            raise ValueError(f"{str(path)!r} already has global projections: it is a Longformer/LED "
                             "checkpoint, not a BART one")
        encoder_layers, decoder_layers = count_layers(model_state, "encoder."), count_layers(model_state, "decoder.")
        if not encoder_layers or not decoder_layers:
            raise ValueError(f"{str(path)!r} is not a BART checkpoint: it has {encoder_layers} encoder and "
                             f"{decoder_layers} decoder layers (encoder.layers.N.*, decoder.layers.N.*)")
        required = [f"{stack}.{key}" for stack in ("encoder", "decoder")
                    for key in ("embed_tokens.weight", "embed_positions.weight")]
        required += _layer_keys("encoder.", encoder_layers, LAYER_MODULES)
        required += _layer_keys("decoder.", decoder_layers, LAYER_MODULES + CROSS_MODULES)
        missing = [k for k in required if k not in model_state]
        if missing:
            raise missing_keys_error(path, "BART", "fairseq encoder-decoder with learned positions and separate "
                                     "q/k/v projections", missing)
        width = model_state[self.tokens_key].shape[1]
        for key in (self.positions_key, self.decoder_positions_key):
            table = model_state[key]
            if table.dim() != 2 or table.shape[1] != width or table.shape[0] < 3:
                raise ValueError(f"{key} has shape {tuple(table.shape)}: expected (positions + 2, {width}), "
                                 "fairseq's learned positions with their 2 reserved rows")
        return encoder_layers, decoder_layers

    def check_positions(self, max_positions: int, source_positions: int) -> None:
        """A whole number of BART's position tables (at least one): the copy init tiles it whole."""
        if max_positions % source_positions:
            raise ValueError(
                f"--max-positions {max_positions} is not a multiple of BART's {source_positions} encoder "
                f"positions: the copy initialisation tiles BART's table whole (e.g. "
                f"{16 * source_positions} = 16 x {source_positions}, the released LED's)")

    def rewrite_config(self, args, cfg, windows, max_positions: int) -> None:
        """The encoder's positions in the task section too (fairseq's hub loader reads it)."""
        task = None if cfg is None else cfg.get("task")
        if task is not None and config_get(task, "max_source_positions") is not None:
            config_set(task, "max_source_positions", max_positions)

    def provenance(self, layout, source_positions, init_positions, seed) -> Dict[str, object]:
        return {"bart_positions": source_positions}

    def result(self, layout, source_positions, model_state, padding_idx, init_positions,
               **fields) -> LEDConversionResult:
        decoder_positions = model_state[self.decoder_positions_key].shape[0] - (padding_idx + 1)
        return LEDConversionResult(decoder_positions=decoder_positions, bart_positions=source_positions, **fields)


BART = BartSource()
DEFAULT_MAX_POSITIONS = 16384
DEFAULT_WINDOW = "512"


def convert_bart_checkpoint(source, out_dir, max_positions: int = DEFAULT_MAX_POSITIONS,
                            attention_window=DEFAULT_WINDOW, checkpoint_file: str = "model.pt",
                            dict_file=None, overwrite: bool = False) -> LEDConversionResult:
    """A fairseq BART checkpoint -> an LED checkpoint folder (``from_fairseq``'s recipe): the
    encoder's positions tiled to ``max_positions`` (a multiple of BART's), windows
    ``attention_window`` (one-sided, one value or one per encoder layer, "512" or "256,512,...")."""
    return convert_checkpoint(BART, source, out_dir, max_positions, attention_window, "copy", checkpoint_file,
                              dict_file, 1, overwrite)


def generate_command(result: LEDConversionResult) -> str:
    """The fairseq-generate command line for a converted (then fine-tuned) LED; --user-dir is the
    installed plugin's folder, so it works from any directory."""
    plugin = Path(__file__).resolve().parent.parent
    return "fairseq-generate DATA " + shlex.join(["--user-dir", str(plugin)] + result.generate_flags())
