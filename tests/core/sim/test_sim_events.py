"""Scenario events: their order, membership changes, restarts, backgrounds and the initial assignment."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shedlab.core.sim.events import EventQueue, initial_assignment, resolve_removal
from shedlab.core.sim.scenario import RemoveBrokers, Scenario
from shedlab.core.sim.state import NEVER, ClusterState, broker_layout
from shedlab.core.sim.traffic import build_population
from shedlab.errors import InputError

START = 1_000_000


def scenario(events: list[dict[str, Any]], **overrides: Any) -> Scenario:
    doc: dict[str, Any] = {
        "name": "events",
        "duration": "1h",
        "brokers": [{"count": 3}],
        "workloads": [{"tenants": 1, "namespaces": 1, "bundles": 6}],
        "events": events,
    }
    doc.update(overrides)
    return Scenario.from_mapping(doc, source="test")


class Log:
    def __init__(self) -> None:
        self.rows: list[tuple[int, str, str]] = []

    def __call__(self, now: int, kind: str, detail: str) -> None:
        self.rows.append((now, kind, detail))

    @property
    def kinds(self) -> list[str]:
        return [k for _, k, _ in self.rows]


def setup(s: Scenario) -> tuple[EventQueue, ClusterState]:
    layout = broker_layout(s)
    return EventQueue(s, START, layout.initial_slots, layout.add_slots), ClusterState.new(layout, 6)


def step(queue: EventQueue, cluster: ClusterState, now: int, log: Log) -> tuple[list[int], list[int]]:
    joined, removed = queue.apply_due(now, cluster, 6, np.random.default_rng(0), log)
    cluster.alive[removed] = False
    cluster.alive[joined] = True
    return joined, removed


def test_start_then_events_at_the_first_tick_at_or_after_their_time() -> None:
    queue, cluster = setup(
        scenario(
            [
                {"at": "90s", "kind": "add_brokers", "count": 2},
                {"at": "60s", "kind": "remove_brokers", "brokers": [1]},
            ]
        )
    )
    log = Log()
    assert step(queue, cluster, START, log) == ([0, 1, 2], [])
    assert log.rows == [(START, "start", "3 brokers, 6 bundles")]
    assert step(queue, cluster, START + 59_000, log) == ([], [])
    assert step(queue, cluster, START + 120_000, log) == ([3, 4], [0])  # both due: removal first
    assert log.kinds == ["start", "remove_brokers", "add_brokers"]
    assert log.rows[-1][2] == "broker-0004:8080, broker-0005:8080"


def test_a_restart_within_one_tick_is_both_a_removal_and_a_join() -> None:
    queue, cluster = setup(
        scenario(
            [{"at": "1m", "kind": "rolling_restart", "interval": "2m", "downtime": "30s", "brokers": [2, 3]}]
        )
    )
    log = Log()
    step(queue, cluster, START, log)
    # broker 2 goes down at 1 min and is back at 1.5 min: one 2-minute tick sees both
    assert step(queue, cluster, START + 120_000, log) == ([1], [1])
    assert log.kinds[1:] == ["rolling_restart", "broker_down", "broker_up"]
    assert step(queue, cluster, START + 180_000, log) == ([], [2])  # broker 3 down at 3 min
    assert step(queue, cluster, START + 240_000, log) == ([2], [])
    assert log.rows[1][2] == "2 brokers, every 120 s"


def test_background_change_replaces_the_brokers_definition() -> None:
    queue, cluster = setup(
        scenario([{"at": "1m", "kind": "background", "brokers": [3], "background": {"cpu": 0.3}}])
    )
    log = Log()
    step(queue, cluster, START, log)
    before = cluster.background[0]
    step(queue, cluster, START + 60_000, log)
    assert cluster.background[0] is before
    assert cluster.background[2].cpu.value(0.0) == 0.3
    assert log.rows[-1][1] == "background" and '"brokers": [3]' in log.rows[-1][2]


def test_an_event_naming_a_broker_the_scenario_lacks_is_refused() -> None:
    with pytest.raises(InputError, match=r"events\[0\]\.brokers: background at 60 s names broker 9.*1-3"):
        scenario([{"at": "1m", "kind": "background", "brokers": [3, 9], "background": {"cpu": 0.3}}])


def test_traffic_events_are_only_logged() -> None:
    queue, cluster = setup(scenario([{"at": "1m", "kind": "traffic", "factor": 2, "duration": "1m"}]))
    log = Log()
    step(queue, cluster, START, log)
    assert step(queue, cluster, START + 60_000, log) == ([], [])
    assert step(queue, cluster, START + 120_000, log) == ([], [])
    assert log.kinds == ["start", "traffic", "traffic_end"]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (RemoveBrokers(at=0, brokers=(2, 4, 7)), [1, 6]),  # broker 4 (slot 3) is not alive
        (RemoveBrokers(at=0, count=2, pick="newest"), [4, 6]),
        (RemoveBrokers(at=0, count=2, pick="oldest"), [0, 1]),
        (RemoveBrokers(at=0, count=0, pick="newest"), []),
        (RemoveBrokers(at=0, count=9, pick="oldest"), [0, 1, 4, 6]),
    ],
)
def test_resolve_removal(event: RemoveBrokers, expected: list[int]) -> None:
    assert resolve_removal(event, [0, 1, 4, 6], np.random.default_rng(0)) == expected


def test_random_removal_picks_distinct_alive_brokers_in_slot_order() -> None:
    chosen = resolve_removal(
        RemoveBrokers(at=0, count=3, pick="random"), [0, 2, 5, 7, 9], np.random.default_rng(3)
    )
    assert len(set(chosen)) == 3 and chosen == sorted(chosen) and set(chosen) <= {0, 2, 5, 7, 9}


def test_initial_assignment_modes() -> None:
    s = scenario([])
    pop = build_population(s.workloads, np.random.default_rng(0))
    _, cluster = setup(s)
    initial_assignment(cluster, pop, "round_robin", START, np.random.default_rng(0))
    # nobody alive: no owner, the clients look their bundles up (they land once a broker is up)
    assert (cluster.owner == -1).all() and (cluster.lookup_at == START).all()
    _, cluster = setup(s)
    cluster.alive[[0, 2]] = True
    initial_assignment(cluster, pop, "round_robin", START, np.random.default_rng(0))
    assert cluster.owner.tolist() == [0, 2, 0, 2, 0, 2]
    _, cluster = setup(s)
    cluster.alive[:] = True
    initial_assignment(cluster, pop, "placement", START, np.random.default_rng(0))
    assert (cluster.owner == -1).all() and (cluster.lookup_at == START).all()
    _, cluster = setup(s)
    cluster.alive[:] = True
    initial_assignment(cluster, pop, "random", START, np.random.default_rng(0))
    assert set(cluster.owner.tolist()) <= {0, 1, 2} and (cluster.lookup_at == NEVER).all()


def test_pinned_workloads_start_on_their_brokers_whatever_the_mode() -> None:
    s = scenario([], workloads=[{"tenants": 1, "namespaces": 1, "bundles": 4, "brokers": [2, 3]}])
    pop = build_population(s.workloads, np.random.default_rng(0))
    layout = broker_layout(s)
    cluster = ClusterState.new(layout, pop.size)
    cluster.alive[:] = True
    initial_assignment(cluster, pop, "placement", START, np.random.default_rng(0))
    assert cluster.owner.tolist() == [1, 2, 1, 2] and (cluster.lookup_at == NEVER).all()


@pytest.mark.parametrize("pinned_placement", ["direct", "strategy"])
def test_a_pinned_broker_removed_at_the_start_does_not_keep_its_bundles(pinned_placement: str) -> None:
    # broker 1 fails at tick 0: its pinned bundles were given to the dead slot and their traffic vanished
    from shedlab.core.sim import run_simulation

    s = scenario(
        [{"at": 0, "kind": "remove_brokers", "brokers": [1]}],
        duration="3m",
        simulation={"pinned_placement": pinned_placement},
        workloads=[
            {"name": "hot", "tenant_prefix": "hot", "bundles": 4, "msg_rate_in": 1000, "brokers": [1, 2]},
            {"name": "rest", "tenant_prefix": "rest", "bundles": 2, "msg_rate_in": 10},
        ],
    )
    result = run_simulation(s, strategy="AvgShedder")
    assert result.ticks["msg_rate_total"].tolist() == [2 * (4 * 1000 + 2 * 10)] * 4
    assert result.ticks["bundles_unowned"].tolist() == [0, 0, 0, 0]
    assert set(result.brokers["broker"]) == {"broker-0002:8080", "broker-0003:8080"}
    assert result.brokers.groupby("time_s")["bundles"].sum().tolist() == [6] * 4


def test_bundles_land_on_the_first_broker_up_after_every_broker_left_at_the_start() -> None:
    # every broker removed at tick 0: the bundles were never looked up, unowned for the whole run
    from shedlab.core.sim import run_simulation

    s = scenario(
        [
            {"at": 0, "kind": "remove_brokers", "count": 3},
            {"at": "2m", "kind": "add_brokers", "count": 1},
        ],
        duration="4m",
    )
    result = run_simulation(s, strategy="AvgShedder")
    assert result.ticks["bundles_unowned"].tolist() == [6, 6, 0, 0, 0]
    assert result.ticks["lookups"].tolist() == [0, 0, 6, 0, 0]


@pytest.mark.parametrize(
    ("pick", "expected"), [("oldest", "broker-0002:8080"), ("newest", "broker-0001:8080")]
)
def test_oldest_and_newest_removals_go_by_start_time_after_a_restart(pick: str, expected: str) -> None:
    # broker 1 restarted at 1 min: it is the newest broker, no longer the oldest (the lowest number)
    from shedlab.core.sim import run_simulation

    s = scenario(
        [
            {"at": "1m", "kind": "rolling_restart", "interval": "1m", "downtime": "1m", "brokers": [1]},
            {"at": "4m", "kind": "remove_brokers", "count": 1, "pick": pick},
        ],
        duration="5m",
        brokers=[{"count": 2}],
    )
    result = run_simulation(s, strategy="AvgShedder")
    removed = result.events[result.events["kind"] == "remove_brokers"]["detail"].tolist()
    assert removed == [expected]


@pytest.mark.parametrize(
    "events",
    [
        # removed (failed) while down for its restart: its downtime's end must not revive it
        [
            {"at": "1m", "kind": "rolling_restart", "interval": "1m", "downtime": "2m", "brokers": [2]},
            {"at": "2m", "kind": "remove_brokers", "brokers": [2]},
        ],
        # removed before its turn came: the restart has nothing to take down, nor to bring back
        [
            {"at": "1m", "kind": "remove_brokers", "brokers": [2]},
            {"at": "2m", "kind": "rolling_restart", "interval": "1m", "brokers": [2]},
        ],
        # removed at the same instant as a zero-downtime restart, scheduled after it
        [
            {"at": "1m", "kind": "rolling_restart", "interval": "1m", "downtime": 0, "brokers": [2]},
            {"at": "1m", "kind": "remove_brokers", "brokers": [2]},
        ],
    ],
)
def test_a_removed_broker_is_not_revived_by_a_rolling_restart(events: list[dict[str, Any]]) -> None:
    queue, cluster = setup(scenario(events))
    log = Log()
    for minute in range(10):
        step(queue, cluster, START + minute * 60_000, log)
    assert not cluster.alive[1]
    assert "broker_up" not in log.kinds
    assert [d for _, k, d in log.rows if k == "remove_brokers"] == ["broker-0002:8080"]


def test_overlapping_restarts_bring_a_broker_back_at_the_end_of_the_restart_that_took_it_down() -> None:
    queue, cluster = setup(
        scenario(
            [
                {"at": "1m", "kind": "rolling_restart", "interval": "1m", "downtime": "3m", "brokers": [2]},
                {"at": "2m", "kind": "rolling_restart", "interval": "1m", "downtime": "1m", "brokers": [2]},
            ]
        )
    )
    log = Log()
    alive = []
    for minute in range(6):
        step(queue, cluster, START + minute * 60_000, log)
        alive.append(bool(cluster.alive[1]))
    assert alive == [True, False, False, False, True, True]
