"""How the report shows things: parameter sets by key=value, heatmaps past a dozen brokers, the
vendored plotly.js bundle and the size it buys, ratings withheld below three runs (no Spark here)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console

from shedlab.core.evaluation import TOO_FEW_RUNS
from shedlab.core.grid import params_label
from shedlab.core.sim import load_scenario, run_simulation
from shedlab.report import build_report
from shedlab.report.builder import Page
from shedlab.report.figures import HEATMAP_ABOVE, LoadPanel, small_multiples, step_grid
from shedlab.report.page import plotly_js, plotly_js_version
from shedlab.report.pip364 import params_of, problem_slug
from shedlab.report.terminal import pip364_table

NO_MOVES = pd.DataFrame({"x": [], "source": [], "destination": [], "bundle": []})
NO_EVENTS = pd.DataFrame({"x": [], "text": []})


def test_params_label_shows_key_value_differences_never_a_hash() -> None:
    text = '{"loadBalancerAvgShedderHitCountLowThreshold": 4, "maxUnloadPercentage": 0.5}'
    assert params_label(text) == "AvgShedderHitCountLowThreshold=4, maxUnloadPercentage=0.5"
    assert (
        params_label({"loadBalancerBrokerThresholdShedderPercentage": 5})
        == "BrokerThresholdShedderPercentage=5"
    )
    assert params_label("{}") == "default parameters" and params_label(None) == "default parameters"


def test_step_grid_holds_each_value_until_the_next_sample_and_is_empty_outside_a_broker_life() -> None:
    lines = {
        "a": (np.array([0.0, 60.0, 120.0]), np.array([10.0, 20.0, 30.0])),
        "b": (np.array([60.0, 90.0]), np.array([5.0, 7.0])),  # joins at 60, leaves after 90
    }
    z = step_grid(lines, ["a", "b", "c"], np.array([0.0, 30.0, 60.0, 90.0, 120.0]))
    assert z[0].tolist() == [10.0, 10.0, 20.0, 20.0, 30.0]
    assert np.isnan(z[1, 0]) and np.isnan(z[1, 1]) and z[1, 2:4].tolist() == [5.0, 7.0] and np.isnan(z[1, 4])
    assert np.isnan(z[2]).all()  # a broker without samples is an empty row


def _panels(n_brokers: int) -> list[LoadPanel]:
    t = np.arange(0.0, 600.0, 60.0)
    lines = {f"broker-{i:03d}": (t, np.full(t.size, float(i))) for i in range(n_brokers)}
    moves = pd.DataFrame(
        {"x": [120.0], "source": ["broker-001"], "destination": ["broker-000"], "bundle": ["b"]}
    )
    return [LoadPanel("A", lines, moves, NO_EVENTS), LoadPanel("B", lines, NO_MOVES, NO_EVENTS)]


def test_a_dozen_brokers_are_lines_and_more_become_a_heatmap() -> None:
    lines = small_multiples(_panels(HEATMAP_ABOVE), x_title="t", y_title="score", hover_x="")
    assert {trace.type for trace in lines.data} == {"scatter"}
    heat = small_multiples(_panels(HEATMAP_ABOVE + 1), x_title="t", y_title="score", hover_x="")
    maps = [trace for trace in heat.data if trace.type == "heatmap"]
    assert len(maps) == 2  # one per panel
    assert list(maps[0].y) == [f"broker-{i:03d}" for i in range(HEATMAP_ABOVE + 1)]
    z = np.asarray(maps[0].z, dtype=float)
    assert z.shape == (HEATMAP_ABOVE + 1, 10) and z[5].tolist() == [5.0] * 10
    moves = [trace for trace in heat.data if trace.type == "scatter"]
    assert list(moves[0].y) == ["broker-001"]  # the unload sits on its source broker's row
    assert heat.layout.coloraxis.cmin == 0.0 and heat.layout.coloraxis.cmax >= 12.0


def test_the_heatmap_thins_columns_to_its_cell_budget() -> None:
    t = np.arange(0.0, 6000.0, 1.0)
    lines = {f"b{i:02d}": (t, np.sin(t + i)) for i in range(40)}
    fig = small_multiples(
        [LoadPanel("A", lines, NO_MOVES, NO_EVENTS)], x_title="t", y_title="s", hover_x="", point_budget=2000
    )
    z = np.asarray(fig.data[0].z, dtype=float)
    assert z.shape == (40, 100)  # 4000 cells / 40 brokers


def test_the_embedded_plotly_is_the_cartesian_bundle_of_the_installed_version() -> None:
    import plotly.offline

    js = plotly_js()
    full = plotly.offline.get_plotlyjs()
    installed = re.search(r"plotly\.js v([0-9.]+)", full[:400])
    assert installed is not None and plotly_js_version() == installed.group(1)
    assert "(cartesian - minified)" in js[:200] and len(js) < len(full) / 2
    assert "</script" not in js


def test_a_one_run_report_is_under_two_megabytes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_simulation(load_scenario("homogeneous-gap"), strategy="AvgShedder", seed=1).write(out)
    report = build_report(out, tmp_path / "r.html")
    assert report.stat().st_size < 2_000_000


def test_terminal_table_withholds_the_rating_and_names_parameters() -> None:
    rows = []
    for params in ("{}", '{"loadBalancerAvgShedderHitCountLowThreshold": 4}'):
        rows.append(
            {"strategy": "AvgShedder", "params_id": "x" + str(len(params)), "params_json": params,
             "problem": "load jitter", "n_runs": 2, "value": 16.0, "ci_low": 0.0, "ci_high": 155.8,
             "rating": TOO_FEW_RUNS}
        )  # fmt: skip
    table = pd.DataFrame(rows)
    console = Console(width=100, record=True)
    console.print(pip364_table(table))
    text = console.export_text()
    assert "AvgShedderHitCountLowThreshold=4" in text and "default parameters" in text
    assert "x2" not in text and "x49" not in text  # no ids
    assert text.count("too few runs") == 2 and "good" not in text
    assert params_of(table, "AvgShedder", "x2") == "default parameters"


def test_terminal_half_width_is_the_t_intervals_when_the_interval_was_cut_at_zero() -> None:
    """16 [-123.8, 155.8] unloads is kept inside the metric's range as 16 [0, 155.8]; the terminal printed
    (high − low) / 2 of the cut interval, '16 ± 77.9', an interval ([-61.9, 93.9]) that is neither the
    t-interval nor the one reported. The half-width is the t-interval's: 139.8."""
    table = pd.DataFrame(
        [{"strategy": "AvgShedder", "params_id": "default", "params_json": "{}", "problem": "load jitter",
          "n_runs": 3, "value": 16.0, "ci_low": 0.0, "ci_high": 155.8, "rating": "good"},
         {"strategy": "AvgShedder", "params_id": "default", "params_json": "{}", "problem": "over unloading",
          "n_runs": 3, "value": 0.5, "ci_low": 0.25, "ci_high": 0.75, "rating": "normal"}]
    )  # fmt: skip
    console = Console(width=100, record=True)
    console.print(pip364_table(table))
    text = console.export_text()
    assert "± 140" in text and "77.9" not in text
    assert "± 0.25" in text  # an interval that was not cut: its half-width, as before


