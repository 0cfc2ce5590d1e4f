"""A Spark job that failed on a file it could not read: one line naming the file and Spark's reason,
exit 2, no Java stack (``shedlab.spark.failures``, the command line, the tasks' log)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]  # no stubs (as in src/)
import pyarrow.compute as pc  # type: ignore[import-untyped]  # no stubs (as in src/)
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # no stubs (as in src/)
import pytest

from shedlab.errors import InputError
from shedlab.spark.failures import read_failure
from shedlab.spark.session import SPARK_TASKS_LOG

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FILE = "file:///data/snap/broker_samples/cluster=c/day=2024-03-04/part-00003-ae0b.c000.snappy.parquet"
MISMATCH = (
    "An error occurred while calling o414.localCheckpoint.\n"
    ": org.apache.spark.SparkException: [FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH] Encountered "
    f"error while reading file {FILE}. Data type mismatches when reading Parquet column [cpu_usage]. "
    "Expected Spark type double, actual Parquet type BINARY. SQLSTATE: KD001\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.parquetColumnDataTypeMismatchError(X.scala:840)\n"
)
NO_HINT = (
    "An error occurred while calling o1.collect.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 5.0 failed 1 "
    "times, most recent failure: Lost task 0.0: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] "
    "Encountered error while reading file s3a://bucket/snap/part-0.parquet.  SQLSTATE: KD001\n"
    "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(X.scala:1)\n"
    "Caused by: org.apache.hadoop.fs.FSError: java.io.IOException: read failed\n"
    "\tat org.apache.hadoop.fs.X.read(X.java:1)\n"
    "Caused by: org.apache.hadoop.fs.ChecksumException: Checksum error: "
    "s3a://bucket/snap/part-0.parquet at 233984\n"
    "\tat org.apache.hadoop.fs.Y.read(Y.java:1)\n"
)


def _spark_error(text: str, module: str = "py4j.protocol") -> Exception:
    """An exception of Spark's gateway (its class's module is what marks it) whose text is ``text``."""
    cls: type[Exception] = type("Py4JJavaError", (Exception,), {"__module__": module})
    return cls(text)


def test_a_column_of_another_type_names_the_file_the_column_and_both_types() -> None:
    error = read_failure(_spark_error(MISMATCH))
    assert isinstance(error, InputError) and error.exit_code == 2
    line = str(error)
    assert line.startswith(f"{FILE[len('file://') :]}: Spark could not read this file: Data type mismatches")
    assert "[cpu_usage]. Expected Spark type double, actual Parquet type BINARY;" in line
    assert "SQLSTATE" not in line and "\n" not in line


def test_without_spark_s_reason_the_deepest_java_cause_is_the_reason() -> None:
    error = read_failure(_spark_error(NO_HINT, "pyspark.errors.exceptions.captured"))
    assert error is not None
    assert error.source == "s3a://bucket/snap/part-0.parquet"  # a remote URI stays whole
    assert error.message == (
        "Spark could not read this file: ChecksumException: Checksum error: s3a://bucket/snap/part-0.parquet "
        "at 233984"
    )


def test_a_recording_cut_short_is_not_told_to_check_its_column_types() -> None:
    """A ``.jsonl.gz`` cut short by a copy (Java's EOFException) was told 'was it rewritten with other
    column types?', a hint for a Parquet table."""
    text = (
        "An error occurred while calling o97.collect.\n"
        ": org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:///rec/a.jsonl.gz.  SQLSTATE: KD001\n"
        "Caused by: java.io.EOFException: Unexpected end of input stream\n"
    )
    error = read_failure(_spark_error(text))
    assert error is not None and error.source == "/rec/a.jsonl.gz"
    assert "column types" not in str(error) and "is the file whole?" in str(error)
    assert "column types" in str(read_failure(_spark_error(MISMATCH)))


def test_a_scheme_without_a_filesystem_is_one_line() -> None:
    """``twin s3://b/x`` where Spark has no S3 filesystem was a Java stack trace (28 Nov 2026)."""
    text = (
        "An error occurred while calling o83.parquet.\n"
        ': org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "s3"\n'
        "\tat org.apache.hadoop.fs.FileSystem.getFileSystemClass(FileSystem.java:3612)\n"
    )
    error = read_failure(_spark_error(text))
    assert error is not None and error.exit_code == 2
    assert str(error) == (
        "this Spark has no filesystem for s3:// locations (Hadoop's UnsupportedFileSystemException); put its"
        " connector on Spark's classpath (for S3: hadoop-aws, and s3a:// locations)"
    )


@pytest.mark.parametrize(
    "exc",
    [
        ValueError(MISMATCH),  # the same words from elsewhere: not Spark's
        _spark_error("An error occurred while calling o1.collect.\n: java.lang.OutOfMemoryError: heap"),
        _spark_error("[FAILED_READ_FILE] but not the sentence Spark writes"),
    ],
    ids=["not-spark", "another-failure", "another-sentence"],
)
def test_any_other_exception_is_not_a_read_failure(exc: Exception) -> None:
    assert read_failure(exc) is None


def test_a_long_reason_is_cut() -> None:
    long = MISMATCH.replace("Data type mismatches", "x" * 1000)
    error = read_failure(_spark_error(long))
    assert error is not None and len(error.message) < 400 and error.message.endswith("…")


@pytest.mark.spark
def test_replay_of_an_ingest_output_with_a_column_of_another_type_is_one_line(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A user rewrote a broker_samples file with ``cpu_usage`` as text: whole Parquet with every column,
    so it passes the checks before Spark, and Spark's executor fails on it. A fresh command prints one
    line naming the file, the column and both types, exits 2, and shows no Java stack; the executor's
    stack is in the tasks' log."""
    from shedlab.cli import main

    snap = tmp_path / "snap"
    recording = Path(__file__).resolve().parents[2] / "src" / "shedlab" / "data" / "recordings" / "demo"
    with pytest.raises(SystemExit) as done:
        main(["ingest", str(recording), "--out", str(snap)])
    assert done.value.code == 0
    edited = sorted((snap / "broker_samples").rglob("*.parquet"))[0]
    table = pq.read_table(edited)
    column = table.schema.get_field_index("cpu_usage")
    pq.write_table(table.set_column(column, "cpu_usage", pc.cast(table["cpu_usage"], pa.string())), edited)
    env: dict[str, Any] = {**os.environ, "COLUMNS": "400", "SPARK_LOCAL_DIRS": str(tmp_path)}
    logged = SPARK_TASKS_LOG.stat().st_size if SPARK_TASKS_LOG.exists() else 0
    replay = ["replay", str(snap), "-s", "AvgShedder", "--out", str(tmp_path / "out")]
    run = subprocess.run(
        [sys.executable, "-m", "shedlab", *replay], capture_output=True, text=True, env=env, timeout=600
    )
    lines = run.stderr.splitlines()  # the JVM's incubator warning too is gone (spark/jvm_stderr.py)
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith(f"error: {edited}: Spark could not read this file: ")
    assert "Parquet column [cpu_usage]. Expected Spark type double, actual Parquet type BINARY" in lines[0]
    assert "Traceback" not in run.stderr and "\tat " not in run.stderr
    assert b"ERROR Executor: Exception in task" in _logged_since(logged)


def _logged_since(offset: int) -> bytes:
    """The tasks log from ``offset`` on, across a rollover (session.py: one previous file, ``.1``)."""
    current = SPARK_TASKS_LOG.read_bytes()
    if len(current) >= offset:
        return current[offset:]
    return Path(f"{SPARK_TASKS_LOG}.1").read_bytes()[offset:] + current
