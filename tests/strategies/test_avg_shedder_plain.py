"""AvgShedder's shedding equals the plain one-pair-at-a-time form, reasons and counters' order included.

The strategy reads every pair's counters at once and updates the counters in bulk (both commute with
Pulsar's pair-by-pair loop because every broker is in one pair); :func:`plain_shedding` below is that loop
as Pulsar writes it, kept as the reference the fast form must equal, cycle after cycle.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from plain_avg_shedder import pairs_one_by_one

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import AvgShedder
from shedlab.strategies.avg_shedder import first_fit
from shedlab.strategies.base import SheddingResult, SkipKind, Unload
from shedlab.strategies.greedy import sort_descending


def plain_shedding(avg: AvgShedder, snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> SheddingResult:
    """AvgShedder.findBundlesForUnloading one pair at a time, counters updated and read in pair order."""
    result = SheddingResult()
    ids = snapshot.broker_ids
    scores = snapshot.weighted_max_usage(conf.resource_weights()) * 100
    low = conf.load_balancer_avg_shedder_low_threshold
    high = conf.load_balancer_avg_shedder_high_threshold
    pairs = pairs_one_by_one(avg, ids, scores, low, high)
    if not pairs:
        avg.hit_high.clear()
        avg.hit_low.clear()
        result.skipped.append({"reason": "no broker pair reaches the low threshold"})
        result.note(SkipKind.NO_PAIR)
        return result
    for lo, hi, gap in pairs:
        plain_pair(avg, snapshot, scores, (lo, hi, gap), conf, result)
    return result


def plain_pair(
    avg: AvgShedder,
    snapshot: ClusterSnapshot,
    scores: np.ndarray,
    pair: tuple[int, int, float],
    conf: LoadBalancerConfig,
    result: SheddingResult,
) -> None:
    lo, hi, gap = pair
    under, over = snapshot.broker_ids[lo], snapshot.broker_ids[hi]
    counts = {
        "hit_high_under": avg.hit_high.get(under, 0),
        "hit_high_over": avg.hit_high.get(over, 0),
        "hit_low_under": avg.hit_low.get(under, 0),
        "hit_low_over": avg.hit_low.get(over, 0),
    }
    base: dict[str, Any] = {"strategy": avg.name, "pair": [under, over], "under_score": float(scores[lo]),
                            "over_score": float(scores[hi]), "gap": gap, **counts}  # fmt: skip
    hh = conf.load_balancer_avg_shedder_hit_count_high_threshold
    hl = conf.load_balancer_avg_shedder_hit_count_low_threshold
    if not (counts["hit_high_under"] >= hh or counts["hit_high_over"] >= hh
            or counts["hit_low_under"] >= hl or counts["hit_low_over"] >= hl):  # fmt: skip
        result.skipped.append({**base, "broker": over, "reason": "hit count not reached"})
        result.note(SkipKind.HIT_COUNT_NOT_REACHED, over)
        return
    for b in (under, over):
        avg.hit_high.pop(b, None)
        avg.hit_low.pop(b, None)
    p = conf.max_unload_percentage
    rate, tp = snapshot.total_msg_rate(), snapshot.total_msg_throughput()
    need_msg = float(rate[hi] - rate[lo]) * p
    need_tp = float(tp[hi] - tp[lo]) * p
    candidates = snapshot.shedding_candidates(hi)
    if need_msg > conf.min_unload_message:
        mode, amount = "msgRate", need_msg
        keys = snapshot.short_msg_rate_in[candidates] + snapshot.short_msg_rate_out[candidates]
    elif need_tp > conf.min_unload_message_throughput:
        mode, amount = "throughput", need_tp
        keys = snapshot.short_msg_throughput_in[candidates] + snapshot.short_msg_throughput_out[candidates]
    else:
        why = "traffic gap below minUnloadMessage(Throughput)"
        result.skipped.append(
            {**base, "broker": over, "reason": why, "need_msg_rate": need_msg, "need_throughput": need_tp}
        )
        result.note(SkipKind.AMOUNT_BELOW_MINIMUM, over)
        return
    base.update(mode=mode, amount_to_move=amount)
    ordered, keys = sort_descending(candidates, keys)
    remaining, selected = amount, 0.0
    for j, traffic in zip(ordered.tolist(), keys.tolist(), strict=True):
        if 0 < traffic <= remaining:
            remaining -= traffic
            selected += traffic
            bundle = snapshot.bundle_names[j]
            avg.planned_destinations[bundle] = under
            reason = {**base, "bundle_traffic": traffic, "amount_selected": selected}
            result.unloads.append(Unload(over, bundle, reason, destination=under))
    if not selected:
        result.skipped.append({**base, "broker": over, "reason": "no bundle fits the amount to move"})
        result.note(SkipKind.NO_BUNDLE_FITS, over)


def cluster(rng: np.random.Generator, ids: tuple[str, ...], m: int, decimals: int) -> ClusterSnapshot:
    """Random usage (rounded: ties), some NaN usage and zero traffic, random owners and sheddable bundles."""
    n = len(ids)
    usage = np.round(rng.random((n, 5)) * 100, decimals)
    usage[rng.random((n, 5)) < 0.02] = np.nan
    rates = np.round(rng.random((n, 4)) * 2000, decimals)
    short = rng.random((4, m)) * 300 * (rng.random((4, m)) > 0.2)
    return ClusterSnapshot.from_columns(
        broker_ids=ids,
        resource_usage=usage,
        resource_limit=np.full((n, 5), 100.0),
        broker_rates=rates,
        num_owned_bundles=np.ones(n, dtype=np.int64),
        num_topics=np.ones(n, dtype=np.int64),
        long_term_msg_rate_in=rates[:, 0],
        long_term_msg_rate_out=rates[:, 1],
        bundle_names=tuple(f"t/ns{j % 3}/0x{j:08x}_0x{j + 1:08x}" for j in range(m)),
        bundle_owner=rng.integers(-1, n, m),
        bundle_has_data=np.ones(m, dtype=np.bool_),
        bundle_sheddable=rng.random(m) < 0.9,
        short=short,
        long=rng.random((2, m)),
        bundle_topics=np.ones(m, dtype=np.int64),
        bundle_recently_unloaded=rng.random(m) < 0.1,
    )


def same(got: SheddingResult, want: SheddingResult) -> None:
    """Equal results, the reasons' key order included; ``repr`` tells every float apart (NaN equals NaN)."""
    assert repr([(u.broker, u.bundle, u.destination, list(u.reason.items())) for u in got.unloads]) == repr(
        [(u.broker, u.bundle, u.destination, list(u.reason.items())) for u in want.unloads]
    )
    assert repr([list(s.items()) for s in got.skipped]) == repr([list(s.items()) for s in want.skipped])
    assert got.skips == want.skips


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 25),
    seed=st.integers(0, 2**32 - 1),
    low=st.sampled_from([0, 5, 15, 40]),
    high=st.sampled_from([0, 20, 40, 200]),
    hits=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    rounds=st.integers(1, 6),
)
def test_avg_shedder_equals_the_plain_pair_by_pair_form(
    n: int, seed: int, low: float, high: float, hits: tuple[int, int], rounds: int
) -> None:
    rng = np.random.default_rng(seed)
    conf = LoadBalancerConfig.from_mapping(
        {
            "loadBalancerAvgShedderLowThreshold": low,
            "loadBalancerAvgShedderHighThreshold": high,
            "loadBalancerAvgShedderHitCountHighThreshold": hits[0],
            "loadBalancerAvgShedderHitCountLowThreshold": hits[1],
            "minUnloadMessage": 100,
            "minUnloadMessageThroughput": 100,
        }
    )
    everyone = tuple(f"broker-{i:04d}:8080" for i in range(n + 2))
    fast, plain = AvgShedder(), AvgShedder()
    for _ in range(rounds):
        # a broker may leave and come back between cycles: its counters stay, as in Pulsar
        ids = tuple(b for b in everyone if rng.random() < 0.9) or everyone[:1]
        snap = cluster(rng, ids, int(rng.integers(0, 60)), int(rng.integers(0, 3)))
        same(fast.find_bundles_for_unloading(snap, conf), plain_shedding(plain, snap, conf))
        assert list(fast.hit_high.items()) == list(plain.hit_high.items())
        assert list(fast.hit_low.items()) == list(plain.hit_low.items())
        assert list(fast.planned_destinations.items()) == list(plain.planned_destinations.items())


