"""Edges of TransferShedder (spec §8) that the mutation run of its file left unpinned.

Every cluster here is made by hand, and each value below follows from spec §8.3 by hand (the derivation
is in each docstring); where a test sits on a threshold, the loads and throughputs are chosen so that
both sides are exact in binary floating point. Pinned: the strict comparisons sat on
exactly (``std > target``, ``marked − gained + tp > offloadTp``, the swap's three ``<``), the per-pair
bookkeeping (shed count, min index), the swap iterator's skips, the scheduler's plumbing, and what a
cycle says about itself: each decision's ``reason`` dict (copied into the simulator's decision table)
and the ``skipped`` entries ("per-broker and per-bundle entries saying why each was passed over",
``docs/transfer-shedder.md``; the extensible manager keeps them in its ``last_result``). If those
formats change on purpose, change them here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import pytest

from shedlab.errors import ConfigError
from shedlab.model.pulsar import NamespaceBundleStats
from shedlab.strategies.base import Unload
from shedlab.strategies.extensible_data import (
    BrokerLoadData,
    BundleLoadData,
    ExtensibleLoadData,
    TopBundlesLoadData,
)
from shedlab.strategies.transfer_shedder import (
    BrokerFilterError,
    LoadStats,
    TransferPolicies,
    TransferShedder,
    TransferShedderSettings,
    TransferSheddingResult,
    UnloadScheduler,
    _java_div,
)

NOW = 1_800_000_000_000
# Pulsar's test fixture: debug mode on (the swap gain is booked), no hit-count wait.
JAVA = TransferShedderSettings(
    load_balancer_debug_mode_enabled=True, load_balancer_shedding_condition_hit_count_threshold=0
)
TIGHT = dataclasses.replace(JAVA, load_balancer_broker_load_target_std=0.125)
"""A target below the std 0.25 of a 1.0/0.5 pair, so the pair is shed as Overloaded."""


def load(value: float, tp: float, *, ema: float | None = None, updated: int = NOW) -> BrokerLoadData:
    """A broker's published data: ``weightedMaxEMA`` = value, ``msgThroughputOut`` = tp (in = 0)."""
    return BrokerLoadData(
        msg_throughput_out=tp,
        weighted_max_ema=value,
        msg_throughput_ema=tp if ema is None else ema,
        updated_at=updated,
    )


def name(prefix: str, i: int) -> str:
    return f"{prefix}/0x{i:08x}_0x{i + 1:08x}"


def report(prefix: str, *tps: float) -> TopBundlesLoadData:
    """A top-k report in the given (stored) order; bundle i of ``prefix`` has throughput out tps[i]."""
    return TopBundlesLoadData(
        tuple(
            BundleLoadData(name(prefix, i), NamespaceBundleStats(msgThroughputOut=v))
            for i, v in enumerate(tps)
        )
    )


def cluster(
    loads: Mapping[str, BrokerLoadData],
    tops: Mapping[str, TopBundlesLoadData],
    available: frozenset[str] | None = None,
) -> ExtensibleLoadData:
    return ExtensibleLoadData(
        brokers=dict(loads),
        top_bundles=dict(tops),
        available_brokers=frozenset(loads) if available is None else available,
    )


def run(
    data: ExtensibleLoadData,
    conf: TransferShedderSettings | None = JAVA,
    shedder: TransferShedder | None = None,
    **kwargs: Any,
) -> TransferSheddingResult:
    return (shedder or TransferShedder()).find_bundles_for_unloading(data, conf, now_ms=NOW, **kwargs)


def moves(result: TransferSheddingResult) -> list[tuple[str, str, str | None]]:
    return [(u.broker, u.bundle, u.destination) for u in result.unloads]


