"""The extensible manager's load data (spec §8.1): the broker-side EMA, the top-k report, the JSON reader."""

from __future__ import annotations

import copy
import json
from typing import cast

import pytest

from shedlab.errors import InputError
from shedlab.model.pulsar import NamespaceBundleStats, ResourceUsage
from shedlab.strategies.extensible_data import (
    DEFAULT_RESOURCE_USAGE,
    BrokerLoadData,
    ExtensibleLoadData,
    ResourceWeights,
    bundle_stats_key,
    read_extensible_load_data,
    top_k_bundles,
)

HALF = ResourceWeights(0.5, 0.5, 0.5, 0.5, 0.5)


def usage(cpu: float, memory: float) -> dict[str, ResourceUsage]:
    return {
        "cpu": ResourceUsage(cpu, 100.0),
        "memory": ResourceUsage(memory, 200.0),
        "directMemory": ResourceUsage(2.0, 100.0),
        "bandwidthIn": ResourceUsage(3.0, 100.0),
        "bandwidthOut": ResourceUsage(4.0, 100.0),
    }


def update(
    data: BrokerLoadData, res: dict[str, ResourceUsage], tp_in: float, tp_out: float
) -> BrokerLoadData:
    return data.updated(
        res,
        msg_throughput_in=tp_in,
        msg_throughput_out=tp_out,
        msg_rate_in=3,
        msg_rate_out=4,
        bundle_count=5,
        topics=6,
        weights=HALF,
        history=0.75,
        now_ms=1000,
    )


def test_update_by_system_resource_usage() -> None:
    """BrokerLoadDataTest.testUpdateBySystemResourceUsage: the first sample seeds both EMAs, the next
    one blends with h = 0.75; maxResourceUsage is unweighted and leaves heap memory out."""
    first = update(BrokerLoadData(), usage(1.0, 800.0), 1, 2)
    assert first.max_resource_usage == pytest.approx(0.04)
    assert first.weighted_max_ema == 2.0  # memory 400 % × 0.5
    assert first.msg_throughput_ema == 3.0
    assert first.updated_at == 1000
    second = update(first, usage(300.0, 200.0), 5, 6)
    assert second.max_resource_usage == 3.0
    assert second.weighted_max_ema == 1.875
    assert second.msg_throughput_ema == 5.0
    assert second.reported_at == 0


def test_defaults_before_the_first_sample() -> None:
    data = BrokerLoadData()
    assert data.weighted_max_ema == DEFAULT_RESOURCE_USAGE == data.max_resource_usage


PULSAR_JSON = {
    "cpu": {"usage": 100.0, "limit": 2096.0},
    "memory": {"usage": 300.0, "limit": 2096.0},
    "directMemory": {"usage": 40.0, "limit": 256.0},
    "bandwidthIn": {"usage": 0.7817884878178855, "limit": 1.0e7},
    "bandwidthOut": {"usage": 0.7213945272139455, "limit": 1.0e7},
    "msgThroughputIn": 3.000538680274058,
    "msgThroughputOut": 3.0005621893825616,
    "msgRateIn": 0.03333931866971176,
    "msgRateOut": 0.033339579882028465,
    "bundleCount": 3,
    "topics": 3,
    "maxResourceUsage": 0.15625,
    "weightedMaxEMA": 0.15625,
    "msgThroughputEMA": 38.88925615962549,
    "updatedAt": 1691043751060,
    "reportedAt": 1691043631073,
}
"""A broker's load data as Pulsar's docs print it (``/loadbalance/brokers`` of the extensible manager)."""


def document() -> dict[str, object]:
    return {
        "availableBrokers": ["b1:8080"],
        "brokerLoadData": {"b1:8080": copy.deepcopy(PULSAR_JSON)},
        "topBundlesLoadData": {
            "b1:8080": {
                "topBundlesLoadData": [
                    {"bundleName": "t/ns/0x00000000_0x80000000", "stats": {"msgThroughputIn": 1.0}},
                    {"bundleName": "t/ns/0x80000000_0xffffffff", "stats": {"msgThroughputIn": 2.0}},
                ]
            }
        },
    }


def test_read_pulsar_json_and_round_trip() -> None:
    data = read_extensible_load_data(document(), "load.json")
    b1 = data.brokers["b1:8080"]
    assert b1.weighted_max_ema == 0.15625 and b1.updated_at == 1691043751060
    assert b1.msg_throughput == pytest.approx(6.0011008696566196)
    assert [e.bundle_name for e in data.top_bundles["b1:8080"].top_bundles_load_data] == [
        "t/ns/0x00000000_0x80000000",
        "t/ns/0x80000000_0xffffffff",
    ]
    assert b1.to_json() == PULSAR_JSON
    again = read_extensible_load_data(json.loads(json.dumps(data.to_json())))
    assert again == data


