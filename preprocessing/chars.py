"""``longformer-preprocess-chars``: character-level corpora as fairseq binaries (the char-LM's data).

    longformer-preprocess-chars --format enwik8 enwik8.zip --destdir data-bin/enwik8
    longformer-preprocess-chars --format text8 text8.zip --destdir data-bin/text8
    longformer-preprocess-chars --format chars data/kjv/*.txt --destdir data-bin/kjv-chars

Formats:
    enwik8  raw bytes, each byte one token (256 symbols, "0" .. "255"); the standard split: the
            first 90M bytes train, the next 5M valid, the last 5M test (Transformer-XL's
            prep_enwik8.py). One input file of 100,000,000 bytes (or its .zip).
    text8   characters a-z and space (27 symbols); the same 90M/5M/5M split. One input file of
            100,000,000 characters (or its .zip).
    bytes   any files as raw bytes;   chars   any UTF-8 text files, one token per character.
            Valid and test are the last --valid-size / --test-size units (default 5% each).
enwik8 and text8 refuse an input of another size unless both split sizes are given.

The corpus is the input files (documents) one after another; valid and test are cut from its
end (test last), in units (bytes or characters). Each split holds the pieces of the documents
that fall in it, one fairseq item per piece, each followed by ``</s>`` (end of document or of a
piece). So a split of n units is n + (pieces) tokens, every unit is a token of its own, newlines
included, and bits per token over a split is bits per character with the end-of-piece tokens
counted as characters (one per split for enwik8 and text8). The char-LM trains on these with
``--task language_modeling --sample-break-mode none``, which cuts the token stream into blocks
regardless of items; ``complete``/``eos`` break modes do not suit items millions of tokens long.

Symbols (``dict.txt``, fairseq's format "symbol count"): a byte is its decimal value (as
fairseq's examples/language_model prep_enwik8 writes it); a character is itself, except
whitespace and unprintable characters (which fairseq's dictionary and tokenizer cannot hold),
written ``<U+XXXX>`` (e.g. a space is ``<U+0020>``, a newline ``<U+000A>``). Every byte value is
in an enwik8/bytes dictionary; every character of the input (all splits, as Transformer-XL
counts its vocabulary) is in a chars/text8 one, so no split has an ``<unk>``. The files are
exactly what ``fairseq-preprocess --only-source --srcdict dict.txt`` makes of one line per item,
the symbols separated by spaces (the tests check this), written directly because the
space-separated text of enwik8 would be 300 MB.

Output: ``dict.txt``, ``{train,valid,test}.{bin,idx}`` and ``chars.json`` (format, unit, split
sizes, and the unigram bits per character of valid and test under train's add-one smoothed
unigram distribution: the baseline a character LM must beat). ``decode_split`` reads a split
back to bytes or text.
"""
from __future__ import annotations

import argparse
import json
import lzma
import os
import sys
import zipfile
import zlib
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from longformer_common.cli import one_line_errors
from longformer_common.atomic import check_output_dir, staged_folder

from .textio import open_binary

FORMATS = ("enwik8", "text8", "bytes", "chars")
STANDARD_UNITS = 100_000_000  # enwik8 (bytes) and text8 (characters)
STANDARD_HELDOUT = 5_000_000  # their valid and test sizes
DEFAULT_FRACTION = 0.05  # valid and test of other corpora
SPLITS = ("train", "valid", "test")
NSPECIAL = 4  # fairseq's Dictionary: <s>, <pad>, </s>, <unk>
EOS = 2
CHUNK = 1 << 24  # units per write: bounds the memory of the id arrays


class CharDataError(ValueError):
    """Bad input to the character preprocessing: the message names the problem and the fix."""


def unit_kind(fmt: str) -> str:
    """'bytes' or 'chars': what one token is in ``fmt``."""
    return "bytes" if fmt in ("enwik8", "bytes") else "chars"


def symbol_of(unit: int, kind: str) -> str:
    """The dictionary symbol of a byte value or a code point."""
    if kind == "bytes":
        return str(unit)
    char = chr(unit)
    # fairseq splits lines on whitespace and reads dict.txt line by line (universal newlines):
    # such characters cannot be symbols as they are
    return f"<U+{unit:04X}>" if char.isspace() or not char.isprintable() else char


def unit_of(symbol: str, kind: str) -> int:
    """Inverse of ``symbol_of``."""
    if kind == "bytes":
        return int(symbol)
    if len(symbol) > 1 and symbol.startswith("<U+") and symbol.endswith(">"):
        return int(symbol[3:-1], 16)
    return ord(symbol)


