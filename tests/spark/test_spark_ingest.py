"""Ingest with Spark: every accepted format end to end, with kept / merged / quarantined counts and reasons.

The parsing and validation rules themselves are tested without Spark in ``tests/core/test_ingest.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa  # type: ignore[import-untyped]  # no stubs (as in src/)
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # no stubs (as in src/)
import pytest

from shedlab.core.ingest import RAW_COLUMNS, STAGED_COLUMNS
from shedlab.core.local_parquet import read_local_parquet
from shedlab.spark.ingest import IngestResult
from shedlab.spark.schemas import RAW_ROW, STAGED_ROW, struct

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
REPORTS = str(FIXTURES / "load_reports.jsonl")
PROM = str(FIXTURES / "prometheus_query_range.json")
BUNDLE_DATA = str(FIXTURES / "bundle_data.jsonl")
PRETTY = str(FIXTURES / "load_report_b3.json")


def test_raw_row_schema_is_derived_from_the_formats() -> None:
    """RAW_ROW and STAGED_ROW hold the columns that core.ingest emits (derived from model.formats)."""
    for schema, cols in ((RAW_ROW, RAW_COLUMNS), (STAGED_ROW, STAGED_COLUMNS)):
        assert [(f.name, f.dataType) for f in schema.fields] == [
            (f.name, f.dataType) for f in struct(*cols).fields
        ]


# ------------------------------------------------------------------ Spark


@pytest.fixture(scope="module")
def fixture_ingest(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> IngestResult:
    from shedlab.spark.ingest import ingest

    out = tmp_path_factory.mktemp("ingest") / "snap"
    return ingest(spark, [str(FIXTURES)], str(out), default_cluster="c1")


def _stats(result: IngestResult, name: str) -> dict[str, Any]:
    row = result.stats[result.stats["source"].str.endswith(name)]
    assert len(row) == 1
    return dict(row.iloc[0])


@pytest.mark.spark
def test_ingest_load_reports(fixture_ingest: IngestResult) -> None:
    s = _stats(fixture_ingest, "load_reports.jsonl")
    assert s["records_read"] == 18
    assert s["rows_read"] == 59
    assert (s["broker_rows_kept"], s["bundle_rows_kept"], s["rows_merged"], s["rows_quarantined"]) == (
        13,
        30,
        6,
        10,
    )  # b3's report without cpu (0/0, Pulsar's default) and b1's with NIC limit 0 (0 %) are kept
    assert (
        s["rows_read"]
        == s["broker_rows_kept"] + s["bundle_rows_kept"] + s["rows_merged"] + s["rows_quarantined"]
    )
    reasons = fixture_ingest.reasons
    mine = (
        reasons[reasons["source"].str.endswith("load_reports.jsonl")].set_index("reason")["count"].to_dict()
    )
    assert mine == {
        "double_claim": 2,
        "legacy_load_report": 1,
        "malformed_json": 1,
        "nan_value": 2,
        "negative_value": 1,
        "report_quarantined": 3,
    }


@pytest.mark.spark
def test_ingest_other_formats(fixture_ingest: IngestResult) -> None:
    prom = _stats(fixture_ingest, "prometheus_query_range.json")
    assert (prom["rows_read"], prom["broker_rows_kept"], prom["bundle_rows_kept"]) == (103, 20, 25)
    assert (prom["rows_merged"], prom["rows_quarantined"]) == (48, 10)
    bd = _stats(fixture_ingest, "bundle_data.jsonl")
    assert (bd["rows_read"], bd["bundle_data_rows_kept"], bd["rows_quarantined"]) == (5, 3, 2)
    pretty = _stats(fixture_ingest, "load_report_b3.json")
    assert (pretty["broker_rows_kept"], pretty["bundle_rows_kept"], pretty["rows_quarantined"]) == (1, 2, 0)
    reasons = fixture_ingest.reasons
    prom_reasons = reasons[reasons["source"].str.endswith("prometheus_query_range.json")]
    assert prom_reasons.set_index("reason")["count"].to_dict() == {
        "double_claim": 6,
        "nan_value": 1,
        "negative_value": 1,
        "unknown_metric": 2,
    }
    assert fixture_ingest.clusters == ["c1", "c2"]


@pytest.mark.spark
def test_ingest_output_tables(spark: SparkSession, fixture_ingest: IngestResult) -> None:
    from shedlab.spark.ingest import read_snapshots

    out = Path(fixture_ingest.out)
    assert {p.name for p in (out / "broker_samples").iterdir() if p.is_dir()} == {"cluster=c1", "cluster=c2"}
    assert (out / "broker_samples" / "cluster=c1" / "day=2025-01-01").is_dir()
    brokers, bundles, dumps = read_snapshots(spark, str(out))
    b = brokers.toPandas()
    # the rows written, not the points read: 20 kept Prometheus gauge points pivot into 4 broker rows
    assert len(b) == fixture_ingest.broker_rows and fixture_ingest.prometheus_rows[0] == 4
    assert _stats(fixture_ingest, "prometheus_query_range.json")["broker_rows_kept"] == 20
    assert bundles.count() == fixture_ingest.bundle_rows
    assert (b["tick_ms"] % 60_000 == 0).all()
    # Prometheus gauges are percentages with limit 100; totals come from the bundle series
    p1 = b[(b["cluster"] == "c2") & (b["broker"] == "p1:8080")].sort_values("tick_ms")
    assert list(p1["cpu_usage"]) == [61.0, 63.0] and set(p1["cpu_limit"]) == {100.0}
    assert list(p1["msg_rate_in"]) == [610.0, 620.0]
    u = bundles.toPandas()
    claimed = u[(u["bundle"] == "public/default/0x80000000_0xa0000000") & (u["tick_ms"] == 1735689780000)]
    assert claimed.empty  # quarantined: claimed by b2 and b4 in the same tick
    q = read_local_parquet(out / "quarantine")
    assert len(q) == fixture_ingest.quarantined_rows
    assert q["reason"].notna().all() and q["detail"].notna().all()
    assert set(q.loc[q["reason"] == "malformed_json", "cluster"].astype(str)) == {"unknown"}
    assert dumps is not None and dumps.count() == 3


@pytest.mark.spark
def test_ingest_canonical_parquet(spark: SparkSession, fixture_ingest: IngestResult, tmp_path: Path) -> None:
    from shedlab.spark.ingest import ingest

    again = ingest(spark, [fixture_ingest.out], str(tmp_path / "again"))
    assert len(again.stats) == 1 and again.stats.iloc[0]["source_kind"] == "parquet"
    s = dict(again.stats.iloc[0])
    brokers_before = read_local_parquet(Path(fixture_ingest.out) / "broker_samples")
    bundles_before = read_local_parquet(Path(fixture_ingest.out) / "bundle_samples")
    assert s["broker_rows_kept"] == len(brokers_before)
    assert s["bundle_rows_kept"] == len(bundles_before)
    assert s["bundle_data_rows_kept"] == 3
    assert s["rows_quarantined"] == 0 and s["rows_merged"] == 0
    # a canonical Parquet file with a NaN and a negative value
    bad = brokers_before.head(3).copy()
    bad.loc[bad.index[0], "cpu_usage"] = float("nan")
    bad.loc[bad.index[1], "msg_rate_in"] = -1.0
    bad["day"] = bad["day"].astype(str)
    table = pa.Table.from_pandas(bad, preserve_index=False)
    # pandas would store NaN as null; write a real NaN, as a Spark job or a Java writer would
    nan_cpu = pa.array(bad["cpu_usage"].to_numpy(), from_pandas=False)
    table = table.set_column(table.schema.get_field_index("cpu_usage"), "cpu_usage", nan_cpu)
    pq.write_table(table, tmp_path / "bad.parquet")
    res = ingest(spark, [str(tmp_path / "bad.parquet")], str(tmp_path / "bad_out"))
    r = dict(res.stats.iloc[0])
    assert (r["rows_read"], r["broker_rows_kept"], r["rows_quarantined"]) == (3, 1, 2)
    assert res.reasons.set_index("reason")["count"].to_dict() == {"nan_value": 1, "negative_value": 1}


def _broker_table(n: int = 1, **columns: Any) -> Any:
    """A canonical broker_samples table of ``n`` rows (every required column), ``columns`` replaced."""
    from shedlab.model.formats import resource_columns

    good: dict[str, Any] = {
        "cluster": pa.array(["c1"] * n),
        "time_ms": pa.array([1_735_689_600_000] * n, pa.int64()),
        "broker": pa.array([f"b{i}:8080" for i in range(n)]),
        **{name: pa.array([1.0] * n) for name, _type in resource_columns()},
    }
    return pa.table({**good, **columns})


@pytest.mark.spark
@pytest.mark.parametrize(
    ("column", "values", "shown"),
    [
        ("cpu_usage", pa.array(["x"]), "column cpu_usage: expected double values, found string"),
        ("broker", pa.array([5], pa.int64()), "column broker: expected string values, found bigint"),
        ("num_topics", pa.array([True]), "column num_topics: expected bigint values, found boolean"),
    ],
)
def test_a_parquet_column_of_another_kind_is_refused_naming_it(
    spark: SparkSession, tmp_path: Path, column: str, values: Any, shown: str
) -> None:
    """Spark's cast of a string column failed the whole ingest with a Java stack and a Python traceback
    ('x' as a double); a boolean was read as the count 0/1, a number as the broker named '5'."""
    from shedlab.errors import InputError
    from shedlab.spark.ingest import ingest

    pq.write_table(_broker_table(**{column: values}), tmp_path / "b.parquet")
    with pytest.raises(InputError) as caught:
        ingest(spark, [str(tmp_path / "b.parquet")], str(tmp_path / "out"))
    assert shown in str(caught.value) and str(tmp_path / "b.parquet") in str(caught.value)


@pytest.mark.spark
def test_a_parquet_value_an_integer_column_cannot_hold_is_quarantined(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Doubles and longs where the canonical column is an integer (pandas writes an integer column with a
    null as doubles): whole values are read, and a row holding 1.5, NaN or a long past an int is
    quarantined as invalid_value; the cast cut 1.5 to 1, or failed the job with a Java stack."""
    from shedlab.core.local_parquet import read_local_parquet
    from shedlab.spark.ingest import ingest

    table = _broker_table(
        4,
        time_ms=pa.array([1.7356896e12, 1.7356896e12, float("nan"), 1.7356896e12]),
        num_topics=pa.array([3.0, 1.5, 3.0, 3.0]),
        num_bundles=pa.array([3, 3, 3, 2**40], pa.int64()),
        cpu_usage=pa.array([1, 2, 3, 4], pa.int32()),
    )
    pq.write_table(table, tmp_path / "b.parquet")
    res = ingest(spark, [str(tmp_path / "b.parquet")], str(tmp_path / "out"))
    assert (res.broker_rows, res.quarantined_rows) == (1, 3)
    kept = read_local_parquet(tmp_path / "out" / "broker_samples").iloc[0]
    assert (kept["broker"], kept["time_ms"], kept["num_topics"], kept["cpu_usage"]) == (
        "b0:8080",
        1_735_689_600_000,
        3,
        1.0,
    )
    details = set(read_local_parquet(tmp_path / "out" / "quarantine")["detail"])
    assert details == {
        "num_topics: 1.5 is not an integer within ±(2^53 - 1), what ingest keeps exactly",
        "time_ms: NaN is not an integer within ±(2^53 - 1), what ingest keeps exactly",
        "num_bundles: 1099511627776 is not an integer that fits int",
    }


