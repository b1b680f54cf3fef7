"""Import of a Hugging Face ``LEDForConditionalGeneration`` folder as a fairseq LED checkpoint
folder (``models/led.py``): the reverse of ``hf_led.py``'s export.

``import_led`` (``longformer-import-hf`` on a folder whose model_type is "led"): config.json and
model.safetensors -> model.pt (update 0, with the cfg ``fairseq-train --arch led_* --task
translation`` would write) and dict.txt, and the folder's tokenizer files in hf_tokenizer/. The
conventions at the boundary (one-sided w = HF's attention_window / 2, reserved position rows, the
one shared token table, decoder start </s>) are ``hf_led.py``'s, and so are the key map, the
tensor names and ``LEDLayout``, imported from there. Every HF setting the fairseq LED cannot take
is named before anything is written.

Reserved rows: fairseq's position tables have ``padding_idx + 1`` rows before position 0 that HF
has no place for. The export keeps them in ``fairseq_reserved_positions.safetensors``, so that
fairseq -> HF -> fairseq gives back every tensor bit for bit; a folder without that file (an LED
trained in HF) gets zero rows there (no position id reaches them).

Shapes: V vocabulary, C width, P_e / P_d encoder / decoder positions (without reserved rows);
reserved rows (padding_idx + 1, C) per position table.
"""
import logging
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import torch
from torch import Tensor

from ..atomic import check_output_dir, staged_folder
from .bart import CRITERION, LEDConversionResult
from .hf_led import (DICT_COPY, FAIRSEQ_TIED, HF_LOGITS_BIAS, HF_TIED, POSITIONS, RESERVED_ROWS, TOKENS, LEDLayout,
                     reverse_led_key_map)

logger = logging.getLogger(__name__)


@dataclass
class LEDImportResult(LEDConversionResult):
    """What ``import_led`` wrote: the checkpoint folder, the flags that train and generate with it
    (``bart_positions`` is the encoder's own: nothing was tiled), where dict.txt came from."""

    dictionary_source: str = "placeholders"
    warnings: List[str] = field(default_factory=list)


def hf_to_fairseq_state(hf_state: Dict[str, Tensor], layout: LEDLayout,
                        reserved: Optional[Dict[str, Tensor]] = None) -> Dict[str, Tensor]:
    """HF LED tensors -> the fairseq LED state dict (every key of the built model but the
    version buffers). ``reserved``: fairseq key -> the (padding_idx + 1, C) rows the export kept
    (``RESERVED_ROWS``); None: zero rows. Raises ValueError naming missing, unknown or mistied
    tensors."""
    mapping = reverse_led_key_map(layout.encoder_layers, layout.decoder_layers)
    tables = [key for key in (TOKENS[1], *HF_TIED) if key in hf_state]
    known = {*mapping, *tables, *(hf for _, hf in POSITIONS), HF_LOGITS_BIAS}
    missing = sorted(set(mapping) - set(hf_state)) + [hf for _, hf in POSITIONS if hf not in hf_state]
    unknown = sorted(set(hf_state) - known)
    if missing or unknown or not tables:
        raise ValueError(f"the tensors are not those of an LED with {layout.encoder_layers} + {layout.decoder_layers} "
                         f"layers: missing {(missing or ([] if tables else [TOKENS[1]]))[:8]}, unexpected {unknown[:8]}")
    table = hf_state[tables[0]]
    if any(not torch.equal(hf_state[key], table) for key in tables[1:]):
        raise ValueError(f"{tables} differ: HF ties them to one token table, fairseq's BART has one")
    bias = hf_state.get(HF_LOGITS_BIAS)
    if bias is not None and bool(bias.ne(0).any()):
        raise ValueError(f"{HF_LOGITS_BIAS} is not zero: fairseq's output projection has no bias")
    out = {fs: hf_state[hf] for hf, fs in mapping.items()}
    out[TOKENS[0]] = table
    for fs in FAIRSEQ_TIED:
        out[fs] = table
    rows = layout.padding_idx + 1
    for fs, hf in POSITIONS:
        kept = (reserved or {}).get(fs)
        if kept is None or tuple(kept.shape) != (rows, layout.width):
            kept = torch.zeros(rows, layout.width, dtype=hf_state[hf].dtype)  # rows no position id reaches
        out[fs] = torch.cat([kept, hf_state[hf]])
    return {k: v.detach().clone().contiguous() for k, v in out.items()}