def same(got: Any, want: Any) -> None:
    """Equal, floats to 1e-12 relative (lists and dicts compared element by element)."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (got, want)
        for key, value in want.items():
            same(got[key], value)
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), (got, want)
        for g, w in zip(got, want, strict=True):
            same(g, w)
    elif isinstance(want, float) and not isinstance(got, bool):
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15), (got, want)
    else:
        assert got == want, (got, want)


def pair_reason(
    reason: str, tp: float, target: float, max_load: float, min_load: float, *, swap: bool, back: bool = False
) -> dict[str, Any]:
    return {
        "reason": reason,
        "direction": "min to max" if back else "max to min",
        "swap": swap,
        "bundle_throughput": tp,
        "offload_throughput": target,
        "max_load": max_load,
        "min_load": min_load,
    }


# ------------------------------------------------------------------------------- Java's double helpers


def test_java_division_by_zero_gives_signed_infinity_or_nan() -> None:
    """Java doubles: x/0 is ±∞ by the signs of x and of the zero, 0/0 and NaN/0 are NaN."""
    assert _java_div(6.0, 3.0) == 2.0
    assert _java_div(1.0, 0.0) == math.inf
    assert _java_div(-1.0, 0.0) == -math.inf
    assert _java_div(1.0, -0.0) == -math.inf
    assert _java_div(-1.0, -0.0) == math.inf
    assert math.isnan(_java_div(0.0, 0.0))
    assert math.isnan(_java_div(math.nan, 0.0))


def test_equal_loads_with_an_exact_zero_variance_give_std_zero_not_nan() -> None:
    """Two brokers at exactly 0.5: sum 1, sum of squares 0.5, variance 0.25 − 0.25 = 0 exactly; Java's
    sqrt(0) is 0 (only a negative rounding gives NaN)."""
    data = cluster({"a": load(0.5, 10), "b": load(0.5, 10)}, {})
    result = run(data)
    assert result.load_avg == 0.5
    assert result.load_std == 0.0


# ------------------------------------------------------------------------------------- LoadStats API


def test_load_stats_start_empty_and_an_empty_update_gives_zeros() -> None:
    """Java's LoadStats fields start at 0 and ``update(0, 0, 0)`` leaves avg = std = 0 (no division)."""
    stats = LoadStats({"b": load(0.75, 1), "a": load(0.25, 1)})
    assert (stats.sum, stats.sq_sum, stats.total_brokers, stats.avg, stats.std) == (0.0, 0.0, 0, 0.0, 0.0)
    assert (stats.sorted_brokers, stats.min_index, stats.max_index, stats.shed_count) == (["a", "b"], 0, 1, 0)
    stats.set_sums(1.0, 0.625, 2)
    assert (stats.avg, stats.std) == (0.5, 0.25)
    stats.set_sums(0.0, 0.0, 0)
    assert (stats.avg, stats.std) == (0.0, 0.0)


def test_a_load_of_minus_zero_sorts_below_zero_as_double_compare_does() -> None:
    """LoadStats sorts with ``Comparator.comparingDouble`` (``Double.compare``), where -0.0 < 0.0: a
    broker whose data says ``"weightedMaxEMA": -0.0`` is the least loaded, not tied with one at 0.0 (a
    tie would go to broker id, giving "a"), so it receives the transfer."""
    assert LoadStats({"a": load(0.0, 1), "b": load(-0.0, 1)}).sorted_brokers == ["b", "a"]
    data = cluster({"a": load(0.0, 1), "b": load(-0.0, 1), "c": load(1.0, 2)}, {"c": report("t/c", 1, 1)})
    assert moves(run(data)) == [("c", name("t/c", 0), "b")]


# ------------------------------------------------------------------------------------ conditions


def stats_of(data: ExtensibleLoadData) -> LoadStats:
    stats = LoadStats(data.brokers)
    values = [d.weighted_max_ema for d in data.brokers.values()]
    stats.set_sums(sum(values), sum(v * v for v in values), len(values))
    return stats


def test_under_and_over_loaded_are_false_for_a_broker_without_data() -> None:
    """Java: an empty ``brokerLoadDataStore().get(broker)`` makes both tests false, also when the broker
    at the max end of the sorted list has no data (isUnderLoaded's throughput test)."""
    data = cluster({"a": load(0.25, 10, ema=1), "b": load(0.75, 10)}, {})
    stats = stats_of(data)
    assert not TransferShedder.is_under_loaded("ghost", stats, data, JAVA)
    assert not TransferShedder.is_over_loaded("ghost", 0.0, data, JAVA)
    # "a" is underloaded only through its throughput EMA (1 < 10 × 0.125); with the max end of the list
    # pointing at a broker the store does not have, that test is false.
    assert TransferShedder.is_under_loaded("a", stats, data, JAVA)
    ghost_max = LoadStats({**data.brokers, "zz": load(2.0, 10)})
    ghost_max.set_sums(stats.sum, stats.sq_sum, stats.total_brokers)
    assert ghost_max.peek_max() == "zz"
    assert not TransferShedder.is_under_loaded("a", ghost_max, data, JAVA)


def test_underload_multiplier_is_capped_at_one_half() -> None:
    """m = min(0.5, max(0, targetStd/2)): with a target std of 2.0, m is 0.5, not 1.0. Loads 0.3 and 0.7
    (avg 0.5): 0.3 < 0.5 × 0.5 is false (it would be true with m = 1)."""
    data = cluster({"a": load(0.3, 10), "b": load(0.7, 10)}, {})
    conf = dataclasses.replace(JAVA, load_balancer_broker_load_target_std=2.0)
    assert not TransferShedder.is_under_loaded("a", stats_of(data), data, conf)
    lighter = cluster({"a": load(0.2, 10), "b": load(0.8, 10)}, {})  # 0.2 < 0.25: underloaded
    assert TransferShedder.is_under_loaded("a", stats_of(lighter), lighter, conf)


