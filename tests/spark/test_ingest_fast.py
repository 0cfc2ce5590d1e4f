"""Ingest's JVM path gives exactly what the Python reader gives: the same tables, counts and quarantine.

Both paths ingest the same inputs (the fixtures; a simulator recording with bad lines of every kind mixed
in, next to a clean copy a day later) and every output table is compared row for row.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow.dataset as ds  # type: ignore[import-untyped]  # no stubs (as in src/)
import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

if TYPE_CHECKING:  # the tests import shedlab.spark inside themselves, not at collection
    from shedlab.spark.ingest import IngestResult

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
TABLES = ("broker_samples", "bundle_samples", "bundle_data", "quarantine", "ingest_stats")
DAY_MS = 86_400_000


def _table(root: Path, name: str) -> pd.DataFrame:
    path = root / name
    if not path.is_dir():
        return pd.DataFrame()
    frame: pd.DataFrame = ds.dataset(str(path), format="parquet", partitioning="hive").to_table().to_pandas()
    frame = frame.astype({c: str for c in frame.columns if str(frame[c].dtype) == "category"})
    frame = frame.sort_values(sorted(frame.columns), na_position="first", kind="stable")
    return frame.reset_index(drop=True)


def _both(
    spark: SparkSession, sources: list[str], tmp: Path, **kw: Any
) -> tuple[IngestResult, IngestResult, Path, Path]:
    from shedlab.spark.ingest import ingest

    slow_out, fast_out = tmp / "python", tmp / "jvm"
    slow = ingest(spark, sources, str(slow_out), fast=False, **kw)
    fast = ingest(spark, sources, str(fast_out), fast=True, **kw)
    return slow, fast, slow_out, fast_out


def _assert_same(slow: IngestResult, fast: IngestResult, slow_out: Path, fast_out: Path) -> None:
    for name in TABLES:
        pd.testing.assert_frame_equal(_table(slow_out, name), _table(fast_out, name), obj=name)
    pd.testing.assert_frame_equal(slow.stats, fast.stats)
    pd.testing.assert_frame_equal(slow.reasons, fast.reasons)
    assert slow.clusters == fast.clusters


def _topic_export(path: Path) -> None:
    """Topic-level series as a Kubernetes scrape renames them (exported_cluster, exported_namespace)."""
    labels = {
        "cluster": "k8s",
        "exported_cluster": "c7",
        "namespace": "pulsar",
        "exported_namespace": "public/default",
        "instance": "b1:8080",
    }
    result: list[dict[str, object]] = [
        {
            "metric": {"__name__": m, **labels, "topic": f"persistent://public/default/t{i}"},
            "values": [[1735776000, str(i + 1)], [1735776060, str(i + 2)]],
        }
        for i in range(6)
        for m in ("pulsar_rate_in", "pulsar_producers_count")
    ]
    result.append(
        {
            "metric": {"__name__": "pulsar_lb_cpu_usage", **labels, "broker": "b1"},
            "values": [[1735776000, "50"], [1735776060, "55"]],
        }
    )
    doc = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    path.write_text(json.dumps(doc))


def test_both_paths_agree_on_the_fixtures(spark: SparkSession, tmp_path: Path) -> None:
    from shedlab.model.bundles import bundle_for_topic

    _topic_export(tmp_path / "topics.json")
    halves = {"public/default": [0, 0x80000000, 0xFFFFFFFF]}
    sources = [str(FIXTURES), str(tmp_path / "topics.json")]
    slow, fast, a, b = _both(spark, sources, tmp_path, default_cluster="c1", boundaries=halves)
    _assert_same(slow, fast, a, b)
    assert slow.quarantined_rows > 0 and slow.broker_rows > 0
    bundles = _table(a, "bundle_samples")
    topics = bundles[bundles["cluster"] == "c7"]  # Pulsar's cluster, not the scraper's "k8s"
    expected = {bundle_for_topic(f"persistent://public/default/t{i}", halves) for i in range(6)}
    assert set(topics["bundle"]) == expected and topics["topics"].sum() == 6 * 2
    assert set(topics["broker"]) == {"b1:8080"}
    assert "k8s" not in set(_table(a, "broker_samples")["cluster"])
    stats = slow.stats.set_index(slow.stats["source"].str.rsplit("/", n=1).str[-1])
    assert stats.loc["topics.json", "rows_relabelled"] == 6 * 2 * 2 + 2


def _recording(tmp: Path) -> list[dict[str, Any]]:
    from shedlab.core.sim import run_simulation
    from shedlab.core.sim.recording import write_recording
    from shedlab.core.sim.scenario import load_scenario

    result = run_simulation(load_scenario("homogeneous-gap"), strategy="AvgShedder", seed=3, record=True)
    write_recording(result, tmp / "sim")
    lines = (tmp / "sim" / "load-reports.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _shifted(record: dict[str, Any], ms: int) -> dict[str, Any]:
    out = copy.deepcopy(record)
    if "timestamp" in out:
        out["timestamp"] += ms
    out["report"]["lastUpdate"] += ms
    return out


def _bad_lines(records: list[dict[str, Any]]) -> list[bytes]:
    """Lines the Python reader quarantines, reads differently from Spark, or that span lines."""
    r0, r1, r2 = records[0], records[1], records[len(records) // 2]

    def dump(obj: Any) -> bytes:
        return json.dumps(obj, allow_nan=True).encode()

    def changed(rec: dict[str, Any], path: list[Any], value: Any) -> bytes:
        out = copy.deepcopy(rec)
        target = out
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return dump(out)

    bundle = next(iter(r0["report"]["lastStats"]))
    other_broker = next(r["broker"] for r in records if r["broker"] != r0["broker"])
    claim = copy.deepcopy(r0)
    claim["broker"] = other_broker
    claim["timestamp"] += 1  # the latest of its broker in the tick
    claim["report"]["webServiceUrl"] = f"http://{other_broker}"
    extensible = {"cpu": {"usage": 1.0, "limit": 2.0}, "weightedMaxEMA": 0.5, "updatedAt": r0["timestamp"]}
    no_time = copy.deepcopy(r1)
    del no_time["timestamp"]
    return [
        dump(r0)[:-12],  # torn
        changed(r0, ["report", "msgRateIn"], float("nan")),
        changed(r0, ["report", "lastStats", bundle, "msgRateOut"], -1.0),
        changed(r0, ["report", "numTopics"], "12"),  # quoted: Jackson (and the Python reader) take it
        changed(r0, ["report", "numTopics"], 12.0),
        changed(r0, ["report", "numTopics"], 2**70),
        changed(r0, ["report", "cpu", "usage"], 10**400),
        changed(r0, ["report", "brokerVersionString"], None),
        changed(r0, ["report", "brokerVersionString"], 7),
        changed(r0, ["report", "bundles"], ["a", 5]),
        changed(r0, ["cluster"], 5),
        changed(r0, ["broker"], ""),  # blank: quarantined, not replaced by webServiceUrl's id
        changed(r0, ["report", "bandwidthIn"], {"usage": 48211.7, "limit": 0.0}),  # Kubernetes: 0 %
        changed(r0, ["report", "memory"], {"usage": -1.0, "limit": -1.0}),
        changed(r0, ["report", "cpu"], {"usage": 5.0}),
        changed(r0, ["report", "lastStats", bundle], 3),
        changed(r0, ["report", "loadReportType"], "LoadReport"),
        changed(r0, ["report", "extra"], [{"a": 1}, {"b": [1, 2]}]),
        changed(r0, ["maxResourceUsage"], 0.5),
        dump(_shifted(r2, 1)),  # a later report of the same broker in the same tick: merges the other
        dump(claim),  # the same bundles claimed by another broker in the same tick
        dump(no_time),
        dump(extensible),
        dump({"timestamp": r0["timestamp"], "broker": "x:1", "report": extensible}),
        dump(r1) + b" trailing",
        dump(r1) + dump(r1),
        dump(r1) + b"}",
        dump(r1).replace(b'"cpu"', b'"\\u0063pu"'),
        dump(r1).replace(b'"', b"'"),
        dump(r1).replace(b'"broker"', b'"broker" ', 1)[:-1] + b"\xff\xfe}",  # invalid UTF-8
        b"",
        b"   ",
        b"[1, 2]",
        b"\xef\xbb\xbf" + dump(r1),  # a BOM mid-file
        changed(r1, ["broker"], " \u2003"),  # blank to Python's strip(), not to Java's \s
        _bundle_twice(r1),
        *_other_shapes(r1),
        *_keys_twice(r1),
        # past 2^53 - 1 (formats.MAX_SAFE_INTEGER): the JVM path kept it, the Python reader wrote 2^53 + 1
        # as 2^53 and 2^63 - 1 was a traceback (SPARK-54962)
        changed(r0, ["report", "numTopics"], 2**53 + 1),
        changed(r0, ["report", "numTopics"], 2**63 - 1),
        changed(r0, ["report", "lastStats", bundle, "cacheSize"], 2**63 - 1),
        changed(r0, ["report", "startTimestamp"], -(2**63)),
    ]


def _bundle_twice(record: dict[str, Any]) -> bytes:
    """``lastStats`` naming its first bundle twice, with other stats the first time: Python's json keeps
    the last entry, Spark's map both."""
    stats = record["report"]["lastStats"]
    bundle = next(iter(stats))
    first = json.dumps({bundle: {**stats[bundle], "msgRateIn": 12345.0}})[1:-1]
    text = json.dumps(record)
    return text.replace('"lastStats": {', '"lastStats": {' + first + ", ", 1).encode()


