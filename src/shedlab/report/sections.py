"""The sections of a report, each a function ``(page, data) -> html`` that returns "" when the results
hold nothing for it."""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from shedlab.core.evaluation import MIN_RUNS_TO_RATE, TOO_FEW_RUNS
from shedlab.core.goal import tally_sentence
from shedlab.core.replay import total_reasons
from shedlab.core.results import RUN_SUMMARY_ARROW
from shedlab.report import figures
from shedlab.report.builder import Page, fmt, pair_label, table_html
from shedlab.report.meta import environment_versions
from shedlab.report.model import ReplayData, ReportData, RunSeries
from shedlab.report.pip364 import (
    pair_order,
    params_of,
    pip_claim,
    problem_description,
    problem_order,
    problem_slug,
    rating_rule,
)
from shedlab.strategies.registry import abbreviation_legend
from shedlab.units import counted

__all__ = ["SECTIONS", "intro"]

KEY_METRICS: tuple[tuple[str, str], ...] = (
    ("unloads", "unloads"),
    ("score_spread_mean", "mean spread"),
    ("score_spread_final", "final spread"),
    ("time_to_balance_s_max", "time to balance (s)"),
    ("over_placement_events", "over-placement events"),
    ("over_unloading_flips", "over-unloading flips"),
    ("broker_minutes_overloaded", "overloaded broker-minutes"),
    ("moved_again_within_window", "moved again in window"),
)
"""The run metrics shown per scenario (``docs/metrics.md`` defines each)."""

_RUN_ID_COLUMNS = frozenset(
    {"scenario", "strategy", "seed", "params_id", "params_json", "params_label", "churn", "imbalance"}
) | frozenset(RUN_SUMMARY_ARROW.names)
"""Columns of a runs table that are not summary metrics: the run's identity and a sweep's bookkeeping
(when and how long it ran, its own counters), as ``shedlab evaluate`` leaves them out."""


def _dl(items: Sequence[tuple[str, Any]]) -> str:
    rows = "".join(
        f"<dt>{html.escape(str(k))}</dt><dd><code>{html.escape(str(v))}</code></dd>" for k, v in items
    )
    return f'<dl class="meta">{rows}</dl>'


def _details(summary: str, body: str, *, pre: bool = True) -> str:
    inner = f"<pre>{html.escape(body)}</pre>" if pre else body
    return f"<details><summary>{html.escape(summary)}</summary>{inner}</details>"


def _ci(low: Any, high: Any) -> str:
    if pd.isna(low) or pd.isna(high):
        return ""
    return f'<div class="ci">[{fmt(low)}, {fmt(high)}]</div>'


# ------------------------------------------------------------------------------------------- intro


def intro(data: ReportData) -> str:
    """ "How to read this": what each part of this particular report shows."""
    items = []
    if data.pip_table is not None and not data.pip_table.empty:
        items.append(
            'The <a href="#pip364">PIP-364 table</a> gives one measured figure per strategy pair and '
            "problem: the mean over runs with its 95&nbsp;% confidence interval, and a rating (good / "
            'normal / bad) from fixed thresholds. Each column title links to <a href="#definitions">the '
            "definition</a> of its figure. Lower is better everywhere. Where PIP-364 rated a pair itself, "
            "its claim is printed under the measurement, so you can see where the measurement agrees."
        )
    if data.goal is not None and not data.goal.empty:
        items.append(
            '<a href="#goal">Against the goal</a> holds one strategy (the challenger) to the '
            "heterogeneous-cluster goal, cell by cell (the section states the cells): each one won, tied or "
            "lost on the means over seeds."
        )
    if data.series:
        items.append(
            "Each <a href=\"#scenarios\">scenario</a> shows every broker's <em>score</em> (Pulsar's "
            "weighted maximum resource usage ×100, the number the strategies sort brokers by) over time, "
            "one small panel per strategy pair on the same scale. Black ▼ are unloads, drawn on the source "
            "broker's line (hover for source → destination and the bundle); dotted vertical lines and grey "
            "◆ are scenario events (scale-out, broker loss, restarts, traffic changes; hover for details)."
        )
        items.append(
            "Below the panels, the cluster's imbalance (solid, left axis) and the cumulative number of "
            "unloads (dashed, right axis) of every pair share one chart: a good pair brings the solid line "
            "down quickly with few unloads."
        )
    if data.kind == "sweep" and data.runs is not None and not data.runs.empty:
        items.append(
            '<a href="#tradeoff">Churn against imbalance</a> shows one point per run: lower left is best; '
            "a cloud stretched along one axis is a trade-off that a parameter or the seed controls."
        )
    if data.replay is not None:
        items.append(
            'The <a href="#replay">replay</a> puts what happened in the recorded data next to what each '
            "strategy would have done on the same load reports."
        )
    if data.kind in ("simulate", "compare"):
        items.append(
            "These are single simulation runs, so figures have no confidence intervals; a sweep over seeds "
            "(<code>shedlab sweep</code>, then <code>shedlab evaluate</code>) gives the PIP-364 table."
        )
    items.append(
        'The <a href="#metadata">run metadata</a> lists versions, seeds, scenario files and '
        "configurations, so the report can be reproduced. Plots are interactive: drag to zoom, "
        "double-click to reset, click a legend entry to hide it."
    )
    bullets = "".join(f"<li>{item}</li>" for item in items)
    where = (
        "on recorded load data"
        if data.kind == "replay"
        else "on simulated clusters where PIP-364's five problems appear by themselves"
    )
    return (
        '<div class="intro"><p>shedlab runs Pulsar\'s load-balancing strategies — the same decisions as the '
        f"broker's own code — {where}, and measures what happens.</p><ul>{bullets}</ul></div>"
    )