def _led_dictionary(hf_dir: Path, vocab: int, scratch: Path, warnings: List[str]):
    """(dictionary of ``vocab`` symbols, its dict.txt, where it came from): the export's
    fairseq_dict.txt when it fits the table, else placeholders; ``<mask>`` appended when the table
    has its row (a model from the denoising task), as ``load_led`` does."""
    from fairseq.data import Dictionary

    from .hf_import import hf_special_ids
    from .hf_keymap import PLACEHOLDER

    dict_txt = scratch / "dict.txt"
    source = "placeholders"
    if (hf_dir / DICT_COPY).is_file():
        copied = Dictionary.load(str(hf_dir / DICT_COPY))
        if vocab - len(copied) in (0, 1):
            dict_txt.write_bytes((hf_dir / DICT_COPY).read_bytes())
            source = DICT_COPY
        else:
            warnings.append(f"{DICT_COPY} gives {len(copied)} symbols for {vocab} embedding rows: ignored, "
                            "placeholders written instead")
    specials = hf_special_ids(hf_dir)
    if source == "placeholders":
        mask_last = specials.get("<mask>") == vocab - 1  # BART's tokenizer: <mask> after the dict.txt symbols
        with open(dict_txt, "w", encoding="utf-8") as f:
            for index in range(4, vocab - mask_last):
                f.write(f"{PLACEHOLDER.format(index)} 0\n")
        warnings.append(f"dict.txt lists placeholders ({PLACEHOLDER.format('k')} for id k): binarize data with the "
                        "tokenizer the model came with (copied to hf_tokenizer/)")
    dictionary = Dictionary.load(str(dict_txt))
    if len(dictionary) + 1 == vocab and "<mask>" not in dictionary.indices:
        dictionary.add_symbol("<mask>")
    for text in ("<s>", "<pad>", "</s>", "<unk>", "<mask>"):
        if text in specials and text in dictionary.indices and dictionary.index(text) != specials[text]:
            raise ValueError(f"the tokenizer puts {text} at id {specials[text]}, fairseq's dictionary at "
                             f"{dictionary.index(text)}: the ids would not match")
    return dictionary, dict_txt, source


def _led_args(data: Path, flags: List[str], layout: LEDLayout):
    """fairseq's parsed training args for the LED ``flags`` describe (translation task)."""
    from fairseq import options

    parser = options.get_training_parser(default_task="translation")
    return options.parse_args_and_arch(parser, input_args=[
        str(data), "--task", "translation", *flags, "--activation-fn", "gelu", "--dropout", repr(layout.dropout),
        "--attention-dropout", repr(layout.attention_dropout), "--activation-dropout", repr(layout.activation_dropout)])


