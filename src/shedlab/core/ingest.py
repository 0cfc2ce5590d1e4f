"""Ingest's rules, without Spark: parse recorded load data into rows, validate, deduplicate.

The formats themselves (field names, defaults, what is accepted) are defined once in
:mod:`shedlab.model.formats`, which the model's readers (``decide``, ``conform``) use too: a payload
that one accepts the other accepts, with the same values. This module adds what only ingest needs:
the record shapes of recorded files (wrappers with ``timestamp``/``broker``/``cluster``, BundleData
dumps, Prometheus responses), the time of each sample, and the quarantine of what is malformed,
with a reason (:data:`REASONS`). :mod:`shedlab.spark.ingest` runs these functions on the executors
(``mapInPandas``, ``applyInPandas``) and writes the tables.
"""

from __future__ import annotations

import glob
import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pandas as pd

from shedlab.core.locations import check_uri, is_remote, walk, without_file_scheme
from shedlab.core.partitions import MAX_NAME_BYTES, cluster_problem
from shedlab.errors import (
    DuplicateKeyError,
    InputError,
    did_you_mean,
    refuse_special_file,
    unique_object,
)
from shedlab.errors import shown as shown_value
from shedlab.model.bundles import bundle_for_topic, bundle_name_problem, namespace_of_topic, parse_range
from shedlab.model.formats import (
    BUNDLE_DATA,
    BUNDLE_STATS,
    LOCAL_BROKER_DATA,
    MAX_TIME_MS,
    PROMETHEUS_BROKER_METRICS,
    PROMETHEUS_BUNDLE_METRICS,
    PROMETHEUS_LABELS,
    PROMETHEUS_SAMPLE,
    PROMETHEUS_TOPIC_METRICS,
    RESOURCES,
    TIME_AVERAGE,
    TIME_AVERAGE_PARTS,
    ColumnType,
    Field,
    FieldError,
    FormatError,
    Required,
    check,
    check_collections,
    coerce,
    column_problems,
    columns,
    epoch_ms,
    extensible_kind,
    legacy_load_report,
    resource_columns,
)

__all__ = [
    "FLOAT_COLUMNS",
    "MAX_CLUSTER_PATH",
    "PROMETHEUS_BROKER_METRICS",
    "PROMETHEUS_BUNDLE_METRICS",
    "RAW_COLUMNS",
    "REASONS",
    "STAGED_COLUMNS",
    "Sources",
    "broker_id_from_url",
    "check_clusters",
    "check_ingest_output",
    "check_parquet_file",
    "choose_cluster",
    "classify_sources",
    "cluster_problem",
    "local_bytes",
    "parse_text_batch",
    "process_group",
    "recorded_clusters",
    "recorded_span",
    "typed_frame",
    "validate_rows",
]

JSON_LINE_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz", ".jsonl.bz2", ".txt", ".log")
JSON_DOC_SUFFIXES = (".json", ".json.gz", ".json.bz2")
PARQUET_SUFFIXES = (".parquet", ".pq")

REASONS: dict[str, str] = {
    "malformed_json": "the record is not valid JSON",
    "duplicate_key": "a key given twice in one JSON object (a JSON reader keeps the last value, silently; "
    "decide refuses such a document)",
    "unknown_record": "a JSON value that is none of the accepted shapes",
    "legacy_load_report": "a legacy LoadReport (SimpleLoadManagerImpl), not a LocalBrokerData",
    "missing_field": "a required field is absent or null",
    "invalid_value": "a value of the wrong type (e.g. a string where a number belongs)",
    "nan_value": "a NaN or infinite number",
    "negative_value": "a negative number where Pulsar never produces one",
    "unknown_metric": "a Prometheus series that is none of pulsar_lb_*_usage, pulsar_bundle_* or a "
    "topic-level series of bundle traffic (pulsar_rate_in/out, pulsar_throughput_in/out, "
    "pulsar_producers/consumers_count)",
    "aggregate_series": "a Prometheus series summed over a namespace or the broker (no topic label, e.g. "
    "pulsar_topics_count, or exposeTopicLevelMetricsInPrometheus=false): it cannot be split into bundles",
    "no_bundle_boundaries": "a topic-level series whose namespace has no bundle boundaries (give them with "
    "ingest --bundles), or whose topic label is not a full topic name",
    "extensible_load_data": "the extensible load manager's data (BrokerLoadData, TopBundlesLoadData, "
    "BrokerLookupData): another load manager's format, which the modular strategies cannot use",
    "invalid_timestamp": "a time that is not a positive epoch-millisecond value up to year 9999, or one "
    "in epoch seconds",
    "double_claim": "a bundle claimed by two or more brokers in the same tick",
    "report_quarantined": "a bundle entry of a load report that was itself quarantined",
    "invalid_utf8": "a line (or document) that is not valid UTF-8 text, e.g. torn by an interrupted write",
    "invalid_cluster": "a cluster name Pulsar refuses (NamedEntity: ASCII letters, digits, _ - = : .), or "
    "one too long for the output's partition directories",
    "invalid_bundle": "a bundle name that is not Pulsar's tenant/namespace/0xLOWER_0xUPPER (eight hex "
    "digits each, LOWER below UPPER)",
}
"""Reason codes of the quarantine table."""

MAX_CLUSTER_PATH = MAX_NAME_BYTES - len("cluster=")
"""The longest cluster name as a partition directory holds it (``cluster=<name>``, Spark escaping ``:``
and ``=`` as ``%3A``/``%3D``, the only characters of a Pulsar name it escapes). Pulsar sets no length."""


def _cluster_problems(clusters: pd.Series) -> pd.Series:
    """:func:`cluster_problem` of each row (null where none), computed once per distinct name."""
    return _problems(clusters, cluster_problem)


def _problems(names: pd.Series, problem: Callable[[str], str | None]) -> pd.Series:
    """``problem`` of each row's name (null where none, or no name), computed once per distinct name."""
    found = {n: problem(n) for n in names.dropna().unique().tolist()}
    return names.map({n: p for n, p in found.items() if p is not None})


_RAW_LIMIT = 2000


# ---------------------------------------------------------------------------------------------
# Pure-Python parsing (runs on the executors inside mapInPandas; testable without Spark)
# ---------------------------------------------------------------------------------------------


