"""The report page: one self-contained HTML file (CSS and plotly.js inline, no network), a function of
the results it shows only (no wall-clock time: the same results give byte-identical pages).

Figures are stored as JSON in ``<script type="application/json">`` blocks and drawn one after another
by a small loader once plotly.js is parsed (see :mod:`shedlab.report.assets` for the loader and the
JavaScript error collector a headless browser test reads).
"""

from __future__ import annotations

import functools
import gzip
import html
import re
from importlib import resources

from shedlab.core.results import REPORT_GENERATOR
from shedlab.report.assets import CSS, ERROR_COLLECTOR, LOADER
from shedlab.report.builder import Page, toc_html
from shedlab.report.model import ReportData
from shedlab.report.recommendation import recommendation_section
from shedlab.report.sections import SECTIONS, intro

__all__ = ["plotly_js", "plotly_js_version", "render_page"]

_KINDS = {
    "sweep": "sweep and evaluation",
    "simulate": "simulation",
    "compare": "comparison",
    "replay": "replay",
}


_VENDORED = "plotly-cartesian.min.js.gz"
"""Plotly's official *cartesian* partial bundle (scatter, bar, heatmap, …), 1.5 MB instead of the full
bundle's 4.8 MB, so that a one-run report stays under 2 MB while still opening offline. Refreshed by
``scripts/vendor-plotly.sh`` at the plotly.js version of the installed plotly package."""


def _version_of(js: str) -> str:
    match = re.search(r"plotly\.js(?: \([a-z -]+\))? v([0-9][^\s*]*)", js[:400])
    return match.group(1) if match else "(unknown version)"


@functools.cache
def plotly_js() -> str:
    """The plotly.js to inline, safe inside a ``<script>``: the vendored cartesian bundle when its version
    is the installed plotly package's (the figures' JSON is that package's), else the package's full one."""
    from plotly.offline import get_plotlyjs

    full: str = get_plotlyjs()
    vendored = resources.files("shedlab.report").joinpath("vendor", _VENDORED)
    js = full
    if vendored.is_file():
        small = gzip.decompress(vendored.read_bytes()).decode("utf-8")
        if _version_of(small) == _version_of(full):
            js = small
    return js.replace("</script", "<\\/script")


def plotly_js_version() -> str:
    return _version_of(plotly_js())


def render_page(data: ReportData, *, max_points: int = 2000) -> str:
    """The complete HTML document for ``data``."""
    import shedlab

    page = Page(max_points=max_points)
    body = [page.heading(1, "How to read this", "how-to-read") + intro(data)]
    body.extend(f'<div class="note">{html.escape(note)}</div>' for note in data.notes)
    recommendation = recommendation_section(page, data.source)  # a `shedlab tune` directory only
    if recommendation:
        body.append(f"<section>{recommendation}</section>")
    for section in SECTIONS:
        chunk = section(page, data)
        if chunk:
            body.append(f"<section>{chunk}</section>")
    # No wall-clock time on the page: the same results give the same bytes (a report is compared,
    # diffed and archived like the results it shows; their own times are in the run metadata).
    subtitle = (
        f"{html.escape(_KINDS.get(data.kind, data.kind))} results from "
        f"<code>{html.escape(str(data.source))}</code> · shedlab {shedlab.__version__}"
    )
    scripts = []
    if page.figures:
        scripts = [f'<script type="text/javascript">{plotly_js()}</script>', f"<script>{LOADER}</script>"]
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            REPORT_GENERATOR,  # how report --out knows a file it may replace
            f"<title>{html.escape(data.title)}</title>",
            f"<style>{CSS}</style>",
            f"<script>{ERROR_COLLECTOR}</script>",
            "</head><body>",
            f'<header class="top"><h1>{html.escape(data.title)}</h1><div '
            f'class="sub">{subtitle}</div></header>',
            '<div class="layout">',
            toc_html(page.toc),
            "<main>",
            *body,
            f"<footer>Made by <code>shedlab report</code>. Self-contained: plotly.js {plotly_js_version()} "
            "is embedded; the file needs no network.</footer>",
            "</main></div>",
            '<pre id="js-errors" data-count="0"></pre><pre id="render-status"></pre>',
            *scripts,
            "</body></html>",
        ]
    )
