"""The HTML report from real results: simulate and compare outputs (made here with the simulator), and
a tiny sweep + evaluation on local Spark. Browser rendering is checked in test_report_browser.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from plotly.offline import get_plotlyjs

from shedlab.errors import InputError
from shedlab.report import build_report, load_results
from shedlab.report.figures import decimate
from shedlab.sim import load_scenario, run_simulation

SCENARIO = "over-unloading-90-10"
PAIRS = (
    "ThresholdShedder+LeastResourceUsageWithWeight",
    "UniformLoadShedder+LeastLongTermMessageRate",
    "AvgShedder",
)


def figures_of(document: str) -> list[dict[str, Any]]:
    """The plotly figure specifications embedded in a report."""
    blocks = re.findall(
        r'<script type="application/json" class="figure-data" data-target="[^"]+">(.*?)</script>',
        document,
        re.S,
    )
    return [json.loads(b) for b in blocks]


@pytest.fixture(scope="module")
def compare_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compare-style output: one simulate output per strategy pair below one directory."""
    out = tmp_path_factory.mktemp("compare")
    scenario = load_scenario(SCENARIO)
    for pair in PAIRS:
        run_simulation(scenario, strategy=pair, seed=3).write(out / pair.replace("+", "_"))
    return out


def test_compare_report_has_every_part(compare_dir: Path, tmp_path: Path) -> None:
    path = build_report(compare_dir, tmp_path / "report.html")
    document = path.read_text(encoding="utf-8")
    # self-contained: plotly.js exactly once, inline; nothing fetched from the network
    assert document.count("plotly.js v") == 1
    assert not re.search(r"<script[^>]+src=", document)
    own = document.replace(
        get_plotlyjs().replace("</script", "<\\/script"), ""
    )  # plotly.js itself names CDNs
    assert len(own) < len(document) / 2
    assert not re.search(r"(src|href)=[\"']?https?:", own) and "cdn." not in own
    figs = figures_of(document)
    assert len(figs) == 2  # one scenario: broker load small multiples + imbalance/unloads
    brokers_fig, imbalance_fig = figs
    titles = [a["text"] for a in brokers_fig["layout"]["annotations"]]
    assert titles == list(PAIRS)  # one panel per pair, in shedlab's pair order
    unload_traces = [t for t in brokers_fig["data"] if t.get("legendgroup") == "unload"]
    assert len(unload_traces) == len(PAIRS)
    custom = unload_traces[0]["customdata"][0]
    assert custom[0].startswith("broker-0001") and custom[1].startswith("broker-0002")  # source → destination
    assert "%{customdata[0]} → %{customdata[1]}" in unload_traces[0]["hovertemplate"]
    # the scale-out at 5 minutes is a vertical line in every panel
    lines = [s for s in brokers_fig["layout"]["shapes"] if s["type"] == "line"]
    assert len(lines) == len(PAIRS) and all(s["x0"] == pytest.approx(5.0) for s in lines)
    # imbalance (solid, left) and cumulative unloads (dashed, right) per pair on one chart
    assert len(imbalance_fig["data"]) == 2 * len(PAIRS)
    assert {t.get("yaxis", "y") for t in imbalance_fig["data"]} == {"y", "y2"}
    # the metadata section names the versions and seeds
    for needle in ("PySpark", "Java", "Python", "shedlab", "seeds"):
        assert needle in document
    assert 'id="metadata"' in document and 'href="#metadata"' in document


def test_report_counts_match_the_runs(compare_dir: Path) -> None:
    data = load_results(compare_dir)
    assert data.kind == "compare"
    runs = data.series[SCENARIO]
    assert [r.strategy for r in runs] == list(PAIRS)
    for r in runs:
        summary = json.loads((compare_dir / r.strategy.replace("+", "_") / "summary.json").read_text())
        assert len(r.decisions) == summary["unloads"]
        assert r.brokers["broker"].nunique() == summary["brokers_final"]
    assert data.runs is not None and len(data.runs) == len(PAIRS)


def test_simulate_output_and_cli(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    run_simulation(load_scenario(SCENARIO), strategy="AvgShedder", seed=1).write(out)
    report = tmp_path / "r.html"
    run = subprocess.run(
        [sys.executable, "-m", "shedlab", "report", str(out), "--out", str(report)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "report:" in run.stdout and report.is_file()
    assert load_results(out).kind == "simulate"
    assert len(figures_of(report.read_text(encoding="utf-8"))) == 2


def test_missing_or_empty_results_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        build_report(tmp_path / "nope", tmp_path / "r.html")
    with pytest.raises(InputError, match="no shedlab results"):
        build_report(tmp_path, tmp_path / "r.html")
    run = subprocess.run(
        [sys.executable, "-m", "shedlab", "report", str(tmp_path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr and "not found" in run.stderr


def test_decimate_keeps_extremes_and_bounds_points() -> None:
    x = np.arange(10_000, dtype=float)
    y = np.sin(x / 50.0)
    y[4321] = 7.0  # a one-sample spike must survive
    xs, ys = decimate(x, y, 500)
    assert len(xs) <= 500
    assert ys.max() == 7.0 and ys.min() == pytest.approx(y.min())
    assert np.all(np.diff(xs) > 0)
    short_x, _ = decimate(x[:100], y[:100], 500)
    assert len(short_x) == 100
