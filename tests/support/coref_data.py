"""Coreference data for the tests: KJV documents with inserted entities (experiments/coref_small),
written as CoNLL-2012 files and binarized by the ``ontonotes`` writer with the word-level
dictionary of the tiny converted RoBERTa (tests/plugin/conversion/test_roberta.py's fixtures),
so that fine-tuning starts from that checkpoint with every word id it knows."""
import argparse
import random
from pathlib import Path

import numpy as np

from longformer_experiments.coref_small.documents import verses, write_split
from longformer_preprocessing.tasks.conll2012 import CorefDocument
from longformer_preprocessing.tasks.ontonotes import read
from longformer_preprocessing.tasks.shapes import write_splits
from longformer_preprocessing.tokenizer import NUM_SPECIALS, UNK, load_dict_symbols

from tests.conftest import KJV


class WordTokenizer:
    """One id per whitespace word, looked up in a fairseq dict.txt (unknown words: <unk>): the
    tokenizer the KJV fixture's dictionary was made with."""

    def __init__(self, dict_path: Path):
        self.symbols = load_dict_symbols(str(dict_path))
        self.index = {s: NUM_SPECIALS + i for i, s in enumerate(self.symbols)}

    @property
    def dictionary_size(self) -> int:
        return NUM_SPECIALS + len(self.symbols)

    def encode_lines(self, lines):
        return [np.array([self.index.get(w, UNK) for w in line.split()], dtype=np.int64) for line in lines]


def write_conll(folder: Path, train_docs: int, valid_docs: int, seed: int = 0, distances=(4, 24)) -> dict:
    """{split: path} of short near-distance documents (about 100 words each)."""
    folder.mkdir(parents=True, exist_ok=True)
    pool = [v for v in verses(KJV) if len(v) <= 12]
    random.Random(seed).shuffle(pool)
    paths = {}
    for split, count, offset in (("train", train_docs, 0), ("valid", valid_docs, 1)):
        paths[split] = folder / f"{split}.kjv_gold_conll"
        write_split(paths[split], "custom", count, seed + offset, pool, entities=3, mentions=3, distances=distances)
    return paths


def prepare_word_level(conll: dict, dict_path: Path, out: Path) -> dict:
    """Binarize the CoNLL files with the word-level tokenizer; returns the statistics."""
    out.mkdir(parents=True, exist_ok=True)
    options = argparse.Namespace(kind="ontonotes", tokenizer_kind="word", srcdict=str(dict_path))
    splits = {split: (str(path), lambda path=path: read(str(path))) for split, path in conll.items()}
    return write_splits(str(out), WordTokenizer(dict_path), options, CorefDocument, splits)
