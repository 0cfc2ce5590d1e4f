"""shedlab on a real Spark standalone cluster: a master and one worker on loopback (``spark_standalone``,
``tests/spark_standalone.py``), driven through the command line as a user would, ``--master spark://…``.

What only a non-local master exercises: the package zipped and shipped with ``addPyFile`` (the executors
get no ``PYTHONPATH``), the executors' own Python processes, run files written from the executors, and
the session settings of a non-local master (``spark_settings``, ``short_input_conf``). The same sweep on
``local[1]`` must write the same files: byte for byte, except the three wall-clock fields of each run's
summary and the manifest's ``updated_ms`` (``TIMING``, ``test_a_sweep_on_the_cluster_writes_…``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # no stubs (as in src/)
import pytest

if TYPE_CHECKING:
    from spark_standalone import StandaloneCluster

pytestmark = [pytest.mark.spark, pytest.mark.standalone]

SRC = Path(__file__).resolve().parents[2] / "src"
TIMING = ("elapsed_s", "started_ms", "finished_ms")
"""A run summary's wall-clock fields (``shedlab.core.results``): when the run started and ended and how
long it took on the machine that ran it; every other column is a function of the run spec."""
RUN_TABLES = ("ticks", "brokers", "decisions", "events", "skips")
"""The per-run tables written from the tasks, compared byte for byte."""
LIMIT_S = 300
JAVA_LOG_LINE = re.compile(r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d [A-Z]+ ")


@dataclass(frozen=True)
class Swept:
    cluster: StandaloneCluster
    on_cluster: Path
    on_local: Path


def _shedlab(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m shedlab ARGS`` with this checkout's ``src`` first on ``PYTHONPATH`` (the driver's only:
    the executors get the package from the driver) and the driver on loopback, where the worker is."""
    paths = [str(SRC), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "COLUMNS": "400",
    }
    return subprocess.run(
        [sys.executable, "-m", "shedlab", *args], capture_output=True, text=True, env=env, timeout=LIMIT_S
    )


def _ok(run: subprocess.CompletedProcess[str]) -> None:
    """Exit 0, and nothing of Spark's on the console: no traceback, no log4j line (``yy/MM/dd HH:mm:ss
    LEVEL``; the driver's end-of-application ``ERROR TransportResponseHandler`` goes to the tasks log)."""
    assert run.returncode == 0, run.stderr[-4000:]
    assert "Traceback" not in run.stderr, run.stderr[-4000:]
    logged = [line for line in run.stderr.splitlines() if JAVA_LOG_LINE.match(line)]
    assert logged == [], logged


@pytest.fixture(scope="module")
def swept(spark_standalone: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory) -> Swept:
    """The shipped grid ``tiny`` (16 runs) swept once on the cluster and once on ``local[1]``."""
    root = tmp_path_factory.mktemp("standalone")
    on_cluster, on_local = root / "A", root / "B"
    _ok(_shedlab("sweep", "tiny", "--out", str(on_cluster), "--master", spark_standalone.url))
    _ok(_shedlab("sweep", "tiny", "--out", str(on_local), "--master", "local[1]"))
    return Swept(spark_standalone, on_cluster, on_local)


def _files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_sweep_ran_on_the_cluster_s_executor_with_the_shipped_package(swept: Swept) -> None:
    state = swept.cluster.state()
    apps = state["completedapps"]
    assert isinstance(apps, list) and "shedlab sweep" in [app["name"] for app in apps]
    # The worker's executor fetched the zipped package the driver added with addPyFile.
    assert list(swept.cluster.work_dir.glob("app-*/*/shedlab.zip"))


def test_a_sweep_on_the_cluster_writes_what_a_local_sweep_writes(swept: Swept) -> None:
    for table in RUN_TABLES:
        cluster, local = _files(swept.on_cluster / table), _files(swept.on_local / table)
        assert cluster.keys() == local.keys(), table
        different = [name for name in cluster if cluster[name].read_bytes() != local[name].read_bytes()]
        assert different == [], f"{table}: {different}"
    assert len(_files(swept.on_cluster / "ticks")) == 16

    cluster_runs, local_runs = _files(swept.on_cluster / "runs"), _files(swept.on_local / "runs")
    assert cluster_runs.keys() == local_runs.keys() and len(cluster_runs) == 16
    for name, path in cluster_runs.items():
        a, b = pq.read_table(path), pq.read_table(local_runs[name])
        assert a.schema.equals(b.schema, check_metadata=True), name
        assert a.drop_columns(list(TIMING)).equals(b.drop_columns(list(TIMING))), name
        assert a["status"].to_pylist() == ["ok"], a["error"].to_pylist()

    manifests = [json.loads((out / "sweep.json").read_text()) for out in (swept.on_cluster, swept.on_local)]
    for manifest in manifests:
        for grid in manifest["grids"]:
            grid.pop("updated_ms")
    assert manifests[0] == manifests[1]


def test_evaluate_on_the_cluster_gives_the_evaluation_of_the_core(swept: Swept) -> None:
    """``evaluate`` on the cluster, compared with :func:`shedlab.core.evaluation.evaluate_runs` (pandas, in
    this process) over the same runs: the same rows, the numbers equal to 1e-12 relative (Spark's
    aggregations add in another order than pandas: the last bit of a mean differs). A second ``evaluate``
    on ``local[1]`` wrote byte-identical tables when this test was written; it is not run here (13 s)."""
    from shedlab.core.evaluation import evaluate_runs
    from shedlab.core.results import read_sweep_runs

    _ok(_shedlab("evaluate", str(swept.on_cluster), "--master", swept.cluster.url))
    written = swept.on_cluster / "evaluation"
    assert len(pd.read_csv(written / "runs.csv")) == 16
    core = evaluate_runs(read_sweep_runs(swept.on_cluster))
    keys = ["scenario", "strategy", "params_id", "metric"]
    for name, expected, order in (
        ("metric_stats", core.metric_stats, keys),
        ("pip364", core.pip364, ["strategy", "params_id", "problem", "metric"]),
    ):
        for got in (pd.read_csv(written / f"{name}.csv"), pq.read_table(written / name).to_pandas()):
            assert len(got) == len(expected) > 0, name
            pd.testing.assert_frame_equal(
                got.sort_values(order).reset_index(drop=True),
                expected.sort_values(order).reset_index(drop=True),
                check_dtype=False,
                rtol=1e-12,
            )


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        (
            "scenarios: [over-unloading-90-10]\nstrategies: [NoSuchShedder]\nseeds: [1]\n",
            "strategies[0]: unknown strategy pair (got 'NoSuchShedder')",
        ),
        (
            "scenarios: [no-such-scenario]\nstrategies: [AvgShedder]\nseeds: [1]\n",
            "no-such-scenario",
        ),
    ],
    ids=["unknown-strategy", "unknown-scenario"],
)
def test_a_bad_grid_for_the_cluster_is_one_line(
    spark_standalone: StandaloneCluster, tmp_path: Path, grid: str, expected: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(grid, encoding="utf-8")
    run = _shedlab("sweep", str(path), "--out", str(tmp_path / "out"), "--master", spark_standalone.url)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], run.stderr
