"""Pulsar's load-shedding and placement strategies, one module each, behind two protocols.

Use :func:`make_shedding`, :func:`make_placement` or :func:`make_pair` to build instances by
Pulsar class name (short ``AvgShedder`` or full ``org.apache.pulsar...AvgShedder``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from shedlab.config import LoadBalancerConfig, canonical_strategy_name
from shedlab.errors import ConfigError, did_you_mean
from shedlab.strategies.avg_shedder import AvgShedder
from shedlab.strategies.base import (
    Placement,
    PlacementStrategy,
    SheddingResult,
    SheddingStrategy,
    Unload,
)
from shedlab.strategies.least_long_term_message_rate import LeastLongTermMessageRate
from shedlab.strategies.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from shedlab.strategies.overload_shedder import OverloadShedder
from shedlab.strategies.threshold_shedder import ThresholdShedder
from shedlab.strategies.uniform_load_shedder import UniformLoadShedder

__all__ = [
    "STRATEGY_PAIRS",
    "AvgShedder",
    "LeastLongTermMessageRate",
    "LeastResourceUsageWithWeight",
    "OverloadShedder",
    "Placement",
    "PlacementStrategy",
    "SheddingResult",
    "SheddingStrategy",
    "ThresholdShedder",
    "UniformLoadShedder",
    "Unload",
    "make_pair",
    "make_placement",
    "make_shedding",
    "pair_config",
    "resolve_pair_name",
    "short_pair_name",
]

_SHEDDERS: dict[str, type[Any]] = {
    "ThresholdShedder": ThresholdShedder,
    "OverloadShedder": OverloadShedder,
    "UniformLoadShedder": UniformLoadShedder,
    "AvgShedder": AvgShedder,
}
_PLACERS: dict[str, type[Any]] = {
    "LeastLongTermMessageRate": LeastLongTermMessageRate,
    "LeastResourceUsageWithWeight": LeastResourceUsageWithWeight,
    "AvgShedder": AvgShedder,
}

STRATEGY_PAIRS: dict[str, tuple[str, str]] = {
    "ThresholdShedder+LeastLongTermMessageRate": ("ThresholdShedder", "LeastLongTermMessageRate"),
    "ThresholdShedder+LeastResourceUsageWithWeight": ("ThresholdShedder", "LeastResourceUsageWithWeight"),
    "UniformLoadShedder+LeastLongTermMessageRate": ("UniformLoadShedder", "LeastLongTermMessageRate"),
    "OverloadShedder+LeastLongTermMessageRate": ("OverloadShedder", "LeastLongTermMessageRate"),
    "AvgShedder": ("AvgShedder", "AvgShedder"),
}
"""The strategy pairs PIP-364 compares, by the names the CLI and scenario files accept."""


_ABBREVIATIONS = {
    "ThresholdShedder": "Threshold",
    "UniformLoadShedder": "Uniform",
    "OverloadShedder": "Overload",
    "LeastLongTermMessageRate": "LLTMR",
    "LeastResourceUsageWithWeight": "LRUWW",
}


def short_pair_name(pair: str, separator: str = "+") -> str:
    """``ThresholdShedder+LeastResourceUsageWithWeight`` → ``Threshold+LRUWW``, for narrow tables and
    crowded plot titles (captions spell LLTMR and LRUWW out)."""
    return separator.join(_ABBREVIATIONS.get(part, part) for part in pair.split("+"))


def _rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    return seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)


def make_shedding(name: str, seed: int | np.random.Generator | None = None) -> SheddingStrategy:
    """A shedding strategy by Pulsar class name (short or full)."""
    short = canonical_strategy_name(name, role="shedding")
    strategy: SheddingStrategy = _SHEDDERS[short](rng=_rng(seed))
    return strategy


def make_placement(name: str, seed: int | np.random.Generator | None = None) -> PlacementStrategy:
    """A placement strategy by Pulsar class name (short or full)."""
    short = canonical_strategy_name(name, role="placement")
    strategy: PlacementStrategy = _PLACERS[short](rng=_rng(seed))
    return strategy


def make_pair(
    conf: LoadBalancerConfig, seed: int | np.random.Generator | None = None
) -> tuple[SheddingStrategy, PlacementStrategy]:
    """The configured shedding and placement strategies; AvgShedder is one instance in both roles."""
    conf.validate_strategy_pair()
    rng = _rng(seed)
    shed_name, place_name = conf.shedding_strategy_name, conf.placement_strategy_name
    if shed_name == place_name == "AvgShedder":
        avg = AvgShedder(rng=rng)
        return avg, avg
    return _SHEDDERS[shed_name](rng=rng), _PLACERS[place_name](rng=rng)


def resolve_pair_name(name: str) -> str:
    """Accept a pair name ('AvgShedder', 'ThresholdShedder+LeastResourceUsageWithWeight', ...)."""
    if name in STRATEGY_PAIRS:
        return name
    lowered = {k.lower().replace(" ", ""): k for k in STRATEGY_PAIRS}
    key = name.lower().replace(" ", "")
    if key in lowered:
        return lowered[key]
    if "+" in name:
        shed, place = (part.strip() for part in name.split("+", 1))
        shed = canonical_strategy_name(shed, role="shedding")
        place = canonical_strategy_name(place, role="placement")
        if (shed == "AvgShedder") != (place == "AvgShedder"):
            raise ConfigError(
                "AvgShedder must be used for both shedding and placement", field="strategy", value=name
            )
        return "AvgShedder" if shed == "AvgShedder" else f"{shed}+{place}"
    raise ConfigError(
        "unknown strategy pair",
        field="strategy",
        value=name,
        hint=did_you_mean(name, STRATEGY_PAIRS) or f"known pairs: {', '.join(STRATEGY_PAIRS)}",
    )


def pair_config(
    pair: str, conf: LoadBalancerConfig | None = None, source: str = "strategy pair"
) -> LoadBalancerConfig:
    """``conf`` with both strategy keys set to the pair's classes."""
    name = resolve_pair_name(pair)
    shed, place = STRATEGY_PAIRS.get(name) or tuple(name.split("+", 1))
    overrides: Mapping[str, Any] = {
        "loadBalancerLoadSheddingStrategy": shed,
        "loadBalancerLoadPlacementStrategy": place,
    }
    return (conf or LoadBalancerConfig()).with_overrides(overrides, source=source)
