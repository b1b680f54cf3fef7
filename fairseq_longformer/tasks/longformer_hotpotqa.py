"""Task ``longformer_hotpotqa``: multi-hop QA with supporting facts (HotpotQA, distractor setting),
the model of both of the paper's stages: stage one reads all ten paragraphs in one input, stage two
the paragraphs ``longformer-select-paragraphs`` kept by stage one's paragraph scores (the same
reader prepares both; ``recipes/finetune_hotpotqa.sh`` with ``TWO_STAGE=1`` runs both).

Input ``<s> [q] question [/q] <t> title </t> sentence [s] sentence [s] ... <t> title </t> ... </s>``;
the five markers are added to the dictionary after ``<mask>`` (pretrained rows keep their ids; the
model grows its embedding, ``models/vocabulary.py``). Token classes: ``<s>`` cls, ``[q] question
[/q]`` question, ``<t> title </t>`` title, each ``[s]`` sentence, the sentences' words none; global
attention on question, titles and sentence markers by default (``--global-classes
question,title,sentence``). One head (``models/heads.py``) gives the answer's start and end over the
sentences' tokens, the question type (span / yes / no) at ``<s>``, a supporting-paragraph logit at
each ``<t>`` (or, ``--paragraph-score-token title``, at the title's first token) and a
supporting-sentence logit at each ``[s]``; the criterion adds the four losses
with the ``--*-loss-weight`` flags; validation decodes the supporting facts from exactly two
paragraphs (``--evidence-decoding``, ``criterions/hotpotqa_decoding.py``). Each example is one
input: ``longformer-prepare-task hotpotqa --max-input-tokens`` cut it to fit (and counted the supporting facts it cut away).

Validation is scored over every question of the published file: a question the reader dropped
(its record is malformed, or the paragraph selection of stage one removed its answer) is no
example, but scores 0 on every metric. The file's question count is the prepared folder's
``stats.json`` (examples written plus records dropped, per split); the dataset's first item
stands for itself and the dropped questions (``stands_for``), so that the batches' ``questions``
sum to it over one pass (else stage two, which loses the questions whose answer selection cut
away, would read high by exactly their share).
"""
import json
import logging
import os
from dataclasses import dataclass, field
from typing import List

import numpy as np
import torch
from fairseq.data import Dictionary
from fairseq.dataclass import ChoiceEnum
from fairseq.tasks import register_task

from ..models.heads import ANSWER_DECODINGS, EVIDENCE_DECODINGS, LongformerHotpotQAHead
from ..runtime.errors import UserInputError
from .finetune_base import (
    ExampleDataset, LongformerFinetuneConfig, LongformerFinetuneTask, first_offsets, join_pieces,
)
from .token_classes import CLS, QUESTION, SENTENCE, TITLE

MARKERS = ("[q]", "[/q]", "<t>", "</t>", "[s]")
# where a paragraph's score is read, as an offset from its <t>: the marker itself (the paper's; a
# pretrained encoder's <t> knows its title) or the title's first token. A global <t> attends to
# the whole input with one query for every paragraph, the <t> embedding plus a position: a
# from-scratch encoder has no position-to-position attention that would show it its own title,
# and its paragraph loss stays at a constant predictor's; the title token itself can match the
# question's copy of its name by identity.
PARAGRAPH_SCORE_TOKENS = {"marker": 0, "title": 1}
logger = logging.getLogger(__name__)


@dataclass
class LongformerHotpotQAConfig(LongformerFinetuneConfig):
    hotpotqa_head_name: str = field(default="hotpotqa", metadata={"help": "name of the HotpotQA head"})
    max_answer_tokens: int = field(default=30, metadata={"help": "longest predicted answer, in tokens"})
    span_loss_weight: float = field(default=1.0, metadata={"help": "weight of the answer start/end loss"})
    type_loss_weight: float = field(default=1.0, metadata={"help": "weight of the question-type (span/yes/no) loss"})
    paragraph_loss_weight: float = field(default=1.0, metadata={"help": "weight of the supporting-paragraph loss"})
    sentence_loss_weight: float = field(default=1.0, metadata={"help": "weight of the supporting-sentence loss"})
    paragraph_score_token: ChoiceEnum(tuple(PARAGRAPH_SCORE_TOKENS)) = field(
        default="marker", metadata={"help": "where the supporting-paragraph logit is read: the paragraph's <t> "
                                            "(marker, the paper's) or its title's first token (title: an encoder "
                                            "trained from scratch, whose global <t> has no view of its own title)"})
    evidence_decoding: ChoiceEnum(EVIDENCE_DECODINGS) = field(
        default="two_paragraphs", metadata={"help": "supporting facts from exactly two paragraphs (two_paragraphs, "
                                                    "the paper's) or every sentence above probability 1/2 (threshold)"})
    answer_decoding: ChoiceEnum(ANSWER_DECODINGS) = field(
        default="anywhere", metadata={"help": "where the answer span may lie: anywhere in the input's sentences, or "
                                              "only in the paragraphs of the decoded supporting facts (evidence)"})


