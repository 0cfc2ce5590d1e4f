"""Scenario files: the cluster, its traffic, the events, the strategy pair and its Pulsar configuration.

A scenario is a YAML document (format: ``docs/scenarios.md``). :func:`load_scenario` reads a file or
a built-in scenario by name (``src/shedlab/data/scenarios/*.yaml``) and validates everything up front:
an error names the file and the dotted field path, and an unknown field suggests the closest known one.
Scenarios are plain frozen dataclasses, so they can be pickled to Spark executors.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.resources
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shedlab.config import STRATEGY_KEYS, LoadBalancerConfig, UniqueKeyLoader, layered_config, parse_yaml_text
from shedlab.core.sim.hardware import HardwareClass, parse_hardware
from shedlab.core.sim.spec import Node
from shedlab.core.sim.traffic import (
    MAX_FACTOR,
    Selector,
    Signal,
    Workload,
    bundles_at_most,
    namespace_bundles,
    namespace_plan,
    parse_selector,
    parse_signal,
    parse_workload,
    selectable_names,
    unmatched_pattern,
    workload_names,
)
from shedlab.errors import ConfigError, InputError, ShedlabError, did_you_mean, read_user_text
from shedlab.model.formats import SECONDS_LIKE_MS, FormatError, epoch_ms
from shedlab.model.pulsar import is_named_entity
from shedlab.strategies import pair_config, resolve_config, resolve_pair_name

DEFAULT_START_TIME_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
# Limits a scenario must stay within (docs/scenarios.md, "Limits"), checked when it is loaded, before the
# simulator allocates its arrays or starts its tick loop: 10^12 brokers would be a MemoryError and a
# duration of 10^15 s a loop that never ends.
MAX_BROKERS = 10_000
"""Brokers a scenario may ever have: the initial ones plus every ``add_brokers`` event."""
MAX_BUNDLES = 1_000_000
"""Bundles over all workloads (tenants × namespaces × bundles)."""
MAX_TICKS = 1_000_000
"""Ticks of a run (duration / tick + 1): 11.5 days in 1-s ticks, 1.9 years in 60-s ticks."""
MAX_TOPICS = 10_000_000
"""Hashed topic partitions over all workloads (each one is named and hashed when the run starts)."""
INITIAL_ASSIGNMENTS = ("placement", "round_robin", "random")
STATS_PHASES = ("aligned", "random")
LEADER_FAILOVER = ("reset", "keep")
PINNED_PLACEMENTS = ("direct", "strategy")
REMOVE_PICKS = ("newest", "oldest", "random")


@dataclass(frozen=True)
class Background:
    """Load from other processes on a broker's machine, as fractions of its capacity, over time."""

    cpu: Signal = field(default_factory=lambda: Signal.constant(0.0))
    nic_in: Signal = field(default_factory=lambda: Signal.constant(0.0))
    nic_out: Signal = field(default_factory=lambda: Signal.constant(0.0))

    def to_dict(self) -> dict[str, Any]:
        return {k: _signal_value(getattr(self, k)) for k in ("cpu", "nic_in", "nic_out")}


def _signal_value(s: Signal) -> Any:
    return dict(s.params)["value"] if s.is_constant else s.to_dict()


def parse_background(parent: Node, key: str = "background") -> Background:
    if not parent.has(key):
        parent.raw(key, None)
        return Background()
    node = parent.child(key)
    signals = {name: parse_signal(node, name) for name in ("cpu", "nic_in", "nic_out")}
    node.finish(tuple(signals))
    for name, signal in signals.items():
        # a fraction of the machine: no co-located process uses more than all of its cores or its NIC
        if signal.peak > 1.0:
            raise node.error(
                name,
                f"reaches {signal.peak:g}, more than the whole machine (a fraction of it: at most 1)",
                node.raw(name),
            )
    return Background(**signals)


@dataclass(frozen=True)
class BrokerGroup:
    """``count`` brokers of one hardware class with one background."""

    count: int
    hardware: str = "standard"
    background: Background = field(default_factory=Background)


@dataclass(frozen=True)
class AddBrokers:
    """Scale-out: new, empty brokers join at ``at`` (seconds)."""

    at: float
    count: int
    hardware: str = "standard"
    background: Background = field(default_factory=Background)
    kind: str = "add_brokers"


@dataclass(frozen=True)
class RemoveBrokers:
    """Broker failure: brokers vanish at ``at``; clients reconnect and their bundles are looked up again."""

    at: float
    brokers: tuple[int, ...] = ()
    count: int = 0
    pick: str = "newest"
    kind: str = "remove_brokers"


@dataclass(frozen=True)
class RollingRestart:
    """Brokers restart one after another, ``interval`` apart, each down for ``downtime``."""

    at: float
    interval: float
    downtime: float = 30.0
    brokers: tuple[int, ...] = ()
    kind: str = "rolling_restart"


@dataclass(frozen=True)
class TrafficChange:
    """The selected bundles' traffic is multiplied by ``factor`` from ``at`` (for ``duration``, if given)."""

    at: float
    factor: float
    duration: float | None = None
    select: Selector = field(default_factory=Selector)
    kind: str = "traffic"


@dataclass(frozen=True)
class BackgroundChange:
    """Brokers' background load is replaced from ``at`` (signals keep the scenario's time axis)."""

    at: float
    brokers: tuple[int, ...]
    background: Background
    kind: str = "background"


Event = AddBrokers | RemoveBrokers | RollingRestart | TrafficChange | BackgroundChange
EVENT_KINDS = ("add_brokers", "remove_brokers", "rolling_restart", "traffic", "background")