def test_available_brokers_default_and_failure() -> None:
    doc = document()
    del doc["availableBrokers"]
    assert read_extensible_load_data(doc).available_brokers == frozenset({"b1:8080"})
    doc["availableBrokers"] = None
    assert read_extensible_load_data(doc).available_brokers is None
    assert ExtensibleLoadData().available_brokers == frozenset()


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("brokerLoadData", "b1:8080", "weightedMaxEMA"), "high", "brokerLoadData.b1:8080.weightedMaxEMA"),
        (("brokerLoadData", "b1:8080", "msgThroughputIn"), -1.0, "must not be negative"),
        (("brokerLoadData", "b1:8080", "updatedAt"), 1.5, "expected an integer"),
        (("brokerLoadData", "b1:8080"), [], "expected a JSON object"),
        (("topBundlesLoadData", "b1:8080", "topBundlesLoadData"), {}, "expected a list"),
        (("availableBrokers",), [1], "expected a list of strings"),
    ],
)
def test_bad_input_raises_input_error(path: tuple[str, ...], value: object, message: str) -> None:
    doc = document()
    node: dict[str, object] = doc
    for key in path[:-1]:
        node = cast("dict[str, object]", node[key])  # a JSON object on the path
    node[path[-1]] = value
    with pytest.raises(InputError, match=message) as info:
        read_extensible_load_data(doc, "load.json")
    assert str(info.value).startswith("load.json: ")


def test_bad_bundle_name() -> None:
    doc = document()
    doc["topBundlesLoadData"] = {"b1:8080": {"topBundlesLoadData": [{"bundleName": "nobundle"}]}}
    with pytest.raises(InputError, match=r"topBundlesLoadData\[0\]\.bundleName"):
        read_extensible_load_data(doc, "load.json")


def test_top_k_is_stored_smallest_first() -> None:
    stats = {
        f"t/ns/0x{i:08x}_0x{i + 1:08x}": NamespaceBundleStats(msgThroughputOut=i * 1e6) for i in range(1, 6)
    }
    report = top_k_bundles(stats, 3)
    assert [e.stats.msgThroughputOut for e in report.top_bundles_load_data] == [3e6, 4e6, 5e6]


def test_top_k_leaves_out_system_excluded_idle_and_policy_bundles() -> None:
    busy = NamespaceBundleStats(msgThroughputIn=1e6)
    stats = {
        "pulsar/system/0x00000000_0xffffffff": busy,
        "pulsar/localhost:8080/0x00000000_0xffffffff": busy,
        "t/excluded/0x00000000_0xffffffff": busy,
        "t/idle/0x00000000_0xffffffff": NamespaceBundleStats(),
        "t/isolated/0x00000000_0xffffffff": busy,
        "t/kept/0x00000000_0xffffffff": busy,
    }

    def has_policies(bundle: str) -> bool:
        return bundle.startswith("t/isolated/")

    names = [
        e.bundle_name
        for e in top_k_bundles(
            stats, 10, excluded_namespaces={"t/excluded"}, has_policies=has_policies
        ).top_bundles_load_data
    ]
    assert names == ["t/kept/0x00000000_0xffffffff"]
    with_policies = top_k_bundles(
        stats, 10, excluded_namespaces={"t/excluded"}, shedding_with_policies=True, has_policies=has_policies
    )
    assert len(with_policies) == 2


def test_compare_to_rounds_like_java() -> None:
    """NamespaceBundleStats.compareTo rounds throughput to 100 kB/s steps (Math.round, halves up)."""
    assert bundle_stats_key(NamespaceBundleStats(msgThroughputIn=149_999)) == (1, 0, 0, 0, 0)
    assert bundle_stats_key(NamespaceBundleStats(msgThroughputIn=150_000)) == (2, 0, 0, 0, 0)
    assert bundle_stats_key(NamespaceBundleStats(msgRateIn=50, topics=499, cacheSize=99_999)) == (
        0,
        0,
        1,
        0,
        0,
    )


def test_compare_to_rounds_just_below_a_half_down_as_java_math_round() -> None:
    """Java's Math.round is floor(x + ½) in exact arithmetic: 0.49999999999999994 rounds to 0. In doubles
    0.49999999999999994 + 0.5 is 1.0, so floor(x + 0.5) gave 1 and the bundle ranked 100 kB/s too high."""
    just_below = NamespaceBundleStats(msgThroughputIn=49999.99999999999, msgRateIn=49.99999999999999)
    assert bundle_stats_key(just_below) == (0, 0, 0, 0, 0)
    stats = {
        "t/a/0x00000000_0xffffffff": just_below,
        "t/b/0x00000000_0xffffffff": NamespaceBundleStats(msgThroughputOut=1e6),
    }
    assert [e.bundle_name for e in top_k_bundles(stats, 1).top_bundles_load_data] == [
        "t/b/0x00000000_0xffffffff"
    ]
