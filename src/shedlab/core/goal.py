"""A challenger strategy against issue 15's goal, cell by cell, from a sweep's ``metric_stats``.

The goal (``docs/capacity-aware.md``, "Against the goal") was written for CapacityAwareShedder, and it
is the question a contributor asks of any strategy of their own: does it balance clusters of unequal
machines better than what Pulsar offers, without paying for it elsewhere? Measured over a sweep's seeds:

* on a **heterogeneous** scenario (its machines differ: :attr:`Scenario.machines_differ`), three cells:
  a lower mean spread than both AvgShedder and ThresholdShedder + LeastResourceUsageWithWeight; no
  more overloaded broker-minutes than either; fewer unloads than ThresholdShedder + LRUWW;
* on a **homogeneous** one, one cell: a mean spread within AvgShedder's 95 % interval or below it
  (better than AvgShedder is not a failure of "within");
* under **jitter** (a homogeneous scenario matching PIP-364's ``*jitter*`` pattern), one more: no
  more unloads than AvgShedder.

Each cell says ``won``, ``tie`` (equal means where the goal asks for lower: a cluster no pair moves)
or ``lost``, with both sides' means and intervals, and ``by_mean_only`` where the means differ but
their 95 % intervals overlap (a cell won or lost by the mean only; equal means, as two pairs that
never overload, are not; nor is a ``within_ci`` cell, which is about the interval already). Before this
module the tallies of issue 15's held-out rounds were counted by hand from ``evaluate``'s table; it is
their one home, used by ``shedlab evaluate --challenger`` and the report.

Strategy names are compared by their class part: a plugin named ``package.module:Class`` in a grid
is the strategy ``Class`` (``CapacityAwareShedder`` matches
``shedlab.strategies.capacity_aware:CapacityAwareShedder``). A strategy swept with several parameter
sets is judged per set as a challenger; as a baseline its best set is the one to beat.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import pandas as pd

from shedlab.core.sim.scenario import parse_scenario_text
from shedlab.errors import ConfigError, ShedlabError, did_you_mean

__all__ = [
    "AVG",
    "DEFAULT_CHALLENGER",
    "GOAL_COLUMNS",
    "GOAL_RULES",
    "GOAL_TABLE",
    "JITTER_PATTERN",
    "TS_LRUWW",
    "GoalRule",
    "check_challenger",
    "goal_cells",
    "goal_note",
    "goal_tally",
    "same_mean",
    "same_strategy",
    "scenario_class",
    "scenario_classes",
    "tally_sentence",
    "verdict",
]

DEFAULT_CHALLENGER = "CapacityAwareShedder"
GOAL_TABLE = "goal"
"""The goal's cells in an evaluation directory, as ``goal.csv`` (``shedlab evaluate`` writes it; the
report reads it)."""
AVG = "AvgShedder"
TS_LRUWW = "ThresholdShedder+LeastResourceUsageWithWeight"
JITTER_PATTERN = "*jitter*"
"""PIP-364's load-jitter scenarios (``core/evaluation.py``'s definitions use the same pattern)."""

HETEROGENEOUS, HOMOGENEOUS, JITTER = "heterogeneous", "homogeneous", "jitter"


@dataclass(frozen=True)
class GoalRule:
    """One cell of the goal: on scenarios of ``classes``, the challenger's mean ``metric`` against the
    best (lowest) mean of ``baselines``, by ``test``: ``lower`` (strictly; equal is a tie),
    ``not_higher`` (equal wins), ``within_ci`` (at most the baseline's interval's upper bound)."""

    criterion: str
    metric: str
    test: str
    baselines: tuple[str, ...]
    classes: tuple[str, ...]


GOAL_RULES: tuple[GoalRule, ...] = (
    GoalRule("lower spread", "score_spread_mean", "lower", (AVG, TS_LRUWW), (HETEROGENEOUS,)),
    GoalRule(
        "no more overloaded minutes",
        "broker_minutes_overloaded",
        "not_higher",
        (AVG, TS_LRUWW),
        (HETEROGENEOUS,),
    ),
    GoalRule("fewer unloads", "unloads", "lower", (TS_LRUWW,), (HETEROGENEOUS,)),
    GoalRule(
        "spread within AvgShedder's interval", "score_spread_mean", "within_ci", (AVG,), (HOMOGENEOUS, JITTER)
    ),
    GoalRule("no more unloads than AvgShedder", "unloads", "not_higher", (AVG,), (JITTER,)),
)
"""Issue 15's goal, in the order its text gives the cells."""

