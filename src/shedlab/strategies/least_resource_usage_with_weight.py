"""LeastResourceUsageWithWeight: place on a broker whose usage history is clearly below the average.

Spec §3.2 (the modular manager's flavour, ``impl`` package). The usage history is an EMA of the
weighted max usage advanced **on every placement call** (not per unit of time), for the
candidates of that call only. Candidates whose history plus the difference threshold is at or
below the candidates' average are "best"; when none is, every candidate is (PIP-364's
40/40/40/40/69/70 example), which is how it places onto already-hot brokers.

Quirks reproduced:
* A broker that owns no bundles or reports zero message rate in and out has its history reset
  (treated as a restart) before the update.
* The history advances once per call, so the manager's overload re-check (which calls the
  strategy a second time) advances it twice.

Deviation: the average is a sequential sum over candidates in broker-id order (Java: set order).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import ClassVar

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot, IntArray
from shedlab.strategies.base import Placement, SkipKind, candidate_indices, draw_uniform


class LeastResourceUsageWithWeight:
    """Pulsar's ``org.apache.pulsar.broker.loadbalance.impl.LeastResourceUsageWithWeight``."""

    name: ClassVar[str] = "LeastResourceUsageWithWeight"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()
        self._slot: dict[str, int] = {}
        self._history = np.full(16, np.nan)
        self._slots_cache: tuple[tuple[str, ...], np.ndarray] | None = None

    @property
    def history(self) -> dict[str, float]:
        """The current usage history per broker (brokers never seen are absent)."""
        return {b: float(self._history[s]) for b, s in self._slot.items() if not np.isnan(self._history[s])}

    def seed_history(self, values: Mapping[str, float]) -> None:
        """Preset the usage history (broker → fraction), as a leader that has been placing would have."""
        for broker, value in values.items():
            slot = self._slot.setdefault(broker, len(self._slot))
            if slot >= self._history.size:
                grown = np.full(max(slot + 1, 2 * self._history.size), np.nan)
                grown[: self._history.size] = self._history
                self._history = grown
            self._history[slot] = float(value)
        self._slots_cache = None

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        keep = set(active)
        for broker, slot in self._slot.items():
            if broker not in keep:
                self._history[slot] = np.nan

    def _slots(self, snapshot: ClusterSnapshot) -> np.ndarray:
        """History slot of every snapshot broker (cached while the broker list is the same object)."""
        cached = self._slots_cache
        if cached is not None and cached[0] is snapshot.broker_ids:
            return cached[1]
        slot_of = self._slot
        new = [b for b in snapshot.broker_ids if b not in slot_of]  # new brokers, numbered in id order
        if new:
            first = len(slot_of)
            slot_of.update(zip(new, range(first, first + len(new)), strict=True))
        ids = snapshot.broker_ids
        slots = np.fromiter(map(slot_of.__getitem__, ids), dtype=np.int64, count=len(ids))
        if len(self._slot) > self._history.size:
            grown = np.full(max(len(self._slot), 2 * self._history.size), np.nan)
            grown[: self._history.size] = self._history
            self._history = grown
        self._slots_cache = (snapshot.broker_ids, slots)
        return slots

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
        h = conf.load_balancer_history_resource_percentage
        slots = self._slots(snapshot)[brokers]
        prev = self._history[slots]
        restarted = (snapshot.num_owned_bundles[brokers] == 0) | (
            (snapshot.msg_rate_in[brokers] == 0) & (snapshot.msg_rate_out[brokers] == 0)
        )
        prev = np.where(restarted, np.nan, prev)
        usage = snapshot.weighted_max_usage(conf.resource_weights())[brokers]
        updated = np.where(np.isnan(prev), usage, prev * h + (1 - h) * usage)
        self._history[slots] = updated
        avg = float(np.cumsum(updated)[-1] / brokers.size)
        diff = conf.load_balancer_average_resource_usage_difference_threshold_percentage / 100.0
        best = brokers[updated + diff <= avg]
        rule = "usage + threshold <= average"
        skip = None
        if best.size == 0:  # Pulsar: "Assign randomly as all brokers are overloaded."
            best, rule = brokers, "no broker clearly below average: all candidates"
            skip = SkipKind.RANDOM_FALLBACK
        chosen, choices = draw_uniform(self.rng, snapshot, best)
        return Placement(chosen, choices, {"strategy": self.name, "rule": rule, "avg_usage": avg}, skip)
