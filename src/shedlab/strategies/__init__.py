"""Pulsar's load-shedding and placement strategies, one module each, behind two public protocols.

The protocols (:class:`SheddingStrategy`, :class:`PlacementStrategy`, ``base.py``) are the whole
contract: a user's class that implements one or both runs wherever Pulsar's do. Names are resolved by
:mod:`shedlab.strategies.registry` (Pulsar's short or full class names, ``package.module:ClassName``,
or an entry point of the group ``shedlab.strategies``); build instances with :func:`make_shedding`,
:func:`make_placement` or :func:`make_pair`.
"""

from __future__ import annotations

import typing

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.strategies.avg_shedder import AvgShedder
from shedlab.strategies.base import (
    Placement,
    PlacementStrategy,
    SheddingResult,
    SheddingStrategy,
    Skip,
    SkipKind,
    Unload,
)
from shedlab.strategies.least_long_term_message_rate import LeastLongTermMessageRate
from shedlab.strategies.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from shedlab.strategies.overload_shedder import OverloadShedder
from shedlab.strategies.registry import (
    ENTRY_POINT_GROUP,
    STRATEGY_PAIRS,
    StrategyInfo,
    overrides_and_pair,
    pair_config,
    pair_list,
    pair_name_of,
    require_modular,
    resolve_config,
    resolve_pair_name,
    resolve_strategy,
    short_pair_name,
)
from shedlab.strategies.threshold_shedder import ThresholdShedder
from shedlab.strategies.uniform_load_shedder import UniformLoadShedder

__all__ = [
    "ENTRY_POINT_GROUP",
    "STRATEGY_PAIRS",
    "AvgShedder",
    "LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight",
    "OverloadShedder",
    "Placement",
    "PlacementStrategy",
    "SheddingResult",
    "SheddingStrategy",
    "Skip",
    "SkipKind",
    "StrategyInfo",
    "ThresholdShedder",
    "UniformLoadShedder",
    "Unload",
    "make_pair",
    "make_placement",
    "make_shedding",
    "overrides_and_pair",
    "pair_config",
    "pair_list",
    "pair_name_of",
    "require_modular",
    "resolve_config",
    "resolve_pair_name",
    "resolve_strategy",
    "short_pair_name",
]


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def make_shedding(name: str, seed: int | np.random.Generator | None = None) -> SheddingStrategy:
    """A shedding strategy by name (Pulsar's short or full class name, ``module:Class``, entry point)."""
    return resolve_strategy(name, role="shedding").shedder(_rng(seed))


def make_placement(name: str, seed: int | np.random.Generator | None = None) -> PlacementStrategy:
    """A placement strategy by name (Pulsar's short or full class name, ``module:Class``, entry point)."""
    return resolve_strategy(name, role="placement").placer(_rng(seed))


def make_pair(
    conf: LoadBalancerConfig, seed: int | np.random.Generator | None = None
) -> tuple[SheddingStrategy, PlacementStrategy]:
    """The configured shedding and placement strategies; a two-role class is one instance in both roles."""
    conf = resolve_config(conf)
    rng = _rng(seed)
    shed = resolve_strategy(conf.load_balancer_load_shedding_strategy, role="shedding")
    place = resolve_strategy(conf.load_balancer_load_placement_strategy, role="placement")
    if shed == place:  # one instance in both roles: its shedding pass plans what its placement reads
        both = shed.shedder(rng)
        return both, typing.cast(PlacementStrategy, both)
    return shed.shedder(rng), place.placer(rng)
