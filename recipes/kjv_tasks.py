"""Two small fine-tuning data sets from the bundled King James Bible (data/kjv), as JSON lines
for ``longformer-prepare-task``; a document is one chapter (about 900 tokens), the split is a
seeded hash of the chapter (about 10% valid).

  classification: {"text": chapter, "label": the part of the Bible it is from} with six labels
                  (law, history, wisdom, prophets, gospels_acts, letters) by book number.
  qa:             {"question": the four words before a capitalised word of the chapter,
                   "context": the chapter, "answers": [that word and its offset]}; a lookup of
                   the cue anywhere in a context several windows long.

Usage: python recipes/kjv_tasks.py OUT_DIR [--kjv data/kjv] [--questions-per-chapter 1]
Prints the majority-class and trivial-answer baselines of valid (and writes baselines.json).
"""
import argparse
import collections
import hashlib
import json
import re
from pathlib import Path

PARTS = ((5, "law"), (17, "history"), (22, "wisdom"), (39, "prophets"), (44, "gospels_acts"), (66, "letters"))
SKIP = {"LORD", "God", "I", "O", "Lord", "GOD"}
WORD = re.compile(r"\S+")


def part_of(book_number: int) -> str:
    return next(name for last, name in PARTS if book_number <= last)


def chapters(kjv: Path):
    for path in sorted(kjv.glob("[0-9][0-9]-*.txt")):
        book = int(path.name[:2])
        blocks = [b.strip() for b in path.read_text(encoding="utf-8").split("\n\n") if b.strip()]
        for title, text in zip(blocks[::2], blocks[1::2]):
            yield book, title, " ".join(text.split())


def split_of(title: str, seed: int) -> str:
    return "valid" if int(hashlib.sha256(f"{seed}:{title}".encode()).hexdigest(), 16) % 10 == 0 else "train"


def questions(text: str, count: int, seed: int):
    """Up to ``count`` (question, answer, start): a capitalised word not opening a sentence, and
    the four words before it, picked by a seeded hash."""
    words = [(m.group(), m.start()) for m in WORD.finditer(text)]
    candidates = []
    for i in range(4, len(words)):
        word, start = words[i]
        name = word.rstrip(",.;:?!'\")")
        if len(name) >= 3 and name[0].isupper() and name.isalpha() and name not in SKIP \
                and not words[i - 1][0].endswith((".", "?", "!", ":")):
            candidates.append((" ".join(w for w, _ in words[i - 4:i]), name, start))
    candidates.sort(key=lambda c: hashlib.sha256(f"{seed}:{c[2]}".encode()).hexdigest())
    return candidates[:count]


def most_common_in(text: str, counts: collections.Counter) -> str:
    """The answer of ``counts`` seen most often that occurs as a word of ``text`` ("" if none)."""
    words = {w.rstrip(",.;:?!'\")") for w in WORD.findall(text)}
    return max((a for a in counts if a in words), key=lambda a: counts[a], default="")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--kjv", type=Path, default=Path(__file__).resolve().parent.parent / "data" / "kjv")
    p.add_argument("--questions-per-chapter", type=int, default=1)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    files = {(kind, split): open(a.out / f"{kind}.{split}.jsonl", "w", encoding="utf-8")
             for kind in ("classification", "qa") for split in ("train", "valid")}
    labels = collections.defaultdict(collections.Counter)
    answers = collections.defaultdict(list)
    for book, title, text in chapters(a.kjv):
        split = split_of(title, a.seed)
        label = part_of(book)
        labels[split][label] += 1
        files["classification", split].write(json.dumps({"text": text, "label": label}) + "\n")
        for question, answer, start in questions(text, a.questions_per_chapter, a.seed):
            files["qa", split].write(json.dumps({"question": question, "context": text,
                                                 "answers": [{"text": answer, "start": start}]}) + "\n")
            answers[split].append((answer, text))
    for f in files.values():
        f.close()
    majority_label, _ = labels["train"].most_common(1)[0]
    answer_counts = collections.Counter(x for x, _ in answers["train"])
    common_answer, _ = answer_counts.most_common(1)[0]
    valid = answers["valid"]
    baselines = {
        "classification_majority_label": majority_label,
        "classification_majority_accuracy": round(100.0 * labels["valid"][majority_label] / sum(labels["valid"].values()), 2),
        "qa_most_common_answer": common_answer,
        "qa_most_common_answer_em": round(100.0 * sum(x == common_answer for x, _ in valid) / len(valid), 2),
        "qa_answer_in_context_by_chance_em": round(100.0 * sum(
            1.0 / len(set(WORD.findall(text))) for _, text in valid) / len(valid), 2),
        # no lookup of the cue: the train answer seen most often that occurs in the context
        "qa_most_common_answer_in_context_em": round(100.0 * sum(
            x == most_common_in(text, answer_counts) for x, text in valid) / len(valid), 2),
    }
    (a.out / "baselines.json").write_text(json.dumps(baselines, indent=2) + "\n")
    print(json.dumps({"examples": {k: sum(v.values()) for k, v in labels.items()},
                      "qa_examples": {k: len(v) for k, v in answers.items()}, **baselines}, indent=2))


if __name__ == "__main__":
    main()
