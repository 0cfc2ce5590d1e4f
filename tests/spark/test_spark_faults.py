"""Spark-side failures caused by user input, and faults: one clear line (exit 2, no traceback, no Java
stack) or, for a damaged file among good ones, the damage set aside and reported, nothing else lost."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pytest

from shedlab.cli import main
from shedlab.core.grid import load_grid
from shedlab.core.local_parquet import read_local_parquet
from shedlab.errors import ConfigError
from shedlab.spark.session import validate_master

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GRID = FIXTURES / "grid_tiny.yaml"
REPORTS = FIXTURES / "ingest" / "load_reports.jsonl"
JAVA_STACK = ("\tat ", "java.", "org.apache.spark", "Py4J")


def _one_line_error(code: int, err: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and not any(s in err for s in JAVA_STACK), err


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``shedlab ARGS`` in this process (the failures below happen before Spark starts)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    return int(info.value.code or 0), capsys.readouterr().err


# ------------------------------------------------------------------ --master


BAD_MASTERS = [
    "mesos://zk1:2181/mesos",
    "mesos://host:5050",
    "local[two]",
    "local[0]",
    "local[]",
    "local[2",
    "local[-1]",
    "localhost",
    "garbage",
    "spark://",
    "yarn-cluster",
    "k8s://",
    "",
    # a Java stack trace once the JVM had started, "Invalid master URL" (until 29 Nov 2026): each standalone
    # master needs a host java.net.URI reads and a port; Spark's patterns read ASCII digits and spaces only
    "spark://host",
    "spark://h1:7077,h2",
    "spark://host_1:7077",
    "spark://hôte:7077",
    "spark://host:٧٠٧٧",
    "spark://host:70000",
    "spark://host:0",
    "spark://host.123:7077",  # java.net.URI: the last of several labels starts with a letter
    "spark://10.0.0.300:7077",
    "spark://10.0.7:7077",
    "local[٤]",
    "local[2,\u00a03]",
]
GOOD_MASTERS = [
    "local",
    "local[1]",
    "local[8]",
    "local[*]",
    "local[2,3]",
    "local[*,2]",
    "local-cluster[2,1,1024]",
    "spark://host:7077",
    "spark://h1:7077,h2:7077",
    "spark://10.0.0.7:7077,[::1]:7077,master.example.com.:7077",
    "spark://123:7077,h-1.x9:7077",
    "yarn",
    "k8s://https://api.example.com:6443",
]


@pytest.mark.parametrize("master", BAD_MASTERS)
def test_a_master_spark_does_not_accept_is_refused_with_the_accepted_forms(master: str) -> None:
    with pytest.raises(ConfigError, match="--master") as info:
        validate_master(master)
    text = str(info.value)
    assert "\n" not in text and "local[N]" in text and "spark://host:port" in text and "yarn" in text
    if master.startswith("mesos://"):
        assert "Mesos" in text


@pytest.mark.parametrize("master", GOOD_MASTERS)
def test_the_forms_spark_accepts_pass(master: str) -> None:
    assert validate_master(master) == master


@pytest.mark.parametrize("master", ["mesos://host:5050", "local[two]", "local[0]", "garbage"])
def test_a_bad_master_fails_every_command_before_a_jvm_starts(master: str, tmp_path: Path) -> None:
    """A new process: nothing of Spark may have started (no Java output at all), for each command."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    (tmp_path / "sweep" / "runs").mkdir(parents=True)
    commands = [
        ["sweep", str(GRID), "--out", str(tmp_path / "o")],
        ["evaluate", str(tmp_path / "sweep")],
        ["ingest", str(REPORTS), "--out", str(tmp_path / "o")],
    ]
    for command in commands[: 1 if master != "garbage" else 3]:
        proc = subprocess.run(
            [sys.executable, "-m", "shedlab", *command, "--master", master],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        _one_line_error(proc.returncode, proc.stderr)
        assert "--master" in proc.stderr and proc.stdout == ""


# ------------------------------------------------------------------ --out naming a file


def _ingest_output(root: Path) -> Path:
    for table in ("broker_samples", "bundle_samples"):
        (root / table).mkdir(parents=True)
    return root


@pytest.mark.parametrize("command", ["sweep", "ingest", "replay", "evaluate"])
def test_an_out_that_is_a_file_is_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = tmp_path / "results.parquet"
    afile.write_bytes(b"PAR1")
    (tmp_path / "sweep" / "runs").mkdir(parents=True)
    args = {
        "sweep": ["sweep", str(GRID)],
        "ingest": ["ingest", str(REPORTS)],
        "replay": ["replay", str(_ingest_output(tmp_path / "snap")), "-s", "AvgShedder"],
        "evaluate": ["evaluate", str(tmp_path / "sweep")],
    }[command]
    for out in (afile, afile / "below"):
        code, err = _cli(capsys, *args, "--out", str(out))
        _one_line_error(code, err)
        assert "--out" in err and str(afile) in err


# ------------------------------------------------------------------ binary inputs


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("reports.json", gzip.compress(REPORTS.read_bytes())),
        ("reports.jsonl", gzip.compress(REPORTS.read_bytes())),
        ("reports.json", os.urandom(64) + b"\x00"),
        ("samples.parquet", gzip.compress(b"{}")),
        ("samples.parquet", b"PAR1" + os.urandom(200)),
    ],
)
def test_binary_data_given_to_ingest_is_one_line_naming_the_file(
    name: str, data: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    code, err = _cli(capsys, "ingest", str(path), "--out", str(tmp_path / "out"))
    _one_line_error(code, err)
    assert str(path) in err
    assert not (tmp_path / "out").exists()


def test_replay_refuses_what_is_not_a_whole_ingest_output_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out")
    code, err = _cli(capsys, "replay", str(tmp_path), "-s", "AvgShedder", "--out", out)
    _one_line_error(code, err)
    assert "not an ingest output" in err
    snap = _ingest_output(tmp_path / "snap")
    part = snap / "broker_samples" / "cluster=c" / "day=2025-01-01"
    part.mkdir(parents=True)
    (part / "part-00000.parquet").write_bytes(gzip.compress(b"x" * 100))
    code, err = _cli(capsys, "replay", str(snap), "-s", "AvgShedder", "--out", out)
    _one_line_error(code, err)
    assert "part-00000.parquet: not a Parquet file" in err


# ------------------------------------------------------------------ Spark: damaged files among good ones


@pytest.mark.spark
def test_a_torn_line_is_quarantined_as_invalid_utf8_and_the_rest_kept(
    spark: SparkSession, tmp_path: Path
) -> None:
    from shedlab.spark.ingest import ingest

    lines = REPORTS.read_bytes().splitlines(keepends=True)
    torn = lines[1][:30] + b"\xc3\x28\xff\xfe" + lines[1][30:]  # bytes that are no UTF-8
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"".join([lines[0], torn, *lines[2:]]))
    res = ingest(spark, [str(damaged)], str(tmp_path / "out"), default_cluster="c1")
    reasons = res.reasons.set_index("reason")["count"].to_dict()
    assert reasons.get("invalid_utf8") == 1
    q = read_local_parquet(tmp_path / "out" / "quarantine")
    row = q[q["reason"] == "invalid_utf8"].iloc[0]
    assert row["record"] == 2 and row["raw"]
    assert int(res.stats["records_read"].iloc[0]) == len([x for x in lines if x.strip()])
    assert res.broker_rows > 0


