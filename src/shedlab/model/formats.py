"""The one definition of Pulsar's load-balancer JSON formats: field names, meanings and what is accepted.

Every reader of Pulsar's JSON derives from these tables: the model's ``from_json`` readers
(``decide``, ``conform``, recordings) apply them one value at a time through :func:`coerce` and
:func:`check`; ingest (:mod:`shedlab.core.ingest`) extracts the same fields with :func:`coerce` into
columns named here and checks whole columns with :func:`column_problems`, which encodes the same
rules vectorised; the Spark schema of ingest's rows is built from :func:`columns`. There is no second
set of rules: a change here changes every reader.

What is accepted follows Pulsar (Jackson, spec §1): unknown fields are ignored; a missing field
takes Pulsar's default (a missing resource is ``ResourceUsage()``, 0 out of 0); numbers may be
quoted, as Jackson's scalar coercion reads them (``"NaN"`` is how Jackson writes NaN). What is
refused is what Pulsar can never produce: a wrong type, a non-finite number, a negative rate or
count. A resource whose ``limit`` is ≤ 0 is 0 % whatever its usage (spec §1.1): that covers
``{"usage": -1, "limit": -1}`` (not measured) and a NIC whose speed could not be read
(``{"usage": 48211.7, "limit": 0.0}``, the Kubernetes case).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from shedlab.units import JAVA_DECIMAL

if TYPE_CHECKING:  # pandas is imported by column_problems alone: see there
    import pandas as pd

__all__ = [
    "BUNDLE_DATA",
    "BUNDLE_STATS",
    "EXTENSIBLE_LOAD_FIELDS",
    "JAVA_INT",
    "LOCAL_BROKER_DATA",
    "MAX_SAFE_INTEGER",
    "MAX_TIME_MS",
    "NIC_USAGE",
    "OBJECTS",
    "OTHER_SHAPE_KEYS",
    "PROMETHEUS_BROKER_METRICS",
    "PROMETHEUS_BUNDLE_METRICS",
    "PROMETHEUS_LABELS",
    "PROMETHEUS_SAMPLE",
    "PROMETHEUS_SIGNED_METRICS",
    "PROMETHEUS_TOPIC_METRICS",
    "REQUIRED",
    "RESOURCES",
    "RESOURCE_USAGE",
    "SECONDS_LIKE_MS",
    "STRING_LISTS",
    "TIME_AVERAGE",
    "TIME_AVERAGE_PARTS",
    "Field",
    "FieldError",
    "FormatError",
    "Required",
    "Resource",
    "check",
    "check_collections",
    "coerce",
    "column_problems",
    "columns",
    "epoch_ms",
    "extensible_kind",
    "legacy_load_report",
    "read_fields",
    "resource_columns",
]

Kind = Literal["number", "integer", "boolean", "string"]
ColumnType = Literal["double", "long", "int", "bool", "string"]


class Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED = Required()
"""The default of a field that must be present (and not null)."""

Default = float | int | bool | str | None | Required


class FormatError(ValueError):
    """A value that the format refuses; ``reason`` is one of ingest's quarantine reason codes."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class FieldError(FormatError):
    """A :class:`FormatError` that knows which field (JSON name) and which value."""

    def __init__(self, name: str, cause: FormatError, value: object) -> None:
        super().__init__(cause.reason, cause.message)
        self.field = name
        self.value = value


@dataclass(frozen=True)
class Field:
    """One field of a Pulsar JSON object and the shedlab column that holds it."""

    json: str
    column: str | None  # None: checked by every reader, but not kept in ingest's tables
    kind: Kind
    default: Default
    meaning: str
    unit: str = ""
    minimum: float | None = 0.0  # None: any finite value
    column_type: ColumnType | None = None  # defaults by kind: double, long, bool, string
    minimum_if_positive: str | None = None  # the minimum applies only where this sibling is > 0
    # the minimum does not apply where this sibling (a column, or a key of the same object) is one of these
    minimum_unless: tuple[str, frozenset[str]] | None = None

    @property
    def spark_type(self) -> ColumnType:
        return self.column_type or _COLUMN_TYPES[self.kind]