@pytest.mark.spark
@pytest.mark.parametrize("ansi", ["true", "false"])
def test_a_parquet_value_of_two_to_the_63_is_quarantined_in_either_ansi_mode(
    spark: SparkSession, tmp_path: Path, ansi: str
) -> None:
    """2^63 is 2^63 - 1 as a double, so it passed the range check: a double was cast to
    9223372036854775807 and kept (beside a null in its group, a pandas traceback), and a decimal failed the
    job with CAST_OVERFLOW under ANSI (pyspark 4's default) and became a null quarantined as
    negative_value with spark.sql.ansi.enabled=false. Both settings quarantine it now, as invalid_value."""
    from decimal import Decimal

    from shedlab.core.local_parquet import read_local_parquet
    from shedlab.spark.ingest import ingest

    table = _broker_table(
        4,
        num_topics=pa.array([3.0, 2.0**63, 1.5, 3.0]),
        last_update_ms=pa.array([Decimal(1_735_689_600_000)] * 3 + [Decimal(2**63)], pa.decimal128(20, 0)),
    )
    pq.write_table(table, tmp_path / "b.parquet")
    before = spark.conf.get("spark.sql.ansi.enabled") or "true"
    spark.conf.set("spark.sql.ansi.enabled", ansi)
    try:
        res = ingest(spark, [str(tmp_path / "b.parquet")], str(tmp_path / "out"))
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)
    assert (res.broker_rows, res.quarantined_rows) == (1, 3)
    assert read_local_parquet(tmp_path / "out" / "broker_samples").iloc[0]["num_topics"] == 3
    quarantine = read_local_parquet(tmp_path / "out" / "quarantine")
    assert set(quarantine["reason"]) == {"invalid_value"}
    assert set(quarantine["detail"]) == {
        "num_topics: 9.223372036854776E18 is not an integer within ±(2^53 - 1), what ingest keeps exactly",
        "num_topics: 1.5 is not an integer within ±(2^53 - 1), what ingest keeps exactly",
        "last_update_ms: 9223372036854775808 is not an integer within ±(2^53 - 1), what ingest keeps exactly",
    }


