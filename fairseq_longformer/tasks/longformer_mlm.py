"""Task ``longformer_mlm``: masked LM over long blocks that keep document boundaries.

fairseq's ``masked_lm`` with three changes for long documents:
  * defaults: blocks of 4,096 tokens, ``--sample-break-mode complete_doc``;
  * corpus lines longer than a block are cut into block-sized pieces first: with
    ``complete``/``complete_doc`` fairseq never splits a line, so one long paragraph would make a
    block longer than ``--tokens-per-sample`` and crash in the position embeddings (fairseq #5167);
  * each batch is padded to the next multiple of ``--pad-to-multiple``, not to the block size
    (``batch_pad_multiple`` gives the value the converters write);
and a clear error, before any training step, when the blocks (padded) do not fit the model's
positions. fairseq's ``--include-target-tokens`` and ``--include-index`` (on by default) keep
their meaning: ``target_tokens`` and ``src_id`` in ``net_input``.
"""
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from fairseq import utils
from fairseq.data import (
    BaseWrapperDataset, IdDataset, NestedDictionaryDataset, NumelDataset, NumSamplesDataset,
    PrependTokenDataset, TokenBlockDataset, data_utils,
)
from fairseq.data.shorten_dataset import maybe_shorten_dataset
from fairseq.tasks import register_task
from fairseq.tasks.masked_lm import MaskedLMConfig, MaskedLMTask

logger = logging.getLogger(__name__)


def batch_pad_multiple(windows: Sequence[int], tokens_per_sample: int) -> int:
    """The ``--pad-to-multiple`` for a model with these one-sided windows (one per layer) and
    blocks of ``tokens_per_sample`` tokens: the largest number that divides the block length and
    every window (256 for 4,096-token blocks and w = 256). Dividing the block length matters: a
    full block must not be padded past the model's positions; a divisor of the windows keeps
    batch lengths on the attention's chunk grid. Windows of 0 impose nothing."""
    return math.gcd(int(tokens_per_sample), *(int(w) for w in windows))


