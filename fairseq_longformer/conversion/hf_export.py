"""``longformer-export-hf``: a fairseq checkpoint -> a HF folder (Longformer with its head, or LED), checked first."""
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional

from torch import nn

from longformer_common.atomic import check_output_dir, staged_folder
from . import fairseq_checkpoint
from .families import led as led_family
from .families.longformer import HEAD_MODULES, HEAD_TASKS, HF_DECODER_WEIGHT, HF_IGNORED_BUFFERS, MLM_TOKEN_DICT, \
    WEIGHTS_NAME, HeadRef, choose_head, head_module, inspect_model, model_heads, refuse_heads_without_hf_class, \
    register_head
from .rules import DICT_COPY, hf_libraries, load_into_hf
from .tokenizer import TokenizerFiles, build_tokenizer

logger = logging.getLogger(__name__)


@dataclass
class ExportResult:
    out_dir: Path
    config: Dict[str, object]
    tokenizer: Optional[str]
    warnings: List[str] = field(default_factory=list)


def _write_folder(out_dir, overwrite: bool, write_model: Callable[[Path], None], dictionary, config, what: str,
                  tokenizer: Optional[TokenizerFiles], max_length: int, warnings: List[str]) -> ExportResult:
    """A folder: ``write_model(tmp)``, the dictionary copy and the tokenizer (built before anything is written)."""
    hf_tokenizer, extra_files = build_tokenizer(tokenizer or TokenizerFiles(), dictionary, max_length)
    for warning in warnings:
        logger.warning(warning)
    with staged_folder(out_dir, overwrite) as tmp:
        write_model(tmp)
        symbols, counts = dictionary.symbols[dictionary.nspecial:], dictionary.count[dictionary.nspecial:]
        if symbols[-1:] == ["<mask>"]:  # appended by the task, which appends it again
            symbols, counts = symbols[:-1], counts[:-1]
        (tmp / DICT_COPY).write_text("".join(f"{s} {int(c)}\n" for s, c in zip(symbols, counts)), encoding="utf-8")
        if hf_tokenizer is not None:
            hf_tokenizer.save_pretrained(str(tmp))
        for name, text in extra_files.items():
            (tmp / name).write_text(text, encoding="utf-8")
    out_dir = Path(out_dir).absolute()
    logger.info(f"exported {what} (one-sided windows -> HF attention_window {config['attention_window']}) as "
                f"{config['architectures'][0]} to {out_dir}")
    return ExportResult(out_dir, config, tokenizer.kind if tokenizer else None, warnings)


def to_hf_masked_lm(model, dictionary):
    """A built fairseq Longformer masked LM as the in-memory ``LongformerForMaskedLM`` ``export_model`` writes."""
    transformers = hf_libraries("export")
    layout = inspect_model(model, dictionary)
    hf_model = transformers.LongformerForMaskedLM(transformers.LongformerConfig(**layout.hf_config()))
    # tied, the decoder weight is the word embeddings' parameter; the id buffers are HF's own
    owned = {k.format(base="longformer") for k in HF_IGNORED_BUFFERS} | ({HF_DECODER_WEIGHT} if layout.tied else set())
    load_into_hf(hf_model, layout.hf_state(model.state_dict()), owned, "LongformerForMaskedLM")
    return hf_model


def export_model(model, dictionary, out_dir, tokenizer: Optional[TokenizerFiles] = None, overwrite: bool = False,
                 head_name: Optional[str] = None, labels: Optional[List[str]] = None) -> ExportResult:
    """A built fairseq Longformer -> HF folder: head ``head_name`` (default: the only one) or LongformerForMaskedLM."""
    transformers = hf_libraries("export")
    head = choose_head(model_heads(model), head_name, "the model")
    refuse_heads_without_hf_class(head, head_module(model, head).state_dict() if head is not None else {})
    layout = inspect_model(model, dictionary, head)
    config = layout.hf_config(labels)
    tensors = layout.hf_state(model.state_dict())
    hf_config = transformers.LongformerConfig(**config)

    def write_model(tmp: Path) -> None:
        import safetensors.torch  # looked up at call time, so a test can make the disk fail
        hf_config.save_pretrained(str(tmp))
        safetensors.torch.save_file(tensors, str(tmp / WEIGHTS_NAME), metadata={"format": "pt"})
    return _write_folder(out_dir, overwrite, write_model, dictionary, config, f"{layout.num_layers} layers", tokenizer,
                         layout.position_rows - layout.padding_idx - 1, layout.warnings)