@dataclass(frozen=True)
class SimulationSettings:
    """How the kernel runs: tick, reconnection delay, initial ownership, stats phases, leader failover."""

    tick: float = 60.0
    reconnect_delay: float = 5.0
    initial_assignment: str = "placement"
    stats_phase: str = "aligned"
    leader_failover: str = "reset"
    pinned_placement: str = "direct"
    start_time_ms: int = DEFAULT_START_TIME_MS
    cluster: str = "sim-cluster"
    resolution: float | None = None  # finer kernel step within a tick (docs/scenarios.md "Resolution")

    @property
    def step_ms(self) -> int:
        """The kernel's step in whole milliseconds: the resolution, or the tick without one. Traffic and
        clocks are read at the steps only, which the scenario's checks of what would never act rely on."""
        return tick_ms_of(self.tick if self.resolution is None else self.resolution)


@dataclass(frozen=True)
class MetricsSettings:
    """Parameters of the run metrics (docs/metrics.md)."""

    balance_threshold: float = 15.0
    balance_hold: float = 600.0
    over_placement_margin: float = 10.0
    over_unloading_margin: float = 5.0
    repeat_move_window: float | None = None  # default: twice the grace period
    warmup: float = 0.0  # seconds at the start the summary leaves out


@dataclass(frozen=True)
class BrokerState:
    """The first leader's state about one broker (1-based ``broker`` number) at the start."""

    broker: int
    usage_history: float | None = None
    hit_high: int = 0
    hit_low: int = 0


@dataclass(frozen=True)
class RecentUnload:
    """Bundles selected by ``select`` were unloaded ``ago`` seconds before the start."""

    select: Selector
    ago: float


@dataclass(frozen=True)
class LeaderState:
    """What the first leader knows at the start, as if it had been running (docs/scenarios.md)."""

    brokers: tuple[BrokerState, ...] = ()
    recently_unloaded: tuple[RecentUnload, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.brokers and not self.recently_unloaded


@dataclass(frozen=True)
class Scenario:
    """A complete, validated scenario."""

    name: str
    description: str = ""
    duration: float = 3600.0
    seed: int = 0
    strategy: str = "ThresholdShedder+LeastLongTermMessageRate"
    config: dict[str, Any] = field(default_factory=dict)
    strategy_config: dict[str, dict[str, Any]] = field(default_factory=dict)
    simulation: SimulationSettings = field(default_factory=SimulationSettings)
    hardware: dict[str, HardwareClass] = field(default_factory=lambda: {"standard": HardwareClass()})
    brokers: tuple[BrokerGroup, ...] = (BrokerGroup(3),)
    workloads: tuple[Workload, ...] = (Workload("workload-0"),)
    events: tuple[Event, ...] = ()
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    leader_state: LeaderState = field(default_factory=LeaderState)
    source: str = ""

    @property
    def initial_brokers(self) -> int:
        return sum(g.count for g in self.brokers)

    @property
    def num_bundles(self) -> int:
        """Bundles of the scenario's namespaces (:func:`~shedlab.core.sim.traffic.namespace_bundles`):
        the sum over workloads counted a shared namespace's bundles once per workload naming it."""
        return namespace_bundles(self.workloads)

    @property
    def num_ticks(self) -> int:
        """How many ticks the simulator runs (:func:`tick_count`)."""
        return tick_count(self.duration, self.simulation.tick)

    @property
    def machines_differ(self) -> bool:
        """Whether the brokers differ as machines: groups (initial or added) on hardware classes whose
        figures differ, groups with different co-located load (``background``), or a ``background``
        event, which changes some brokers' load and not the others'. What PIP-364 calls a heterogeneous
        environment, read from the scenario rather than its name, so that a user's cluster or a probe
        is classed like the built-in ``heterogeneous-*`` scenarios (``core/goal.py``). Class names do
        not count: two classes with the same figures are the same machine."""
        groups: list[BrokerGroup | AddBrokers] = [*self.brokers]
        groups += [e for e in self.events if isinstance(e, AddBrokers)]
        machines = {dataclasses.replace(self.hardware[g.hardware], name="") for g in groups}
        backgrounds = {g.background for g in groups}
        changes = any(isinstance(e, BackgroundChange) for e in self.events)
        return len(machines) > 1 or len(backgrounds) > 1 or changes

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "scenario") -> Scenario:
        return _parse_scenario(Node(data, source, ""), source)


_TOP_FIELDS = (
    "name",
    "description",
    "duration",
    "seed",
    "strategy",
    "config",
    "strategy_config",
    "simulation",
    "hardware",
    "brokers",
    "workloads",
    "events",
    "metrics",
    "leader_state",
)


def _parse_time(node: Node, key: str) -> int:
    raw = node.raw(key, None)
    if raw is None:
        return DEFAULT_START_TIME_MS
    if isinstance(raw, dt.datetime):
        moment = raw
    elif isinstance(raw, str):
        try:
            moment = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise node.error(key, "expected an ISO 8601 time such as 2024-01-01T00:00:00Z", raw) from None
    else:
        raise node.error(key, "expected an ISO 8601 time such as 2024-01-01T00:00:00Z", raw)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def _parse_simulation(parent: Node) -> SimulationSettings:
    node = parent.child("simulation", {})
    settings = SimulationSettings(
        tick=node.duration("tick", 60.0),
        reconnect_delay=node.duration("reconnect_delay", 5.0),
        initial_assignment=node.string("initial_assignment", "placement", choices=INITIAL_ASSIGNMENTS),
        stats_phase=node.string("stats_phase", "aligned", choices=STATS_PHASES),
        leader_failover=node.string("leader_failover", "reset", choices=LEADER_FAILOVER),
        pinned_placement=node.string("pinned_placement", "direct", choices=PINNED_PLACEMENTS),
        start_time_ms=_parse_time(node, "start_time"),
        cluster=node.string("cluster", "sim-cluster"),
        resolution=None if node.raw("resolution", None) is None else node.duration("resolution"),
    )
    if settings.tick <= 0:
        raise node.error("tick", "must be greater than 0", node.raw("tick"))
    if settings.tick < 0.001 or abs(settings.tick * 1000 - round(settings.tick * 1000)) > 1e-6:
        # the clock counts whole milliseconds: 0.4 ms ran as 1 ms ticks and 1.5 ms as 2 ms, silently
        raise node.error("tick", "must be a whole number of milliseconds", node.raw("tick"))
    if not settings.cluster or not is_named_entity(settings.cluster):
        raise node.error(
            "cluster", "not a Pulsar cluster name (ASCII letters, digits, _ - = : . only)", settings.cluster
        )
    _check_resolution(node, settings)
    node.finish(
        (
            "tick",
            "reconnect_delay",
            "initial_assignment",
            "stats_phase",
            "leader_failover",
            "pinned_placement",
            "start_time",
            "cluster",
            "resolution",
        )
    )
    return settings


