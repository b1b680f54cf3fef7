"""The data and the scores of recipes/led_demo.sh (the LED seq2seq demo on the bundled KJV).

  python recipes/led_demo.py build WORK [--kjv data/kjv] [--positions 512] ...
  python recipes/led_demo.py score WORK --system NAME=GENERATE_LOG ...

build: the task, "give the closing sentence of this passage".
  A passage is a run of whole consecutive sentences of one book (chapter headings dropped),
  between 2 and 3 times --positions sentencepiece tokens long (the length drawn at random per
  passage, so the end does not sit at one fixed position); the target is its last sentence, one
  of 6 to 30 words. The passages of a book do not overlap, and a book goes to exactly one split
  (--valid-books / --test-books of the 66, taken at even steps through the Bible; the rest
  train), so no test sentence was seen in training.

  Why this task: the answer sits at the far end of a source 2-3 times longer than the BART's
  positions, so a lead baseline (the first sentence) shares only the corpus's common words with
  it, and the BART, which sees only the first --positions tokens, never sees it at all; a small
  model learns it on CPU in minutes, because finding "the sentence that ends at </s>" needs only
  the tokens near the end (inside the LED's local window) and copying is what a denoising BART
  has learnt already. It is not summarization, and a one-line rule (take the last sentence)
  solves it: it is a probe of whether the encoder reaches past BART's positions, nothing more.

  Writes, under WORK/data:
    spm.model              sentencepiece (--vocab pieces, unigram) trained on the train books
    pretrain/train.txt     train books, one sentence per line (as pieces), a blank line between
    pretrain/valid.txt     books (fairseq's document break): the denoising BART's corpus (valid:
                           the valid books); the test books are in neither
    {train,valid,test}.src / .tgt   the passages and their closing sentences, as pieces
    {split}.jsonl          the same as text: {"book", "source", "target", "source_tokens"}
    stats.json             counts and lengths

score: ROUGE-1/2/L F1 (Google's rouge-score, stemming on) of each system's hypotheses on test
  (parsed from fairseq-generate's H- lines, pieces joined back to text) against the targets, and
  of the lead baseline (the passage's first sentence); the ROUGE-L difference of each pair with a
  95% paired bootstrap interval (the test set is small: a gap inside the interval's reach of 0
  is noise); WORK/results.md and WORK/results.json.
"""
import argparse
import json
import random
import re
import sys
from pathlib import Path

SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z])")
TARGET_WORDS = (6, 30)  # words of a closing sentence: long enough to score, short to decode


