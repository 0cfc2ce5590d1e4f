"""Edges of the extensible manager's placement (spec §3.5) and JSON readers (spec §8.1) that the
mutation run of the ``extra`` group left unpinned: the exact reason of each branch of
``ExtensibleLeastResourceUsageWithWeight.select_broker``, its default 10 % threshold, its seeded draw, and
what the JSON readers default to and say when a value is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from shedlab.errors import InputError
from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import RESOURCE_NAMES, NamespaceBundleStats, ResourceUsage
from shedlab.strategies.base import Placement
from shedlab.strategies.extensible_data import (
    BrokerLoadData,
    BundleLoadData,
    ResourceWeights,
    TopBundlesLoadData,
    bundle_stats_key,
    read_extensible_load_data,
    top_k_bundles,
)
from shedlab.strategies.extensible_least_resource_usage_with_weight import (
    ExtensibleLeastResourceUsageWithWeight,
)

BUNDLE = "t/ns/0x00000000_0xffffffff"
NAME = "ExtensibleLeastResourceUsageWithWeight"


def ema(value: float) -> BrokerLoadData:
    return BrokerLoadData(weighted_max_ema=value)


def strategy(seed: int = 0) -> ExtensibleLeastResourceUsageWithWeight:
    return ExtensibleLeastResourceUsageWithWeight(np.random.default_rng(seed))


# ------------------------------------------------------------------ select_broker: reasons and branches


def test_no_candidates_gives_no_broker_empty_choices_and_the_no_candidates_reason() -> None:
    placement = strategy().select_broker([], BUNDLE, {"a": ema(0.1)})
    assert placement == Placement(None, ())
    assert placement.choices == ()
    assert placement.reason == {"strategy": NAME, "rule": "no candidates"}


def test_best_set_reason_names_average_threshold_and_brokers_without_data() -> None:
    """Hand computation: loads a=0.10, b=0.50, c=0.60 → average 0.40; with 10 % only a (0.20 ≤ 0.40) is
    best; "z" has no load data and is reported, kept out of the average and out of the best set."""
    store = {"a": ema(0.10), "b": ema(0.50), "c": ema(0.60)}
    placement = strategy().select_broker(
        ["c", "z", "a", "b"], BUNDLE, store, difference_threshold_percentage=10
    )
    assert placement.broker == "a"
    assert placement.choices == ("a",)
    assert placement.reason == {
        "strategy": NAME,
        "no_load_data": ["z"],
        "avg_usage": pytest.approx(0.40),
        "difference_threshold": pytest.approx(0.10),
        "rule": "usage + threshold <= average",
    }


def test_empty_best_set_reason_draws_over_all_candidates_including_those_without_data() -> None:
    """Loads 0.35 and 0.45 (average 0.40) differ by less than 2 × 10 %: nobody is best, so the draw is over
    all candidates, the one without data ("z") included (spec §3.5)."""
    store = {"a": ema(0.35), "b": ema(0.45)}
    placement = strategy().select_broker(["a", "b", "z"], BUNDLE, store)
    assert placement.choices == ("a", "b", "z")
    assert placement.reason == {
        "strategy": NAME,
        "no_load_data": ["z"],
        "avg_usage": pytest.approx(0.40),
        "difference_threshold": pytest.approx(0.10),
        "rule": "no broker clearly below average: all candidates",
    }


def test_no_broker_with_data_reports_all_as_no_load_data_and_no_average() -> None:
    placement = strategy().select_broker(["b", "a"], BUNDLE, {})
    assert placement.choices == ("a", "b")
    assert placement.reason == {
        "strategy": NAME,
        "no_load_data": ["a", "b"],
        "rule": "no broker clearly below average: all candidates",
    }


def test_default_difference_threshold_is_ten_percent() -> None:
    """Loads 0.20 and 0.41: average 0.305, a gap of 0.105 — best at 10 % (the default of
    loadBalancerAverageResourceUsageDifferenceThresholdPercentage), not at 11 %."""
    store = {"a": ema(0.20), "b": ema(0.41)}
    assert strategy().select_broker(["a", "b"], BUNDLE, store).choices == ("a",)
    assert strategy().select_broker(
        ["a", "b"], BUNDLE, store, difference_threshold_percentage=11
    ).choices == (
        "a",
        "b",
    )


def test_seeded_draws_repeat_and_an_unseeded_strategy_still_draws() -> None:
    """The injected generator drives the uniform draw: the same seed gives the same 64 picks (an unseeded
    generator would match with probability 2^-64); without a generator the strategy still works."""
    store = {"a": ema(0.5), "b": ema(0.5)}

    def picks(s: ExtensibleLeastResourceUsageWithWeight) -> list[str | None]:
        return [s.select_broker(["a", "b"], BUNDLE, store).broker for _ in range(64)]

    assert picks(strategy(7)) == picks(strategy(7))
    assert set(picks(ExtensibleLeastResourceUsageWithWeight())) <= {"a", "b"}


# ------------------------------------------------------------------------------------ the JSON readers


def test_broker_load_data_from_empty_object_takes_java_constructor_defaults() -> None:
    """Every missing field takes BrokerLoadData's Java default: zeros, usage 1.0 (100 %) for the two
    maxima, empty resources (spec §8.1)."""
    read = BrokerLoadData.from_json(JsonReader({}, "load.json"))
    assert read == BrokerLoadData()
    assert read.weighted_max_ema == 1.0 and read.max_resource_usage == 1.0
    assert read.cpu == ResourceUsage() and read.msg_throughput == 0.0 and read.updated_at == 0


def test_broker_load_data_reads_a_present_resource_and_defaults_a_missing_one() -> None:
    read = BrokerLoadData.from_json(JsonReader({"cpu": {"usage": 30.0, "limit": 60.0}}, "load.json"))
    assert read.cpu == ResourceUsage(30.0, 60.0)
    assert read.memory == ResourceUsage()


def test_bundle_load_data_reads_stats_and_defaults_missing_stats() -> None:
    with_stats = BundleLoadData.from_json(
        JsonReader({"bundleName": BUNDLE, "stats": {"msgThroughputIn": 5.0, "msgThroughputOut": 2.0}}, "x")
    )
    assert with_stats.stats.msgThroughputIn == 5.0 and with_stats.msg_throughput == 7.0
    without = BundleLoadData.from_json(JsonReader({"bundleName": BUNDLE}, "x"))
    assert without == BundleLoadData(BUNDLE, NamespaceBundleStats())


def test_bad_bundle_name_message_names_file_field_and_value() -> None:
    with pytest.raises(InputError) as info:
        BundleLoadData.from_json(JsonReader({"bundleName": "nobundle"}, "load.json", "top[0]"))
    assert str(info.value) == (
        "load.json: top[0].bundleName: expected a full bundle name tenant/namespace/0x…_0x… (got 'nobundle')"
    )


def test_top_bundles_missing_or_null_list_is_empty() -> None:
    assert TopBundlesLoadData.from_json(JsonReader({}, "x")) == TopBundlesLoadData()
    assert len(TopBundlesLoadData.from_json(JsonReader({"topBundlesLoadData": None}, "x"))) == 0


def test_top_bundles_not_a_list_message_names_file_field_and_value() -> None:
    with pytest.raises(InputError) as info:
        TopBundlesLoadData.from_json(JsonReader({"topBundlesLoadData": {"a": 1}}, "load.json", "b1"))
    assert str(info.value) == "load.json: b1.topBundlesLoadData: expected a list (got {'a': 1})"


def test_bad_entry_in_top_bundles_names_the_file_and_the_entry_index() -> None:
    doc = {
        "topBundlesLoadData": {"b1": {"topBundlesLoadData": [{"bundleName": BUNDLE}, {"bundleName": "x"}]}}
    }
    with pytest.raises(InputError) as info:
        read_extensible_load_data(doc, "load.json")
    assert str(info.value).startswith("load.json: topBundlesLoadData.b1.topBundlesLoadData[1].bundleName: ")


def test_a_bundle_twice_in_one_top_bundles_report_is_refused() -> None:
    """TopKBundles builds the report from a map of bundle stats, so Pulsar never names a bundle twice;
    read as data, the walk would have counted its throughput twice and decided its unload twice."""
    doc = {
        "topBundlesLoadData": {"b1": {"topBundlesLoadData": [{"bundleName": BUNDLE}, {"bundleName": BUNDLE}]}}
    }
    with pytest.raises(InputError) as info:
        read_extensible_load_data(doc, "load.json")
    assert str(info.value) == (
        f"load.json: topBundlesLoadData.b1.topBundlesLoadData[1].bundleName: the bundle is already "
        f"in this report, at [0] (got '{BUNDLE}')"
    )


def test_available_brokers_survive_the_json_round_trip_even_when_null_or_not_in_the_store() -> None:
    """``availableBrokers`` is written under Pulsar's name, sorted, and null when the registry lookup failed
    (spec §8): reading the output back gives the same registry answer, not the store's brokers."""
    data = read_extensible_load_data({"availableBrokers": ["b2", "b1"], "brokerLoadData": {"b3": {}}})
    assert data.to_json()["availableBrokers"] == ["b1", "b2"]
    assert read_extensible_load_data(data.to_json()).available_brokers == frozenset({"b1", "b2"})
    failed = read_extensible_load_data({"availableBrokers": None, "brokerLoadData": {"b3": {}}})
    assert failed.to_json()["availableBrokers"] is None
    assert read_extensible_load_data(failed.to_json()).available_brokers is None


