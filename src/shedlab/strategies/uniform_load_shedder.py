"""UniformLoadShedder: move traffic from the busiest to the idlest broker by message rate or throughput.

Spec §2.3. Stateless and blind to hardware: it compares only the broker with the highest and the
one with the lowest message rate (or throughput), so it misjudges heterogeneous clusters and,
shedding from one broker per cycle, balances large clusters slowly.

Quirks reproduced:
* Message rate has priority: when the rate criterion fires, the throughput criterion is ignored.
* The amount to move and every subtracted bundle value are truncated to Java ``int``
  (``MutableInt.subtract(Number)`` uses ``intValue()``), e.g. a 10.7 msg/s bundle reduces the need by 10.
* Zero-traffic bundles always fit and are selected.
* ``maxUnloadBundleNumPerShedding``: -1 is unlimited, any other value ≤ 0 selects nothing.
* Minimum rates below 1e-6 are replaced by 1.0 before the ratio is taken.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, ClassVar

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot, FloatArray
from shedlab.strategies.base import SheddingResult, SkipKind, Unload
from shedlab.strategies.greedy import java_int, sort_descending

EPS = 1e-6
_INT_MAX = 2147483647.0


def _extremes(values: FloatArray) -> tuple[int, float, int, float]:
    """(argmax, max, argmin, min) with Pulsar's initial values and first-broker-wins ties."""
    if values.size == 0:
        return -1, -1.0, -1, _INT_MAX
    hi = int(np.argmax(values))
    lo = int(np.argmin(values))
    max_v = float(values[hi]) if values[hi] > -1.0 else -1.0
    min_v = float(values[lo]) if values[lo] < _INT_MAX else _INT_MAX
    return hi, max_v, (lo if values[lo] < _INT_MAX else -1), min_v


class UniformLoadShedder:
    """Pulsar's ``org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder``."""

    name: ClassVar[str] = "UniformLoadShedder"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        pass

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Stateless: nothing to forget."""

    def find_bundles_for_unloading(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        result = SheddingResult()
        rate_over, max_rate, rate_under, min_rate = _extremes(snapshot.total_msg_rate())
        tp_over, max_tp, tp_under, min_tp = _extremes(snapshot.total_msg_throughput())
        if abs(min_rate) <= EPS:
            min_rate = 1.0
        if abs(min_tp) <= EPS:
            min_tp = 1.0
        rate_pct = (max_rate - min_rate) * 100 / min_rate
        tp_multiplier = max_tp / min_tp
        rate_threshold = conf.load_balancer_msg_rate_difference_shedder_threshold
        tp_threshold = conf.load_balancer_msg_throughput_multiplier_difference_shedder_threshold
        rate_exceeded = rate_threshold > 0 and rate_pct > rate_threshold
        tp_exceeded = tp_threshold > 0 and tp_multiplier > tp_threshold
        base: dict[str, Any] = {
            "strategy": self.name,
            "max_msg_rate": max_rate,
            "min_msg_rate": min_rate,
            "msg_rate_difference_pct": rate_pct,
            "max_throughput": max_tp,
            "min_throughput": min_tp,
            "throughput_multiplier": tp_multiplier,
        }
        if not (rate_exceeded or tp_exceeded):
            result.skipped.append({**base, "reason": "difference below both thresholds"})
            result.note(SkipKind.BELOW_THRESHOLDS)
            return result
        p = conf.max_unload_percentage
        if rate_exceeded:
            mode, over, under = "msgRate", rate_over, rate_under
            need = java_int((max_rate - min_rate) * p)
            minimum = conf.min_unload_message
        else:
            mode, over, under = "throughput", tp_over, tp_under
            need = java_int((max_tp - min_tp) * p)
            minimum = conf.min_unload_message_throughput
        base.update(
            mode=mode,
            overloaded_broker=snapshot.broker_ids[over],
            underloaded_broker=snapshot.broker_ids[under] if under >= 0 else None,
            amount_to_move=need,
        )
        broker = snapshot.broker_ids[over]
        if snapshot.num_owned_bundles[over] <= 1:
            result.skipped.append({**base, "broker": broker, "reason": "broker owns at most one bundle"})
            result.note(SkipKind.SOLE_BUNDLE, broker)
            return result
        if need < minimum:
            result.skipped.append({**base, "broker": broker, "reason": f"amount below minimum {minimum}"})
            result.note(SkipKind.AMOUNT_BELOW_MINIMUM, broker)
            return result
        candidates = snapshot.shedding_candidates(over)
        if mode == "msgRate":
            keys = snapshot.short_msg_rate_in[candidates] + snapshot.short_msg_rate_out[candidates]
        else:
            keys = (
                snapshot.short_msg_throughput_in[candidates] + snapshot.short_msg_throughput_out[candidates]
            )
        ordered, keys = sort_descending(candidates, keys)
        cap = conf.max_unload_bundle_num_per_shedding
        remaining = need
        for j, key in zip(ordered.tolist(), keys.tolist(), strict=True):
            if cap != -1 and len(result.unloads) >= cap:
                break
            if key <= remaining:
                remaining -= java_int(key)
                reason = {**base, "bundle_traffic": key, "remaining_after": remaining}
                result.unloads.append(Unload(broker, snapshot.bundle_names[j], reason))
        return result
