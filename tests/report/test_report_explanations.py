"""The report shows what the load manager did *not* do: the simulator's ``skips`` per drawn run, and
each replayed strategy's reasons for leaving brokers alone (issue 11, "explanations everywhere").
No Spark here: the sweep layout is written with the core's own run writer."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import pandas as pd

from shedlab.core.grid import expand_grid, load_grid
from shedlab.core.results import RunWriter, execute_spec, read_run_table
from shedlab.core.sim import load_scenario, run_simulation
from shedlab.core.sim.scenario import parse_scenario_text
from shedlab.report import build_report
from shedlab.report.load import load_results
from shedlab.report.model import ReplayData, ReportData
from shedlab.report.page import render_page
from shedlab.report.sections import SKIPS_SHOWN, skips_summary


def _text(html_page: str) -> str:
    """The page's visible text with tags and figure data removed, whitespace collapsed."""
    no_scripts = re.sub(r"<script.*?</script>", " ", html_page, flags=re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", no_scripts).split())


def test_skips_summary_sums_counts_and_counts_distinct_ticks_and_brokers() -> None:
    skips = pd.DataFrame(
        {
            "time_s": [60.0, 60.0, 120.0, 180.0],
            "role": ["shedding"] * 4,
            "kind": ["hit_count_not_reached", "hit_count_not_reached", "hit_count_not_reached", "no_pair"],
            "broker": ["a", "b", "a", None],
            "count": [1, 2, 3, 1],
            "message": ["hit count not reached"] * 3 + ["no pair"],
        }
    )
    table = skips_summary(skips)
    assert table.to_dict("records") == [
        {
            "role": "shedding",
            "kind": "hit_count_not_reached",
            "message": "hit count not reached",
            "times": 6,
            "ticks": 2,
            "brokers": 2,
        },
        {"role": "shedding", "kind": "no_pair", "message": "no pair", "times": 1, "ticks": 1, "brokers": 0},
    ]
    assert skips_summary(skips.iloc[:0]).empty


def test_a_simulate_report_lists_each_kind_of_skip_with_its_total(tmp_path: Path) -> None:
    result = run_simulation(load_scenario("homogeneous-gap"), strategy="AvgShedder", seed=0)
    result.write(tmp_path / "sim")
    expected = skips_summary(result.skips)
    assert not expected.empty  # AvgShedder waits for its hit counters in this scenario
    data = load_results(tmp_path / "sim")
    (run,) = data.series["homogeneous-gap"]
    assert int(run.skips["count"].sum()) == int(result.skips["count"].sum())
    text = _text(render_page(data))
    assert "Decisions not taken" in text
    for row in expected.head(SKIPS_SHOWN).itertuples(index=False):
        assert f"{row.role}: {row.kind} {row.message} {row.times} {row.ticks} {row.brokers}" in text


def test_a_simulate_output_without_a_skips_file_still_reports(tmp_path: Path) -> None:
    result = run_simulation(load_scenario("homogeneous-gap"), strategy="AvgShedder", seed=0)
    result.write(tmp_path / "old")
    (tmp_path / "old" / "skips.parquet").unlink()  # written before the table existed
    text = _text(render_page(load_results(tmp_path / "old")))
    assert "No decision was skipped in the runs drawn" in text


def test_a_sweep_run_writes_its_skips_table(tmp_path: Path) -> None:
    specs = expand_grid(load_grid("tiny"))
    spec = cast("dict[str, Any]", specs[specs["strategy"] == "AvgShedder"].iloc[0].to_dict())
    row = execute_spec(spec, RunWriter(str(tmp_path)))
    assert row["status"] == "ok"
    scenario, strategy, run_id = str(spec["scenario"]), "AvgShedder", str(spec["run_id"])
    skips = read_run_table(tmp_path, "skips", scenario, strategy, run_id)
    expected = run_simulation(
        parse_scenario_text(str(spec["scenario_spec"]), scenario),
        strategy=strategy,
        config_overrides=json.loads(str(spec["params_json"])) or None,
        seed=int(spec["seed"]),
    ).skips
    assert not expected.empty and set(skips["run_id"]) == {run_id}
    found = skips.drop(columns=["run_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(found, expected.reset_index(drop=True), check_dtype=False)


def _replay(reasons: list[dict[str, int]], left: list[int]) -> ReportData:
    n = len(reasons)
    comparison = pd.DataFrame(
        {
            "cluster": ["c1"] * n,
            "strategy": ["AvgShedder"] * n,
            "config_id": ["default"] * n,
            "tick_ms": [60_000 * (i + 1) for i in range(n)],
            "actual_moves": [0] * n,
            "strategy_unloads": [0] * n,
            "both": [0] * n,
            "max_usage": [0.5] * n,
            "est_max_usage": [0.5] * n,
            "usage_spread": [0.2] * n,
            "est_usage_spread": [0.2] * n,
            "left_alone": left,
            "reasons": [json.dumps(r) for r in reasons],
        }
    )
    return ReportData(kind="replay", source=Path("."), title="t", replay=ReplayData(comparison=comparison))


def test_a_replay_report_sums_each_strategys_reasons_over_ticks() -> None:
    data = _replay([{"hit count 3 of 8": 2, "no pair": 1}, {"hit count 3 of 8": 1}], left=[3, 1])
    text = _text(render_page(data))
    assert "Brokers left alone, and why" in text
    assert "AvgShedder hit count 3 of 8 3 2" in text  # summed over ticks; 2 brokers left alone per tick
    assert "AvgShedder no pair 1" in text


def test_a_replay_written_before_reasons_existed_says_so() -> None:
    data = _replay([{}], left=[0])
    assert data.replay is not None and data.replay.comparison is not None
    data.replay.comparison = data.replay.comparison.drop(columns=["reasons", "left_alone"])
    assert "written before shedlab recorded its reasons" in _text(render_page(data))


def test_the_written_report_carries_the_skips(tmp_path: Path) -> None:
    result = run_simulation(load_scenario("homogeneous-gap"), strategy="AvgShedder", seed=0)
    result.write(tmp_path / "sim")
    out = build_report(tmp_path / "sim", tmp_path / "r.html")
    assert "hit_count_not_reached" in out.read_text(encoding="utf-8")
