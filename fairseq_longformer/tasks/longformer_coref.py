"""Task ``longformer_coref``: coreference resolution (OntoNotes, CoNLL-2012) with the coarse-to-fine
head of Joshi et al. (2019) on the Longformer encoder (``models/coref_head.py``), trained by
fairseq-train with the criterion of the same name.

Global attention: each segment's ``<s>`` by default (``--global-classes cls``; the paper does not
say which tokens its coreference model made global), none with ``--global-attention none``.

One dataset item is one document part (``longformer-prepare-task ontonotes``). The encoder reads
it in segments of ``--segment-length`` subwords, ``<s>`` and ``</s>`` included, encoded separately
(one batch row each) and concatenated: 0 (the default) means the model's positions
(``--max-positions``), i.e. the whole document in one pass where it fits (the paper's Longformer
setting at 4,096); 384 is the RoBERTa baseline's. Segments end at a sentence end where one lies
inside (else at a word end), as mandarjoshi90/coref's ``minimize.py`` cuts them.

Two learning rates: the head's parameters carry fairseq's ``param_group``/``optim_overrides``
(``lr_scale`` = ``--head-lr-multiplier``, 10 by default: the paper's encoder 1e-5 against task
1e-4), which ``training.lr_groups`` turns into a second torch parameter group whose
rate follows the same schedule scaled.

``--write-conll DIR``: after each validation, ``DIR/{split}.response_conll`` (the predicted
clusters) and ``DIR/{split}.key_conll`` (the gold ones, from the prepared data) in the CoNLL-2012
layout, which the official scorer and ``longformer-coref-score`` read.
"""
import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import numpy as np
import torch
from fairseq.tasks import register_task

from ..models.coref_head import GENRES, CorefHead, CorefHeadConfig
from ..runtime.errors import UserInputError
from .finetune_base import (
    ExampleDataset, LongformerFinetuneConfig, LongformerFinetuneTask, collate_inputs, global_masks, load_split,
)
from .token_classes import CLS

logger = logging.getLogger(__name__)
HEAD = "coref"


@dataclass
class LongformerCorefConfig(LongformerFinetuneConfig):
    segment_length: int = field(default=0, metadata={"help": "subwords per encoder pass, <s> and </s> included; "
                                                            "0: --max-positions (whole documents where they fit); "
                                                            "384: the RoBERTa baseline"})
    head_lr_multiplier: float = field(default=10.0, metadata={"help": "the coreference head's learning rate over "
                                                                      "--lr (the encoder's): paper 1e-4 / 1e-5"})
    write_conll: str = field(default="", metadata={"help": "after each validation, write DIR/{split}.response_conll "
                                                           "and DIR/{split}.key_conll (CoNLL-2012)"})
    coref_ffnn_size: int = field(default=3000, metadata={"help": "hidden units of the head's FFNNs"})
    coref_dropout: float = field(default=0.3, metadata={"help": "dropout of the head"})
    coref_max_span_width: int = field(default=30, metadata={"help": "widest candidate span, in subwords"})
    coref_max_antecedents: int = field(default=50, metadata={"help": "antecedents kept per span by the coarse scores"})
    coref_max_segments: int = field(default=11, metadata={"help": "segment-distance feature buckets"})


def genre_index(genre: str) -> int:
    """OntoNotes' genres in order; anything else shares one more row."""
    return GENRES.index(genre) if genre in GENRES else len(GENRES)


def segment_bounds(sentence: np.ndarray, word: np.ndarray, body: int) -> List[Tuple[int, int]]:
    """[start, end) pieces of at most ``body`` subwords, each ending at a sentence end where one
    lies inside, else at a word end, else wherever ``body`` falls."""
    n, bounds, start = len(sentence), [], 0
    while start < n:
        end = min(start + body, n)
        if end < n:
            cuts = np.arange(start + 1, end + 1)
            for boundary in (sentence, word):
                ok = cuts[boundary[cuts - 1] != boundary[np.minimum(cuts, n - 1)]]
                if len(ok):
                    end = int(ok[-1])
                    break
        bounds.append((start, end))
        start = end
    return bounds


