"""Task ``longformer_wikihop``: multiple-choice multi-hop QA (the paper's WikiHop setting).

Input ``<s> [q] question [/q] [ent] candidate [/ent] ... </s> support </s> support </s> ...``; the
four markers are added to the dictionary after ``<mask>`` (pretrained rows keep their ids; the
model grows its embedding, ``models/vocabulary.py``). Token classes: ``<s>`` cls, ``[q] question
[/q]`` question, ``[ent] candidate [/ent]`` candidate, the supports none; global attention on the
question and candidates by default (``--global-classes question,candidate``, the paper's choice).
An input longer than ``--max-positions`` is cut into chunks, each the whole question-and-candidate
prefix followed by the next piece of the supports; the criterion averages each candidate's logit
(the candidate head at its ``[ent]`` token) over an example's chunks (the paper's chunking). One
dataset item is one example with all its chunks. Data: ``longformer-prepare-task wikihop``.
"""
import json
import logging
import os
from dataclasses import dataclass, field
from typing import List

import numpy as np
import torch
from fairseq.data import Dictionary
from fairseq.tasks import register_task

from ..models.heads import LongformerCandidateHead
from .finetune_base import (
    ExampleDataset, LongformerFinetuneConfig, LongformerFinetuneTask, collate_inputs, global_masks, load_split,
)
from .token_classes import CANDIDATE, CLS, QUESTION

logger = logging.getLogger(__name__)

MARKERS = ("[q]", "[/q]", "[ent]", "[/ent]")


@dataclass
class LongformerWikiHopConfig(LongformerFinetuneConfig):
    candidate_head_name: str = field(default="wikihop", metadata={"help": "name of the candidate-scoring head"})


