"""Task ``longformer_classification``: long-document classification (the paper's IMDB and
Hyperpartisan setting).

Input ``<s> document </s>``, the document truncated to ``--max-positions`` - 2 tokens; ``<s>`` is
of token class ``cls``, the rest of none; global attention on ``<s>`` by default (the paper's
choice; ``--global-classes``) or none (``--global-attention none``); RoBERTa's
classification head on the ``<s>`` features. Data: ``longformer-prepare-task classification``
(fairseq ``sentence_prediction``'s layout: ``input0/`` tokens, ``label/`` labels).
"""
import logging
import os
from dataclasses import dataclass, field

import numpy as np
import torch
from fairseq.data import Dictionary
from fairseq.tasks import register_task

from ..runtime.errors import UserInputError
from .finetune_base import ExampleDataset, LongformerFinetuneConfig, LongformerFinetuneTask, load_split
from .token_classes import CLS

logger = logging.getLogger(__name__)


@dataclass
class LongformerClassificationConfig(LongformerFinetuneConfig):
    classification_head_name: str = field(default="sentence_classification_head",
                                          metadata={"help": "name of the classification head"})


class ClassificationDataset(ExampleDataset):
    """Items ``<s> tokens </s>`` (truncated to ``max_positions``) and their label index."""

    def __init__(self, tokens, labels: np.ndarray, dictionary: Dictionary, max_positions: int,
                 global_classes, multiple: int, shuffle: bool, seed: int):
        # stored items end with </s>: <s> + body + </s> is the stored size + 1
        super().__init__(np.minimum(tokens.sizes + 1, max_positions), dictionary, global_classes, multiple, shuffle,
                         seed)
        self.tokens, self.labels, self.max_positions = tokens, labels, max_positions

    def __getitem__(self, index):
        body = self.tokens[index][:-1][: self.max_positions - 2]
        source = torch.cat([body.new_tensor([self.dictionary.bos()]), body, body.new_tensor([self.dictionary.eos()])])
        classes = torch.zeros(len(source), dtype=torch.long)
        classes[0] = CLS
        return {"id": index, "source": source, "classes": classes, "target": int(self.labels[index])}

    def collate(self, samples):
        sources = [s["source"] for s in samples]
        return self.batch(samples, sources, self.net_input(sources, [s["classes"] for s in samples]),
                          target=torch.tensor([s["target"] for s in samples]))


@register_task("longformer_classification", dataclass=LongformerClassificationConfig)
class LongformerClassificationTask(LongformerFinetuneTask):
    """Data in fairseq ``sentence_prediction``'s folders: ``input0/`` (tokens and dict.txt) and
    ``label/`` (labels and their own dictionary)."""

    cfg: LongformerClassificationConfig
    ITEMS = "documents"

    def __init__(self, cfg, dictionary: Dictionary, label_dictionary: Dictionary):
        super().__init__(cfg, dictionary)
        self.label_dictionary = label_dictionary

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        dictionary = cls.load_token_dictionary(os.path.join(cfg.data, "input0", "dict.txt"))
        label_dictionary = Dictionary.load(os.path.join(cfg.data, "label", "dict.txt"))
        logger.info(f"{cls.num_labels(label_dictionary)} classes")
        return cls(cfg, dictionary, label_dictionary)

    @staticmethod
    def num_labels(label_dictionary: Dictionary) -> int:
        return len(label_dictionary) - label_dictionary.nspecial

    @property
    def num_classes(self) -> int:
        return self.num_labels(self.label_dictionary)

    def label_names(self):
        return self.label_dictionary.symbols[self.label_dictionary.nspecial:]

    def load_fields(self, split):
        """The documents (``input0/``) and, as the records, their label indices (``label/``)."""
        tokens = load_split(os.path.join(self.cfg.data, "input0", split), self.dictionary)
        labels_ds = load_split(os.path.join(self.cfg.data, "label", split), self.label_dictionary)
        labels = [int(labels_ds[i][0]) - self.label_dictionary.nspecial for i in range(len(labels_ds))]
        if len(labels) != len(tokens) or min(labels, default=0) < 0:
            raise UserInputError(f"{self.cfg.data}: {split} has {len(tokens)} documents but {len(labels)} labels (or a "
                                 "special label): prepare the folder again with longformer-prepare-task classification")
        return {"input0": tokens}, labels

    def build_dataset(self, split, fields, records):
        return ClassificationDataset(fields["input0"], np.array(records, dtype=np.int64), self.dictionary,
                                     self.cfg.max_positions, **self.batching(split))

    def add_head(self, model) -> None:
        model.register_classification_head(self.cfg.classification_head_name, num_classes=self.num_classes)