def loop_first_fit(ordered: np.ndarray, keys: np.ndarray, amount: float) -> list[tuple[int, float]]:
    """Pulsar's first-fit loop over every candidate, as the strategy ran it."""
    picks, remaining = [], amount
    for j, traffic in zip(ordered.tolist(), keys.tolist(), strict=True):
        if 0 < traffic <= remaining:
            remaining -= traffic
            picks.append((j, traffic))
    return picks


KEYS = st.one_of(
    st.sampled_from([0.0, -0.0, -1.0, 1.0, 2.0, 0.5, np.inf, -np.inf, np.nan, 1e-300, 5e-324]),
    st.floats(0, 500, allow_nan=False),
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(KEYS, max_size=40),
    st.one_of(st.floats(-10, 2000, allow_nan=False), st.sampled_from([0.0, np.inf, 1.0, 3.5])),
)
def test_first_fit_takes_what_the_loop_takes(values: list[float], amount: float) -> None:
    """Ties, zeros of both signs, negative, infinite and NaN keys, an infinite amount: the same picks."""
    keys = np.array(values, dtype=np.float64)
    ordered, keys = sort_descending(np.arange(keys.size, dtype=np.int64) * 7, keys)
    assert repr(first_fit(ordered, keys, amount)) == repr(loop_first_fit(ordered, keys, amount))
