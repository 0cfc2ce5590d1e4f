"""The two strategy protocols, mirroring Pulsar's interfaces: the whole contract of a strategy.

* :class:`SheddingStrategy` is ``LoadSheddingStrategy.findBundlesForUnloading``: which bundles
  to unload from which brokers, each with the reason.
* :class:`PlacementStrategy` is ``ModularLoadManagerStrategy.selectBroker``: which broker a
  bundle should go to, among candidates, together with the set the choice was drawn from.

They are public: a user's class implementing one or both (``docs/strategies.md``, "Writing a strategy")
runs wherever Pulsar's do, named as ``package.module:ClassName`` or by an entry point
(:mod:`shedlab.strategies.registry`). Every strategy is built as ``cls(rng=generator)``; a class
implementing both protocols is one instance serving both roles, as Pulsar's AvgShedder.

State between calls (hit counters, usage history) lives in the strategy instance, as in Pulsar.
Random choices draw from the injected :class:`numpy.random.Generator`, so a seed reproduces a run.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot, IntArray


class SkipKind(StrEnum):
    """Why a strategy or the leader decided *not* to act, as a closed set a program can count.

    The value is the stable machine name (written to the simulator's ``skips`` table); :attr:`message` is
    the human sentence, the same text as the ``"reason"`` of the matching ``skipped`` entry. Reading
    experiments from these kinds replaces parsing reason strings.
    """

    # shedding strategies: a broker (or the whole cycle) left alone
    NO_TRAFFIC = "no_traffic"
    NO_PAIR = "no_pair"
    HIT_COUNT_NOT_REACHED = "hit_count_not_reached"
    AMOUNT_BELOW_MINIMUM = "amount_below_minimum"
    NO_BUNDLE_FITS = "no_bundle_fits"
    BELOW_MIN_THROUGHPUT = "below_min_throughput"
    SOLE_BUNDLE = "sole_bundle"
    NO_BUNDLES = "no_bundles"
    BELOW_THRESHOLDS = "below_thresholds"
    NO_BROKER_BELOW_LOWER_BOUND = "no_broker_below_lower_bound"
    NO_BROKER_WITH_BUNDLES = "no_broker_with_bundles"
    # placement strategies: a choice made at random because no broker stood out
    RANDOM_FALLBACK = "random_fallback"
    ALL_OVERLOADED = "all_overloaded"
    # the leader, after the strategy (spec §4.4 step 5)
    EXCLUDED_NAMESPACE = "excluded_namespace"
    NO_DESTINATION = "no_destination"
    DESTINATION_IS_OWNER = "destination_is_owner"

    @property
    def message(self) -> str:
        """The human sentence for this kind."""
        return _SKIP_MESSAGES[self]

    @property
    def role(self) -> str:
        """Who skipped: ``shedding`` (the shedding strategy), ``placement`` or ``leader``.

        A table lookup: a simulated day of 1,000 brokers asks it about 100,000 times (one per skip row).
        """
        return _SKIP_ROLES.get(self, "shedding")


_SKIP_ROLES: dict[SkipKind, str] = {
    SkipKind.RANDOM_FALLBACK: "placement",
    SkipKind.ALL_OVERLOADED: "placement",
    SkipKind.EXCLUDED_NAMESPACE: "leader",
    SkipKind.NO_DESTINATION: "leader",
    SkipKind.DESTINATION_IS_OWNER: "leader",
}
"""The kinds not skipped by the shedding strategy, and who skipped them."""

_SKIP_MESSAGES: dict[SkipKind, str] = {
    SkipKind.NO_TRAFFIC: "average max resource usage is 0 (no traffic to balance)",
    SkipKind.NO_PAIR: "no broker pair reaches the low threshold",
    SkipKind.HIT_COUNT_NOT_REACHED: "hit count not reached",
    SkipKind.AMOUNT_BELOW_MINIMUM: "amount to move is not positive or below the configured minimum",
    SkipKind.NO_BUNDLE_FITS: "no bundle fits the amount to move",
    SkipKind.BELOW_MIN_THROUGHPUT: "target below minimum throughput",
    SkipKind.SOLE_BUNDLE: "sole namespace bundle",
    SkipKind.NO_BUNDLES: "no bundles",
    SkipKind.BELOW_THRESHOLDS: "difference below both thresholds",
    SkipKind.NO_BROKER_BELOW_LOWER_BOUND: "no broker below the lower bound",
    SkipKind.NO_BROKER_WITH_BUNDLES: "no broker with more than one bundle",
    SkipKind.RANDOM_FALLBACK: "no broker clearly below average: random among all candidates "
    "(Pulsar: 'all brokers are overloaded')",
    SkipKind.ALL_OVERLOADED: "every candidate overloaded: random among all candidates",
    SkipKind.EXCLUDED_NAMESPACE: "namespace excluded from shedding",
    SkipKind.NO_DESTINATION: "no destination broker",
    SkipKind.DESTINATION_IS_OWNER: "destination is the current owner",
}


@dataclass(frozen=True)
class Skip:
    """One decision not taken: its :class:`SkipKind` and the broker it concerns (None: the whole cycle).

    For placement kinds ``broker`` is where the random choice landed.
    """

    kind: SkipKind
    broker: str | None = None


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
    skips: list[Skip] = field(default_factory=list)
    """The typed twin of ``skipped``: one :class:`Skip` per entry that has a kind (see :meth:`note`)."""

    def note(self, kind: SkipKind, broker: str | None = None) -> None:
        """Record a decision not taken, typed (the ``skipped`` dict keeps the numbers and the text)."""
        self.skips.append(Skip(kind, broker))

    def by_broker(self) -> dict[str, list[str]]:
        """Pulsar's multimap broker → bundles, in selection order."""
        out: dict[str, list[str]] = {}
        for u in self.unloads:
            out.setdefault(u.broker, []).append(u.bundle)
        return out

    def __len__(self) -> int:
        return len(self.unloads)

    def __bool__(self) -> bool:
        """A result is a result even when it unloads nothing: its ``skipped`` reasons say why, and a
        ``len``-based truth value once made ``decide`` drop them."""
        return True


class BrokerChoices(Sequence[str]):
    """The broker ids of ``indices`` (sorted, distinct snapshot indices), named only when read.

    A placement reports the whole set its random choice was drawn from; on an empty cluster that is
    every broker, for every one of 100,000 initial lookups. Keeping the index array and naming the
    brokers on demand makes that report free for callers that do not look at it.
    """

    __slots__ = ("_ids", "_indices", "_names")

    def __init__(self, broker_ids: Sequence[str], indices: IntArray) -> None:
        self._ids = broker_ids
        self._indices = indices
        self._names: tuple[str, ...] | None = None

    def _materialise(self) -> tuple[str, ...]:
        if self._names is None:
            ids = self._ids
            self._names = tuple(ids[i] for i in self._indices.tolist())
        return self._names

    def __len__(self) -> int:
        return int(self._indices.size)

    def holds_index(self, index: int) -> bool:
        """Whether snapshot index ``index`` is one of the choices (binary search: indices are sorted)."""
        k = int(np.searchsorted(self._indices, index))
        return k < self._indices.size and int(self._indices[k]) == index

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, int | np.integer):
            return self._ids[int(self._indices[k])]
        return self._materialise()[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._materialise())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return self._materialise() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._materialise())

    def __repr__(self) -> str:
        return repr(self._materialise())


