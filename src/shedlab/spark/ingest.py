"""Ingest recorded load data into per-tick cluster snapshots (``shedlab ingest``).

Accepted inputs (see ``docs/spark.md`` for the full description):

* **Load reports**, JSON lines (``.jsonl``/``.ndjson``, optionally ``.gz``) or JSON documents
  (``.json``: one object, an array of objects, or JSON lines), each record either the wrapper
  ``{"timestamp": ms, "broker": id, "cluster": name, "report": <LocalBrokerData>}`` that
  ``shedlab`` recordings and the polling recipe in the docs write, or a bare LocalBrokerData as
  ``GET /admin/v2/broker-stats/load-report`` returns it (broker id from ``webServiceUrl``, time
  from ``lastUpdate``, cluster from ``--cluster``).
* **BundleData dumps** in the same files: ``{"timestamp", "cluster", "bundle", "data": <BundleData>}``,
  ``{"bundle": name, "shortTermData": …, "longTermData": …}`` or
  ``{"timestamp", "cluster", "bundleData": {name: <BundleData>, …}}``.
* **Prometheus** ``query_range`` (or instant ``query``) responses of ``pulsar_lb_*_usage`` and
  ``pulsar_bundle_*`` series (``.json``).
* **Parquet** in shedlab's canonical schema (a previous ingest's output or loose files).

A BundleData without a ``timestamp`` (Pulsar's BundleData has no time) takes its file's
modification time.

What each field is called, means and accepts is defined once, in :mod:`shedlab.model.formats`
(the readers of ``decide`` and ``conform`` use the same definition); the rules of ingest (record
shapes, quarantine reasons, deduplication) are in :mod:`shedlab.core.ingest`. This module is the
Spark orchestration around them: it reads the files, runs the parser in ``mapInPandas`` and the
validation in ``applyInPandas``, writes the tables and counts. Rows that fail validation go to
``quarantine/`` with a reason; per source the command reports how many rows were read, kept,
merged (a later sample of the same broker in the same tick superseded it) and quarantined —
``read = kept + merged + quarantined`` always holds.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial, reduce
from pathlib import Path

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from shedlab.core.ingest import (
    FLOAT_COLUMNS,
    Sources,
    check_ingest_output,
    classify_sources,
    parse_text_batch,
    process_group,
)
from shedlab.core.locations import is_remote
from shedlab.core.results import filesystem, remove_stale_temporaries
from shedlab.errors import InputError
from shedlab.model.formats import JAVA_INT, MAX_SAFE_INTEGER, MAX_TIME_MS
from shedlab.spark.ingest_fast import broker_rows, bundle_rows, flag_fast, parse_lines
from shedlab.spark.schemas import (
    BROKER_SAMPLE,
    BUNDLE_DATA,
    BUNDLE_SAMPLE,
    INGEST_STATS,
    QUARANTINE,
    RAW_ROW,
    STAGED_ROW,
    field_names,
)

__all__ = ["IngestResult", "ingest", "read_snapshots"]


@dataclass
class IngestResult:
    """What an ingest wrote, and the per-source counts it printed.

    ``stats`` counts rows *read* per source (``rows_read = kept + merged + quarantined``); ``broker_rows``,
    ``bundle_rows`` and ``bundle_data_rows`` are the rows *written*. They differ where Prometheus points
    were kept: every point is a row read, and the points of one broker (or bundle) and tick make one row
    written (``prometheus_rows``: broker, bundle). Summing the kept points as rows written printed 'kept
    2,928 broker rows' for tables of 976."""

    out: str
    stats: pd.DataFrame
    reasons: pd.DataFrame
    broker_rows: int
    bundle_rows: int
    bundle_data_rows: int
    quarantined_rows: int
    clusters: list[str]
    prometheus_rows: tuple[int, int] = (0, 0)

    @property
    def rows_read(self) -> int:
        return int(self.stats["rows_read"].sum()) if len(self.stats) else 0


Counts = tuple[pd.DataFrame, pd.DataFrame, list[str], dict[str, int]]
"""Per source the rows read, kept, merged and quarantined; per source and reason the quarantined rows; the
clusters of the rows written; the rows written per row kind (``broker``, ``prom_broker``, ``bundle``,
``prom_bundle``, ``bundle_data``)."""

Numbering = Callable[[DataFrame], DataFrame]
"""Adds ``line`` (the line's number in its file) to rows with ``source``, ``block`` and ``_id``."""

_JSON_OPTIMIZATION = "spark.sql.optimizer.enableJsonExpressionOptimization"
_TEXT_COLUMNS = ("source", "source_kind", "block", "line", "value", "file_time_ms", "utf8_ok")
_SLOW_TEXT = ("fast", "_text_source", "source_kind", "block", "value", "file_time_ms", "utf8_ok")
"""What the JVM path's staged lines carry for the lines it leaves to the Python reader (their text)."""


