"""The simulation kernel: determinism, the leader's stale view, moves, events, metrics, outputs."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
import pytest
from builders import FULL

from shedlab.config import STRATEGY_PACKAGE
from shedlab.core.local_parquet import read_local_parquet
from shedlab.core.sim import Scenario, SimulationResult, load_scenario, run_simulation
from shedlab.core.sim.kernel import Simulation
from shedlab.core.sim.metrics import over_placement, over_unloading_flip, ratio, time_to_balance
from shedlab.core.sim.recording import iter_load_reports, prometheus_responses, write_recording
from shedlab.core.sim.scenario import build_config, parse_scenario_text
from shedlab.errors import InputError
from shedlab.manager.loop import ManagerDecision
from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import LocalBrokerData


def small(**overrides: Any) -> Scenario:
    doc: dict[str, Any] = {
        "name": "small",
        "duration": "20m",
        "seed": 1,
        "strategy": "AvgShedder",
        "hardware": {"standard": {"cores": 16, "nic_gbps": 25}},
        "brokers": [{"count": 4}],
        "workloads": [
            {
                "tenants": 1,
                "namespaces": 4,
                "bundles": 8,
                "msg_rate_in": {"dist": "lognormal", "median": 8000, "sigma": 0.6},
                "shapes": [{"kind": "noise", "sigma": 0.05}],
            }
        ],
    }
    doc.update(overrides)
    return Scenario.from_mapping(doc, source="test")


def frames(result: SimulationResult) -> list[pd.DataFrame]:
    return [result.ticks, result.brokers, result.decisions, result.events]


@pytest.mark.parametrize("strategy", ["AvgShedder", "ThresholdShedder+LeastResourceUsageWithWeight"])
def test_same_seed_gives_identical_results(strategy: str) -> None:
    scenario = small(events=[{"at": "5m", "kind": "add_brokers", "count": 2}])
    a = run_simulation(scenario, strategy=strategy, seed=5)
    b = run_simulation(scenario, strategy=strategy, seed=5)
    for x, y in zip(frames(a), frames(b), strict=True):
        pd.testing.assert_frame_equal(x, y)
    assert a.summary == b.summary
    c = run_simulation(scenario, strategy=strategy, seed=6)
    assert not a.brokers["score"].equals(c.brokers["score"])


def test_result_shapes_and_config() -> None:
    result = run_simulation(small(), strategy="ThresholdShedder+LeastResourceUsageWithWeight")
    assert len(result.ticks) == 21  # 0..20 minutes
    assert len(result.brokers) == 21 * 4
    assert result.strategy == "ThresholdShedder+LeastResourceUsageWithWeight"
    assert result.config == {
        "loadBalancerLoadPlacementStrategy": f"{STRATEGY_PACKAGE}.LeastResourceUsageWithWeight"
    }
    assert json.loads(json.dumps(result.summary)) == result.summary
    assert set(result.decisions.columns) >= {"tick", "time_s", "source", "bundle", "destination", "reason"}
    assert result.events["kind"].tolist()[0] == "start"


def test_config_layers() -> None:
    scenario = small(
        config={"maxUnloadPercentage": 0.3}, strategy_config={"AvgShedder": {"maxUnloadPercentage": 0.5}}
    )
    assert build_config(scenario).max_unload_percentage == 0.5
    assert build_config(scenario, "UniformLoadShedder+LeastLongTermMessageRate").max_unload_percentage == 0.3
    assert build_config(scenario, None, {"maxUnloadPercentage": 0.7}).max_unload_percentage == 0.7


def test_unloaded_traffic_leaves_at_once_and_arrives_after_the_reconnection_delay() -> None:
    result = run_simulation(load_scenario("over-unloading-90-10"), strategy="AvgShedder")
    first = result.decisions.iloc[0]
    tick = int(first["tick"])
    moved = result.decisions[result.decisions["tick"] == tick]
    ticks = result.ticks.set_index("tick")
    assert ticks.loc[tick, "unloads"] == len(moved)
    # the next tick's lookups land exactly those bundles, through the affinity, on the destination
    assert ticks.loc[tick + 1, "lookups"] == len(moved)
    brokers = result.brokers.set_index(["tick", "broker"])
    dest = first["destination"]
    assert brokers.loc[(tick + 1, dest), "bundles"] == brokers.loc[(tick, dest), "bundles"] + len(moved)
    assert int(cast(int, ticks.loc[tick, "topics_disconnected"])) == int(moved["topics"].sum()) > 0
    assert int(cast(int, ticks.loc[tick, "clients_disconnected"])) == int(moved["clients"].sum()) > 0


def test_a_long_reconnection_delay_keeps_bundles_unowned() -> None:
    base = load_scenario("over-unloading-90-10")
    scenario = dataclasses.replace(
        base, simulation=dataclasses.replace(base.simulation, reconnect_delay=150.0)
    )
    result = run_simulation(scenario, strategy="AvgShedder")
    assert (result.ticks["bundles_unowned"] > 0).any()
    tick = int(result.decisions["tick"].iloc[0])
    unowned = result.ticks.set_index("tick")["bundles_unowned"]
    assert unowned.loc[tick + 1] > 0 and unowned.loc[tick + 2] > 0


def test_leader_decides_on_published_reports_only() -> None:
    """A report is written only when §4.3 says so; between writes the leader's view does not move."""
    result = run_simulation(small(), strategy="AvgShedder")
    b = result.brokers
    assert b["published"].sum() < len(b)  # most samples are not written (5 % noise < 10 % threshold)
    quiet = b[~b["published"] & (b["tick"] > 0)]
    # when a broker did not write, the leader still holds the score of its last written report
    for broker, rows in quiet.groupby("broker"):
        history = b[b["broker"] == broker].set_index("tick")
        for tick in rows["tick"].tolist()[:5]:
            written = history[(history.index < tick) & history["published"]]
            if len(written):
                assert history.loc[tick, "reported_score"] == pytest.approx(written["score"].iloc[-1])