def test_terminal_table_shows_a_grids_own_names_as_text_not_markup() -> None:
    """A grid may define its own PIP-364 problems; their names went into the table as rich markup: '[/]'
    raised MarkupError (a traceback after evaluate had written its tables), '[cn]' vanished."""
    table = pd.DataFrame(
        [{"strategy": "AvgShedder", "params_id": "default", "params_json": "{}",
          "problem": "churn [/] on [cn]*", "n_runs": 3, "value": 1.0, "ci_low": 0.5, "ci_high": 1.5,
          "rating": "good"}]
    )  # fmt: skip
    console = Console(width=100, record=True)
    console.print(pip364_table(table))
    text = console.export_text()
    assert "[/]" in text and "[cn]*" in text


def test_key_figures_of_a_sweep_without_evaluation_are_the_drawn_parameter_sets() -> None:
    """Without an evaluation the key figures are computed from the runs; they averaged every parameter
    set of a pair (here unloads 1 and 9 → '5') next to the panels of one of them (the default)."""
    from shedlab.report.model import ReportData, RunSeries
    from shedlab.report.sections import _key_figures

    runs = pd.DataFrame(
        [{"scenario": "s", "strategy": "AvgShedder", "params_id": pid, "params_json": pj, "seed": seed,
          "unloads": unloads}
         for pid, pj, unloads in (("default", "{}", 1.0), ("abc", '{"maxUnloadPercentage": 0.5}', 9.0))
         for seed in (1, 2, 3)]
    )  # fmt: skip
    empty = pd.DataFrame()
    drawn = RunSeries("s", "AvgShedder", empty, empty, empty, empty, label="seed 1", params_id="default")
    data = ReportData(kind="sweep", source=Path("x"), title="t", runs=runs, series={"s": [drawn]})
    html = _key_figures(data, "s", [drawn])
    cells = re.findall(r"<td>([^<]*)</td>", html)
    assert cells[0] == "1", cells
    assert "mean over 3 runs per pair" in html