def test_underload_comparisons_are_strict() -> None:
    """Load exactly avg·m, or throughput EMA exactly m × the max broker's, is not underloaded.

    Loads 0.0625 and 0.9375: avg 0.5, m = 0.125, avg·m = 0.0625. Throughput EMAs 8 and 64: 64 × 0.125 = 8.
    """
    data = cluster({"a": load(0.0625, 8), "b": load(0.9375, 64)}, {})
    stats = stats_of(data)
    assert stats.avg == 0.5
    assert not TransferShedder.is_under_loaded("a", stats, data, JAVA)
    below = cluster({"a": load(math.nextafter(0.0625, 0), 8), "b": load(0.9375, 64)}, {})
    assert TransferShedder.is_under_loaded("a", stats, below, JAVA)
    slower = cluster({"a": load(0.0625, 8, ema=math.nextafter(8, 0)), "b": load(0.9375, 64)}, {})
    assert TransferShedder.is_under_loaded("a", stats, slower, JAVA)


def overload_only() -> ExtensibleLoadData:
    """Loads 0.5, 0.5, 0.5, 0.875 with equal throughput EMAs: avg 0.59375, std 0.1624 < 0.25, nobody
    under-loaded (0.5 ≥ avg × 0.125); d is over-loaded (0.875 > 0.85 and > avg + 0.25 = 0.84375)."""
    loads = {b: load(0.5, 100) for b in "abc"}
    loads["d"] = load(0.875, 100)
    return cluster(loads, {"d": report("t/d", 1, 99)})


def test_an_overloaded_max_broker_alone_triggers_shedding() -> None:
    """The third clause of the condition (isOverLoaded(peekMaxBroker)) is the only one true here.

    offload = (0.875 − 0.5)/2 = 0.1875; offloadTp = 100 × 0.1875 / 0.875 ≈ 21.43: the 1 B/s bundle moves,
    the 99 B/s one is d's last top bundle. Then the std estimate is below target and the new max end (c,
    0.5) is not over-loaded: the pairing stops with "target met".
    """
    result = run(overload_only())
    assert moves(result) == [("d", name("t/d", 0), "a")]
    assert result.unloads[0].reason["reason"] == "Overloaded"
    assert result.skipped[-1]["reason"] == "target met"
    assert result.load_std is not None and result.load_std < 0.25


def test_std_exactly_at_target_in_the_pairing_loop_gives_underloaded_not_overloaded() -> None:
    """Loads 0.25 and 0.75: avg 0.5, sum of squares 0.625, variance 0.3125 − 0.25 = 0.0625, std exactly
    0.25 = target, so "Overloaded" (std > target) does not apply; a's throughput EMA 10 < 300 × 0.125
    makes it Underloaded.

    offload = 0.25, offloadTp = 300 × 0.25 / 0.75 = 100. The 100 B/s bundle reaches the target exactly
    and is not "greater than" it, so it moves without a swap (b's 200 B/s bundle is its last). The
    estimate: (0.75 − 0.25)² … both brokers at 0.5 → std 0.
    """
    data = cluster({"a": load(0.25, 100, ema=10), "b": load(0.75, 300)}, {"b": report("t/b", 100, 200)})
    result = run(data)
    assert (result.label, result.reason, result.hit_count) == ("Success", None, 0)
    assert (result.load_avg, result.load_std, result.load_std_after) == (0.5, 0.25, 0.0)
    assert moves(result) == [("b", name("t/b", 0), "a")]
    same(result.unloads[0].reason, pair_reason("Underloaded", 100.0, 100.0, 0.75, 0.25, swap=False))
    same(
        result.skipped,
        [
            {"broker": "b", "bundle": name("t/b", 1), "reason": "last top bundle"},
            {"reason": "pairs exhausted", "brokers_shed": 1, "limit": 3},
        ],
    )


# --------------------------------------------------------------------------------- the pairing loop


def ladder() -> ExtensibleLoadData:
    """Six brokers a…f at 0.125 … 0.875 (steps of 0.125, 0.5 left out), 100 B/s each, reports [1, 99].

    std ≈ 0.27 > 0.125 (TIGHT): every pair is Overloaded. Each max broker moves its 1 B/s bundle (the
    offload target is tens of B/s) and keeps its 99 B/s one (its last top bundle); moving 1 % of a
    broker's throughput barely changes the std estimate, so the condition stays true for three pairs.
    """
    loads = {b: load(0.125 * (i + 1 + (i >= 3)), 100) for i, b in enumerate("abcdef")}
    return cluster(loads, {b: report(f"t/{b}", 1, 99) for b in "abcdef"})


