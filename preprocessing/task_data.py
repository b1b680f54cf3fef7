"""``longformer-prepare-task``: fine-tuning data (classification or extractive QA) as fairseq
binaries whose ids match a pretrained model's dictionary.

Input: JSON lines, one example per line.
  classification  {"text": str, "label": str}
  qa              {"question": str, "context": str, "answers": [{"text": str, "start": int}]}
                  (``start``: character offset into ``context``, the SQuAD/TriviaQA convention)

Output (--destdir), built in a temporary folder and renamed into place at the end
(``atomic.staged_folder``: a failed or killed run leaves nothing under the final name):
  classification  input0/{split}.bin/.idx + input0/dict.txt (tokens, each item ending in </s>),
                  label/{split}.bin/.idx + label/dict.txt: fairseq ``sentence_prediction``'s layout
  qa              {split}.question.bin/.idx, {split}.context.bin/.idx (no specials), dict.txt and
                  {split}.qa.jsonl: per example the gold answer texts, every token span where an
                  answer occurs in the context (inclusive, context token indices) and each context
                  token's character span (for the predicted answer text)
  both            stats.json / stats.md (examples, token-length percentiles as in the paper's
                  Table 7, examples dropped and why), spm.model for a trained sentencepiece model.

Bad lines (broken JSON, missing or mistyped fields, empty text, an answer not at its offset, a
label of valid/test unseen in train) are counted per reason and reported, never fatal unless a
split ends up empty.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from collections import Counter
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from .tokenizer import EOS, NUM_SPECIALS, TokenizerSpec, train_sentencepiece, write_dict

SPLITS = ("train", "valid", "test")
SPM_NAME = "spm.model"
_WORD = re.compile(r"\S+")


class BadExample(ValueError):
    """An input line that cannot be used; ``reason`` is the counter it is reported under."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="longformer-prepare-task", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=("classification", "qa"))
    p.add_argument("--train", required=True, metavar="FILE", help="training JSON lines")
    p.add_argument("--valid", required=True, metavar="FILE", help="validation JSON lines")
    p.add_argument("--test", metavar="FILE", help="test JSON lines (optional)")
    p.add_argument("--destdir", required=True, metavar="DIR")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty --destdir")
    g = p.add_argument_group("tokenizer (choose one; as longformer-preprocess, so ids match the pretrained dictionary)")
    g.add_argument("--gpt2-encoder-json", metavar="FILE", help="RoBERTa/GPT-2 BPE encoder.json (with --gpt2-vocab-bpe)")
    g.add_argument("--gpt2-vocab-bpe", metavar="FILE")
    g.add_argument("--sentencepiece-model", metavar="FILE", help="an existing sentencepiece model")
    g.add_argument("--train-sentencepiece", type=int, metavar="VOCAB_SIZE",
                   help="train a sentencepiece model on the training texts (no pretrained model to match)")
    g.add_argument("--srcdict", metavar="FILE", help="the pretrained model's dict.txt (copied to the output)")
    g.add_argument("--seed", type=int, default=1, help="seed of --train-sentencepiece (default: 1)")
    return p


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = build_parser()
    a = parser.parse_args(argv)
    gpt2 = a.gpt2_encoder_json is not None or a.gpt2_vocab_bpe is not None
    if gpt2 and (a.gpt2_encoder_json is None or a.gpt2_vocab_bpe is None):
        parser.error("--gpt2-encoder-json and --gpt2-vocab-bpe go together")
    if sum([gpt2, a.sentencepiece_model is not None, a.train_sentencepiece is not None]) != 1:
        parser.error("choose exactly one tokenizer: --gpt2-encoder-json/--gpt2-vocab-bpe, "
                     "--sentencepiece-model or --train-sentencepiece")
    if a.srcdict is not None and a.train_sentencepiece is not None:
        parser.error("--srcdict cannot be used with --train-sentencepiece")
    for path in (a.train, a.valid, a.test, a.gpt2_encoder_json, a.gpt2_vocab_bpe, a.sentencepiece_model, a.srcdict):
        if path is not None and not os.path.isfile(path):
            parser.error(f"{path} is not a file")
    return a