class _BadValueError(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def broker_id_from_url(url: str | None) -> str | None:
    """Pulsar's broker id ``host:webServicePort`` from a URL (``http://b1:8080`` → ``b1:8080``)."""
    if not url:
        return None
    text = url if "://" in url else f"http://{url}"
    try:
        parsed = urlparse(text)
        port = parsed.port
    except ValueError:
        return None
    host = parsed.hostname
    if not host:
        return None
    if port is None:
        port = 443 if parsed.scheme == "https" else 80
    return f"{host}:{port}"


def _extract(
    row: dict[str, Any],
    obj: Mapping[str, Any],
    fields: tuple[Field, ...],
    path: str,
    prefix: str = "",
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """Put ``fields`` of ``obj`` into ``row`` under their columns, with Pulsar's defaults for missing ones.

    Types are checked here (:func:`~shedlab.model.formats.coerce`); ranges and required fields by
    :func:`validate_rows` on whole columns, with the same rules. NaN/±Inf stay in ``row`` until
    :func:`_mark_nonfinite` notes them."""
    for spec in fields:
        try:
            value = coerce(spec, obj.get(spec.json))
            if value is None:
                fallback = spec.default if defaults is None else defaults.get(spec.json, spec.default)
                value = None if isinstance(fallback, Required) else fallback
            if spec.column is None:  # not kept, but checked as the model's reader checks it
                check(spec, value, obj)
                continue
        except FormatError as exc:
            raise _BadValueError(
                exc.reason, f"{path}{spec.json}: {exc.message} (got {obj.get(spec.json)!r})"
            ) from None
        row[prefix + spec.column] = value


def _str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _BadValueError("invalid_value", f"{path}{key}: expected a string, got {value!r}")
    return value


def _time_ms(value: Any, path: str) -> int | None:
    """:func:`~shedlab.model.formats.epoch_ms`, its refusal quarantined under ``path``."""
    try:
        return epoch_ms(value)
    except FormatError as exc:
        raise _BadValueError(exc.reason, f"{path}: {exc.message}") from None


def _raw(text: str) -> str:
    return text if len(text) <= _RAW_LIMIT else text[:_RAW_LIMIT] + "…"


@dataclass
class _Ctx:
    source: str
    source_kind: str
    default_cluster: str
    web_port: int
    file_time_ms: int | None = None  # the time of a BundleData that has none of its own
    path_bundle: str | None = None  # the bundle a file is named after (…/tenant/ns/0x…_0x….json)
    boundaries: Mapping[str, Sequence[int]] = field(default_factory=dict)  # namespace → bundle boundaries
    rows: list[dict[str, Any]] = field(default_factory=list)
    points: int = 0

    def quarantine(
        self,
        record: int,
        reason: str,
        detail: str,
        raw: str,
        *,
        table: str = "record",
        cluster: str | None = None,
        broker: str | None = None,
        bundle: str | None = None,
        time_ms: int | None = None,
    ) -> None:
        self.rows.append(
            {
                "kind": "quarantine",
                "source": self.source,
                "source_kind": self.source_kind,
                "record": record,
                "cluster": cluster,
                "broker": broker,
                "bundle": bundle,
                "time_ms": time_ms,
                "metric": table,
                "reason": reason,
                "detail": detail,
                "raw": _raw(raw),
            }
        )


def _looks_like_report(obj: Mapping[str, Any]) -> bool:
    return obj.get("loadReportType") == "LocalBrokerData" or any(
        k in obj for k in ("lastStats", "webServiceUrl", "cpu", "bandwidthIn", "lastUpdate")
    )


def _looks_like_bundle_data(obj: Mapping[str, Any]) -> bool:
    return "shortTermData" in obj or "longTermData" in obj


def _parse_report(
    ctx: _Ctx, record: int, raw: str, report: Mapping[str, Any], wrapper: Mapping[str, Any] | None
) -> None:
    """One load report: its broker row, then one row per ``lastStats`` bundle (or a quarantine row)."""
    cluster, broker, time_ms = _report_identity(ctx, report, wrapper or {})
    key = {
        "source": ctx.source,
        "source_kind": ctx.source_kind,
        "record": record,
        "report_id": f"{ctx.source}#{record}",
        "cluster": cluster,
        "time_ms": time_ms,
        "broker": broker,
    }
    row = _broker_row(key, raw, report)
    stats = report.get("lastStats", {})
    if stats is None:
        stats = {}
    if not isinstance(stats, Mapping):
        raise _BadValueError(
            "invalid_value", f"report.lastStats: expected an object, got {type(stats).__name__}"
        )
    bundle_rows = [_bundle_row(key, bundle, s) for bundle, s in stats.items()]
    ctx.rows.append(row)
    ctx.rows.extend(bundle_rows)


def _report_identity(
    ctx: _Ctx, report: Mapping[str, Any], w: Mapping[str, Any]
) -> tuple[str, str | None, int | None]:
    """Cluster, broker and time of a report: the recording's wrapper first, then the report's own
    fields (``webServiceUrl``, else ``webServiceUrlTls``; ``lastUpdate``)."""
    cluster = _str(w, "cluster", "")  # not text: quarantined, not replaced by --cluster
    broker = _str(w, "broker", "")  # not text: quarantined, not replaced by the report's URL's
    if broker is not None and not broker.strip():  # as decide and advise refuse it
        raise _BadValueError("invalid_value", f"{_BLANK_BROKER}{broker!r}")
    if not broker:
        broker = broker_id_from_url(_str(report, "webServiceUrl", "report."))
        if not broker:
            broker = broker_id_from_url(_str(report, "webServiceUrlTls", "report."))
    time_ms = _time_ms(w.get("timestamp"), "timestamp") if "timestamp" in w else None
    if time_ms is None:
        time_ms = _time_ms(report.get("lastUpdate"), "report.lastUpdate")
    return cluster or ctx.default_cluster, broker, time_ms


def _broker_row(key: Mapping[str, Any], raw: str, report: Mapping[str, Any]) -> dict[str, Any]:
    """The report's broker row: resources (absent: Pulsar's default, 0 out of 0), counts, collections."""
    row: dict[str, Any] = {"kind": "broker", **key, "raw": _raw(raw)}
    for resource in RESOURCES:
        name, prefix = resource.json, resource.prefix
        res = report.get(name)
        if res is None:  # Pulsar's default: ResourceUsage(), 0 out of 0
            row[f"{prefix}_usage"] = row[f"{prefix}_limit"] = 0.0
            continue
        if not isinstance(res, Mapping):
            raise _BadValueError(
                "invalid_value", f"report.{name}: expected an object {{usage, limit}}, got {res!r}"
            )
        _extract(row, res, resource.fields, f"report.{name}.", f"{prefix}_")
    _extract(row, report, LOCAL_BROKER_DATA, "report.", defaults=_bundle_count(report))
    try:
        check_collections(report)
    except FieldError as exc:
        raise _BadValueError(exc.reason, f"report.{exc.field}: {exc.message} (got {exc.value!r})") from None
    row["last_update_ms"] = _time_ms(report.get("lastUpdate"), "report.lastUpdate")
    return row


def _bundle_row(key: Mapping[str, Any], bundle: str, s: object) -> dict[str, Any]:
    """One ``lastStats`` entry as a bundle row, or as a quarantine row with its reason (a fresh row: no
    field read before the bad one is kept)."""
    row: dict[str, Any] = {"kind": "bundle", **key, "bundle": bundle}
    try:
        if not isinstance(s, Mapping):
            raise _BadValueError("invalid_value", f"report.lastStats.{bundle}: expected an object")
        _extract(row, s, BUNDLE_STATS, f"report.lastStats.{bundle}.")
    except _BadValueError as bad:
        row = {"kind": "quarantine", **key, "bundle": bundle, "metric": "bundle_samples"}
        row.update(reason=bad.reason, detail=bad.detail)
    row["raw"] = _raw(json.dumps(s))
    return row


def _bundle_count(report: Mapping[str, Any]) -> dict[str, Any]:
    """``numBundles`` defaults to the length of ``bundles``, as in the model's reader."""
    bundles = report.get("bundles")
    return {"numBundles": len(bundles)} if isinstance(bundles, list) else {}


def _parse_bundle_data(
    ctx: _Ctx, record: int, raw: str, bundle: str | None, data: Mapping[str, Any], w: Mapping[str, Any]
) -> None:
    cluster = _str(w, "cluster", "")
    row: dict[str, Any] = {
        "kind": "bundle_data",
        "source": ctx.source,
        "source_kind": ctx.source_kind,
        "record": record,
        "cluster": cluster or ctx.default_cluster,
        "time_ms": _time_ms(w.get("timestamp"), "timestamp") if "timestamp" in w else ctx.file_time_ms,
        "bundle": bundle,
        "raw": _raw(raw),
    }
    for part, prefix, max_samples in TIME_AVERAGE_PARTS:
        sub = data.get(part)
        if sub is None:  # required: its columns stay null and validate_rows names the first one
            for c, _type in columns(TIME_AVERAGE, f"{prefix}_"):
                row[c] = None
            continue
        if not isinstance(sub, Mapping):
            raise _BadValueError("invalid_value", f"{part}: expected an object")
        _extract(row, sub, TIME_AVERAGE, f"{part}.", f"{prefix}_", {"maxSamples": max_samples})
    _extract(row, data, BUNDLE_DATA, "")
    ctx.rows.append(row)


def _prom_broker_id(labels: Mapping[str, Any], web_port: int) -> str | None:
    broker = labels.get("broker")
    instance = labels.get("instance")
    if isinstance(broker, str) and broker:
        if ":" in broker:
            return broker
        if isinstance(instance, str) and instance.split(":", 1)[0] == broker and ":" in instance:
            return instance
        return f"{broker}:{web_port}"
    if isinstance(instance, str) and ":" in instance:
        return instance
    return None


def _parse_prometheus(ctx: _Ctx, record: int, raw: str, doc: Mapping[str, Any]) -> None:
    data = doc.get("data")
    if not isinstance(data, Mapping) or not isinstance(data.get("result"), list):
        raise _BadValueError("unknown_record", "a Prometheus response without data.result")
    if doc.get("status") not in (None, "success"):
        raise _BadValueError("unknown_record", f"Prometheus response with status {doc.get('status')!r}")
    del record  # Prometheus rows are numbered by point, across the whole file
    for series_no, series in enumerate(data["result"]):
        values = series.get("values") if isinstance(series, Mapping) else None
        if values is None and isinstance(series, Mapping) and "value" in series:
            values = [series["value"]]
        if not isinstance(values, list):
            ctx.points += 1
            ctx.quarantine(
                ctx.points,
                "unknown_record",
                f"series {series_no}: no values",
                json.dumps(series)[:_RAW_LIMIT],
                table="prometheus",
            )
            continue
        labels = series.get("metric", {})
        _prom_series(ctx, series_no, labels if isinstance(labels, Mapping) else {}, values)


@dataclass(frozen=True)
class _Series:
    """What every point of one Prometheus series shares: its metric, where it belongs, and its problem
    (an unknown or unmappable series, no broker, a bundle metric without a bundle), if any."""

    no: int
    name: object
    label_text: str
    relabelled: str | None
    cluster: str
    broker: str | None
    bundle: str | None
    topic: str | None
    problem: tuple[str, str] | None


def _prom_series(ctx: _Ctx, series_no: int, labels: Mapping[str, Any], values: list[Any]) -> None:
    """The rows of one series: a topic-level series is mapped to its bundle by hashing the topic."""
    name = labels.get("__name__")
    label_text = json.dumps(labels, sort_keys=True)
    labels, relabelled = _pulsar_labels(labels)
    cluster = labels.get("cluster") if isinstance(labels.get("cluster"), str) else None
    bundle = labels.get("bundle") if isinstance(labels.get("bundle"), str) else None
    topic = _topic_of(labels) if isinstance(name, str) and name in PROMETHEUS_TOPIC_METRICS else None
    problem = _series_problem(name, topic, ctx.boundaries)
    if topic is not None and problem is None:
        bundle = bundle_for_topic(topic, ctx.boundaries)
    broker = _prom_broker_id(labels, ctx.web_port)
    if problem is None and broker is None:
        problem = ("missing_field", f"{name}: no broker/instance label")
    if problem is None and name in PROMETHEUS_BUNDLE_METRICS and bundle is None:
        problem = ("missing_field", f"{name}: no bundle label")
    cluster = cluster or ctx.default_cluster
    series = _Series(series_no, name, label_text, relabelled, cluster, broker, bundle, topic, problem)
    for point in values:
        ctx.points += 1
        _prom_point(ctx, series, ctx.points, point)


def _prom_point(ctx: _Ctx, series: _Series, rec: int, point: Any) -> None:
    """One ``[time, "value"]`` point: a row, or a quarantine row naming what is wrong with it."""
    name, broker, bundle = series.name, series.broker, series.bundle
    ts_ms, value, problem = _point_values(series.no, point)
    problem = problem or series.problem  # a malformed point first, then what all the series' points share
    raw = f"{series.label_text} {json.dumps(point)}"
    if problem is not None:
        ctx.quarantine(
            rec,
            problem[0],
            problem[1],
            raw,
            table="prometheus",
            cluster=series.cluster,
            broker=broker,
            bundle=bundle,
            time_ms=ts_ms,
        )
        return
    ctx.rows.append(
        {
            "kind": "prom",
            "source": ctx.source,
            "source_kind": "prometheus",
            "record": rec,
            "cluster": series.cluster,
            "time_ms": ts_ms,
            "broker": broker,
            "bundle": bundle if name in PROMETHEUS_BUNDLE_METRICS or series.topic is not None else None,
            "topic": series.topic,
            "relabelled": series.relabelled,
            "metric": name,
            "value": value,
            "raw": raw[:_RAW_LIMIT],
        }
    )


def _point_values(series_no: int, point: Any) -> tuple[int | None, float | None, tuple[str, str] | None]:
    """A point's time in ms and value, or the problem that makes it unreadable (any shape, any size)."""
    ts_ms: int | None = None
    try:
        ms = round(float(point[0]) * 1000.0)
        if not -(2**63) <= ms < 2**63:  # no time Pulsar (or Prometheus) could have written
            raise ValueError
        ts_ms = ms
        text = point[1]
        if isinstance(text, bool):
            raise ValueError
        return ts_ms, float(text), None
    except (TypeError, ValueError, IndexError, KeyError, OverflowError):
        return ts_ms, None, ("invalid_value", f"series {series_no}: malformed point {str(point)[:80]}")


def _pulsar_labels(labels: Mapping[str, Any]) -> tuple[Mapping[str, Any], str | None]:
    """Pulsar's labels of a series, with ``exported_<name>`` renames undone, and which were renamed.

    Prometheus renames a scraped label that clashes with a target label (``honor_labels: false``, its
    default; Kubernetes service discovery adds ``namespace``, many set ``cluster``): Pulsar's value is
    then in ``exported_<name>`` and the plain label is the scraper's. Reading the plain one would make a
    phantom cluster (or namespace), so Pulsar's is taken back, and the rename counted."""
    renamed = [n for n in PROMETHEUS_LABELS if isinstance(labels.get(f"exported_{n}"), str)]
    if not renamed:
        return labels, None
    out = dict(labels)
    for n in renamed:
        out[n] = labels[f"exported_{n}"]
    return out, ",".join(renamed)


def _topic_of(labels: Mapping[str, Any]) -> str | None:
    """The full name of a topic-level series' topic: ``topic``, plus ``-partition-N`` when Pulsar split
    the partition into its own label (``splitTopicAndPartitionIndexLabel``; -1 means not partitioned)."""
    topic = labels.get("topic")
    if not isinstance(topic, str) or not topic:
        return None
    partition = labels.get("partition")
    if isinstance(partition, str) and partition.isdigit() and "-partition-" not in topic:
        return f"{topic}-partition-{int(partition)}"
    return topic


def _series_problem(
    name: Any, topic: str | None, boundaries: Mapping[str, Sequence[int]]
) -> tuple[str, str] | None:
    """Why every point of a series is quarantined (its name, or where its topic's bundle is), or None."""
    if not isinstance(name, str):  # any JSON value may stand where the name belongs
        return ("unknown_metric", f"{str(name)[:80]}: not a series name")
    if name in PROMETHEUS_BROKER_METRICS or name in PROMETHEUS_BUNDLE_METRICS:
        return None
    if name == "pulsar_topics_count" or (name in PROMETHEUS_TOPIC_METRICS and topic is None):
        return ("aggregate_series", f"{name}: no topic label (a namespace or broker total)")
    if name not in PROMETHEUS_TOPIC_METRICS:
        return ("unknown_metric", f"{name!r}: not a series of broker usage or bundle traffic (unknown units)")
    assert topic is not None
    namespace = namespace_of_topic(topic)
    if namespace is None:
        return ("no_bundle_boundaries", f"{name}: topic {topic[:120]!r} is not a full topic name")
    if not boundaries.get(namespace):
        return ("no_bundle_boundaries", f"namespace {namespace}: no bundle boundaries (ingest --bundles)")
    return None


def _bundle_from_path(source: str) -> str | None:
    """``…/tenant/namespace/0x00000000_0x40000000.json`` → ``tenant/namespace/0x00000000_0x40000000``: a
    BundleData saved under its znode's name (``/loadbalance/bundle-data/<tenant>/<namespace>/<range>``)."""
    name = source.rstrip("/")
    for suffix in (".gz", ".bz2", ".json"):
        name = name.removesuffix(suffix)
    parts = name.split("/")
    if len(parts) >= 3 and parse_range(parts[-1]) is not None and parts[-2] and parts[-3]:
        return "/".join(parts[-3:])
    return None


def _check_not_extensible(obj: Mapping[str, Any], where: str = "") -> None:
    found = extensible_kind(obj)
    if found is not None:
        raise _BadValueError(
            "extensible_load_data",
            f"{where}a {found} of the extensible load manager (ExtensibleLoadManagerImpl), not the modular "
            "manager's LocalBrokerData/BundleData",
        )


def _parse_value(ctx: _Ctx, record: int, raw: str, obj: Any) -> None:
    """Classify one JSON value and emit its rows (or a quarantine row)."""
    if not isinstance(obj, Mapping):
        raise _BadValueError("unknown_record", f"expected a JSON object, found {type(obj).__name__}")
    if isinstance(obj.get("data"), Mapping) and "result" in obj["data"]:
        _parse_prometheus(ctx, record, raw, obj)
        return
    _check_not_extensible(obj)
    inner = obj.get("report")
    if isinstance(inner, Mapping):
        _check_not_extensible(inner, "report: ")
        if legacy_load_report(inner):
            raise _BadValueError(
                "legacy_load_report", "report is a legacy LoadReport (SimpleLoadManagerImpl)"
            )
        _parse_report(ctx, record, raw, inner, obj)
        return
    if "report" in obj:
        raise _BadValueError("invalid_value", f"report: expected an object, got {type(inner).__name__}")
    if legacy_load_report(obj):
        raise _BadValueError(
            "legacy_load_report", "a legacy LoadReport (SimpleLoadManagerImpl); only LocalBrokerData"
        )
    data = obj.get("data")
    if isinstance(data, Mapping) and _looks_like_bundle_data(data):
        bundle = obj.get("bundle") if isinstance(obj.get("bundle"), str) else None
        path = obj.get("path")
        bundle = bundle or (_bundle_from_path(path) if isinstance(path, str) else None) or ctx.path_bundle
        _parse_bundle_data(ctx, record, raw, bundle, data, obj)
        return
    if isinstance(obj.get("bundleData"), Mapping):
        for name, bd in obj["bundleData"].items():
            if not isinstance(bd, Mapping):
                raise _BadValueError("invalid_value", f"bundleData.{name}: expected an object")
            _parse_bundle_data(ctx, record, raw, name, bd, obj)
        return
    if _looks_like_bundle_data(obj):
        bundle = obj.get("bundle") if isinstance(obj.get("bundle"), str) else None
        _parse_bundle_data(ctx, record, raw, bundle or ctx.path_bundle, obj, obj)
        return
    if _looks_like_report(obj):
        _parse_report(ctx, record, raw, obj, None)
        return
    raise _BadValueError(
        "unknown_record", "neither a load report, a BundleData dump nor a Prometheus response"
    )


def _parse_one(ctx: _Ctx, record: int, text: str) -> None:
    try:
        obj = json.loads(text, object_pairs_hook=unique_object)
    except DuplicateKeyError as exc:
        ctx.quarantine(record, "duplicate_key", f"key {exc.key!r} appears twice in one object", text)
        return
    except (json.JSONDecodeError, RecursionError) as exc:
        ctx.quarantine(record, "malformed_json", str(exc), text)
        return
    mark = len(ctx.rows)
    try:
        _parse_value(ctx, record, text, obj)
    except _BadValueError as bad:
        del ctx.rows[mark:]
        ctx.quarantine(record, bad.reason, bad.detail, text)


def _split_document(text: str) -> list[tuple[int, str]]:
    """A ``.json`` file's records: the document itself, its array elements, or its lines (JSONL).

    A UTF-8 byte-order mark is dropped (Spark's whole-text reader keeps it; decide reads such a file, and
    Windows PowerShell writes one): each line of a pretty-printed report was quarantined as malformed."""
    text = text.removeprefix("\ufeff")
    stripped = text.strip()
    if not stripped:
        return []
    try:
        doc = json.loads(stripped, object_pairs_hook=unique_object)
    except DuplicateKeyError:  # the record that holds it is quarantined (_parse_one), not its neighbours
        return list(enumerate(_element_texts(stripped), 1)) if stripped[0] == "[" else [(1, stripped)]
    except json.JSONDecodeError:
        return [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if isinstance(doc, list):
        return [(i, json.dumps(item, allow_nan=True)) for i, item in enumerate(doc, 1)]
    return [(1, stripped)]


def _element_texts(array: str) -> list[str]:
    """The text of each element of ``array`` (a valid JSON array) as written: an element with a key given
    twice, parsed again, keeps it (its parsed value, written back, would hold the last value only)."""
    decoder = json.JSONDecoder()
    texts: list[str] = []
    at = _after_space(array, array.index("[") + 1)
    while array[at] != "]":
        _, end = decoder.raw_decode(array, at)
        texts.append(array[at:end])
        at = _after_space(array, end)
        at = _after_space(array, at + 1) if array[at] == "," else at
    return texts


def _after_space(text: str, at: int) -> int:
    """The index of the first character at or after ``at`` that is not JSON's whitespace."""
    while text[at] in " \t\n\r":
        at += 1
    return at


def _is_false(flag: Any) -> bool:
    """An explicit false (Python or NumPy); a missing flag is not false."""
    return flag is not None and not pd.isna(flag) and not bool(flag)


def parse_text_batch(
    batch: pd.DataFrame,
    *,
    default_cluster: str,
    web_port: int,
    line_offsets: Mapping[tuple[str, int], int] | None = None,
    counters: dict[tuple[str, int], int] | None = None,
    boundaries: Mapping[str, Sequence[int]] | None = None,
) -> pd.DataFrame:
    """Parse a batch of text rows (``source``, ``source_kind``, ``block``, ``value`` and optionally
    ``file_time_ms`` and ``utf8_ok``) into rows of :data:`RAW_COLUMNS`.

    ``source_kind`` is ``json_lines`` (one record per row; its record number is the line number:
    ``line`` when the batch has it, else counted from ``line_offsets[(source, block)]``) or
    ``json_doc`` (a whole file). ``file_time_ms`` (the file's modification time) is the time of a
    BundleData record without a ``timestamp``:
    Pulsar's BundleData carries no time of its own. A row with ``utf8_ok`` false (its bytes were not
    UTF-8; ``value`` holds them repaired) is quarantined as ``invalid_utf8``. ``boundaries`` (namespace →
    bundle boundaries) place Prometheus topic-level series in their bundles; a bare BundleData in a
    ``.json`` file named after its znode (``…/tenant/ns/0x…_0x….json``) takes that bundle name.
    """
    offsets = line_offsets or {}
    counts = counters if counters is not None else {}
    out: list[dict[str, Any]] = []
    n = len(batch)
    file_times = batch["file_time_ms"] if "file_time_ms" in batch.columns else pd.Series([None] * n)
    valid = batch["utf8_ok"] if "utf8_ok" in batch.columns else pd.Series([True] * n)
    numbers = batch["line"] if "line" in batch.columns else pd.Series([None] * n)
    for source, kind, block, value, file_time, utf8_ok, number in zip(
        batch["source"],
        batch["source_kind"],
        batch["block"],
        batch["value"],
        file_times,
        valid,
        numbers,
        strict=True,
    ):
        ctx = _Ctx(
            source=_clean_source(source),
            source_kind="",
            default_cluster=default_cluster,
            web_port=web_port,
            file_time_ms=None if pd.isna(file_time) else int(file_time),
            boundaries=boundaries or {},
        )
        if kind == "json_lines":
            key = (source, int(block))
            idx = counts.get(key, 0)
            counts[key] = idx + 1
            line_no = offsets.get(key, 0) + idx + 1 if pd.isna(number) else int(number)
            if not value or not value.strip():
                continue
            ctx.source_kind = "load_report"
            if _is_false(utf8_ok):  # a torn write: this line only is lost, not the file
                ctx.quarantine(line_no, "invalid_utf8", "the line is not valid UTF-8", value)
            else:
                _parse_one(ctx, line_no, value)
        elif _is_false(utf8_ok):
            ctx.source_kind = "json"
            ctx.path_bundle = _bundle_from_path(ctx.source)
            ctx.quarantine(1, "invalid_utf8", "the document is not valid UTF-8", value or "")
        else:
            ctx.source_kind = "json"
            ctx.path_bundle = _bundle_from_path(ctx.source)
            for rec, text in _split_document(value or ""):
                _parse_one(ctx, rec, text)
        for row in ctx.rows:
            if row.get("source_kind") in ("", "load_report", "json"):
                row["source_kind"] = _kind_of(row)
            _mark_nonfinite(row)
        out.extend(ctx.rows)
    return typed_frame(pd.DataFrame(out, columns=[name for name, _ in RAW_COLUMNS]), RAW_COLUMNS)


def _unique(cols: list[tuple[str, ColumnType]]) -> list[tuple[str, ColumnType]]:
    seen: dict[str, ColumnType] = {}
    for name, kind in cols:
        seen.setdefault(name, kind)
    return list(seen.items())


RAW_COLUMNS: tuple[tuple[str, ColumnType], ...] = (
    ("kind", "string"),  # broker | bundle | bundle_data | prom | quarantine
    ("source", "string"),
    ("source_kind", "string"),
    ("record", "long"),
    ("report_id", "string"),
    ("cluster", "string"),
    ("time_ms", "long"),
    ("broker", "string"),
    ("bundle", "string"),
    *_unique(
        [
            *resource_columns(),
            *columns(LOCAL_BROKER_DATA),
            *columns(BUNDLE_STATS),
            *(c for _part, prefix, _max in TIME_AVERAGE_PARTS for c in columns(TIME_AVERAGE, f"{prefix}_")),
            *columns(BUNDLE_DATA),
        ]
    ),
    ("metric", "string"),  # Prometheus series name (long format before pivoting)
    ("topic", "string"),  # a topic-level Prometheus series' full topic name (its bundle is hashed from it)
    ("relabelled", "string"),  # Pulsar's labels a Prometheus scrape had renamed exported_*, comma-separated
    ("value", "double"),
    ("reason", "string"),
    ("detail", "string"),
    ("raw", "string"),
    ("nonfinite", "string"),  # comma-separated columns that were NaN/±Inf in the source (now null)
)
"""The columns every parser emits, as ``(name, Spark type name)``: ``spark.schemas.RAW_ROW`` is
``struct(*RAW_COLUMNS)`` (``kind`` not nullable). The Pulsar fields come from :mod:`shedlab.model.formats`."""

STAGED_COLUMNS: tuple[tuple[str, ColumnType], ...] = (*RAW_COLUMNS, ("tick_ms", "long"), ("status", "string"))
"""RAW_COLUMNS after :func:`process_group`: ``status`` kept / merged / quarantined / derived."""

_PANDAS_DTYPES: dict[str, Any] = {
    "long": pd.Int64Dtype(),
    "int": pd.Int32Dtype(),
    "double": "float64",
    "bool": pd.BooleanDtype(),
}


def typed_frame(frame: pd.DataFrame, cols: Sequence[tuple[str, str]]) -> pd.DataFrame:
    """``frame`` with exactly ``cols``, in order, in dtypes Arrow converts to the Spark types without
    surprises: strings as ``object`` with None, nullable ``Int64``/``Int32``/``boolean``, ``float64``."""
    out: dict[str, Any] = {}
    for name, kind in cols:
        col = (
            frame[name]
            if name in frame.columns
            else pd.Series([None] * len(frame), dtype=object, index=frame.index)
        )
        if kind == "string":
            col = col.astype(object).where(col.notna(), None)
        elif kind in ("long", "int", "double"):
            col = pd.to_numeric(col, errors="coerce").astype(_PANDAS_DTYPES[kind])
        elif kind == "bool":
            col = col.astype(_PANDAS_DTYPES[kind])
        out[name] = col
    return pd.DataFrame(out, index=frame.index)


FLOAT_COLUMNS: tuple[str, ...] = tuple(name for name, kind in RAW_COLUMNS if kind == "double")
"""Numbers that may be NaN/±Inf in the source (noted in ``nonfinite``, then null)."""


def _mark_nonfinite(row: dict[str, Any]) -> None:
    """NaN/±Inf become null plus a note in ``nonfinite`` (Arrow would turn NaN into null anyway)."""
    bad = []
    for col in FLOAT_COLUMNS:
        v = row.get(col)
        if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
            bad.append(f"{col}={v}")
            row[col] = None
    if bad:
        row["nonfinite"] = ",".join(bad)


def _kind_of(row: Mapping[str, Any]) -> str:
    kind = row.get("kind")
    if kind == "bundle_data":
        return "bundle_data"
    if kind == "prom":
        return "prometheus"
    if kind == "quarantine" and row.get("metric") == "prometheus":
        return "prometheus"
    return "load_report"


def _clean_source(path: str) -> str:
    if path.startswith("file://"):
        return path[len("file://") :]
    if path.startswith("file:"):
        return path[len("file:") :]
    return path


# ---------------------------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sources:
    json_lines: list[str]
    json_docs: list[str]
    parquet: list[str]


def local_bytes(sources: Sources) -> int | None:
    """How many bytes ``sources`` hold on the local disk (a Parquet directory: its files); None if any
    source is remote (its size unknown without a round trip)."""
    total = 0
    for path in (*sources.json_lines, *sources.json_docs, *sources.parquet):
        if is_remote(path):
            return None
        p = Path(path)
        files = (f for f in p.rglob("*") if f.is_file()) if p.is_dir() else (p,)
        total += sum(f.stat().st_size for f in files)
    return total


def _suffix_kind(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(JSON_DOC_SUFFIXES):
        return "json_doc"
    if lower.endswith(JSON_LINE_SUFFIXES):
        return "json_lines"
    return None


def classify_sources(paths: Sequence[str]) -> Sources:
    """Expand local files/directories/globs and sort them into JSON lines, JSON documents and Parquet.

    A directory holding Parquet (e.g. an ingest output with ``broker_samples/``) is one Parquet
    source; otherwise its files are taken by suffix, recursively (hidden and ``_`` files skipped).
    Remote URIs (``hdfs://``, ``s3a://``, …) are classified by suffix (Parquet if none).
    """
    if not paths:
        raise InputError("no input given", field="SOURCE")
    inputs = _Inputs()
    for given in paths:
        if is_remote(given):
            inputs.add(_suffix_kind(given.rstrip("/")) or "parquet", given, given)
            continue
        local = without_file_scheme(given)
        candidates = (
            [Path(p) for p in sorted(glob.glob(local, recursive=True))]
            if any(c in local for c in "*?[")
            else [Path(local)]
        )
        if not candidates or not all(c.exists() for c in candidates):
            raise InputError("input not found", source=given)
        for cand in candidates:
            # ingest <(cat rec.jsonl): checked here, read again by Spark's JVM, where /dev/fd/63 is not it
            refuse_special_file(cand, "Spark reads the inputs itself, in another process")
            if cand.is_dir():
                if _holds_parquet(cand):
                    _check_not_another_output(cand, given)
                    inputs.add("parquet", str(cand.resolve()), given)
                    continue
                found = False
                for f in sorted(cand.rglob("*")):
                    if f.is_dir() or any(part.startswith((".", "_")) for part in f.relative_to(cand).parts):
                        continue
                    file_kind = _suffix_kind(f.name)
                    if file_kind is None:
                        continue
                    found = True
                    _check_content(f, file_kind)
                    inputs.add(file_kind, str(f.resolve()), given)
                if not found:
                    raise InputError("no .json/.jsonl/.parquet files in directory", source=given)
            else:
                kind = _suffix_kind(cand.name) or "json_lines"
                _check_content(cand, kind)
                inputs.add(kind, str(cand.resolve()), given)
    for directory in inputs.parquet:
        if not is_remote(directory) and Path(directory).is_dir():
            _check_parquet_tree(Path(directory))
    return Sources(json_lines=inputs.lines, json_docs=inputs.docs, parquet=inputs.parquet)


@dataclass
class _Inputs:
    """The inputs :func:`classify_sources` finds, by kind, each once."""

    lines: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    parquet: list[str] = field(default_factory=list)
    given_as: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, path: str, given: str) -> None:
        """``path`` (found through the source ``given``) as an input of ``kind``. One found twice (``rec.jsonl
        rec.jsonl``, ``rec/ rec/a.jsonl``) is refused: it was read twice, its every row counted as read
        twice and merged with itself."""
        if path in self.given_as:
            first = self.given_as[path]
            twice = f"as {given}" if first == given else f"through {first} and {given}"
            raise InputError(f"given twice ({twice})", source=path, hint="give each input once")
        self.given_as[path] = given
        {"parquet": self.parquet, "json_doc": self.docs, "json_lines": self.lines}[kind].append(path)


_MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bzip2",
    b"PAR1": "Parquet",
    b"PK\x03\x04": "zip",
    b"\x28\xb5\x2f\xfd": "zstd",
}
_COMPRESSED = {".gz": "gzip", ".bz2": "bzip2"}


def _check_content(path: Path, kind: str) -> None:
    """Refuse a file whose bytes are not what its name says, before Spark reads it: Spark picks the
    reader (and the decompression) by the name and fails deep in the JVM on anything else."""
    if kind == "parquet":
        check_parquet_file(path)
        return
    try:
        with path.open("rb") as src:
            head = src.read(4096)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    found = next((name for magic, name in _MAGIC.items() if head.startswith(magic)), None)
    expected = _COMPRESSED.get(path.suffix.lower())
    if expected is not None:
        if head and found != expected:
            raise InputError(f"named {path.suffix} but not {expected} data", source=str(path))
        return
    if found is not None:
        hint = f"name it {path.name}.gz" if found == "gzip" else None
        raise InputError(f"{found} data in a file named as JSON text", source=str(path), hint=hint)
    if b"\x00" in head:
        raise InputError("binary data, not JSON text", source=str(path))


def check_parquet_file(path: Path) -> None:
    """Refuse a file that is not whole Parquet: ``PAR1`` at both ends (not truncated, not another
    format under a ``.parquet`` name), then its footer and every row group decoded by pyarrow.

    A file damaged inside (overwritten bytes, a bad copy) keeps both magic numbers; Spark then failed in
    an executor, printing a Java stack per task and a Python traceback. Decoding it here costs one read
    of the data before Spark's (``quarantine_corrupt_runs`` reads a sweep's run files the same way), and
    one row group at a time keeps memory to a row group's size."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        stat = path.stat()
        size = stat.st_size
        seen = (str(path.resolve()), stat.st_ino, size, stat.st_mtime_ns)
        if seen in _WHOLE:  # decoded already: the CLI's check before Spark, then the reader's
            return
        with path.open("rb") as src:
            head = src.read(4)
            src.seek(max(0, size - 4))
            tail = src.read(4)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from None
    if size < 12 or head != b"PAR1":
        raise InputError("not a Parquet file", source=str(path))
    if tail != b"PAR1":
        raise InputError("truncated Parquet file (no footer)", source=str(path))
    try:
        with pq.ParquetFile(path) as parquet:
            for group in range(parquet.num_row_groups):
                parquet.read_row_group(group)
    except (OSError, ValueError, pa.ArrowException) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"damaged Parquet file: {reason}", source=str(path)) from None
    _WHOLE.add(seen)


_WHOLE: set[tuple[str, int, int, int]] = set()
"""The Parquet files :func:`check_parquet_file` decoded whole, by path, inode, size and modification time: a
command checks its input before Spark starts and its reader checks it again; one decode of the data is
enough while the file is unchanged."""


def _check_parquet_tree(directory: Path) -> None:
    for f in sorted(directory.rglob("*.parquet")):
        if f.is_file() and not any(p.startswith((".", "_")) for p in f.relative_to(directory).parts):
            check_parquet_file(f)


def check_ingest_output(path: str, tables: Sequence[str] = ("broker_samples", "bundle_samples")) -> None:
    """Refuse (before Spark starts) a local directory that is not an ingest output, or whose files are
    not whole Parquet."""
    if is_remote(path):
        check_uri(path)
        return
    root = Path(without_file_scheme(path))
    if not root.is_dir():
        raise InputError("not a directory" if root.exists() else "not found", source=path)
    for table in tables:
        if not (root / table).is_dir():
            raise InputError(
                f"not an ingest output: {table}/ is missing", source=path, hint="run shedlab ingest first"
            )
    _check_parquet_tree(root)


def _sample_files(path: str) -> Iterator[tuple[Path, str | None]]:
    """Each Parquet file of a local ingest output's broker samples, with the cluster its last
    ``cluster=NAME`` directory names (Spark escapes a name's ``%``, ``/``, ``:`` … as ``%XX``), or None
    for a file outside such a directory; hidden and ``_`` files (Spark's markers) are skipped."""
    root = Path(_clean_source(path)) / "broker_samples"
    for f in sorted(root.rglob("*.parquet")):
        parts = f.relative_to(root).parts
        if not f.is_file() or any(p.startswith((".", "_")) for p in parts):
            continue
        named = [unquote(p[len("cluster=") :]) for p in parts[:-1] if p.startswith("cluster=")]
        yield f, (named[-1] if named else None)


def recorded_clusters(path: str) -> list[str] | None:
    """The clusters of an ingest output's broker samples, read without Spark: the ``cluster=NAME``
    directories ingest writes, and for a file outside them its ``cluster`` column (one column read by
    pyarrow). None for a remote path, or when a file says nothing of its cluster: Spark's read decides
    then."""
    if is_remote(path):
        return None
    found: set[str] = set()
    for f, cluster in _sample_files(path):
        names = {cluster} if cluster is not None else _cluster_column(f)
        if not names or _HIVE_NULL in names:
            return None
        found |= names
    return sorted(found)


def recorded_span(path: str, cluster: str) -> tuple[int, int] | None:
    """The first and last ``tick_ms`` of ``cluster``'s broker samples (in its ``cluster=NAME``
    directories), from the Parquet footers' statistics: no data is read. None when a file has no
    statistics or the layout is not ingest's (a remote path, a file outside such a directory)."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    if is_remote(path):
        return None
    lows: list[int] = []
    highs: list[int] = []
    for f, named in _sample_files(path):
        if named is None:
            return None
        if named != cluster:
            continue
        meta = pq.ParquetFile(f).metadata
        if "tick_ms" not in meta.schema.names:
            return None
        column = meta.schema.names.index("tick_ms")
        for group in range(meta.num_row_groups):
            stats = meta.row_group(group).column(column).statistics
            if stats is None or not stats.has_min_max:
                return None
            lows.append(int(stats.min))
            highs.append(int(stats.max))
    return (min(lows), max(highs)) if lows else None


_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
"""The directory name Spark gives a null partition value (read back as a null cluster)."""


def _cluster_column(path: Path) -> set[str]:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    if "cluster" not in pq.read_schema(path).names:
        return set()
    values = pq.read_table(path, columns=["cluster"]).column(0).unique().to_pylist()
    return set() if None in values else {str(v) for v in values}


def choose_cluster(present: Sequence[str], cluster: str | None, *, source: str | None = None) -> str:
    """The one cluster to fit among ``present`` (an ingest output's): ``cluster`` (checked by
    :func:`check_clusters`), or the only one when ``cluster`` is None (several are refused, listed)."""
    if cluster is not None:
        check_clusters([cluster], present, source=source)
        return cluster
    if not present:
        raise InputError("the ingest output holds no broker samples", source=source)
    if len(present) > 1:
        raise InputError(
            "the recording holds several clusters: choose one",
            source=source,
            field="--cluster",
            hint=", ".join(present),
        )
    return str(present[0])


def check_clusters(wanted: Sequence[str], present: Sequence[str], *, source: str | None = None) -> None:
    """Refuse the first of ``wanted`` (``--cluster``) that the ingest output does not hold, with the
    closest name and the clusters it holds."""
    for cluster in dict.fromkeys(wanted):
        if cluster in present:
            continue
        listed = f"its clusters: {', '.join(present)}" if present else "it holds no broker samples"
        suggestion = did_you_mean(cluster, present)
        raise InputError(
            "no such cluster in the ingest output",
            source=source,
            field="--cluster",
            value=cluster,
            hint=f"{suggestion} {listed}" if suggestion else listed,
        )


def _check_not_another_output(directory: Path, given: str) -> None:
    """Refuse another command's output taken for a Parquet source (a simulate, sweep, replay … output):
    it failed in Spark, as 'Parquet columns match none of broker_samples…' or CONFLICTING_DIRECTORY_
    STRUCTURES; ``simulate --record``'s recording inside is named."""
    from shedlab.core.results import output_kind  # the simulator's modules: only where files are listed

    found = output_kind(str(directory))
    if found is None or found[0] == "ingest":
        return
    _kind, what, marker = found
    recording = [
        directory / name for name in ("load-reports.jsonl", "prometheus") if (directory / name).exists()
    ]
    hint = (
        f"ingest its recording: shedlab ingest {' '.join(str(p) for p in recording)}"
        if recording
        else "ingest reads load reports, Prometheus exports, BundleData dumps or an ingest output"
    )
    raise InputError(f"{what} ({marker}), not recorded load data", source=given, hint=hint)


def _holds_parquet(directory: Path) -> bool:
    if any((directory / sub).is_dir() for sub in ("broker_samples", "bundle_samples", "bundle_data")):
        return True
    return any(walk(directory, "*.parquet", lambda f: f.suffix == ".parquet"))


_Checked = tuple[tuple[Field, ...], str, str]  # fields, column prefix, JSON path prefix

_CHECKS: dict[str, tuple[tuple[str, ...], tuple[_Checked, ...]]] = {
    # kind: (required identifiers, the format's fields with their column and JSON prefixes)
    "broker": (
        ("broker",),
        (
            *((r.fields, f"{r.prefix}_", f"{r.json}.") for r in RESOURCES),
            (LOCAL_BROKER_DATA, "", ""),
        ),
    ),
    "bundle": (("broker", "bundle"), ((BUNDLE_STATS, "", ""),)),
    "bundle_data": (
        ("bundle",),
        (
            *((TIME_AVERAGE, f"{prefix}_", f"{part}.") for part, prefix, _max in TIME_AVERAGE_PARTS),
            (BUNDLE_DATA, "", ""),
        ),
    ),
    "prom": (("broker",), ((PROMETHEUS_SAMPLE, "", ""),)),
}
"""Which rules of :mod:`shedlab.model.formats` apply to the rows of each kind."""

_NAMES: dict[str, str] = {"time_ms": "timestamp", "broker": "broker id"}
_BLANK_BROKER = "broker: expected the broker's id, got "
"""The detail of a blank broker id, a wrapper's (:func:`_report_identity`) or a Parquet row's."""


def _json_name(checked: _Checked, column: str) -> str:
    fields, col_prefix, json_prefix = checked
    for spec in fields:
        if spec.column is not None and col_prefix + spec.column == column:
            return json_prefix + spec.json
    return column


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{value:.1f}"
    return str(value)


_DETAILS: dict[str, str] = {
    "missing_field": "{name} is missing",
    "nan_value": "{name} is not a finite number",
}


def validate_rows(df: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The first failing check of every row as (reason, detail); null where the row is valid.

    Parse failures (``kind == "quarantine"``) keep the reason the parser gave them. The checks of
    the format's fields are :func:`~shedlab.model.formats.column_problems`, the vectorised form of
    the rules the model's readers apply; a float that is null is *missing* unless ``nonfinite``
    says it was NaN/±Inf in the source (*nan_value*).
    """
    n = len(df)
    reason = pd.Series([None] * n, index=df.index, dtype=object)
    detail = pd.Series([None] * n, index=df.index, dtype=object)
    parse_failed = df["kind"] == "quarantine"
    reason[parse_failed] = df.loc[parse_failed, "reason"]
    detail[parse_failed] = df.loc[parse_failed, "detail"].where(df.loc[parse_failed, "detail"].notna(), None)
    nonfinite = df["nonfinite"].fillna("").astype(str)
    any_nonfinite = bool((nonfinite != "").any())

    def flag(mask: pd.Series, code: str, text: Callable[[pd.Index], pd.Series] | str) -> None:
        hit = mask.fillna(False).astype(bool) & reason.isna()
        if not hit.any():
            return
        reason[hit] = code
        detail[hit] = text(hit[hit].index) if callable(text) else text

    def shown(col: str, prefix: str) -> Callable[[pd.Index], pd.Series]:
        def text(index: pd.Index) -> pd.Series:
            values = pd.to_numeric(df.loc[index, col], errors="coerce")
            out: pd.Series = prefix + values.map(_fmt)
            return out

        return text

    cluster_detail = _cluster_problems(df["cluster"])
    bundle_detail = _problems(df["bundle"], bundle_name_problem)  # '' included: a name, not a missing one
    for kind, (required, checked) in _CHECKS.items():
        of_kind = df["kind"] == kind
        if not of_kind.any():
            continue
        flag(of_kind & df["cluster"].isna(), "missing_field", "cluster is missing")
        flag(of_kind & cluster_detail.notna(), "invalid_cluster", lambda index: cluster_detail[index])
        flag(of_kind & df["time_ms"].isna(), "missing_field", "timestamp is missing")
        flag(
            of_kind & ((df["time_ms"] <= 0) | (df["time_ms"] > MAX_TIME_MS)),
            "invalid_timestamp",
            shown("time_ms", "time = "),
        )
        for col in required:
            flag(of_kind & df[col].isna(), "missing_field", f"{_NAMES.get(col, col)} is missing")
        # a lastStats key, a dump's or a Parquet row's bundle: one not Pulsar's was kept as a bundle
        flag(
            of_kind & bundle_detail.notna(),
            "invalid_bundle",
            lambda index: (
                "bundle: " + bundle_detail[index] + " (got " + df.loc[index, "bundle"].map(shown_value) + ")"
            ),
        )
        if "broker" in required:  # a Parquet row's '' was kept as a broker named '' (JSON: quarantined)
            blank = df["broker"].astype("string").str.strip().eq("")
            flag(
                of_kind & blank,
                "invalid_value",
                lambda index: _BLANK_BROKER + df.loc[index, "broker"].map(repr),
            )
        for fields, col_prefix, json_prefix in checked:
            problems = column_problems(df, fields, col_prefix, nonfinite if any_nonfinite else None)
            for mask, code, col in problems:
                name = _json_name((fields, col_prefix, json_prefix), col)
                text = _DETAILS.get(code)
                flag(of_kind & mask, code, text.format(name=name) if text else shown(col, f"{name} = "))
    return reason, detail


def _sort_latest(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["time_ms", "record", "source"], kind="stable", na_position="first")


def process_group(df: pd.DataFrame) -> pd.DataFrame:
    """Validate, deduplicate and resolve ownership for the raw rows of one (cluster, hour).

    Returns the rows with ``status`` (kept / merged / quarantined) and final ``reason``/``detail``,
    plus the Prometheus samples pivoted into broker and bundle rows (kinds ``prom_broker`` and
    ``prom_bundle``, status ``derived``). Every cross-row rule (a report's bundles follow the
    report, the latest sample of a tick wins, a bundle claimed by two brokers is quarantined)
    only looks within one tick, so a group may hold any set of whole ticks.
    """
    df = df.reset_index(drop=True)
    reason, detail = validate_rows(df)
    kind = df["kind"]

    # A bundle entry of a quarantined report is quarantined with it.
    is_broker = kind == "broker"
    bad = df.loc[is_broker & reason.notna(), "report_id"]
    bad_reason = dict(zip(bad, reason[bad.index], strict=True))
    follows_bad = (kind == "bundle") & reason.isna() & df["report_id"].isin(list(bad_reason))
    if follows_bad.any():
        reason[follows_bad] = "report_quarantined"
        detail[follows_bad] = "its report was quarantined: " + df.loc[follows_bad, "report_id"].map(
            bad_reason
        )

    status = pd.Series("kept", index=df.index, dtype=object)
    status[reason.notna()] = "quarantined"
    valid = reason.isna()

    def dedup(mask: pd.Series, keys: list[str]) -> None:
        sub = df[mask]
        if sub.empty:
            return
        ordered = _sort_latest(sub)
        dup = ordered.fillna(
            {k: "" for k in keys if k in ("bundle", "broker", "metric", "topic")}
        ).duplicated(subset=keys, keep="last")
        status[dup[dup].index] = "merged"

    dedup(is_broker & valid, ["cluster", "broker", "tick_ms"])
    merged_reports = set(df.loc[is_broker & (status == "merged"), "report_id"].dropna())
    known_reports = set(df.loc[is_broker, "report_id"].dropna())
    is_bundle = (kind == "bundle") & valid
    tied = is_bundle & df["report_id"].isin(list(known_reports))
    status[tied & df["report_id"].isin(list(merged_reports))] = "merged"
    dedup(is_bundle & ~tied, ["cluster", "tick_ms", "bundle", "broker"])
    dedup((kind == "prom") & valid, ["cluster", "metric", "broker", "bundle", "topic", "tick_ms"])
    dedup((kind == "bundle_data") & valid, ["cluster", "bundle", "tick_ms"])

    # A bundle claimed by two or more brokers in the same tick.
    claim_rows = (status == "kept") & ((kind == "bundle") | ((kind == "prom") & df["bundle"].notna()))
    if claim_rows.any():
        claims = df.loc[claim_rows, ["cluster", "tick_ms", "bundle", "broker"]]
        owners = claims.groupby(["cluster", "tick_ms", "bundle"])["broker"].agg(lambda b: sorted(set(b)))
        owners = owners[owners.map(len) > 1]
        if len(owners):
            keyed = claims.join(owners.rename("_owners"), on=["cluster", "tick_ms", "bundle"], how="inner")
            status[keyed.index] = "quarantined"
            reason[keyed.index] = "double_claim"
            detail[keyed.index] = keyed["_owners"].map(
                lambda o: f"claimed by {', '.join(o)} in the same tick"
            )

    out = df.assign(reason=reason, detail=detail, status=status)
    out.loc[out["status"] != "quarantined", "raw"] = None
    # quarantined under "unknown": no partition directory can be named after such a cluster
    out.loc[_cluster_problems(out["cluster"]).notna(), "cluster"] = None
    derived = _pivot_prometheus(out[(out["kind"] == "prom") & (out["status"] == "kept")])
    if derived is None:
        return typed_frame(out, STAGED_COLUMNS)
    # both typed first: a column all-NA on one side then has the same dtype on both, so the concat's
    # dtype does not depend on pandas' handling of all-NA entries (deprecated, changing in pandas 3)
    parts = [typed_frame(out, STAGED_COLUMNS), typed_frame(derived, STAGED_COLUMNS)]
    return pd.concat(parts, ignore_index=True)


_TOPIC_TO_BUNDLE: dict[str, str] = {
    topic_metric: bundle_metric
    for topic_metric, column in PROMETHEUS_TOPIC_METRICS.items()
    for bundle_metric, bundle_column in PROMETHEUS_BUNDLE_METRICS.items()
    if column == bundle_column
}


def _bundle_points(points: pd.DataFrame) -> pd.DataFrame:
    """Topic-level points summed into their bundle's points (as Pulsar sums a bundle's topics into its
    NamespaceBundleStats), ``topics`` being the distinct topics seen; a bundle series of the same bundle,
    broker, tick and metric (``exposeBundlesMetricsInPrometheus``) wins over the sum."""
    of_topic = points["topic"].notna()
    if not of_topic.any():
        return points
    keys = ["cluster", "tick_ms", "bundle", "broker"]
    topics = points[of_topic]
    sums = topics.groupby([*keys, "metric"]).agg(
        value=("value", "sum"), time_ms=("time_ms", "max"), source=("source", "min")
    )
    sums = sums.reset_index()
    sums["metric"] = sums["metric"].map(_TOPIC_TO_BUNDLE)
    counts = topics.groupby(keys).agg(
        value=("topic", "nunique"), time_ms=("time_ms", "max"), source=("source", "min")
    )
    counts = counts.reset_index().assign(metric="pulsar_bundle_topics_count")
    derived = pd.concat([sums, counts], ignore_index=True)
    derived["value"] = derived["value"].astype(float)
    real = points[~of_topic]
    if not real.empty:
        seen = pd.MultiIndex.from_frame(real[[*keys, "metric"]].astype(str))
        derived = derived[~pd.MultiIndex.from_frame(derived[[*keys, "metric"]].astype(str)).isin(seen)]
    return pd.concat([real, derived], ignore_index=True)


def _pivot_prometheus(points: pd.DataFrame) -> pd.DataFrame | None:
    """Kept Prometheus points → one broker row per (broker, tick) and one bundle row per (bundle, tick)."""
    if points.empty:
        return None
    frames = []
    bundle_points = _bundle_points(points[points["bundle"].notna()])
    keys = ["cluster", "tick_ms", "bundle", "broker"]
    bundle_rows = pd.DataFrame(columns=[*keys, *PROMETHEUS_BUNDLE_METRICS.values()])
    if not bundle_points.empty:
        wide = bundle_points.pivot_table(index=keys, columns="metric", values="value", aggfunc="last")
        meta = bundle_points.groupby(keys).agg(time_ms=("time_ms", "max"), source=("source", "min"))
        bundle_rows = meta.join(wide).reset_index()
        for metric, col in PROMETHEUS_BUNDLE_METRICS.items():
            values = (
                bundle_rows[metric]
                if metric in bundle_rows
                else pd.Series(float("nan"), index=bundle_rows.index)
            )
            bundle_rows[col] = values.fillna(0.0) if col.startswith("msg_") else values
        bundle_rows = bundle_rows.drop(columns=[m for m in PROMETHEUS_BUNDLE_METRICS if m in bundle_rows])
        bundle_rows["kind"] = "prom_bundle"
        frames.append(bundle_rows)
    gauges = points[points["bundle"].isna() & points["metric"].isin(list(PROMETHEUS_BROKER_METRICS))]
    if not gauges.empty:
        bkeys = ["cluster", "tick_ms", "broker"]
        wide = gauges.pivot_table(index=bkeys, columns="metric", values="value", aggfunc="last")
        meta = gauges.groupby(bkeys).agg(time_ms=("time_ms", "max"), source=("source", "min"))
        brokers = meta.join(wide).reset_index()
        for metric, prefix in PROMETHEUS_BROKER_METRICS.items():
            usage = brokers[metric] if metric in brokers else pd.Series(float("nan"), index=brokers.index)
            brokers[f"{prefix}_limit"] = usage.notna().map({True: 100.0, False: 0.0})
            brokers[f"{prefix}_usage"] = usage.fillna(0.0)
        brokers = brokers.drop(columns=[m for m in PROMETHEUS_BROKER_METRICS if m in brokers])
        if not bundle_rows.empty:
            totals = bundle_rows.groupby(bkeys).agg(
                msg_rate_in=("msg_rate_in", "sum"),
                msg_rate_out=("msg_rate_out", "sum"),
                msg_throughput_in=("msg_throughput_in", "sum"),
                msg_throughput_out=("msg_throughput_out", "sum"),
                num_topics=("topics", "sum"),
                num_bundles=("bundle", "count"),
                num_consumers=("consumer_count", "sum"),
                num_producers=("producer_count", "sum"),
            )
            brokers = brokers.join(totals, on=bkeys)
        for col in ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out"):
            brokers[col] = brokers[col].fillna(0.0) if col in brokers else 0.0
        for col in ("num_topics", "num_bundles", "num_consumers", "num_producers"):
            brokers[col] = brokers[col].fillna(0) if col in brokers else 0
        brokers["kind"] = "prom_broker"
        frames.append(brokers)
    if not frames:
        return None
    derived = pd.concat(frames, ignore_index=True)
    derived["source_kind"] = "prometheus"
    derived["status"] = "derived"
    return derived