def test_each_pair_advances_the_min_broker_and_counts_one_shed_broker() -> None:
    """Pairs from the outside in: f→a, e→b, d→c; the cap stops the loop after exactly that many pairs."""
    assert [d.weighted_max_ema for d in ladder().brokers.values()] == [0.125, 0.25, 0.375, 0.625, 0.75, 0.875]
    result = run(ladder(), TIGHT)
    assert moves(result) == [
        ("f", name("t/f", 0), "a"),
        ("e", name("t/e", 0), "b"),
        ("d", name("t/d", 0), "c"),
    ]
    assert result.skipped[-1] == {"reason": "pairs exhausted", "brokers_shed": 3, "limit": 3}
    two = run(ladder(), dataclasses.replace(TIGHT, load_balancer_max_number_of_broker_shedding_per_cycle=2))
    assert moves(two) == [("f", name("t/f", 0), "a"), ("e", name("t/e", 0), "b")]
    assert two.skipped[-1] == {"reason": "pairs exhausted", "brokers_shed": 2, "limit": 2}


def test_a_cap_of_zero_brokers_decides_nothing_and_reports_hit_count() -> None:
    """With ``loadBalancerMaxNumberOfBrokerSheddingPerCycle`` = 0 (config accepts it) the loop never runs:
    no broker lacked data or bundles, so Java's last fallback reason, HitCount, is reported."""
    conf = TransferShedderSettings.from_pulsar(
        {
            "loadBalancerMaxNumberOfBrokerSheddingPerCycle": 0,
            "loadBalancerSheddingConditionHitCountThreshold": 0,
            "loadBalancerBrokerLoadTargetStd": 0.125,
        }
    )
    result = run(ladder(), conf)
    assert (result.label, result.reason, result.unloads) == ("Skip", "HitCount", [])
    assert result.skipped == [
        {"reason": "pairs exhausted", "brokers_shed": 0, "limit": 0},
        {"label": "Skip", "reason": "HitCount"},
    ]


def test_a_max_broker_with_a_sole_top_bundle_is_passed_over_for_the_next() -> None:
    """Loads a 0.125, b 0.75, c 0.875 (std 0.33 > 0.25): c's report has one bundle (NoBundles, "continue"),
    so b is paired with the same min broker a: offload (0.75 − 0.125)/2 = 0.3125, target 100 × 0.3125/0.75
    ≈ 41.7 B/s, the 1 B/s bundle moves and the 99 B/s one is b's last."""
    loads = {"a": load(0.125, 100), "b": load(0.75, 100), "c": load(0.875, 100)}
    data = cluster(loads, {"b": report("t/b", 1, 99), "c": report("t/c", 100)})
    result = run(data)
    assert moves(result) == [("b", name("t/b", 0), "a")]
    assert result.skipped == [
        {"broker": "c", "reason": "NoBundles", "detail": "sole top bundle"},
        {"broker": "b", "bundle": name("t/b", 1), "reason": "last top bundle"},
        {"reason": "pairs exhausted", "brokers_shed": 1, "limit": 3},
    ]


def test_a_max_broker_without_a_report_then_target_met_gives_no_load_data() -> None:
    """Loads 0.25/0.5/0.75 (std 0.204 < 0.25): a is under-loaded only through its throughput EMA (10 <
    c's 1000 × 0.125). c has no report ("continue"); the max end is now b (EMA 20: 10 < 2.5 is false),
    nobody is over-loaded: "target met" with the std unchanged, and the one broker without data decides
    the skip reason."""
    loads = {"a": load(0.25, 100, ema=10), "b": load(0.5, 100, ema=20), "c": load(0.75, 100, ema=1000)}
    result = run(cluster(loads, {"b": report("t/b", 1, 99)}))
    std = math.sqrt(0.875 / 3 - 0.25)
    assert result.load_std == pytest.approx(std, rel=1e-15)
    assert (result.label, result.reason, result.unloads) == ("Skip", "NoLoadData", [])
    same(
        result.skipped,
        [
            {"broker": "c", "reason": "NoLoadData", "detail": "no top bundles"},
            {"reason": "target met", "std": std},
            {"label": "Skip", "reason": "NoLoadData"},
        ],
    )


def test_a_max_broker_whose_bundles_all_stay_counts_as_nothing_movable() -> None:
    loads = {"a": load(0.5, 100), "b": load(1.0, 400)}
    data = cluster(loads, {"b": report("t/b", 1, 2)})
    result = run(data, TIGHT, recently_unloaded_bundles={name("t/b", 0): NOW, name("t/b", 1): NOW})
    assert (result.label, result.reason) == ("Skip", "NoBundles")
    assert result.skipped == [
        {"broker": "b", "bundle": name("t/b", 0), "reason": "recently unloaded"},
        {"broker": "b", "bundle": name("t/b", 1), "reason": "recently unloaded"},
        {"broker": "b", "reason": "NoBundles", "detail": "nothing movable"},
        {"reason": "pairs exhausted", "brokers_shed": 0, "limit": 3},
        {"label": "Skip", "reason": "NoBundles"},
    ]