def test_every_report_is_rewritten_after_the_max_interval() -> None:
    scenario = small(workloads=[{"bundles": 8, "msg_rate_in": 1000}], duration="40m")
    result = run_simulation(scenario, strategy="AvgShedder")
    per_tick = result.ticks.set_index("tick")["reports_published"]
    # constant traffic: written at start, then only when older than 15 minutes (checked each minute)
    assert per_tick.loc[0] == 4
    assert per_tick.loc[1:15].sum() == 0
    assert per_tick.loc[16] == 4


def test_broker_loss_replaces_bundles_through_lookups() -> None:
    scenario = small(events=[{"at": "5m", "kind": "remove_brokers", "brokers": [2]}])
    result = run_simulation(scenario, strategy="ThresholdShedder+LeastLongTermMessageRate")
    ticks = result.ticks.set_index("tick")
    assert ticks.loc[4, "brokers"] == 4 and ticks.loc[5, "brokers"] == 3
    lost = int(
        cast(int, result.brokers.set_index(["tick", "broker"]).loc[(4, "broker-0002:8080"), "bundles"])
    )
    assert ticks.loc[6, "lookups"] == lost and ticks.loc[6, "bundles_unowned"] == 0
    # nothing is unloaded (every bundle keeps its owner but the lost broker's), and each orphaned bundle
    # moves once, so no bundle moves again within the window
    assert result.decisions.empty
    assert result.summary["moved_again_within_window"] == 0
    assert result.summary["unloads"] == 0
    assert "remove_brokers" in result.events["kind"].tolist()


def test_rolling_restart_moves_leadership_and_resets_its_state() -> None:
    scenario = small(
        duration="30m", events=[{"at": "5m", "kind": "rolling_restart", "interval": "3m", "downtime": "1m"}]
    )
    sim = Simulation(scenario, strategy="AvgShedder")
    result = sim.run()
    kinds = result.events["kind"].tolist()
    assert kinds.count("broker_down") == 4 and kinds.count("broker_up") == 4
    assert "leader_change" in kinds
    assert result.summary["brokers_final"] == 4
    leaders = result.brokers[result.brokers["leader"]].groupby("tick")["broker"].first()
    assert leaders.nunique() >= 2


