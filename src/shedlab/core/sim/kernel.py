"""The simulation kernel: an explicit tick loop over arrays.

Each tick (``simulation.tick``, 60 s by default) at time T runs, in this order:

1. **Events** due at T: brokers join (scale-out, restart) or vanish (failure, restart); background or
   traffic changes. A vanished broker's bundles become unowned and their clients look them up again
   after the reconnection delay. Membership changes reach the leader at once (Pulsar: the broker's
   ephemeral node appears/disappears): a joining broker writes its first report, the leader drops a
   vanished broker's report, runs ``updateAll`` and calls ``onActiveBrokersChange``.
2. **Traffic** of every bundle at T (:class:`~shedlab.core.sim.traffic.TrafficModel`).
3. **Lookups** due by T, in the order clients made them: the leader answers each one through
   :meth:`LoadManager.lookup` (affinity, preallocation, or the placement strategy) on its current,
   stale view; the bundle's traffic is on its new owner from then on.
4. **Stats and reports**: every broker whose stats are due (``statsUpdateFrequencyInSecs``) samples its
   bundles and host usage (cost model) into its local LocalBrokerData; each broker writes its report only
   when §4.3's rule says so; every write runs the leader's ``updateBundleData`` (time averages,
   preallocation cleanup), in write order.
5. **Shedding**, when due (every ``loadBalancerSheddingIntervalMinutes`` after the leader's election):
   :meth:`LoadManager.do_load_shedding` on the leader's view. An unloaded bundle's traffic leaves its
   broker at once; its clients reconnect (look it up) after ``reconnect_delay``, which lands it on the
   shedding's destination through the one-shot affinity.
6. **Metrics** of the tick, from the true usage sampled in step 4.

The leader is the oldest alive broker. When it vanishes, the next oldest takes over; with
``leader_failover: reset`` (default, as in Pulsar) the new leader starts with an empty recently-unloaded
map, no affinities or preallocations, and fresh strategy instances.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shedlab.config import LoadBalancerConfig
from shedlab.core.sim.hardware import CostModel, HardwareClass
from shedlab.core.sim.metrics import Collector, imbalance, over_placement, over_unloading_flip, ratio, scores
from shedlab.core.sim.reporting import LeaderBundleData, need_update_mask
from shedlab.core.sim.scenario import (
    AddBrokers,
    Background,
    BackgroundChange,
    RemoveBrokers,
    RollingRestart,
    Scenario,
    TrafficChange,
)
from shedlab.core.sim.traffic import Shape, Traffic, TrafficModel, build_population
from shedlab.manager import LoadManager, ManagerDecision
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import pair_config, resolve_pair_name

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

NEVER = np.iinfo(np.int64).max


def build_config(
    scenario: Scenario, strategy: str | None = None, overrides: Mapping[str, Any] | None = None
) -> LoadBalancerConfig:
    """Pulsar defaults ← scenario ``config`` ← strategy pair ← its ``strategy_config`` ← ``overrides``."""
    where = scenario.source or scenario.name
    conf = LoadBalancerConfig().with_overrides(scenario.config, source=f"{where}: config")
    pair = resolve_pair_name(strategy or scenario.strategy)
    conf = pair_config(pair, conf, source="strategy")
    if pair in scenario.strategy_config:
        conf = conf.with_overrides(scenario.strategy_config[pair], source=f"{where}: strategy_config.{pair}")
    if overrides:
        conf = conf.with_overrides(overrides, source="config overrides")
    conf.validate_strategy_pair()
    return conf


def pair_name(conf: LoadBalancerConfig) -> str:
    shed, place = conf.shedding_strategy_name, conf.placement_strategy_name
    return "AvgShedder" if shed == place == "AvgShedder" else f"{shed}+{place}"


@dataclass
class RecordedTick:
    """What polling every broker's ``load-report`` endpoint at one stats time would have returned."""

    time_ms: int
    slots: IntArray
    usage: FloatArray
    limit: FloatArray
    agg: FloatArray  # (n, 4): rate in, rate out, throughput in, throughput out
    num_topics: IntArray
    num_consumers: IntArray
    num_producers: IntArray
    last_update_ms: IntArray
    start_ms: IntArray
    bundle_owner: IntArray  # local ownership (loc_owner) per bundle
    bundle_values: FloatArray  # (4, m)


@dataclass
class Recording:
    """Raw material for :mod:`shedlab.core.sim.recording` (only kept with ``record=True``)."""

    cluster: str
    broker_ids: list[str]
    bundle_names: tuple[str, ...]
    bundle_topics: IntArray
    bundle_consumers: IntArray
    bundle_producers: IntArray
    load_manager_class: str
    ticks: list[RecordedTick]


@dataclass(order=True)
class _Pending:
    at_ms: int
    seq: int
    kind: str
    payload: Any = None


