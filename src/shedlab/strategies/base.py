"""The two small strategy protocols, mirroring Pulsar's interfaces.

* :class:`SheddingStrategy` is ``LoadSheddingStrategy.findBundlesForUnloading``: which bundles
  to unload from which brokers, each with the reason.
* :class:`PlacementStrategy` is ``ModularLoadManagerStrategy.selectBroker``: which broker a
  bundle should go to, among candidates, together with the set the choice was drawn from.

State between calls (hit counters, usage history) lives in the strategy instance, as in Pulsar.
Random choices draw from the injected :class:`numpy.random.Generator`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot, IntArray


@dataclass(frozen=True)
class Unload:
    """One bundle to unload from ``broker``; ``reason`` holds the numbers that led to it."""

    broker: str
    bundle: str
    reason: dict[str, Any] = field(default_factory=dict, compare=False)
    destination: str | None = None  # a planned destination, where the strategy binds one


@dataclass
class SheddingResult:
    """What a shedding call decided, in Pulsar's order, plus why other brokers were left alone."""

    unloads: list[Unload] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)

    def by_broker(self) -> dict[str, list[str]]:
        """Pulsar's multimap broker → bundles, in selection order."""
        out: dict[str, list[str]] = {}
        for u in self.unloads:
            out.setdefault(u.broker, []).append(u.bundle)
        return out

    def __len__(self) -> int:
        return len(self.unloads)


@dataclass(frozen=True)
class Placement:
    """The broker picked for a bundle (or None) and the full set it was drawn from (sorted)."""

    broker: str | None
    choices: tuple[str, ...]
    reason: dict[str, Any] = field(default_factory=dict, compare=False)


@runtime_checkable
class SheddingStrategy(Protocol):
    """Pulsar's LoadSheddingStrategy."""

    name: ClassVar[str]

    def find_bundles_for_unloading(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        """Decide what to unload this cycle."""
        ...

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Forget state about brokers that are gone (Pulsar calls this on broker-set changes)."""
        ...


@runtime_checkable
class PlacementStrategy(Protocol):
    """Pulsar's ModularLoadManagerStrategy."""

    name: ClassVar[str]

    def select_broker(
        self,
        candidates: Sequence[str] | IntArray,
        bundle: str,
        snapshot: ClusterSnapshot,
        conf: LoadBalancerConfig,
    ) -> Placement:
        """Pick a broker for ``bundle`` among ``candidates`` (ids or snapshot indices)."""
        ...

    def on_active_brokers_change(self, active: Collection[str]) -> None: ...


def pick_uniform(rng: np.random.Generator, choices: Sequence[str]) -> str | None:
    """A uniform random element, as Pulsar's ``best[random.nextInt(best.size())]``."""
    if not choices:
        return None
    return choices[int(rng.integers(len(choices)))]


MB = 1024 * 1024
"""Pulsar's ``MB`` constant (bytes), used by the throughput thresholds."""