def test_a_marked_throughput_below_one_byte_per_second_still_counts() -> None:
    """Loads 1.0/0.5, b's throughput 10.5 B/s: offloadTp = 10.5 × 0.25 / 1.0 = 2.625; the 0.5 B/s bundle
    moves (anything marked > 0 is a decision)."""
    loads = {"a": load(0.5, 10), "b": load(1.0, 10.5)}
    result = run(cluster(loads, {"b": report("t/b", 0.5, 10)}), TIGHT)
    assert moves(result) == [("b", name("t/b", 0), "a")]
    same(result.unloads[0].reason, pair_reason("Overloaded", 0.5, 2.625, 1.0, 0.5, swap=False))


# ----------------------------------------------------------------------------- walking max's bundles


def bundle(ns: str, tp: float) -> BundleLoadData:
    return BundleLoadData(f"t/{ns}/0x00000000_0xffffffff", NamespaceBundleStats(msgThroughputOut=tp))


def test_every_per_bundle_skip_is_recorded_and_the_walk_continues_past_it() -> None:
    """b (1.0, 100 B/s) → a (0.5): offloadTp = 100 × 0.25 / 1.0 = 25. b's report, in order: a bundle the
    channel says c owns, one in an excluded namespace, one recently unloaded, one whose namespace has an
    isolation policy (shedding such bundles is off), one with zero throughput — each skipped, the walk
    goes on — then 1 B/s (moves) and 30 B/s (1 + 30 > 25; a has no report, so no swap: the walk stops).

    The std estimate then moves 1 × 1.0/100 = 0.01 of load: 0.99 and 0.51 → std √(0.6201 − 0.5625) = 0.24.
    """
    top = TopBundlesLoadData(
        (
            bundle("other", 5),
            bundle("excl", 5),
            bundle("recent", 5),
            bundle("iso", 5),
            bundle("zero", 0),
            bundle("ok0", 1),
            bundle("ok1", 30),
        )
    )
    names = [e.bundle_name for e in top.top_bundles_load_data]
    owners = dict.fromkeys(names, "b") | {names[0]: "c"}
    conf = dataclasses.replace(TIGHT, load_balancer_shedding_excluded_namespaces=frozenset({"t/excl"}))
    result = run(
        cluster({"a": load(0.5, 50), "b": load(1.0, 100)}, {"b": top}),
        conf,
        owners=owners,
        recently_unloaded_bundles={names[2]: NOW},
        policies=TransferPolicies(isolation_namespaces=frozenset({"t/iso"})),
    )
    assert moves(result) == [("b", names[5], "a")]
    same(result.unloads[0].reason, pair_reason("Overloaded", 1.0, 25.0, 1.0, 0.5, swap=False))
    assert result.load_std_after == pytest.approx(0.24, rel=1e-12)
    same(
        result.skipped,
        [
            {"broker": "b", "bundle": names[0], "reason": "max broker is not the owner"},
            {"broker": "b", "bundle": names[1], "reason": "excluded namespace"},
            {"broker": "b", "bundle": names[2], "reason": "recently unloaded"},
            {"broker": "b", "bundle": names[3], "reason": "not transferable (policies or filters)"},
            {"broker": "b", "bundle": names[4], "reason": "zero throughput"},
            {
                "broker": "b",
                "bundle": names[6],
                "reason": "exceeds offload target and no swap",
                "marked": 31.0,
                "target": 25.0,
            },
            {"reason": "pairs exhausted", "brokers_shed": 1, "limit": 3},
        ],
    )


def test_owners_that_name_the_max_broker_leave_its_bundles_movable() -> None:
    loads = {"a": load(0.5, 50), "b": load(1.0, 100)}
    data = cluster(loads, {"b": report("t/b", 1, 99)})
    owners = {name("t/b", 0): "b", name("t/b", 1): "b"}
    assert moves(run(data, TIGHT, owners=owners)) == [("b", name("t/b", 0), "a")]


def test_a_min_broker_without_a_report_still_receives_transfers() -> None:
    """No swap can be tried without min's report, but a bundle under the target moves all the same."""
    loads = {"a": load(0.5, 50), "b": load(1.0, 100)}
    data = cluster(loads, {"b": report("t/b", 1, 99)})
    assert "a" not in data.top_bundles
    assert moves(run(data, TIGHT)) == [("b", name("t/b", 0), "a")]


# ---------------------------------------------------------------------------------------------- swaps


def swap_pair(max_top: tuple[float, ...], min_tp: float, min_top: tuple[float, ...]) -> ExtensibleLoadData:
    """b (load 1.0, 400 B/s) → a (load 0.5, ``min_tp``): offloadTp = 400 × 0.25 / 1.0 = 100 (TIGHT)."""
    loads = {"a": load(0.5, min_tp), "b": load(1.0, 400)}
    return cluster(loads, {"b": report("t/b", *max_top), "a": report("t/a", *min_top)})


