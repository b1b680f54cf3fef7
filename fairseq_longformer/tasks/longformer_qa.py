"""Task ``longformer_qa``: extractive question answering over long contexts (the paper's
TriviaQA setting).

Input ``<s> question </s></s> context </s>``, ``<s>`` of token class ``cls``, the question's tokens
of class ``question``; global attention on both by default (``--global-classes cls,question``:
every position before the first ``</s>``, which is also what transformers'
``LongformerForQuestionAnswering`` uses when given no mask) or none (``--global-attention none``). A context
longer than the model is split into overlapping windows: each window holds the question and
``--max-positions`` - (question + 4) context tokens, consecutive windows start ``--doc-stride``
context tokens apart (at most a window's context length: no token is skipped). One dataset item
is one example with all its windows, so every batch holds whole examples and the predictions of
an example's windows can be combined (the best start + end log-probability over all windows).

Targets: every occurrence of an answer inside a window (``longformer-prepare-task qa`` lists them
all); a window without one points at ``<s>``. Outside training, the examples whose records share a
``question_id`` (TriviaQA: one example per question and page) form one item, so the prediction is
the best span over all of the question's pages: TriviaQA's official Wikipedia evaluation scores
questions, not question-page pairs. Data: ``{split}.question/.context`` binaries and
``{split}.qa.jsonl`` (answer texts, spans, the context's character offsets per token).
"""
import logging
from dataclasses import dataclass, field
from typing import List

import numpy as np
import torch
from fairseq.data import Dictionary
from fairseq.tasks import register_task

from .finetune_base import ExampleDataset, LongformerFinetuneConfig, LongformerFinetuneTask
from .token_classes import CLS, QUESTION

logger = logging.getLogger(__name__)


@dataclass
class LongformerQAConfig(LongformerFinetuneConfig):
    doc_stride: int = field(default=1024, metadata={"help": "context tokens between the starts of two windows of "
                                                            "one example (at most a window's context length)"})
    max_question_tokens: int = field(default=64, metadata={"help": "questions are cut to this many tokens"})
    max_answer_tokens: int = field(default=30, metadata={"help": "longest predicted answer, in tokens"})
    span_head_name: str = field(default="qa", metadata={"help": "name of the span (start/end) head"})


def group_by_question(records: List[dict]) -> List[List[int]]:
    """Example indices grouped by their record's ``question_id`` in first-appearance order; a
    record without one stands alone."""
    groups: List[List[int]] = []
    where = {}
    for index, record in enumerate(records):
        key = record.get("question_id")
        if key is None:
            groups.append([index])
            continue
        if key not in where:
            where[key] = len(groups)
            groups.append([])
        groups[where[key]].append(index)
    return groups


def window_starts(context_len: int, window: int, stride: int) -> List[int]:
    """Start offsets of the windows of ``window`` tokens covering ``context_len`` tokens."""
    stride = max(1, min(stride, window))
    starts = [0]
    while starts[-1] + window < context_len:
        starts.append(starts[-1] + stride)
    return starts


def question_classes(length: int, question_len: int) -> torch.Tensor:
    """(length,) token classes of ``<s> question </s></s> context </s>``: cls, question, then none."""
    classes = torch.zeros(length, dtype=torch.long)
    classes[0] = CLS
    classes[1:1 + question_len] = QUESTION
    return classes