class HotpotQADataset(ExampleDataset):
    """Items: an example's input (N,) tokens and (N,) token classes, the positions of its paragraph
    scores (``titles``: each ``<t>`` plus ``title_offset``) and of its ``[s]`` markers, the input
    position of each of its sentence tokens, its record, and how many of the file's questions it
    stands for (``stands_for``: 1, and for item 0 also the
    ``file_questions - len(records)`` questions the reader dropped)."""

    def __init__(self, questions, titles, sentences, records: List[dict], dictionary: Dictionary,
                 max_positions: int, global_classes, multiple: int, shuffle: bool, seed: int,
                 file_questions: int, title_offset: int = 0):
        self.questions, self.titles, self.sentences, self.records = questions, titles, sentences, records
        self.dropped = file_questions - len(records)
        self.title_offset = title_offset
        self.marker = {m: dictionary.index(m) for m in MARKERS}
        paragraphs = [len(r["paragraphs"]) for r in records]
        counts = [sum(n for _, n in r["paragraphs"]) for r in records]  # kept sentences per example
        if sum(paragraphs) != len(titles) or sum(counts) != len(sentences):
            raise ValueError(f"the side file names {sum(paragraphs)} paragraphs and {sum(counts)} sentences, "
                             f"the binaries hold {len(titles)} and {len(sentences)}")
        self.first_title, self.first_sentence = first_offsets(paragraphs), first_offsets(counts)
        title_sizes, sentence_sizes = np.asarray(titles.sizes), np.asarray(sentences.sizes)
        sizes = np.array([4 + int(questions.sizes[i])  # <s> [q] q [/q] ... </s>
                          + int((title_sizes[self.first_title[i]:self.first_title[i] + paragraphs[i]] + 2).sum())
                          + int((sentence_sizes[self.first_sentence[i]:self.first_sentence[i] + counts[i]] + 1).sum())
                          for i in range(len(records))], dtype=np.int64)
        if len(sizes) and sizes.max() > max_positions:
            worst = int(np.argmax(sizes))
            raise ValueError(f"example {records[worst].get('id', worst)} has {int(sizes[worst])} tokens, more than "
                             f"--max-positions {max_positions}: prepare the data with --max-input-tokens {max_positions}")
        super().__init__(sizes, dictionary, global_classes, multiple, shuffle, seed)

    def __getitem__(self, index):
        d, m, record = self.dictionary, self.marker, self.records[index]
        pieces = [([d.bos()], CLS), ([m["[q]"], *self.questions[index].tolist(), m["[/q]"]], QUESTION)]
        at = len(pieces[0][0]) + len(pieces[1][0])
        titles, sentences, token_position = [], [], []
        t, s = int(self.first_title[index]), int(self.first_sentence[index])
        for _, count in record["paragraphs"]:
            piece = [m["<t>"], *self.titles[t].tolist(), m["</t>"]]
            pieces.append((piece, TITLE))
            titles.append(at + self.title_offset)
            at, t = at + len(piece), t + 1
            for _ in range(count):
                words = self.sentences[s].tolist()
                pieces += [(words, 0), ([m["[s]"]], SENTENCE)]
                token_position += range(at, at + len(words))
                sentences.append(at + len(words))
                at, s = at + len(words) + 1, s + 1
        pieces.append(([d.eos()], 0))
        tokens, classes = join_pieces(pieces)
        return {"id": index, "tokens": tokens, "classes": classes, "titles": titles, "sentences": sentences,
                "token_position": token_position, "record": record,
                "stands_for": 1 + (self.dropped if index == 0 else 0)}

    def collate(self, samples):
        sources = [s["tokens"] for s in samples]
        net_input = self.net_input(sources, [s["classes"] for s in samples])
        shape = net_input["src_tokens"].shape
        start_gold, end_gold = torch.zeros(shape, dtype=torch.bool), torch.zeros(shape, dtype=torch.bool)
        context_token = torch.full(shape, -1, dtype=torch.long)  # flat sentence-token index; -1: no word
        for row, s in enumerate(samples):
            positions = torch.tensor(s["token_position"], dtype=torch.long)
            context_token[row, positions] = torch.arange(len(positions))
            for first, last in s["record"]["spans"]:
                start_gold[row, positions[first]] = end_gold[row, positions[last]] = True
        batch = self.batch(
            samples, sources, net_input,
            start_gold=start_gold,  # (B, N) every occurrence of a span answer
            end_gold=end_gold,
            has_span=start_gold.any(dim=1),  # (B,) rows with a span answer left in the input
            context_token=context_token,  # (B, N)
            type_target=torch.tensor([s["record"]["answer_type"] for s in samples]),  # (B,)
            questions=sum(s["stands_for"] for s in samples),  # the file's questions these rows score
            records=[s["record"] for s in samples])
        for kind, gold in (("paragraph", "support_paragraphs"), ("sentence", "support_sentences")):
            where = [s["titles" if kind == "paragraph" else "sentences"] for s in samples]
            width = max(1, max(len(w) for w in where))
            positions = torch.zeros(len(samples), width, dtype=torch.long)
            valid = torch.zeros(len(samples), width, dtype=torch.bool)
            target = torch.zeros(len(samples), width)
            for row, (w, s) in enumerate(zip(where, samples)):
                positions[row, :len(w)] = torch.tensor(w, dtype=torch.long)
                valid[row, :len(w)] = True
                target[row, s["record"][gold]] = 1.0
            batch.update({f"{kind}_positions": positions, f"{kind}_valid": valid, f"{kind}_target": target})  # (B, P|S)
        return batch


