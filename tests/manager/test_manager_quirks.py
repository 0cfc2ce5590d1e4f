"""The leader loop's documented quirks and thresholds, checked with exact values (spec §3.4, §4.4, §4.5)."""

from __future__ import annotations

from builders import broker_data, bundle_data, snapshot

from shedlab.config import LoadBalancerConfig
from shedlab.manager import LoadManager
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import pair_config

MINUTE = 60_000
T0 = 1_700_000_000_000


def conf(**overrides: object) -> LoadBalancerConfig:
    base = pair_config("OverloadShedder+LeastLongTermMessageRate")
    return base.with_overrides({"loadBalancerDistributeBundlesEvenlyEnabled": False, **overrides})


def idle(*ids: str) -> ClusterSnapshot:
    return snapshot({b: broker_data(cpu=(10.0, 100.0)) for b in ids})


def excluded_lookups(manager: LoadManager, snap: ClusterSnapshot, first: int, count: int) -> list[str | None]:
    return [
        manager.lookup(f"t/ex/0x{k:08x}_0x{k + 1:08x}", snap, T0).broker for k in range(first, first + count)
    ]


class TestRoundRobinSelector:
    """Namespaces excluded from shedding are placed by Pulsar's RoundRobinBrokerSelector (spec §3.4)."""

    def test_cycles_through_the_candidates_in_order(self) -> None:
        manager = LoadManager(conf(loadBalancerSheddingExcludedNamespaces="t/ex"), seed=0)
        assert excluded_lookups(manager, idle("a", "b", "c"), 0, 7) == ["a", "b", "c", "a", "b", "c", "a"]

    def test_keeps_its_cached_order_while_the_count_of_candidates_is_the_same(self) -> None:
        # Spec §3.4: index = count mod n; the cached list is replaced only when n changes or the cached
        # broker at that index is no longer a candidate.
        manager = LoadManager(conf(loadBalancerSheddingExcludedNamespaces="t/ex"), seed=0)
        assert excluded_lookups(manager, idle("a", "b", "c"), 0, 4) == ["a", "b", "c", "a"]
        # count 4 → index 1: cached b is still a candidate; count 5 → index 2: cached c is gone, so the
        # cache becomes [a, b, d] and d is chosen; count 6 → index 0: a.
        assert excluded_lookups(manager, idle("a", "b", "d"), 4, 3) == ["b", "d", "a"]
        # two candidates: n changed, the cache is rebuilt; count 7 → index 1, 8 → 0.
        assert excluded_lookups(manager, idle("a", "d"), 7, 2) == ["d", "a"]

    def test_cycles_in_the_order_of_javas_hash_set_of_candidates(self) -> None:
        # The selector copies the leader's candidate set, a java.util.HashSet (ModularLoadManagerImpl's
        # brokerCandidateCache), whose order is its buckets': String.hashCode spread, & 15 (16 buckets for
        # three brokers): "p" is 112 → bucket 0, "a" 97 → 1, "b" 98 → 2. So p, a, b, not a, b, p.
        manager = LoadManager(conf(loadBalancerSheddingExcludedNamespaces="t/ex"), seed=0)
        assert excluded_lookups(manager, idle("a", "b", "p"), 0, 4) == ["p", "a", "b", "p"]

    def test_placement_reports_the_selector_and_the_sorted_candidates(self) -> None:
        manager = LoadManager(conf(loadBalancerSheddingExcludedNamespaces="t/ex"), seed=0)
        answer = manager.lookup("t/ex/0x00000000_0x00000001", idle("c", "a", "b"), T0)
        assert answer.path == "placement"
        assert answer.placement is not None
        assert answer.placement.reason == {"strategy": "RoundRobinBrokerSelector"}
        assert tuple(answer.placement.choices) == ("a", "b", "c")

    def test_other_namespaces_use_the_placement_strategy(self) -> None:
        manager = LoadManager(conf(loadBalancerSheddingExcludedNamespaces="t/ex"), seed=0)
        answer = manager.lookup("t/other/0x00000000_0x00000001", idle("a", "b"), T0)
        assert answer.placement is not None
        assert answer.placement.reason["strategy"] == "LeastLongTermMessageRate"


B1, B2, B3 = "t/ns/0x00000000_0x40000000", "t/ns/0x40000000_0x80000000", "t/ns/0x80000000_0xffffffff"


def hot(cpu: float, hot_ids: tuple[str, ...] = ("h1",), cold: float = 10.0) -> ClusterSnapshot:
    brokers = {
        h: broker_data(cpu=(cpu, 100.0), tp_in=30.0, bundles=[f"{h}/{b}" for b in (B1, B2, B3)])
        for h in hot_ids
    }
    brokers["cold"] = broker_data(cpu=(cold, 100.0))
    bundles = {f"{h}/{b}": bundle_data(tp_in=10.0 + k) for h in hot_ids for k, b in enumerate((B1, B2, B3))}
    return snapshot(brokers, bundles)


class TestSheddingCycle:
    def test_counters_count_bundles_and_brokers(self) -> None:
        manager = LoadManager(conf(), seed=0)
        decisions = manager.do_load_shedding(hot(95.0, ("h1", "h2")), T0)
        # OverloadShedder at 95 %: target = 30 × 0.15 = 4.5 → the largest bundle of each broker.
        assert [(d.source, d.bundle, d.destination) for d in decisions] == [
            ("h1", f"h1/{B3}", "cold"),
            ("h2", f"h2/{B3}", "cold"),
        ]
        assert (manager.unload_bundle_total, manager.unload_broker_total) == (2, 2)
        assert manager.affinity == {f"h1/{B3}": "cold", f"h2/{B3}": "cold"}
        assert manager.recently_unloaded == {f"h1/{B3}": T0, f"h2/{B3}": T0}

    def test_recently_unloaded_bundles_are_not_chosen_again_within_the_grace_period(self) -> None:
        manager = LoadManager(conf(loadBalancerSheddingGracePeriodMinutes=10), seed=0)
        first = manager.do_load_shedding(hot(95.0), T0)
        again = manager.do_load_shedding(hot(95.0), T0 + 10 * MINUTE)  # exactly the grace period: kept
        assert [d.bundle for d in first] == [f"h1/{B3}"]
        assert [d.bundle for d in again] == [f"h1/{B2}"]
        later = manager.do_load_shedding(hot(95.0), T0 + 10 * MINUTE + 1)  # B3's entry expired
        assert [d.bundle for d in later] == [f"h1/{B3}"]

    def test_load_balancer_disabled_sheds_nothing(self) -> None:
        manager = LoadManager(conf(loadBalancerEnabled=False), seed=0)
        assert manager.do_load_shedding(hot(95.0), T0) == []
        assert manager.last_result is None

    def test_overload_recheck_is_strictly_above_the_threshold(self) -> None:
        # The destination exactly at 85 % is not overloaded: no re-check; at 86 % the strategy is asked again.
        manager = LoadManager(conf(), seed=0)
        (decision,) = manager.do_load_shedding(hot(95.0, cold=85.0), T0)
        assert "overload_recheck" not in decision.reason["placement"]
        # At 86 % every broker is overloaded, so whichever is drawn first is re-checked.
        manager = LoadManager(conf(), seed=0)
        decisions = manager.do_load_shedding(hot(95.0, cold=86.0), T0)
        info = decisions[0].reason["placement"] if decisions else manager.last_skipped[0]["placement"]
        recheck = info["overload_recheck"]
        assert (recheck["broker"], recheck["usage"]) in {("cold", 0.86), ("h1", 0.95)}