# ------------------------------------------------------------------------------------------ PIP-364


def _pip_problems(data: ReportData) -> list[str]:
    names = set(data.pip_definitions)
    if data.pip_table is not None and not data.pip_table.empty:
        names.update(data.pip_table["problem"].astype(str).unique())
    return problem_order(names)


def pip_rows(table: pd.DataFrame) -> list[tuple[str, str | None]]:
    """The rows of the PIP-364 table: one per strategy pair (with its default parameters where every
    pair has them, or its only parameter set), else one per pair and parameter set."""
    strategies = sorted(table["strategy"].astype(str).unique(), key=pair_order)
    if "params_id" not in table or table["params_id"].isna().all():
        return [(s, None) for s in strategies]
    pairs = table[["strategy", "params_id"]].astype(str).drop_duplicates()
    per_pair = {s: set(pairs.loc[pairs["strategy"] == s, "params_id"]) for s in strategies}
    if all(len(per_pair[s]) == 1 for s in strategies):
        return [(s, next(iter(per_pair[s]))) for s in strategies]
    if all("default" in per_pair[s] for s in strategies):
        return [(s, "default") for s in strategies]
    return [(s, p) for s in strategies for p in sorted(per_pair[s])]


def _pip_cell(rows: pd.DataFrame, strategy: str, problem: str, defined: dict[str, Any]) -> str:
    if rows.empty:
        unmatched = bool(defined) and not defined.get("matched_scenarios")
        why = "no scenario of the sweep exhibits it" if unmatched else "no value"
        return f'<td class="rating-none cell"><span class="muted">not measured: {why}</span></td>'
    r = rows.iloc[0]
    rating = str(r["rating"]).lower() if pd.notna(r.get("rating")) else ""
    css = rating if rating in ("good", "normal", "bad") else "none"
    ci = _ci(r.get("ci_low"), r.get("ci_high")) or '<div class="ci">no interval (fewer than 2 runs)</div>'
    ci = ci.replace('class="ci">[', 'class="ci">95&nbsp;% CI [', 1)
    badge = f'<span class="badge {css}">{html.escape(rating)}</span>' if css != "none" else ""
    if rating == TOO_FEW_RUNS:
        badge = (
            f'<span class="badge warn" title="{MIN_RUNS_TO_RATE} runs or more are needed for a rating">'
            f"not rated: {counted(int(r.get('n_runs') or 0), 'run')}</span>"
        )
    claim = pip_claim(strategy, problem)
    claim_html = f'<div class="claim">PIP-364 says: {html.escape(claim)}</div>' if claim else ""
    tip = html.escape(f"{r.get('metric', '')} on {r.get('scenarios', '')}; {r.get('n_runs', '')} runs")
    return (
        f'<td class="rating-{css} cell" title="{tip}"><div class="fig">{fmt(r.get("value"))}</div>{ci}'
        f'{badge}{claim_html}<a class="def" href="#def-{problem_slug(problem)}">definition</a></td>'
    )


