"""``longformer-import-hf``: a HF folder -> a fairseq checkpoint folder (model.pt + its task's dictionaries,
fairseq id == HF id): one driver (``_import``) reading the folder through its family's reader."""
import copy
import logging
import tempfile
import warnings as warnings_module
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import torch
from fairseq import options
from fairseq.data import Dictionary
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from omegaconf import OmegaConf
from torch import Tensor

from longformer_common.atomic import check_output_dir
from .families import led as led_family
from .families.longformer import HEAD_TASKS, HF_BASE, HF_CONFIG, HF_DECODER_BIAS, HF_DECODER_WEIGHT, HF_HEAD_PREFIXES, \
    HF_IGNORED_BUFFERS, HF_LAYER_COUNTS, HF_SIZES, HF_TOKEN_TYPE, MLM_TOKEN_DICT, ROBERTA_SHAPED, HeadRef, \
    config_problems, hf_to_fairseq_state, key_map, register_head, source_family
from .fairseq_checkpoint import ConvertedCheckpoint, DictionaryTask, fresh_training_state, write_checkpoint_folder
from .fairseq_sources import LED_CRITERION, LEDConversionResult, parse_windows
from .hf_folder import HF_TOKENIZER_FILES, check_sizes, folder_dictionary, hf_special_ids, load_safetensors, \
    read_hf_config, read_weights, unigram_pieces
from .rules import PLACEHOLDER, check_extendable, check_shapes, filled_from, from_hf_windows, hf_libraries, renamed, \
    shape_of

logger = logging.getLogger(__name__)


@dataclass
class ImportResult(ConvertedCheckpoint):
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


@dataclass
class LEDImportResult(LEDConversionResult):
    dictionary_source: str = "placeholders"
    warnings: List[str] = field(default_factory=list)


@dataclass
class FamilyRead:
    """A family reader's part of an import: the checked folder as fairseq's flags, dictionaries and tensors."""
    result: ConvertedCheckpoint  # an ImportResult or LEDImportResult, its warnings and dictionary_source set
    flags: List[str]  # fairseq-train's model and task flags
    dictionary: Dictionary
    files: Dict[str, Path]  # output name -> a dictionary written in the scratch folder
    state: Dict[str, Tensor]  # fairseq's tensors, but the builder's own (versions, a head import's LM head)
    training_state: Dict[str, object]
    head: Optional[Tuple[HeadRef, int]] = None  # a task head to register, and its outputs


def _import(hf_dir, out_dir, overwrite: bool, read: Callable[..., FamilyRead]):
    """``read(hf_dir, config, out_abs, scratch)``, then the model built, filled exactly and written with its files."""
    import fairseq_longformer  # noqa: F401  (registers the models, tasks and criteria)
    from fairseq.models import ARCH_MODEL_REGISTRY
    hf_libraries("import")  # config.json is read as transformers reads it
    hf_dir, out_abs = Path(hf_dir), Path(out_dir).absolute()
    check_output_dir(out_dir, overwrite, [hf_dir])
    with tempfile.TemporaryDirectory() as scratch:
        family = read(hf_dir, read_hf_config(hf_dir), out_abs, Path(scratch))
        args = options.parse_args_and_arch(options.get_training_parser(), input_args=[str(out_abs), *family.flags])
        model = ARCH_MODEL_REGISTRY[args.arch].build_model(
            copy.deepcopy(args), DictionaryTask(family.dictionary, family.result.max_positions))
        if family.head is not None:
            register_head(model, *family.head)
        model.load_state_dict(filled_from(family.state, model.state_dict(), lambda key: key.endswith(".version") or
                                          key.startswith("encoder.lm_head."), repr(str(hf_dir))), strict=True)
        with warnings_module.catch_warnings():  # hydra's deprecation notices, not ours to act on
            warnings_module.simplefilter("ignore")
            cfg = convert_namespace_to_omegaconf(args)
        checkpoint = {"args": None, "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
                      "model": model.state_dict(), **family.training_state}
        for warning in family.result.warnings:
            logger.warning(warning)
        tokenizer = {f"hf_tokenizer/{name}": hf_dir / name for name in HF_TOKENIZER_FILES if (hf_dir / name).is_file()}
        write_checkpoint_folder(out_dir, overwrite, checkpoint, {**family.files, **tokenizer}, [hf_dir])
    result = family.result
    logger.info(f"imported {hf_dir} as {result.arch} ({result.model_dims['encoder_layers']} encoder layers, one-sided "
                f"windows {list(result.attention_window)}, {result.max_positions} positions) to {out_abs}")
    return result


