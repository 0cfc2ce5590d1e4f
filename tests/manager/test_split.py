"""Leader's bundle split check (spec §4.8; §7.7's BundleSplitterTaskTest facts) and its place in decide."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import broker_data, bundle_data, cpu_broker
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from shedlab.cli import app
from shedlab.config import LoadBalancerConfig
from shedlab.core.decide import decide_on_snapshot
from shedlab.manager.split import MIB, find_bundles_to_split, split_check
from shedlab.model.pulsar import BrokerData, BundleData, LoadData, NamespaceBundleStats
from shedlab.model.snapshot import ClusterSnapshot, SplitInputs

QUARTERS = (
    "0x00000000_0x40000000",
    "0x40000000_0x80000000",
    "0x80000000_0xc0000000",
    "0xc0000000_0xffffffff",
)


def _listing(broker: BrokerData, stats: dict[str, NamespaceBundleStats]) -> BrokerData:
    broker.localData.lastStats = dict(stats)
    broker.localData.bundles = list(stats)
    return broker


def _stats(topics: int = 5, consumers: int = 0, producers: int = 0) -> NamespaceBundleStats:
    return NamespaceBundleStats(topics=topics, consumerCount=consumers, producerCount=producers)


def _plan(load_data: LoadData, **conf: object) -> tuple[list[str], list[dict[str, object]]]:
    plan = find_bundles_to_split(SplitInputs.of(load_data), LoadBalancerConfig.from_mapping(conf))
    return sorted(plan.splits), plan.refused


def test_a_bundle_of_one_topic_is_never_split() -> None:
    """§7.7: topics = 1 is never split, even at twice the maximum message rate."""
    name = "ten/ns/" + QUARTERS[0]
    brokers = {"b1": _listing(broker_data(), {name: _stats(topics=1)})}
    assert _plan(LoadData(brokers, {name: bundle_data(rate_in=60_000, topics=1)})) == ([], [])


def test_namespace_maximum_bundles_caps_the_splits_with_the_current_count() -> None:
    """§7.7: with loadBalancerNamespaceMaximumBundles = 3 and three eligible bundles of a namespace that has
    three bundles named, none is split; with 4, one is (current 3 + accepted 1 = the cap)."""
    names = [f"ten/ns/{q}" for q in QUARTERS[:3]]
    brokers = {"b1": _listing(broker_data(), {n: _stats() for n in names})}
    data = LoadData(brokers, {n: bundle_data(rate_in=60_000, topics=5) for n in names})
    assert _plan(data, loadBalancerNamespaceMaximumBundles=3)[0] == []
    split, refused = _plan(data, loadBalancerNamespaceMaximumBundles=4)
    assert split == [names[0]]  # bundles by name: the first one takes the only room
    assert [r["bundle"] for r in refused] == names[1:]
    assert refused[0]["reason"] == "namespace at loadBalancerNamespaceMaximumBundles"


@pytest.mark.parametrize(
    ("stats", "data", "conf", "reason"),
    [
        (_stats(topics=1001), None, {}, "topics 1001 > 1000"),
        (_stats(consumers=600, producers=401), None, {}, "sessions 1001 > 1000"),
        (
            _stats(),
            bundle_data(rate_in=20_000, rate_out=10_000.5),
            {},
            "long-term msg rate 30000.5 > 30000 msg/s",
        ),
        (_stats(), bundle_data(tp_in=100 * MIB, tp_out=1.0), {}, "long-term throughput 100.00 > 100 MiB/s"),
        (_stats(topics=3), None, {"loadBalancerNamespaceBundleMaxTopics": 2}, "topics 3 > 2"),
    ],
)
def test_each_threshold_is_a_strict_excess(
    stats: NamespaceBundleStats, data: BundleData | None, conf: dict[str, object], reason: str
) -> None:
    name = "ten/ns/" + QUARTERS[0]
    load_data = LoadData({"b1": _listing(broker_data(), {name: stats})}, {} if data is None else {name: data})
    plan = find_bundles_to_split(SplitInputs.of(load_data), LoadBalancerConfig.from_mapping(conf))
    assert plan.splits[name].reasons == (reason,)


@pytest.mark.parametrize(
    ("stats", "data", "conf"),
    [
        (_stats(topics=1000), None, {}),  # at the limit: not over it
        (_stats(consumers=2000), None, {"loadBalancerNamespaceBundleMaxSessions": 0}),  # 0 turns sessions off
        (_stats(), bundle_data(rate_in=30_000), {}),
        (_stats(), bundle_data(tp_in=100 * MIB), {}),
    ],
)
def test_below_or_at_every_threshold_nothing_is_split(
    stats: NamespaceBundleStats, data: BundleData | None, conf: dict[str, object]
) -> None:
    name = "ten/ns/" + QUARTERS[0]
    load_data = LoadData({"b1": _listing(broker_data(), {name: stats})}, {} if data is None else {name: data})
    assert _plan(load_data, **conf) == ([], [])


def test_without_bundle_data_the_long_term_rates_are_zero() -> None:
    """Java reads the long-term totals only where the leader has BundleData, else 0: with a negative
    maximum message rate (0 > -1) such a bundle is a candidate all the same."""
    name = "ten/ns/" + QUARTERS[0]
    load_data = LoadData({"b1": _listing(broker_data(), {name: _stats()})}, {})
    plan = find_bundles_to_split(
        SplitInputs.of(load_data),
        LoadBalancerConfig.from_mapping({"loadBalancerNamespaceBundleMaxMsgRate": -1}),
    )
    assert plan.splits[name].reasons == ("long-term msg rate 0.0 > -1 msg/s",)
    assert plan.splits[name].detail["msg_rate"] == 0.0


def test_a_bundle_two_reports_list_counts_twice_towards_the_cap() -> None:
    """Java's per-namespace counter counts each acceptance: the old and the new owner's report both list
    the hot bundle, so it takes two places, and the namespace's other hot bundle finds none left."""
    hot, other = ("ten/ns/" + q for q in QUARTERS[:2])
    brokers = {
        "a": _listing(broker_data(), {hot: _stats()}),
        "b": _listing(broker_data(), {hot: _stats(), other: _stats()}),
    }
    data = LoadData(brokers, {hot: bundle_data(rate_in=40_000), other: bundle_data(rate_in=40_000)})
    plan = find_bundles_to_split(
        SplitInputs.of(data), LoadBalancerConfig.from_mapping({"loadBalancerNamespaceMaximumBundles": 4})
    )
    assert list(plan.splits) == [hot]
    assert plan.splits[hot].broker == "b"  # Java's map put: the last report that listed it
    assert [r["bundle"] for r in plan.refused] == [other]