class SplitLongLinesDataset(BaseWrapperDataset):
    """Cuts every item longer than ``max_len`` into consecutive pieces of at most ``max_len``."""

    def __init__(self, dataset, sizes: np.ndarray, max_len: int):
        super().__init__(dataset)
        sizes = np.asarray(sizes, dtype=np.int64)
        pieces = np.maximum(1, -(-sizes // max_len))
        self.item = np.repeat(np.arange(len(sizes)), pieces)  # source item of each piece
        first_piece = np.repeat(np.cumsum(pieces) - pieces, pieces)
        self.start = (np.arange(len(self.item)) - first_piece) * max_len
        self._sizes = np.minimum(sizes[self.item] - self.start, max_len)
        self.max_len = max_len

    def __getitem__(self, index):
        start = self.start[index]
        return self.dataset[self.item[index]][start:start + self.max_len]

    def __len__(self):
        return len(self.item)

    @property
    def sizes(self):
        return self._sizes

    def num_tokens(self, index):
        return self._sizes[index]

    def size(self, index):
        return self._sizes[index]


class PadToMultipleDataset(BaseWrapperDataset):
    """Right-pads each batch to the next multiple of ``multiple`` (not to the block size)."""

    def __init__(self, dataset, pad_idx: int, multiple: int):
        super().__init__(dataset)
        self.pad_idx, self.multiple = pad_idx, multiple

    def collater(self, samples):
        return data_utils.collate_tokens(samples, self.pad_idx, left_pad=False, pad_to_multiple=self.multiple)


@dataclass
class LongformerMLMConfig(MaskedLMConfig):
    tokens_per_sample: int = field(
        default=4096, metadata={"help": "tokens per block, <s> included; at most the model's positions"}
    )
    sample_break_mode: str = field(
        default="complete_doc",
        metadata={"help": "how blocks are cut: complete_doc keeps whole lines and never crosses "
                          "a document boundary (an empty line); none, complete, eos as in fairseq"},
    )
    train_mask_prob: float = field(
        default=-1.0, metadata={"help": "masking rate of the training split only (default: "
                                        "--mask-prob); validation keeps --mask-prob, so BPC stays the "
                                        "same metric whatever the training rate"}
    )
    pad_to_multiple: int = field(
        default=256, metadata={"help": "pad each batch to the next multiple of this, not to "
                                       "--tokens-per-sample; it must divide --tokens-per-sample (a full "
                                       "block would otherwise be padded past the model's positions). "
                                       "The window, or gcd of the windows and --tokens-per-sample"}
    )


@register_task("longformer_mlm", dataclass=LongformerMLMConfig)
class LongformerMLMTask(MaskedLMTask):
    cfg: LongformerMLMConfig

    def __init__(self, cfg: LongformerMLMConfig, dictionary=None):
        super().__init__(cfg, dictionary)
        if cfg.pad_to_multiple < 1:
            raise ValueError(f"--pad-to-multiple must be >= 1, got {cfg.pad_to_multiple}")
        # fairseq's --train-subset is not part of the task's config; "train" unless set otherwise
        self.train_split = "train"
        if getattr(cfg, "d2v2_multi", False):
            raise ValueError("--d2v2-multi (data2vec's multi-modal batches) is not supported by "
                             "longformer_mlm: use fairseq's masked_lm task for data2vec")

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        positions = model.max_positions()
        length, multiple = self.cfg.tokens_per_sample, self.cfg.pad_to_multiple
        if length > positions:
            raise ValueError(
                f"--tokens-per-sample {length} is larger than the model's "
                f"{positions} positions: lower --tokens-per-sample, or build the model with "
                f"--max-positions {length} (for a converted RoBERTa: "
                "longformer-convert-roberta --max-positions)"
            )
        padded = -(-length // multiple) * multiple
        if padded > positions:
            raise ValueError(
                f"--pad-to-multiple {multiple} pads a full block of --tokens-per-sample {length} to "
                f"{padded} tokens, more than the model's {positions} positions: use a multiple that "
                f"divides {length} (e.g. {math.gcd(length, multiple)})"
            )
        return model

    def load_dataset(self, split, epoch=1, combine=False, **kwargs):
        rate = self.cfg.train_mask_prob
        if rate < 0 or split != self.train_split:
            return super().load_dataset(split, epoch, combine, **kwargs)
        if not 0.0 < rate < 1.0:
            raise ValueError(f"--train-mask-prob must be in (0, 1), got {rate}")
        evaluation_rate = self.cfg.mask_prob
        self.cfg.mask_prob = rate  # fairseq's MaskedLMTask reads the rate from cfg while it builds the split
        try:
            return super().load_dataset(split, epoch, combine, **kwargs)
        finally:
            self.cfg.mask_prob = evaluation_rate

    def _load_dataset_split(self, split, epoch, combine):
        paths = utils.split_paths(self.cfg.data)
        split_path = os.path.join(paths[(epoch - 1) % len(paths)], split)
        dataset = data_utils.load_indexed_dataset(split_path, self.source_dictionary, combine=combine)
        if dataset is None:
            raise FileNotFoundError(f"dataset split {split!r} not found: {split_path}.{{bin,idx}}")
        dataset = maybe_shorten_dataset(dataset, split, self.cfg.shorten_data_split_list,
                                        self.cfg.shorten_method, self.cfg.tokens_per_sample, self.cfg.seed)
        block = self.cfg.tokens_per_sample - 1  # one less for <s>
        if self.cfg.sample_break_mode in ("complete", "complete_doc") and dataset.sizes.max(initial=0) > block:
            long_lines = int((dataset.sizes > block).sum())
            logger.info(f"{split}: cutting {long_lines} lines longer than {block} tokens into pieces")
            dataset = SplitLongLinesDataset(dataset, dataset.sizes, block)
        dataset = TokenBlockDataset(
            dataset, dataset.sizes, block, pad=self.source_dictionary.pad(),
            eos=self.source_dictionary.eos(), break_mode=self.cfg.sample_break_mode,
        )
        logger.info(f"loaded {len(dataset)} blocks from: {split_path}")
        return PrependTokenDataset(dataset, self.source_dictionary.bos())

    def _regular_dataset(self, src_dataset, target_dataset):
        """fairseq's masked_lm batches, padded to ``--pad-to-multiple`` instead of the longest item."""
        pad, multiple = self.source_dictionary.pad(), self.cfg.pad_to_multiple
        target = PadToMultipleDataset(target_dataset.dataset, pad, multiple)  # unwrap fairseq's RightPad
        net_input = {
            "src_tokens": PadToMultipleDataset(src_dataset, pad, multiple),
            "src_lengths": NumelDataset(src_dataset, reduce=False),
        }
        if self.cfg.include_target_tokens:  # as fairseq's masked_lm: the targets in the input too
            net_input["target_tokens"] = target
        if self.cfg.include_index:
            net_input["src_id"] = IdDataset()
        return NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "net_input": net_input,
                "target": target,
                "nsentences": NumSamplesDataset(),
                "ntokens": NumelDataset(src_dataset, reduce=True),
            },
            sizes=[src_dataset.sizes],
        )
