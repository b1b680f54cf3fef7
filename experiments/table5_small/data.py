"""The held-out-books corpus of the Table 5 experiment, binarized for fairseq."""
import re
import sys
from pathlib import Path
from typing import Dict, List

from longformer_experiments.runner import run


def paragraphs(text: str) -> List[str]:
    """One line per paragraph (KJV: one chapter, its title a paragraph of its own), lower-cased,
    whitespace normalised."""
    return [" ".join(p.lower().split()) for p in text.split("\n\n") if p.strip()]


def word_level(line: str) -> str:
    """Words and punctuation marks as tokens."""
    return " ".join(re.findall(r"\w+|[^\w\s]", line))


def prepare_data(kjv: Path, workdir: Path, tokenizer: str, vocab: int, valid_every: int, seed: int,
                 threads: int = 1) -> Path:
    """Binarize the corpus: every ``valid_every``-th book is validation, the rest training.

    tokenizer: ``sentencepiece`` (a BPE model of ``vocab`` pieces trained on the training books)
    or ``word`` (the ``vocab`` most frequent words and punctuation marks, the rest <unk>).
    """
    books = sorted(kjv.glob("*.txt"))
    if len(books) < valid_every:
        raise FileNotFoundError(f"--kjv {str(kjv)!r}: expected the 66 KJV books, found {len(books)} .txt files")
    text = workdir / "text"
    text.mkdir(parents=True, exist_ok=True)
    splits: Dict[str, List[List[str]]] = {"train": [], "valid": []}
    for i, book in enumerate(books):
        split = "valid" if i % valid_every == valid_every - 1 else "train"
        splits[split].append(paragraphs(book.read_text(encoding="utf-8")))
    if tokenizer == "sentencepiece":
        import sentencepiece as spm

        raw = text / "train.raw.txt"
        raw.write_text("\n".join(line for book in splits["train"] for line in book) + "\n", encoding="utf-8")
        spm.SentencePieceTrainer.train(
            input=str(raw), model_prefix=str(workdir / "spm"), vocab_size=vocab, model_type="bpe",
            character_coverage=1.0, max_sentence_length=1 << 16, num_threads=1,
            bos_id=-1, eos_id=-1, pad_id=-1, unk_id=0, minloglevel=2)
        processor = spm.SentencePieceProcessor(model_file=str(workdir / "spm.model"))
        encode = lambda line: " ".join(processor.encode(line, out_type=str))  # noqa: E731
        nwords = -1  # every piece
    else:
        encode, nwords = word_level, vocab
    for split, books_lines in splits.items():
        # an empty line after each book: a document boundary for fairseq's complete_doc mode
        docs = ["\n".join(encode(line) for line in book) + "\n\n" for book in books_lines]
        (text / f"{split}.txt").write_text("".join(docs), encoding="utf-8")
    destdir = workdir / "bin"
    run("fairseq-preprocess", [sys.executable, "-m", "fairseq_cli.preprocess", "--only-source",
                               "--trainpref", str(text / "train.txt"), "--validpref", str(text / "valid.txt"),
                               "--destdir", str(destdir), "--nwordssrc", str(nwords), "--workers", "1"],
        workdir / "preprocess.log", threads=threads)
    return destdir