def test_a_restarted_broker_does_not_take_the_leadership_back() -> None:
    # broker 1 restarted and, numbered first, was elected again at once: a second leader change (and,
    # with leader_failover: reset, a second loss of the leader's state) for one restart
    scenario = small(
        duration="12m",
        events=[
            {"at": "2m", "kind": "rolling_restart", "interval": "5m", "downtime": "1m", "brokers": [1, 3]}
        ],
    )
    result = run_simulation(scenario)
    changes = result.events[result.events["kind"] == "leader_change"]
    assert changes[["time_s", "detail"]].values.tolist() == [[120.0, "broker-0001:8080 -> broker-0002:8080"]]
    leaders = result.brokers[result.brokers["leader"]].set_index("time_s")["broker"]
    assert leaders.loc[:60.0].eq("broker-0001:8080").all()
    assert leaders.loc[120.0:].eq("broker-0002:8080").all()


def test_a_restart_is_two_updates_of_the_leaders_bundle_data() -> None:
    # A restarted broker's lock node is deleted, then created again: two notifications, so the leader
    # runs updateAll (and updateBundleData, one more sample of every listed bundle) twice
    # (ModularLoadManagerImpl.handleDataNotification); the two were merged into one update
    scenario = small(
        duration="4m",
        events=[{"at": "2m", "kind": "rolling_restart", "interval": "1m", "downtime": 0, "brokers": [3]}],
    )
    sim = Simulation(scenario)
    publishing = sim.publishing
    publish = publishing.publish
    lock_updates: list[tuple[int, list[int], int]] = []

    def counted(now: int, writers: Any, extra: int, alive: Any, *, lock: bool = False) -> None:
        before = publishing.leader_data.updates
        publish(now, writers, extra, alive, lock=lock)
        if lock and now > sim.start_ms:
            lock_updates.append((now, writers.tolist(), publishing.leader_data.updates - before))

    publishing.publish = counted  # type: ignore[method-assign]
    sim.run()
    assert sum(n for _, _, n in lock_updates) == 2
    assert [writers for _, writers, _ in lock_updates] == [[2], [2]]  # the deletion, then the creation


def test_the_oldest_alive_broker_leads_after_a_failure() -> None:
    # broker 2 restarts at the start; when broker 1 fails the oldest is broker 3, not the restarted 2
    scenario = small(
        duration="5m",
        events=[
            {"at": "0s", "kind": "rolling_restart", "interval": "1m", "downtime": "1m", "brokers": [2]},
            {"at": "3m", "kind": "remove_brokers", "brokers": [1]},
        ],
    )
    result = run_simulation(scenario)
    changes = result.events[result.events["kind"] == "leader_change"]
    assert changes["detail"].tolist() == ["broker-0001:8080 -> broker-0003:8080"]


def test_a_leader_restarting_within_a_step_is_a_new_leader() -> None:
    # a single broker restarting within one tick: it leads again, but as a new leader (fresh state)
    scenario = small(
        duration="5m",
        brokers=[{"count": 1}],
        events=[{"at": "150s", "kind": "rolling_restart", "interval": "1m", "downtime": "10s"}],
    )
    result = run_simulation(scenario)
    changes = result.events[result.events["kind"] == "leader_change"]
    assert changes[["time_s", "detail"]].values.tolist() == [[180.0, "broker-0001:8080 -> broker-0001:8080"]]


def test_every_scenario_feature_runs(tmp_path: Path) -> None:
    scenario = parse_scenario_text(FULL, "full")
    result = run_simulation(scenario)
    assert len(result.ticks) == 121
    kinds = set(result.events["kind"])
    assert {
        "add_brokers",
        "remove_brokers",
        "rolling_restart",
        "traffic",
        "traffic_end",
        "background",
    } <= kinds
    result.write(tmp_path)


