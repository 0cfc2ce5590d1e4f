"""The leader loop's edge cases found by mutation testing (docs/mutation-testing.md): preallocation
accounting, the even-distribution filter with preallocations, lookups' answers, the round-robin
selector of spec §3.4, and how strategies are told about the cluster."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import ClassVar

import numpy as np
from builders import broker_data, bundle_data, snapshot

from shedlab.config import LoadBalancerConfig
from shedlab.manager import LoadManager
from shedlab.manager.loop import _RoundRobin
from shedlab.model.snapshot import ClusterSnapshot, IntArray
from shedlab.strategies import (
    AvgShedder,
    LeastResourceUsageWithWeight,
    ThresholdShedder,
    guard,
    make_shedding,
    pair_config,
)
from shedlab.strategies.base import Placement, SheddingResult, Skip, SkipKind, Unload

T0 = 1_700_000_000_000


def conf(pair: str = "OverloadShedder+LeastLongTermMessageRate", **overrides: object) -> LoadBalancerConfig:
    return pair_config(pair).with_overrides(
        {"loadBalancerDistributeBundlesEvenlyEnabled": False, **overrides}
    )


def brokers(rates: dict[str, float], cpu: float = 10.0) -> ClusterSnapshot:
    return snapshot({b: broker_data(cpu=(cpu, 100.0), long_rate_in=r) for b, r in rates.items()})


class Scripted:
    """A placement strategy answering from a script, recording what it was asked."""

    name: ClassVar[str] = "Scripted"

    def __init__(self, answers: list[str | None]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[str, tuple[str, ...], int | None]] = []

    def select_broker(
        self,
        candidates: Sequence[str] | IntArray,
        bundle: str,
        snap: ClusterSnapshot,
        conf: LoadBalancerConfig,
    ) -> Placement:
        names = tuple(snap.broker_ids[i] for i in np.asarray(candidates).tolist())
        self.calls.append((bundle, names, snap.now_ms))
        answer = self.answers.pop(0)
        return Placement(answer, (answer,) if answer else (), {"strategy": "Scripted", "rule": "script"})

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        pass


class Recorder:
    """A shedding strategy that unloads a fixed list and records the snapshot time it was given."""

    name: ClassVar[str] = "Recorder"

    def __init__(self, unloads: list[tuple[str, str]]) -> None:
        self.unloads = unloads
        self.seen: list[int | None] = []

    def find_bundles_for_unloading(self, snap: ClusterSnapshot, conf: LoadBalancerConfig) -> SheddingResult:
        self.seen.append(snap.now_ms)
        return SheddingResult([Unload(b, n, {"strategy": "Recorder"}) for b, n in self.unloads])

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        pass


class TestPreallocation:
    def test_unknown_bundles_preallocate_pulsars_default_bundle_data(self) -> None:
        manager = LoadManager(conf(), seed=0)
        answer = manager.lookup("t/ns/0x00000000_0x00000001", brokers({"a": 150.0, "b": 0.0}), T0)
        assert (answer.bundle, answer.broker, answer.path) == ("t/ns/0x00000000_0x00000001", "b", "placement")
        entry = manager.preallocated["b"]["t/ns/0x00000000_0x00000001"]
        assert (entry.long_term_msg_rate, entry.topics) == (100.0, 0)  # 50 + 50 msg/s, no topics

    def test_preallocated_rates_add_up_for_the_next_lookups(self) -> None:
        # a reports 200.5 msg/s, b 0. Each unknown bundle adds 100 to its broker's score:
        # b (0) → b (100) → b (200 < 200.5) → a (200.5 < 300).
        for fresh_snapshots in (False, True):
            manager = LoadManager(conf(), seed=0)
            snap = brokers({"a": 200.5, "b": 0.0})
            got = []
            for k in range(4):
                if fresh_snapshots:
                    snap = brokers({"a": 200.5, "b": 0.0})  # the leader's view rebuilt from its own state
                got.append(manager.assign(f"t/ns/0x0000000{k}_0x0000000{k + 1}", snap, T0))
            assert got == ["b", "b", "b", "a"]
            assert {b: len(v) for b, v in manager.preallocated.items()} == {"a": 1, "b": 3}

    def test_a_preallocation_answers_the_next_lookup_only_while_its_broker_is_alive(self) -> None:
        manager = LoadManager(conf(), seed=0)
        bundle = "t/ns/0x00000000_0x00000001"
        assert manager.assign(bundle, brokers({"a": 150.0, "b": 0.0}), T0) == "b"
        again = manager.lookup(bundle, brokers({"a": 150.0, "b": 0.0}), T0)
        assert (again.bundle, again.broker, again.path) == (bundle, "b", "preallocated")
        without_b = manager.lookup(bundle, brokers({"a": 150.0, "c": 500.0}), T0)
        assert (without_b.broker, without_b.path) == ("a", "placement")

    def test_even_distribution_counts_preallocated_ranges(self) -> None:
        # AvgShedder places at random (no preallocation awareness), so only the filter evens things out
        manager = LoadManager(conf("AvgShedder", loadBalancerDistributeBundlesEvenlyEnabled=True), seed=3)
        snap = brokers({"a": 0.0, "b": 0.0, "c": 0.0})

        def assign(k: int) -> str:
            broker = manager.assign(f"t/ns/0x000000{k:02x}_0x000000{k + 1:02x}", snap, T0)
            assert broker is not None  # three brokers are available
            return broker

        got = [assign(k) for k in range(12)]
        counts = {b: got.count(b) for b in "abc"}
        assert counts == {"a": 4, "b": 4, "c": 4}
        # every block of three lookups covers the three brokers once
        assert all(sorted(got[i : i + 3]) == ["a", "b", "c"] for i in range(0, 12, 3))

    def test_leader_owned_preallocations_survive_a_report_until_reported(self) -> None:
        manager = LoadManager(conf(), seed=0)
        snap = brokers({"a": 150.0, "b": 0.0})
        first, second = "t/ns/0x00000000_0x00000001", "t/ns/0x00000001_0x00000002"
        manager.assign(first, snap, T0)
        manager.assign(second, snap, T0)
        manager.on_bundle_data_update(snap, leader_owned=[second])
        assert list(manager.preallocated["b"]) == [second]
        assert manager.preallocated["b"][second].long_term_msg_rate == 100.0
        assert manager.preallocated_bundle_to_broker == {}
        # the kept preallocation still counts: b scores 100 < a's 150
        snap = brokers({"a": 150.0, "b": 0.0})
        # a new lookup of the kept bundle replaces its preallocation (counted once, not twice) …
        assert manager.lookup(second, snap, T0).path == "placement"
        assert manager.preallocated["b"][second].long_term_msg_rate == 100.0
        # … so b still scores 100 < 150, then 200 > 150
        assert manager.assign("t/ns/0x00000002_0x00000003", snap, T0) == "b"
        assert manager.assign("t/ns/0x00000003_0x00000004", snap, T0) == "a"


class TestLookups:
    def test_no_broker_no_answer(self) -> None:
        answer = LoadManager(conf(), seed=0).lookup("t/ns/0x0_0x1", snapshot({}), T0)
        assert (answer.bundle, answer.broker, answer.path) == ("t/ns/0x0_0x1", None, "none")
        assert answer.placement is not None and answer.placement.broker is None

    def test_affinity_to_a_dead_broker_is_ignored(self) -> None:
        hot = snapshot(
            {"h": broker_data(cpu=(95.0, 100.0), tp_in=3.0, bundles=["t/ns/0x0_0x1", "t/ns/0x1_0x2"]),
             "c": broker_data(cpu=(10.0, 100.0))},
            {"t/ns/0x0_0x1": bundle_data(tp_in=1.0), "t/ns/0x1_0x2": bundle_data(tp_in=2.0)},
        )  # fmt: skip
        manager = LoadManager(conf(), seed=0)
        (decision,) = manager.do_load_shedding(hot, T0)
        assert decision.destination == "c"
        answer = manager.lookup(decision.bundle, brokers({"h": 0.0, "d": 10.0}), T0)
        assert answer.path == "placement" and answer.broker == "h"
        assert decision.bundle not in manager.affinity  # popped even so

    def test_affinity_answers_with_the_bundle(self) -> None:
        manager = LoadManager(conf(), shedding=Recorder([("a", "t/ns/0x0_0x1")]), placement=Scripted(["b"]))
        snap = snapshot(
            {"a": broker_data(bundles=["t/ns/0x0_0x1"]), "b": broker_data()}, {"t/ns/0x0_0x1": bundle_data()}
        )
        manager.do_load_shedding(snap, T0)
        answer = manager.lookup("t/ns/0x0_0x1", snap, T0)
        assert (answer.bundle, answer.broker, answer.path, answer.placement) == (
            "t/ns/0x0_0x1",
            "b",
            "affinity",
            None,
        )

    def test_strategies_see_the_time_of_the_call(self) -> None:
        shed = Recorder([("a", "t/ns/0x0_0x1")])
        place = Scripted(["b", "b", "b"])
        manager = LoadManager(conf(), shedding=shed, placement=place)
        snap = snapshot(
            {"a": broker_data(bundles=["t/ns/0x0_0x1"]), "b": broker_data()}, {"t/ns/0x0_0x1": bundle_data()}
        )
        manager.do_load_shedding(snap, T0 + 5)
        # (a lookup on the *same* snapshot object reuses the cycle's view, time included; the leader
        # passes a new snapshot whenever its data changes)
        manager.assign("t/ns/0x1_0x2", snapshot({"a": broker_data(), "b": broker_data()}), T0 + 6)
        manager.select_broker("t/ns/0x2_0x3", snapshot({"a": broker_data(), "b": broker_data()}), T0 + 7)
        assert shed.seen == [T0 + 5]
        assert [c[2] for c in place.calls] == [T0 + 5, T0 + 6, T0 + 7]


class TestSheddingCycle:
    def snap(self) -> ClusterSnapshot:
        names = ["x/ex/0x0_0x1", "t/ns/0x0_0x1", "t/ns/0x1_0x2"]
        return snapshot(
            {"a": broker_data(bundles=names), "b": broker_data(), "c": broker_data()},
            {n: bundle_data() for n in names},
        )

    def test_skips_do_not_stop_the_other_unloads_of_the_broker(self) -> None:
        unloads = [("a", "x/ex/0x0_0x1"), ("a", "t/ns/0x0_0x1"), ("a", "t/ns/0x1_0x2")]
        place = Scripted(["a", "b"])  # the first placement answers the owner itself
        manager = LoadManager(
            conf(loadBalancerSheddingExcludedNamespaces="x/ex"), shedding=Recorder(unloads), placement=place
        )
        decisions = manager.do_load_shedding(self.snap(), T0)
        assert [(d.bundle, d.destination) for d in decisions] == [("t/ns/0x1_0x2", "b")]
        excluded, owner = manager.last_skipped
        assert excluded == {
            "broker": "a",
            "bundle": "x/ex/0x0_0x1",
            "reason": "namespace excluded from shedding",
        }
        assert {k: owner[k] for k in ("broker", "bundle", "reason")} == {
            "broker": "a",
            "bundle": "t/ns/0x0_0x1",
            "reason": "destination is the current owner",
        }
        assert owner["placement"]["candidates"] == 3 and owner["placement"]["strategy"] == "Scripted"
        assert decisions[0].reason["placement"] == {
            "candidates": 3, "rule": "script", "strategy": "Scripted", "choices": ["b"],
        }  # fmt: skip
        assert manager.last_result is not None and len(manager.last_result.unloads) == 3
        assert (manager.unload_bundle_total, manager.unload_broker_total) == (1, 1)

    def test_no_destination_does_not_stop_the_others(self) -> None:
        unloads = [("a", "t/ns/0x0_0x1"), ("a", "t/ns/0x1_0x2")]
        manager = LoadManager(conf(), shedding=Recorder(unloads), placement=Scripted([None, "c"]))
        decisions = manager.do_load_shedding(self.snap(), T0)
        assert [(d.bundle, d.destination) for d in decisions] == [("t/ns/0x1_0x2", "c")]
        assert manager.last_skipped[0]["reason"] == "no destination broker"

    def test_a_single_broker_is_not_even_asked(self) -> None:
        shed = Recorder([])
        manager = LoadManager(conf(), shedding=shed, placement=Scripted([]))
        assert manager.last_result is None and manager.last_skipped == []
        assert manager.do_load_shedding(snapshot({"a": broker_data()}), T0) == []
        assert shed.seen == [] and manager.last_result is None

    def test_the_overload_recheck_uses_the_second_answer(self) -> None:
        snap = snapshot(
            {
                "a": broker_data(bundles=["t/ns/0x0_0x1"]),
                "hot": broker_data(cpu=(90.0, 100.0)),
                "b": broker_data(),
            },
            {"t/ns/0x0_0x1": bundle_data()},
        )
        place = Scripted(["hot", "b"])
        manager = LoadManager(conf(), shedding=Recorder([("a", "t/ns/0x0_0x1")]), placement=place)
        (decision,) = manager.do_load_shedding(snap, T0)
        assert decision.destination == "b"
        assert decision.reason["placement"]["overload_recheck"] == {"broker": "hot", "usage": 0.9}
        assert [c[0] for c in place.calls] == ["t/ns/0x0_0x1", "t/ns/0x0_0x1"]  # the same bundle both times


class TestConstruction:
    def test_one_strategy_given_the_other_from_the_configured_pair(self) -> None:
        shed = make_shedding("OverloadShedder", 0)
        manager = LoadManager(conf("OverloadShedder+LeastResourceUsageWithWeight"), shedding=shed)
        assert manager.shedding is shed
        assert isinstance(manager.placement, LeastResourceUsageWithWeight)
        place = Scripted([])
        manager = LoadManager(conf("ThresholdShedder+LeastResourceUsageWithWeight"), placement=place)
        assert manager.placement is place and manager.shedding.name == "ThresholdShedder"

    def test_broker_changes_reach_a_separate_placement_strategy(self) -> None:
        manager = LoadManager(conf("ThresholdShedder+LeastResourceUsageWithWeight"), seed=0)
        snap = snapshot(
            {b: broker_data(cpu=(10.0, 100.0), rate_in=1, bundles=[f"{b}/ns/0x0_0x1"]) for b in "ab"}
        )
        manager.assign("t/ns/0x0_0x1", snap, T0)
        placement = manager.placement
        assert isinstance(placement, LeastResourceUsageWithWeight)
        assert set(placement.history) == {"a", "b"}
        manager.on_active_brokers_change(["a"])
        assert set(placement.history) == {"a"}


class TestRoundRobinSpec:
    """Spec §3.4 / §7 testRoundRobinBrokerSelector, on the selector itself."""

    def test_the_spec_sequence(self) -> None:
        rr = _RoundRobin()
        assert rr.select([]) is None
        assert [rr.select(["1", "2", "3"]) for _ in range(10)] == ["1", "2", "3"] * 3 + ["1"]
        # the same brokers in another order: still by the cached order, continuing the count
        assert [rr.select(["2", "3", "1"]) for _ in range(10)] == ["2", "3", "1"] * 3 + ["2"]
        assert [rr.select(["1", "2", "4"]) for _ in range(6)] == ["4", "1", "2", "4", "1", "2"]
        assert [rr.select(["2", "4"]) for _ in range(4)] == ["2", "4", "2", "4"]
        # more candidates than cached: rebuilt (count 30 → index 0)
        assert rr.select(["1", "2", "3"]) == "1"

    def test_single_candidate(self) -> None:
        assert [_RoundRobin().select(["only"]) for _ in range(2)] == ["only", "only"]

    def test_the_count_wraps_at_integer_max(self) -> None:
        rr = _RoundRobin()
        rr.count = 2147483647
        assert rr.select(["1", "2", "3"]) == "2"  # 2147483647 mod 3 = 1
        assert rr.count == 0
        assert rr.select(["1", "2", "3"]) == "1"


class TestMaxTopics:
    def test_preallocated_topics_count_against_the_limit_inclusively(self) -> None:
        # limit 5 topics. a is preferred (long-term rate 0 < 1000) until its reported + preallocated topics
        # exceed 5: X (5 topics) → a (5 ≤ 5), Y (1) → a (checked before: 5 ≤ 5), Z (1) → b (6 > 5).
        data = {
            n: bundle_data(topics=t)
            for n, t in (("t/ns/0x0_0x1", 5), ("t/ns/0x1_0x2", 1), ("t/ns/0x2_0x3", 1))
        }
        for fresh_snapshots in (False, True):
            manager = LoadManager(conf(loadBalancerBrokerMaxTopics=5), seed=0)
            snap = snapshot({"a": broker_data(long_rate_in=0.0), "b": broker_data(long_rate_in=1000.0)}, data)
            got = []
            for bundle in data:
                if fresh_snapshots:
                    snap = snapshot(
                        {"a": broker_data(long_rate_in=0.0), "b": broker_data(long_rate_in=1000.0)}, data
                    )
                got.append(manager.assign(bundle, snap, T0))
            assert got == ["a", "a", "b"]
            assert manager.preallocated["a"]["t/ns/0x0_0x1"].topics == 5


class Watcher(Scripted):
    """A scripted placement that also records the leader's preallocations the snapshot shows it."""

    def __init__(self, answers: list[str | None]) -> None:
        super().__init__(answers)
        self.prealloc: list[dict[str, tuple[float, int]]] = []

    def select_broker(
        self,
        candidates: Sequence[str] | IntArray,
        bundle: str,
        snap: ClusterSnapshot,
        conf: LoadBalancerConfig,
    ) -> Placement:
        rates, topics = snap.preallocated_long_term_msg_rate, snap.preallocated_topics
        self.prealloc.append({b: (float(rates[i]), int(topics[i])) for i, b in enumerate(snap.broker_ids)})
        return super().select_broker(candidates, bundle, snap, conf)


