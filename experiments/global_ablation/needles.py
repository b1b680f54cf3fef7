"""The needle task of the global-attention ablation: documents of corpus sentences naming none of
NAMES, with sentences naming one of them (the label) inserted beyond the receptive field of <s>."""
import random
import re
from pathlib import Path

from longformer_experiments.kjv import chapters, split_of

NAMES = ("Moses", "David", "Jesus", "Jacob")
SENTENCE_END = re.compile(r"(?<=[.?!])\s+")
NEEDLE_MAX_WORDS = 40


def receptive_field(layers: int, window: int) -> int:
    """The last token position that <s> (position 0) can see after ``layers`` layers of one-sided
    window ``window`` without global attention."""
    return layers * window


def names_in(sentence: str, names) -> set:
    return {n for n in names if re.search(rf"\b{n}\b", sentence)}


def corpus_pools(kjv: Path, names, seed: int) -> dict:
    """Per split: ``hay``, the chapters as lists of sentences naming none of ``names`` (in order),
    and ``needles``, per name the sentences of at most NEEDLE_MAX_WORDS words naming only it.
    Chapters go to train or valid by ``kjv.split_of`` (a seeded hash of the title)."""
    pools = {split: {"hay": [], "needles": {n: [] for n in names}} for split in ("train", "valid")}
    for _, title, text in chapters(kjv):
        pool = pools[split_of(title, seed)]
        hay = []
        for sentence in SENTENCE_END.split(text):
            found = names_in(sentence, names)
            if not found:
                hay.append(sentence)
            elif len(found) == 1 and len(sentence.split()) <= NEEDLE_MAX_WORDS:
                pool["needles"][found.pop()].append(sentence)
        if hay:
            pool["hay"].append(hay)
    for split, pool in pools.items():
        empty = [n for n, s in pool["needles"].items() if not s]
        if empty or not pool["hay"]:
            raise SystemExit(f"{split}: no sentence naming {empty} (or no other sentence) under {kjv}")
    return pools


def running_sentences(hay, chapter: int, start: int):
    """The haystack sentences from sentence ``start`` of ``chapter`` on, running into the next
    chapters (wrapping around)."""
    for k in range(len(hay)):
        yield from hay[(chapter + k) % len(hay)][start if k == 0 else 0:]


def build_examples(pool: dict, count: int, doc_words: int, min_word: int, needles: int, rng: random.Random):
    """``count`` examples {"text", "label", "needle_words", "name_words"} with balanced labels:
    consecutive haystack sentences from a random place, as many as fit in ``doc_words`` words,
    and ``needles`` different sentences naming the label inserted at different sentence
    boundaries at word ``min_word`` or later (uniformly over those boundaries);
    ``needle_words``/``name_words`` are the word indices (in the text) of each needle's first
    word and of the word holding the name."""
    if doc_words <= min_word:
        raise ValueError(f"--doc-words {doc_words} must be more than the first allowed needle word {min_word}")
    names = sorted(pool["needles"])
    hay = pool["hay"]
    examples = []
    for i in range(count):
        label = names[i % len(names)]
        boundaries = []
        while len(boundaries) < needles:  # a start whose sentences leave room past min_word
            chapter = rng.randrange(len(hay))
            sentences, words = [], 0
            for sentence in running_sentences(hay, chapter, rng.randrange(len(hay[chapter]))):
                if words + len(sentence.split()) > doc_words:
                    break
                sentences.append(sentence)
                words += len(sentence.split())
            offsets = [sum(len(x.split()) for x in sentences[:j]) for j in range(len(sentences) + 1)]
            boundaries = [j for j, offset in enumerate(offsets) if offset >= min_word]
        chosen = sorted(rng.sample(boundaries, needles))
        text, needle_words, name_words = [], [], []
        for j, sentence in enumerate(sentences + [None]):
            if j in chosen:
                needle = rng.choice(pool["needles"][label])
                at = sum(len(x.split()) for x in text)
                needle_words.append(at)
                name_words.append(at + next(k for k, w in enumerate(needle.split()) if names_in(w, (label,))))
                text.append(needle)
            if sentence is not None:
                text.append(sentence)
        examples.append({"text": " ".join(text), "label": label, "needle_words": needle_words,
                         "name_words": name_words})
    rng.shuffle(examples)
    return examples
