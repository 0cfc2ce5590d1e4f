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

Everything is parsed and validated on the executors (``mapInPandas`` + Spark SQL). Rows that
fail validation go to ``quarantine/`` with a reason; per source the command reports how many
rows were read, kept, merged (a later sample of the same broker in the same tick superseded it)
and quarantined — ``read = kept + merged + quarantined`` always holds.
"""

from __future__ import annotations

import glob
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from shedlab.errors import InputError

__all__ = [
    "PROMETHEUS_BROKER_METRICS",
    "PROMETHEUS_BUNDLE_METRICS",
    "REASONS",
    "IngestResult",
    "broker_id_from_url",
    "classify_sources",
    "ingest",
    "parse_text_batch",
]

JSON_LINE_SUFFIXES = (".jsonl", ".ndjson", ".jsonl.gz", ".ndjson.gz", ".jsonl.bz2", ".txt", ".log")
JSON_DOC_SUFFIXES = (".json", ".json.gz", ".json.bz2")
PARQUET_SUFFIXES = (".parquet", ".pq")

REASONS: dict[str, str] = {
    "malformed_json": "the record is not valid JSON",
    "unknown_record": "a JSON value that is none of the accepted shapes",
    "legacy_load_report": "a legacy LoadReport (SimpleLoadManagerImpl), not a LocalBrokerData",
    "missing_field": "a required field is absent or null",
    "invalid_value": "a value of the wrong type (e.g. a string where a number belongs)",
    "nan_value": "a NaN or infinite number",
    "negative_value": "a negative number where Pulsar never produces one",
    "unknown_units": "a resource with usage but no positive limit, or a metric whose unit is unknown",
    "unknown_metric": "a Prometheus series that is not a pulsar_lb_*_usage or pulsar_bundle_* series",
    "invalid_timestamp": "a time that is not a positive epoch-millisecond value",
    "double_claim": "a bundle claimed by two or more brokers in the same tick",
    "report_quarantined": "a bundle entry of a load report that was itself quarantined",
}
"""Reason codes of the quarantine table."""

PROMETHEUS_BROKER_METRICS: dict[str, str] = {
    "pulsar_lb_cpu_usage": "cpu",
    "pulsar_lb_memory_usage": "memory",
    "pulsar_lb_directMemory_usage": "direct_memory",
    "pulsar_lb_bandwidth_in_usage": "bandwidth_in",
    "pulsar_lb_bandwidth_out_usage": "bandwidth_out",
}
"""Prometheus usage gauges (percent) → resource column prefix (limit recorded as 100)."""

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

_RESOURCES = (
    ("cpu", "cpu"),
    ("memory", "memory"),
    ("directMemory", "direct_memory"),
    ("bandwidthIn", "bandwidth_in"),
    ("bandwidthOut", "bandwidth_out"),
)
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


def _num(obj: Mapping[str, Any], key: str, path: str, *, required: bool = True) -> float | None:
    """A JSON number as float; ``"NaN"``/``"Infinity"`` strings (Jackson's quoting) become floats."""
    if key not in obj or obj[key] is None:
        if required:
            return None
        return 0.0
    value = obj[key]
    if isinstance(value, bool):
        raise _BadValueError("invalid_value", f"{path}{key}: expected a number, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value.strip() in (
        "NaN",
        "Infinity",
        "-Infinity",
        "+Infinity",
        "Inf",
        "-Inf",
    ):
        return float(value.strip().replace("Infinity", "inf"))
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise _BadValueError("invalid_value", f"{path}{key}: expected a number, got {value!r}")


def _int(obj: Mapping[str, Any], key: str, path: str) -> int | None:
    value = _num(obj, key, path, required=False)
    if value is None or math.isnan(value) or math.isinf(value):
        return None
    return int(value)


def _str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _BadValueError("invalid_value", f"{path}{key}: expected a string, got {value!r}")
    return value


def _bool(obj: Mapping[str, Any], key: str, path: str) -> bool | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise _BadValueError("invalid_value", f"{path}{key}: expected true or false, got {value!r}")
    return value


def _time_ms(value: Any, path: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value.strip())
        raise _BadValueError("invalid_value", f"{path}: expected epoch milliseconds, got {value!r}")
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise _BadValueError("invalid_timestamp", f"{path}: {value!r}")
    return int(value)


def _raw(text: str) -> str:
    return text if len(text) <= _RAW_LIMIT else text[:_RAW_LIMIT] + "…"


@dataclass
class _Ctx:
    source: str
    source_kind: str
    default_cluster: str
    web_port: int
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


def _is_legacy(obj: Mapping[str, Any]) -> bool:
    return obj.get("loadReportType") == "LoadReport" or "underLoaded" in obj or "systemResourceUsage" in obj


def _looks_like_report(obj: Mapping[str, Any]) -> bool:
    return obj.get("loadReportType") == "LocalBrokerData" or any(
        k in obj for k in ("lastStats", "webServiceUrl", "cpu", "bandwidthIn", "lastUpdate")
    )


def _looks_like_bundle_data(obj: Mapping[str, Any]) -> bool:
    return "shortTermData" in obj or "longTermData" in obj


def _parse_report(
    ctx: _Ctx, record: int, raw: str, report: Mapping[str, Any], wrapper: Mapping[str, Any] | None
) -> None:
    w = wrapper or {}
    cluster = w.get("cluster") if isinstance(w.get("cluster"), str) else None
    cluster = cluster or ctx.default_cluster
    broker = w.get("broker") if isinstance(w.get("broker"), str) else None
    broker_src = "broker"
    if not broker:
        broker = broker_id_from_url(_str(report, "webServiceUrl", "report."))
        broker_src = "report.webServiceUrl"
        if not broker:
            broker = broker_id_from_url(_str(report, "webServiceUrlTls", "report."))
    time_ms = _time_ms(w.get("timestamp"), "timestamp") if "timestamp" in w else None
    if time_ms is None:
        time_ms = _time_ms(report.get("lastUpdate"), "report.lastUpdate")
    del broker_src
    report_id = f"{ctx.source}#{record}"
    row: dict[str, Any] = {
        "kind": "broker",
        "source": ctx.source,
        "source_kind": ctx.source_kind,
        "record": record,
        "report_id": report_id,
        "cluster": cluster,
        "time_ms": time_ms,
        "broker": broker,
        "raw": _raw(raw),
    }
    for name, prefix in _RESOURCES:
        res = report.get(name)
        if res is None:
            row[f"{prefix}_usage"] = None
            row[f"{prefix}_limit"] = None
            continue
        if not isinstance(res, Mapping):
            raise _BadValueError(
                "invalid_value", f"report.{name}: expected an object {{usage, limit}}, got {res!r}"
            )
        row[f"{prefix}_usage"] = _num(res, "usage", f"report.{name}.")
        row[f"{prefix}_limit"] = _num(res, "limit", f"report.{name}.")
    for key, col in (
        ("msgRateIn", "msg_rate_in"),
        ("msgRateOut", "msg_rate_out"),
        ("msgThroughputIn", "msg_throughput_in"),
        ("msgThroughputOut", "msg_throughput_out"),
    ):
        row[col] = _num(report, key, "report.")
    row["num_topics"] = _int(report, "numTopics", "report.")
    row["num_bundles"] = _int(report, "numBundles", "report.")
    row["num_consumers"] = _int(report, "numConsumers", "report.")
    row["num_producers"] = _int(report, "numProducers", "report.")
    row["persistent_topics_enabled"] = _bool(report, "persistentTopicsEnabled", "report.")
    row["non_persistent_topics_enabled"] = _bool(report, "nonPersistentTopicsEnabled", "report.")
    row["broker_version"] = _str(report, "brokerVersionString", "report.")
    row["load_manager_class"] = _str(report, "loadManagerClassName", "report.")
    row["last_update_ms"] = _time_ms(report.get("lastUpdate"), "report.lastUpdate")
    stats = report.get("lastStats", {})
    if stats is None:
        stats = {}
    if not isinstance(stats, Mapping):
        raise _BadValueError(
            "invalid_value", f"report.lastStats: expected an object, got {type(stats).__name__}"
        )
    bundle_rows: list[dict[str, Any]] = []
    for bundle, s in stats.items():
        brow: dict[str, Any] = {
            "kind": "bundle",
            "source": ctx.source,
            "source_kind": ctx.source_kind,
            "record": record,
            "report_id": report_id,
            "cluster": cluster,
            "time_ms": time_ms,
            "broker": broker,
            "bundle": bundle,
        }
        if not isinstance(s, Mapping):
            brow.update(
                kind="quarantine",
                metric="bundle_samples",
                reason="invalid_value",
                detail=f"report.lastStats.{bundle}: expected an object",
                raw=_raw(json.dumps(s)),
            )
            bundle_rows.append(brow)
            continue
        try:
            for key, col in (
                ("msgRateIn", "msg_rate_in"),
                ("msgRateOut", "msg_rate_out"),
                ("msgThroughputIn", "msg_throughput_in"),
                ("msgThroughputOut", "msg_throughput_out"),
            ):
                brow[col] = _num(s, key, f"report.lastStats.{bundle}.")
            brow["consumer_count"] = _int(s, "consumerCount", f"report.lastStats.{bundle}.")
            brow["producer_count"] = _int(s, "producerCount", f"report.lastStats.{bundle}.")
            brow["topics"] = _int(s, "topics", f"report.lastStats.{bundle}.")
            brow["cache_size"] = _int(s, "cacheSize", f"report.lastStats.{bundle}.")
        except _BadValueError as bad:
            brow = {
                **{k: brow[k] for k in ("source", "source_kind", "record", "report_id", "cluster")},
                "kind": "quarantine",
                "time_ms": time_ms,
                "broker": broker,
                "bundle": bundle,
                "metric": "bundle_samples",
                "reason": bad.reason,
                "detail": bad.detail,
                "raw": _raw(json.dumps(s)),
            }
        brow["raw"] = brow.get("raw") or _raw(json.dumps(s, allow_nan=True))
        bundle_rows.append(brow)
    ctx.rows.append(row)
    ctx.rows.extend(bundle_rows)


def _parse_bundle_data(
    ctx: _Ctx, record: int, raw: str, bundle: str | None, data: Mapping[str, Any], w: Mapping[str, Any]
) -> None:
    cluster = w.get("cluster") if isinstance(w.get("cluster"), str) else None
    row: dict[str, Any] = {
        "kind": "bundle_data",
        "source": ctx.source,
        "source_kind": ctx.source_kind,
        "record": record,
        "cluster": cluster or ctx.default_cluster,
        "time_ms": _time_ms(w.get("timestamp"), "timestamp"),
        "bundle": bundle,
        "raw": _raw(raw),
    }
    for part, prefix in (("shortTermData", "short"), ("longTermData", "long")):
        sub = data.get(part)
        if sub is None:
            for c in ("num_samples", "max_samples", "msg_rate_in", "msg_rate_out"):
                row[f"{prefix}_{c}"] = None
            row[f"{prefix}_msg_throughput_in"] = None
            row[f"{prefix}_msg_throughput_out"] = None
            continue
        if not isinstance(sub, Mapping):
            raise _BadValueError("invalid_value", f"{part}: expected an object")
        row[f"{prefix}_num_samples"] = _int(sub, "numSamples", f"{part}.")
        row[f"{prefix}_max_samples"] = _int(sub, "maxSamples", f"{part}.")
        row[f"{prefix}_msg_rate_in"] = _num(sub, "msgRateIn", f"{part}.")
        row[f"{prefix}_msg_rate_out"] = _num(sub, "msgRateOut", f"{part}.")
        row[f"{prefix}_msg_throughput_in"] = _num(sub, "msgThroughputIn", f"{part}.")
        row[f"{prefix}_msg_throughput_out"] = _num(sub, "msgThroughputOut", f"{part}.")
    row["topics"] = _int(data, "topics", "")
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
        labels = series.get("metric", {}) if isinstance(series, Mapping) else {}
        if not isinstance(labels, Mapping):
            labels = {}
        name = labels.get("__name__")
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
        cluster = labels.get("cluster") if isinstance(labels.get("cluster"), str) else None
        cluster = cluster or ctx.default_cluster
        broker = _prom_broker_id(labels, ctx.web_port)
        bundle = labels.get("bundle") if isinstance(labels.get("bundle"), str) else None
        label_text = json.dumps(labels, sort_keys=True)
        known = isinstance(name, str) and (
            name in PROMETHEUS_BROKER_METRICS or name in PROMETHEUS_BUNDLE_METRICS
        )
        for point in values:
            ctx.points += 1
            rec = ctx.points
            ts_ms: int | None = None
            value: float | None = None
            problem: tuple[str, str] | None = None
            try:
                ts = float(point[0])
                ts_ms = round(ts * 1000.0)
                text = point[1]
                value = float(text) if not isinstance(text, bool) else None
                if value is None:
                    raise ValueError
            except (TypeError, ValueError, IndexError):
                problem = ("invalid_value", f"series {series_no}: malformed point {point!r}")
            if problem is None and not known:
                problem = (
                    "unknown_metric",
                    f"{name!r}: not a pulsar_lb_*_usage or pulsar_bundle_* series (unknown units)",
                )
            if problem is None and broker is None:
                problem = ("missing_field", f"{name}: no broker/instance label")
            if problem is None and name in PROMETHEUS_BUNDLE_METRICS and bundle is None:
                problem = ("missing_field", f"{name}: no bundle label")
            if problem is not None:
                ctx.quarantine(
                    rec,
                    problem[0],
                    problem[1],
                    f"{label_text} {json.dumps(point)}",
                    table="prometheus",
                    cluster=cluster,
                    broker=broker,
                    bundle=bundle,
                    time_ms=ts_ms,
                )
                continue
            ctx.rows.append(
                {
                    "kind": "prom",
                    "source": ctx.source,
                    "source_kind": "prometheus",
                    "record": rec,
                    "cluster": cluster,
                    "time_ms": ts_ms,
                    "broker": broker,
                    "bundle": bundle if name in PROMETHEUS_BUNDLE_METRICS else None,
                    "metric": name,
                    "value": value,
                    "raw": f"{label_text} {json.dumps(point)}"[:_RAW_LIMIT],
                }
            )


def _parse_value(ctx: _Ctx, record: int, raw: str, obj: Any) -> None:
    """Classify one JSON value and emit its rows (or a quarantine row)."""
    if not isinstance(obj, Mapping):
        raise _BadValueError("unknown_record", f"expected a JSON object, found {type(obj).__name__}")
    if isinstance(obj.get("data"), Mapping) and "result" in obj["data"]:
        _parse_prometheus(ctx, record, raw, obj)
        return
    inner = obj.get("report")
    if isinstance(inner, Mapping):
        if _is_legacy(inner):
            raise _BadValueError(
                "legacy_load_report", "report is a legacy LoadReport (SimpleLoadManagerImpl)"
            )
        _parse_report(ctx, record, raw, inner, obj)
        return
    if "report" in obj:
        raise _BadValueError("invalid_value", f"report: expected an object, got {type(inner).__name__}")
    if _is_legacy(obj):
        raise _BadValueError(
            "legacy_load_report", "a legacy LoadReport (SimpleLoadManagerImpl); only LocalBrokerData"
        )
    data = obj.get("data")
    if isinstance(data, Mapping) and _looks_like_bundle_data(data):
        bundle = obj.get("bundle") if isinstance(obj.get("bundle"), str) else None
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
        _parse_bundle_data(ctx, record, raw, bundle, obj, obj)
        return
    if _looks_like_report(obj):
        _parse_report(ctx, record, raw, obj, None)
        return
    raise _BadValueError(
        "unknown_record", "neither a load report, a BundleData dump nor a Prometheus response"
    )


def _parse_one(ctx: _Ctx, record: int, text: str) -> None:
    try:
        obj = json.loads(text)
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
    """A ``.json`` file's records: the document itself, its array elements, or its lines (JSONL)."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        doc = json.loads(stripped)
    except json.JSONDecodeError:
        return [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]
    if isinstance(doc, list):
        return [(i, json.dumps(item, allow_nan=True)) for i, item in enumerate(doc, 1)]
    return [(1, stripped)]


def parse_text_batch(
    batch: pd.DataFrame,
    *,
    default_cluster: str,
    web_port: int,
    columns: Sequence[str],
    line_offsets: Mapping[tuple[str, int], int] | None = None,
    counters: dict[tuple[str, int], int] | None = None,
) -> pd.DataFrame:
    """Parse a batch of text rows (``source``, ``source_kind``, ``block``, ``value``) into RAW_ROW rows.

    ``source_kind`` is ``json_lines`` (one record per row; its record number is the line number,
    counted from ``line_offsets[(source, block)]``) or ``json_doc`` (a whole file).
    """
    offsets = line_offsets or {}
    counts = counters if counters is not None else {}
    out: list[dict[str, Any]] = []
    for source, kind, block, value in zip(
        batch["source"], batch["source_kind"], batch["block"], batch["value"], strict=True
    ):
        ctx = _Ctx(
            source=_clean_source(source), source_kind="", default_cluster=default_cluster, web_port=web_port
        )
        if kind == "json_lines":
            key = (source, int(block))
            idx = counts.get(key, 0)
            counts[key] = idx + 1
            line_no = offsets.get(key, 0) + idx + 1
            if not value or not value.strip():
                continue
            ctx.source_kind = "load_report"
            _parse_one(ctx, line_no, value)
        else:
            ctx.source_kind = "json"
            for rec, text in _split_document(value or ""):
                _parse_one(ctx, rec, text)
        for row in ctx.rows:
            if row.get("source_kind") in ("", "load_report", "json"):
                row["source_kind"] = _kind_of(row)
            _mark_nonfinite(row)
        out.extend(ctx.rows)
    from shedlab.spark.schemas import RAW_ROW, conform

    frame = pd.DataFrame(out, columns=list(columns))
    return conform(frame, RAW_ROW)


_FLOAT_COLUMNS: tuple[str, ...] = (
    "cpu_usage",
    "cpu_limit",
    "memory_usage",
    "memory_limit",
    "direct_memory_usage",
    "direct_memory_limit",
    "bandwidth_in_usage",
    "bandwidth_in_limit",
    "bandwidth_out_usage",
    "bandwidth_out_limit",
    "msg_rate_in",
    "msg_rate_out",
    "msg_throughput_in",
    "msg_throughput_out",
    "short_msg_rate_in",
    "short_msg_rate_out",
    "short_msg_throughput_in",
    "short_msg_throughput_out",
    "long_msg_rate_in",
    "long_msg_rate_out",
    "long_msg_throughput_in",
    "long_msg_throughput_out",
    "value",
)


def _mark_nonfinite(row: dict[str, Any]) -> None:
    """NaN/±Inf become null plus a note in ``nonfinite`` (Arrow would turn NaN into null anyway)."""
    bad = []
    for col in _FLOAT_COLUMNS:
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
class _Sources:
    json_lines: list[str]
    json_docs: list[str]
    parquet: list[str]


def _is_remote(path: str) -> bool:
    return bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", path)) and not path.startswith("file://")


def _suffix_kind(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(JSON_DOC_SUFFIXES):
        return "json_doc"
    if lower.endswith(JSON_LINE_SUFFIXES):
        return "json_lines"
    return None


def classify_sources(paths: Sequence[str]) -> _Sources:
    """Expand local files/directories/globs and sort them into JSON lines, JSON documents and Parquet.

    A directory holding Parquet (e.g. an ingest output with ``broker_samples/``) is one Parquet
    source; otherwise its files are taken by suffix, recursively (hidden and ``_`` files skipped).
    Remote URIs (``hdfs://``, ``s3a://``, …) are classified by suffix (Parquet if none).
    """
    lines: list[str] = []
    docs: list[str] = []
    parquet: list[str] = []
    if not paths:
        raise InputError("no input given", field="SOURCE")
    for given in paths:
        if _is_remote(given):
            kind = _suffix_kind(given.rstrip("/")) or "parquet"
            {"parquet": parquet, "json_doc": docs, "json_lines": lines}[kind].append(given)
            continue
        local = given[len("file://") :] if given.startswith("file://") else given
        candidates = (
            [Path(p) for p in sorted(glob.glob(local, recursive=True))]
            if any(c in local for c in "*?[")
            else [Path(local)]
        )
        if not candidates or not all(c.exists() for c in candidates):
            raise InputError("input not found", source=given)
        for cand in candidates:
            if cand.is_dir():
                if _holds_parquet(cand):
                    parquet.append(str(cand.resolve()))
                    continue
                found = False
                for f in sorted(cand.rglob("*")):
                    if f.is_dir() or any(part.startswith((".", "_")) for part in f.relative_to(cand).parts):
                        continue
                    file_kind = _suffix_kind(f.name)
                    if file_kind is None:
                        continue
                    found = True
                    {"parquet": parquet, "json_doc": docs, "json_lines": lines}[file_kind].append(
                        str(f.resolve())
                    )
                if not found:
                    raise InputError("no .json/.jsonl/.parquet files in directory", source=given)
            else:
                kind = _suffix_kind(cand.name) or "json_lines"
                {"parquet": parquet, "json_doc": docs, "json_lines": lines}[kind].append(str(cand.resolve()))
    return _Sources(json_lines=lines, json_docs=docs, parquet=parquet)


def _holds_parquet(directory: Path) -> bool:
    if any((directory / sub).is_dir() for sub in ("broker_samples", "bundle_samples", "bundle_data")):
        return True
    return any(f.suffix == ".parquet" for f in directory.rglob("*.parquet"))


# ---------------------------------------------------------------------------------------------
# Spark pipeline
# ---------------------------------------------------------------------------------------------


@dataclass
class IngestResult:
    """What an ingest wrote, and the per-source counts it printed."""

    out: str
    stats: pd.DataFrame
    reasons: pd.DataFrame
    broker_rows: int
    bundle_rows: int
    bundle_data_rows: int
    quarantined_rows: int
    clusters: list[str]

    @property
    def rows_read(self) -> int:
        return int(self.stats["rows_read"].sum()) if len(self.stats) else 0


def _read_text_sources(
    spark: SparkSession, sources: _Sources, *, default_cluster: str, web_port: int
) -> DataFrame:

    from shedlab.spark.schemas import RAW_ROW, field_names

    frames = []
    lines: DataFrame | None = None
    if sources.json_lines:
        lines = spark.read.text(sources.json_lines).select(
            sf.col("_metadata.file_path").alias("source"),
            sf.lit("json_lines").alias("source_kind"),
            sf.col("_metadata.file_block_start").alias("block"),
            sf.col("value"),
        )
        frames.append(lines)
    if sources.json_docs:
        docs = spark.read.text(sources.json_docs, wholetext=True).select(
            sf.col("_metadata.file_path").alias("source"),
            sf.lit("json_doc").alias("source_kind"),
            sf.lit(0).cast("long").alias("block"),
            sf.col("value"),
        )
        frames.append(docs)
    columns = field_names(RAW_ROW)
    if not frames:
        return spark.createDataFrame([], RAW_ROW)
    text = frames[0]
    for other in frames[1:]:
        text = text.unionByName(other)
    # Line numbers: count lines per (file, split) in the JVM, then number inside each split.
    offsets: dict[tuple[str, int], int] = {}
    if lines is not None:
        counts = lines.groupBy("source", "block").count().orderBy("source", "block").collect()
        running: dict[str, int] = {}
        for row in counts:
            offsets[(row["source"], int(row["block"]))] = running.get(row["source"], 0)
            running[row["source"]] = running.get(row["source"], 0) + int(row["count"])

    def parse(batches: Iterable[pd.DataFrame]) -> Iterable[pd.DataFrame]:
        counters: dict[tuple[str, int], int] = {}
        for batch in batches:
            yield parse_text_batch(
                batch,
                default_cluster=default_cluster,
                web_port=web_port,
                columns=columns,
                line_offsets=offsets,
                counters=counters,
            )

    return text.mapInPandas(parse, RAW_ROW)


def _read_parquet_sources(spark: SparkSession, paths: Sequence[str]) -> DataFrame | None:
    """Canonical Parquet → RAW_ROW rows (kind by table)."""

    from shedlab.spark.schemas import BROKER_SAMPLE, BUNDLE_DATA, BUNDLE_SAMPLE, RAW_ROW, field_names

    out: DataFrame | None = None
    for path in paths:
        tables: list[tuple[str, str]] = []
        local = Path(path)
        if (
            not _is_remote(path)
            and local.is_dir()
            and any((local / t).is_dir() for t in ("broker_samples", "bundle_samples", "bundle_data"))
        ):
            for table in ("broker_samples", "bundle_samples", "bundle_data"):
                if (local / table).is_dir():
                    tables.append((table, str(local / table)))
        else:
            tables.append(("auto", path))
        for table, tpath in tables:
            try:
                df = spark.read.option("mergeSchema", "false").parquet(tpath)
            except Exception as exc:  # AnalysisException: unreadable / not Parquet
                raise InputError(f"cannot read Parquet: {str(exc).splitlines()[0]}", source=tpath) from None
            cols = set(df.columns)
            if table == "auto":
                if "cpu_usage" in cols:
                    table = "broker_samples"
                elif "short_msg_rate_in" in cols:
                    table = "bundle_data"
                elif "bundle" in cols and "broker" in cols:
                    table = "bundle_samples"
                else:
                    raise InputError(
                        "Parquet columns match none of broker_samples, bundle_samples, bundle_data",
                        source=tpath,
                        value=sorted(cols)[:12],
                    )
            schema = {
                "broker_samples": BROKER_SAMPLE,
                "bundle_samples": BUNDLE_SAMPLE,
                "bundle_data": BUNDLE_DATA,
            }[table]
            kind = {"broker_samples": "broker", "bundle_samples": "bundle", "bundle_data": "bundle_data"}[
                table
            ]
            required = {"cluster", "time_ms"} | ({"broker"} if kind != "bundle_data" else set())
            required |= {"bundle"} if kind != "broker" else set()
            missing = sorted(required - cols)
            if missing:
                raise InputError("Parquet source lacks required columns", source=tpath, value=missing)
            selected = []
            for name in field_names(RAW_ROW):
                dtype = RAW_ROW[name].dataType
                if name == "kind":
                    selected.append(sf.lit(kind).alias(name))
                elif name == "source":
                    selected.append(sf.lit(path).alias(name))
                elif name == "source_kind":
                    selected.append(sf.lit("parquet").alias(name))
                elif name == "record":
                    selected.append(sf.monotonically_increasing_id().alias(name))
                elif name == "report_id":
                    selected.append(
                        (sf.col("report_id") if "report_id" in cols else sf.lit(None)).cast(dtype).alias(name)
                    )
                elif name == "raw":
                    selected.append(sf.lit(None).cast(dtype).alias(name))
                elif name == "nonfinite":
                    floats = [c for c in _FLOAT_COLUMNS if c in cols and c in field_names(schema)]
                    marks = [
                        sf.when(sf.isnan(sf.col(c)) | (sf.abs(sf.col(c)) == float("inf")), sf.lit(f"{c}=NaN"))
                        for c in floats
                    ]
                    selected.append(
                        (sf.nullif(sf.concat_ws(",", *marks), sf.lit("")) if marks else sf.lit(None))
                        .cast(dtype)
                        .alias(name)
                    )
                elif name in cols and name in field_names(schema):
                    selected.append(sf.col(name).cast(dtype).alias(name))
                else:
                    selected.append(sf.lit(None).cast(dtype).alias(name))
            part = df.select(*selected)
            out = part if out is None else out.unionByName(part)
    return out


_PULSAR_NAMES: dict[str, str] = {
    **{f"{p}_{k}": f"{r}.{k}" for r, p in _RESOURCES for k in ("usage", "limit")},
    "msg_rate_in": "msgRateIn",
    "msg_rate_out": "msgRateOut",
    "msg_throughput_in": "msgThroughputIn",
    "msg_throughput_out": "msgThroughputOut",
    "time_ms": "timestamp",
    "broker": "broker id",
    "num_topics": "numTopics",
    "num_bundles": "numBundles",
    "num_consumers": "numConsumers",
    "num_producers": "numProducers",
    "consumer_count": "consumerCount",
    "producer_count": "producerCount",
    "cache_size": "cacheSize",
}

_BROKER_FLOATS = (
    *(f"{p}_{k}" for _, p in _RESOURCES for k in ("usage", "limit")),
    "msg_rate_in",
    "msg_rate_out",
    "msg_throughput_in",
    "msg_throughput_out",
)
_RESOURCE_COLUMNS = {f"{p}_{k}": f"{p}_limit" for _, p in _RESOURCES for k in ("usage", "limit")}
"""Resource columns → their limit column: any value is valid where the limit is ≤ 0 (0 %, spec §1.1)."""
_BUNDLE_FLOATS = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
_BD_FLOATS = tuple(
    f"{p}_{c}"
    for p in ("short", "long")
    for c in ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
)
_CHECKS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # kind: (required non-numeric, finite non-negative floats, non-negative integers)
    "broker": (("broker",), _BROKER_FLOATS, ("num_topics", "num_bundles", "num_consumers", "num_producers")),
    "bundle": (
        ("broker", "bundle"),
        _BUNDLE_FLOATS,
        ("consumer_count", "producer_count", "topics", "cache_size"),
    ),
    "bundle_data": (("bundle",), _BD_FLOATS, ("topics",)),
    "prom": (("broker",), ("value",), ()),
}


def _fmt(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return f"{value:.1f}"
    return str(value)


def validate_rows(df: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The first failing check of every row as (reason, detail); null where the row is valid.

    Parse failures (``kind == "quarantine"``) keep the reason the parser gave them. A float that
    is null is *missing* unless ``nonfinite`` says it was NaN/±Inf in the source (*nan_value*).
    """
    n = len(df)
    reason = pd.Series([None] * n, index=df.index, dtype=object)
    detail = pd.Series([None] * n, index=df.index, dtype=object)
    parse_failed = df["kind"] == "quarantine"
    reason[parse_failed] = df.loc[parse_failed, "reason"]
    detail[parse_failed] = df.loc[parse_failed, "detail"].where(df.loc[parse_failed, "detail"].notna(), None)
    nonfinite = df["nonfinite"].fillna("").astype(str)

    def flag(mask: pd.Series, code: str, text: Callable[[pd.Index], pd.Series] | str) -> None:
        hit = mask.fillna(False).astype(bool) & reason.isna()
        if not hit.any():
            return
        reason[hit] = code
        detail[hit] = text(hit[hit].index) if callable(text) else text

    def shown(col: str, prefix: str = "") -> Callable[[pd.Index], pd.Series]:
        def text(index: pd.Index) -> pd.Series:
            values = pd.to_numeric(df.loc[index, col], errors="coerce")
            out: pd.Series = prefix + values.map(_fmt)
            return out

        return text

    any_nonfinite = bool((nonfinite != "").any())
    for kind, (required, floats, ints) in _CHECKS.items():
        of_kind = df["kind"] == kind
        if not of_kind.any():
            continue
        flag(of_kind & df["cluster"].isna(), "missing_field", "cluster is missing")
        flag(of_kind & df["time_ms"].isna(), "missing_field", "timestamp is missing")
        flag(of_kind & (df["time_ms"] <= 0), "invalid_timestamp", shown("time_ms", "time = "))
        for col in required:
            flag(of_kind & df[col].isna(), "missing_field", f"{_PULSAR_NAMES.get(col, col)} is missing")
        no = pd.Series(False, index=df.index)
        was_nonfinite = {
            col: nonfinite.str.contains(rf"(?:^|,){re.escape(col)}=", regex=True) if any_nonfinite else no
            for col in floats
        }
        for col in floats:
            flag(
                of_kind & df[col].isna() & ~was_nonfinite[col],
                "missing_field",
                f"{_PULSAR_NAMES.get(col, col)} is missing",
            )
        for col in floats:
            values = pd.to_numeric(df[col], errors="coerce")
            name = _PULSAR_NAMES.get(col, col)
            flag(
                of_kind & (was_nonfinite[col] | values.isin([float("inf"), float("-inf")])),
                "nan_value",
                f"{name} is not a finite number",
            )
            negative = values < 0
            if col in _RESOURCE_COLUMNS:  # {"usage": -1, "limit": -1}: a resource Pulsar could not measure
                negative &= ~(pd.to_numeric(df[_RESOURCE_COLUMNS[col]], errors="coerce") <= 0)
            flag(of_kind & negative, "negative_value", shown(col, f"{name} = "))
        if kind == "broker":
            for _, prefix in _RESOURCES:
                usage = pd.to_numeric(df[f"{prefix}_usage"], errors="coerce")
                limit = pd.to_numeric(df[f"{prefix}_limit"], errors="coerce")
                label = f"{_PULSAR_NAMES[prefix + '_usage']} = "

                def units(
                    index: pd.Index, u: pd.Series = usage, lim: pd.Series = limit, lab: str = label
                ) -> pd.Series:
                    return lab + u[index].map(_fmt) + " with limit " + lim[index].map(_fmt)

                flag(of_kind & (usage > 0) & (limit <= 0), "unknown_units", units)
        for col in ints:
            values = pd.to_numeric(df[col], errors="coerce")
            flag(of_kind & (values < 0), "negative_value", shown(col, f"{_PULSAR_NAMES.get(col, col)} = "))
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
    from shedlab.spark.schemas import STAGED_ROW, conform

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
        dup = ordered.fillna({k: "" for k in keys if k in ("bundle", "broker", "metric")}).duplicated(
            subset=keys, keep="last"
        )
        status[dup[dup].index] = "merged"

    dedup(is_broker & valid, ["cluster", "broker", "tick_ms"])
    merged_reports = set(df.loc[is_broker & (status == "merged"), "report_id"].dropna())
    known_reports = set(df.loc[is_broker, "report_id"].dropna())
    is_bundle = (kind == "bundle") & valid
    tied = is_bundle & df["report_id"].isin(list(known_reports))
    status[tied & df["report_id"].isin(list(merged_reports))] = "merged"
    dedup(is_bundle & ~tied, ["cluster", "tick_ms", "bundle", "broker"])
    dedup((kind == "prom") & valid, ["cluster", "metric", "broker", "bundle", "tick_ms"])
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
    derived = _pivot_prometheus(out[(out["kind"] == "prom") & (out["status"] == "kept")])
    if derived is not None:
        out = pd.concat([out, derived], ignore_index=True)
    return conform(out, STAGED_ROW)


def _pivot_prometheus(points: pd.DataFrame) -> pd.DataFrame | None:
    """Kept Prometheus points → one broker row per (broker, tick) and one bundle row per (bundle, tick)."""
    if points.empty:
        return None
    frames = []
    bundle_points = points[points["bundle"].notna()]
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
) -> IngestResult:
    """Read ``sources``, validate, align to ticks of ``interval_ms`` and write the canonical tables.

    Output under ``out`` (the cluster/day partitions written are replaced, others kept):
    ``broker_samples/``, ``bundle_samples/``, ``bundle_data/`` and ``quarantine/`` (partitioned
    by cluster and day; ``unknown`` where unreadable) and ``ingest_stats/``. Rows are processed
    in groups of one cluster × ``bucket_ms`` of ticks (an hour by default; lower it for clusters
    with hundreds of thousands of bundles).
    """
    from shedlab.spark.schemas import (
        BROKER_SAMPLE,
        BUNDLE_DATA,
        BUNDLE_SAMPLE,
        INGEST_STATS,
        QUARANTINE,
        STAGED_ROW,
        field_names,
    )

    if interval_ms <= 0:
        raise InputError("the tick interval must be positive", field="--interval", value=interval_ms)
    if bucket_ms < interval_ms:
        bucket_ms = interval_ms
    say = progress or (lambda _msg: None)
    classified = classify_sources(sources)
    say(
        f"reading {len(classified.json_lines)} JSON-lines, {len(classified.json_docs)} JSON and "
        f"{len(classified.parquet)} Parquet source(s)"
    )
    raw = _read_text_sources(spark, classified, default_cluster=default_cluster, web_port=web_port)
    pq = _read_parquet_sources(spark, classified.parquet)
    if pq is not None:
        raw = raw.unionByName(pq)
    tick = (sf.floor(sf.col("time_ms") / sf.lit(interval_ms)) * sf.lit(interval_ms)).cast("long")
    raw = raw.withColumn("tick_ms", sf.when(sf.col("time_ms") > 0, tick))
    bucket = sf.floor(sf.col("tick_ms") / sf.lit(bucket_ms))
    say("parsing and validating")
    rows = (
        raw.groupBy(sf.col("cluster"), bucket.alias("_bucket"))
        .applyInPandas(process_group, STAGED_ROW)
        .withColumn("day", sf.to_date(sf.timestamp_millis(sf.col("tick_ms"))))
        .localCheckpoint(eager=True)
    )
    root = out.rstrip("/")

    def canonical(df: DataFrame, schema: Any) -> DataFrame:
        cols = []
        for name in field_names(schema):
            dtype = schema[name].dataType
            if name in df.columns:
                cols.append(sf.col(name).cast(dtype).alias(name))
            else:
                cols.append(sf.lit(None).cast(dtype).alias(name))
        return df.select(*cols)

    def write(df: DataFrame, name: str, sort: Sequence[str]) -> None:
        say(f"writing {name}")
        (
            df.repartition("cluster", "day")
            .sortWithinPartitions(*sort)
            .write.mode("overwrite")
            .partitionBy("cluster", "day")
            .parquet(f"{root}/{name}")
        )

    kept = sf.col("status").isin("kept", "derived")
    kind = sf.col("kind")
    write(
        canonical(rows.where(kept & kind.isin("broker", "prom_broker")), BROKER_SAMPLE),
        "broker_samples",
        ["tick_ms", "broker"],
    )
    write(
        canonical(rows.where(kept & kind.isin("bundle", "prom_bundle")), BUNDLE_SAMPLE),
        "bundle_samples",
        ["tick_ms", "broker", "bundle"],
    )
    write(
        canonical(rows.where(kept & (kind == "bundle_data")), BUNDLE_DATA),
        "bundle_data",
        ["tick_ms", "bundle"],
    )
    src = sf.regexp_replace(sf.col("source"), "^file:(//)?", "")
    quarantine = rows.where(sf.col("status") == "quarantined").select(
        sf.coalesce(sf.col("cluster"), sf.lit("unknown")).alias("cluster"),
        sf.coalesce(sf.col("day").cast("string"), sf.lit("unknown")).alias("day"),
        src.alias("source"),
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
    write(canonical(quarantine, QUARANTINE), "quarantine", ["source", "record"])

    say("counting")
    counted = rows.where(sf.col("status") != "derived").withColumn("source", src)
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
    )
    stats = canonical(stats_df, INGEST_STATS).orderBy("source").toPandas()
    reasons = (
        counted.where(sf.col("status") == "quarantined")
        .groupBy("source", "reason")
        .count()
        .orderBy("source", "reason")
        .toPandas()
    )
    spark.createDataFrame(stats, INGEST_STATS).coalesce(1).write.mode("overwrite").parquet(
        f"{root}/ingest_stats"
    )
    clusters = sorted(
        r["cluster"]
        for r in rows.where(kept).select("cluster").distinct().collect()
        if r["cluster"] is not None
    )
    return IngestResult(
        out=out,
        stats=stats,
        reasons=reasons,
        broker_rows=int(stats["broker_rows_kept"].sum()) if len(stats) else 0,
        bundle_rows=int(stats["bundle_rows_kept"].sum()) if len(stats) else 0,
        bundle_data_rows=int(stats["bundle_data_rows_kept"].sum()) if len(stats) else 0,
        quarantined_rows=int(stats["rows_quarantined"].sum()) if len(stats) else 0,
        clusters=clusters,
    )


def read_snapshots(spark: SparkSession, path: str) -> tuple[DataFrame, DataFrame, DataFrame | None]:
    """The broker samples, bundle samples and (if present) BundleData dumps of an ingest output."""
    from shedlab.spark.schemas import BROKER_SAMPLE, BUNDLE_DATA, BUNDLE_SAMPLE

    root = path.rstrip("/")
    local = not _is_remote(root)
    for table in ("broker_samples", "bundle_samples"):
        if local and not Path(root, table).is_dir():
            raise InputError(f"not an ingest output: {table}/ is missing", source=path)
    brokers = spark.read.schema(BROKER_SAMPLE).parquet(f"{root}/broker_samples")
    bundles = spark.read.schema(BUNDLE_SAMPLE).parquet(f"{root}/bundle_samples")
    bd: DataFrame | None = None
    if not local or Path(root, "bundle_data").is_dir():
        bd = spark.read.schema(BUNDLE_DATA).parquet(f"{root}/bundle_data")
    return brokers, bundles, bd