_COLUMN_TYPES: dict[Kind, ColumnType] = {
    "number": "double",
    "integer": "long",
    "boolean": "bool",
    "string": "string",
}


def _rate(json: str, column: str, unit: str, what: str, default: Default = 0.0) -> Field:
    return Field(json, column, "number", default, what, unit)


RESOURCE_USAGE: tuple[Field, ...] = (
    Field(
        "usage",
        "usage",
        "number",
        REQUIRED,
        "amount in use; any value counts as 0 % when limit ≤ 0 (spec §1.1)",
        minimum_if_positive="limit",
    ),
    Field("limit", "limit", "number", REQUIRED, "capacity; ≤ 0 means not known (0 %)", minimum=None),
)
"""ResourceUsage ``{usage, limit}``; ``-1/-1`` is Pulsar's "not measured" (SystemResourceUsage)."""

NIC_USAGE: tuple[Field, ...] = (
    Field(
        "usage",
        "usage",
        "number",
        REQUIRED,
        "Kbit/s since the last reading; negative when the NIC byte counters went back",
        minimum=None,
    ),
    RESOURCE_USAGE[1],
)
"""A NIC's ResourceUsage: any finite usage. ``LinuxBrokerHostUsageImpl`` writes the difference of the
physical NICs' summed byte counters between two readings over the time between them, unclamped: a
counter that goes back (a NIC reset, its driver reloaded, a NIC gone from the list between readings)
gives a negative rate, and the leader decides on it (a negative percentage, which the other resources'
maximum usually hides). Refusing it would make a live cluster unreadable for one reading."""


@dataclass(frozen=True)
class Resource:
    json: str
    prefix: str  # columns <prefix>_usage, <prefix>_limit
    unit: str
    fields: tuple[Field, ...] = RESOURCE_USAGE  # the rules of its {usage, limit}


RESOURCES: tuple[Resource, ...] = (
    Resource("cpu", "cpu", "% of one core"),
    Resource("memory", "memory", "MiB (JVM heap)"),
    Resource("directMemory", "direct_memory", "MiB"),
    Resource("bandwidthIn", "bandwidth_in", "Kbit/s", NIC_USAGE),
    Resource("bandwidthOut", "bandwidth_out", "Kbit/s", NIC_USAGE),
)
"""The five resources of a load report, in Pulsar's field order (a missing one is 0 out of 0)."""

_MSG = (
    _rate("msgRateIn", "msg_rate_in", "msg/s", "messages per second in"),
    _rate("msgRateOut", "msg_rate_out", "msg/s", "messages per second out"),
    _rate("msgThroughputIn", "msg_throughput_in", "B/s", "bytes per second in"),
    _rate("msgThroughputOut", "msg_throughput_out", "B/s", "bytes per second out"),
)

LOCAL_BROKER_DATA: tuple[Field, ...] = (
    *_MSG,
    Field("numTopics", "num_topics", "integer", 0, "topics owned"),
    Field("numBundles", "num_bundles", "integer", 0, "bundles owned", column_type="int"),
    Field("numConsumers", "num_consumers", "integer", 0, "consumers", column_type="int"),
    Field("numProducers", "num_producers", "integer", 0, "producers", column_type="int"),
    Field("persistentTopicsEnabled", "persistent_topics_enabled", "boolean", True, "serves persistent"),
    Field("nonPersistentTopicsEnabled", "non_persistent_topics_enabled", "boolean", True, "non-persistent"),
    Field("brokerVersionString", "broker_version", "string", None, "Pulsar version"),
    Field("loadManagerClassName", "load_manager_class", "string", None, "the broker's load manager"),
    Field("lastUpdate", "last_update_ms", "integer", 0, "last write to the metadata store", "epoch ms"),
    Field("webServiceUrl", None, "string", None, "http://host:port (the broker id)"),
    Field("webServiceUrlTls", None, "string", None, "https://host:port"),
    Field("pulsarServiceUrl", None, "string", None, "pulsar://host:port"),
    Field("pulsarServiceUrlTls", None, "string", None, "pulsar+ssl://host:port"),
    Field("startTimestamp", None, "integer", 0, "broker start", "epoch ms"),
)
"""LocalBrokerData's scalar fields (a load report, ``/loadbalance/brokers/<id>``); besides these it
holds the :data:`RESOURCES`, ``lastStats`` (:data:`BUNDLE_STATS` per bundle) and bundle lists."""