def _check_before_reading(out_dir, overwrite: bool, tokenizer: Optional[TokenizerFiles]) -> None:
    check_output_dir(out_dir, overwrite)
    (tokenizer or TokenizerFiles()).kind  # noqa: B018  (validates the tokenizer flags before the slow load)


def _find(what: str, flag: str, given, candidates: List[Path]) -> Path:
    candidates = [Path(given)] if given is not None else list(dict.fromkeys(candidates))
    found = next((p for p in candidates if p.is_file()), None)
    if found is None:
        raise FileNotFoundError(f"no {what}: looked for {[str(p) for p in candidates]} (pass {flag})")
    return found


def load_led(checkpoint, dict_path=None, state: Optional[dict] = None):
    """(built fairseq LED in eval mode, its dictionary) from a checkpoint (``state``: it, read already)."""
    import fairseq_longformer  # noqa: F401  (registers the model)
    from fairseq.data import Dictionary
    from ..models.led import LEDModel
    checkpoint, dict_file = fairseq_checkpoint.resolve_source(
        fairseq_checkpoint.checkpoint_file(checkpoint), dict_file=dict_path, kind="LED")
    state = state or fairseq_checkpoint.load_upgraded(checkpoint, "LED")
    cfg = state["cfg"]
    arch = getattr(cfg.model, "arch", None)  # a Namespace (BART's legacy model config) or a DictConfig
    if not str(arch).startswith("led"):
        raise ValueError(f"{str(checkpoint)!r} is not an LED checkpoint (arch {arch!r})")
    dictionary = Dictionary.load(str(dict_file))
    if state["model"]["encoder.embed_tokens.weight"].shape[0] == len(dictionary) + 1 \
            and "<mask>" not in dictionary.indices:
        dictionary.add_symbol("<mask>")
    model = LEDModel.build_model(cfg.model, fairseq_checkpoint.DictionaryTask(dictionary))  # no data folder needed
    model.load_state_dict(state["model"], strict=True, model_cfg=cfg.model)
    return model.eval(), dictionary


def export_led_model(model, dictionary, out_dir, tokenizer: Optional[TokenizerFiles] = None,
                     overwrite: bool = False) -> ExportResult:
    """A built fairseq LED -> HF LEDForConditionalGeneration folder (+ the reserved position rows)."""
    transformers = hf_libraries("export")
    layout = led_family.inspect_led(model)
    if len(dictionary) != layout.vocab:
        raise ValueError(f"the dictionary has {len(dictionary)} symbols, the model's embeddings {layout.vocab} rows: "
                         "pass the dict.txt the model was trained with")
    config = layout.hf_config()
    state = model.state_dict()
    hf_model = transformers.LEDForConditionalGeneration(transformers.LEDConfig(**config))
    load_into_hf(hf_model, led_family.fairseq_to_hf_state(state, layout),
                 {*led_family.HF_TIED, led_family.HF_LOGITS_BIAS}, "HF's LED")
    hf_model.final_logits_bias.zero_()  # fairseq's output projection has no bias
    reserved = {fs: state[fs][:layout.padding_idx + 1].contiguous() for fs, _ in led_family.POSITIONS}

    def write_model(tmp: Path) -> None:
        import safetensors.torch
        hf_model.save_pretrained(str(tmp), safe_serialization=True)
        safetensors.torch.save_file(reserved, str(tmp / led_family.RESERVED_ROWS), metadata={"format": "pt"})
    return _write_folder(out_dir, overwrite, write_model, dictionary, config, f"the LED ({layout.encoder_layers} + "
                         f"{layout.decoder_layers} layers)", tokenizer, layout.encoder_positions, [])


def export_led(checkpoint, out_dir, dict_path=None, tokenizer: Optional[TokenizerFiles] = None,
               overwrite: bool = False) -> ExportResult:
    """An LED checkpoint (+ its dict.txt) -> a Hugging Face LEDForConditionalGeneration folder."""
    _check_before_reading(out_dir, overwrite, tokenizer)
    return export_led_model(*load_led(checkpoint, dict_path), out_dir, tokenizer, overwrite)


