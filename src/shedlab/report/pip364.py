"""PIP-364's five problems as the report names, orders and explains them, and the PIP's own ratings.

The measured figures, intervals and ratings come from the evaluation (``shedlab evaluate``); this
module only holds what PIP-364 itself says (its summary table), so the report can print the PIP's
claim next to each measurement, and a plain-language description of every problem.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from typing import Any

import pandas as pd

from shedlab.core.evaluation import PIP364_PROBLEMS
from shedlab.core.grid import params_label
from shedlab.strategies import STRATEGY_PAIRS

__all__ = [
    "PIP_CLAIMS",
    "PROBLEMS",
    "PROBLEM_TEXT",
    "params_of",
    "pip_claim",
    "problem_order",
    "problem_slug",
    "rating_rule",
]

PROBLEMS: tuple[str, ...] = PIP364_PROBLEMS
"""The five problems in the order of PIP-364's summary table (defined once, in the core)."""

PROBLEM_TEXT: dict[str, str] = {
    "heterogeneous environment": (
        "Brokers differ in hardware, or share their machine with other processes. A strategy that ranks "
        "brokers by message rate or throughput instead of resource usage misjudges which broker is loaded "
        "and may move traffic onto a slow or busy machine."
    ),
    "load jitter": (
        "Traffic spikes briefly and returns to normal. A strategy that reacts to a single sample unloads "
        "bundles for a spike that is already over, and often moves them back when the next spike hits "
        "elsewhere: churn without lasting benefit."
    ),
    "over placement": (
        "Several bundles unloaded in the same cycle are all placed on the same least-loaded broker, which "
        "becomes the hottest one. Placement that scores brokers by resource usage cannot predict the load "
        "a bundle brings, so it keeps choosing the broker that looked coldest before the bundles arrived."
    ),
    "over unloading": (
        "A broker sheds so much that it ends up underloaded, typically because a history-weighted score "
        "still remembers its old, higher load after the bundles have gone."
    ),
    "slow load balancing": (
        "After a scale-out, a restart or a broker loss, the cluster needs many shedding cycles to become "
        "balanced again, for example because only one overloaded broker is handled per cycle."
    ),
}

_CLAIM_ROWS: dict[str, tuple[str, str, str, str, str]] = {
    "ThresholdShedder+LeastResourceUsageWithWeight": ("normal", "good", "bad", "bad", "normal"),
    "UniformLoadShedder+LeastLongTermMessageRate": ("bad", "bad", "good", "good", "normal"),
    "AvgShedder": ("normal", "good", "good", "good", "good"),
}
PIP_CLAIMS: dict[str, dict[str, str]] = {
    pair: dict(zip(PROBLEMS, ratings, strict=True)) for pair, ratings in _CLAIM_ROWS.items()
}
"""PIP-364's summary table: the pairs it rates and its rating for each problem (by canonical name)."""


def _key(problem: str) -> str:
    return re.sub(r"[^a-z]+", "", problem.lower())


_CANONICAL = {_key(p): p for p in PROBLEMS}


def canonical_problem(problem: str) -> str:
    """``over_placement`` / ``Over placement`` → ``over placement`` (unknown names are kept)."""
    return _CANONICAL.get(_key(problem), problem)


def pip_claim(strategy: str, problem: str) -> str | None:
    """What PIP-364's table says about ``strategy`` for ``problem`` (None where it does not rate it)."""
    return PIP_CLAIMS.get(strategy, {}).get(canonical_problem(problem))


def problem_description(problem: str) -> str:
    return PROBLEM_TEXT.get(canonical_problem(problem), "")


def problem_order(problems: Iterable[str]) -> list[str]:
    """PIP-364's column order first, then any other problems alphabetically."""
    known = {p: PROBLEMS.index(canonical_problem(p)) for p in problems if canonical_problem(p) in PROBLEMS}
    rest = sorted(p for p in set(problems) if p not in known)
    return sorted(known, key=lambda p: known[p]) + rest


def problem_slug(problem: str) -> str:
    """The HTML anchor of a problem: its words joined by ``-`` (``load jitter`` → ``load-jitter``).

    Only a name of lowercase ASCII words and single spaces maps back from its slug; any other name (a
    grid's own problems: ``a-b`` next to ``a b``, ``Jitter``, a name with no ASCII letter at all) gets
    a digest of the exact name too, so two problems never share an anchor and no anchor is empty.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", problem.lower()).strip("-")
    if slug.replace("-", " ") == problem:
        return slug
    return f"{slug}-{hashlib.sha256(problem.encode()).hexdigest()[:8]}".lstrip("-")


def _finite(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def rating_rule(good_below: Any, bad_above: Any) -> str:
    """The rating thresholds in words (lower figures are better)."""
    good, bad = _finite(good_below), _finite(bad_above)
    if good is None and bad is None:
        return "no thresholds recorded"
    parts = []
    if good is not None:
        parts.append(f"good below {good:g}")
    if good is not None and bad is not None:
        parts.append(f"normal from {good:g} to {bad:g}")
    if bad is not None:
        parts.append(f"bad above {bad:g}")
    return ", ".join(parts)


def pair_order(strategy: str) -> tuple[int, str]:
    """Sort key: PIP-364's five pairs in shedlab's order (Pulsar's default pair first), then others."""
    order = list(STRATEGY_PAIRS)
    return (order.index(strategy) if strategy in order else len(order), strategy)


def params_of(table: pd.DataFrame, strategy: str, params_id: str) -> str:
    """The ``key=value`` label of one of a table's parameter sets (PIP-364 table or metric statistics,
    which both carry ``params_json``); the id only for an older table without the JSON."""
    if "params_json" not in table:
        return f"parameters {params_id}"
    mine = table[(table["strategy"].astype(str) == strategy) & (table["params_id"].astype(str) == params_id)]
    return params_label(mine["params_json"].iloc[0]) if len(mine) else f"parameters {params_id}"