MAX_TIME_MS: int = 253_402_300_799_999
"""The latest time a recording may hold, 9999-12-31T23:59:59.999Z in epoch milliseconds. A Java long
holds later ones, but Spark's timestamps count microseconds in a long (``timestamp_millis`` of
99999999999999999 overflows: a Java ArithmeticException that failed the whole ingest) and dates have
four-digit years; no clock Pulsar reads from is that far off."""


MAX_SAFE_INTEGER: int = 2**53 - 1
"""The largest integer ingest keeps in a long column (JavaScript's ``Number.MAX_SAFE_INTEGER``): pyspark 4.0
hands its pandas stage a long column holding a null as doubles (SPARK-54962), which hold no larger integer
exactly. A ``numTopics`` of 2^53 + 1 was written as 2^53 and one of 2^63 - 1 was a pandas traceback (no
int64 holds the double 2^63); no count or time Pulsar writes comes near it (:data:`MAX_TIME_MS` is below)."""


SECONDS_LIKE_MS: tuple[int, int] = (1_000_000_000, 100_000_000_000)
"""Times (ms) that are epoch *seconds* written where milliseconds belong: as milliseconds they fall in
1970-01-12 … 1973-03-03, where no clock Pulsar reads from is; as seconds in 2001-09-09 … year 5138, where
every real one is. A recording stamped by ``date +%s`` or Python's ``time.time()`` was read as January
1970, its lines 60 ms apart merged into a handful of ticks."""


def epoch_ms(value: object) -> int | None:
    """A time as Pulsar writes it, epoch milliseconds in a Java long (Jackson also reads a quoted
    number); None for null. One rule for every reader of recordings (ingest's rows, ``decide`` and
    ``advise`` on files): ``decide`` read a non-number as 0, so the line lost to its broker's others.

    Raises :class:`FormatError` (``invalid_value`` for a non-number, ``invalid_timestamp`` for NaN, ±inf,
    a time at or before 1970, past :data:`MAX_TIME_MS`, or one in seconds, :data:`SECONDS_LIKE_MS`)."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value.strip()) <= 20:
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatError("invalid_value", f"expected epoch milliseconds, got {str(value)[:40]!r}")
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise FormatError("invalid_timestamp", f"expected epoch milliseconds, got {value!r}")
    # at or before 1970: ingest quarantined it; decide and advise took it, as the oldest report (until 29 Nov)
    if value <= 0:
        raise FormatError(
            "invalid_timestamp", f"expected epoch milliseconds after 1970, got {str(value)[:24]}"
        )
    if value > MAX_TIME_MS:  # past year 9999 nothing is a time Pulsar wrote
        raise FormatError("invalid_timestamp", f"epoch milliseconds out of range, got {str(value)[:24]}")
    if SECONDS_LIKE_MS[0] <= value < SECONDS_LIKE_MS[1]:
        as_seconds = dt.datetime.fromtimestamp(int(value), dt.UTC).isoformat().replace("+00:00", "Z")
        raise FormatError(
            "invalid_timestamp",
            f"expected epoch milliseconds, got {int(value)}: epoch seconds ({as_seconds})",
        )
    return int(value)


STRING_LISTS: tuple[str, ...] = ("bundles", "lastBundleGains", "lastBundleLosses")
"""LocalBrokerData's lists of bundle names (absent: empty)."""

OBJECTS: tuple[str, ...] = ("lastStats", "protocols", "advertisedListeners")
"""LocalBrokerData's maps (absent: empty); ``lastStats`` maps bundle names to :data:`BUNDLE_STATS`."""


BUNDLE_STATS: tuple[Field, ...] = (
    *_MSG,
    Field("consumerCount", "consumer_count", "integer", 0, "consumers"),
    Field("producerCount", "producer_count", "integer", 0, "producers"),
    Field("topics", "topics", "integer", 0, "topics in the bundle"),
    Field("cacheSize", "cache_size", "integer", 0, "entries cached", "bytes"),
)
"""NamespaceBundleStats: one bundle's instantaneous traffic (an entry of ``lastStats``)."""