class WikiHopDataset(ExampleDataset):
    """Items: an example's chunks (each (N,) tokens with (N,) token classes), the positions of its
    candidates' ``[ent]`` tokens (the same in every chunk) and the answer's index."""

    def __init__(self, questions, candidates, supports, records: List[dict], dictionary: Dictionary,
                 max_positions: int, global_classes, multiple: int, shuffle: bool, seed: int):
        self.questions, self.candidates, self.supports, self.records = questions, candidates, supports, records
        self.dictionary, self.max_positions = dictionary, max_positions
        self.global_classes, self.multiple = global_classes, multiple
        self.marker = {m: dictionary.index(m) for m in MARKERS}
        counts = np.array([r["candidates"] for r in records], dtype=np.int64)
        self.first_candidate = np.concatenate([[0], np.cumsum(counts)[:-1]])
        if counts.sum() != len(candidates):
            raise ValueError(f"the choices file names {counts.sum()} candidates, the binary holds {len(candidates)}")
        prefix = 4 + questions.sizes + np.array(  # <s> [q] q [/q] ... </s>
            [sum(candidates.sizes[f:f + n] + 2) for f, n in zip(self.first_candidate, counts)], dtype=np.int64)
        self.room = max_positions - prefix  # support tokens per chunk
        if (self.room < 1).any():
            worst = int(np.argmin(self.room))
            raise ValueError(f"example {records[worst].get('id', worst)}: question and candidates take "
                             f"{int(prefix[worst])} tokens, more than --max-positions {max_positions} allows")
        chunks = -(-supports.sizes // self.room)
        super().__init__(chunks * prefix + supports.sizes, shuffle, seed)

    def prefix(self, index: int):
        """(tokens, classes, [ent] positions) of ``<s> [q] question [/q] ([ent] candidate [/ent])* </s>``."""
        d, m = self.dictionary, self.marker
        pieces = [([d.bos()], CLS), ([m["[q]"], *self.questions[index].tolist(), m["[/q]"]], QUESTION)]
        first, count = int(self.first_candidate[index]), int(self.records[index]["candidates"])
        starts, at = [], len(pieces[0][0]) + len(pieces[1][0])
        for c in range(first, first + count):
            piece = [m["[ent]"], *self.candidates[c].tolist(), m["[/ent]"]]
            pieces.append((piece, CANDIDATE))
            starts.append(at)
            at += len(piece)
        pieces.append(([d.eos()], 0))
        tokens = torch.tensor([t for piece, _ in pieces for t in piece], dtype=torch.long)
        classes = torch.tensor([cls for piece, cls in pieces for _ in piece], dtype=torch.long)
        return tokens, classes, starts

    def __getitem__(self, index):
        tokens, classes, starts = self.prefix(index)
        supports, room = self.supports[index].long(), int(self.room[index])
        chunks = [(torch.cat([tokens, supports[s:s + room]]),
                   torch.cat([classes, classes.new_zeros(len(supports[s:s + room]))]))
                  for s in range(0, len(supports), room)]
        return {"id": index, "chunks": chunks, "candidates": starts, "target": int(self.records[index]["answer"])}

    def collater(self, samples):
        if not samples:
            return {}
        sources = [tokens for s in samples for tokens, _ in s["chunks"]]
        classes = [cls for s in samples for _, cls in s["chunks"]]
        width = max(len(s["candidates"]) for s in samples)
        positions = torch.zeros(len(sources), width, dtype=torch.long)
        valid = torch.zeros(len(samples), width, dtype=torch.bool)
        example, row = [], 0
        for b, s in enumerate(samples):
            valid[b, :len(s["candidates"])] = True
            for _ in s["chunks"]:
                positions[row, :len(s["candidates"])] = torch.tensor(s["candidates"])
                example.append(b)
                row += 1
        return {
            "id": torch.tensor([s["id"] for s in samples]),
            "net_input": collate_inputs(sources, global_masks(classes, self.global_classes),
                                        self.dictionary.pad(), self.multiple),
            "candidate_positions": positions,  # (R, K) [ent] position of each candidate in each chunk
            "candidate_valid": valid,  # (B, K) False where an example has fewer than K candidates
            "chunk_example": torch.tensor(example),  # (R,) the example each chunk belongs to
            "target": torch.tensor([s["target"] for s in samples]),
            "nsentences": len(samples),
            "ntokens": sum(len(t) for t in sources),
        }


@register_task("longformer_wikihop", dataclass=LongformerWikiHopConfig)
class LongformerWikiHopTask(LongformerFinetuneTask):
    cfg: LongformerWikiHopConfig
    DEFAULT_GLOBAL_CLASSES = "question,candidate"

    @classmethod
    def setup_task(cls, cfg, **kwargs):
        dictionary = cls.load_token_dictionary(os.path.join(cfg.data, "dict.txt"))
        for marker in MARKERS:  # after <mask>: a pretrained model's rows keep their ids
            dictionary.add_symbol(marker)
        logger.info(f"dictionary: {len(dictionary)} types (with {' '.join(MARKERS)})")
        return cls(cfg, dictionary)

    def load_dataset(self, split, combine=False, **kwargs):
        prefix = os.path.join(self.cfg.data, split)
        questions = load_split(prefix + ".question", self.dictionary)
        candidates = load_split(prefix + ".candidates", self.dictionary)
        supports = load_split(prefix + ".supports", self.dictionary)
        with open(prefix + ".choices.jsonl", encoding="utf-8") as f:
            records = [json.loads(line) for line in f]
        if not len(questions) == len(supports) == len(records):
            raise ValueError(f"{split}: {len(questions)} questions, {len(supports)} supports, {len(records)} records")
        self.datasets[split] = WikiHopDataset(
            questions, candidates, supports, records, self.dictionary, self.cfg.max_positions, self.global_classes,
            self.cfg.pad_to_multiple, shuffle=split == "train", seed=self.cfg.seed)
        logger.info(f"{split}: {len(records)} examples")
        return self.datasets[split]

    def add_head(self, model) -> None:
        if self.cfg.candidate_head_name not in model.span_heads:
            model.span_heads[self.cfg.candidate_head_name] = LongformerCandidateHead(model.args.encoder_embed_dim)

    def filter_indices_by_size(self, indices, dataset, max_positions=None, ignore_invalid_inputs=False):
        """Nothing to filter: an example's size counts all its chunks, and each chunk fits."""
        return indices
