"""The extensible manager's LeastResourceUsageWithWeight placement (spec §3.5, PIP-192).

Same best-set rule as the modular flavour (spec §3.2): a candidate is "best" when its load plus
``loadBalancerAverageResourceUsageDifferenceThresholdPercentage``/100 is at most the candidates'
average load, and the choice is uniform among the best. What differs is the load:

* it is the broker-published ``weightedMaxEMA`` of :class:`BrokerLoadData` (advanced on each broker
  sample), not a history the strategy advances on every placement — so the strategy is stateless, and
  a placement burst does not move the EMA;
* candidates without load data are left out of the average and of the best set, but when the best set
  is empty the draw is over **all** candidates, those without data included.

Quirks reproduced:

* With two candidates and the default 10 % difference, one is best only if their loads differ by at
  least 20 points; otherwise the draw is over both (or, with one broker lacking data, over all).
* A broker over the overload threshold is only logged, never excluded: with all brokers overloaded
  the choice is still uniform over all candidates.
* A fresh broker's ``weightedMaxEMA`` before its first sample is 1.0 (100 %), so it is never best
  until it publishes real data.

Deviation: Pulsar builds the best list in candidate-set (hash) order; shedlab sorts candidates by broker
id, so a seeded draw is reproducible whatever order they arrive in. The average is a sequential sum in
that order (Java: set order; the last bit can differ).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import ClassVar

import numpy as np

from shedlab.model.pulsar import java_sum
from shedlab.strategies.base import Placement, pick_uniform
from shedlab.strategies.extensible_data import BrokerLoadData

__all__ = ["ExtensibleLeastResourceUsageWithWeight"]


class ExtensibleLeastResourceUsageWithWeight:
    """Pulsar's ``org.apache.pulsar.broker.loadbalance.extensions.strategy.LeastResourceUsageWithWeight``.

    Not a :class:`~shedlab.strategies.base.PlacementStrategy`: it reads the extensible manager's broker
    load-data store (broker id → :class:`BrokerLoadData`), not a modular-manager snapshot.
    """

    name: ClassVar[str] = "ExtensibleLeastResourceUsageWithWeight"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Stateless: nothing to forget."""

    def select_broker(
        self,
        candidates: Collection[str],
        bundle: str,
        brokers: Mapping[str, BrokerLoadData],
        *,
        difference_threshold_percentage: float = 10,
    ) -> Placement:
        """Pick a broker for ``bundle`` (``select``, spec §3.5).

        ``difference_threshold_percentage``: the key
        ``loadBalancerAverageResourceUsageDifferenceThresholdPercentage``.
        """
        ordered = sorted(set(candidates))
        if not ordered:
            return Placement(None, (), {"strategy": self.name, "rule": "no candidates"})
        with_data = [b for b in ordered if b in brokers]
        reason: dict[str, object] = {
            "strategy": self.name,
            "no_load_data": [b for b in ordered if b not in brokers],
        }
        best: list[str] = []
        if with_data:
            # Java adds the loads one by one (``totalUsage += …`` in ``select``): java_sum, not sum(),
            # which Python 3.12 compensates.
            avg = java_sum([brokers[b].weighted_max_ema for b in with_data]) / len(with_data)
            diff = difference_threshold_percentage / 100.0
            best = [b for b in with_data if brokers[b].weighted_max_ema + diff <= avg]
            reason.update(avg_usage=avg, difference_threshold=diff)
        if best:
            reason["rule"] = "usage + threshold <= average"
        else:
            best = ordered
            reason["rule"] = "no broker clearly below average: all candidates"
        return Placement(pick_uniform(self.rng, best), tuple(best), reason)
