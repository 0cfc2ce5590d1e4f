"""CapacityAwareShedder: each rule on hand-made snapshots, a property over random ones, and a compare run.

Snapshots use powers of two (limits 128 and 512, traffic in multiples of 1024) so that Pulsar's float32
percentages and the strategy's slopes are exact and thresholds can be hit exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from builders import broker_data, bundle_data, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from shedlab.cli import app
from shedlab.config import LoadBalancerConfig
from shedlab.core.grid import load_grid
from shedlab.core.sim import load_scenario, run_simulation
from shedlab.model.pulsar import BrokerData, BundleData
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies.avg_shedder import AvgShedder
from shedlab.strategies.base import SheddingResult
from shedlab.strategies.capacity_aware import (
    AVG_SHEDDER_FALLBACK,
    AVG_SHEDDER_VETOED,
    BYTES,
    GROUP_RULE,
    MSGS,
    NO_PAYING_MOVE,
    OVERLOAD_RULE,
    TRIGGER_HITS,
    TRIGGER_OVERLOAD,
    CapacityAwareShedder,
    UnseenMoves,
    bundle_load,
    declared_capacities,
    estimate_capacity,
    mean_bundle_load,
)

PLUGIN = "shedlab.strategies.capacity_aware:CapacityAwareShedder"
SLOPE_128 = 100 / 64 / 128  # score points per msg/s on a 128-limit machine at 1/64 usage per msg/s


def cluster(spec: dict[str, tuple[float, float, list[float]]], per_namespace: int = 1) -> ClusterSnapshot:
    """Brokers ``name: (cpu usage, cpu limit, bundle rates)``; each bundle in its own namespace, or
    ``per_namespace`` bundles (distinct ranges) in each."""
    brokers: dict[str, BrokerData] = {}
    bundles: dict[str, BundleData] = {}
    for name, (usage, limit, rates) in spec.items():
        names = [
            f"t/{name}-ns{i}/0x00000000_0xffffffff"
            if per_namespace == 1
            else f"t/{name}-ns{i // per_namespace}/0x{i:08x}_0x{i + 1:08x}"
            for i in range(len(rates))
        ]
        bundles.update({n: bundle_data(rate_in=r) for n, r in zip(names, rates, strict=True)})
        brokers[name] = broker_data(cpu=(usage, limit), rate_in=sum(rates), bundles=names)
    return snapshot(brokers, bundles)


def run(
    shedder: CapacityAwareShedder, snap: ClusterSnapshot, conf: LoadBalancerConfig, times: int
) -> SheddingResult:
    """Up to ``times`` cycles on the same snapshot: the first that unloads, else the last. (Later cycles on
    the same snapshot see reports that do not show the moves yet, rule 7, and move nothing more.)"""
    result = SheddingResult()
    for _ in range(times):
        result = shedder.find_bundles_for_unloading(snap, conf)
        if result.unloads:
            break
    return result


RULES_APART: dict[str, Any] = {"capacityAwareBalancedSpread": 0, "capacityAwareGroupMoves": False}
"""The rules other than "balanced enough" and group moves are tested without them (their hand-computed
values predate both, and a plan that stops on unequal machines would otherwise try a group); their own
tests set them explicitly."""


def conf_with(**values: Any) -> LoadBalancerConfig:
    return LoadBalancerConfig().with_overrides({**RULES_APART, **values}, source="test")


CONF = conf_with()
GROUPS = conf_with(capacityAwareGroupMoves=True)


def test_amount_evens_the_pair_by_capacity() -> None:
    # hot: 100 % of a 128 machine with 8192 msg/s; cold: 50 % with 4096 (same cost per message).
    snap = cluster({"a": (128, 128, [2048.0] * 4), "b": (64, 128, [1024.0] * 4)})
    result = run(CapacityAwareShedder(), snap, CONF, 2)  # gap 50 >= high threshold: two hits
    assert [u.destination for u in result.unloads] == ["b"]
    reason = result.unloads[0].reason
    assert reason["pair_even_amount"] == reason["bundle_traffic"] == 2048.0
    assert reason["destination_predicted"] == reason["source_predicted"] == 75.0 == reason["level"]
    assert reason["over_slope"] == reason["under_slope"] == SLOPE_128
    assert reason["gain"] == 50 + 50  # spread 50 -> 0, absolute deviation from the mean 25 + 25 -> 0
    assert result.skipped[-1]["reason"] == "no move lowers the imbalance by capacityAwareMinBenefit"


def test_moves_to_a_strong_cold_broker_carrying_more_traffic() -> None:
    # a: 8192 msg/s at 100 % of 128; b: a machine four times as big, 12288 msg/s at 37.5 %.
    snap = cluster({"a": (128, 128, [1024.0] * 8), "b": (192, 512, [4096.0] * 3)})
    model = estimate_capacity(snap, CONF)
    assert model is not None and model.slope[1] == model.slope[0] / 4
    result = run(CapacityAwareShedder(), snap, CONF, 2)
    assert {u.destination for u in result.unloads} == {"b"} and len(result.unloads) == 4
    # gap 62.5 / (slope + slope / 4) = 4096 msg/s: four bundles of 1024, both end at 50 (the level too).
    assert result.unloads[0].reason["pair_even_amount"] == 62.5 / (SLOPE_128 * 1.25) == 4096
    last = result.unloads[-1].reason
    assert last["source_predicted"] == last["destination_predicted"] == 50.0 == last["level"]
    # AvgShedder skips the pair: the cold broker carries more traffic.
    avg = AvgShedder()
    assert not run_avg(avg, snap, 2).unloads


def test_declared_capacity_replaces_the_inferred_one() -> None:
    # Same limits, so the inferred slopes are equal; the declaration says b is four times a.
    snap = cluster({"a": (128, 128, [1024.0] * 8), "b": (48, 128, [1024.0] * 12)})
    inferred = estimate_capacity(snap, CONF)
    assert inferred is not None and inferred.slope[0] == inferred.slope[1]
    conf = conf_with(capacityAwareBrokerCapacities=["a=1", "b*=4"])
    declared = declared_capacities(["a", "b", "c"], conf)
    assert declared is not None and declared.tolist() == [1.0, 4.0, 0.0]
    model = estimate_capacity(snap, conf)
    assert model is not None
    # unit = min(score / traffic * capacity): a 100/8192*1, b 37.5/12288*4; slopes unit/1 and unit/4
    unit = min(100 / 8192, 37.5 / 12288 * 4)
    assert model.slope[0] == unit and model.slope[1] == unit / 4
    assert model.background[1] == 37.5 - unit / 4 * 12288


def test_heterogeneous_clusters_trigger_after_the_high_hit_count() -> None:
    # gap 25 is only a low hit; a co-located process on a (25 points of background) makes the
    # cluster heterogeneous, so two low hits trigger instead of eight.
    snap = cluster({"a": (96, 128, [1024.0] * 4), "b": (64, 128, [1024.0] * 4), "c": (64, 128, [1024.0] * 4)})
    shedder = CapacityAwareShedder()
    assert not shedder.find_bundles_for_unloading(snap, CONF).unloads
    second = shedder.find_bundles_for_unloading(snap, CONF)
    assert second.unloads and {u.broker for u in second.unloads} == {"a"}


# a carries 2048 msg/s (25 points) plus 31.25 points of background, b 4096 msg/s and none: a's
# background stands out by more than the low threshold (15) while its gap to b (6.25) is no hit.
CALM_COLOCATED = {"a": (72.0, 128.0, [1024.0] * 2), "b": (64.0, 128.0, [1024.0] * 4)}
# a at 87.5 %, 37.5 points of it background, above the overload threshold (85); gap 37.5: a low hit.
OVERLOADED_COLOCATED = {"a": (112.0, 128.0, [1024.0] * 4), "b": (64.0, 128.0, [1024.0] * 4)}


def test_an_overloaded_broker_on_a_heterogeneous_cluster_triggers_at_its_first_hit() -> None:
    # Two calm cycles show a's background (the high hit count, 2): the machines differ before a's first hit.
    calm, snap = cluster(CALM_COLOCATED), cluster(OVERLOADED_COLOCATED)
    shedder = CapacityAwareShedder()
    assert not run(shedder, calm, CONF, 2).unloads and shedder.machines_differ
    first = shedder.find_bundles_for_unloading(snap, CONF)
    assert first.unloads and {u.broker for u in first.unloads} == {"a"}
    assert {u.reason["trigger"] for u in first.unloads} == {TRIGGER_OVERLOAD}
    # Not above the threshold (equal passes, as the veto): the two hits of rule 2 again.
    calm_conf = conf_with(loadBalancerBrokerOverloadedThresholdPercentage=88)
    shedder = CapacityAwareShedder()
    assert not run(shedder, calm, calm_conf, 2).unloads
    assert not shedder.find_bundles_for_unloading(snap, calm_conf).unloads
    second = shedder.find_bundles_for_unloading(snap, calm_conf)
    assert second.unloads and {u.reason["trigger"] for u in second.unloads} == {TRIGGER_HITS}


def test_a_background_must_stand_out_for_the_high_hit_count_before_the_machines_differ() -> None:
    # An overloaded co-located broker seen for the first time waits one cycle: one report's background
    # may be its CPU and traffic averaged over different windows (docs/capacity-aware.md, rule 2).
    snap = cluster(OVERLOADED_COLOCATED)
    shedder = CapacityAwareShedder()
    first = shedder.find_bundles_for_unloading(snap, CONF)
    assert not first.unloads and not shedder.machines_differ
    assert [s["heterogeneous"] for s in first.skipped if s["reason"] == "hit count not reached"] == [False]
    second = shedder.find_bundles_for_unloading(snap, CONF)
    assert shedder.machines_differ and {u.reason["trigger"] for u in second.unloads} == {TRIGGER_OVERLOAD}
    # A background that moves to another broker every cycle never persists: identical machines.
    other = cluster({"a": (64.0, 128.0, [1024.0] * 4), "b": (72.0, 128.0, [1024.0] * 2)})
    hopping = CapacityAwareShedder()
    for snapshot_ in [cluster(CALM_COLOCATED), other] * 3:
        hopping.find_bundles_for_unloading(snapshot_, CONF)
        assert not hopping.machines_differ
    # A broker that leaves takes its streak with it; a cycle without traffic clears every streak.
    shedder.on_active_brokers_change(["b"])
    assert "a" not in shedder.background_streak
    shedder.background_streak["b"] = 5
    shedder.find_bundles_for_unloading(cluster({"a": (8.0, 128.0, []), "b": (8.0, 128.0, [])}), CONF)
    assert not shedder.background_streak


def test_an_overloaded_broker_on_identical_machines_keeps_its_hit_count() -> None:
    # Equal slopes, no background: jitter could explain the gap (37.5, a low hit), so eight hits.
    snap = cluster({"a": (112, 128, [1024.0] * 7), "b": (64, 128, [1024.0] * 4)})
    model = estimate_capacity(snap, CONF)
    assert model is not None and model.slope[0] == model.slope[1] and not model.background.any()
    shedder = CapacityAwareShedder()
    assert not run(shedder, snap, CONF, 7).unloads
    assert shedder.find_bundles_for_unloading(snap, CONF).unloads


def test_min_benefit_is_a_key_of_the_strategy() -> None:
    snap = cluster({"a": (128, 128, [2048.0] * 4), "b": (64, 128, [1024.0] * 4)})
    assert run(CapacityAwareShedder(), snap, conf_with(capacityAwareMinBenefit=100), 2).unloads
    alone = {"capacityAwareAvgShedderOnIdenticalMachines": False}
    stopped = run(CapacityAwareShedder(), snap, conf_with(capacityAwareMinBenefit=100.5, **alone), 2)
    assert not stopped.unloads and stopped.skipped[-1]["best_gain"] == 100.0
    # With rule 0 (the default), identical machines whose move does not pay take AvgShedder's pair.
    fallback = run(CapacityAwareShedder(), snap, conf_with(capacityAwareMinBenefit=100.5), 2)
    assert [u.reason["rules"] for u in fallback.unloads] == [AVG_SHEDDER_FALLBACK]


# --- rule 0: on identical machines, AvgShedder's pairs where no move of this strategy pays ----------------

FINE = [32.0] * 256
"""256 bundles of 32 msg/s on a 128-limit machine: 0.39 score points each, so no single move pays
capacityAwareMinBenefit (4): it lowers the imbalance by about 1.6."""


def test_identical_machines_whose_moves_do_not_pay_follow_avg_shedders_pairs() -> None:
    snap = cluster({"a": (128, 128, FINE), "b": (64, 128, FINE[:128])})  # gap 50: two high hits
    result = run(CapacityAwareShedder(), snap, CONF, 2)
    # AvgShedder at maxUnloadPercentage 0.5: half of the 4096 msg/s gap, 64 bundles, towards b.
    avg = run_avg(AvgShedder(), snap, 2, conf_with(maxUnloadPercentage=0.5))
    assert [(u.broker, u.bundle, u.destination) for u in result.unloads] == [
        (u.broker, u.bundle, u.destination) for u in avg.unloads
    ]
    assert len(result.unloads) == 64 and {u.reason["rules"] for u in result.unloads} == {AVG_SHEDDER_FALLBACK}
    off = conf_with(capacityAwareAvgShedderOnIdenticalMachines=False)
    stopped = run(CapacityAwareShedder(), snap, off, 2)
    assert not stopped.unloads and stopped.skipped[-1]["best_gain"] < 4


def test_unequal_machines_never_fall_back() -> None:
    # The same fine bundles, the cold broker a machine of four times the limit: capacity's rules alone.
    # a is at 100 %: planned at once (rule 2's one hit), its moves relieve it (rule 3) and stop at 85.
    snap = cluster({"a": (128, 128, FINE), "b": (64, 512, FINE[:128])})
    shedder, conf = CapacityAwareShedder(), conf_with(capacityAwareMinBenefit=100)
    results = [shedder.find_bundles_for_unloading(snap, conf) for _ in range(3)]
    relief = results[0].unloads
    assert relief and {u.reason["rule"] for u in relief} == {OVERLOAD_RULE}
    assert relief[-1].reason["source_predicted"] <= 85 < relief[-1].reason["source_predicted_before"]
    assert [e["reason"] for e in results[0].skipped] == [NO_PAYING_MOVE]
    assert all("rules" not in e for r in results for e in [*r.skipped, *(u.reason for u in r.unloads)])


def test_a_plan_that_moves_is_not_replaced() -> None:
    snap = cluster({"a": (128, 128, [2048.0] * 4), "b": (64, 128, [1024.0] * 4)})
    result = run(CapacityAwareShedder(), snap, CONF, 2)
    assert result.unloads and all("rules" not in u.reason for u in result.unloads)


def test_the_fallback_waits_for_this_strategys_own_trigger() -> None:
    # Gap 37.5 on identical machines: a low hit; the fallback may act only once this strategy's own
    # count (eight) is reached, never on AvgShedder's count alone.
    snap = cluster({"a": (112, 128, FINE[:224]), "b": (64, 128, FINE[:128])})
    shedder = CapacityAwareShedder()
    assert not run(shedder, snap, CONF, 7).unloads
    result = shedder.find_bundles_for_unloading(snap, CONF)
    assert result.unloads and {u.reason["rules"] for u in result.unloads} == {AVG_SHEDDER_FALLBACK}


def test_avg_shedders_count_alone_does_not_trigger_the_fallback() -> None:
    # AvgShedder counts a hit for both brokers of a pair, this strategy for the hot one only: after b was
    # hot for seven cycles and a is hot at the eighth, AvgShedder's pair has eight hits (and would move),
    # this strategy's a has one. Under jitter such swaps were most of what the fallback added.
    b_hot = cluster({"a": (64, 128, FINE[:128]), "b": (112, 128, FINE[:224])})
    a_hot = cluster({"a": (112, 128, FINE[:224]), "b": (64, 128, FINE[:128])})
    shedder = CapacityAwareShedder()
    assert not run(shedder, b_hot, CONF, 7).unloads
    assert not shedder.find_bundles_for_unloading(a_hot, CONF).unloads
    avg = AvgShedder()
    run_avg(avg, b_hot, 7, conf_with(maxUnloadPercentage=0.5))
    assert avg.find_bundles_for_unloading(a_hot, conf_with(maxUnloadPercentage=0.5)).unloads


def test_a_background_seen_for_a_cycle_does_not_restart_avg_shedders_count() -> None:
    # Gap 37.5, a low hit on every cycle. Every other cycle a's CPU is 25 points above what its traffic
    # explains (5120 msg/s at 87.5 %): one report's windows, not a co-located process. AvgShedder keeps
    # counting through those cycles, and at the eighth both counts are reached.
    hot = cluster({"a": (112, 128, FINE[:224]), "b": (64, 128, FINE[:128])})
    flicker = cluster({"a": (112, 128, FINE[:160]), "b": (64, 128, FINE[:128])})
    shedder = CapacityAwareShedder()
    for snap in [flicker, hot] * 3 + [flicker]:
        assert not shedder.find_bundles_for_unloading(snap, CONF).unloads
        assert not shedder.machines_differ
    result = shedder.find_bundles_for_unloading(hot, CONF)
    assert result.unloads and {u.reason["rules"] for u in result.unloads} == {AVG_SHEDDER_FALLBACK}


def test_rule_0_steps_aside_once_a_background_has_stood_out_for_the_low_hit_count() -> None:
    # a with 25 points of background on every cycle (gap 37.5): after two cycles the machines differ (rule
    # 2 triggers this strategy, whose fine moves do not pay); at the eighth AvgShedder moves (512 msg/s,
    # above a lowered minimum), but the background has stood out as long as AvgShedder waits: a co-located
    # process, not jitter, so its pair is not taken.
    colocated = cluster({"a": (112, 128, FINE[:160]), "b": (64, 128, FINE[:128])})
    # a is at 87.5 %: an overload threshold of 90 keeps rule 3's overload relief out of this test.
    small = conf_with(
        minUnloadMessage=100, minUnloadMessageThroughput=0, loadBalancerBrokerOverloadedThresholdPercentage=90
    )
    even_small = conf_with(maxUnloadPercentage=0.5, minUnloadMessage=100)
    assert run_avg(AvgShedder(), colocated, 8, even_small).unloads
    shedder = CapacityAwareShedder()
    results = [shedder.find_bundles_for_unloading(colocated, small) for _ in range(10)]
    assert shedder.machines_differ and not any(r.unloads for r in results)
    assert shedder.background_streak == {"a": 10}
    # A background that appears after AvgShedder has counted half its hits has not stood out as long when
    # AvgShedder's count is reached: its pair is taken, as on identical machines.
    hot = cluster({"a": (112, 128, FINE[:224]), "b": (64, 128, FINE[:128])})
    later = CapacityAwareShedder()
    assert not any(later.find_bundles_for_unloading(s, small).unloads for s in [hot] * 4 + [colocated] * 3)
    taken = later.find_bundles_for_unloading(colocated, small)
    assert later.machines_differ and later.background_streak == {"a": 4}
    assert len(taken.unloads) == 16 and {u.reason["rules"] for u in taken.unloads} == {AVG_SHEDDER_FALLBACK}


def test_avg_shedders_pair_not_taken_because_this_plan_moved_keeps_its_counts() -> None:
    # a and c at 100 % (a with one 2048 msg/s bundle among fine ones, c fine only), b at 25 %: at the second
    # cycle (two high hits) this plan moves a's large bundle to b, and no fine move pays; AvgShedder's pair
    # (b, c) would shed, but this plan moved, so it is not taken. Its counts are given back: in the next
    # cycle, once the reports show the move, AvgShedder's pair moves c's fine bundles (rule 0), not eight
    # minutes later (two more hits here).
    before = cluster(
        {"a": (128, 128, [2048.0, *FINE[:192]]), "b": (32, 128, FINE[:64]), "c": (128, 128, FINE[:256])}
    )
    after = cluster(
        {"a": (96, 128, FINE[:192]), "b": (64, 128, [2048.0, *FINE[:64]]), "c": (128, 128, FINE[:256])}
    )
    shedder = CapacityAwareShedder()
    assert not shedder.find_bundles_for_unloading(before, CONF).unloads
    own = shedder.find_bundles_for_unloading(before, CONF)
    assert [(u.broker, u.destination, u.reason["rule"]) for u in own.unloads] == [
        ("a", "b", "coldest destination")
    ]
    assert shedder._avg.hit_high == {"b": 2, "c": 2}  # given back after AvgShedder shed (b, c)
    deferred = shedder.find_bundles_for_unloading(after, CONF)
    assert {(u.broker, u.destination) for u in deferred.unloads} == {("c", "b")}
    assert {u.reason["rules"] for u in deferred.unloads} == {AVG_SHEDDER_FALLBACK}


def test_avg_shedders_pair_not_taken_because_this_strategy_has_not_triggered_keeps_its_counts() -> None:
    # Gap 37.5 on identical machines, bundles too fine for any move of this strategy to pay. AvgShedder
    # counts a hit for both brokers of its pair, this strategy for the hot one only: preset AvgShedder's
    # pair at seven low hits and this strategy's own count at none. The first cycle is AvgShedder's eighth
    # hit, not this strategy's, so its decisions are not taken, and its pair keeps its counts; once this
    # strategy's own trigger fires, rule 0 takes AvgShedder's pair in that cycle, not eight hits after.
    snap = cluster({"a": (112, 128, FINE[:224]), "b": (64, 128, FINE[:128])})
    shedder = CapacityAwareShedder()
    shedder._avg.seed_hit_counts({"a": (0, 7), "b": (0, 7)})
    assert not shedder.find_bundles_for_unloading(snap, CONF).unloads
    assert shedder._avg.hit_low == {"a": 8, "b": 8}  # given back after AvgShedder shed (a, b)
    assert shedder.hit_low == {"a": 1}
    shedder.hit_low["a"] = 7
    result = shedder.find_bundles_for_unloading(snap, CONF)
    assert result.unloads and {u.reason["rules"] for u in result.unloads} == {AVG_SHEDDER_FALLBACK}
    assert {(u.broker, u.destination) for u in result.unloads} == {("a", "b")}


def test_preset_hit_counts_start_both_sets_of_rules_where_the_leader_was() -> None:
    # Gap 37.5 on identical machines: eight low hits. Preset at seven, the first cycle is the eighth.
    snap = cluster({"a": (112, 128, FINE[:224]), "b": (64, 128, FINE[:128])})
    shedder = CapacityAwareShedder()
    shedder.seed_hit_counts({"a": (0, 7), "b": (0, 7)})
    result = shedder.find_bundles_for_unloading(snap, CONF)
    assert result.unloads and {u.reason["rules"] for u in result.unloads} == {AVG_SHEDDER_FALLBACK}
    assert not CapacityAwareShedder().find_bundles_for_unloading(snap, CONF).unloads


def test_over_placement_lruww_is_balanced_as_avg_shedder_balances_it() -> None:
    # Six identical brokers, two of them 30 points hotter, bundles of about one score point: without rule 0
    # no move paid and the cluster stayed at a spread of 30 (docs/capacity-aware.md). Group moves are on by
    # default but never on identical machines: rule 0 decides, as AvgShedder would.
    scenario = load_scenario("over-placement-lruww")
    theirs = run_simulation(scenario, strategy="AvgShedder", seed=1)
    ours = run_simulation(scenario, strategy=PLUGIN, seed=1)  # the defaults: rule 0, groups on
    assert len(ours.decisions) == len(theirs.decisions) > 20
    assert ours.summary["score_spread_mean"] == theirs.summary["score_spread_mean"]
    assert GROUP_RULE not in set(ours.decisions["reason"].map(lambda r: json.loads(r).get("rule")))
    off = {"capacityAwareAvgShedderOnIdenticalMachines": False}
    stalled = run_simulation(scenario, strategy=PLUGIN, seed=1, config_overrides=off)
    assert len(stalled.decisions) <= 1 and stalled.summary["score_spread_mean"] > 25


# --- rule 3's group moves: where no single move pays --------------------------------------------------------

# a: 4096 msg/s in 64 bundles of 64 on a 128 machine (50 points); b: 2048 in 32 on a 512 machine (6.25).
# Cost 1/64 of the limit per msg/s on both: slopes S = 100/64/128 and S/4, level 15 (6144 / 409.6).
# One bundle: a -0.78125, b +0.1953125, spread and deviation each -0.9765625: a gain of 1.953125 < 4.
UNEQUAL_FINE = {"a": (64.0, 128.0, [64.0] * 64), "b": (32.0, 512.0, [64.0] * 32)}


def test_where_no_single_move_pays_the_fewest_bundles_that_pay_together_move() -> None:
    snap = cluster(UNEQUAL_FINE)
    single = run(CapacityAwareShedder(), snap, CONF, 2)  # groups off (the default): the plan stops at once
    assert not single.unloads and single.skipped[-1]["best_gain"] == 1.953125
    result = run(CapacityAwareShedder(), snap, GROUPS, 2)
    first = result.unloads[:3]
    # two bundles gain 3.90625, three 5.859375: a group of three, largest first (all equal: by name)
    assert [u.reason["rule"] for u in first] == [GROUP_RULE] * 3
    assert [(u.reason["group"], u.reason["gain"]) for u in first] == [(3, 5.859375)] * 3
    assert [u.reason["imbalance_before"] for u in first] == [87.5] * 3
    assert {(u.broker, u.destination) for u in result.unloads} == {("a", "b")}
    last = result.unloads[-1].reason
    assert last["source_predicted"] >= last["destination_predicted"]  # never past the pair's even point
    assert result.skipped[-1]["reason"] == NO_PAYING_MOVE


def test_a_group_holds_one_bundle_of_a_namespace() -> None:
    # The same cluster with a's bundles in namespaces of two: the filter admits one more of a namespace on
    # b, so a group of three takes three namespaces.
    result = run(CapacityAwareShedder(), cluster(UNEQUAL_FINE, per_namespace=2), GROUPS, 2)
    first = [u.bundle.split("/")[1] for u in result.unloads[:3]]
    assert result.unloads[0].reason["group"] == 3 and len(set(first)) == 3


def test_no_group_within_the_balanced_enough_band() -> None:
    # With a band wider than the spread (43.75) and the excess (35), the plan is balanced enough: a move must
    # pay capacityAwareBalancedMinBenefit, and no group is formed.
    banded = conf_with(capacityAwareGroupMoves=True, capacityAwareBalancedSpread=80)
    result = run(CapacityAwareShedder(), cluster(UNEQUAL_FINE), banded, 2)
    assert not result.unloads and result.skipped[-1]["reason"].startswith("balanced enough")


def test_no_group_on_identical_machines() -> None:
    # a at 50, b at 6.25 on equal machines: one bundle gains 3.125, two would gain 6.25 together; but on
    # identical machines groups are not formed (rule 0 is theirs, switched off here to see the plan stop).
    snap = cluster({"a": (64.0, 128.0, [64.0] * 64), "b": (8.0, 128.0, [64.0] * 8)})
    conf = conf_with(capacityAwareGroupMoves=True, capacityAwareAvgShedderOnIdenticalMachines=False)
    result = run(CapacityAwareShedder(), snap, conf, 2)
    assert not result.unloads and result.skipped[-1]["reason"] == NO_PAYING_MOVE
    assert result.skipped[-1]["best_gain"] == 3.125


# a: a 512 machine at 50 in 256 bundles of 64 msg/s; b: an empty 128 machine. Slopes S/4 and S (S =
# 100/64/128), level 40: a is 10 above its target, b 40 below, a spread of 50. One bundle: a -0.1953125,
# b +0.78125, a gain of 1.953125; three together 5.859375.
STRONG_HOT_NEAR_TARGET = {"a": (256.0, 512.0, [64.0] * 256), "b": (0.0, 128.0, [])}


def test_a_group_moves_only_off_a_broker_outside_the_band_itself() -> None:
    snap = cluster(STRONG_HOT_NEAR_TARGET)
    # With the band at 25 the plan is not balanced enough (spread 50), but a is only 10 above its target,
    # within half the band: no group.
    banded = conf_with(capacityAwareGroupMoves=True, capacityAwareBalancedSpread=25)
    stopped = run(CapacityAwareShedder(), snap, banded, 2)
    assert not stopped.unloads and stopped.skipped[-1]["reason"] == NO_PAYING_MOVE
    assert stopped.skipped[-1]["best_gain"] == 1.953125
    # With the band at 16, a's 10 is beyond its half: a group of three.
    narrow = conf_with(capacityAwareGroupMoves=True, capacityAwareBalancedSpread=16)
    moved = run(CapacityAwareShedder(), snap, narrow, 2)
    assert [(u.reason["rule"], u.reason["group"]) for u in moved.unloads[:3]] == [(GROUP_RULE, 3)] * 3
    assert {(u.broker, u.destination) for u in moved.unloads} == {("a", "b")}


def run_avg(
    avg: AvgShedder, snap: ClusterSnapshot, times: int, conf: LoadBalancerConfig = CONF
) -> SheddingResult:
    result = SheddingResult()
    for _ in range(times):
        result = avg.find_bundles_for_unloading(snap, conf)
    return result


def test_a_hot_broker_with_nothing_to_shed_leaves_the_cold_one_to_the_next() -> None:
    # c: 70 % from a co-located process, no bundles; b at 50 % sheds to a at 10 %.
    snap = cluster({"a": (12.8, 128, [1024.0] * 2), "b": (64, 128, [1024.0] * 8), "c": (89.6, 128, [])})
    result = run(CapacityAwareShedder(), snap, CONF, 8)  # gaps 60 and 40: high hits for both
    skipped = {s["broker"]: s["reason"] for s in result.skipped if "broker" in s}
    assert skipped["c"] == "no sheddable bundle (load is not traffic)"
    assert result.unloads and {(u.broker, u.destination) for u in result.unloads} == {("b", "a")}


def test_overload_veto_passes_exactly_at_the_threshold() -> None:
    snap = cluster({"a": (128, 128, [2048.0] * 4), "b": (64, 128, [1024.0] * 4)})
    at = run(CapacityAwareShedder(), snap, conf_with(loadBalancerBrokerOverloadedThresholdPercentage=75), 2)
    assert len(at.unloads) == 1 and at.unloads[0].reason["destination_predicted"] == 75.0
    above = run(
        CapacityAwareShedder(), snap, conf_with(loadBalancerBrokerOverloadedThresholdPercentage=74), 2
    )
    assert not above.unloads
    stop, vetoed = above.skipped[-2:]
    assert stop["overload veto"] >= 1 and stop["best_gain"] is None
    # AvgShedder's pair (rule 0) would move the same bundle: the same veto refuses it.
    assert vetoed == {"strategy": "CapacityAwareShedder", "reason": AVG_SHEDDER_VETOED, "overload veto": 1}


def test_unplanned_placement_goes_by_headroom_and_counts_what_it_placed() -> None:
    snap = cluster({"a": (12.8, 128, [1024.0]), "b": (15.36, 128, [1024.0]), "c": (64, 128, [1024.0] * 4)})
    shedder = CapacityAwareShedder()
    first = shedder.select_broker(["a", "b", "c"], "t/new/0x0_0x1", snap, CONF)
    assert first.broker == "a" and first.reason["rule"] == "headroom"
    second = shedder.select_broker(["a", "b", "c"], "t/new/0x1_0x2", snap, CONF)
    assert second.broker == "b"  # a's predicted score now includes the first bundle (mean 1024 msg/s)
    assert shedder.select_broker(["c"], "t/new/0x2_0x3", snap, CONF).broker == "c"


def test_planned_destination_is_returned_when_a_candidate() -> None:
    snap = cluster({"a": (128, 128, [2048.0] * 4), "b": (64, 128, [1024.0] * 4)})
    shedder = CapacityAwareShedder()
    bundle = run(shedder, snap, CONF, 2).unloads[0].bundle
    placed = shedder.select_broker(np.array([0, 1]), bundle, snap, CONF)
    assert placed.broker == "b" and placed.reason["rule"] == "planned destination"


def test_hit_trigger_at_count_minus_one_and_count() -> None:
    # gap 25: a low hit (15 <= gap < 40), so loadBalancerAvgShedderHitCountLowThreshold (8) cycles.
    snap = cluster({"a": (96, 128, [1024.0] * 6), "b": (64, 128, [1024.0] * 4)})
    shedder = CapacityAwareShedder()
    result = run(shedder, snap, CONF, 7)
    assert not result.unloads and any(s["reason"] == "hit count not reached" for s in result.skipped)
    assert shedder.find_bundles_for_unloading(snap, CONF).unloads
    assert shedder.hit_low.get("a") is None  # a triggered broker restarts its count


def test_forgets_brokers_that_left() -> None:
    shedder = CapacityAwareShedder()
    shedder.hit_low.update(a=3, b=2)
    shedder.planned_destinations.update({"x": "a", "y": "b"})
    shedder.unseen.update(a=UnseenMoves((1.0,)), b=UnseenMoves((2.0,)))
    shedder.settled = 10.0
    shedder.on_active_brokers_change(["b"])
    assert shedder.hit_low == {"b": 2} and shedder.planned_destinations == {"y": "b"}
    assert list(shedder.unseen) == ["b"] and shedder.settled is None  # a new cluster: plan afresh


brokers_st = st.lists(
    st.tuples(
        st.sampled_from([64.0, 128.0, 256.0, 512.0]),  # cpu limit (machine size)
        st.floats(0.0, 0.6),  # background, fraction of the limit
        st.lists(st.sampled_from([0.0, 512.0, 1024.0, 4096.0]), max_size=6),  # bundle rates
    ),
    min_size=2,
    max_size=6,
)


@settings(max_examples=60, deadline=None)
@pytest.mark.parametrize("conf", [CONF, GROUPS], ids=["single moves", "group moves"])
@given(spec=brokers_st)
def test_every_move_pays_never_overloads_and_moves_a_bundle_once(
    conf: LoadBalancerConfig, spec: list[tuple[float, float, list[float]]]
) -> None:
    cost = 1 / 64  # usage per msg/s
    snap = cluster(
        {f"b{i}": (limit * bg + cost * sum(rates), limit, rates) for i, (limit, bg, rates) in enumerate(spec)}
    )
    result = run(CapacityAwareShedder(), snap, conf, 8)
    limit = CONF.load_balancer_broker_overloaded_threshold_percentage
    assert len({u.bundle for u in result.unloads}) == len(result.unloads)
    assert all(u.destination is not None and u.destination != u.broker for u in result.unloads)
    if any(u.reason.get("rules") == AVG_SHEDDER_FALLBACK for u in result.unloads):
        # rule 0: a whole cycle of AvgShedder's moves, none predicted to overload its destination
        assert {u.reason.get("rules") for u in result.unloads} == {AVG_SHEDDER_FALLBACK}
        model = estimate_capacity(snap, CONF)
        assert model is not None
        predicted = model.scores.astype(float).copy()
        for u in result.unloads:
            assert u.destination is not None
            d, k = snap.broker_index[u.destination], snap.bundle_index(u.bundle)
            assert k is not None
            predicted[d] += model.slope[d] * (snap.short_msg_rate_in[k] + snap.short_msg_rate_out[k])
            assert predicted[d] <= limit
        return
    before = [u.reason["imbalance_before"] for u in result.unloads]
    assert before == sorted(before, reverse=True)
    for u in result.unloads:
        assert u.reason["destination_predicted"] <= limit
        assert u.reason["bundle_traffic"] <= u.reason["pair_even_amount"] * (1 + 1e-12)
        if u.reason["rule"] == OVERLOAD_RULE:  # rule 3's overload relief: any gain, off an overloaded broker
            assert u.reason["gain"] > 0 and u.reason["source_predicted_before"] > limit
        else:
            assert u.reason["gain"] >= CONF.capacity_aware_min_benefit
        assert u.reason["destination_predicted"] <= u.reason["source_predicted"] + 1e-9
    groups: dict[float, list[float]] = {}  # a group's moves share their imbalance_before
    for u in result.unloads:
        if u.reason["rule"] == GROUP_RULE:
            groups.setdefault(u.reason["imbalance_before"], []).append(u.reason["bundle_traffic"])
            assert u.reason["group"] > 1
    for u in result.unloads:
        if u.reason["rule"] == GROUP_RULE:  # together they fit the pair's amount
            assert sum(groups[u.reason["imbalance_before"]]) <= u.reason["pair_even_amount"] * (1 + 1e-12)


def test_runs_through_compare_by_module_and_class() -> None:
    out = CliRunner().invoke(
        app,
        [
            "compare",
            "heterogeneous-cpu-eater",
            "--strategies",
            f"AvgShedder,{PLUGIN}",
            "--seed",
            "1",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    text = out.output
    assert "CapacityAwareShedder" in text


def test_without_traffic_placement_spreads_by_bundle_count() -> None:
    snap = snapshot({b: broker_data(cpu=(2.0, 128.0)) for b in ("a", "b", "c")})
    shedder = CapacityAwareShedder()
    chosen = [shedder.select_broker(["a", "b", "c"], f"t/ns/{i}", snap, CONF).broker for i in range(6)]
    assert chosen == ["a", "b", "c", "a", "b", "c"]


def test_declared_capacities_reach_the_strategy_in_a_simulation() -> None:
    declared = {"capacityAwareBrokerCapacities": ["broker-0004:*=4", "*=1"]}
    result = run_simulation(
        load_scenario("heterogeneous-strong-machine"), strategy=PLUGIN, seed=1, config_overrides=declared
    )
    assert result.config["capacityAwareBrokerCapacities"] == declared["capacityAwareBrokerCapacities"]
    reasons = [json.loads(r) for r in result.decisions["reason"]]
    assert reasons
    for r in reasons:
        slopes = {r["pair"][0]: r["under_slope"], r["pair"][1]: r["over_slope"]}
        if "broker-0004:8080" in slopes and len(slopes) == 2:
            other = next(v for b, v in slopes.items() if b != "broker-0004:8080")
            assert abs(other / slopes["broker-0004:8080"] - 4.0) < 1e-9


def test_a_report_that_does_not_show_the_moves_yet_is_corrected_by_them() -> None:
    # The move of test_amount_evens_the_pair_by_capacity: a 100 -> 75, b 50 -> 75.
    snap = cluster({"a": (128, 128, [2048.0] * 4), "b": (64, 128, [1024.0] * 4)})
    shedder = CapacityAwareShedder()
    moved = run(shedder, snap, CONF, 2).unloads
    assert len(moved) == 1 and shedder.unseen["a"].score == -25.0 and shedder.unseen["b"].score == 25.0
    # The same reports again (neither broker has reported since): planned on as 75 / 75, nothing moves,
    # not even the moved bundle, which this snapshot still lists under a.
    for _ in range(4):
        again = shedder.find_bundles_for_unloading(snap, CONF)
        assert not again.unloads
        stale = [s for s in again.skipped if s["reason"] == "reports do not show earlier moves yet"]
        assert stale and stale[0]["brokers"] == ["a", "b"]
    # a reports again (its report changed): its entry goes, b's report is still the old one.
    after = cluster({"a": (96, 128, [2048.0] * 3), "b": (64, 128, [1024.0] * 4)})
    result = shedder.find_bundles_for_unloading(after, CONF)
    assert "a" not in shedder.unseen and shedder.unseen["b"].score == 25.0
    stale = [s for s in result.skipped if s["reason"] == "reports do not show earlier moves yet"]
    assert stale[0]["brokers"] == ["b"]


def test_a_settled_plan_waits_until_the_imbalance_grows_by_the_min_benefit() -> None:
    # a: two bundles of 4096 msg/s (50 points each) at 100 %; b at 12.5 %. Gap 87.5: moving one bundle
    # (3584 msg/s would even the pair) overshoots, so no move fits and the plan stops at imbalance 175.
    first = cluster({"a": (128, 128, [4096.0] * 2), "b": (16, 128, [1024.0])})
    shedder = CapacityAwareShedder()
    stopped = run(shedder, first, CONF, 2)
    assert not stopped.unloads and stopped.skipped[-1]["imbalance"] == 175.0 and shedder.settled == 175.0
    # Still triggered, same cluster: not planned again.
    again = shedder.find_bundles_for_unloading(first, CONF)
    assert again.skipped[-1]["reason"] == "settled: the imbalance has not grown by capacityAwareMinBenefit"
    # b loses half its traffic: imbalance 187.5 >= 175 + 4, planned again (and settled there).
    grown = cluster({"a": (128, 128, [4096.0] * 2), "b": (8, 128, [512.0])})
    replanned = shedder.find_bundles_for_unloading(grown, CONF)
    assert replanned.skipped[-1]["reason"] == "no move lowers the imbalance by capacityAwareMinBenefit"
    assert shedder.settled == replanned.skipped[-1]["imbalance"] == 187.5


def test_deviation_is_measured_from_the_balanced_level_not_the_mean() -> None:
    # Three 128 machines at 75 % and an empty-ish 512 machine at 3.125 %; bundles of 1024 msg/s are 12.5
    # points on a small machine and 3.125 on the big one. Moving one lowers a small machine by 12.5 and
    # raises the big one by 3.125: both closer to the level (33.9), and the minimum rises by 3.125.
    snap = cluster(
        {
            "a": (96, 128, [1024.0] * 6),
            "b": (96, 128, [1024.0] * 6),
            "c": (96, 128, [1024.0] * 6),
            "d": (16, 512, [1024.0]),
        }
    )
    first = run(CapacityAwareShedder(), snap, CONF, 2).unloads[0]
    assert first.destination == "d"
    # 12.5 + 3.125 of deviation and 3.125 of spread. From the mean (which falls by 2.34 as load moves to
    # the strong machine, so that the two other small machines look further off) it would be 14.06.
    assert first.reason["gain"] == pytest.approx(18.75)


def test_a_smaller_bundle_may_go_where_the_largest_one_is_not_admitted() -> None:
    # a: 100 % with a 2048 msg/s bundle of t/shared and six of 1024; b (12.5 %) owns the other t/shared
    # bundle, so the even-distribution filter admits only c (50 %) for it. Moving it to c gains 33.3;
    # moving a 1024 bundle of another namespace to b gains 50 (both brokers 12.5 closer to the level, and
    # the spread 25 narrower): the best move is not the largest bundle's.
    shared = ["t/shared/0x00000000_0x80000000", "t/shared/0x80000000_0xffffffff"]
    own = [f"t/a-ns{i}/0x00000000_0xffffffff" for i in range(6)]
    mid = [f"t/c-ns{i}/0x00000000_0xffffffff" for i in range(4)]
    bundles = {shared[0]: bundle_data(rate_in=2048.0), shared[1]: bundle_data(rate_in=1024.0)}
    bundles.update({n: bundle_data(rate_in=1024.0) for n in own + mid})
    snap = snapshot(
        {
            "a": broker_data(cpu=(128, 128), rate_in=8192.0, bundles=[shared[0], *own]),
            "b": broker_data(cpu=(16, 128), rate_in=1024.0, bundles=[shared[1]]),
            "c": broker_data(cpu=(64, 128), rate_in=4096.0, bundles=mid),
        },
        bundles,
    )
    first = run(CapacityAwareShedder(), snap, CONF, 2).unloads[0]
    assert (first.destination, first.reason["bundle_traffic"]) == ("b", 1024.0)
    assert first.reason["gain"] == pytest.approx(50.0)


PROBES = Path(__file__).resolve().parents[2] / "examples" / "capacity-probes"


HELD_OUT_ROUNDS: dict[str, set[str]] = {
    "holdout.yaml": {"probe-bundle-sizes", "probe-strong-slow-nic", "probe-colocated-comes-goes"},
    "holdout-3.yaml": {
        "probe-cpu-generations",
        "probe-diurnal-phases",
        "probe-churn-mixed",
        "probe-hashed-ramp",
    },
    "holdout-4.yaml": {
        "probe-strong-bookie",
        "probe-shared-namespace",
        "probe-catchup-mixed",
        "probe-heavy-tail",
    },
    "holdout-5.yaml": {
        "probe-weak-joins",
        "probe-connection-heavy",
        "probe-rolling-mixed",
        "probe-zipf-classes",
    },
    "holdout-6.yaml": {
        "probe-strong-leaves",
        "probe-namespace-surge",
        "probe-growing-colocated",
        "probe-fanout-mixed",
    },
    "holdout-7.yaml": {
        "probe-large-mixed",
        "probe-heavy-placed",
        "probe-growing-mixed",
        "probe-colocated-loaded",
    },
    "holdout-8.yaml": {
        "probe-tenant-surge-loaded",
        "probe-bookie-machines",
        "probe-bytes-and-messages",
        "probe-loaded-failover",
    },
    "holdout-9.yaml": {
        "probe-fine-bundles",
        "probe-coarse-bundles",
        "probe-colocated-cycles",
        "probe-spiky-mixed",
    },
    "holdout-10.yaml": {
        "probe-staged-migration",
        "probe-strong-restarts",
        "probe-isolation-lifted",
        "probe-generations-day",
    },
    "holdout-11.yaml": {
        "probe-identical-hotspots",
        "probe-identical-hot-topics",
        "probe-identical-replacement",
        "probe-identical-batch-jitter",
    },
    "holdout-12.yaml": {
        "probe-colocated-appears",
        "probe-pulses-strong-join",
        "probe-storage-node-fails",
        "probe-identical-crowded-join",
        "probe-identical-pulse-jitter",
    },
    "holdout-13.yaml": {
        "probe-refresh-hot-checkout",
        "probe-creeping-sidecar",
        "probe-zipf-namespaces-large",
        "probe-weak-restarts",
        "probe-identical-onboarding",
    },
    "holdout-14.yaml": {
        "probe-tenant-departs",
        "probe-downstream-outage",
        "probe-zone-outage",
        "probe-roaming-neighbour",
        "probe-identical-cutover",
    },
    "holdout-15.yaml": {
        "probe-image-uploads",
        "probe-schema-growth",
        "probe-market-fanout",
        "probe-media-host-fails",
        "probe-identical-attachments",
    },
    "holdout-16.yaml": {
        "probe-weak-class-surge",
        "probe-restless-clients",
        "probe-colocated-workers",
        "probe-month-end-export",
        "probe-identical-hot-rack",
    },
    "holdout-17.yaml": {
        "probe-fleet-scale-out",
        "probe-subscriptions-multiply",
        "probe-slow-tide",
        "probe-class-rolling-restart",
        "probe-identical-hot-namespaces",
    },
    "holdout-18.yaml": {
        "probe-nightly-colocated-job",
        "probe-generation-swap",
        "probe-partitions-few-bundles",
        "probe-traced-logs-slow-nic",
        "probe-identical-flash-sale",
    },
    "holdout-19.yaml": {
        "probe-direct-memory-flags",
        "probe-leader-restarts-migration",
        "probe-geo-replication-outage",
        "probe-evening-decline",
        "probe-identical-campaign-bursts",
    },
    "holdout-20.yaml": {
        "probe-customer-namespaces",
        "probe-peak-hour-nic",
        "probe-fanout-namespaces",
        "probe-rack-decommission",
        "probe-identical-leader-reboots",
    },
    "holdout-21.yaml": {
        "probe-weak-bookie-nodes",
        "probe-warm-leader-grace",
        "probe-legacy-four-bundles",
        "probe-spot-reclaims",
        "probe-identical-follow-the-sun",
    },
    "holdout-22.yaml": {
        "probe-tls-keystore-class",
        "probe-partition-expansion",
        "probe-colocated-proxies",
        "probe-emergency-capacity",
        "probe-identical-evening-scale-in",
    },
    "holdout-23.yaml": {
        "probe-fleet-three-generations",
        "probe-fleet-bookie-subset",
        "probe-fleet-rack-lost",
        "probe-fleet-instance-refresh",
        "probe-identical-fleet-rollout",
    },
    "holdout-24.yaml": {
        "probe-regions-opposite-days",
        "probe-microbatch-consumers",
        "probe-onsales-functions-ramp",
        "probe-inlined-payloads",
        "probe-identical-cellular-jitter",
    },
    "holdout-25.yaml": {
        "probe-three-brokers-one-doubled",
        "probe-small-zk-bookie-host",
        "probe-five-brokers-two-nics",
        "probe-small-leader-host-returns",
        "probe-identical-small-hot-namespace",
    },
    "holdout-26.yaml": {
        "probe-cpu-only-weights",
        "probe-overload-line-75",
        "probe-shedding-every-three-minutes",
        "probe-fast-usage-history",
        "probe-identical-even-filter-off",
    },
    "holdout-27.yaml": {
        "probe-quorum-three-class",
        "probe-quorum-rollout",
        "probe-quorum-bookie-hosts",
        "probe-quorum-archive-broadcast",
        "probe-identical-quorum-audit-backfill",
    },
    "holdout-28.yaml": {
        "probe-report-threshold-25",
        "probe-stats-every-five-minutes",
        "probe-night-backup-threshold-5",
        "probe-report-relief-scale-out",
        "probe-identical-stats-every-two-minutes",
    },
    "holdout-29.yaml": {
        "probe-direct-memory-refresh-stock-flags",
        "probe-direct-memory-ledger-cache",
        "probe-direct-memory-evening-export",
        "probe-direct-memory-pods-no-nic",
        "probe-identical-direct-memory-media",
    },
    "holdout-30.yaml": {
        "probe-geo-replication-enabled",
        "probe-geo-dr-failover",
        "probe-geo-edge-aggregation",
        "probe-geo-mesh-third-region",
        "probe-identical-geo-wan-outage",
    },
    "holdout-31.yaml": {
        "probe-nonpersistent-market-data",
        "probe-nonpersistent-live-relay",
        "probe-nonpersistent-device-presence",
        "probe-nonpersistent-dashboards-cutover",
        "probe-identical-nonpersistent-game-state",
    },
}
"""Each held-out round's grid and its probes (docs/capacity-aware.md, "Probes"): issue 15's second round
(three probes), its third to eleventh (four each; the eleventh's are clusters of identical machines), its
twelfth (five: three heterogeneous, one homogeneous, one jitter), its thirteenth to thirty-first (five
each: four heterogeneous, one homogeneous; the twenty-third's of 60 to 64 brokers, the twenty-fourth's of
load that changes shape over time, its homogeneous one a jitter probe, the twenty-fifth's small clusters
of 3 to 7 brokers, the twenty-sixth's each under one of operators' non-default broker.conf settings, the
twenty-seventh's of BookKeeper copies that differ between brokers, the twenty-eighth's of the load-report
path tuned by operators: report threshold, maximum interval and stats frequency, the twenty-ninth's of
direct memory in the score on unequal machines, the thirtieth's of geo-replication, the thirty-first's of
non-persistent topics on unequal machines)."""


def test_the_identical_machines_grid_runs_thirty_other_seeds_of_identical_clusters() -> None:
    grid = load_grid(PROBES / "identical-seeds-11-40.yaml")
    assert grid.seeds == tuple(range(11, 41))
    assert {ref.name for ref in grid.scenarios} >= {"load-jitter", "probe-identical-onboarding"}
    for ref in grid.scenarios:
        source = str(PROBES / f"{ref.name}.yaml") if ref.name.startswith("probe-") else ref.name
        assert not load_scenario(source).machines_differ, ref.name


def test_the_probe_grids_run_every_probe_against_all_four_pairs() -> None:
    # Every probe file is in exactly one grid (grid.yaml: the eight probes, the out-of-sample three of the
    # first round too; then the held-out rounds above), each loads as a scenario of its own name, and
    # every grid compares the four pairs of the capacity grid.
    grid = load_grid(PROBES / "grid.yaml")
    rounds = {name: load_grid(PROBES / name) for name in HELD_OUT_ROUNDS}
    assert len(grid.scenarios) == 8
    assert {name: {ref.name for ref in g.scenarios} for name, g in rounds.items()} == HELD_OUT_ROUNDS
    grids = [*grid.scenarios, *(ref for g in rounds.values() for ref in g.scenarios)]
    files = sorted(p.stem for p in PROBES.glob("probe-*.yaml"))
    assert sorted(ref.name for ref in grids) == files
    assert {"probe-five-classes", "probe-some-bookies", "probe-busy-strong-nic"} <= set(files)
    for name in files:
        assert load_scenario(str(PROBES / f"{name}.yaml")).name == name
    capacity = set(load_grid("capacity").strategies)
    assert all(set(g.strategies) == capacity for g in [grid, *rounds.values()])


# --- rule 1: bytes drive the NICs ---------------------------------------------------------------------------

NIC = 40960.0
"""A NIC limit of 40,960 units and one unit per byte/s: a byte/s is 100 / 40960 score points."""


def nic_cluster(bytes_reported: bool = True) -> ClusterSnapshot:
    """a: four small bundles (1024 msg/s of 1 B) and four large ones (64 msg/s of 128 B), 36,864 bytes/s on
    its NIC out (90 %); b: four small ones (10 %). Only bandwidth out has a limit. Without
    ``bytes_reported`` the brokers' reports carry no throughput."""
    small = bundle_data(rate_in=1024.0, tp_in=1024.0)
    large = bundle_data(rate_in=64.0, tp_in=8192.0)
    bundles = {f"t/a-ns{i}/0x00000000_0xffffffff": small if i < 4 else large for i in range(8)}
    bundles |= {f"t/b-ns{i}/0x00000000_0xffffffff": small for i in range(4)}
    brokers = {
        name: broker_data(
            bw_out=(tp, NIC),
            rate_in=rate,
            tp_in=tp if bytes_reported else 0.0,
            bundles=[b for b in bundles if b.startswith(f"t/{name}-")],
        )
        for name, rate, tp in (("a", 4352.0, 36864.0), ("b", 4096.0, 4096.0))
    }
    return snapshot(brokers, bundles)


def test_bytes_explain_a_nic_bound_score_that_messages_call_background() -> None:
    snap = nic_cluster()
    model = estimate_capacity(snap, CONF)
    assert model is not None and not model.traffic_is_msgs
    # One byte/s costs min(36864 / 36864, 4096 / 4096) = 1 unit: a's 90 points are all traffic.
    assert model.background.tolist() == [0.0, 0.0] and model.level == 50.0
    large = np.array([64.0, 8192.0, 8192.0])  # a bundle_load row: msg/s, bytes/s in, bytes/s in + out
    assert model.points(0, large) == 20.0 and model.points(0, np.array([1024.0, 1024.0, 1024.0])) == 2.5
    # By messages (no bytes reported), a's 4352 msg/s cost 100 * 4352 / 40960 = 10.6 points: 79.4 of its
    # 90 would be background no move can shed.
    without = estimate_capacity(nic_cluster(bytes_reported=False), CONF)
    assert without is not None and without.traffic_is_msgs
    assert without.background[0] == pytest.approx(90 - 100 * 4352 / NIC)


def test_a_resource_that_some_loaded_broker_has_no_bytes_of_follows_messages() -> None:
    # b's producers stopped while its consumers drain a backlog: bytes out, none in. Bandwidth in follows
    # messages (no cost per byte in can be estimated from b); bandwidth out and direct memory keep bytes.
    brokers = {
        "a": broker_data(bw_out=(2048.0, NIC), rate_in=1024.0, tp_in=1024.0, tp_out=1024.0),
        "b": broker_data(bw_out=(4096.0, NIC), rate_out=1024.0, tp_out=4096.0),
    }
    model = estimate_capacity(snapshot(brokers), CONF)
    assert model is not None and model.drivers == (MSGS, BYTES, MSGS, BYTES)


def test_a_nic_bound_broker_sheds_its_large_messages() -> None:
    # Gap 80: two high hits. Each large bundle is 20 points on either broker: two of them even the pair.
    result = run(CapacityAwareShedder(), nic_cluster(), CONF, 2)
    moved = [(u.bundle.split("/")[1], u.reason["mode"], u.reason["source_predicted"]) for u in result.unloads]
    assert [m[0] for m in moved] == ["a-ns4", "a-ns5"] and moved[-1][1:] == ("msgRate+throughput", 50.0)


def test_the_mean_bundle_load_is_the_mean_of_the_bundles_loads() -> None:
    snap = nic_cluster()
    every = bundle_load(snap, np.arange(snap.num_bundles))
    assert mean_bundle_load(snap) == pytest.approx(every.mean(axis=0))
    assert mean_bundle_load(snapshot({})).tolist() == [0.0, 0.0, 0.0]


def test_placement_by_headroom_counts_a_bundle_at_its_bytes() -> None:
    # b at 10: a large bundle (20 points on b's NIC, though only 64 msg/s) placed there predicts b at 30;
    # by messages it would have counted 64 msg/s (about 2.5 points at the cluster's mix), and the next
    # bundle would have gone to b again.
    snap = nic_cluster()
    shedder = CapacityAwareShedder()
    large = snap.bundle_names[snap.bundles_of(0)[-1]]
    assert shedder.select_broker(["a", "b"], large, snap, CONF).broker == "b"
    after = shedder.select_broker(["b"], "t/new/0x0_0x1", snap, CONF)
    assert after.reason["predicted_score"] == 30.0


# --- rule 3: overload relief --------------------------------------------------------------------------------


def test_an_overloaded_source_is_planned_again_though_the_plan_had_settled() -> None:
    snap = cluster({"a": (128, 128, FINE), "b": (64, 512, FINE[:128])})  # a at 100 %, unequal machines
    conf = conf_with(capacityAwareMinBenefit=100)
    shedder = CapacityAwareShedder()
    shedder.settled = 1e9  # a stopped plan that the imbalance has not grown past
    relief = run(shedder, snap, conf, 2)
    assert relief.unloads and {u.reason["rule"] for u in relief.unloads} == {OVERLOAD_RULE}
    # Not above the threshold: the settled plan holds.
    calm = CapacityAwareShedder()
    calm.settled = 1e9
    held = run(
        calm,
        snap,
        conf_with(capacityAwareMinBenefit=100, loadBalancerBrokerOverloadedThresholdPercentage=100),
        2,
    )
    assert not held.unloads and held.skipped[-1]["reason"].startswith("settled")