def _read_bytes(path: str) -> bytes:
    """The file's bytes; a .zip must hold exactly one file (enwik8.zip, text8.zip do); .gz, .xz
    and .bz2 are decompressed."""
    if not os.path.isfile(path):
        raise CharDataError(f"input {path!r} does not exist or is not a file")
    try:
        return _read_archive_or_file(path)
    except (OSError, EOFError, zipfile.BadZipFile, lzma.LZMAError, zlib.error) as err:
        # a .zip/.gz/.xz/.bz2 that is not one (or is cut short): name it instead of a traceback
        raise CharDataError(f"{path}: cannot read it ({type(err).__name__}: {err}); pass the uncompressed "
                            "file, or an archive that is complete and of the kind its name says") from None


def _read_archive_or_file(path: str) -> bytes:
    if path.lower().endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.infolist() if not m.is_dir()]
            if len(members) != 1:
                raise CharDataError(f"{path}: a .zip input must hold exactly one file, it holds "
                                    f"{len(members)}: unpack it and pass the file")
            return archive.read(members[0])
    with open_binary(path) as f:
        return f.read()


def read_units(path: str, kind: str) -> np.ndarray:
    """The file as units: uint8 bytes, or code points (uint8 when the text is ASCII, else uint32)."""
    data = _read_bytes(path)
    if kind == "bytes" or data.isascii():
        return np.frombuffer(data, dtype=np.uint8)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CharDataError(f"{path}: not UTF-8 text (byte {err.start}: {data[err.start:err.start + 4]!r}); "
                            "prepare binary data with --format bytes") from None
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


@dataclass(frozen=True)
class Alphabet:
    """The dictionary: units in dictionary order (most frequent first, ties by unit) and counts.

    Token id of ``units[i]`` is NSPECIAL + i, as fairseq's Dictionary numbers the symbols of a
    dict.txt after its four specials.
    """

    kind: str
    units: np.ndarray  # (V,) int64, dictionary order
    counts: np.ndarray  # (V,) int64

    @classmethod
    def count(cls, documents: Sequence[np.ndarray], kind: str) -> "Alphabet":
        if kind == "bytes":
            counts = sum(np.bincount(d, minlength=256).astype(np.int64) for d in documents)
            units = np.arange(256)  # every byte value, seen or not
        else:
            tallies: Dict[int, int] = {}
            for d in documents:
                values, n = np.unique(d, return_counts=True)
                for u, c in zip(values.tolist(), n.tolist()):
                    tallies[u] = tallies.get(u, 0) + c
            units = np.array(sorted(tallies), dtype=np.int64)
            counts = np.array([tallies[u] for u in units.tolist()], dtype=np.int64)
        order = np.lexsort((units, -counts))  # most frequent first, then by unit
        return cls(kind, units[order].astype(np.int64), counts[order])

    def symbols(self) -> List[str]:
        return [symbol_of(u, self.kind) for u in self.units.tolist()]

    def encode(self, units: np.ndarray) -> np.ndarray:
        """(n,) units -> (n,) int64 token ids. Every unit must be in the alphabet."""
        by_unit = np.argsort(self.units)
        sorted_units = self.units[by_unit]
        where = np.searchsorted(sorted_units, units).clip(max=len(sorted_units) - 1)
        if not np.array_equal(sorted_units[where], units):
            raise AssertionError("a unit outside the alphabet")  # the alphabet counts every input
        return by_unit[where] + NSPECIAL


def parse_size(text: str, total: int, name: str) -> int:
    """'5000000' (units) or '0.05' (a fraction of the corpus) -> units."""
    try:
        value = float(text)
    except ValueError:
        raise CharDataError(f"{name} must be a number of units (5000000) or a fraction (0.05), got {text!r}") from None
    if value < 0 or (value != int(value) and not 0 < value < 1):
        raise CharDataError(f"{name} must be a whole number >= 0 or a fraction in (0, 1), got {text!r}")
    return int(value) if value >= 1 or value == 0 else int(round(value * total))


def split_sizes(fmt: str, total: int, valid: Optional[str], test: Optional[str]) -> Tuple[int, int, int]:
    """(train, valid, test) in units, with the checks of the standard corpora."""
    if fmt in ("enwik8", "text8"):
        unit = "bytes" if fmt == "enwik8" else "characters"
        if total != STANDARD_UNITS and (valid is None or test is None):
            raise CharDataError(
                f"{fmt} is {STANDARD_UNITS:,} {unit}, the input has {total:,}: pass the original file "
                f"(or its .zip), or give both --valid-size and --test-size for another corpus")
        default = str(STANDARD_HELDOUT)
    else:
        default = str(DEFAULT_FRACTION)
    n_valid = parse_size(valid or default, total, "--valid-size")
    n_test = parse_size(test or default, total, "--test-size")
    if n_valid + n_test >= total:
        raise CharDataError(f"--valid-size ({n_valid:,}) + --test-size ({n_test:,}) leave no training data: "
                            f"the input has {total:,} units")
    return total - n_valid - n_test, n_valid, n_test


