"""Seeded, order-independent decisions per document.

Every decision (is this Realnews document in the sampled third? is this document in the valid
split?) is a function of (seed, purpose, document content) through a keyed BLAKE2b hash. The
result does not depend on the order of the inputs, on file names, on the number of workers,
or on where a previous run was interrupted; identical documents always get the same decision
(so exact duplicates cannot straddle train and valid when splits are given as fractions).
"""
from __future__ import annotations

import hashlib
import heapq
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, List, Set, Tuple, Union

_U64 = 1 << 64


def content_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


def unit_hash(seed: int, purpose: str, digest: bytes) -> int:
    """A 64-bit integer, uniform over [0, 2**64), for (seed, purpose, document)."""
    key = f"{seed}:{purpose}".encode("utf-8")[:64]
    return int.from_bytes(hashlib.blake2b(digest, digest_size=8, key=key).digest(), "little")


def below_fraction(u64: int, fraction: Fraction) -> bool:
    """True with probability ``fraction`` over documents (exact integer arithmetic)."""
    return u64 * fraction.denominator < fraction.numerator * _U64


def parse_fraction(text: Union[str, float, Fraction]) -> Fraction:
    """'1/3', '0.25', '1' -> Fraction in [0, 1]."""
    if isinstance(text, Fraction):
        value = text
    else:
        s = str(text).strip()
        try:
            value = Fraction(s) if "/" in s else Fraction(s).limit_denominator(10**12)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"not a fraction: {text!r} (write e.g. 1/3 or 0.25)")
    if not 0 <= value <= 1:
        raise ValueError(f"fraction {text!r} is not between 0 and 1")
    return value


def sample_by_hash(items: Iterable[str], max_chars: int, seed: int, purpose: str) -> List[str]:
    """A seeded uniform sample of strings, at most ``max_chars`` characters in all.

    The result is the longest run of the strings sorted by a seeded hash of their content
    whose total length fits ``max_chars``, returned in that (hash) order: independent of the
    order of ``items``, and never more than ``max_chars`` characters held. A string is admitted
    only below the smallest hash evicted so far; equal strings are kept or dropped together.
    """
    heap: List[Tuple[int, str]] = []  # (-hash, string): the largest hash on top
    held = 0
    threshold = None  # the smallest hash evicted so far
    for s in items:
        h = unit_hash(seed, purpose, hashlib.blake2b(s.encode("utf-8"), digest_size=16).digest())
        if threshold is not None and h >= threshold:
            continue
        heapq.heappush(heap, (-h, s))
        held += len(s)
        while held > max_chars or (heap and threshold is not None and -heap[0][0] >= threshold):
            neg, dropped = heapq.heappop(heap)
            held -= len(dropped)
            threshold = -neg if threshold is None else min(threshold, -neg)
    return [s for _, s in sorted(heap, reverse=True)]


@dataclass(frozen=True)
class SplitSize:
    """--valid-docs / --test-docs: a document count ('3') or a fraction ('0.01', '1/100')."""

    count: int = 0
    fraction: Fraction = Fraction(0)
    is_count: bool = True

    @classmethod
    def parse(cls, text: str) -> "SplitSize":
        s = str(text).strip()
        if re.fullmatch(r"\d+", s):
            return cls(count=int(s), is_count=True)
        frac = parse_fraction(s)
        if frac >= 1:
            raise ValueError(f"split fraction {text!r} must be below 1 (or give a whole number of documents)")
        return cls(fraction=frac, is_count=False)

    def describe(self) -> str:
        return f"{self.count} documents" if self.is_count else f"fraction {self.fraction}"


class SplitPlanner:
    """Decides train/valid/test per document from one split hash ``u`` per document.

    valid takes the low end of the hash range, test the high end:
    - a fraction f for valid means ``u < f``; for test ``u >= 1 - f``; decided on the spot;
    - a count k for valid means the k smallest distinct values of ``u``; for test the k largest.
      Only those k values are held (heaps), never the whole corpus.
    ``u`` is a hash of the content, so exact duplicates always share a split (with counts, k
    counts distinct documents: a corpus holding 10 copies of a book puts all 10 in valid or
    none). A document that qualifies for both goes to valid. ``assign`` is called after all
    documents were ``observe``d and ``finish`` was called.
    """

    def __init__(self, valid: SplitSize, test: SplitSize):
        self.valid = valid
        self.test = test
        self._low: List[Tuple[int, int]] = []  # (-u, u): the k smallest distinct u
        self._high: List[Tuple[int, int]] = []  # (u, u): the k largest distinct u
        self._low_set: Set[int] = set()
        self._high_set: Set[int] = set()
        self._finished = False

    @staticmethod
    def _keep(heap: List[Tuple[int, int]], members: Set[int], key: int, u: int, k: int) -> None:
        """Keep the k largest distinct keys (heap of (key, u), smallest key on top)."""
        if k <= 0 or u in members:
            return
        if len(heap) < k:
            heapq.heappush(heap, (key, u))
            members.add(u)
        elif key > heap[0][0]:
            _, dropped = heapq.heapreplace(heap, (key, u))
            members.discard(dropped)
            members.add(u)

    def observe(self, u: int) -> None:
        if self.valid.is_count:
            self._keep(self._low, self._low_set, -u, u, self.valid.count)
        if self.test.is_count:
            self._keep(self._high, self._high_set, u, u, self.test.count)

    def finish(self) -> None:
        self._finished = True

    def assign(self, u: int) -> str:
        assert self._finished
        if self.valid.is_count:
            in_valid = u in self._low_set
        else:
            in_valid = below_fraction(u, self.valid.fraction)
        if in_valid:
            return "valid"
        if self.test.is_count:
            in_test = u in self._high_set
        else:
            in_test = self.test.fraction > 0 and not below_fraction(u, 1 - self.test.fraction)
        return "test" if in_test else "train"