@dataclass(frozen=True)
class Placement:
    """The broker picked for a bundle (or None) and the full set it was drawn from (sorted)."""

    broker: str | None
    choices: Sequence[str]
    reason: dict[str, Any] = field(default_factory=dict, compare=False)
    skip: SkipKind | None = field(default=None, compare=False)
    """Set when the choice was a random fallback (``RANDOM_FALLBACK``, ``ALL_OVERLOADED``)."""


def candidate_indices(snapshot: ClusterSnapshot, candidates: Sequence[str] | IntArray) -> IntArray:
    """Candidates as sorted, distinct snapshot indices (so also sorted by broker id).

    The load manager passes arrays that are sorted already; checking that costs a comparison
    where ``np.unique`` would hash every element again.
    """
    indices = snapshot.indices_of(candidates)
    if indices.size < 2 or bool(np.all(indices[1:] > indices[:-1])):
        return indices
    ordered = np.sort(indices)  # ids given in another order (numeric names): sort, drop repeats
    if bool(np.all(ordered[1:] != ordered[:-1])):
        return ordered
    return np.unique(ordered)


@runtime_checkable
class SheddingStrategy(Protocol):
    """Pulsar's LoadSheddingStrategy (spec §2).

    ``name`` labels the strategy's reasons. The leader calls :meth:`find_bundles_for_unloading` once per
    shedding cycle with its view of the cluster and the run's configuration (every Pulsar key); the
    leader, not the strategy, then drops bundles in their grace period and asks placement for each
    destination (spec §4.4).
    """

    name: ClassVar[str]

    def find_bundles_for_unloading(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        """Decide what to unload this cycle: unloads in processing order, with the numbers behind each
        in ``reason``, and a ``skipped`` entry (with a ``"reason"``) per broker left alone."""
        ...

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Forget state about brokers that are gone (Pulsar calls this on broker-set changes)."""
        ...


@runtime_checkable
class PlacementStrategy(Protocol):
    """Pulsar's ModularLoadManagerStrategy (spec §3), called for each bundle to place with the candidates
    left after the leader's filters."""

    name: ClassVar[str]

    def select_broker(
        self,
        candidates: Sequence[str] | IntArray,
        bundle: str,
        snapshot: ClusterSnapshot,
        conf: LoadBalancerConfig,
    ) -> Placement:
        """Pick a broker for ``bundle`` among ``candidates`` (ids or snapshot indices: see
        :func:`candidate_indices`); report the whole sorted set the choice was drawn from."""
        ...

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Forget state about brokers that are gone."""
        ...


def pick_uniform(rng: np.random.Generator, choices: Sequence[str]) -> str | None:
    """A uniform random element, as Pulsar's ``best[random.nextInt(best.size())]``."""
    if not choices:
        return None
    return choices[int(rng.integers(len(choices)))]


def draw_uniform(
    rng: np.random.Generator, snapshot: ClusterSnapshot, best: IntArray
) -> tuple[str, BrokerChoices]:
    """:func:`pick_uniform` over snapshot indices: the same draw, without naming every broker."""
    chosen = snapshot.broker_ids[int(best[int(rng.integers(best.size))])]
    return chosen, BrokerChoices(snapshot.broker_ids, best)


MB = 1024 * 1024
"""Pulsar's ``MB`` constant (bytes), used by the throughput thresholds."""