TIME_AVERAGE: tuple[Field, ...] = (
    Field("numSamples", "num_samples", "integer", 0, "samples averaged so far"),
    Field("maxSamples", "max_samples", "integer", 10, "window (default 1000 in longTermData)"),
    _rate("msgRateIn", "msg_rate_in", "msg/s", "average messages per second in", REQUIRED),
    _rate("msgRateOut", "msg_rate_out", "msg/s", "average messages per second out", REQUIRED),
    _rate("msgThroughputIn", "msg_throughput_in", "B/s", "average bytes per second in", REQUIRED),
    _rate("msgThroughputOut", "msg_throughput_out", "B/s", "average bytes per second out", REQUIRED),
)
"""TimeAverageMessageData; ``maxSamples`` defaults to the window of its place (10 or 1000)."""

TIME_AVERAGE_PARTS: tuple[tuple[str, str, int], ...] = (
    ("shortTermData", "short", 10),
    ("longTermData", "long", 1000),
)
"""BundleData's two required averages: JSON name, column prefix, default ``maxSamples``."""

BUNDLE_DATA: tuple[Field, ...] = (Field("topics", "topics", "integer", 0, "topics in the bundle"),)
"""BundleData's scalar fields (``/loadbalance/bundle-data/<bundle>``), besides the two averages."""


PROMETHEUS_BROKER_METRICS: dict[str, str] = {
    "pulsar_lb_cpu_usage": "cpu",
    "pulsar_lb_memory_usage": "memory",
    "pulsar_lb_directMemory_usage": "direct_memory",
    "pulsar_lb_bandwidth_in_usage": "bandwidth_in",
    "pulsar_lb_bandwidth_out_usage": "bandwidth_out",
}
"""Pulsar's Prometheus usage gauges (percent) → resource column prefix (limit recorded as 100)."""

PROMETHEUS_SIGNED_METRICS: frozenset[str] = frozenset(
    metric
    for metric, prefix in PROMETHEUS_BROKER_METRICS.items()
    for r in RESOURCES
    if r.prefix == prefix and r.fields is NIC_USAGE
)
"""The gauges that may be negative: a NIC's percentage, which Pulsar exports from the report's
``ResourceUsage`` (:data:`NIC_USAGE`); every other Prometheus value is refused below 0."""

PROMETHEUS_BUNDLE_METRICS: dict[str, str] = {
    "pulsar_bundle_msg_rate_in": "msg_rate_in",
    "pulsar_bundle_msg_rate_out": "msg_rate_out",
    "pulsar_bundle_msg_throughput_in": "msg_throughput_in",
    "pulsar_bundle_msg_throughput_out": "msg_throughput_out",
    "pulsar_bundle_topics_count": "topics",
    "pulsar_bundle_consumer_count": "consumer_count",
    "pulsar_bundle_producer_count": "producer_count",
}
"""Prometheus per-bundle series → bundle column."""

PROMETHEUS_TOPIC_METRICS: dict[str, str] = {
    "pulsar_rate_in": "msg_rate_in",
    "pulsar_rate_out": "msg_rate_out",
    "pulsar_throughput_in": "msg_throughput_in",
    "pulsar_throughput_out": "msg_throughput_out",
    "pulsar_consumers_count": "consumer_count",
    "pulsar_producers_count": "producer_count",
}
"""Pulsar's everyday topic-level series (``TopicStats.printTopicStats``/``NamespaceStatsAggregator``: labels
``cluster``, ``namespace``, ``topic`` and, with ``splitTopicAndPartitionIndexLabel``, ``partition``) → the
bundle column their sum over a bundle's topics fills. Summing a bundle's topics is what Pulsar's own
NamespaceBundleStats holds (``PulsarStats.updateStats`` adds every topic of the bundle); the bundle's
``topics`` is the number of distinct topics seen. ``pulsar_topics_count`` has no ``topic`` label (it is
per namespace) and, like every series without one, cannot be split into bundles."""

