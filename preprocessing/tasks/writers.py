"""The writers that binarize the readers' examples: the base ``SplitWriter`` and the writers of
the four plain shapes (MultiHop's and OntoNotes' build on the base in ``multihop_writer`` and
``ontonotes``; ``shapes.write_splits`` picks a shape's writer and runs it), and the statistics.

Layouts (``--destdir``):
  Classification  input0/{split}.bin/.idx + input0/dict.txt (tokens, each item ending in </s>),
                  label/{split}.bin/.idx + label/dict.txt: fairseq ``sentence_prediction``'s layout
  QA              {split}.question.bin/.idx, {split}.context.bin/.idx (no specials), dict.txt and
                  {split}.qa.jsonl: per example the gold answer texts, every token span where an
                  answer occurs in the context (inclusive, context token indices), each context
                  token's character span (for the predicted answer text), the answer normalization
  Summary         {split}.src-tgt.{src,tgt}.bin/.idx + dict.{src,tgt}.txt (one dictionary): fairseq
                  ``translation``'s layout with --source-lang src --target-lang tgt, items ending
                  in </s>, sources cut to --max-source-tokens, targets to --max-target-tokens
  MultipleChoice  {split}.question.bin/.idx (one item per example), {split}.candidates.bin/.idx
                  (one item per candidate, the examples' candidates in order), {split}.supports.bin
                  /.idx (one item per example: each support followed by </s>), dict.txt (the
                  tokenizer's: task ``longformer_wikihop`` adds [q] [/q] [ent] [/ent] after
                  ``<mask>``) and {split}.choices.jsonl: per example its id, candidate count and
                  the answer's index
  MultiHop        HotpotQA's question, titles and sentences cut to one model input, and
                  {split}.hotpot.jsonl (the ``multihop_writer`` module)
  all             stats.json / stats.md: examples, the paper's Table 7 statistics (mean and 95th
                  percentile wordpieces of the whole model input, before any cut: ``tokens``),
                  the same of what was written (``tokens_written``: TriviaQA's training pages and
                  arXiv's sources are cut), dropped records per reason
"""
from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..binarize import make_split_builder
from ..tokenizer import EOS, NUM_SPECIALS, write_dict
from .answer_spans import words_of
from .examples import QA, BadExample, Classification, MultipleChoice, Summary


def percentiles(lengths: Sequence[int]) -> dict:
    if not lengths:
        return {"mean": 0, "p50": 0, "p90": 0, "p95": 0, "max": 0}
    x = np.asarray(lengths)
    return {"mean": round(float(x.mean()), 1), "p50": int(np.percentile(x, 50)), "p90": int(np.percentile(x, 90)),
            "p95": int(np.percentile(x, 95)), "max": int(x.max())}


class Builders:
    """fairseq mmap builders keyed by path prefix (``builder.add_item``, then ``finalize``)."""

    def __init__(self, vocab_size: int):
        self.vocab_size, self.builders = vocab_size, {}

    def add(self, prefix: str, tokens: np.ndarray) -> None:
        import torch  # here: the readers, and the scorer's conll2012, import this package without torch

        if prefix not in self.builders:
            os.makedirs(os.path.dirname(prefix), exist_ok=True)
            self.builders[prefix] = make_split_builder(prefix, self.vocab_size)
        self.builders[prefix].add_item(torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int32)))

    def finalize(self) -> None:
        for prefix, builder in self.builders.items():
            builder.finalize(prefix + ".idx")


def encode_words(tokenizer, text: str, spans: Sequence[Tuple[int, int]]) -> Tuple[np.ndarray, np.ndarray]:
    """Tokens of ``text`` encoded word by word (a GPT-2 word after the first carries its leading
    space, as in running text; sentencepiece marks word starts itself), and the index of the
    word each token belongs to: the bridge from word spans to token spans and character spans."""
    space = " " if tokenizer.__class__.__name__ == "Gpt2Tokenizer" else ""
    pieces = [text[s:e] if i == 0 else space + text[s:e] for i, (s, e) in enumerate(spans)]
    encoded = tokenizer.encode_lines(pieces) if pieces else []
    tokens = np.concatenate(encoded) if encoded else np.zeros(0, dtype=np.int64)
    word = np.repeat(np.arange(len(encoded)), [len(t) for t in encoded])
    return tokens.astype(np.int64), word