# The doubles stand in for Pulsar's strategies, whose answers the manager takes as they come: scripts
# answer outside the candidates on purpose to reach the manager's own rules (a user's strategy would hit
# a StrategyError first, strategies/guard.py).
for _double in (Scripted, Recorder, Watcher):
    guard.register_builtin(_double)


class TestPreallocationBookkeeping:
    """What the leader's preallocations add to the counts and sums the filters and strategies read."""

    def test_even_distribution_counts_a_reported_preallocation_once_and_skips_dead_brokers(self) -> None:
        # Pins the even-distribution count (Pulsar's brokerToNamespaceToBundleRange holds each range once):
        # a preallocation its broker already reports is not counted again, one of a broker missing from
        # the snapshot is skipped without ending the count, each other one counts 1.
        place = Scripted(["c", "a", "b", "a"])
        manager = LoadManager(conf(loadBalancerDistributeBundlesEvenlyEnabled=True), placement=place)
        dead, x, w, v, u, z = (f"t/ns/0x{k}_0x{k + 1}" for k in range(6))
        empty = snapshot({"c": broker_data(), "a": broker_data(), "b": broker_data()})
        for bundle in (dead, x, w):  # preallocated in this order: dead → c, x → a, w → b
            manager.assign(bundle, empty, T0)
        # c is gone; a now reports x (and v), b reports u; w is still only preallocated to b.
        later = snapshot(
            {"a": broker_data(bundles=[x, v]), "b": broker_data(bundles=[u])},
            {n: bundle_data() for n in (x, v, u)},
        )
        assert manager.assign(z, later, T0) == "a"
        # counts in t/ns: a = 2 reported (x counted once), b = 1 reported + 1 preallocated = 2: a tie
        assert place.calls[-1][1] == ("a", "b")

    def test_preallocations_kept_by_a_report_still_count_for_even_distribution(self) -> None:
        # Pins the namespace index rebuilt by on_bundle_data_update: a leader-owned preallocation that
        # survives the report is still one range of its namespace on its broker.
        place = Scripted(["a", "a"])
        manager = LoadManager(conf(loadBalancerDistributeBundlesEvenlyEnabled=True), placement=place)
        snap = snapshot({"a": broker_data(), "b": broker_data()})
        kept = "t/ns/0x0_0x1"
        manager.assign(kept, snap, T0)
        manager.on_bundle_data_update(snap, leader_owned={kept})
        assert list(manager.preallocated["a"]) == [kept]
        manager.assign("t/ns/0x1_0x2", snapshot({"a": broker_data(), "b": broker_data()}), T0)
        assert place.calls[-1][1] == ("b",)  # a holds one range of t/ns, b none

    def test_a_repeated_preallocation_replaces_its_topics(self) -> None:
        # Pins the replacement of a re-preallocated bundle's topics (not added twice, not set to the old
        # value): with loadBalancerBrokerMaxTopics 5 and 5 preallocated topics, a stays a candidate.
        data = {"t/ns/0x0_0x1": bundle_data(topics=5)}
        manager = LoadManager(conf(loadBalancerBrokerMaxTopics=5), seed=0)

        def snap() -> ClusterSnapshot:
            return snapshot({"a": broker_data(long_rate_in=0.0), "b": broker_data(long_rate_in=1000.0)}, data)

        first = snap()
        assert manager.assign("t/ns/0x0_0x1", first, T0) == "a"
        manager.on_bundle_data_update(first, leader_owned={"t/ns/0x0_0x1"})  # kept: a does not report it
        again = snap()
        assert manager.lookup("t/ns/0x0_0x1", again, T0).path == "placement"
        assert manager.preallocated["a"]["t/ns/0x0_0x1"].topics == 5
        # a: 0 reported + 5 preallocated topics ≤ 5 → still a candidate, and the cheapest (0 < 1000 msg/s)
        assert manager.assign("t/ns/0x1_0x2", again, T0) == "a"

    def test_strategies_see_the_preallocated_rates_and_topics_of_live_brokers(self) -> None:
        # Pins the snapshot given to the placement strategy: preallocatedBundleData summed per broker (rate
        # and topics), a preallocation of a broker missing from the snapshot skipped, the others kept.
        place = Watcher(["c", "a", "a", "b"])
        manager = LoadManager(conf(), placement=place)
        data = {"t/ns/0x1_0x2": bundle_data(rate_in=30.0, rate_out=12.0, topics=3)}
        three = snapshot({"c": broker_data(), "a": broker_data(), "b": broker_data()}, data)
        manager.assign("t/ns/0x0_0x1", three, T0)  # c: Pulsar's default 100 msg/s, 0 topics
        manager.assign("t/ns/0x1_0x2", three, T0)  # a: 42 msg/s, 3 topics
        manager.assign("t/ns/0x2_0x3", three, T0)  # a: + 100 msg/s, 0 topics
        assert place.prealloc[-1] == {"c": (100.0, 0), "a": (42.0, 3), "b": (0.0, 0)}
        manager.assign("t/ns/0x3_0x4", snapshot({"a": broker_data(), "b": broker_data()}, data), T0)
        assert place.prealloc[-1] == {"a": (142.0, 3), "b": (0.0, 0)}