def test_a_range_of_one_hash_value_cannot_be_split() -> None:
    name = "ten/ns/0x00000010_0x00000011"
    load_data = LoadData({"b1": _listing(broker_data(), {name: _stats(topics=2000)})}, {})
    split, refused = _plan(load_data)
    assert split == []
    assert refused == [{"bundle": name, "broker": "b1", "reason": "hash range of one value"}]


@given(st.permutations(list(QUARTERS)), st.integers(min_value=1, max_value=6))
def test_the_result_does_not_depend_on_the_order_the_input_lists(order: list[str], cap: int) -> None:
    names = [f"ten/ns/{q}" for q in order]
    brokers = {
        "b2": _listing(broker_data(), {n: _stats() for n in names[:2]}),
        "b1": _listing(broker_data(), {n: _stats() for n in names[2:]}),
    }
    data = LoadData(brokers, {n: bundle_data(rate_in=40_000) for n in names})
    split, _ = _plan(data, loadBalancerNamespaceMaximumBundles=cap)
    by_broker = sorted((("b1" if n in names[2:] else "b2"), n) for n in names)  # brokers by id, then names
    assert split == sorted(n for _, n in by_broker[: max(0, cap - 4)])


def _hot_snapshot() -> ClusterSnapshot:
    """Two brokers, 90 % and 20 % CPU; the hot broker's biggest bundle passes the message-rate threshold."""
    hot, warm = ("ten/ns/" + q for q in QUARTERS[:2])
    cool = "ten/ns/" + QUARTERS[2]
    brokers = {
        "b1": _listing(cpu_broker(90.0, rate_in=45_000, tp_in=45 * MIB), {hot: _stats(), warm: _stats()}),
        "b2": _listing(cpu_broker(20.0, rate_in=5_000, tp_in=5 * MIB), {cool: _stats()}),
    }
    bundles = {
        hot: bundle_data(rate_in=35_000, tp_in=30 * MIB),
        warm: bundle_data(rate_in=10_000, tp_in=15 * MIB),
        cool: bundle_data(rate_in=5_000, tp_in=5 * MIB),
    }
    return ClusterSnapshot.from_load_data(LoadData(brokers, bundles, {}))


