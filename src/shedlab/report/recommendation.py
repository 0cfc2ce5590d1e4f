"""The report's Recommendation section: what ``shedlab tune`` recommends, against the recorded
configuration, on its Pareto front, with the ``broker.conf`` fragment to paste.

It reads ``tune.json`` (and, when the tune ran on a twin, the twin's ``fit-report.json``) from the
results directory; a directory without them gets no section. Parameter sets are shown by their
``key=value`` differences from the recorded configuration, never by hashes; intervals are the
predicted 95 % intervals, cut at 0 for counts and spreads.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from shedlab.core.results import TUNE_FILE
from shedlab.errors import InputError, parse_json_text, read_user_text
from shedlab.report.builder import Page, fmt

__all__ = ["recommendation_section"]

_FIGURES = (
    ("objective", "objective (lower is better)"),
    ("imbalance", "imbalance: mean max − min score + overloaded min/h"),
    ("unloads_per_day", "unloads per day"),
    ("traffic_moved_per_day", "throughput unloaded per day (MiB/s)"),
)


_NUMBERS = tuple(f"{fig}{end}" for fig, _ in _FIGURES for end in ("", "_low", "_high"))
"""The figure fields of a candidate row (``recommended``, ``recorded``, ``candidates[i]``)."""


def _read(path: Path) -> dict[str, Any] | None:
    """``path``'s JSON object, None when the file does not exist; a file that is not one is refused."""
    if not path.is_file():
        return None
    doc = parse_json_text(read_user_text(path), str(path))
    if not isinstance(doc, dict):
        raise InputError("expected a JSON object", source=str(path))
    return doc


def _bad(source: Path, field: str, expected: str, value: object) -> InputError:
    return InputError(f"expected {expected}", source=str(source), field=field, value=value)


def _numbers(obj: Mapping[str, object], keys: tuple[str, ...], source: Path, field: str) -> None:
    """``obj``'s ``keys``, each a number or null (absent counts as null)."""
    for key in keys:
        value = obj.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise _bad(source, f"{field}.{key}", "a number or null", value)