@register_task("longformer_hotpotqa", dataclass=LongformerHotpotQAConfig)
class LongformerHotpotQATask(LongformerFinetuneTask):
    cfg: LongformerHotpotQAConfig
    DEFAULT_GLOBAL_CLASSES = "question,title,sentence"
    MARKERS = MARKERS
    FIELDS = ("question", "titles", "sentences")
    ALIGNED = ("question",)  # the titles and sentences binaries hold several per example
    RECORDS, PREPARE = "hotpot", "hotpotqa"

    def __init__(self, cfg, dictionary: Dictionary):
        super().__init__(cfg, dictionary)
        if cfg.max_answer_tokens < 1:
            raise ValueError(f"--max-answer-tokens must be >= 1, got {cfg.max_answer_tokens}")

    def build_dataset(self, split, fields, records):
        questions = self.file_questions(split, len(records))
        logger.info(f"{split}: scored over {questions} questions, {questions - len(records)} of them dropped by the "
                    "reader (malformed, or the answer's paragraph not selected), scored 0")
        return HotpotQADataset(fields["question"], fields["titles"], fields["sentences"], records, self.dictionary,
                               self.cfg.max_positions, **self.batching(split), file_questions=questions,
                               title_offset=PARAGRAPH_SCORE_TOKENS[self.cfg.paragraph_score_token])

    def file_questions(self, split: str, examples: int) -> int:
        """The questions of the file ``split`` was prepared from (``stats.json``: examples written
        plus records dropped), checked against the ``examples`` of its side file."""
        path = os.path.join(self.cfg.data, "stats.json")
        try:
            with open(path, encoding="utf-8") as f:
                stats = json.load(f)["splits"][split]
            written, dropped = int(stats["examples"]), int(stats["dropped"])
        except (OSError, ValueError, KeyError, TypeError):
            raise UserInputError(f"{path} does not count the {split} split's questions: prepare the folder with "
                                 f"longformer-prepare-task {self.PREPARE}")
        if written != examples:
            raise UserInputError(f"{path} counts {written} {split} examples, the side file holds {examples}: "
                                 f"prepare the folder again with longformer-prepare-task {self.PREPARE}")
        return written + dropped

    def add_head(self, model) -> None:
        self.add_span_head(model, self.cfg.hotpotqa_head_name, LongformerHotpotQAHead)
