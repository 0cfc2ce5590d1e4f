"""The caches behind fast placement return what a fresh computation would (they are invisible)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from plain_avg_shedder import pairs_one_by_one

from shedlab.config import LoadBalancerConfig
from shedlab.errors import InputError
from shedlab.model.snapshot import ClusterSnapshot, weighted_max_percent, weighted_max_usage
from shedlab.strategies import AvgShedder, make_placement


def _snapshot(
    rng: np.random.Generator, n: int, m: int, like: ClusterSnapshot | None = None
) -> ClusterSnapshot:
    ids = like.broker_ids if like is not None else tuple(f"broker-{i:04d}:8080" for i in range(n))
    usage = rng.random((n, 5)) * 100
    rates = rng.random((n, 4)) * 1000
    return ClusterSnapshot.from_columns(
        broker_ids=ids,
        resource_usage=usage,
        resource_limit=np.full((n, 5), 100.0),
        broker_rates=rates,
        num_owned_bundles=np.ones(n, dtype=np.int64),
        num_topics=np.ones(n, dtype=np.int64),
        long_term_msg_rate_in=rates[:, 0],
        long_term_msg_rate_out=rates[:, 1],
        bundle_names=tuple(f"t/ns/0x{j:08x}_0x{j + 1:08x}" for j in range(m)),
        bundle_owner=rng.integers(-1, n, m),
        bundle_has_data=np.ones(m, dtype=np.bool_),
        bundle_sheddable=np.ones(m, dtype=np.bool_),
        short=rng.random((4, m)),
        long=rng.random((2, m)),
        bundle_topics=np.ones(m, dtype=np.int64),
        like=like,
    )


def test_weighted_max_usage_cache_sees_in_place_changes_and_is_read_only() -> None:
    snap = _snapshot(np.random.default_rng(1), 20, 50)
    weights = LoadBalancerConfig().resource_weights()
    first = snap.weighted_max_usage(weights)
    assert snap.weighted_max_usage(weights) is first  # cached
    with pytest.raises(ValueError):
        first[0] = 0.0
    snap.resource_usage[3, 0] = 99.5  # a caller changes usage in place: the cache must notice
    again = snap.weighted_max_usage(weights)
    assert again.tolist() == weighted_max_usage(snap.resource_usage, snap.resource_limit, weights).tolist()
    other = (1.0, 1.0, 0.5, 0.5)
    assert (
        snap.weighted_max_usage(other).tolist()
        == weighted_max_usage(snap.resource_usage, snap.resource_limit, other).tolist()
    )


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12), m=st.integers(0, 80))
def test_a_snapshot_built_like_an_earlier_one_indexes_as_a_fresh_one(seed: int, n: int, m: int) -> None:
    rng = np.random.default_rng(seed)
    first = _snapshot(rng, n, m)
    same_owners = _snapshot(np.random.default_rng(seed), n, m, like=first)
    moved = _snapshot(rng, n, m, like=first)
    for snap in (first, same_owners, moved):
        fresh = _snapshot(np.random.default_rng(0), n, m)
        fresh.bundle_owner = snap.bundle_owner
        fresh.reindex_owners()
        for b in range(-1, n):
            assert snap.bundles_of(b).tolist() == fresh.bundles_of(b).tolist()
            assert snap.bundles_of(b).tolist() == np.flatnonzero(snap.bundle_owner == b).tolist()
        assert snap.broker_index == {b: i for i, b in enumerate(snap.broker_ids)}


def test_placement_by_ids_equals_placement_by_indices_and_rejects_unknown_ids() -> None:
    snap = _snapshot(np.random.default_rng(2), 30, 100)
    conf = LoadBalancerConfig()
    for name in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight"):
        by_ids = make_placement(name, 5).select_broker(list(snap.broker_ids), "b", snap, conf)
        by_idx = make_placement(name, 5).select_broker(np.arange(30), "b", snap, conf)
        assert by_ids.broker == by_idx.broker
        with pytest.raises(InputError, match="unknown broker"):
            make_placement(name, 5).select_broker(["broker-0001:8080", "nope:8080"], "b", snap, conf)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 30),
    seed=st.integers(0, 2**32 - 1),
    low=st.sampled_from([0, 5, 15, 40]),
    high=st.sampled_from([0, 20, 40, 200]),
    rounds=st.integers(1, 5),
)
def test_avg_shedder_pairs_and_counters_equal_the_one_by_one_loop(
    n: int, seed: int, low: float, high: float, rounds: int
) -> None:
    """Same pairs, same counters and the same key order of both counter dicts, cycle after cycle."""
    rng = np.random.default_rng(seed)
    ids = tuple(f"broker-{i:04d}:8080" for i in range(n))
    conf = LoadBalancerConfig.from_mapping(
        {"loadBalancerAvgShedderLowThreshold": low, "loadBalancerAvgShedderHighThreshold": high}
    )
    fast, slow = AvgShedder(), AvgShedder()
    for _ in range(rounds):
        scores = np.round(rng.random(n) * 100, int(rng.integers(0, 3)))  # ties too
        snap = _snapshot(rng, n, 3) if n else None
        got = fast._find_pairs(snap, scores, conf) if snap is not None else []
        want = pairs_one_by_one(slow, ids, scores, conf.load_balancer_avg_shedder_low_threshold,
                                 conf.load_balancer_avg_shedder_high_threshold) if n else []  # fmt: skip
        assert [(p.under, p.over, p.gap) for p in got] == want
        assert list(fast.hit_high.items()) == list(slow.hit_high.items())
        assert list(fast.hit_low.items()) == list(slow.hit_low.items())


def test_weighted_max_percent_is_cached_and_shared_with_usage_and_copies() -> None:
    snap = _snapshot(np.random.default_rng(2), 20, 50)
    weights = LoadBalancerConfig().resource_weights()
    percent = snap.weighted_max_percent(weights)
    assert (
        percent.tolist() == weighted_max_percent(snap.resource_usage, snap.resource_limit, weights).tolist()
    )
    assert snap.weighted_max_percent(weights) is percent  # cached
    with pytest.raises(ValueError):
        percent[0] = 0.0
    usage = snap.weighted_max_usage(weights)  # the percent / 100, bit for bit
    assert usage.tolist() == weighted_max_usage(snap.resource_usage, snap.resource_limit, weights).tolist()
    clone = copy.copy(snap)  # a shallow copy: same fields and caches, its own attributes
    assert clone is not snap and clone.weighted_max_usage(weights) is usage
    assert clone.weighted_max_percent(weights) is percent and clone.broker_index is snap.broker_index
    clone.now_ms = snap.now_ms + 1
    assert snap.now_ms != clone.now_ms
    snap.resource_limit[0, 0] *= 2  # in place: both caches notice
    assert snap.weighted_max_percent(weights) is not percent
    assert (
        snap.weighted_max_percent(weights).tolist()
        == weighted_max_percent(snap.resource_usage, snap.resource_limit, weights).tolist()
    )


def test_seeded_scores_are_served_from_the_cache_until_the_usage_changes() -> None:
    snap = _snapshot(np.random.default_rng(3), 20, 50)
    weights = LoadBalancerConfig().resource_weights()
    seeded = weighted_max_percent(snap.resource_usage, snap.resource_limit, weights)
    snap.seed_percent(weights, seeded)
    assert snap.weighted_max_percent(weights) is seeded
    with pytest.raises(ValueError):
        seeded[0] = 0.0
    usage = snap.weighted_max_usage(weights)  # the percent / 100, from the seeded values
    assert usage.tolist() == weighted_max_usage(snap.resource_usage, snap.resource_limit, weights).tolist()
    snap.resource_usage[1, 0] += 1.0  # in place: the seed no longer holds
    assert snap.weighted_max_percent(weights) is not seeded
