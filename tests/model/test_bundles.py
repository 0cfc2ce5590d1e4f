"""Topic → bundle hashing as Pulsar's ConsistentHashingTopicBundleAssigner and NamespaceBundles do."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shedlab.model.bundles import (
    FULL_UPPER_BOUND,
    bundle_index,
    bundle_name,
    bundle_name_problem,
    bundle_of_topic,
    even_boundaries,
    even_ranges,
    parse_range,
    ranges_to_boundaries,
    topic_hash,
)


def test_even_ranges_split_the_hash_space_like_pulsar() -> None:
    assert even_ranges(4) == [
        (0x00000000, 0x40000000),
        (0x40000000, 0x80000000),
        (0x80000000, 0xC0000000),
        (0xC0000000, 0xFFFFFFFF),
    ]
    assert even_ranges(1) == [(0, 0xFFFFFFFF)]
    assert bundle_name("t/ns", 0x40000000, 0x80000000) == "t/ns/0x40000000_0x80000000"


def test_topic_hash_is_the_unsigned_crc32_of_the_full_name() -> None:
    name = "persistent://public/default/orders-partition-3"
    assert topic_hash(name) == zlib.crc32(name.encode())
    # A known value, so that a change of hash function (e.g. to a signed int) cannot pass unnoticed.
    assert topic_hash("persistent://public/default/test") == 0xAA2E30F5


def test_exact_boundary_hits_the_bundle_starting_there() -> None:
    bounds = even_boundaries(4)
    assert bundle_index([0, 0x3FFFFFFF, 0x40000000, 0xBFFFFFFF, 0xC0000000], bounds).tolist() == [
        0,
        0,
        1,
        2,
        3,
    ]


def test_the_last_boundary_belongs_to_the_last_bundle() -> None:
    # Pulsar's getBundle throws here (index past its list); shedlab keeps the hash in the last bundle.
    assert bundle_index([FULL_UPPER_BOUND], even_boundaries(4)).tolist() == [3]


def test_parse_range_and_boundaries_from_ranges() -> None:
    assert parse_range("0x00000000_0x40000000") == (0, 0x40000000)
    assert parse_range("0x40000000_0x40000000") is None
    assert parse_range("0x4000_0x8000") is None
    ranges = [(0x80000000, 0xFFFFFFFF), (0, 0x80000000)]
    assert ranges_to_boundaries(ranges) == [0, 0x80000000, 0xFFFFFFFF]
    assert ranges_to_boundaries([(0, 0x80000000)]) is None
    assert ranges_to_boundaries([(0, 0x40000000), (0x80000000, 0xFFFFFFFF)]) is None


@given(st.text(min_size=1, max_size=60), st.integers(1, 64))
def test_every_topic_lands_in_the_range_that_holds_its_hash(topic: str, n: int) -> None:
    bounds = even_boundaries(n)
    i = bundle_of_topic(topic, bounds)
    h = topic_hash(topic)
    assert 0 <= i < n
    assert bounds[i] <= h and (h < bounds[i + 1] or (i == n - 1 and h == FULL_UPPER_BOUND))


def test_vectorised_index_matches_the_scalar_one() -> None:
    topics = [f"persistent://t/ns/topic-{k}" for k in range(500)]
    bounds = even_boundaries(16)
    vector = bundle_index(np.array([topic_hash(t) for t in topics]), bounds)
    assert vector.tolist() == [bundle_of_topic(t, bounds) for t in topics]


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("public/default/0x00000000_0xffffffff", True),
        ("pulsar/standalone/broker-1:8080/0x00000000_0xffffffff", True),  # a v1 heartbeat namespace
        ("notabundle", False),
        ("default/0x00000000_0xffffffff", False),
        ("public//0x00000000_0xffffffff", False),
        ("public/default/0x40000000_0x00000000", False),
        ("public/default/0x0000000_0xffffffff", False),
    ],
)
def test_bundle_name_problem(name: str, ok: bool) -> None:
    assert (bundle_name_problem(name) is None) == ok