def test_document_without_top_bundles_reads_as_an_empty_top_bundles_store() -> None:
    data = read_extensible_load_data({"brokerLoadData": {"b1": {}}}, "load.json")
    assert data.top_bundles == {} and data.brokers == {"b1": BrokerLoadData()}


# ------------------------------------------------------------- the top-k report's compareTo and sampling


def test_bundle_stats_key_by_hand() -> None:
    """NamespaceBundleStats.compareTo as a key (spec §1.2), each part computed by hand: throughput in
    250,000 → round(2.5) = 3 and out 150,000 → round(1.5) = 2 (Math.round: halves up); rates 120 + 30 →
    round(1.5) = 2; topics + consumers + producers = 300 + 150 + 50 → 500 // 500 = 1;
    cache 100,000 // 1e5 = 1."""
    stats = NamespaceBundleStats(
        msgThroughputIn=250_000.0,
        msgThroughputOut=150_000.0,
        msgRateIn=120.0,
        msgRateOut=30.0,
        topics=300,
        consumerCount=150,
        producerCount=50,
        cacheSize=100_000,
    )
    assert bundle_stats_key(stats) == (3, 2, 2, 1, 1)


def test_top_k_drops_only_bundles_without_any_throughput_and_keeps_none_for_k_zero() -> None:
    """A bundle with only outbound throughput, or as much in as out, is not idle (in + out > 0) and is
    reported; k = 0 reports nothing. Order: the compareTo key, smallest first — throughput in first, so
    (in 0, out 3) < (1, 1) < (2, 0) < (5, 0) in units of 1e5 rounded."""
    stats = {
        "t/ns/0x00000000_0x40000000": NamespaceBundleStats(msgThroughputOut=300_000.0),
        "t/ns/0x40000000_0x80000000": NamespaceBundleStats(msgThroughputIn=500_000.0, msgThroughputOut=1.0),
        "t/ns/0x80000000_0xc0000000": NamespaceBundleStats(msgThroughputIn=200_000.0),
        "t/ns/0xc0000000_0xffffffff": NamespaceBundleStats(),
        "u/ns/0x00000000_0xffffffff": NamespaceBundleStats(
            msgThroughputIn=50_000.0, msgThroughputOut=50_000.0
        ),
    }
    names = [b.bundle_name for b in top_k_bundles(stats, 10).top_bundles_load_data]
    assert names == [
        "t/ns/0x00000000_0x40000000",
        "u/ns/0x00000000_0xffffffff",
        "t/ns/0x80000000_0xc0000000",
        "t/ns/0x40000000_0x80000000",
    ]
    assert len(top_k_bundles(stats, 0)) == 0


