"""The order of the leader's walk over a shedding plan: a Java ``HashMap`` of broker ids (spec §4.4).

The expected orders and hashes were printed by OpenJDK 17's ``String.hashCode`` and ``java.util.HashMap``
(``new HashMap<>(16)``, the map behind Guava's ``ArrayListMultimap.create()``); 7,500 random key sets
(Unicode, surrogate pairs, 1 to 70 keys, maps reused after ``clear()``) gave the same orders, except where
9 keys shared a bucket of a table of 64 or more (a tree bin, documented as not reproduced).
"""

from __future__ import annotations

from builders import broker_data, bundle_data, snapshot

from shedlab.manager import LoadManager
from shedlab.manager.hash_order import hash_map_order, java_string_hash
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import pair_config

T0 = 1_700_000_000_000
MB = 1024 * 1024
IDS = [f"10.0.0.{i}:8080" for i in range(1, 14)]


def test_string_hash_is_javas() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("h1") == 3273
    assert java_string_hash("10.0.0.1:8080") == 2651623492
    assert java_string_hash("broker-é:8080") == 63096917
    assert java_string_hash("b\U0001f600") == 1867077  # a surrogate pair: two UTF-16 units


def test_a_fresh_map_iterates_by_bucket() -> None:
    assert hash_map_order(IDS[:3]) == (["10.0.0.2:8080", "10.0.0.3:8080", "10.0.0.1:8080"], 16)


def test_the_table_doubles_past_three_quarters_and_a_cleared_map_keeps_it() -> None:
    order, table = hash_map_order(IDS)
    assert table == 32  # 13 keys > 0.75 × 16
    assert order == [IDS[i - 1] for i in (12, 2, 8, 1, 4, 6, 13, 9, 3, 10, 11, 7, 5)]
    # ThresholdShedder's multimap is a field cleared at every call: the next call's three keys
    # iterate in a table of 32, not 16
    assert hash_map_order(IDS[:3], table) == (["10.0.0.2:8080", "10.0.0.1:8080", "10.0.0.3:8080"], 32)


def two_hot_brokers() -> ClusterSnapshot:
    """10.0.0.1 and 10.0.0.2 at 95 % CPU with two bundles each, 10.0.0.3 at 30 %."""
    hot = {
        "10.0.0.1:8080": "t/a",
        "10.0.0.2:8080": "t/b",
    }
    ranges = ("0x00000000_0x00000001", "0x00000001_0x00000002")
    brokers = {
        b: broker_data(cpu=(95.0, 100.0), tp_in=200 * MB, rate_in=100, bundles=[f"{ns}/{r}" for r in ranges])
        for b, ns in hot.items()
    }
    brokers["10.0.0.3:8080"] = broker_data(
        cpu=(30.0, 100.0), tp_in=10 * MB, rate_in=100, bundles=["t/c/" + ranges[0]]
    )
    bundles = {
        f"{ns}/{r}": bundle_data(tp_in=(60 + 10 * k) * MB)
        for ns in hot.values()
        for k, r in enumerate(ranges)
    }
    bundles["t/c/" + ranges[0]] = bundle_data(tp_in=10 * MB)
    return snapshot(brokers, bundles)


def test_the_walk_order_decides_which_bundles_move() -> None:
    # ThresholdShedder picks one bundle from each hot broker. LeastResourceUsageWithWeight's history,
    # advanced at every call (twice per bundle here: its answer, 10.0.0.1, is overloaded, so the manager
    # asks again), answers 10.0.0.1 for the first bundle and 10.0.0.3 for the second. Java walks
    # 10.0.0.2 first (bucket 2 before bucket 8): its bundle goes to 10.0.0.1, and 10.0.0.1's to 10.0.0.3.
    # In the strategy's order (10.0.0.1 first) 10.0.0.1's bundle would be sent to itself, and not move.
    conf = pair_config("ThresholdShedder+LeastResourceUsageWithWeight").with_overrides(
        {"loadBalancerDistributeBundlesEvenlyEnabled": False}
    )
    manager = LoadManager(conf, seed=0)
    manager.placement.seed_history({"10.0.0.1:8080": 0.0, "10.0.0.2:8080": 0.4, "10.0.0.3:8080": 0.2})  # type: ignore[attr-defined]
    decisions = manager.do_load_shedding(two_hot_brokers(), T0)
    assert [(d.source, d.bundle, d.destination) for d in decisions] == [
        ("10.0.0.2:8080", "t/b/0x00000001_0x00000002", "10.0.0.1:8080"),
        ("10.0.0.1:8080", "t/a/0x00000001_0x00000002", "10.0.0.3:8080"),
    ]
    assert manager.last_skipped == []


def hot_brokers(count: int) -> ClusterSnapshot:
    """10.0.0.1 … 10.0.0.<count> at 95 % CPU with two bundles each, and a cold 10.0.1.1."""
    brokers, bundles = {}, {}
    for i in range(1, count + 1):
        names = [f"t/n{i}/0x00000000_0x00000001", f"t/n{i}/0x00000001_0x00000002"]
        brokers[f"10.0.0.{i}:8080"] = broker_data(cpu=(95.0, 100.0), tp_in=20 * MB, bundles=names)
        bundles.update({name: bundle_data(tp_in=(5 + k) * MB) for k, name in enumerate(names)})
    brokers["10.0.1.1:8080"] = broker_data(cpu=(10.0, 100.0))
    return snapshot(brokers, bundles)


def test_a_strategy_that_reuses_its_multimap_keeps_the_grown_table() -> None:
    # OverloadShedder's multimap is a field cleared at every call: after a cycle of 13 sources its table
    # has 32 buckets, and the next cycle's three sources iterate 2, 1, 3 (a new map of 16: 2, 3, 1)
    conf = pair_config("OverloadShedder+LeastLongTermMessageRate").with_overrides(
        {"loadBalancerDistributeBundlesEvenlyEnabled": False, "loadBalancerSheddingGracePeriodMinutes": 0}
    )
    manager = LoadManager(conf, seed=0)
    first = manager.do_load_shedding(hot_brokers(13), T0)
    assert [d.source for d in first] == IDS_IN_ORDER_OF_13
    again = manager.do_load_shedding(hot_brokers(3), T0 + 60_000)
    assert [d.source for d in again] == ["10.0.0.2:8080", "10.0.0.1:8080", "10.0.0.3:8080"]
    fresh = LoadManager(conf, seed=0).do_load_shedding(hot_brokers(3), T0 + 60_000)
    assert [d.source for d in fresh] == ["10.0.0.2:8080", "10.0.0.3:8080", "10.0.0.1:8080"]


# OpenJDK's HashMap order of the 13 ids put in the strategy's (string) order: 10.0.0.10 and 10.0.0.3 share
# a bucket and keep that order
IDS_IN_ORDER_OF_13 = [IDS[i - 1] for i in (12, 2, 8, 1, 4, 6, 13, 9, 10, 3, 11, 7, 5)]
