"""Sweeps on a real local Spark: a tiny grid, resume without loss or duplicates, failing runs, progress,
task packing (the grid format and the results layout are tested in tests/core)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pandas as pd
import pytest

from shedlab.core.grid import expand_grid, load_grid
from shedlab.core.local_parquet import read_local_parquet
from shedlab.spark.sweep import plan_tasks, sweep

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GRID = FIXTURES / "grid_tiny.yaml"


def _runs(out: Path) -> pd.DataFrame:
    return read_local_parquet(out / "runs")


def test_spark_schemas_are_the_core_layouts() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    from shedlab.core.evaluation import (
        METRIC_STATS_COLUMNS,
        PIP364_COLUMNS,
        PIP364_STATS_COLUMNS,
        PIP364_VALUE_COLUMNS,
    )
    from shedlab.core.grid import RUN_SPEC_COLUMNS
    from shedlab.core.results import RUN_SUMMARY_ARROW
    from shedlab.spark.schemas import (
        METRIC_STATS,
        PIP364_STATS,
        PIP364_TABLE,
        PIP364_VALUE,
        RUN_SPEC,
        RUN_SUMMARY,
        field_names,
    )

    assert to_arrow_schema(RUN_SUMMARY).equals(RUN_SUMMARY_ARROW)
    assert tuple(field_names(RUN_SPEC)) == RUN_SPEC_COLUMNS
    assert tuple(field_names(METRIC_STATS)) == METRIC_STATS_COLUMNS
    assert tuple(field_names(PIP364_TABLE)) == PIP364_COLUMNS
    assert tuple(field_names(PIP364_STATS)) == PIP364_STATS_COLUMNS
    assert tuple(field_names(PIP364_VALUE)) == PIP364_VALUE_COLUMNS


def test_tasks_are_packed_longest_first() -> None:
    tasks = plan_tasks([5e6, 1e3, 1e3, 1e3, 4e6], parallelism=2)
    assert tasks[0] == 0 and tasks[4] == 1  # the longest run is in the first task, scheduled first
    assert sorted(tasks) == [0, 1, 2, 3, 4]  # 9 s of work: one task per run
    small = plan_tasks([1e3] * 10, parallelism=1)  # short runs share a task (two per core at least)
    assert sorted(set(small)) == [0, 1] and small.count(0) == 5


# ------------------------------------------------------------------ Spark


@pytest.mark.spark
def test_sweep_tiny_grid(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    grid = load_grid(GRID)
    seen: list[tuple[int, int]] = []
    result = sweep(spark, grid, str(out), progress=lambda done, total, _f: seen.append((done, total)))
    assert (result.total, result.ran, result.skipped, result.failed) == (16, 16, 0, 0)
    assert seen and seen[-1] == (16, 16)
    runs = _runs(out)
    assert len(runs) == 16 and runs["run_id"].is_unique
    assert set(runs["status"]) == {"ok"}
    assert set(runs["run_id"]) == set(expand_grid(grid)["run_id"])
    # Partitioned by scenario and strategy pair; Spark reads the partitions back.
    assert {p.name for p in (out / "runs").iterdir()} == {
        "scenario=over-unloading-90-10",
        "scenario=heterogeneous-cpu-eater",
    }
    sdf = spark.read.parquet(str(out / "runs"))
    assert sdf.select("scenario", "strategy").distinct().count() == 4
    metrics = dict(runs.iloc[0]["metrics"])
    assert "unloads" in metrics and "score_spread_mean" in metrics
    ticks = spark.read.parquet(str(out / "ticks"))
    assert ticks.select("run_id").distinct().count() == 16
    decisions = read_local_parquet(out / "decisions")
    assert set(decisions["run_id"]) <= set(runs["run_id"])
    assert decisions["reason"].map(lambda r: isinstance(json.loads(r), dict)).all()
    # unloads of the summary == decision rows of the run
    per_run = decisions.groupby("run_id").size()
    for row in runs.itertuples():
        assert dict(cast("list[tuple[str, float]]", row.metrics))["unloads"] == per_run.get(row.run_id, 0)
    brokers = read_local_parquet(out / "brokers")
    assert (brokers["tick"] % 5 == 0).all()  # brokers_every: 5
    manifest = json.loads((out / "sweep.json").read_text())
    assert manifest["grids"][0]["name"] == "tiny"


@pytest.mark.spark
def test_resume_after_interruption(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    grid = load_grid(GRID)
    first = sweep(spark, grid, str(out), limit=5)  # "interrupted" after 5 runs
    assert (first.ran, first.skipped) == (5, 0)
    second = sweep(spark, grid, str(out))
    assert (second.ran, second.skipped) == (11, 5)
    runs = _runs(out)
    assert len(runs) == 16 and runs["run_id"].is_unique

    # A crash in the middle of a run leaves its data files but no summary: delete two summaries
    # (and a stray temporary file) and run again: exactly those two run again, nothing is doubled.
    victims = sorted((out / "runs").rglob("run-*.parquet"))[:2]
    victim_ids = {v.name[len("run-") : -len(".parquet")] for v in victims}
    for v in victims:
        v.unlink()
    (victims[0].parent / ".run-x.123.tmp").write_bytes(b"partial")
    third = sweep(spark, grid, str(out))
    assert (third.ran, third.skipped) == (2, 14)
    assert set(third.summaries["run_id"]) == victim_ids
    runs = _runs(out)
    assert len(runs) == 16 and runs["run_id"].is_unique
    ticks = spark.read.parquet(str(out / "ticks"))
    per_run = ticks.groupBy("run_id").count().toPandas()
    assert len(per_run) == 16
    # every run has exactly its scenario's number of ticks (no run written twice)
    n_ticks = runs.set_index("run_id")["n_ticks"]
    assert all(per_run.set_index("run_id")["count"] == n_ticks[per_run["run_id"]].to_numpy())
    # Nothing left to do.
    fourth = sweep(spark, grid, str(out))
    assert (fourth.ran, fourth.skipped) == (0, 16)


@pytest.mark.spark
def test_a_sweep_into_runs_of_another_version_of_a_scenario_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Run ids name a scenario, not its text: resuming into a directory after editing a scenario took
    the old text's runs for the new one's and skipped them, mixing two versions in one table."""
    from shedlab.errors import InputError

    out = tmp_path / "sweep"
    grid = load_grid(GRID)
    sweep(spark, grid, str(out), limit=2)
    swept = str(_runs(out)["scenario"].iloc[0])
    first = next(s for s in grid.scenarios if s.name == swept)
    edited = dataclasses.replace(first, text=first.text + "\n# edited\n", digest="0" * 64)
    changed = dataclasses.replace(grid, scenarios=tuple(edited if s is first else s for s in grid.scenarios))
    with pytest.raises(InputError, match=f"another version of scenario '{first.name}'") as info:
        sweep(spark, changed, str(out))
    assert info.value.hint == "sweep into a new --out directory"
    assert len(_runs(out)) == 2  # nothing overwritten
    assert sweep(spark, grid, str(out)).skipped == 2  # the same text resumes as before