PROMETHEUS_LABELS: tuple[str, ...] = (
    "cluster",
    "broker",
    "bundle",
    "namespace",
    "topic",
    "partition",
    "instance",
    "metric",
)
"""The labels Pulsar itself writes (plus the scrape target's ``instance``). A Prometheus scrape whose
target labels clash with them renames Pulsar's to ``exported_<name>`` (``honor_labels: false``, the
default): ingest reads Pulsar's value from ``exported_<name>`` then, and counts the rename."""

PROMETHEUS_SAMPLE: tuple[Field, ...] = (
    Field(
        "value",
        "value",
        "number",
        REQUIRED,
        "one point of a series above, in the series' unit",
        minimum_unless=("metric", PROMETHEUS_SIGNED_METRICS),
    ),
)
"""A Prometheus point's value (``[time_s, "value"]``): finite and non-negative, like the fields it reports
(but for :data:`PROMETHEUS_SIGNED_METRICS`)."""


EXTENSIBLE_MANAGER = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
EXTENSIBLE_LOAD_FIELDS = (
    "weightedMaxEMA",
    "maxResourceUsage",
    "msgThroughputEMA",
    "reportedAt",
    "bundleCount",
)
"""Fields of the extensible manager's BrokerLoadData that the modular manager's LocalBrokerData lacks."""

OTHER_SHAPE_KEYS: tuple[str, ...] = (
    "data",  # a Prometheus response; a BundleData dump
    "bundleData",
    "path",
    "shortTermData",
    "longTermData",
    "topBundlesLoadData",  # the extensible manager's documents (extensible_kind)
    "top_bundles_load_data",
    "brokerVersion",
    "loadManagerClassName",
    *EXTENSIBLE_LOAD_FIELDS,
    "underLoaded",  # a legacy LoadReport (SimpleLoadManagerImpl)
    "systemResourceUsage",
)
"""Keys by which ingest's reader takes a JSON record for something other than a (wrapped) LocalBrokerData,
or for a record to refuse: any of them beside ``report`` in a recording's wrapper. Inside the report, Pulsar's
LocalBrokerData itself writes ``maxResourceUsage`` and ``loadManagerClassName`` (its getters), and a
report with ``lastUpdate`` is modular whatever else it names, so there only the legacy ones matter."""


def extensible_kind(obj: Mapping[str, object]) -> str | None:
    """Which of the extensible load manager's (PIP-192) documents ``obj`` is, or None.

    Its data looks like the modular manager's at a glance (``cpu``, ``bandwidthIn``, ``webServiceUrl``)
    but is another format: ``BrokerLoadData`` (``extensions.data``; published on the system topic
    ``loadbalancer-broker-load-data``) has ``weightedMaxEMA``/``maxResourceUsage`` and ``updatedAt``,
    and no ``lastUpdate`` or ``lastStats``; ``TopBundlesLoadData`` is ``{"topBundlesLoadData": […]}``;
    ``BrokerLookupData`` (``/loadbalance/brokers/<broker>`` under that manager) names ``brokerVersion``
    where LocalBrokerData names ``brokerVersionString``, or names the extensible manager's class."""
    if "topBundlesLoadData" in obj or "top_bundles_load_data" in obj:
        return "TopBundlesLoadData"
    modular = "lastUpdate" in obj or "lastStats" in obj
    if not modular and any(k in obj for k in EXTENSIBLE_LOAD_FIELDS):
        return "BrokerLoadData"
    lookup = ("brokerVersion" in obj and "brokerVersionString" not in obj) or obj.get(
        "loadManagerClassName"
    ) == EXTENSIBLE_MANAGER
    if not modular and lookup and "cpu" not in obj:
        return "BrokerLookupData"
    return None