def test_decide_splits_the_hot_bundle_instead_of_shedding_it() -> None:
    """The split check runs before the cycle, as in Pulsar's updateAll, and drops the BundleData: the
    shedder cannot pick the bundle being split, and takes the next one."""
    snap = _hot_snapshot()
    conf = LoadBalancerConfig.from_mapping(
        {"loadBalancerLoadSheddingStrategy": "org.apache.pulsar.broker.loadbalance.impl.OverloadShedder"}
    )
    outcome = decide_on_snapshot(snap, conf)
    assert outcome.split is not None
    assert list(outcome.split.splits) == ["ten/ns/" + QUARTERS[0]]
    assert [d.bundle for d in outcome.decisions] == ["ten/ns/" + QUARTERS[1]]
    assert bool(snap.bundle_has_data[snap.bundle_index("ten/ns/" + QUARTERS[0])])  # the input is unchanged
    off = conf.with_overrides({"loadBalancerAutoBundleSplitEnabled": False}, source="test")
    outcome = decide_on_snapshot(snap, off)
    assert outcome.split is None
    assert [d.bundle for d in outcome.decisions] == ["ten/ns/" + QUARTERS[0]]


def test_the_split_check_needs_two_brokers_and_a_load_data_source() -> None:
    conf = LoadBalancerConfig()
    name = "ten/ns/" + QUARTERS[0]
    alone = ClusterSnapshot.from_load_data(
        LoadData({"b1": _listing(broker_data(), {name: _stats(topics=5000)})}, {})
    )
    assert split_check(alone, conf) is None
    snap = _hot_snapshot()
    snap.split_inputs = None  # the simulator's and replay's snapshots carry none
    assert split_check(snap, conf) is None


def test_decide_prints_and_writes_the_splits(tmp_path: Path) -> None:
    path = tmp_path / "hot.json"
    snap_doc = LoadData(
        {
            "b1": _listing(cpu_broker(80.0), {"ten/ns/" + QUARTERS[0]: _stats()}),
            "b2": _listing(cpu_broker(20.0), {"ten/ns/" + QUARTERS[1]: _stats()}),
        },
        {"ten/ns/" + QUARTERS[0]: bundle_data(rate_in=31_000)},
        {},
    ).to_json()
    path.write_text(json.dumps(snap_doc))
    runner = CliRunner()
    done = runner.invoke(app, ["decide", str(path), "--json"])
    assert done.exit_code == 0, done.output
    out = json.loads(done.stdout)
    assert [s["bundle"] for s in out["split"]] == ["ten/ns/" + QUARTERS[0]]
    assert out["split"][0]["reasons"] == ["long-term msg rate 31000.0 > 30000 msg/s"]
    assert out["split_refused"] == []
    text = runner.invoke(app, ["decide", str(path)], env={"COLUMNS": "120"})
    assert "1 bundle(s) split before the cycle" in text.stdout
    assert "long-term msg rate 31000.0 > 30000 msg/s" in text.stdout