# settings read as transformers' config class defaults them when config.json lacks them (sizes are checked against
# the tensors instead)
DEFAULTED = ("layer_norm_eps", "type_vocab_size", "hidden_dropout_prob", "attention_probs_dropout_prob", "hidden_act",
             "position_embedding_type", "tie_word_embeddings")
FAIRSEQ_VALUES = {"layer_norm_eps": 1e-05, "type_vocab_size": 1}


def _check_family_sizes(config: Mapping, hf_dir: Path, model_type: str) -> None:
    """The weights load (pytorch_model.bin's CRCs checked) and the config's sizes are the tensors'."""
    base = HF_BASE.get(model_type)  # None: an LED
    tables = (led_family.HF_SIZES, led_family.HF_LAYER_COUNTS, led_family.HF_HEAD_COUNTS) if base is None else (
        {name: (key.format(base=base), dim) for name, (key, dim) in HF_SIZES.items()},
        {name: prefix.format(base=base) for name, prefix in HF_LAYER_COUNTS.items()}, ("num_attention_heads",))
    check_sizes(config, read_weights(hf_dir, shapes_only=True), *tables, hf_dir)


def check_folder(hf_dir) -> Mapping:
    """config.json after the import's checks of the folder, for a tool that loads it with transformers."""
    hf_dir = Path(hf_dir)
    config = read_hf_config(hf_dir)
    model_type = "led" if config.get("model_type") == "led" else source_family(config)
    if model_type is not None:  # another family: the caller names what it accepts
        _check_family_sizes(config, hf_dir, model_type)
    return config


def _head(state: Mapping[str, Tensor], hf_dir: Path, head_name: Optional[str]) -> Optional[HeadRef]:
    """The head the folder's tensors hold (None: a masked LM), named ``head_name`` or its task's default."""
    kinds = [kind for kind, prefix in HF_HEAD_PREFIXES.items() if any(k.startswith(prefix) for k in state)]
    if len(kinds) != 1:
        raise ValueError(f"{str(hf_dir)!r} holds {'no' if not kinds else 'several'} head tensors ("
                         f"{', '.join(p + '*' for p in HF_HEAD_PREFIXES.values())}): import needs one masked-LM, "
                         "sequence-classification or question-answering model, not the bare encoder")
    if kinds[0] is None and head_name is not None:
        raise ValueError(f"--head-name {head_name!r}: {str(hf_dir)!r} is a masked LM, it has no task head to name")
    return HeadRef(kinds[0], head_name or HEAD_TASKS[kinds[0]].default_name) if kinds[0] else None


def _labels(config: Mapping, hf_dir: Path) -> List[str]:
    """A classification folder's class names in id order (HF's default: 2 classes, LABEL_k)."""
    id2label = config.get("id2label") or {"0": "LABEL_0", "1": "LABEL_1"}
    labels = [id2label[str(k)] for k in range(len(id2label))]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:  # fairseq's label dictionary keeps one entry per name: its ids would shift, the head be dropped
        raise ValueError(f"{str(hf_dir / 'config.json')!r}: id2label gives the name {repeated[0]!r} to the classes "
                         f"{[k for k, other in enumerate(labels) if other == repeated[0]]}"
                         f"{' (and repeats ' + ', '.join(map(repr, repeated[1:])) + ')' if repeated[1:] else ''}: "
                         "fairseq's label dictionary needs one name per class; give each id its own name in "
                         "id2label (and label2id)")
    return labels