def token_spans(word_spans: Sequence[Tuple[int, int]], token_word: np.ndarray, n_words: int) -> List[Tuple[int, int]]:
    """Word spans (inclusive) -> token spans (inclusive); a span over words without tokens is dropped."""
    first_token = np.searchsorted(token_word, np.arange(n_words), side="left")
    last_token = np.searchsorted(token_word, np.arange(n_words), side="right") - 1
    spans = {(int(first_token[a]), int(last_token[b])) for a, b in word_spans}
    return sorted((a, b) for a, b in spans if a <= b)


class SplitWriter:
    """Writes one shape's examples of every split into ``folder``; ``write`` returns the model
    input length (wordpieces, specials included) of the example before and after any cut, for
    the statistics. ``side_file``: the name after ``<split>.`` of a JSON-lines file written beside
    the binaries, one record per example, open as ``side`` while a split is written."""
    side_file: Optional[str] = None
    side = None

    def __init__(self, folder: str, tokenizer, options):
        self.folder, self.tokenizer, self.options = folder, tokenizer, options
        self.builders = Builders(tokenizer.dictionary_size)
        self.token_counts: Counter = Counter()

    def path(self, *parts: str) -> str:
        return os.path.join(self.folder, *parts)

    def count(self, split: str, *arrays: np.ndarray) -> None:
        if split == "train":
            for tokens in arrays:
                self.token_counts.update(tokens.tolist())

    def counts(self) -> np.ndarray:
        counts = np.zeros(self.tokenizer.dictionary_size, dtype=np.int64)
        for token, n in self.token_counts.items():
            counts[token] = n
        return counts

    def write_dictionary(self, folder: str, names: Sequence[str] = ("dict.txt",)) -> None:
        for name in names:
            if self.options.srcdict is not None:
                shutil.copyfile(self.options.srcdict, os.path.join(folder, name))
            else:
                write_dict(os.path.join(folder, name), self.tokenizer.symbols, self.counts())

    def start_split(self, split: str) -> None:
        if self.side_file:
            self.side = open(self.path(f"{split}.{self.side_file}"), "w", encoding="utf-8")

    def end_split(self, split: str) -> None:
        if self.side is not None:
            self.side.close()
            self.side = None


class ClassificationWriter(SplitWriter):
    def __init__(self, folder, tokenizer, options):
        super().__init__(folder, tokenizer, options)
        self.labels: Dict[str, int] = {}
        self.label_counts: Counter = Counter()

    def write(self, split: str, example: Classification) -> int:
        if example.label not in self.labels:
            if split != "train":
                raise BadExample("label not in train")
            self.labels[example.label] = len(self.labels)
        tokens = self.tokenizer.encode_lines([example.text])[0]
        if len(tokens) == 0:
            raise BadExample("no tokens")
        self.builders.add(self.path("input0", split), np.append(tokens, EOS))
        self.builders.add(self.path("label", split), np.array([NUM_SPECIALS + self.labels[example.label], EOS]))
        self.count(split, tokens)
        if split == "train":
            self.label_counts[example.label] += 1
        return len(tokens) + 2, len(tokens) + 2  # <s> text </s>

    def finish(self, stats: dict) -> None:
        self.builders.finalize()
        self.write_dictionary(self.path("input0"))
        with open(self.path("label", "dict.txt"), "w", encoding="utf-8") as f:
            f.writelines(f"{label} {self.label_counts[label]}\n" for label in self.labels)
        stats["labels"] = {label: self.label_counts[label] for label in self.labels}


class QAWriter(SplitWriter):
    side_file = "qa.jsonl"

    def write(self, split: str, example: QA) -> int:
        tokenizer = self.tokenizer
        q_tokens, _ = encode_words(tokenizer, example.question, words_of(example.question))
        if len(q_tokens) == 0:
            raise BadExample("no tokens")
        words = words_of(example.context)
        c_tokens, token_word = encode_words(tokenizer, example.context, words)
        whole = len(q_tokens) + len(c_tokens) + 4  # <s> q </s></s> c </s>
        gold = token_spans(example.spans, token_word, len(words))
        if example.max_context_tokens is not None and len(c_tokens) > example.max_context_tokens:
            c_tokens, token_word = c_tokens[:example.max_context_tokens], token_word[:example.max_context_tokens]
            gold = [(a, b) for a, b in gold if b < len(c_tokens)]
        if not gold and example.require_answer:
            raise BadExample("no answer span in the tokens" if example.spans else "no answer in the context")
        if len(c_tokens) == 0:
            raise BadExample("no tokens")
        self.builders.add(self.path(f"{split}.question"), q_tokens)
        self.builders.add(self.path(f"{split}.context"), c_tokens)
        chars = np.asarray(words, dtype=np.int64)[token_word]
        record = {**example.key, "answers": sorted(set(example.gold)), "normalization": example.normalization,
                  "spans": gold, "context": example.context, "token_chars": chars.tolist()}
        self.side.write(json.dumps(record) + "\n")
        self.count(split, q_tokens, c_tokens)
        return whole, len(q_tokens) + len(c_tokens) + 4

    def finish(self, stats: dict) -> None:
        self.builders.finalize()
        self.write_dictionary(self.folder)


