"""CapacityAwareShedder: AvgShedder's pairing, with moves sized by each broker's estimated capacity.

A shedlab strategy, not one of Pulsar's; ``docs/capacity-aware.md`` explains every rule and measures it.
It is loaded like any user's plugin: an entry point of shedlab itself (``CapacityAwareShedder``) or
``shedlab.strategies.capacity_aware:CapacityAwareShedder``. One instance serves both roles, as
AvgShedder (spec §2.4, §3.3): the shedding pass plans each bundle's destination and placement
returns it.

Kept from AvgShedder: scores are Pulsar's weighted max usage × 100 (no history); a broker sheds only
after consecutive hits (``loadBalancerAvgShedder*`` keys); shedding is paired and placement bound.

Changed, because AvgShedder balances heterogeneous clusters badly (PIP-364 rates it "normal"):

* **Capacity is declared or inferred.** ``capacityAwareBrokerCapacities`` (shedlab's own key) declares
  it per broker class (``pattern=capacity``); otherwise, per resource r, one unit of its driver costs
  the smallest ``usage[b, r] / driver[b]`` over brokers with traffic (background only adds usage), and
  broker b's *rate* is ``w_r · 100 · cost_r / limit[b, r]``: four times the cores, a quarter of the
  rate. Messages drive the CPU; bytes drive the NICs and direct memory (where the reports carry them),
  so a bundle of large messages weighs what it weighs on a NIC-bound broker. A bundle costs a broker
  its steepest resource's points. What traffic does not explain is background load.
* **Heterogeneous clusters trigger sooner**: low hits count after the high hit count when slopes differ
  or a broker's background has stood out for as many cycles (one report's background may be its
  windows; the imbalance is the machines', not traffic that may swing back), and after one
  hit while a broker is above ``loadBalancerBrokerOverloadedThresholdPercentage`` (an overload costs
  now; Pulsar's OverloadShedder does not wait either).
* **Greedy moves that must pay**: move by move, the best of any bundle of the three hottest triggered
  brokers that fits the pair-evening amount (its points on both at most ``p_hot − p_cold``: with messages
  as the one driver, ``(p_hot − p_cold) / (slope_hot + slope_cold)`` msg/s) towards one of
  the two coldest brokers admitted for its namespace, while it lowers the predicted imbalance (spread +
  total absolute deviation from each broker's target: the balanced level, or its background when that is
  higher) by ``capacityAwareMinBenefit`` — by ``capacityAwareBalancedMinBenefit`` once the predicted
  spread is within ``capacityAwareBalancedSpread`` and no broker is more than half of it above its target
  ("balanced enough": near balance the last moves of one-size bundles buy as little as the first, so only
  those that still do a lot are made). On unequal machines a move off a broker predicted above
  ``loadBalancerBrokerOverloadedThresholdPercentage`` needs only to lower the imbalance (overload relief:
  an overloaded minute costs now, and fine bundles offer no move worth the minimum), and where no single
  move pays, the fewest bundles of a broker more than half the band above its target that pay together
  move together (group moves: clusters of fine bundles; never on identical machines). A strong
  cold broker that already carries more traffic still receives load; a hot broker with nothing to shed (a
  co-located process) is skipped without using up a destination.
* **Vetoes**: a destination's predicted score must not exceed
  ``loadBalancerBrokerOverloadedThresholdPercentage`` (equal passes, as Pulsar's strict tests); only
  destinations the leader's even-distribution filter admits are considered.
* **On identical machines, AvgShedder's pairs where no move pays** (rule 0): there the capacity model adds
  nothing, and its minimum benefit, in absolute score points, left clusters of fine bundles unbalanced;
  when this strategy's own trigger fired and its plan made no move, AvgShedder's decisions (at
  ``maxUnloadPercentage`` 0.5, a pair evened, counting through every cycle) are taken, under the overload
  veto, unless the machines have differed as long as AvgShedder waits on a low hit; a pair not taken
  (this plan moved, or its own trigger has not fired) keeps its counts until it can be.
* **Unplanned placements go by headroom**: the candidate with the lowest predicted score, counting the
  bundles this instance already placed on the same snapshot. No random choice is made.
* **A stopped plan stays stopped** until the imbalance has grown by ``capacityAwareMinBenefit`` (noise
  does not let a move through that just failed to pay), and **reports that do not show a move yet are
  corrected by it**: a broker whose published report is the very one the move was planned on has not
  reported since (Pulsar rewrites a report only on a large enough change).

Every rule, reason and measurement: ``docs/capacity-aware.md``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Final, TypeVar

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.pulsar import SYSTEM_NAMESPACE, NameIndex, namespace_of
from shedlab.model.snapshot import (
    BANDWIDTH_IN,
    BANDWIDTH_OUT,
    CPU,
    DIRECT_MEMORY,
    BoolArray,
    ClusterSnapshot,
    FloatArray,
    IntArray,
)
from shedlab.strategies.avg_shedder import AvgShedder, preset_hit_counts
from shedlab.strategies.base import BrokerChoices, Placement, SheddingResult, Unload, candidate_indices
from shedlab.strategies.greedy import sort_descending

__all__ = [
    "BYTES",
    "BYTES_IN",
    "MSGS",
    "CapacityAwareShedder",
    "CapacityModel",
    "UnseenMoves",
    "broker_load",
    "bundle_load",
    "declared_capacities",
    "estimate_capacity",
    "mean_bundle_load",
]

TRIGGER_HITS: Final = "hit counts"
TRIGGER_OVERLOAD: Final = "one hit: a broker is overloaded on a heterogeneous cluster"
"""A reason's ``trigger``: the counts that applied this cycle (rule 2 of docs/capacity-aware.md)."""

SOURCES_TRIED: Final = 3
"""Each move is sought among the hottest triggered brokers, this many of them."""
DESTINATIONS_TRIED: Final = 2
"""... towards the coldest admitted brokers, this many of them (the second coldest may take a bundle that
is too large to even a pair with the coldest, or gain more when the coldest is a strong machine)."""


AVG_SHEDDER_FALLBACK: Final = "identical machines, no move pays: AvgShedder's pairs"
"""The ``rules`` of a cycle's unloads made by rule 0 of docs/capacity-aware.md
(``capacityAwareAvgShedderOnIdenticalMachines``)."""
AVG_SHEDDER_VETOED: Final = "AvgShedder's moves refused by the overload veto"
"""A skipped entry of rule 0: how many of AvgShedder's unloads the veto of rule 3 refused."""
OVERLOAD_RULE: Final = "overload relief: off a broker above the overload threshold"
"""The ``rule`` of a move that pays less than the minimum benefit but relieves a source predicted above
``loadBalancerBrokerOverloadedThresholdPercentage`` (rule 3): an overloaded minute costs now, and a cluster
of fine bundles offers no move worth the minimum benefit."""
GROUP_RULE: Final = "group: no single move pays"
"""The ``rule`` of a move made as one of a group (rule 3, ``capacityAwareGroupMoves``); its reason's ``group``
says how many bundles moved together and ``gain`` is the group's."""
EVEN_PAIR: Final = 0.5
"""AvgShedder's ``maxUnloadPercentage`` under rule 0: the share of a pair's traffic gap that evens it."""

NO_PAYING_MOVE: Final = "no move lowers the imbalance by capacityAwareMinBenefit"
BALANCED_STOP: Final = (
    "balanced enough: within capacityAwareBalancedSpread, no move lowers the imbalance by "
    "capacityAwareBalancedMinBenefit"
)

