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
* A NaN history (∞ then −∞ usage, from limits that are 0 as a float32) is a history, not a missing
  one: it stays NaN, the average is NaN and every candidate is drawn from.

Deviation: the average is a sequential sum over candidates in broker-id order (Java: set order).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import ClassVar

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.pulsar import java_sum
from shedlab.model.snapshot import ClusterSnapshot, IntArray
from shedlab.strategies.base import Placement, SkipKind, candidate_indices, draw_uniform


class LeastResourceUsageWithWeight:
    """Pulsar's ``org.apache.pulsar.broker.loadbalance.impl.LeastResourceUsageWithWeight``."""

    name: ClassVar[str] = "LeastResourceUsageWithWeight"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()
        self._slot: dict[str, int] = {}
        self._history = np.zeros(16)
        self._known = np.zeros(16, dtype=np.bool_)
        """Which slots hold a history. Not NaN in ``_history``: Java keeps a NaN history (a Double in its
        map, 0.9·∞ + 0.1·(−∞)) and averages it, where a missing one restarts from the usage."""
        self._slots_cache: tuple[tuple[str, ...], np.ndarray] | None = None

    @property
    def history(self) -> dict[str, float]:
        """The current usage history per broker (brokers never seen are absent)."""
        return {b: float(self._history[s]) for b, s in self._slot.items() if self._known[s]}

    def _grow(self, size: int) -> None:
        """Room for ``size`` slots (doubling), the new ones without history."""
        if size > self._history.size:
            n = max(size, 2 * self._history.size)
            self._history = np.concatenate((self._history, np.zeros(n - self._history.size)))
            self._known = np.concatenate((self._known, np.zeros(n - self._known.size, dtype=np.bool_)))

    def seed_history(self, values: Mapping[str, float]) -> None:
        """Preset the usage history (broker → fraction), as a leader that has been placing would have."""
        for broker, value in values.items():
            slot = self._slot.setdefault(broker, len(self._slot))
            self._grow(slot + 1)
            self._history[slot] = float(value)
            self._known[slot] = True
        self._slots_cache = None

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        keep = set(active)
        for broker, slot in self._slot.items():
            if broker not in keep:
                self._known[slot] = False

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
        self._grow(len(self._slot))
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
        restarted = (snapshot.num_owned_bundles[brokers] == 0) | (
            (snapshot.msg_rate_in[brokers] == 0) & (snapshot.msg_rate_out[brokers] == 0)
        )
        usage = snapshot.weighted_max_usage(conf.resource_weights())[brokers]
        with np.errstate(invalid="ignore"):  # ∞ and −∞ usages: NaN histories and averages, as in Java
            ema = self._history[slots] * h + (1 - h) * usage
            updated = np.where(self._known[slots] & ~restarted, ema, usage)
            avg = java_sum(updated) / brokers.size
        self._history[slots] = updated
        self._known[slots] = True
        diff = conf.load_balancer_average_resource_usage_difference_threshold_percentage / 100.0
        best = brokers[updated + diff <= avg]
        rule = "usage + threshold <= average"
        skip = None
        if best.size == 0:  # Pulsar: "Assign randomly as all brokers are overloaded."
            best, rule = brokers, "no broker clearly below average: all candidates"
            skip = SkipKind.RANDOM_FALLBACK
        chosen, choices = draw_uniform(self.rng, snapshot, best)
        return Placement(chosen, choices, {"strategy": self.name, "rule": rule, "avg_usage": avg}, skip)
