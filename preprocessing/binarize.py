"""Writing fairseq binaries.

Tokenized documents first go, in input order, to a flat scratch store (raw int32 tokens, item
sizes, one metadata record per document) in the run's temporary folder; only when every
document has been seen are the valid/test documents known (with counts, they are the k smallest /
largest split hashes), and the store is copied, document by document, into ``train``/``valid``/
``test`` with fairseq's own ``indexed_dataset.make_builder(..., impl="mmap")``.
"""
from __future__ import annotations

import os
from array import array
from typing import Dict, Iterator, Tuple

import numpy as np

DOC_META = np.dtype([("u", "<u8"), ("source", "<i4"), ("items", "<i4"), ("tokens", "<i8")])


class DocStore:
    def __init__(self, folder: str):
        self.folder = folder
        self.tokens_path = os.path.join(folder, "store.tokens.i32")
        self.sizes_path = os.path.join(folder, "store.sizes.i32")
        self.meta_path = os.path.join(folder, "store.docs.meta")
        self._tokens = open(self.tokens_path, "wb", buffering=1 << 22)
        self._sizes = open(self.sizes_path, "wb", buffering=1 << 20)
        self._meta = open(self.meta_path, "wb", buffering=1 << 20)
        self.num_docs = 0
        self.num_items = 0
        self.num_tokens_with_eos = 0

    def add(self, u: int, source: int, flat: np.ndarray, sizes: np.ndarray, n_tokens: int) -> int:
        """Append one document (its items; the separator item is part of ``flat``/``sizes``)."""
        self._tokens.write(np.ascontiguousarray(flat, dtype=np.int32).tobytes())
        self._sizes.write(np.ascontiguousarray(sizes, dtype=np.int32).tobytes())
        rec = np.array([(u, source, len(sizes), n_tokens)], dtype=DOC_META)
        self._meta.write(rec.tobytes())
        self.num_docs += 1
        self.num_items += len(sizes)
        self.num_tokens_with_eos += len(flat)
        return self.num_docs - 1

    def close(self) -> None:
        for f in (self._tokens, self._sizes, self._meta):
            f.close()

    def iter_documents(self) -> Iterator[Tuple[int, np.void, np.ndarray, np.ndarray]]:
        """Yield (index, meta record, tokens, item sizes) per document, read sequentially.

        Plain reads rather than memory maps: mapped pages of a large store would count in the
        process's resident memory; this keeps it at one document.
        """
        with open(self.meta_path, "rb") as fm, open(self.sizes_path, "rb") as fs, open(self.tokens_path, "rb") as ft:
            for d in range(self.num_docs):
                rec = np.fromfile(fm, dtype=DOC_META, count=1)[0]
                n_items = int(rec["items"])
                sizes = np.fromfile(fs, dtype=np.int32, count=n_items)
                n_tok = int(sizes.sum())
                tokens = np.fromfile(ft, dtype=np.int32, count=n_tok)
                if len(sizes) != n_items or len(tokens) != n_tok:
                    raise RuntimeError(f"scratch store truncated at document {d}")
                yield d, rec, tokens, sizes


def make_split_builder(prefix: str, dictionary_size: int):
    """fairseq's mmap builder for ``prefix``.bin (uint16 ids below 65,500 symbols, else uint32).

    fairseq keeps one size per item in a Python list until ``finalize``; an ``array`` holds the
    same numbers in 8 bytes each instead of ~36 (the index writer only iterates over it).
    """
    from fairseq.data import indexed_dataset  # fairseq only when writing: the readers' import stays light

    builder = indexed_dataset.make_builder(prefix + ".bin", impl="mmap", vocab_size=dictionary_size)
    if isinstance(getattr(builder, "_sizes", None), list) and not builder._sizes:
        builder._sizes = array("q")
    return builder


class SplitWriter:
    """train/valid/test builders in one folder, fed one document at a time."""

    SPLITS = ("train", "valid", "test")

    def __init__(self, folder: str, dictionary_size: int):
        self.folder = folder
        self.builders = {s: make_split_builder(os.path.join(folder, s), dictionary_size) for s in self.SPLITS}
        self.docs: Dict[str, int] = {s: 0 for s in self.SPLITS}
        self.tokens: Dict[str, int] = {s: 0 for s in self.SPLITS}
        self.items: Dict[str, int] = {s: 0 for s in self.SPLITS}

    def add_document(self, split: str, tokens: np.ndarray, sizes: np.ndarray, n_tokens: int) -> None:
        import torch  # torch only when writing, as fairseq above

        builder = self.builders[split]
        pos = 0
        for size in sizes.tolist():
            builder.add_item(torch.from_numpy(tokens[pos : pos + size]))
            pos += size
        self.docs[split] += 1
        self.tokens[split] += n_tokens
        self.items[split] += len(sizes)

    def finalize(self) -> None:
        for split, builder in self.builders.items():
            builder.finalize(os.path.join(self.folder, split + ".idx"))