def test_all_figures_of_a_sweep_without_evaluation_keep_every_parameter_set() -> None:
    """Every run is a column; two parameter sets of a pair gave two columns of one name
    ('AvgShedder · seed 1') and the second overwrote the first: half the runs vanished."""
    from shedlab.report.model import ReportData
    from shedlab.report.sections import metrics_section

    runs = pd.DataFrame(
        [{"scenario": "s", "strategy": "AvgShedder", "params_id": pid, "params_json": pj, "seed": seed,
          "unloads": unloads + seed}
         for pid, pj, unloads in (("default", "{}", 10.0), ("abc", '{"maxUnloadPercentage": 0.5}', 90.0))
         for seed in (1, 2)]
    )  # fmt: skip
    data = ReportData(kind="sweep", source=Path("x"), title="t", runs=runs)
    html = metrics_section(Page(max_points=100), data)
    head = re.findall(r"<th[^>]*>([^<]*)</th>", html)
    assert len(head) == 1 + 4, head  # the metric, then one column per run
    cells = re.findall(r"<td>([^<]*)</td>", html)
    assert sorted(cells) == ["11", "12", "91", "92"]
    assert any("maxUnloadPercentage=0.5" in h for h in head)


def test_all_figures_of_a_sweep_without_evaluation_are_metrics_not_run_bookkeeping() -> None:
    """A sweep's run rows also hold when and how long each run ran (started_ms, finished_ms, elapsed_s)
    and the run's own counters (n_ticks, n_decisions): not summary metrics, and the wall-clock ones differ
    between two sweeps of the same grid; they were listed among 'every summary metric'."""
    from shedlab.report.model import ReportData
    from shedlab.report.sections import metrics_section

    runs = pd.DataFrame(
        [{"scenario": "s", "strategy": "AvgShedder", "params_id": "default", "params_json": "{}", "seed": 1,
          "elapsed_s": 1.5, "started_ms": 1.7e12, "finished_ms": 1.7e12, "n_ticks": 60, "n_decisions": 2,
          "unloads": 2.0}]
    )  # fmt: skip
    html = metrics_section(
        Page(max_points=100), ReportData(kind="sweep", source=Path("x"), title="t", runs=runs)
    )
    rows = re.findall(r'<tr><td class="text">([^<]*)</td>', html)
    assert rows == ["unloads"]


def test_problems_never_share_an_anchor_and_pip364s_keep_their_readable_ones() -> None:
    """``a b`` and ``a-b`` (a grid may name its own problems) had the same anchor, so one definition link
    led to the other's; a name without ASCII letters had an empty one."""
    assert problem_slug("load jitter") == "load-jitter"
    names = ["a b", "a-b", "A b", "a  b", "负载", "过载"]
    slugs = [problem_slug(n) for n in names]
    assert len(set(slugs)) == len(names) and all(slugs)
    assert all(re.fullmatch(r"[a-z0-9-]+", s) for s in slugs)
