"""LeastLongTermMessageRate: place a bundle on the broker with the least long-term message rate.

Spec §3.1, Pulsar's default placement strategy. Overloaded brokers score +∞. The score adds the
long-term message rate of bundles *preallocated* to the broker but not yet in its reports, which
is how it predicts the load of its own placements and avoids over placement (PIP-364). It scores
by message rate, so it is blind to heterogeneous hardware.

Quirks reproduced:
* The overload test is strict (``U > threshold``): a broker at exactly 85 % is not excluded.
* +∞ == +∞, so when every candidate is overloaded they are all "best" and one is drawn at random.
* The preallocated rates are summed first (each bundle's ``in + out``, in map order), then the
  broker's time-averaged ``in + out`` is added as one term: ``prealloc + (in + out)``, as Java
  groups it (float addition is not associative, and ties are decided by it).

Deviation: Pulsar builds the best set in candidate-set iteration order; shedlab sorts it by broker
id, so the seeded draw is reproducible whatever order the candidates arrive in.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import ClassVar

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot, IntArray
from shedlab.strategies.base import Placement, SkipKind, candidate_indices, draw_uniform


class LeastLongTermMessageRate:
    """Pulsar's ``org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate``."""

    name: ClassVar[str] = "LeastLongTermMessageRate"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Stateless: nothing to forget."""

    def scores(self, snapshot: ClusterSnapshot, brokers: IntArray, conf: LoadBalancerConfig) -> np.ndarray:
        """Every candidate's score: +∞ if overloaded, else preallocated + long-term in + out rate."""
        overload = conf.load_balancer_broker_overloaded_threshold_percentage / 100.0
        usage = snapshot.weighted_max_usage(conf.resource_weights())[brokers]
        # Java: totalPreallocated + (longTermMsgRateIn + longTermMsgRateOut), in that grouping.
        score = snapshot.preallocated_long_term_msg_rate[brokers] + (
            snapshot.long_term_msg_rate_in[brokers] + snapshot.long_term_msg_rate_out[brokers]
        )
        result: np.ndarray = np.where(usage > overload, np.inf, score)
        return result

    def select_broker(
        self,
        candidates: Sequence[str] | IntArray,
        bundle: str,
        snapshot: ClusterSnapshot,
        conf: LoadBalancerConfig,
    ) -> Placement:
        brokers = candidate_indices(snapshot, candidates)
        if brokers.size == 0:
            return Placement(None, (), {"strategy": self.name, "rule": "no candidates"})
        score = self.scores(snapshot, brokers, conf)
        valid = ~np.isnan(score)
        if valid.any():
            best_score = float(score[valid].min())
            best = brokers[score == best_score]
            rule = "least long-term message rate" if np.isfinite(best_score) else "all candidates overloaded"
        else:
            best, best_score, rule = brokers, float("nan"), "no valid score: all candidates"
        chosen, choices = draw_uniform(self.rng, snapshot, best)
        skip = None if np.isfinite(best_score) else SkipKind.ALL_OVERLOADED
        reason = {"strategy": self.name, "rule": rule, "best_score": best_score}
        return Placement(chosen, choices, reason, skip)