def pip_section(page: Page, data: ReportData) -> str:
    table = data.pip_table
    if table is None or table.empty:
        return ""
    problems = _pip_problems(data)
    rows_spec = pip_rows(table)
    known = [s for s, _ in rows_spec]
    n_runs = table["n_runs"].dropna().astype(int)
    if len(n_runs) and n_runs.min() != n_runs.max():
        runs_text = f"{n_runs.min()}–{n_runs.max()} runs per cell"
    else:
        runs_text = f"{n_runs.iloc[0]} runs per cell" if len(n_runs) else "runs per cell unknown"
    head = ["<th>strategy pair</th>"]
    for problem in problems:
        unit = data.pip_definitions.get(problem, {}).get("metric") or ", ".join(
            table.loc[table["problem"].astype(str) == problem, "metric"].dropna().astype(str).unique()
        )
        head.append(
            f'<th><a href="#def-{problem_slug(problem)}">{html.escape(problem)}</a>'
            f'<div class="unit">{html.escape(str(unit))}</div></th>'
        )
    body = []
    strategy_col = table["strategy"].astype(str)
    params_col = table["params_id"].astype(str) if "params_id" in table else None
    several = len(set(known)) < len(rows_spec)
    for strategy, params_id in rows_spec:
        colour = figures.pair_colour(strategy, known)
        label = pair_label(strategy)
        if several and params_id:
            label += f'<div class="unit">{html.escape(params_of(table, strategy, params_id))}</div>'
        mine = strategy_col == strategy
        if params_id is not None and params_col is not None:
            mine &= params_col == params_id
        cells = [f'<th><span class="swatch" style="background:{colour}"></span>{label}</th>']
        for problem in problems:
            hit = table[mine & (table["problem"].astype(str) == problem)]
            cells.append(_pip_cell(hit, strategy, problem, data.pip_definitions.get(problem, {})))
        body.append("<tr>" + "".join(cells) + "</tr>")
    out = [
        page.heading(1, "PIP-364, measured", "pip364"),
        '<p class="lead">One row per strategy pair, one column per problem of PIP-364. Each cell: the '
        f"measured figure (the mean over the runs of the scenarios that exhibit the problem; {runs_text}), "
        "its 95&nbsp;% confidence interval and the rating its thresholds give. Lower is better "
        "everywhere.</p>",
        f'<div class="scroll"><table class="pip" id="pip-table"><thead><tr>{"".join(head)}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>",
    ]
    if params_col is not None and params_col.nunique() > len({p for _, p in rows_spec}):
        out.append(
            '<p class="muted">The table shows each pair\'s default parameters; the sweep has '
            f"{params_col.nunique()} parameter sets: see the trade-off plot and all figures below.</p>"
        )
    return "\n".join(out)


def definitions_section(page: Page, data: ReportData) -> str:
    table = data.pip_table
    if table is None or table.empty:
        return ""
    out = [page.heading(1, "Definitions", "definitions"), '<dl class="defs">']
    for problem in _pip_problems(data):
        rows = table[table["problem"].astype(str) == problem]
        first: Any = rows.iloc[0] if not rows.empty else {}
        defined = data.pip_definitions.get(problem, {})
        description = str(defined.get("description") or problem_description(problem))
        metric = str(defined.get("metric") or first.get("metric") or "")
        what = f"Figure: <strong>{html.escape(metric)}</strong>"
        if defined.get("unit"):
            what += f" ({html.escape(str(defined['unit']))})"
        if defined.get("expr"):
            what += f" = <code>{html.escape(str(defined['expr']))}</code> per run, averaged over runs"
        matched = defined.get("matched_scenarios")
        scenarios = ", ".join(matched) if isinstance(matched, list) else str(first.get("scenarios") or "")
        where = f"Scenarios: {html.escape(scenarios or 'none in this sweep')}"
        patterns = defined.get("scenarios")
        if isinstance(patterns, list):
            where += f" (names matching {html.escape(', '.join(map(str, patterns)))})"
        rule = rating_rule(
            defined.get("good_below", first.get("good_below")),
            defined.get("bad_above", first.get("bad_above")),
        )
        out.append(
            f'<dt id="def-{problem_slug(problem)}">{html.escape(problem)}</dt>'
            f"<dd><p>{html.escape(description)}</p>"
            f'<p class="rule">{what}. {where}. Rating: {html.escape(rule)}. '
            '<a href="#pip364">Back to the table</a>.</p></dd>'
        )
    out.append("</dl>")
    return "\n".join(out)


# -------------------------------------------------------------------------------------------- goal

_VERDICT_CLASS = {"won": "good", "tie": "normal", "lost": "bad"}


def _verdict_html(verdict: str, by_mean_only: bool) -> str:
    css = _VERDICT_CLASS.get(verdict, "none")
    close = ' <span class="ci">by the mean only</span>' if by_mean_only else ""
    return f'<span class="verdict verdict-{css}">{html.escape(verdict)}</span>{close}'


