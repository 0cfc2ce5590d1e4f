"""shedlab on a real Spark standalone cluster: a master and one worker on loopback (``spark_standalone``,
``tests/spark_standalone.py``), driven through the command line as a user would, ``--master spark://…``.

What only a non-local master exercises: the package zipped and shipped with ``addPyFile`` (the executors
get no ``PYTHONPATH``), the executors' own Python processes and working directory, run files written
from the executors, a user's strategy module shipped with ``ship_strategy_modules``, and the session
settings of a non-local master (``spark_settings``, ``short_input_conf``). Every command runs on the
cluster and on ``local[1]`` at once (:func:`_on_both`), in one directory with relative paths, and must
write the same files: a sweep's byte for byte except the three wall-clock fields of each run's summary
and the manifest's ``updated_ms`` (``TIMING``); ingest's and replay's Spark-written tables the same rows
in the same files (``_same_tables``: not the same bytes, parquet-mr's footer lists a column's encodings
in a Java ``HashSet``'s order); twin and tune the same except where the output names its input.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # no stubs (as in src/)
import pytest
from builders import ONE_BUNDLE_SHEDDER, twin_sized_scenario

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


def _env() -> dict[str, str]:
    """This checkout's ``src`` first on ``PYTHONPATH`` (the driver's only: the executors get the package
    from the driver) and the driver on loopback, where the worker is."""
    paths = [str(SRC), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "COLUMNS": "400",
    }


def _shedlab(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m shedlab ARGS`` (:func:`_env`)."""
    return subprocess.run(
        [sys.executable, "-m", "shedlab", *args], capture_output=True, text=True, env=_env(), timeout=LIMIT_S
    )


