"""The simulated cluster's state as typed arrays: broker slots, true ownership, load reports, true usage.

A *broker slot* is one broker the scenario can ever run: the initial groups first, then every
``add_brokers`` event in time order. Slots never move, so per-broker arrays are indexed by slot and a
broker that restarts keeps its slot. Bundles are indexed in the population's order (sorted by name,
the snapshot order). Every array here is owned by the kernel's state; the step modules
(:mod:`~shedlab.core.sim.events`, :mod:`~shedlab.core.sim.publishing`, :mod:`~shedlab.core.sim.metrics`)
read and update it in the order :mod:`~shedlab.core.sim.kernel` shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from shedlab.core.sim.hardware import CostModel, HardwareClass
from shedlab.core.sim.scenario import AddBrokers, Background, Scenario
from shedlab.core.sim.traffic import BundlePopulation, Traffic
from shedlab.kernels import owner_sums, weighted_scores

__all__ = [
    "NEVER",
    "BrokerLayout",
    "ClusterState",
    "Reports",
    "TrueUsage",
    "broker_ids",
    "broker_layout",
    "measure",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

NEVER = np.iinfo(np.int64).max
"""A time (ms) that never comes: no sample, lookup or shedding is due."""


@dataclass
class BrokerLayout:
    """The broker slots of a scenario: hardware and initial background per slot, who starts, who joins."""

    hardware: list[HardwareClass]
    background: list[Background]
    initial_slots: list[int]
    add_slots: dict[int, list[int]]  # index of an add_brokers event in scenario.events -> its slots


def broker_layout(scenario: Scenario) -> BrokerLayout:
    """Initial groups first, then every ``add_brokers`` event in time order (a stable slot per broker)."""
    hardware: list[HardwareClass] = []
    background: list[Background] = []
    for group in scenario.brokers:
        for _ in range(group.count):
            hardware.append(scenario.hardware[group.hardware])
            background.append(group.background)
    initial_slots = list(range(len(hardware)))
    add_slots: dict[int, list[int]] = {}
    for k, event in sorted(enumerate(scenario.events), key=lambda kv: kv[1].at):
        if isinstance(event, AddBrokers):
            first = len(hardware)
            for _ in range(event.count):
                hardware.append(scenario.hardware[event.hardware])
                background.append(event.background)
            add_slots[k] = list(range(first, len(hardware)))
    return BrokerLayout(hardware, background, initial_slots, add_slots)


def broker_ids(n_slots: int) -> list[str]:
    """``broker-0001:8080`` … (zero-padded to at least four digits, so ids sort in slot order)."""
    width = max(4, len(str(n_slots)))
    return [f"broker-{s + 1:0{width}d}:8080" for s in range(n_slots)]


@dataclass
class Reports:
    """One LocalBrokerData per broker slot (spec §1.7), as arrays, with the bundles each report lists.

    The kernel keeps two of these: the brokers' *local* reports (refreshed at every stats sample) and
    the *published* ones (what the leader read from the metadata store at the broker's last write,
    spec §4.3). Per slot: ``usage``/``limit`` (n, 5) in the order cpu, memory, direct memory, bandwidth
    in, bandwidth out; ``agg`` (n, 4) message rate in/out and throughput in/out; counts. Per bundle:
    ``bundle_owner`` (the slot whose report lists it, -1: none), ``bundle_values`` (4, m) and
    ``bundle_topics``.
    """

    usage: FloatArray
    limit: FloatArray
    agg: FloatArray
    bundles: IntArray
    topics: IntArray
    consumers: IntArray
    producers: IntArray
    bundle_owner: IntArray
    bundle_values: FloatArray
    bundle_topics: IntArray

    @classmethod
    def empty(cls, n_slots: int, m: int) -> Reports:
        return cls(
            usage=np.zeros((n_slots, 5)),
            limit=np.zeros((n_slots, 5)),
            agg=np.zeros((n_slots, 4)),
            bundles=np.zeros(n_slots, dtype=np.int64),
            topics=np.zeros(n_slots, dtype=np.int64),
            consumers=np.zeros(n_slots, dtype=np.int64),
            producers=np.zeros(n_slots, dtype=np.int64),
            bundle_owner=np.full(m, -1, dtype=np.int64),
            bundle_values=np.zeros((4, m)),
            bundle_topics=np.zeros(m, dtype=np.int64),
        )


@dataclass
class ClusterState:
    """Who is alive, who owns which bundle, which clients wait to reconnect, and the leader.

    ``owner`` is the true ownership (-1: unowned, its clients are reconnecting); ``lookup_at`` the time
    the clients of a bundle look it up (``NEVER``: not waiting). ``background`` is the current
    background-load definition of each slot (``background`` events replace it).
    """

    ids: list[str]
    slot_of: dict[str, int]
    cost: CostModel
    background: list[Background]
    alive: BoolArray
    start_ts: IntArray
    owner: IntArray
    lookup_at: IntArray
    leader: int | None = None
    _bg_plan: _BackgroundPlan | None = field(default=None, init=False, repr=False)
    _counts: _OwnerCounts | None = field(default=None, init=False, repr=False)

    @classmethod
    def new(cls, layout: BrokerLayout, bundles: int) -> ClusterState:
        n_slots = len(layout.hardware)
        ids = broker_ids(n_slots)
        return cls(
            ids=ids,
            slot_of={b: s for s, b in enumerate(ids)},
            cost=CostModel(layout.hardware),
            background=list(layout.background),
            alive=np.zeros(n_slots, dtype=np.bool_),
            start_ts=np.zeros(n_slots, dtype=np.int64),
            owner=np.full(bundles, -1, dtype=np.int64),
            lookup_at=np.full(bundles, NEVER, dtype=np.int64),
        )

    @property
    def num_slots(self) -> int:
        return len(self.ids)

    def background_at(self, slots: IntArray, t: float, rng: np.random.Generator | None) -> FloatArray:
        """(n, 3) background fractions (cpu, NIC in, NIC out) of the given slots at ``t`` seconds
        (``rng`` None: without the signals' noise, drawing nothing).

        Slots sharing one constant definition share one value (computed once, no draw); varying
        signals draw per slot, in slot order. The grouping is cached while the slots and the
        definitions stay the same (the loop over 1,000 slots was a tenth of a tick).
        """
        plan = self._background_plan(slots)
        out = np.empty((slots.size, 3))
        for rows, bg in plan.constant:
            out[rows] = (bg.cpu.value(t, rng), bg.nic_in.value(t, rng), bg.nic_out.value(t, rng))
        for i, bg in plan.varying:
            out[i] = (bg.cpu.value(t, rng), bg.nic_in.value(t, rng), bg.nic_out.value(t, rng))
        return out

    def owner_counts(self, bins: IntArray, pop: BundlePopulation) -> tuple[IntArray, ...]:
        """Bundles, topics, consumers and producers per slot (``bins``: owner slot, ``num_slots``: none).

        Kept up to date from the bundles whose bin changed since the last call (a few dozen a tick)
        instead of four bincounts over every bundle; integer sums, so the same numbers. Returns new
        arrays (callers keep them).
        """
        n_slots = self.num_slots
        cache = self._counts
        weights = (pop.topics, pop.consumers, pop.producers)
        if (
            cache is None
            or cache.bins.size != bins.size
            or any(a is not b for a, b in zip(cache.weights, weights, strict=True))
        ):
            sums = [np.bincount(bins, minlength=n_slots + 1).astype(np.int64)]
            sums += [np.bincount(bins, weights=w, minlength=n_slots + 1).astype(np.int64) for w in weights]
            cache = self._counts = _OwnerCounts(bins.copy(), weights, sums)
        else:
            moved = np.flatnonzero(bins != cache.bins)
            if moved.size:
                old, new = cache.bins[moved], bins[moved]
                for total, w in zip(cache.sums, (None, *weights), strict=True):
                    step = np.ones(moved.size, dtype=np.int64) if w is None else w[moved].astype(np.int64)
                    np.subtract.at(total, old, step)
                    np.add.at(total, new, step)
                cache.bins[moved] = new
        return tuple(total[:n_slots].copy() for total in cache.sums)

    def _background_plan(self, slots: IntArray) -> _BackgroundPlan:
        # the same slots and definitions: a list compare checks identity first, in C (a tuple of the
        # thousand ids built per tick cost 40 µs); an equal definition gives the same values and draws
        key = slots.tobytes()
        plan = self._bg_plan
        if plan is not None and plan.key == key and plan.background == self.background:
            return plan
        constant: dict[int, tuple[list[int], Background]] = {}
        varying: list[tuple[int, Background]] = []
        for i, s in enumerate(slots.tolist()):
            bg = self.background[s]
            if bg.cpu.is_constant and bg.nic_in.is_constant and bg.nic_out.is_constant:
                constant.setdefault(id(bg), ([], bg))[0].append(i)
            else:
                varying.append((i, bg))
        groups = [(np.asarray(rows, dtype=np.int64), bg) for rows, bg in constant.values()]
        plan = self._bg_plan = _BackgroundPlan(key, list(self.background), groups, varying)
        return plan


@dataclass
class _OwnerCounts:
    """The per-slot counts of :meth:`ClusterState.owner_counts` and the bins they were counted on."""

    bins: IntArray
    weights: tuple[IntArray, ...]
    sums: list[IntArray]


@dataclass
class _BackgroundPlan:
    """Which rows of :meth:`ClusterState.background_at` share a constant definition, which vary."""

    key: bytes
    background: list[Background]
    constant: list[tuple[IntArray, Background]]
    varying: list[tuple[int, Background]]


@dataclass
class TrueUsage:
    """What the brokers really carry at one tick, from the traffic of the bundles they own.

    Per slot (every slot, alive or not): ``slot_agg`` (n, 4) and the counts. Per alive broker (in
    ``slots`` order): host ``usage``/``limit`` from the cost model, the ``score`` (``U(b)·100``),
    ``background``, and the alive rows of ``agg``, ``bundles`` and ``topics``. ``bundle_bin`` is each
    bundle's owner slot, or ``num_slots`` for an unowned bundle.
    """

    slots: IntArray
    usage: FloatArray
    limit: FloatArray
    score: FloatArray
    background: FloatArray
    agg: FloatArray
    bundles: IntArray
    topics: IntArray
    slot_agg: FloatArray
    slot_bundles: IntArray
    slot_topics: IntArray
    slot_consumers: IntArray
    slot_producers: IntArray
    bundle_bin: IntArray
    extra_cpu: FloatArray | None = None
    """Per alive broker, the CPU of the connection and co-located-bookie terms (None: model off)."""
    stored: FloatArray | None = None
    """Per alive broker, the rows of ``agg`` of its persistent topics only (:attr:`Traffic.stored`; None:
    every topic is persistent, and ``agg`` is what BookKeeper stores)."""
    unowned: int = 0
    """Bundles no broker owns at this measurement (clients reconnecting)."""


_NO_MASK = np.zeros(0, dtype=np.bool_)  # owner_sums: count every bundle


def broker_scores(
    usage: FloatArray, limit: FloatArray, weights: tuple[float, float, float, float]
) -> FloatArray:
    """``U(b)·100`` per broker from (n, 5) usage and limits: the values of
    :func:`~shedlab.model.snapshot.weighted_max_percent` (Pulsar's float32 percentages), compiled
    (:func:`~shedlab.kernels.weighted_scores`; the NumPy form's passes cost 0.1 ms a tick here)."""
    out = np.empty(usage.shape[0])
    weighted_scores(usage, limit, np.asarray(weights, dtype=np.float64), out)
    return out


def measure(
    cluster: ClusterState,
    pop: BundlePopulation,
    traffic: Traffic,
    t: float,
    rng: np.random.Generator | None,
    weights: tuple[float, float, float, float],
) -> TrueUsage:
    """Every alive broker's true usage at ``t`` seconds (what its next stats sample would read);
    ``rng`` None leaves the backgrounds' noise out and draws nothing."""
    n_slots = cluster.num_slots
    owner = cluster.owner
    block = traffic.block
    if block is None:
        block = np.stack((traffic.rate_in, traffic.rate_out, traffic.tp_in, traffic.tp_out))
    idx = np.empty(owner.size, dtype=np.int64)  # each bundle's owner; unowned ones in an overflow bin
    sums = np.zeros((n_slots + 1, 4))
    owner_sums(owner, n_slots, block, _NO_MASK, idx, sums)  # the four bincounts, the same bits
    agg = sums[:n_slots]
    n_bundles, topics, consumers, producers = cluster.owner_counts(idx, pop)
    alive = np.flatnonzero(cluster.alive)
    bg = cluster.background_at(alive, t, rng)
    cost = cluster.cost
    stored = None if traffic.stored is None else _owner_totals(owner, n_slots, traffic.stored)[alive]
    book = agg[alive] if stored is None else stored  # what BookKeeper writes (rows 0, 2) and reads (3)
    usage = cost.usage(
        alive,
        agg[alive, 0],
        agg[alive, 1],
        agg[alive, 2],
        agg[alive, 3],
        topics[alive].astype(float),
        bg,
        stored=None if stored is None else (stored[:, 2], stored[:, 3]),
    )
    extra = cost.extra_cpu(
        alive,
        topics[alive].astype(float),
        producers[alive].astype(float),
        consumers[alive].astype(float),
        book[:, 0],
        book[:, 2],
    )
    if extra is not None:
        usage[:, 0] += extra
    limit = cost.limits(alive)
    return TrueUsage(
        slots=alive,
        usage=usage,
        limit=limit,
        score=broker_scores(usage, limit, weights),
        background=bg,
        agg=agg[alive],
        bundles=n_bundles[alive],
        topics=topics[alive],
        slot_agg=agg,
        slot_bundles=n_bundles,
        slot_topics=topics,
        slot_consumers=consumers,
        slot_producers=producers,
        bundle_bin=idx,
        extra_cpu=extra,
        stored=stored,
        unowned=int(owner.size - n_bundles.sum()),
    )


def _owner_totals(owner: IntArray, n_slots: int, values: FloatArray) -> FloatArray:
    """Per slot, the sums of the (4, m) ``values`` of the bundles it owns (:func:`owner_sums`)."""
    sums = np.zeros((n_slots + 1, 4))
    owner_sums(owner, n_slots, values, _NO_MASK, np.empty(owner.size, dtype=np.int64), sums)
    return sums[:n_slots]