def goal_section(page: Page, data: ReportData) -> str:
    """A challenger against issue 15's goal, cell by cell (``core/goal.py``), where ``shedlab evaluate``
    found the challenger and both baselines in the sweep."""
    cells = data.goal
    if cells is None or cells.empty:
        return ""
    challenger = figures.short_pair(str(cells["challenger"].iloc[0]))
    rows = pd.DataFrame(
        {
            "scenario": cells["scenario"].astype(str) + " (" + cells["class"].astype(str) + ")",
            "criterion": cells["criterion"],
            challenger: [_mean_html(r.value, r.ci_low, r.ci_high) for r in cells.itertuples()],
            "to beat": [
                f"{_mean_html(r.baseline_value, r.baseline_ci_low, r.baseline_ci_high)}"
                f'<div class="ci">{pair_label(str(r.baseline))}</div>'
                for r in cells.itertuples()
            ],
            "verdict": [_verdict_html(str(r.verdict), bool(r.by_mean_only)) for r in cells.itertuples()],
        }
    )
    intro_text = (
        f"<p>{html.escape(challenger)} against the heterogeneous-cluster goal "
        "(<code>docs/capacity-aware.md</code>, “Against the goal”). On a cluster whose machines differ: "
        "a lower mean spread than both AvgShedder and ThresholdShedder + LRUWW, no more overloaded "
        "broker-minutes, fewer unloads than ThresholdShedder + LRUWW. On identical machines: a spread "
        "within AvgShedder's 95 % interval (or below it), and under jitter no more unloads. Each cell "
        "compares means over the sweep's seeds with the baseline to beat (the lower of the two). "
        f"<strong>{html.escape(tally_sentence(cells))}.</strong></p>"
    )
    table = table_html(
        rows, text_columns=("scenario", "criterion"), html_columns=(challenger, "to beat", "verdict")
    )
    return page.heading(1, "Against the goal", "goal") + intro_text + table


def _mean_html(mean: Any, low: Any, high: Any) -> str:
    return f"{fmt(mean)}{_ci(low, high)}"


# ----------------------------------------------------------------------------------------- scenarios


def _events_table(run: RunSeries) -> str:
    ev = run.events.sort_values("time_s")
    if ev.empty:
        return '<p class="muted">No scenario events: the cluster only runs its traffic.</p>'
    rows = []
    for t, kind, detail in ev[["time_s", "kind", "detail"]].head(40).itertuples(index=False, name=None):
        s = round(float(t))
        clock = f"{s // 3600:d}:{s % 3600 // 60:02d}:{s % 60:02d}"
        rows.append(
            f'<tr><td class="mono">{clock}</td><td>{html.escape(str(kind))}</td>'
            f"<td>{html.escape(str(detail or ''))}</td></tr>"
        )
    more = f'<p class="muted">… and {len(ev) - 40} more.</p>' if len(ev) > 40 else ""
    return f'<table class="events"><tbody>{"".join(rows)}</tbody></table>{more}'


def _drawn_set(runs: pd.DataFrame, scenario: str, strategy: str, params_id: str | None) -> pd.DataFrame:
    """The runs of one pair on one scenario with the drawn run's parameter set (every run of the pair
    where the runs have no parameter sets): the key figures describe the runs the panels show."""
    sel = runs[(runs["scenario"].astype(str) == scenario) & (runs["strategy"].astype(str) == strategy)]
    if params_id and "params_id" in sel:
        sel = sel[sel["params_id"].astype(str) == params_id]
    return sel