def _keys_twice(record: dict[str, Any]) -> list[bytes]:
    """A key given twice in one object, at every depth of a report: from_json kept a struct's last value,
    which the Python reader now quarantines (duplicate_key), as decide refuses such a document."""
    text = json.dumps(record)
    bundle = json.dumps(next(iter(record["report"]["lastStats"])))
    assert text.count(f"{bundle}: {{") == 1
    return [
        text.replace('{"', '{"broker": "b9:8080", "', 1).encode(),
        text.replace('"report": {', '"report": {"msgRateIn": 1.0, ', 1).encode(),
        text.replace('"cpu": {', '"cpu": {"usage": 99.0, ', 1).encode(),
        text.replace(f"{bundle}: {{", f'{bundle}: {{"msgRateIn": 7.0, ', 1).encode(),
    ]


def _other_shapes(record: dict[str, Any]) -> list[bytes]:
    """The record naming, beside its report or in it, a key by which the Python reader may take it for
    another shape (a wrapper with ``reportedAt`` is the extensible manager's BrokerLoadData to it)."""
    from shedlab.model.formats import OTHER_SHAPE_KEYS
    from shedlab.spark.ingest_fast import _REPORT_SHAPE_KEYS

    out = []
    for key in OTHER_SHAPE_KEYS:
        out.append(json.dumps({**record, key: 1}).encode())
    for key in _REPORT_SHAPE_KEYS:
        out.append(json.dumps({**record, "report": {**record["report"], key: {"x": 1}}}).encode())
    return out


