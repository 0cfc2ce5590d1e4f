"""ThresholdShedder: shed from brokers whose *historical* usage is above the cluster average plus a margin.

Pulsar's default shedding strategy (spec §2.1). Its usage signal is an exponential history of the
weighted max resource usage, advanced once per shedding call. PIP-364 shows that this history
over-estimates a broker that has just shed load (and under-estimates the one that received it),
which is what makes ThresholdShedder over-unload.

Quirks reproduced:
* The history is advanced for every broker on every call, whatever the outcome.
* The lower-boundary pass (``lowerBoundarySheddingEnabled``) advances the history a *second*
  time in the same call with the same data before it looks for the most loaded broker.
* ``cur < avg + threshold`` skips; equality does not, nor does a NaN average (+∞ and −∞ usages).
  The lower-boundary minimum-throughput check is strict the other way (``minThroughput > target``
  skips), so a target equal to the minimum proceeds.
* A broker that owns exactly one bundle is never shed from (Pulsar warns "sole namespace bundle").
* Usage above 100 % is not clamped.

Deviation: Java adds the brokers' usages for the average in ConcurrentHashMap order, which a
snapshot does not carry; shedlab adds them sequentially in broker-id order. The two sums can differ
in the last bit, which matters only for a broker exactly on ``avg + threshold``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, ClassVar

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.pulsar import java_sum
from shedlab.model.snapshot import ClusterSnapshot, FloatArray
from shedlab.strategies.base import MB, SheddingResult, SkipKind, Unload
from shedlab.strategies.greedy import greedy_largest_first

ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05
LOWER_BOUNDARY_THRESHOLD_MARGIN = 0.5


class ThresholdShedder:
    """Pulsar's ``org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder``."""

    name: ClassVar[str] = "ThresholdShedder"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.history: dict[str, float] = {}

    def seed_history(self, values: Mapping[str, float]) -> None:
        """Preset the usage history (broker → fraction), as a leader that has been running would have."""
        self.history.update({b: float(v) for b, v in values.items()})

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        keep = set(active)
        self.history = {b: v for b, v in self.history.items() if b in keep}

    def _advance_history(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> tuple[FloatArray, float]:
        """One EMA step for every broker; returns the histories (broker order) and their mean."""
        h = conf.load_balancer_history_resource_percentage
        usage = snapshot.weighted_max_usage(conf.resource_weights())
        values = np.empty(snapshot.num_brokers)
        for i, broker in enumerate(snapshot.broker_ids):
            prev = self.history.get(broker)
            u = float(usage[i])
            value = u if prev is None else prev * h + (1 - h) * u
            self.history[broker] = value
            values[i] = value
        with np.errstate(invalid="ignore"):  # +∞ and −∞ histories: a NaN average, as Java's sum gives
            avg = java_sum(values) / snapshot.num_brokers if snapshot.num_brokers else 0.0
        return values, avg

    def find_bundles_for_unloading(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        result = SheddingResult()
        threshold = conf.load_balancer_broker_threshold_shedder_percentage / 100.0
        min_throughput = conf.load_balancer_bundle_unload_min_throughput_threshold * MB
        usage = snapshot.weighted_max_usage(conf.resource_weights())
        history, avg = self._advance_history(snapshot, conf)
        if avg == 0:
            result.skipped.append({"reason": "average max resource usage is 0"})
            result.note(SkipKind.NO_TRAFFIC)
            return result
        throughput = snapshot.total_msg_throughput()
        # Quirk (ThresholdShedder.findBundlesForUnloading): Java skips a broker when `cur < avg + threshold`;
        # a NaN on either side (an average of +∞ and −∞ usages) skips nobody, and each broker's target is
        # NaN, which is not below the minimum either: every broker with two bundles sheds its largest one.
        above = np.flatnonzero(~(history < avg + threshold))
        for b in above.tolist():
            broker = snapshot.broker_ids[b]
            pct = float(history[b]) - avg - threshold + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            target = float(throughput[b] * pct)
            base: dict[str, Any] = {
                "strategy": self.name,
                "pass": "upper",
                "usage_history": float(history[b]),
                "usage_now": float(usage[b]),
                "avg_usage": avg,
                "threshold": threshold,
                "excess": float(pct),
                "broker_throughput": float(throughput[b]),
                "target_throughput": target,
            }
            if target < min_throughput:
                result.skipped.append({**base, "broker": broker, "reason": "target below minimum throughput"})
                result.note(SkipKind.BELOW_MIN_THROUGHPUT, broker)
                continue
            self._select(snapshot, b, target, base, result)
        if not result.unloads and conf.lower_boundary_shedding_enabled:
            self._lower_boundary(snapshot, conf, threshold, min_throughput, result)
        return result

    def _select(
        self,
        snapshot: ClusterSnapshot,
        b: int,
        target: float,
        base: dict[str, Any],
        result: SheddingResult,
    ) -> None:
        broker = snapshot.broker_ids[b]
        owned = int(snapshot.num_owned_bundles[b])
        if owned <= 1:
            why = "sole namespace bundle" if owned == 1 else "no bundles"
            result.skipped.append({**base, "broker": broker, "reason": why})
            result.note(SkipKind.SOLE_BUNDLE if owned == 1 else SkipKind.NO_BUNDLES, broker)
            return
        chosen, keys, marked = greedy_largest_first(snapshot, b, target)
        for j, key, total in zip(chosen.tolist(), keys.tolist(), marked.tolist(), strict=True):
            reason = {**base, "bundle_throughput": key, "marked_throughput": total}
            result.unloads.append(Unload(broker, snapshot.bundle_names[j], reason))

    def _lower_boundary(
        self,
        snapshot: ClusterSnapshot,
        conf: LoadBalancerConfig,
        threshold: float,
        min_throughput: float,
        result: SheddingResult,
    ) -> None:
        """Shed from the most loaded broker when some broker is below ``avg - threshold``."""
        history, avg = self._advance_history(snapshot, conf)  # quirk: a second EMA step
        lower = avg - threshold
        best, max_broker = lower, -1
        for b in range(snapshot.num_brokers):
            if history[b] > best and snapshot.num_owned_bundles[b] > 1:
                best, max_broker = float(history[b]), b
        has_low = bool((history < lower).any())
        if max_broker < 0 or not has_low:
            why = "no broker below the lower bound" if not has_low else "no broker with more than one bundle"
            result.skipped.append({"pass": "lower-boundary", "reason": why, "avg_usage": avg})
            kind = SkipKind.NO_BROKER_BELOW_LOWER_BOUND if not has_low else SkipKind.NO_BROKER_WITH_BUNDLES
            result.note(kind)
            return
        throughput = float(snapshot.total_msg_throughput()[max_broker])
        target = throughput * threshold * LOWER_BOUNDARY_THRESHOLD_MARGIN
        base: dict[str, Any] = {
            "strategy": self.name,
            "pass": "lower-boundary",
            "usage_history": float(history[max_broker]),
            "avg_usage": avg,
            "threshold": threshold,
            "broker_throughput": throughput,
            "target_throughput": target,
        }
        if min_throughput > target:
            broker = snapshot.broker_ids[max_broker]
            result.skipped.append({**base, "broker": broker, "reason": "target below minimum throughput"})
            result.note(SkipKind.BELOW_MIN_THROUGHPUT, broker)
            return
        self._select(snapshot, max_broker, target, base, result)