def test_write_outputs(tmp_path: Path) -> None:
    result = run_simulation(small(), strategy="AvgShedder")
    paths = result.write(tmp_path / "out")
    assert {p.name for p in paths} == {
        "ticks.parquet",
        "brokers.parquet",
        "decisions.parquet",
        "events.parquet",
        "skips.parquet",
        "summary.json",
    }
    pd.testing.assert_frame_equal(read_local_parquet(tmp_path / "out" / "ticks.parquet"), result.ticks)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["strategy"] == "AvgShedder" and "config" in summary


def test_a_local_directory_whose_name_looks_like_a_url_is_a_local_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pandas took ``s3:x/ticks.parquet`` and ``http:x/…`` for URLs (S3, urllib) and Arrow a relative one
    for a URI: the files are written where the path says, through Arrow's local filesystem."""
    monkeypatch.chdir(tmp_path)
    result = run_simulation(small(), strategy="AvgShedder")
    for name in ("s3:x", "http:x"):
        result.write(name)
        pd.testing.assert_frame_equal(read_local_parquet(tmp_path / name / "ticks.parquet"), result.ticks)
    with pytest.raises(InputError, match=r"--out: a local directory is expected, not a URI"):
        result.write(Path("s3://bucket/run"))  # a Path has made it s3:/bucket/run


def test_recording_is_pulsar_json_and_prometheus(tmp_path: Path) -> None:
    scenario = small(duration="5m", events=[{"at": "2m", "kind": "add_brokers", "count": 1}])
    result = run_simulation(scenario, strategy="AvgShedder", record=True)
    lines = list(iter_load_reports(result))
    assert len(lines) == 4 * 2 + 5 * 4  # 4 brokers at 0-1 min, 5 brokers at 2-5 min
    first = lines[0]
    assert set(first) == {"timestamp", "broker", "cluster", "report"}
    report = LocalBrokerData.from_json(JsonReader(first["report"], "test"))
    assert report.loadReportType if hasattr(report, "loadReportType") else True
    assert first["report"]["loadReportType"] == "LocalBrokerData"
    assert report.numBundles == len(report.lastStats) == len(report.bundles)
    # lastUpdate == timestamp marks the reports the leader received at that time
    written = [ln for ln in lines if ln["report"]["lastUpdate"] == ln["timestamp"]]
    assert sum(result.ticks["reports_published"]) == len(written)
    # every bundle is reported by exactly one broker at every time
    by_time: dict[int, list[str]] = {}
    for ln in lines:
        by_time.setdefault(ln["timestamp"], []).extend(ln["report"]["lastStats"])
    assert all(len(v) == len(set(v)) == 32 for v in by_time.values())
    responses = prometheus_responses(result)
    cpu = responses["pulsar_lb_cpu_usage"]
    assert cpu["status"] == "success" and cpu["data"]["resultType"] == "matrix"
    series = cpu["data"]["result"][0]
    assert series["metric"] == {
        "__name__": "pulsar_lb_cpu_usage",
        "cluster": "sim-cluster",
        "broker": "broker-0001",
        "metric": "loadBalancing",
    }
    ts, value = series["values"][0]
    assert ts == result.ticks["time_s"].iloc[0] + 1_704_067_200 and isinstance(value, str)
    bundle_series = responses["pulsar_bundle_msg_rate_in"]["data"]["result"]
    assert {s["metric"]["metric"] for s in bundle_series} == {"loadBalancing"}
    paths = write_recording(result, tmp_path)
    assert (tmp_path / "load-reports.jsonl").read_text().count("\n") == len(lines)
    assert len(paths) == 1 + 5 + 7


