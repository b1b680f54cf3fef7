"""Seeded, order-independent sampling and splitting."""
from __future__ import annotations

import random
from fractions import Fraction

import pytest

from longformer_preprocessing.sampling import (
    SplitPlanner,
    SplitSize,
    below_fraction,
    content_digest,
    parse_fraction,
    sample_by_hash,
    unit_hash,
)


def test_sample_by_hash_is_order_independent_and_bounded():
    rng = random.Random(0)
    items = [f"line {i} " + "x" * rng.randint(0, 50) for i in range(500)] + ["dup"] * 20
    a = sample_by_hash(items, 3000, seed=1, purpose="spm")
    shuffled = items[:]
    rng.shuffle(shuffled)
    assert sample_by_hash(shuffled, 3000, seed=1, purpose="spm") == a
    assert sum(map(len, a)) <= 3000 and len(a) > 20
    assert a.count("dup") in (0, 20)  # equal strings kept or dropped together
    assert sample_by_hash(items, 3000, seed=2, purpose="spm") != a
    assert sorted(sample_by_hash(items, 10**9, seed=1, purpose="spm")) == sorted(items)


def test_fractions_and_split_sizes():
    assert parse_fraction("1/3") == Fraction(1, 3) and parse_fraction("0.25") == Fraction(1, 4)
    with pytest.raises(ValueError):
        parse_fraction("4/3")
    assert SplitSize.parse("3").is_count and SplitSize.parse("3").count == 3
    assert SplitSize.parse("0.01").fraction == Fraction(1, 100)
    with pytest.raises(ValueError):
        SplitSize.parse("1.0")
    us = [unit_hash(1, "x", content_digest(str(i))) for i in range(3000)]
    share = sum(below_fraction(u, Fraction(1, 3)) for u in us) / len(us)
    assert 0.29 < share < 0.37


def test_split_planner_counts_distinct_documents():
    planner = SplitPlanner(SplitSize.parse("2"), SplitSize.parse("3"))
    docs = [content_digest(f"doc {i}") for i in range(20)] * 2  # every document twice
    us = [unit_hash(1, "split", d) for d in docs]
    for u in us:
        planner.observe(u)
    planner.finish()
    splits = [planner.assign(u) for u in us]
    assert splits.count("valid") == 4 and splits.count("test") == 6  # 2 and 3 distinct, twice
    assert splits[:20] == splits[20:]  # copies share their split
    order = sorted(set(us))
    assert {u for u, s in zip(us, splits) if s == "valid"} == set(order[:2])
    assert {u for u, s in zip(us, splits) if s == "test"} == set(order[-3:])