# ----------------------------------------------------------------------------- reading


def read_jsonl(path: str, bad: Counter) -> Iterator[Tuple[int, dict]]:
    """(line number, object) for every line that parses as a JSON object; the rest are counted."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                bad["broken JSON"] += 1
                continue
            if not isinstance(obj, dict):
                bad["broken JSON"] += 1
                continue
            yield number, obj


def _text_field(obj: dict, name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise BadExample(f"missing or non-string '{name}'")
    if not value.strip():
        raise BadExample(f"empty '{name}'")
    return value


def check_classification(obj: dict) -> Tuple[str, str]:
    return _text_field(obj, "text"), _text_field(obj, "label")


def check_qa(obj: dict) -> Tuple[str, str, List[Tuple[str, int]]]:
    question, context = _text_field(obj, "question"), _text_field(obj, "context")
    answers = obj.get("answers")
    if not isinstance(answers, list) or not answers:
        raise BadExample("missing or empty 'answers'")
    checked = []
    for answer in answers:
        if not isinstance(answer, dict) or not isinstance(answer.get("text"), str) \
                or not isinstance(answer.get("start"), int) or not answer["text"].strip():
            raise BadExample("answer without 'text' (str) and 'start' (int)")
        text, start = answer["text"], answer["start"]
        if start < 0 or context[start:start + len(text)] != text:
            raise BadExample("answer not at its offset")
        checked.append((text, start))
    return question, context, checked


# ----------------------------------------------------------------------------- tokenizing


def words_of(text: str) -> List[Tuple[int, int]]:
    """Character spans of the whitespace-separated words of ``text``."""
    return [m.span() for m in _WORD.finditer(text)]


def encode_words(tokenizer, text: str, spans: Sequence[Tuple[int, int]]) -> Tuple[np.ndarray, np.ndarray]:
    """Tokens of ``text`` encoded word by word (a GPT-2 word after the first carries its leading
    space, as in running text; sentencepiece marks word starts itself), and the index of the
    word each token belongs to: the bridge from token spans to character spans."""
    space = " " if tokenizer.__class__.__name__ == "Gpt2Tokenizer" else ""
    pieces = [text[s:e] if i == 0 else space + text[s:e] for i, (s, e) in enumerate(spans)]
    encoded = tokenizer.encode_lines(pieces) if pieces else []
    tokens = np.concatenate(encoded) if encoded else np.zeros(0, dtype=np.int64)
    word = np.repeat(np.arange(len(encoded)), [len(t) for t in encoded])
    return tokens.astype(np.int64), word


def answer_token_spans(context: str, spans, token_word: np.ndarray, answers) -> List[Tuple[int, int]]:
    """Token spans (first, last; inclusive) of every occurrence in ``context`` of every answer
    text that starts and ends at word boundaries, the given offsets included (the paper's
    TriviaQA loss sums over all of them)."""
    starts = {s: i for i, (s, _) in enumerate(spans)}
    ends = {e: i for i, (_, e) in enumerate(spans)}
    first_token = np.searchsorted(token_word, np.arange(len(spans)), side="left")
    last_token = np.searchsorted(token_word, np.arange(len(spans)), side="right") - 1
    found = set()
    for text, given in answers:
        offsets = {given}
        position = context.find(text)
        while position >= 0:
            offsets.add(position)
            position = context.find(text, position + 1)
        for offset in offsets:
            first, last = _word_at(spans, offset, starts), _word_at(spans, offset + len(text), ends, end=True)
            if first is not None and last is not None and first <= last and last_token[last] >= first_token[first]:
                found.add((int(first_token[first]), int(last_token[last])))
    return sorted(found)


def _word_at(spans, char: int, exact: Dict[int, int], end: bool = False) -> Optional[int]:
    """The word starting (ending, with ``end``) at ``char``; for the given offset of an answer that
    cuts a word, the word containing it."""
    if char in exact:
        return exact[char]
    for i, (s, e) in enumerate(spans):
        if s < char < e:
            return i
    return None


# ----------------------------------------------------------------------------- writing


def make_tokenizer(a, tmp: str) -> TokenizerSpec:
    if a.gpt2_encoder_json is not None:
        return TokenizerSpec("gpt2", encoder_json=a.gpt2_encoder_json, vocab_bpe=a.gpt2_vocab_bpe, srcdict=a.srcdict)
    model = os.path.join(tmp, SPM_NAME)
    if a.sentencepiece_model is not None:
        shutil.copyfile(a.sentencepiece_model, model)
        return TokenizerSpec("sentencepiece", spm_model=model, srcdict=a.srcdict)
    fields = ("text",) if a.kind == "classification" else ("question", "context")

    def sentences():
        for _, obj in read_jsonl(a.train, Counter()):
            for name in fields:
                if isinstance(obj.get(name), str):
                    yield from (line for line in obj[name].splitlines() if line.strip())

    train_sentencepiece(sentences(), model, a.train_sentencepiece, a.seed)
    return TokenizerSpec("sentencepiece", spm_model=model)


def percentiles(lengths: Sequence[int]) -> dict:
    if not lengths:
        return {"mean": 0, "p50": 0, "p90": 0, "p95": 0, "max": 0}
    x = np.asarray(lengths)
    return {"mean": round(float(x.mean()), 1), "p50": int(np.percentile(x, 50)), "p90": int(np.percentile(x, 90)),
            "p95": int(np.percentile(x, 95)), "max": int(x.max())}


class _Builders:
    """fairseq mmap builders keyed by path prefix (``builder.add_item``, then ``finalize``)."""

    def __init__(self, vocab_size: int):
        self.vocab_size, self.builders = vocab_size, {}

    def add(self, prefix: str, tokens: np.ndarray) -> None:
        import torch
        from .binarize import make_split_builder

        if prefix not in self.builders:
            os.makedirs(os.path.dirname(prefix), exist_ok=True)
            self.builders[prefix] = make_split_builder(prefix, self.vocab_size)
        self.builders[prefix].add_item(torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int32)))

    def finalize(self) -> None:
        for prefix, builder in self.builders.items():
            builder.finalize(prefix + ".idx")


def prepare(a: argparse.Namespace) -> dict:
    """Write everything into a staged folder, then rename it onto ``a.destdir``; returns the stats."""
    from fairseq_longformer.atomic import staged_folder  # imports torch/fairseq only when run

    with staged_folder(a.destdir, overwrite=a.overwrite) as tmp:
        tmp = str(tmp)
        spec = make_tokenizer(a, tmp)
        tokenizer = spec.build()
        stats = {"kind": a.kind, "tokenizer": spec.kind, "splits": {}}
        token_counts = Counter()
        labels: Dict[str, int] = {}
        label_counts = Counter()
        builders = _Builders(tokenizer.dictionary_size)
        for split in SPLITS:
            path = getattr(a, split)
            if path is None:
                continue
            bad, lengths, kept = Counter(), [], 0
            side = open(os.path.join(tmp, f"{split}.qa.jsonl"), "w", encoding="utf-8") if a.kind == "qa" else None
            for number, obj in read_jsonl(path, bad):
                try:
                    if a.kind == "classification":
                        text, label = check_classification(obj)
                        if label not in labels:
                            if split != "train":
                                raise BadExample("label not in train")
                            labels[label] = len(labels)
                        tokens = tokenizer.encode_lines([text])[0]
                        if len(tokens) == 0:
                            raise BadExample("no tokens")
                        builders.add(os.path.join(tmp, "input0", split), np.append(tokens, EOS))
                        builders.add(os.path.join(tmp, "label", split), np.array([NUM_SPECIALS + labels[label], EOS]))
                        if split == "train":
                            token_counts.update(tokens.tolist())
                            label_counts[label] += 1
                        lengths.append(len(tokens) + 2)  # <s> text </s>
                    else:
                        question, context, answers = check_qa(obj)
                        q_tokens, _ = encode_words(tokenizer, question, words_of(question))
                        spans = words_of(context)
                        c_tokens, token_word = encode_words(tokenizer, context, spans)
                        gold = answer_token_spans(context, spans, token_word, answers)
                        if len(q_tokens) == 0 or not gold:
                            raise BadExample("no answer span in the tokens" if len(q_tokens) else "no tokens")
                        builders.add(os.path.join(tmp, f"{split}.question"), q_tokens)
                        builders.add(os.path.join(tmp, f"{split}.context"), c_tokens)
                        chars = np.asarray(spans, dtype=np.int64)[token_word]
                        side.write(json.dumps({"line": number, "answers": sorted({t for t, _ in answers}),
                                               "spans": gold, "context": context,
                                               "token_chars": chars.tolist()}) + "\n")
                        if split == "train":
                            token_counts.update(q_tokens.tolist())
                            token_counts.update(c_tokens.tolist())
                        lengths.append(len(q_tokens) + len(c_tokens) + 4)  # <s> q </s></s> c </s>
                    kept += 1
                except BadExample as e:
                    bad[e.reason] += 1
            if side is not None:
                side.close()
            stats["splits"][split] = {"file": os.path.abspath(path), "examples": kept,
                                      "dropped": sum(bad.values()), "dropped_by_reason": dict(sorted(bad.items())),
                                      "tokens": percentiles(lengths)}
            if kept == 0:
                raise SystemExit(f"longformer-prepare-task: no usable example in {split} ({path}): "
                                 + (", ".join(f"{n} {r}" for r, n in bad.most_common()) or "the file is empty"))
        builders.finalize()
        counts = np.zeros(tokenizer.dictionary_size, dtype=np.int64)
        for token, n in token_counts.items():
            counts[token] = n
        dict_folder = os.path.join(tmp, "input0") if a.kind == "classification" else tmp
        if a.srcdict is not None:
            shutil.copyfile(a.srcdict, os.path.join(dict_folder, "dict.txt"))
        else:
            write_dict(os.path.join(dict_folder, "dict.txt"), tokenizer.symbols, counts)
        if a.kind == "classification":
            with open(os.path.join(tmp, "label", "dict.txt"), "w", encoding="utf-8") as f:
                f.writelines(f"{label} {label_counts[label]}\n" for label in labels)
            stats["labels"] = {label: label_counts[label] for label in labels}
        with open(os.path.join(tmp, "stats.json"), "w", encoding="utf-8") as f:
            json.dump(stats, f, indent=2)
            f.write("\n")
        with open(os.path.join(tmp, "stats.md"), "w", encoding="utf-8") as f:
            f.write(render_markdown(stats))
    return stats


def render_markdown(stats: dict) -> str:
    lines = [f"# {stats['kind']} data ({stats['tokenizer']} tokens)", "",
             "| split | examples | dropped | mean tokens | p50 | p90 | p95 | max |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for split, s in stats["splits"].items():
        t = s["tokens"]
        lines.append(f"| {split} | {s['examples']} | {s['dropped']} | {t['mean']} | {t['p50']} | {t['p90']} "
                     f"| {t['p95']} | {t['max']} |")
    for split, s in stats["splits"].items():
        for reason, n in s["dropped_by_reason"].items():
            lines.append(f"\n{split}: {n} dropped: {reason}")
    return "\n".join(lines) + "\n"


def report(stats: dict) -> str:
    parts = []
    for split, s in stats["splits"].items():
        why = ", ".join(f"{n} {r}" for r, n in s["dropped_by_reason"].items())
        parts.append(f"{split}: {s['examples']} examples, {s['dropped']} dropped" + (f" ({why})" if why else "")
                     + f", tokens p50 {s['tokens']['p50']} p95 {s['tokens']['p95']} max {s['tokens']['max']}")
    return "\n".join(parts)


def main(argv: Optional[Sequence[str]] = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    stats = prepare(a)
    print(report(stats))
    print(f"longformer-prepare-task: wrote {a.destdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