@pytest.mark.spark
def test_a_parquet_decimal_with_a_fraction_past_two_to_the_52_is_quarantined(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Between 2^52 and 2^53 a double holds no fraction: 2^52 + 0.5 as a double is 2^52, so the decimal
    passed the fraction test (run on the double) and was cut to 4503599627370496, silently. The test
    runs on the decimal itself; its whole neighbours are kept."""
    from decimal import Decimal

    from shedlab.spark.ingest import ingest

    big, half = 2**52, Decimal("0.5")
    values = [Decimal(big), big + half, 2**53 - 1 - half, Decimal(2**53 - 1)]
    table = _broker_table(4, num_topics=pa.array(values, pa.decimal128(20, 1)))
    pq.write_table(table, tmp_path / "b.parquet")
    res = ingest(spark, [str(tmp_path / "b.parquet")], str(tmp_path / "out"))
    assert (res.broker_rows, res.quarantined_rows) == (2, 2)
    kept = read_local_parquet(tmp_path / "out" / "broker_samples")
    assert sorted(kept["num_topics"]) == [big, 2**53 - 1]
    assert set(read_local_parquet(tmp_path / "out" / "quarantine")["detail"]) == {
        "num_topics: 4503599627370496.5 is not an integer within ±(2^53 - 1), what ingest keeps exactly",
        "num_topics: 9007199254740990.5 is not an integer within ±(2^53 - 1), what ingest keeps exactly",
    }


@pytest.mark.spark
def test_a_parquet_long_past_two_to_the_53_is_quarantined(spark: SparkSession, tmp_path: Path) -> None:
    """A long column with a null reaches ingest's pandas stage as doubles (SPARK-54962): 2^63 - 1 was a
    pandas traceback there, and 2^53 + 1 was written as 2^53. Past 2^53 - 1 is quarantined, as the JSON
    readers quarantine it (formats.MAX_SAFE_INTEGER)."""
    from shedlab.core.local_parquet import read_local_parquet
    from shedlab.spark.ingest import ingest

    table = _broker_table(4, num_topics=pa.array([3, 2**63 - 1, 2**53 + 1, None], pa.int64()))
    pq.write_table(table, tmp_path / "b.parquet")
    res = ingest(spark, [str(tmp_path / "b.parquet")], str(tmp_path / "out"))
    assert (res.broker_rows, res.quarantined_rows) == (2, 2)
    details = set(read_local_parquet(tmp_path / "out" / "quarantine")["detail"])
    assert details == {
        f"num_topics: {n} is not an integer within ±(2^53 - 1), what ingest keeps exactly"
        for n in (2**63 - 1, 2**53 + 1)
    }


@pytest.mark.spark
def test_an_ingest_output_with_empty_tables_is_ingested_again(spark: SparkSession, tmp_path: Path) -> None:
    """A clean recording's output has bundle_data and quarantine as empty directories: ingesting that
    output again (a documented source) failed with Spark's UNABLE_TO_INFER_SCHEMA on bundle_data."""
    from shedlab.core.sim import load_scenario, run_simulation
    from shedlab.core.sim.recording import write_recording
    from shedlab.spark.ingest import ingest

    scenario = load_scenario("over-unloading-90-10")
    write_recording(run_simulation(scenario, seed=1, record=True), tmp_path / "rec")
    first = ingest(spark, [str(tmp_path / "rec" / "load-reports.jsonl")], str(tmp_path / "first"))
    assert not any((tmp_path / "first" / "bundle_data").rglob("*.parquet"))
    again = ingest(spark, [first.out], str(tmp_path / "again"))
    assert (again.broker_rows, again.bundle_rows, again.bundle_data_rows) == (
        first.broker_rows,
        first.bundle_rows,
        0,
    )


@pytest.mark.spark
def test_the_rows_an_ingest_counts_are_the_rows_it_writes(spark: SparkSession, tmp_path: Path) -> None:
    """A recording's load reports and Prometheus exports printed 'kept 2,928 broker and 62,464 bundle
    rows' for tables of 976 and 15,616: the kept Prometheus points (one a value) summed as rows, though
    the points of a broker or bundle and tick make one row."""
    import json

    import typer
    from typer.testing import CliRunner

    from shedlab.cli.spark_cmd import register
    from shedlab.core.sim import load_scenario, run_simulation
    from shedlab.core.sim.recording import write_recording

    scenario = load_scenario("over-unloading-90-10")
    write_recording(run_simulation(scenario, seed=1, record=True), tmp_path / "rec")
    app = typer.Typer()
    register(app)
    sources = [str(tmp_path / "rec" / "load-reports.jsonl"), str(tmp_path / "rec" / "prometheus")]
    res = CliRunner().invoke(app, ["ingest", *sources, "--out", str(tmp_path / "o"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout[res.stdout.index("{") :])
    written = {t: len(read_local_parquet(tmp_path / "o" / t)) for t in ("broker_samples", "bundle_samples")}
    assert {t: doc["rows_written"][t] for t in written} == written
    brokers = read_local_parquet(tmp_path / "o" / "broker_samples")
    per_tick = brokers.groupby(["broker", "tick_ms"])["source_kind"].agg(sorted)
    assert set(per_tick.map(tuple)) == {("load_report", "prometheus")}  # a row from each source
    kept_points = sum(s["broker_rows_kept"] for s in doc["sources"])
    assert kept_points > written["broker_samples"]  # each gauge point is a row read
    text = CliRunner().invoke(app, ["ingest", *sources, "--out", str(tmp_path / "o")])
    assert text.exit_code == 0, text.output
    flat = " ".join(text.stdout.split())
    assert f"wrote {written['broker_samples']:,} broker and {written['bundle_samples']:,} bundle rows" in flat
    assert f"make {len(per_tick):,} broker and " in flat


@pytest.mark.spark
def test_ingest_cli(spark: SparkSession, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from shedlab.cli.spark_cmd import register

    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(app, ["ingest", REPORTS, "--out", str(tmp_path / "o"), "--cluster", "c1"])
    assert res.exit_code == 0, res.output
    assert "quarantined" in res.output and "double_claim" in res.output
    bad = CliRunner().invoke(app, ["ingest", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "x")])
    assert bad.exit_code != 0


@pytest.mark.spark
def test_a_cluster_no_directory_can_be_named_after_is_quarantined_not_fatal(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 300-character cluster name (parsed by the JVM path) aborted the write with a Java traceback; its
    records now go to the quarantine's ``cluster=unknown`` and the rest is kept. A bad ``--cluster`` is
    one line before Spark starts."""
    import json

    from cli_support import error_line

    from shedlab.spark.ingest import ingest

    lines = [json.loads(line) for line in Path(REPORTS).read_text().splitlines()[:4]]
    lines[0]["cluster"] = "x" * 300
    lines[1]["cluster"] = "a:b"
    source = tmp_path / "reports.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = ingest(spark, [str(source)], str(tmp_path / "out"))
    reasons = result.reasons.groupby("reason")["count"].sum().to_dict()
    assert reasons.get("invalid_cluster", 0) >= 1 and result.broker_rows >= 1
    assert "a:b" in result.clusters and (tmp_path / "out" / "quarantine" / "cluster=unknown").is_dir()
    line = error_line(["ingest", str(source), "--out", str(tmp_path / "x"), "--cluster", "a b"], capsys)
    assert "--cluster: cluster 'a b' is not a Pulsar cluster name" in line
    assert not (tmp_path / "x").exists()


@pytest.mark.spark
def test_ingest_bare_bundle_data_takes_its_file_time(spark: SparkSession, tmp_path: Path) -> None:
    """BundleData exactly as stored under /loadbalance/bundle-data (no time of its own) is kept."""
    import json
    import os

    from shedlab.spark.ingest import ingest

    average = {"msgRateIn": 1.0, "msgRateOut": 2.0, "msgThroughputIn": 3.0, "msgThroughputOut": 4.0}
    data = {"shortTermData": {"maxSamples": 10, **average}, "longTermData": {"maxSamples": 1000, **average}}
    dump = tmp_path / "bundle-data.jsonl"
    dump.write_text(json.dumps({"bundle": "t/n/0x00000000_0xffffffff", **data}) + "\n")
    os.utime(dump, (1_735_689_600, 1_735_689_600))
    res = ingest(spark, [str(dump)], str(tmp_path / "out"), default_cluster="c")
    assert (res.bundle_data_rows, res.quarantined_rows) == (1, 0)
    rows = read_local_parquet(tmp_path / "out" / "bundle_data")
    assert list(rows["time_ms"]) == [1_735_689_600_000]


@pytest.mark.spark
def test_an_ingest_that_kept_no_row_ends_with_one_line_and_exit_2(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It exited 0 ('wrote 0 broker and 0 bundle rows'), and a script went on to twin an empty output."""
    from shedlab.cli import main

    source = tmp_path / "r.jsonl"
    source.write_text('{"a": 1}\n{oops\n')
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["ingest", str(source), "--out", str(out)])
    assert done.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (
        "error: every row was quarantined, none kept (malformed_json 1, unknown_record 1); "
        f"the reasons are in {out}/quarantine (reason, detail, raw)"
    )
    assert (out / "quarantine").is_dir()
