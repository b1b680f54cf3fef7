"""``longformer-prepare-task KIND``: fine-tuning data as fairseq binaries whose ids match a
pretrained model's dictionary (output layouts: docs/finetuning.md and the writers module).

  classification --train F --valid F [--test F]      the project's JSON lines ({"text", "label"})
  qa             --train F --valid F [--test F]      the project's JSON lines (SQuAD-style)
  imdb           --train aclImdb/train --valid aclImdb/test
  hyperpartisan  --articles articles-...xml --labels ground-truth-...xml [--split-seed 1]
  triviaqa       --train qa/wikipedia-train.json --valid qa/wikipedia-dev.json --evidence evidence/wikipedia
  arxiv          --train train.txt --valid val.txt [--test test.txt]   (PubMed: the same format)
  wikihop        --train wikihop/train.json --valid wikihop/dev.json      (qangaroo v1.1)
  hotpotqa       --train hotpot_train_v1.1.json --valid hotpot_dev_distractor_v1.json [--max-input-tokens 4096]
  ontonotes      --train DIR_OR_FILE --valid DIR_OR_FILE [--test ...]   (CoNLL-2012 *_conll, coreference)

The output is built in a temporary folder and renamed into place at the end
(``atomic.staged_folder``: a failed or killed run leaves nothing under the final name). Bad
records are counted per reason and reported one line each, never fatal unless a split ends up
empty.
"""
from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import shutil
import sys
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple

from longformer_common.cli import one_line_errors
from longformer_common.atomic import staged_folder

from ..tokenizer import TokenizerSpec, train_sentencepiece
from . import arxiv, hotpotqa, hyperpartisan, imdb, jsonl, ontonotes, triviaqa, wikihop
from .conll2012 import CorefDocument
from .examples import QA, BadExample, Classification, MultiHop, MultipleChoice, Summary
from .shapes import texts_of, write_splits
from .writers import render_markdown, report

SPM_NAME = "spm.model"
SHAPES = {"classification": Classification, "qa": QA, "imdb": Classification, "hyperpartisan": Classification,
          "triviaqa": QA, "arxiv": Summary, "wikihop": MultipleChoice, "hotpotqa": MultiHop,
          "ontonotes": CorefDocument}


def _tokenizer_options() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
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


