"""The template of the fine-tuning tasks (``longformer_classification``, ``longformer_qa``,
``longformer_wikihop``, ``longformer_hotpotqa``, ``longformer_coref``): what they share, so that each
task module keeps only its fields, its default global classes, its items and its batch.

Shared: the flags ``--global-attention {task,none}``, ``--global-classes`` (which token classes of
``token_classes`` attend globally), ``--max-positions`` and ``--pad-to-multiple``; the token
dictionary (``dict.txt`` with RoBERTa's ``<mask>`` row, then the task's ``MARKERS``); loading a
split (the binaries ``{split}.{field}`` of ``FIELDS`` and the side file ``{split}.{RECORDS}.jsonl``,
their counts checked against each other); the check that examples fit the model; and the batch
layout: tokens and the global-attention mask padded together (to the next multiple of
``--pad-to-multiple``) and carried in ``net_input``, whence ``model(**net_input)`` hands the mask
to the encoder and every layer. Rows of a batch may have different numbers of global tokens; with
``none`` the batch has no mask at all. With a mask, ``net_input`` also carries
``max_global_tokens``: the batch's largest global count, counted on the host while batching and
rounded up to a multiple of ``GLOBAL_BUCKET`` (``AttentionMasks``' static bound: the encoder sizes
its global tensors without reading the count back from the device, and a compiled encoder is one
graph, reused by every batch of the same bucket and length).
"""
import json
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from fairseq.data import Dictionary, FairseqDataset, data_utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.tasks import FairseqTask
from omegaconf import II, MISSING

from ..runtime.errors import UserInputError
from .token_classes import global_flags, parse_global_classes

logger = logging.getLogger(__name__)
GLOBAL_ATTENTION_CHOICES = ChoiceEnum(["task", "none"])
GLOBAL_BUCKET = 8  # max_global_tokens rounded up to a multiple of this: few distinct compiled graphs


@dataclass
class LongformerFinetuneConfig(FairseqDataclass):
    data: str = field(default=MISSING, metadata={"help": "folder written by longformer-prepare-task"})
    max_positions: int = field(default=4096, metadata={"help": "tokens per model input, specials included; "
                                                                   "at most the model's positions"})
    global_attention: GLOBAL_ATTENTION_CHOICES = field(
        default="task", metadata={"help": "task: the token classes of --global-classes attend globally; "
                                          "none: local attention only (whatever --global-classes says)"})
    global_classes: str = field(
        default="", metadata={"help": "comma-separated token classes with global attention: cls (<s>), question, "
                                      "candidate, title, sentence; empty: the task's default (classification cls, "
                                      "QA cls,question, WikiHop question,candidate, "
                                      "HotpotQA question,title,sentence)"})
    pad_to_multiple: int = field(default=1, metadata={"help": "pad each batch to the next multiple of this "
                                                               "(the attention window keeps it on the chunk grid)"})
    seed: int = II("common.seed")