def test_metric_definitions() -> None:
    assert ratio(np.array([2.0, 4.0])) == 2.0
    assert ratio(np.array([0.0, 4.0])) == float("inf")
    assert ratio(np.array([0.0, 0.0])) == 1.0
    hit = over_placement(np.array([90.0, 70.0, 55.0]), np.array([80.0, 50.0, 50.0]), 50.0, 85.0, 10.0)
    assert hit.tolist() == [True, True, False]
    assert over_unloading_flip(20.0, np.array([20.0, 60.0, 70.0]), 5.0)
    assert not over_unloading_flip(48.0, np.array([48.0, 50.0, 52.0]), 5.0)
    times = np.arange(0, 600, 60, dtype=float)
    spread = np.array([30, 20, 8, 12, 8, 7, 6, 5, 5, 5], dtype=float)
    assert time_to_balance(times, spread, 10.0, 180.0, 0.0, 600.0) == 240.0
    assert time_to_balance(times, spread, 10.0, 180.0, 0.0, 180.0) == 120.0  # the window ends early
    assert time_to_balance(times, spread + 20, 10.0, 180.0, 0.0, 600.0) is None


def test_a_restart_within_one_tick_brings_the_broker_back() -> None:
    scenario = small(events=[{"at": "5m", "kind": "rolling_restart", "interval": "2m", "downtime": "0s"}])
    result = run_simulation(scenario, strategy="AvgShedder")
    assert result.summary["brokers_final"] == 4
    assert (result.ticks["brokers"] == 4).all()
    assert result.events["kind"].tolist().count("broker_up") == 4
    # the restarted broker comes back empty: its bundles were looked up again elsewhere
    restarted = result.brokers.set_index(["tick", "broker"]).loc[(5, "broker-0001:8080"), "bundles"]
    assert restarted == 0
    # a downtime of 10 s is seen at one tick (events take effect at the first tick at or after them)
    short = run_simulation(
        small(events=[{"at": "5m", "kind": "rolling_restart", "interval": "2m", "downtime": "10s"}]),
        strategy="AvgShedder",
    )
    assert short.ticks.set_index("tick")["brokers"].loc[[5, 6, 7, 8]].tolist() == [3, 4, 3, 4]