_SCORED_RESOURCES: Final = (CPU, DIRECT_MEMORY, BANDWIDTH_IN, BANDWIDTH_OUT)
"""The resources of Pulsar's weighted max usage, in the order of ``conf.resource_weights()``."""


MSGS, BYTES_IN, BYTES = 0, 1, 2
"""The traffic a resource's usage is estimated from (a column of :func:`broker_load`, :func:`bundle_load`):
msg/s in + out, bytes/s in, bytes/s in + out."""
_BYTE_DRIVERS: Final = (MSGS, BYTES, BYTES_IN, BYTES)
"""Per scored resource (cpu, direct memory, bandwidth in, bandwidth out): what drives it. CPU follows
messages; a NIC carries bytes (out: what consumers read plus the bookie copies of what producers wrote,
so in + out), as do direct memory's buffers."""
_MSG_DRIVERS: Final = (MSGS, MSGS, MSGS, MSGS)
_T = TypeVar("_T", float, FloatArray)
_BACKGROUND_ROUNDING: Final = 1e-9
"""Score points of background below which it is rounding (the cost-setting broker's own ratio, ~1e-14), not
load: 0, so that reasons do not show 1.42e-14 points of background where there is none."""


def broker_load(snapshot: ClusterSnapshot) -> FloatArray:
    """(n, 3): each broker's reported msg/s in + out, bytes/s in, bytes/s in + out."""
    return np.column_stack(
        (snapshot.total_msg_rate(), snapshot.msg_throughput_in, snapshot.total_msg_throughput())
    ).astype(np.float64)


def bundle_load(snapshot: ClusterSnapshot, which: IntArray) -> FloatArray:
    """(len(which), 3): each of bundles ``which``'s short-term msg/s in + out, bytes/s in, bytes/s in + out
    (the leader's view)."""
    return np.column_stack(_load_columns(*(a[which] for a in _bundle_traffic(snapshot)))).astype(np.float64)


def mean_bundle_load(snapshot: ClusterSnapshot) -> FloatArray:
    """(3,): the mean of :func:`bundle_load`'s rows over every bundle of the snapshot (zeros without any),
    from the means of its four rates: the columns are sums, so no (m, 3) array is built for it (5 ms at
    100,000 bundles, on every snapshot a placement looks at)."""
    means = (float(a.mean()) if a.size else 0.0 for a in _bundle_traffic(snapshot))
    return np.array(_load_columns(*means), dtype=np.float64)


def _bundle_traffic(snapshot: ClusterSnapshot) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Every bundle's short-term msg/s in, msg/s out, bytes/s in and bytes/s out."""
    return (
        snapshot.short_msg_rate_in,
        snapshot.short_msg_rate_out,
        snapshot.short_msg_throughput_in,
        snapshot.short_msg_throughput_out,
    )


def _load_columns(rate_in: _T, rate_out: _T, bytes_in: _T, bytes_out: _T) -> tuple[_T, _T, _T]:
    """:func:`bundle_load`'s columns from a bundle's (or many bundles') four rates."""
    return rate_in + rate_out, bytes_in, bytes_in + bytes_out


@dataclass(frozen=True)
class CapacityModel:
    """Per broker: score (0..100), traffic (msg/s at the cluster's mix of message sizes), slope (score
    points per such msg/s) and background (score points traffic does not explain); per broker and scored
    resource, ``rates``: score points per unit of the resource's driver (``drivers``, :data:`MSGS`,
    :data:`BYTES_IN` or :data:`BYTES`), and ``load``: the broker's (n, 3) traffic (:func:`broker_load`)."""

    scores: FloatArray
    traffic: FloatArray
    slope: FloatArray
    background: FloatArray
    level: float
    rates: FloatArray
    load: FloatArray
    drivers: tuple[int, ...]

    @classmethod
    def of(
        cls, scores: FloatArray, load: FloatArray, rates: FloatArray, drivers: tuple[int, ...]
    ) -> CapacityModel:
        """The model from scores, traffic and rates. A broker's explained score is its steepest resource's
        rate times that resource's driver; background is what that does not explain. The slope is the
        steepest rate per msg/s of the cluster's mix (each driver's cluster total per msg/s), so a broker's
        traffic in such msg/s is its explained score over its slope; the level is where the brokers would
        balance. When every resource follows messages, the slope is the steepest rate, the traffic msg/s."""
        per = load[:, list(drivers)]
        explained = (rates * per).max(axis=1)
        msgs = load[:, MSGS]
        if drivers == _MSG_DRIVERS:  # the steepest rate and msg/s as they are, not rounded again
            slope, traffic = rates.max(axis=1), msgs.copy()
        else:
            total = float(msgs.sum())
            mix = per.sum(axis=0) / total if total > 0 else np.ones(len(drivers))
            slope = (rates * mix).max(axis=1)
            traffic = np.divide(explained, slope, out=msgs.copy(), where=slope > 0)
        residue = scores - explained
        # the broker that sets a resource's cost has no background; floating rounding leaves it ~1e-14
        background = np.where(residue > _BACKGROUND_ROUNDING, residue, 0.0)
        level = _balanced_level(traffic, slope, background)
        return cls(scores, traffic, slope, background, level, rates, load, drivers)

    @property
    def traffic_is_msgs(self) -> bool:
        """Whether messages drive every resource (no bytes reported, or capacities declared)."""
        return self.drivers == _MSG_DRIVERS

    def points(self, b: int, load: FloatArray) -> float:
        """Score points that traffic ``load`` (a row of :func:`bundle_load`) costs broker ``b``: its
        steepest resource's."""
        return self.points_of(self.rates[b].tolist(), self.driven(load[np.newaxis])[0].tolist())

    def driven(self, loads: FloatArray) -> FloatArray:
        """Rows of :func:`bundle_load` as each scored resource's driver (m, 4)."""
        result: FloatArray = loads[:, list(self.drivers)]
        return result

    @staticmethod
    def points_of(rates: Sequence[float], driven: Sequence[float]) -> float:
        """A broker's ``rates`` times one traffic's ``driven`` (:meth:`driven`), the steepest: in Python
        floats, since a plan asks for one (broker, bundle) at a time, many times."""
        return max(r * x for r, x in zip(rates, driven, strict=True))


