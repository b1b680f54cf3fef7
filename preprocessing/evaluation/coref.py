"""Coreference metrics with the official scorer's semantics (conll/reference-coreference-scorers
v8.01, ``lib/CorScorer.pm``): MUC, B-cubed, CEAF (mention- and entity-based) and the CoNLL score,
the mean F1 of MUC, B-cubed and CEAF-e. Pure Python (the scorer is also used where fairseq is not).

What the scorer does, and this module with it (``IdentifMentions`` and the metric subroutines):
  * mentions match by exact span only;
  * a response mention that repeats a key mention already seen in the response is dropped (the
    first one, in entity order then mention order, stays); a repeated mention that is in no key
    entity is kept (the scorer gives both copies one id); the scorer refuses a response with more
    than 10 repeats (``score_documents(max_repeated=10)``);
  * a repeated key mention keeps the last of its ids, as the scorer's hash does;
  * MUC: key and response entities as they are (singletons have no links, so the scorer adding
    missed key mentions as response singletons and dropping twinless response singletons changes
    nothing); B-cubed and CEAF: every key and response entity, singletons and twinless mentions
    included (a twinless mention scores 0 and counts in the precision denominator);
  * CEAF: phi4 (entity) or the common-mention count (mention) under the optimal one-to-one
    alignment; denominators: the number (CEAF-e) or the mentions (CEAF-m) of the entities;
  * counts (numerators and denominators) are summed over documents; a key document without a
    response scores as an empty response; response documents without a key are ignored;
  * recall or precision with a zero denominator is 0, and F1 is 0 where both are.
BLANC is not implemented.

API:
    score_documents(keys, responses, max_repeated=None) -> {"mentions", "muc", "bcub", "ceafm", "ceafe": Counts}
        keys, responses: {doc key: clusters}; clusters: a list of lists of (start, end) spans or {entity id: spans}
    score_document(key_clusters, response_clusters) -> ({metric: Counts}, repeated)
    conll_f1(scores) -> float   mean F1 of muc, bcub, ceafe (a fraction, not a percentage)
    Counts(recall_num, recall_den, precision_num, precision_den): .recall .precision .f1, summed with +
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Dict, Hashable, List, Mapping, Optional, Sequence, Tuple, Union

from .assignment import max_weight_matching

METRICS = ("muc", "bcub", "ceafm", "ceafe")
CONLL_METRICS = ("muc", "bcub", "ceafe")
MAX_REPEATED = 10  # the scorer's limit on repeated response mentions (v8.01)

Span = Tuple[int, int]
Clusters = Union[Sequence[Sequence[Span]], Mapping[Hashable, Sequence[Span]]]
Chains = List[List[int]]  # entities as lists of mention ids


@dataclass(frozen=True)
class Counts:
    recall_num: float = 0.0
    recall_den: float = 0.0
    precision_num: float = 0.0
    precision_den: float = 0.0

    def __add__(self, other: "Counts") -> "Counts":
        return Counts(self.recall_num + other.recall_num, self.recall_den + other.recall_den,
                      self.precision_num + other.precision_num, self.precision_den + other.precision_den)

    @property
    def recall(self) -> float:
        return self.recall_num / self.recall_den if self.recall_den else 0.0

    @property
    def precision(self) -> float:
        return self.precision_num / self.precision_den if self.precision_den else 0.0

    @property
    def f1(self) -> float:
        r, p = self.recall, self.precision
        return 2 * p * r / (p + r) if p + r else 0.0


class TooManyRepeatedMentions(ValueError):
    """The response repeats more mentions than the scorer accepts (``MAX_REPEATED``)."""

    def __init__(self, repeated: int, limit: int):
        super().__init__(f"the response repeats {repeated} mentions (more than {limit}): the official scorer "
                         "refuses to score it; write each mention once")
        self.repeated = repeated


def _entities(clusters: Clusters) -> List[List[Span]]:
    values = clusters.values() if isinstance(clusters, Mapping) else clusters
    return [[(int(s), int(e)) for s, e in entity] for entity in values]


def identify_mentions(key: Clusters, response: Clusters) -> Tuple[Chains, Chains, Counts, int]:
    """The scorer's ``IdentifMentions``: (key chains, response chains, mention identification
    counts, repeated response mentions dropped). Mentions become ids: key mentions numbered in
    order, response mentions take a key mention's id on an exact match, else new ids."""
    ids: Dict[Span, int] = {}
    n_ids = 0
    key_entities = _entities(key)
    for entity in key_entities:
        for mention in entity:
            ids[mention] = n_ids  # a repeated key mention keeps its last id
            n_ids += 1
    mapped: Dict[Span, int] = {}
    exact = repeated = 0
    kept_entities = []
    for entity in _entities(response):
        kept = []
        for mention in entity:
            if mention in mapped:  # only key mentions are mapped here: twinless repeats stay
                repeated += 1
                continue
            if mention in ids:
                mapped[mention] = ids[mention]
                exact += 1
            kept.append(mention)
        if kept:
            kept_entities.append(kept)
    for entity in kept_entities:
        for mention in entity:
            if mention not in mapped:
                mapped[mention] = n_ids
                n_ids += 1
    keys = [[ids[m] for m in entity] for entity in key_entities]
    responses = [[mapped[m] for m in entity] for entity in kept_entities]
    return keys, responses, Counts(exact, len(ids), exact, len(mapped)), repeated