@pytest.mark.spark
def test_a_time_past_year_9999_is_quarantined_and_the_rest_kept(spark: SparkSession, tmp_path: Path) -> None:
    """A wrapper whose timestamp fits a Java long but not Spark's microsecond timestamps (year 3 million)
    failed the whole ingest with a Java 'long overflow'; now it is one invalid_timestamp row."""
    from shedlab.spark.ingest import ingest

    lines = REPORTS.read_bytes().splitlines(keepends=True)
    far = json.loads(lines[1])
    far["timestamp"] = 99_999_999_999_999_999
    damaged = tmp_path / "far.jsonl"
    damaged.write_bytes(b"".join([lines[0], json.dumps(far).encode() + b"\n", *lines[2:]]))
    res = ingest(spark, [str(damaged)], str(tmp_path / "out"), default_cluster="c1")
    reasons = res.reasons.set_index("reason")["count"].to_dict()
    assert reasons.get("invalid_timestamp") == 1
    whole = ingest(spark, [str(REPORTS)], str(tmp_path / "whole"), default_cluster="c1")
    assert res.broker_rows == whole.broker_rows - 1


@pytest.mark.spark
def test_evaluate_quarantines_an_unreadable_run_file_and_a_resume_runs_it_again(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shedlab.spark.evaluate import evaluate
    from shedlab.spark.sweep import sweep

    out = tmp_path / "sweep"
    grid = load_grid(GRID)
    sweep(spark, grid, str(out))
    whole = evaluate(spark, str(out))
    victims = sorted((out / "runs").rglob("run-*.parquet"))[:2]
    data = victims[0].read_bytes()
    victims[0].write_bytes(data[: len(data) // 2])  # torn
    victims[1].write_bytes(gzip.compress(data))  # garbage
    # A stray temporary of a killed writer, older than the next sweep.
    stray = victims[0].parent / ".run-x.1.tmp"
    stray.write_bytes(b"partial")
    os.utime(stray, (1, 1))

    code = 0
    with pytest.raises(SystemExit) as info:
        main(["evaluate", str(out), "--json"])
    code = int(info.value.code or 0)
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["runs_ok"] == 14 and len(doc["quarantined"]) == 2
    assert {Path(q["file"]).name for q in doc["quarantined"]} == {v.name for v in victims}
    assert all(q["reason"] for q in doc["quarantined"])
    assert any("quarantine" in n for n in doc["notes"])
    assert len(list((out / "quarantine" / "runs").rglob("run-*.parquet"))) == 2

    resumed = sweep(spark, grid, str(out))
    assert (resumed.ran, resumed.skipped, resumed.temporaries_removed) == (2, 14, 1)
    assert not stray.exists()
    again = evaluate(spark, str(out))
    assert again.quarantined == [] and again.runs_ok == 16
    keys = ["scenario", "strategy", "params_id", "metric"]
    pd.testing.assert_frame_equal(
        again.metric_stats.sort_values(keys).reset_index(drop=True),
        whole.metric_stats.sort_values(keys).reset_index(drop=True),
        rtol=1e-9,
    )


@pytest.mark.spark
def test_empty_replay_tables_keep_their_columns(spark: SparkSession, tmp_path: Path) -> None:
    from shedlab.spark.replay import _write_partitioned
    from shedlab.spark.schemas import OWNERSHIP_CHANGE, REPLAY_DECISION, field_names

    for name, schema, keys in (
        ("decisions", REPLAY_DECISION, ("cluster", "strategy")),
        ("ownership_changes", OWNERSHIP_CHANGE, ("cluster",)),
    ):
        _write_partitioned(spark.createDataFrame([], schema), str(tmp_path / name), keys)
        frame = read_local_parquet(tmp_path / name)
        assert frame.empty and set(field_names(schema)) - set(keys) <= set(frame.columns)
        assert spark.read.parquet(str(tmp_path / name)).count() == 0
