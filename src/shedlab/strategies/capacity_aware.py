"""CapacityAwareShedder: AvgShedder's pairing, with moves sized by each broker's estimated capacity.

A shedlab strategy, not one of Pulsar's; ``docs/capacity-aware.md`` explains every rule and measures it.
It is loaded like any user's plugin: an entry point of shedlab itself (``CapacityAwareShedder``) or
``shedlab.strategies.capacity_aware:CapacityAwareShedder``. One instance serves both roles, as
AvgShedder (spec §2.4, §3.3): the shedding pass plans each bundle's destination and placement
returns it.

Kept from AvgShedder: scores are Pulsar's weighted max usage × 100 (no history); a broker sheds only
after consecutive hits (``loadBalancerAvgShedder*`` keys); shedding is paired and placement bound.

Changed, because AvgShedder balances heterogeneous clusters badly (PIP-364 rates it "normal"):

* **Capacity is inferred** (nothing declares it, and config keys are Pulsar's). Per resource r, one
  msg/s costs the smallest ``usage[b, r] / traffic[b]`` over brokers with traffic (background only adds
  usage). A broker's *slope*, the score points one msg/s costs it, is ``max_r w_r · 100 · cost_r /
  limit[b, r]``: four times the cores, a quarter of the slope. What traffic does not explain,
  ``score − slope · traffic``, is background load. ``level`` is the score all brokers would share if
  traffic followed capacity.
* **Amounts even the pair's predicted scores**, ``(s_hot − s_cold) / (slope_hot + slope_cold)`` msg/s,
  whatever the brokers' traffic (a strong cold broker already carrying more still receives load), capped
  so that neither broker crosses ``level`` (else the hot one becomes the coldest and takes load back).
* **Pairing skips a hot broker that has not triggered or has nothing to shed** (its load is a
  co-located process) without using up the cold partner; hits are counted on the hot side only.
* **Vetoes**: a destination's predicted score must not exceed
  ``loadBalancerBrokerOverloadedThresholdPercentage`` (equal passes, as Pulsar's strict tests); a bundle
  the leader's even-distribution filter would send elsewhere goes to the admitted broker with the most
  headroom, or stays.
* **Unplanned placements go by headroom**: the candidate with the lowest predicted score, counting the
  bundles this instance already placed on the same snapshot. No random choice is made.

Every rule, reason and measurement: ``docs/capacity-aware.md``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.pulsar import SYSTEM_NAMESPACE, namespace_of
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
from shedlab.strategies.base import BrokerChoices, Placement, SheddingResult, Unload, candidate_indices
from shedlab.strategies.greedy import sort_descending

__all__ = ["CapacityAwareShedder", "CapacityModel", "estimate_capacity"]


_SCORED_RESOURCES: Final = (CPU, DIRECT_MEMORY, BANDWIDTH_IN, BANDWIDTH_OUT)
"""The resources of Pulsar's weighted max usage, in the order of ``conf.resource_weights()``."""


@dataclass(frozen=True)
class CapacityModel:
    """Per broker: score (0..100), traffic (msg/s in + out), slope (score points per msg/s) and
    background (score points traffic does not explain)."""

    scores: FloatArray
    traffic: FloatArray
    slope: FloatArray
    background: FloatArray
    level: float

    def predicted(self, broker: int, added: float) -> float:
        """The score of ``broker`` after ``added`` msg/s more (negative: fewer)."""
        return float(self.scores[broker] + self.slope[broker] * added)