def _check_resolution(node: Node, settings: SimulationSettings) -> None:
    """``resolution`` divides the tick into whole steps of at least a millisecond."""
    res = settings.resolution
    if res is None:
        return
    tick_ms, res_ms = round(settings.tick * 1000), round(res * 1000)
    if res_ms < 1 or res_ms > tick_ms or tick_ms % res_ms:
        raise node.error(
            "resolution",
            f"must divide simulation.tick ({settings.tick:g} s) into whole steps of at least 1 ms",
            node.raw("resolution"),
        )


def _parse_metrics(parent: Node) -> MetricsSettings:
    node = parent.child("metrics", {})
    window = node.raw("repeat_move_window", None)
    settings = MetricsSettings(
        balance_threshold=node.number("balance_threshold", 15.0, minimum=0.0),
        balance_hold=node.duration("balance_hold", 600.0),
        over_placement_margin=node.number("over_placement_margin", 10.0, minimum=0.0),
        over_unloading_margin=node.number("over_unloading_margin", 5.0, minimum=0.0),
        repeat_move_window=None if window is None else node.duration("repeat_move_window"),
        warmup=node.duration("warmup", 0.0),
    )
    node.finish(
        (
            "balance_threshold",
            "balance_hold",
            "over_placement_margin",
            "over_unloading_margin",
            "repeat_move_window",
            "warmup",
        )
    )
    return settings


def _check_warmup(root: Node, metrics: MetricsSettings, last_ms: int) -> None:
    """Refuse a ``metrics.warmup`` past the last tick: it left no tick to measure, and the summary was of
    0 ticks (every mean NaN, every count 0), silently. (The combinations test drew one past the run to
    check that summary's guards; nothing makes a warm-up longer than its own run: no grid, tune or twin
    changes a scenario's duration.) A warm-up at the last tick measures that one tick."""
    if round(metrics.warmup * 1000) > last_ms:
        raise root.error(
            "metrics.warmup",
            f"leaves no tick to measure: {metrics.warmup:g} s is after the run's last tick "
            f"({last_ms / 1000:g} s)",
            root.child("metrics").raw("warmup"),
            hint="shorten the warm-up or lengthen the duration",
        )


def _check_start_time(root: Node, simulation: SimulationSettings, last_ms: int) -> None:
    """Refuse a ``simulation.start_time`` whose run stamps a time no recording holds (at or before 1970,
    epoch seconds' range, past year 9999: :func:`~shedlab.model.formats.epoch_ms`): ``simulate --record``
    wrote a recording of which ingest quarantined every row as invalid_timestamp. Its start, its last tick
    and, between them, the first time in epoch seconds' range are checked."""
    start, end = simulation.start_time_ms, simulation.start_time_ms + last_ms
    points = (
        ("the start", start),
        ("the run's last tick", end),
        ("a tick", min(max(start, SECONDS_LIKE_MS[0]), end)),
    )
    for what, ms in points:
        try:
            epoch_ms(ms)
        except FormatError as exc:
            raise root.error(
                "simulation.start_time",
                f"{what} is at no time a recording holds ({exc.message})",
                root.child("simulation").raw("start_time"),
            ) from None


def _parse_leader_state(parent: Node, initial: int) -> LeaderState:
    node = parent.child("leader_state", {})
    brokers = []
    seen: set[int] = set()
    for item in node.nodes("brokers"):
        number = item.integer("broker", minimum=1)
        if number > initial:
            raise item.error("broker", f"only {initial} brokers exist at the start", number)
        if number in seen:
            raise item.error("broker", "given twice", number)
        seen.add(number)
        history = item.raw("usage_history", None)
        brokers.append(
            BrokerState(
                number,
                None if history is None else item.number("usage_history", minimum=0.0),
                item.integer("hit_high", 0, minimum=0),
                item.integer("hit_low", 0, minimum=0),
            )
        )
        item.finish(("broker", "usage_history", "hit_high", "hit_low"))
    recent = []
    for item in node.nodes("recently_unloaded"):
        recent.append(RecentUnload(parse_selector(item), item.duration("ago", 0.0)))
        item.finish(("select", "ago"))
    node.finish(("brokers", "recently_unloaded"))
    return LeaderState(tuple(brokers), tuple(recent))


def _broker_numbers(node: Node, key: str) -> tuple[int, ...]:
    """An event's broker numbers, each once: ``[3, 3]`` in a removal or a restart is a typo for two
    brokers, and running it as one would hide it."""
    out: list[int] = []
    for i, b in enumerate(node.list(key, [])):
        number = isinstance(b, int) and not isinstance(b, bool) and b >= 1
        if not number or b in out:
            raise InputError(
                "a broker listed twice" if number else "expected broker numbers (1 = broker-0001)",
                source=node.source,
                field=f"{node.where(key)}[{i}]",
                value=b,
            )
        out.append(int(b))
    return tuple(out)