def check_positions(model, max_positions: int, multiple: int) -> None:
    """Stop before training when the (padded) inputs do not fit the model's positions."""
    positions = model.max_positions()
    padded = -(-max_positions // multiple) * multiple
    if max_positions > positions or padded > positions:
        raise ValueError(f"--max-positions {max_positions} (padded to a multiple of --pad-to-multiple {multiple}: "
                         f"{padded}) is more than the model's {positions} positions: lower it or use a "
                         f"--pad-to-multiple that divides it (e.g. {math.gcd(max_positions, multiple)})")


class LongformerFinetuneTask(FairseqTask):
    """The fine-tuning tasks' common part: one token dictionary (with RoBERTa's ``<mask>`` row, so
    a pretrained embedding fits, then ``MARKERS``), loading a split, the positions check, and the
    task's head (``add_head``). A task sets the class attributes below and writes
    ``build_dataset`` and ``add_head``."""

    DEFAULT_GLOBAL_CLASSES = "cls"
    MARKERS: Tuple[str, ...] = ()  # added to the dictionary after <mask>: pretrained rows keep their ids
    FIELDS: Tuple[str, ...] = ()  # token binaries {split}.{field} in --data
    ALIGNED: Tuple[str, ...] = ()  # the FIELDS that hold one item per record
    RECORDS = ""  # the side file {split}.{RECORDS}.jsonl, one record per example
    PREPARE = ""  # the longformer-prepare-task command that writes the folder
    ITEMS = "examples"  # what an item is, for the log
    CUTS_TO_FIT = False  # items are cut into windows that fit: nothing to filter by size

    def __init__(self, cfg, dictionary: Dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        if cfg.pad_to_multiple < 1:
            raise ValueError(f"--pad-to-multiple must be >= 1, got {cfg.pad_to_multiple}")
        classes = parse_global_classes(cfg.global_classes, self.DEFAULT_GLOBAL_CLASSES)
        self.global_classes = classes if cfg.global_attention == "task" else frozenset()

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        return cls(cfg, cls.load_token_dictionary(os.path.join(cfg.data, "dict.txt")))

    @classmethod
    def load_token_dictionary(cls, path: str) -> Dictionary:
        dictionary = Dictionary.load(path)
        dictionary.add_symbol("<mask>")  # as RoBERTa's tasks: the pretrained embedding has the row
        for marker in cls.MARKERS:
            dictionary.add_symbol(marker)
        markers = f" (with {' '.join(cls.MARKERS)})" if cls.MARKERS else ""
        logger.info(f"dictionary: {len(dictionary)} types{markers}")
        return dictionary

    def load_fields(self, split: str) -> Tuple[Dict[str, FairseqDataset], List[dict]]:
        """The split's binaries of ``FIELDS`` (by name) and its records; refuses a folder whose
        ``ALIGNED`` binaries and records disagree on the number of examples."""
        fields = {name: load_split(os.path.join(self.cfg.data, f"{split}.{name}"), self.dictionary)
                  for name in self.FIELDS}
        side = f"{split}.{self.RECORDS}.jsonl"
        if not os.path.isfile(os.path.join(self.cfg.data, side)):
            raise UserInputError(f"{self.cfg.data}: no {side}: prepare the folder with longformer-prepare-task "
                                 f"{self.PREPARE}")
        with open(os.path.join(self.cfg.data, side), encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        counts = {f"{split}.{name}": len(fields[name]) for name in self.ALIGNED} | {side: len(records)}
        if len(set(counts.values())) > 1:
            listed = ", ".join(f"{name} {count}" for name, count in counts.items())
            raise UserInputError(f"{self.cfg.data}: the examples of {listed} do not match: prepare the folder again "
                                 f"with longformer-prepare-task {self.PREPARE}")
        return fields, records

    def load_dataset(self, split, combine=False, **kwargs):
        fields, records = self.load_fields(split)
        self.datasets[split] = dataset = self.build_dataset(split, fields, records)
        logger.info(f"{split}: {len(records)} {self.ITEMS}")
        return dataset

    def build_dataset(self, split: str, fields: Dict[str, FairseqDataset], records: List[dict]) -> "ExampleDataset":
        raise NotImplementedError

    def batching(self, split: str) -> dict:
        """The dataset options every task passes on: which tokens are global, the padding
        multiple, and shuffling (training only, seeded)."""
        return {"global_classes": self.global_classes, "multiple": self.cfg.pad_to_multiple,
                "shuffle": split == "train", "seed": self.cfg.seed}

    def add_head(self, model) -> None:
        raise NotImplementedError

    @staticmethod
    def add_span_head(model, name: str, head_class) -> None:
        """Add ``head_class(embed_dim)`` under ``name`` unless the model (a checkpoint) has it."""
        if name not in model.span_heads:
            model.span_heads[name] = head_class(model.args.encoder_embed_dim)

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        """Nothing to filter where an item's size counts all its windows and each window fits."""
        if self.CUTS_TO_FIT:
            return indices
        return super().filter_indices_by_size(indices, dataset, max_positions, ignore_invalid_inputs)

    def build_criterion(self, cfg, from_checkpoint=False):
        # A fine-tuning task's batches (one label or span per example) fit only the criterion
        # registered under the task's own name; any other fails in the first step ("Expected input
        # batch_size (4096) to match target batch_size (8)") after fairseq wrote a crash.pt.
        task, criterion = self.cfg._name, getattr(cfg, "_name", None)
        if criterion != task:
            raise UserInputError(f"--task {task} trains with --criterion {task} only, got --criterion {criterion}: "
                                 f"pass --criterion {task}")
        return super().build_criterion(cfg, from_checkpoint)

    def build_model(self, cfg, from_checkpoint=False):
        model = super().build_model(cfg, from_checkpoint)
        check_positions(model, self.cfg.max_positions, self.cfg.pad_to_multiple)
        self.add_head(model)
        return model

    def max_positions(self):
        return self.cfg.max_positions

    @property
    def source_dictionary(self):
        return self.dictionary

    @property
    def target_dictionary(self):
        return self.dictionary


def collate_inputs(sources: Sequence[torch.Tensor], global_masks: Optional[Sequence[torch.Tensor]],
                   pad: int, multiple: int) -> dict:
    """``net_input`` of a batch: src_tokens (B, N) right-padded to a multiple of ``multiple``,
    src_lengths (B,), and global_attention_mask (B, N) bool padded the same way (False) with
    max_global_tokens (``global_bound``), or neither when ``global_masks`` is None."""
    tokens = data_utils.collate_tokens(sources, pad, left_pad=False, pad_to_multiple=multiple)
    net_input = {"src_tokens": tokens, "src_lengths": torch.tensor([len(s) for s in sources], dtype=torch.long)}
    if global_masks is not None:
        mask = torch.zeros(tokens.shape, dtype=torch.bool)
        for row, flags in enumerate(global_masks):
            mask[row, :len(flags)] = flags
        net_input["global_attention_mask"] = mask
        net_input["max_global_tokens"] = global_bound(mask)
    return net_input


def global_bound(mask: torch.Tensor) -> int:
    """(B, N) bool global mask, on the host -> the largest row count rounded up to a multiple of
    ``GLOBAL_BUCKET`` (0 when no token is global)."""
    most = int(mask.sum(dim=1).max()) if mask.numel() else 0
    return -(-most // GLOBAL_BUCKET) * GLOBAL_BUCKET


class ExampleDataset(FairseqDataset):
    """A dataset of examples with known sizes (tokens per example), batched by size as fairseq
    does: shuffled (seeded by epoch through fairseq's iterator), then sorted by size. A task's
    dataset writes ``__getitem__`` and ``collate`` (a non-empty list of items -> its batch,
    through ``net_input`` and ``batch``)."""

    def __init__(self, sizes: np.ndarray, dictionary: Dictionary, global_classes, multiple: int, shuffle: bool,
                 seed: int):
        self._sizes = np.asarray(sizes, dtype=np.int64)
        self.dictionary, self.global_classes, self.multiple = dictionary, global_classes, multiple
        self.shuffle, self.seed = shuffle, seed
        self.epoch = 1

    def collater(self, samples):
        return self.collate(samples) if samples else {}

    def collate(self, samples: List[dict]) -> dict:
        raise NotImplementedError

    def net_input(self, sources: Sequence[torch.Tensor], classes: Sequence[torch.Tensor]) -> dict:
        """``net_input`` of the R input rows ``sources`` (each (N_r,) tokens) whose tokens are of
        ``classes`` (each (N_r,) token classes)."""
        return collate_inputs(sources, global_masks(classes, self.global_classes), self.dictionary.pad(),
                              self.multiple)

    @staticmethod
    def batch(samples: List[dict], sources: Sequence[torch.Tensor], net_input: dict, **fields) -> dict:
        """The batch of B ``samples`` read as the R rows ``sources``: id (B,), net_input, the
        task's ``fields``, nsentences (B) and ntokens (the rows' tokens before padding)."""
        return {"id": torch.tensor([s["id"] for s in samples]), "net_input": net_input, **fields,
                "nsentences": len(samples), "ntokens": sum(len(t) for t in sources)}

    def __len__(self):
        return len(self._sizes)

    @property
    def sizes(self):
        return self._sizes

    def num_tokens(self, index):
        return int(self._sizes[index])

    def num_tokens_vec(self, indices):
        return self._sizes[indices]

    def size(self, index):
        return int(self._sizes[index])

    def set_epoch(self, epoch):
        self.epoch = epoch

    def ordered_indices(self):
        if self.shuffle:
            with data_utils.numpy_seed(self.seed, self.epoch):
                order = np.random.permutation(len(self))
            return order[np.argsort(self._sizes[order], kind="mergesort")]
        return np.argsort(self._sizes, kind="mergesort")


def global_masks(token_classes: Sequence[torch.Tensor], enabled) -> Optional[list]:
    """Per-row (N,) bool masks of the tokens whose class is ``enabled``; None (no mask at all, the
    encoder's local-only path) when no class is enabled."""
    if not enabled:
        return None
    return [global_flags(classes, enabled) for classes in token_classes]


def first_offsets(counts) -> np.ndarray:
    """(E,) counts of consecutive pieces per example -> (E,) the index of each example's first."""
    counts = np.asarray(counts, dtype=np.int64)
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if len(counts) else counts


def join_pieces(pieces: Sequence[Tuple[Sequence[int], int]]) -> Tuple[torch.Tensor, torch.Tensor]:
    """(token ids, token class) pieces -> (N,) tokens and (N,) classes of their concatenation."""
    tokens = torch.tensor([t for piece, _ in pieces for t in piece], dtype=torch.long)
    classes = torch.tensor([c for piece, c in pieces for _ in piece], dtype=torch.long)
    return tokens, classes


def load_split(path: str, dictionary):
    dataset = data_utils.load_indexed_dataset(path, dictionary, dataset_impl="mmap")
    if dataset is None:
        raise UserInputError(f"{path}.bin/.idx not found: prepare the folder with longformer-prepare-task")
    return dataset