def estimate_capacity(snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> CapacityModel | None:
    """The capacity model of a snapshot, or None when no broker carries traffic to estimate it from."""
    weights = conf.resource_weights()
    scores = snapshot.weighted_max_usage(weights) * 100
    traffic = snapshot.total_msg_rate()
    loaded = traffic > 0
    if not bool(loaded.any()):
        return None
    usage, limit = snapshot.resource_usage, snapshot.resource_limit
    slope = np.zeros(snapshot.num_brokers)
    for r, w in zip(_SCORED_RESOURCES, weights, strict=True):
        cost = float(np.min(np.maximum(usage[loaded, r], 0.0) / traffic[loaded]))  # usage per msg/s
        per_broker = np.zeros(snapshot.num_brokers)
        np.divide(w * 100.0 * cost, limit[:, r], out=per_broker, where=limit[:, r] > 0)
        slope = np.maximum(slope, per_broker)
    background = np.maximum(scores - slope * traffic, 0.0)
    return CapacityModel(scores, traffic, slope, background, _balanced_level(traffic, slope, background))


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
        self._headroom: _HeadroomView | None = None

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Forget counters and planned destinations of brokers that left (AvgShedder keeps them)."""
        alive = set(active)
        for counts in (self.hit_high, self.hit_low):
            for broker in [b for b in counts if b not in alive]:
                del counts[broker]
        for bundle in [k for k, b in self.planned_destinations.items() if b not in alive]:
            del self.planned_destinations[bundle]

    # ------------------------------------------------------------------ shedding
    def find_bundles_for_unloading(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        result = SheddingResult()
        model = estimate_capacity(snapshot, conf)
        if model is None:
            self.hit_high.clear()
            self.hit_low.clear()
            result.skipped.append({"strategy": self.name, "reason": "no broker carries traffic"})
            return result
        triggered = self._count_hits(snapshot, model, conf)
        cycle = _Cycle(snapshot, conf, model)
        order = np.argsort(model.scores, kind="stable").tolist()
        i, j = 0, len(order) - 1
        low = conf.load_balancer_avg_shedder_low_threshold
        while i < j:
            cold, hot = order[i], order[j]
            hot_id = snapshot.broker_ids[hot]
            base = self._base(snapshot, model, cold, hot)
            if float(model.scores[hot] - model.scores[cold]) < low:
                result.skipped.append({**base, "broker": hot_id, "reason": "gap below the low threshold"})
                break
            j -= 1
            if hot_id not in triggered:
                result.skipped.append({**base, "broker": hot_id, "reason": "hit count not reached"})
                continue
            if snapshot.shedding_candidates(hot).size == 0:
                result.skipped.append(
                    {**base, "broker": hot_id, "reason": "no sheddable bundle (load is not traffic)"}
                )
                continue
            self.hit_high.pop(hot_id, None)
            self.hit_low.pop(hot_id, None)
            if self._shed_pair(snapshot, cycle, (cold, hot), base, result):
                i += 1
        return result

    def _count_hits(
        self, snapshot: ClusterSnapshot, model: CapacityModel, conf: LoadBalancerConfig
    ) -> set[str]:
        """Advance every broker's consecutive-hit counters against the coldest broker; the triggered ones.

        A broker is a low hit when its gap to the coldest reaches the low threshold, a high hit when it
        reaches the high one; a miss restarts the count (AvgShedder's rule, counted on the hot side only,
        since the cold partner may change from cycle to cycle).
        """
        low, high = (
            conf.load_balancer_avg_shedder_low_threshold,
            conf.load_balancer_avg_shedder_high_threshold,
        )
        hh = conf.load_balancer_avg_shedder_hit_count_high_threshold
        hl = conf.load_balancer_avg_shedder_hit_count_low_threshold
        coldest = float(model.scores.min())
        triggered: set[str] = set()
        for b, broker in enumerate(snapshot.broker_ids):
            gap = float(model.scores[b]) - coldest
            _bump(self.hit_low, broker, gap >= low)
            _bump(self.hit_high, broker, gap >= high)
            if self.hit_high.get(broker, 0) >= hh or self.hit_low.get(broker, 0) >= hl:
                triggered.add(broker)
        return triggered

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
        }

    def _shed_pair(
        self,
        snapshot: ClusterSnapshot,
        cycle: _Cycle,
        pair: tuple[int, int],
        base: dict[str, Any],
        result: SheddingResult,
    ) -> bool:
        """Move bundles from ``hot`` until the pair's predicted scores are even; whether any moved."""
        cold, hot = pair
        model = cycle.model
        hot_id = snapshot.broker_ids[hot]
        even = float(model.scores[hot] - model.scores[cold]) / float(model.slope[hot] + model.slope[cold])
        amount = min(even, *_to_level(model, cold, hot))
        base = {
            **base,
            "mode": "msgRate",
            "pair_even_amount": even,
            "level": model.level,
            "amount_to_move": amount,
        }
        if amount <= cycle.min_amount:
            result.skipped.append({**base, "broker": hot_id, "reason": "amount below minUnloadMessage"})
            return False
        candidates = snapshot.shedding_candidates(hot)
        keys = snapshot.short_msg_rate_in[candidates] + snapshot.short_msg_rate_out[candidates]
        ordered, keys = sort_descending(candidates, keys)
        remaining, selected = amount, 0.0
        refused = {"overload veto": 0, "even-distribution filter": 0}
        for k, traffic in zip(ordered.tolist(), keys.tolist(), strict=True):
            if not 0 < traffic <= remaining:
                continue
            destination, rule, after = cycle.destination(k, traffic, cold, hot)
            if destination is None:
                refused[rule] += 1
                continue
            remaining -= traffic
            selected += traffic
            bundle, dest_id = snapshot.bundle_names[k], snapshot.broker_ids[destination]
            self.planned_destinations[bundle] = dest_id
            reason = {
                **base,
                "rule": rule,
                "bundle_traffic": traffic,
                "amount_selected": selected,
                "destination_predicted": after,
            }
            result.unloads.append(Unload(hot_id, bundle, reason, destination=dest_id))
        if selected:
            return True
        if refused["overload veto"]:
            why = "every fitting bundle would overload the destination"
        elif refused["even-distribution filter"]:
            why = "the even-distribution filter leaves no destination with room for any fitting bundle"
        else:
            why = "no bundle fits the amount"
        result.skipped.append({**base, "broker": hot_id, "reason": why, **refused})
        return False

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
        predicted = view.scores[indices] + view.slope[indices] * view.placed[indices]
        count = snapshot.num_owned_bundles[indices] + view.placed_count[indices]
        # Without traffic (a cluster's first lookups) nothing has a cost yet: fewest bundles first.
        k = int(
            np.lexsort((predicted, count))[0] if view.mean_rate == 0 else np.lexsort((count, predicted))[0]
        )
        best = int(indices[k])
        view.placed[best] += view.bundle_rate(snapshot, bundle)
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
class _HeadroomView:
    """A snapshot's scores, slopes and short-term bundle rates, and the msg/s placed on each broker."""

    snapshot: ClusterSnapshot
    scores: FloatArray
    slope: FloatArray
    rates: FloatArray
    mean_rate: float
    placed: FloatArray
    placed_count: IntArray

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> _HeadroomView:
        model = estimate_capacity(snapshot, conf)
        scores = snapshot.weighted_max_usage(conf.resource_weights()) * 100
        slope = model.slope if model is not None else np.zeros(snapshot.num_brokers)
        rates = snapshot.short_term_msg_rate()
        mean = float(rates.mean()) if rates.size else 0.0
        n = snapshot.num_brokers
        return cls(snapshot, scores, slope, rates, mean, np.zeros(n), np.zeros(n, dtype=np.int64))

    def bundle_rate(self, snapshot: ClusterSnapshot, bundle: str) -> float:
        """A bundle's short-term msg/s, or the mean bundle's when it has none yet (it will cost)."""
        k = snapshot.bundle_index(bundle)
        if k is not None and self.rates[k] > 0:
            return float(self.rates[k])
        return self.mean_rate


class _Cycle:
    """One shedding cycle's estimates: the capacity model, the msg/s already planned onto each broker,
    and the namespace counts of the leader's even-distribution filter."""

    def __init__(self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig, model: CapacityModel) -> None:
        self.model = model
        self.spread = _EvenDistribution(snapshot, conf)
        self.limit = float(conf.load_balancer_broker_overloaded_threshold_percentage)
        self.min_amount = float(conf.min_unload_message)
        self.added = np.zeros(snapshot.num_brokers)

    def destination(self, bundle: int, traffic: float, cold: int, hot: int) -> tuple[int | None, str, float]:
        """Where ``bundle`` (``traffic`` msg/s) can go: the paired ``cold`` broker, unless the
        overload veto refuses it (predicted score above the overloaded threshold; equal passes), or the
        even-distribution filter would not let it through; then the broker the filter admits with the
        lowest predicted score, if that stays within the balanced level and the threshold.

        Returns (broker, rule, predicted score) or (None, why, nan); a chosen move is counted.
        """
        admitted = self.spread.admitted(bundle, self.model.scores.size)
        if admitted[cold]:
            after = self.model.predicted(cold, self.added[cold] + traffic)
            if after > self.limit:
                return None, "overload veto", float("nan")
            return self._take(bundle, cold, traffic, "paired destination", after)
        admitted[hot] = False
        options = np.flatnonzero(admitted)
        if options.size == 0:
            return None, "even-distribution filter", float("nan")
        predicted = self.model.scores[options] + self.model.slope[options] * (self.added[options] + traffic)
        best = int(np.argmin(predicted))
        after = float(predicted[best])
        if after > min(self.limit, self.model.level):
            return None, "even-distribution filter", float("nan")
        return self._take(bundle, int(options[best]), traffic, "redirected (even-distribution filter)", after)

    def _take(
        self, bundle: int, broker: int, traffic: float, rule: str, after: float
    ) -> tuple[int, str, float]:
        self.added[broker] += traffic
        self.spread.count(bundle, broker)
        return broker, rule, after


class _EvenDistribution:
    """The leader's even-distribution filter as the shedder can foresee it (spec §4.5 step 5).

    With ``loadBalancerDistributeBundlesEvenlyEnabled`` the leader places a bundle only on the brokers
    owning the fewest bundles of its namespace, so a planned destination above that minimum is filtered
    out and the bundle lands elsewhere. Counts are the snapshot's owners (the source still reports the
    bundle until its next report, as the leader sees it) plus the moves planned this cycle; namespaces
    are indexed on first use.
    """

    def __init__(self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> None:
        self.snapshot = snapshot
        self.enabled = conf.load_balancer_distribute_bundles_evenly_enabled
        self._members: dict[str, list[int]] | None = None
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
            if self._members is None:
                self._members = {}
                for k, name in enumerate(self.snapshot.bundle_names):
                    self._members.setdefault(namespace_of(name), []).append(k)
            owners = self.snapshot.bundle_owner[np.array(self._members.get(namespace, []), dtype=np.int64)]
            owners = owners[owners >= 0]
            self._counts[namespace] = np.bincount(owners, minlength=self.snapshot.num_brokers).astype(
                np.int64
            )
        return self._counts[namespace]


def _to_level(model: CapacityModel, cold: int, hot: int) -> tuple[float, float]:
    """The hot broker's traffic above the balanced level and the cold broker's room below it (msg/s);
    ``inf`` where the level does not bind (the broker is on the other side of it)."""
    excess = (
        (model.scores[hot] - model.level) / model.slope[hot] if model.scores[hot] > model.level else np.inf
    )
    room = (
        (model.level - model.scores[cold]) / model.slope[cold] if model.scores[cold] < model.level else np.inf
    )
    return float(excess), float(room)


def _bump(counts: dict[str, int], broker: str, hit: bool) -> None:
    if hit:
        counts[broker] = counts.get(broker, 0) + 1
    else:
        counts.pop(broker, None)
