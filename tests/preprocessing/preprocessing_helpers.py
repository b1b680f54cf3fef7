"""Helpers of the preprocessing tests: a tiny GPT-2 BPE, corpus writers, output readers."""
from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
import random
from typing import Dict, List

# The bundled corpus (public domain), real text for the tests.
KJV_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "data", "kjv")

# Words used to make deterministic fake text.
WORDS = (
    "the and of to in that he shall unto for his a they be is him not them it with all thou "
    "thy was god which my me said but ye their have will lord king israel upon son land people "
    "house day out when there were men went came before hand children one out against"
).split()


def make_gpt2_files(folder) -> Dict[str, str]:
    """A tiny byte-level GPT-2 BPE: the 256 byte symbols plus a few merges."""
    from fairseq.data.encoders.gpt2_bpe_utils import bytes_to_unicode

    symbols = list(bytes_to_unicode().values())
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "a"), ("e", "r"),
              ("o", "u"), ("Ġ", "s"), ("a", "n"), ("Ġa", "n"), ("Ġan", "d"), ("Ġ", "o"),
              ("Ġo", "f"), ("o", "r"), ("Ġ", "h"), ("Ġh", "e")]
    vocab = symbols + ["".join(m) for m in merges] + ["<|endoftext|>"]
    encoder = {tok: i for i, tok in enumerate(vocab)}
    os.makedirs(folder, exist_ok=True)
    enc_path = os.path.join(folder, "encoder.json")
    bpe_path = os.path.join(folder, "vocab.bpe")
    with open(enc_path, "w", encoding="utf-8") as f:
        json.dump(encoder, f, ensure_ascii=False)
    with open(bpe_path, "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")
        for a, b in merges:
            f.write(f"{a} {b}\n")
    return {"encoder_json": enc_path, "vocab_bpe": bpe_path}


def fake_text(rng: random.Random, n_words: int, tag: str = "") -> str:
    words = [rng.choice(WORDS) for _ in range(n_words)]
    if tag:
        words.insert(0, tag)
    out, line = [], []
    for w in words:
        line.append(w)
        if rng.random() < 0.08:
            out.append(" ".join(line).capitalize() + ".")
            line = []
    if line:
        out.append(" ".join(line).capitalize() + ".")
    return " ".join(out)


def write_text(path: str, text: str) -> str:
    """Write UTF-8 text, compressed according to the extension."""
    data = text.encode("utf-8")
    write_bytes(path, data)
    return path


def write_bytes(path: str, data: bytes, compress: bool = True) -> str:
    """Write bytes, compressed according to the extension unless ``compress`` is False (to
    make corrupt archives)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    if not compress:
        with open(path, "wb") as f:
            f.write(data)
    elif path.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(data)
    elif path.endswith(".xz"):
        with lzma.open(path, "wb") as f:
            f.write(data)
    elif path.endswith(".bz2"):
        with bz2.open(path, "wb") as f:
            f.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
    return path


def write_jsonl(path: str, records: List[dict]) -> str:
    return write_text(path, "".join(json.dumps(r) + "\n" for r in records))


def read_split(destdir: str, split: str) -> List[List[int]]:
    """Items of a split, as fairseq loads them (lists of dictionary indices)."""
    from fairseq.data import indexed_dataset

    ds = indexed_dataset.MMapIndexedDataset(os.path.join(destdir, split))
    return [ds[i].tolist() for i in range(len(ds))]


def split_documents(items: List[List[int]], eos: int = 2) -> List[List[List[int]]]:
    """Group items into documents at the empty items (just </s>)."""
    docs, cur = [], []
    for item in items:
        if item == [eos]:
            docs.append(cur)
            cur = []
        else:
            cur.append(item)
    assert cur == [], "the last document must end with a separator"
    return docs


def decode_gpt2_documents(destdir: str, split: str, gpt2_files) -> List[List[str]]:
    """Documents of a split decoded back to text lines (dict.txt without --srcdict: index = 4 + BPE id)."""
    from fairseq.data.encoders.gpt2_bpe_utils import get_encoder

    bpe = get_encoder(gpt2_files["encoder_json"], gpt2_files["vocab_bpe"])
    docs = split_documents(read_split(destdir, split))
    return [[bpe.decode([t - 4 for t in item[:-1]]) for item in doc] for doc in docs]


def output_bytes(destdir: str) -> Dict[str, bytes]:
    names = ["train.bin", "train.idx", "valid.bin", "valid.idx", "test.bin", "test.idx", "dict.txt", "stats.json", "stats.md"]
    if os.path.exists(os.path.join(destdir, "spm.model")):
        names.append("spm.model")
    out = {}
    for n in names:
        with open(os.path.join(destdir, n), "rb") as f:
            out[n] = f.read()
    return out