class QADataset(ExampleDataset):
    """Items: the windows of one group of examples (``groups``: one example in training, one
    question's pages in evaluation), each window ``<s> question </s></s> context piece </s>``."""

    def __init__(self, questions, contexts, records: List[dict], dictionary: Dictionary, cfg: LongformerQAConfig,
                 groups: List[List[int]], global_classes, multiple: int, shuffle: bool, seed: int):
        self.questions, self.contexts, self.records = questions, contexts, records
        self.cfg, self.groups = cfg, groups
        q_lens = np.minimum(questions.sizes, cfg.max_question_tokens)
        prefix = q_lens + 3  # <s> question </s></s>
        self.window = cfg.max_positions - prefix - 1  # context tokens per window (then </s>)
        if (self.window < 1).any():
            raise ValueError(f"--max-positions {cfg.max_positions} leaves no room for the context after a question "
                             f"of {int(q_lens.max())} tokens: lower --max-question-tokens")
        sizes = [sum(int(prefix[i]) + min(int(self.window[i]), int(contexts.sizes[i]) - s) + 1
                     for s in window_starts(int(contexts.sizes[i]), int(self.window[i]), cfg.doc_stride))
                 for i in range(len(records))]
        super().__init__(np.array([sum(sizes[i] for i in group) for group in groups]), dictionary, global_classes,
                         multiple, shuffle, seed)

    def __getitem__(self, index):
        """All windows of the group's examples (one example, or one question's pages)."""
        item = {"id": index, "windows": [], "offsets": [], "records": []}
        for member in self.groups[index]:
            one = self.example(member)
            item["windows"] += one["windows"]
            item["offsets"] += one["offsets"]
            item["records"] += [one["record"]] * len(one["windows"])
            item["prefix"], item["question_len"] = one["prefix"], one["question_len"]
        return item

    def example(self, index):
        d = self.dictionary
        question = self.questions[index][: self.cfg.max_question_tokens]
        context = self.contexts[index]
        head = torch.cat([question.new_tensor([d.bos()]), question, question.new_tensor([d.eos(), d.eos()])])
        window = int(self.window[index])
        windows, offsets = [], []
        for start in window_starts(len(context), window, self.cfg.doc_stride):
            windows.append(torch.cat([head, context[start:start + window], head.new_tensor([d.eos()])]))
            offsets.append(start)
        return {"id": index, "windows": windows, "offsets": offsets, "prefix": len(head),
                "question_len": len(question), "record": self.records[index]}

    def collate(self, samples):
        sources, classes, example, prefix, offset, length, records = [], [], [], [], [], [], []
        for b, s in enumerate(samples):
            for w, off, record in zip(s["windows"], s["offsets"], s["records"]):
                sources.append(w)
                classes.append(question_classes(len(w), s["question_len"]))
                example.append(b)
                prefix.append(s["prefix"])
                offset.append(off)
                length.append(len(w) - s["prefix"] - 1)
                records.append(record)
        net_input = self.net_input(sources, classes)
        shape = net_input["src_tokens"].shape
        start_gold, end_gold = torch.zeros(shape, dtype=torch.bool), torch.zeros(shape, dtype=torch.bool)
        for row in range(len(sources)):
            spans = records[row]["spans"]
            for first, last in spans:
                if offset[row] <= first and last < offset[row] + length[row]:
                    start_gold[row, prefix[row] + first - offset[row]] = True
                    end_gold[row, prefix[row] + last - offset[row]] = True
            if not start_gold[row].any():  # no answer in this window: point at <s>
                start_gold[row, 0] = end_gold[row, 0] = True
        return self.batch(
            samples, sources, net_input, start_gold=start_gold, end_gold=end_gold,
            window_example=torch.tensor(example), window_prefix=torch.tensor(prefix),
            window_offset=torch.tensor(offset), window_length=torch.tensor(length),
            records=[s["records"][0] for s in samples],  # the answers every window of an item shares
            window_records=records)  # each window's own page (context, token characters)


@register_task("longformer_qa", dataclass=LongformerQAConfig)
class LongformerQATask(LongformerFinetuneTask):
    cfg: LongformerQAConfig
    DEFAULT_GLOBAL_CLASSES = "cls,question"
    FIELDS = ALIGNED = ("question", "context")
    RECORDS, PREPARE = "qa", "qa"
    CUTS_TO_FIT = True  # an example's size counts all its windows, and each window fits

    def __init__(self, cfg, dictionary: Dictionary):
        super().__init__(cfg, dictionary)
        if cfg.doc_stride < 1 or cfg.max_answer_tokens < 1 or cfg.max_question_tokens < 1:
            raise ValueError("--doc-stride, --max-answer-tokens and --max-question-tokens must be >= 1")

    def build_dataset(self, split, fields, records):
        training = split == "train"
        groups = [[i] for i in range(len(records))] if training else group_by_question(records)
        if len(groups) != len(records):
            logger.info(f"{split}: {len(records)} examples of {len(groups)} questions, scored per question")
        return QADataset(fields["question"], fields["context"], records, self.dictionary, self.cfg, groups,
                         **self.batching(split))

    def add_head(self, model) -> None:
        model.register_span_head(self.cfg.span_head_name)