def _key_figures(data: ReportData, scenario: str, runs: Sequence[RunSeries]) -> str:
    """Per strategy pair: the key run metrics (mean and 95 % interval over seeds where evaluated)."""
    stats = data.metric_stats
    all_runs = data.runs
    strategies = [r.strategy for r in runs]
    params = {r.strategy: r.params_id for r in runs if r.params_id}
    rows = []
    for strategy in strategies:
        colour = figures.pair_colour(strategy, strategies)
        row = {
            "strategy pair": f'<span class="swatch" style="background:{colour}"></span>{pair_label(strategy)}'
        }
        for metric, label in KEY_METRICS:
            cell = "–"
            if stats is not None and not stats.empty:
                sel = stats[
                    (stats["scenario"].astype(str) == scenario)
                    & (stats["strategy"].astype(str) == strategy)
                    & (stats["metric"].astype(str) == metric)
                ]
                if strategy in params and "params_id" in sel:
                    sel = sel[sel["params_id"].astype(str) == params[strategy]]
                if not sel.empty:
                    r = sel.iloc[0]
                    cell = fmt(r["mean"]) + _ci(r.get("ci_low"), r.get("ci_high"))
            elif all_runs is not None and metric in all_runs:
                sel = _drawn_set(all_runs, scenario, strategy, params.get(strategy))
                values = pd.to_numeric(sel[metric], errors="coerce").dropna()
                if len(values):
                    cell = fmt(values.mean())
            row[label] = cell
        rows.append(row)
    frame = pd.DataFrame(rows)
    if stats is not None and not stats.empty:
        caption = "mean over seeds, 95&nbsp;% confidence interval below"
    elif all_runs is not None and not all_runs.empty:
        per_pair = [len(_drawn_set(all_runs, scenario, s, params.get(s))) for s in strategies]
        n = max(per_pair, default=0)
        caption = f"mean over {n} runs per pair" if n > 1 else "one run per pair"
    else:
        caption = "not recorded"
    body = table_html(frame, text_columns=["strategy pair"], html_columns=frame.columns)
    return (
        f'<p class="muted small">Key figures ({caption}; lower is better; <code>docs/metrics.md</code> '
        f'defines each).</p><div class="scroll">{body}</div>'
    )


SKIPS_SHOWN = 8
"""Kinds of skipped decision listed per strategy pair (the most frequent first); the rest are summed."""


def skips_summary(skips: pd.DataFrame) -> pd.DataFrame:
    """One row per kind of decision not taken: ``role``, ``kind``, ``message``, ``times`` (the sum of
    ``count``), ``ticks`` (distinct times it happened at) and ``brokers`` (distinct brokers named), the
    most frequent first (ties by kind, so the order is reproducible)."""
    columns = ["role", "kind", "message", "times", "ticks", "brokers"]
    if skips.empty:
        return pd.DataFrame(columns=columns)
    grouped = skips.groupby(["role", "kind", "message"], sort=True, dropna=False)
    table = grouped.agg(
        times=("count", "sum"), ticks=("time_s", "nunique"), brokers=("broker", "nunique")
    ).reset_index()
    return table.sort_values(["times", "kind"], ascending=[False, True], kind="stable")[columns]


def _skips_table(runs: Sequence[RunSeries]) -> str:
    """What each drawn run's load manager did *not* do, per kind (the ``skips`` table)."""
    rows: list[tuple[str, str, str, object, object, object]] = []
    for run in runs:
        table = skips_summary(run.skips)
        for i, r in enumerate(table.itertuples(index=False)):
            if i == SKIPS_SHOWN:
                rest = table.iloc[SKIPS_SHOWN:]
                rows.append((run.strategy, "…", f"{len(rest)} other kinds", rest["times"].sum(), "", ""))
                break
            rows.append((run.strategy, f"{r.role}: {r.kind}", str(r.message), r.times, r.ticks, r.brokers))
    if not rows:
        return (
            '<p class="muted">No decision was skipped in the runs drawn (or they were written before '
            "shedlab recorded skips).</p>"
        )
    frame = pd.DataFrame(
        rows, columns=["strategy pair", "kind", "what", "times", "ticks with it", "brokers named"]
    )
    frame["strategy pair"] = [pair_label(str(s)) for s in frame["strategy pair"]]
    body = table_html(frame, text_columns=["strategy pair", "kind", "what"], html_columns=["strategy pair"])
    return (
        '<p class="muted small">Decisions not taken in the runs drawn: triggers a strategy skipped, '
        "brokers it left alone, random placement fallbacks and unloads the leader dropped "
        "(<code>docs/metrics.md</code>, <em>skips</em>).</p>"
        f'<div class="scroll">{body}</div>'
    )


def _heatmap_note(n_brokers: int, what: str) -> str:
    """How to read the per-broker figure when it is a heatmap (more than a dozen brokers)."""
    if n_brokers <= figures.HEATMAP_ABOVE:
        return ""
    return (
        f"{n_brokers} brokers, too many for one line each: one row per broker (sorted by name), the colour "
        f"is its {what}, the same row is the same broker in every panel. "
    )


def _replay_brokers(replay: ReplayData, cluster: str) -> int:
    load = replay.load
    if load is None:
        return 0
    return int(load.loc[load["cluster"].astype(str) == cluster, "broker"].nunique())


