"""The two tasks and their baselines; see the package's docstring."""
import argparse
import collections
import hashlib
import json
import re
from pathlib import Path

import longformer_experiments.finetune_kjv as package
from longformer_experiments.kjv import chapters, split_of
from longformer_experiments.runner import KJV

PARTS = ((5, "law"), (17, "history"), (22, "wisdom"), (39, "prophets"), (44, "gospels_acts"), (66, "letters"))
WORD = re.compile(r"\S+")
PUNCTUATION = ",.;:?!'\"()"


def part_of(book_number: int) -> str:
    return next(name for last, name in PARTS if book_number <= last)


def words_of(text: str):
    """(word without its punctuation, character offset) for every whitespace-separated word."""
    return [(m.group().strip(PUNCTUATION), m.start() + len(m.group()) - len(m.group().lstrip(PUNCTUATION)))
            for m in WORD.finditer(text)]


def common_words(texts, count: int) -> set:
    counts = collections.Counter(w.lower() for text in texts for w, _ in words_of(text))
    return {w for w, _ in counts.most_common(count)}


def proper_names(texts, count: int) -> set:
    """The ``count`` most frequent capitalised words never seen in lower case (Moses, Israel,
    Egypt; not And, Behold, LORD, God): the cues of the QA task."""
    counts, lower = collections.Counter(), set()
    for text in texts:
        for w, _ in words_of(text):
            if w.islower():
                lower.add(w)
            elif w.isalpha() and len(w) >= 3 and w[0].isupper() and not w.isupper():
                counts[w] += 1
    return {w for w, _ in sorted(((w, n) for w, n in counts.items() if w.lower() not in lower),
                                 key=lambda x: (-x[1], x[0]))[:count]}


def is_answer(word: str, common: set) -> bool:
    return word.isalpha() and len(word) >= 3 and word.lower() not in common


def passages(words, length: int):
    """(first, last + 1) word ranges of ``length`` words, a third of a passage apart, covering
    the chapter (a chapter shorter than ``length`` is one passage)."""
    step = max(1, length // 3)
    return [(lo, min(lo + length, len(words))) for lo in range(0, max(1, len(words) - length + step), step)]


def questions(words, lo: int, hi: int, cues: set, common: set):
    """Every (cue, answer, answer's word index) of words[lo:hi]: the cue a name of ``cues`` seen
    once in the passage, the answer the word after it; only in passages naming two cues or
    more, so that the question, not the first name met, decides."""
    seen = collections.Counter(w for w, _ in words[lo:hi])
    if len(set(seen) & cues) < 2:
        return []
    return [(words[i][0], words[i + 1][0], i + 1) for i in range(lo, hi - 1)
            if words[i][0] in cues and seen[words[i][0]] == 1 and is_answer(words[i + 1][0], common)]


def most_common_in(words: set, counts: collections.Counter) -> str:
    """The key of ``counts`` seen most often that is one of ``words`` ("" if none)."""
    return max((a for a in counts if a in words), key=lambda a: counts[a], default="")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m longformer_experiments.finetune_kjv", description=package.__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--kjv", type=Path, default=KJV)
    p.add_argument("--passage-words", type=int, default=150, help="words of a QA context")
    p.add_argument("--questions-per-passage", type=int, default=2)
    p.add_argument("--cue-names", type=int, default=100, help="the most frequent proper names, the QA cues")
    p.add_argument("--common-words", type=int, default=50, help="the corpus's most frequent words, never an answer")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    all_chapters = list(chapters(a.kjv))
    if not all_chapters:
        raise SystemExit(f"no chapters under {a.kjv} (expected NN-Book.txt files)")
    texts = [text for _, _, text in all_chapters]
    common, cues = common_words(texts, a.common_words), proper_names(texts, a.cue_names)
    files = {(kind, split): open(a.out / f"{kind}.{split}.jsonl", "w", encoding="utf-8")
             for kind in ("classification", "qa") for split in ("train", "valid")}
    labels = collections.defaultdict(collections.Counter)
    qa = collections.defaultdict(list)  # split -> (cue, answer, passage words, first cue's follower)
    followers = collections.defaultdict(collections.Counter)  # train bigrams: word -> next answer-like word
    for book, title, text in all_chapters:
        split = split_of(title, a.seed)
        label = part_of(book)
        labels[split][label] += 1
        files["classification", split].write(json.dumps({"text": text, "label": label}) + "\n")
        words = words_of(text)
        if split == "train":
            for (w, _), (nxt, _) in zip(words, words[1:]):
                if is_answer(nxt, common):
                    followers[w][nxt] += 1
        spans = [m.span() for m in WORD.finditer(text)]
        for lo, hi in passages(words, a.passage_words):
            found = questions(words, lo, hi, cues, common)
            if not found:
                continue
            found.sort(key=lambda q: hashlib.sha256(f"{a.seed}:{title}:{lo}:{q[2]}".encode()).hexdigest())
            first_cue = next(i for i in range(lo, hi) if words[i][0] in cues)
            blind = words[first_cue + 1][0] if first_cue + 1 < hi else ""
            for cue, answer, i in found[:a.questions_per_passage]:
                base = spans[lo][0]
                files["qa", split].write(json.dumps({
                    "question": cue, "context": text[base:spans[hi - 1][1]],
                    "answers": [{"text": answer, "start": words[i][1] - base}]}) + "\n")
                qa[split].append((cue, answer, {w for w, _ in words[lo:hi]}, blind))
    for f in files.values():
        f.close()
    majority_label, _ = labels["train"].most_common(1)[0]
    answer_counts = collections.Counter(x for _, x, _, _ in qa["train"])
    common_answer, _ = answer_counts.most_common(1)[0]
    valid = qa["valid"]

    def em(guess) -> float:
        # lower-cased as the criterion's SQuAD normalisation (answers are single words, no articles)
        return round(100.0 * sum(answer.lower() == guess(cue, context, blind).lower()
                                 for cue, answer, context, blind in valid) / len(valid), 2)

    baselines = {
        "classification_majority_label": majority_label,
        "classification_majority_accuracy": round(100.0 * labels["valid"][majority_label] / sum(labels["valid"].values()), 2),
        "qa_most_common_answer": common_answer,
        "qa_most_common_answer_em": em(lambda cue, context, blind: common_answer),
        # no question, no reading: the train answer seen most often that occurs in the passage
        "qa_most_common_answer_in_context_em": em(lambda cue, context, blind: most_common_in(context, answer_counts)),
        # the question but no reading: the cue's most frequent train follower that is in the passage
        "qa_cue_bigram_em": em(lambda cue, context, blind: most_common_in(context, followers[cue])
                               or most_common_in(context, answer_counts)),
        # reading but no question: the word after the passage's first cue name
        "qa_word_after_first_name_em": em(lambda cue, context, blind: blind),
    }
    (a.out / "baselines.json").write_text(json.dumps(baselines, indent=2) + "\n")
    print(json.dumps({"examples": {k: sum(v.values()) for k, v in labels.items()},
                      "qa_examples": {k: len(v) for k, v in qa.items()}, "qa_cue_names": len(cues), **baselines}, indent=2))