def load_fairseq_checkpoint(path: Path, dict_path, label_dict_path, head_name: Optional[str], encoder_only: bool,
                            state: dict):
    """(model, task, head) of the Longformer checkpoint ``path`` (``state``: it, read already) holding exactly head
    ``head_name`` (else the only one); the dictionaries: ``dict_path`` / ``label_dict_path``, else next to the
    checkpoint, else in its --data."""
    import fairseq_longformer  # noqa: F401  (registers the model and task)
    from fairseq import checkpoint_utils
    from fairseq.dataclass.utils import overwrite_args_by_name
    cfg = state["cfg"]
    if encoder_only and head_name is not None:
        raise ValueError("--encoder-only exports no head: leave out --head-name")
    heads = dict.fromkeys(HeadRef(kind, key.split(".")[1]) for key in state["model"]
                          for kind, attr in HEAD_MODULES.items() if key.startswith(attr + "."))
    head = None if encoder_only else choose_head(list(heads), head_name, f"checkpoint {str(path)!r}")
    # the head's tensors by name inside it, taken before fairseq's loader deletes heads its task lacks
    prefix = f"{HEAD_MODULES[head.kind]}.{head.name}." if head is not None else "\0"
    head_tensors = {key[len(prefix):]: value for key, value in state["model"].items() if key.startswith(prefix)}
    refuse_heads_without_hf_class(head, head_tensors)
    roots = [path.parent] + ([Path(str(cfg.task.data).split(os.pathsep)[0])] if cfg.task.get("data") else [])
    token_dict, label_dict = next(((t.token_dict, t.label_dict) for t in HEAD_TASKS.values()
                                   if t.task == cfg.task.get("_name")), (MLM_TOKEN_DICT, None))  # under its --data
    files = {token_dict: _find("dictionary", "--dict", dict_path,
                               [path.parent / "dict.txt"] + [root / token_dict for root in roots])}
    if label_dict is not None:
        files[label_dict] = _find("label dictionary", "--label-dict", label_dict_path,
                                  [root / label_dict for root in roots])
    elif label_dict_path is not None:
        raise ValueError(f"--label-dict: the checkpoint's task {cfg.task.get('_name')!r} has no label dictionary")
    with tempfile.TemporaryDirectory() as data:  # the task reads its dictionaries from DATA
        for name, found in files.items():
            os.makedirs(os.path.dirname(os.path.join(data, name)), exist_ok=True)
            shutil.copyfile(found, os.path.join(data, name))
        overwrite_args_by_name(cfg, {"data": data})
        models, _, task = checkpoint_utils.load_model_ensemble_and_task([str(path)], state=state)
    model = models[0].eval()
    for attr in HEAD_MODULES.values():  # exactly ``head`` (fairseq's loader re-inits a head of another size)
        getattr(model, attr, nn.ModuleDict()).clear()
    if head is not None:  # a classification head sized by its tensors; a span head's always C -> 2
        if head.kind == "classification":
            register_head(model, head, head_tensors["out_proj.weight"].shape[0], head_tensors["dense.weight"].shape[0])
        else:
            register_head(model, head, 2)
        head_module(model, head).load_state_dict(head_tensors, strict=True)
    return model, task, head


def export_checkpoint(checkpoint, out_dir, dict_path=None, tokenizer: Optional[TokenizerFiles] = None,
                      overwrite: bool = False, head_name: Optional[str] = None,
                      label_dict_path=None, encoder_only: bool = False) -> ExportResult:
    """``longformer-export-hf``: the class chosen by the checkpoint's family (``encoder_only``: no task head)."""
    _check_before_reading(out_dir, overwrite, tokenizer)
    path = fairseq_checkpoint.checkpoint_file(checkpoint)
    state = fairseq_checkpoint.load_upgraded(path, "Longformer or LED")  # read (and CRC-checked) once
    if str(getattr(state["cfg"].model, "arch", "")).startswith("led"):
        if head_name is not None or label_dict_path is not None or encoder_only:
            raise ValueError("--head-name / --label-dict / --encoder-only: an LED checkpoint has no task heads")
        return export_led_model(*load_led(path, dict_path, state), out_dir, tokenizer, overwrite)
    model, task, head = load_fairseq_checkpoint(path, dict_path, label_dict_path, head_name, encoder_only, state)
    own = head is not None and head.kind == "classification" and hasattr(task, "label_dictionary") and getattr(
        task.cfg, HEAD_TASKS["classification"].name_field, None) == head.name  # the head the labels describe
    return export_model(model, task.source_dictionary, out_dir, tokenizer, overwrite,
                        labels=list(task.label_names()) if own else None)