@pytest.mark.spark
def test_a_failing_run_is_recorded_and_the_sweep_goes_on(spark: SparkSession, tmp_path: Path) -> None:
    grid = load_grid(GRID)
    broken = dataclasses.replace(
        grid.scenarios[0], text="name: over-unloading-90-10\nduration: [not, a, time]\n"
    )
    grid = dataclasses.replace(grid, scenarios=(broken, grid.scenarios[1]))
    out = tmp_path / "sweep"
    result = sweep(spark, grid, str(out))
    assert result.ran == 16 and result.failed == 8
    runs = _runs(out)
    failed = runs[runs["status"] == "error"]
    assert set(failed["scenario"]) == {"over-unloading-90-10"}
    assert failed["error"].str.len().gt(0).all() and failed["traceback"].notna().all()
    assert set(runs.loc[runs["status"] == "ok", "scenario"]) == {"heterogeneous-cpu-eater"}
    # Kept as they are when asked, and counted: the summary said '16 already complete, 0 ran now (0 failed)'.
    kept = sweep(spark, grid, str(out), retry_failed=False)
    assert (kept.skipped, kept.skipped_failed, kept.ran, kept.retried) == (16, 8, 0, 0)


@pytest.mark.spark
def test_a_rerun_runs_the_failed_runs_again(spark: SparkSession, tmp_path: Path) -> None:
    """A failure stuck: the re-run counted failed runs as complete ('6 runs: 6 already complete, 0 ran now
    (0 failed)', "failed": 0), so a transient failure or a plugin fixed since needed --retry-failed."""
    grid = load_grid(GRID)
    grid = dataclasses.replace(grid, scenarios=grid.scenarios[:1])
    out = tmp_path / "sweep"
    first = sweep(spark, grid, str(out), timeout_s=1e-3)  # a machine too busy for the --timeout given
    assert (first.ran, first.failed) == (8, 8)
    assert _runs(out)["error"].str.contains("time limit").all()
    seen: list[tuple[int, int, int]] = []
    again = sweep(spark, grid, str(out), progress=lambda *p: seen.append(p))
    assert (again.skipped, again.ran, again.retried, again.failed, again.skipped_failed) == (0, 8, 8, 0, 0)
    assert seen[-1] == (8, 8, 0)
    runs = _runs(out)  # replaced in place: one summary per run
    assert len(runs) == 8 and runs["run_id"].is_unique and set(runs["status"]) == {"ok"}


