"""Command-line options of ``longformer-preprocess``."""
from __future__ import annotations

import argparse
import os
from typing import List, Optional

from .sampling import SplitSize, parse_fraction

SOURCES = ("books", "wikipedia", "realnews", "stories", "jsonl", "text")

DESCRIPTION = """\
Turn long-document corpora into fairseq binaries for Longformer pretraining (Beltagy et al.,
2020: all of Books and English Wikipedia, Realnews documents longer than 1,200 tokens and then
one third of them, one third of Stories).

Output (--destdir): train/valid/test .bin/.idx (fairseq mmap), dict.txt, stats.md/stats.json
(the paper's Table 6: documents, tokens, average document length per source; bad-input
report), spm.model when sentencepiece is used, and preprocess.done.json. Each line of a
document is one fairseq item ending in </s> and an empty item separates documents, as
--sample-break-mode complete_doc expects; no line is longer than --max-line-tokens (longer
ones are cut, at a sentence or word boundary when possible).

Streaming: the corpus is never held in memory. Restart-safe: outputs are written in a
temporary folder inside --destdir and moved into place at the end; a killed run leaves no
partial file under a final name, and running the same command again gives the same bytes.
A finished run with the same arguments and unchanged inputs is detected and skipped.

Bad input never stops the run and is never silent: unreadable/corrupt files, empty files and
documents, JSON lines that do not parse or lack the text field, documents longer than
--max-doc-chars (skipped), malformed WikiExtractor blocks, and bytes that are not UTF-8 (see
--invalid-utf8) are counted, the first examples logged, and a summary printed and written to
stats.json. A run in which no input yields a usable document fails with an error saying so.
"""

