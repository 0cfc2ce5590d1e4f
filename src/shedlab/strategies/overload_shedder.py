"""OverloadShedder: shed from every broker whose current usage is at or above a fixed threshold.

Spec §2.2. Stateless; uses the instantaneous weighted max usage (weights apply since PIP-358).
It ignores under-loaded brokers entirely, so adding brokers to a cluster where nobody reaches the
threshold moves nothing, and when everybody is above it, load moves between overloaded brokers.

Quirks reproduced: ``cur < overload`` skips (equality sheds, with float32 percentages, so a broker
at exactly 85 % is shed from); no minimum-throughput check; a sole bundle is never shed.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies.base import SheddingResult, SkipKind, Unload
from shedlab.strategies.greedy import greedy_largest_first

ADDITIONAL_THRESHOLD_PERCENT_MARGIN = 0.05


class OverloadShedder:
    """Pulsar's ``org.apache.pulsar.broker.loadbalance.impl.OverloadShedder``."""

    name: ClassVar[str] = "OverloadShedder"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        pass

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Stateless: nothing to forget."""

    def find_bundles_for_unloading(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        result = SheddingResult()
        overload = conf.load_balancer_broker_overloaded_threshold_percentage / 100.0
        usage = snapshot.weighted_max_usage(conf.resource_weights())
        throughput = snapshot.total_msg_throughput()
        for b in np.flatnonzero(usage >= overload).tolist():
            broker = snapshot.broker_ids[b]
            excess = float(usage[b]) - overload + ADDITIONAL_THRESHOLD_PERCENT_MARGIN
            target = float(throughput[b] * excess)
            base: dict[str, Any] = {
                "strategy": self.name,
                "usage_now": float(usage[b]),
                "overload_threshold": overload,
                "excess": excess,
                "broker_throughput": float(throughput[b]),
                "target_throughput": target,
            }
            owned = int(snapshot.num_owned_bundles[b])
            if owned <= 1:
                why = "sole namespace bundle" if owned == 1 else "no bundles"
                result.skipped.append({**base, "broker": broker, "reason": why})
                result.note(SkipKind.SOLE_BUNDLE if owned == 1 else SkipKind.NO_BUNDLES, broker)
                continue
            chosen, keys, marked = greedy_largest_first(snapshot, b, target)
            for j, key, total in zip(chosen.tolist(), keys.tolist(), marked.tolist(), strict=True):
                reason = {**base, "bundle_throughput": key, "marked_throughput": total}
                result.unloads.append(Unload(broker, snapshot.bundle_names[j], reason))
        return result
