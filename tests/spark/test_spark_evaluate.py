"""Evaluation on Spark: its tables equal a direct pandas computation and the core functions applied
without Spark to the same runs."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pytest

from shedlab.core.evaluation import PIP364_DEFINITIONS, TOO_FEW_RUNS, evaluate_runs, rate
from shedlab.core.local_parquet import read_local_parquet
from shedlab.core.results import read_sweep_runs
from shedlab.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

# Student's t, two-sided 95 % (from tables)
T_TABLE = {1: 12.706204736}


@pytest.fixture(scope="module")
def evaluated(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    from shedlab.core.grid import load_grid
    from shedlab.spark.evaluate import evaluate
    from shedlab.spark.sweep import sweep

    out = tmp_path_factory.mktemp("eval") / "sweep"
    sweep(spark, load_grid(FIXTURES / "grid_tiny.yaml"), str(out))
    return out, evaluate(spark, str(out))


def _direct_runs(out: Path) -> pd.DataFrame:
    runs = read_local_parquet(out / "runs")
    runs = runs[runs["status"] == "ok"]
    wide = pd.DataFrame([dict(m) for m in runs["metrics"]], index=runs.index)
    return pd.concat(
        [runs[["run_id", "scenario", "strategy", "params_id", "params_json", "seed"]], wide], axis=1
    )


@pytest.mark.spark
def test_metric_stats_equal_pandas(evaluated: tuple[Path, Any]) -> None:
    out, result = evaluated
    direct = _direct_runs(out)
    stats = result.metric_stats.set_index(["scenario", "strategy", "params_id", "metric"])
    checked = 0
    for (scenario, strategy, pid), group in direct.groupby(
        ["scenario", "strategy", "params_id"], observed=True
    ):
        for metric in ("unloads", "score_spread_mean", "over_unloading_flips", "broker_minutes_overloaded"):
            values = group[metric].dropna().astype(float)
            row = stats.loc[(scenario, strategy, pid, metric)]
            n = len(values)
            assert row["n"] == n == 2
            assert row["mean"] == pytest.approx(values.mean(), rel=1e-12, abs=1e-12)
            sd = values.std(ddof=1)
            assert row["stddev"] == pytest.approx(sd, rel=1e-9, abs=1e-12)
            half = T_TABLE[n - 1] * sd / math.sqrt(n)
            # every one of these metrics is ≥ 0: the interval stops at 0 (metric_range)
            assert row["ci_low"] == pytest.approx(max(values.mean() - half, 0.0), rel=1e-9, abs=1e-9)
            assert row["ci_high"] == pytest.approx(values.mean() + half, rel=1e-9, abs=1e-9)
            assert row["min"] == values.min() and row["max"] == values.max()
            checked += 1
    assert checked == 2 * 2 * 2 * 4
    # the files: Parquet and CSV with the same numbers
    csv = pd.read_csv(result.out + "/metric_stats.csv")
    assert len(csv) == len(result.metric_stats)
    parquet = read_local_parquet(result.out + "/metric_stats")
    keys = ["scenario", "strategy", "params_id", "metric"]
    assert np.allclose(parquet.sort_values(keys)["mean"], result.metric_stats.sort_values(keys)["mean"])


@pytest.mark.spark
def test_pip364_table_equals_pandas(evaluated: tuple[Path, Any]) -> None:
    out, result = evaluated
    direct = _direct_runs(out)
    pip = result.pip364
    assert set(pip["problem"]) == {"heterogeneous environment", "over unloading", "slow load balancing"} - {
        "slow load balancing"
    }
    cases = (
        ("over unloading", "over-unloading-90-10"),
        ("heterogeneous environment", "heterogeneous-cpu-eater"),
    )
    for problem, scenario in cases:
        spec = PIP364_DEFINITIONS[problem]
        sub = direct[direct["scenario"] == scenario].copy()
        if problem == "over unloading":
            sub["value"] = sub["over_unloading_flips"]
        else:
            sub["value"] = (
                sub["score_spread_mean"] + sub["broker_minutes_overloaded"] * 3600 / sub["duration_s"]
            )
        for (strategy, pid), group in sub.groupby(["strategy", "params_id"], observed=True):
            row = pip[(pip["problem"] == problem) & (pip["strategy"] == strategy) & (pip["params_id"] == pid)]
            assert len(row) == 1
            row = row.iloc[0]
            assert row["n_runs"] == len(group) == 2
            assert row["value"] == pytest.approx(group["value"].mean(), rel=1e-12, abs=1e-12)
            assert row["scenarios"] == scenario
            # two runs each: the figure is there, the rating is withheld (evaluation.MIN_RUNS_TO_RATE)
            assert (
                row["rating"] == rate(row["value"], spec["good_below"], spec["bad_above"], 2) == TOO_FEW_RUNS
            )
            assert row["ci_low"] >= 0.0
    defs = json.loads(Path(result.out, "pip364_definitions.json").read_text())
    assert defs["over unloading"]["matched_scenarios"] == ["over-unloading-90-10"]
    assert any("load jitter" in n for n in result.notes)  # no jitter scenario in the tiny grid: said so


@pytest.mark.spark
def test_evaluate_cli(evaluated: tuple[Path, Any], tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from shedlab.cli.spark_cmd import register

    out, _ = evaluated
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["evaluate", str(out), "--out", str(tmp_path / "ev")])
    assert res.exit_code == 0, res.output
    assert "PIP-364" in res.output and "over unloading" in res.output
    assert (tmp_path / "ev" / "pip364.csv").is_file()
    missing = CliRunner().invoke(app, ["evaluate", str(tmp_path / "nothing")])
    assert missing.exit_code != 0
    # a name the runs do not have was left out of the table, silently (only such names: no table, exit 0)
    typo = CliRunner().invoke(
        app, ["evaluate", str(out), "--out", str(tmp_path / "ev"), "--metrics", "unlods"]
    )
    assert isinstance(typo.exception, ConfigError), typo.output  # main() prints it as one line, exit 2
    assert str(typo.exception) == (
        "--metrics: no metric of this name in the sweep's runs (got 'unlods'); did you mean 'unloads'?"
    )
    chosen = CliRunner().invoke(
        app, ["evaluate", str(out), "--out", str(tmp_path / "ev"), "--metrics", "unloads, ticks"]
    )
    assert chosen.exit_code == 0 and "ticks" in chosen.output, chosen.output


@pytest.mark.spark
def test_goal_cells_of_a_challenger(evaluated: tuple[Path, Any], tmp_path: Path) -> None:
    """Without CapacityAwareShedder in the sweep there is no cell (goal.csv holds its header); with
    AvgShedder as the challenger, each of its two parameter sets gets the three cells of both
    scenarios (both have machines that differ), judged against the best set of each baseline."""
    import typer
    from typer.testing import CliRunner

    from shedlab.cli.spark_cmd import register
    from shedlab.core.goal import GOAL_COLUMNS, goal_cells, scenario_classes

    out, result = evaluated
    assert result.goal.empty and not any("goal" in note for note in result.notes)  # default: not swept
    assert list(pd.read_csv(result.out + "/goal.csv").columns) == list(GOAL_COLUMNS)
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(
        app, ["evaluate", str(out), "--out", str(tmp_path / "ev"), "--challenger", "AvgShedder"]
    )
    assert res.exit_code == 0, res.output
    assert "against the heterogeneous-cluster goal" in res.output and "goal cells won" in res.output
    written = pd.read_csv(tmp_path / "ev" / "goal.csv")
    assert len(written) == 2 * 2 * 3
    assert set(written["class"]) == {"heterogeneous"}
    manifest = json.loads((out / "sweep.json").read_text())
    texts = {n: e["text"] for g in manifest["grids"] for n, e in g["scenarios"].items()}
    direct = goal_cells(result.metric_stats, scenario_classes(texts), "AvgShedder")
    assert written["verdict"].tolist() == direct["verdict"].tolist()
    misspelt = CliRunner().invoke(
        app, ["evaluate", str(out), "--out", str(tmp_path / "ev2"), "--challenger", "AvgShedde"]
    )
    assert isinstance(misspelt.exception, ConfigError)  # main() prints it as one line, exit 2
    assert str(misspelt.exception).startswith(f"{out}/sweep.json: --challenger: ")  # the file it read
    assert str(misspelt.exception).endswith("(got 'AvgShedde'); did you mean 'AvgShedder'?")
    assert not (tmp_path / "ev2").exists()  # refused before anything was read or written
    # against itself a set never wins the spread: the best set ties, the other loses or ties
    spread = direct[direct["criterion"] == "lower spread"]
    assert set(spread["verdict"]) <= {"tie", "lost"} and "tie" in set(spread["verdict"])


@pytest.mark.spark
def test_spark_equals_the_core_without_spark(evaluated: tuple[Path, Any]) -> None:
    out, result = evaluated
    direct = evaluate_runs(read_sweep_runs(out))  # every metric column, as Spark explodes them
    for spark_table, core_table in (
        (result.metric_stats, direct.metric_stats),
        (result.pip364, direct.pip364),
        (result.runs, direct.runs),
    ):
        assert list(spark_table.columns) == list(core_table.columns)
        assert len(spark_table) == len(core_table)
        for column in spark_table.columns:
            a, b = spark_table[column].reset_index(drop=True), core_table[column].reset_index(drop=True)
            if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
                assert np.allclose(
                    a.to_numpy(float), b.to_numpy(float), rtol=1e-9, atol=1e-12, equal_nan=True
                )
            else:
                assert a.astype(str).equals(b.astype(str)), column


def test_a_bad_pip364_section_of_an_older_sweep_is_named_before_anything_is_read(tmp_path: Path) -> None:
    """A sweep.json written before sweep checked ``pip364:`` may hold a bad threshold: evaluate names its
    place in sweep.json at once (it read every run first, then said only ``pip364: expected a number``)."""
    from shedlab.errors import ConfigError
    from shedlab.spark.evaluate import _grid_definitions, _swept_grids

    good = {"name": "a", "pip364": {"load jitter": {"good_below": 5}}}
    bad = {"name": "b", "pip364": {"mine": {"expr": "unloads", "good_below": "x"}}}
    (tmp_path / "sweep.json").write_text(json.dumps({"grids": [good, bad]}))
    with pytest.raises(
        ConfigError, match=r"sweep\.json: grids\[1\]\.pip364\.mine\.good_below: expected a finite"
    ):
        _grid_definitions(str(tmp_path), _swept_grids(str(tmp_path)))
    (tmp_path / "sweep.json").write_text(json.dumps({"grids": [good]}))
    assert _grid_definitions(str(tmp_path), _swept_grids(str(tmp_path))) == [good["pip364"]]
