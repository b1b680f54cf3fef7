"""Binarization of HotpotQA's examples (shape ``MultiHop``), cut to one model input.

The model input (task ``longformer_hotpotqa``) is
``<s> [q] question [/q] <t> title </t> sentence [s] sentence [s] ... <t> title </t> ... </s>``;
the markers enter the dictionary only in the task (after ``<mask>``), so what is written is the
pieces: {split}.question (one item per example), {split}.titles (one item per kept paragraph),
{split}.sentences (one item per kept sentence, possibly empty: a sentence keeps its index, which
the official supporting-fact ids count) and {split}.hotpot.jsonl, per example its id, question
kind, answer text and kind (0 span, 1 yes, 2 no), the kept paragraphs' titles and sentence counts,
every supporting fact as [title, sentence index] (all of them, as the official evaluation scores
them, also those a paragraph selection removed), the kept supporting facts as flat sentence indices and paragraph indices, the answer's
occurrences as inclusive spans of the flat sentence tokens, the kept sentences' text joined by
single spaces and each sentence token's character span in it (for the predicted answer text).

An input longer than ``--max-input-tokens`` keeps the question and the paragraphs and sentences
in their order while whole sentences fit (a cut sentence would shift the supporting-fact
targets); the supporting facts and span answers cut away are counted in the statistics.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict

import numpy as np

from .answer_spans import words_of
from .examples import BadExample, MultiHop
from .writers import SplitWriter, encode_words, token_spans

QUESTION_OVERHEAD = 4  # <s> [q] ... [/q] ... </s>


class MultiHopWriter(SplitWriter):
    side_file = "hotpot.jsonl"

    def __init__(self, folder, tokenizer, options):
        super().__init__(folder, tokenizer, options)
        self.cut = defaultdict(Counter)  # split -> what the --max-input-tokens cut took away

    def write(self, split: str, example: MultiHop):
        encode = self.tokenizer.encode_lines
        question = encode([example.question])[0]
        if len(question) == 0:
            raise BadExample("question without tokens")
        limit = self.options.max_input_tokens
        used = QUESTION_OVERHEAD + len(question)
        if used >= limit:
            raise BadExample("question longer than --max-input-tokens")
        titles, sentences, kept, whole = [], [], [], used
        stop = False
        for title, texts in example.paragraphs:
            title_tokens = encode([title])[0] if title.strip() else np.zeros(0, dtype=np.int64)
            encoded = []
            for text in texts:
                words = words_of(text)
                tokens, token_word = encode_words(self.tokenizer, text, words)
                encoded.append((text, words, tokens, token_word))
            whole += len(title_tokens) + 2 + sum(len(e[2]) + 1 for e in encoded)
            if stop or used + len(title_tokens) + 2 > limit:
                stop = True
                continue
            used += len(title_tokens) + 2
            n = 0
            for item in encoded:
                if used + len(item[2]) + 1 > limit:
                    stop = True
                    break
                used += len(item[2]) + 1
                n += 1
            titles.append(title_tokens)
            sentences.append(encoded[:n])
            kept.append((title, n))
        record = self._record(example, kept, sentences)
        self.cut[split]["supporting facts cut by --max-input-tokens"] += \
            len(example.supporting) - len(record["support_sentences"])
        if example.answer_type == 0 and not record["spans"]:
            self.cut[split]["span answers cut by --max-input-tokens"] += 1
        self.builders.add(self.path(f"{split}.question"), question)
        for tokens in titles:
            self.builders.add(self.path(f"{split}.titles"), tokens)
        for paragraph in sentences:
            for _, _, tokens, _ in paragraph:
                self.builders.add(self.path(f"{split}.sentences"), tokens)
        self.side.write(json.dumps(record) + "\n")
        self.count(split, question, *titles, *(e[2] for p in sentences for e in p))
        return whole, used

    @staticmethod
    def _record(example: MultiHop, kept, sentences) -> dict:
        """The side record of an example whose kept paragraphs are ``kept`` ((title, sentence
        count), a prefix of its paragraphs) holding ``sentences`` (per paragraph, the kept
        sentences' (text, words, tokens, token_word))."""
        flat = {}  # (paragraph, sentence) -> flat sentence index
        first_token = {}  # flat sentence index -> its first flat sentence token
        text, chars, tokens_before = [], [], 0
        offset = 0
        for p, paragraph in enumerate(sentences):
            for s, (sentence, words, tokens, token_word) in enumerate(paragraph):
                flat[(p, s)] = len(flat)
                first_token[flat[(p, s)]] = tokens_before
                if len(words):
                    chars += (np.asarray(words, dtype=np.int64)[token_word] + offset).tolist()
                tokens_before += len(tokens)
                text.append(sentence)
                offset += len(sentence) + 1
        spans = []
        for p, s, a, b in example.spans:
            if (p, s) in flat:
                _, words, _, token_word = sentences[p][s]
                start = first_token[flat[(p, s)]]
                spans += [(start + x, start + y) for x, y in token_spans([(a, b)], token_word, len(words))]
        titles = [title for title, _ in example.paragraphs]
        return {**example.key, "answer": example.answer, "answer_type": example.answer_type,
                "paragraphs": [[title, n] for title, n in kept],
                "supporting": [[titles[p], s] for p, s in example.supporting]
                + [list(fact) for fact in example.removed_supporting],
                "support_sentences": sorted(flat[f] for f in example.supporting if f in flat),
                "support_paragraphs": sorted({p for p, s in example.supporting if p < len(kept)}),
                "spans": sorted(set(spans)), "text": " ".join(text), "token_chars": chars}

    def finish(self, stats: dict) -> None:
        self.builders.finalize()
        self.write_dictionary(self.folder)
        for split, counts in self.cut.items():
            if split in stats["splits"]:
                stats["splits"][split]["truncated"] = {reason: n for reason, n in sorted(counts.items())}
