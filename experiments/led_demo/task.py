"""The LED demo's task: a passage of 2-3 x the BART's positions -> its closing sentence (see the
package's docstring for why this one)."""
import json
import random
import re

from longformer_experiments.kjv import BOOK_GLOB, book_text

SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z])")
TARGET_WORDS = (6, 30)  # words of a closing sentence: long enough to score, short to decode


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
    books = sorted(args.kjv.glob(BOOK_GLOB))
    if len(books) < args.valid_books + args.test_books + 1:
        raise SystemExit(f"{len(books)} books under {args.kjv}: too few")
    splits = split_books(books, args.valid_books, args.test_books)
    texts = {book: sentences_of(book_text(book)) for book in books}
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