GOAL_COLUMNS = (
    "scenario",
    "class",
    "challenger",
    "params_id",
    "criterion",
    "metric",
    "value",
    "ci_low",
    "ci_high",
    "baseline",
    "baseline_value",
    "baseline_ci_low",
    "baseline_ci_high",
    "verdict",
    "by_mean_only",
)


def scenario_class(name: str, machines_differ: bool) -> str:
    """``heterogeneous``, ``jitter`` or ``homogeneous``: which cells of the goal a scenario has."""
    if machines_differ:
        return HETEROGENEOUS
    return JITTER if fnmatch.fnmatchcase(name, JITTER_PATTERN) else HOMOGENEOUS


def same_strategy(run_strategy: str, wanted: str) -> bool:
    """Whether a run's strategy (pair) is ``wanted``, comparing each ``+`` part by its class name."""
    parts = [p.rpartition(":")[2] for p in run_strategy.split("+")]
    return parts == [p.rpartition(":")[2] for p in wanted.split("+")]


def goal_cells(stats: pd.DataFrame, classes: Mapping[str, str], challenger: str) -> pd.DataFrame:
    """The goal's cells (:data:`GOAL_COLUMNS`) of every scenario in ``classes`` (name → class) that the
    sweep ran with ``challenger`` and the cell's baselines; a cell whose baseline or metric is missing
    is left out. ``stats`` is ``metric_stats`` (``core/evaluation.py``)."""
    rows: list[dict[str, object]] = []
    for scenario, cls in sorted(classes.items()):
        sub = stats[stats["scenario"] == scenario]
        mine = sub[_of(sub, challenger)]
        for params_id, own in mine.groupby("params_id", sort=True):
            for rule in GOAL_RULES:
                if cls in rule.classes:
                    row = _cell(sub, own, rule)
                    if row is not None:
                        rows.append({"scenario": scenario, "class": cls, "params_id": params_id, **row})
    return pd.DataFrame(rows, columns=list(GOAL_COLUMNS))


def _of(stats: pd.DataFrame, strategy: str) -> pd.Series:
    """The rows of ``stats`` that are ``strategy``'s (:func:`same_strategy`)."""
    return pd.Series(
        [same_strategy(str(s), strategy) for s in stats["strategy"]], index=stats.index, dtype=bool
    )


def _cell(sub: pd.DataFrame, own: pd.DataFrame, rule: GoalRule) -> dict[str, object] | None:
    mine = own[own["metric"] == rule.metric]
    if mine.empty:
        return None
    best: pd.Series | None = None
    for baseline in rule.baselines:
        theirs = sub[(sub["metric"] == rule.metric) & _of(sub, baseline)]
        if theirs.empty:
            return None
        candidate = theirs.sort_values("mean", kind="stable").iloc[0]
        if best is None or float(candidate["mean"]) < float(best["mean"]):
            best = candidate
    assert best is not None
    m = mine.iloc[0]
    return {
        "challenger": str(m["strategy"]),
        "criterion": rule.criterion,
        "metric": rule.metric,
        "value": float(m["mean"]),
        "ci_low": _num(m["ci_low"]),
        "ci_high": _num(m["ci_high"]),
        "baseline": str(best["strategy"]),
        "baseline_value": float(best["mean"]),
        "baseline_ci_low": _num(best["ci_low"]),
        "baseline_ci_high": _num(best["ci_high"]),
        "verdict": verdict(rule.test, float(m["mean"]), float(best["mean"]), _num(best["ci_high"])),
        "by_mean_only": rule.test != "within_ci"
        and not same_mean(float(m["mean"]), float(best["mean"]))
        and _overlap(m, best),
    }


def verdict(test: str, value: float, baseline: float, baseline_ci_high: float) -> str:
    """``won``, ``tie`` or ``lost`` for one cell (:class:`GoalRule`'s tests); a ``within_ci`` cell
    without an interval (one seed) asks for the mean. Means that agree to nine significant digits are
    equal (:func:`same_mean`)."""
    if test == "lower":
        return "tie" if same_mean(value, baseline) else "won" if value < baseline else "lost"
    if test == "not_higher":
        return "won" if value <= baseline or same_mean(value, baseline) else "lost"
    if test == "within_ci":
        bound = baseline if math.isnan(baseline_ci_high) else baseline_ci_high
        return "won" if value <= bound or same_mean(value, bound) else "lost"
    raise ValueError(f"unknown goal test {test!r}")


