"""A Hugging Face folder read as data: config.json, the tensors (safetensors or a CRC-checked
pytorch_model.bin, sharded or not) with the config's sizes checked against them, the tokenizer's ids."""
import json
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import torch
from fairseq.data import Dictionary
from torch import Tensor

from ..runtime.checkpoints import CorruptCheckpointError, check_intact
from .rules import DICT_COPY, PLACEHOLDER

MAX_SIZE = 2 ** 31  # the largest size a config.json may state (more than any real model's)
# a HF tokenizer's files, copied into the import's OUTDIR/hf_tokenizer/
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
                      "sentencepiece.bpe.model", "spiece.model", "tokenizer.model", "added_tokens.json")
DAMAGED_TOKENIZER = "Remove it, or download the folder again."


def _read_json(path: Path, what: str):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{str(path)!r} is not valid JSON ({error}): a damaged folder? {what}") from error


def read_hf_config(hf_dir) -> Dict[str, object]:
    """config.json of a HF model folder, or an error naming what the folder is not."""
    hf_dir = Path(hf_dir)
    if not hf_dir.is_dir():
        raise FileNotFoundError(f"{str(hf_dir)!r} is not a folder: pass a Hugging Face model folder")
    if not (hf_dir / "config.json").is_file():
        raise FileNotFoundError(f"{str(hf_dir)!r} has no config.json: not a Hugging Face model folder")
    config = _read_json(hf_dir / "config.json", "Download the folder again.")
    if not isinstance(config, dict):
        raise ValueError(f"{str(hf_dir / 'config.json')!r} holds a {type(config).__name__}, not a model config")
    return config


def _weight_files(hf_dir: Path) -> Tuple[str, List[Path]]:
    """("safetensors" | "torch", the files), an index's shards each checked to lie inside ``hf_dir``."""
    for name, kind in (("model.safetensors", "safetensors"), ("model.safetensors.index.json", "safetensors"),
                       ("pytorch_model.bin.index.json", "torch"), ("pytorch_model.bin", "torch")):
        if not (hf_dir / name).is_file():
            continue
        if not name.endswith(".json"):
            return kind, [hf_dir / name]
        index = _read_json(hf_dir / name, "Download the folder again.")
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise ValueError(f"{str(hf_dir / name)!r} has no weight_map of file names: a damaged folder? "
                             "Download the folder again.")
        root, shards = hf_dir.resolve(), sorted(set(weight_map.values()))
        for shard in shards:
            path = (hf_dir / shard).resolve()
            if path.parent != root and root not in path.parents:
                raise ValueError(f"{str(hf_dir / name)!r} names the shard {shard!r}, which is outside the folder: "
                                 "shards must be files inside the model folder")
        return kind, [hf_dir / shard for shard in shards]
    raise FileNotFoundError(f"{str(hf_dir)!r} has no model.safetensors or pytorch_model.bin")


def read_weights(hf_dir, shapes_only: bool = False) -> Dict[str, object]:
    """Every tensor of the folder (``shapes_only``: its shape only); ValueError if damaged or a shard lies outside."""
    hf_dir = Path(hf_dir)
    kind, files = _weight_files(hf_dir)
    out: Dict[str, object] = {}
    try:
        for path in files:
            if kind == "safetensors" and shapes_only:
                from safetensors import safe_open
                with safe_open(str(path), framework="pt") as f:
                    out.update({key: tuple(f.get_slice(key).get_shape()) for key in f.keys()})
            elif kind == "safetensors":
                out.update(load_safetensors(path))
            else:
                check_intact(path)
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=shapes_only)
                out.update({key: tuple(value.shape) for key, value in state.items()} if shapes_only else state)
    except CorruptCheckpointError:
        raise  # one line naming the file and the fix already
    except Exception as error:  # safetensors' SafetensorError, pickle errors, a truncated file
        first_line = (str(error).strip().splitlines() or [""])[0]
        raise ValueError(f"the weights of {str(hf_dir)!r} do not load ({type(error).__name__}: {first_line}): "
                         "a damaged or incomplete folder: download the folder again") from error
    return out


def load_safetensors(path: Path) -> Dict[str, Tensor]:
    from safetensors.torch import load_file
    return load_file(str(path))


def check_sizes(config: Mapping, shapes: Mapping[str, Tuple[int, ...]], sizes: Mapping[str, Tuple[object, int]],
                layer_counts: Mapping[str, str], integers: Tuple[str, ...], hf_dir: Path) -> None:
    """One ValueError naming each size of ``config`` missing, not an integer in 1 .. MAX_SIZE, or not the tensors'."""
    problems = []
    values: Dict[str, int] = {}
    for name in (*sizes, *layer_counts, *integers):
        value = config.get(name)
        if value is None:
            problems.append(f"it lacks {name}")
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not 1 <= value <= MAX_SIZE \
                or value != int(value):  # the range first: NaN and infinity fail it, and int() of them raises
            problems.append(f"{name} = {value!r} is not a whole number from 1 to {MAX_SIZE}")
        else:
            values[name] = int(value)
    for name, prefix in layer_counts.items():
        pattern = re.compile(re.escape(prefix) + r"(\d+)\.")
        indices = sorted({int(m.group(1)) for key in shapes for m in [pattern.match(key)] if m})
        if name in values and values[name] != len(indices):
            want, count = values[name], len(indices)
            missing = f"; missing {prefix}{count}.*" if want > count and indices == list(range(count)) else ""
            problems.append(f"{name} = {want} but the tensors hold {count} layers ({prefix}N.*){missing}")
    for name, (names, dim) in sizes.items():
        if name not in values:
            continue
        names = (names,) if isinstance(names, str) else tuple(names)
        key = next((k for k in names if k in shapes), names[0])
        if key not in shapes or len(shapes[key]) <= dim:
            problems.append(f"{name}: the tensor {key} that holds it is missing")
        elif shapes[key][dim] != values[name]:
            problems.append(f"{name} = {values[name]} but {key} has {shapes[key][dim]} (dimension {dim})")
    if problems:
        raise ValueError(f"{str(Path(hf_dir) / 'config.json')!r} does not describe the folder's tensors, nothing "
                         "was written: " + "; ".join(problems) + " (a damaged or mismatched config.json: download "
                         "the folder again)")


