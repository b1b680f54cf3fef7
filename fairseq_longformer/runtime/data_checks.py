"""A run's data split checked before fairseq reads it: a missing, empty or truncated split, and
binaries holding ids the dictionary lacks (``indexed_dataset``'s MMIDIDX index read directly, no
fairseq load). fairseq fails on each deep inside (``FileNotFoundError: Dataset not found``,
``StopIteration``, numpy's mmap error, ``IndexError: index out of range in self``); here each is
one ``UserInputError`` line naming the file and the fix (called from ``input_checks``).
"""
import struct
from pathlib import Path
from typing import List

import numpy as np

from .errors import UserInputError

_MMAP_MAGIC = b"MMIDIDX\x00\x00"

_DTYPES = {1: np.uint8, 2: np.int8, 3: np.int16, 4: np.int32, 5: np.int64, 6: np.float64, 7: np.float32,
           8: np.uint16}


# ids beyond the dictionary are looked for in this many tokens at the start and end of a split
# (the whole of a corpus of today's sizes; a bounded read for a very large one)
ID_SCAN_TOKENS = 1 << 24


def _read_index(idx: Path):
    """(dtype, sizes, pointers) of fairseq's mmap index, None for the legacy ``TNTIDX`` formats
    (``--dataset-impl lazy/cached``: left to fairseq), or a reason it cannot be either."""
    data = idx.read_bytes()
    if data.startswith(b"TNTIDX"):
        return None
    head = len(_MMAP_MAGIC) + 8 + 1 + 8  # magic, version, dtype code, count (fairseq's Index)
    if len(data) < head or not data.startswith(_MMAP_MAGIC):
        return f"{idx.name} is not a fairseq mmap index (shorter than its header or another format)"
    _version, code, count = struct.unpack("<QBQ", data[len(_MMAP_MAGIC):head])
    if code not in _DTYPES:
        return f"{idx.name} names an unknown token type {code}"
    if len(data) < head + count * 12:
        return f"{idx.name} is truncated ({len(data)} bytes for {count:,} sequences)"
    sizes = np.frombuffer(data, np.int32, count, head)
    pointers = np.frombuffer(data, np.int64, count, head + count * 4)
    return _DTYPES[code], sizes, pointers


def _prefixes(data: Path, split: str) -> List[Path]:
    """The binaries of ``split`` in ``data`` and one level below (input0/, label/, ...)."""
    found = []
    for folder in [data, *sorted(p for p in data.iterdir() if p.is_dir())]:
        for name in ("", *sorted({p.name[len(split):-4] for p in folder.glob(f"{split}.*.idx")})):
            if (folder / f"{split}{name}.idx").exists() or (folder / f"{split}{name}.bin").exists():
                found.append(folder / f"{split}{name}")
    return found


def check_split(data_path: str, split: str, dictionary, disable_hint: str) -> None:
    """Raise UserInputError for a split the task cannot train or validate on. ``dictionary``: the
    task's (ids in the top-level binaries must be below its length); ``disable_hint``: the flag
    that runs without this split. A data folder without fairseq binaries at all is left to the
    task (another dataset format)."""
    data = Path(data_path.split(":")[0])
    if not data.is_dir() or not any(data.glob("*.idx")) and not any(data.glob("*/*.idx")):
        return
    prefixes = _prefixes(data, split)
    if not prefixes:
        raise UserInputError(f"{data}: no {split} split ({split}.bin/{split}.idx); binarize one (longformer-preprocess "
                             f"--valid-docs N, fairseq-preprocess --validpref) or {disable_hint}")
    total = 0
    for prefix in prefixes:
        idx, binary = prefix.with_name(prefix.name + ".idx"), prefix.with_name(prefix.name + ".bin")
        if not idx.exists() or not binary.exists():
            have, lack = (idx, binary) if idx.exists() else (binary, idx)
            raise UserInputError(f"{have}: {lack.name} is missing beside it (a copy cut short?); binarize the "
                                 f"{split} split again")
        index = _read_index(idx)
        if isinstance(index, str):
            raise UserInputError(f"{idx}: {index}; binarize the {split} split again")
        if index is None:
            return
        dtype, sizes, pointers = index
        total += len(sizes)
        expected = int(pointers[-1]) + int(sizes[-1]) * np.dtype(dtype).itemsize if len(sizes) else 0
        if binary.stat().st_size != expected:
            raise UserInputError(f"{binary}: {binary.stat().st_size:,} bytes where its index {idx.name} needs "
                                 f"{expected:,} (truncated, or from another binarization); binarize the {split} "
                                 "split again")
        if prefix == data / split and dictionary is not None and len(sizes):  # one-dictionary layouts only
            tokens = np.memmap(binary, dtype=dtype, mode="r")
            seen = max(int(tokens[:ID_SCAN_TOKENS].max()), int(tokens[-ID_SCAN_TOKENS:].max()))
            if seen >= len(dictionary):
                raise UserInputError(f"{binary} holds token id {seen} but {data / 'dict.txt'} gives a dictionary of "
                                     f"{len(dictionary)} symbols: the binaries and the dictionary disagree; use the "
                                     "dict.txt the data was binarized with (or binarize it again with --srcdict)")
    if total == 0:
        raise UserInputError(f"{data}: the {split} split is empty (0 sequences; e.g. preprocessed with --valid-docs 0 "
                             f"or from too small a corpus); binarize a non-empty one or {disable_hint}")