def test_the_result_and_lower_modules_do_not_import_the_kernel() -> None:
    code = (
        "import sys, shedlab.core.sim.result, shedlab.core.sim.recording, shedlab.core.sim.events; "
        "assert 'shedlab.core.sim.kernel' not in sys.modules, sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_reported_scores_exist_from_the_first_report_whatever_the_shedding_interval() -> None:
    # reported_score read the leader's snapshot only when a lookup or a shedding had built it since the
    # last write: NaN at tick 0 (reports written, nothing placed) and between 3-minute sheddings
    scenario = small(
        duration="10m",
        config={"loadBalancerSheddingIntervalMinutes": 3},
        simulation={"initial_assignment": "round_robin"},
    )
    result = run_simulation(scenario)
    assert result.brokers["published"].iloc[:4].all()  # every broker wrote its first report at tick 0
    assert not result.brokers["reported_score"].isna().any()
    assert not result.ticks["reported_score_spread"].isna().any()


def test_the_leaders_bundle_data_writes_follow_its_election() -> None:
    # PulsarService starts LoadResourceQuotaUpdaterTask when a broker becomes leader (first run one
    # interval later) and cancels it on loss: after a failover at 5 min, the new leader's first
    # bundle-data write (§4.9) is at 20 min, not on the old leader's 15-min grid
    scenario = small(duration="25m", events=[{"at": "5m", "kind": "remove_brokers", "brokers": [1]}])
    sim = Simulation(scenario)
    due = sim.publishing.quota_updates_due
    writes: list[int] = []

    def recorded(now: int) -> int:
        n = due(now)
        writes.extend([(now - sim.start_ms) // 60_000] * n)
        return n

    sim.publishing.quota_updates_due = recorded  # type: ignore[method-assign]
    sim.run()
    assert writes == [20]


def test_an_idle_broker_above_the_threshold_writes_again_at_its_first_check() -> None:
    # ModularLoadManagerImpl.start() writes the lock node but leaves lastData empty, so the first
    # needBrokerDataUpdate compares with an empty report: 20 % CPU of a co-located process is a change
    # of 20 points (> 10 %), and the joining broker writes by the rule in its first tick too
    scenario = small(
        duration="4m",
        events=[{"at": "2m", "kind": "add_brokers", "count": 1, "background": {"cpu": 0.2}}],
    )
    sim = Simulation(scenario, strategy="ThresholdShedder+LeastLongTermMessageRate")
    writers = sim.publishing.writers
    by_tick: list[list[int]] = []

    def recorded(now: int, alive: Any) -> Any:
        found = writers(now, alive)
        by_tick.append(found.tolist())
        return found

    sim.publishing.writers = recorded  # type: ignore[method-assign]
    for _ in range(3):
        sim.step()
    new = 4  # the fifth slot: the broker added at 2 min
    assert new in by_tick[2] and all(new not in w for w in by_tick[:2])


def test_a_broker_restarting_within_a_step_is_forgotten_by_the_strategies() -> None:
    # its lock node is deleted, then created again: Pulsar's leader runs updateAll on the deletion
    # (cleanupDeadBrokersData -> onActiveBrokersChange without the broker) before the broker is back,
    # so LeastResourceUsageWithWeight's history of it is gone, even when both land in one tick
    scenario = small(
        duration="4m",
        leader_state={"brokers": [{"broker": 2, "usage_history": 0.9}]},
        events=[
            {"at": "150s", "kind": "rolling_restart", "interval": "1m", "downtime": "10s", "brokers": [2]}
        ],
    )
    sim = Simulation(scenario, strategy="ThresholdShedder+LeastResourceUsageWithWeight")
    for _ in range(3):
        sim.step()
    placement = cast(Any, sim.manager).placement
    assert "broker-0002:8080" in placement.history
    sim.step()  # 180 s: broker 2 goes down and comes back; its bundles are looked up at the next tick
    assert sim.cluster.alive[1] and "broker-0002:8080" not in placement.history


def test_without_the_load_balancer_brokers_write_no_reports_after_their_lock_node() -> None:
    # PulsarService schedules LoadReportUpdaterTask, and on election LoadResourceQuotaUpdaterTask, only
    # when loadBalancerEnabled: the leader then knows each broker's first report and nothing newer
    scenario = small(duration="20m", config={"loadBalancerEnabled": False})
    sim = Simulation(scenario, strategy="ThresholdShedder+LeastLongTermMessageRate")
    sim.run()
    assert (sim.publishing.last_update_ms[:4] == sim.start_ms).all()
    assert sim.publishing.leader_data.updates == 4  # the four lock nodes at the start
    assert sim.publishing.published.bundles[:4].tolist() == [0, 0, 0, 0]


def test_unloading_a_bundle_no_broker_owns_leaves_its_pending_lookup_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A decision on a bundle still in transit (unloaded a tick ago, 150 s to reconnect): Pulsar's unload
    # of an unowned bundle does nothing, so its clients still look it up when they were going to.
    base = load_scenario("over-unloading-90-10")
    scenario = dataclasses.replace(
        base, simulation=dataclasses.replace(base.simulation, reconnect_delay=150.0)
    )
    sim = Simulation(scenario, strategy="AvgShedder")
    while sim.step() and not (sim.cluster.owner < 0).any():
        pass
    j = int(np.flatnonzero(sim.cluster.owner < 0)[0])
    due = int(sim.cluster.lookup_at[j])
    bundle, source = sim.pop.names[j], sim.cluster.ids[0]
    decision = ManagerDecision(sim.now_ms + sim.tick_ms, source, bundle, sim.cluster.ids[1])
    monkeypatch.setattr(sim.manager, "do_load_shedding", lambda snapshot, now: [decision])
    sim.step()
    rows = sim.metrics.collector.decision_rows
    assert rows[-1]["bundle"] == bundle and rows[-1]["msg_rate"] == 0.0  # recorded, nothing disconnected
    assert int(sim.cluster.lookup_at[j]) == due  # not pushed back by another reconnection delay
    assert sim.cluster.owner[j] < 0 and due > sim.now_ms
