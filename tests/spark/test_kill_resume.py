"""Faults: the driver of ``shedlab sweep`` / ``shedlab ingest`` SIGKILLed mid-run, then run again.

Each killed command runs in its own process (a kill is the point), on ``local[2]``; the rerun
and an uninterrupted reference run in this process (the session ``spark`` fixture: no more JVMs to
start, which is most of the time these tests take). Every wait has a time limit, so a hung child
fails the test instead of hanging CI.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pytest

from shedlab.core.grid import load_grid
from shedlab.core.local_parquet import read_local_parquet
from shedlab.core.results import read_partitioned

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REPORTS = FIXTURES / "ingest" / "load_reports.jsonl"
SPAWN_LIMIT_S = 90.0
"""A child must reach the point where it is killed (or finish) within this time."""
TEMPORARY = (".tmp", "_temporary", ".spark-staging")

pytestmark = pytest.mark.spark


def _env() -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    paths = [src, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYSPARK_PYTHON": sys.executable}


def _shedlab(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "shedlab", *args, "--master", "local[2]"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,  # the child's JVM and Python workers die with its group
    )


def _kill_when(proc: subprocess.Popen[bytes], ready: Callable[[], bool]) -> bool:
    """SIGKILL ``proc``'s process group as soon as ``ready()``; False if it finished first."""
    deadline = time.monotonic() + SPAWN_LIMIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if ready():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
            _wait_group_gone(proc.pid)
            return True
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    pytest.fail(f"the child did not reach the kill point within {SPAWN_LIMIT_S:.0f} s")


def _wait_group_gone(pgid: int, limit_s: float = 30.0) -> None:
    """Until no process of the killed group is left: the leader's exit does not mean its JVM and Python
    workers are gone, and a resume that starts while one still finishes a write races it."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


def _temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if any(t in p.name for t in TEMPORARY)]


def _summaries(root: Path) -> list[Path]:
    return list((root / "runs").rglob("run-*.parquet")) if (root / "runs").is_dir() else []


def _run_ids(root: Path, table: str) -> pd.Series:
    frame = read_partitioned(root / table)
    assert frame is not None
    return frame["run_id"]


def test_a_sweep_killed_twice_resumes_to_the_uninterrupted_result(
    spark: SparkSession, tmp_path: Path
) -> None:
    from shedlab.spark.evaluate import evaluate
    from shedlab.spark.sweep import sweep

    grid = FIXTURES / "grid_tiny.yaml"  # 16 runs
    out = tmp_path / "killed"
    kills = 0
    for wanted in (2, 6):  # kill once a few runs are written, then again later
        proc = _shedlab("sweep", str(grid), "--out", str(out), "--json")

        def written(n: int = wanted) -> bool:
            return len(_summaries(out)) >= n

        kills += _kill_when(proc, written)
    assert kills >= 1, "the sweep finished before it could be killed"
    assert len(_summaries(out)) < 16
    # The resume needs no new process: this one's session resumes as the CLI would.
    resumed = sweep(spark, load_grid(grid), str(out))
    assert resumed.skipped + resumed.ran == 16 and resumed.failed == 0

    reference = tmp_path / "reference"
    sweep(spark, load_grid(grid), str(reference))
    for table in ("runs", "ticks", "decisions", "events"):
        killed, whole = _run_ids(out, table), _run_ids(reference, table)
        assert set(killed) == set(whole), table  # no run lost
    runs = _run_ids(out, "runs")
    assert len(runs) == 16 and runs.is_unique  # none duplicated
    ticks = read_partitioned(out / "ticks")
    whole_ticks = read_partitioned(reference / "ticks")
    assert ticks is not None and whole_ticks is not None
    assert ticks.groupby("run_id").size().equals(whole_ticks.groupby("run_id").size())
    assert _temporaries(out) == []

    a = evaluate(spark, str(out)).metric_stats
    b = evaluate(spark, str(reference)).metric_stats
    keys = ["scenario", "strategy", "params_id", "metric"]
    a, b = a.sort_values(keys).reset_index(drop=True), b.sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, rtol=1e-9, atol=1e-12)


def _ingested(root: Path) -> dict[str, pd.DataFrame]:
    tables = {}
    for name in ("broker_samples", "bundle_samples", "quarantine"):
        frame = read_local_parquet(root / name)
        frame = frame.astype({c: str for c in ("cluster", "day") if c in frame.columns})
        tables[name] = frame.sort_values(list(frame.columns)).reset_index(drop=True)
    return tables


def test_an_ingest_killed_mid_write_and_rerun_is_complete(spark: SparkSession, tmp_path: Path) -> None:
    from shedlab.spark.ingest import ingest

    out = tmp_path / "killed"
    # Killed as soon as Spark starts writing the first table (its _temporary directory appears).
    proc = _shedlab("ingest", str(REPORTS), "--out", str(out), "--cluster", "c1", "--json")
    killed = _kill_when(proc, lambda: (out / "broker_samples").exists())
    ingest(spark, [str(REPORTS)], str(out), default_cluster="c1")  # the rerun, into the same --out
    reference = tmp_path / "reference"
    ingest(spark, [str(REPORTS)], str(reference), default_cluster="c1")
    a, b = _ingested(out), _ingested(reference)
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], obj=name)  # complete, nothing doubled
    assert _temporaries(out) == [], killed
