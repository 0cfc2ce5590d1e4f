"""What a report shows, independent of where it was read from.

The loaders (:mod:`shedlab.report.load`) turn a results directory (sweep + evaluate, simulate,
compare or replay output) into a :class:`ReportData`; the page (:mod:`shedlab.report.page`) only
reads this. Every frame uses the column names documented on its field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["SKIP_REPORT_COLUMNS", "ReplayData", "ReportData", "RunSeries", "ScenarioInfo"]

SKIP_REPORT_COLUMNS = ("time_s", "role", "kind", "broker", "count", "message")
"""The columns of :attr:`RunSeries.skips`: the simulator's ``skips`` table without its tick number."""


@dataclass
class RunSeries:
    """The time series of one simulation run (one scenario × strategy pair × parameters × seed).

    * ``brokers``: ``time_s``, ``broker``, ``score`` (the broker's weighted max resource usage ×100).
    * ``cluster``: ``time_s``, ``imbalance`` (the figure named by ``imbalance_label``) and, where
      recorded, ``unloads`` (unloads of the tick).
    * ``decisions``: ``time_s``, ``source``, ``destination``, ``bundle`` (one row per unload).
    * ``events``: ``time_s``, ``kind``, ``detail`` (scale-out, broker loss, restarts, traffic changes).
    * ``skips``: decisions not taken (``docs/metrics.md``, "skips"): ``time_s``, ``role``, ``kind``,
      ``broker``, ``count``, ``message``; empty for outputs written before the table existed.
    """

    scenario: str
    strategy: str
    brokers: pd.DataFrame
    cluster: pd.DataFrame
    decisions: pd.DataFrame
    events: pd.DataFrame
    label: str = ""
    params_id: str = ""
    imbalance_label: str = "max − min broker score"
    skips: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(SKIP_REPORT_COLUMNS)))


@dataclass
class ScenarioInfo:
    """A scenario as the report describes it: its description, file and full specification."""

    name: str
    description: str = ""
    source: str = ""
    spec: dict[str, Any] | None = None
    text: str = ""
    digest: str = ""


@dataclass
class ReplayData:
    """A replay of recorded load data under strategies (``shedlab replay`` output).

    * ``comparison``: ``cluster``, ``strategy``, ``config_id``, ``tick_ms``, ``actual_moves``,
      ``strategy_unloads``, ``both``, ``max_usage``, ``est_max_usage``, ``usage_spread``,
      ``est_usage_spread`` (usage figures 0–1) and, in replays since explanations were recorded,
      ``left_alone`` (brokers the strategy left alone at the tick) and ``reasons`` (JSON reason → count).
    * ``load``: ``cluster``, ``strategy``, ``tick_ms``, ``broker``, ``usage``, ``est_usage`` (0–1).
    * ``decisions``: ``cluster``, ``strategy``, ``tick_ms``, ``source``, ``bundle``, ``destination``,
      ``actually_moved``, ``actual_destination``.
    * ``ownership``: ``cluster``, ``tick_ms``, ``bundle``, ``from_broker``, ``to_broker``.
    """

    comparison: pd.DataFrame | None = None
    load: pd.DataFrame | None = None
    decisions: pd.DataFrame | None = None
    ownership: pd.DataFrame | None = None


@dataclass
class ReportData:
    """Everything a report can show; absent parts are ``None`` or empty and their sections are left out.

    * ``pip_table``: the PIP-364 table as numbers, one row per strategy pair × problem (columns of
      :data:`shedlab.core.evaluation.PIP364_COLUMNS`: ``strategy``, ``params_id``, ``problem``, ``metric``,
      ``scenarios``, ``n_runs``, ``value``, ``ci_low``, ``ci_high``, ``good_below``, ``bad_above``,
      ``rating``).
    * ``metric_stats``: per scenario × strategy × parameters × metric means and 95 % intervals.
    * ``goal``: a challenger's cells of issue 15's goal (:data:`shedlab.core.goal.GOAL_COLUMNS`).
    * ``runs``: one row per run: ``scenario``, ``strategy``, ``params_id``, ``params_json``, ``seed``,
      ``churn``, ``imbalance`` (for the trade-off scatter) and any other summary metrics.
    * ``series``: per scenario, the runs whose time series are drawn (one per strategy pair).
    """

    kind: str
    source: Path
    title: str
    pip_table: pd.DataFrame | None = None
    pip_definitions: dict[str, dict[str, Any]] = field(default_factory=dict)
    metric_stats: pd.DataFrame | None = None
    goal: pd.DataFrame | None = None
    runs: pd.DataFrame | None = None
    churn_label: str = "unloads per run"
    imbalance_label: str = "mean max − min broker usage (pp)"
    series: dict[str, list[RunSeries]] = field(default_factory=dict)
    scenarios: dict[str, ScenarioInfo] = field(default_factory=dict)
    replay: ReplayData | None = None
    run_info: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