def test_swap_skips_zero_throughput_min_bundles_and_books_the_gain_in_debug_mode() -> None:
    """b's first 250 B/s bundle overshoots 100: maxNew = 150, minNew = 100 + 250 = 350. a's report
    [0, 1, 120]: 0 B/s is skipped; 1 is accepted (151, 349: not yet balanced); 120 is accepted (271, 229):
    229 ≤ 271 and 271 < 0.75 × 400 = 300 → swap. Debug mode books gained = 121.

    b's second 250: marked − gained + tp = 250 − 121 + 250 = 379 > 100; the swap iterator is exhausted →
    stop. The estimate moves (250 − 121) × 1.0/400 = 0.3225: loads 0.6775/0.8225 → std 0.0725.
    """
    result = run(swap_pair((250, 250, 250), 100, (0, 1, 120)), TIGHT)
    assert moves(result) == [
        ("a", name("t/a", 1), "b"),
        ("a", name("t/a", 2), "b"),
        ("b", name("t/b", 0), "a"),
    ]
    same(
        [u.reason for u in result.unloads],
        [
            pair_reason("Overloaded", 1.0, 100.0, 1.0, 0.5, swap=True, back=True),
            pair_reason("Overloaded", 120.0, 100.0, 1.0, 0.5, swap=True, back=True),
            pair_reason("Overloaded", 250.0, 100.0, 1.0, 0.5, swap=True),
        ],
    )
    assert result.load_std_after == pytest.approx(0.0725, rel=1e-12)
    same(
        result.skipped,
        [
            {
                "broker": "b",
                "bundle": name("t/b", 1),
                "reason": "exceeds offload target and no swap",
                "marked": 379.0,
                "target": 100.0,
            },
            {"reason": "pairs exhausted", "brokers_shed": 1, "limit": 3},
        ],
    )


def _no_b_for_first_min_bundle(candidates: frozenset[str], bundle: str) -> frozenset[str]:
    return candidates - {"b"} if bundle == name("t/a", 0) else candidates


def test_a_swap_candidate_that_cannot_go_to_the_max_broker_is_skipped_not_the_end() -> None:
    """As above with a's report [1, 120] and a broker filter that keeps a's first bundle off b: it is
    skipped (the filters run for swap bundles too), and 120 alone balances the pair: (270, 230)."""
    policies = TransferPolicies(broker_filters=(_no_b_for_first_min_bundle,))
    result = run(swap_pair((250, 250), 100, (1, 120)), TIGHT, policies=policies)
    assert moves(result) == [("a", name("t/a", 1), "b"), ("b", name("t/b", 0), "a")]
    # Without policies both of a's bundles go (1 then 120: 151/349, then 271/229).
    assert moves(run(swap_pair((250, 250), 100, (1, 120)), TIGHT)) == [
        ("a", name("t/a", 0), "b"),
        ("a", name("t/a", 1), "b"),
        ("b", name("t/b", 0), "a"),
    ]


def test_swap_acceptance_is_strict_on_the_min_side() -> None:
    """a at 160 B/s with report [10, 140]: maxNew = 150, minNew = 410. 10 would leave min at exactly
    400 = maxTp (not < maxTp): refused. 140: (290, 270) → 270 ≤ 290 < 300: swap with 140 alone."""
    result = run(swap_pair((250, 250), 160, (10, 140)), TIGHT)
    assert moves(result) == [("a", name("t/a", 1), "b"), ("b", name("t/b", 0), "a")]


def test_swap_acceptance_is_strict_on_the_max_side() -> None:
    """a at 100 B/s with a report stored as [250, 120] (the walk follows the stored order): 250 would bring
    max back to exactly 150 + 250 = 400 = maxTp (not < maxTp): refused. 120: (270, 230) → swap."""
    result = run(swap_pair((250, 250), 100, (250, 120)), TIGHT)
    assert moves(result) == [("a", name("t/a", 1), "b"), ("b", name("t/b", 0), "a")]


def test_swap_needs_max_strictly_below_three_quarters_of_its_throughput() -> None:
    """b's report [120, 280]: 120 > 100 → maxNew = 280, minNew = 150 + 120 = 270. a's 20 B/s: (300, 250),
    balanced, but 300 is not < 0.75 × 400: no swap, the accepted candidate is dropped, the walk stops."""
    result = run(swap_pair((120, 280), 150, (20,)), TIGHT)
    assert (result.label, result.reason, result.unloads) == ("Skip", "NoBundles", [])
    assert result.skipped == [
        {
            "broker": "b",
            "bundle": name("t/b", 0),
            "reason": "exceeds offload target and no swap",
            "marked": 120.0,
            "target": 100.0,
        },
        {"broker": "b", "reason": "NoBundles", "detail": "nothing movable"},
        {"reason": "pairs exhausted", "brokers_shed": 0, "limit": 3},
        {"label": "Skip", "reason": "NoBundles"},
    ]


