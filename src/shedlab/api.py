"""The Python API: what the ``shedlab`` command does, as functions returning dataclasses and DataFrames.

``import shedlab`` exposes these names lazily (see ``shedlab/__init__.py``), so a notebook writes
``shedlab.decide("snapshot.json", strategy="AvgShedder")`` without knowing the package layout. Every
function takes what the CLI takes (a path or a built-in scenario name, a config file) or the objects
themselves, and applies Pulsar settings in the CLI's order (:func:`shedlab.config.layered_config`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from shedlab.config import LoadBalancerConfig, layered_config
from shedlab.core.decide import Outcome, decide_on_snapshot, load_snapshot_file
from shedlab.core.sim import Scenario, SimulationResult, load_scenario, run_simulation
from shedlab.errors import ConfigError
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import STRATEGY_PAIRS, overrides_and_pair, resolve_config, resolve_pair_name

__all__ = ["ConfigSource", "compare", "decide", "read_config", "read_snapshot", "simulate"]

ConfigSource = LoadBalancerConfig | Mapping[str, Any] | str | os.PathLike[str] | None
"""Pulsar settings: a config, a mapping of Pulsar keys, a broker.conf/YAML/JSON path, or None (defaults)."""


def read_config(config: ConfigSource = None, **overrides: Any) -> LoadBalancerConfig:
    """Pulsar's defaults ← ``config`` ← ``overrides`` (Pulsar keys, e.g. ``maxUnloadPercentage=0.5``).

    Every value remembers where it came from (``conf.value_sources()``), as ``shedlab config show``
    prints it.
    """
    return resolve_config(layered_config(_config_layer(config), ("overrides", overrides)))


def read_snapshot(path: str | os.PathLike[str]) -> ClusterSnapshot:
    """A Pulsar ``LoadData`` JSON, or a conformance case (its first tick), as a :class:`ClusterSnapshot`."""
    return load_snapshot_file(Path(path))


def decide(
    snapshot: ClusterSnapshot | str | os.PathLike[str],
    config: ConfigSource = None,
    *,
    strategy: str | None = None,
    seed: int = 0,
    cycles: int = 1,
) -> Outcome:
    """What Pulsar's leader would unload from ``snapshot``, where to, and why (``shedlab decide``).

    ``strategy`` is a pair (``"AvgShedder"``, ``"ThresholdShedder+LeastResourceUsageWithWeight"``) or a
    shedding strategy; without it, the config's. ``outcome.decisions`` lists :class:`Decision`\\ s.
    """
    snap = snapshot if isinstance(snapshot, ClusterSnapshot) else read_snapshot(snapshot)
    return decide_on_snapshot(snap, read_config(config), strategy=strategy, seed=seed, cycles=cycles)


def simulate(
    scenario: Scenario | str | os.PathLike[str],
    *,
    strategy: str | None = None,
    config: ConfigSource = None,
    seed: int | None = None,
    record: bool = False,
) -> SimulationResult:
    """Simulate a scenario (a :class:`Scenario`, a YAML path or a built-in name), as ``shedlab simulate``.

    ``config``'s settings apply on top of the scenario's; a pair it names is used when ``strategy`` is
    not given. The result holds the run's DataFrames (``ticks``, ``brokers``, ``decisions``, ``events``,
    ``skips``) and its ``summary``; the same arguments always give the same result.
    """
    overrides, config_pair = _overrides(config)
    return run_simulation(
        _scenario(scenario),
        strategy=resolve_pair_name(strategy) if strategy else config_pair,
        config_overrides=overrides or None,
        seed=seed,
        record=record,
    )


def compare(
    scenario: Scenario | str | os.PathLike[str],
    strategies: Iterable[str] | str = "all",
    *,
    config: ConfigSource = None,
    seed: int | None = None,
) -> pd.DataFrame:
    """Run strategy pairs on one scenario and seed (``shedlab compare``): one row of run metrics per
    pair, indexed by pair name. ``strategies`` is ``"all"`` (the five pairs of PIP-364), a
    comma-separated string or a list of pair names."""
    scen = _scenario(scenario)
    if isinstance(strategies, str):
        names = list(STRATEGY_PAIRS) if strategies.strip().lower() == "all" else strategies.split(",")
    else:
        names = list(strategies)
    pairs = list(dict.fromkeys(resolve_pair_name(n.strip()) for n in names if n.strip()))
    if not pairs:
        raise ConfigError("no strategy pair given", field="strategies", value=strategies)
    overrides, _ = _overrides(config)
    rows = [
        run_simulation(scen, strategy=pair, config_overrides=overrides or None, seed=seed).summary
        for pair in pairs
    ]
    return pd.DataFrame(rows, index=pd.Index(pairs, name="pair"))


def _scenario(scenario: Scenario | str | os.PathLike[str]) -> Scenario:
    if isinstance(scenario, Scenario):
        return scenario
    return load_scenario(scenario if isinstance(scenario, str) else Path(scenario))


def _config_layer(config: ConfigSource) -> LoadBalancerConfig | tuple[str, Mapping[str, Any]] | None:
    if config is None or isinstance(config, LoadBalancerConfig):
        return config
    if isinstance(config, Mapping):
        return ("config", config)
    return LoadBalancerConfig.from_file(config)


def _overrides(config: ConfigSource) -> tuple[dict[str, Any], str | None]:
    """The settings a run applies over its scenario: the config's non-default keys (the pair apart)."""
    return overrides_and_pair(read_config(config)) if config is not None else ({}, None)