class SummaryWriter(SplitWriter):
    def write(self, split: str, example: Summary) -> int:
        source = self.tokenizer.encode_lines([example.source])[0]
        whole = len(source) + 1
        source = source[: self.options.max_source_tokens - 1]
        target = self.tokenizer.encode_lines([example.target])[0][: self.options.max_target_tokens - 1]
        if len(source) == 0 or len(target) == 0:
            raise BadExample("no tokens")
        self.builders.add(self.path(f"{split}.src-tgt.src"), np.append(source, EOS))
        self.builders.add(self.path(f"{split}.src-tgt.tgt"), np.append(target, EOS))
        self.count(split, source, target)
        return whole, len(source) + 1

    def finish(self, stats: dict) -> None:
        self.builders.finalize()
        self.write_dictionary(self.folder, ("dict.src.txt", "dict.tgt.txt"))


class MultipleChoiceWriter(SplitWriter):
    side_file = "choices.jsonl"

    def write(self, split: str, example: MultipleChoice) -> int:
        encode = self.tokenizer.encode_lines
        question = encode([example.question])[0]
        candidates = encode(example.candidates)
        supports = [np.append(tokens, EOS) for tokens in encode(example.supports) if len(tokens)]
        if len(question) == 0:
            raise BadExample("question without tokens")
        if any(len(c) == 0 for c in candidates):
            raise BadExample("candidate without tokens")
        if not supports:
            raise BadExample("empty supports")
        supports = np.concatenate(supports)
        self.builders.add(self.path(f"{split}.question"), question)
        for tokens in candidates:
            self.builders.add(self.path(f"{split}.candidates"), tokens)
        self.builders.add(self.path(f"{split}.supports"), supports)
        self.side.write(json.dumps({**example.key, "candidates": len(candidates), "answer": example.answer}) + "\n")
        self.count(split, question, supports, *candidates)
        whole = 4 + len(question) + sum(len(c) + 2 for c in candidates) + len(supports)
        return whole, whole

    def finish(self, stats: dict) -> None:
        self.builders.finalize()
        self.write_dictionary(self.folder)


def render_markdown(stats: dict) -> str:
    lines = [f"# {stats['kind']} data ({stats['tokenizer']} tokens)", "",
             "Model input lengths in wordpieces, specials included, before any cut (the paper's Table 7: "
             "mean and p95), and the mean and max of what was written.", "",
             "| split | examples | dropped | mean tokens | p50 | p90 | p95 | max | written mean | written max |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for split, s in stats["splits"].items():
        t, w = s["tokens"], s["tokens_written"]
        lines.append(f"| {split} | {s['examples']} | {s['dropped']} | {t['mean']} | {t['p50']} | {t['p90']} "
                     f"| {t['p95']} | {t['max']} | {w['mean']} | {w['max']} |")
    for split, s in stats["splits"].items():
        for reason, n in s["dropped_by_reason"].items():
            lines.append(f"\n{split}: {n} dropped: {reason}")
        for what, n in s.get("truncated", {}).items():
            lines.append(f"\n{split}: {n} {what}")
    return "\n".join(lines) + "\n"


def report(stats: dict) -> str:
    """One line per split, then one line per reason records were dropped."""
    lines = []
    for split, s in stats["splits"].items():
        t = s["tokens"]
        lines.append(f"{split}: {s['examples']} examples, {s['dropped']} dropped, wordpieces mean {t['mean']} "
                     f"p50 {t['p50']} p95 {t['p95']} max {t['max']} (written: max {s['tokens_written']['max']})")
    for split, s in stats["splits"].items():
        lines.extend(f"{split}: {n} dropped: {reason}" for reason, n in s["dropped_by_reason"].items())
        lines.extend(f"{split}: {n} {what}" for what, n in s.get("truncated", {}).items())
    return "\n".join(lines)