def _read_longformer(hf_dir: Path, config: Mapping, out_abs: Path, scratch: Path, max_positions: Optional[int],
                     attention_window, head_name: Optional[str]) -> FamilyRead:
    """A Longformer or RoBERTa-family folder (masked LM, classification or QA) read for ``_import``."""
    model_type = source_family(config)  # "longformer" or "roberta" (XLM-R, CamemBERT, RoBERTa-shaped)
    if model_type is None:
        raise ValueError(f"model_type {config.get('model_type')!r}: only Longformer and RoBERTa-family folders "
                         f"(roberta, xlm-roberta, camembert, or architectures {ROBERTA_SHAPED[0]} and alike) are "
                         "imported here, 'led' folders by import_led; BERT-shaped models are not (see "
                         "docs/conversion.md)")
    base, is_longformer = HF_BASE[model_type], model_type == "longformer"
    # config.json as transformers reads it (missing settings defaulted), checked: one ValueError naming every problem
    problems = config_problems(config)
    import transformers  # present (_import checked); imported late so the CLI's --help and bad input stay light
    defaults = transformers.AutoConfig.for_model(model_type).to_dict()
    defaulted = [name for name in DEFAULTED if name not in config and name in defaults]
    config = {**config, **{name: defaults[name] for name in defaulted}}
    if not problems:  # nothing below is sized by an unchecked number
        _check_family_sizes(config, hf_dir, model_type)
        heads, hidden = int(config["num_attention_heads"]), int(config["hidden_size"])
        if heads < 1 or hidden % heads:
            problems.append(f"num_attention_heads = {heads} does not divide hidden_size {hidden}")
        windows_problem = from_hf_windows(config.get("attention_window"), int(config["num_hidden_layers"]))[1]
        if is_longformer and windows_problem:
            problems.append(windows_problem)
        problems += [
            f"{problem} (config.json has no {name}: transformers reads it as its default; if the model was trained "
            f"with fairseq's value, write \"{name}\": {FAIRSEQ_VALUES.get(name)!r} into config.json)"
            for problem in config_problems({key: config[key] for key in defaulted})
            for name in defaulted if problem.startswith(f"{name} =")]
    if problems:
        raise ValueError(f"cannot import {str(hf_dir)!r}, nothing was written: " + "; ".join(problems))
    warnings: List[str] = []
    layers, heads, hidden, ffn, vocab, source_rows = (int(config[HF_CONFIG[name]]) for name in list(HF_CONFIG)[:6])
    tied = bool(config.get("tie_word_embeddings", True))
    if is_longformer and attention_window is not None:
        raise ValueError("--attention-window applies to RoBERTa folders only: a Longformer keeps the window "
                         "it was trained with (config.json's attention_window // 2)")
    windows = from_hf_windows(config["attention_window"], layers)[0] if is_longformer else \
        parse_windows(attention_window if attention_window is not None else "256", layers)
    if max_positions is None:
        max_positions = source_rows - 2 if is_longformer else 4096
    check_extendable(source_rows - 2, max_positions)  # 2: fairseq's reserved rows (padding_idx 1 + 1)
    # the folder's tensors against the key map's names and shapes, HF's tied copies equal
    state = read_weights(hf_dir)
    head = _head(state, hf_dir, head_name)
    labels = _labels(config, hf_dir) if head is not None and head.kind == "classification" else None
    outputs = len(labels) if labels is not None else 2  # L: classes, or QA's start and end
    dims = {"V": vocab, "C": hidden, "F": ffn, "P": source_rows, "L": outputs}
    forward = key_map(layers, base, is_longformer, tied, head)
    token_type_key = HF_TOKEN_TYPE.format(base=base)
    expected = {hf: shape_of(spec, dims) for hf, spec in forward.values()}
    expected[token_type_key] = (int(config.get("type_vocab_size", 1)), hidden)
    optional = {} if head is not None else {
        HF_DECODER_BIAS: (vocab,), **({HF_DECODER_WEIGHT: (vocab, hidden)} if tied else {})}
    pooler = sorted(k for k in state if k.startswith(f"{base}.pooler."))
    renamed(state, {key: key for key in expected}, f"{str(hf_dir)!r} does not match a {model_type} "
            f"{head.kind if head else 'masked LM'} model with {layers} layers",
            ignored=(*optional, *(k.format(base=base) for k in HF_IGNORED_BUFFERS), *pooler))
    check_shapes(state, {**expected, **{k: v for k, v in optional.items() if k in state}}, str(hf_dir))
    if HF_DECODER_BIAS in state and not torch.equal(state[HF_DECODER_BIAS], state["lm_head.bias"]):
        raise ValueError("lm_head.decoder.bias differs from lm_head.bias: HF ties them; fairseq has one bias")
    if HF_DECODER_WEIGHT in optional and HF_DECODER_WEIGHT in state and not torch.equal(
            state[HF_DECODER_WEIGHT], state[f"{base}.embeddings.word_embeddings.weight"]):
        raise ValueError("tie_word_embeddings is true but lm_head.decoder.weight differs from word_embeddings")
    if pooler:
        warnings.append(f"dropped the pooler ({', '.join(pooler)}): fairseq's RoBERTa has none")
    if head is not None:
        warnings.append(f"the folder has no LM head ({config.get('architectures')}): the checkpoint's encoder.lm_head "
                        f"is freshly initialized (the {head.kind} head does not use it)")
    specials, pieces = hf_special_ids(hf_dir), unigram_pieces(hf_dir) or []
    for text, fairseq_id in (("<s>", 0), ("<pad>", 1), ("</s>", 2), ("<unk>", 3), ("<mask>", vocab - 1)):
        if text not in specials or specials[text] == fairseq_id:
            continue
        if pieces[fairseq_id:fairseq_id + 1] != [text + "NOTUSED"]:
            raise ValueError(f"the tokenizer puts {text} at id {specials[text]}; fairseq's dictionary puts it at "
                             f"{fairseq_id} (4 specials first, <mask> appended last by the masked_lm task)")
        # CamemBERT: fairseq's id 0 / 2 kept as <s>NOTUSED / </s>NOTUSED, the tokenizer's <s> / </s>
        # further on; the ids carry over, only what fairseq's tasks put around a sequence differs
        warnings.append(f"the tokenizer puts {text} at id {specials[text]} and {text}NOTUSED at {fairseq_id}; "
                        f"fairseq's tasks put id {fairseq_id} there (continued pretraining feeds the NOTUSED id; the "
                        "exported model takes either)")
    head_task = HEAD_TASKS[head.kind] if head is not None else None
    token_dict = head_task.token_dict if head_task is not None else MLM_TOKEN_DICT  # where the task reads it
    result = ImportResult(
        checkpoint=out_abs / "model.pt", dictionary=out_abs / token_dict, arch="longformer",
        attention_window=tuple(windows), max_positions=max_positions, untied=not tied, warnings=warnings, head=head,
        model_dims={"encoder_layers": layers, "encoder_embed_dim": hidden, "encoder_ffn_embed_dim": ffn,
                    "encoder_attention_heads": heads})
    flags = result.train_flags()
    at = flags.index("--restore-file")  # the checkpoint it writes
    del flags[at:at + 2]
    dropout = repr(float(config.get("hidden_dropout_prob", 0.1)))  # HF's classifier drops out with it too
    flags += ["--attention-dilation", "1", "--activation-fn", "gelu", "--dropout", dropout,
              "--attention-dropout", repr(float(config.get("attention_probs_dropout_prob", 0.0) or 0.0)),
              "--activation-dropout", "0", *(["--pooler-dropout", dropout] if head is not None else [])]
    files = {token_dict: scratch / "dict.txt"}
    dictionary, result.dictionary_source = folder_dictionary(hf_dir, vocab, True, files[token_dict], warnings)
    if result.dictionary_source == "placeholders" and "<mask>" not in specials:
        warnings.append(f"no tokenizer says where <mask> is: assuming the last id ({vocab - 1}), where "
                        "fairseq's masked_lm task appends it")
    assert dictionary.index("<mask>") == vocab - 1
    if labels is not None:  # label k at index nspecial + k, as the task reads it
        files[head_task.label_dict] = scratch / "labels.txt"
        files[head_task.label_dict].write_text("".join(f"{label} 1\n" for label in labels), encoding="utf-8")
    state = hf_to_fairseq_state(state, forward, token_type_key, max_positions, not is_longformer, tied, warnings)
    return FamilyRead(result, flags, dictionary, files, state, fresh_training_state(),
                      (head, outputs) if head is not None else None)


