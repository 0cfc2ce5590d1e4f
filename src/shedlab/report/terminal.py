"""The PIP-364 table and the goal's cells for a terminal (rich), compact enough for 80 columns.

Rows are strategy pairs under short names (``Threshold + LRUWW``; the caption spells the
abbreviations out), so no pair is truncated into another; each cell holds the figure, ± its 95 %
interval and the rating in its colour.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from rich.markup import escape
from rich.table import Table

from shedlab.core.evaluation import TOO_FEW_RUNS
from shedlab.core.goal import tally_sentence
from shedlab.report.figures import short_pair
from shedlab.report.pip364 import pair_order, params_of, problem_order
from shedlab.strategies.registry import caption_legend
from shedlab.units import significant

__all__ = ["goal_table", "pip364_table"]

RATING_STYLE = {"good": "green", "normal": "yellow", "bad": "red", TOO_FEW_RUNS: "dim italic"}
VERDICT_STYLE = {"won": "green", "tie": "yellow", "lost": "red"}
_HEADINGS = {
    "heterogeneous environment": "hetero-\ngeneous",
    "load jitter": "load\njitter",
    "over placement": "over\nplacement",
    "over unloading": "over\nunloading",
    "slow load balancing": "slow\nbalancing",
}
"""Column headings that fit 80 columns; the full problem names are the report's and the docs'."""


def _half_width(value: float, low: float, high: float) -> float:
    """The t-interval's half-width. The interval was cut to the range of its figure (at 0 below for
    counts and spreads, at 1 above for fractions); a side not cut still lies a half-width from the mean
    (a figure in [0, ∞) is cut below only), while (high − low) / 2 of a cut interval is no interval's."""
    return max(float(high) - float(value), float(value) - float(low))


def pip364_table(table: pd.DataFrame) -> Table:
    """One row per strategy pair (and parameter set, where the table has several), one column per
    problem; each cell ``figure``, ``± half-width of its 95 % CI`` and the rating."""
    problems = problem_order(table["problem"].astype(str).unique())
    keys = table[["strategy", "params_id"]].astype(str).drop_duplicates()
    rows = sorted(keys.itertuples(index=False, name=None), key=lambda sp: (pair_order(sp[0]), sp[1]))
    show_params = keys["params_id"].nunique() > 1
    out = Table(
        title="PIP-364, measured: mean ± 95 % CI and rating (lower is better)",
        caption=escape(caption_legend([strategy for strategy, _ in rows])),
        show_lines=True,
    )
    out.add_column("strategy pair")
    for problem in problems:
        # a grid may name its own problems: text, not rich markup ('[/]' raised, '[cn]' vanished)
        out.add_column(escape(_HEADINGS.get(problem, problem.replace(" ", "\n", 1))), justify="center")
    strategy_col = table["strategy"].astype(str)
    params_col = table["params_id"].astype(str)
    for strategy, params_id in rows:
        cells = []
        for problem in problems:
            hit = table[
                (strategy_col == strategy)
                & (params_col == params_id)
                & (table["problem"].astype(str) == problem)
            ]
            if hit.empty:
                cells.append("[dim]not measured[/]")
                continue
            r = hit.iloc[0]
            rating = str(r["rating"])
            lines = [significant(r["value"])]
            if significant(r["ci_low"]) != "-":
                lines.append(f"[dim]± {significant(_half_width(r['value'], r['ci_low'], r['ci_high']))}[/]")
            lines.append(f"[{RATING_STYLE.get(rating, 'dim')}]{rating}[/]")
            cells.append("\n".join(lines))
        label = escape(short_pair(strategy)) + (
            f"\n[dim]{escape(params_of(table, strategy, params_id))}[/]" if show_params else ""
        )
        out.add_row(label, *cells)
    return out


def goal_table(cells: pd.DataFrame) -> Table:
    """The goal's cells (``core/goal.py``), one row per scenario and one column per metric: the verdict
    (``~``: by the mean only, the 95 % intervals overlap) over the challenger's mean against the mean
    of the baseline to beat. The intervals are in ``goal.csv`` and the report."""
    challenger = short_pair(str(cells["challenger"].iloc[0])) if len(cells) else ""
    metrics = list(dict.fromkeys(cells["metric"].astype(str)))
    out = Table(
        title=escape(f"{challenger} against the heterogeneous-cluster goal: its mean vs the baseline's"),
        caption=tally_sentence(cells),
        show_lines=True,
    )
    out.add_column("scenario", overflow="fold")
    for metric in metrics:
        out.add_column(_GOAL_HEADINGS.get(metric, metric), justify="center")
    for scenario, rows in cells.groupby("scenario", sort=True):
        by_metric = {str(r.metric): r for r in rows.itertuples(index=False)}
        row = [escape(f"{scenario}\n({rows['class'].iloc[0]})")]
        for metric in metrics:
            r = by_metric.get(metric)
            row.append("" if r is None else _goal_cell(r))
        out.add_row(*row)
    return out


_GOAL_HEADINGS = {"score_spread_mean": "spread", "broker_minutes_overloaded": "overloaded\nminutes"}


def _goal_cell(r: Any) -> str:
    style = VERDICT_STYLE.get(str(r.verdict), "dim")
    mark = " ~" if bool(r.by_mean_only) else ""
    versus = f"{significant(r.value)} vs {significant(r.baseline_value)}"
    return (
        f"[{style}]{escape(str(r.verdict))}{mark}[/]\n{versus}\n[dim]{escape(short_pair(str(r.baseline)))}[/]"
    )