def scenario_sections(page: Page, data: ReportData) -> str:
    if not data.series:
        return ""
    out = [
        page.heading(1, "Scenarios", "scenarios"),
        '<p class="lead">Per scenario: its key figures, every broker\'s score over time (one panel per '
        "strategy pair, same scale), then the cluster's imbalance and the cumulative unloads of every "
        "pair on one chart.</p>",
    ]
    for scenario, runs in data.series.items():
        info = data.scenarios.get(scenario)
        out.append(page.heading(2, scenario, f"scenario-{page.anchor(scenario)}"))
        if info is not None and info.description:
            out.append(f'<p class="lead">{html.escape(info.description)}</p>')
        first = next((r for r in runs if not r.events.empty), runs[0])
        out.append(_details("Scenario events", _events_table(first), pre=False))
        out.append(_key_figures(data, scenario, runs))
        out.append(_details("Decisions not taken", _skips_table(runs), pre=False))
        labels = sorted({r.label for r in runs if r.label})
        drawn = f" Runs drawn: {html.escape('; '.join(labels))}." if labels else ""
        drawn += _abbreviations([r.strategy for r in runs])
        out.append(
            page.figure(
                figures.broker_load_figure(runs, max_points=page.max_points),
                _heatmap_note(len({b for r in runs for b in r.brokers["broker"].astype(str)}), "score")
                + "Per-broker score (U·100) over time, one panel per strategy pair, shared scale. ▼ = unload "
                "on the source broker (hover: source → destination, bundle); dotted lines and ◆ = scenario "
                f"events.{drawn}",
                f"brokers:{scenario}",
            )
        )
        out.append(
            page.figure(
                figures.imbalance_figure(runs, max_points=page.max_points),
                f"Imbalance ({html.escape(runs[0].imbalance_label)}; solid, left axis) and cumulative "
                f"unloads (dashed, right axis) per strategy pair.{drawn}",
                f"imbalance:{scenario}",
            )
        )
    return "\n".join(out)


def tradeoff_section(page: Page, data: ReportData) -> str:
    runs = data.runs
    if runs is None or runs.empty or data.kind != "sweep":
        return ""
    ok = runs.dropna(subset=["churn", "imbalance"])
    out = [
        page.heading(1, "Churn against imbalance", "tradeoff"),
        f'<p class="lead">One point per run ({len(ok)} runs), coloured by strategy pair, one panel per '
        f"scenario. x: {html.escape(data.churn_label)}; y: {html.escape(data.imbalance_label)}. Lower left "
        "is better; hover a point for its parameters and seed.</p>",
    ]
    if ok.empty:
        out.append('<p class="muted">No successful run has both figures.</p>')
        return "\n".join(out)
    fig = figures.tradeoff_figure(ok, churn_label=data.churn_label, imbalance_label=data.imbalance_label)
    out.append(page.figure(fig, "Churn against imbalance, one point per run.", "tradeoff"))
    return "\n".join(out)


# -------------------------------------------------------------------------------------------- replay


def _replay_summary_table(comp: pd.DataFrame) -> str:
    rows = []
    for strategy, sub in sorted(comp.groupby("strategy"), key=lambda kv: pair_order(str(kv[0]))):
        rows.append(
            {
                "strategy": str(strategy),
                "ticks": len(sub),
                "recorded moves": float(sub["actual_moves"].sum()),
                "strategy unloads": float(sub["strategy_unloads"].sum()),
                "same bundle": float(sub["both"].sum()),
                "mean spread, recorded": float(sub["usage_spread"].mean() * 100),
                "mean spread, after strategy": float(sub["est_usage_spread"].mean() * 100),
                "max usage, recorded": float(sub["max_usage"].max() * 100),
                "max usage, after strategy": float(sub["est_max_usage"].max() * 100),
            }
        )
    return f'<div class="scroll">{table_html(pd.DataFrame(rows), text_columns=["strategy"])}</div>'


REASONS_SHOWN = 10
"""Reasons listed per replayed strategy (the most frequent first)."""


def _replay_reasons_table(comp: pd.DataFrame) -> str:
    """Why each strategy left brokers alone over the replay: its reasons summed over ticks."""
    if "reasons" not in comp:
        return '<p class="muted">This replay was written before shedlab recorded its reasons.</p>'
    rows = []
    for strategy, sub in sorted(comp.groupby("strategy"), key=lambda kv: pair_order(str(kv[0]))):
        totals = total_reasons(sub["reasons"].tolist())
        left = pd.to_numeric(sub["left_alone"], errors="coerce") if "left_alone" in sub else pd.Series([])
        for i, (reason, count) in enumerate(totals.items()):
            if i == REASONS_SHOWN:
                rest = sum(list(totals.values())[REASONS_SHOWN:])
                rows.append((str(strategy), f"{len(totals) - REASONS_SHOWN} other reasons", rest, ""))
                break
            rows.append((str(strategy), reason, count, fmt(left.mean()) if i == 0 else ""))
    if not rows:
        return '<p class="muted">No strategy left a broker alone with a recorded reason.</p>'
    frame = pd.DataFrame(rows, columns=["strategy", "reason", "times", "brokers left alone per tick"])
    return (
        '<p class="muted small">Why each strategy left brokers alone, summed over the replayed ticks '
        "(the per-tick counts are the <code>reasons</code> column of <code>comparison/</code>).</p>"
        f'<div class="scroll">{table_html(frame, text_columns=["strategy", "reason"])}</div>'
    )


