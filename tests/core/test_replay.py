"""The replay core on hand-made samples: snapshots, ownership changes, the load estimate after a move."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from shedlab.core.replay import (
    build_snapshots,
    estimate_moves,
    ownership_changes,
    replay_cluster,
    strategy_configs,
)
from shedlab.errors import ConfigError
from shedlab.manager.loop import ManagerDecision

RESOURCES = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")
LOW = "public/default/0x00000000_0x80000000"
HIGH = "public/default/0x80000000_0xffffffff"


def _brokers(ticks: list[int]) -> pd.DataFrame:
    rows = []
    for t in ticks:
        for broker, cpu, tp_in, tp_out in (("a:8080", 60.0, 300.0, 100.0), ("b:8080", 20.0, 0.0, 0.0)):
            row = {"cluster": "c", "tick_ms": t, "broker": broker, "num_topics": 2}
            for r in RESOURCES:
                row[f"{r}_usage"] = 0.0
                row[f"{r}_limit"] = 100.0
            row.update({"cpu_usage": cpu, "memory_usage": 50.0})
            row.update({"msg_rate_in": 20.0, "msg_rate_out": 20.0, "msg_throughput_in": tp_in})
            row["msg_throughput_out"] = tp_out
            rows.append(row)
    return pd.DataFrame(rows)


def _bundles(owners: list[tuple[int, str, str]]) -> pd.DataFrame:
    traffic = {LOW: (10.0, 10.0, 75.0, 25.0), HIGH: (10.0, 10.0, 200.0, 100.0)}
    return pd.DataFrame(
        [
            {"cluster": "c", "tick_ms": t, "bundle": bundle, "broker": owner, "topics": 1,
             **dict(zip(("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out"),
                        traffic[bundle], strict=True))}
            for t, bundle, owner in owners
        ]
    )  # fmt: skip


def test_snapshots_hold_the_recorded_view() -> None:
    views = build_snapshots(_brokers([1000, 2000]), _bundles([(1000, LOW, "a:8080"), (1000, HIGH, "a:8080")]))
    assert [v.tick_ms for v in views] == [1000, 2000]
    snap = views[0].snapshot
    assert snap.broker_ids == ("a:8080", "b:8080")
    assert snap.bundle_names == (LOW, HIGH)
    assert list(snap.num_owned_bundles) == [2, 0]
    assert list(views[0].bundle_tp) == [100.0, 300.0] and list(views[0].bundle_rate) == [20.0, 20.0]
    assert views[1].snapshot.bundle_names == ()  # no broker reports a bundle at 2000: its data is dropped


@pytest.mark.parametrize("load_report_first", [True, False])
def test_a_broker_recorded_both_ways_is_seen_as_its_load_report_says(load_report_first: bool) -> None:
    """One row from the load report and one from Prometheus for the same broker and tick (ingest keeps
    both): the leader reads the load report, whichever row Spark hands over last."""
    report = _brokers([1000]).assign(source_kind="load_report", time_ms=1000)
    scraped = report[report["broker"] == "a:8080"].assign(source_kind="prometheus", cpu_usage=95.0)
    both = pd.concat([report, scraped] if load_report_first else [scraped, report], ignore_index=True)
    view = build_snapshots(both, _bundles([(1000, LOW, "a:8080")]))[0]
    assert view.snapshot.broker_ids == ("a:8080", "b:8080")
    assert view.snapshot.resource_usage[0, 0] == 60.0


def test_estimated_load_after_a_hand_made_move() -> None:
    view = build_snapshots(_brokers([1000]), _bundles([(1000, LOW, "a:8080"), (1000, HIGH, "a:8080")]))[0]
    move = ManagerDecision(time_ms=1000, source="a:8080", bundle=LOW, destination="b:8080")
    est = estimate_moves(view, [move])
    # LOW carries 100 of a's 400 throughput: a quarter of a's usage moves, except the JVM heap.
    assert est.moves == [{"bundle_throughput": 100.0, "bundle_msg_rate": 20.0, "usage_share": 0.25}]
    assert est.usage[:, 0].tolist() == [45.0, 35.0]  # cpu 60 − 15, 20 + 15
    assert est.usage[:, 1].tolist() == [50.0, 50.0]  # memory stays
    assert est.throughput.tolist() == [300.0, 100.0]
    assert est.msg_rate.tolist() == [20.0, 60.0]
    assert est.bundles.tolist() == [1, 1]
    assert view.snapshot.resource_usage[0, 0] == 60.0  # the recorded view is unchanged


def test_ownership_changes_between_samples() -> None:
    bundles = _bundles(
        [(1000, LOW, "a:8080"), (2000, LOW, "b:8080"), (3000, LOW, "b:8080"), (1000, HIGH, "a:8080")]
    )
    changes = ownership_changes(bundles)
    assert changes.to_dict("records") == [
        {"cluster": "c", "tick_ms": 2000, "bundle": LOW, "from_broker": "a:8080", "to_broker": "b:8080",
         "previous_tick_ms": 1000}
    ]  # fmt: skip


def test_replay_cluster_tables() -> None:
    ticks = [60_000 * k for k in range(1, 4)]
    owners = [(t, b, "a:8080") for t in ticks for b in (LOW, HIGH)]
    (config,) = strategy_configs(["AvgShedder"])
    tables = replay_cluster("c", config, _brokers(ticks), _bundles(owners))
    assert len(tables["comparison"]) == 3 and len(tables["load"]) == 6
    load = tables["load"]
    assert (load["usage"] > 0).all() and set(load["config_id"]) == {"default"}
    comparison = tables["comparison"]
    assert (comparison["actual_moves"] == 0).all()
    assert comparison["max_usage"].iloc[0] == pytest.approx(np.max(load["usage"].iloc[:2]))


def test_strategy_configs_are_validated() -> None:
    configs = strategy_configs(["AvgShedder", "AvgShedder"], {"loadBalancerSheddingGracePeriodMinutes": 0})
    assert len(configs) == 1 and configs[0].config_id != "default"
    with pytest.raises(ConfigError):
        strategy_configs([])
    # the option is named, not 'strategy'
    with pytest.raises(ConfigError, match=r"^--strategies: unknown strategy pair"):
        strategy_configs(["NoSuchShedder"])


EXTENSIBLE_MANAGER = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"


@pytest.mark.parametrize(
    ("sources", "named"), [({"loadManagerClassName": "broker.conf:4"}, "broker.conf:4"), (None, "--set")]
)
def test_an_override_refused_with_the_pair_is_named_where_it_was_set(
    sources: dict[str, str] | None, named: str
) -> None:
    """A --config file's key was named as --set: replay knew its overrides as one layer."""
    with pytest.raises(ConfigError) as refused:
        strategy_configs(["AvgShedder"], {"loadManagerClassName": EXTENSIBLE_MANAGER}, sources)
    assert str(refused.value).startswith(f"{named}: loadManagerClassName: the extensible load manager")


def test_snapshots_carry_the_report_fields_the_leaders_filters_read() -> None:
    """persistentTopicsEnabled, loadManagerClassName and brokerVersionString of the recorded reports reach
    the snapshot (spec §4.5 steps 2 and 6); a null flag is Pulsar's default, a null class or version none."""
    brokers = _brokers([1000]).assign(
        persistent_topics_enabled=pd.Series([None, False], dtype=object),
        load_manager_class=pd.Series(
            ["org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl", None], dtype=object
        ),
        broker_version=pd.Series(["4.0.1", None], dtype=object),
    )
    snap = build_snapshots(brokers, _bundles([(1000, LOW, "a:8080")]))[0].snapshot
    assert snap.broker_persistent_topics is not None
    assert snap.broker_persistent_topics.tolist() == [True, False]
    assert snap.broker_load_manager_class == (
        "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
        None,
    )
    assert snap.broker_version == ("4.0.1", None)
    unrecorded = build_snapshots(_brokers([1000]), _bundles([(1000, LOW, "a:8080")]))[0].snapshot
    assert unrecorded.broker_persistent_topics is None and unrecorded.broker_version is None
