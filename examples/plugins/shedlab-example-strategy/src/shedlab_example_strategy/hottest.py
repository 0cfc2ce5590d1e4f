"""HottestBroker: shed from the single hottest broker, down to the cluster's mean usage.

Each call looks at one broker only, the one with the highest weighted max usage ``U(b)`` (Pulsar's
usage signal, with the configured resource weights). It acts when that broker has been the hottest, and
more than ``loadBalancerBrokerThresholdShedderPercentage`` points above the mean, for
``HIT_COUNT`` consecutive calls (a one-cycle spike does nothing). It then unloads its bundles, largest
short-term throughput first, as long as the throughput moved stays within the broker's excess over the
mean: ``T(b) · (U(b) − mean) / U(b)``. Unlike Pulsar's greedy selection it never overshoots, so it may
move nothing when every bundle is bigger than the excess (that case is reported in ``skipped``).

It reuses ThresholdShedder's Pulsar key for its margin, so ``--set`` and sweep grids tune it as they
tune Pulsar's strategies. Deterministic: ties go to the first broker in snapshot order, and the injected
generator is accepted (as every strategy must) but not used.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies.base import SheddingResult, Unload

HIT_COUNT = 3
"""Consecutive calls a broker must be the hottest, above the margin, before bundles are shed from it."""


class HottestBrokerShedder:
    """A shedding strategy (shedlab's ``SheddingStrategy`` protocol)."""

    name: ClassVar[str] = "HottestBroker"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.hottest: str | None = None  # state between calls: the broker seen hottest, and how often
        self.hits = 0

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Forget the hit count of a broker that left the cluster."""
        if self.hottest not in active:
            self.hottest, self.hits = None, 0

    def find_bundles_for_unloading(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        """Count a hit for the hottest broker; at ``HIT_COUNT`` hits shed its excess over the mean."""
        result = SheddingResult()
        if snapshot.num_brokers < 2:
            return result
        usage = snapshot.weighted_max_usage(conf.resource_weights())
        b = int(np.argmax(usage))
        broker, mean = snapshot.broker_ids[b], float(usage.mean())
        margin = conf.load_balancer_broker_threshold_shedder_percentage / 100.0
        above = float(usage[b]) - mean > margin
        self.hits = self.hits + 1 if above and broker == self.hottest else int(above)
        self.hottest = broker
        reason = {"strategy": self.name, "usage": float(usage[b]), "mean_usage": mean, "hits": self.hits}
        if self.hits < HIT_COUNT:
            why = "hit count not reached" if above else "hottest broker within the margin of the mean"
            result.skipped.append({**reason, "broker": broker, "reason": why})
            return result
        self.hits = 0  # count again after acting
        reason["target_throughput"] = float(snapshot.total_msg_throughput()[b]) * (1 - mean / float(usage[b]))
        result.unloads.extend(self._fitting_bundles(snapshot, b, reason))
        if not result.unloads:
            result.skipped.append({**reason, "broker": broker, "reason": "no bundle fits within the excess"})
        return result

    @staticmethod
    def _fitting_bundles(snapshot: ClusterSnapshot, b: int, reason: dict[str, Any]) -> list[Unload]:
        """Largest short-term throughput first, each bundle that keeps the total within the target."""
        if int(snapshot.num_owned_bundles[b]) <= 1:  # a broker's sole bundle is never moved, as in Pulsar
            return []
        bundles = snapshot.shedding_candidates(b)
        throughput = snapshot.short_term_throughput()[bundles]
        unloads, moved, broker = [], 0.0, snapshot.broker_ids[b]
        for j in np.argsort(-throughput, kind="stable").tolist():
            if moved + float(throughput[j]) <= reason["target_throughput"]:
                moved += float(throughput[j])
                details = {**reason, "bundle_throughput": float(throughput[j])}
                unloads.append(Unload(broker, snapshot.bundle_names[int(bundles[j])], details))
        return unloads