def _unusual(records: list[dict[str, Any]]) -> list[bytes]:
    """Lines the Python reader keeps that the JVM path must read the same: merges, Pulsar's defaults."""
    r0, r2 = records[0], records[len(records) // 2]
    out = []
    for path, value in (
        (["bandwidthIn"], {"usage": 48211.7, "limit": 0.0}),  # Kubernetes: NIC speed unknown, 0 %
        (["bandwidthOut"], {"usage": -812.5, "limit": 1e7}),  # NIC counters went back: negative, kept
        (["memory"], {"usage": -1.0, "limit": -1.0}),  # not measured
        (["directMemory"], None),  # missing: 0 out of 0
        (["numBundles"], None),  # defaults to len(bundles)
        (["lastUpdate"], 1),
        (["extra"], {"nested": [1, 2, {"x": "{"}]}),  # unknown fields are ignored
    ):
        rec = copy.deepcopy(r0)
        rec["timestamp"] += 7
        if value is None:
            del rec["report"][path[0]]
        else:
            rec["report"][path[0]] = value
        out.append(json.dumps(rec).encode())
    no_time = copy.deepcopy(r2)
    del no_time["timestamp"]
    out += [json.dumps(_shifted(r2, 1)).encode(), json.dumps(no_time).encode()]
    return out


def test_both_paths_agree_on_a_recording_with_bad_lines(spark: SparkSession, tmp_path: Path) -> None:
    from shedlab.model.formats import MAX_TIME_MS
    from shedlab.spark.ingest import _text_frames
    from shedlab.spark.ingest_fast import fast_lines

    records = _recording(tmp_path)
    bad = _bad_lines(records)
    dirty = [json.dumps(r).encode() for r in records]
    for i, line in enumerate(bad):  # spread through the file
        dirty.insert((i * 7) % len(dirty), line)
    (tmp_path / "dirty.jsonl").write_bytes(b"\n".join(dirty) + b"\n")
    # A day later, in groups of their own: lines the JVM path takes, including the unusual ones.
    clean = [json.dumps(_shifted(r, DAY_MS)).encode() for r in records]
    clean += [json.dumps(_shifted(json.loads(line), DAY_MS)).encode() for line in _unusual(records)]
    (tmp_path / "clean.jsonl").write_bytes(b"\n".join(clean) + b"\n")
    # Two days later, alone in its group: a wrapper the Python reader takes for BrokerLoadData.
    lone = {**_shifted(records[0], 2 * DAY_MS), "reportedAt": 1}
    (tmp_path / "lone.jsonl").write_text(json.dumps(lone) + "\n")
    # Three days later, alone too: a report whose own time is past year 9999 beside a good wrapper's,
    # and one whose broker is blank (the JVM path kept both; the Python reader quarantines them).
    far = _shifted(records[0], 3 * DAY_MS)
    far["report"]["lastUpdate"] = MAX_TIME_MS + 1
    blank = {**_shifted(records[1], 3 * DAY_MS), "broker": " "}
    seconds = _shifted(records[2], 3 * DAY_MS)  # its report's own time in epoch seconds
    seconds["report"]["lastUpdate"] //= 1000
    zero = _shifted(records[3], 3 * DAY_MS)  # its report's own time 0 (formats.epoch_ms: before 1970)
    zero["report"]["lastUpdate"] = 0
    # a report naming bundles Pulsar cannot have, one ending in a newline (Java's $ matches before it)
    misnamed = _shifted(records[-1], 3 * DAY_MS)
    stats = misnamed["report"]["lastStats"]
    first = stats[next(iter(stats))]
    named = next(iter(stats))
    lower, upper = named.rsplit("/", 1)[1].split("_")
    stats.update({"notabundle": first, f"t/ns/{upper}_{lower}": first, f"{named}\n": first})
    far_lines = (json.dumps(r) for r in (far, blank, seconds, zero, misnamed))
    (tmp_path / "far.jsonl").write_text("\n".join(far_lines) + "\n")
    sources = [str(tmp_path / n) for n in ("dirty.jsonl", "clean.jsonl", "lone.jsonl", "far.jsonl")]
    slow, fast, a, b = _both(spark, sources, tmp_path, default_cluster="c9")
    _assert_same(slow, fast, a, b)
    reasons = set(slow.reasons["reason"])
    assert {"malformed_json", "nan_value", "negative_value", "invalid_utf8", "double_claim"} <= reasons
    assert {"extensible_load_data", "legacy_load_report", "invalid_value", "missing_field"} <= reasons
    assert "duplicate_key" in reasons
    far_reasons = set(fast.reasons[fast.reasons["source"].str.endswith("far.jsonl")]["reason"])
    assert {"invalid_timestamp", "invalid_value"} <= far_reasons
    far_rows = fast.reasons[fast.reasons["source"].str.endswith("far.jsonl")]
    assert far_rows.set_index("reason")["count"].get("invalid_timestamp") == 3, far_rows
    assert far_rows.set_index("reason")["count"].get("invalid_bundle") == 3, far_rows
    assert slow.stats["rows_merged"].sum() >= 2

    # The JVM path is really taken: every clean line, and none of the lines that must go to Python.
    from shedlab.core.ingest import classify_sources

    lines, _docs = _text_frames(spark, classify_sources(sources))
    assert lines is not None
    flags = fast_lines(lines).select("source", "value", "fast").toPandas()
    assert flags[flags["source"].str.endswith("clean.jsonl")]["fast"].all()
    must_not = {line.decode("utf-8", "replace") for line in bad[:12] + bad[14:17] + bad[18:19] + bad[22:]}
    taken = flags[flags["fast"] & flags["value"].isin(must_not)]
    assert taken.empty, taken["value"].str[:80].tolist()


def test_a_clean_recording_takes_no_python(spark: SparkSession, tmp_path: Path) -> None:
    """The common case: every line taken by the JVM path, no Python reader at all, the same tables and
    counts as the Python reader's (a later report of a broker in its tick merges the earlier one)."""
    from shedlab.spark.ingest import ingest

    records = _recording(tmp_path)
    lines = [json.dumps(r).encode() for r in records] + _unusual(records)
    (tmp_path / "clean.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    sources = [str(tmp_path / "clean.jsonl")]
    said: list[str] = []
    slow = ingest(spark, sources, str(tmp_path / "python"), fast=False, default_cluster="c9")
    fast = ingest(
        spark, sources, str(tmp_path / "jvm"), fast=True, default_cluster="c9", progress=said.append
    )
    _assert_same(slow, fast, tmp_path / "python", tmp_path / "jvm")
    assert any(m.endswith(" 0 of them for the Python reader") for m in said), said
    assert "parsing and validating" not in said
    assert slow.stats["rows_merged"].sum() >= 2 and slow.bundle_rows > 0


def test_a_line_for_the_python_reader_with_no_valid_time(spark: SparkSession, tmp_path: Path) -> None:
    """A line the JVM path leaves to the Python reader whose time is no time (-5 ms: no group hour) is
    quarantined as invalid_timestamp and the other lines are kept; it failed the whole ingest (a
    TypeError on the group of the line, None, with a traceback and nothing written)."""

    records = _recording(tmp_path)[:6]
    odd = {"timestamp": -5, "broker": records[0]["broker"], "cluster": "c9", "report": {}}
    lines = [json.dumps(r) for r in records] + [json.dumps(odd)]
    (tmp_path / "rec.jsonl").write_text("\n".join(lines) + "\n")
    sources = [str(tmp_path / "rec.jsonl")]
    slow, fast, a, b = _both(spark, sources, tmp_path, default_cluster="c9")
    _assert_same(slow, fast, a, b)
    assert fast.reasons.set_index("reason")["count"].to_dict() == {"invalid_timestamp": 1}
    assert fast.broker_rows == len(records)


def test_line_numbers_are_the_same_with_a_join(spark: SparkSession, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond a few hundred splits the line numbers' bases are joined instead of a literal map: the same."""
    import shedlab.spark.ingest as spark_ingest
    from shedlab.core.ingest import classify_sources

    sources = classify_sources([str(FIXTURES)])

    def numbers() -> pd.DataFrame:
        lines, _docs = spark_ingest._text_frames(spark, sources)
        assert lines is not None
        frame = lines.select("source", "line", "value").toPandas()
        return frame.sort_values(["source", "line"]).reset_index(drop=True)

    literal = numbers()
    monkeypatch.setattr(spark_ingest, "_LITERAL_SPLITS", 0)
    joined = numbers()
    pd.testing.assert_frame_equal(literal, joined)
    for _source, group in literal.groupby("source"):
        assert list(group["line"]) == list(range(1, len(group) + 1))


def test_the_field_rules_match_check_for_every_sibling_rule(spark: SparkSession) -> None:
    """``_field_ok`` is :func:`shedlab.model.formats.check` as a Spark condition, the sibling rules included:
    a value below its minimum passes where ``minimum_if_positive``'s sibling is ≤ 0 or ``minimum_unless``'s
    sibling is exempt, and nowhere else (the verdicts compared row by row)."""
    from pyspark.sql import functions as sf

    from shedlab.model.formats import REQUIRED, Field, FormatError, check
    from shedlab.spark.ingest_fast import _field_ok

    fields = (
        Field("v", "v", "number", REQUIRED, "", minimum_if_positive="limit"),
        Field("v", "v", "number", REQUIRED, "", minimum_unless=("metric", frozenset({"signed"}))),
    )
    rows = [
        (v, limit, metric)
        for v in (-1.0, 0.0, 2.0)
        for limit in (-1.0, 0.0, 5.0)
        for metric in ("signed", "x")
    ]
    frame = spark.createDataFrame(rows, "v double, limit double, metric string")
    obj = sf.struct("v", "limit", "metric")
    for f in fields:
        got = [bool(r[0]) for r in frame.select(_field_ok(f, obj["v"], obj)).collect()]
        expected = []
        for v, limit, metric in rows:
            try:
                check(f, v, {"limit": limit, "metric": metric})
                expected.append(True)
            except FormatError:
                expected.append(False)
        assert got == expected, f
        assert not all(got)  # the minimum still refuses somewhere
