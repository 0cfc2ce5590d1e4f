"""Calls into a user's strategy, each failure one :class:`StrategyError` line naming the plugin.

Pulsar's strategies are called directly: a bug in one of them is shedlab's and keeps its traceback. A
plugin (a ``module:Class`` or entry-point strategy, CapacityAwareShedder included: it is loaded as one)
is someone else's code behind a published protocol (``docs/strategies.md``), and what breaks the
protocol is the plugin's error, not shedlab's: an exception raised in one of its methods, a constructor
that does not take ``rng``, a method with the wrong signature (a ``TypeError`` at the call), a result of
the wrong type, an unload of a bundle that does not exist or that the named broker does not own, a
destination outside the candidates it was given. Each is a :class:`StrategyError` (exit code 2, one line
``strategy pkg.mod:Class: find_bundles_for_unloading raised ValueError: …``), which a sweep records per
run as it records any failed run, instead of a traceback through the simulator.

The checks cost a few dictionary lookups per unload and per placement, and only plugins pay them.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Sequence
from typing import Any, Final

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.errors import ShedlabError
from shedlab.model.snapshot import ClusterSnapshot, IntArray
from shedlab.strategies.base import (
    Placement,
    PlacementStrategy,
    SheddingResult,
    SheddingStrategy,
    Unload,
)

__all__ = [
    "PLUGIN_FAILURES",
    "StrategyError",
    "construct",
    "constructor_problem",
    "notify_active_brokers",
    "plugin_name",
    "register_builtin",
    "select_broker",
    "shed",
]


class StrategyError(ShedlabError):
    """A user's strategy failed or broke the strategy protocol (``docs/strategies.md``)."""


PLUGIN_FAILURES: Final = (Exception, SystemExit)
"""What a plugin's code (its import, constructor or methods) raises that is its failure: any exception,
and ``SystemExit`` (``sys.exit``, or argparse in a script made a plugin), which ended shedlab with the
plugin's status, 0 as well, and no word. Ctrl-C (``KeyboardInterrupt``) stays the user's."""

_BUILTIN_CLASSES: set[type] = set()
"""Pulsar's strategy classes, registered by the registry: called without the guard."""


def register_builtin(cls: type) -> None:
    """Mark ``cls`` as one of Pulsar's strategies (shedlab's own code: its bugs keep their traceback)."""
    _BUILTIN_CLASSES.add(cls)


def plugin_name(cls: type) -> str:
    """How a plugin class is named in errors: ``module:Class``, the form ``--strategy`` accepts."""
    return f"{cls.__module__}:{cls.__qualname__}"


def _guarded(strategy: object) -> bool:
    return type(strategy) not in _BUILTIN_CLASSES


