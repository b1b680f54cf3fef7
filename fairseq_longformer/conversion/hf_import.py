"""Import (``longformer-import-hf``): a Hugging Face Longformer or RoBERTa masked-LM folder ->
``model.pt`` (with the ``cfg`` fairseq's ``checkpoint_utils`` and ``fairseq-train --restore-file``
read) + ``dict.txt``, with fairseq id == HF id. A RoBERTa gets its positions extended (copied, as
in the paper) and global projections copied from Q, K, V. The key map and the conventions at this
boundary (window, token types, LM head, dictionary): ``hf_keymap``.

A sequence-classification or question-answering folder becomes a checkpoint of the fine-tuning
task that trains that head (``longformer_classification``: ``input0/dict.txt`` and a
``label/dict.txt`` in id2label's order; ``longformer_qa``: ``dict.txt``), the head under the task's
default name or ``--head-name``. Such a folder has no LM head: the checkpoint's is freshly
initialized (the head does not use it).
"""
import copy
import json
import logging
import shutil
import tempfile
import warnings as warnings_module
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Mapping, Optional

import torch
from torch import Tensor

from ..atomic import check_output_dir, staged_folder
from ..global_projections import add_missing_global_projections
from ..tasks.longformer_mlm import batch_pad_multiple
from .hf_heads import HEAD_TASKS, MLM_TOKEN_DICT, register_head
from .hf_keymap import (
    DICT_COPY, FAIRSEQ_LAYERNORM_EPS, FAIRSEQ_POSITIONS, FAIRSEQ_TIED_HEAD, FAIRSEQ_TOKENS, HF_BASE,
    HF_DECODER_BIAS, HF_DECODER_WEIGHT, HF_HEAD_PREFIXES, HF_IGNORED_BUFFERS, HF_TOKEN_TYPE, HF_TOKENIZER_FILES,
    PLACEHOLDER, HeadRef, check_shapes, key_map, reverse_key_map, shape_of,
)
from .positions import check_extendable, extend_positions
from .restore import ConvertedCheckpoint, fresh_training_state

logger = logging.getLogger(__name__)


@dataclass
class ImportResult(ConvertedCheckpoint):
    """What ``import_hf`` wrote: the checkpoint, where its dictionary came from, the warnings."""

    model_type: str = "longformer"
    untied: bool = False
    dictionary_source: str = "placeholders"
    warnings: List[str] = field(default_factory=list)
    head: Optional[HeadRef] = None  # the task head imported; None: a masked LM

    def train_flags(self) -> List[str]:
        flags = super().train_flags()
        if self.head is not None:  # the head's fine-tuning task where the masked LM's stands
            at = flags.index("--task")
            flags[at:at + 4] = HEAD_TASKS[self.head.kind].flags(self.head.name)
            at = flags.index("--tokens-per-sample")  # masked LM only
            del flags[at:at + 2]
        return flags + (["--untie-weights-roberta"] if self.untied else [])


def read_hf_config(hf_dir) -> Dict[str, object]:
    """config.json of a HF model folder, or an error naming what the folder is not."""
    hf_dir = Path(hf_dir)
    if not hf_dir.is_dir():
        raise FileNotFoundError(f"{str(hf_dir)!r} is not a folder: pass a Hugging Face model folder")
    if not (hf_dir / "config.json").is_file():
        raise FileNotFoundError(f"{str(hf_dir)!r} has no config.json: not a Hugging Face model folder")
    try:
        with open(hf_dir / "config.json", encoding="utf-8") as f:
            config = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{str(hf_dir / 'config.json')!r} is not valid JSON ({error}): a damaged folder?") from error
    if not isinstance(config, dict):
        raise ValueError(f"{str(hf_dir / 'config.json')!r} holds a {type(config).__name__}, not a model config")
    return config


def load_hf_state_dict(hf_dir) -> Dict[str, Tensor]:
    """The tensors of a HF folder: model.safetensors (possibly sharded) or pytorch_model.bin; a
    file that does not load (truncated, not a tensor file) is a ValueError naming it."""
    try:
        return _load_hf_tensors(Path(hf_dir))
    except FileNotFoundError:  # no weights file at all: its own message says so
        raise
    except Exception as error:  # safetensors' SafetensorError, pickle errors, a damaged index
        raise ValueError(f"the weights of {str(hf_dir)!r} do not load ({type(error).__name__}: {error}): "
                         "a damaged or incomplete folder?") from error


