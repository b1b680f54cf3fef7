"""Task ``longformer_wikihop``: multiple-choice multi-hop QA (the paper's WikiHop setting).

Input ``<s> [q] question [/q] [ent] candidate [/ent] ... </s> support </s> support </s> ...``; the
four markers are added to the dictionary after ``<mask>`` (pretrained rows keep their ids; the
model grows its embedding, ``models/vocabulary.py``). Token classes: ``<s>`` cls, ``[q] question
[/q]`` question, ``[ent] candidate [/ent]`` candidate, the supports none; global attention on the
question and candidates by default (``--global-classes question,candidate``, the paper's choice).
An input longer than ``--max-positions`` is cut into chunks, each the whole question-and-candidate
prefix followed by the next piece of the supports; the criterion averages each candidate's logit
(the candidate head at its ``[ent]`` token, or with ``--score-at-name`` at the candidate's first
token) over an example's chunks (the paper's chunking). One
dataset item is one example with all its chunks. Data: ``longformer-prepare-task wikihop``.
"""
from dataclasses import dataclass, field
from typing import List

import numpy as np
import torch
from fairseq.data import Dictionary
from fairseq.tasks import register_task

from ..models.heads import LongformerCandidateHead
from .finetune_base import (
    ExampleDataset, LongformerFinetuneConfig, LongformerFinetuneTask, first_offsets, join_pieces,
)
from .token_classes import CANDIDATE, CLS, QUESTION

MARKERS = ("[q]", "[/q]", "[ent]", "[/ent]")


@dataclass
class LongformerWikiHopConfig(LongformerFinetuneConfig):
    candidate_head_name: str = field(default="wikihop", metadata={"help": "name of the candidate-scoring head"})
    score_at_name: bool = field(default=False, metadata={
        "help": "read each candidate's score at its first token instead of its [ent] marker: a global name "
                "token can find the support's mentions of itself by identity, the [ent] marker (the same "
                "token for every candidate) must first learn to attend to the name beside it, which a "
                "model trained from scratch does not learn in a short run (the WikiHop learning check)"})


class WikiHopDataset(ExampleDataset):
    """Items: an example's chunks (each (N,) tokens with (N,) token classes), the positions of its
    candidates' ``[ent]`` tokens, or with ``score_at_name`` of their first tokens (the same in every
    chunk), and the answer's index."""

    def __init__(self, questions, candidates, supports, records: List[dict], dictionary: Dictionary,
                 max_positions: int, global_classes, multiple: int, shuffle: bool, seed: int,
                 score_at_name: bool = False):
        self.score_at_name = score_at_name
        self.questions, self.candidates, self.supports, self.records = questions, candidates, supports, records
        self.marker = {m: dictionary.index(m) for m in MARKERS}
        counts = np.array([r["candidates"] for r in records], dtype=np.int64)
        self.first_candidate = first_offsets(counts)
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
        super().__init__(chunks * prefix + supports.sizes, dictionary, global_classes, multiple, shuffle, seed)

    def prefix(self, index: int):
        """(tokens, classes, scored positions) of ``<s> [q] question [/q] ([ent] candidate [/ent])* </s>``:
        each candidate's ``[ent]``, or its first token with ``score_at_name``."""
        d, m = self.dictionary, self.marker
        pieces = [([d.bos()], CLS), ([m["[q]"], *self.questions[index].tolist(), m["[/q]"]], QUESTION)]
        first, count = int(self.first_candidate[index]), int(self.records[index]["candidates"])
        starts, at = [], len(pieces[0][0]) + len(pieces[1][0])
        for c in range(first, first + count):
            piece = [m["[ent]"], *self.candidates[c].tolist(), m["[/ent]"]]
            pieces.append((piece, CANDIDATE))
            starts.append(at + int(self.score_at_name))
            at += len(piece)
        pieces.append(([d.eos()], 0))
        return (*join_pieces(pieces), starts)

    def __getitem__(self, index):
        tokens, classes, starts = self.prefix(index)
        supports, room = self.supports[index].long(), int(self.room[index])
        chunks = [(torch.cat([tokens, supports[s:s + room]]),
                   torch.cat([classes, classes.new_zeros(len(supports[s:s + room]))]))
                  for s in range(0, len(supports), room)]
        return {"id": index, "chunks": chunks, "candidates": starts, "target": int(self.records[index]["answer"])}

    def collate(self, samples):
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
        return self.batch(
            samples, sources, self.net_input(sources, classes),
            candidate_positions=positions,  # (R, K) scored position of each candidate in each chunk
            candidate_valid=valid,  # (B, K) False where an example has fewer than K candidates
            chunk_example=torch.tensor(example),  # (R,) the example each chunk belongs to
            target=torch.tensor([s["target"] for s in samples]))


@register_task("longformer_wikihop", dataclass=LongformerWikiHopConfig)
class LongformerWikiHopTask(LongformerFinetuneTask):
    cfg: LongformerWikiHopConfig
    DEFAULT_GLOBAL_CLASSES = "question,candidate"
    MARKERS = MARKERS
    FIELDS = ("question", "candidates", "supports")
    ALIGNED = ("question", "supports")  # the candidates binary holds all of them, several per example
    RECORDS, PREPARE = "choices", "wikihop"
    CUTS_TO_FIT = True  # an example's size counts all its chunks, and each chunk fits

    def build_dataset(self, split, fields, records):
        return WikiHopDataset(fields["question"], fields["candidates"], fields["supports"], records, self.dictionary,
                              self.cfg.max_positions, **self.batching(split), score_at_name=self.cfg.score_at_name)

    def add_head(self, model) -> None:
        self.add_span_head(model, self.cfg.candidate_head_name, LongformerCandidateHead)