def replay_section(page: Page, data: ReportData) -> str:
    replay = data.replay
    if replay is None or (replay.comparison is None and replay.load is None):
        return ""
    out = [
        page.heading(1, "Replay: recorded data against the strategies", "replay"),
        '<p class="lead">What happened in the recorded data (ownership changes between samples) next to what '
        "each strategy would have done at every tick, and the broker usage after the strategy's moves "
        "(estimated: a moved bundle takes its traffic and its share of the source's usage with it). Usage is "
        "Pulsar's weighted maximum resource usage ×100.</p>",
    ]
    frames = [f for f in (replay.comparison, replay.load) if f is not None]
    clusters = sorted({str(c) for f in frames for c in f["cluster"].unique()})
    for cluster in clusters:
        out.append(page.heading(2, f"Cluster {cluster}", f"replay-{page.anchor(cluster)}"))
        if replay.comparison is not None:
            comp = replay.comparison[replay.comparison["cluster"].astype(str) == cluster]
            out.append(_replay_summary_table(comp))
            out.append(_details("Brokers left alone, and why", _replay_reasons_table(comp), pre=False))
            out.append(
                page.figure(
                    figures.replay_activity_figure(replay, cluster, max_points=page.max_points),
                    "Cumulative recorded ownership changes (black) and each strategy's cumulative unloads "
                    "(solid); dotted: its unloads of a bundle that also moved in the data at that tick.",
                    f"replay-activity:{cluster}",
                )
            )
            out.append(
                page.figure(
                    figures.replay_spread_figure(replay, cluster, max_points=page.max_points),
                    "Max − min broker usage: recorded (black) and estimated after each strategy's moves.",
                    f"replay-spread:{cluster}",
                )
            )
        if replay.load is not None and not replay.load.empty:
            out.append(
                page.figure(
                    figures.replay_load_figure(replay, cluster, max_points=page.max_points),
                    _heatmap_note(_replay_brokers(replay, cluster), "usage")
                    + "Per-broker usage: recorded, with the recorded ownership changes (first panel), and "
                    "estimated after each strategy's moves, with its unloads (▼; hover: source → "
                    "destination)." + _abbreviations(replay.load["strategy"].astype(str).unique().tolist()),
                    f"replay-load:{cluster}",
                )
            )
    return "\n".join(out)


def _abbreviations(pairs: Sequence[str]) -> str:
    """The caption's key to the abbreviated pair names of crowded panel titles (empty if none is used)."""
    legend = abbreviation_legend(pairs) if len(pairs) > 1 else ""
    return f" {html.escape(legend)}." if legend else ""


# ---------------------------------------------------------------------------------------- all figures


def _stats_pivot(sub: pd.DataFrame) -> pd.DataFrame:
    """Metric rows × strategy (and parameter set) columns, each cell ``mean [CI]``."""
    several = "params_id" in sub and sub["params_id"].nunique() > 1
    columns: dict[str, dict[str, str]] = {}
    keys = sub[["strategy", "params_id"]].drop_duplicates() if "params_id" in sub else sub[["strategy"]]
    ordered = sorted(keys.itertuples(index=False, name=None), key=lambda k: (pair_order(str(k[0])), k[1:]))
    metrics = sorted(sub["metric"].astype(str).unique())
    for key in ordered:
        strategy = str(key[0])
        name = figures.short_pair(strategy) + (
            f" · {params_of(sub, strategy, str(key[1]))}" if several else ""
        )
        mine = sub[sub["strategy"].astype(str) == strategy]
        if several:
            mine = mine[mine["params_id"] == key[1]]
        cells = {
            str(m): fmt(r["mean"]) + _ci(r.get("ci_low"), r.get("ci_high"))
            for m, r in mine.set_index("metric").iterrows()
        }
        columns[name] = cells
    frame = pd.DataFrame({"metric": metrics})
    for name, cells in columns.items():
        frame[name] = [cells.get(m, "–") for m in metrics]
    return frame