def import_led(hf_dir, out_dir, overwrite: bool = False):
    """``longformer-import-hf`` on an LED folder: HF ``LEDForConditionalGeneration`` (config.json,
    model.safetensors) -> ``out_dir/model.pt`` (update 0, the cfg of ``fairseq-train --arch led_*
    --task translation``) + ``dict.txt``, and the folder's tokenizer files in ``hf_tokenizer/``.
    Returns an ``LEDImportResult``; raises FileNotFoundError / ValueError with nothing written."""
    import shutil
    import tempfile
    import warnings as warnings_module

    import fairseq_longformer  # noqa: F401  (registers the model)
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from omegaconf import OmegaConf
    from safetensors.torch import load_file

    from ..models.led import LEDModel
    from .hf_import import load_hf_state_dict, read_hf_config
    from .hf_keymap import HF_TOKENIZER_FILES, check_shapes
    from .restore import fresh_training_state

    hf_dir = Path(hf_dir)
    check_output_dir(out_dir, overwrite)
    config = read_hf_config(hf_dir)
    if config.get("model_type") != "led":
        raise ValueError(f"{str(hf_dir)!r} has model_type {config.get('model_type')!r}, not 'led'")
    layout = LEDLayout.from_hf_config(config, repr(str(hf_dir)))
    hf_state = load_hf_state_dict(hf_dir)
    reserved = None
    if (hf_dir / RESERVED_ROWS).is_file():
        try:
            reserved = load_file(str(hf_dir / RESERVED_ROWS))
        except Exception as error:  # safetensors' own error type: a damaged file
            raise ValueError(f"{str(hf_dir / RESERVED_ROWS)!r} does not load ({error})") from error
    state = hf_to_fairseq_state(hf_state, layout, reserved)
    warnings: List[str] = []
    if reserved is None:
        warnings.append(f"no {RESERVED_ROWS} (a folder not exported from fairseq): the position tables' reserved "
                        "rows are zeros, which no position id reaches")

    out_abs = Path(out_dir).absolute()
    result = LEDImportResult(
        checkpoint=out_abs / "model.pt", dictionary=out_abs / "dict.txt", arch=layout.arch(),
        attention_window=layout.windows, max_positions=layout.encoder_positions,
        decoder_positions=layout.decoder_positions, bart_positions=layout.encoder_positions,
        model_dims=layout.model_dims(), source=hf_dir.absolute(), warnings=warnings)
    args = _led_args(out_abs, result.model_flags(), layout)
    with tempfile.TemporaryDirectory() as scratch:
        dictionary, dict_txt, result.dictionary_source = _led_dictionary(hf_dir, layout.vocab, Path(scratch), warnings)
        task = types.SimpleNamespace(source_dictionary=dictionary, target_dictionary=dictionary, cfg=None)
        model = LEDModel.build_model(args, task)
        template = model.state_dict()
        state.update({k: v for k, v in template.items() if k.endswith(".version")})  # the builder's counters
        if set(state) != set(template):
            raise ValueError(f"the imported tensors do not fill the fairseq LED: {sorted(set(state) ^ set(template))[:8]}")
        check_shapes(state, {k: tuple(v.shape) for k, v in template.items()}, f"{str(hf_dir)!r}")
        model.load_state_dict(state, strict=True)
        with warnings_module.catch_warnings():  # hydra's deprecation notices, not ours to act on
            warnings_module.simplefilter("ignore")
            cfg = convert_namespace_to_omegaconf(args)
        checkpoint = {"args": None, "cfg": OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
                      "model": model.state_dict(),
                      **fresh_training_state({"led_import": {"source": str(hf_dir.absolute())}},
                                             criterion_name=CRITERION)}
        tokenizer_files = [name for name in HF_TOKENIZER_FILES if (hf_dir / name).is_file()]
        for warning in warnings:
            logger.warning(warning)
        with staged_folder(out_dir, overwrite) as tmp:
            torch.save(checkpoint, tmp / "model.pt")
            shutil.copyfile(dict_txt, tmp / "dict.txt")
            if tokenizer_files:
                (tmp / "hf_tokenizer").mkdir()
                for name in tokenizer_files:
                    shutil.copyfile(hf_dir / name, tmp / "hf_tokenizer" / name)
    result.copied_files = tokenizer_files
    logger.info(f"imported the LED ({layout.encoder_layers} + {layout.decoder_layers} layers, one-sided windows "
                f"{list(layout.windows)}, {layout.encoder_positions} encoder positions) to {out_abs}")
    return result
