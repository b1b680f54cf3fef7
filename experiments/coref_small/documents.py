"""Coreference documents made from the bundled KJV, with the antecedent distance controlled.

A document is a run of KJV verses (lower-cased words and punctuation, one verse per sentence)
into which entities are inserted. An entity is a name from a per-document pool; it is mentioned
first as ``NAME the ROLE`` and afterwards either as ``NAME`` or as ``the ROLE``: the role words
(``priest``, ``king``, ...) are shared by the pool, so a later ``the ROLE`` resolves only through
the first mention, which is ``gap`` words back. ``near`` documents put every later mention 8-64
words after the previous one; ``far`` documents 540-640 words (more than a 512-subword segment,
since every word is at least one subword). A few unrelated ``the ROLE`` phrases that are no
mention keep "every role phrase is a mention" from being a rule.

Written as CoNLL-2012 files (12 columns, genre ``nw``, speaker ``-``) by conll2012's writer, so
``longformer-prepare-task ontonotes`` reads them as it reads OntoNotes.
"""
import random
import re
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from longformer_experiments.kjv import chapters

ROLES = ("priest", "king", "prophet", "servant", "shepherd", "captain", "scribe", "judge")
NAMES = ("aaron", "abner", "asa", "boaz", "caleb", "dan", "eli", "enoch", "ezra", "gad", "hur", "jabin", "joab",
         "lot", "micah", "nahor", "og", "omri", "saul", "seth", "uriah", "zadok", "zerah", "zimri")
DISTANCES = {"near": (8, 64), "far": (540, 640)}
# A later mention by another word for the role ("the minister" for "NAME the priest"): it shares no
# word but "the" with the first mention, so string matching cannot link it (learning_checks'
# coreference ordering); documents with aliases give their entities different roles.
ALIASES = {"priest": "minister", "king": "ruler", "prophet": "seer", "servant": "steward", "shepherd": "herdsman",
           "captain": "commander", "scribe": "writer", "judge": "magistrate"}


def verses(kjv: Path) -> List[List[str]]:
    """Every KJV verse as lower-cased words and punctuation marks."""
    out = []
    for _, _, text in chapters(kjv):
        for verse in re.split(r"(?<=[.;:?!])\s+", text):
            words = re.findall(r"\w+|[^\w\s]", verse.lower())
            if 4 <= len(words) <= 60:
                out.append(words)
    return out


def document(rng: random.Random, pool: List[List[str]], distances: Tuple[int, int], entities: int, mentions: int,
             aliases: bool = False) -> Tuple[List[List[str]], Dict[str, List[Tuple[int, int]]]]:
    """(sentences, entity id -> inclusive word spans) of one document; ``distances``: the range
    of words from one mention of an entity to its next. ``aliases``: every later mention is
    ``the ALIAS`` of the entity's role (ALIASES), the entities' roles all different."""
    low, high = distances
    names = rng.sample(NAMES, entities)
    roles = rng.sample(ROLES, entities) if aliases else [rng.choice(ROLES) for _ in names]
    plan = []  # (word position before which to insert, entity, is first mention)
    for e in range(entities):
        at = rng.randint(0, 40) + e * 5
        plan.append((at, e, True))
        for _ in range(mentions - 1):
            at += rng.randint(low, high)
            plan.append((at, e, False))
    end = max(p for p, _, _ in plan) + 20
    sentences: List[List[str]] = []
    while sum(len(s) for s in sentences) < end:
        sentences.append(list(rng.choice(pool)))
    flat_starts = []  # word offset of each sentence
    total = 0
    for s in sentences:
        flat_starts.append(total)
        total += len(s)
    inserts: Dict[int, List[Tuple[List[str], int]]] = {}  # sentence -> (words, entity or -1)
    for at, e, first in sorted(plan):
        sentence = max(i for i, start in enumerate(flat_starts) if start <= at)
        if first:
            words = [names[e], "the", roles[e]]
        elif aliases:
            words = ["the", ALIASES[roles[e]]]
        else:
            words = [names[e]] if rng.random() < 0.5 else ["the", roles[e]]
        inserts.setdefault(sentence, []).append((words, e))
    for sentence in range(len(sentences)):
        if rng.random() < 0.15:  # a role phrase that is no mention
            inserts.setdefault(sentence, []).append((["a", rng.choice(ROLES)], -1))
    entities_out: Dict[str, List[Tuple[int, int]]] = {}
    out_sentences, offset = [], 0
    for i, words in enumerate(sentences):
        row = []
        for phrase, e in inserts.get(i, []):
            row += phrase
            if e >= 0:
                span = (offset + len(row) - len(phrase), offset + len(row) - 1)
                entities_out.setdefault(str(e), []).append(span)
        row += words
        out_sentences.append(row)
        offset += len(row)
    return out_sentences, entities_out


def write_split(path: Path, kind: str, count: int, seed: int, pool: List[List[str]], entities: int = 3,
                mentions: int = 3, distances: Optional[Tuple[int, int]] = None) -> None:
    """``count`` documents of ``kind`` (near or far: its DISTANCES, unless ``distances``) into one
    CoNLL-2012 file."""
    from longformer_preprocessing.tasks.conll2012 import CorefDocument, write_document

    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(count):
            sentences, entities_of = document(rng, pool, distances or DISTANCES[kind], entities, mentions)
            doc_id = f"nw/kjv/{kind}/doc_{seed}_{i:04d}"
            doc = CorefDocument(doc_id, "000", f"#begin document ({doc_id}); part 000", sentences,
                                [["-"] * len(s) for s in sentences])
            write_document(f, doc, entities_of)