def _type_name(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _failure(cls: type, method: str, exc: BaseException) -> StrategyError:
    where = f"strategy {plugin_name(cls)}"
    if isinstance(exc, ShedlabError):  # the plugin used shedlab's own errors: keep their text
        return StrategyError(f"{method}: {exc}", source=where)
    if isinstance(exc, TimeoutError):  # a run's time limit (sweep --timeout) struck inside the plugin
        return StrategyError(f"{method} was still running: {exc}", source=where)
    detail = str(exc)
    return StrategyError(
        f"{method} raised {type(exc).__name__}" + (f": {detail}" if detail else ""), source=where
    )


_RNG_HINT = (
    "every strategy's __init__ takes the injected generator: "
    "def __init__(self, rng: np.random.Generator | None = None) (docs/strategies.md)"
)


def constructor_problem(cls: type) -> StrategyError | None:
    """Why ``cls(rng=generator)`` cannot be called, judged from its signature (None: it can).

    The registry asks at resolution, so a sweep refuses the grid before any run; until 28 Nov 2026 a
    class without an ``__init__`` (``Nothing() takes no arguments``, no "rng" in the message) failed
    every run of the sweep, without the hint."""
    try:
        inspect.signature(cls).bind(rng=None)
    except TypeError as exc:
        return StrategyError(
            f"cannot be constructed as {cls.__qualname__}(rng=generator): {exc}",
            source=f"strategy {plugin_name(cls)}",
            hint=_RNG_HINT,
        )
    except ValueError:  # no signature to read (a class built in C): the call itself will tell
        return None
    return None


def construct(cls: type, rng: np.random.Generator) -> Any:
    """``cls(rng=rng)``; a plugin's constructor failing (no ``rng`` parameter, or raising) is one line."""
    if cls in _BUILTIN_CLASSES:
        return cls(rng=rng)
    problem = constructor_problem(cls)
    if problem is not None:
        raise problem
    try:
        return cls(rng=rng)
    except PLUGIN_FAILURES as exc:  # any failure of the user's __init__
        raise _failure(cls, "__init__", exc) from None


def shed(strategy: SheddingStrategy, snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> SheddingResult:
    """``strategy.find_bundles_for_unloading(snapshot, conf)``, checked when it is a plugin."""
    if not _guarded(strategy):
        return strategy.find_bundles_for_unloading(snapshot, conf)
    method = "find_bundles_for_unloading"
    try:
        result = strategy.find_bundles_for_unloading(snapshot, conf)
    except PLUGIN_FAILURES as exc:  # the plugin's code: any exception is its failure
        raise _failure(type(strategy), method, exc) from None
    problem = _shedding_problem(result, snapshot)
    if problem is not None:
        raise StrategyError(f"{method} {problem}", source=f"strategy {plugin_name(type(strategy))}")
    return result


def _shedding_problem(result: object, snapshot: ClusterSnapshot) -> str | None:
    if not isinstance(result, SheddingResult):
        return f"returned {_type_name(result)}, expected a SheddingResult"
    if not isinstance(result.unloads, list):
        return f"returned unloads as {_type_name(result.unloads)}, expected a list of Unload"
    if not isinstance(result.skipped, list):
        return f"returned skipped as {_type_name(result.skipped)}, expected a list of dicts"
    for k, unload in enumerate(result.unloads):
        if not isinstance(unload, Unload):
            return f"returned unloads[{k}] as {_type_name(unload)}, expected an Unload"
        if not isinstance(unload.broker, str) or not isinstance(unload.bundle, str):
            return (
                f"returned unloads[{k}] with broker {unload.broker!r} ({_type_name(unload.broker)}) and "
                f"bundle {unload.bundle!r} ({_type_name(unload.bundle)}), expected two strings"
            )
        if not isinstance(unload.reason, dict):
            return f"returned unloads[{k}].reason as {_type_name(unload.reason)}, expected a dict"
        b = snapshot.broker_index.get(unload.broker)
        if b is None:
            return f"unloads a bundle from {unload.broker!r}, which is not a broker of the snapshot"
        j = snapshot.bundle_index(unload.bundle)
        if j is None:
            return f"unloads {unload.bundle!r}, which is not a bundle of the snapshot"
        owner = int(snapshot.bundle_owner[j])
        if owner != b:
            actual = snapshot.broker_ids[owner] if owner >= 0 else "no broker"
            return f"unloads {unload.bundle!r} from {unload.broker!r}, but it is owned by {actual}"
    return None


def select_broker(
    strategy: PlacementStrategy,
    candidates: Sequence[str] | IntArray,
    bundle: str,
    snapshot: ClusterSnapshot,
    conf: LoadBalancerConfig,
) -> Placement:
    """``strategy.select_broker(...)``, checked when it is a plugin: a Placement whose broker is None or
    one of ``candidates``."""
    if not _guarded(strategy):
        return strategy.select_broker(candidates, bundle, snapshot, conf)
    method = "select_broker"
    where = f"strategy {plugin_name(type(strategy))}"
    try:
        placement = strategy.select_broker(candidates, bundle, snapshot, conf)
    except PLUGIN_FAILURES as exc:  # the plugin's code
        raise _failure(type(strategy), method, exc) from None
    if not isinstance(placement, Placement):
        raise StrategyError(f"{method} returned {_type_name(placement)}, expected a Placement", source=where)
    broker = placement.broker
    if broker is None:
        return placement
    if not isinstance(broker, str):
        raise StrategyError(
            f"{method} returned broker {broker!r} ({_type_name(broker)}), expected a broker id (str) or None",
            source=where,
        )
    if not _is_candidate(broker, candidates, snapshot):
        raise StrategyError(
            f"{method} chose {broker!r} for {bundle!r}, which is not among the {len(candidates)} candidates "
            "it was given",
            source=where,
        )
    return placement


def _is_candidate(broker: str, candidates: Sequence[str] | IntArray, snapshot: ClusterSnapshot) -> bool:
    if isinstance(candidates, np.ndarray):
        i = snapshot.broker_index.get(broker)
        return i is not None and bool(np.any(candidates == i))
    return broker in set(candidates)


def notify_active_brokers(strategy: object, active: Collection[str]) -> None:
    """``strategy.on_active_brokers_change(active)``, a plugin's failure one line."""
    method = "on_active_brokers_change"
    if not _guarded(strategy):
        getattr(strategy, method)(active)
        return
    try:
        getattr(strategy, method)(active)
    except PLUGIN_FAILURES as exc:  # the plugin's code
        raise _failure(type(strategy), method, exc) from None
