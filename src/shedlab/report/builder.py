"""Building blocks of the page: headings with a table of contents, embedded figures, number
formatting and plain HTML tables."""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio

from shedlab.units import significant

__all__ = ["Page", "fmt", "pair_label", "table_html", "toc_html"]


@dataclass
class Page:
    """Collects the table of contents and the figures of one report."""

    max_points: int
    toc: list[tuple[int, str, str]] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    _ids: set[str] = field(default_factory=set)

    def anchor(self, text: str) -> str:
        """A unique ``id`` for ``text``."""
        base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
        candidate, k = base, 2
        while candidate in self._ids:
            candidate, k = f"{base}-{k}", k + 1
        self._ids.add(candidate)
        return candidate

    def heading(self, level: int, title: str, anchor: str | None = None, *, in_toc: bool = True) -> str:
        """``<h2>`` (level 1) or ``<h3>`` (level 2) with an id, listed in the table of contents."""
        ident = anchor or self.anchor(title)
        self._ids.add(ident)
        if in_toc:
            self.toc.append((level, title, ident))
        return f'<h{level + 1} id="{ident}">{html.escape(title)}</h{level + 1}>'

    def figure(self, fig: go.Figure, caption: str, name: str) -> str:
        """A figure box: an empty plot ``div``, the figure as JSON (drawn by the loader), a caption."""
        ident = f"fig-{len(self.figures) + 1}"
        spec = pio.to_json(fig, validate=False, pretty=False, engine="json").replace("</", "<\\/")
        self.figures.append(ident)
        return (
            f'<div class="figure" data-figure="{html.escape(name)}">'
            f'<div class="plot" id="{ident}"></div>'
            f'<script type="application/json" class="figure-data" data-target="{ident}">{spec}</script>'
            f'<div class="caption">{caption}</div></div>'
        )


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a table: 3 significant digits, thousands separators, ``–`` for missing, ``∞``."""
    return html.escape(significant(value, digits, missing="–", infinity=("∞", "−∞")))


def pair_label(strategy: str) -> str:
    """A strategy pair name that may wrap after its ``+``."""
    return "+<wbr>".join(html.escape(part) for part in strategy.split("+"))


def table_html(
    frame: pd.DataFrame, text_columns: Iterable[str] = (), html_columns: Iterable[str] = ()
) -> str:
    """A plain data table; ``html_columns`` hold ready HTML, ``text_columns`` are left-aligned text."""
    text = set(text_columns)
    raw = set(html_columns)
    head = "".join(
        f'<th class="{"text" if c in text else ""}">{html.escape(str(c))}</th>' for c in frame.columns
    )
    body = []
    for row in frame.itertuples(index=False, name=None):
        cells = []
        for column, value in zip(frame.columns, row, strict=True):
            if column in raw:
                cells.append(f'<td class="text">{value}</td>' if column in text else f"<td>{value}</td>")
            elif column in text or isinstance(value, str):
                cells.append(f'<td class="text">{html.escape(str(value))}</td>')
            else:
                cells.append(f"<td>{fmt(value)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def toc_html(toc: Sequence[tuple[int, str, str]]) -> str:
    """The table of contents: top-level sections with their subsections."""
    items: list[tuple[str, str, list[tuple[str, str]]]] = []
    for level, title, ident in toc:
        if level == 1:
            items.append((title, ident, []))
        elif items:
            items[-1][2].append((title, ident))
    out = ['<nav class="toc"><h2>Contents</h2><ol>']
    for title, ident, subs in items:
        sub = "".join(f'<li><a href="#{i}">{html.escape(t)}</a></li>' for t, i in subs)
        out.append(f'<li><a href="#{ident}">{html.escape(title)}</a>{f"<ol>{sub}</ol>" if sub else ""}</li>')
    out.append("</ol></nav>")
    return "".join(out)
