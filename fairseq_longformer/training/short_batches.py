"""Every example in a batch: the last, short batch that fairseq-fixed 0.12.3.1 drops.

Replaces the behaviour of ``fairseq.data.data_utils.batch_by_size``, which drops the last batch
when its size is not a multiple of ``--required-batch-size-multiple`` (8 by default): examples
silently left out of every epoch and every validation (13 valid examples with --batch-size 8
score 8), ``fairseq-generate`` translating 4 of 6 sentences, and ``--batch-size`` below the
multiple giving no batch at all (ZeroDivisionError). With ``keeping_the_last_short_batch``, the
dropped examples come back as a last, short batch, as fairseq before that change did.
"""
from typing import Callable

import numpy as np


def keeping_the_last_short_batch(original: Callable) -> Callable:
    """``original`` (fairseq's ``batch_by_size``) with the dropped tail of ``indices`` batched
    again, without the multiple, after its batches."""

    def batch_by_size(indices, num_tokens_fn, num_tokens_vec=None, max_tokens=None, max_sentences=None,
                      required_batch_size_multiple=1, fixed_shapes=None):
        batches = original(indices, num_tokens_fn, num_tokens_vec, max_tokens, max_sentences,
                           required_batch_size_multiple, fixed_shapes)
        if required_batch_size_multiple <= 1 or fixed_shapes is not None:
            return batches
        indices = np.asarray(indices, dtype=np.int64)
        covered = sum(len(b) for b in batches)
        if covered == len(indices):
            return batches
        # the batches are consecutive runs of ``indices``: what was dropped is its tail
        rest = original(indices[covered:], num_tokens_fn,
                        None if num_tokens_vec is None else np.asarray(num_tokens_vec)[covered:],
                        max_tokens, max_sentences, 1, None)
        return list(batches) + list(rest)

    batch_by_size.original = original  # fairseq-fixed's own, which drops the short batch
    return batch_by_size