def read_book(path: Path) -> str:
    """A book's text without its chapter headings ("Genesis 1"), as one line."""
    blocks = [b.strip() for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
    return " ".join(" ".join(text.split()) for text in blocks[1::2])


def sentences_of(text: str):
    return [s for s in SENTENCE_END.split(text) if s]


def split_books(books, valid: int, test: int):
    """{book path: split}: the valid and test books at even steps through the list (so the held
    books come from every part of the Bible), alternately test and valid; the rest train."""
    n, held = len(books), valid + test
    splits = {book: "train" for book in books}
    want = {"test": test, "valid": valid}
    for i in range(held):
        book = books[(2 * i + 1) * n // (2 * held)]
        split = "test" if (i % 2 == 0 and want["test"]) or not want["valid"] else "valid"
        splits[book] = split
        want[split] -= 1
    return splits


def passages(sentences, lengths, rng, low: int, high: int):
    """Non-overlapping runs of whole sentences whose token count (``lengths``) is drawn in
    [low, high), each ending at a sentence of TARGET_WORDS words: (first, last + 1) index pairs.
    A run that overshoots ``high`` before such a sentence comes is dropped; the next starts after
    it."""
    out, start = [], 0
    while start < len(sentences):
        want, total, end = rng.randrange(low, high), 0, start
        while end < len(sentences) and total + lengths[end] < high:
            total += lengths[end]
            end += 1
            words = len(sentences[end - 1].split())
            if total >= want and TARGET_WORDS[0] <= words <= TARGET_WORDS[1]:
                out.append((start, end))
                break
        else:
            end += 1  # overshot or ran out: skip past the sentence that did not fit
        start = end
    return out


def build(args) -> None:
    from longformer_preprocessing.tokenizer import train_sentencepiece
    import sentencepiece as spm

    out = args.work / "data"
    (out / "pretrain").mkdir(parents=True, exist_ok=True)
    books = sorted(args.kjv.glob("[0-9][0-9]-*.txt"))
    if len(books) < args.valid_books + args.test_books + 1:
        raise SystemExit(f"{len(books)} books under {args.kjv}: too few")
    splits = split_books(books, args.valid_books, args.test_books)
    texts = {book: sentences_of(read_book(book)) for book in books}
    train_sentences = [s for book in books if splits[book] == "train" for s in texts[book]]
    train_sentencepiece(train_sentences, str(out / "spm.model"), args.vocab, seed=args.seed)
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))

    rng = random.Random(args.seed)
    low, high = 2 * args.positions, 3 * args.positions
    stats = {"positions": args.positions, "source_tokens": [low, high], "target_words": list(TARGET_WORDS)}
    files = {name: open(out / name, "w", encoding="utf-8") for name in
             ["pretrain/train.txt", "pretrain/valid.txt"] +
             [f"{s}.{side}" for s in ("train", "valid", "test") for side in ("src", "tgt")] +
             [f"{s}.jsonl" for s in ("train", "valid", "test")]}
    for book in books:
        split = splits[book]
        sentences = texts[book]
        pieces = sp.encode(sentences, out_type=str)
        if split != "test":  # the denoising corpus: never the test books
            pre = files[f"pretrain/{'train' if split == 'train' else 'valid'}.txt"]
            for p in pieces:
                if 0 < len(p) < args.positions - 2:  # fairseq's blocks never split a line
                    pre.write(" ".join(p) + "\n")
            pre.write("\n")
        count = 0
        for first, last in passages(sentences, [len(p) for p in pieces], rng, low, high):
            if split == "train" and args.max_train and stats.get("train", 0) >= args.max_train:
                break
            if split != "train" and args.max_eval and count >= args.max_eval:
                break
            source = [t for p in pieces[first:last] for t in p]
            files[f"{split}.src"].write(" ".join(source) + "\n")
            files[f"{split}.tgt"].write(" ".join(pieces[last - 1]) + "\n")
            files[f"{split}.jsonl"].write(json.dumps({
                "book": book.stem, "source": " ".join(sentences[first:last]), "target": sentences[last - 1],
                "source_tokens": len(source) + 1}) + "\n")  # + </s>
            stats[split] = stats.get(split, 0) + 1
            stats[f"{split}_books"] = stats.get(f"{split}_books", 0) + (count == 0)
            count += 1
    for f in files.values():
        f.close()
    for split in ("train", "valid", "test"):
        rows = [json.loads(line) for line in open(out / f"{split}.jsonl", encoding="utf-8")]
        if not rows:
            raise SystemExit(f"no {split} passages: lower --positions or use more books")
        lengths = sorted(r["source_tokens"] for r in rows)
        stats[f"{split}_source_tokens"] = {"min": lengths[0], "median": lengths[len(lengths) // 2], "max": lengths[-1]}
    (out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    print(json.dumps(stats))


def lead(source: str) -> str:
    """The lead baseline: the passage's first sentence."""
    return sentences_of(source)[0]


def detokenize(pieces: str) -> str:
    """sentencepiece pieces as fairseq prints them ("▁And ▁the ...") -> text."""
    return "".join(pieces.split()).replace("\u2581", " ").strip()


def hypotheses(log: Path):
    """{test index: detokenized best hypothesis} from a fairseq-generate log."""
    found = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        if line.startswith("H-"):
            index, _, text = line[2:].split("\t", 2)
            found[int(index)] = detokenize(text)
    return found


def rouge_per_example(predictions, references):
    """[{rouge1, rouge2, rougeL: F1 x100}] per example, rouge-score with its stemmer."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    return [{name: 100 * score.fmeasure for name, score in scorer.score(reference, prediction).items()}
            for prediction, reference in zip(predictions, references)]


def rouge(predictions, references):
    """Mean ROUGE-1/2/L F1 (x100)."""
    rows = rouge_per_example(predictions, references)
    return {name: round(sum(r[name] for r in rows) / max(1, len(rows)), 2) for name in ("rouge1", "rouge2", "rougeL")}


def paired_bootstrap(a, b, samples: int = 1000, seed: int = 1):
    """Mean of a - b (per-example scores) and its 95% bootstrap interval (examples resampled)."""
    rng = random.Random(seed)
    n = len(a)
    diffs = [x - y for x, y in zip(a, b)]
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    return {"mean": round(sum(diffs) / n, 2), "low": round(means[int(0.025 * samples)], 2),
            "high": round(means[int(0.975 * samples) - 1], 2)}


def score(args) -> None:
    rows = [json.loads(line) for line in open(args.work / "data" / "test.jsonl", encoding="utf-8")]
    references = [r["target"] for r in rows]
    outputs = {"lead (first sentence)": [lead(r["source"]) for r in rows]}
    missing = {}
    for spec in args.system:
        name, _, path = spec.partition("=")
        found = hypotheses(Path(path))
        missing[name] = len(rows) - len(found)
        if missing[name]:  # fairseq-generate skipped some: score them as empty, and say so
            print(f"warning: {name}: {missing[name]} of {len(rows)} test examples have no hypothesis", file=sys.stderr)
        outputs[name] = [found.get(i, "") for i in range(len(rows))]
    per_example = {name: rouge_per_example(texts, references) for name, texts in outputs.items()}
    results = {"test_examples": len(rows), "systems": {}, "rougeL_differences": {}}
    for name, scores in per_example.items():
        results["systems"][name] = {k: round(sum(s[k] for s in scores) / len(scores), 2)
                                    for k in ("rouge1", "rouge2", "rougeL")}
        if name in missing:
            results["systems"][name]["missing"] = missing[name]
    names = list(outputs)
    for i, first in enumerate(names[1:], 1):  # each model against the systems before it
        for second in names[:i]:
            results["rougeL_differences"][f"{first} - {second}"] = paired_bootstrap(
                [s["rougeL"] for s in per_example[first]], [s["rougeL"] for s in per_example[second]])
    example = min(range(len(rows)), key=lambda i: len(rows[i]["source"]))
    results["example"] = {"book": rows[example]["book"], "target": rows[example]["target"]}
    results["example"].update({name: texts[example] for name, texts in outputs.items()})
    lines = [f"ROUGE F1 (x100, rouge-score with stemming) on {len(rows)} test passages", "",
             "| system | ROUGE-1 | ROUGE-2 | ROUGE-L |", "|---|---:|---:|---:|"]
    for name, s in results["systems"].items():
        lines.append(f"| {name} | {s['rouge1']:.2f} | {s['rouge2']:.2f} | {s['rougeL']:.2f} |")
    lines += ["", "ROUGE-L differences (mean over the test passages, 95% paired bootstrap interval):"]
    lines += [f"- {pair}: {d['mean']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]"
              for pair, d in results["rougeL_differences"].items()]
    lines += ["", f"example (the shortest test passage, {rows[example]['book']}):"]
    lines += [f"- {key}: {value}" for key, value in results["example"].items() if key != "book"]
    (args.work / "results.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (args.work / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print("\n".join(lines))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="the task's data")
    b.add_argument("work", type=Path)
    b.add_argument("--kjv", type=Path, default=Path(__file__).resolve().parent.parent / "data" / "kjv")
    b.add_argument("--positions", type=int, default=256, help="the BART's positions; sources are 2-3x this")
    b.add_argument("--vocab", type=int, default=2000, help="sentencepiece pieces")
    b.add_argument("--valid-books", type=int, default=4)
    b.add_argument("--test-books", type=int, default=6)
    b.add_argument("--max-train", type=int, default=0, help="at most this many train passages (0: all)")
    b.add_argument("--max-eval", type=int, default=0, help="at most this many passages per valid/test book (0: all)")
    b.add_argument("--seed", type=int, default=1)
    s = sub.add_parser("score", help="ROUGE of the lead baseline and of fairseq-generate logs")
    s.add_argument("work", type=Path)
    s.add_argument("--system", action="append", default=[], help="NAME=fairseq-generate log")
    args = p.parse_args(argv)
    build(args) if args.command == "build" else score(args)


if __name__ == "__main__":
    main()