@pytest.mark.spark
def test_a_sweep_whose_every_run_failed_exits_1(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It exited 0 (16 runs, 16 failed), and a CI job took it for a sweep done."""
    from shedlab.cli import main

    out = tmp_path / "sweep"
    # run now (the first failure named), then kept as they were: no run succeeded either time
    for extra, first in (((), "; the first: "), (("--skip-failed",), "; ")):
        with pytest.raises(SystemExit) as info:
            main(["sweep", str(GRID), "--out", str(out), "--timeout", "1e-3", "--json", *extra])
        assert info.value.code == 1
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert last.startswith(f"error: all 16 runs failed{first}"), last
        assert last.endswith(f"every reason is in {out}/runs (status, error)"), last
    assert spark.sparkContext._jsc is not None  # the shared session is still alive


@pytest.mark.spark
def test_sweep_cli_json(spark: SparkSession, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from shedlab.cli.spark_cmd import register

    app = typer.Typer()
    register(app)
    out = tmp_path / "cli"
    shutil.copy(GRID, tmp_path / "g.yaml")
    res = CliRunner().invoke(
        app, ["sweep", str(tmp_path / "g.yaml"), "--out", str(out), "--limit", "3", "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout[res.stdout.index("{") :])
    assert doc["ran"] == 3 and doc["runs"] == 16
    assert spark.sparkContext._jsc is not None  # the shared session is still alive


@pytest.mark.spark
def test_the_sweep_starts_with_every_axis_of_the_grid(spark: SparkSession, tmp_path: Path) -> None:
    """The first line left the parameter sets out: '2 scenario(s) × 2 strategy pair(s) × 2 seed(s) =
    16 runs' (2 × 2 × 2 = 8)."""
    import typer
    from typer.testing import CliRunner

    from shedlab.cli.spark_cmd import register

    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["sweep", str(GRID), "--out", str(tmp_path / "out"), "--limit", "1"])
    assert res.exit_code == 0, res.output
    header = "grid tiny: 2 scenario(s) × 2 strategy pair(s) × 2 parameter set(s) × 2 seed(s) = 16 runs"
    assert " ".join(res.stderr.split()).startswith(header), res.stderr  # folded at 80 columns


@pytest.mark.spark
def test_the_same_sweep_of_a_shipped_grid_into_its_name_resumes(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sweep tiny --out tiny`` worked once; the same command again read ``./tiny`` (its output) as the
    grid: 'tiny: expected a grid file, found a directory', exit 2, instead of resuming."""
    import typer
    from typer.testing import CliRunner

    from shedlab.cli.spark_cmd import register

    app = typer.Typer()
    register(app)
    monkeypatch.chdir(tmp_path)  # ./tiny is the output (given absolute: the shared JVM has its own cwd)
    docs = []
    for _ in range(2):
        res = CliRunner().invoke(
            app, ["sweep", "tiny", "--out", str(tmp_path / "tiny"), "--limit", "2", "--json"]
        )
        assert res.exit_code == 0, res.output
        docs.append(json.loads(res.stdout[res.stdout.index("{") :]))
    assert [(d["grid"], d["skipped"], d["ran"]) for d in docs] == [("tiny", 0, 2), ("tiny", 2, 2)]
    assert len(_runs(tmp_path / "tiny")) == 4


def test_progress_counts_this_sweeps_finished_run_summaries(tmp_path: Path) -> None:
    import time

    from shedlab.spark.sweep import _RunCounter

    part = tmp_path / "runs" / "scenario=s" / "strategy=p"
    part.mkdir(parents=True)
    for name in ("run-a.parquet", "run-b.parquet", "run-other.parquet", ".run-c.123.tmp"):
        (part / name).write_bytes(b"x")
    assert _RunCounter(str(tmp_path), {"a", "b", "c"}, None).finished() == 2  # not 'other', not the tmp
    assert _RunCounter(str(tmp_path), {"a", "b", "c"}, time.time() + 60).finished() == 0  # old summaries
    assert _RunCounter(str(tmp_path / "missing"), {"a"}, None).finished() == 0