def _on_both(cwd: Path, command: Callable[[str], list[str]], cluster: str) -> dict[str, Ran]:
    """``python -m shedlab`` with ``command(side)`` in ``cwd`` on the cluster (side ``A``) and on
    ``local[1]`` (side ``B``) at the same time (each master has one core; two Spark applications at once
    halve the file's time on two cores). The commands get relative paths: ``A/…`` on the cluster."""
    started = {
        side: subprocess.Popen(
            [sys.executable, "-m", "shedlab", *command(side), "--master", master],
            cwd=cwd,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for side, master in (("A", cluster), ("B", "local[1]"))
    }
    ran = {}
    for side, process in started.items():
        try:
            out, err = process.communicate(timeout=LIMIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        ran[side] = Ran(process.returncode, out, err)
    return ran


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


def _ok(run: subprocess.CompletedProcess[str] | Ran) -> None:
    """Exit 0, and nothing of Spark's on the console: no traceback, no log4j line (``yy/MM/dd HH:mm:ss
    LEVEL``; the driver's end-of-application transport errors go to the tasks log)."""
    assert run.returncode == 0, run.stderr[-4000:]
    assert "Traceback" not in run.stderr, run.stderr[-4000:]
    logged = [line for line in run.stderr.splitlines() if JAVA_LOG_LINE.match(line)]
    assert logged == [], logged


@pytest.fixture(scope="module")
def swept(spark_standalone: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory) -> Swept:
    """The shipped grid ``tiny`` (16 runs) swept once on the cluster and once on ``local[1]``."""
    root = tmp_path_factory.mktemp("standalone")
    for run in _on_both(root, lambda side: ["sweep", "tiny", "--out", side], spark_standalone.url).values():
        _ok(run)
    return Swept(spark_standalone, root / "A", root / "B")


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


# ------------------------------------------------------------------ ingest → replay → twin → tune

SCENARIO = twin_sized_scenario("standalone-recorded")
"""A recording of 31 ticks of 3 brokers and 12 bundles (93 load reports): the smallest that twin fits."""

SPACE = "AvgShedder:\n  maxUnloadPercentage: [0.2, 0.35, 0.5, 0.65, 0.8]\n"

PLUGIN = "standalone_plugin"
"""The package of a user's strategy (``builders.ONE_BUNDLE_SHEDDER``), in the driver's working directory
only (``python -m`` puts it on the driver's ``sys.path``): replay ships it to the executors with
``ship_strategy_modules``."""

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
"""The ingest fixtures: every format, bad rows (quarantined), the Python reader's path."""
INGEST_TABLES = ("broker_samples", "bundle_samples", "bundle_data", "quarantine", "ingest_stats")
REPLAY_TABLES = ("decisions", "load", "comparison", "ownership_changes")
PART = re.compile(r"part-\d{5}-[0-9a-f-]{36}")
COMMANDS = ("ingest", "replay", "twin", "tune")


@dataclass(frozen=True)
class Piped:
    cluster: StandaloneCluster
    root: Path
    ran: dict[str, dict[str, Ran]]  # command → side (A: the cluster, B: local[1]) → what it printed


@pytest.fixture(scope="module")
def piped(spark_standalone: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory) -> Piped:
    """A simulator's recording through ``ingest`` (with the ingest fixtures), ``replay`` (a shipped
    plugin among the strategies), ``twin`` and ``tune``, each on the cluster and on ``local[1]`` in the
    same directory, with relative paths (``A/…``, ``B/…``) as a user in a shell gives them."""
    from shedlab.core.sim import run_simulation
    from shedlab.core.sim.recording import write_recording
    from shedlab.core.sim.scenario import parse_scenario_text

    root = tmp_path_factory.mktemp("pipeline")
    write_recording(run_simulation(parse_scenario_text(SCENARIO, "recorded"), record=True), root / "rec")
    (root / "space.yaml").write_text(SPACE, encoding="utf-8")
    (root / PLUGIN).mkdir()
    (root / PLUGIN / "__init__.py").write_text('"""A user\'s strategies."""\n', encoding="utf-8")
    (root / PLUGIN / "shedders.py").write_text(ONE_BUNDLE_SHEDDER, encoding="utf-8")
    strategies = f"AvgShedder,{PLUGIN}.shedders:OneBundle+LeastLongTermMessageRate"
    commands: dict[str, Callable[[str], list[str]]] = {
        "ingest": lambda side: ["ingest", "rec/load-reports.jsonl", str(FIXTURES), "--out", f"{side}/snap"],
        "replay": lambda side: [
            *(
                "replay",
                f"{side}/snap",
                "-s",
                strategies,
                "--cluster",
                "sim-cluster",
                "--out",
                f"{side}/replay",
            )
        ],
        "twin": lambda side: [
            *(
                "twin",
                f"{side}/snap",
                "--cluster",
                "sim-cluster",
                "--out",
                f"{side}/twin.yaml",
                "--seeds",
                "2",
            )
        ],
        "tune": lambda side: [
            *("tune", "--twin", f"{side}/twin.yaml", "--out", f"{side}/tune", "-s", "AvgShedder"),
            *("--space", "space.yaml", "--seeds", "2", "--candidates", "3"),
        ],
    }
    ran = {name: _on_both(root, commands[name], spark_standalone.url) for name in COMMANDS}
    return Piped(spark_standalone, root, ran)


def _spark_files(root: Path) -> dict[str, Path]:
    """The files under ``root``, Spark's part files named without their task number and write id."""
    return {PART.sub("part-*", name): path for name, path in _files(root).items()}


def _same_tables(a: Path, b: Path, tables: tuple[str, ...]) -> None:
    """Each table of ``a`` has the files of ``b``'s (the same partition directories, one file each) with the
    same rows in the same order and the same schema and metadata."""
    for table in tables:
        ours, theirs = _spark_files(a / table), _spark_files(b / table)
        assert ours.keys() == theirs.keys(), table
        for name, path in ours.items():
            if path.suffix != ".parquet":
                assert path.read_bytes() == theirs[name].read_bytes(), name
                continue
            x, y = pq.read_table(path), pq.read_table(theirs[name])
            assert x.schema.equals(y.schema, check_metadata=True), name
            assert x.equals(y), name


@pytest.mark.parametrize("command", COMMANDS)
def test_the_pipeline_runs_on_the_cluster_as_on_local(piped: Piped, command: str) -> None:
    """Exit 0 on both, and the same report on the console, up to the output's name (``A/`` or ``B/``)."""
    cluster, local = piped.ran[command]["A"], piped.ran[command]["B"]
    _ok(cluster)
    _ok(local)
    assert cluster.stdout.replace("A/", "B/") == local.stdout


def test_the_pipeline_ran_on_the_cluster_s_executor_and_wrote_nothing_there(piped: Piped) -> None:
    """Every command was an application of the cluster, and no file of an output went to the executors'
    working directories (a relative ``--out`` of a sweep used to: twin's validation)."""
    apps = piped.cluster.state()["completedapps"]
    assert isinstance(apps, list)
    names = [app["name"] for app in apps]
    for command in COMMANDS:
        assert any(command in name for name in names), (command, names)
    assert list(piped.cluster.work_dir.glob("app-*/*/A")) == []


def test_ingest_on_the_cluster_writes_the_tables_of_a_local_ingest(piped: Piped) -> None:
    """The same rows in the same files. Not the same bytes: parquet-mr writes a column chunk's encodings
    in the order of a Java ``HashSet``, which is not the same in two JVMs."""
    a, b = piped.root / "A" / "snap", piped.root / "B" / "snap"
    _same_tables(a, b, INGEST_TABLES)
    assert pq.read_table(a / "quarantine").num_rows > 0
    clusters = {p.name for p in (a / "broker_samples").iterdir()}
    assert "cluster=sim-cluster" in clusters and len(clusters) > 1


def test_replay_on_the_cluster_writes_the_tables_of_a_local_replay(piped: Piped) -> None:
    """The shipped plugin ran on the executor: its decisions are in the tables, as on ``local[1]``."""
    a, b = piped.root / "A" / "replay", piped.root / "B" / "replay"
    _same_tables(a, b, REPLAY_TABLES)
    decided = pq.read_table(a / "decisions").to_pandas()
    assert decided["strategy"].astype(str).str.startswith(f"{PLUGIN}.shedders:OneBundle").any()
    manifests = [json.loads((out / "replay.json").read_text()) for out in (a, b)]
    assert manifests[0].pop("snapshots") == "A/snap" and manifests[1].pop("snapshots") == "B/snap"
    assert manifests[0] == manifests[1]


def test_twin_and_tune_on_the_cluster_give_the_local_twin_and_recommendation(piped: Piped) -> None:
    """The twin and its fit report, the validation runs the executors wrote, and tune's outputs are the
    local ones (``tune.json`` whole), except where they name the recording: the twin's text names it
    (``A/snap``), so its digest differs, which names the validation's directory and is each run
    summary's ``scenario_digest``; and the summaries' wall-clock fields (``TIMING``)."""
    a, b = piped.root / "A", piped.root / "B"
    twins = [(out / "twin.yaml").read_text() for out in (a, b)]
    assert twins[0].replace("A/snap", "B/snap") == twins[1]
    assert (a / "twin-fit" / "fit-report.md").read_text() == (b / "twin-fit" / "fit-report.md").read_text()
    validation = [list((out / "twin-fit" / "validation").iterdir()) for out in (a, b)]
    assert len(validation[0]) == len(validation[1]) == 1
    ours, theirs = validation[0][0], validation[1][0]
    for table in RUN_TABLES:
        x, y = _files(ours / table), _files(theirs / table)
        assert x.keys() == y.keys() != set(), table
        assert [p.read_bytes() for p in x.values()] == [p.read_bytes() for p in y.values()], table
    x, y = _files(ours / "runs"), _files(theirs / "runs")
    assert x.keys() == y.keys() and len(x) == 2  # --seeds 2
    for name, path in x.items():
        drop = [*TIMING, "scenario_digest"]
        assert pq.read_table(path).drop_columns(drop).equals(pq.read_table(y[name]).drop_columns(drop))
    tuned = [_files(out / "tune") for out in (a, b)]
    assert tuned[0].keys() == tuned[1].keys()
    for name in ("tune.md", "recommendation.conf", "candidates.csv"):
        assert tuned[0][name].read_bytes() == tuned[1][name].read_bytes(), name
    docs = [json.loads(files["tune.json"].read_text()) for files in tuned]
    assert docs[0] == docs[1] and docs[0]["fragment"]
    for table in RUN_TABLES:  # the rungs' runs, written by the executors
        x, y = _files(a / "tune" / table), _files(b / "tune" / table)
        assert x.keys() == y.keys(), table
        assert [p.read_bytes() for p in x.values()] == [p.read_bytes() for p in y.values()], table


def test_executors_import_the_package_from_one_folder_per_content(piped: Piped) -> None:
    """The executors' Python (``XDG_CACHE_HOME`` is the cluster's ``cache/``) imported shedlab from the
    shipped zip's content extracted once, whichever application shipped it, and Numba cached the
    compiled kernels beside it, not per application in ``cache/numba``."""
    cache = piped.cluster.dir / "cache"
    packages = sorted((cache / "shedlab").glob("package-*"))
    assert len(packages) == 1, packages
    assert list((packages[0] / "shedlab" / "__pycache__").glob("kernels.*.nbi"))
    assert not (cache / "numba").exists()
