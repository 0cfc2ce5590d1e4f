"""Ingest's common path in the JVM: recorded load reports parsed by Spark's JSON reader, no Python per row.

Almost every line of a recording (``shedlab collect``, the simulator, the polling recipe) is the wrapper
``{"timestamp", "broker", "cluster", "report": <LocalBrokerData>}`` with nothing wrong in it. Such a line
is parsed here with ``from_json`` and an explicit schema built from :mod:`shedlab.model.formats` (the one
definition: each :class:`~shedlab.model.formats.Field`'s type, default, minimum and required-ness), and
its broker and bundle rows are produced, de-duplicated and written without leaving the JVM.

The contract is exactness: the output is the one :mod:`shedlab.core.ingest` (the Python reader) gives for
the same input, row for row. So a line takes this path only when it is certain the Python reader keeps
all of it (:func:`fast_lines`); every other line (malformed JSON, another shape, a value out of range, a
quoted number, NaN, invalid UTF-8, a ``null`` anywhere, a key written with ``\\u`` escapes, a key
given twice in one object at any depth, such as a bundle named twice in ``lastStats``, …) goes to the
Python reader and, if bad, to quarantine with its reason. The rules that span lines (the latest report
of a broker in a tick wins; a bundle claimed by two brokers in a tick is quarantined) are applied here
only within groups (cluster × hour) holding nothing but such lines and no double claim; a group with
anything else is parsed and processed whole by the Python reader, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as sf
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from shedlab.core.ingest import MAX_CLUSTER_PATH
from shedlab.model.bundles import BUNDLE_NAME_SHAPE
from shedlab.model.formats import (
    BUNDLE_STATS,
    JAVA_INT,
    LOCAL_BROKER_DATA,
    MAX_SAFE_INTEGER,
    MAX_TIME_MS,
    OBJECTS,
    OTHER_SHAPE_KEYS,
    RESOURCE_USAGE,
    RESOURCES,
    SECONDS_LIKE_MS,
    STRING_LISTS,
    Field,
    Required,
)

__all__ = [
    "CORRUPT",
    "JSON_OPTIONS",
    "LINE_SCHEMA",
    "broker_rows",
    "bundle_rows",
    "fast_lines",
    "flag_fast",
    "parse_lines",
]

CORRUPT = "_corrupt_record"

_JSON_TYPES: dict[str, DataType] = {
    "number": DoubleType(),
    "integer": LongType(),
    "boolean": BooleanType(),
    "string": StringType(),
}


def _struct(fields: Sequence[Field]) -> StructType:
    return StructType([StructField(f.json, _JSON_TYPES[f.kind]) for f in fields])


_RESOURCE = _struct(RESOURCE_USAGE)
_REPORT_WRITES = ("maxResourceUsage", "loadManagerClassName")
"""Keys of :data:`~shedlab.model.formats.OTHER_SHAPE_KEYS` that Pulsar's LocalBrokerData writes itself
(:meth:`shedlab.model.pulsar.LocalBrokerData.to_json`): a report may name them."""
_REPORT_SHAPE_KEYS = tuple(k for k in OTHER_SHAPE_KEYS if k not in _REPORT_WRITES)
_STATS = _struct(BUNDLE_STATS)

REPORT_SCHEMA = StructType(
    [
        *(StructField(r.json, _RESOURCE) for r in RESOURCES),
        *_struct(LOCAL_BROKER_DATA).fields,
        *(StructField(name, ArrayType(StringType())) for name in STRING_LISTS),
        StructField("lastStats", MapType(StringType(), _STATS)),
        *(StructField(name, MapType(StringType(), StringType())) for name in OBJECTS if name != "lastStats"),
        StructField("loadReportType", StringType()),  # "LoadReport" is the legacy format
        *(StructField(key, StringType()) for key in _REPORT_SHAPE_KEYS),
    ]
)
"""LocalBrokerData as the formats define it (every field by its JSON name and kind)."""

LINE_SCHEMA = StructType(
    [
        StructField("timestamp", LongType()),
        StructField("broker", StringType()),
        StructField("cluster", StringType()),
        StructField("report", REPORT_SCHEMA),
        # What would make the Python reader take the wrapper for another shape (core.ingest._parse_value);
        # a string field holds any value's JSON text, so a key present (Pulsar writes no nulls) is non-null.
        *(StructField(key, StringType()) for key in OTHER_SHAPE_KEYS),
        StructField(CORRUPT, StringType()),
    ]
)
"""The recording wrapper; a line that does not fit it exactly (a type Jackson would coerce, a malformed
value) gets ``_corrupt_record`` and goes to the Python reader."""

JSON_OPTIONS = {
    "mode": "PERMISSIVE",
    "columnNameOfCorruptRecord": CORRUPT,
    "allowSingleQuotes": "false",  # Python's json refuses what these allow: such lines go to it
    "allowNonNumericNumbers": "false",
    "allowUnquotedControlChars": "false",
    "allowNumericLeadingZeros": "false",
    "allowBackslashEscapingAnyCharacter": "false",
    "allowComments": "false",
}

_OBJECT = "^[ \\t\\r\\n]*\\{"
_NUMBER = "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?$"


def _is_string(col: Column) -> Column:
    """A string field holds a string: Spark renders any other token as its text, which the Python reader
    refuses, so a value that reads as a number, a boolean, an object or an array is not taken here."""
    return col.isNull() | ~(col.rlike(_NUMBER) | col.isin("true", "false") | col.rlike("^[\\[{]"))


def _field_ok(f: Field, col: Column, siblings: Column | None = None) -> Column:
    """The rules of :func:`shedlab.model.formats.check` for one field, as a Spark condition."""
    ok = col.isNotNull() if isinstance(f.default, Required) else sf.lit(True)
    if f.kind == "string":
        return ok & _is_string(col)
    if f.kind not in ("number", "integer"):
        return ok
    value_ok = sf.lit(True)
    if f.kind == "number":
        value_ok = ~sf.isnan(col) & (sf.abs(col) != float("inf"))
    if f.minimum is not None:
        above = col >= sf.lit(f.minimum)
        if f.minimum_if_positive is not None and siblings is not None:
            above = above | (siblings[f.minimum_if_positive] <= 0)
        if f.minimum_unless is not None and siblings is not None:
            name, exempt = f.minimum_unless
            above = above | siblings[name].isin(sorted(exempt))
        value_ok = value_ok & above
    if f.column_type == "int":  # an int column (Pulsar's Java int)
        value_ok = value_ok & (col <= JAVA_INT[1])
    elif f.kind == "integer":  # else the Python reader quarantines it (formats.MAX_SAFE_INTEGER)
        value_ok = value_ok & col.between(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)  # abs(-2^63) overflows
    return ok & (col.isNull() | value_ok)


def _cluster_ok(cluster: Column) -> Column:
    """No cluster (the default is used), or one :func:`~shedlab.core.ingest.cluster_problem` accepts."""
    escaped = sf.length(sf.regexp_replace(cluster, "[:=]", "%3A"))
    named = cluster.rlike("^[-=:.a-zA-Z0-9_]*$") & (escaped <= sf.lit(MAX_CLUSTER_PATH))
    return cluster.isNull() | (cluster == "") | named


def _bundle_ok(name: Column) -> Column:
    """A bundle name :func:`~shedlab.model.bundles.bundle_name_problem` accepts (its shape, then LOWER
    below UPPER, as the last 19 and 8 characters hold them); else the Python reader quarantines it."""
    shaped = name.rlike(f"^{BUNDLE_NAME_SHAPE}\\z")  # \z: Java's $ matches before a final newline too
    return shaped & (sf.lower(sf.substring(name, -19, 8)) < sf.lower(sf.substring(name, -8, 8)))


def _none_of(obj: Column, keys: Sequence[str]) -> Column:
    out = sf.lit(True)
    for key in keys:
        out = out & obj[key].isNull()
    return out


def _all_ok(fields: Sequence[Field], obj: Column) -> Column:
    out = sf.lit(True)
    for f in fields:
        out = out & _field_ok(f, obj[f.json], obj)
    return out


def parse_lines(text: DataFrame, value: str = "value") -> DataFrame:
    """``text`` with the parsed line ``j`` (:data:`LINE_SCHEMA`)."""
    return text.withColumn("j", sf.from_json(sf.col(value), LINE_SCHEMA, JSON_OPTIONS))


def fast_lines(text: DataFrame, value: str = "value") -> DataFrame:
    """``text`` with the parsed line ``j`` and ``fast``: whether the Python reader would keep the whole
    line (a wrapped LocalBrokerData, every value in range, its bundles' stats too) exactly as parsed."""
    return flag_fast(parse_lines(text, value), value)


def flag_fast(parsed: DataFrame, value: str = "value") -> DataFrame:
    """:func:`parse_lines`' output with ``fast`` (see :func:`fast_lines`). Materialise ``parsed`` first
    (a checkpoint): Spark's optimizer copies ``from_json`` into every condition that reads ``j``."""
    r = sf.col("j.report")
    resources = sf.lit(True)
    for res in RESOURCES:
        resources = resources & (r[res.json].isNull() | _all_ok(res.fields, r[res.json]))
    lists = sf.lit(True)
    for name in STRING_LISTS:
        lists = lists & (r[name].isNull() | ~sf.exists(r[name], lambda x: x.isNull() | ~_is_string(x)))
    stats = r["lastStats"].isNull() | (
        sf.forall(sf.map_values(r["lastStats"]), lambda s: s.isNotNull() & _all_ok(BUNDLE_STATS, s))
        & sf.forall(sf.map_keys(r["lastStats"]), _bundle_ok)
    )
    time_ms = sf.coalesce(sf.col("j.timestamp"), r["lastUpdate"])
    w = sf.col("j")
    fast = (
        sf.coalesce(sf.col("utf8_ok"), sf.lit(True))
        & sf.col(value).rlike(_OBJECT)
        # exactly one JSON value on the line: from_json ignores what follows the first one, Python's json
        # refuses it (a torn write glued to the next record, a stray brace)
        & (sf.json_array_length(sf.concat(sf.lit("["), sf.col(value), sf.lit("]"))) == 1)
        & ~sf.col(value).contains("null")  # Pulsar writes no nulls (NON_NULL); "k": null is not "k" absent
        & ~sf.col(value).contains("\\u")  # a key spelled with escapes would dodge the checks above
        # no key twice in one object, at any depth (the Python reader quarantines it as duplicate_key):
        # from_json keeps the last value of a struct's field; parse_json refuses it while Spark's
        # spark.sql.variant.allowDuplicateKeys is false, which shedlab relies on (spark.session)
        & sf.try_parse_json(sf.col(value)).isNotNull()
        & w[CORRUPT].isNull()
        & r.isNotNull()
        & _none_of(w, OTHER_SHAPE_KEYS)  # no key of another shape (a regex over the line cost a third)
        & _none_of(r, _REPORT_SHAPE_KEYS)
        & (r["loadReportType"].isNull() | (r["loadReportType"] != "LoadReport"))
        & r["lastUpdate"].isNotNull()  # LocalBrokerData, not the extensible manager's BrokerLoadData
        & w["broker"].isNotNull()
        & w["broker"].rlike("[!-~]")  # not blank (what Python's strip() leaves is for its reader to say)
        & _is_string(w["broker"])
        & _is_string(w["cluster"])
        & _cluster_ok(w["cluster"])  # else the Python reader quarantines it (core.ingest.cluster_problem)
        & (time_ms > 0)
        & (time_ms <= MAX_TIME_MS)  # later: the Python reader quarantines it as invalid_timestamp
        & (r["lastUpdate"] > 0)  # so too the report's own time beside the wrapper's (formats.epoch_ms)
        & (r["lastUpdate"] <= MAX_TIME_MS)
        & ~time_ms.between(SECONDS_LIKE_MS[0], SECONDS_LIKE_MS[1] - 1)  # seconds: formats.epoch_ms
        & ~r["lastUpdate"].between(SECONDS_LIKE_MS[0], SECONDS_LIKE_MS[1] - 1)
        & resources
        & _all_ok(LOCAL_BROKER_DATA, r)
        & lists
        & stats
    )
    return parsed.withColumn("fast", sf.coalesce(fast, sf.lit(False)))


def _common(default_cluster: str, interval_ms: int) -> list[Column]:
    w = sf.col("j")
    time_ms = sf.coalesce(w["timestamp"], w["report"]["lastUpdate"])
    cluster = sf.when(w["cluster"].isNull() | (w["cluster"] == ""), sf.lit(default_cluster)).otherwise(
        w["cluster"]
    )
    tick = (sf.floor(time_ms / sf.lit(interval_ms)) * sf.lit(interval_ms)).cast("long")
    source = sf.regexp_replace(sf.col("source"), "^file:(//)?", "")  # core.ingest._clean_source
    return [
        source.alias("source"),
        sf.col("line").alias("record"),
        sf.concat(source, sf.lit("#"), sf.col("line").cast("string")).alias("report_id"),
        cluster.alias("cluster"),
        time_ms.alias("time_ms"),
        tick.alias("tick_ms"),
        w["broker"].alias("broker"),
    ]


_SPREAD_FROM, _SPREAD_DAYS = "1970-01-01", 4096


def broker_rows(
    lines: DataFrame, default_cluster: str, interval_ms: int, keep: Sequence[str] = ()
) -> DataFrame:
    """One row per line: the broker's columns (as :func:`shedlab.core.ingest._parse_report` fills
    them, Pulsar's defaults for what is missing), the ``lastStats`` map, ``day``, and ``status``: kept, or
    merged when a later report of the same broker falls in the same tick (the latest by time, line,
    source); ``keep`` passed through. Hash-partitioned by (cluster, day). A line without a parsed report
    (``j`` null: one for the Python reader) has no broker and no tick, so it ranks only among such lines."""
    r = sf.col("j.report")
    cols = [*_common(default_cluster, interval_ms), *(sf.col(c) for c in keep)]
    for res in RESOURCES:  # a missing resource is ResourceUsage(): 0 out of 0
        for f in res.fields:
            cols.append(sf.coalesce(r[res.json][f.json], sf.lit(0.0)).alias(f"{res.prefix}_{f.column}"))
    for f in LOCAL_BROKER_DATA:
        if f.column is None:
            continue
        value = r[f.json]
        if f.json == "lastUpdate":  # the report's own time, null when absent (core.ingest: _time_ms)
            cols.append(value.alias(f.column))
            continue
        default: Column = sf.lit(f.default)
        if f.json == "numBundles":  # defaults to the length of ``bundles``
            default = sf.coalesce(sf.size(r["bundles"]).cast("long"), sf.lit(0))
            default = sf.when(r["bundles"].isNull(), sf.lit(0)).otherwise(default)
        cols.append(sf.coalesce(value, default).alias(f.column))
    cols.append(r["lastStats"].alias("last_stats"))
    day = sf.to_date(sf.timestamp_millis(sf.col("tick_ms")))
    # A line without a parsed report has no tick: such lines are spread over made-up days by line number,
    # or all of them (a recording of bare reports: every line) would meet in one partition and one window
    # group. Nothing reads their day: only their text goes on, to the Python reader.
    no_report = sf.date_add(sf.lit(_SPREAD_FROM).cast("date"), (sf.col("record") % _SPREAD_DAYS).cast("int"))
    day = sf.when(sf.col("tick_ms").isNull(), no_report).otherwise(day)
    # Partitioned once by what the tables are partitioned by: the de-duplication below (a day holds whole
    # ticks), the double claims and the writes then need no other shuffle.
    out = lines.select(*cols).withColumn("day", day).repartition("cluster", "day")
    latest = Window.partitionBy("cluster", "day", "broker", "tick_ms").orderBy(
        sf.col("time_ms").desc(), sf.col("record").desc(), sf.col("source").desc()
    )
    status = sf.when(sf.row_number().over(latest) == 1, "kept").otherwise("merged")
    return out.withColumn("status", status)


def bundle_rows(reports: DataFrame, keep: Sequence[str] = ()) -> DataFrame:
    """The bundle rows of :func:`broker_rows`' reports, one per ``lastStats`` entry, with their report's
    status (a merged report's bundles are merged with it)."""
    exploded = reports.select(
        "source",
        "record",
        "report_id",
        "cluster",
        "time_ms",
        "tick_ms",
        "broker",
        "day",
        "status",
        *keep,
        sf.explode("last_stats").alias("bundle", "s"),
    )
    names = ("source", "record", "report_id", "cluster", "time_ms", "tick_ms", "broker", "day")
    cols = [sf.col(c) for c in names]
    cols += [sf.col(c) for c in keep]
    cols += [sf.col("bundle"), sf.col("status")]
    for f in BUNDLE_STATS:
        if f.column is not None:
            cols.append(sf.coalesce(sf.col("s")[f.json], sf.lit(f.default)).alias(f.column))
    return exploded.select(*cols)
