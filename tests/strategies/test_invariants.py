"""Invariants that can fail, checked against oracles computed here rather than read from the code under test.

* greedy selection (ThresholdShedder, OverloadShedder) takes a minimal largest-first prefix;
* every placement is drawn from the candidates it was given;
* AvgShedder's pairs are disjoint and each unload goes to the partner the pairing rule gives,
  recomputed from the scores independently.
"""

from __future__ import annotations

import numpy as np
from builders import broker_data, bundle_data
from hypothesis import given, settings
from hypothesis import strategies as st

from shedlab.config import LoadBalancerConfig
from shedlab.model.pulsar import LoadData
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import AvgShedder, make_placement
from shedlab.strategies.greedy import greedy_largest_first

MB = 1024 * 1024
CONF = LoadBalancerConfig().with_overrides(
    {
        "maxUnloadPercentage": 0.5,
        "loadBalancerAvgShedderHitCountHighThreshold": 1,
        "loadBalancerAvgShedderHitCountLowThreshold": 1,
        "minUnloadMessage": 10,
    }
)


@st.composite
def clusters(draw: st.DrawFn) -> LoadData:
    n = draw(st.integers(1, 7))
    brokers, bundles, recent = {}, {}, {}
    for b in range(n):
        count = draw(st.integers(0, 6))
        names = [f"t/ns{b}/0x{k:08x}_0x{k + 1:08x}" for k in range(count)]
        # whole numbers from a small range, so ties between bundles and between brokers are common
        rates = [float(draw(st.integers(0, 50)) * 100) for _ in names]
        tps = [float(draw(st.integers(0, 20)) * MB) for _ in names]
        for name, r, t in zip(names, rates, tps, strict=True):
            bundles[name] = bundle_data(rate_in=r, tp_in=t)
            if draw(st.integers(0, 3)) == 0:
                recent[name] = 1
        brokers[f"broker-{b}:8080"] = broker_data(
            cpu=(float(draw(st.integers(0, 20)) * 5), 100.0),
            rate_in=sum(rates),
            tp_in=sum(tps),
            bundles=names,
            long_rate_in=sum(rates),
        )
    return LoadData(brokers, bundles, recent)


@settings(max_examples=150, deadline=None)
@given(clusters(), st.floats(-MB, 200 * MB, allow_nan=False))
def test_greedy_selection_is_a_minimal_largest_first_prefix(data: LoadData, target: float) -> None:
    snap = ClusterSnapshot.from_load_data(data)
    for b in range(snap.num_brokers):
        eligible = snap.shedding_candidates(b).tolist()
        tp = {j: float(snap.short_msg_throughput_in[j] + snap.short_msg_throughput_out[j]) for j in eligible}
        chosen, keys, marked = greedy_largest_first(snap, b, target)
        taken = chosen.tolist()
        if not eligible:
            assert taken == []
            continue
        assert taken, "always at least one bundle"
        assert set(taken) <= set(eligible) and len(set(taken)) == len(taken)
        assert keys.tolist() == [tp[j] for j in taken]
        left = [tp[j] for j in eligible if j not in taken]
        assert not left or min(keys) >= max(left), "largest first"
        assert marked.tolist() == list(np.cumsum(keys))
        # minimal: without the last bundle the target was not reached yet
        assert sum(keys[:-1]) < target or len(taken) == 1
        # enough: the target is reached, or nothing is left to take
        assert sum(keys) >= target or not left


@settings(max_examples=100, deadline=None)
@given(clusters(), st.data())
def test_placements_are_drawn_from_the_candidates(data: LoadData, draw: st.DataObject) -> None:
    snap = ClusterSnapshot.from_load_data(data)
    ids = list(snap.broker_ids)
    candidates = draw.draw(st.lists(st.sampled_from(ids), unique=True, max_size=len(ids)))
    for name in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "AvgShedder"):
        strategy = make_placement(name, 3)
        for attempt in range(2):
            placed = strategy.select_broker(
                candidates, f"t/new/0x0000000{attempt}_0x0000000{attempt + 1}", snap, CONF
            )
            if not candidates:
                assert placed.broker is None and list(placed.choices) == []
                continue
            assert placed.broker in candidates
            assert placed.broker in placed.choices
            assert set(placed.choices) <= set(candidates)
            assert list(placed.choices) == sorted(placed.choices)


def expected_pairs(snap: ClusterSnapshot) -> list[tuple[str, str, float]]:
    """The pairing rule recomputed: brokers by score ×100, ties by id; outside in; (under, over, gap)."""
    scores = [float(v) * 100 for v in snap.weighted_max_usage(CONF.resource_weights())]
    order = sorted(range(snap.num_brokers), key=lambda i: (scores[i], snap.broker_ids[i]))
    pairs = []
    i, j = 0, len(order) - 1
    while i <= j:
        lo, hi = order[i], order[j]
        pairs.append((snap.broker_ids[lo], snap.broker_ids[hi], scores[hi] - scores[lo]))
        i, j = i + 1, j - 1
    return pairs


@settings(max_examples=150, deadline=None)
@given(clusters())
def test_avg_shedder_pairs_are_disjoint_and_unloads_go_to_the_partner(data: LoadData) -> None:
    snap = ClusterSnapshot.from_load_data(data)
    result = AvgShedder(np.random.default_rng(0)).find_bundles_for_unloading(snap, CONF)
    low = CONF.load_balancer_avg_shedder_low_threshold
    pairs = expected_pairs(snap)
    hit = [(under, over) for under, over, gap in pairs if gap >= low]
    partner = {over: under for under, over in hit}
    # disjoint: no broker in two pairs
    members = [b for under, over in hit for b in {under, over}]
    assert len(members) == len(set(members))
    reported = {tuple(e["pair"]) for e in result.skipped if "pair" in e} | {
        tuple(u.reason["pair"]) for u in result.unloads
    }
    assert reported == set(hit)
    for u in result.unloads:
        assert u.broker in partner, "only the hotter broker of a hit pair sheds"
        assert u.destination == partner[u.broker]
        assert u.destination != u.broker
        assert snap.bundle_owner[snap.bundle_index(u.bundle)] == snap.broker_index[u.broker]
        assert u.bundle not in data.recentlyUnloadedBundles
    sources = {u.broker for u in result.unloads}
    destinations = {u.destination for u in result.unloads}
    assert not sources & destinations
