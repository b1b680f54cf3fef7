"""Task ``longformer_mlm``: masked LM over long blocks that keep document boundaries.

fairseq's ``masked_lm`` with three changes for long documents:
  * defaults: blocks of 4,096 tokens, ``--sample-break-mode complete_doc``;
  * corpus lines longer than a block are cut into block-sized pieces first: with
    ``complete``/``complete_doc`` fairseq never splits a line, so one long paragraph would make a
    block longer than ``--tokens-per-sample`` and crash in the position embeddings (fairseq #5167);
  * each batch is padded to the next multiple of ``--pad-to-multiple`` (the attention window),
    not to the block size;
and a clear error, before any training step, when the blocks do not fit the model's positions.
"""
import logging
import os
from dataclasses import dataclass, field

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
    pad_to_multiple: int = field(
        default=256, metadata={"help": "pad each batch to a multiple of this: set it to the "
                                       "attention window (--attention-window)"}
    )


@register_task("longformer_mlm", dataclass=LongformerMLMConfig)
class LongformerMLMTask(MaskedLMTask):
    cfg: LongformerMLMConfig

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        positions = model.max_positions()
        if self.cfg.tokens_per_sample > positions:
            raise ValueError(
                f"--tokens-per-sample {self.cfg.tokens_per_sample} is larger than the model's "
                f"{positions} positions: lower --tokens-per-sample, or build the model with "
                f"--max-positions {self.cfg.tokens_per_sample} (for a converted RoBERTa: "
                "longformer-convert-roberta --max-positions)"
            )
        return model

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
        pad, multiple = self.source_dictionary.pad(), self.cfg.pad_to_multiple
        target = PadToMultipleDataset(target_dataset.dataset, pad, multiple)  # unwrap fairseq's RightPad
        return NestedDictionaryDataset(
            {
                "id": IdDataset(),
                "net_input": {
                    "src_tokens": PadToMultipleDataset(src_dataset, pad, multiple),
                    "src_lengths": NumelDataset(src_dataset, reduce=False),
                },
                "target": target,
                "nsentences": NumSamplesDataset(),
                "ntokens": NumelDataset(src_dataset, reduce=True),
            },
            sizes=[src_dataset.sizes],
        )
