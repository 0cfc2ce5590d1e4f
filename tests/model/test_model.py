"""Pulsar's data model: float32 percentages, running averages, and the JSON Pulsar writes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from builders import bundle_data

import shedlab.model.pulsar as pulsar_module
from shedlab.errors import InputError
from shedlab.kernels import weighted_scores
from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import (
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageMessageData,
    java_sum,
    percent_usage,
)
from shedlab.model.snapshot import ClusterSnapshot, IntArray, percent_usage_array, weighted_max_usage

SPEC_REPORT = {
    "webServiceUrl": "http://b1:8080",
    "pulsarServiceUrl": "pulsar://b1:6650",
    "persistentTopicsEnabled": True,
    "nonPersistentTopicsEnabled": True,
    "cpu": {"usage": 80.0, "limit": 100.0},
    "memory": {"usage": 10.0, "limit": 100.0},
    "directMemory": {"usage": 1.0, "limit": 2.0},
    "bandwidthIn": {"usage": 3.0, "limit": 4.0},
    "bandwidthOut": {"usage": 5.0, "limit": 6.0},
    "msgThroughputIn": 2.0,
    "msgThroughputOut": 4.0,
    "msgRateIn": 1.0,
    "msgRateOut": 3.0,
    "lastUpdate": 1795318343017,
    "lastStats": {
        "t/ns/0x00000000_0xffffffff": {
            "msgRateIn": 1.0,
            "msgThroughputIn": 2.0,
            "msgRateOut": 3.0,
            "msgThroughputOut": 4.0,
            "consumerCount": 5,
            "producerCount": 6,
            "topics": 7,
            "cacheSize": 8,
        }
    },
    "numTopics": 7,
    "numBundles": 1,
    "numConsumers": 5,
    "numProducers": 6,
    "bundles": ["t/ns/0x00000000_0xffffffff"],
    "lastBundleGains": ["t/ns/0x00000000_0xffffffff"],
    "lastBundleLosses": [],
    "brokerVersionString": "4.2.0",
    "protocols": {},
    "advertisedListeners": {},
    "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
    "startTimestamp": 1795318343017,
    "maxResourceUsage": 0.8333332538604736,
    "loadReportType": "LocalBrokerData",
}


@pytest.mark.parametrize(
    ("usage", "limit", "expected"),
    [
        (80, 100, 80.0),
        (999, 1000, float(np.float32(99.9))),
        (1, 3, 33.333336),
        (140, 100, 140.0),
        (5, 0, 0.0),
        (5, 1e-50, float("inf")),  # limit > 0 is tested on the double; 1e-50 is 0 as a float: 5 / 0f
        (-5, 1e-50, float("-inf")),
        (1e39, 1, float("inf")),  # the float cast of a usage beyond float's range
    ],
)
def test_percent_usage_is_float32(usage: float, limit: float, expected: float) -> None:
    assert percent_usage(usage, limit) == pytest.approx(expected, abs=1e-6)
    assert float(percent_usage_array(np.array([usage], float), np.array([limit], float))[0]) == percent_usage(
        usage, limit
    )
    assert ResourceUsage(usage, limit).percent_usage() == percent_usage(usage, limit)


def test_percent_of_no_usage_over_a_float_zero_limit_is_nan() -> None:
    """0 / 0f in Java: NaN, which LocalBrokerData.max then skips."""
    assert np.isnan(percent_usage(0, 1e-50))
    assert np.isnan(percent_usage_array(np.array([0.0]), np.array([1e-50]))[0])


@pytest.mark.parametrize(
    ("direct_memory", "cpu", "expected"),
    [
        ((1e39, 1), (90, 100), 0.9),  # ∞ % × weight 0 = NaN: skipped, cpu decides (NumPy's max made it NaN)
        ((0, 1e-50), (90, 100), 0.9),  # 0 / 0f = NaN × weight 0: skipped
        ((0, 1e-50), (0, 1e-50), float("-inf")),  # every term NaN (bandwidths too): -∞
    ],
)
def test_weighted_max_usage_skips_nan_as_java_max_does(
    direct_memory: tuple[float, float], cpu: tuple[float, float], expected: float
) -> None:
    """``LocalBrokerData.max`` starts at -∞ and keeps strictly larger values: the report's method, the
    snapshot's arrays and the simulator's compiled scores agree with it."""
    bandwidth = (0.0, 0.0) if expected > 0 else (0.0, 1e-50)  # 0 % or NaN
    report = LocalBrokerData(
        cpu=ResourceUsage(*cpu),
        directMemory=ResourceUsage(*direct_memory),
        bandwidthIn=ResourceUsage(*bandwidth),
        bandwidthOut=ResourceUsage(*bandwidth),
    )
    weights = (1.0, 0.0, 1.0, 1.0)
    usage = np.array([[cpu[0], 0.0, direct_memory[0], bandwidth[0], bandwidth[0]]])
    limit = np.array([[cpu[1], 0.0, direct_memory[1], bandwidth[1], bandwidth[1]]])
    scores = np.empty(1)
    weighted_scores(usage, limit, np.asarray(weights), scores)
    assert report.max_resource_usage_with_weight(*weights) == pytest.approx(expected)
    assert weighted_max_usage(usage, limit, weights)[0] == pytest.approx(expected)
    assert scores[0] / 100 == pytest.approx(expected)


def test_time_average_first_sample_overwrites_then_mean_then_ema() -> None:
    avg = TimeAverageMessageData.with_defaults(2)
    avg.update(NamespaceBundleStats(msgRateIn=10))
    assert (avg.numSamples, avg.msgRateIn, avg.msgThroughputIn) == (1, 10, 0)
    avg.update(NamespaceBundleStats(msgRateIn=20))
    assert avg.msgRateIn == 15
    avg.update(NamespaceBundleStats(msgRateIn=35))
    assert (avg.numSamples, avg.msgRateIn) == (2, 25)  # EMA with α = 1/2 once saturated


def test_load_report_round_trips_pulsar_json() -> None:
    report = LocalBrokerData.from_json(JsonReader({**SPEC_REPORT, "someFutureField": 1}, "report.json"))
    assert report.to_json() == SPEC_REPORT
    assert report.max_resource_usage() == 0.8333332538604736


def test_load_report_update_tracks_gains_and_losses() -> None:
    report = LocalBrokerData(bundles=["a", "b"])
    resources = {
        n: ResourceUsage(1, 2) for n in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
    }
    report.update(
        resources, {"b": NamespaceBundleStats(msgRateIn=5, topics=2), "c": NamespaceBundleStats(msgRateIn=1)}
    )
    assert (report.bundles, report.lastBundleGains, report.lastBundleLosses) == (["b", "c"], ["c"], ["a"])
    assert (report.msgRateIn, report.numTopics, report.numBundles) == (6, 2, 2)


def test_load_report_update_adds_rates_one_by_one_as_java_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # LocalBrokerData.updateBundleData keeps running totals: ten bundles of 0.1 msg/s add up to
    # 0.9999999999999999 in Java. Python 3.12's sum() is compensated (1.0); math.fsum stands in for it here,
    # so the test fails on any Python while update() calls sum().
    monkeypatch.setattr(pulsar_module, "sum", math.fsum, raising=False)
    report = LocalBrokerData()
    resources = {
        n: ResourceUsage(1, 2) for n in ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut")
    }
    report.update(
        resources, {f"t/n/0x{i:08x}_0x{i + 1:08x}": NamespaceBundleStats(msgRateIn=0.1) for i in range(10)}
    )
    assert report.msgRateIn == 0.9999999999999999 == java_sum([0.1] * 10)
    assert (java_sum([]), math.isnan(java_sum([math.inf, -math.inf]))) == (0.0, True)


def test_bundle_data_json() -> None:
    data = bundle_data(tp_in=2, tp_out=4, rate_in=1, rate_out=3, num_samples=1)
    assert BundleData.from_json(JsonReader(json.loads(json.dumps(data.to_json())), "x")) == data


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({"cpu": {"usage": -1.0, "limit": 100.0}}, "cpu.usage"),
        ({"msgRateIn": float("nan")}, "msgRateIn"),
        ({"cpu": {"limit": 100.0}}, "cpu.usage"),
        ({"bundles": "a,b"}, "bundles"),
    ],
)
def test_bad_report_values_name_the_field(obj: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as err:
        LocalBrokerData.from_json(JsonReader(obj, "r.json", "brokers.b1.localData"))
    assert f"brokers.b1.localData.{field}" in str(err.value) and "r.json" in str(err.value)


def test_snapshot_groups_bundles_by_owner() -> None:
    from builders import broker_data, snapshot

    snap = snapshot(
        {"b": broker_data(bundles=["z", "x"]), "a": broker_data(bundles=["y"])},
        {"x": bundle_data(), "q": bundle_data()},
    )
    assert snap.broker_ids == ("a", "b")

    def names(idx: IntArray) -> list[str]:
        return [snap.bundle_names[i] for i in idx]

    assert names(snap.bundles_of(0)) == ["y"] and names(snap.bundles_of(1)) == ["x", "z"]
    assert names(snap.shedding_candidates(1)) == ["x"]  # z has no BundleData: invisible to shedding
    assert snap.bundle_owner[snap.bundle_index("q")] == -1


def test_two_owners_with_equally_recent_reports_is_an_input_error() -> None:
    from builders import broker_data

    from shedlab.model.pulsar import LoadData

    data = LoadData({"a": broker_data(bundles=["x"]), "b": broker_data(bundles=["x"])})
    with pytest.raises(
        InputError, match=r"listed by two brokers \(a and b\) whose reports are equally recent"
    ):
        ClusterSnapshot.from_load_data(data, source="snap.json")


@pytest.mark.parametrize(("a_time", "b_time", "owner"), [(2000, 1000, "a"), (1000, 2000, "b")])
def test_a_bundle_listed_by_two_brokers_belongs_to_the_newer_report(
    a_time: int, b_time: int, owner: str
) -> None:
    """After an unload the old owner's report lists the bundle until it is rewritten (a live cluster
    shows this for minutes after every unload): the snapshot was refused, so advise failed then."""
    from builders import broker_data

    from shedlab.model.pulsar import LoadData

    a, b = broker_data(bundles=["x", "y"]), broker_data(bundles=["x"])
    a.localData.lastUpdate, b.localData.lastUpdate = a_time, b_time
    snap = ClusterSnapshot.from_load_data(LoadData({"a": a, "b": b}), source="snap.json")
    assert snap.broker_ids[snap.bundle_owner[snap.bundle_index("x")]] == owner
    assert snap.broker_ids[snap.bundle_owner[snap.bundle_index("y")]] == "a"
    assert list(snap.num_owned_bundles) == [2, 1]  # each broker's own count, as its report says


@pytest.mark.parametrize(
    ("value", "kind"),
    [(None, "null"), ([1], "an array"), ("x", "a string"), (1.5, "a number"), (True, "a boolean")],
)
def test_a_json_value_that_is_no_object_is_named_in_jsons_words(value: object, kind: str) -> None:
    """``found NoneType``/``found list`` named Python's types, not what the user wrote."""
    with pytest.raises(InputError, match=f"s.json: brokers: expected a JSON object, found {kind}$"):
        JsonReader(value, "s.json", "brokers")
