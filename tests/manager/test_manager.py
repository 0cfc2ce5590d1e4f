"""The leader loop (spec §4): grace period, destination selection, affinity, preallocation, counters."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import ClassVar

import numpy as np
import pytest
from builders import MB, broker_data, bundle_data, snapshot

from shedlab.config import LoadBalancerConfig
from shedlab.manager import LoadManager, ManagerDecision
from shedlab.model.snapshot import ClusterSnapshot, IntArray
from shedlab.strategies import guard, make_placement, make_shedding, pair_config
from shedlab.strategies.base import Placement

MINUTE = 60_000
T0 = 1_700_000_000_000

B1, B2 = "2/2/0x00000000_0x80000000", "2/2/0x80000000_0xffffffff"


def overload_conf(**overrides: object) -> LoadBalancerConfig:
    conf = pair_config("OverloadShedder+LeastLongTermMessageRate")
    return conf.with_overrides(overrides) if overrides else conf


def load_shedding_snapshot(cpu: float) -> ClusterSnapshot:
    """ModularLoadManagerImplTest.testLoadShedding: broker-1 reports two bundles, broker-2 is idle."""
    return snapshot(
        {
            "broker-1:8080": broker_data(cpu=(cpu, 100.0), rate_in=300.0, bundles=[B1, B2]),
            "broker-2:8080": broker_data(cpu=(10.0, 100.0)),
        },
        {B1: bundle_data(rate_in=100.0, tp_in=1.0), B2: bundle_data(rate_in=200.0, tp_in=2.0)},
    )


class FixedPlacement:
    """A placement strategy that always answers ``answer`` (to isolate the manager's own rules)."""

    name: ClassVar[str] = "Fixed"

    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def select_broker(
        self,
        candidates: Sequence[str] | IntArray,
        bundle: str,
        snapshot: ClusterSnapshot,
        conf: LoadBalancerConfig,
    ) -> Placement:
        names = tuple(snapshot.broker_ids[i] for i in np.asarray(candidates).tolist())
        self.calls.append((bundle, names))
        return Placement(self.answer, (self.answer,) if self.answer else (), {"rule": "fixed"})

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        pass


# It stands in for Pulsar's strategies, whose answers the manager takes as they come: it answers outside
# the candidates on purpose (the owner, which the even-distribution filter removed) to reach the manager's
# own rules, which a user's strategy would hit as a StrategyError first (strategies/guard.py).
guard.register_builtin(FixedPlacement)


def test_no_unload_below_the_overload_threshold() -> None:
    manager = LoadManager(overload_conf(), seed=1)
    assert manager.do_load_shedding(load_shedding_snapshot(80.0), T0) == []
    assert (manager.unload_bundle_total, manager.unload_broker_total) == (0, 0)


def test_grace_period_and_counters_follow_pulsar() -> None:
    """testLoadShedding + testUnloadBundleMetric: one bundle per cycle, then both are in the grace period."""
    manager = LoadManager(overload_conf(), seed=1)
    snap = load_shedding_snapshot(90.0)
    first = manager.do_load_shedding(snap, T0)
    assert [(d.source, d.destination) for d in first] == [("broker-1:8080", "broker-2:8080")]
    assert (manager.unload_bundle_total, manager.unload_broker_total) == (1, 1)
    second = manager.do_load_shedding(snap, T0 + MINUTE)
    assert len(second) == 1 and second[0].bundle != first[0].bundle
    assert (manager.unload_bundle_total, manager.unload_broker_total) == (2, 2)
    assert manager.do_load_shedding(snap, T0 + 2 * MINUTE) == []
    assert (manager.unload_bundle_total, manager.unload_broker_total) == (2, 2)
    assert manager.recently_unloaded == {first[0].bundle: T0, second[0].bundle: T0 + MINUTE}
    # the entry of the first unload is dropped once it is older than the grace period (strictly)
    grace = 30 * MINUTE
    again = manager.do_load_shedding(snap, T0 + grace)
    assert again == []  # T0 is not < T0 + grace - grace
    again = manager.do_load_shedding(snap, T0 + grace + 1)
    assert [d.bundle for d in again] == [first[0].bundle]
    assert (
        first[0].bundle in manager.recently_unloaded
        and manager.recently_unloaded[first[0].bundle] == T0 + grace + 1
    )


def test_decision_carries_the_strategy_reason_and_the_placement() -> None:
    manager = LoadManager(overload_conf(), seed=1)
    (decision,) = manager.do_load_shedding(load_shedding_snapshot(90.0), T0)
    assert isinstance(decision, ManagerDecision)
    assert decision.time_ms == T0
    assert decision.reason["placement"]["choices"] == ["broker-2:8080"]
    assert decision.reason["placement"]["rule"] == "least long-term message rate"
    assert "strategy" in decision.reason


def test_destination_equal_to_source_is_skipped_and_not_counted() -> None:
    conf = overload_conf()
    manager = LoadManager(
        conf, shedding=make_shedding("OverloadShedder"), placement=FixedPlacement("broker-1:8080")
    )
    assert manager.do_load_shedding(load_shedding_snapshot(90.0), T0) == []
    assert (manager.unload_bundle_total, manager.unload_broker_total) == (0, 0)
    assert manager.recently_unloaded == {} and manager.affinity == {}
    assert manager.last_skipped[0]["reason"] == "destination is the current owner"


def test_no_destination_is_skipped_and_not_counted() -> None:
    manager = LoadManager(
        overload_conf(), shedding=make_shedding("OverloadShedder"), placement=FixedPlacement(None)
    )
    assert manager.do_load_shedding(load_shedding_snapshot(90.0), T0) == []
    assert (manager.unload_bundle_total, manager.unload_broker_total) == (0, 0)
    assert manager.last_skipped[0]["reason"] == "no destination broker"


def test_no_other_broker_for_the_policies_skips_before_placement() -> None:
    """§4.4 step 5b (shouldNamespacePoliciesUnload): the policy set of a bundle without isolation policies is
    the brokers that serve its (persistent) topics; without one besides the owner the leader skips the
    unload before it asks the placement strategy, whose state (LRUWW's history, AvgShedder's planned
    destinations) a call would move."""
    brokers = {
        "broker-1:8080": broker_data(cpu=(90.0, 100.0), rate_in=300.0, bundles=[B1, B2]),
        "broker-2:8080": broker_data(cpu=(10.0, 100.0)),
    }
    brokers["broker-2:8080"].localData.persistentTopicsEnabled = False
    snap = snapshot(
        brokers, {B1: bundle_data(rate_in=100.0, tp_in=1.0), B2: bundle_data(rate_in=200.0, tp_in=2.0)}
    )
    placement = FixedPlacement("broker-1:8080")
    manager = LoadManager(overload_conf(), shedding=make_shedding("OverloadShedder"), placement=placement)
    assert manager.do_load_shedding(snap, T0) == []
    assert placement.calls == []
    assert manager.last_skipped[0]["reason"] == "no other broker for the namespace's policies"


def test_no_shedding_with_one_broker_or_when_disabled() -> None:
    one = snapshot(
        {"broker-1:8080": broker_data(cpu=(99.0, 100.0), bundles=[B1, B2])},
        {B1: bundle_data(), B2: bundle_data()},
    )
    assert LoadManager(overload_conf(), seed=1).do_load_shedding(one, T0) == []
    off = LoadManager(overload_conf(loadBalancerSheddingEnabled=False), seed=1)
    assert off.do_load_shedding(load_shedding_snapshot(95.0), T0) == []


def test_affinity_is_one_shot() -> None:
    manager = LoadManager(overload_conf(), seed=1)
    snap = load_shedding_snapshot(90.0)
    (decision,) = manager.do_load_shedding(snap, T0)
    answer = manager.lookup(decision.bundle, snap, T0 + 5_000)
    assert (answer.broker, answer.path) == ("broker-2:8080", "affinity")
    assert decision.bundle not in manager.affinity
    again = manager.lookup(decision.bundle, snap, T0 + 6_000)
    assert again.path == "placement"


def test_preallocation_pins_lookups_until_the_next_report() -> None:
    manager = LoadManager(overload_conf(), seed=3)
    snap = snapshot(
        {"a:8080": broker_data(long_rate_in=100.0), "b:8080": broker_data(long_rate_in=100.0)},
        {},
    )
    first = manager.lookup("t/ns/0x00000000_0xffffffff", snap, T0)
    assert first.path == "placement"
    repeat = manager.lookup("t/ns/0x00000000_0xffffffff", snap, T0)
    assert (repeat.broker, repeat.path) == (first.broker, "preallocated")
    manager.on_bundle_data_update(snap)
    assert manager.preallocated_bundle_to_broker == {}
    assert manager.preallocated == {}  # not owned by the leader: dropped at once
    assert manager.lookup("t/ns/0x00000000_0xffffffff", snap, T0).path == "placement"


def test_preallocation_feeds_least_long_term_message_rate() -> None:
    """PIP-364's example: brokers at 100 and 110 msg/s, two 20 msg/s bundles go to different brokers."""
    bundles = {
        "t/ns/0x00000000_0x80000000": bundle_data(rate_in=10.0, rate_out=10.0),
        "t/ns/0x80000000_0xffffffff": bundle_data(rate_in=10.0, rate_out=10.0),
    }
    snap = snapshot(
        {"b1:8080": broker_data(long_rate_in=100.0), "b2:8080": broker_data(long_rate_in=110.0)}, bundles
    )
    conf = overload_conf(loadBalancerDistributeBundlesEvenlyEnabled=False)
    manager = LoadManager(conf, seed=1)
    first = manager.assign("t/ns/0x00000000_0x80000000", snap, T0)
    second = manager.assign("t/ns/0x80000000_0xffffffff", snap, T0)
    assert (first, second) == ("b1:8080", "b2:8080")
    assert manager.preallocated["b1:8080"]["t/ns/0x00000000_0x80000000"].long_term_msg_rate == 20.0


def test_preallocation_of_the_leaders_own_bundle_lives_until_reported() -> None:
    bundle = "t/ns/0x00000000_0xffffffff"
    manager = LoadManager(overload_conf(), seed=1)
    empty = snapshot({"leader:8080": broker_data(), "other:8080": broker_data(long_rate_in=1e6)}, {})
    assert manager.assign(bundle, empty, T0) == "leader:8080"
    manager.on_bundle_data_update(empty, leader_owned={bundle})
    assert manager.preallocated_bundle_to_broker == {}
    assert bundle in manager.preallocated["leader:8080"]
    reported = snapshot(
        {"leader:8080": broker_data(bundles=[bundle]), "other:8080": broker_data()}, {bundle: bundle_data()}
    )
    manager.on_bundle_data_update(reported, leader_owned={bundle})
    assert manager.preallocated == {}


def test_preallocations_of_dead_brokers_are_reaped() -> None:
    manager = LoadManager(overload_conf(), seed=2)
    snap = snapshot({"a:8080": broker_data(), "b:8080": broker_data(long_rate_in=1e9)}, {})
    assert manager.assign("t/ns/0x00000000_0xffffffff", snap, T0) == "a:8080"
    manager.on_active_brokers_change({"b:8080"})
    assert manager.preallocated == {} and manager.preallocated_bundle_to_broker == {}


def test_max_topics_filter_counts_preallocated_topics() -> None:
    """testMaxTopicDistributionToBroker: a broker over loadBalancerBrokerMaxTopics is not chosen again."""
    heavy = "t/ns/0x00000000_0x10000000"
    bundles = {heavy: bundle_data(topics=50_010)}
    names = [f"t/ns/0x{i:08x}_0x{i + 1:08x}" for i in range(0x10000000, 0x10000000 + 49)]
    snap = snapshot({f"b{i}:8080": broker_data() for i in range(3)}, bundles)
    conf = overload_conf(loadBalancerDistributeBundlesEvenlyEnabled=False)
    manager = LoadManager(conf, seed=5)
    target = manager.assign(heavy, snap, T0)
    assert target is not None
    chosen = {manager.assign(n, snap, T0) for n in names}
    assert target not in chosen


def test_even_distribution_keeps_brokers_with_fewest_ranges_of_the_namespace() -> None:
    """LoadManagerSharedTest facts, through selectBroker: reported plus preallocated ranges count."""
    ns_bundle = "tenant1/ns1/0x00000000_0x40000000"
    other = "tenant1/ns1/0x40000000_0x80000000"
    placement = FixedPlacement("broker1:8080")
    manager = LoadManager(overload_conf(), shedding=make_shedding("OverloadShedder"), placement=placement)
    snap = snapshot(
        {
            "broker1:8080": broker_data(bundles=[other]),
            "broker2:8080": broker_data(),
            "broker3:8080": broker_data(),
        },
        {other: bundle_data()},
    )
    manager.select_broker(ns_bundle, snap, T0)
    assert placement.calls[-1][1] == ("broker2:8080", "broker3:8080")
    off = LoadManager(
        overload_conf(loadBalancerDistributeBundlesEvenlyEnabled=False),
        shedding=make_shedding("OverloadShedder"),
        placement=placement,
    )
    off.select_broker(ns_bundle, snap, T0)
    # mypy keeps the narrowing of calls[-1][1] from the first assert across select_broker's append
    assert placement.calls[-1][1] == ("broker1:8080", "broker2:8080", "broker3:8080")  # type: ignore[comparison-overlap]


def test_overload_recheck_asks_again_over_every_broker() -> None:
    """A chosen broker above the overload threshold triggers a second selection over all brokers."""
    placement = FixedPlacement("hot:8080")
    manager = LoadManager(
        overload_conf(loadBalancerDistributeBundlesEvenlyEnabled=False),
        shedding=make_shedding("OverloadShedder"),
        placement=placement,
    )
    snap = snapshot(
        {"hot:8080": broker_data(cpu=(95.0, 100.0)), "cold:8080": broker_data(cpu=(5.0, 100.0))}, {}
    )
    placed = manager.select_broker("t/ns/0x00000000_0xffffffff", snap, T0)
    assert placed.broker == "hot:8080"
    assert len(placement.calls) == 2


def test_shedding_excluded_namespace_is_not_unloaded() -> None:
    conf = overload_conf(loadBalancerSheddingExcludedNamespaces="2/2")
    manager = LoadManager(conf, seed=1)
    assert manager.do_load_shedding(load_shedding_snapshot(90.0), T0) == []
    assert manager.last_skipped and manager.last_skipped[0]["reason"] == "namespace excluded from shedding"


def test_manager_does_not_mutate_the_callers_snapshot() -> None:
    snap = load_shedding_snapshot(90.0)
    before = snap.bundle_recently_unloaded.copy()
    manager = LoadManager(overload_conf(), seed=1)
    manager.do_load_shedding(snap, T0)
    manager.do_load_shedding(snap, T0 + MINUTE)
    assert np.array_equal(snap.bundle_recently_unloaded, before)
    assert not snap.preallocated_long_term_msg_rate.any()


def test_avg_shedder_destination_comes_from_its_pairing() -> None:
    """AvgShedder shedding and placement are one object; the manager's destination is the paired broker."""
    conf = pair_config("AvgShedder").with_overrides(
        {"loadBalancerAvgShedderHitCountHighThreshold": 1, "maxUnloadPercentage": 0.5}
    )
    bundles = {
        f"t/ns{i}/0x00000000_0xffffffff": bundle_data(rate_in=4000.0, rate_out=4000.0, num_samples=i + 1)
        for i in range(4)
    }
    snap = snapshot(
        {
            "hot:8080": broker_data(
                cpu=(90.0, 100.0), rate_in=16000.0, rate_out=16000.0, bundles=list(bundles)
            ),
            "mid:8080": broker_data(cpu=(50.0, 100.0)),
            "cold:8080": broker_data(cpu=(10.0, 100.0)),
        },
        bundles,
    )
    manager = LoadManager(conf, seed=1)
    assert manager.shedding is manager.placement  # type: ignore[comparison-overlap]  # AvgShedder plays both roles
    decisions = manager.do_load_shedding(snap, T0)
    assert decisions and {d.destination for d in decisions} == {"cold:8080"}
    assert all(d.reason["placement"]["rule"] == "planned destination" for d in decisions)


@pytest.mark.parametrize(
    "pair", ["ThresholdShedder+LeastResourceUsageWithWeight", "UniformLoadShedder+LeastLongTermMessageRate"]
)
def test_default_strategies_come_from_the_configured_pair(pair: str) -> None:
    manager = LoadManager(pair_config(pair), seed=0)
    shed, place = pair.split("+")
    assert manager.shedding.name == shed and manager.placement.name == place
    assert isinstance(make_placement(place), type(manager.placement))


def test_throughput_constants_are_pulsar_mb() -> None:
    assert MB == 1024 * 1024
