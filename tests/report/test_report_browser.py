"""The report in a real browser: headless Chromium opens the file from disk (network lookups disabled),
every plot must have rendered traces, the PIP-364 table must have one row per strategy pair, and the
page must have logged no JavaScript error. A screenshot is saved to test-artifacts/report.png.

Chromium is Debian's ``chromium`` package (scripts/ensure-chromium.sh installs it); no Python driver is
needed: ``--dump-dom`` after the page's scripts ran (virtual time) gives the rendered DOM, and the
report's own error collector writes every JavaScript error into ``<pre id="js-errors">``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from shedlab.core.sim import load_scenario, run_simulation
from shedlab.report import build_report
from shedlab.strategies import STRATEGY_PAIRS

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
VOID = frozenset(
    {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
)

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (run scripts/ensure-chromium.sh as root)"
)


def chromium(url: str, *args: str, profile: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND",  # the report must not need the network
        f"--user-data-dir={profile}",
        "--virtual-time-budget=20000",
        *args,
        url,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@dataclass
class Figure:
    name: str
    plotly_divs: int = 0
    svgs: int = 0
    traces: int = 0
    drawn_paths: int = 0


@dataclass
class DomSummary(HTMLParser):
    """What the rendered DOM holds: figures with their drawn traces, PIP table rows, error/status text."""

    figures: list[Figure] = field(default_factory=list)
    pip_rows: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    attrs_of: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._depth = 0
        self._figure_depth: int | None = None
        self._pip_depth: int | None = None
        self._in_pip_body = False
        self._row: list[str] | None = None
        self._capture: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = set(a.get("class", "").split())
        if tag not in VOID:
            self._depth += 1
        if "data-figure" in a:
            self.figures.append(Figure(a["data-figure"]))
            self._figure_depth = self._depth
        elif self._figure_depth is not None:
            fig = self.figures[-1]
            fig.plotly_divs += "js-plotly-plot" in classes
            fig.svgs += tag == "svg" and "main-svg" in classes
            fig.traces += tag == "g" and "trace" in classes
            drawn = tag == "path" and (
                ("js-line" in classes and len(a.get("d", "")) > 10) or "point" in classes
            )
            fig.drawn_paths += drawn
        if a.get("id") == "pip-table":
            self._pip_depth = self._depth
        if self._pip_depth is not None and tag == "tbody":
            self._in_pip_body = True
        if self._in_pip_body and tag == "tr":
            self._row = []
        if self._row is not None and tag == "th":
            self._capture = "pip-row"
        if a.get("id") in ("js-errors", "render-status"):
            self._capture = a["id"]
            self.attrs_of[a["id"]] = a
            self.texts[a["id"]] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if self._figure_depth is not None and self._depth == self._figure_depth:
            self._figure_depth = None
        if self._pip_depth is not None and self._depth == self._pip_depth:
            self._pip_depth = None
            self._in_pip_body = False
        if tag == "tr" and self._row is not None:
            self.pip_rows.append("".join(self._row).strip())
            self._row = None
        if tag in ("th", "pre"):
            self._capture = None
        self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._capture == "pip-row" and self._row is not None:
            self._row.append(data)
        elif self._capture in ("js-errors", "render-status"):
            self.texts[self._capture] += data


def check_in_browser(report: Path, tmp_path: Path, screenshot: Path | None) -> DomSummary:
    url = report.resolve().as_uri()
    dump = chromium(url, "--dump-dom", "--window-size=1400,3000", profile=tmp_path / "profile-dom")
    assert dump.returncode == 0, dump.stderr[-2000:]
    dom = DomSummary()
    dom.feed(dump.stdout)
    dom.close()
    if screenshot is not None:
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        shot = chromium(
            url, f"--screenshot={screenshot}", "--window-size=1400,3000", profile=tmp_path / "profile-shot"
        )
        assert shot.returncode == 0 and screenshot.is_file() and screenshot.stat().st_size > 50_000, (
            shot.stderr[-2000:]
        )
    return dom


def assert_rendered(dom: DomSummary, expected_figures: int) -> None:
    assert "js-errors" in dom.texts, "the error collector element is missing from the rendered page"
    assert dom.texts["js-errors"].strip() == "", f"JavaScript errors: {dom.texts['js-errors']}"
    assert dom.attrs_of["js-errors"].get("data-count") == "0"
    status = json.loads(dom.texts["render-status"])
    assert status == {"expected": expected_figures, "drawn": expected_figures, "failed": [], "done": True}
    assert len(dom.figures) == expected_figures
    for fig in dom.figures:
        assert fig.plotly_divs == 1 and fig.svgs >= 1, f"{fig.name}: no plotly plot rendered"
        assert fig.traces >= 2 and fig.drawn_paths >= 2, f"{fig.name}: blank plot ({fig})"


@needs_chromium
def test_compare_report_renders_in_chromium(tmp_path: Path) -> None:
    results = tmp_path / "compare"
    scenario = load_scenario("over-unloading-90-10")
    for pair in STRATEGY_PAIRS:
        run_simulation(scenario, strategy=pair, seed=2).write(results / pair.replace("+", "_"))
    report = build_report(results, tmp_path / "report.html")
    dom = check_in_browser(report, tmp_path, None)
    assert_rendered(dom, expected_figures=2)
    assert dom.pip_rows == []  # no evaluation, no PIP table


@needs_chromium
@pytest.mark.spark
def test_sweep_report_renders_in_chromium(sweep_root: Path, tmp_path: Path) -> None:
    """The full report (PIP-364 table, every scenario, the trade-off scatter) in Chromium; screenshot."""
    report = build_report(sweep_root, tmp_path / "report.html")
    dom = check_in_browser(report, tmp_path, ARTIFACTS / "report.png")
    assert_rendered(dom, expected_figures=2 * 2 + 1)  # per scenario: brokers + imbalance; one scatter
    assert len(dom.pip_rows) == len(STRATEGY_PAIRS)
    assert sorted(row.replace("\u200b", "") for row in dom.pip_rows) == sorted(STRATEGY_PAIRS)