def hf_special_ids(hf_dir) -> Dict[str, int]:
    """Token text -> id of the tokenizer's added tokens (tokenizer.json's over tokenizer_config.json's)."""
    out: Dict[str, int] = {}
    for name, where, kind in (("tokenizer_config.json", "added_tokens_decoder", dict),
                              ("tokenizer.json", "added_tokens", list)):
        path = Path(hf_dir) / name
        if not path.is_file():
            continue
        data = _read_json(path, DAMAGED_TOKENIZER)
        value = data.get(where, kind()) if isinstance(data, dict) else None
        value = (value or {}) if kind is dict else value
        if not isinstance(value, kind):
            raise ValueError(f"{str(path)!r}: {where} is not {'a list' if kind is list else 'an object'}: a damaged "
                             f"tokenizer file ({DAMAGED_TOKENIZER.lower()})")
        entries = [(int(k) if str(k).isdigit() else k, t) for k, t in value.items()] if kind is dict else \
            [(t.get("id") if isinstance(t, dict) else k, t) for k, t in enumerate(value)]
        pairs = []
        for index, token in entries:
            if not isinstance(token, dict) or not isinstance(token.get("content"), str) \
                    or isinstance(index, bool) or not isinstance(index, int):
                raise ValueError(f"{str(path)!r}: {where}[{index!r}] has no 'content' text and integer id: a damaged "
                                 f"tokenizer file ({DAMAGED_TOKENIZER.lower()})")
            pairs.append((token["content"], index))
        out.update(dict(reversed(pairs)) if kind is dict else dict(pairs))
    return out


def folder_dictionary(hf_dir: Path, vocab: int, mask_last: Optional[bool], dict_txt: Path, warnings: List[str],
                      placeholder_mask: Optional[bool] = None):
    """(Dictionary, its source), written to ``dict_txt``: the export's copy if it fits, else sentencepiece pieces or
    placeholders; ``mask_last``: the task appends <mask> (None: as the copy says, else ``placeholder_mask``)."""
    source, append_mask = "placeholders", bool(mask_last)
    if (hf_dir / DICT_COPY).is_file():
        copied = Dictionary.load(str(hf_dir / DICT_COPY))
        whole = len(copied) == vocab and (not mask_last or copied.indices.get("<mask>") == vocab - 1)
        short = len(copied) + 1 == vocab and mask_last is not False and "<mask>" not in copied.indices
        if whole or short:
            dict_txt.write_bytes((hf_dir / DICT_COPY).read_bytes())
            source, append_mask = DICT_COPY, short
        else:
            warnings.append(f"{DICT_COPY} gives {len(copied)} symbols for {vocab} embedding rows: ignored, "
                            "placeholders written instead")
    if source == "placeholders":
        append_mask = bool(mask_last) if placeholder_mask is None else placeholder_mask
        pieces = unigram_pieces(hf_dir)
        known, taken = pieces or [], {"<s>", "<pad>", "</s>", "<unk>"}
        with open(dict_txt, "w", encoding="utf-8") as f:  # HF id k's piece (fairseq id == HF id), or hf:k
            for index in range(4, vocab - append_mask):  # where it has none or one fairseq cannot take
                piece = known[index] if index < len(known) else ""
                if not piece or piece in taken or any(c.isspace() for c in piece):
                    piece = PLACEHOLDER.format(index)
                taken.add(piece)
                f.write(f"{piece} 0\n")
        if pieces is not None:  # a sentencepiece vocabulary (XLM-R, CamemBERT): its pieces, by HF id
            source = "tokenizer.json"
    dictionary = Dictionary.load(str(dict_txt))
    if append_mask:
        dictionary.add_symbol("<mask>")
    assert len(dictionary) == vocab, (len(dictionary), vocab)
    return dictionary, source


def unigram_pieces(hf_dir: Path) -> Optional[List[str]]:
    """The pieces of a sentencepiece (Unigram) tokenizer.json by HF id; None for another tokenizer or none."""
    path = hf_dir / "tokenizer.json"
    if not path.is_file():
        return None
    data = _read_json(path, DAMAGED_TOKENIZER)
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) and model.get("type") == "Unigram" else None
    if not isinstance(vocab, list) or not all(isinstance(e, list) and e and isinstance(e[0], str) for e in vocab):
        return None
    return [entry[0] for entry in vocab]