def _parse_event(node: Node, hardware: Mapping[str, HardwareClass]) -> Event:
    kind = node.string("kind", choices=EVENT_KINDS)
    at = node.duration("at")
    event: Event
    if kind == "add_brokers":
        hw = node.string("hardware", "standard")
        _check_hardware(node, "hardware", hw, hardware)
        event = AddBrokers(at, node.integer("count", 1, minimum=1), hw, parse_background(node))
        node.finish(("kind", "at", "count", "hardware", "background"))
    elif kind == "remove_brokers":
        brokers = _broker_numbers(node, "brokers")
        count = node.integer("count", 0, minimum=0)
        if not brokers and count == 0:
            raise node.error("brokers", "give the broker numbers to remove, or a count")
        extra = next((key for key in ("count", "pick") if brokers and node.has(key)), None)
        if extra is not None:  # the listed brokers are removed: a count or a pick beside them was ignored
            raise node.error(extra, "not with brokers: give the broker numbers, or a count and a pick")
        event = RemoveBrokers(at, brokers, count, node.string("pick", "newest", choices=REMOVE_PICKS))
        node.finish(("kind", "at", "brokers", "count", "pick"))
    elif kind == "rolling_restart":
        interval = node.duration("interval")
        event = RollingRestart(
            at, interval, node.duration("downtime", 30.0), _broker_numbers(node, "brokers")
        )
        if interval <= 0:
            raise node.error("interval", "must be greater than 0", node.raw("interval"))
        if node.has("brokers") and not event.brokers:  # restarted every broker up, where it says none
            raise node.error(
                "brokers",
                "give the broker numbers to restart, or leave brokers out for every broker up",
                node.raw("brokers"),
            )
        node.finish(("kind", "at", "interval", "downtime", "brokers"))
    elif kind == "traffic":
        duration = node.raw("duration", None)
        event = TrafficChange(
            at,
            node.number("factor", minimum=0.0, maximum=MAX_FACTOR),
            None if duration is None else node.duration("duration"),
            parse_selector(node),
        )
        node.finish(("kind", "at", "factor", "duration", "select"))
    else:
        brokers = _broker_numbers(node, "brokers")
        if not brokers:
            raise node.error("brokers", "give the broker numbers whose background changes")
        if not node.has("background"):  # it set the background to none, silently: say {cpu: 0} for that
            raise node.error("background", "required field is missing", hint="{cpu: 0} ends a background")
        event = BackgroundChange(at, brokers, parse_background(node))
        node.finish(("kind", "at", "brokers", "background"))
    return event


def _check_hardware(node: Node, key: str, name: str, hardware: Mapping[str, HardwareClass]) -> None:
    if name not in hardware:
        hint = did_you_mean(name, hardware) or f"defined classes: {', '.join(hardware)}"
        raise node.error(key, "unknown hardware class", name, hint=hint)


def _check_limits(
    root: Node, duration: float, simulation: SimulationSettings, initial: int, workloads: tuple[Workload, ...]
) -> None:
    """Refuse sizes beyond :data:`MAX_BROKERS`, :data:`MAX_BUNDLES` and :data:`MAX_TICKS` up front."""
    added = 0
    for i, node in enumerate(root.list("events", [])):
        if isinstance(node, Mapping) and node.get("kind") == "add_brokers":
            count = node.get("count", 1)
            added += count if isinstance(count, int) and not isinstance(count, bool) else 0
            if initial + added > MAX_BROKERS:
                raise root.error(f"events[{i}].count", f"more than {MAX_BROKERS} brokers in all", count)
    if initial > MAX_BROKERS:
        raise root.error("brokers", f"more than {MAX_BROKERS} brokers ({initial})")
    bundles = namespace_bundles(workloads)
    if bundles > MAX_BUNDLES:
        raise root.error("workloads", f"more than {MAX_BUNDLES} bundles ({bundles})")
    topics = sum(
        w.hashed.topics * max(w.hashed.partitions, 1) * w.tenants * w.namespaces
        for w in workloads
        if w.hashed is not None
    )
    if topics > MAX_TOPICS:
        raise root.error("workloads", f"more than {MAX_TOPICS} hashed topic partitions ({topics})")
    step, unit = (
        (simulation.tick, "ticks") if simulation.resolution is None else (simulation.resolution, "steps")
    )
    ticks = duration // step + 1
    if ticks > MAX_TICKS:
        raise root.error(
            "duration",
            f"{ticks:.3g} {unit} of {step:g} s: the limit is {MAX_TICKS} ticks",
            root.raw("duration"),
            hint="shorten the duration or lengthen simulation.tick",
        )


def tick_ms_of(tick: float) -> int:
    """A tick (seconds) in whole milliseconds, the simulator's clock (at least 1)."""
    return max(round(tick * 1000), 1)


