"""Reading a Hugging Face model folder for the import (``hf_import``), treating every file in it
as data from someone else:

* ``read_hf_config``: config.json, a JSON object;
* ``tensor_shapes`` / ``load_hf_state_dict``: the tensors of model.safetensors (possibly sharded,
  with every shard named in ``*.index.json`` resolving inside the folder) or pytorch_model.bin,
  whose CRCs are checked first (``checkpoints.check_intact``; safetensors has no checksum, so a
  flipped bit in its tensor data cannot be seen, only a damaged header);
* ``check_sizes``: the config's sizes against the tensors' names and shapes, BEFORE anything is
  built or sized from the config (a 300-byte config.json saying ``num_hidden_layers: 3e7`` is
  one error, not gigabytes of key maps);
* ``hf_special_ids``: where the folder's tokenizer puts its special tokens;
* ``folder_dictionary``: the fairseq dict.txt for HF ids, from the export's dictionary copy or
  placeholders.

Errors are one line naming the file and what to do.
"""
import json
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import torch
from torch import Tensor

from ..runtime.checkpoints import CorruptCheckpointError, check_intact
from .rules import DICT_COPY, PLACEHOLDER, write_placeholders

# The largest size a config.json may state (2**31: more than any real model has rows, layers or
# widths); sizes are checked against the tensors too, this only keeps the message sane.
MAX_SIZE = 2 ** 31
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin.index.json",
                "pytorch_model.bin")
# Files of a HF tokenizer, copied into the import's output (OUTDIR/hf_tokenizer/).
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json",
                      "merges.txt", "sentencepiece.bpe.model", "spiece.model", "tokenizer.model",
                      "added_tokens.json")