def _load_hf_tensors(hf_dir: Path) -> Dict[str, Tensor]:
    from safetensors.torch import load_file

    if (hf_dir / "model.safetensors").is_file():
        return load_file(str(hf_dir / "model.safetensors"))
    for index_name, loader in (("model.safetensors.index.json", lambda p: load_file(str(p))),
                               ("pytorch_model.bin.index.json",
                                lambda p: torch.load(p, map_location="cpu", weights_only=True))):
        if (hf_dir / index_name).is_file():
            with open(hf_dir / index_name, encoding="utf-8") as f:
                shards = sorted(set(json.load(f)["weight_map"].values()))
            state = {}
            for shard in shards:
                state.update(loader(hf_dir / shard))
            return state
    if (hf_dir / "pytorch_model.bin").is_file():
        return torch.load(hf_dir / "pytorch_model.bin", map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"{str(hf_dir)!r} has no model.safetensors or pytorch_model.bin")


def hf_special_ids(hf_dir) -> Dict[str, int]:
    """Token text -> id for the tokenizer's added/special tokens, when the folder has a tokenizer."""
    hf_dir = Path(hf_dir)
    ids: Dict[str, int] = {}
    if (hf_dir / "tokenizer.json").is_file():
        with open(hf_dir / "tokenizer.json", encoding="utf-8") as f:
            for token in json.load(f).get("added_tokens", []):
                ids[token["content"]] = int(token["id"])
    if (hf_dir / "tokenizer_config.json").is_file():
        with open(hf_dir / "tokenizer_config.json", encoding="utf-8") as f:
            for index, token in (json.load(f).get("added_tokens_decoder") or {}).items():
                ids.setdefault(token["content"], int(index))
    return ids


def _check_hf_config(config: Mapping, model_type: str, problems: List[str]) -> None:
    def want(name, ok, why):
        if name in config and not ok(config[name]):
            problems.append(f"{name} = {config[name]!r}: {why}")

    want("hidden_act", lambda v: v == "gelu", "fairseq's Longformer is exported/imported with exact GELU only")
    want("layer_norm_eps", lambda v: abs(float(v) - FAIRSEQ_LAYERNORM_EPS) <= 1e-12,
         f"fairseq's layer norms use eps {FAIRSEQ_LAYERNORM_EPS} (no flag changes it)")
    want("position_embedding_type", lambda v: v in (None, "absolute"),
         "only absolute (learned) positions have a fairseq counterpart")
    want("is_decoder", lambda v: not v, "a decoder (causal) model is not a masked LM encoder")
    want("add_cross_attention", lambda v: not v, "cross-attention has no counterpart in the encoder")
    want("problem_type", lambda v: v in (None, "single_label_classification"),
         "fairseq's longformer_classification trains single-label cross-entropy")
    for name, fairseq_id in (("pad_token_id", 1), ("bos_token_id", 0), ("eos_token_id", 2)):
        want(name, lambda v, i=fairseq_id: v is None or v == i,
             f"fairseq's Dictionary fixes this id to {fairseq_id}")
    if model_type == "longformer":
        windows = config.get("attention_window")
        values = windows if isinstance(windows, list) else [windows] * int(config["num_hidden_layers"])
        if len(values) != int(config["num_hidden_layers"]) or any(
                not isinstance(v, int) or v < 2 or v % 2 for v in values):
            problems.append(f"attention_window = {windows!r}: expected a positive even number (two-sided) "
                            "or one per layer")


def _fairseq_args(data: Path, layers, hidden, ffn, heads, windows, max_positions, dropout, attention_dropout,
                  untied, head: Optional[HeadRef] = None):
    from fairseq import options

    if head is None:
        task = ["--task", "longformer_mlm", "--criterion", "longformer_mlm", "--tokens-per-sample", str(max_positions)]
    else:  # HF's classifier drops out with hidden_dropout_prob
        task = HEAD_TASKS[head.kind].flags(head.name) + ["--pooler-dropout", repr(float(dropout))]
    flags = [str(data), *task, "--arch", "longformer",
             "--encoder-layers", str(layers), "--encoder-embed-dim", str(hidden),
             "--encoder-ffn-embed-dim", str(ffn), "--encoder-attention-heads", str(heads),
             "--attention-window", ",".join(map(str, windows)), "--attention-dilation", "1",
             "--max-positions", str(max_positions),
             "--pad-to-multiple", str(batch_pad_multiple(windows, max_positions)), "--activation-fn", "gelu",
             "--dropout", repr(float(dropout)), "--attention-dropout", repr(float(attention_dropout)),
             "--activation-dropout", "0"]
    if untied:
        flags.append("--untie-weights-roberta")
    parser = options.get_training_parser(default_task="longformer_mlm")
    return options.parse_args_and_arch(parser, input_args=flags)