EXAMPLE = """\
example:
  longformer-preprocess --books data/kjv --train-sentencepiece 8000 \\
      --valid-docs 3 --test-docs 3 --destdir work/data-bin/kjv --workers 2
  longformer-preprocess --books books/ --wikipedia enwiki/ --realnews realnews.jsonl.xz \\
      --stories stories/ --gpt2-encoder-json encoder.json --gpt2-vocab-bpe vocab.bpe \\
      --srcdict roberta/dict.txt --destdir data-bin/longformer --workers 16
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="longformer-preprocess",
        description=DESCRIPTION,
        epilog=EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g = p.add_argument_group("inputs (files or folders; .gz/.xz/.bz2 are decompressed; each flag takes one or more paths and may be repeated)")
    g.add_argument("--books", nargs="+", action="extend", default=[], metavar="PATH", help="plain-text books, one book per file (all are used)")
    g.add_argument("--wikipedia", nargs="+", action="extend", default=[], metavar="PATH", help="WikiExtractor output: <doc ...>...</doc> blocks or JSON lines (all are used)")
    g.add_argument("--realnews", nargs="+", action="extend", default=[], metavar="PATH", help="Grover's realnews.jsonl (title + text)")
    g.add_argument("--stories", nargs="+", action="extend", default=[], metavar="PATH", help="stories, one per text file")
    g.add_argument("--jsonl", nargs="+", action="extend", default=[], metavar="PATH", help="JSON lines, document in --jsonl-text-field (all are used)")
    g.add_argument("--text", nargs="+", action="extend", default=[], metavar="PATH", help="plain text, documents separated by blank lines (all are used)")
    g.add_argument("--jsonl-text-field", default="text", metavar="NAME", help="field holding the document in --jsonl files (default: text)")

    g = p.add_argument_group("selection (seeded by --seed, decided per document from a hash of its content)")
    g.add_argument("--realnews-min-tokens", type=int, default=1200, metavar="N", help="keep Realnews documents longer than N output tokens (default: 1200)")
    g.add_argument("--realnews-fraction", default="1/3", metavar="F", help="then keep this fraction of them (default: 1/3)")
    g.add_argument("--stories-fraction", default="1/3", metavar="F", help="keep this fraction of Stories (default: 1/3)")

    g = p.add_argument_group("tokenizer (choose one)")
    g.add_argument("--gpt2-encoder-json", metavar="FILE", help="RoBERTa/GPT-2 BPE encoder.json (with --gpt2-vocab-bpe)")
    g.add_argument("--gpt2-vocab-bpe", metavar="FILE", help="RoBERTa/GPT-2 BPE vocab.bpe")
    g.add_argument("--sentencepiece-model", metavar="FILE", help="an existing sentencepiece model")
    g.add_argument("--train-sentencepiece", type=int, metavar="VOCAB_SIZE", help="train a sentencepiece model of about this vocabulary size on a sample of the selected input")
    g.add_argument("--srcdict", metavar="FILE", help="an existing fairseq dict.txt to map tokens to (e.g. RoBERTa's, to continue from its checkpoint); copied to destdir. Without it the dictionary lists all tokens of the tokenizer in id order")
    g.add_argument("--spm-model-type", default="unigram", choices=["unigram", "bpe"], help="sentencepiece model type for --train-sentencepiece (default: unigram)")
    g.add_argument("--spm-sample-chars", type=int, default=10_000_000, metavar="N", help="--train-sentencepiece trains on a seeded uniform sample of text chunks (pieces of lines, at most 2,000 characters each) of at most N characters in all; this bounds the memory of the training (default: 10000000)")
    g.add_argument("--spm-character-coverage", type=float, default=0.9999, metavar="F", help="sentencepiece character_coverage (default: 0.9999)")

    g = p.add_argument_group("output")
    g.add_argument("--destdir", required=True, metavar="DIR", help="output folder")
    g.add_argument("--valid-docs", default="0.01", metavar="N|F", help="documents held out for valid: a count (3) or a fraction (0.01, 1/100) (default: 0.01)")
    g.add_argument("--test-docs", default="0.01", metavar="N|F", help="documents held out for test: a count or a fraction (default: 0.01)")
    g.add_argument("--max-line-tokens", type=int, default=510, metavar="N", help="cut lines longer than N tokens (without their </s>), so that no fairseq item exceeds N+1 tokens; with --tokens-per-sample 512 the masked-LM block holds 511 (default: 510)")
    g.add_argument("--max-doc-chars", type=int, default=10_000_000, metavar="N", help="documents longer than N characters are SKIPPED and reported (default: 10000000)")
    g.add_argument("--invalid-utf8", choices=["replace", "skip"], default="replace", help="documents with bytes that are not UTF-8: 'replace' keeps them with U+FFFD in place of the bad bytes, 'skip' drops them; counted either way (default: replace)")

    g = p.add_argument_group("run")
    g.add_argument("--workers", type=int, default=1, metavar="N", help="tokenizer processes (default: 1); the output does not depend on it")
    g.add_argument("--seed", type=int, default=1, help="seed of every sampling decision (default: 1)")
    g.add_argument("--overwrite", action="store_true", help="write into a non-empty --destdir that longformer-preprocess did not write (its files of the same names are replaced)")
    g.add_argument("--force", action="store_true", help="redo the work even if destdir holds a finished run with the same arguments")
    g.add_argument("--no-progress", action="store_true", help="no progress bars (the summary is still printed)")
    return p


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    err = parser.error

    if not any(getattr(args, s) for s in SOURCES):
        err("no input: give at least one of " + ", ".join("--" + s for s in SOURCES))
    for s in SOURCES:
        for path in getattr(args, s):
            if not os.path.exists(path):
                err(f"--{s}: {path} does not exist")

    gpt2 = args.gpt2_encoder_json is not None or args.gpt2_vocab_bpe is not None
    if gpt2 and (args.gpt2_encoder_json is None or args.gpt2_vocab_bpe is None):
        err("--gpt2-encoder-json and --gpt2-vocab-bpe go together")
    chosen = [gpt2, args.sentencepiece_model is not None, args.train_sentencepiece is not None]
    if sum(chosen) != 1:
        err("choose exactly one tokenizer: --gpt2-encoder-json/--gpt2-vocab-bpe, --sentencepiece-model or --train-sentencepiece")
    for path in (args.gpt2_encoder_json, args.gpt2_vocab_bpe, args.sentencepiece_model, args.srcdict):
        if path is not None and not os.path.isfile(path):
            err(f"{path} is not a file")
    if args.sentencepiece_model is not None:
        import sentencepiece

        try:  # an invalid model would fail only after the inputs are read, with a traceback
            sentencepiece.SentencePieceProcessor(model_file=args.sentencepiece_model)
        except (RuntimeError, OSError) as e:
            err(f"--sentencepiece-model {args.sentencepiece_model}: not a sentencepiece model ({str(e).strip()[:200]}); "
                "give the .model file that spm_train or --train-sentencepiece wrote")
    if args.srcdict is not None and args.train_sentencepiece is not None:
        err("--srcdict cannot be used with --train-sentencepiece (the dictionary comes from the new model)")
    if args.train_sentencepiece is not None and args.train_sentencepiece < 8:
        err("--train-sentencepiece: vocabulary size too small")
    if args.spm_sample_chars < 1:
        err("--spm-sample-chars must be positive")

    try:
        args.realnews_fraction = parse_fraction(args.realnews_fraction)
        args.stories_fraction = parse_fraction(args.stories_fraction)
    except ValueError as e:
        err(str(e))
    try:
        args.valid_docs = SplitSize.parse(args.valid_docs)
        args.test_docs = SplitSize.parse(args.test_docs)
    except ValueError as e:
        err(f"--valid-docs/--test-docs: {e}")
    if not args.valid_docs.is_count and not args.test_docs.is_count and args.valid_docs.fraction + args.test_docs.fraction >= 1:
        err("--valid-docs and --test-docs fractions leave nothing for train")
    if args.max_line_tokens < 1:
        err("--max-line-tokens must be at least 1")
    if args.max_doc_chars < 1:
        err("--max-doc-chars must be at least 1")
    if args.workers < 1:
        err("--workers must be at least 1")
    if args.realnews_min_tokens < 0:
        err("--realnews-min-tokens must not be negative")
    return args