def _read_json(path: Path, what: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
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


# ----------------------------------------------------------------------------------------------
# tensors


def _shard_files(hf_dir: Path, index_name: str) -> List[Path]:
    """The shards an index names, each checked to resolve inside ``hf_dir``."""
    index = _read_json(hf_dir / index_name, "Download the folder again.")
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ValueError(f"{str(hf_dir / index_name)!r} has no weight_map of file names: a damaged folder? "
                         "Download the folder again.")
    root = hf_dir.resolve()
    shards = []
    for name in sorted(set(weight_map.values())):
        path = (hf_dir / name).resolve()
        if path.parent != root and root not in path.parents:
            raise ValueError(f"{str(hf_dir / index_name)!r} names the shard {name!r}, which is outside the folder: "
                             "shards must be files inside the model folder")
        shards.append(hf_dir / name)
    return shards


def _weights(hf_dir: Path) -> Tuple[str, List[Path]]:
    """('safetensors' | 'torch', the weight files) of a folder."""
    if (hf_dir / "model.safetensors").is_file():
        return "safetensors", [hf_dir / "model.safetensors"]
    if (hf_dir / "model.safetensors.index.json").is_file():
        return "safetensors", _shard_files(hf_dir, "model.safetensors.index.json")
    if (hf_dir / "pytorch_model.bin.index.json").is_file():
        return "torch", _shard_files(hf_dir, "pytorch_model.bin.index.json")
    if (hf_dir / "pytorch_model.bin").is_file():
        return "torch", [hf_dir / "pytorch_model.bin"]
    raise FileNotFoundError(f"{str(hf_dir)!r} has no model.safetensors or pytorch_model.bin")


def _damaged(hf_dir, error: Exception) -> ValueError:
    first_line = (str(error).strip().splitlines() or [""])[0]
    return ValueError(f"the weights of {str(hf_dir)!r} do not load ({type(error).__name__}: {first_line}): "
                      "a damaged or incomplete folder: download the folder again")


def tensor_shapes(hf_dir) -> Dict[str, Tuple[int, ...]]:
    """HF key -> shape of every tensor in the folder, read from the file headers (safetensors)
    or memory-mapped (pytorch_model.bin): nothing model-sized is loaded."""
    hf_dir = Path(hf_dir)
    kind, files = _weights(hf_dir)
    shapes: Dict[str, Tuple[int, ...]] = {}
    try:
        for path in files:
            if kind == "safetensors":
                from safetensors import safe_open

                with safe_open(str(path), framework="pt") as f:
                    shapes.update({key: tuple(f.get_slice(key).get_shape()) for key in f.keys()})
            else:
                check_intact(path)
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
                shapes.update({key: tuple(value.shape) for key, value in state.items()})
    except CorruptCheckpointError:
        raise  # one line naming the file and the fix already
    except Exception as error:  # safetensors' SafetensorError, pickle errors, a truncated file
        raise _damaged(hf_dir, error) from error
    return shapes


def load_hf_state_dict(hf_dir) -> Dict[str, Tensor]:
    """The tensors of a HF folder; a file that does not load is a ValueError naming it."""
    hf_dir = Path(hf_dir)
    kind, files = _weights(hf_dir)
    state: Dict[str, Tensor] = {}
    try:
        for path in files:
            if kind == "safetensors":
                from safetensors.torch import load_file

                state.update(load_file(str(path)))
            else:
                check_intact(path)
                state.update(torch.load(path, map_location="cpu", weights_only=True))
    except CorruptCheckpointError:
        raise
    except Exception as error:
        raise _damaged(hf_dir, error) from error
    return state


def _layer_count(shapes: Mapping[str, Tuple[int, ...]], prefix: str) -> Tuple[int, List[int]]:
    pattern = re.compile(re.escape(prefix) + r"(\d+)\.")
    indices = sorted({int(m.group(1)) for key in shapes for m in [pattern.match(key)] if m})
    return len(indices), indices


def check_sizes(config: Mapping, shapes: Mapping[str, Tuple[int, ...]], sizes: Mapping[str, Tuple[object, int]],
                layer_counts: Mapping[str, str], integers: Tuple[str, ...], hf_dir: Path) -> None:
    """Raise one ValueError naming every size of ``config`` that is missing, not a whole number,
    or not what the tensors hold. ``sizes``: config entry -> (tensor, or a tuple of names the
    tensor may have, dim) holding the same number; ``layer_counts``: config entry -> key prefix of its numbered layers; ``integers``:
    more entries that must be whole numbers in 1 .. MAX_SIZE."""
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
        count, indices = _layer_count(shapes, prefix)
        if name in values and values[name] != count:
            want = values[name]
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
        raise ValueError(f"{str(Path(hf_dir) / 'config.json')!r} does not describe the folder's tensors, nothing was written: "
                         + "; ".join(problems) + " (a damaged or mismatched config.json: download the folder again)")


# ----------------------------------------------------------------------------------------------
# tokenizer and dictionary


def hf_special_ids(hf_dir) -> Dict[str, int]:
    """Token text -> id for the tokenizer's added/special tokens, when the folder has a tokenizer."""
    hf_dir = Path(hf_dir)
    ids: Dict[str, int] = {}

    def take(path: Path, entries, where: str, setdefault: bool):
        for index, token in entries:
            if not isinstance(token, dict) or not isinstance(token.get("content"), str) \
                    or isinstance(index, bool) or not isinstance(index, int):
                raise ValueError(f"{str(path)!r}: {where}[{index!r}] has no 'content' text and integer id: a damaged "
                                 f"tokenizer file (remove it, or download the folder again)")
            if setdefault:
                ids.setdefault(token["content"], index)
            else:
                ids[token["content"]] = index

    if (hf_dir / "tokenizer.json").is_file():
        data = _read_json(hf_dir / "tokenizer.json", "Remove it, or download the folder again.")
        added = data.get("added_tokens", []) if isinstance(data, dict) else None
        if not isinstance(added, list):
            raise ValueError(f"{str(hf_dir / 'tokenizer.json')!r}: added_tokens is not a list: a damaged tokenizer "
                             "file (remove it, or download the folder again)")
        take(hf_dir / "tokenizer.json", [(t.get("id") if isinstance(t, dict) else k, t) for k, t in enumerate(added)],
             "added_tokens", setdefault=False)
    if (hf_dir / "tokenizer_config.json").is_file():
        data = _read_json(hf_dir / "tokenizer_config.json", "Remove it, or download the folder again.")
        decoder = (data.get("added_tokens_decoder") if isinstance(data, dict) else None) or {}
        if not isinstance(decoder, dict):
            raise ValueError(f"{str(hf_dir / 'tokenizer_config.json')!r}: added_tokens_decoder is not an object: "
                             "a damaged tokenizer file (remove it, or download the folder again)")
        entries = [(int(k) if str(k).isdigit() else k, t) for k, t in decoder.items()]
        take(hf_dir / "tokenizer_config.json", entries, "added_tokens_decoder", setdefault=True)
    return ids


def folder_dictionary(hf_dir: Path, vocab: int, mask_last: Optional[bool], dict_txt: Path, warnings: List[str],
                      placeholder_mask: Optional[bool] = None):
    """(fairseq Dictionary of ``vocab`` symbols, where it came from), its dict.txt written to
    ``dict_txt``: the export's dictionary copy when it fits the table, else placeholders (HF id k
    at line k - 4). ``mask_last``: whether the table's last row is ``<mask>``, appended by the
    fairseq task rather than read from dict.txt (True: a masked LM; None: as the copy's length
    says; placeholders then follow ``placeholder_mask``)."""
    from fairseq.data import Dictionary

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
        if pieces is not None:  # a sentencepiece vocabulary (XLM-R, CamemBERT): its pieces, by HF id
            write_symbols(dict_txt, pieces, 4, vocab - append_mask)
            source = "tokenizer.json"
        else:
            write_placeholders(dict_txt, 4, vocab - append_mask)
    dictionary = Dictionary.load(str(dict_txt))
    if append_mask:
        dictionary.add_symbol("<mask>")
    assert len(dictionary) == vocab, (len(dictionary), vocab)
    return dictionary, source


def unigram_pieces(hf_dir: Path) -> Optional[List[str]]:
    """The pieces of the folder's sentencepiece (Unigram) tokenizer in HF id order, read from
    tokenizer.json (transformers' XLM-R and CamemBERT tokenizers write one); None for another
    tokenizer (GPT-2 BPE: RoBERTa's dict.txt symbols are GPT-2 ids, not pieces) or none."""
    path = hf_dir / "tokenizer.json"
    if not path.is_file():
        return None
    data = _read_json(path, "Remove it, or download the folder again.")
    model = data.get("model") if isinstance(data, dict) else None
    vocab = model.get("vocab") if isinstance(model, dict) and model.get("type") == "Unigram" else None
    if not isinstance(vocab, list) or not all(isinstance(e, list) and e and isinstance(e[0], str) for e in vocab):
        return None
    return [entry[0] for entry in vocab]


def write_symbols(path: Path, pieces: List[str], first: int, end: int) -> None:
    """dict.txt for HF ids ``first`` .. ``end - 1``: the piece of each id, so that
    ``longformer-preprocess --sentencepiece-model ... --srcdict`` finds fairseq id == HF id; an id
    without a piece, or whose piece cannot be a fairseq symbol (fairseq's own specials, text with
    whitespace, a repeat), gets the placeholder ``hf:k``."""
    taken = {"<s>", "<pad>", "</s>", "<unk>"}
    with open(path, "w", encoding="utf-8") as f:
        for index in range(first, end):
            piece = pieces[index] if index < len(pieces) else ""
            if not piece or piece in taken or any(c.isspace() for c in piece):
                piece = PLACEHOLDER.format(index)
            taken.add(piece)
            f.write(f"{piece} 0\n")


def placeholder_warning() -> str:
    return (f"dict.txt lists placeholders ({PLACEHOLDER.format('k')} for id k): binarize data with the tokenizer "
            "the model came with (copied to hf_tokenizer/)")


def tokenizer_files(hf_dir: Path) -> List[str]:
    return [name for name in HF_TOKENIZER_FILES if (hf_dir / name).is_file()]


def copy_tokenizer(hf_dir: Path, names: List[str], out: Path) -> None:
    """The folder's tokenizer files, into ``out/hf_tokenizer/``."""
    import shutil

    if names:
        (out / "hf_tokenizer").mkdir()
        for name in names:
            shutil.copyfile(hf_dir / name, out / "hf_tokenizer" / name)


def optional_int(config: Mapping, name: str, default: Optional[int]) -> Optional[int]:
    value = config.get(name, default)
    return None if value is None else int(value)
