"""The HTML report from real results: simulate and compare outputs (made here with the simulator), and
a tiny sweep + evaluation on local Spark. Browser rendering is checked in test_report_browser.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pandas as pd
import pytest

from shedlab.core.local_parquet import read_local_parquet
from shedlab.core.sim import load_scenario, run_simulation
from shedlab.errors import InputError
from shedlab.report import build_report, load_results
from shedlab.report.figures import decimate
from shedlab.report.page import plotly_js

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
    assert len(re.findall(r"\* plotly\.js (?:\([a-z -]+\) )?v[0-9]", document)) == 1  # embedded once
    assert not re.search(r"<script[^>]+src=", document)
    own = document.replace(plotly_js(), "")  # plotly.js itself names CDNs
    assert len(own) < len(document) / 2
    assert not re.search(r"(src|href)=[\"']?https?:", own) and "cdn." not in own
    figs = figures_of(document)
    assert len(figs) == 2  # one scenario: broker load small multiples + imbalance/unloads
    brokers_fig, imbalance_fig = figs
    titles = [a["text"] for a in brokers_fig["layout"]["annotations"]]
    # one panel per pair, in shedlab's pair order, abbreviated side by side; the caption spells them out
    assert titles == ["Threshold + LRUWW", "Uniform + LLTMR", "AvgShedder"]
    assert "LLTMR = LeastLongTermMessageRate, LRUWW = LeastResourceUsageWithWeight." in document
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


def test_a_report_replaces_an_earlier_report_and_no_other_file(compare_dir: Path, tmp_path: Path) -> None:
    """``report --out index.html`` replaced the user's own page (any HTML page was taken for a report). A
    report is known by its generator tag, in its first KiB; anything else is refused, before the results
    are read."""
    from shedlab.core.results import REPORT_GENERATOR

    out = tmp_path / "r.html"
    first = build_report(compare_dir, out).read_bytes()
    assert REPORT_GENERATOR.encode() in first[:1024]
    assert build_report(compare_dir, out).read_bytes() == first  # its own earlier report: replaced
    (tmp_path / "empty.html").write_text("")
    assert build_report(compare_dir, tmp_path / "empty.html").read_bytes() == first
    (tmp_path / "site").mkdir()
    theirs = {"index.html": "<!DOCTYPE html><html><body>mine</body></html>\n", "site/report.html": "<html>"}
    for name, text in theirs.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(InputError, match=r"^--out: exists and is not a shedlab report"):
            build_report(tmp_path / "nope", tmp_path / name.replace("/report.html", ""))
        assert (tmp_path / name).read_text() == text


def test_a_report_is_written_through_a_symbolic_link(compare_dir: Path, tmp_path: Path) -> None:
    """The report was moved into place over the link itself: the link became a file, and the file it
    pointed to (a web server's copy) stayed as it was (until 29 Nov 2026). A loop is refused naming it."""
    served = tmp_path / "www" / "report.html"
    served.parent.mkdir()
    served.write_text("")
    link = tmp_path / "report.html"
    link.symlink_to(served)
    assert build_report(compare_dir, link) == served
    assert link.is_symlink() and "<html" in served.read_text()[:1024].lower()
    loop = tmp_path / "loop.html"
    loop.symlink_to(tmp_path / "loop2.html")
    (tmp_path / "loop2.html").symlink_to(loop)
    with pytest.raises(InputError, match=r"loop\.html: cannot resolve: a loop of symbolic links"):
        build_report(compare_dir, loop)
    assert loop.is_symlink()


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


def test_a_sweep_without_runs_is_refused_unless_there_is_more_to_report(tmp_path: Path) -> None:
    """A sweep directory with no run summary was an empty report, exit 0 (an interrupted sweep looked like
    one that had run); what else the directory holds is still reported."""
    (tmp_path / "runs" / "scenario=s" / "strategy=AvgShedder").mkdir(parents=True)
    (tmp_path / "sweep.json").write_text('{"grids": []}', encoding="utf-8")
    with pytest.raises(InputError, match="no runs to report"):
        build_report(tmp_path, tmp_path / "r.html")
    run_simulation(load_scenario(SCENARIO), strategy="AvgShedder", seed=1).write(tmp_path / "sim")
    assert load_results(tmp_path).kind == "simulate"


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


@pytest.mark.spark
def test_sweep_and_evaluation_report(sweep_root: Path, tmp_path: Path) -> None:

    data = load_results(sweep_root)
    assert data.kind == "sweep"
    assert data.pip_table is not None and data.metric_stats is not None
    pip = pd.read_csv(sweep_root / "sweep" / "evaluation" / "pip364.csv")
    assert len(data.pip_table) == len(pip)
    assert sorted(data.series) == ["over-placement-lruww", "over-unloading-90-10"]
    for runs in data.series.values():
        assert len(runs) == 5 and all(r.label == "seed 1" for r in runs)
    assert data.runs is not None and len(data.runs) == 20
    report = build_report(sweep_root, tmp_path / "sweep.html")
    document = report.read_text(encoding="utf-8")
    # the PIP-364 table: a row per pair; every measured cell has its figure, interval, rating and link
    table = document[
        document.index('id="pip-table"') : document.index("</table>", document.index('id="pip-table"'))
    ]
    assert table.count("<tr>") == 1 + 5
    for row in pip.itertuples(index=False):
        if row.problem in ("over placement", "over unloading", "slow load balancing"):
            assert f'href="#def-{cast(str, row.problem).replace(" ", "-")}"' in table
    assert table.count("badge") == len(pip)
    assert table.count("95&nbsp;% CI [") == int(pip["ci_low"].notna().sum())
    for problem in pip["problem"].unique():
        assert f'id="def-{problem.replace(" ", "-")}"' in document
    # two figures per scenario plus the churn/imbalance scatter with one point per run
    figs = figures_of(document)
    assert len(figs) == 2 * 2 + 1
    scatter = figs[-1]
    assert sum(len(t["x"]["bdata"]) > 0 for t in scatter["data"]) == len(scatter["data"])
    points = sum(_points(t["x"]) for t in scatter["data"])
    assert points == 20
    assert "grid report-test" in document and "builtin:over-unloading-90-10" in document


@pytest.mark.spark
def test_a_results_directory_reports_its_own_sweep_not_a_nested_one(sweep_root: Path, tmp_path: Path) -> None:
    # the demo's layout: OUT/sweep, OUT/evaluation and, after them, OUT/recommendation/tune (a tuning
    # sweep); "recommendation" sorts before "sweep", and a depth-first search took the nested one
    root = tmp_path / "demo"
    root.mkdir()
    (root / "sweep").symlink_to(sweep_root / "sweep", target_is_directory=True)
    decoy = root / "recommendation" / "tune"
    (decoy / "runs").mkdir(parents=True)
    (decoy / "ticks").mkdir()
    data = load_results(root)
    assert data.kind == "sweep"
    assert sorted(data.series) == ["over-placement-lruww", "over-unloading-90-10"]
    assert data.runs is not None and len(data.runs) == 20


def _points(values: Any) -> int:
    """How many values a plotly data array holds (plain list or base64 typed array)."""
    if isinstance(values, list):
        return len(values)
    import base64

    width: int = np.dtype(values["dtype"]).itemsize
    return len(base64.b64decode(values["bdata"])) // width


@pytest.mark.spark
def test_replay_report(spark: SparkSession, tmp_path: Path) -> None:
    from shedlab.core.replay import strategy_configs
    from shedlab.core.sim.recording import write_recording
    from shedlab.spark.ingest import ingest
    from shedlab.spark.replay import replay

    recorded = tmp_path / "recorded"
    result = run_simulation(
        load_scenario("scale-out"), strategy="ThresholdShedder+LeastLongTermMessageRate", seed=1, record=True
    )
    write_recording(result, recorded)
    ingest(spark, [str(recorded / "load-reports.jsonl")], str(tmp_path / "ingest"))
    configs = strategy_configs(["AvgShedder", "UniformLoadShedder+LeastLongTermMessageRate"])
    replay(spark, str(tmp_path / "ingest"), str(tmp_path / "replay"), configs)
    data = load_results(tmp_path / "replay")
    assert data.kind == "replay" and data.replay is not None
    assert data.replay.comparison is not None and set(data.replay.comparison["strategy"]) == {
        "AvgShedder",
        "UniformLoadShedder+LeastLongTermMessageRate",
    }
    report = build_report(tmp_path / "replay", tmp_path / "replay.html")
    document = report.read_text(encoding="utf-8")
    figs = figures_of(document)
    assert len(figs) == 3  # activity, spread, per-broker small multiples
    titles = [a["text"] for a in figs[2]["layout"]["annotations"] if not a["text"].startswith("▲")]
    assert titles == ["recorded", "after Uniform + LLTMR", "after AvgShedder"]
    assert "destination). LLTMR = LeastLongTermMessageRate." in document
    assert 'id="replay"' in document and "recorded data" in document


@pytest.mark.spark
def test_terminal_pip_table_fits_80_columns(sweep_root: Path) -> None:
    from rich.console import Console

    from shedlab.report.terminal import pip364_table

    pip = read_local_parquet(sweep_root / "sweep" / "evaluation" / "pip364")
    console = Console(width=80, record=True, color_system=None)
    console.print(pip364_table(pip))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for label in ("Threshold", "+ LLTMR", "+ LRUWW", "Uniform +", "Overload +", "AvgShedder"):
        assert label in text
    assert text.count("95 %") == 1 and "LeastResourceUsageWithWeight" in text  # the legend


@pytest.mark.spark
def test_demo_command_end_to_end(tmp_path: Path) -> None:
    """``shedlab demo`` on a small grid: sweep, evaluate and report in one command, table and path printed;
    run again into its own output (the README's promise), it reuses the runs and replaces its report."""
    grid = tmp_path / "grid.yaml"
    grid.write_text(
        "name: demo-test\nscenarios: [over-unloading-90-10]\nstrategies: all\nseeds: [1]\n", encoding="utf-8"
    )
    out = tmp_path / "demo"
    args = ["demo", "--grid", str(grid), "--seeds", "2", "--out", str(out), "--no-recommend"]
    env = {**os.environ, "COLUMNS": "100", "PYSPARK_PYTHON": sys.executable}
    command = [sys.executable, "-m", "shedlab", *args]
    run = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "10 runs" in run.stderr and "demo-test" in run.stderr  # 1 scenario × 5 pairs × 2 seeds
    assert "PIP-364, measured" in run.stdout and "AvgShedder" in run.stdout and "over" in run.stdout
    assert f"Report: {out / 'report.html'}" in run.stdout.replace("\n", "")
    assert (out / "sweep" / "sweep.json").is_file() and (out / "evaluation" / "pip364.csv").is_file()
    data = load_results(out)
    assert data.kind == "sweep" and data.pip_table is not None and data.runs is not None
    assert len(data.runs) == 10 and sorted(data.runs["seed"].unique()) == [1, 2]
    again = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "10 runs were already in" in again.stderr.replace("\n", " ")
    assert f"Report: {out / 'report.html'}" in again.stdout.replace("\n", "")


@pytest.mark.spark
def test_report_on_a_replay_in_which_nothing_moved(spark: SparkSession, tmp_path: Path) -> None:
    """Two ticks, no shedding, no ownership change: empty decisions/ and ownership_changes/ are written
    with their columns; and a replay written without them (older shedlab: no file at all) reads too."""
    import shutil

    from shedlab.core.replay import strategy_configs
    from shedlab.core.sim.recording import write_recording
    from shedlab.spark.ingest import ingest
    from shedlab.spark.replay import replay

    result = run_simulation(load_scenario("over-unloading-90-10"), strategy="AvgShedder", seed=3, record=True)
    write_recording(result, tmp_path / "rec")
    lines = (tmp_path / "rec" / "load-reports.jsonl").read_text().splitlines()
    first = sorted({json.loads(line)["timestamp"] for line in lines})[:2]
    quiet = tmp_path / "quiet.jsonl"
    quiet.write_text("".join(f"{x}\n" for x in lines if json.loads(x)["timestamp"] in first))
    ingest(spark, [str(quiet)], str(tmp_path / "ingest"))
    replay(spark, str(tmp_path / "ingest"), str(tmp_path / "replay"), strategy_configs(["AvgShedder"]))
    for table in ("decisions", "ownership_changes"):
        frame = read_local_parquet(tmp_path / "replay" / table)
        assert frame.empty and "tick_ms" in frame.columns
    build_report(tmp_path / "replay", tmp_path / "quiet.html")
    for table in ("decisions", "ownership_changes"):  # the older form: a table directory without a file
        shutil.rmtree(tmp_path / "replay" / table)
        (tmp_path / "replay" / table).mkdir()
        (tmp_path / "replay" / table / "_SUCCESS").write_bytes(b"")
    data = load_results(tmp_path / "replay")
    assert data.replay is not None and data.replay.decisions is None and data.replay.ownership is None
    report = build_report(tmp_path / "replay", tmp_path / "old.html")
    assert 'id="replay"' in report.read_text(encoding="utf-8")


def test_the_same_results_give_a_byte_identical_report(
    compare_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report is a function of its results: rendering them again later (another minute, another day)
    gives the same bytes. The page used to stamp the wall clock ('generated 2026-11-26 23:41 UTC')."""
    import datetime as dt

    import shedlab.report.page as page

    first = build_report(compare_dir, tmp_path / "a.html").read_bytes()

    class Later(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Later:
            return cls(2031, 1, 2, 3, 4, tzinfo=tz)

    monkeypatch.setattr(dt, "datetime", Later)
    monkeypatch.setattr(page, "dt", dt, raising=False)
    second = build_report(compare_dir, tmp_path / "b.html").read_bytes()
    assert first == second


def test_goal_section_from_the_evaluation(sweep_root: Path, tmp_path: Path) -> None:
    """The report shows the goal's cells that ``shedlab evaluate`` wrote (``goal.csv``), one row each,
    with the tally; an evaluation without cells (no CapacityAwareShedder swept) has no such section."""
    import shutil

    from shedlab.core.goal import goal_cells, scenario_classes, tally_sentence

    plain = build_report(sweep_root, tmp_path / "plain.html").read_text(encoding="utf-8")
    assert 'id="goal"' not in plain
    evaluation = tmp_path / "evaluation"
    shutil.copytree(sweep_root / "sweep" / "evaluation", evaluation)
    manifest = json.loads((sweep_root / "sweep" / "sweep.json").read_text(encoding="utf-8"))
    texts = {n: e["text"] for g in manifest["grids"] for n, e in g["scenarios"].items()}
    stats = pd.read_csv(evaluation / "metric_stats.csv")
    cells = goal_cells(stats, scenario_classes(texts), "AvgShedder")
    assert len(cells) == 3 + 1  # over-unloading-90-10: three cells; over-placement-lruww: one
    cells.to_csv(evaluation / "goal.csv", index=False)
    data = load_results(evaluation)
    assert data.goal is not None and len(data.goal) == len(cells)
    document = build_report(evaluation, tmp_path / "goal.html").read_text(encoding="utf-8")
    start = document.index('id="goal"')
    section = document[start : document.index("</table>", start)]
    assert section.count("<tr>") == 1 + len(cells)
    assert tally_sentence(cells) in section
    assert section.count('class="verdict verdict-') == len(cells)
    assert '<a href="#goal">Against the goal</a>' in document  # "How to read this" points to it
    assert '<a href="#goal">' not in plain