def test_updated_stores_the_sampled_counters_and_resources_and_names_missing_resources() -> None:
    usage = {name: ResourceUsage(10.0 * (i + 1), 100.0) for i, name in enumerate(RESOURCE_NAMES)}
    weights = ResourceWeights(1.0, 1.0, 1.0, 1.0, 1.0)
    new = BrokerLoadData().updated(
        usage,
        msg_throughput_in=1.0,
        msg_throughput_out=2.0,
        msg_rate_in=3.0,
        msg_rate_out=4.0,
        bundle_count=5,
        topics=6,
        weights=weights,
        history=0.9,
        now_ms=7,
    )
    assert (new.msg_rate_in, new.msg_rate_out, new.bundle_count, new.topics) == (3.0, 4.0, 5, 6)
    assert new.resources() == tuple(usage[name] for name in RESOURCE_NAMES)
    partial = {k: v for k, v in usage.items() if k != "bandwidthIn"}
    with pytest.raises(ValueError, match=r"missing resources: \['bandwidthIn'\]"):
        BrokerLoadData().updated(
            partial,
            msg_throughput_in=0,
            msg_throughput_out=0,
            msg_rate_in=0,
            msg_rate_out=0,
            bundle_count=0,
            topics=0,
            weights=weights,
            history=0.9,
            now_ms=1,
        )