def cls_only(n: int) -> torch.Tensor:
    """Token classes of one segment: ``<s>`` is ``cls``, the rest none."""
    classes = torch.zeros(n, dtype=torch.long)
    classes[0] = CLS
    return classes


class CorefDataset(ExampleDataset):
    """Items: one document's segments (each ``<s> piece </s>``), where every subword sits in them,
    and its per-subword sentence, speaker and segment ids, genre and gold mentions."""

    def __init__(self, split: str, tokens, records: List[dict], dictionary, segment_length: int,
                 global_classes, multiple: int, shuffle: bool, seed: int):
        self.split, self.tokens, self.records, self.dictionary = split, tokens, records, dictionary
        self.segment_length, self.global_classes, self.multiple = segment_length, global_classes, multiple
        super().__init__(tokens.sizes + 2 * (-(-tokens.sizes // (segment_length - 2))), shuffle, seed)

    def __getitem__(self, index):
        record, body = self.records[index], self.tokens[index].long()
        sentence, word = np.asarray(record["sentence"]), np.asarray(record["word"])
        d = self.dictionary
        segments, rows, cols = [], [], []
        for row, (a, b) in enumerate(segment_bounds(sentence, word, self.segment_length - 2)):
            segments.append(torch.cat([body.new_tensor([d.bos()]), body[a:b], body.new_tensor([d.eos()])]))
            rows += [row] * (b - a)
            cols += range(1, b - a + 1)
        speaker_names = [s for sentence_speakers in record["speakers"] for s in sentence_speakers]
        speaker_ids: Dict[str, int] = {}
        per_word = [speaker_ids.setdefault(s, len(speaker_ids)) for s in speaker_names]
        mentions = [(s, e, c + 1) for c, cluster in enumerate(record["subword_clusters"]) for s, e in cluster]
        gold = torch.tensor(mentions, dtype=torch.long).view(-1, 3)
        return {"id": index, "segments": segments, "rows": torch.tensor(rows), "cols": torch.tensor(cols),
                "sentence": torch.from_numpy(sentence), "speaker": torch.tensor(per_word)[torch.from_numpy(word)],
                "segment": torch.tensor(rows), "genre": genre_index(record["genre"]),
                "gold_starts": gold[:, 0], "gold_ends": gold[:, 1], "gold_clusters": gold[:, 2]}

    def collater(self, samples):
        if not samples:
            return {}
        sources = [s for sample in samples for s in sample["segments"]]
        first_row = np.cumsum([0] + [len(s["segments"]) for s in samples])[:-1]
        docs = [{key: s[key] for key in ("sentence", "speaker", "segment", "genre", "gold_starts", "gold_ends",
                                          "gold_clusters", "cols")} | {"rows": s["rows"] + int(r), "id": s["id"]}
                for s, r in zip(samples, first_row)]
        return {"id": torch.tensor([s["id"] for s in samples]), "split": self.split,
                "net_input": collate_inputs(sources, global_masks([cls_only(len(t)) for t in sources], self.global_classes),
                                            self.dictionary.pad(), self.multiple),
                "documents": docs, "nsentences": len(samples), "ntokens": sum(len(t) for t in sources)}


@register_task("longformer_coref", dataclass=LongformerCorefConfig)
class LongformerCorefTask(LongformerFinetuneTask):
    cfg: LongformerCorefConfig
    DEFAULT_GLOBAL_CLASSES = "cls"

    def __init__(self, cfg, dictionary):
        super().__init__(cfg, dictionary)
        if cfg.segment_length == 0:
            cfg.segment_length = cfg.max_positions
        if not 3 <= cfg.segment_length <= cfg.max_positions:
            raise UserInputError(f"--segment-length {cfg.segment_length} must be 0 or between 3 and --max-positions "
                                 f"{cfg.max_positions} (<s> and </s> included)")
        if cfg.head_lr_multiplier <= 0:
            raise UserInputError(f"--head-lr-multiplier must be positive, got {cfg.head_lr_multiplier}")
        self.predictions: Dict[str, Dict[int, list]] = {}  # split -> document index -> predicted word clusters

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        dictionary = cls.load_token_dictionary(os.path.join(cfg.data, "dict.txt"))
        logger.info(f"dictionary: {len(dictionary)} types")
        return cls(cfg, dictionary)

    def load_dataset(self, split, combine=False, **kwargs):
        from longformer_preprocessing.tasks.ontonotes import load_records

        tokens = load_split(os.path.join(self.cfg.data, f"{split}.tokens"), self.dictionary)
        records = load_records(os.path.join(self.cfg.data, f"{split}.coref.jsonl"))
        if len(records) != len(tokens):
            raise UserInputError(f"{self.cfg.data}: {split}.tokens has {len(tokens)} documents but {split}.coref.jsonl "
                                 f"{len(records)}: prepare the folder again with longformer-prepare-task ontonotes")
        self.datasets[split] = CorefDataset(split, tokens, records, self.dictionary, self.cfg.segment_length,
                                            self.global_classes, self.cfg.pad_to_multiple,
                                            shuffle=split == "train", seed=self.cfg.seed)
        logger.info(f"{split}: {len(records)} documents, segments of {self.cfg.segment_length} subwords")
        return self.datasets[split]

    def add_head(self, model) -> None:
        if HEAD not in model.span_heads:
            cfg = self.cfg
            model.span_heads[HEAD] = CorefHead(CorefHeadConfig(
                embed_dim=model.args.encoder_embed_dim, max_width=cfg.coref_max_span_width,
                ffnn_size=cfg.coref_ffnn_size, dropout=cfg.coref_dropout, max_antecedents=cfg.coref_max_antecedents,
                max_segments=cfg.coref_max_segments, genres=len(GENRES) + 1))
        # fairseq's parameter-group tags (the composite optimizer's); training.lr_groups reads lr_scale
        for name, p in model.named_parameters():
            head = name.startswith(f"span_heads.{HEAD}.")
            p.param_group = "coref_head" if head else "encoder"
            p.optim_overrides = {"optimizer": {"lr_scale": self.cfg.head_lr_multiplier if head else 1.0}}

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        """Nothing to filter: a document of any length is cut into segments that fit."""
        return indices

    def keep_prediction(self, split: str, index: int, clusters) -> None:
        if self.cfg.write_conll:
            self.predictions.setdefault(split, {})[index] = clusters

    def post_validate(self, model, stats, agg):
        """Write the validation's predictions (and the key) when --write-conll is set."""
        from longformer_preprocessing.tasks.conll2012 import CorefDocument, write_document

        from longformer_common.atomic import atomic_files

        for split, predicted in self.predictions.items():
            os.makedirs(self.cfg.write_conll, exist_ok=True)
            records = self.datasets[split].records
            names = [f"{split}.key_conll", f"{split}.response_conll"]
            with atomic_files(self.cfg.write_conll, names) as paths, \
                    open(paths[names[0]], "w", encoding="utf-8") as key, \
                    open(paths[names[1]], "w", encoding="utf-8") as response:
                for index in sorted(predicted):
                    r = records[index]
                    document = CorefDocument(r["doc_id"], r["part"], r["header"], r["sentences"], r["speakers"])
                    write_document(key, document, [[tuple(m) for m in c] for c in r["clusters"]])
                    write_document(response, document, predicted[index])
            logger.info(f"wrote {len(predicted)} documents' predictions to {paths and self.cfg.write_conll}/{names[1]}")
        self.predictions = {}