def estimate_capacity(snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> CapacityModel | None:
    """The capacity model of a snapshot, or None when no broker carries traffic to estimate it from.

    Per scored resource r, one unit of its driver costs the smallest ``usage[b, r] / driver[b]`` over
    brokers with traffic (background only adds usage), and broker b's rate is ``w_r · 100 · cost_r /
    limit[b, r]``. Bytes drive the NICs and direct memory where every broker with traffic has such bytes
    (:func:`_drivers`; else messages drive the resource). Brokers of a class declared in
    ``capacityAwareBrokerCapacities`` get ``unit / capacity`` score points per msg/s on every resource
    instead, ``unit`` being the smallest score per msg/s × capacity over the declared brokers with
    traffic (background only adds usage), or, when none of them carries traffic, the inferred slope of a
    declared broker × its capacity; messages then drive every resource, as a declared capacity is per
    msg/s.
    """
    weights = conf.resource_weights()
    scores = snapshot.weighted_max_usage(weights) * 100
    load = broker_load(snapshot)
    loaded = load[:, MSGS] > 0
    if not bool(loaded.any()):
        return None
    declared = declared_capacities(snapshot.broker_ids, conf)
    drivers = _MSG_DRIVERS if declared is not None else _drivers(load, loaded)
    rates = _rates(snapshot, weights, load, loaded, drivers)
    if declared is not None:
        has = declared > 0
        known = has & loaded
        traffic = load[:, MSGS]
        slope = rates.max(axis=1)
        if bool(known.any()):
            unit = float(np.min(scores[known] / traffic[known] * declared[known]))
        else:
            unit = float(np.max(slope[has] * declared[has]))
        rates[has] = (unit / declared[has])[:, None]
    return CapacityModel.of(scores, load, rates, drivers)


def _drivers(load: FloatArray, loaded: BoolArray) -> tuple[int, ...]:
    """Per scored resource, its driver in :data:`_BYTE_DRIVERS` where every broker with traffic has some
    of it, else messages: a broker whose producers stopped while its consumers drain a backlog has bytes
    out but none in, and a cost per byte in could not be estimated from it."""
    return tuple(d if bool((load[loaded, d] > 0).all()) else MSGS for d in _BYTE_DRIVERS)


def _rates(
    snapshot: ClusterSnapshot,
    weights: tuple[float, float, float, float],
    load: FloatArray,
    loaded: BoolArray,
    drivers: tuple[int, ...],
) -> FloatArray:
    """(n, 4) score points per unit of each scored resource's driver (:func:`estimate_capacity`)."""
    usage, limit = snapshot.resource_usage, snapshot.resource_limit
    rates = np.zeros((snapshot.num_brokers, len(_SCORED_RESOURCES)))
    for i, (r, w, d) in enumerate(zip(_SCORED_RESOURCES, weights, drivers, strict=True)):
        cost = float(np.min(np.maximum(usage[loaded, r], 0.0) / load[loaded, d]))
        np.divide(w * 100.0 * cost, limit[:, r], out=rates[:, i], where=limit[:, r] > 0)
    return rates


def declared_capacities(broker_ids: Sequence[str], conf: LoadBalancerConfig) -> FloatArray | None:
    """Each broker's declared capacity (0: none declared) from ``capacityAwareBrokerCapacities``
    (``pattern=capacity`` items, the first pattern matching the broker id wins); None without the key."""
    items = conf.capacity_aware_broker_capacities
    if not items:
        return None
    rules = [(pattern, float(value)) for pattern, _, value in (item.rpartition("=") for item in items)]
    out = np.zeros(len(broker_ids))
    for b, broker in enumerate(broker_ids):
        for pattern, value in rules:
            if fnmatch.fnmatchcase(broker, pattern):
                out[b] = value
                break
    return out


def _balanced_level(traffic: FloatArray, slope: FloatArray, background: FloatArray) -> float:
    """The score every broker would have if the cluster's traffic were spread in proportion to capacity.

    Solves ``Σ (L − background_b) / slope_b = Σ traffic_b`` over the brokers that can take traffic at L:
    a broker whose background alone is above L (a co-located process) carries none and is left out, and
    L is solved again without it. Brokers with no scored limit (slope 0) are left out too.
    """
    usable = slope > 0
    level = float("inf")
    for _ in range(len(slope) + 1):
        if not bool(usable.any()):
            return float("inf")
        inverse = 1.0 / slope[usable]
        level = float((traffic.sum() + (background[usable] * inverse).sum()) / inverse.sum())
        still = usable & (background < level)
        if bool((still == usable).all()):
            break
        usable = still
    return level


class CapacityAwareShedder:
    """Capacity-aware paired shedding with bound placement (both roles, one instance)."""

    name: ClassVar[str] = "CapacityAwareShedder"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        # No random choice is made; the generator is accepted because every strategy is built with one.
        self.rng = rng if rng is not None else np.random.default_rng()
        self.hit_high: dict[str, int] = {}
        self.hit_low: dict[str, int] = {}
        self.planned_destinations: dict[str, str] = {}
        self.unseen: dict[str, UnseenMoves] = {}
        self.settled: float | None = None
        self._headroom: _HeadroomView | None = None
        self._names: NameIndex | None = None  # the snapshots' bundles by namespace (rule 4's filter)
        self._trigger = TRIGGER_HITS  # this cycle's trigger, in every reason (rule 2)
        self._avg = AvgShedder(self.rng)  # rule 0's fallback, run on every cycle
        self._avg_conf: tuple[LoadBalancerConfig, LoadBalancerConfig] | None = None  # (given, AvgShedder's)
        self.background_streak: dict[str, int] = {}  # consecutive cycles a broker's background stood out
        self.machines_differ = False  # the last cycle's judgment of rule 2 (_judge_machines)
        self.slopes_differ = False  # ... of its first test alone, which group moves need (rule 3)
        self._avg_steps_aside = False  # ... and of rule 0 (they have differed as long as AvgShedder waits)

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Forget counters and planned destinations of brokers that left (AvgShedder keeps them)."""
        alive = set(active)
        for counts in (self.hit_high, self.hit_low, self.background_streak):
            for broker in [b for b in counts if b not in alive]:
                del counts[broker]
        for bundle in [k for k, b in self.planned_destinations.items() if b not in alive]:
            del self.planned_destinations[bundle]
        for broker in [b for b in self.unseen if b not in alive]:
            del self.unseen[broker]
        self.settled = None

    def seed_hit_counts(self, counts: Mapping[str, tuple[int, int]]) -> None:
        """Preset the consecutive hit counters (broker → (high, low)), as AvgShedder's: a scenario's
        ``leader_state.hit_counts`` starts this strategy, and rule 0's AvgShedder, where the leader was."""
        self._avg.seed_hit_counts(counts)
        preset_hit_counts(self.hit_high, self.hit_low, counts)

    # ------------------------------------------------------------------ shedding
    def find_bundles_for_unloading(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        result = SheddingResult()
        model = estimate_capacity(snapshot, conf)
        if model is None:
            for counts in (self.hit_high, self.hit_low, self.background_streak):
                counts.clear()
            result.skipped.append({"strategy": self.name, "reason": "no broker carries traffic"})
            return result
        model = self._with_unseen_moves(snapshot, model, result)
        self._judge_machines(snapshot, model, conf)
        fallback = self._avg_shedder(snapshot, conf)
        triggered = self._plan(snapshot, model, conf, result)
        if triggered and not result.unloads and fallback is not None and fallback.unloads:
            self._fall_back(snapshot, model, conf, fallback, result)
        elif fallback is not None and fallback.unloads:
            self._defer_avg_shedder(fallback)
        for unload in result.unloads:
            assert unload.destination is not None
            self.planned_destinations[unload.bundle] = unload.destination
            if unload.reason.get("rules") != AVG_SHEDDER_FALLBACK:
                self._remember_unseen(snapshot, model, unload)
        return result

    def _plan(
        self,
        snapshot: ClusterSnapshot,
        model: CapacityModel,
        conf: LoadBalancerConfig,
        result: SheddingResult,
    ) -> bool:
        """Rules 2 and 3: count the hits, then plan the moves that pay, into ``result``; whether any broker
        with a bundle to shed was triggered."""
        triggered = self._count_hits(snapshot, model, conf, result)
        sources = self._sources(snapshot, model, triggered, result)
        if not sources:
            return False
        overloaded = self.machines_differ and self._overloaded(model, conf, sources)
        if not overloaded and self._still_settled(model, conf, result):
            return True
        moves = _Moves(
            snapshot,
            conf,
            model,
            self._names_of(snapshot),
            relieve=self.machines_differ,
            group=conf.capacity_aware_group_moves and self.slopes_differ,
        )
        moved = moves.plan(sources, result, self.name, self._base)
        self.settled = moves.settled_at
        for hot in moved:
            broker = snapshot.broker_ids[hot]
            self.hit_high.pop(broker, None)
            self.hit_low.pop(broker, None)
        return True

    def _judge_machines(
        self, snapshot: ClusterSnapshot, model: CapacityModel, conf: LoadBalancerConfig
    ) -> None:
        """Judge whether this cycle's brokers are unequal machines: slopes differing by more than a quarter,
        or a broker whose background has stood out from the lowest by the low threshold for
        ``loadBalancerAvgShedderHitCountHighThreshold`` consecutive cycles (``machines_differ``: rule 2's
        faster trigger), and for ``loadBalancerAvgShedderHitCountLowThreshold`` cycles, as long as
        AvgShedder waits on a low hit, for rule 0 to step aside.

        Why a background must persist: it is inferred from one report, whose CPU and traffic a broker
        averages over different windows (its host-usage timer, its stats window), so a broker whose
        consumers stop and catch up out of phase with those windows shows 15-36 points of "background"
        for one cycle and none the next, on another broker each cycle (measured on
        ``probe-identical-batch-jitter``: 23 of 30 cycles looked unequal, and rule 0's AvgShedder, reset
        on each, never reached its hit count). A co-located process stays where it is.
        """
        low = conf.load_balancer_avg_shedder_low_threshold
        gap = model.background - float(model.background.min())
        for b, broker in enumerate(snapshot.broker_ids):
            _bump(self.background_streak, broker, bool(gap[b] >= low))
        longest = max(self.background_streak.values(), default=0)
        slopes = self.slopes_differ = _slopes_differ(model)
        self.machines_differ = slopes or longest >= conf.load_balancer_avg_shedder_hit_count_high_threshold
        self._avg_steps_aside = slopes or longest >= conf.load_balancer_avg_shedder_hit_count_low_threshold

    def _avg_shedder(self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> SheddingResult | None:
        """AvgShedder's decisions for this cycle on identical machines (rule 0), else None.

        It runs on every cycle, so that its consecutive hits count as AvgShedder's would, also through a
        cycle whose reports make the machines look unequal for a moment; its decisions are used only on
        identical machines (:meth:`_judge_machines`), and only where this strategy's own plan makes no move.
        Its amount is this strategy's, a pair evened, which on equal machines is half the traffic gap:
        ``maxUnloadPercentage`` 0.5, the value PIP-364 recommends for AvgShedder (Pulsar's default, 0.2, is
        ThresholdShedder's share of one broker's load).
        """
        if not conf.capacity_aware_avg_shedder_on_identical_machines:
            return None
        if self._avg_conf is None or self._avg_conf[0] is not conf:
            self._avg_conf = (conf, conf.with_overrides({"maxUnloadPercentage": EVEN_PAIR}, source=self.name))
        decided = self._avg.find_bundles_for_unloading(snapshot, self._avg_conf[1])
        return None if self._avg_steps_aside else decided

    def _defer_avg_shedder(self, fallback: SheddingResult) -> None:
        """Rule 0's AvgShedder decided to shed a pair this cycle, but its decisions were not taken (this
        strategy's own plan moved, or its own trigger has not fired): give its pairs back the counts they
        had (AvgShedder restarts a pair's counts when it sheds it), so that they can act in the first cycle
        this strategy triggers and its plan makes no move, not eight hits after it. The counts are the ones
        each unload's reason reports.

        Why also when not triggered: AvgShedder counts a hit for both brokers of a pair, this strategy for
        the hot one only, so AvgShedder often reaches its hits first. Restarting its counts then made rule 0
        wait for eight more once this strategy did trigger (``probe-identical-onboarding``, seed 1: its pair
        ready at minute 25, this strategy at 27, AvgShedder's pair again only at 33)."""
        for unload in fallback.unloads:
            under, over = unload.reason["pair"]
            self._avg.seed_hit_counts(
                {
                    side_id: (unload.reason[f"hit_high_{side}"], unload.reason[f"hit_low_{side}"])
                    for side_id, side in ((under, "under"), (over, "over"))
                }
            )

    def _fall_back(
        self,
        snapshot: ClusterSnapshot,
        model: CapacityModel,
        conf: LoadBalancerConfig,
        fallback: SheddingResult,
        result: SheddingResult,
    ) -> None:
        """Take AvgShedder's unloads (rule 0) that pass this strategy's overload veto (rule 3: no destination
        predicted above ``loadBalancerBrokerOverloadedThresholdPercentage``), in AvgShedder's order. Each
        reason says whose rules made it; each source restarts its counts, as after a move of this strategy's
        own. The even-distribution filter is left to the leader, as for AvgShedder: a destination it filters
        out is replaced at placement by the admitted broker with the most headroom (rule 5), where refusing
        the move here kept over-placement-lruww at a spread of 22-26 instead of AvgShedder's 19."""
        predicted = model.scores.astype(np.float64).copy()
        limit = float(conf.load_balancer_broker_overloaded_threshold_percentage)
        vetoed = 0
        for unload in fallback.unloads:
            assert unload.destination is not None
            k, dest = self._names_of(snapshot).index[unload.bundle], snapshot.broker_index[unload.destination]
            rise = model.points(dest, _load_of(snapshot, k))
            if predicted[dest] + rise > limit:
                vetoed += 1
                continue
            predicted[dest] += rise
            unload.reason["rules"] = AVG_SHEDDER_FALLBACK
            result.unloads.append(unload)
            self.hit_high.pop(unload.broker, None)
            self.hit_low.pop(unload.broker, None)
        if vetoed:
            result.skipped.append(
                {"strategy": self.name, "reason": AVG_SHEDDER_VETOED, "overload veto": vetoed}
            )
        self.settled = None

    def _names_of(self, snapshot: ClusterSnapshot) -> NameIndex:
        """The snapshot's bundles by name and namespace, kept while the bundles are the same: building them
        from 100,000 names on every cycle was most of a 1,000-broker cycle."""
        self._names = NameIndex.reuse(self._names, snapshot.bundle_names)
        return self._names

    @staticmethod
    def _overloaded(model: CapacityModel, conf: LoadBalancerConfig, sources: Collection[int]) -> bool:
        """Whether a broker with bundles to shed is above ``loadBalancerBrokerOverloadedThresholdPercentage``:
        then a stopped plan is planned again (rule 3, overload relief)."""
        limit = float(conf.load_balancer_broker_overloaded_threshold_percentage)
        return any(float(model.scores[b]) > limit for b in sources)

    def _still_settled(self, model: CapacityModel, conf: LoadBalancerConfig, result: SheddingResult) -> bool:
        """Whether the cluster is still where the last plan stopped (rule 3, hysteresis).

        A plan stops when no move lowers the imbalance by ``capacityAwareMinBenefit``; it is planned again
        only once the imbalance has grown by that much over where it stopped. Without this, noise in the
        reports lets a move that was just below the minimum through a few cycles later (measured on
        ``heterogeneous-cpu-eater``: a third move of gain 4.0-4.5 two to seventeen minutes after the
        first two). The settled imbalance follows the cluster down when it balances by itself.
        """
        if self.settled is None:
            return False
        now = _imbalance(model.scores, _targets(model))
        if now >= self.settled + float(conf.capacity_aware_min_benefit):
            self.settled = None
            return False
        self.settled = min(self.settled, now)
        result.skipped.append(
            {
                "strategy": self.name,
                "reason": "settled: the imbalance has not grown by capacityAwareMinBenefit",
                "imbalance": now,
                "settled": self.settled,
            }
        )
        return True

    def _with_unseen_moves(
        self, snapshot: ClusterSnapshot, model: CapacityModel, result: SheddingResult
    ) -> CapacityModel:
        """The model with the moves the reports do not show yet (rule 7).

        A broker rewrites its report only when its usage changed enough or its report is old (spec §4.3),
        so after a move its published score may still be the one from before: planning on it would move
        again what has already moved. A broker whose report is exactly the one the moves were planned on
        (:func:`_report_fingerprint`) has not reported since; its score and traffic are corrected by the
        moves' predicted effect. A broker that has reported since shows them: its entry is dropped.
        """
        if not self.unseen:
            return model
        scores, load = model.scores.copy(), model.load.copy()
        corrected: list[str] = []
        for broker in list(self.unseen):
            b = snapshot.broker_index.get(broker)
            pending = self.unseen[broker]
            if b is None or _report_fingerprint(snapshot, b) != pending.fingerprint:
                del self.unseen[broker]
                continue
            scores[b] += pending.score
            load[b] += np.array(pending.load)
            corrected.append(broker)
        if not corrected:
            return model
        result.skipped.append(
            {"strategy": self.name, "reason": "reports do not show earlier moves yet", "brokers": corrected}
        )
        return CapacityModel.of(
            np.clip(scores, 0.0, None), np.clip(load, 0.0, None), model.rates, model.drivers
        )

    def _remember_unseen(self, snapshot: ClusterSnapshot, model: CapacityModel, unload: Unload) -> None:
        """Record a planned move's predicted effect on both brokers until their reports show it."""
        k = self._names_of(snapshot).index[unload.bundle]
        assert unload.destination is not None
        moved = _load_of(snapshot, k)
        for broker, sign in ((unload.broker, -1.0), (unload.destination, 1.0)):
            b = snapshot.broker_index[broker]
            fingerprint = _report_fingerprint(snapshot, b)
            pending = self.unseen.get(broker)
            if pending is None or pending.fingerprint != fingerprint:
                pending = self.unseen[broker] = UnseenMoves(fingerprint)
            pending.score += sign * model.points(b, moved)
            total = np.add(pending.load, sign * moved).tolist()
            pending.load = (total[0], total[1], total[2])

    def _count_hits(
        self,
        snapshot: ClusterSnapshot,
        model: CapacityModel,
        conf: LoadBalancerConfig,
        result: SheddingResult,
    ) -> set[str]:
        """Advance every broker's consecutive-hit counters against the coldest broker; the triggered ones.

        A broker is a low hit when its gap to the coldest reaches the low threshold, a high hit when it
        reaches the high one; a miss restarts the count (AvgShedder's rule, counted on the hot side only,
        since the destination of a move may change from cycle to cycle). On a heterogeneous cluster
        (:meth:`_judge_machines`) low hits trigger after the *high* hit count: the imbalance comes from the
        machines, not from traffic that may swing back. On such a cluster, while any broker's score is
        above the overload threshold, one hit of either kind triggers, for every broker: each minute of
        waiting is a minute overloaded, and the whole plan is made at once (triggering the overloaded
        broker alone left the rest of the plan to the hysteresis of rule 3, which then held it;
        docs/capacity-aware.md, rule 2). Identical machines keep their counts, which is what keeps this
        strategy calm under jitter.
        """
        low, high = (
            conf.load_balancer_avg_shedder_low_threshold,
            conf.load_balancer_avg_shedder_high_threshold,
        )
        hh = conf.load_balancer_avg_shedder_hit_count_high_threshold
        hl = conf.load_balancer_avg_shedder_hit_count_low_threshold
        fast = self.machines_differ
        need_low = hh if fast else hl
        self._trigger = TRIGGER_HITS
        if fast and float(model.scores.max()) > conf.load_balancer_broker_overloaded_threshold_percentage:
            hh = need_low = 1
            self._trigger = TRIGGER_OVERLOAD
        coldest = float(model.scores.min())
        triggered: set[str] = set()
        for b, broker in enumerate(snapshot.broker_ids):
            gap = float(model.scores[b]) - coldest
            _bump(self.hit_low, broker, gap >= low)
            _bump(self.hit_high, broker, gap >= high)
            if self.hit_high.get(broker, 0) >= hh or self.hit_low.get(broker, 0) >= need_low:
                triggered.add(broker)
            elif gap >= low:
                result.skipped.append(
                    {
                        **self._base(snapshot, model, int(np.argmin(model.scores)), b),
                        "broker": broker,
                        "reason": "hit count not reached",
                        "heterogeneous": fast,
                    }
                )
        return triggered

    def _sources(
        self,
        snapshot: ClusterSnapshot,
        model: CapacityModel,
        triggered: set[str],
        result: SheddingResult,
    ) -> dict[int, list[tuple[int, float]]]:
        """Triggered brokers with bundles to move: their bundles with traffic, largest short-term
        message rate first (AvgShedder's order)."""
        sources: dict[int, list[tuple[int, float]]] = {}
        coldest = int(np.argmin(model.scores))
        for b, broker in enumerate(snapshot.broker_ids):
            if broker not in triggered:
                continue
            candidates = snapshot.shedding_candidates(b)
            keys = snapshot.short_msg_rate_in[candidates] + snapshot.short_msg_rate_out[candidates]
            ordered, keys = sort_descending(candidates, keys)
            movable = [(k, t) for k, t in zip(ordered.tolist(), keys.tolist(), strict=True) if t > 0]
            if movable:
                sources[b] = movable
            else:
                result.skipped.append(
                    {
                        **self._base(snapshot, model, coldest, b),
                        "broker": broker,
                        "reason": "no sheddable bundle (load is not traffic)",
                    }
                )
        return sources

    def _base(self, snapshot: ClusterSnapshot, model: CapacityModel, cold: int, hot: int) -> dict[str, Any]:
        ids = snapshot.broker_ids
        return {
            "strategy": self.name,
            "pair": [ids[cold], ids[hot]],
            "under_score": float(model.scores[cold]),
            "over_score": float(model.scores[hot]),
            "gap": float(model.scores[hot] - model.scores[cold]),
            "under_slope": float(model.slope[cold]),
            "over_slope": float(model.slope[hot]),
            "under_background": float(model.background[cold]),
            "over_background": float(model.background[hot]),
            "hit_high_over": self.hit_high.get(ids[hot], 0),
            "hit_low_over": self.hit_low.get(ids[hot], 0),
            "trigger": self._trigger,
            "level": model.level,
        }

    # ------------------------------------------------------------------ placement
    def select_broker(
        self,
        candidates: Sequence[str] | IntArray,
        bundle: str,
        snapshot: ClusterSnapshot,
        conf: LoadBalancerConfig,
    ) -> Placement:
        indices = candidate_indices(snapshot, candidates)
        choices = BrokerChoices(snapshot.broker_ids, indices)
        planned = self.planned_destinations.get(bundle)
        if planned is not None:
            p = snapshot.broker_index.get(planned)
            if p is not None and choices.holds_index(p):
                return Placement(planned, (planned,), {"strategy": self.name, "rule": "planned destination"})
        if indices.size == 0:
            return Placement(None, (), {"strategy": self.name, "rule": "no candidates"})
        return self._by_headroom(indices, choices, bundle, snapshot, conf)

    def _by_headroom(
        self,
        indices: IntArray,
        choices: BrokerChoices,
        bundle: str,
        snapshot: ClusterSnapshot,
        conf: LoadBalancerConfig,
    ) -> Placement:
        """The candidate with the lowest predicted score, counting what this instance placed on the same
        snapshot (so a burst of lookups spreads instead of piling onto one broker)."""
        view = self._headroom_view(snapshot, conf)
        predicted = view.scores[indices] + view.placed[indices]
        count = snapshot.num_owned_bundles[indices] + view.placed_count[indices]
        # Without traffic (a cluster's first lookups) nothing has a cost yet: fewest bundles first.
        no_traffic = view.model is None or view.mean_load[MSGS] == 0
        k = int(np.lexsort((predicted, count))[0] if no_traffic else np.lexsort((count, predicted))[0])
        best = int(indices[k])
        view.placed[best] += view.points(best, self._names_of(snapshot).index.get(bundle))
        view.placed_count[best] += 1
        chosen = snapshot.broker_ids[best]
        self.planned_destinations[bundle] = chosen
        reason = {"strategy": self.name, "rule": "headroom", "predicted_score": float(predicted[k])}
        return Placement(chosen, choices, reason)

    def _headroom_view(self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> _HeadroomView:
        """The estimates of one snapshot, computed on its first lookup (an initial assignment looks up
        every bundle on the same snapshot, so per-lookup estimates would cost O(bundles²))."""
        view = self._headroom
        if view is None or view.snapshot is not snapshot:
            view = _HeadroomView.of(snapshot, conf)
            self._headroom = view
        return view


@dataclass
class UnseenMoves:
    """A broker's planned moves its report does not show yet: the report they were planned on and their
    predicted effect on its score (points) and traffic (a row of :func:`broker_load`)."""

    fingerprint: tuple[float, ...]
    score: float = 0.0
    load: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def traffic(self) -> float:
        """The msg/s in + out the moves add (negative: remove)."""
        return self.load[MSGS]


def _load_of(snapshot: ClusterSnapshot, k: int) -> FloatArray:
    """Bundle ``k``'s row of :func:`bundle_load`."""
    row: FloatArray = bundle_load(snapshot, np.array([k]))[0]
    return row


def _report_fingerprint(snapshot: ClusterSnapshot, b: int) -> tuple[float, ...]:
    """What identifies a broker's published report: its resource usage, message rates and bundle count.
    Any rewrite changes at least one of them (the rates and usage are measured, not copied)."""
    return (
        *snapshot.resource_usage[b].tolist(),
        float(snapshot.msg_rate_in[b]),
        float(snapshot.msg_rate_out[b]),
        float(snapshot.num_owned_bundles[b]),
    )


@dataclass
class _HeadroomView:
    """A snapshot's scores, capacity model and short-term bundle loads, and the score points placed on each
    broker (each bundle at its own points on the broker it went to: bytes count on a NIC-bound one)."""

    snapshot: ClusterSnapshot
    scores: FloatArray
    model: CapacityModel | None
    mean_load: FloatArray
    placed: FloatArray
    placed_count: IntArray

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> _HeadroomView:
        model = estimate_capacity(snapshot, conf)
        scores = snapshot.weighted_max_usage(conf.resource_weights()) * 100
        n = snapshot.num_brokers
        mean = mean_bundle_load(snapshot)
        return cls(snapshot, scores, model, mean, np.zeros(n), np.zeros(n, dtype=np.int64))

    def points(self, b: int, k: int | None) -> float:
        """Bundle ``k``'s points on broker ``b`` (:meth:`CapacityModel.points`), or the mean bundle's when it
        has no traffic yet or is not in the snapshot (it will cost); 0 without a model."""
        if self.model is None:
            return 0.0
        load = _load_of(self.snapshot, k) if k is not None else self.mean_load
        return self.model.points(b, load if load[MSGS] > 0 else self.mean_load)


class _Moves:
    """One cycle's plan: the predicted scores, updated move by move."""

    def __init__(
        self,
        snapshot: ClusterSnapshot,
        conf: LoadBalancerConfig,
        model: CapacityModel,
        names: NameIndex,
        *,
        relieve: bool,
        group: bool,
    ) -> None:
        self.snapshot = snapshot
        self.model = model
        self.spread = _EvenDistribution(snapshot, conf, names)
        self.limit = float(conf.load_balancer_broker_overloaded_threshold_percentage)
        self.min_benefit = float(conf.capacity_aware_min_benefit)
        self.balanced_spread = float(conf.capacity_aware_balanced_spread)
        self.balanced_min_benefit = float(conf.capacity_aware_balanced_min_benefit)
        self.group_moves = group
        """Whether group moves are planned (rule 3): with ``capacityAwareGroupMoves``, on machines whose
        slopes differ (:attr:`CapacityAwareShedder.slopes_differ`; identical machines have rule 0, and
        under jitter there a group pays on every pulse; a background that stood out, rule 2's other test,
        does not suffice: identical machines under jitter show one for a while)."""
        self.relieve = relieve
        """Whether a move off a broker predicted above the overload threshold pays without the minimum
        benefit (rule 3, overload relief: on unequal machines, as rule 2's one-hit trigger)."""
        self.predicted = model.scores.astype(np.float64).copy()
        self.target = _targets(model)
        self._rates: list[list[float]] = model.rates.tolist()
        self._driven: dict[int, list[float]] = {}
        """The plan's candidate bundles' drivers (:meth:`CapacityModel.driven`), set by :meth:`plan`."""
        self.settled_at: float | None = None
        """The predicted imbalance where the plan stopped because no move paid."""

    def plan(
        self,
        sources: dict[int, list[tuple[int, float]]],
        result: SheddingResult,
        name: str,
        base: Callable[[ClusterSnapshot, CapacityModel, int, int], dict[str, Any]],
    ) -> set[int]:
        """Greedy moves while one pays (lowers the imbalance by ``capacityAwareMinBenefit``, or by
        ``capacityAwareBalancedMinBenefit`` while the plan is balanced enough, :meth:`balanced_enough`) or
        relieves an overloaded source (:meth:`_candidates`); the sources that moved. Each move is the best,
        over the hottest sources and all their bundles, of a bundle that fits its pair-evening amount towards
        one of the coldest brokers the even-distribution filter admits for its namespace."""
        moved: set[int] = set()
        refused = {"overload veto": 0, "even-distribution filter": 0}
        candidates = sorted({k for bundles in sources.values() for k, _ in bundles})
        loads = bundle_load(self.snapshot, np.array(candidates, dtype=np.int64))
        self._driven = dict(zip(candidates, self.model.driven(loads).tolist(), strict=True))
        # No cap on the count (docs/capacity-aware.md, rule 3): each move lowers the predicted imbalance by
        # the minimum benefit and takes its bundle out of ``sources``; with none left, ``best`` is None.
        while True:
            now = _imbalance(self.predicted, self.target)
            ends = _Ends(self.predicted)
            hottest = sorted(sources, key=lambda b: (-self.predicted[b], b))[:SOURCES_TRIED]
            best, relief = self._candidates(hottest, sources, ends, refused)
            excess = float((self.predicted - self.target).max())
            balanced = self.balanced_enough(ends.spread, excess)
            required = self.balanced_min_benefit if balanced else self.min_benefit
            if (best is None or best.gain < required) and relief is not None:
                self._make(relief, now, sources, moved, result, name, base, 1)
                continue
            if (best is None or best.gain < required) and not balanced and self.group_moves:
                group = self._group(hottest, sources, ends, required)
                if group:
                    for move in group:
                        self._make(move, now, sources, moved, result, name, base, len(group))
                    continue
            if best is None or best.gain < required:
                self.settled_at = now
                result.skipped.append(
                    {
                        "strategy": name,
                        "reason": BALANCED_STOP if balanced else NO_PAYING_MOVE,
                        "best_gain": None if best is None else best.gain,
                        "min_benefit": required,
                        "spread": ends.spread,
                        "excess": excess,
                        "imbalance": now,
                        **refused,
                    }
                )
                break
            self._make(best, now, sources, moved, result, name, base, 1)
        return moved

    def _candidates(
        self,
        hottest: list[int],
        sources: dict[int, list[tuple[int, float]]],
        ends: _Ends,
        refused: dict[str, int],
    ) -> tuple[_Move | None, _Move | None]:
        """The best move off any of the ``hottest`` sources, and the best that relieves an overloaded one:
        off a source predicted above ``loadBalancerBrokerOverloadedThresholdPercentage``, with any positive
        gain (rule 3, overload relief; None unless :attr:`relieve`)."""
        best: _Move | None = None
        relief: _Move | None = None
        for hot in hottest:
            move = self._best_of(hot, sources[hot], ends, refused)
            if move is None:
                continue
            if best is None or move.gain > best.gain:
                best = move
            overloaded = self.relieve and self.predicted[hot] > self.limit and move.gain > 0
            if overloaded and (relief is None or move.gain > relief.gain):
                relief = replace(move, rule=OVERLOAD_RULE)
        return best, relief

    def _make(
        self,
        move: _Move,
        now: float,
        sources: dict[int, list[tuple[int, float]]],
        moved: set[int],
        result: SheddingResult,
        name: str,
        base: Callable[[ClusterSnapshot, CapacityModel, int, int], dict[str, Any]],
        group: int,
    ) -> None:
        """Plan ``move``: its bundle leaves the sources, the predicted scores and the filter's counts follow,
        and its unload carries the reason."""
        ids = self.snapshot.broker_ids
        sources[move.hot].remove((move.bundle, move.traffic))
        p = self.predicted
        before = (float(p[move.hot]), float(p[move.cold]))
        p[move.hot] -= move.down
        p[move.cold] += move.up
        self.spread.count(move.bundle, move.cold)
        moved.add(move.hot)
        reason = {
            **base(self.snapshot, self.model, move.cold, move.hot),
            "mode": "msgRate" if self.model.traffic_is_msgs else "msgRate+throughput",
            "rule": move.rule,
            "bundle_traffic": move.traffic,
            "pair_even_amount": move.even,
            "gain": move.gain,
            "imbalance_before": now,
            "source_predicted_before": before[0],
            "destination_predicted_before": before[1],
            "source_predicted": float(p[move.hot]),
            "destination_predicted": float(p[move.cold]),
        }
        if group > 1:
            reason["group"] = group
        bundle = self.snapshot.bundle_names[move.bundle]
        result.unloads.append(Unload(ids[move.hot], bundle, reason, destination=ids[move.cold]))

    def _group(
        self, hottest: list[int], sources: dict[int, list[tuple[int, float]]], ends: _Ends, required: float
    ) -> list[_Move]:
        """When no single move pays: the fewest of one hot broker's bundles, largest first, that moved
        together to one of the two coldest brokers lower the imbalance by ``required`` (rule 3, group
        moves); the group of the largest gain over the hottest sources that are outside the band
        themselves (more than half of ``capacityAwareBalancedSpread`` above their targets,
        :meth:`balanced_enough`), or none. Each fits the
        pair-evening amount with the others, passes the overload veto with them, and is the group's only
        bundle of its namespace (the filter admits one more of a namespace, not two)."""
        p = self.predicted
        n = p.size
        best: list[_Move] = []
        best_gain = -np.inf
        for hot in hottest:
            if p[hot] - self.target[hot] <= self.half_band:
                continue
            for cold in [int(c) for c in ends.order.tolist() if c != hot][:DESTINATIONS_TRIED]:
                even, gap = self._even_amount(hot, cold), float(p[hot] - p[cold])
                down, up, gain = 0.0, 0.0, -np.inf
                members: list[tuple[int, float, float, float]] = []
                namespaces: set[str] = set()
                for k, traffic in sources[hot]:
                    namespace = namespace_of(self.snapshot.bundle_names[k])
                    down_k, up_k = self._points(hot, k), self._points(cold, k)
                    if (
                        traffic <= 0
                        or namespace in namespaces
                        or not self._fits(down + down_k, up + up_k, gap)
                    ):
                        continue
                    if p[cold] + up + up_k > self.limit:
                        continue
                    if not self.spread.admitted(k, n)[cold]:
                        continue
                    down, up = down + down_k, up + up_k
                    members.append((k, traffic, down_k, up_k))
                    namespaces.add(namespace)
                    gain = self._gain(hot, cold, down, up, ends)
                    if gain >= required:
                        break
                if len(members) > 1 and gain >= required and gain > best_gain:
                    best_gain = gain
                    best = [_Move(hot, cold, k, t, even, gain, GROUP_RULE, d, u) for k, t, d, u in members]
        return best

    def balanced_enough(self, spread: float, excess: float) -> bool:
        """Whether the predicted spread is within ``capacityAwareBalancedSpread`` and no broker's predicted
        score is more than half of it above its target (``excess``, rule 3, "balanced enough"; 0 disables
        it). Within it a move must pay ``capacityAwareBalancedMinBenefit``: near balance every move of
        these clusters' one-size bundles buys about the same few points, so the last stretch of balance
        costs as many unloads as the first and is worth fewer of them. The spread alone understates how
        hot a weak broker is when the coldest ones are strong machines (their score points are cheap, so
        they sit close to their targets): half the band is where a broker of two equal ones stands when
        their spread is the band. Exactly at either bound counts as within, as AvgShedder's thresholds
        count a gap equal to them as a hit."""
        limit = self.balanced_spread
        return limit > 0 and spread <= limit and excess <= self.half_band

    @property
    def half_band(self) -> float:
        """Half of ``capacityAwareBalancedSpread``: how far above its target a broker may be within the band
        (:meth:`balanced_enough`); a group moves only off a broker beyond it (:meth:`_group`)."""
        return self.balanced_spread / 2

    def _best_of(
        self, hot: int, bundles: list[tuple[int, float]], ends: _Ends, refused: dict[str, int]
    ) -> _Move | None:
        """The best move of any of ``hot``'s bundles, each towards the ``DESTINATIONS_TRIED`` coldest
        brokers the even-distribution filter admits for its namespace, that fits the pair-evening amount
        and passes the overload veto.

        Every bundle is tried, not only the largest that fits: with the filter, the largest bundle's
        namespace may admit only brokers already above the balanced level while a smaller bundle of
        another namespace may go to the coldest (a strong machine owning none of its bundles)."""
        p = self.predicted
        n = p.size
        coldest = ends.coldest_except(hot)
        destinations: dict[str, tuple[list[int], bool]] = {}
        best: _Move | None = None
        for k, traffic in bundles:
            namespace = namespace_of(self.snapshot.bundle_names[k])
            if namespace not in destinations:
                admitted = self.spread.admitted(k, n).copy()
                admitted[hot] = False
                options = np.flatnonzero(admitted)
                ordered = _coldest(p, options, DESTINATIONS_TRIED)
                destinations[namespace] = (ordered, bool(admitted[coldest]))
            ordered, coldest_admitted = destinations[namespace]
            if not ordered:
                refused["even-distribution filter"] += 1
                continue
            for cold in ordered:
                down, up = self._points(hot, k), self._points(cold, k)
                if traffic <= 0 or not self._fits(down, up, float(p[hot] - p[cold])):
                    continue
                if p[cold] + up > self.limit:
                    refused["overload veto"] += 1
                    continue
                gain = self._gain(hot, cold, down, up, ends)
                if best is not None and gain <= best.gain:
                    continue
                rule = "coldest destination" if cold == coldest else "redirected (even-distribution filter)"
                if cold != coldest and coldest_admitted:
                    rule = "second coldest destination"
                best = _Move(hot, int(cold), k, traffic, self._even_amount(hot, cold), gain, rule, down, up)
        return best

    def _points(self, b: int, k: int) -> float:
        """Candidate bundle ``k``'s score points on broker ``b`` (:meth:`CapacityModel.points`)."""
        return CapacityModel.points_of(self._rates[b], self._driven[k])

    @staticmethod
    def _fits(down: float, up: float, gap: float) -> bool:
        """Whether a move of ``down`` points off the source and ``up`` onto the destination leaves the
        destination no hotter than the source: within the pair-evening amount. Nothing that costs neither
        broker a point fits."""
        return 0 < down + up <= gap

    def _even_amount(self, hot: int, cold: int) -> float:
        """The pair-evening amount a reason reports (msg/s of the cluster's mix): what moved from ``hot`` to
        ``cold`` leaves both at one predicted score, ``(p_hot − p_cold) / (slope_hot + slope_cold)``; 0 when
        neither has a scored limit. A move fits by its points (:meth:`_fits`), which is this amount exactly
        where messages drive every resource."""
        slope = self.model.slope
        denominator = float(slope[hot] + slope[cold])
        return float(self.predicted[hot] - self.predicted[cold]) / denominator if denominator > 0 else 0.0

    def _gain(self, hot: int, cold: int, down: float, up: float, ends: _Ends) -> float:
        """How much a move of ``down`` points off ``hot`` and ``up`` onto ``cold`` lowers the imbalance
        (spread + total absolute deviation from the targets): only two scores change, so only two deviations
        and the extremes are recomputed."""
        p, t = self.predicted, self.target
        new_hot = float(p[hot] - down)
        new_cold = float(p[cold] + up)
        deviation = (
            abs(new_hot - t[hot]) - abs(p[hot] - t[hot]) + abs(new_cold - t[cold]) - abs(p[cold] - t[cold])
        )
        high = max(new_hot, new_cold, ends.highest_except(hot, cold))
        low = min(new_hot, new_cold, ends.lowest_except(hot, cold))
        return float(ends.spread - (high - low) - deviation)


class _Ends:
    """The predicted scores' order at one step of a plan: the extremes other than a move's two brokers in
    O(1), so that every candidate move's gain is O(1)."""

    def __init__(self, predicted: FloatArray) -> None:
        self.scores = predicted
        self.order = np.argsort(predicted, kind="stable")
        self.spread = float(predicted[self.order[-1]] - predicted[self.order[0]])

    def highest_except(self, a: int, b: int) -> float:
        for i in self.order[::-1][:3].tolist():
            if i not in (a, b):
                return float(self.scores[i])
        return -np.inf

    def lowest_except(self, a: int, b: int) -> float:
        for i in self.order[:3].tolist():
            if i not in (a, b):
                return float(self.scores[i])
        return np.inf

    def coldest_except(self, a: int) -> int:
        first = int(self.order[0])
        return first if first != a or self.order.size == 1 else int(self.order[1])


@dataclass(frozen=True)
class _Move:
    hot: int
    cold: int
    bundle: int
    traffic: float
    even: float
    gain: float
    rule: str
    down: float
    """Score points the move takes off ``hot`` ..."""
    up: float
    """... and adds to ``cold`` (:meth:`CapacityModel.points`)."""


class _EvenDistribution:
    """The leader's even-distribution filter as the shedder can foresee it (spec §4.5 step 5).

    With ``loadBalancerDistributeBundlesEvenlyEnabled`` the leader places a bundle only on the brokers
    owning the fewest bundles of its namespace, so a planned destination above that minimum is filtered
    out and the bundle lands elsewhere. Counts are the snapshot's owners (the source still reports the
    bundle until its next report, as the leader sees it) plus the moves planned this cycle; a namespace's
    counts are made on first use, from its members in the shedder's :class:`NameIndex` (kept across
    cycles: indexing 100,000 bundle names by namespace on every cycle was most of a 1,000-broker cycle).
    """

    def __init__(self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig, names: NameIndex) -> None:
        self.snapshot = snapshot
        self.enabled = conf.load_balancer_distribute_bundles_evenly_enabled
        self._members = names.members
        self._counts: dict[str, IntArray] = {}

    def admitted(self, bundle: int, num_brokers: int) -> BoolArray:
        """Per broker, whether the filter would let ``bundle`` through to it."""
        namespace = namespace_of(self.snapshot.bundle_names[bundle])
        if not (self.enabled or namespace == SYSTEM_NAMESPACE):
            return np.ones(num_brokers, dtype=np.bool_)
        counts = self._namespace_counts(namespace)
        result: BoolArray = counts == counts.min()
        return result

    def count(self, bundle: int, destination: int) -> None:
        """Count a planned move of ``bundle`` onto ``destination`` (as the leader's preallocation will)."""
        self._namespace_counts(namespace_of(self.snapshot.bundle_names[bundle]))[destination] += 1

    def _namespace_counts(self, namespace: str) -> IntArray:
        if namespace not in self._counts:
            members = self._members.get(namespace)
            owners = self.snapshot.bundle_owner[members] if members is not None else np.zeros(0, np.int64)
            owners = owners[owners >= 0]
            self._counts[namespace] = np.bincount(owners, minlength=self.snapshot.num_brokers).astype(
                np.int64
            )
        return self._counts[namespace]


def _coldest(predicted: FloatArray, options: IntArray, k: int) -> list[int]:
    """The first ``k`` of ``options`` by predicted score, ties in their order: a stable argsort's first
    ``k``, found among the options at most as hot as the ``k``-th coldest (a cycle asks this for every
    namespace of its sources, over a thousand brokers on a large cluster: a full sort each time was a
    sixth of the cycle)."""
    values = predicted[options]
    if options.size > k:
        near = values <= np.partition(values, k - 1)[k - 1]
        options, values = options[near], values[near]
    result: list[int] = options[np.argsort(values, kind="stable")][:k].tolist()
    return result


def _slopes_differ(model: CapacityModel) -> bool:
    """Unequal machines: slopes differing by more than a quarter (from the machines' limits or declared
    capacities, so the same every cycle)."""
    slopes = model.slope[model.slope > 0]
    return bool(slopes.size) and float(slopes.max()) > 1.25 * float(slopes.min())


def _imbalance(predicted: FloatArray, target: FloatArray) -> float:
    """What a move must lower: the spread of the predicted scores plus their total absolute deviation from
    their targets (score points, :func:`_targets`). The deviation credits every move that brings a hot
    broker and a cold one closer to where they belong, also when several brokers are equally hot and the
    spread alone would not move; the spread adds the benefit a move has on the extremes the metric users
    watch."""
    return float(predicted.max() - predicted.min()) + float(np.abs(predicted - target).sum())


def _targets(model: CapacityModel) -> FloatArray:
    """Each broker's score once traffic follows capacity: the balanced level, or its background when that
    alone is above the level (it then carries nothing). Moves do not change it (traffic is conserved and
    background is not traffic), unlike the mean of the scores, which falls when load moves to a strong
    machine and so made the other hot brokers look further off, a bias that stalled moves onto a joining
    strong machine. Without a level (no broker with a scored limit), the mean of the scores."""
    if not np.isfinite(model.level):
        return np.full(model.scores.size, float(model.scores.mean()))
    result: FloatArray = np.maximum(model.level, model.background)
    return result


def _bump(counts: dict[str, int], broker: str, hit: bool) -> None:
    if hit:
        counts[broker] = counts.get(broker, 0) + 1
    else:
        counts.pop(broker, None)