# ------------------------------------------------------------------------ cycle-level skips and stats


def test_cycle_level_skip_entries() -> None:
    """Each early stop leaves its per-broker entries and then the counter's label and reason."""
    fresh = {"a": load(0.5, 10), "b": load(0.5, 10)}
    failed = run(dataclasses.replace(cluster(fresh, {}), available_brokers=None))
    assert failed.skipped == [
        {"label": "Failure", "reason": "Unknown", "detail": "available brokers lookup failed"}
    ]

    stale = {"a": load(0.5, 10, updated=NOW - 1_800_001), "b": load(0.5, 10, updated=NOW - 2_000_000)}
    assert run(cluster(stale, {})).skipped == [
        {"broker": "a", "reason": "OutDatedData", "age_ms": 1_800_001},
        {"broker": "b", "reason": "OutDatedData", "age_ms": 2_000_000},
        {"label": "Skip", "reason": "OutDatedData"},
    ]

    cooling = run(cluster(fresh, {}), recently_unloaded_brokers={"b": NOW - 179_999})
    assert cooling.skipped == [
        {"broker": "b", "reason": "CoolDown", "sampled_after_unload_ms": 179_999},
        {"label": "Skip", "reason": "CoolDown"},
    ]

    missing = run(cluster(fresh, {}, available=frozenset({"a", "b", "y", "x"})))
    assert missing.skipped == [
        {"brokers": ["x", "y"], "reason": "NoLoadData", "detail": "available without load data"},
        {"label": "Skip", "reason": "NoLoadData"},
    ]


def test_default_settings_wait_for_three_hits_and_keep_the_std_estimate() -> None:
    """No settings → Pulsar's defaults: hit-count threshold 3, so the first cycle of an unbalanced pair is
    a HitCount skip whose std estimate is the measured std (nothing planned)."""
    data = cluster({"a": load(0.125, 10), "b": load(0.875, 10)}, {"b": report("t/b", 1, 9)})
    result = run(data, None)
    assert (result.label, result.reason, result.hit_count) == ("Skip", "HitCount", 1)
    assert result.load_std == 0.375 and result.load_std_after == 0.375
    assert result.skipped == [{"label": "Skip", "reason": "HitCount", "hit_count": 1, "threshold": 3}]


# --------------------------------------------------------------------------------- UnloadScheduler


def scheduler_pair() -> ExtensibleLoadData:
    """b (1.0, 100 B/s) → a (0.5): offloadTp 25 under TIGHT; b's report [1, 2, 97]. a's throughput EMA
    (1 < 100 × 0.125) makes it under-loaded, so the default settings count a hit too."""
    return cluster({"a": load(0.5, 50, ema=1), "b": load(1.0, 100)}, {"b": report("t/b", 1, 2, 97)})


def test_scheduler_uses_the_shedder_it_was_given() -> None:
    shedder = TransferShedder()
    scheduler = UnloadScheduler(shedder)
    assert scheduler.shedder is shedder
    result = scheduler.execute(scheduler_pair(), None, now_ms=NOW)  # default settings: threshold 3
    assert result is not None and (result.reason, result.hit_count) == ("HitCount", 1)
    assert shedder.unload_condition_hit_count == 1


def test_scheduler_passes_its_recent_bundles_owners_and_policies_to_the_shedder() -> None:
    scheduler = UnloadScheduler()
    first = scheduler.execute(scheduler_pair(), TIGHT, now_ms=NOW)
    assert first is not None and moves(first) == [("b", name("t/b", 0), "a"), ("b", name("t/b", 1), "a")]
    scheduler.recently_unloaded_bundles[name("t/b", 0)] = NOW
    again = scheduler.execute(scheduler_pair(), TIGHT, now_ms=NOW)
    assert again is not None and moves(again) == [("b", name("t/b", 1), "a")]
    nobody = scheduler.execute(scheduler_pair(), TIGHT, now_ms=NOW, owners={})
    assert nobody is not None and nobody.reason == "NoBundles"

    def failing(candidates: frozenset[str], bundle: str) -> frozenset[str]:
        raise BrokerFilterError("timeout")

    blocked = scheduler.execute(
        scheduler_pair(), TIGHT, now_ms=NOW, policies=TransferPolicies(broker_filters=(failing,))
    )
    assert blocked is not None and blocked.reason == "NoBundles"