def same_mean(a: float, b: float) -> bool:
    """Whether two means are the same figure. Two pairs that make the same runs (no pair moves
    anything on a lightly loaded cluster) have means that differ in their last bit, because Spark sums
    each group's values in the order its partitions give them (``4.685448237388365`` against
    ``…364`` on round 6's ``probe-fanout-mixed``): that is a tie, not a loss."""
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _num(value: object) -> float:
    """A statistic as a float, NaN where the table has none (one seed: no interval)."""
    return float(value) if isinstance(value, int | float) else math.nan


def _overlap(a: pd.Series, b: pd.Series) -> bool:
    """Whether two 95 % intervals share a point (a mean without an interval is its own interval)."""
    lo_a, hi_a = _interval(a)
    lo_b, hi_b = _interval(b)
    return lo_a <= hi_b and lo_b <= hi_a


def _interval(row: pd.Series) -> tuple[float, float]:
    lo, hi = _num(row["ci_low"]), _num(row["ci_high"])
    mean = float(row["mean"])
    return (mean if math.isnan(lo) else lo, mean if math.isnan(hi) else hi)


def goal_tally(cells: pd.DataFrame) -> dict[str, int]:
    """How many cells were won, tied and lost, and how many of the won and lost were by the mean only
    (intervals overlapping)."""
    verdicts = cells["verdict"].tolist()
    overlap = cells["by_mean_only"].astype(bool).tolist()
    close = [v for v, o in zip(verdicts, overlap, strict=True) if o]
    return {
        "cells": len(verdicts),
        "won": verdicts.count("won"),
        "tie": verdicts.count("tie"),
        "lost": verdicts.count("lost"),
        "won_by_mean_only": close.count("won"),
        "lost_by_mean_only": close.count("lost"),
    }


def tally_sentence(cells: pd.DataFrame) -> str:
    """The tally in one line, for the terminal and the report: ``10 of 12 goal cells won (6 by the mean
    only, intervals overlapping), 0 tied, 2 lost (1 by the mean only)``."""
    t = goal_tally(cells)
    return (
        f"{t['won']} of {t['cells']} goal cells won ({t['won_by_mean_only']} by the mean only, intervals "
        f"overlapping), {t['tie']} tied, {t['lost']} lost ({t['lost_by_mean_only']} by the mean only)"
    )


def check_challenger(challenger: str, strategies: Collection[str], source: str) -> None:
    """Refuse a challenger the user named that the sweep never ran (a typo, or the wrong sweep), with the
    closest swept name: an evaluation judged against nothing would look like one that found no cells.
    The default challenger may be absent (most sweeps do not run CapacityAwareShedder): no cells then.
    ``source`` names where the swept strategies were read (the sweep's ``sweep.json``, or its runs)."""
    if challenger == DEFAULT_CHALLENGER or any(same_strategy(s, challenger) for s in strategies):
        return
    swept = sorted(set(strategies))
    raise ConfigError(
        "the sweep has no runs of this strategy",
        source=source,
        field="--challenger",
        value=challenger,
        hint=did_you_mean(challenger, swept) or f"it ran {', '.join(swept)}",
    )


def goal_note(strategies: Collection[str], challenger: str) -> str | None:
    """Why a sweep that ran the challenger has no goal cells: a baseline was not swept. None when the
    cells can be made, or when the challenger was not swept (:func:`check_challenger` refused a named
    one; the default simply was not run)."""
    swept = sorted(set(strategies))
    missing = [s for s in (challenger, AVG, TS_LRUWW) if not any(same_strategy(r, s) for r in swept)]
    if not missing or missing[0] == challenger:
        return None
    return f"no goal cells for {challenger}: the sweep has no runs of {', '.join(missing)}"


def scenario_classes(texts: Mapping[str, str]) -> dict[str, str]:
    """Scenario name → class, from each scenario's YAML text as a sweep's manifest records it
    (``sweep.json``). A text this version cannot read (a sweep of another version) is left out, and so
    are its cells: a class guessed from a name would judge a cluster on cells it does not have."""
    classes: dict[str, str] = {}
    for name, text in texts.items():
        try:
            scenario = parse_scenario_text(text, name)
        except ShedlabError:  # InputError or ConfigError: the text of another version
            continue
        classes[name] = scenario_class(name, scenario.machines_differ)
    return classes