class DictionaryTask:
    """What a fairseq model builder asks of a task: the dictionary and the positions."""

    def __init__(self, dictionary, positions):
        self.source_dictionary = dictionary
        self._positions = positions

    def max_positions(self):
        return self._positions


def _head_kind(state: Mapping[str, Tensor], hf_dir: Path) -> Optional[str]:
    """Which head the folder's tensors hold: None (lm_head), "classification" or "span"."""
    kinds = [kind for kind, prefix in HF_HEAD_PREFIXES.items() if any(k.startswith(prefix) for k in state)]
    if len(kinds) != 1:
        raise ValueError(f"{str(hf_dir)!r} holds {'no' if not kinds else 'several'} head tensors ("
                         f"{', '.join(p + '*' for p in HF_HEAD_PREFIXES.values())}): import needs one masked-LM, "
                         "sequence-classification or question-answering model, not the bare encoder")
    return kinds[0]


def _labels(config: Mapping) -> List[str]:
    """A classification folder's class names in id order (HF's LABEL_k for a config without them)."""
    id2label = config.get("id2label") or {"0": "LABEL_0", "1": "LABEL_1"}  # HF's default: 2 labels
    return [id2label[str(k)] for k in range(len(id2label))]


def import_hf(hf_dir, out_dir, max_positions: Optional[int] = None, attention_window=None,
              overwrite: bool = False, head_name: Optional[str] = None) -> ImportResult:
    """``longformer-import-hf``: a HF Longformer or RoBERTa (masked LM, sequence classification or
    question answering) folder -> ``model.pt`` + its task's dictionaries in ``out_dir``.

    max_positions: tokens of the fairseq model; default: the source's for a Longformer, 4096 for
    RoBERTa; more than the source extends the table with ``extend_positions`` (copy init).
    attention_window: one-sided w (one value or one per layer) for a RoBERTa source (default 256);
    a Longformer keeps its own (HF value // 2). head_name: the fairseq name of the imported task head
    (default: its task's, ``sentence_classification_head`` / ``qa``).
    """
    import fairseq_longformer  # noqa: F401  (registers the model, task and criterion)
    from fairseq.data import Dictionary
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf

    from longformer_kernels import parse_per_layer
    from ..models.longformer import LongformerModel

    hf_dir = Path(hf_dir)
    check_output_dir(out_dir, overwrite)
    config = read_hf_config(hf_dir)
    model_type = config.get("model_type")
    if model_type not in HF_BASE:
        raise ValueError(f"model_type {model_type!r}: only 'longformer' and 'roberta' folders are imported here "
                         "('led' folders by conversion/hf_led_import.py's import_led)")
    problems: List[str] = []
    _check_hf_config(config, model_type, problems)
    if problems:
        raise ValueError(f"cannot import {str(hf_dir)!r}, nothing was written:\n  - " + "\n  - ".join(problems))
    warnings: List[str] = []
    base = HF_BASE[model_type]
    layers, heads = int(config["num_hidden_layers"]), int(config["num_attention_heads"])
    hidden, ffn, vocab = int(config["hidden_size"]), int(config["intermediate_size"]), int(config["vocab_size"])
    padding_idx = 1
    source_rows = int(config["max_position_embeddings"])
    source_positions = source_rows - padding_idx - 1
    tied = bool(config.get("tie_word_embeddings", True))

    if model_type == "longformer":
        if attention_window is not None:
            raise ValueError("--attention-window applies to RoBERTa folders only: a Longformer keeps the window "
                             "it was trained with (config.json's attention_window // 2)")
        hf_windows = config["attention_window"]
        hf_windows = hf_windows if isinstance(hf_windows, list) else [hf_windows] * layers
        windows = tuple(int(w) // 2 for w in hf_windows)
    else:
        windows = parse_per_layer(attention_window if attention_window is not None else "256", layers,
                                  "attention-window")
        if any(w < 0 for w in windows):
            raise ValueError(f"--attention-window must be >= 0 (one-sided), got {attention_window!r}")
    if max_positions is None:
        max_positions = source_positions if model_type == "longformer" else 4096
    check_extendable(source_positions, max_positions)

    # -- tensors: keys and shapes against the config
    state = load_hf_state_dict(hf_dir)
    kind = _head_kind(state, hf_dir)
    if kind is None and head_name is not None:
        raise ValueError(f"--head-name {head_name!r}: {str(hf_dir)!r} is a masked LM, it has no task head to name")
    head = HeadRef(kind, head_name or HEAD_TASKS[kind].default_name) if kind is not None else None
    labels = _labels(config) if kind == "classification" else None
    reverse = reverse_key_map(layers, base, global_projections=(model_type == "longformer"), tied=tied, head=head)
    token_type_key = HF_TOKEN_TYPE.format(base=base)
    type_vocab = int(config.get("type_vocab_size", 1))
    outputs = len(labels) if labels is not None else 2  # L: classes, or QA's start and end
    dims = {"V": vocab, "C": hidden, "F": ffn, "P": source_rows, "L": outputs}
    expected = {hf: shape_of(spec, dims) for hf, (_, spec) in reverse.items()}
    expected[token_type_key] = (type_vocab, hidden)
    optional = {} if head is not None else {
        HF_DECODER_BIAS: (vocab,), **({HF_DECODER_WEIGHT: (vocab, hidden)} if tied else {})}
    ignored = {k.format(base=base) for k in HF_IGNORED_BUFFERS}
    pooler = sorted(k for k in state if k.startswith(f"{base}.pooler."))
    missing = sorted(set(expected) - set(state))
    unknown = sorted(set(state) - set(expected) - set(optional) - ignored - set(pooler))
    if missing or unknown:
        raise ValueError(f"{str(hf_dir)!r} does not match a {model_type} {kind or 'masked LM'} model with "
                         f"{layers} layers: missing {missing[:12]}, unexpected {unknown[:12]}")
    check_shapes(state, {**expected, **{k: v for k, v in optional.items() if k in state}}, str(hf_dir))
    if HF_DECODER_BIAS in state and not torch.equal(state[HF_DECODER_BIAS], state["lm_head.bias"]):
        raise ValueError("lm_head.decoder.bias differs from lm_head.bias: HF ties them; fairseq has one bias")
    if tied and HF_DECODER_WEIGHT in state and not torch.equal(
            state[HF_DECODER_WEIGHT], state[f"{base}.embeddings.word_embeddings.weight"]):
        raise ValueError("tie_word_embeddings is true but lm_head.decoder.weight differs from word_embeddings")
    if pooler:
        warnings.append(f"dropped the pooler ({', '.join(pooler)}): fairseq's RoBERTa has none")
    if head is not None:
        warnings.append(f"the folder has no LM head ({config.get('architectures')}): the checkpoint's encoder.lm_head "
                        f"is freshly initialized (the {kind} head does not use it)")

    # -- dictionary: fairseq id == HF id
    specials = hf_special_ids(hf_dir)
    for text, fairseq_id in (("<s>", 0), ("<pad>", 1), ("</s>", 2), ("<unk>", 3), ("<mask>", vocab - 1)):
        if text in specials and specials[text] != fairseq_id:
            raise ValueError(f"the tokenizer puts {text} at id {specials[text]}; fairseq's dictionary puts it at "
                             f"{fairseq_id} (4 specials first, <mask> appended last by the masked_lm task)")

    # -- fairseq model built through its builders, then filled
    out_abs = Path(out_dir).absolute()
    args = _fairseq_args(out_abs, layers, hidden, ffn, heads, windows, max_positions,
                         config.get("hidden_dropout_prob", 0.1),
                         config.get("attention_probs_dropout_prob", 0.0) or 0.0, untied=not tied, head=head)

    with tempfile.TemporaryDirectory() as scratch:
        dict_txt = Path(scratch) / "dict.txt"
        copied = hf_dir / DICT_COPY
        dictionary_source = "placeholders"
        if copied.is_file():
            candidate = Dictionary.load(str(copied))
            candidate.add_symbol("<mask>")
            if len(candidate) == vocab and candidate.index("<mask>") == vocab - 1:
                shutil.copyfile(copied, dict_txt)
                dictionary_source = DICT_COPY
            else:
                warnings.append(f"{DICT_COPY} gives {len(candidate)} symbols for {vocab} embedding rows: "
                                "ignored, placeholders written instead")
        if dictionary_source == "placeholders":
            if "<mask>" not in specials:
                warnings.append(f"no tokenizer says where <mask> is: assuming the last id ({vocab - 1}), where "
                                "fairseq's masked_lm task appends it")
            with open(dict_txt, "w", encoding="utf-8") as f:
                for index in range(4, vocab - 1):
                    f.write(f"{PLACEHOLDER.format(index)} 0\n")
        dictionary = Dictionary.load(str(dict_txt))
        dictionary.add_symbol("<mask>")  # what the masked_lm task does
        assert len(dictionary) == vocab and dictionary.index("<mask>") == vocab - 1
        model = LongformerModel.build_model(copy.deepcopy(args), DictionaryTask(dictionary, max_positions))
        if head is not None:
            register_head(model, head, outputs)

        template = {k: v for k, v in model.state_dict().items()}
        forward = key_map(layers, base, global_projections=(model_type == "longformer"), tied=tied, head=head)
        new: Dict[str, Tensor] = {fs: state[hf].to(torch.float32).clone() for fs, (hf, _) in forward.items()}
        positions = new[FAIRSEQ_POSITIONS]
        token_types = state[token_type_key].to(torch.float32)
        if type_vocab > 1:
            warnings.append(f"token_type_embeddings rows 1..{type_vocab - 1} dropped: fairseq's RoBERTa has no "
                            "segment ids (row 0, the one every token gets by default, is kept)")
        if bool(token_types[0].ne(0).any()):
            positions = positions + token_types[0]  # every token gets exactly one position row
            logger.info("token_type_embeddings row 0 is not zero: folded into the position embeddings")
        new[FAIRSEQ_POSITIONS] = extend_positions(positions, max_positions, padding_idx=padding_idx, init="copy")
        if model_type == "roberta":  # no global projections: copies of Q, K, V (the paper's init)
            add_missing_global_projections(new)
        if tied:
            new[FAIRSEQ_TIED_HEAD] = new[FAIRSEQ_TOKENS]
        for key, value in template.items():  # buffers (version counters), a head model's LM head: the builder's
            if key not in new:
                assert key.endswith(".version") or (head is not None and key.startswith("encoder.lm_head.")), \
                    f"fairseq model has a tensor the map does not fill: {key}"
                new[key] = value
        assert set(new) == set(template), sorted(set(new) ^ set(template))
        check_shapes(new, {k: tuple(v.shape) for k, v in template.items()}, "imported fairseq state")
        model.load_state_dict(new, strict=True)

        with warnings_module.catch_warnings():  # hydra's deprecation notices, not ours to act on
            warnings_module.simplefilter("ignore")
            cfg = convert_namespace_to_omegaconf(args)
        checkpoint = {"args": None, "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
                      "model": model.state_dict(), **fresh_training_state()}
        tokenizer_files = [name for name in HF_TOKENIZER_FILES if (hf_dir / name).is_file()]
        head_task = HEAD_TASKS[head.kind] if head is not None else None
        token_dict = head_task.token_dict if head_task is not None else MLM_TOKEN_DICT  # where the task reads it
        for warning in warnings:
            logger.warning(warning)
        with staged_folder(out_dir, overwrite) as tmp:
            torch.save(checkpoint, tmp / "model.pt")
            (tmp / token_dict).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(dict_txt, tmp / token_dict)
            if labels is not None:  # label k at index nspecial + k, as the task reads it
                label_dictionary = Dictionary()
                for label in labels:
                    label_dictionary.add_symbol(label)
                (tmp / head_task.label_dict).parent.mkdir(parents=True, exist_ok=True)
                label_dictionary.save(str(tmp / head_task.label_dict))
            if tokenizer_files:
                (tmp / "hf_tokenizer").mkdir()
                for name in tokenizer_files:
                    shutil.copyfile(hf_dir / name, tmp / "hf_tokenizer" / name)
    logger.info(f"imported {model_type} {kind or 'masked LM'} ({layers} layers, window w={list(windows)}, "
                f"{max_positions} positions) to {out_abs}")
    dims = {"encoder_layers": layers, "encoder_embed_dim": hidden, "encoder_ffn_embed_dim": ffn,
            "encoder_attention_heads": heads}
    return ImportResult(checkpoint=out_abs / "model.pt", dictionary=out_abs / token_dict, arch="longformer",
                        attention_window=tuple(windows), max_positions=max_positions, model_dims=dims,
                        model_type=model_type, untied=not tied, dictionary_source=dictionary_source,
                        warnings=warnings, head=head)