def tick_count(duration: float, tick: float) -> int:
    """The ticks of a run: at 0, every ``tick`` after it, the last at ``duration`` rounded down to whole
    ticks, counted in the simulator's milliseconds (not float seconds, whose division can fall short)."""
    return int(duration * 1000 // tick_ms_of(tick)) + 1


def last_tick_ms(duration: float, tick: float) -> int:
    """When a run's last tick comes (ms from its start): ``duration`` rounded down to whole ticks
    (:func:`tick_count`). What never happens by then is refused where a scenario is read."""
    return (tick_count(duration, tick) - 1) * tick_ms_of(tick)


def _check_event_times(root: Node, events: tuple[Event, ...], duration: float, tick: float) -> None:
    """Refuse an event after the run's end, or after its last tick: it would never happen, and nothing
    would say so. Events take effect at the first tick at or after their time, and the last tick is at
    ``duration`` rounded down to whole ticks (:func:`tick_count`), so with a duration that is no whole
    number of ticks an event between the last tick and the end never came."""
    last_ms = last_tick_ms(duration, tick)
    for i, event in enumerate(events):
        raw = root.list("events")[i].get("at")
        if event.at > duration:
            raise root.error(
                f"events[{i}].at",
                f"{event.kind} at {event.at:g} s is after the run's end ({duration:g} s)",
                raw,
                hint="lengthen the duration or drop the event",
            )
        if round(event.at * 1000) > last_ms:
            raise root.error(
                f"events[{i}].at",
                f"{event.kind} at {event.at:g} s is after the run's last tick ({last_ms / 1000:g} s; "
                "events take effect at the first tick at or after their time)",
                raw,
                hint="make the duration a whole number of ticks, or move the event",
            )


def _check_traffic_windows(
    root: Node, workloads: Sequence[Workload], events: tuple[Event, ...], simulation: SimulationSettings
) -> None:
    """Refuse a traffic event's ``duration``, or a ``step`` shape's ``at`` to ``until``, that holds no tick
    (no step, with a resolution): the traffic is read at those times only, so ``duration: 0``, or 10 s
    between two 60-s ticks, never acted, and nothing said so."""
    step_ms = simulation.step_ms
    windows = [
        (f"events[{i}].duration", e.at, e.at + e.duration, root.list("events")[i].get("duration"))
        for i, e in enumerate(events)
        if isinstance(e, TrafficChange) and e.duration is not None
    ]
    windows += [
        (f"workloads[{w}].shapes[{k}].until", shape.param("at"), shape.param("until"), shape.param("until"))
        for w, workload in enumerate(workloads)
        for k, shape in enumerate(workload.shapes)
        if shape.kind == "step" and shape.param("until") is not None
    ]
    for where, start, end, raw in windows:
        start_ms, end_ms = round(start * 1000), round(end * 1000)
        if -(-start_ms // step_ms) * step_ms >= end_ms:
            raise InputError(
                f"traffic changed from {start:g} s to {end:g} s holds no step of the run (one every "
                f"{step_ms / 1000:g} s): it would never act",
                source=root.source,
                field=where,
                value=raw,
                hint="lengthen it to a step at least, or set simulation.resolution",
            )


def _check_onoff_steps(root: Node, workloads: Sequence[Workload], simulation: SimulationSettings) -> None:
    """Refuse an ``onoff`` shape that is on (or off) at every step of the run: the traffic is read at the
    steps only (every tick, or every ``resolution``), so a 30-s cycle read every 60 s was always on, and
    the shape did nothing, silently."""
    step_ms = simulation.step_ms
    for w, workload in enumerate(workloads):
        for k, shape in enumerate(workload.shapes):
            if shape.kind != "onoff":
                continue
            phase = shape.param("phase")  # a random one is a whole number of steps: as 0 here
            shift = round(phase * 1000) if isinstance(phase, float) else 0
            cycle = (shape.param("period"), shape.param("on"), shift)
            field = f"workloads[{w}].shapes[{k}].period"
            _refuse_onoff_at_steps(
                root, cycle, step_ms, field, root.list("workloads")[w]["shapes"][k]["period"]
            )


def _check_background_onoff(
    root: Node, groups: Sequence[BrokerGroup], events: tuple[Event, ...], simulation: SimulationSettings
) -> None:
    """A background's ``onoff`` signal read at the steps only is refused where the shape's is
    (:func:`_check_onoff_steps`): a 30-s cycle read every 60 s kept the co-located load high, silently."""
    step_ms = simulation.step_ms
    for where, background in _backgrounds(groups, events):
        for name in ("cpu", "nic_in", "nic_out"):
            signal: Signal = getattr(background, name)
            if signal.kind != "onoff":
                continue
            p = dict(signal.params)
            cycle = (p["period"], p["on"], -round(p["offset"] * 1000))  # (t − offset) mod period
            _refuse_onoff_at_steps(root, cycle, step_ms, f"{where}.background.{name}.period", p["period"])


def _refuse_onoff_at_steps(
    root: Node, cycle: tuple[float, float, int], step_ms: int, field: str, value: object
) -> None:
    """Refuse an on/off ``cycle`` (period and on in seconds, its shift in ms) that is on, or off, at every
    step of the run: it would never act."""
    period, on, _ = cycle
    state = _onoff_at_steps(cycle, step_ms)
    if state is not None:
        raise InputError(
            f"a cycle of {period:g} s, {on:g} s on, read every {step_ms / 1000:g} s (the run's steps) is "
            f"{state} at every step of the run: it would never act",
            source=root.source,
            field=field,
            value=value,
            hint="make the period a multiple of the step, or set simulation.resolution",
        )


def _onoff_at_steps(cycle: tuple[float, float, int], step_ms: int) -> str | None:
    """``on`` or ``off`` if an on/off cycle read at every multiple of ``step_ms`` is always that, else None.
    Shifted by ``s`` ms (on while ``(t + s) mod period < on``), it takes the values ``s mod g + k·g`` below
    the period, ``g = gcd(step, period)``."""
    period_ms, on_ms = round(cycle[0] * 1000), round(cycle[1] * 1000)
    gcd = math.gcd(step_ms, period_ms)
    first = cycle[2] % gcd
    if first + period_ms - gcd < on_ms:
        return "on"
    return "off" if first >= on_ms else None


_SHAPE_START = {"step": "at", "ramp": "start"}
"""The parameter at which a step or ramp shape begins to change its workload's traffic."""


def _check_shape_starts(root: Node, workloads: Sequence[Workload], last_ms: int) -> None:
    """Refuse a ``step`` whose ``at`` is after the run's last tick, or a ``ramp`` whose ``start`` is at or
    after it: the change never came (a ramp held its ``from`` all run, a constant), silently."""
    for w, workload in enumerate(workloads):
        for k, shape in enumerate(workload.shapes):
            key = _SHAPE_START.get(shape.kind)
            if key is None:
                continue
            where = f"workloads[{w}].shapes[{k}].{key}"
            _refuse_late_start(root, shape.kind, shape.param(key), last_ms, where, "the traffic")


def _check_background_starts(
    root: Node, groups: Sequence[BrokerGroup], events: tuple[Event, ...], last_ms: int
) -> None:
    """A background's ``step`` after the run's last tick, or ``ramp`` starting at or after it, is refused
    as a traffic shape's is (:func:`_check_shape_starts`): the co-located load never changed, silently."""
    for where, background in _backgrounds(groups, events):
        for name in ("cpu", "nic_in", "nic_out"):
            signal: Signal = getattr(background, name)
            key = _SHAPE_START.get(signal.kind)
            if key is None:
                continue
            field = f"{where}.background.{name}.{key}"
            _refuse_late_start(root, signal.kind, dict(signal.params)[key], last_ms, field, "the background")


def _backgrounds(groups: Sequence[BrokerGroup], events: tuple[Event, ...]) -> list[tuple[str, Background]]:
    """Every background of the scenario with where it is written: its broker groups', then its events'."""
    owners = [(f"brokers[{i}]", g.background) for i, g in enumerate(groups)]
    owners += [
        (f"events[{i}]", e.background)
        for i, e in enumerate(events)
        if isinstance(e, AddBrokers | BackgroundChange)
    ]
    return owners


def _refuse_late_start(root: Node, kind: str, start_s: float, last_ms: int, field: str, what: str) -> None:
    """Refuse a step beginning after the run's last tick, or a ramp beginning at or after it (a ramp that
    starts at the last tick still shows only its ``from``): ``what`` never changed, silently."""
    start_ms = round(start_s * 1000)
    if start_ms > last_ms or (kind == "ramp" and start_ms == last_ms):
        raise InputError(
            f"the {kind} begins at {start_ms / 1000:g} s, at or after the run's last tick "
            f"({last_ms / 1000:g} s): it would never change {what}",
            source=root.source,
            field=field,
            value=start_s,
            hint="move it earlier or lengthen the duration",
        )


def _check_last_turn(root: Node, i: int, event: RollingRestart, count: int, last_ms: int) -> None:
    """Each broker's turn comes ``interval`` after the previous one's: a turn after the last tick never
    came, and that broker was never restarted, silently. ``count`` is the brokers listed, else the
    brokers up by then (all of them restart; one down for another restart then is skipped)."""
    turn = event.at + (count - 1) * event.interval
    if count > 1 and round(turn * 1000) > last_ms:
        which = f"{count} brokers" if event.brokers else f"all {count} brokers up by then"
        raise root.error(
            f"events[{i}].interval",
            f"rolling_restart at {event.at:g} s restarts {which} every {event.interval:g} s: the last "
            f"turn, at {turn:g} s, is after the run's last tick ({last_ms / 1000:g} s)",
            root.list("events")[i].get("interval"),
            hint="shorten the interval, start earlier, list fewer brokers, or lengthen the duration",
        )


def _check_event_brokers(root: Node, events: tuple[Event, ...], initial: int, last_ms: int) -> None:
    """Refuse an event naming a broker the scenario does not have by then (brokers are numbered from 1;
    ``add_brokers`` events number theirs after the existing ones), a removal or background change of one
    an earlier event removed by its number, and a ``remove_brokers`` of more brokers than are left by then.
    Events run in time order, ties in the order written, as the kernel applies them."""
    alive = initial
    removed: dict[int, int] = {}  # broker number -> the event that removed it by that number
    for i in sorted(range(len(events)), key=lambda k: (events[k].at, k)):
        event = events[i]
        if isinstance(event, AddBrokers):
            alive += event.count
            continue
        existing = initial + sum(e.count for e in events if isinstance(e, AddBrokers) and e.at <= event.at)
        if isinstance(event, RemoveBrokers) and event.count > alive:
            raise root.error(
                f"events[{i}].count",
                f"remove_brokers at {event.at:g} s removes {event.count} brokers, but the scenario has "
                f"{alive} by then",
                event.count,
            )
        named = event.brokers if isinstance(event, RemoveBrokers | RollingRestart | BackgroundChange) else ()
        unknown = [b for b in named if b > existing]
        if unknown:
            raise root.error(
                f"events[{i}].brokers",
                f"{event.kind} at {event.at:g} s names broker {unknown[0]}, but the scenario has brokers "
                f"1-{existing} by then",
                list(named),
            )
        # a restart skips a broker that is not up when its turn comes (documented), removed ones included
        gone = [] if isinstance(event, RollingRestart) else [b for b in named if b in removed]
        if gone:
            raise root.error(
                f"events[{i}].brokers",
                f"{event.kind} at {event.at:g} s names broker {gone[0]}, which events[{removed[gone[0]]}] "
                "removed before: it would do nothing to it",
                list(named),
            )
        if isinstance(event, RemoveBrokers):
            alive -= len(event.brokers) or event.count
            removed.update(dict.fromkeys(event.brokers, i))
        if isinstance(event, RollingRestart):
            _check_last_turn(root, i, event, len(event.brokers) or alive, last_ms)


def _parse_strategy(root: Node, source: str) -> str:
    """``strategy``: a pair name (abbreviations, plugins), Pulsar's default pair if absent."""
    strategy_raw = root.string("strategy", "ThresholdShedder+LeastLongTermMessageRate")
    try:
        return resolve_pair_name(strategy_raw)
    except ShedlabError as exc:
        raise ConfigError(
            exc.message, source=source, field="strategy", value=strategy_raw, hint=exc.hint
        ) from None


def _parse_configs(root: Node, source: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``config`` (Pulsar keys for every pair) and ``strategy_config`` (per pair), both validated
    against the key table, as are the strategy names a key may set (the pair itself is set later)."""
    config_node = root.child("config", {})
    config = dict(config_node.data)
    config_node.finish(tuple(config))
    _refuse_strategy_keys(config_node)
    resolve_config(LoadBalancerConfig().with_overrides(config, source=f"{source}: config"), pair=False)
    strategy_config: dict[str, dict[str, Any]] = {}
    for pair_raw, pair_node in root.items("strategy_config"):
        try:
            pair = resolve_pair_name(pair_raw)
        except ShedlabError as exc:
            raise ConfigError(
                exc.message, source=source, field=pair_node.path, value=pair_raw, hint=exc.hint
            ) from None
        if pair in strategy_config:  # AvgShedder and avgshedder: the last section replaced the first
            raise ConfigError(
                f"{pair} has a section already: a pair's keys go in one section",
                source=source,
                field=pair_node.path,
                value=pair_raw,
            )
        overrides = dict(pair_node.data)
        pair_node.finish(tuple(overrides))
        _refuse_strategy_keys(pair_node)
        resolve_config(
            LoadBalancerConfig().with_overrides(overrides, source=f"{source}: {pair_node.path}"), pair=False
        )
        strategy_config[pair] = overrides
    return config, strategy_config


def _refuse_strategy_keys(node: Node) -> None:
    """A strategy key in ``config`` or ``strategy_config``: the run's pair (``strategy``, or the pair being
    compared) sets both keys after ``config``, which lost its value without a word, and before the
    pair's ``strategy_config``, which ran another pair under that section's name."""
    for key in STRATEGY_KEYS.values():
        if node.has(key):
            raise node.error(
                key,
                "the strategy pair is chosen by the scenario's strategy (or --strategy), not by a key",
                node.raw(key),
                hint="name the pair in strategy:",
            )


def _parse_broker_groups(root: Node, hardware: Mapping[str, HardwareClass]) -> list[BrokerGroup]:
    """``brokers``: groups of a count, a hardware class and a background; three standard brokers if
    absent."""
    if not root.has("brokers"):
        return [BrokerGroup(3)]
    groups = []
    for node in root.nodes("brokers"):
        hw = node.string("hardware", "standard")
        _check_hardware(node, "hardware", hw, hardware)
        groups.append(BrokerGroup(node.integer("count", 1, minimum=1), hw, parse_background(node)))
        node.finish(("count", "hardware", "background"))
    return groups


def _check_workloads(root: Node, source: str, workloads: Sequence[Workload], initial: int) -> None:
    """Workloads sharing a namespace agree on its bundle count; pinned brokers exist at the start."""
    bundles_of: dict[str, int] = {}
    for w_index, workload in enumerate(workloads):
        ns = workload.namespace
        if ns is not None and bundles_of.setdefault(ns, workload.bundles) != workload.bundles:
            raise root.error(
                f"workloads[{w_index}].bundles",
                f"workloads sharing namespace {ns} give it different bundle counts "
                f"({bundles_of[ns]} and {workload.bundles})",
                workload.bundles,
            )
    first_of: dict[str, int] = {}
    for w_index, workload in enumerate(workloads):
        if first_of.setdefault(workload.name, w_index) != w_index:
            raise root.error(
                f"workloads[{w_index}].name",
                f"workloads[{first_of[workload.name]}] has this name already: selectors and tables name "
                "workloads by it",
                workload.name,
            )
    for w_index, workload in enumerate(workloads):
        bad = [b for b in workload.brokers if b > initial]
        if bad:
            raise InputError(
                f"workload pinned to broker {bad[0]}, but only {initial} brokers exist at the start",
                source=source,
                field=f"workloads[{w_index}].brokers",
            )


def _parse_scenario(root: Node, source: str) -> Scenario:
    name = root.name("name")
    seed = root.integer("seed", 0, minimum=0)
    duration = root.duration("duration", 3600.0)
    strategy = _parse_strategy(root, source)
    config, strategy_config = _parse_configs(root, source)
    simulation = _parse_simulation(root)
    if duration < simulation.tick:
        raise root.error("duration", "must be at least one tick long", root.raw("duration"))
    hardware: dict[str, HardwareClass] = {"standard": HardwareClass()}
    for hw_name, hw_node in root.items("hardware"):
        hardware[hw_name] = parse_hardware(hw_name, hw_node, hardware.get(hw_name))
    groups = _parse_broker_groups(root, hardware)
    workloads = tuple(parse_workload(node, i) for i, node in enumerate(root.nodes("workloads")))
    if not root.has("workloads"):
        workloads = (Workload("workload-0"),)
    if not workloads:
        raise root.error("workloads", "at least one workload is needed")
    initial = sum(g.count for g in groups)
    if initial == 0:
        raise root.error("brokers", "at least one broker is needed", root.raw("brokers"))
    _check_limits(root, duration, simulation, initial, workloads)
    _check_workloads(root, source, workloads, initial)
    events = tuple(_parse_event(node, hardware) for node in root.nodes("events"))
    _check_event_times(root, events, duration, simulation.tick)
    _check_traffic_windows(root, workloads, events, simulation)
    _check_onoff_steps(root, workloads, simulation)
    last_ms = last_tick_ms(duration, simulation.tick)
    _check_event_brokers(root, events, initial, last_ms)
    _check_shape_starts(root, workloads, last_ms)
    _check_background_starts(root, groups, events, last_ms)
    _check_background_onoff(root, groups, events, simulation)
    _check_start_time(root, simulation, last_ms)
    metrics = _parse_metrics(root)
    _check_warmup(root, metrics, last_ms)
    leader_state = _parse_leader_state(root, initial)
    _check_selectors(root, workloads, events, leader_state)
    scenario = Scenario(
        name=name,
        description=root.string("description", ""),
        duration=duration,
        seed=seed,
        strategy=strategy,
        config=config,
        strategy_config=strategy_config,
        simulation=simulation,
        hardware=hardware,
        brokers=tuple(groups),
        workloads=workloads,
        events=events,
        metrics=metrics,
        leader_state=leader_state,
        source=source,
    )
    root.finish(_TOP_FIELDS)
    return scenario


def _check_selectors(
    root: Node, workloads: Sequence[Workload], events: Sequence[Event], leader_state: LeaderState
) -> None:
    """Every ``select`` names workloads, tenants and namespaces that exist (globs must match one); a
    workload's shape, which selects within that workload's own bundles, names its own."""
    own = workload_names(workloads)
    every = selectable_names(own)
    plan = namespace_plan(workloads)
    scenario = list(range(len(workloads)))
    checks = [
        (f"workloads[{w}].shapes[{k}].select", shape.select, own[w], "its workload", [w])
        for w, workload in enumerate(workloads)
        for k, shape in enumerate(workload.shapes)
    ]
    checks += [
        (f"events[{i}].select", e.select, every, "the scenario", scenario)
        for i, e in enumerate(events)
        if isinstance(e, TrafficChange)
    ]
    checks += [
        (
            f"leader_state.recently_unloaded[{i}].select",
            recent.select,
            every,
            "the scenario",
            scenario,
        )
        for i, recent in enumerate(leader_state.recently_unloaded)
    ]
    for where, selector, names, scope, members in checks:
        unmatched = unmatched_pattern(selector, names)
        if unmatched is not None:
            field_name, pattern = unmatched
            raise InputError(
                f"matches no {field_name[:-1]} of {scope}: the selection would be empty",
                source=root.source,
                field=f"{where}.{field_name}",
                value=pattern,
            )
        _check_fraction(
            root, where, selector, scope, [workloads[w] for w in members], [plan[w] for w in members]
        )


def _check_fraction(
    root: Node,
    where: str,
    selector: Selector,
    scope: str,
    workloads: Sequence[Workload],
    plan: Sequence[Sequence[tuple[str, str]]],
) -> None:
    """A ``fraction`` that rounds to no bundle of the at most N its patterns match in ``scope`` is
    refused: it selected nothing, silently (0.1 of a 4-bundle workload). A shape's fraction is read here
    as a fraction of its workload's bundles, as a user reads it; the simulator draws it among every
    workload's matching bundles, then keeps its own (so a shape of a workload among others gets about
    that share, not exactly). That draw is kept: changing it would change the results of existing
    scenarios (the demo recording's, capacity probes); ``select: {workloads: [<own name>]}`` draws among
    the workload's own bundles alone."""
    if selector.fraction is None:
        return
    most = bundles_at_most(selector, workloads, plan)
    if round(selector.fraction * most) == 0:
        raise InputError(
            f"selects no bundle: {selector.fraction:g} of the at most {most} bundle(s) of {scope} "
            "its patterns match rounds to 0",
            source=root.source,
            field=f"{where}.fraction",
            value=selector.fraction,
        )


# ------------------------------------------------------------------------------------------------- loading


def _builtin_dir() -> Any:
    return importlib.resources.files("shedlab").joinpath("data", "scenarios")


def builtin_scenarios() -> list[str]:
    """Names of the built-in scenarios, sorted."""
    directory = _builtin_dir()
    return sorted(p.name[: -len(".yaml")] for p in directory.iterdir() if p.name.endswith(".yaml"))


class _ScenarioLoader(UniqueKeyLoader):
    """YAML 1.2 booleans: only true/false. YAML 1.1 would read the key ``on:`` (on/off shapes) as True."""


_ScenarioLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in UniqueKeyLoader.yaml_implicit_resolvers.items()
}
_ScenarioLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def parse_scenario_text(text: str, source: str) -> Scenario:
    """A scenario from YAML text; ``source`` names it in error messages."""
    data = parse_yaml_text(text, source, loader=_ScenarioLoader)
    if data is None:
        raise InputError("the scenario file is empty", source=source)
    return Scenario.from_mapping(data, source)


def load_scenario(path_or_name: str | Path) -> Scenario:
    """A scenario from a YAML file, or a built-in scenario by name (``over-unloading-90-10``)."""
    text_name = str(path_or_name)
    path = Path(path_or_name)
    looks_like_file = (
        isinstance(path_or_name, Path) or text_name.endswith((".yaml", ".yml")) or "/" in text_name
    )
    if path.is_file() or looks_like_file:
        return parse_scenario_text(read_user_text(path, what="scenario file"), text_name)
    names = builtin_scenarios()
    if text_name not in names:
        hint = did_you_mean(text_name, names) or f"built-in scenarios: {', '.join(names)}"
        raise InputError("no such scenario file or built-in scenario", value=text_name, hint=hint)
    resource = _builtin_dir().joinpath(f"{text_name}.yaml")
    return parse_scenario_text(resource.read_text(encoding="utf-8"), f"builtin:{text_name}")


def build_config(
    scenario: Scenario, strategy: str | None = None, overrides: Mapping[str, Any] | None = None
) -> LoadBalancerConfig:
    """The configuration a run of ``scenario`` under ``strategy`` has: Pulsar defaults ← the scenario's
    ``config`` ← the strategy pair ← its ``strategy_config`` ← ``overrides``. Here, beside the scenario, so
    that a grid can build each run's configuration when it loads (:mod:`shedlab.core.grid`) without the
    simulator's kernel."""
    where = scenario.source or scenario.name
    pair = resolve_pair_name(strategy or scenario.strategy)
    conf = layered_config(
        (f"{where}: config", scenario.config),
        pair_config(pair, source="strategy"),
        (f"{where}: strategy_config.{pair}", scenario.strategy_config.get(pair)),
        ("config overrides", overrides),
    )
    return resolve_config(conf)
