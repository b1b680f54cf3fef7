"""What the fine-tuning tasks (``longformer_classification``, ``longformer_qa``,
``longformer_wikihop``, ``longformer_hotpotqa``) share: the flags ``--global-attention
{task,none}``, ``--global-classes`` (which token classes of ``token_classes`` attend globally),
``--max-positions`` and ``--pad-to-multiple``, the check that examples fit the model, and the batch layout: tokens and the global-attention mask
padded together (to the next multiple of ``--pad-to-multiple``) and carried in ``net_input``,
whence ``model(**net_input)`` hands the mask to the encoder and every layer. Rows of a batch may
have different numbers of global tokens; with ``none`` the batch has no mask at all.
"""
import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch
from fairseq.data import Dictionary, FairseqDataset, data_utils
from fairseq.dataclass import ChoiceEnum, FairseqDataclass
from fairseq.tasks import FairseqTask
from omegaconf import II, MISSING

from .token_classes import global_flags, parse_global_classes

GLOBAL_ATTENTION_CHOICES = ChoiceEnum(["task", "none"])


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
    a pretrained embedding fits), the positions check, and the task's head (``add_head``)."""

    DEFAULT_GLOBAL_CLASSES = "cls"

    def __init__(self, cfg, dictionary: Dictionary):
        super().__init__(cfg)
        self.dictionary = dictionary
        if cfg.pad_to_multiple < 1:
            raise ValueError(f"--pad-to-multiple must be >= 1, got {cfg.pad_to_multiple}")
        classes = parse_global_classes(cfg.global_classes, self.DEFAULT_GLOBAL_CLASSES)
        self.global_classes = classes if cfg.global_attention == "task" else frozenset()

    @staticmethod
    def load_token_dictionary(path: str) -> Dictionary:
        dictionary = Dictionary.load(path)
        dictionary.add_symbol("<mask>")  # as RoBERTa's tasks: the pretrained embedding has the row
        return dictionary

    def add_head(self, model) -> None:
        raise NotImplementedError

    def build_criterion(self, cfg, from_checkpoint=False):
        # A fine-tuning task's batches (one label or span per example) fit only the criterion
        # registered under the task's own name; any other fails in the first step ("Expected input
        # batch_size (4096) to match target batch_size (8)") after fairseq wrote a crash.pt.
        task, criterion = self.cfg._name, getattr(cfg, "_name", None)
        if criterion != task:
            from ..runtime.errors import UserInputError

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
    src_lengths (B,), and global_attention_mask (B, N) bool padded the same way (False), or no
    mask when ``global_masks`` is None."""
    tokens = data_utils.collate_tokens(sources, pad, left_pad=False, pad_to_multiple=multiple)
    net_input = {"src_tokens": tokens, "src_lengths": torch.tensor([len(s) for s in sources], dtype=torch.long)}
    if global_masks is not None:
        mask = torch.zeros(tokens.shape, dtype=torch.bool)
        for row, flags in enumerate(global_masks):
            mask[row, :len(flags)] = flags
        net_input["global_attention_mask"] = mask
    return net_input


class ExampleDataset(FairseqDataset):
    """A dataset of examples with known sizes (tokens per example), batched by size as fairseq
    does: shuffled (seeded by epoch through fairseq's iterator), then sorted by size."""

    def __init__(self, sizes: np.ndarray, shuffle: bool, seed: int):
        self._sizes = np.asarray(sizes, dtype=np.int64)
        self.shuffle, self.seed = shuffle, seed
        self.epoch = 1

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


def load_split(path: str, dictionary):
    dataset = data_utils.load_indexed_dataset(path, dictionary, dataset_impl="mmap")
    if dataset is None:
        raise FileNotFoundError(f"{path}.bin/.idx not found (run longformer-prepare-task)")
    return dataset