def check_text8(units: np.ndarray, path: str) -> None:
    allowed = np.zeros(256, dtype=bool)
    allowed[[ord(" ")] + list(range(ord("a"), ord("z") + 1))] = True
    # non-ASCII text comes as uint32 code points (read_units), never allowed
    bad = np.flatnonzero(units > 127) if units.dtype != np.uint8 else np.flatnonzero(~allowed[units])
    if bad.size:
        raise CharDataError(f"{path}: text8 holds only a-z and space, found {chr(int(units[bad[0]]))!r} at "
                            f"character {int(bad[0]):,}; use --format chars for other text")


def split_pieces(lengths: Sequence[int], sizes: Tuple[int, int, int]) -> Dict[str, List[Tuple[int, int, int]]]:
    """The document pieces of each split: (document, start, end) in the document's units."""
    bounds = np.cumsum([0, *sizes])
    pieces: Dict[str, List[Tuple[int, int, int]]] = {name: [] for name in SPLITS}
    offset = 0
    for doc, length in enumerate(lengths):
        for name, lo, hi in zip(SPLITS, bounds[:-1], bounds[1:]):
            start, end = max(lo, offset), min(hi, offset + length)
            if start < end:
                pieces[name].append((doc, int(start - offset), int(end - offset)))
        offset += length
    return pieces


def write_split(prefix: str, alphabet: Alphabet, documents: Sequence[np.ndarray], pieces, dtype) -> List[int]:
    """``prefix``.bin/.idx in fairseq's mmap format, one item per piece plus its </s>. Returns the
    item sizes."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset  # fairseq only when run (a light CLI)

    sizes = []
    with open(prefix + ".bin", "wb") as out:
        for doc, start, end in pieces:
            for lo in range(start, end, CHUNK):
                out.write(alphabet.encode(documents[doc][lo:min(end, lo + CHUNK)]).astype(dtype).tobytes())
            out.write(np.array([EOS], dtype=dtype).tobytes())
            sizes.append(end - start + 1)
    with MMapIndexedDataset.Index.writer(prefix + ".idx", dtype) as index:
        index.write(sizes)
    return sizes


def unigram_bits(alphabet: Alphabet, train_ids: np.ndarray, split_ids: np.ndarray) -> float:
    """Bits per token of ``split_ids`` under train's unigram distribution, add-one smoothed over
    the symbols and </s> (so a character unseen in train costs finite bits)."""
    vocab = NSPECIAL + len(alphabet.units)
    predicted = np.r_[EOS, NSPECIAL:vocab]  # the tokens a split holds
    counts = np.bincount(train_ids, minlength=vocab)[predicted] + 1.0
    bits = np.full(vocab, np.inf)
    bits[predicted] = -np.log2(counts / counts.sum())
    return float(bits[split_ids].mean())


def text_to_symbols(text: str, kind: str = "chars") -> str:
    """A prompt as the space-separated symbols fairseq's tools read (fairseq-interactive)."""
    units = list(text.encode("utf-8")) if kind == "bytes" else [ord(c) for c in text]
    return " ".join(symbol_of(u, kind) for u in units)


def symbols_to_text(line: str, kind: str = "chars") -> str:
    """fairseq's printed symbols ("T h e <U+0020> ...") back to text; </s> ends a document."""
    units = [unit_of(s, kind) for s in line.split() if s not in ("<s>", "<pad>", "</s>", "<unk>")]
    if kind == "bytes":
        return bytes(units).decode("utf-8", errors="replace")
    return "".join(chr(u) for u in units)


def read_split_ids(prefix: str) -> List[np.ndarray]:
    """The items of a written split, as int64 token ids (fairseq's own reader)."""
    from fairseq.data.indexed_dataset import MMapIndexedDataset  # fairseq only when run (a light CLI)

    dataset = MMapIndexedDataset(prefix)
    return [dataset[i].numpy().astype(np.int64) for i in range(len(dataset))]


def decode_split(destdir: str, split: str):
    """A split read back: bytes (enwik8, bytes) or str (text8, chars): its items without their
    </s>, one after another. The concatenation of train, valid and test is the input."""
    with open(os.path.join(destdir, "chars.json"), encoding="utf-8") as f:
        kind = json.load(f)["unit"]
    with open(os.path.join(destdir, "dict.txt"), encoding="utf-8") as f:
        units = [unit_of(line.rstrip("\n").rsplit(" ", 1)[0], kind) for line in f]
    table = np.array([-1] * NSPECIAL + units, dtype=np.int64)
    items = read_split_ids(os.path.join(destdir, split))
    for item in items:
        if item[-1] != EOS or (item[:-1] < NSPECIAL).any():
            raise CharDataError(f"{destdir}/{split}: an item holds special tokens before its </s>")
    flat = table[np.concatenate([item[:-1] for item in items])] if items else np.array([], np.int64)
    if kind == "bytes":
        return flat.astype(np.uint8).tobytes()
    return flat.astype(np.uint32).tobytes().decode("utf-32-le")