class Simulation:
    """One run of a scenario; call :meth:`run` once."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        strategy: str | None = None,
        config_overrides: Mapping[str, Any] | None = None,
        seed: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        record: bool = False,
    ) -> None:
        self.scenario = scenario
        self.conf = conf = build_config(scenario, strategy, config_overrides)
        self.strategy = pair_name(conf)
        self.seed = scenario.seed if seed is None else int(seed)
        self.progress = progress
        self.record = record
        root = np.random.default_rng(self.seed)
        rng_pop, rng_traffic, self.rng_events, self.rng_manager, rng_phase, self.rng_init = root.spawn(6)
        self.weights = conf.resource_weights()
        self.overload_pct = float(conf.load_balancer_broker_overloaded_threshold_percentage)
        sim = scenario.simulation
        self.tick_ms = max(round(sim.tick * 1000), 1)
        self.start_ms = int(sim.start_time_ms)
        self.reconnect_ms = round(sim.reconnect_delay * 1000)
        self.stats_ms = max(int(conf.stats_update_frequency_in_secs) * 1000, 1)
        self.shed_ms = max(int(conf.load_balancer_shedding_interval_minutes) * 60_000, 1)
        self.quota_ms = max(int(conf.load_balancer_resource_quota_update_interval_minutes) * 60_000, 1)
        self.n_ticks = int(scenario.duration * 1000 // self.tick_ms) + 1

        # bundles and traffic
        pop = self.pop = build_population(scenario.workloads, rng_pop)
        m = pop.size
        shapes: list[tuple[Shape, IntArray | None]] = []
        for w_index, workload in enumerate(scenario.workloads):
            members = np.flatnonzero(pop.workload_index == w_index).astype(np.int64)
            for shape in workload.shapes:
                sel = pop.select(shape.select, rng_pop)
                idx = members if sel is None else np.intersect1d(members, sel)
                shapes.append((shape, None if idx.size == m else idx))
        for event in scenario.events:
            if isinstance(event, TrafficChange):
                until = None if event.duration is None else event.at + event.duration
                step = Shape(
                    "step", (("at", event.at), ("factor", event.factor), ("until", until)), event.select
                )
                sel = pop.select(event.select, rng_pop)
                shapes.append((step, None if sel is None or sel.size == m else sel))
        self.traffic_model = TrafficModel(pop, shapes, rng_traffic, sim.tick)
        self.bundle_index = {name: j for j, name in enumerate(pop.names)}
        self.clients = (pop.producers + pop.consumers).astype(np.int64)

        # broker slots: initial groups, then every add_brokers event in time order
        hardware: list[HardwareClass] = []
        self.background: list[Background] = []
        for group in scenario.brokers:
            for _ in range(group.count):
                hardware.append(scenario.hardware[group.hardware])
                self.background.append(group.background)
        self.initial_slots = list(range(len(hardware)))
        add_slots: dict[int, list[int]] = {}
        for k, event in sorted(enumerate(scenario.events), key=lambda kv: kv[1].at):
            if isinstance(event, AddBrokers):
                first = len(hardware)
                for _ in range(event.count):
                    hardware.append(scenario.hardware[event.hardware])
                    self.background.append(event.background)
                add_slots[k] = list(range(first, len(hardware)))
        n_slots = self.num_slots = len(hardware)
        width = max(4, len(str(n_slots)))
        self.ids = [f"broker-{s + 1:0{width}d}:8080" for s in range(n_slots)]
        self.slot_of = {b: s for s, b in enumerate(self.ids)}
        self.cost = CostModel(hardware)

        # per broker slot
        self.alive = np.zeros(n_slots, dtype=np.bool_)
        self.has_report = np.zeros(n_slots, dtype=np.bool_)
        self.start_ts = np.zeros(n_slots, dtype=np.int64)
        self.loc_usage = np.zeros((n_slots, 5))
        self.loc_limit = np.zeros((n_slots, 5))
        self.loc_agg = np.zeros((n_slots, 4))
        self.loc_bundles = np.zeros(n_slots, dtype=np.int64)
        self.loc_topics_b = np.zeros(n_slots, dtype=np.int64)
        self.loc_consumers = np.zeros(n_slots, dtype=np.int64)
        self.loc_producers = np.zeros(n_slots, dtype=np.int64)
        self.pub_usage = np.zeros((n_slots, 5))
        self.pub_limit = np.zeros((n_slots, 5))
        self.pub_agg = np.zeros((n_slots, 4))
        self.pub_bundles = np.zeros(n_slots, dtype=np.int64)
        self.pub_topics_b = np.zeros(n_slots, dtype=np.int64)
        self.last_update_ms = np.zeros(n_slots, dtype=np.int64)
        self.next_sample_ms = np.full(n_slots, NEVER, dtype=np.int64)
        self.write_rank = rng_phase.permutation(n_slots).astype(np.int64)
        self.stats_phase_ms = (
            rng_phase.integers(0, max(self.stats_ms // self.tick_ms, 1), n_slots).astype(np.int64)
            * self.tick_ms
            if sim.stats_phase == "random"
            else np.zeros(n_slots, dtype=np.int64)
        )

        # per bundle
        self.owner = np.full(m, -1, dtype=np.int64)
        self.lookup_at = np.full(m, NEVER, dtype=np.int64)
        self.last_move_ms = np.full(m, -(2**62), dtype=np.int64)  # "never moved", far from overflow
        self.pub_owner = np.full(m, -1, dtype=np.int64)
        self.pub_values = np.zeros((4, m))
        self.pub_topics = np.zeros(m, dtype=np.int64)
        self.loc_owner = np.full(m, -1, dtype=np.int64)
        self.loc_values = np.zeros((4, m))
        self.loc_topics = np.zeros(m, dtype=np.int64)
        self.leader_data = LeaderBundleData.empty(m)

        # leader and manager
        self.leader: int | None = None
        self.manager = self._new_manager()
        self._retired_bundle_total = 0
        self._retired_broker_total = 0
        self.next_shed_ms = NEVER
        self.next_quota_ms = self.start_ms + self.quota_ms
        self._snap: ClusterSnapshot | None = None
        self._ids_key: bytes = b""
        self._broker_ids: tuple[str, ...] = ()
        self._slot_to_idx = np.full(n_slots + 1, -1, dtype=np.int64)

        # events
        self._queue: list[_Pending] = []
        self._seq = 0
        self._push(self.start_ms, "start", None)
        for k, event in enumerate(scenario.events):
            at = self.start_ms + round(event.at * 1000)
            if isinstance(event, AddBrokers):
                self._push(at, "add", (event, add_slots[k]))
            elif isinstance(event, RemoveBrokers):
                self._push(at, "remove", event)
            elif isinstance(event, RollingRestart):
                self._push(at, "rolling_restart", event)
            elif isinstance(event, TrafficChange):
                self._push(at, "traffic", event)
                if event.duration is not None:
                    self._push(at + round(event.duration * 1000), "traffic_end", event)
            elif isinstance(event, BackgroundChange):
                self._push(at, "background", event)

        # bookkeeping for metrics
        self.collector = Collector()
        self.recording: Recording | None = None
        if record:
            self.recording = Recording(
                cluster=sim.cluster,
                broker_ids=self.ids,
                bundle_names=pop.names,
                bundle_topics=pop.topics,
                bundle_consumers=pop.consumers,
                bundle_producers=pop.producers,
                load_manager_class=conf.load_manager_class_name,
                ticks=[],
            )
        self._pending_flips: list[tuple[int, bool]] = []
        self._landed: list[int] = []
        self._lookups_this_tick = 0
        self._writes_this_tick = np.zeros(n_slots, dtype=np.bool_)
        self._tick_moves = {
            "unloads": 0,
            "msg_rate": 0.0,
            "throughput": 0.0,
            "topics": 0,
            "clients": 0,
            "hot_placements": 0,
        }
        self._repeat_within_grace = 0
        self._repeat_within_window = 0
        grace_ms = int(conf.load_balancer_shedding_grace_period_minutes) * 60_000
        self.grace_ms = grace_ms
        window = scenario.metrics.repeat_move_window
        self.window_ms = 2 * grace_ms if window is None else round(window * 1000)
        self.lookups_total = 0
        self.lookup_paths: dict[str, int] = {"affinity": 0, "preallocated": 0, "placement": 0, "none": 0}

    # ------------------------------------------------------------------------------------------ plumbing
    def _push(self, at_ms: int, kind: str, payload: Any) -> None:
        heapq.heappush(self._queue, _Pending(at_ms, self._seq, kind, payload))
        self._seq += 1

    def _new_manager(self) -> LoadManager:
        return LoadManager(self.conf, seed=self.rng_manager.spawn(1)[0])

    def _log(self, now_ms: int, kind: str, detail: str) -> None:
        self.collector.event_rows.append(
            {
                "time_s": (now_ms - self.start_ms) / 1000.0,
                "kind": kind,
                "detail": detail,
                "time_to_balance_s": None,
            }
        )

    def _slot_name(self, slot: int) -> str:
        return self.ids[slot]

    # ------------------------------------------------------------------------------------------- the loop
    def run(self) -> Any:
        from shedlab.core.sim.result import SimulationResult

        for t in range(self.n_ticks):
            now = self.start_ms + t * self.tick_ms
            self._tick(t, now)
            if self.progress is not None:
                self.progress(t + 1, self.n_ticks)
        return SimulationResult.from_simulation(self)

    def _tick(self, t: int, now: int) -> None:
        self._landed = []
        self._lookups_this_tick = 0
        self._writes_this_tick[:] = False
        self._tick_moves = {
            "unloads": 0,
            "msg_rate": 0.0,
            "throughput": 0.0,
            "topics": 0,
            "clients": 0,
            "hot_placements": 0,
        }
        joined, removed = self._events(now)
        traffic = self.traffic_model.at((now - self.start_ms) / 1000.0)
        if removed or joined:
            self._membership(now, joined, removed)
        if t == 0:
            self._initial_assignment(now)
        self._lookups(now)
        true_state = self._sample_and_publish(now, traffic)
        decisions = self._shed(now, traffic, true_state)
        self._metrics(t, now, traffic, true_state, decisions)

    # --------------------------------------------------------------------------------------------- events
    def _events(self, now: int) -> tuple[list[int], list[int]]:
        joined: list[int] = []
        removed: list[int] = []
        state: dict[int, bool] = {}  # liveness after the events processed so far in this tick

        def alive(slot: int) -> bool:
            return state.get(slot, bool(self.alive[slot]))

        while self._queue and self._queue[0].at_ms <= now:
            item = heapq.heappop(self._queue)
            kind, payload = item.kind, item.payload
            if kind == "start":
                joined.extend(self.initial_slots)
                state.update(dict.fromkeys(self.initial_slots, True))
                self._log(now, "start", f"{len(self.initial_slots)} brokers, {self.pop.size} bundles")
            elif kind == "add":
                event, slots = payload
                joined.extend(slots)
                state.update(dict.fromkeys(slots, True))
                self._log(now, "add_brokers", ", ".join(self.ids[s] for s in slots))
            elif kind == "remove":
                slots = self._resolve_removal(payload, [s for s in range(self.num_slots) if alive(s)])
                removed.extend(slots)
                state.update(dict.fromkeys(slots, False))
                self._log(now, "remove_brokers", ", ".join(self.ids[s] for s in slots))
            elif kind == "rolling_restart":
                event = payload
                everyone = [s for s in range(self.num_slots) if alive(s)]
                slots = [b - 1 for b in event.brokers] if event.brokers else everyone
                slots = [int(s) for s in slots if 0 <= s < self.num_slots]
                for i, s in enumerate(slots):
                    down = item.at_ms + round(i * event.interval * 1000)
                    self._push(down, "down", s)
                    self._push(down + round(event.downtime * 1000), "up", s)
                self._log(now, "rolling_restart", f"{len(slots)} brokers, every {event.interval:g} s")
            elif kind == "down":
                if alive(payload):
                    removed.append(int(payload))
                    state[payload] = False
                    self._log(now, "broker_down", self.ids[payload])
            elif kind == "up":
                if not alive(payload):
                    joined.append(int(payload))
                    state[payload] = True
                    self._log(now, "broker_up", self.ids[payload])
            elif kind == "traffic":
                self._log(now, "traffic", json.dumps({"factor": payload.factor, **payload.select.to_dict()}))
            elif kind == "traffic_end":
                self._log(now, "traffic_end", json.dumps(payload.select.to_dict()))
            elif kind == "background":
                for b in payload.brokers:
                    if 1 <= b <= self.num_slots:
                        self.background[b - 1] = payload.background
                self._log(
                    now,
                    "background",
                    json.dumps({"brokers": list(payload.brokers), **payload.background.to_dict()}),
                )
        # removals first, then the brokers alive at the end of the tick's events join (a restart)
        removed = list(dict.fromkeys(removed))
        joined = [s for s in dict.fromkeys(joined) if state.get(s, False)]
        return joined, removed

    def _resolve_removal(self, event: RemoveBrokers, alive: list[int]) -> list[int]:
        if event.brokers:
            return [b - 1 for b in event.brokers if b - 1 in alive]
        count = min(event.count, len(alive))
        if event.pick == "newest":
            return alive[-count:] if count else []
        if event.pick == "oldest":
            return alive[:count]
        chosen = self.rng_events.choice(len(alive), size=count, replace=False)
        return sorted(alive[int(i)] for i in chosen)

    def _membership(self, now: int, joined: list[int], removed: list[int]) -> None:
        for s in removed:
            self.alive[s] = False
            self.has_report[s] = False
            self.next_sample_ms[s] = NEVER
            lost = np.flatnonzero(self.owner == s)
            if lost.size:
                self._disconnect(lost, now)
            self.loc_owner[self.loc_owner == s] = -1
        for s in joined:
            self.alive[s] = True
            self.start_ts[s] = now
            self.loc_agg[s] = 0.0
            self.loc_bundles[s] = self.loc_topics_b[s] = self.loc_consumers[s] = self.loc_producers[s] = 0
            slot = np.array([s], dtype=np.int64)
            bg = self._background(slot, now)
            zero = np.zeros(1)
            self.loc_usage[s] = self.cost.usage(slot, zero, zero, zero, zero, zero, bg)[0]
            self.loc_limit[s] = self.cost.limits(slot)[0]
            self.next_sample_ms[s] = now + self.stats_phase_ms[s]
        writers = list(dict.fromkeys([*removed, *(s for s in joined if self.alive[s])]))
        self._leader_update(now, np.asarray(writers, dtype=np.int64), 0)
        self._elect(now)
        self.manager.on_active_brokers_change([self.ids[s] for s in np.flatnonzero(self.alive)])

    def _disconnect(self, bundles: IntArray, now: int) -> None:
        """Bundles lose their owner (broker gone): clients reconnect and look them up after the delay."""
        self.owner[bundles] = -1
        self.lookup_at[bundles] = now + self.reconnect_ms
        self._count_moves(bundles, now)

    def _count_moves(self, bundles: IntArray, now: int) -> None:
        last = self.last_move_ms[bundles]
        self._repeat_within_grace += int(np.count_nonzero(now - last <= self.grace_ms))
        self._repeat_within_window += int(np.count_nonzero(now - last <= self.window_ms))
        self.last_move_ms[bundles] = now

    def _elect(self, now: int) -> None:
        alive = np.flatnonzero(self.alive)
        leader = int(alive[0]) if alive.size else None
        if leader == self.leader:
            return
        previous = self.leader
        self.leader = leader
        if leader is None:
            self.next_shed_ms = NEVER
            return
        if previous is not None and self.scenario.simulation.leader_failover == "reset":
            self._retired_bundle_total += self.manager.unload_bundle_total
            self._retired_broker_total += self.manager.unload_broker_total
            self.manager = self._new_manager()
            self.manager.on_active_brokers_change([self.ids[s] for s in alive])
        if previous is not None:
            self._log(now, "leader_change", f"{self.ids[previous]} -> {self.ids[leader]}")
        self.next_shed_ms = now + self.shed_ms

    def _initial_assignment(self, now: int) -> None:
        pop = self.pop
        alive = np.flatnonzero(self.alive)
        if alive.size == 0:
            return
        mode = self.scenario.simulation.initial_assignment
        free = np.ones(pop.size, dtype=np.bool_)
        for w_index, pinned in enumerate(pop.pinned_brokers):
            if not pinned:
                continue
            members = np.flatnonzero(pop.workload_index == w_index)
            slots = np.asarray([b - 1 for b in pinned], dtype=np.int64)
            self.owner[members] = slots[np.arange(members.size) % slots.size]
            free[members] = False
        rest = np.flatnonzero(free)
        if mode == "placement":
            self.lookup_at[rest] = now
        elif mode == "round_robin":
            self.owner[rest] = alive[np.arange(rest.size) % alive.size]
        else:
            self.owner[rest] = alive[self.rng_init.integers(0, alive.size, rest.size)]

    # -------------------------------------------------------------------------------------------- lookups
    def _lookups(self, now: int) -> None:
        due = np.flatnonzero(self.lookup_at <= now)
        if due.size == 0:
            return
        due = due[np.lexsort((due, self.lookup_at[due]))]
        snap = self._snapshot(now)
        names = self.pop.names
        manager = self.manager
        landed = []
        paths = self.lookup_paths
        for j in due.tolist():
            answer = manager.lookup(names[j], snap, now)
            paths[answer.path] += 1
            if answer.broker is None:
                continue
            self.owner[j] = self.slot_of[answer.broker]
            self.lookup_at[j] = NEVER
            landed.append(j)
        self.lookups_total += len(landed)
        self._lookups_this_tick = len(landed)
        self._landed = landed

    # ------------------------------------------------------------------------------------- stats, reports
    def _background(self, slots: IntArray, now: int) -> FloatArray:
        """(n, 3) background fractions (cpu, NIC in, NIC out) of the given slots at ``now``."""
        t = (now - self.start_ms) / 1000.0
        out = np.zeros((slots.size, 3))
        cache: dict[int, tuple[float, float, float]] = {}
        for i, s in enumerate(slots.tolist()):
            bg = self.background[s]
            key = id(bg)
            values = cache.get(key)
            if values is None or not (
                bg.cpu.is_constant and bg.nic_in.is_constant and bg.nic_out.is_constant
            ):
                values = (
                    bg.cpu.value(t, self.rng_events),
                    bg.nic_in.value(t, self.rng_events),
                    bg.nic_out.value(t, self.rng_events),
                )
                cache[key] = values
            out[i] = values
        return out

    def _sample_and_publish(self, now: int, traffic: Traffic) -> dict[str, Any]:
        n_slots = self.num_slots
        pop = self.pop
        owner = self.owner
        owned = owner >= 0
        idx = np.where(owned, owner, n_slots)  # unowned bundles go to an overflow bin
        agg = np.empty((n_slots, 4))
        for k, values in enumerate((traffic.rate_in, traffic.rate_out, traffic.tp_in, traffic.tp_out)):
            agg[:, k] = np.bincount(idx, weights=values, minlength=n_slots + 1)[:n_slots]
        n_bundles = np.bincount(idx, minlength=n_slots + 1)[:n_slots].astype(np.int64)
        topics = np.bincount(idx, weights=pop.topics, minlength=n_slots + 1)[:n_slots].astype(np.int64)
        consumers = np.bincount(idx, weights=pop.consumers, minlength=n_slots + 1)[:n_slots].astype(np.int64)
        producers = np.bincount(idx, weights=pop.producers, minlength=n_slots + 1)[:n_slots].astype(np.int64)
        alive = np.flatnonzero(self.alive)
        bg = self._background(alive, now)
        usage = self.cost.usage(
            alive, agg[alive, 0], agg[alive, 1], agg[alive, 2], agg[alive, 3], topics[alive].astype(float), bg
        )
        limit = self.cost.limits(alive)
        due = self.next_sample_ms[alive] <= now
        samplers = alive[due]
        if samplers.size:
            self.loc_usage[samplers] = usage[due]
            self.loc_limit[samplers] = limit[due]
            self.loc_agg[samplers] = agg[samplers]
            self.loc_bundles[samplers] = n_bundles[samplers]
            self.loc_topics_b[samplers] = topics[samplers]
            self.loc_consumers[samplers] = consumers[samplers]
            self.loc_producers[samplers] = producers[samplers]
            values = np.stack((traffic.rate_in, traffic.rate_out, traffic.tp_in, traffic.tp_out))
            if samplers.size == alive.size:
                self.loc_owner = owner.copy()
                self.loc_values = values
                self.loc_topics = pop.topics.copy()
            else:
                sampling = np.zeros(n_slots + 1, dtype=np.bool_)
                sampling[samplers] = True
                stale = sampling[np.where(self.loc_owner >= 0, self.loc_owner, n_slots)]
                self.loc_owner[stale] = -1
                fresh = sampling[idx]
                self.loc_owner[fresh] = owner[fresh]
                np.copyto(self.loc_values, values, where=fresh)
                self.loc_topics[fresh] = pop.topics[fresh]
            step = self.stats_ms
            behind = (now - self.next_sample_ms[samplers]) // step + 1
            self.next_sample_ms[samplers] += behind * step
        # the report rule, for every alive broker with a report
        reporting = alive[self.has_report[alive]]
        writers = np.zeros(0, dtype=np.int64)
        if reporting.size:
            w = self.weights
            last_u = scores(self.pub_usage[reporting], self.pub_limit[reporting], w) / 100.0
            now_u = scores(self.loc_usage[reporting], self.loc_limit[reporting], w) / 100.0
            mask = need_update_mask(
                last_rate=self.pub_agg[reporting, 0] + self.pub_agg[reporting, 1],
                last_tp=self.pub_agg[reporting, 2] + self.pub_agg[reporting, 3],
                last_bundles=self.pub_bundles[reporting].astype(float),
                last_usage=last_u,
                rate=self.loc_agg[reporting, 0] + self.loc_agg[reporting, 1],
                tp=self.loc_agg[reporting, 2] + self.loc_agg[reporting, 3],
                bundles=self.loc_bundles[reporting].astype(float),
                usage=now_u,
                last_update_ms=self.last_update_ms[reporting],
                now_ms=now,
                conf=self.conf,
            )
            writers = reporting[mask]
            writers = writers[np.argsort(self.write_rank[writers], kind="stable")]
        extra = 0
        if now >= self.next_quota_ms:
            extra = 1
            self.next_quota_ms += self.quota_ms * ((now - self.next_quota_ms) // self.quota_ms + 1)
        if writers.size or extra:
            self._leader_update(now, writers, extra)
        if self.recording is not None and samplers.size:
            self._record(now)
        return {
            "slots": alive,
            "score": scores(usage, limit, self.weights),
            "usage": usage,
            "limit": limit,
            "agg": agg[alive],
            "bundles": n_bundles[alive],
            "topics": topics[alive],
            "background": bg,
        }

    def _leader_update(self, now: int, writers: IntArray, extra: int) -> None:
        """Writes by ``writers`` (in order), each followed by the leader's updateAll; then ``extra`` more."""
        n_slots = self.num_slots
        k = int(writers.size)
        position = np.zeros(n_slots + 1, dtype=np.int64)
        position[writers] = np.arange(1, k + 1)
        new_owner = self.leader_data.apply_writes(
            listed_by=self.pub_owner,
            values=self.pub_values,
            topics=self.pub_topics,
            new_listed_by=self.loc_owner,
            new_values=self.loc_values,
            new_topics=self.loc_topics,
            write_position=position,
            writes=k,
            extra_updates=extra,
        )
        if k:
            gained = (new_owner >= 0) & (position[np.where(new_owner >= 0, new_owner, n_slots)] > 0)
            np.copyto(self.pub_values, self.loc_values, where=gained)
            self.pub_topics = np.where(gained, self.loc_topics, self.pub_topics)
            live = writers[self.alive[writers]]
            self.pub_usage[live] = self.loc_usage[live]
            self.pub_limit[live] = self.loc_limit[live]
            self.pub_agg[live] = self.loc_agg[live]
            self.pub_bundles[live] = self.loc_bundles[live]
            self.pub_topics_b[live] = self.loc_topics_b[live]
            self.last_update_ms[live] = now
            self.has_report[live] = True
            self._writes_this_tick[live] = True
        self.pub_owner = new_owner
        self._snap = None
        if self.manager.preallocated or self.manager.preallocated_bundle_to_broker:
            leader_owned: set[str] = set()
            if self.leader is not None:
                leader_owned = {self.pop.names[j] for j in np.flatnonzero(self.owner == self.leader).tolist()}
            self.manager.on_bundle_data_update(self._snapshot(now), leader_owned=leader_owned)

    # ------------------------------------------------------------------------------------------ snapshot
    def _snapshot(self, now: int) -> ClusterSnapshot:
        """The leader's view: published reports, its bundle time averages (a new object per change)."""
        snap = self._snap
        if snap is not None:
            snap.now_ms = now
            return snap
        n_slots = self.num_slots
        slots = np.flatnonzero(self.alive & self.has_report).astype(np.int64)
        key = slots.tobytes()
        if key != self._ids_key:
            self._ids_key = key
            self._broker_ids = tuple(self.ids[s] for s in slots.tolist())
            self._slot_to_idx = np.full(n_slots + 1, -1, dtype=np.int64)
            self._slot_to_idx[slots] = np.arange(slots.size)
        pub_owner = self.pub_owner
        bins = np.where(pub_owner >= 0, pub_owner, n_slots)
        owner_idx = self._slot_to_idx[bins]
        ld = self.leader_data
        listed = (pub_owner >= 0) & ld.has
        long_in = np.bincount(bins, weights=np.where(listed, ld.long[0], 0.0), minlength=n_slots + 1)
        long_out = np.bincount(bins, weights=np.where(listed, ld.long[1], 0.0), minlength=n_slots + 1)
        snap = ClusterSnapshot.from_columns(
            broker_ids=self._broker_ids,
            resource_usage=self.pub_usage[slots],
            resource_limit=self.pub_limit[slots],
            broker_rates=self.pub_agg[slots],
            num_owned_bundles=self.pub_bundles[slots],
            num_topics=self.pub_topics_b[slots],
            long_term_msg_rate_in=long_in[slots].astype(np.float64),
            long_term_msg_rate_out=long_out[slots].astype(np.float64),
            bundle_names=self.pop.names,
            bundle_owner=owner_idx,
            bundle_has_data=ld.has,
            bundle_sheddable=ld.has,
            short=ld.short,
            long=ld.long,
            bundle_topics=ld.topics,
            now_ms=now,
        )
        self._snap = snap
        return snap

    # ------------------------------------------------------------------------------------------- shedding
    def _shed(self, now: int, traffic: Traffic, state: dict[str, Any]) -> list[ManagerDecision]:
        if now < self.next_shed_ms:
            return []
        self.next_shed_ms += self.shed_ms * ((now - self.next_shed_ms) // self.shed_ms + 1)
        decisions = self.manager.do_load_shedding(self._snapshot(now), now)
        if not decisions:
            return decisions
        moved = []
        score = state["score"]
        hot_line = float(score.mean()) + self.scenario.metrics.over_placement_margin if score.size else np.inf
        true_score = {int(s): float(v) for s, v in zip(state["slots"].tolist(), score.tolist(), strict=True)}
        for d in decisions:
            j = self.bundle_index[d.bundle]
            rate = float(traffic.rate_in[j] + traffic.rate_out[j]) if self.owner[j] >= 0 else 0.0
            tp = float(traffic.tp_in[j] + traffic.tp_out[j]) if self.owner[j] >= 0 else 0.0
            topics = int(self.pop.topics[j]) if self.owner[j] >= 0 else 0
            clients = int(self.clients[j]) if self.owner[j] >= 0 else 0
            self.collector.decision_rows.append(
                {
                    "tick": (now - self.start_ms) // self.tick_ms,
                    "time_s": (now - self.start_ms) / 1000.0,
                    "source": d.source,
                    "bundle": d.bundle,
                    "destination": d.destination,
                    "msg_rate": rate,
                    "throughput": tp,
                    "topics": topics,
                    "clients": clients,
                    "source_score": true_score.get(self.slot_of[d.source], np.nan),
                    "destination_score": true_score.get(self.slot_of[d.destination], np.nan),
                    "reason": json.dumps(d.reason, default=_json_default, sort_keys=True),
                }
            )
            moves = self._tick_moves
            moves["unloads"] += 1
            moves["msg_rate"] += rate
            moves["throughput"] += tp
            moves["topics"] += topics
            moves["clients"] += clients
            if true_score.get(self.slot_of[d.destination], -np.inf) > hot_line:
                moves["hot_placements"] += 1
            if self.owner[j] >= 0:
                self.owner[j] = -1
                moved.append(j)
            self.lookup_at[j] = now + self.reconnect_ms
        if moved:
            self._count_moves(np.asarray(moved, dtype=np.int64), now)
        return decisions

    # -------------------------------------------------------------------------------------------- metrics
    def _metrics(
        self, t: int, now: int, traffic: Traffic, state: dict[str, Any], decisions: list[ManagerDecision]
    ) -> None:
        slots: IntArray = state["slots"]
        usage, limit, agg = state["usage"], state["limit"], state["agg"]
        score = state["score"]
        rate = agg[:, 0] + agg[:, 1]
        tp = agg[:, 2] + agg[:, 3]
        stats = imbalance(score)
        mean = stats["score_mean"]
        margin = self.scenario.metrics
        # over-unloading: sources of the previous cycle that were hot and are now the coldest
        flips = 0
        position = {int(s): i for i, s in enumerate(slots.tolist())}
        for s, hot in self._pending_flips:
            i = position.get(s)
            if (
                hot
                and i is not None
                and over_unloading_flip(float(score[i]), score, margin.over_unloading_margin)
            ):
                flips += 1
        self._pending_flips = []
        if decisions and score.size:
            for source in sorted({d.source for d in decisions}):
                s = self.slot_of[source]
                i = position.get(s)
                self._pending_flips.append((s, i is not None and float(score[i]) > mean))
        # over-placement: destinations pushed over a line by the bundles that landed this tick
        over = 0
        if self._landed and t > 0 and score.size:
            landed = np.asarray(self._landed, dtype=np.int64)
            dests = self.owner[landed]
            uniq = np.unique(dests)
            keep = np.asarray([position[int(s)] for s in uniq.tolist() if int(s) in position], dtype=np.int64)
            uniq = slots[keep]
            if uniq.size:
                minus = np.zeros((uniq.size, 4))
                where = np.searchsorted(uniq, dests)
                ok = (where < uniq.size) & (uniq[np.minimum(where, uniq.size - 1)] == dests)
                for k, values in enumerate(
                    (traffic.rate_in, traffic.rate_out, traffic.tp_in, traffic.tp_out)
                ):
                    minus[:, k] = np.bincount(where[ok], weights=values[landed[ok]], minlength=uniq.size)
                topics_minus = np.bincount(
                    where[ok], weights=self.pop.topics[landed[ok]], minlength=uniq.size
                )
                base = agg[keep] - minus
                without_usage = self.cost.usage(
                    uniq,
                    base[:, 0],
                    base[:, 1],
                    base[:, 2],
                    base[:, 3],
                    state["topics"][keep] - topics_minus,
                    state["background"][keep],
                )
                without = scores(without_usage, limit[keep], self.weights)
                over = int(
                    over_placement(
                        score[keep], without, mean, self.overload_pct, margin.over_placement_margin
                    ).sum()
                )
        snap = self._snap
        reported = np.full(slots.size, np.nan)
        if snap is not None and snap.num_brokers:
            rep_scores = scores(snap.resource_usage, snap.resource_limit, self.weights)
            idx = self._slot_to_idx[slots]
            has = idx >= 0
            reported[has] = rep_scores[idx[has]]
        rep_valid = reported[np.isfinite(reported)]
        moves = self._tick_moves
        time_s = (now - self.start_ms) / 1000.0
        self.collector.tick_rows.append(
            {
                "tick": t,
                "time_s": time_s,
                "brokers": int(slots.size),
                "bundles_unowned": int(np.count_nonzero(self.owner < 0)),
                "msg_rate_total": float(rate.sum()),
                "throughput_total": float(tp.sum()),
                **stats,
                "msg_rate_max_min_ratio": ratio(rate),
                "throughput_max_min_ratio": ratio(tp),
                "brokers_overloaded": int(np.count_nonzero(score > self.overload_pct)),
                "unloads": moves["unloads"],
                "msg_rate_moved": moves["msg_rate"],
                "throughput_moved": moves["throughput"],
                "topics_disconnected": moves["topics"],
                "clients_disconnected": moves["clients"],
                "lookups": self._lookups_this_tick,
                "over_placements": over,
                "hot_placements": moves["hot_placements"],
                "over_unloading_flips": flips,
                "reports_published": int(np.count_nonzero(self._writes_this_tick)),
                "reported_score_spread": float(rep_valid.max() - rep_valid.min())
                if rep_valid.size
                else np.nan,
                "balanced": bool(stats["score_spread"] < margin.balance_threshold) if score.size else False,
                "unload_bundle_total": self._retired_bundle_total + self.manager.unload_bundle_total,
                "unload_broker_total": self._retired_broker_total + self.manager.unload_broker_total,
            }
        )
        pct = usage / np.where(limit > 0, limit, np.inf) * 100.0
        n = slots.size
        self.collector.add_brokers(
            tick=np.full(n, t, dtype=np.int64),
            time_s=np.full(n, time_s),
            broker=slots.copy(),
            score=score,
            cpu_pct=pct[:, 0],
            memory_pct=pct[:, 1],
            direct_memory_pct=pct[:, 2],
            bandwidth_in_pct=pct[:, 3],
            bandwidth_out_pct=pct[:, 4],
            msg_rate_in=agg[:, 0].copy(),
            msg_rate_out=agg[:, 1].copy(),
            msg_rate=rate,
            throughput_in=agg[:, 2].copy(),
            throughput_out=agg[:, 3].copy(),
            throughput=tp,
            bundles=state["bundles"],
            topics=state["topics"],
            reported_score=reported,
            published=self._writes_this_tick[slots].copy(),
            leader=slots == (self.leader if self.leader is not None else -1),
        )

    # ------------------------------------------------------------------------------------------ recording
    def _record(self, now: int) -> None:
        assert self.recording is not None
        slots = np.flatnonzero(self.alive).astype(np.int64)
        self.recording.ticks.append(
            RecordedTick(
                time_ms=now,
                slots=slots,
                usage=self.loc_usage[slots].copy(),
                limit=self.loc_limit[slots].copy(),
                agg=self.loc_agg[slots].copy(),
                num_topics=self.loc_topics_b[slots].copy(),
                num_consumers=self.loc_consumers[slots].copy(),
                num_producers=self.loc_producers[slots].copy(),
                last_update_ms=self.last_update_ms[slots].copy(),
                start_ms=self.start_ts[slots].copy(),
                bundle_owner=self.loc_owner.copy(),
                bundle_values=self.loc_values.copy(),
            )
        )


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.ndarray,)):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    return str(value)