def legacy_load_report(obj: Mapping[str, object]) -> bool:
    """A legacy ``LoadReport`` (``SimpleLoadManagerImpl``), not a LocalBrokerData: Pulsar's own
    ``LoadReportDeserializer`` takes ``loadReportType == "LoadReport"`` or an ``underLoaded`` field for one;
    ``systemResourceUsage`` (where it keeps the five resources) is its alone too. It also serialises
    ``cpu``…``bandwidthOut`` and ``lastUpdate`` through its getters, so it reads as a LocalBrokerData that
    owns no bundle (its bundles are in ``bundleStats``, not ``lastStats``/``bundles``)."""
    return obj.get("loadReportType") == "LoadReport" or "underLoaded" in obj or "systemResourceUsage" in obj


# --------------------------------------------------------------------------------------- values


_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "-Infinity": -math.inf}
_QUOTED_NUMBER = JAVA_DECIMAL
"""A quoted number Java's ``Double.parseDouble`` (Jackson's coercion) reads: Python's ``float`` also read
``2_80``, any script's digits (``٢٨٠``) and ``inf`` as numbers, which Pulsar refuses."""


JAVA_INT = (-(2**31), 2**31 - 1)
"""The range of a field held in an ``int`` column (a Java int in Pulsar: Jackson refuses more). A
``numBundles`` of 2**31 passed as a long and failed ingest's Int32 cast with a TypeError."""
_INTEGER_RANGES = {
    True: (*JAVA_INT, "Java's int range"),
    False: (-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER, "±(2^53 - 1), the integers ingest keeps exactly"),
}
"""By whether the field is held in an ``int`` column: its range and its name. A Java long (Pulsar's other
integers) holds more than :data:`MAX_SAFE_INTEGER`; every reader refuses it, so that decide accepts a report
exactly when ingest keeps it."""


def _number(value: object) -> float:
    if isinstance(value, bool):
        raise FormatError("invalid_value", "expected a number")
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer of hundreds of digits: no double holds it
            raise FormatError("invalid_value", f"number out of range: {str(value)[:24]}…") from None
    if isinstance(value, str):  # Jackson's scalar coercion reads quoted numbers, and writes NaN quoted
        text = value.strip()
        if text in _NON_FINITE:
            return _NON_FINITE[text]
        if _QUOTED_NUMBER.fullmatch(text):
            return float(text)
    raise FormatError("invalid_value", "expected a number")


def coerce(spec: Field, value: object) -> float | int | bool | str | None:
    """``value`` as ``spec``'s type (no range check: see :func:`check`); ``None`` stays ``None``.

    Numbers may be NaN/±Inf here (ingest records them before refusing them as ``nan_value``)."""
    if value is None:
        return None
    kind = spec.kind
    if kind == "number":
        return value if type(value) is float else _number(value)  # the common case first: ingest's speed
    if kind == "integer":
        low, high, what = _INTEGER_RANGES[spec.spark_type == "int"]
        if type(value) is int:
            if low <= value <= high:
                return value
            raise FormatError("invalid_value", f"integer out of {what}")  # the callers add (got …)
        number = _number(value)
        if not number.is_integer():
            raise FormatError("invalid_value", "expected an integer")
        if not low <= number <= high:
            raise FormatError("invalid_value", f"integer out of {what}")  # the callers add (got …)
        return int(number)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise FormatError("invalid_value", "expected true or false")
        return value
    if not isinstance(value, str):
        raise FormatError("invalid_value", "expected a string")
    return value


def check(spec: Field, value: float | int | bool | str | None, siblings: Mapping[str, object]) -> None:
    """Refuse a coerced value outside ``spec``'s range: non-finite, or below its minimum."""
    if value is None:
        if spec.default is REQUIRED:
            raise FormatError("missing_field", "required field is missing")
        return
    if spec.kind not in ("number", "integer") or isinstance(value, bool | str):
        return
    if math.isnan(value) or math.isinf(value):
        raise FormatError("nan_value", "expected a finite number")
    if spec.minimum is None or value >= spec.minimum:
        return
    if spec.minimum_unless is not None and siblings.get(spec.minimum_unless[0]) in spec.minimum_unless[1]:
        return
    if spec.minimum_if_positive is not None:
        guard = siblings.get(spec.minimum_if_positive)
        try:
            if _number(guard) <= 0:
                return  # limit ≤ 0: 0 % whatever the usage (spec §1.1)
        except FormatError:
            pass
    raise FormatError("negative_value", "must not be negative")