class TestSkipLogAndSeeding:
    """The leader's skip log (one entry per decision not taken, with its kind and broker), lookups
    restricted to candidates, and the state a leader starts with."""

    def test_a_cycle_logs_excluded_namespaces_and_owner_destinations(self) -> None:
        unloads = [("a", "x/ex/0x0_0x1"), ("a", "t/ns/0x0_0x1"), ("a", "t/ns/0x1_0x2")]
        manager = LoadManager(
            conf(loadBalancerSheddingExcludedNamespaces="x/ex"),
            shedding=Recorder(unloads),
            placement=Scripted(["a", "b"]),
        )
        manager.do_load_shedding(TestSheddingCycle().snap(), T0)
        assert manager.skip_log == [
            Skip(SkipKind.EXCLUDED_NAMESPACE, "a"),
            Skip(SkipKind.DESTINATION_IS_OWNER, "a"),
        ]

    def test_a_cycle_logs_no_destination(self) -> None:
        unloads = [("a", "t/ns/0x0_0x1"), ("a", "t/ns/0x1_0x2")]
        manager = LoadManager(conf(), shedding=Recorder(unloads), placement=Scripted([None, "c"]))
        manager.do_load_shedding(TestSheddingCycle().snap(), T0)
        assert manager.skip_log == [Skip(SkipKind.NO_DESTINATION, "a")]

    def test_a_placement_skip_is_logged_with_the_broker_it_landed_on(self) -> None:
        class Fallback(Scripted):
            def select_broker(
                self,
                candidates: Sequence[str] | IntArray,
                bundle: str,
                snap: ClusterSnapshot,
                conf: LoadBalancerConfig,
            ) -> Placement:
                return Placement("b", ("a", "b"), {}, skip=SkipKind.RANDOM_FALLBACK)

        manager = LoadManager(conf(), placement=Fallback([]))
        assert manager.assign("t/ns/0x0_0x1", brokers({"a": 0.0, "b": 0.0}), T0) == "b"
        assert manager.skip_log == [Skip(SkipKind.RANDOM_FALLBACK, "b")]

    def test_a_lookup_restricted_to_candidates_offers_only_those_alive(self) -> None:
        place = Scripted(["c"])
        manager = LoadManager(conf(), placement=place)
        answer = manager.lookup(
            "t/ns/0x0_0x1", brokers({"a": 0.0, "b": 0.0, "c": 0.0}), T0, candidates=["c", "zzz", "a"]
        )
        assert answer.broker == "c" and place.calls[-1][1] == ("a", "c")

    def test_seeded_histories_reach_both_strategies_and_unloads_wait_their_grace(self) -> None:
        manager = LoadManager(conf("ThresholdShedder+LeastResourceUsageWithWeight"), seed=0)
        manager.seed_state(recently_unloaded={"t/ns/0x0_0x1": T0})  # no history given: none seeded
        manager.seed_state(usage_history={"a": 0.5})
        shedding, placement = manager.shedding, manager.placement
        assert isinstance(shedding, ThresholdShedder) and isinstance(placement, LeastResourceUsageWithWeight)
        assert shedding.history == {"a": 0.5} and placement.history == {"a": 0.5}
        assert manager.recently_unloaded == {"t/ns/0x0_0x1": T0}
        assert manager.assign("t/ns/0x1_0x2", brokers({"a": 0.0}), T0) == "a"  # the view is rebuilt

    def test_seeded_hit_counts_reach_avg_shedder(self) -> None:
        manager = LoadManager(conf("AvgShedder"), seed=0)
        manager.seed_state(usage_history={"a": 0.5})  # AvgShedder keeps no history: nothing to seed
        manager.seed_state(hit_counts={"a": (2, 1)})
        shedding = manager.shedding
        assert isinstance(shedding, AvgShedder)
        assert (shedding.hit_high, shedding.hit_low) == ({"a": 2}, {"a": 1})