def test_scheduler_grace_period_keeps_a_bundle_unloaded_exactly_that_long_ago() -> None:
    """Entries strictly older than ``now − loadBalancerSheddingGracePeriodMinutes`` (30 min) are dropped."""
    grace = 30 * 60_000
    scheduler = UnloadScheduler()
    scheduler.recently_unloaded_bundles.update(
        {"edge": NOW - grace, "old": NOW - grace - 1, "new": NOW - 60_000}
    )
    assert scheduler.execute(scheduler_pair(), TIGHT, now_ms=NOW, channel_owner=False) is None
    assert scheduler.recently_unloaded_bundles == {"edge": NOW - grace, "new": NOW - 60_000}


def test_record_completed_writes_both_maps() -> None:
    scheduler = UnloadScheduler()
    scheduler.record_completed(Unload("b", name("t/b", 0), destination="a"), NOW)
    assert scheduler.recently_unloaded_bundles == {name("t/b", 0): NOW}
    assert scheduler.recently_unloaded_brokers == {"b": NOW}


# ------------------------------------------------------------------------------------------- settings


def test_settings_read_every_resource_weight() -> None:
    s = TransferShedderSettings.from_pulsar(
        {
            "loadBalancerCPUResourceWeight": 2.0,
            "loadBalancerMemoryResourceWeight": 3.0,
            "loadBalancerDirectMemoryResourceWeight": 4.0,
            "loadBalancerBandwidthInResourceWeight": 5.0,
            "loadBalancerBandwidthOutResourceWeight": 6.0,
        }
    )
    w = s.resource_weights
    assert (w.cpu, w.memory, w.direct_memory, w.bandwidth_in, w.bandwidth_out) == (2.0, 3.0, 4.0, 5.0, 6.0)


def test_settings_errors_name_the_source() -> None:
    """A bad value's one-line error starts with the source: ``mapping`` unless the caller names one."""
    bad = {"loadBalancerSheddingConditionHitCountThreshold": 2.5}
    with pytest.raises(ConfigError) as default:
        TransferShedderSettings.from_pulsar(bad)
    assert str(default.value).startswith("mapping: loadBalancerSheddingConditionHitCountThreshold: ")
    with pytest.raises(ConfigError) as named:
        TransferShedderSettings.from_pulsar(bad, "broker.conf")
    assert str(named.value).startswith("broker.conf: loadBalancerSheddingConditionHitCountThreshold: ")


def test_a_booked_swap_gain_makes_room_for_the_next_bundle() -> None:
    """b (1.0, 400 B/s) → a (0.0, 50 B/s): offload 0.5, offloadTp = 400 × 0.5 / 1.0 = 200.

    b's report [150, 100, 20, 300]: 150 moves; 100 overshoots (250 > 200) → maxNew = 150, minNew = 300;
    a's 80: (230, 220), balanced and 230 < 300 → swap. In debug mode gained = 80, so 20 fits:
    250 − 80 + 20 = 190 ≤ 200; without debug 250 + 20 = 270 > 200 and the exhausted swap stops the walk.
    Estimates: debug (270 − 80)/400 = 0.475 moved → 0.525/0.475 → std 0.025; otherwise 250/400 = 0.625
    → 0.375/0.625 → std 0.125.
    """
    data = cluster(
        {"a": load(0.0, 50), "b": load(1.0, 400)},
        {"b": report("t/b", 150, 100, 20, 300), "a": report("t/a", 80)},
    )
    on = run(data, JAVA)
    assert moves(on) == [
        ("b", name("t/b", 0), "a"),
        ("a", name("t/a", 0), "b"),
        ("b", name("t/b", 1), "a"),
        ("b", name("t/b", 2), "a"),
    ]
    assert on.load_std_after == pytest.approx(0.025, rel=1e-12)
    off = run(data, dataclasses.replace(JAVA, load_balancer_debug_mode_enabled=False))
    assert moves(off) == moves(on)[:3]
    assert off.load_std_after == pytest.approx(0.125, rel=1e-12)


def test_is_transferable_removes_the_source_from_the_candidates() -> None:
    """Java's isTransferable: after the filters, the destination must be a candidate; then the source is
    removed, and a transfer needs the destination among the rest while an unload needs anyone left.
    So a "transfer" to the bundle's own broker is refused, an unload from it is not."""
    available = frozenset({"a", "b"})
    policies = TransferPolicies()
    off = dataclasses.replace(JAVA, load_balancer_transfer_enabled=False)
    bundle_name = name("t/a", 0)
    assert TransferShedder.is_transferable(bundle_name, "b", "a", available, JAVA, policies)
    assert not TransferShedder.is_transferable(bundle_name, "a", "a", available, JAVA, policies)
    assert TransferShedder.is_transferable(bundle_name, "a", "a", available, off, policies)
    assert not TransferShedder.is_transferable(bundle_name, "a", "a", frozenset({"a"}), off, policies)
    assert not TransferShedder.is_transferable(bundle_name, "b", "c", available, off, policies)
