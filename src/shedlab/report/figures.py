"""The report's plots, built with plotly (its JavaScript is embedded once by the page).

Every figure uses a small explicit template (plotly's default one would be copied into each figure),
float32 arrays (plotly serialises them as compact base64) and at most ``max_points`` points per trace
(min/max decimation, so spikes survive). Colours are fixed per strategy pair and per broker, so the
same pair or broker has the same colour in every plot of a report.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from numpy.typing import NDArray
from plotly.subplots import make_subplots

from shedlab.report.model import ReplayData, RunSeries
from shedlab.report.pip364 import pair_order
from shedlab.strategies import registry
from shedlab.strategies.registry import PAIR_COLOURS
from shedlab.units import fixed

__all__ = [
    "HEATMAP_ABOVE",
    "PAIR_COLOURS",
    "LoadPanel",
    "broker_load_figure",
    "decimate",
    "heatmap_multiples",
    "imbalance_figure",
    "pair_colour",
    "pair_order",
    "replay_activity_figure",
    "replay_load_figure",
    "replay_spread_figure",
    "short_pair",
    "small_multiples",
    "step_grid",
    "time_axis",
    "tradeoff_figure",
]

_BROKER_COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#ad494a",
    "#637939",
    "#8c6d31",
    "#7b4173",
    "#3182bd",
    "#e6550d",
    "#31a354",
    "#756bb1",
    "#636363",
    "#6baed6",
    "#fd8d3c",
    "#74c476",
    "#9e9ac8",
)
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
_GRID = "#e9ecef"
_EVENT_COLOUR = "#6c757d"
_UNLOAD_COLOUR = "#212529"


def _template() -> go.layout.Template:
    axis = {
        "showgrid": True,
        "gridcolor": _GRID,
        "zeroline": False,
        "linecolor": "#adb5bd",
        "ticks": "outside",
        "tickcolor": "#adb5bd",
        "automargin": True,
    }
    return go.layout.Template(
        layout={
            "font": {"family": FONT, "size": 12, "color": "#212529"},
            "paper_bgcolor": "white",
            "plot_bgcolor": "white",
            "xaxis": axis,
            "yaxis": axis,
            "hoverlabel": {"font": {"family": FONT}},
            "legend": {"bgcolor": "rgba(255,255,255,0.8)"},
            "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        }
    )


TEMPLATE = _template()


def pair_colour(strategy: str, known: Sequence[str] = ()) -> str:
    """The fixed colour of a strategy pair among ``known`` (see ``registry.pair_colour``)."""
    return registry.pair_colour(strategy, known)


def short_pair(strategy: str) -> str:
    """``ThresholdShedder+LeastLongTermMessageRate`` → ``Threshold + LLTMR`` (for crowded titles)."""
    return registry.short_pair_name(strategy, " + ")


def _broker_colours(brokers: Iterable[str]) -> dict[str, str]:
    return {b: _BROKER_COLOURS[i % len(_BROKER_COLOURS)] for i, b in enumerate(sorted(set(brokers)))}


def time_axis(max_seconds: float) -> tuple[float, str]:
    """Divisor and unit for a time axis: minutes up to six hours, hours beyond."""
    return (3600.0, "hours") if max_seconds > 6 * 3600 else (60.0, "minutes")


def decimate(x: NDArray[Any], y: NDArray[Any], max_points: int) -> tuple[NDArray[Any], NDArray[Any]]:
    """At most ``max_points`` points of a series sorted by x: per bucket its min and max (in time order)."""
    n = len(x)
    if n <= max_points or max_points < 4:
        return x, y
    buckets = max_points // 2
    edges = np.linspace(0, n, buckets + 1).astype(int)
    keep: list[int] = []
    yy = np.where(np.isfinite(y), y, np.nan)
    for lo, hi in itertools.pairwise(edges):
        if hi <= lo:
            continue
        segment = yy[lo:hi]
        if np.all(np.isnan(segment)):
            keep.append(lo)
            continue
        i_min, i_max = lo + int(np.nanargmin(segment)), lo + int(np.nanargmax(segment))
        keep.extend(sorted({i_min, i_max}))
    idx = np.asarray(keep, dtype=int)
    return x[idx], y[idx]


def _f32(values: Any) -> NDArray[np.float32]:
    return np.asarray(values, dtype=np.float32)


def _grid(n: int) -> tuple[int, int]:
    cols = 1 if n <= 1 else 2
    return math.ceil(n / cols), cols


MAX_BROKER_LEGEND = 20
"""Above this many brokers a figure has no per-broker legend entries (hover names the broker)."""
HEATMAP_ABOVE = 12
"""Above this many brokers, per-broker lines become a broker × time heatmap (a dozen colours is about
what a reader can tell apart; at 200 brokers the lines are a solid band and the legend covers a panel)."""


@dataclass
class LoadPanel:
    """One small multiple: per-broker lines and the moves (unloads) to mark on them.

    ``lines`` maps a broker to its (x, y) arrays sorted by x; ``moves`` has ``x``, ``source``,
    ``destination`` and ``bundle``; ``events`` has ``x`` and ``text`` (vertical markers)."""

    title: str
    lines: dict[str, tuple[NDArray[Any], NDArray[Any]]]
    moves: pd.DataFrame
    events: pd.DataFrame


def _lines(
    frame: pd.DataFrame, x: str, y: str, x_scale: float = 1.0, y_scale: float = 1.0
) -> dict[str, tuple[NDArray[Any], NDArray[Any]]]:
    out: dict[str, tuple[NDArray[Any], NDArray[Any]]] = {}
    for broker, group in frame.sort_values([x]).groupby("broker", sort=True):
        out[str(broker)] = (
            group[x].to_numpy(dtype=float) / x_scale,
            group[y].to_numpy(dtype=float) * y_scale,
        )
    return out


def small_multiples(
    panels: Sequence[LoadPanel],
    *,
    x_title: str,
    y_title: str,
    hover_x: str,
    to_x: Callable[[NDArray[Any]], Any] = lambda x: _f32(x),
    move_name: str = "unload (source → destination)",
    max_points: int = 2000,
    point_budget: int = 60_000,
    y_floor: float = 100.0,
) -> go.Figure:
    """Per-broker lines, one panel per entry of ``panels``, on shared axes; moves as ▼ on the source's
    line (hover: source → destination, bundle); events as dotted vertical lines and ◆ (hover: detail).
    Above :data:`HEATMAP_ABOVE` brokers, lines are unreadable: one broker × time heatmap per panel instead
    (:func:`heatmap_multiples`)."""
    if len({b for p in panels for b in p.lines}) > HEATMAP_ABOVE:
        return heatmap_multiples(
            panels,
            x_title=x_title,
            y_title=y_title,
            hover_x=hover_x,
            to_x=to_x,
            move_name=move_name,
            max_points=max_points,
            cell_budget=point_budget * 2,
            y_floor=y_floor,
        )
    rows, cols = _grid(len(panels))
    fig = make_subplots(
        rows=rows,
        cols=cols,
        shared_xaxes="all",
        shared_yaxes="all",
        subplot_titles=[p.title for p in panels],
        vertical_spacing=min(0.12, 0.32 / max(rows, 1)),
        horizontal_spacing=0.06,
    )
    brokers = sorted({b for p in panels for b in p.lines})
    legend_brokers = len(brokers) <= MAX_BROKER_LEGEND
    n_traces = max(1, sum(len(p.lines) for p in panels))
    style = _LineStyle(
        colours=_broker_colours(brokers),
        legend_brokers=legend_brokers,
        per_trace=max(100, min(max_points, point_budget // n_traces)),
        max_points=max_points,
        to_x=to_x,
        hover_x=hover_x,
        y_title=y_title,
        move_name=move_name,
    )
    y_top, panel_peaks = shared_scale([list(p.lines.values()) for p in panels], y_floor)
    shown: set[str] = set()
    for k, panel in enumerate(panels):
        cell = (k // cols + 1, k % cols + 1)
        _broker_lines(fig, panel, cell, style, shown)
        _move_markers(fig, panel, cell, style, shown)
        _event_markers(fig, panel, cell, style, shown, y_top)
    fig.update_yaxes(range=[0, y_top])
    _label_panels(fig, panel_peaks, y_top, cols, x_title, y_title)
    legend = (
        {"orientation": "v", "x": 1.01, "xanchor": "left", "y": 1, "yanchor": "top", "font": {"size": 11}}
        if legend_brokers
        else {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": 11}}
    )
    fig.update_layout(
        template=TEMPLATE,
        height=260 * rows + 110,
        hovermode="closest",
        legend=legend,
        margin={"t": 70 if not legend_brokers else 40, "b": 50, "r": 10},
    )
    fig.update_annotations(font_size=12)
    return fig


@dataclass(frozen=True)
class _LineStyle:
    """What every panel of one :func:`small_multiples` figure draws with."""

    colours: dict[str, str]
    legend_brokers: bool
    per_trace: int
    max_points: int
    to_x: Callable[[NDArray[Any]], Any]
    hover_x: str
    y_title: str
    move_name: str


def _broker_lines(
    fig: go.Figure, panel: LoadPanel, cell: tuple[int, int], style: _LineStyle, shown: set[str]
) -> None:
    """One decimated line per broker; each broker in the legend once (the first panel it appears in)."""
    for broker, (x, y) in panel.lines.items():
        xs, ys = decimate(x, y, style.per_trace)
        fig.add_trace(
            go.Scatter(
                x=style.to_x(xs),
                y=_f32(np.round(ys, 2)),
                mode="lines",
                name=broker,
                legendgroup=broker,
                showlegend=style.legend_brokers and broker not in shown,
                line={"width": 1.3, "color": style.colours[broker]},
                hovertemplate=f"{broker}<br>{style.hover_x}<br>{style.y_title} %{{y:.1f}}<extra></extra>",
            ),
            row=cell[0],
            col=cell[1],
        )
        shown.add(broker)


def _thinned(moves: pd.DataFrame, max_points: int) -> pd.DataFrame:
    """At most ``max_points`` moves, evenly spaced (first and last kept)."""
    if len(moves) <= max_points:
        return moves
    return moves.iloc[np.linspace(0, len(moves) - 1, max_points).astype(int)]


def _move_markers(
    fig: go.Figure, panel: LoadPanel, cell: tuple[int, int], style: _LineStyle, shown: set[str]
) -> None:
    """▼ at each move's time on its source broker's line (hover: source → destination, bundle)."""
    if panel.moves.empty:
        return
    moves = _thinned(panel.moves, style.max_points)
    mx = moves["x"].to_numpy(dtype=float)
    my = np.array(
        [_value_at(panel.lines.get(str(src)), t) for src, t in zip(moves["source"], mx, strict=True)]
    )
    custom = np.stack(
        [
            moves["source"].fillna("(none)").astype(str).to_numpy(),
            moves["destination"].fillna("(none)").astype(str).to_numpy(),
            moves["bundle"].astype(str).to_numpy(),
        ],
        axis=1,
    )
    fig.add_trace(
        go.Scatter(
            x=style.to_x(mx),
            y=_f32(np.round(my, 2)),
            mode="markers",
            name=style.move_name,
            legendgroup="unload",
            showlegend="unload" not in shown,
            marker={"symbol": "triangle-down", "size": 7, "color": _UNLOAD_COLOUR, "line": {"width": 0}},
            customdata=custom,
            hovertemplate="%{customdata[0]} → %{customdata[1]}<br>bundle %{customdata[2]}<br>"
            f"{style.hover_x}<extra>unload</extra>",
        ),
        row=cell[0],
        col=cell[1],
    )
    shown.add("unload")


def _event_lines(
    fig: go.Figure, events: pd.DataFrame, to_x: Callable[[NDArray[Any]], Any], colour: str, row: int, col: int
) -> None:
    """A dotted vertical line at each distinct event time of a panel."""
    times = sorted(set(events["x"].to_numpy(dtype=float).tolist())) if not events.empty else []
    for t in times:
        fig.add_vline(
            x=to_x(np.array([t]))[0], line={"color": colour, "dash": "dot", "width": 1}, row=row, col=col
        )


def _event_markers(
    fig: go.Figure, panel: LoadPanel, cell: tuple[int, int], style: _LineStyle, shown: set[str], y_top: float
) -> None:
    """◆ near the top of the panel at each scenario event (hover: its detail), with its dotted line."""
    if panel.events.empty:
        return
    ex = panel.events["x"].to_numpy(dtype=float)
    fig.add_trace(
        go.Scatter(
            x=style.to_x(ex),
            y=_f32(np.full(len(ex), y_top * 0.97)),
            mode="markers",
            name="scenario event",
            legendgroup="event",
            showlegend="event" not in shown,
            text=panel.events["text"].astype(str).tolist(),
            marker={"symbol": "diamond", "size": 8, "color": _EVENT_COLOUR},
            hovertemplate=f"%{{text}}<br>{style.hover_x}<extra>event</extra>",
        ),
        row=cell[0],
        col=cell[1],
    )
    shown.add("event")
    _event_lines(fig, panel.events, style.to_x, _EVENT_COLOUR, *cell)


def _label_panels(
    fig: go.Figure, panel_peaks: Sequence[float], y_top: float, cols: int, x_title: str, y_title: str
) -> None:
    """Axis titles on the outer panels; a note on each panel whose values reach above the shared scale."""
    n = len(panel_peaks)
    for k in range(n):
        row, col = k // cols + 1, k % cols + 1
        if panel_peaks[k] > y_top:
            fig.add_annotation(
                text=f"▲ off the shared scale, up to {fixed(panel_peaks[k], 0, grouping=True)}",
                xref="x domain",
                yref="y domain",
                x=0.01,
                y=0.99,
                xanchor="left",
                yanchor="top",
                showarrow=False,
                font={"size": 11, "color": "#9b1c1c"},
                bgcolor="rgba(255,255,255,0.85)",
                row=row,
                col=col,
            )
        if col == 1:
            fig.update_yaxes(title_text=y_title, row=row, col=col)
        if k + cols >= n:
            fig.update_xaxes(title_text=x_title, showticklabels=True, row=row, col=col)


def shared_scale(
    panels: Sequence[Sequence[tuple[NDArray[Any], NDArray[Any]]]], floor: float
) -> tuple[float, list[float]]:
    """The top of a y-axis shared by small multiples, and each panel's peak.

    Normally the highest value of all panels (at least ``floor``). When a few values dwarf everything
    else (the peak is over 1.5 × the 99.5th percentile of all values), the scale stops just above that
    percentile so the other panels stay readable; panels reaching above it are flagged by the caller.
    """
    peaks = []
    chunks = []
    for lines in panels:
        finite = [y[np.isfinite(y)] for _, y in lines]
        values = np.concatenate(finite) if finite else np.zeros(0)
        chunks.append(values)
        peaks.append(float(values.max()) if values.size else 0.0)
    everything = np.concatenate(chunks) if chunks else np.zeros(0)
    if everything.size == 0:
        return floor * 1.05, peaks
    peak = float(everything.max())
    typical = max(floor, float(np.percentile(everything, 99.5)))
    if peak > 1.5 * typical:
        return typical * 1.15, peaks
    return max(floor, peak) * 1.05, peaks


def _sim_events(events: pd.DataFrame, scale: float) -> pd.DataFrame:
    if events.empty:
        return pd.DataFrame({"x": [], "text": []})
    text = [
        f"{k}: {d}" if d else str(k) for k, d in zip(events["kind"], events["detail"].fillna(""), strict=True)
    ]
    return pd.DataFrame({"x": events["time_s"].to_numpy(dtype=float) / scale, "text": text})


def step_grid(
    lines: dict[str, tuple[NDArray[Any], NDArray[Any]]], brokers: Sequence[str], columns: NDArray[Any]
) -> NDArray[np.float32]:
    """Brokers × ``columns`` matrix of each broker's last value at or before each column time; NaN
    before a broker's first sample and after its last one (a broker that left, or had not joined)."""
    z = np.full((len(brokers), len(columns)), np.nan, dtype=np.float32)
    for i, broker in enumerate(brokers):
        x, y = lines.get(broker, (np.zeros(0), np.zeros(0)))
        if len(x) == 0:
            continue
        at = np.searchsorted(x, columns, side="right") - 1
        alive = (at >= 0) & (columns <= x[-1])
        z[i, alive] = y[at[alive]]
    return z