def _index(chains: Chains) -> Dict[int, int]:
    """Mention id -> the (last) chain holding it, as the scorer's ``Indexa``."""
    return {m: i for i, chain in enumerate(chains) for m in chain}


def muc(keys: Chains, responses: Chains) -> Counts:
    """Links: a response mention is a correct link when a later mention of its entity is in the
    same key entity (the scorer's pair loop)."""
    key_of = _index(keys)
    correct = 0
    for chain in responses:
        later = set()
        for m in reversed(chain):
            k = key_of.get(m)
            if k is not None:
                correct += k in later
                later.add(k)
    key_links = sum(len(c) - 1 for c in keys if c)
    response_links = sum(len(c) - 1 for c in responses if c)
    return Counts(correct, key_links, correct, response_links)


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    """Mentions of ``a`` found in ``b`` (a repeat in ``a`` counts each time, as the scorer counts)."""
    members = set(b)
    return sum(1 for m in a if m in members)


def b_cubed(keys: Chains, responses: Chains) -> Counts:
    """Per response mention: common / response entity size (precision) and common / key entity
    size (recall, mentions in a key entity only)."""
    key_of = _index(keys)
    recall = precision = 0.0
    for chain in responses:
        for m in chain:
            k = key_of.get(m)
            common = _common(chain, keys[k]) if k is not None else 0
            precision += common / len(chain)
            if k is not None:
                recall += common / len(keys[k])
    return Counts(recall, sum(map(len, keys)), precision, sum(map(len, responses)))


def ceaf(keys: Chains, responses: Chains, entity_based: bool = True) -> Counts:
    """CEAF-e (phi4 = 2 |K & R| / (|K| + |R|)) or CEAF-m (|K & R|) under the optimal one-to-one
    alignment. Entities that share no mention have similarity 0, so the alignment is solved per
    connected group of overlapping entities (the sum is the same; the groups are small)."""
    holders = defaultdict(set)
    for j, chain in enumerate(responses):
        for m in chain:
            holders[m].add(j)
    similar: Dict[Tuple[int, int], float] = {}
    for i, chain in enumerate(keys):
        for j in set().union(*(holders.get(m, ()) for m in chain)):
            common = _common(chain, responses[j])
            similar[i, j] = 2 * common / (len(chain) + len(responses[j])) if entity_based else common
    total = sum(_aligned(group, similar) for group in _groups(similar))
    if entity_based:
        return Counts(total, sum(1 for c in keys if c), total, sum(1 for c in responses if c))
    return Counts(total, sum(map(len, keys)), total, sum(map(len, responses)))


def _groups(similar: Mapping[Tuple[int, int], float]) -> List[List[Tuple[int, int]]]:
    """The pairs of ``similar`` grouped by connected key/response entities (union-find)."""
    parent: Dict[Tuple[str, int], Tuple[str, int]] = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in similar:
        parent[root(("k", i))] = root(("r", j))
    groups = defaultdict(list)
    for i, j in similar:
        groups[root(("k", i))].append((i, j))
    return list(groups.values())


def _aligned(pairs: List[Tuple[int, int]], similar: Mapping[Tuple[int, int], float]) -> float:
    rows = sorted({i for i, _ in pairs})
    cols = sorted({j for _, j in pairs})
    weights = [[similar.get((i, j), 0.0) for j in cols] for i in rows]
    return sum(weights[a][b] for a, b in max_weight_matching(weights))


def score_document(key: Clusters, response: Clusters) -> Tuple[Dict[str, Counts], int]:
    """({"mentions", "muc", "bcub", "ceafm", "ceafe": Counts}, repeated response mentions) of one document."""
    keys, responses, mentions, repeated = identify_mentions(key, response)
    return {"mentions": mentions, "muc": muc(keys, responses), "bcub": b_cubed(keys, responses),
            "ceafm": ceaf(keys, responses, entity_based=False), "ceafe": ceaf(keys, responses)}, repeated


def score_documents(keys: Mapping[str, Clusters], responses: Mapping[str, Clusters],
                    max_repeated: Optional[int] = None) -> Dict[str, Counts]:
    """Counts summed over the documents of ``keys`` (a missing response is an empty one).
    ``max_repeated``: raise TooManyRepeatedMentions past that many repeated response mentions
    in all (the scorer's command: 10)."""
    total = {name: Counts() for name in ("mentions", *METRICS)}
    repeated = 0
    for name, key in keys.items():
        scores, n = score_document(key, responses.get(name, []))
        repeated += n
        total = {metric: total[metric] + scores[metric] for metric in total}
    if max_repeated is not None and repeated > max_repeated:
        raise TooManyRepeatedMentions(repeated, max_repeated)
    return total


def conll_f1(scores: Mapping[str, Counts]) -> float:
    """The CoNLL score: the mean F1 of MUC, B-cubed and CEAF-e."""
    return sum(scores[m].f1 for m in CONLL_METRICS) / len(CONLL_METRICS)