def prepare(fmt: str, inputs: Sequence[str], destdir: str, valid_size: Optional[str] = None,
            test_size: Optional[str] = None, overwrite: bool = False) -> dict:
    """Write the binaries of ``inputs`` into ``destdir``; returns what chars.json records."""
    from fairseq.data.indexed_dataset import best_fitting_int_dtype  # fairseq only when run (a light CLI)

    if fmt not in FORMATS:
        raise CharDataError(f"--format must be one of {FORMATS}, got {fmt!r}")
    if not inputs:
        raise CharDataError("give at least one input file")
    if fmt in ("enwik8", "text8") and len(inputs) != 1:
        raise CharDataError(f"{fmt} is one file, got {len(inputs)} inputs")
    check_output_dir(destdir, overwrite, inputs)  # before reading 100 MB; never over an input
    kind = unit_kind(fmt)
    documents = [read_units(path, kind) for path in inputs]
    if fmt == "text8":
        check_text8(documents[0], inputs[0])
    total = sum(len(d) for d in documents)
    if total == 0:
        raise CharDataError(f"the input ({', '.join(inputs)}) is empty")
    sizes = split_sizes(fmt, total, valid_size, test_size)
    alphabet = Alphabet.count(documents, kind)
    dtype = best_fitting_int_dtype(NSPECIAL + len(alphabet.units))
    pieces = split_pieces([len(d) for d in documents], sizes)

    summary = {"format": fmt, "unit": kind, "inputs": [os.path.abspath(p) for p in inputs],
               "symbols": len(alphabet.units), "splits": {}, "unigram_bits_per_char": {}}
    with staged_folder(destdir, overwrite=overwrite, inputs=inputs) as tmp:
        with open(tmp / "dict.txt", "w", encoding="utf-8") as f:
            for symbol, count in zip(alphabet.symbols(), alphabet.counts.tolist()):
                f.write(f"{symbol} {count}\n")
        for name, units in zip(SPLITS, sizes):
            items = write_split(str(tmp / name), alphabet, documents, pieces[name], dtype)
            summary["splits"][name] = {"units": units, "tokens": int(sum(items)), "items": len(items)}
        train = np.concatenate(read_split_ids(str(tmp / "train")))
        for name in ("valid", "test"):
            if sizes[SPLITS.index(name)]:
                ids = np.concatenate(read_split_ids(str(tmp / name)))
                summary["unigram_bits_per_char"][name] = round(unigram_bits(alphabet, train, ids), 4)
        with open(tmp / "chars.json", "w", encoding="utf-8") as f:
            json.dump(summary, f, indent=2)
    return summary


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="longformer-preprocess-chars",
        description="Character-level corpora (enwik8, text8, any files) as fairseq binaries with a "
                    "character dictionary, for longformer_lm (--task language_modeling).")
    parser.add_argument("inputs", nargs="+", help="input files (enwik8, text8: the one file or its .zip)")
    parser.add_argument("--format", required=True, choices=FORMATS,
                        help="enwik8: bytes, 90M/5M/5M; text8: a-z and space, 90M/5M/5M; "
                             "bytes / chars: any files as bytes / UTF-8 characters")
    parser.add_argument("--destdir", required=True, help="output folder (dict.txt, train/valid/test, chars.json)")
    parser.add_argument("--valid-size", help="valid units (bytes or characters), or a fraction such as 0.05 "
                                             "(default: 5,000,000 for enwik8/text8, else 0.05)")
    parser.add_argument("--test-size", help="test units, or a fraction (defaults as --valid-size)")
    parser.add_argument("--overwrite", action="store_true", help="replace a non-empty --destdir")
    return parser


@one_line_errors
def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        summary = prepare(args.format, args.inputs, args.destdir, args.valid_size, args.test_size, args.overwrite)
    except (ValueError, FileExistsError) as err:  # CharDataError, an output over an input
        print(f"longformer-preprocess-chars: error: {err}", file=sys.stderr)
        return 2
    unit = "bytes" if summary["unit"] == "bytes" else "characters"
    print(f"{summary['format']}: {summary['symbols']} symbols -> {args.destdir}")
    for name, split in summary["splits"].items():
        print(f"  {name:5s} {split['units']:>13,} {unit} {split['tokens']:>13,} tokens ({split['items']} items)")
    for name, bits in summary["unigram_bits_per_char"].items():
        print(f"  unigram baseline, {name}: {bits:.4f} bits per character (train's character frequencies)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