def _runs_pivot(sub: pd.DataFrame) -> pd.DataFrame:
    """Metric rows × run columns (simulate / compare output, a sweep without evaluation): one column per
    run, named by its pair, its parameter set where the pair ran several, and its seed."""
    several = "params_id" in sub and bool((sub.groupby("strategy")["params_id"].nunique() > 1).any())
    order = sorted(
        sub.itertuples(index=False),
        key=lambda r: (
            pair_order(str(r.strategy)),
            str(getattr(r, "params_id", "")) != "default",
            str(getattr(r, "params_id", "")),
            getattr(r, "seed", 0),
        ),
    )
    numeric = [c for c in sub.columns if c not in _RUN_ID_COLUMNS and pd.api.types.is_numeric_dtype(sub[c])]
    columns: dict[str, list[Any]] = {"metric": numeric}
    for r in order:
        name = figures.short_pair(str(r.strategy))
        if several:
            name += f" · {params_of(sub, str(r.strategy), str(r.params_id))}"
        name += f" · seed {r.seed}" if hasattr(r, "seed") else ""
        columns[name] = [getattr(r, c) for c in numeric]
    return pd.DataFrame(columns)


def metrics_section(page: Page, data: ReportData) -> str:
    stats = data.metric_stats
    runs = data.runs
    if (stats is None or stats.empty) and (runs is None or runs.empty):
        return ""
    out = [page.heading(1, "All figures", "all-figures")]
    if stats is not None and not stats.empty:
        out.append(
            '<p class="muted">Every summary metric per scenario and strategy pair: mean over seeds and its '
            "95&nbsp;% confidence interval (<code>docs/metrics.md</code> defines each metric).</p>"
        )
        for scenario, sub in stats.groupby("scenario", sort=True):
            frame = _stats_pivot(sub)
            body = table_html(frame, text_columns=["metric"], html_columns=frame.columns[1:])
            out.append(
                _details(f"{scenario} ({len(frame)} metrics)", f'<div class="scroll">{body}</div>', pre=False)
            )
    elif runs is not None:
        out.append(
            '<p class="muted">Every summary metric of every run, one column per run '
            "(<code>docs/metrics.md</code> defines each metric).</p>"
        )
        for scenario, sub in runs.groupby("scenario", sort=True):
            frame = _runs_pivot(sub)
            body = table_html(frame, text_columns=["metric"])
            out.append(
                _details(f"{scenario} ({len(sub)} runs)", f'<div class="scroll">{body}</div>', pre=False)
            )
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ metadata


def metadata_section(page: Page, data: ReportData) -> str:
    out = [page.heading(1, "Run metadata", "metadata")]
    out.append(page.heading(2, "Versions (this report)", "versions", in_toc=False))
    out.append(_dl(list(environment_versions().items())))
    recorded = data.run_info.get("versions") or {}
    if recorded:
        out.append(
            page.heading(2, "Versions (when the results were produced)", "versions-recorded", in_toc=False)
        )
        out.append(_dl(list(recorded.items())))
    out.append(page.heading(2, "Inputs", "inputs", in_toc=False))
    items: list[tuple[str, Any]] = [("results directory", data.source), ("kind", data.kind)]
    for key, value in data.run_info.items():
        if key not in ("versions", "files", "configs"):
            items.append((key, value if isinstance(value, str) else json.dumps(value, default=str)))
    out.append(_dl(items))
    for title, text in (data.run_info.get("files") or {}).items():
        out.append(_details(str(title), str(text)))
    configs = data.run_info.get("configs") or {}
    if configs:
        out.append(page.heading(2, "Configurations", "configurations", in_toc=False))
        out.append('<p class="muted">Pulsar keys that differ from Pulsar\'s defaults in each run group.</p>')
        for title, conf in configs.items():
            out.append(_details(str(title), json.dumps(conf, indent=2, sort_keys=True, default=str)))
    if data.scenarios:
        out.append(page.heading(2, "Scenario files", "scenario-files", in_toc=False))
        for name, info in sorted(data.scenarios.items()):
            label = f"{name} — {info.source}" if info.source else name
            if info.digest:
                label += f" (digest {info.digest[:12]})"
            body = info.text or (
                json.dumps(info.spec, indent=2, default=str) if info.spec else "(not recorded)"
            )
            out.append(_details(label, body))
    return "\n".join(out)


SECTIONS: tuple[Callable[[Page, ReportData], str], ...] = (
    pip_section,
    goal_section,
    definitions_section,
    scenario_sections,
    tradeoff_section,
    replay_section,
    metrics_section,
    metadata_section,
)
"""The sections in page order."""