def _read_led(hf_dir: Path, config: Mapping, out_abs: Path, scratch: Path) -> FamilyRead:
    """A HF ``LEDForConditionalGeneration`` folder read for ``_import`` (``--task translation``)."""
    if config.get("model_type") != "led":
        raise ValueError(f"{str(hf_dir)!r} has model_type {config.get('model_type')!r}, not 'led'")
    _check_family_sizes(config, hf_dir, "led")
    layout = led_family.LEDLayout.from_hf_config(config, repr(str(hf_dir)))
    hf_state = read_weights(hf_dir)
    reserved_path, reserved, warnings = hf_dir / led_family.RESERVED_ROWS, None, []
    if reserved_path.is_file():
        try:
            reserved = load_safetensors(reserved_path)
        except Exception as error:  # safetensors' own error type: a damaged file
            raise ValueError(f"{str(reserved_path)!r} does not load ({error})") from error
    else:
        warnings.append(f"no {led_family.RESERVED_ROWS} (a folder not exported from fairseq): the position tables' "
                        "reserved rows are zeros, which no position id reaches")
    state = led_family.hf_to_fairseq_state(hf_state, layout, reserved)
    result = LEDImportResult(
        checkpoint=out_abs / "model.pt", dictionary=out_abs / "dict.txt", arch=layout.arch(), warnings=warnings,
        attention_window=layout.windows, max_positions=layout.encoder_positions, model_dims=layout.model_dims(),
        decoder_positions=layout.decoder_positions, bart_positions=layout.encoder_positions)
    specials = hf_special_ids(hf_dir)  # BART's tokenizer puts <mask> after the symbols
    dictionary, result.dictionary_source = folder_dictionary(
        hf_dir, layout.vocab, None, scratch / "dict.txt", warnings, specials.get("<mask>") == layout.vocab - 1)
    if result.dictionary_source == "placeholders":
        warnings.append(f"dict.txt lists placeholders ({PLACEHOLDER.format('k')} for id k): binarize data with "
                        "the tokenizer the model came with (copied to hf_tokenizer/)")
    for text in ("<s>", "<pad>", "</s>", "<unk>", "<mask>"):
        if text in specials and text in dictionary.indices and dictionary.index(text) != specials[text]:
            raise ValueError(f"the tokenizer puts {text} at id {specials[text]}, fairseq's dictionary at "
                             f"{dictionary.index(text)}: the ids would not match")
    flags = ["--task", "translation", *result.model_flags(), "--activation-fn", "gelu",
             "--dropout", repr(layout.dropout), "--attention-dropout", repr(layout.attention_dropout),
             "--activation-dropout", repr(layout.activation_dropout)]
    return FamilyRead(result, flags, dictionary, {"dict.txt": scratch / "dict.txt"}, state,
                      fresh_training_state({"led_import": {"source": str(hf_dir.absolute())}}, LED_CRITERION))