def _heat_columns(
    panels: Sequence[LoadPanel], n_rows: int, cell_budget: int, max_points: int
) -> NDArray[Any]:
    """The time columns shared by every panel: all sample times, thinned evenly to fit the budget."""
    times = [x for p in panels for x, _ in p.lines.values()]
    every = np.unique(np.concatenate(times)) if times else np.zeros(0)
    width = max(20, min(max_points, cell_budget // max(n_rows, 1)))
    if every.size > width:
        every = every[np.linspace(0, every.size - 1, width).round().astype(int)]
    return every


def heatmap_multiples(
    panels: Sequence[LoadPanel],
    *,
    x_title: str,
    y_title: str,
    hover_x: str,
    to_x: Callable[[NDArray[Any]], Any] = lambda x: _f32(x),
    move_name: str = "unload (source → destination)",
    max_points: int = 2000,
    cell_budget: int = 120_000,
    y_floor: float = 100.0,
) -> go.Figure:
    """One broker × time heatmap per panel on a shared colour scale (brokers sorted by name, so a row
    is the same broker in every panel); moves as ▼ at (time, source broker), events as dotted lines."""
    n = len(panels)
    brokers = sorted({b for p in panels for b in p.lines})
    columns = _heat_columns(panels, len(brokers) * n, cell_budget, max_points)
    # the colour scale follows the data (a floor of 100 would paint an idle cluster one colour)
    top, _ = shared_scale([list(p.lines.values()) for p in panels], min(y_floor, 1.0))
    fig = make_subplots(
        rows=n, cols=1, shared_xaxes=True, subplot_titles=[p.title for p in panels], vertical_spacing=0.06
    )
    x_shown = to_x(columns)
    for k, panel in enumerate(panels):
        fig.add_trace(
            go.Heatmap(
                x=x_shown,
                y=brokers,
                z=np.round(step_grid(panel.lines, brokers, columns), 1),
                zmin=0.0,
                zmax=top,
                colorscale="Viridis",
                coloraxis="coloraxis",
                hovertemplate=f"%{{y}}<br>{hover_x}<br>{y_title} %{{z:.1f}}<extra></extra>",
            ),
            row=k + 1,
            col=1,
        )
        _heat_marks(fig, panel, k + 1, to_x, hover_x, move_name, max_points, shown=k > 0)
        fig.update_yaxes(title_text="broker", showticklabels=len(brokers) <= 40, row=k + 1, col=1)
    fig.update_xaxes(title_text=x_title, row=n, col=1)
    fig.update_layout(
        template=TEMPLATE,
        height=max(220, min(700, 6 * len(brokers))) * n + 120,
        coloraxis=_colour_axis(top, y_title),
        legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom", "font": {"size": 11}},
        margin={"t": 70, "b": 50, "r": 10},
        hovermode="closest",
    )
    fig.update_annotations(font_size=12)
    return fig


def _colour_axis(top: float, title: str) -> dict[str, Any]:
    return {"colorscale": "Viridis", "cmin": 0.0, "cmax": top, "colorbar": {"title": {"text": title}}}


def _heat_marks(
    fig: go.Figure,
    panel: LoadPanel,
    row: int,
    to_x: Callable[[NDArray[Any]], Any],
    hover_x: str,
    move_name: str,
    max_points: int,
    *,
    shown: bool,
) -> None:
    """A heatmap panel's moves (▼ on the source broker's row) and events (dotted vertical lines)."""
    moves = _thinned(panel.moves, max_points)
    if not moves.empty:
        custom = np.stack(
            [
                moves["destination"].fillna("(none)").astype(str).to_numpy(),
                moves["bundle"].astype(str).to_numpy(),
            ],
            axis=1,
        )
        fig.add_trace(
            go.Scatter(
                x=to_x(moves["x"].to_numpy(dtype=float)),
                y=moves["source"].fillna("(none)").astype(str).tolist(),
                mode="markers",
                name=move_name,
                legendgroup="unload",
                showlegend=not shown,
                marker={"symbol": "triangle-down", "size": 7, "color": "#ffffff", "line": {"width": 1}},
                customdata=custom,
                hovertemplate="%{y} → %{customdata[0]}<br>bundle %{customdata[1]}<br>"
                f"{hover_x}<extra>unload</extra>",
            ),
            row=row,
            col=1,
        )
    _event_lines(fig, panel.events, to_x, "#ffffff", row, 1)


def broker_load_figure(runs: Sequence[RunSeries], *, max_points: int = 2000) -> go.Figure:
    """Per-broker score over time, one panel per strategy pair on a shared scale; unloads and events
    marked."""
    t_max = max((float(r.brokers["time_s"].max()) for r in runs if not r.brokers.empty), default=0.0)
    scale, unit = time_axis(t_max)
    panels = []
    for run in runs:
        moves = run.decisions.assign(x=run.decisions["time_s"].astype(float) / scale)
        # side by side, two full pair names overlap: abbreviated (the caption spells them out)
        name = short_pair(run.strategy) if len(runs) > 1 else run.strategy
        panels.append(
            LoadPanel(
                title=f"{name}{f' ({run.label})' if run.label else ''}",
                lines=_lines(run.brokers, "time_s", "score", x_scale=scale),
                moves=moves.sort_values("x"),
                events=_sim_events(run.events, scale),
            )
        )
    return small_multiples(
        panels,
        x_title=f"time ({unit})",
        y_title="score",
        hover_x=f"t = %{{x:.1f}} {unit}",
        max_points=max_points,
    )


def _value_at(series: tuple[NDArray[Any], NDArray[Any]] | None, t: float) -> float:
    """The series' value at the last sample at or before ``t`` (the first sample if none)."""
    if series is None or len(series[0]) == 0:
        return float("nan")
    times, values = series
    i = int(np.searchsorted(times, t, side="right")) - 1
    return float(values[max(i, 0)])


def imbalance_figure(runs: Sequence[RunSeries], *, max_points: int = 2000) -> go.Figure:
    """Imbalance (left axis, solid) and cumulative unloads (right axis, dashed) per strategy pair."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    t_max = max((float(r.cluster["time_s"].max()) for r in runs if not r.cluster.empty), default=0.0)
    scale, unit = time_axis(t_max)
    known = [r.strategy for r in runs]
    label = runs[0].imbalance_label if runs else "imbalance"
    for run in runs:
        colour = pair_colour(run.strategy, known)
        cl = run.cluster.sort_values("time_s")
        t = cl["time_s"].to_numpy(dtype=float)
        xs, ys = decimate(t / scale, cl["imbalance"].to_numpy(dtype=float), max_points)
        fig.add_trace(
            go.Scatter(
                x=_f32(xs),
                y=_f32(np.round(ys, 2)),
                mode="lines",
                name=run.strategy,
                legendgroup=run.strategy,
                line={"color": colour, "width": 1.6},
                hovertemplate=f"{run.strategy}<br>t = %{{x:.1f}} {unit}<br>imbalance %{{y:.1f}}"
                "<extra></extra>",
            ),
            secondary_y=False,
        )
        if "unloads" in cl:
            cum = np.cumsum(cl["unloads"].to_numpy(dtype=float))
        else:
            times = np.sort(run.decisions["time_s"].to_numpy(dtype=float))
            cum = np.searchsorted(times, t, side="right").astype(float)
        xc, yc = _step_decimate(t / scale, cum, max_points)
        fig.add_trace(
            go.Scatter(
                x=_f32(xc),
                y=_f32(yc),
                mode="lines",
                name=f"{short_pair(run.strategy)}: cumulative unloads",
                legendgroup=run.strategy,
                showlegend=False,
                line={"color": colour, "width": 1.4, "dash": "dash", "shape": "hv"},
                hovertemplate=f"{run.strategy}<br>t = %{{x:.1f}} {unit}<br>%{{y:.0f}} unloads so far"
                "<extra></extra>",
            ),
            secondary_y=True,
        )
    events = next((r.events for r in runs if not r.events.empty), pd.DataFrame())
    if not events.empty:
        for t_ev in sorted(set(events["time_s"].astype(float))):
            fig.add_vline(x=t_ev / scale, line={"color": _EVENT_COLOUR, "dash": "dot", "width": 1})
    fig.update_xaxes(title_text=f"time ({unit})")
    fig.update_yaxes(title_text=f"{label} — solid", secondary_y=False, rangemode="tozero")
    fig.update_yaxes(
        title_text="cumulative unloads — dashed",
        secondary_y=True,
        rangemode="tozero",
        showgrid=False,
        tickmode="auto",
        tickformat=",.0f",
    )
    fig.update_layout(
        template=TEMPLATE,
        height=420,
        hovermode="x unified",
        legend=_legend_below(-0.22),
        margin={"t": 20},
    )
    return fig


def _step_decimate(x: NDArray[Any], y: NDArray[Any], max_points: int) -> tuple[NDArray[Any], NDArray[Any]]:
    """A non-decreasing step series reduced to its change points (and capped at ``max_points``)."""
    if len(x) == 0:
        return x, y
    change = np.ones(len(y), dtype=bool)
    change[1:] = y[1:] != y[:-1]
    change[-1] = True
    xs, ys = x[change], y[change]
    if len(xs) > max_points:
        idx = np.unique(np.linspace(0, len(xs) - 1, max_points).astype(int))
        xs, ys = xs[idx], ys[idx]
    return xs, ys


def tradeoff_figure(runs: pd.DataFrame, *, churn_label: str, imbalance_label: str) -> go.Figure:
    """Churn against imbalance, one point per run, coloured by strategy pair, one panel per scenario."""
    scenarios = sorted(runs["scenario"].astype(str).unique())
    n = len(scenarios)
    cols = 1 if n == 1 else (2 if n <= 4 else 3)
    rows = math.ceil(n / cols)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=scenarios,
        vertical_spacing=min(0.12, 0.35 / max(rows, 1)),
        horizontal_spacing=0.07,
    )
    strategies = sorted(runs["strategy"].astype(str).unique(), key=pair_order)
    for k, scenario in enumerate(scenarios):
        row, col = k // cols + 1, k % cols + 1
        sub = runs[runs["scenario"].astype(str) == scenario]
        for strategy in strategies:
            pts = sub[sub["strategy"].astype(str) == strategy]
            if pts.empty:
                continue
            params = (
                pts["params_label"].astype(str).to_numpy() if "params_label" in pts else np.full(len(pts), "")
            )
            seeds = pts["seed"].astype(str).to_numpy() if "seed" in pts else np.full(len(pts), "")
            fig.add_trace(
                go.Scatter(
                    x=_f32(pts["churn"]),
                    y=_f32(pts["imbalance"]),
                    mode="markers",
                    name=strategy,
                    legendgroup=strategy,
                    showlegend=k == 0,
                    marker={
                        "color": pair_colour(strategy, strategies),
                        "size": 8,
                        "opacity": 0.8,
                        "line": {"width": 0.5, "color": "white"},
                    },
                    customdata=np.stack([params, seeds], axis=1),
                    hovertemplate=f"{strategy}<br>%{{customdata[0]}}<br>seed %{{customdata[1]}}"
                    f"<br>{churn_label}: %{{x:.3g}}<br>{imbalance_label}: %{{y:.3g}}<extra></extra>",
                ),
                row=row,
                col=col,
            )
        fig.update_xaxes(
            title_text=churn_label if k + cols >= n else None, range=_padded(sub["churn"]), row=row, col=col
        )
        fig.update_yaxes(
            title_text=imbalance_label if col == 1 else None,
            range=_padded(sub["imbalance"]),
            row=row,
            col=col,
        )
    fig.update_layout(
        template=TEMPLATE,
        height=300 * rows + 140,
        hovermode="closest",
        legend=_legend_below(-0.06 if rows > 1 else -0.25),
        margin={"t": 40},
    )
    fig.update_annotations(font_size=12)
    return fig


def _padded(values: pd.Series) -> list[float]:
    """An axis range from 0 (or the minimum, if negative) to the maximum, with room for the markers."""
    v = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    lo, hi = (min(0.0, float(v.min())), float(v.max())) if v.size else (0.0, 1.0)
    pad = (hi - lo) * 0.06 or 0.5
    return [lo - pad, hi + pad]


# ------------------------------------------------------------------------------------------- replay


def replay_activity_figure(replay: ReplayData, cluster: str, *, max_points: int = 2000) -> go.Figure:
    """Cumulative ownership changes in the recorded data next to each strategy's cumulative unloads."""
    assert replay.comparison is not None
    comp = replay.comparison[replay.comparison["cluster"].astype(str) == cluster]
    fig = go.Figure()
    strategies = sorted(comp["strategy"].astype(str).unique(), key=pair_order)
    actual = comp.drop_duplicates("tick_ms").sort_values("tick_ms")
    if not actual.empty:
        xs, ys = _step_decimate(
            actual["tick_ms"].to_numpy(), np.cumsum(actual["actual_moves"].to_numpy(dtype=float)), max_points
        )
        fig.add_trace(
            go.Scatter(
                x=_ms_to_datetime(xs),
                y=_f32(ys),
                mode="lines",
                name="recorded ownership changes",
                line={"color": "#212529", "width": 2.2, "shape": "hv"},
                hovertemplate="%{x}<br>%{y:.0f} recorded moves so far<extra></extra>",
            )
        )
    for strategy in strategies:
        sub = comp[comp["strategy"].astype(str) == strategy].sort_values("tick_ms")
        colour = pair_colour(strategy, strategies)
        xs, ys = _step_decimate(
            sub["tick_ms"].to_numpy(), np.cumsum(sub["strategy_unloads"].to_numpy(dtype=float)), max_points
        )
        fig.add_trace(
            go.Scatter(
                x=_ms_to_datetime(xs),
                y=_f32(ys),
                mode="lines",
                name=f"{strategy}: unloads",
                legendgroup=strategy,
                line={"color": colour, "width": 1.6, "shape": "hv"},
                hovertemplate=f"{strategy}<br>%{{x}}<br>%{{y:.0f}} unloads so far<extra></extra>",
            )
        )
        xb, yb = _step_decimate(
            sub["tick_ms"].to_numpy(), np.cumsum(sub["both"].to_numpy(dtype=float)), max_points
        )
        fig.add_trace(
            go.Scatter(
                x=_ms_to_datetime(xb),
                y=_f32(yb),
                mode="lines",
                name=f"{short_pair(strategy)}: same bundle moved",
                legendgroup=strategy,
                line={"color": colour, "width": 1.2, "dash": "dot", "shape": "hv"},
                hovertemplate=f"{strategy}<br>%{{x}}<br>%{{y:.0f}} also moved in the data<extra></extra>",
            )
        )
    return _over_utc_time(fig, y_title="cumulative count", height=420, hovermode="closest")


def replay_spread_figure(replay: ReplayData, cluster: str, *, max_points: int = 2000) -> go.Figure:
    """Recorded max − min broker usage next to the estimate after each strategy's moves."""
    assert replay.comparison is not None
    comp = replay.comparison[replay.comparison["cluster"].astype(str) == cluster]
    strategies = sorted(comp["strategy"].astype(str).unique(), key=pair_order)
    fig = go.Figure()
    actual = comp.drop_duplicates("tick_ms").sort_values("tick_ms")
    xs, ys = decimate(
        actual["tick_ms"].to_numpy(), actual["usage_spread"].to_numpy(dtype=float) * 100, max_points
    )
    fig.add_trace(
        go.Scatter(
            x=_ms_to_datetime(xs),
            y=_f32(np.round(ys, 2)),
            mode="lines",
            name="recorded",
            line={"color": "#212529", "width": 2},
            hovertemplate="%{x}<br>recorded spread %{y:.1f}<extra></extra>",
        )
    )
    for strategy in strategies:
        sub = comp[comp["strategy"].astype(str) == strategy].sort_values("tick_ms")
        xs, ys = decimate(
            sub["tick_ms"].to_numpy(), sub["est_usage_spread"].to_numpy(dtype=float) * 100, max_points
        )
        fig.add_trace(
            go.Scatter(
                x=_ms_to_datetime(xs),
                y=_f32(np.round(ys, 2)),
                mode="lines",
                name=f"after {strategy}",
                line={"color": pair_colour(strategy, strategies), "width": 1.4},
                hovertemplate=f"{strategy}<br>%{{x}}<br>estimated spread %{{y:.1f}}<extra></extra>",
            )
        )
    return _over_utc_time(fig, y_title="max − min usage (U·100)", height=400, hovermode="x unified")


def _legend_below(y: float) -> dict[str, Any]:
    """A horizontal legend under the plot area, left-aligned (``y`` below 0: under the x-axis title)."""
    return {"orientation": "h", "y": y, "yanchor": "top", "x": 0}


def _over_utc_time(fig: go.Figure, *, y_title: str, height: int, hovermode: str) -> go.Figure:
    """The replay figures' common frame: wall-clock x-axis, a y-axis from zero, the legend below."""
    fig.update_xaxes(title_text="time (UTC)")
    fig.update_yaxes(title_text=y_title, rangemode="tozero")
    fig.update_layout(
        template=TEMPLATE, height=height, hovermode=hovermode, legend=_legend_below(-0.2), margin={"t": 20}
    )
    return fig


def replay_load_figure(replay: ReplayData, cluster: str, *, max_points: int = 2000) -> go.Figure:
    """Per-broker usage: recorded (with the recorded ownership changes) and, per strategy, the estimate
    after its moves (with its unloads), one panel each on a shared scale."""
    assert replay.load is not None
    load = replay.load[replay.load["cluster"].astype(str) == cluster]
    strategies = sorted(load["strategy"].astype(str).unique(), key=pair_order)
    no_events = pd.DataFrame({"x": [], "text": []})
    recorded = load.drop_duplicates(["tick_ms", "broker"])
    moves = pd.DataFrame(columns=["x", "source", "destination", "bundle"])
    if replay.ownership is not None:
        own = replay.ownership[replay.ownership["cluster"].astype(str) == cluster]
        moves = own.rename(columns={"from_broker": "source", "to_broker": "destination"}).assign(
            x=own["tick_ms"].astype(float)
        )
    panels = [
        LoadPanel(
            "recorded", _lines(recorded, "tick_ms", "usage", y_scale=100.0), moves.sort_values("x"), no_events
        )
    ]
    for strategy in strategies:
        est = load[load["strategy"].astype(str) == strategy]
        dec = pd.DataFrame(columns=["x", "source", "destination", "bundle"])
        if replay.decisions is not None:
            mine = replay.decisions[
                (replay.decisions["cluster"].astype(str) == cluster)
                & (replay.decisions["strategy"].astype(str) == strategy)
            ]
            dec = mine.assign(x=mine["tick_ms"].astype(float))
        panels.append(
            LoadPanel(
                f"after {short_pair(strategy)}",
                _lines(est, "tick_ms", "est_usage", y_scale=100.0),
                dec.sort_values("x"),
                no_events,
            )
        )
    return small_multiples(
        panels,
        x_title="time (UTC)",
        y_title="usage",
        hover_x="%{x}",
        to_x=_ms_to_datetime,
        move_name="move (source → destination)",
        max_points=max_points,
        y_floor=0.0,
    )


def _ms_to_datetime(ms: NDArray[Any]) -> Any:
    return pd.to_datetime(np.asarray(ms, dtype="int64"), unit="ms", utc=True)
