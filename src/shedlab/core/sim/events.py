"""Scenario events in time order: brokers join or vanish, restarts, traffic and background changes.

:class:`EventQueue` holds every timed event of a run (the start, the scenario's events and the
down/up steps a rolling restart schedules) and applies the ones due at a tick to the
:class:`~shedlab.core.sim.state.ClusterState`: it changes backgrounds itself and returns which broker
slots vanish and which join, so the kernel can tell the leader (removals first, then joins). Traffic
changes are compiled into the traffic model up front; here they are only logged. Every applied event
is logged through the ``log`` callback (the run's ``events`` table).
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shedlab.core.sim.scenario import (
    AddBrokers,
    BackgroundChange,
    RemoveBrokers,
    RollingRestart,
    Scenario,
    TrafficChange,
)
from shedlab.core.sim.state import ClusterState
from shedlab.core.sim.traffic import BundlePopulation

__all__ = ["EventLog", "EventQueue", "Pending", "initial_assignment", "resolve_removal"]

IntArray = NDArray[np.int64]

EventLog = Callable[[int, str, str], None]
"""``log(now_ms, kind, detail)``: one row of the run's events table."""


@dataclass(order=True)
class Pending:
    """One timed event; ties at the same time keep the order they were scheduled in (``seq``)."""

    at_ms: int
    seq: int
    kind: str
    payload: Any = None


class EventQueue:
    """The run's timed events; :meth:`apply_due` applies those due at a tick."""

    def __init__(
        self, scenario: Scenario, start_ms: int, initial_slots: list[int], add_slots: dict[int, list[int]]
    ) -> None:
        self.initial_slots = initial_slots
        self._queue: list[Pending] = []
        self._seq = 0
        self._restarting: dict[int, int] = {}
        """Slots a rolling restart took down, each with the restart step's token: only its own ``up``
        brings the broker back (not a removed broker's, nor another restart's overlapping one)."""
        self.push(start_ms, "start", None)
        for k, event in enumerate(scenario.events):
            at = start_ms + round(event.at * 1000)
            if isinstance(event, AddBrokers):
                self.push(at, "add", (event, add_slots[k]))
            elif isinstance(event, RemoveBrokers):
                self.push(at, "remove", event)
            elif isinstance(event, RollingRestart):
                self.push(at, "rolling_restart", event)
            elif isinstance(event, TrafficChange):
                self.push(at, "traffic", event)
                if event.duration is not None:
                    self.push(at + round(event.duration * 1000), "traffic_end", event)
            elif isinstance(event, BackgroundChange):
                self.push(at, "background", event)

    def push(self, at_ms: int, kind: str, payload: Any) -> None:
        heapq.heappush(self._queue, Pending(at_ms, self._seq, kind, payload))
        self._seq += 1

    def apply_due(
        self, now: int, cluster: ClusterState, bundles: int, rng: np.random.Generator, log: EventLog
    ) -> tuple[list[int], list[int]]:
        """Apply the events due by ``now``; returns (joined, removed) broker slots, each once.

        A broker that goes down and comes back within one tick (a restart) is in both lists.
        ``cluster.alive`` is not changed here: the kernel applies the membership change.
        """
        joined: list[int] = []
        removed: list[int] = []
        state: dict[int, bool] = {}  # liveness after the events processed so far in this tick
        num_slots = cluster.num_slots
        ids = cluster.ids

        def alive(slot: int) -> bool:
            return state.get(slot, bool(cluster.alive[slot]))

        while self._queue and self._queue[0].at_ms <= now:
            item = heapq.heappop(self._queue)
            kind, payload = item.kind, item.payload
            if kind == "start":
                joined.extend(self.initial_slots)
                state.update(dict.fromkeys(self.initial_slots, True))
                log(now, "start", f"{len(self.initial_slots)} brokers, {bundles} bundles")
            elif kind == "add":
                _, slots = payload
                joined.extend(slots)
                state.update(dict.fromkeys(slots, True))
                log(now, "add_brokers", ", ".join(ids[s] for s in slots))
            elif kind == "remove":
                up = [s for s in range(num_slots) if alive(s)]
                # start times: a broker that (re)joined among this tick's events starts now
                started = {s: now if not cluster.alive[s] else int(cluster.start_ts[s]) for s in up}
                slots = resolve_removal(payload, up, rng, started=started)
                # a listed broker that is down for a restart vanishes too: its restart never ends
                down = [b - 1 for b in payload.brokers if self._restarting.pop(b - 1, None) is not None]
                removed.extend(slots)
                state.update(dict.fromkeys(slots, False))
                log(now, "remove_brokers", ", ".join(ids[s] for s in sorted([*slots, *down])))
            elif kind == "rolling_restart":
                everyone = [s for s in range(num_slots) if alive(s)]
                restarted = self._schedule_restarts(payload, item.at_ms, everyone, num_slots)
                log(now, "rolling_restart", f"{restarted} brokers, every {payload.interval:g} s")
            elif kind == "down":
                slot, token = payload
                if alive(slot):
                    removed.append(int(slot))
                    state[slot] = False
                    self._restarting[slot] = token
                    log(now, "broker_down", ids[slot])
            elif kind == "up":
                slot, token = payload
                # only the restart that took the broker down brings it back: a broker that was not
                # up when its turn came (removed, or down for another restart) is left as it is
                if self._restarting.get(slot) == token and not alive(slot):
                    del self._restarting[slot]
                    joined.append(int(slot))
                    state[slot] = True
                    log(now, "broker_up", ids[slot])
            elif kind == "traffic":
                log(now, "traffic", json.dumps({"factor": payload.factor, **payload.select.to_dict()}))
            elif kind == "traffic_end":
                log(now, "traffic_end", json.dumps(payload.select.to_dict()))
            elif kind == "background":
                for b in payload.brokers:
                    if 1 <= b <= num_slots:
                        cluster.background[b - 1] = payload.background
                log(
                    now,
                    "background",
                    json.dumps({"brokers": list(payload.brokers), **payload.background.to_dict()}),
                )
        # removals first, then the brokers alive at the end of the tick's events join (a restart)
        removed = list(dict.fromkeys(removed))
        joined = [s for s in dict.fromkeys(joined) if state.get(s, False)]
        return joined, removed

    def _schedule_restarts(
        self, event: RollingRestart, at_ms: int, everyone: list[int], num_slots: int
    ) -> int:
        """Queue each restarted broker's ``down`` and ``up``, ``interval`` apart, tagged with one token
        per restart (the ``down``'s sequence number) so that only this restart's ``up`` brings the
        broker back; returns how many brokers restart (the listed ones, else ``everyone`` alive)."""
        slots = [b - 1 for b in event.brokers] if event.brokers else everyone
        slots = [int(s) for s in slots if 0 <= s < num_slots]
        for i, s in enumerate(slots):
            down = at_ms + round(i * event.interval * 1000)
            token = self._seq
            self.push(down, "down", (s, token))
            self.push(down + round(event.downtime * 1000), "up", (s, token))
        return len(slots)