def import_hf(hf_dir, out_dir, max_positions: Optional[int] = None, attention_window=None,
              overwrite: bool = False, head_name: Optional[str] = None) -> ImportResult:
    """A HF Longformer or RoBERTa-family folder (masked LM, classification or QA) -> model.pt + dictionaries;
    max_positions default: a Longformer's own, 4096 (tiled) for a RoBERTa; attention_window: a RoBERTa's only."""
    return _import(hf_dir, out_dir, overwrite, lambda *folder: _read_longformer(
        *folder, max_positions, attention_window, head_name))


def import_led(hf_dir, out_dir, overwrite: bool = False) -> LEDImportResult:
    """HF ``LEDForConditionalGeneration`` -> model.pt (``--task translation``) + dict.txt + hf_tokenizer/."""
    return _import(hf_dir, out_dir, overwrite, _read_led)


def import_folder(hf_dir, out_dir, overwrite: bool = False, **options):
    """The folder's family picks the import; ``options``: the Longformer family's only."""
    if read_hf_config(hf_dir).get("model_type") == "led":
        given = [f"--{name.replace('_', '-')}" for name, value in options.items() if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)}: an LED folder keeps its positions and windows (config.json) "
                             "and has no task heads")
        return import_led(hf_dir, out_dir, overwrite)
    return import_hf(hf_dir, out_dir, overwrite=overwrite, **options)
