"""The unigram baselines a masked LM must beat, in bits per token (the criterion's BPC).

A masked position is a uniformly drawn token of the split, so a model that ignores the context
scores at best the split's own unigram entropy. Two numbers:

- ``entropy``: the split's own token frequencies, H = -sum p log2 p. No model can know those
  frequencies from train, so this is a stricter bar than any context-free model reaches;
- ``cross_entropy_from_train``: train's frequencies (add-one smoothed) scored on the split, what
  a model that learnt only word frequencies gets (the "unigram plateau").
"""
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class UnigramBaseline:
    split: str
    tokens: int
    entropy: float  # bits per token, the split's own frequencies
    cross_entropy_from_train: float  # bits per token, train's frequencies


def token_counts(data_dir: Path, split: str, vocab_size: int) -> np.ndarray:
    """counts (V,) of every token id in ``data_dir/split.{bin,idx}``, line ends (</s>) included."""
    from fairseq.data import data_utils

    dataset = data_utils.load_indexed_dataset(str(Path(data_dir) / split), None)
    if dataset is None:
        raise FileNotFoundError(f"no fairseq binary split {split!r} in {data_dir}: run longformer-preprocess first")
    counts = np.zeros(vocab_size, dtype=np.int64)
    for i in range(len(dataset)):
        counts += np.bincount(dataset[i].numpy(), minlength=vocab_size)[:vocab_size]
    return counts


def unigram_baseline(data_dir: Path, split: str = "valid") -> UnigramBaseline:
    from fairseq.data import Dictionary

    vocab_size = len(Dictionary.load(str(Path(data_dir) / "dict.txt")))
    own = token_counts(data_dir, split, vocab_size)
    train = token_counts(data_dir, "train", vocab_size)
    if own.sum() == 0:
        raise ValueError(f"split {split!r} of {data_dir} holds no tokens")
    p_own = own[own > 0] / own.sum()
    p_train = (train + 1) / (train.sum() + vocab_size)  # add-one: a valid token unseen in train
    cross = -(own * np.log2(p_train)).sum() / own.sum()
    return UnigramBaseline(split, int(own.sum()), float(-(p_own * np.log2(p_own)).sum()), float(cross))
