"""CapacityAwareShedder's documented rules at their edges, with every value computed by hand.

The specification is ``docs/capacity-aware.md`` and the module's docstrings (the strategy is shedlab's
own; there is no Pulsar reference). Each test sits on a rule's threshold exactly, or checks a reason
field by field, so that a changed comparison, constant or key is seen.

Hand arithmetic: brokers report cpu only, usage ``u`` of limit ``L`` (a score of ``100 u / L``, exact in
float32 for the powers of two used here), one msg/s costing ``1/64`` of cpu wherever it runs, so a
broker's slope is ``100 / 64 / L`` score points per msg/s: ``S = 100 / 8192`` on a 128 machine, where a
1024 msg/s bundle is 12.5 points (``S / 4`` on a 512 machine, ``S / 8`` on a 1024 one).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import broker_data, bundle_data, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from shedlab.config import LoadBalancerConfig
from shedlab.core.decide import load_snapshot_file
from shedlab.errors import ConfigError
from shedlab.model.pulsar import BrokerData, BundleData
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies.base import SheddingResult
from shedlab.strategies.capacity_aware import CapacityAwareShedder, UnseenMoves, _coldest, estimate_capacity

NAME = "CapacityAwareShedder"
S = 100 / 8192  # slope of a 128 machine
NO_MOVE = "no move lowers the imbalance by capacityAwareMinBenefit"
NOT_REACHED = "hit count not reached"
BALANCED_STOP = (
    "balanced enough: within capacityAwareBalancedSpread, no move lowers the imbalance by "
    "capacityAwareBalancedMinBenefit"
)
NOTHING_TO_SHED = "no sheddable bundle (load is not traffic)"
SETTLED = "settled: the imbalance has not grown by capacityAwareMinBenefit"


RULES_APART: dict[str, Any] = {
    "capacityAwareBalancedSpread": 0,
    "capacityAwareAvgShedderOnIdenticalMachines": False,
    "capacityAwareGroupMoves": False,
}
"""The rules other than "balanced enough" are tested without it (their hand-computed values predate it),
without rule 0's fallback to AvgShedder's pairs (most of these snapshots are of identical machines,
where a plan that stops would otherwise be AvgShedder's) and without group moves (a plan that stops on
unequal machines would otherwise try a group); their own tests set them explicitly."""


def conf_with(**values: Any) -> LoadBalancerConfig:
    return LoadBalancerConfig().with_overrides({**RULES_APART, **values}, source="test")


CONF = conf_with()
ROOT = Path(__file__).resolve().parents[2]


def cluster(
    spec: dict[str, tuple[float, float, list[float]]],
    namespaces: dict[str, str] | None = None,
    unowned: tuple[str, ...] = (),
) -> ClusterSnapshot:
    """Brokers ``name: (cpu usage, cpu limit, bundle rates in msg/s)``. Each bundle has its own namespace
    ``t/<broker>-ns<i>`` unless ``namespaces`` maps ``<broker>-ns<i>`` to another namespace; ``unowned``
    bundles have load data but no broker reports them."""
    brokers: dict[str, BrokerData] = {}
    bundles: dict[str, BundleData] = {name: bundle_data(rate_in=1.0) for name in unowned}
    k = 0  # bundle ranges numbered across the cluster, so that bundles of one namespace differ
    for name, (usage, limit, rates) in spec.items():
        names = []
        for i in range(len(rates)):
            key = f"{name}-ns{i}"
            namespace = (namespaces or {}).get(key, f"t/{key}")
            names.append(f"{namespace}/0x{k:08x}_0x{k + 1:08x}")
            k += 1
        bundles.update({n: bundle_data(rate_in=r) for n, r in zip(names, rates, strict=True)})
        brokers[name] = broker_data(cpu=(usage, limit), rate_in=sum(rates), bundles=names)
    return snapshot(brokers, bundles)


def cycles(
    shedder: CapacityAwareShedder, snap: ClusterSnapshot, conf: LoadBalancerConfig = CONF, times: int = 2
) -> list[SheddingResult]:
    return [shedder.find_bundles_for_unloading(snap, conf) for _ in range(times)]


def last(snap: ClusterSnapshot, conf: LoadBalancerConfig = CONF, times: int = 2) -> SheddingResult:
    """The first of ``times`` cycles that planned (moved, or recorded why no move paid), else the last.

    Planning starts at the second cycle after two hits, or at the first when a broker is overloaded on a
    heterogeneous cluster (rule 2); the cycle after a plan sees reports that do not show it yet."""
    results = cycles(CapacityAwareShedder(), snap, conf, times)
    return next((r for r in results if r.unloads or any("best_gain" in s for s in r.skipped)), results[-1])


def moves(result: SheddingResult) -> list[tuple[str, str | None]]:
    return [(u.broker, u.destination) for u in result.unloads]


def skipped(result: SheddingResult, reason: str) -> list[dict[str, Any]]:
    return [s for s in result.skipped if s["reason"] == reason]


# ---------------------------------------------------------------------------------------- reasons


def test_every_reason_field_by_hand_on_unequal_machines() -> None:
    # a: 128 machine, 4096 msg/s, cpu 96 -> 75; b: 512 machine, 2048 msg/s, cpu 32 -> 6.25.
    # cost = min(96/4096, 32/2048) = 1/64: slopes S and S/4; backgrounds 75 - 50 = 25 and 0.
    # Level with both: (6144 + 25 * 81.92) / (81.92 + 327.68) = 20, below a's background 25, so a is left
    # out and the level is solved again: 6144 / 327.68 = 18.75. Targets: a 25 (its background), b 18.75.
    # Imbalance: spread 68.75 + |75 - 25| + |6.25 - 18.75| = 131.25.
    snap = cluster({"a": (96, 128, [1024.0] * 4), "b": (32, 512, [1024.0] * 2)})
    shedder = CapacityAwareShedder()
    first, second = cycles(shedder, snap)
    base = {
        "strategy": NAME,
        "pair": ["b", "a"],
        "under_score": 6.25,
        "over_score": 75.0,
        "gap": 68.75,
        "under_slope": S / 4,
        "over_slope": S,
        "under_background": 0.0,
        "over_background": 25.0,
        "trigger": "hit counts",  # 75 is not above the overload threshold (85)
        "level": 18.75,
    }
    # gap 68.75 is a high hit; one is not enough (loadBalancerAvgShedderHitCountHighThreshold 2), and the
    # slopes differ fourfold, so the cluster is heterogeneous.
    assert not first.unloads
    assert first.skipped == [
        {
            **base,
            "hit_high_over": 1,
            "hit_low_over": 1,
            "broker": "a",
            "reason": NOT_REACHED,
            "heterogeneous": True,
        }
    ]
    # Each 1024 msg/s move: a -12.5, b +3.125; spread -15.625 and deviation -15.625: gain 31.25, until a
    # reaches its target 25 with all four bundles gone. The amount evening the pair: 68.75 / (S + S/4).
    assert moves(second) == [("a", "b")] * 4
    # equal gains: the first found, i.e. bundle-name order (the tie rule)
    assert [u.bundle for u in second.unloads] == sorted(u.bundle for u in second.unloads)
    assert second.unloads[0].reason == {
        **base,
        "hit_high_over": 2,
        "hit_low_over": 2,
        "mode": "msgRate",
        "rule": "coldest destination",
        "bundle_traffic": 1024.0,
        "pair_even_amount": 68.75 / (S + S / 4),
        "gain": 31.25,
        "imbalance_before": 131.25,
        "source_predicted_before": 75.0,
        "destination_predicted_before": 6.25,
        "source_predicted": 62.5,
        "destination_predicted": 9.375,
    }
    steps = [
        (u.reason["imbalance_before"], u.reason["source_predicted"], u.reason["destination_predicted"])
        for u in second.unloads
    ]
    assert steps == [(131.25, 62.5, 9.375), (100.0, 50.0, 12.5), (68.75, 37.5, 15.625), (37.5, 25.0, 18.75)]
    assert [u.reason["pair_even_amount"] for u in second.unloads] == [
        (75 - 6.25) / (S + S / 4),
        (62.5 - 9.375) / (S + S / 4),
        (50 - 12.5) / (S + S / 4),
        (37.5 - 15.625) / (S + S / 4),
    ]
    assert {u.reason["gain"] for u in second.unloads} == {31.25}
    # a has nothing left: the plan stops there (spread 6.25, both on target: excess 0), remembered as
    # settled.
    assert second.skipped == [
        {
            "strategy": NAME,
            "reason": NO_MOVE,
            "best_gain": None,
            "min_benefit": 4.0,
            "spread": 6.25,
            "excess": 0.0,
            "imbalance": 6.25,
            "overload veto": 0,
            "even-distribution filter": 0,
        }
    ]
    assert shedder.settled == 6.25
    # a shed: its counts restart (b never had any); the moves wait for the reports (rule 7).
    assert shedder.hit_high == {} and shedder.hit_low == {}
    assert (shedder.unseen["a"].score, shedder.unseen["a"].traffic) == (-50.0, -4096.0)
    assert (shedder.unseen["b"].score, shedder.unseen["b"].traffic) == (12.5, 4096.0)
    assert shedder.planned_destinations == {u.bundle: "b" for u in second.unloads}


def test_no_traffic_sheds_nothing_and_clears_the_counts() -> None:
    snap = snapshot({b: broker_data(cpu=(64.0, 128.0)) for b in ("a", "b")})
    assert estimate_capacity(snap, CONF) is None
    shedder = CapacityAwareShedder()
    shedder.hit_high.update(a=1)
    shedder.hit_low.update(a=3, b=1)
    result = shedder.find_bundles_for_unloading(snap, CONF)
    assert (
        result.skipped == [{"strategy": NAME, "reason": "no broker carries traffic"}] and not result.unloads
    )
    assert shedder.hit_high == {} and shedder.hit_low == {}


# ---------------------------------------------------------------------------------------- trigger


HOMOGENEOUS = {"a": (64.0, 128.0, [1024.0] * 4), "b": (32.0, 128.0, [1024.0] * 2)}
"""a 50, b 25 (gap 25); equal slopes S and no background: not heterogeneous."""


@pytest.mark.parametrize(
    ("low", "high", "hits_low", "hits_high"),
    [(25, 25, {"a": 1}, {"a": 1}), (25, 26, {"a": 1}, {}), (26, 30, {}, {})],
)
def test_a_gap_equal_to_a_threshold_is_a_hit(
    low: float, high: float, hits_low: dict[str, int], hits_high: dict[str, int]
) -> None:
    conf = conf_with(loadBalancerAvgShedderLowThreshold=low, loadBalancerAvgShedderHighThreshold=high)
    shedder = CapacityAwareShedder()
    result = shedder.find_bundles_for_unloading(cluster(HOMOGENEOUS), conf)
    # the gap is measured to the coldest broker, b's own gap is 0: it is never a hit
    assert shedder.hit_low == hits_low and shedder.hit_high == hits_high
    waiting = skipped(result, NOT_REACHED)
    assert [(s["broker"], s["heterogeneous"], s["pair"]) for s in waiting] == (
        [("a", False, ["b", "a"])] if hits_low else []
    )


def test_a_count_of_one_triggers_only_brokers_with_a_hit() -> None:
    # Both counts at 1: a (gap 50, high hit) triggers at once; b, the coldest, has no hit and must not
    # be a source (it would be reported as having nothing to shed).
    snap = cluster({"a": (64, 128, [1024.0] * 4), "b": (0, 128, [])})
    conf = conf_with(
        loadBalancerAvgShedderHitCountHighThreshold=1, loadBalancerAvgShedderHitCountLowThreshold=1
    )
    result = CapacityAwareShedder().find_bundles_for_unloading(snap, conf)
    assert moves(result) == [("a", "b")] * 2  # 50 -> 25 / 25: two bundles of 12.5
    assert not skipped(result, NOTHING_TO_SHED)


def heterogeneity(snap: ClusterSnapshot, conf: LoadBalancerConfig) -> bool:
    """Rule 2's judgment once ``snap`` has been seen for the high hit count's cycles (how long a
    background must stand out)."""
    shedder = CapacityAwareShedder()
    for _ in range(conf.load_balancer_avg_shedder_hit_count_high_threshold):
        shedder.find_bundles_for_unloading(snap, conf)
    return shedder.machines_differ


def test_slopes_differing_by_exactly_a_quarter_are_not_heterogeneous() -> None:
    # a: 128 machine at 50 % (4096 msg/s); b: 160 machine at 20 % (2048 msg/s). Slopes 100/64/128 and
    # 100/64/160: a ratio of exactly 1.25, no background. 161: just above.
    assert not heterogeneity(cluster({"a": (64, 128, [1024.0] * 4), "b": (32, 160, [1024.0] * 2)}), CONF)
    assert heterogeneity(cluster({"a": (64, 128, [1024.0] * 4), "b": (32, 161, [1024.0] * 2)}), CONF)


def test_backgrounds_differing_by_the_low_threshold_are_heterogeneous() -> None:
    # a: 4096 msg/s (50 points) plus 32 of cpu (25 points) of background = 75; b: 2048 msg/s, 25, none.
    # Gap 50 (below a high threshold of 60): a low hit. Backgrounds differ by 25.
    snap = cluster({"a": (96, 128, [1024.0] * 4), "b": (32, 128, [1024.0] * 2)})
    at = conf_with(loadBalancerAvgShedderLowThreshold=25, loadBalancerAvgShedderHighThreshold=60)
    above = conf_with(loadBalancerAvgShedderLowThreshold=26, loadBalancerAvgShedderHighThreshold=60)
    assert heterogeneity(snap, at) and not heterogeneity(snap, above)
    # level (6144 + 25 * 81.92) / 163.84 = 50: a's background is below it
    model = estimate_capacity(snap, CONF)
    assert model is not None and model.level == 50.0
    # Both with background: a cpu 75 %, bandwidth out 50 % for 4096 msg/s; b cpu 6.25 %, out 25 % for
    # 1024. Costs: cpu 8/1024 (b), out 64/4096 (a): slopes max(S/2, S) = S on both. Backgrounds: a 75 - 50
    # = 25, b 25 - 12.5 = 12.5: they differ by 12.5, below a low threshold of 16 (gap 50).
    brokers = {
        "a": broker_data(cpu=(96, 128), bw_out=(64, 128), rate_in=4096.0),
        "b": broker_data(cpu=(8, 128), bw_out=(32, 128), rate_in=1024.0),
    }
    both = estimate_capacity(snapshot(brokers), CONF)
    assert both is not None and both.background.tolist() == [25.0, 12.5] and both.slope.tolist() == [S, S]
    assert not heterogeneity(snapshot(brokers), conf_with(loadBalancerAvgShedderLowThreshold=16))
    # heterogeneous: the second low hit triggers (the high hit count), not the eighth
    assert not last(snap, at, 1).unloads and last(snap, at, 2).unloads
    assert not last(snap, above, 2).unloads


def test_the_rounding_of_the_cost_setting_broker_is_no_background() -> None:
    # examples/snapshot.json: broker-1 sets the cost per message; its score less its explained points
    # is 1.42e-14 in floating point, which `decide` printed as its background
    model = estimate_capacity(load_snapshot_file(ROOT / "examples" / "snapshot.json"), CONF)
    assert model is not None and model.background[0] == 0.0
    assert all(b == 0.0 or b > 1e-9 for b in model.background.tolist())


# ---------------------------------------------------------------------------------------- sources


@pytest.mark.parametrize(("rate", "sheddable"), [(0.0, False), (0.5, True)])
def test_a_bundle_with_any_traffic_is_sheddable(rate: float, sheddable: bool) -> None:
    # a: 50 % of cpu that is not traffic (a co-located process) and one bundle of `rate` msg/s; b: 2048
    # msg/s at 25 %. Backgrounds differ by 50 - rate/64*100/128: heterogeneous, two low hits trigger a.
    snap = cluster({"a": (64 + rate / 64, 128, [rate]), "b": (32, 128, [1024.0] * 2)})
    result = last(snap)
    waiting = skipped(result, NOTHING_TO_SHED)
    if sheddable:
        # moving 0.5 msg/s gains far below the minimum benefit: the plan stops, nothing skipped as empty
        assert not waiting and result.skipped[-1]["reason"] == NO_MOVE and result.skipped[-1]["best_gain"] > 0
    else:
        model = estimate_capacity(snap, CONF)
        assert model is not None
        assert (
            result.skipped
            == waiting
            == [
                {
                    "strategy": NAME,
                    "pair": ["b", "a"],
                    "under_score": 25.0,
                    "over_score": 50.0,
                    "gap": 25.0,
                    "under_slope": S,
                    "over_slope": S,
                    "under_background": 0.0,
                    "over_background": 50.0,
                    "hit_high_over": 0,
                    "hit_low_over": 2,
                    "trigger": "hit counts",
                    "level": model.level,
                    "broker": "a",
                    "reason": NOTHING_TO_SHED,
                }
            ]
        )
        # level: a's background 50 is above the level with both (37.5), so only b: 2048 / 81.92 = 25
        assert model.level == 25.0


# ---------------------------------------------------------------------------------------- plan


def test_only_the_three_hottest_sources_are_tried() -> None:
    # h1-h3: 87.5 with one 7168 msg/s bundle each, too large to even a pair with any colder broker
    # (87.5 / 2S = 3584 msg/s towards z at 0); a: 75 with six 1024 bundles that would fit towards z.
    # All four are triggered (gaps >= 40), but a is the fourth hottest (though first by id): nothing moves.
    snap = cluster(
        {
            "a": (96, 128, [1024.0] * 6),
            "h1": (112, 128, [7168.0]),
            "h2": (112, 128, [7168.0]),
            "h3": (112, 128, [7168.0]),
            "z": (0, 128, []),
        }
    )
    result = last(snap)
    assert not result.unloads and result.skipped[-1]["best_gain"] is None
    assert not skipped(result, NOT_REACHED)  # every hot broker was triggered
    # without the three tied h's, a is among the hottest and sheds to z
    alone = cluster({"a": (96, 128, [1024.0] * 6), "z": (0, 128, [])})
    assert moves(last(alone))[:1] == [("a", "z")]


def test_equal_moves_from_two_sources_go_by_broker_id() -> None:
    # h1 and h2 identical (100, eight 1024 bundles), c empty: the first move is h1's, then h2's (now
    # the hotter), alternately.
    snap = cluster({"c": (0, 128, []), "h1": (128, 128, [1024.0] * 8), "h2": (128, 128, [1024.0] * 8)})
    assert [b for b, _ in moves(last(snap))][:3] == ["h1", "h2", "h1"]


def test_only_the_two_coldest_destinations_are_tried() -> None:
    # h: 100 with two 4096 bundles (50 points each); c1 12.5, c2 25 (128 machines); c3: a 1024 machine at
    # 37.5 (slope S/8) with three 8192 bundles. A 4096 bundle fits neither c1 (87.5 / 2S = 3584 msg/s)
    # nor c2 (75 / 2S = 3072); it would fit c3 (62.5 / (S + S/8) = 4551 msg/s), the third coldest.
    # c3's own bundles (12.5 points there, 100 on a small machine) fit nowhere.
    snap = cluster(
        {
            "h": (128, 128, [4096.0] * 2),
            "c1": (16, 128, [1024.0]),
            "c2": (32, 128, [1024.0] * 2),
            "c3": (384, 1024, [8192.0] * 3),
        }
    )
    result = last(snap)
    assert not result.unloads and result.skipped[-1]["best_gain"] is None


def test_a_cycle_moves_as_long_as_a_move_pays() -> None:
    # a: 100 with sixteen 512 msg/s bundles (6.25 points each); b empty. Balancing takes eight moves of
    # gain 25 (spread -12.5, deviation from the level 50 -12.5), all in one cycle (no cap on the count: a
    # cap of three per broker used to stop at six and leave two for later); then no bundle fits the pair's
    # amount, and the plan settles at an imbalance of 0.
    snap = cluster({"a": (128, 128, [512.0] * 16), "b": (0, 128, [])})
    shedder = CapacityAwareShedder()
    result = cycles(shedder, snap)[-1]
    assert moves(result) == [("a", "b")] * 8
    assert [u.reason["gain"] for u in result.unloads] == [25.0] * 8
    assert result.unloads[-1].reason["destination_predicted"] == 50.0
    assert [s["best_gain"] for s in skipped(result, NO_MOVE)] == [None] and shedder.settled == 0.0


def test_a_move_gaining_exactly_the_min_benefit_is_made() -> None:
    # test_every_reason_field_by_hand's moves each gain 31.25
    snap = cluster({"a": (96, 128, [1024.0] * 4), "b": (32, 512, [1024.0] * 2)})
    assert len(last(snap, conf_with(capacityAwareMinBenefit=31.25)).unloads) == 4
    stopped = last(snap, conf_with(capacityAwareMinBenefit=31.5))
    assert not stopped.unloads and stopped.skipped[-1]["best_gain"] == 31.25
    assert stopped.skipped[-1]["min_benefit"] == 31.5 and stopped.skipped[-1]["imbalance"] == 131.25


def test_the_bundle_that_exactly_evens_the_pair_fits() -> None:
    # a 100 (four 2048 bundles, 25 points each), b 50: the amount is 50 / 2S = 2048 msg/s exactly.
    snap = cluster({"a": (128, 128, [2048.0] * 4), "b": (64, 128, [1024.0] * 4)})
    result = last(snap)
    assert moves(result) == [("a", "b")]
    assert (
        result.unloads[0].reason["bundle_traffic"] == result.unloads[0].reason["pair_even_amount"] == 2048.0
    )


# ---------------------------------------------------------------------------------------- destinations


def test_the_second_coldest_takes_a_bundle_too_large_to_even_the_pair_with_the_coldest() -> None:
    # h 100 (two 4096 bundles, 50 points each); c1 12.5 (128 machine); c2 25 (a 1024 machine, slope S/8).
    # Towards c1 the amount is 87.5 / 2S = 3584 msg/s: the bundle does not fit; towards c2 it is
    # 75 / (S + S/8) = 5461.3, and c2 ends at 25 + 6.25. Level: 25600 msg/s / (81.92 * 2 + 655.36) = 31.25.
    # Gain: deviation |50 - 31.25| - 68.75 + 0 - 6.25 = -56.25, spread 87.5 -> 50 - 12.5: 106.25.
    snap = cluster(
        {"h": (128, 128, [4096.0] * 2), "c1": (16, 128, [1024.0]), "c2": (256, 1024, [4096.0] * 4)}
    )
    result = last(snap)
    assert moves(result) == [("h", "c2")]
    reason = result.unloads[0].reason
    assert reason["rule"] == "second coldest destination" and reason["level"] == pytest.approx(31.25)
    assert (reason["gain"], reason["pair_even_amount"]) == (106.25, 75 / (S + S / 8))
    assert (reason["source_predicted"], reason["destination_predicted"]) == (50.0, 31.25)


def test_a_vetoed_coldest_leaves_the_second_coldest() -> None:
    # Overload threshold 70. h 100 (eight 1024 bundles); c1 62.5 (a 128 machine: +12.5 per bundle, 75 >
    # 70, vetoed) and c2 62.5 (a 1024 machine: +1.5625). Each of the first two moves tries all of h's
    # bundles towards c1 first (8 and then 7 vetoes); the third step finds no bundle that fits towards
    # either (c1: 12.5 / 2S = 512 msg/s), so no more vetoes.
    snap = cluster(
        {"h": (128, 128, [1024.0] * 8), "c1": (80, 128, [1024.0] * 5), "c2": (640, 1024, [4096.0] * 10)}
    )
    result = last(snap, conf_with(loadBalancerBrokerOverloadedThresholdPercentage=70))
    assert moves(result) == [("h", "c2")] * 2
    assert [u.reason["destination_predicted"] for u in result.unloads] == [64.0625, 65.625]
    assert {u.reason["rule"] for u in result.unloads} == {"second coldest destination"}
    assert result.skipped[-1]["overload veto"] == 15 and result.skipped[-1]["even-distribution filter"] == 0


def test_the_coldest_owning_the_namespace_is_skipped_for_an_admitted_broker() -> None:
    # h's four bundles share namespace t/x, of which c1 (0, the coldest) owns one and c2 (12.5) none: the
    # leader's filter admits c2 only. Moving a 1024 bundle (12.5 points) to c2 is labelled redirected.
    ns = {f"h-ns{i}": "t/x" for i in range(4)} | {"c1-ns0": "t/x"}
    snap = cluster({"c1": (0, 128, [0.0]), "c2": (16, 128, [1024.0]), "h": (64, 128, [1024.0] * 4)}, ns)
    result = last(snap)
    assert moves(result)[0] == ("h", "c2")
    assert result.unloads[0].reason["rule"] == "redirected (even-distribution filter)"
    # Without the filter (Pulsar's key off) the coldest takes it.
    off = last(snap, conf_with(loadBalancerDistributeBundlesEvenlyEnabled=False))
    assert moves(off)[0] == ("h", "c1") and off.unloads[0].reason["rule"] == "coldest destination"


def test_pulsar_system_is_always_distributed_evenly() -> None:
    # As above with the bundles in pulsar/system: filtered even with the key off (spec §4.5 step 5).
    ns = {f"h-ns{i}": "pulsar/system" for i in range(4)} | {"c1-ns0": "pulsar/system"}
    snap = cluster({"c1": (0, 128, [0.0]), "c2": (16, 128, [1024.0]), "h": (64, 128, [1024.0] * 4)}, ns)
    off = last(snap, conf_with(loadBalancerDistributeBundlesEvenlyEnabled=False))
    assert moves(off)[0] == ("h", "c2")
    assert off.unloads[0].reason["rule"] == "redirected (even-distribution filter)"


def test_planned_moves_count_towards_the_filter() -> None:
    # All of h's eight bundles and c1's one are in t/x (plus one bundle no broker reports, which counts for
    # nobody). c1: 6.25 on a 128 machine; c2: an empty 1024 machine (+1.5625 per bundle). Counts of t/x
    # start c1 1, c2 0: the first move goes to c2; then 1 / 1, both admitted, c2 again (coldest); then
    # 1 / 2: only c1; then 2 / 2: c2; then 2 / 3: c1; then c2.
    ns = {f"h-ns{i}": "t/x" for i in range(8)} | {"c1-ns0": "t/x"}
    snap = cluster(
        {"c1": (8, 128, [512.0]), "c2": (0, 1024, []), "h": (128, 128, [1024.0] * 8)},
        ns,
        unowned=("t/x/0xf0000000_0xffffffff",),
    )
    result = last(snap)
    assert [d for _, d in moves(result)] == ["c2", "c2", "c1", "c2", "c1", "c2"]
    assert [u.reason["rule"] == "coldest destination" for u in result.unloads] == [
        True,
        True,
        False,
        True,
        False,
        True,
    ]


def test_a_bundle_whose_namespace_admits_no_other_broker_is_refused_by_the_filter() -> None:
    # h owns two bundles of t/x, c three: only h owns the fewest, and a move never goes to its source.
    ns = {"h-ns0": "t/x", "h-ns1": "t/x"} | {f"c-ns{i}": "t/x" for i in range(3)}
    snap = cluster({"c": (0, 128, [0.0] * 3), "h": (64, 128, [2048.0] * 2)}, ns)
    result = last(snap)
    assert not result.unloads
    assert result.skipped[-1]["even-distribution filter"] == 2 and result.skipped[-1]["best_gain"] is None


def test_tied_cold_brokers_go_by_broker_id() -> None:
    # Seventeen brokers at 25, 12.5 or 0 in a mixed order (an unstable sort reorders the ties of such an
    # array: NumPy's default quicksort puts b03 before b02 here) and h at 100. The snapshot's ordering
    # rule: every sort is stable, ties go by broker id. So h's bundles go to b02, b03, b08, b09, ...
    # (the brokers at 0 in id order), each labelled the coldest destination.
    pattern = [2, 2, 0, 0, 1, 1, 2, 1, 0, 0, 1, 1, 2, 1, 1, 1, 0]
    spec = {f"b{i:02d}": (16.0 * v, 128.0, [1024.0] * v) for i, v in enumerate(pattern)}
    result = last(cluster({**spec, "h": (128, 128, [1024.0] * 8)}))
    assert [d for _, d in moves(result)][:4] == ["b02", "b03", "b08", "b09"]
    assert {u.reason["rule"] for u in result.unloads[:4]} == {"coldest destination"}


# ---------------------------------------------------------------------------------------- capacity


def test_declared_brokers_without_traffic_scale_the_largest_inferred_slope() -> None:
    # b (1) and c (4) are declared and carry no traffic; all three are 128 machines, inferred slope S.
    # unit = max(S * 1, S * 4) = 4S: b gets 4S, c gets S; a (undeclared) keeps S.
    snap = cluster({"a": (64, 128, [1024.0] * 4), "b": (0, 128, []), "c": (0, 128, [])})
    model = estimate_capacity(snap, conf_with(capacityAwareBrokerCapacities=["b=1", "c=4"]))
    assert model is not None and model.slope.tolist() == [S, 4 * S, S]


def test_the_first_matching_pattern_wins() -> None:
    # "b*" matches both b and bb first; bb's own pattern comes too late. unit from the loaded declared
    # broker b (37.5 points for 2048 msg/s, some of it background): 37.5 / 2048 * 2 = 3S; slopes unit / 2
    # for both. (Inferred, all three would be S: cost min(64/4096, 48/2048) = 1/64.)
    snap = cluster({"a": (64, 128, [1024.0] * 4), "b": (48, 128, [1024.0] * 2), "bb": (0, 128, [])})
    model = estimate_capacity(snap, conf_with(capacityAwareBrokerCapacities=["b*=2", "bb=8"]))
    assert model is not None and model.slope.tolist() == [S, 1.5 * S, 1.5 * S]


def test_slope_is_the_steepest_weighted_resource() -> None:
    # a: cpu 64 of 128 and bandwidth out 2048 of 4096 bytes/s for 4096 msg/s; b: cpu 16 of 128 and
    # bandwidth out 1024 of 8192 for 1024 msg/s. Costs: cpu min(1/64, 1/64) = 1/64, out min(1/2, 1) = 1/2.
    # With a cpu weight of 0.5: cpu slope 0.5 * 100 / 64 / 128 = S/2 on both; out 100 / 2 / 4096 = S on a,
    # 100 / 2 / 8192 = S/2 on b (the weight of 1 would make b's cpu slope S). Slopes, the max: S and S/2.
    brokers = {
        "a": broker_data(cpu=(64, 128), bw_out=(2048, 4096), rate_in=4096.0),
        "b": broker_data(cpu=(16, 128), bw_out=(1024, 8192), rate_in=1024.0),
    }
    model = estimate_capacity(snapshot(brokers), conf_with(loadBalancerCPUResourceWeight=0.5))
    assert model is not None and model.slope.tolist() == [S, S / 2]
    # scores: a max(0.5 * 50, 50) = 50, b max(0.5 * 12.5, 12.5) = 12.5; b's background 12.5 - 1024 S/2
    assert model.scores.tolist() == [50.0, 12.5] and model.background.tolist() == [0.0, 6.25]


def test_a_resource_without_a_limit_costs_nothing_and_takes_no_traffic() -> None:
    # b reports no cpu limit (0): its cpu term is 0, not a division by zero; direct memory gives its slope.
    brokers = {
        "a": broker_data(cpu=(64, 128), rate_in=4096.0),
        "b": broker_data(cpu=(16, 0), direct=(16, 128), rate_in=1024.0),
    }
    model = estimate_capacity(snapshot(brokers), CONF)
    # cpu cost 16/1024 = 1/64 (b's cpu usage counts, its limit does not); direct cost min(0, 1/64) = 0.
    assert model is not None and model.slope.tolist() == [S, 0.0]
    # b, without a scored limit, takes no traffic at the level: all 5120 msg/s on a, 5120 / 81.92
    assert model.level == 62.5
    # nor does it make the slopes unequal; its background (12.5, all of its score) is 12.5 above a's
    assert not heterogeneity(snapshot(brokers), CONF)


def test_without_any_slope_the_targets_are_the_mean_and_nothing_moves() -> None:
    # a carries traffic at no usage: every cost is 0, every slope 0, so no level (infinite) and the
    # targets are the mean of the scores (25). b (50, all background) is triggered but a move changes
    # no predicted score: the amount is 0 (no capacity to even by), even with no minimum benefit.
    snap = cluster({"a": (0, 128, [1024.0]), "b": (64, 128, [0.5, 1024.0])})
    model = estimate_capacity(snap, CONF)
    assert model is not None and model.slope.tolist() == [0.0, 0.0] and model.level == float("inf")
    result = last(snap, conf_with(capacityAwareMinBenefit=0))
    assert not result.unloads
    assert result.skipped[-1]["reason"] == NO_MOVE and result.skipped[-1]["imbalance"] == 50 + 25 + 25


# ---------------------------------------------------------------------------------------- settling


SETTLING = {"a": (128.0, 128.0, [4096.0] * 2), "b": (16.0, 128.0, [1024.0])}
"""a 100 with two 50-point bundles, b 12.5: no bundle fits the amount (87.5 / 2S = 3584 msg/s); the plan
stops at imbalance 87.5 + 2 * 43.75 = 175 (level (8192 + 1024) / 163.84 = 56.25)."""


def test_a_plan_reopens_when_the_imbalance_grew_by_exactly_the_min_benefit() -> None:
    conf = conf_with(capacityAwareMinBenefit=12.5)
    shedder = CapacityAwareShedder()
    assert cycles(shedder, cluster(SETTLING), conf)[-1].skipped[-1]["imbalance"] == 175.0
    assert shedder.settled == 175.0
    # b at 6.25 (512 msg/s): spread 93.75, level 8704 / 163.84 = 53.125: 93.75 + 46.875 * 2 = 187.5,
    # exactly 175 + 12.5: planned again (and settled at 187.5, no bundle fitting still).
    grown = shedder.find_bundles_for_unloading(cluster({**SETTLING, "b": (8.0, 128.0, [512.0])}), conf)
    assert grown.skipped[-1]["reason"] == NO_MOVE and shedder.settled == 187.5


def test_a_settled_imbalance_follows_the_cluster_down() -> None:
    shedder = CapacityAwareShedder()
    cycles(shedder, cluster(SETTLING))
    assert shedder.settled == 175.0
    # b at 25 (2048 msg/s): spread 75, level 10240 / 163.84 = 62.5: 75 + 37.5 * 2 = 150, a still
    # triggered; not above 175 + 4: still settled, now at 150.
    lower = shedder.find_bundles_for_unloading(cluster({**SETTLING, "b": (32.0, 128.0, [2048.0])}), CONF)
    assert lower.skipped == [{"strategy": NAME, "reason": SETTLED, "imbalance": 150.0, "settled": 150.0}]
    assert shedder.settled == 150.0
    # back to 175: above 150 + 4, planned again
    again = shedder.find_bundles_for_unloading(cluster(SETTLING), CONF)
    assert again.skipped[-1]["reason"] == NO_MOVE and shedder.settled == 175.0


# ---------------------------------------------------------------------------------------- unseen moves


def fingerprint(usage: float, rate_in: float, bundles: int) -> tuple[float, ...]:
    """A cpu-only broker's report as the strategy identifies it: the five usages, rates in and out, and
    the number of bundles."""
    return (usage, 0.0, 0.0, 0.0, 0.0, rate_in, 0.0, float(bundles))


def test_corrected_scores_and_traffic_stay_non_negative() -> None:
    # a's report (50, 4096 msg/s) is the one an earlier plan was made on, with a predicted effect larger
    # than the report (as when the slope estimate has changed since): a counts as 0 and no traffic, so
    # b (25) is now the hot one, 25 above a, with no background on either.
    shedder = CapacityAwareShedder()
    shedder.unseen["a"] = UnseenMoves(fingerprint(64.0, 4096.0, 4), score=-80.0, load=(-8192.0, 0.0, 0.0))
    shedder.unseen["gone"] = UnseenMoves(fingerprint(1.0, 1.0, 1), score=5.0, load=(5.0, 0.0, 0.0))
    result = shedder.find_bundles_for_unloading(cluster(HOMOGENEOUS), CONF)
    assert result.skipped[0] == {
        "strategy": NAME,
        "reason": "reports do not show earlier moves yet",
        "brokers": ["a"],
    }
    (waiting,) = skipped(result, NOT_REACHED)
    assert waiting["pair"] == ["a", "b"] and (waiting["under_score"], waiting["under_background"]) == (
        0.0,
        0.0,
    )
    assert waiting["gap"] == 25.0 and waiting["heterogeneous"] is False
    assert waiting["level"] == 2048 / 163.84  # b's traffic alone, over both brokers' capacity
    # a broker no longer in the snapshot has reported nothing the strategy could wait for: forgotten
    assert list(shedder.unseen) == ["a"]


def test_a_report_not_showing_a_move_is_corrected_by_its_predicted_effect() -> None:
    # a (50, 4096 msg/s) has sent 409.6 msg/s (5 points) away since its report: planned on as 45 with
    # 3686.4 msg/s (background still 0); b (25) as reported. Gap 20: a low hit. Level (3686.4 + 2048) /
    # 163.84 = 35.
    shedder = CapacityAwareShedder()
    shedder.unseen["a"] = UnseenMoves(fingerprint(64.0, 4096.0, 4), score=-5.0, load=(-409.6, 0.0, 0.0))
    (waiting,) = skipped(shedder.find_bundles_for_unloading(cluster(HOMOGENEOUS), CONF), NOT_REACHED)
    assert (waiting["over_score"], waiting["under_score"], waiting["gap"]) == (45.0, 25.0, 20.0)
    assert waiting["over_background"] == pytest.approx(0.0, abs=1e-12) and waiting["level"] == pytest.approx(
        35.0
    )


def test_a_new_report_restarts_the_predicted_effect() -> None:
    # The same broker, a report that differs: its old entry is replaced by the new plan's moves only.
    snap = cluster({"a": (96, 128, [1024.0] * 4), "b": (32, 512, [1024.0] * 2)})
    shedder = CapacityAwareShedder()
    shedder.unseen["b"] = UnseenMoves(fingerprint(1.0, 1.0, 1), score=100.0, load=(100.0, 0.0, 0.0))
    assert len(cycles(shedder, snap)[-1].unloads) == 4
    assert shedder.unseen["b"] == UnseenMoves(
        fingerprint(32.0, 2048.0, 2), score=12.5, load=(4096.0, 0.0, 0.0)
    )


# ---------------------------------------------------------------------------------------- placement


def test_placement_without_candidates_names_none() -> None:
    snap = cluster(HOMOGENEOUS)
    shedder = CapacityAwareShedder()
    shedder.planned_destinations["t/x/0x0_0x1"] = "a"
    for bundle in ("t/x/0x0_0x1", "t/new/0x0_0x1"):
        placed = shedder.select_broker([], bundle, snap, CONF)
        assert (placed.broker, tuple(placed.choices), placed.reason) == (
            None,
            (),
            {"strategy": NAME, "rule": "no candidates"},
        )


def test_a_planned_destination_that_is_no_candidate_falls_back_to_headroom() -> None:
    # Planned on c, which the leader filtered out, or on a broker that has left: headroom among the
    # candidates, and the choice becomes the bundle's plan. a 12.5 and b 25 (128 machines, slope S).
    snap = cluster({"a": (16, 128, [1024.0]), "b": (32, 128, [1024.0] * 2), "c": (0, 128, [])})
    shedder = CapacityAwareShedder()
    shedder.planned_destinations.update({"t/x/0x0_0x1": "c", "t/y/0x0_0x1": "gone"})
    for bundle in ("t/x/0x0_0x1", "t/y/0x0_0x1"):
        placed = shedder.select_broker(["b", "a"], bundle, snap, CONF)
        assert placed.broker == "a" and placed.reason["rule"] == "headroom"
        assert tuple(placed.choices) == ("a", "b")  # the whole set, sorted
        assert shedder.planned_destinations[bundle] == "a"
    # a planned destination among the candidates is the choice, and the only one
    planned = shedder.select_broker(["b", "a"], "t/x/0x0_0x1", snap, CONF)
    assert (planned.broker, tuple(planned.choices)) == ("a", ("a",))
    assert planned.reason == {"strategy": NAME, "rule": "planned destination"}


def test_headroom_counts_each_bundle_at_its_own_rate_or_the_mean() -> None:
    # a 12.5 (one 1024 bundle), b 12.5 (two 512 bundles, one more bundle), c 50 (three 1024 and one idle):
    # bundles' mean rate (1024 + 1024 + 3072 + 0) / 7 = 731.43 msg/s.
    snap = cluster(
        {"a": (16, 128, [1024.0]), "b": (16, 128, [512.0] * 2), "c": (64, 128, [1024.0] * 3 + [0.0])}
    )
    mean = 5120 / 7
    shedder = CapacityAwareShedder()
    # a and b tie at 12.5: the one with fewer bundles, a
    first = shedder.select_broker(["a", "b", "c"], "t/new/0x0_0x1", snap, CONF)
    assert (first.broker, first.reason) == (
        "a",
        {"strategy": NAME, "rule": "headroom", "predicted_score": 12.5},
    )
    # a now counts the new bundle at the mean rate: b
    assert shedder.select_broker(["a", "b", "c"], "t/new/0x1_0x2", snap, CONF).broker == "b"
    # c's first bundle (1024 msg/s) and c's idle one (the mean) on a
    shedder.select_broker(["a"], snap.bundle_names[snap.bundles_of(2)[0]], snap, CONF)
    shedder.select_broker(["a"], snap.bundle_names[snap.bundles_of(2)[3]], snap, CONF)
    fourth = shedder.select_broker(["a"], "t/new/0x2_0x3", snap, CONF)
    assert fourth.reason["predicted_score"] == pytest.approx(12.5 + S * (mean + 1024 + mean))
    # a new snapshot starts afresh, even with the same content
    again = shedder.select_broker(
        ["a", "b", "c"],
        "t/new/0x3_0x4",
        cluster(
            {"a": (16, 128, [1024.0]), "b": (16, 128, [512.0] * 2), "c": (64, 128, [1024.0] * 3 + [0.0])}
        ),
        CONF,
    )
    assert (again.broker, again.reason["predicted_score"]) == ("a", 12.5)


def test_headroom_prefers_the_lower_score_over_fewer_bundles() -> None:
    # With traffic: b (6.25, two bundles) before a (25, one bundle). Without traffic: fewest bundles first,
    # then the lower score: a (no bundle, 10) before c (no bundle, 20) and b (one idle bundle, 5); then b
    # (all at one bundle, b the lowest), then a (one bundle, like c, and lower).
    snap = cluster({"a": (32, 128, [2048.0]), "b": (8, 128, [256.0] * 2)})
    assert CapacityAwareShedder().select_broker(["a", "b"], "t/new/0x0_0x1", snap, CONF).broker == "b"
    idle = cluster({"a": (12.8, 128, []), "b": (6.4, 128, [0.0]), "c": (25.6, 128, [])})
    shedder = CapacityAwareShedder()
    chosen = [
        shedder.select_broker(["a", "b", "c"], f"t/new/0x{i}_0x{i + 1}", idle, CONF).broker for i in range(4)
    ]
    assert chosen == ["a", "c", "b", "a"]


# ---------------------------------------------------------------------------------------- more edges


def test_every_bundle_is_tried_towards_both_destinations() -> None:
    # c1 (128 machine) and c2 (1024 machine) both at 62.5, c1 the coldest by id; h 100 with eight 1024
    # bundles. Level 54272 / 819.2 = 66.25. Towards c1 (+12.5 to 75): deviation -12.5 + (8.75 - 3.75),
    # spread 37.5 -> 25: gain 20. Towards c2 (+1.5625): deviation -12.5 - 1.5625, same spread: 26.5625.
    # h's first bundle (t/a, the largest name-first) may only go to c1, since c2 owns a t/a bundle; the
    # next bundle, of its own namespace, is tried towards c1 (20, no better) and then c2 (better).
    ns = {"h-ns0": "t/a", "c2-ns0": "t/a"}
    snap = cluster(
        {"c1": (80, 128, [1024.0] * 5), "c2": (640, 1024, [4096.0] * 10), "h": (128, 128, [1024.0] * 8)}, ns
    )
    first = last(snap).unloads[0]
    assert (first.destination, first.reason["rule"], first.reason["gain"]) == (
        "c2",
        "second coldest destination",
        26.5625,
    )
    assert not first.bundle.startswith("t/a/")


def test_a_hot_broker_with_no_low_hit_can_shed_on_high_hits() -> None:
    # Thresholds the other way round (high 20 below low 30): a (50) is 25 above b (25), a high hit but
    # no low hit. Two high hits trigger; its move reports no low hit, and shedding restarts both counts.
    conf = conf_with(loadBalancerAvgShedderLowThreshold=30, loadBalancerAvgShedderHighThreshold=20)
    shedder = CapacityAwareShedder()
    result = cycles(shedder, cluster(HOMOGENEOUS), conf)[-1]
    assert moves(result) == [("a", "b")]  # 25 / 2S = 1024 msg/s: one bundle evens them at 37.5
    assert (result.unloads[0].reason["hit_high_over"], result.unloads[0].reason["hit_low_over"]) == (2, 0)
    assert shedder.hit_high == {} and shedder.hit_low == {}


def test_a_miss_restarts_the_count() -> None:
    shedder = CapacityAwareShedder()
    hit = conf_with(loadBalancerAvgShedderLowThreshold=25)
    miss = conf_with(loadBalancerAvgShedderLowThreshold=26)
    cycles(shedder, cluster(HOMOGENEOUS), hit)
    assert shedder.hit_low == {"a": 2}
    shedder.find_bundles_for_unloading(cluster(HOMOGENEOUS), miss)
    assert shedder.hit_low == {}
    shedder.find_bundles_for_unloading(cluster(HOMOGENEOUS), hit)
    assert shedder.hit_low == {"a": 1}


def test_a_single_broker_has_nowhere_to_shed() -> None:
    # With thresholds of 0 a lone broker is a hit (gap 0 >= 0) and triggers: there is no destination.
    conf = conf_with(
        loadBalancerAvgShedderLowThreshold=0,
        loadBalancerAvgShedderHighThreshold=0,
        loadBalancerAvgShedderHitCountHighThreshold=1,
    )
    result = last(cluster({"a": (64, 128, [1024.0] * 4)}), conf, 1)
    assert not result.unloads
    assert result.skipped[-1]["reason"] == NO_MOVE and result.skipped[-1]["best_gain"] is None


def test_one_msg_per_second_on_a_one_unit_limit_is_traffic_and_capacity() -> None:
    # Limits of 1 (cpu 1.0) and rates of 1 msg/s: a at 100 % with two 0.5 msg/s bundles, b idle. Cost 1
    # per msg/s, slope 100 / 1 = 100 points per msg/s; the amount (100 - 0) / 200 = 0.5 msg/s: one bundle,
    # both end at 50 (the level, 1 / (2 / 100)), gain 200 (spread 100 -> 0, deviation 100 -> 0).
    snap = cluster({"a": (1.0, 1.0, [0.5, 0.5]), "b": (0.0, 1.0, [])})
    model = estimate_capacity(snap, CONF)
    assert model is not None and model.slope.tolist() == [100.0, 100.0] and model.level == 50.0
    result = last(snap)
    assert moves(result) == [("a", "b")]
    assert (result.unloads[0].reason["gain"], result.unloads[0].reason["destination_predicted"]) == (
        200.0,
        50.0,
    )


def test_the_highest_other_broker_bounds_the_spread() -> None:
    # y (93.75, nothing to shed) is the second highest, above what h (100) falls to with one 1024 bundle
    # (87.5); c 0, m 12.5. Level: y's background is above it, so (8192 + 1024) / (3 * 81.92) = 37.5.
    # Move h -> c: deviation (50 - 62.5) + (25 - 37.5) = -25; spread 100 - 0 -> 93.75 - 12.5: 18.75.
    snap = cluster(
        {"c": (0, 128, []), "h": (128, 128, [1024.0] * 8), "m": (16, 128, [1024.0]), "y": (120, 128, [])}
    )
    first = last(snap).unloads[0]
    assert (first.broker, first.destination) == ("h", "c")
    assert first.reason["level"] == 37.5 and first.reason["gain"] == 25 + 18.75


def test_without_any_bundle_placement_alternates_by_count_then_score() -> None:
    # No bundle anywhere (no rate to average): fewest bundles first, then the lower score: b, a, b.
    snap = cluster({"a": (12.8, 128, []), "b": (6.4, 128, [])})
    shedder = CapacityAwareShedder()
    chosen = [
        shedder.select_broker(["a", "b"], f"t/new/0x{i}_0x{i + 1}", snap, CONF).broker for i in range(3)
    ]
    assert chosen == ["b", "a", "b"]


def test_each_placement_counts_one_bundle() -> None:
    # No traffic: a (10) owns none, b (5) two idle bundles. a, a (now one fewer than b), then b (tied at 2,
    # lower score), then a.
    snap = cluster({"a": (12.8, 128, []), "b": (6.4, 128, [0.0, 0.0])})
    shedder = CapacityAwareShedder()
    chosen = [
        shedder.select_broker(["a", "b"], f"t/new/0x{i}_0x{i + 1}", snap, CONF).broker for i in range(4)
    ]
    assert chosen == ["a", "a", "b", "a"]


def test_a_bundle_of_one_msg_per_second_counts_at_its_rate() -> None:
    # x's bundle carries 1 msg/s, y's 4095: mean 2048. Placing x's bundle on y adds 1 msg/s (S points).
    snap = cluster({"x": (0.015625, 128, [1.0]), "y": (63.984375, 128, [4095.0])})
    shedder = CapacityAwareShedder()
    shedder.select_broker(["y"], snap.bundle_names[snap.bundles_of(0)[0]], snap, CONF)
    after = shedder.select_broker(["y"], "t/new/0x0_0x1", snap, CONF)
    assert after.reason["predicted_score"] == pytest.approx(49.98779296875 + S)


# --- "balanced enough" (rule 3): capacityAwareBalancedSpread / capacityAwareBalancedMinBenefit -------------
# a: 100 with eight 1024 msg/s bundles (12.5 points each), b empty; level 50. Every move gains 50 (spread
# -25, deviation from the level -25); the spreads before the four moves are 100, 75, 50 and 25.
EIGHT_BUNDLES = {"a": (128.0, 128.0, [1024.0] * 8), "b": (0.0, 128.0, [])}


def test_balanced_band_off_every_paying_move_is_made() -> None:
    result = last(cluster(EIGHT_BUNDLES), conf_with(capacityAwareBalancedMinBenefit=1000))
    assert moves(result) == [("a", "b")] * 4
    assert [u.reason["imbalance_before"] for u in result.unloads] == [200.0, 150.0, 100.0, 50.0]


def test_a_spread_exactly_at_the_band_is_within_it() -> None:
    # third move: spread 50 = band (and a 25 above its target, half the band: on two equal machines the
    # two bounds coincide), so it must pay 50.5; it gains 50.
    conf = conf_with(capacityAwareBalancedSpread=50, capacityAwareBalancedMinBenefit=50.5)
    result = last(cluster(EIGHT_BUNDLES), conf)
    assert moves(result) == [("a", "b")] * 2
    assert result.skipped[-1] == {
        "strategy": NAME,
        "reason": BALANCED_STOP,
        "best_gain": 50.0,
        "min_benefit": 50.5,
        "spread": 50.0,
        "excess": 25.0,
        "imbalance": 100.0,
        "overload veto": 0,
        "even-distribution filter": 0,
    }


def test_a_move_gaining_exactly_the_balanced_min_benefit_is_made() -> None:
    conf = conf_with(capacityAwareBalancedSpread=50, capacityAwareBalancedMinBenefit=50)
    assert moves(last(cluster(EIGHT_BUNDLES), conf)) == [("a", "b")] * 4


def test_above_the_band_the_ordinary_min_benefit_applies() -> None:
    # band 49.5: the third move (spread 50) needs only 4; the fourth (spread 25) needs 50.5 and gains 50.
    conf = conf_with(capacityAwareBalancedSpread=49.5, capacityAwareBalancedMinBenefit=50.5)
    shedder = CapacityAwareShedder()
    result = cycles(shedder, cluster(EIGHT_BUNDLES), conf)[-1]
    assert moves(result) == [("a", "b")] * 3
    assert result.skipped[-1]["reason"] == BALANCED_STOP and result.skipped[-1]["spread"] == 25.0
    # the stop is remembered like any other: 50 (spread 25 + deviation 12.5 + 12.5)
    assert shedder.settled == 50.0


def test_the_balanced_keys_are_validated_and_default_on() -> None:
    conf = LoadBalancerConfig()
    assert conf.capacity_aware_balanced_spread == 25.0
    assert conf.capacity_aware_balanced_min_benefit == 6.5
    with pytest.raises(ConfigError):
        conf_with(capacityAwareBalancedSpread=-1)
    with pytest.raises(ConfigError):
        conf_with(capacityAwareBalancedMinBenefit=-0.5)


def test_a_band_below_one_point_still_applies() -> None:
    # a: 100 with 4064, 4112 and 16 msg/s (49.609375, 50.1953125 and 0.1953125 points), b empty. The first
    # move (4064: the 4112 one exceeds the amount, 4096) leaves a 50.390625, b 49.609375: spread 0.78125.
    # The 16 msg/s bundle then fits (amount 32) and gains 0.390625 + 0.390625 = 0.78125: with the minimum at
    # 0 it pays, but the spread is within a band of 1, where it must pay 100.
    snap = cluster({"a": (128.0, 128.0, [4064.0, 4112.0, 16.0]), "b": (0.0, 128.0, [])})
    banded = last(
        snap,
        conf_with(
            capacityAwareMinBenefit=0, capacityAwareBalancedSpread=1, capacityAwareBalancedMinBenefit=100
        ),
    )
    assert moves(banded) == [("a", "b")]
    assert banded.skipped[-1]["reason"] == BALANCED_STOP
    assert banded.skipped[-1]["best_gain"] == 0.78125 and banded.skipped[-1]["spread"] == 0.78125
    unbanded = last(snap, conf_with(capacityAwareMinBenefit=0, capacityAwareBalancedMinBenefit=100))
    assert moves(unbanded) == [("a", "b")] * 2
    assert unbanded.unloads[1].reason["gain"] == 0.78125


# a: 128 machine at 50 with eight 1024 msg/s bundles (6.25 points each), b: 512 machine (a quarter of the
# slope) at 6.25 with four; the level is 15 for both. Each move a -> b gains 15.625 (spread -7.8125,
# deviation 6.25 + 1.5625); after k moves a is at 50 - 6.25k, its excess over its target 35 - 6.25k, and
# the spread is 43.75 - 7.8125k: 43.75, 35.9375, 28.125, 20.3125.
WEAK_AND_STRONG = {"a": (64.0, 128.0, [1024.0] * 8), "b": (32.0, 512.0, [1024.0] * 4)}


def test_a_broker_further_above_its_target_than_half_the_band_is_not_balanced_enough() -> None:
    # Band 40, balanced minimum 20 (no move pays it). The spread is within the band after one move, but a is
    # still 28.75 and then 22.5 above its target, more than half the band (20): the ordinary minimum applies
    # until a is 16.25 above it.
    conf = conf_with(capacityAwareBalancedSpread=40, capacityAwareBalancedMinBenefit=20)
    snap = cluster(WEAK_AND_STRONG)
    model = estimate_capacity(snap, conf)
    assert model is not None and model.level == 15.0 and model.slope[1] == model.slope[0] / 4
    result = last(snap, conf)
    assert moves(result) == [("a", "b")] * 3
    assert [u.reason["gain"] for u in result.unloads] == [15.625] * 3
    stop = result.skipped[-1]
    assert stop["reason"] == BALANCED_STOP
    assert stop["spread"] == 20.3125 and stop["excess"] == 16.25 and stop["best_gain"] == 15.625


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 1.5, 2.0, 7.25, 30.0]), min_size=0, max_size=12),
    k=st.integers(1, 4),
)
def test_the_coldest_are_a_stable_sorts_first(values: list[float], k: int) -> None:
    predicted = np.array([*values, 99.0])  # one more broker that is never an option
    options = np.arange(len(values), dtype=np.int64)[::-1].copy()  # ties keep this order, not the index's
    expected = options[np.argsort(predicted[options], kind="stable")][:k].tolist()
    assert _coldest(predicted, options, k) == expected