def resolve_removal(
    event: RemoveBrokers,
    alive: list[int],
    rng: np.random.Generator,
    *,
    started: dict[int, int] | None = None,
) -> list[int]:
    """The slots a ``remove_brokers`` event takes: listed brokers, or ``count`` newest/oldest/random.

    ``alive`` is in slot order; newest and oldest go by ``started`` (each slot's start time, ties by
    number; default: the slot order), so a broker that restarted is among the newest. Returns slots in
    slot order.
    """
    if event.brokers:
        return [b - 1 for b in event.brokers if b - 1 in alive]
    count = min(event.count, len(alive))
    if event.pick in ("newest", "oldest"):
        by_age = alive if started is None else sorted(alive, key=lambda s: (started[s], s))
        if event.pick == "newest":
            return sorted(by_age[-count:]) if count else []
        return sorted(by_age[:count])
    chosen = rng.choice(len(alive), size=count, replace=False)
    return sorted(alive[int(i)] for i in chosen)


def initial_assignment(
    cluster: ClusterState,
    pop: BundlePopulation,
    mode: str,
    now: int,
    rng: np.random.Generator,
    *,
    pinned_lookups: bool = False,
) -> dict[int, str]:
    """Owners at the first tick: pinned workloads on their brokers; the rest by ``mode``.

    ``placement`` makes every free bundle's clients look it up at ``now`` (Pulsar's path);
    ``round_robin`` and ``random`` assign owners directly. Pinned bundles go round robin over their
    brokers; with ``pinned_lookups`` they are looked up at ``now`` instead, each restricted to that
    broker (returned: bundle index → broker id), so the placement strategy and the leader's
    preallocations see them as Pulsar's would under an isolation policy. A pinned bundle whose broker
    is gone by then (removed by an event at the start) is not given to it: its clients look it up at
    ``now``, unrestricted, like those of any bundle of a vanished broker; so is every bundle when no
    broker is alive at the start (they land once a broker joins).
    """
    restricted: dict[int, str] = {}
    alive = np.flatnonzero(cluster.alive)
    if alive.size == 0:  # every broker gone at the start: the clients look their bundles up until one is up
        cluster.lookup_at[:] = now
        return restricted
    free = np.ones(pop.size, dtype=np.bool_)
    for w_index, pinned in enumerate(pop.pinned_brokers):
        if not pinned:
            continue
        members = np.flatnonzero(pop.workload_index == w_index)
        slots = np.asarray([b - 1 for b in pinned], dtype=np.int64)
        targets = slots[np.arange(members.size) % slots.size]
        free[members] = False
        up = cluster.alive[targets]
        if not up.all():  # the broker vanished at the start
            cluster.lookup_at[members[~up]] = now
            members, targets = members[up], targets[up]
        if pinned_lookups:
            cluster.lookup_at[members] = now
            restricted.update(zip(members.tolist(), (cluster.ids[s] for s in targets.tolist()), strict=True))
        else:
            cluster.owner[members] = targets
    rest = np.flatnonzero(free)
    if mode == "placement":
        cluster.lookup_at[rest] = now
    elif mode == "round_robin":
        cluster.owner[rest] = alive[np.arange(rest.size) % alive.size]
    else:
        cluster.owner[rest] = alive[rng.integers(0, alive.size, rest.size)]
    return restricted