def _object(value: object, source: Path, field: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise _bad(source, field, "an object", value)
    return value


def _check_row(value: object, source: Path, field: str) -> Mapping[str, object]:
    """A candidate row as ``shedlab tune`` writes it: an object whose figures are numbers or null."""
    row = _object(value, source, field)
    _numbers(row, _NUMBERS, source, field)
    seeds = row.get("seeds", 1)
    if isinstance(seeds, bool) or not isinstance(seeds, int):
        raise _bad(source, f"{field}.seeds", "an integer", seeds)
    return row


def _check_tune(doc: dict[str, Any], source: Path) -> dict[str, Any]:
    """The fields of ``tune.json`` the section reads, with the types ``shedlab tune`` writes: a file edited
    or written by something else is refused at the first field that differs, not with a traceback."""
    for key in ("recommended", "recorded"):
        if doc.get(key) is not None:
            _check_row(doc[key], source, key)
    candidates = doc.get("candidates") or []
    if not isinstance(candidates, list):
        raise _bad(source, "candidates", "a list", candidates)
    for i, value in enumerate(candidates):
        row = _check_row(value, source, f"candidates[{i}]")
        for key in ("imbalance", "unloads_per_day"):  # plotted: a candidate needs both, and a label
            if row.get(key) is None:
                raise _bad(source, f"candidates[{i}].{key}", "a number", None)
        if not isinstance(row.get("label"), str):
            raise _bad(source, f"candidates[{i}].label", "a string", row.get("label"))
    improvement = _object(doc.get("improvement") or {}, source, "improvement")
    for fig, _ in _FIGURES:
        if improvement.get(fig) is not None:
            entry = _object(improvement[fig], source, f"improvement.{fig}")
            _numbers(entry, ("mean", "low", "high"), source, f"improvement.{fig}")
    for key, kind, expected in (("notes", list, "a list"), ("fragment", str, "a string")):
        if doc.get(key) is not None and not isinstance(doc[key], kind):
            raise _bad(source, key, expected, doc[key])
    return doc


def _check_fit(doc: dict[str, Any], source: Path) -> dict[str, Any]:
    """``fit-report.json`` as ``shedlab twin`` writes it: ``checks``, objects with numbers or null."""
    checks = doc.get("checks") or []
    if not isinstance(checks, list):
        raise _bad(source, "checks", "a list", checks)
    for i, value in enumerate(checks):
        check = _object(value, source, f"checks[{i}]")
        _numbers(check, ("recorded", "twin", "distance", "tolerance"), source, f"checks[{i}]")
        if not isinstance(check.get("figure"), str):
            raise _bad(source, f"checks[{i}].figure", "a string", check.get("figure"))
    return doc


def _iv(row: dict[str, Any], fig: str) -> str:
    low, high = row.get(f"{fig}_low"), row.get(f"{fig}_high")
    if low is None or high is None:
        return fmt(row.get(fig))
    return f"{fmt(row.get(fig))} [{fmt(low)}, {fmt(high)}]"


def _pareto(page: Page, doc: dict[str, Any]) -> str:
    rows = doc.get("candidates") or []
    if not rows:
        return ""
    fig = go.Figure()
    for on_front, name, colour in ((False, "other candidates", "#b0b0b0"), (True, "Pareto front", "#1f77b4")):
        sub = [r for r in rows if bool(r.get("pareto")) == on_front]
        fig.add_trace(
            go.Scatter(
                x=[r["imbalance"] for r in sub],
                y=[r["unloads_per_day"] for r in sub],
                mode="markers",
                name=name,
                marker={"color": colour, "size": [6 + 2 * int(r.get("seeds", 1)) for r in sub]},
                text=[f"{r['label']}<br>{r.get('seeds', 1)} seeds" for r in sub],
                hovertemplate="%{text}<br>imbalance %{x:.3g}<br>unloads/day %{y:.3g}<extra></extra>",
            )
        )
    for key, name, symbol in (
        ("recorded", "recorded configuration", "x"),
        ("recommended", "recommended", "star"),
    ):
        r = doc.get(key) or {}
        if r.get("imbalance") is not None and r.get("unloads_per_day") is not None:
            fig.add_trace(
                go.Scatter(
                    x=[r["imbalance"]],
                    y=[r["unloads_per_day"]],
                    mode="markers",
                    name=name,
                    marker={
                        "symbol": symbol,
                        "size": 16,
                        "color": "#d62728" if key == "recorded" else "#2ca02c",
                    },
                    error_x=_error(r, "imbalance"),
                    error_y=_error(r, "unloads_per_day"),
                    text=[r.get("label", name)],
                    hovertemplate="%{text}<extra></extra>",
                )
            )
    fig.update_layout(
        xaxis_title="imbalance (score points; lower is better)",
        yaxis_title="unloads per day (lower is better)",
        height=420,
        margin={"l": 60, "r": 20, "t": 20, "b": 50},
        legend={"orientation": "h", "y": -0.2},
    )
    caption = (
        "Every candidate's mean over its seeds (marker size: seeds). Successive halving gave the promising "
        "ones more seeds; the front is drawn among those run on the last rung's seeds. The bars are 95 % "
        "intervals, cut at 0."
    )
    return page.figure(fig, caption, "tune-pareto")


def _error(row: dict[str, Any], fig: str) -> dict[str, Any]:
    mean, low, high = row.get(fig), row.get(f"{fig}_low"), row.get(f"{fig}_high")
    if mean is None or low is None or high is None:
        return {"visible": False}
    return {"type": "data", "symmetric": False, "array": [high - mean], "arrayminus": [mean - low]}


def _recorded_cell(check: dict[str, Any]) -> str:
    """The recorded figure; none for the usage distribution, a distance between the recording's and the
    twin's quantiles (its 'recorded' is a placeholder 0; fit-report.md and the terminal show '—')."""
    return "—" if check.get("figure") == "broker usage distribution" else fmt(check.get("recorded"))


def _fit_warning(root: Path) -> str:
    raw = _read(root / "fit-report.json")
    if raw is None:
        return ""
    fit = _check_fit(raw, root / "fit-report.json")
    checks = fit.get("checks") or []
    bad = [c for c in checks if not c.get("ok")]
    rows = "".join(
        f"<tr><td>{html.escape(str(c['figure']))}</td><td>{_recorded_cell(c)}</td>"
        f"<td>{fmt(c.get('twin'))}</td><td>{fmt(c.get('distance'))}</td><td>≤ {fmt(c.get('tolerance'))}</td>"
        f"<td>{'yes' if c.get('ok') else '<b>NO</b>'}</td></tr>"
        for c in checks
    )
    head = (
        f'<div class="note"><b>Warning: the twin does not fit the recording</b> on {len(bad)} figure(s) '
        f"({html.escape(', '.join(str(c['figure']) for c in bad))}); the recommendation may not hold.</div>"
        if bad
        else "<p>The twin fits the recording within every stated tolerance.</p>"
    )
    return (
        head + "<table><thead><tr><th>figure</th><th>recorded</th><th>twin</th><th>distance</th>"
        f"<th>tolerance</th><th>fits</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def recommendation_section(page: Page, source: Path) -> str:
    """The section's HTML ('' when ``source`` holds no ``tune.json``)."""
    root = Path(source)
    raw = _read(root / TUNE_FILE) if root.is_dir() else None
    if raw is None:
        return ""
    doc = _check_tune(raw, root / TUNE_FILE)
    rec, recorded = doc.get("recommended") or {}, doc.get("recorded") or {}
    parts = [page.heading(1, "Recommendation", "recommendation")]
    if doc.get("keep_recorded"):
        parts.append("<p><b>No candidate beat the recorded configuration: keep it.</b></p>")
    else:
        parts.append(f"<p><b>Recommended:</b> {html.escape(str(rec.get('label')))}</p>")
    parts.append(
        f"<p>Objective <code>{html.escape(str(doc.get('objective')))}</code> = "
        f"<code>{html.escape(str(doc.get('objective_expr')))}</code>, {doc.get('seeds')} seeds per finalist; "
        f"{doc.get('runs_spent')} simulated runs by successive halving instead of "
        f"{doc.get('full_grid_runs')}.</p>"
    )
    for note in doc.get("notes") or []:
        parts.append(f'<div class="note">{html.escape(str(note))}</div>')
    improvement = doc.get("improvement") or {}
    rows = []
    for fig, label in _FIGURES:
        imp = improvement.get(fig) or {}
        change = fmt(imp.get("mean"))
        if imp.get("low") is not None:
            change += f" [{fmt(imp.get('low'))}, {fmt(imp.get('high'))}]"
        rows.append(
            f"<tr><td>{html.escape(label)}</td><td>{_iv(recorded, fig)}</td><td>{_iv(rec, fig)}</td>"
            f"<td>{change}</td></tr>"
        )
    parts.append(
        "<table><thead><tr><th>figure</th><th>recorded configuration</th><th>recommended</th>"
        "<th>change (paired by seed, 95 % CI)</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
    )
    parts.append(_pareto(page, doc))
    parts.append(page.heading(2, "broker.conf fragment", "recommendation-conf"))
    parts.append(f"<pre>{html.escape(str(doc.get('fragment', '')))}</pre>")
    fit = _fit_warning(root)
    if fit:
        parts.append(page.heading(2, "Fit of the twin", "recommendation-fit") + fit)
    return "\n".join(parts)