def _raw_lines(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """One row per line of the JSON-lines sources, with its split (``block``) and an id consecutive within
    the split (``_id``), which :func:`_line_bases` turns into the line's number. The file's modification
    time travels with each line (the time of a BundleData without one)."""
    # Arrow refuses invalid UTF-8 (Spark's text reader does not check): repair it here and flag the
    # row, which the parser quarantines as invalid_utf8 instead of failing the whole job.
    utf8_ok = sf.is_valid_utf8(sf.col("value"))
    value = sf.when(utf8_ok, sf.col("value")).otherwise(sf.make_valid_utf8(sf.col("value")))
    return spark.read.text(list(paths)).select(
        sf.col("_metadata.file_path").alias("source"),
        sf.lit("json_lines").alias("source_kind"),
        sf.col("_metadata.file_block_start").alias("block"),
        sf.monotonically_increasing_id().alias("_id"),
        value.alias("value"),
        sf.unix_millis(sf.col("_metadata.file_modification_time")).alias("file_time_ms"),
        utf8_ok.alias("utf8_ok"),
    )


_LITERAL_SPLITS = 256
"""Up to this many (file, split) pairs, the line numbers' bases are a literal map in the query (no join)."""


def _line_bases(spark: SparkSession, lines: DataFrame, *extra: Column) -> tuple[Numbering, list[Row]]:
    """Numbering of :func:`_raw_lines`' rows (or rows derived from them, with ``source``, ``block`` and
    ``_id``), and the per-split counts (``extra`` aggregates too), in one job.

    A split is read in order by one task, so a line's number is its file's lines before the split plus
    its position in the split (the ids of a split are consecutive)."""
    counts = lines.groupBy("source", "block").agg(
        sf.count("*").alias("n"), sf.min("_id").alias("first"), *extra
    )
    rows = sorted(counts.collect(), key=lambda r: (r["source"], int(r["block"])))
    running: dict[str, int] = {}
    bases = []
    for row in rows:
        before = running.get(row["source"], 0)
        bases.append((row["source"], int(row["block"]), before - int(row["first"]) + 1))
        running[row["source"]] = before + int(row["n"])
    if len(bases) <= _LITERAL_SPLITS:
        pairs = [sf.lit(x) for src, block, b in bases for x in (f"{block}#{src}", b)]
        table = sf.create_map(*pairs) if pairs else sf.create_map().cast("map<string,bigint>")
        key = sf.concat_ws("#", sf.col("block").cast("string"), sf.col("source"))

        def number(frame: DataFrame) -> DataFrame:
            return frame.withColumn("line", sf.col("_id") + table[key]).drop("_id")

        return number, rows
    base = spark.createDataFrame(bases, "source string, block long, base long")

    def join(frame: DataFrame) -> DataFrame:
        joined = frame.join(sf.broadcast(base), ["source", "block"])
        return joined.withColumn("line", sf.col("_id") + sf.col("base")).drop("_id", "base")

    return join, rows


def _text_frames(spark: SparkSession, sources: Sources) -> tuple[DataFrame | None, DataFrame | None]:
    """The JSON-lines sources (one row per line, numbered) and the JSON documents (one row per file).

    Columns :data:`_TEXT_COLUMNS`. Line numbers are computed in the JVM, the same for both readers of a
    line (:func:`_line_bases`)."""
    utf8_ok = sf.is_valid_utf8(sf.col("value"))
    value = sf.when(utf8_ok, sf.col("value")).otherwise(sf.make_valid_utf8(sf.col("value")))
    lines: DataFrame | None = None
    docs: DataFrame | None = None
    if sources.json_lines:
        raw = _raw_lines(spark, sources.json_lines)
        number, _counts = _line_bases(spark, raw)
        lines = number(raw).select(*_TEXT_COLUMNS)
    if sources.json_docs:
        docs = spark.read.text(sources.json_docs, wholetext=True).select(
            sf.col("_metadata.file_path").alias("source"),
            sf.lit("json_doc").alias("source_kind"),
            sf.lit(0).cast("long").alias("block"),
            sf.lit(None).cast("long").alias("line"),
            value.alias("value"),
            sf.unix_millis(sf.col("_metadata.file_modification_time")).alias("file_time_ms"),
            utf8_ok.alias("utf8_ok"),
        )
    return lines, docs


def _parse_in_python(
    text: DataFrame, *, default_cluster: str, web_port: int, boundaries: Mapping[str, Sequence[int]]
) -> DataFrame:
    """Text rows → RAW_ROW rows, parsed by :func:`shedlab.core.ingest.parse_text_batch` on the executors."""

    def parse(batches: Iterable[pd.DataFrame]) -> Iterable[pd.DataFrame]:
        for batch in batches:
            yield parse_text_batch(
                batch, default_cluster=default_cluster, web_port=web_port, boundaries=boundaries
            )

    return text.select(*_TEXT_COLUMNS).mapInPandas(parse, RAW_ROW)


def _read_parquet_sources(spark: SparkSession, paths: Sequence[str]) -> DataFrame | None:
    """Canonical Parquet → RAW_ROW rows (kind by table)."""

    out: DataFrame | None = None
    for path in paths:
        for table, tpath in _parquet_tables(path):
            try:
                df = spark.read.option("mergeSchema", "false").parquet(tpath)
            except Exception as exc:  # AnalysisException: unreadable / not Parquet
                raise InputError(f"cannot read Parquet: {str(exc).splitlines()[0]}", source=tpath) from None
            cols = set(df.columns)
            if table == "auto":
                table = _table_of_columns(cols, tpath)
            kind = _KIND_OF_TABLE[table]
            required = {"cluster", "time_ms"} | ({"broker"} if kind != "bundle_data" else set())
            required |= {"bundle"} if kind != "broker" else set()
            missing = sorted(required - cols)
            if missing:
                raise InputError("Parquet source lacks required columns", source=tpath, value=missing)
            bad = _check_column_types(df, _SCHEMA_OF_TABLE[table], tpath)
            part = df.select(*_raw_row_columns(path, kind, cols, _SCHEMA_OF_TABLE[table], bad))
            out = part if out is None else out.unionByName(part)
    return out


_TABLES = ("broker_samples", "bundle_samples", "bundle_data")
_KIND_OF_TABLE = {"broker_samples": "broker", "bundle_samples": "bundle", "bundle_data": "bundle_data"}
_SCHEMA_OF_TABLE = {
    "broker_samples": BROKER_SAMPLE,
    "bundle_samples": BUNDLE_SAMPLE,
    "bundle_data": BUNDLE_DATA,
}


_INTEGRAL = (ByteType, ShortType, IntegerType, LongType)
_NUMERIC = (*_INTEGRAL, FloatType, DoubleType, DecimalType)
_ACCEPTED: dict[type[DataType], tuple[type[DataType], ...]] = {
    LongType: _NUMERIC,
    IntegerType: _NUMERIC,
    DoubleType: _NUMERIC,
    BooleanType: (BooleanType,),
    StringType: (StringType,),
}
"""The Parquet types each canonical column's type takes: the same kind of value (a number for a number,
text for text). Spark's cast (ANSI) failed the whole ingest with a Java stack on a string that is no
number, and read a boolean as 0/1 or a number as the broker named "5"."""
_RANGES: dict[type[DataType], tuple[int, int]] = {
    LongType: (-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),  # as the JSON readers keep (formats.MAX_SAFE_INTEGER)
    IntegerType: JAVA_INT,
}
_FITS: dict[type[DataType], tuple[type[DataType], ...]] = {
    LongType: (ByteType, ShortType, IntegerType),
    IntegerType: (ByteType, ShortType, IntegerType),
}
"""The source types whose every value an integer column holds (its values need no check)."""
_HOLDS: dict[type[DataType], str] = {
    LongType: "within ±(2^53 - 1), what ingest keeps exactly",
    IntegerType: "that fits int",
}
"""What a value an integer column cannot hold is not (a quarantined row's detail)."""


def _check_column_types(df: DataFrame, schema: StructType, source: str) -> dict[str, Column]:
    """Refuse a Parquet source whose column holds another kind of value than the canonical column it
    is read into (:func:`_raw_row_columns`: a column of ``schema`` and of RAW_ROW); the test, per
    integer column, of a value it cannot hold (a count of 1.5 or NaN in a double column, a long past an
    int), whose rows are quarantined: the cast failed the job with a Java stack, or cut 1.5 to 1.
    Pandas writes an integer column with a null as doubles."""
    read = set(df.columns) & set(schema.fieldNames()) & set(RAW_ROW.fieldNames())
    checks: dict[str, Column] = {}
    for name in sorted(read - {"raw"}):
        want, have = RAW_ROW[name].dataType, df.schema[name].dataType
        if not isinstance(have, _ACCEPTED.get(type(want), (type(want),))):
            raise InputError(
                f"column {name}: expected {want.simpleString()} values, found {have.simpleString()}",
                source=source,
            )
        if type(want) not in _RANGES or isinstance(have, _FITS[type(want)]):
            continue
        checks[name] = _out_of_range(sf.col(name), have, *_RANGES[type(want)])
    return checks


def _out_of_range(col: Column, have: DataType, low: int, high: int) -> Column:
    """Whether a value of ``col`` (of type ``have``) is no integer in ``[low, high]``. A decimal or floating
    value is compared as a double, below ``high + 1`` (2^63, 2^31): 2^63 - 1 is 2^63 as a double, so 2^63
    passed ``<= high`` and was cast, a double to 9223372036854775807 (kept; beside a null in its group, a
    pandas traceback), a decimal to a job failed with CAST_OVERFLOW under ANSI and to null without. A
    decimal's fraction is tested on the decimal (its remainder by 1, which cannot overflow as a floor
    can): past 2^52 a double holds none, and 2^52 + 0.5 was cut to 2^52."""
    if isinstance(have, _INTEGRAL):
        return (col < low) | (col > high)
    value = col.cast("double")
    beyond = (value < float(low)) | (value >= float(high + 1))
    fraction = (col % 1 != 0) if isinstance(have, DecimalType) else (value != sf.floor(value))
    return beyond | sf.isnan(value) | fraction


def _parquet_tables(path: str) -> list[tuple[str, str]]:
    """(table, path) pairs of one Parquet source: an ingest output's tables, or the path itself
    (``auto``: the table is told by its columns). An ingest output's empty table (a directory without a
    Parquet file, as ingest writes one: no bundle_data in most recordings) has no rows to read; Spark
    cannot infer its schema, which failed re-ingesting any such output."""
    local = Path(path)
    if not is_remote(path) and local.is_dir() and any((local / t).is_dir() for t in _TABLES):
        return [
            (table, str(local / table))
            for table in _TABLES
            if (local / table).is_dir() and any((local / table).rglob("*.parquet"))
        ]
    return [("auto", path)]


def _table_of_columns(cols: set[str], tpath: str) -> str:
    if "cpu_usage" in cols:
        return "broker_samples"
    if "short_msg_rate_in" in cols:
        return "bundle_data"
    if "bundle" in cols and "broker" in cols:
        return "bundle_samples"
    raise InputError(
        "Parquet columns match none of broker_samples, bundle_samples, bundle_data",
        source=tpath,
        value=sorted(cols)[:12],
    )


def _raw_row_columns(
    path: str, kind: str, cols: set[str], schema: StructType, bad: Mapping[str, Column]
) -> list[Column]:
    """RAW_ROW's columns from a canonical table: its own columns cast, the rest null or constant, and
    ``nonfinite`` marking the NaN and infinite floats (quarantined later, like a JSON line's); a row
    with a value its column cannot hold (``bad``: :func:`_check_column_types`) is a quarantine row."""
    own = set(field_names(schema)) & cols
    overrides = _bad_value_columns(kind, bad)
    selected = []
    for name in field_names(RAW_ROW):
        dtype = RAW_ROW[name].dataType
        if name == "kind":
            col = sf.lit(kind)
        elif name == "source":
            col = sf.lit(path)
        elif name == "source_kind":
            col = sf.lit("parquet")
        elif name == "record":
            col = sf.monotonically_increasing_id()
        elif name == "report_id":
            col = (sf.col("report_id") if "report_id" in cols else sf.lit(None)).cast(dtype)
        elif name == "nonfinite":
            marks = [
                sf.when(sf.isnan(sf.col(c)) | (sf.abs(sf.col(c)) == float("inf")), sf.lit(f"{c}=NaN"))
                for c in FLOAT_COLUMNS
                if c in own
            ]
            col = (sf.nullif(sf.concat_ws(",", *marks), sf.lit("")) if marks else sf.lit(None)).cast(dtype)
        elif name in bad:  # not cast where it cannot be: ANSI casts fail the job
            col = sf.when(bad[name], sf.lit(None)).otherwise(sf.col(name)).cast(dtype)
        elif name in own and name != "raw":
            col = sf.col(name).cast(dtype)
        else:
            col = sf.lit(None).cast(dtype)
        selected.append(overrides.get(name, col).alias(name))
    return selected


def _bad_value_columns(kind: str, bad: Mapping[str, Column]) -> dict[str, Column]:
    """``kind``, ``reason`` and ``detail`` of a row with a value its column cannot hold (the first such
    column named), as the JSON readers quarantine a count of 1.5: ``invalid_value``."""
    if not bad:
        return {}
    any_bad = reduce(operator.or_, bad.values())
    details = [
        sf.when(
            test,
            sf.concat(
                sf.lit(f"{name}: "),
                sf.col(name).cast("string"),
                sf.lit(f" is not an integer {_HOLDS[type(RAW_ROW[name].dataType)]}"),
            ),
        )
        for name, test in bad.items()
    ]
    return {
        "kind": sf.when(any_bad, sf.lit("quarantine")).otherwise(sf.lit(kind)),
        "reason": sf.when(any_bad, sf.lit("invalid_value")),
        "detail": sf.coalesce(*details),
    }


def canonical(df: DataFrame, schema: StructType, keep: Sequence[str] = ()) -> DataFrame:
    """``df`` with exactly ``schema``'s columns, cast to its types (missing ones null), and ``keep``."""
    cols: list[Column | str] = [*keep]
    present = set(df.columns)  # one schema call (each ``df.columns`` asks the JVM for the analysed plan)
    for name in field_names(schema):
        dtype = schema[name].dataType
        if name in present:
            cols.append(sf.col(name).cast(dtype).alias(name))
        else:
            cols.append(sf.lit(None).cast(dtype).alias(name))
    return df.select(*cols)


@dataclass
class _Tables:
    """What an ingest writes: the four tables (each hash-partitioned by cluster and day, but for the
    quarantine), the rows counted per source (:func:`_count`), the clusters of the kept rows, and the
    frames persisted on the way (unpersisted at the end)."""

    brokers: DataFrame
    bundles: DataFrame
    bundle_data: DataFrame
    quarantine: DataFrame
    count: Callable[[], Counts]
    cached: list[DataFrame]
    empty: frozenset[str] = frozenset()  # tables known to have no rows: no Spark job writes them


def _src() -> Column:
    """``source`` as the Python reader writes it (:func:`shedlab.core.ingest._clean_source`)."""
    return sf.regexp_replace(sf.col("source"), "^file:(//)?", "")


def _stage(
    spark: SparkSession,
    sources: Sources,
    *,
    default_cluster: str,
    web_port: int,
    boundaries: Mapping[str, Sequence[int]],
    interval_ms: int,
    bucket_ms: int,
    fast: bool,
    say: Callable[[str], None],
) -> _Tables:
    """Every row of the sources, validated and de-duplicated, as the tables to write.

    Rows that the Python reader parses (every line when ``fast`` is off) are processed per group of
    one cluster × ``bucket_ms`` by :func:`shedlab.core.ingest.process_group`. With ``fast``, the lines are
    parsed once, in the JVM (:func:`shedlab.spark.ingest_fast.flag_fast` says which the JVM path takes);
    their groups are finished there too, unless the group also holds rows of the Python reader (brokers,
    bundles, Prometheus points) or a bundle claimed twice: then its lines are parsed by the Python reader as
    well, so that every rule spanning lines sees the whole group. When nothing at all needs the Python
    reader (a clean recording: the common case), no Python runs and the tables come straight from the
    parsed lines (:func:`_native_tables`)."""
    parse = partial(
        _parse_in_python, default_cluster=default_cluster, web_port=web_port, boundaries=boundaries
    )
    bucket = sf.floor(sf.col("tick_ms") / sf.lit(bucket_ms)).cast("long")
    if not (fast and sources.json_lines):
        lines, docs = _text_frames(spark, sources)
        say("parsing and validating")
        frames = [parse(t) for t in (lines, docs) if t is not None]
        return _python_tables(spark, frames, sources, None, interval_ms, bucket_ms, [])
    raw_lines = _raw_lines(spark, sources.json_lines)
    number, counts = _line_bases(spark, raw_lines)  # from the text alone: a cheap pass
    # One parse of every line, in the job that makes the broker rows: the parsed report of the lines the
    # JVM path takes, the others' text (a persisted copy of every parsed line cost a fifth of the ingest).
    flagged = flag_fast(parse_lines(number(raw_lines)))
    lines = flagged.select(
        *(c for c in flagged.columns if c not in ("value", "j", "source")),
        sf.col("source").alias("_text_source"),
        sf.col("source"),
        sf.when(sf.col("fast"), sf.col("j")).alias("j"),
        sf.when(~sf.col("fast"), sf.col("value")).alias("value"),
    )
    staged = (
        broker_rows(lines, default_cluster, interval_ms, keep=_SLOW_TEXT)
        .withColumn("_bucket", bucket)
        .persist(StorageLevel.MEMORY_AND_DISK)
    )
    reports = staged.where(sf.col("fast")).drop(*_SLOW_TEXT)
    slow_lines = staged.where(~sf.col("fast")).select(
        sf.col("_text_source").alias("source"),
        "source_kind",
        "block",
        sf.col("record").alias("line"),
        *_TEXT_COLUMNS[4:],
    )
    slow = slow_lines.count()
    total = sum(int(r["n"]) for r in counts)
    say(f"parsed {total:,} lines in the JVM, {slow:,} of them for the Python reader")
    claims = _claimed_groups(reports)
    cached = [staged]
    if not (slow or sources.json_docs or sources.parquet or claims):
        return _native_tables(spark, reports, cached)
    say("parsing and validating")
    _text, docs = _text_frames(spark, Sources(json_lines=[], json_docs=sources.json_docs, parquet=[]))
    frames = [parse(t) for t in (docs,) if t is not None]
    if slow:
        frames.append(parse(slow_lines))

    def dirty_lines(keys: DataFrame) -> DataFrame:
        """The text of the fast lines in groups ``keys`` (read again: the parsed lines keep no text)."""
        lines = reports.join(sf.broadcast(keys), ["cluster", "_bucket"]).select(
            sf.col("source").alias("_src"), sf.col("record").alias("line")
        )
        text = number(raw_lines).withColumn("_src", _src())
        return text.join(lines, ["_src", "line"]).select(*_TEXT_COLUMNS)

    return _python_tables(
        spark, frames, sources, (reports, claims, dirty_lines, parse), interval_ms, bucket_ms, cached
    )


def _tick_of_valid_time(tick: Column) -> Column:
    """``tick`` for a time in (0, MAX_TIME_MS], else null: a row quarantined for its time has no day
    (Spark's ``timestamp_millis`` of a later time overflows a long and fails the job)."""
    time_ms = sf.col("time_ms")
    return sf.when((time_ms > 0) & (time_ms <= sf.lit(MAX_TIME_MS)), tick)


_Native = tuple[
    DataFrame,
    list[tuple[str, int]],
    Callable[[DataFrame], DataFrame],
    Callable[[DataFrame], DataFrame],
]
"""The JVM path's reports, its double-claimed groups, the text of its lines in given groups, the parser."""


def _python_tables(
    spark: SparkSession,
    frames: list[DataFrame],
    sources: Sources,
    native: _Native | None,
    interval_ms: int,
    bucket_ms: int,
    cached: list[DataFrame],
) -> _Tables:
    """The tables when the Python reader has rows (``frames``, plus the Parquet sources): its groups
    processed by :func:`shedlab.core.ingest.process_group`, the JVM path's rows (``native``) in the
    groups it does not touch."""
    tick = (sf.floor(sf.col("time_ms") / sf.lit(interval_ms)) * sf.lit(interval_ms)).cast("long")
    bucket = sf.floor(sf.col("tick_ms") / sf.lit(bucket_ms)).cast("long")
    pq = _read_parquet_sources(spark, sources.parquet)
    if pq is not None:
        frames = [*frames, pq]
    raw = _union(frames) if frames else spark.createDataFrame([], RAW_ROW)
    raw = raw.withColumn("tick_ms", _tick_of_valid_time(tick)).withColumn("_bucket", bucket)
    finished: DataFrame | None = None
    if native is not None:
        reports, claims, dirty_lines, parse = native
        raw = raw.localCheckpoint(eager=True)
        dirty = sorted(set(_linked_groups(raw)) | set(claims))
        keys = spark.createDataFrame(dirty, "cluster string, _bucket long")
        finished = canonical(
            _native_rows(reports.join(sf.broadcast(keys), ["cluster", "_bucket"], "left_anti")), STAGED_ROW
        )
        if dirty:
            again = parse(dirty_lines(keys)).withColumn("tick_ms", _tick_of_valid_time(tick))
            raw = raw.unionByName(again.withColumn("_bucket", bucket))
    processed = raw.groupBy("cluster", "_bucket").applyInPandas(process_group, STAGED_ROW)
    if finished is not None:
        processed = processed.unionByName(finished)
    day = sf.to_date(sf.timestamp_millis(sf.col("tick_ms")))
    rows = processed.withColumn("day", day).repartition("cluster", "day")
    rows = rows.persist(StorageLevel.MEMORY_AND_DISK)
    kept = sf.col("status").isin("kept", "derived")
    kind = sf.col("kind")
    quarantine = rows.where(sf.col("status") == "quarantined").select(
        sf.coalesce(sf.col("cluster"), sf.lit("unknown")).alias("cluster"),
        sf.coalesce(sf.col("day").cast("string"), sf.lit("unknown")).alias("day"),
        _src().alias("source"),
        "source_kind",
        "record",
        sf.when(kind == "broker", sf.lit("broker_samples"))
        .when(kind == "bundle", sf.lit("bundle_samples"))
        .when(kind == "bundle_data", sf.lit("bundle_data"))
        .when(kind == "prom", sf.lit("prometheus"))
        .otherwise(sf.coalesce(sf.col("metric"), sf.lit("record")))
        .alias("table"),
        "reason",
        "detail",
        "broker",
        "bundle",
        "time_ms",
        "raw",
    )
    return _Tables(
        brokers=canonical(rows.where(kept & kind.isin("broker", "prom_broker")), BROKER_SAMPLE),
        bundles=canonical(rows.where(kept & kind.isin("bundle", "prom_bundle")), BUNDLE_SAMPLE),
        bundle_data=canonical(rows.where(kept & (kind == "bundle_data")), BUNDLE_DATA),
        quarantine=canonical(quarantine, QUARANTINE).repartition("cluster", "day"),
        count=partial(
            _count,
            rows.where(sf.col("status") != "derived").withColumn("source", _src()),
            rows.where(kept).select("cluster", "kind"),
        ),
        cached=[*cached, rows],
    )


def _native_tables(spark: SparkSession, reports: DataFrame, cached: list[DataFrame]) -> _Tables:
    """The tables straight from the JVM path's reports (nothing for the Python reader, no double claim):
    every row kept or merged, none quarantined, the same rows :func:`_python_tables` would write."""
    kept = reports.where(sf.col("status") == "kept")
    brokers, bundles = (canonical(df, STAGED_ROW, keep=["day"]) for df in _native_parts(kept))
    return _Tables(
        brokers=canonical(brokers, BROKER_SAMPLE),
        bundles=canonical(bundles, BUNDLE_SAMPLE),
        bundle_data=spark.createDataFrame([], BUNDLE_DATA),
        quarantine=spark.createDataFrame([], QUARANTINE),
        count=partial(_native_count, reports),
        cached=cached,
        empty=frozenset({"bundle_data", "quarantine"}),
    )


def _union(frames: Sequence[DataFrame]) -> DataFrame:
    out = frames[0]
    for other in frames[1:]:
        out = out.unionByName(other)
    return out


def _linked_groups(raw: DataFrame) -> list[tuple[str, int]]:
    """The (cluster, hour) groups holding rows of the Python reader that rules spanning lines connect to
    the JVM path's lines (brokers, bundles, Prometheus points): their fast lines go to the Python reader.
    A row without a group hour (a time that is no time: quarantined, its group no line's) links none."""
    linked = raw.where(
        sf.col("kind").isin("broker", "bundle", "prom")
        & sf.col("cluster").isNotNull()
        & sf.col("_bucket").isNotNull()
    )
    found = linked.select("cluster", "_bucket").distinct().collect()
    return [(r["cluster"], int(r["_bucket"])) for r in found]


def _claimed_groups(reports: DataFrame) -> list[tuple[str, int]]:
    """The (cluster, hour) groups where a bundle is claimed by two brokers in one tick (its quarantine row
    keeps the entry's text, which only the Python reader writes): their fast lines go to the Python reader.
    Grouped within ``reports``' partitions by (cluster, day): no shuffle."""
    claims = (
        bundle_rows(reports.where(sf.col("status") == "kept"), keep=("_bucket",))
        .groupBy("cluster", "day", "_bucket", "tick_ms", "bundle")
        .agg(sf.count("*").alias("owners"))  # a kept report per broker and tick, a bundle once in it
        .where(sf.col("owners") > 1)
        .select("cluster", "_bucket")
        .distinct()
    )
    return [(r["cluster"], int(r["_bucket"])) for r in claims.collect()]


def _native_parts(reports: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The broker rows and the bundle rows of the JVM path's reports, in the columns of STAGED_ROW."""
    common = {"source_kind": sf.lit("load_report"), "source": sf.col("source")}
    brokers = reports.withColumns({"kind": sf.lit("broker"), **common})
    bundles = bundle_rows(reports).withColumns({"kind": sf.lit("bundle"), **common})
    return brokers, bundles


def _native_rows(reports: DataFrame) -> DataFrame:
    """STAGED_ROW rows of the fast lines' brokers and bundles (kept or merged; never quarantined)."""
    brokers, bundles = _native_parts(reports)
    return canonical(brokers, STAGED_ROW).unionByName(canonical(bundles, STAGED_ROW))


def _count(counted: DataFrame, kept: DataFrame) -> Counts:
    """Per source: rows read, kept (by table), merged, quarantined, relabelled; per source and reason the
    quarantined rows; from the rows written (``kept``: the kept rows and those derived from Prometheus
    points), their clusters and their number per kind."""
    kind = sf.col("kind")
    is_prom = kind == "prom"
    is_kept = sf.col("status") == "kept"
    broker_row = (kind == "broker") | (is_prom & sf.col("bundle").isNull())
    bundle_row = (kind == "bundle") | (is_prom & sf.col("bundle").isNotNull())

    def count_if(cond: Column) -> Column:
        return sf.sum(sf.when(cond, 1).otherwise(0)).cast("long")

    stats_df = counted.groupBy("source").agg(
        sf.first("source_kind", ignorenulls=True).alias("source_kind"),
        sf.countDistinct("record").alias("records_read"),
        sf.count("*").alias("rows_read"),
        count_if(is_kept & broker_row).alias("broker_rows_kept"),
        count_if(is_kept & bundle_row).alias("bundle_rows_kept"),
        count_if(is_kept & (kind == "bundle_data")).alias("bundle_data_rows_kept"),
        count_if(sf.col("status") == "merged").alias("rows_merged"),
        count_if(sf.col("status") == "quarantined").alias("rows_quarantined"),
        count_if(sf.col("relabelled").isNotNull()).alias("rows_relabelled"),
    )
    stats = canonical(stats_df, INGEST_STATS).orderBy("source").toPandas()
    reasons = (
        counted.where(sf.col("status") == "quarantined")
        .groupBy("source", "reason")
        .count()
        .orderBy("source", "reason")
        .toPandas()
    )
    written: dict[str, int] = {}
    clusters: set[str] = set()
    for r in kept.groupBy("cluster", "kind").count().collect():
        written[r["kind"]] = written.get(r["kind"], 0) + int(r["count"])
        if r["cluster"] is not None:
            clusters.add(r["cluster"])
    return stats, reasons, sorted(clusters), written


def _native_count(reports: DataFrame) -> Counts:
    """:func:`_count` of the JVM path's rows, from its reports in one job: a line is one record, its
    broker row and one bundle row per ``lastStats`` entry, all kept or all merged, none quarantined."""
    kept = sf.col("status") == "kept"
    bundles = sf.when(sf.col("last_stats").isNull(), 0).otherwise(sf.size("last_stats")).cast("long")
    zero = sf.lit(0).cast("long")
    stats_df = reports.groupBy("source").agg(
        sf.lit("load_report").alias("source_kind"),
        sf.count("*").alias("records_read"),
        (sf.count("*") + sf.sum(bundles)).alias("rows_read"),
        sf.sum(sf.when(kept, 1).otherwise(0)).alias("broker_rows_kept"),
        sf.sum(sf.when(kept, bundles).otherwise(0)).alias("bundle_rows_kept"),
        zero.alias("bundle_data_rows_kept"),
        sf.sum(sf.when(kept, 0).otherwise(bundles + 1)).alias("rows_merged"),
        zero.alias("rows_quarantined"),
        zero.alias("rows_relabelled"),
        sf.collect_set(sf.when(kept, sf.col("cluster"))).alias("_clusters"),
    )
    stats = canonical(stats_df, INGEST_STATS, keep=["_clusters"]).orderBy("source").toPandas()
    clusters = sorted({c for cs in stats.pop("_clusters") for c in cs})
    # none quarantined: the reasons table empty, with the dtypes a grouped count's toPandas() has
    reasons = pd.DataFrame({"source": pd.Series(dtype=object), "reason": pd.Series(dtype=object)})
    reasons["count"] = pd.Series(dtype="int64")
    written = {"broker": int(stats["broker_rows_kept"].sum()), "bundle": int(stats["bundle_rows_kept"].sum())}
    return stats, reasons, clusters, written


def ingest(
    spark: SparkSession,
    sources: Sequence[str],
    out: str,
    *,
    interval_ms: int = 60_000,
    default_cluster: str = "default",
    web_port: int = 8080,
    bucket_ms: int = 3_600_000,
    progress: Callable[[str], None] | None = None,
    boundaries: Mapping[str, Sequence[int]] | None = None,
    fast: bool = True,
) -> IngestResult:
    """Read ``sources``, validate, align to ticks of ``interval_ms`` and write the canonical tables.

    Output under ``out`` (the cluster/day partitions written are replaced, others kept):
    ``broker_samples/``, ``bundle_samples/``, ``bundle_data/`` and ``quarantine/`` (partitioned
    by cluster and day; ``unknown`` where unreadable) and ``ingest_stats/``. ``boundaries`` (namespace →
    bundle boundaries, :func:`shedlab.model.bundles.read_bundle_boundaries`) place Prometheus topic-level
    series in their bundles. Rows are processed
    in groups of one cluster × ``bucket_ms`` of ticks (an hour by default; lower it for clusters
    with hundreds of thousands of bundles).

    ``fast`` (the default) parses the common lines in the JVM (:mod:`shedlab.spark.ingest_fast`); the
    output is the same as with ``fast=False``, where every line goes through the Python reader.
    """

    if interval_ms <= 0:
        raise InputError("the tick interval must be positive", field="--interval", value=interval_ms)
    if bucket_ms < interval_ms:
        bucket_ms = interval_ms
    say = progress or (lambda _msg: None)
    started = time.time()
    classified = classify_sources(sources)
    # An ingest killed mid-write leaves Spark's staging directories: the tables are replaced below, and
    # what an earlier (dead) writer left is removed here.
    remove_stale_temporaries(out, started)
    say(
        f"reading {len(classified.json_lines)} JSON-lines, {len(classified.json_docs)} JSON and "
        f"{len(classified.parquet)} Parquet source(s)"
    )
    with _json_optimization_off(spark):
        tables = _stage(
            spark,
            classified,
            default_cluster=default_cluster,
            web_port=web_port,
            boundaries=boundaries or {},
            interval_ms=interval_ms,
            bucket_ms=bucket_ms,
            fast=fast,
            say=say,
        )
        root = out.rstrip("/")
        _write_tables(tables, root, say)
        say("counting")
        stats, reasons, clusters, written = tables.count()
    for frame in tables.cached:
        frame.unpersist()
    spark.createDataFrame(stats, INGEST_STATS).coalesce(1).write.mode("overwrite").parquet(
        f"{root}/ingest_stats"
    )
    return _result(out, stats, reasons, clusters, written)


@contextmanager
def _json_optimization_off(spark: SparkSession) -> Iterator[None]:
    """Spark's optimizer would replace each field read of a parsed line by its own from_json with a
    pruned schema (dozens of parses of every line instead of one): off while the rows are made, then
    restored to what it was."""
    previous = spark.conf.get(_JSON_OPTIMIZATION, None)
    spark.conf.set(_JSON_OPTIMIZATION, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(_JSON_OPTIMIZATION)
        else:
            spark.conf.set(_JSON_OPTIMIZATION, previous)


def _write_tables(tables: _Tables, root: str, say: Callable[[str], None]) -> None:
    """The four tables, each hash-partitioned by (cluster, day): one sorted file per partition directory."""
    for df, name, sort in (
        (tables.brokers, "broker_samples", ["tick_ms", "broker"]),
        (tables.bundles, "bundle_samples", ["tick_ms", "broker", "bundle"]),
        (tables.bundle_data, "bundle_data", ["tick_ms", "bundle"]),
        (tables.quarantine, "quarantine", ["source", "record"]),
    ):
        say(f"writing {name}")
        if name in tables.empty and not is_remote(root):
            # What Spark's write of no rows leaves under dynamic partition overwrite: the table's directory,
            # its partitions untouched (a job for it cost a second of a cold ingest; other filesystems
            # keep Spark's write).
            fs, path = filesystem(f"{root}/{name}")
            fs.create_dir(path, recursive=True)
            continue
        (
            df.sortWithinPartitions("cluster", "day", *sort)
            .write.mode("overwrite")
            .partitionBy("cluster", "day")
            .parquet(f"{root}/{name}")
        )


def _result(
    out: str, stats: pd.DataFrame, reasons: pd.DataFrame, clusters: list[str], written: Mapping[str, int]
) -> IngestResult:
    prometheus = (written.get("prom_broker", 0), written.get("prom_bundle", 0))
    return IngestResult(
        out=out,
        stats=stats,
        reasons=reasons,
        broker_rows=written.get("broker", 0) + prometheus[0],
        bundle_rows=written.get("bundle", 0) + prometheus[1],
        bundle_data_rows=written.get("bundle_data", 0),
        quarantined_rows=int(stats["rows_quarantined"].sum()) if len(stats) else 0,
        clusters=clusters,
        prometheus_rows=prometheus,
    )


def read_snapshots(spark: SparkSession, path: str) -> tuple[DataFrame, DataFrame, DataFrame | None]:
    """The broker samples, bundle samples and (if present) BundleData dumps of an ingest output."""

    root = path.rstrip("/")
    local = not is_remote(root)
    check_ingest_output(path)
    brokers = spark.read.schema(BROKER_SAMPLE).parquet(f"{root}/broker_samples")
    bundles = spark.read.schema(BUNDLE_SAMPLE).parquet(f"{root}/bundle_samples")
    bd: DataFrame | None = None
    if not local or Path(root, "bundle_data").is_dir():
        bd = spark.read.schema(BUNDLE_DATA).parquet(f"{root}/bundle_data")
    return brokers, bundles, bd