def read_fields(
    obj: Mapping[str, object], fields: tuple[Field, ...], defaults: Mapping[str, Default] | None = None
) -> dict[str, float | int | bool | str | None]:
    """The checked values of ``fields`` in ``obj`` by JSON name, missing ones replaced by their default
    (``defaults`` overrides a field's own, e.g. ``maxSamples`` by place). The :class:`FieldError`
    raised names the field and the value, so that a caller can name the JSON path."""
    out: dict[str, float | int | bool | str | None] = {}
    for spec in fields:
        raw = obj.get(spec.json)
        try:
            value = coerce(spec, raw)
            default = (defaults or {}).get(spec.json, spec.default)
            if value is None and default is not REQUIRED:
                value = default  # type: ignore[assignment]
            check(spec, value, obj)
        except FormatError as exc:
            raise FieldError(spec.json, exc, raw) from None
        out[spec.json] = value
    return out


def check_collections(obj: Mapping[str, object]) -> None:
    """Refuse a LocalBrokerData whose :data:`STRING_LISTS` or :data:`OBJECTS` have the wrong shape."""
    for name in STRING_LISTS:
        value = obj.get(name)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise FieldError(name, FormatError("invalid_value", "expected a list of strings"), value)
    for name in OBJECTS:
        value = obj.get(name)
        if value is not None and not isinstance(value, Mapping):
            raise FieldError(name, FormatError("invalid_value", "expected a JSON object"), value)


# --------------------------------------------------------------------------------------- columns


def columns(fields: tuple[Field, ...], prefix: str = "") -> list[tuple[str, ColumnType]]:
    """``(column, Spark type name)`` of the fields that have a column, in table order."""
    return [(prefix + f.column, f.spark_type) for f in fields if f.column is not None]


def resource_columns() -> list[tuple[str, ColumnType]]:
    """``<prefix>_usage``, ``<prefix>_limit`` (double) for the five resources, in Pulsar's order."""
    return [(f"{r.prefix}_{f.column}", f.spark_type) for r in RESOURCES for f in r.fields if f.column]


def column_problems(
    frame: pd.DataFrame, fields: tuple[Field, ...], prefix: str = "", nonfinite: pd.Series | None = None
) -> list[tuple[pd.Series, str, str]]:
    """The rules of :func:`check`, vectorised: ``(mask, reason, column)`` for every rule a column breaks.

    ``nonfinite`` (one string per row, ``col=value`` items) marks numbers that were NaN/±Inf in the
    source and are null in ``frame``. Rules come in :func:`check`'s order: missing, non-finite,
    below the minimum. A column absent from ``frame`` breaks nothing.
    """
    # Imported here, not at the top: the model is on `shedlab decide`'s path, which must not load pandas
    # (tests/cli/test_cli.py; pandas is ~0.3 s of a 0.6 s start-up, bench/bench_startup.py).
    import pandas as pd

    out: list[tuple[pd.Series, str, str]] = []
    for spec in fields:
        if spec.column is None or prefix + spec.column not in frame.columns:
            continue
        col = prefix + spec.column
        values = pd.to_numeric(frame[col], errors="coerce") if spec.kind in ("number", "integer") else None
        was_nonfinite = (
            nonfinite.str.contains(rf"(?:^|,){col}=", regex=True)
            if nonfinite is not None and spec.kind == "number"
            else pd.Series(False, index=frame.index)
        )
        if spec.default is REQUIRED:
            out.append((frame[col].isna() & ~was_nonfinite, "missing_field", col))
        if values is None:
            continue
        out.append((was_nonfinite | values.isin([np.inf, -np.inf]), "nan_value", col))
        if spec.minimum is not None:
            below = values < spec.minimum
            if spec.minimum_if_positive is not None:
                guard = prefix + spec.minimum_if_positive
                below &= ~(pd.to_numeric(frame[guard], errors="coerce") <= 0)
            if spec.minimum_unless is not None:
                name, exempt = spec.minimum_unless
                below &= ~frame[prefix + name].isin(list(exempt))
            out.append((below, "negative_value", col))
    return out