def build_parser() -> argparse.ArgumentParser:
    common = _tokenizer_options()
    p = argparse.ArgumentParser(prog="longformer-prepare-task", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    for kind, what in (("classification", "JSON lines"), ("qa", "JSON lines"), ("arxiv", "JSON lines (arXiv/PubMed)"),
                       ("wikihop", "qangaroo WikiHop JSON"), ("hotpotqa", "HotpotQA JSON (distractor setting)")):
        k = kinds.add_parser(kind, parents=[common], help=f"{kind}: {what}")
        k.add_argument("--train", required=True, metavar="FILE", help=f"training {what}")
        k.add_argument("--valid", required=True, metavar="FILE", help=f"validation {what}")
        k.add_argument("--test", metavar="FILE", help=f"test {what} (optional)")
    k = kinds.add_parser("ontonotes", parents=[common], help="OntoNotes coreference: CoNLL-2012 *_conll files")
    for split, need in (("train", True), ("valid", True), ("test", False)):
        k.add_argument(f"--{split}", required=need, metavar="PATH",
                       help=f"{split}: a *_conll file or a folder of them" + ("" if need else " (optional)"))
    arx = kinds.choices["arxiv"]
    arx.add_argument("--max-source-tokens", type=int, default=16384,
                     help="sources cut to this many tokens, </s> included (default: 16384, the paper's LED input)")
    arx.add_argument("--max-target-tokens", type=int, default=1024,
                     help="targets cut to this many tokens, </s> included (default: 1024, the decoder's positions)")
    kinds.choices["hotpotqa"].add_argument(
        "--max-input-tokens", type=int, default=4096,
        help="each example cut to one model input of this many tokens, markers included (default: 4096)")
    k = kinds.add_parser("imdb", parents=[common], help="IMDB: aclImdb split folders")
    k.add_argument("--train", required=True, metavar="DIR", help="aclImdb/train")
    k.add_argument("--valid", required=True, metavar="DIR", help="aclImdb/test (the paper reports on it)")
    k.add_argument("--test", metavar="DIR", help="another aclImdb split folder (optional)")
    k = kinds.add_parser("hyperpartisan", parents=[common], help="SemEval-2019 task 4 by-article XML")
    k.add_argument("--articles", required=True, metavar="FILE", help="articles-training-byarticle-*.xml")
    k.add_argument("--labels", required=True, metavar="FILE", help="ground-truth-training-byarticle-*.xml")
    k.add_argument("--split-seed", type=int, default=hyperpartisan.SEED,
                   help=f"seed of the 80/10/10 train/valid/test split (default: {hyperpartisan.SEED})")
    k = kinds.add_parser("triviaqa", parents=[common], help="TriviaQA, Wikipedia setting")
    k.add_argument("--train", required=True, metavar="FILE", help="qa/wikipedia-train.json")
    k.add_argument("--valid", required=True, metavar="FILE", help="qa/wikipedia-dev.json")
    k.add_argument("--test", metavar="FILE", help="another question file, kept whole like valid (optional)")
    k.add_argument("--evidence", required=True, metavar="DIR", help="evidence/wikipedia (the page files)")
    k.add_argument("--max-train-context-tokens", type=int, default=4096,
                   help="training pages cut to this many wordpieces (default: 4096); valid/test pages kept whole")
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
    files = [a.gpt2_encoder_json, a.gpt2_vocab_bpe, a.sentencepiece_model, a.srcdict]
    folders = []
    if a.kind == "imdb":
        folders += [a.train, a.valid, a.test]
    elif a.kind == "ontonotes":
        for path in (a.train, a.valid, a.test):
            if path is not None and not os.path.exists(path):
                parser.error(f"{path} is neither a file nor a folder")
        files += [p for p in (a.train, a.valid, a.test) if p is not None and os.path.isfile(p)]
        folders += [p for p in (a.train, a.valid, a.test) if p is not None and os.path.isdir(p)]
    elif a.kind == "hyperpartisan":
        files += [a.articles, a.labels]
    else:
        files += [a.train, a.valid, a.test]
    if a.kind == "triviaqa":
        folders.append(a.evidence)
    for path in files:
        if path is not None and not os.path.isfile(path):
            parser.error(f"{path} is not a file")
    for path in folders:
        if path is not None and not os.path.isdir(path):
            parser.error(f"{path} is not a folder")
    for name in ("max_source_tokens", "max_target_tokens", "max_train_context_tokens", "max_input_tokens"):
        if getattr(a, name, 2) < 2:
            parser.error(f"--{name.replace('_', '-')} must be at least 2, got {getattr(a, name)}")
    destdir = os.path.realpath(a.destdir)
    for path in files + folders:  # --overwrite replaces --destdir: it must not hold or be an input
        if path is not None:
            real = os.path.realpath(path)
            if os.path.commonpath([destdir, real]) in (destdir, real):
                parser.error(f"--destdir {a.destdir} overlaps the input {path}: write somewhere else")
    if a.kind == "imdb":
        for folder in (a.train, a.valid, a.test):
            if folder is not None:
                try:
                    imdb.check_folder(folder)
                except ValueError as e:
                    parser.error(str(e))
    return a


def splits_of(a: argparse.Namespace) -> Dict[str, Tuple[str, Callable[[], Iterator]]]:
    """split -> (its source, a factory of its examples and bad records)."""
    named = {s: getattr(a, s, None) for s in ("train", "valid", "test")}
    if a.kind in ("classification", "qa"):
        return {s: (p, lambda p=p: jsonl.read(p, a.kind)) for s, p in named.items() if p is not None}
    if a.kind == "imdb":
        return {s: (p, lambda p=p: imdb.read(p)) for s, p in named.items() if p is not None}
    if a.kind == "arxiv":
        return {s: (p, lambda p=p: arxiv.read(p)) for s, p in named.items() if p is not None}
    if a.kind == "ontonotes":
        return {s: (p, lambda p=p: ontonotes.read(p)) for s, p in named.items() if p is not None}
    if a.kind == "wikihop":
        return {s: (p, lambda p=p: wikihop.read(p)) for s, p in named.items() if p is not None}
    if a.kind == "hotpotqa":
        return {s: (p, lambda p=p: hotpotqa.read(p)) for s, p in named.items() if p is not None}
    if a.kind == "triviaqa":
        return {s: (p, lambda p=p, s=s: triviaqa.read(p, a.evidence, s == "train", a.max_train_context_tokens))
                for s, p in named.items() if p is not None}
    split = hyperpartisan.read_splits(a.articles, a.labels, a.split_seed)
    source = f"{a.articles} (seed {a.split_seed})"
    return {s: (source, lambda s=s: iter(split[s])) for s in ("train", "valid", "test")}


def make_tokenizer(a, tmp: str, splits) -> TokenizerSpec:
    if a.gpt2_encoder_json is not None:
        return TokenizerSpec("gpt2", encoder_json=a.gpt2_encoder_json, vocab_bpe=a.gpt2_vocab_bpe, srcdict=a.srcdict)
    model = os.path.join(tmp, SPM_NAME)
    if a.sentencepiece_model is not None:
        shutil.copyfile(a.sentencepiece_model, model)
        return TokenizerSpec("sentencepiece", spm_model=model, srcdict=a.srcdict)

    bad = collections.Counter()

    def sentences():
        for example in splits["train"][1]():
            if isinstance(example, BadExample):
                bad[example.reason] += 1
                continue
            for text in texts_of(example):
                yield from (line for line in text.splitlines() if line.strip())

    # sentencepiece fails with its own traceback on no input: say which file had nothing usable
    text = sentences()
    first = next(text, None)
    if first is None:
        reasons = ", ".join(f"{n} {reason}" for reason, n in bad.most_common()) or "no records"
        raise ValueError(f"{splits['train'][0]}: no usable training example to train the sentencepiece model on "
                         f"({reasons}); give the {a.kind} data in its published format")
    train_sentencepiece(itertools.chain([first], text), model, a.train_sentencepiece, a.seed)
    return TokenizerSpec("sentencepiece", spm_model=model)


def prepare(a: argparse.Namespace) -> dict:
    """Write everything into a staged folder, then rename it onto ``a.destdir``; returns the stats."""
    splits = splits_of(a)
    with staged_folder(a.destdir, overwrite=a.overwrite) as tmp:
        tmp = str(tmp)
        spec = make_tokenizer(a, tmp, splits)
        a.tokenizer_kind = spec.kind
        stats = write_splits(tmp, spec.build(), a, SHAPES[a.kind], splits)
        with open(os.path.join(tmp, "stats.json"), "w", encoding="utf-8") as f:
            json.dump(stats, f, indent=2)
            f.write("\n")
        with open(os.path.join(tmp, "stats.md"), "w", encoding="utf-8") as f:
            f.write(render_markdown(stats))
    return stats


@one_line_errors
def main(argv: Optional[Sequence[str]] = None) -> int:
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        stats = prepare(a)
    except ValueError as e:  # a file that is not the published format
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(report(stats))
    print(f"longformer-prepare-task: wrote {a.destdir}")
    return 0
