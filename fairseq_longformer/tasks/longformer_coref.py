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
1e-4), which ``compat._per_group_learning_rates`` turns into a second torch parameter group whose
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

from longformer_common.atomic import atomic_files
from longformer_preprocessing.tasks.conll2012 import CorefDocument, write_document

from ..models.coref_head import HEAD_NAME, CorefHead, CorefHeadConfig, genre_index, segment_distance_buckets
from ..user_errors import UserInputError
from .finetune_base import ExampleDataset, LongformerFinetuneConfig, LongformerFinetuneTask
from .token_classes import CLS

logger = logging.getLogger(__name__)


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
    coref_max_segments: int = field(default=0, metadata={"help": "segment-distance feature buckets; 0: follow "
                                                             "--segment-length (the segments of the reference's "
                                                             "1,152-subword training window: 3 at 384, 1 at 4,096)"})


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
        self.split, self.tokens, self.records, self.segment_length = split, tokens, records, segment_length
        super().__init__(tokens.sizes + 2 * (-(-tokens.sizes // (segment_length - 2))), dictionary, global_classes,
                         multiple, shuffle, seed)

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

    def collate(self, samples):
        sources = [s for sample in samples for s in sample["segments"]]
        first_row = np.cumsum([0] + [len(s["segments"]) for s in samples])[:-1]
        docs = [{key: s[key] for key in ("sentence", "speaker", "segment", "genre", "gold_starts", "gold_ends",
                                          "gold_clusters", "cols")} | {"rows": s["rows"] + int(r), "id": s["id"]}
                for s, r in zip(samples, first_row)]
        return self.batch(samples, sources, self.net_input(sources, [cls_only(len(t)) for t in sources]),
                          split=self.split, documents=docs)


@register_task("longformer_coref", dataclass=LongformerCorefConfig)
class LongformerCorefTask(LongformerFinetuneTask):
    cfg: LongformerCorefConfig
    DEFAULT_GLOBAL_CLASSES = "cls"
    FIELDS = ALIGNED = ("tokens",)
    RECORDS, PREPARE = "coref", "ontonotes"
    ITEMS = "documents"
    CUTS_TO_FIT = True  # a document of any length is cut into segments that fit

    def __init__(self, cfg, dictionary):
        super().__init__(cfg, dictionary)
        if cfg.segment_length == 0:
            cfg.segment_length = cfg.max_positions
        if not 3 <= cfg.segment_length <= cfg.max_positions:
            raise UserInputError(f"--segment-length {cfg.segment_length} must be 0 or between 3 and --max-positions "
                                 f"{cfg.max_positions} (<s> and </s> included)")
        if cfg.coref_max_segments < 0:
            raise UserInputError(f"--coref-max-segments must be 0 (follow --segment-length) or positive, "
                                 f"got {cfg.coref_max_segments}")
        if cfg.coref_max_segments == 0:
            cfg.coref_max_segments = segment_distance_buckets(cfg.segment_length)
        if cfg.head_lr_multiplier <= 0:
            raise UserInputError(f"--head-lr-multiplier must be positive, got {cfg.head_lr_multiplier}")
        self.predictions: Dict[str, Dict[int, list]] = {}  # split -> document index -> predicted word clusters

    def build_dataset(self, split, fields, records):
        logger.info(f"{split}: segments of {self.cfg.segment_length} subwords")
        return CorefDataset(split, fields["tokens"], records, self.dictionary, self.cfg.segment_length,
                            **self.batching(split))

    def add_head(self, model) -> None:
        if HEAD_NAME not in model.span_heads:
            cfg = self.cfg
            model.span_heads[HEAD_NAME] = CorefHead(CorefHeadConfig(
                embed_dim=model.args.encoder_embed_dim, max_width=cfg.coref_max_span_width,
                ffnn_size=cfg.coref_ffnn_size, dropout=cfg.coref_dropout, max_antecedents=cfg.coref_max_antecedents,
                max_segments=cfg.coref_max_segments))
        # fairseq's parameter-group tags (the composite optimizer's); compat reads lr_scale
        for name, p in model.named_parameters():
            head = name.startswith(f"span_heads.{HEAD_NAME}.")
            p.param_group = "coref_head" if head else "encoder"
            p.optim_overrides = {"optimizer": {"lr_scale": self.cfg.head_lr_multiplier if head else 1.0}}

    def keep_prediction(self, split: str, index: int, clusters) -> None:
        if self.cfg.write_conll:
            self.predictions.setdefault(split, {})[index] = clusters

    def post_validate(self, model, stats, agg):
        """Write the validation's predictions (and the key) when --write-conll is set."""
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
