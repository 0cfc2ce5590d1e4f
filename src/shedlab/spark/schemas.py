"""Canonical schemas of every table the Spark layer reads or writes.

Ingested data (``shedlab ingest``; partitioned by ``cluster`` and ``day``):

* :data:`BROKER_SAMPLE` — one row per broker and tick: the five resources as (usage, limit) in
  Pulsar's units, the broker's message rate/throughput totals and counts.
* :data:`BUNDLE_SAMPLE` — one row per bundle and tick with its **owner** (``broker``) and the
  bundle's instantaneous stats (Pulsar's NamespaceBundleStats).
* :data:`BUNDLE_DATA` — optional BundleData dumps (short/long-term averages) per bundle and time.
* :data:`QUARANTINE` — every row that failed validation, with a reason code and a detail.
* :data:`INGEST_STATS` — rows read/kept/merged/quarantined per source.

Sweeps (``shedlab sweep``): :data:`RUN_SPEC` (the cross product of a grid), :data:`RUN_SUMMARY`
(one row per run, ``status`` ok/error, every summary metric in ``metrics``), per-tick metrics and
decisions (columns from the simulator plus ``run_id``).

Evaluation and replay outputs: :data:`METRIC_STATS`, :data:`PIP364_TABLE`,
:data:`REPLAY_DECISION`, :data:`REPLAY_LOAD`, :data:`OWNERSHIP_CHANGE`, :data:`REPLAY_COMPARISON`.

Times are epoch milliseconds (``long``); ``tick_ms`` is the sample time floored to the ingest
interval; ``day`` is the UTC date of ``tick_ms``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from shedlab.core.ingest import RAW_COLUMNS, STAGED_COLUMNS
from shedlab.core.results import RUN_SUMMARY_ARROW

__all__ = [
    "BROKER_NUMERIC",
    "BROKER_SAMPLE",
    "BUNDLE_DATA",
    "BUNDLE_NUMERIC",
    "BUNDLE_SAMPLE",
    "INGEST_STATS",
    "METRIC_STATS",
    "OWNERSHIP_CHANGE",
    "PIP364_STATS",
    "PIP364_TABLE",
    "PIP364_VALUE",
    "QUARANTINE",
    "RAW_ROW",
    "REPLAY_COMPARISON",
    "REPLAY_DECISION",
    "REPLAY_LOAD",
    "RESOURCE_COLUMNS",
    "RUN_SPEC",
    "RUN_SUMMARY",
    "STAGED_ROW",
    "conform",
    "field_names",
    "struct",
]

_TYPES: dict[str, DataType] = {
    "string": StringType(),
    "long": LongType(),
    "int": IntegerType(),
    "double": DoubleType(),
    "bool": BooleanType(),
    "date": DateType(),
}


def struct(*fields: tuple[str, str] | tuple[str, str, bool]) -> StructType:
    """A StructType from ``(name, type)`` / ``(name, type, nullable)`` tuples (nullable by default)."""
    out = []
    for f in fields:
        name, type_name = f[0], f[1]
        nullable = f[2] if len(f) == 3 else True
        out.append(StructField(name, _TYPES[type_name], nullable))
    return StructType(out)


def field_names(schema: StructType) -> list[str]:
    return [f.name for f in schema.fields]


def conform(frame: pd.DataFrame, schema: StructType) -> pd.DataFrame:
    """``frame`` with exactly ``schema``'s columns, in order, in dtypes Arrow converts without surprises.

    Missing columns become nulls; strings are ``object`` with None (an all-null float column
    declared as string otherwise trips PySpark's converter); integers use pandas' nullable
    ``Int64``/``Int32``; booleans the nullable ``boolean``. NaN in double columns stays NaN only
    where the column is read back by Spark from Parquet; through ``mapInPandas`` it becomes null.
    """
    out: dict[str, Any] = {}
    n = len(frame)
    for f in schema.fields:
        col = (
            frame[f.name]
            if f.name in frame.columns
            else pd.Series([None] * n, dtype=object, index=frame.index)
        )
        dt = f.dataType
        if isinstance(dt, StringType):
            col = col.astype(object).where(col.notna(), None)
        elif isinstance(dt, LongType):
            col = pd.to_numeric(col, errors="coerce").astype("Int64")
        elif isinstance(dt, IntegerType):
            col = pd.to_numeric(col, errors="coerce").astype("Int32")
        elif isinstance(dt, DoubleType):
            col = pd.to_numeric(col, errors="coerce").astype("float64")
        elif isinstance(dt, BooleanType):
            col = col.astype("boolean")
        out[f.name] = col
    return pd.DataFrame(out, index=frame.index)


RESOURCE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("cpu", "cpu"),
    ("memory", "memory"),
    ("directMemory", "direct_memory"),
    ("bandwidthIn", "bandwidth_in"),
    ("bandwidthOut", "bandwidth_out"),
)
"""Pulsar resource name → column prefix (``<prefix>_usage``, ``<prefix>_limit``)."""

BROKER_NUMERIC: tuple[str, ...] = (
    *(f"{p}_{k}" for _, p in RESOURCE_COLUMNS for k in ("usage", "limit")),
    "msg_rate_in",
    "msg_rate_out",
    "msg_throughput_in",
    "msg_throughput_out",
)
"""Broker columns that must be finite and non-negative."""

BUNDLE_NUMERIC: tuple[str, ...] = (
    "msg_rate_in",
    "msg_rate_out",
    "msg_throughput_in",
    "msg_throughput_out",
)
"""Bundle columns that must be finite and non-negative."""

_PROVENANCE = (("source", "string"), ("source_kind", "string"), ("report_id", "string"))

BROKER_SAMPLE = struct(
    ("cluster", "string", False),
    ("day", "date", False),
    ("tick_ms", "long", False),
    ("time_ms", "long", False),
    ("broker", "string", False),
    *((c, "double") for c in BROKER_NUMERIC),
    ("num_topics", "long"),
    ("num_bundles", "int"),
    ("num_consumers", "int"),
    ("num_producers", "int"),
    ("persistent_topics_enabled", "bool"),
    ("non_persistent_topics_enabled", "bool"),
    ("broker_version", "string"),
    ("load_manager_class", "string"),
    ("last_update_ms", "long"),
    *_PROVENANCE,
)
"""One broker at one tick (a LocalBrokerData without its per-bundle stats). ``time_ms`` is when the
sample was taken (the wrapper's ``timestamp``, else ``lastUpdate``); ``last_update_ms`` is the
report's ``lastUpdate`` (its last write to the metadata store), when known."""

BUNDLE_SAMPLE = struct(
    ("cluster", "string", False),
    ("day", "date", False),
    ("tick_ms", "long", False),
    ("time_ms", "long", False),
    ("bundle", "string", False),
    ("broker", "string", False),
    *((c, "double") for c in BUNDLE_NUMERIC),
    ("consumer_count", "long"),
    ("producer_count", "long"),
    ("topics", "long"),
    ("cache_size", "long"),
    *_PROVENANCE,
)
"""One bundle at one tick with its owner (an entry of the owner's ``lastStats``)."""

BUNDLE_DATA = struct(
    ("cluster", "string", False),
    ("day", "date", False),
    ("tick_ms", "long", False),
    ("time_ms", "long", False),
    ("bundle", "string", False),
    ("short_num_samples", "long"),
    ("short_max_samples", "long"),
    ("short_msg_rate_in", "double"),
    ("short_msg_rate_out", "double"),
    ("short_msg_throughput_in", "double"),
    ("short_msg_throughput_out", "double"),
    ("long_num_samples", "long"),
    ("long_max_samples", "long"),
    ("long_msg_rate_in", "double"),
    ("long_msg_rate_out", "double"),
    ("long_msg_throughput_in", "double"),
    ("long_msg_throughput_out", "double"),
    ("topics", "long"),
    *_PROVENANCE,
)
"""A BundleData dump (``/loadbalance/bundle-data/…``) at a point in time."""

QUARANTINE = struct(
    ("cluster", "string", False),
    ("day", "string", False),
    ("source", "string"),
    ("source_kind", "string"),
    ("record", "long"),
    ("table", "string"),
    ("reason", "string", False),
    ("detail", "string"),
    ("broker", "string"),
    ("bundle", "string"),
    ("time_ms", "long"),
    ("raw", "string"),
)
"""A row that failed validation. ``cluster``/``day`` are ``unknown`` when they could not be read.
``table`` is the table the row was meant for (broker_samples, bundle_samples, bundle_data) or
``record`` for a line that could not be parsed at all."""

INGEST_STATS = struct(
    ("source", "string", False),
    ("source_kind", "string"),
    ("records_read", "long"),
    ("rows_read", "long"),
    ("broker_rows_kept", "long"),
    ("bundle_rows_kept", "long"),
    ("bundle_data_rows_kept", "long"),
    ("rows_merged", "long"),
    ("rows_quarantined", "long"),
    ("rows_relabelled", "long"),
)
"""Per source: ``rows_read = kept (all tables) + merged + quarantined`` always holds. A row is
*merged* when a later sample of the same broker (or bundle) in the same tick supersedes it.
``rows_relabelled`` counts the Prometheus points whose Pulsar labels the scrape had renamed
``exported_*`` (read back from there)."""

RAW_ROW = struct(("kind", "string", False), *RAW_COLUMNS[1:])
"""The intermediate union every parser emits (one ``kind`` per target table)."""

STAGED_ROW = struct(("kind", "string", False), *STAGED_COLUMNS[1:])
"""RAW_ROW after validation: ``status`` kept / merged / quarantined (or derived for pivoted
Prometheus rows), with the final ``reason``/``detail``."""

RUN_SPEC = struct(
    ("run_id", "string", False),
    ("grid", "string"),
    ("scenario", "string", False),
    ("scenario_spec", "string"),  # the scenario serialised (JSON) so workers need no file access
    ("scenario_digest", "string"),
    ("strategy", "string", False),
    ("params_json", "string", False),
    ("params_id", "string", False),
    ("seed", "long", False),
    ("cost", "double"),
    ("brokers_every", "int"),
)
"""One simulation to run: scenario × strategy pair × parameter set × seed."""

RUN_SUMMARY = from_arrow_schema(RUN_SUMMARY_ARROW)
"""One row per run: :data:`shedlab.core.results.RUN_SUMMARY_ARROW` as a Spark schema (the results
layout is defined once, in the core)."""

METRIC_STATS = struct(
    ("scenario", "string", False),
    ("strategy", "string", False),
    ("params_id", "string"),
    ("params_json", "string"),
    ("metric", "string", False),
    ("n", "long"),
    ("mean", "double"),
    ("stddev", "double"),
    ("t_crit", "double"),
    ("ci_half_width", "double"),
    ("ci_low", "double"),
    ("ci_high", "double"),
    ("min", "double"),
    ("max", "double"),
)
"""Per scenario × strategy × parameter set × metric: mean and 95 % t-interval over seeds."""

PIP364_TABLE = struct(
    ("strategy", "string", False),
    ("params_id", "string"),
    ("params_json", "string"),
    ("problem", "string", False),
    ("metric", "string"),
    ("scenarios", "string"),
    ("n_runs", "long"),
    ("value", "double"),
    ("ci_low", "double"),
    ("ci_high", "double"),
    ("good_below", "double"),
    ("bad_above", "double"),
    ("rating", "string"),
)
"""The PIP-364 comparison as numbers: one figure per problem and strategy pair, with its rating."""

PIP364_VALUE = struct(
    ("problem", "string", False),
    ("strategy", "string", False),
    ("params_id", "string"),
    ("params_json", "string"),
    ("value", "double"),
)
"""One run's PIP-364 figure (:data:`shedlab.core.evaluation.PIP364_VALUE_COLUMNS`)."""

PIP364_STATS = struct(
    ("problem", "string", False),
    ("strategy", "string", False),
    ("params_id", "string"),
    ("params_json", "string"),
    ("n_runs", "long"),
    ("value", "double"),
    ("ci_low", "double"),
    ("ci_high", "double"),
)
"""A PIP-364 figure before its rating (:data:`shedlab.core.evaluation.PIP364_STATS_COLUMNS`)."""

REPLAY_DECISION = struct(
    ("cluster", "string", False),
    ("strategy", "string", False),
    ("config_id", "string"),
    ("tick_ms", "long", False),
    ("seq", "int"),
    ("source", "string"),
    ("bundle", "string"),
    ("destination", "string"),
    ("reason", "string"),
    ("bundle_throughput", "double"),
    ("bundle_msg_rate", "double"),
    ("usage_share", "double"),
    ("actually_moved", "bool"),
    ("actual_destination", "string"),
)
"""What a strategy would have unloaded at a tick, why, and what really happened to that bundle.
``usage_share`` is the bundle's share of the source's throughput (its estimated share of usage)."""

REPLAY_LOAD = struct(
    ("cluster", "string", False),
    ("strategy", "string", False),
    ("config_id", "string"),
    ("tick_ms", "long", False),
    ("broker", "string", False),
    ("usage", "double"),
    ("est_usage", "double"),
    ("throughput", "double"),
    ("est_throughput", "double"),
    ("msg_rate", "double"),
    ("est_msg_rate", "double"),
    ("bundles", "long"),
    ("est_bundles", "long"),
)
"""Per broker and tick: the recorded weighted max usage U(b) (0–1), throughput and msg rate, and the
estimate after that tick's decisions (moved bundles carry their traffic and their share of usage)."""

OWNERSHIP_CHANGE = struct(
    ("cluster", "string", False),
    ("tick_ms", "long", False),
    ("bundle", "string", False),
    ("from_broker", "string"),
    ("to_broker", "string"),
    ("previous_tick_ms", "long"),
)
"""A change of a bundle's owner between two samples in the recorded data."""

REPLAY_COMPARISON = struct(
    ("cluster", "string", False),
    ("strategy", "string", False),
    ("config_id", "string"),
    ("tick_ms", "long", False),
    ("actual_moves", "long"),
    ("strategy_unloads", "long"),
    ("both", "long"),
    ("max_usage", "double"),
    ("est_max_usage", "double"),
    ("usage_spread", "double"),
    ("est_usage_spread", "double"),
    ("left_alone", "long"),
    ("reasons", "string"),
)
"""Per tick: ownership changes in the data next to the strategy's unloads (``both`` = the same
bundle), the max and max−min of U(b) before/after the strategy's moves, how many brokers the strategy
left alone, and ``reasons``: JSON, reason → count (brokers left alone, bundles skipped;
:meth:`shedlab.core.decide.Outcome.counts`)."""
