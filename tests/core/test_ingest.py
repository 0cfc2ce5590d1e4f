"""Ingest's rules without Spark (parsing, validation, deduplication); agreement with decide's reader."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import hypothesis
import pandas as pd
import pytest
from hypothesis import strategies as st

from shedlab.core.ingest import (
    RAW_COLUMNS,
    REASONS,
    STAGED_COLUMNS,
    broker_id_from_url,
    check_ingest_output,
    choose_cluster,
    classify_sources,
    cluster_problem,
    parse_text_batch,
    process_group,
    recorded_clusters,
    recorded_span,
    validate_rows,
)
from shedlab.errors import InputError
from shedlab.model.formats import RESOURCES
from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import BundleData, LocalBrokerData, is_named_entity

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"
REPORTS = str(FIXTURES / "load_reports.jsonl")
FILE_TIME = 1_735_689_600_000


def _parse(lines: list[str], cluster: str = "c0", file_time_ms: int | None = None) -> pd.DataFrame:
    n = len(lines)
    batch = pd.DataFrame(
        {
            "source": ["f.jsonl"] * n,
            "source_kind": ["json_lines"] * n,
            "block": [0] * n,
            "value": lines,
            "file_time_ms": [file_time_ms] * n,
        }
    )
    return parse_text_batch(batch, default_cluster=cluster, web_port=8080)


def _process(lines: list[str], cluster: str = "c0", file_time_ms: int | None = None) -> pd.DataFrame:
    rows = _parse(lines, cluster, file_time_ms)
    rows["tick_ms"] = (rows["time_ms"] // 60_000) * 60_000
    return process_group(rows)


# ------------------------------------------------------------------ parsing


def test_broker_id_from_url() -> None:
    assert broker_id_from_url("http://b1:8080") == "b1:8080"
    assert broker_id_from_url("https://b1") == "b1:443"
    assert broker_id_from_url("b2:8081") == "b2:8081"
    assert broker_id_from_url(None) is None


def test_parser_emits_the_raw_columns_in_order() -> None:
    rows = _parse(Path(REPORTS).read_text().splitlines()[:2])
    assert list(rows.columns) == [name for name, _ in RAW_COLUMNS]
    assert str(rows["time_ms"].dtype) == "Int64" and str(rows["num_bundles"].dtype) == "Int32"
    assert [name for name, _ in STAGED_COLUMNS][-2:] == ["tick_ms", "status"]


def test_parser_accepts_wrapped_and_bare_reports() -> None:
    lines = Path(REPORTS).read_text().splitlines()
    bare_line = next(line for line in lines if line.startswith('{"webServiceUrl": "http://b4:8080"'))
    rows = _parse([lines[0], bare_line])  # a wrapped report; the bare LocalBrokerData of b4
    brokers = rows[rows["kind"] == "broker"]
    assert list(brokers["broker"]) == ["b1:8080", "b4:8080"]
    assert list(brokers["cluster"]) == ["c1", "c0"]  # bare reports take the default cluster
    bare = json.loads(bare_line)
    assert brokers.iloc[1]["time_ms"] == bare["lastUpdate"]
    assert (rows["kind"] == "bundle").sum() == 3 + 1


def test_parser_marks_nonfinite_and_structural_problems() -> None:
    rows = _parse(
        ['{"broker": "b:1", "timestamp": 5, "report": {"cpu": {"usage": "NaN", "limit": 1}}}', "{oops"]
    )
    assert rows.loc[rows["kind"] == "broker", "nonfinite"].iloc[0] == "cpu_usage=nan"
    assert rows.loc[rows["kind"] == "quarantine", "reason"].tolist() == ["malformed_json"]


@pytest.mark.parametrize(
    ("wrapper", "detail"),
    [
        ('"broker": 5', "broker: expected a string, got 5"),
        ('"timestamp": "abc"', "timestamp: expected epoch milliseconds, got 'abc'"),
        ('"timestamp": 1e300', "timestamp: epoch milliseconds out of range, got 1e+300"),
        ('"broker": " "', "broker: expected the broker's id, got ' '"),
        ('"broker": ""', "broker: expected the broker's id, got ''"),
        ('"cluster": 5', "cluster: expected a string, got 5"),
        ('"timestamp": 1735689605', "timestamp: expected epoch milliseconds, got 1735689605: epoch seconds"),
        ('"cluster": {"name": "c1"}', "cluster: expected a string, got {'name': 'c1'}"),
    ],
)
def test_a_bad_broker_or_time_in_the_wrapper_is_quarantined_not_replaced(wrapper: str, detail: str) -> None:
    """A wrapper's ``broker`` that is not text was replaced by the report's ``webServiceUrl``'s id, and a
    ``cluster`` that is not text by ``--cluster``; the row is now quarantined with its reason, as
    ``decide`` refuses the line (28 Nov 2026)."""
    line = (
        '{"broker": "b:1", "cluster": "c1", "timestamp": 5, "report": {"webServiceUrl": "http://other:8080"}}'
    )
    key = wrapper.split(":")[0]
    start = line.index(key)
    rows = _parse([line[:start] + wrapper + line[line.index(",", start) :]])
    assert rows["kind"].tolist() == ["quarantine"]
    assert detail in rows["detail"].iloc[0], rows["detail"].iloc[0]


def test_a_key_given_twice_in_one_object_is_quarantined_at_any_depth() -> None:
    """json kept the key's last value, silently, where decide refuses the document (29 Nov 2026)."""
    line = Path(REPORTS).read_text(encoding="utf-8").splitlines()[0]
    bundle = next(iter(json.loads(line)["report"]["lastStats"]))
    twice = {
        "broker": line.replace('{"', '{"broker": "b9:8080", "', 1),
        "msgRateIn": line.replace('"report": {', '"report": {"msgRateIn": 1.0, ', 1),
        "usage": line.replace('"cpu": {', '"cpu": {"usage": 99.0, ', 1),
        bundle: line.replace('"lastStats": {', f'"lastStats": {{"{bundle}": {{}}, ', 1),
    }
    rows = _parse([line, *twice.values()])
    bad = rows[rows["kind"] == "quarantine"]
    assert bad["reason"].tolist() == ["duplicate_key"] * 4 and bad["record"].tolist() == [2, 3, 4, 5]
    assert bad["detail"].tolist() == [f"key {key!r} appears twice in one object" for key in twice]
    assert set(rows.loc[rows["kind"] != "quarantine", "record"]) == {1}
    assert "duplicate_key" in REASONS
    # a .json array: the element that holds it; its neighbours are kept
    doc = pd.DataFrame(
        {
            "source": ["d.json"],
            "source_kind": ["json_doc"],
            "block": [0],
            "value": [f"[{line}, {twice['usage']}]"],
        }
    )
    rows = parse_text_batch(doc, default_cluster="c0", web_port=8080)
    assert rows.loc[rows["kind"] == "quarantine", ["record", "reason"]].values.tolist() == [
        [2, "duplicate_key"]
    ]
    assert set(rows.loc[rows["kind"] != "quarantine", "record"]) == {1}


@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_a_json_document_with_a_byte_order_mark_is_read_as_decide_reads_it(bom: str) -> None:
    """Spark's whole-text reader keeps a UTF-8 BOM: a pretty-printed report saved by Windows PowerShell
    was quarantined line by line as malformed JSON (73 rows, none kept), where decide reads the file."""
    text = bom + (FIXTURES / "load_report_b3.json").read_text(encoding="utf-8")
    batch = pd.DataFrame(
        {
            "source": ["b3.json"],
            "source_kind": ["json_doc"],
            "block": [0],
            "value": [text],
            "file_time_ms": [None],
        }
    )
    rows = parse_text_batch(batch, default_cluster="c0", web_port=8080)
    assert rows["kind"].tolist() == ["broker", "bundle", "bundle"]


@pytest.mark.parametrize(
    ("files", "shown"),
    [
        ({"summary.json": "{}", "load-reports.jsonl": "", "prometheus/x.json": "{}"}, "a simulate output"),
        ({"sweep.json": "{}"}, "a sweep directory"),
        ({"replay.json": "{}"}, "a replay output"),
    ],
)
def test_another_commands_output_is_refused_as_a_source(
    tmp_path: Path, files: dict[str, str], shown: str
) -> None:
    """Taken for a Parquet source, it failed in Spark ('Parquet columns match none of broker_samples…',
    or CONFLICTING_DIRECTORY_STRUCTURES); ``simulate --record``'s recording inside is named."""
    out = tmp_path / "out"
    for name, text in {**files, "part/ticks.parquet": ""}.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    pd.DataFrame({"x": [1]}).to_parquet(out / "part" / "ticks.parquet")
    with pytest.raises(InputError) as caught:
        classify_sources([str(out)])
    assert f"{shown} (" in caught.value.message and "not recorded load data" in caught.value.message
    if "load-reports.jsonl" in files:
        assert f"shedlab ingest {out / 'load-reports.jsonl'} {out / 'prometheus'}" in str(caught.value)


def test_a_bundle_data_dumps_cluster_that_is_not_text_is_quarantined() -> None:
    """It was read as ``--cluster``'s, the dump counted under another cluster."""
    line = json.dumps(
        {"timestamp": 5, "cluster": 7, "bundle": "t/n/0x00000000_0xffffffff", "data": _bundle_data()}
    )
    rows = _parse([line])
    assert rows["kind"].tolist() == ["quarantine"]
    assert rows["detail"].iloc[0] == "cluster: expected a string, got 7"


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("us-west.prod_1", None),
        ("a=b:c", None),
        ("x" * 247, None),
        (":" * 82, None),  # 246 escaped
        ("x" * 248, "248 characters is too long"),
        ("=" * 83, "83 characters is too long"),  # 249 escaped
        ("a/b", "'a/b' is not a Pulsar cluster name"),
        ("café", "not a Pulsar cluster name"),  # Java's \\w is ASCII
        ("a b", "not a Pulsar cluster name"),
        ("é" * 100, "'" + "é" * 40 + "…' is not"),
    ],
)
def test_cluster_names_pulsar_refuses_or_too_long_for_a_directory_are_named(
    name: str, problem: str | None
) -> None:
    found = cluster_problem(name)
    assert found is None if problem is None else (found is not None and problem in found)


def test_records_of_such_a_cluster_are_quarantined_under_unknown_with_their_bundles() -> None:
    """A 300-character cluster name aborted the whole ingest (Spark could not create its partition
    directory, a Java traceback); its records are now quarantined and the other cluster's kept."""
    lines = Path(REPORTS).read_text().splitlines()[:2]
    long_line = json.dumps({**json.loads(lines[0]), "cluster": "x" * 300})
    out = _process([long_line, lines[1]], cluster="c1")
    bad = out[out["reason"] == "invalid_cluster"]
    assert len(bad) >= 2 and set(bad["kind"]) == {"broker", "bundle"}
    assert bad["cluster"].isna().all() and bad["detail"].str.contains("300 characters").all()
    assert (out.loc[out["status"] == "kept", "cluster"] == "c1").all() and (out["status"] == "kept").any()


@hypothesis.given(st.text(max_size=30))
def test_named_entities_are_exactly_pulsars_alphabet(name: str) -> None:
    allowed = set("-=:._0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    assert is_named_entity(name) == set(name).issubset(allowed)


def test_process_group_rules() -> None:
    out = _process(Path(REPORTS).read_text().splitlines(), cluster="c1")
    q = out[out["status"] == "quarantined"]
    # b3's report without cpu (Pulsar's default 0/0) and b1's report whose NIC limit is 0 (0 %) are kept
    assert q["reason"].value_counts().to_dict() == {
        "report_quarantined": 3,
        "double_claim": 2,
        "nan_value": 2,
        "negative_value": 1,
        "legacy_load_report": 1,
        "malformed_json": 1,
    }
    assert (out["status"] == "merged").sum() == 4  # b2's earlier report of tick 2 and its 3 bundles
    assert out["raw"][out["status"] != "quarantined"].isna().all()


@pytest.mark.parametrize("broker", ["", "  "])
def test_a_blank_broker_id_is_invalid_in_any_format(broker: str) -> None:
    """A Parquet row's blank broker (rows that reach validation as parsed, as this one does) was kept as a
    broker named ''; the JSON reader quarantines the same id in a recording's wrapper (until 29 Nov 2026)."""
    rows = _parse([Path(REPORTS).read_text().splitlines()[0]], cluster="c1")
    rows["broker"] = broker
    reason, detail = validate_rows(rows)
    assert set(reason) == {"invalid_value"}
    assert set(detail) == {f"broker: expected the broker's id, got {broker!r}"}


BAD_BUNDLES = {
    "notabundle": "not a bundle name (tenant/namespace/0xLOWER_0xUPPER)",
    "t/ns/0x40000000_0x20000000": "not a bundle range (0xLOWER_0xUPPER, eight hex digits each, LOWER below",
    "t/ns/0x0_0x40000000": "not a bundle range",
    "t//0x00000000_0x40000000": "not a bundle name",
    "": "not a bundle name",
}


def test_a_report_naming_a_bundle_pulsar_cannot_have_has_it_quarantined() -> None:
    """A ``lastStats`` key that is no bundle name (``notabundle``, a range whose lower bound is above its
    upper) was ingested as a bundle, silently, where decide refuses it (until 29 Nov 2026). The report
    and its other bundles are kept, as with a bundle entry of any other fault."""
    report = json.loads(Path(REPORTS).read_text().splitlines()[0])
    stats = report["report"]["lastStats"]
    first = next(iter(stats.values()))
    stats.update({name: first for name in BAD_BUNDLES})
    out = _process([json.dumps(report)], cluster="c1")
    bad = out[out["reason"] == "invalid_bundle"]
    assert sorted(bad["bundle"]) == sorted(BAD_BUNDLES)
    for name, why in BAD_BUNDLES.items():
        assert bad.loc[bad["bundle"] == name, "detail"].item().startswith(f"bundle: {why}")
    assert set(out.loc[out["reason"].isna(), "kind"]) == {"broker", "bundle"}


@pytest.mark.parametrize("name", list(BAD_BUNDLES))
def test_a_bundle_name_pulsar_cannot_have_is_invalid_in_any_format(name: str) -> None:
    """A Parquet row's bundle, or a BundleData dump's, reaches validation as parsed, as this one does."""
    rows = _parse([Path(REPORTS).read_text().splitlines()[0]], cluster="c1")
    rows = rows[rows["kind"] == "bundle"].assign(bundle=name)
    record = json.loads((FIXTURES / "bundle_data.jsonl").read_text().splitlines()[0])
    dump = _parse([json.dumps({**record, "bundle": name})], cluster="c1")
    for frame in (rows, dump) if name else (rows,):  # a dump's '' is no name: missing_field
        reason, detail = validate_rows(frame)
        assert set(reason) == {"invalid_bundle"}, (reason.tolist(), detail.tolist())
        assert detail.str.endswith(f"(got {name!r})").all()


def test_a_source_directory_that_cannot_be_listed_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ingest /`` met /proc/…/net while looking for Parquet: an OSError traceback (28 Nov 2026)."""

    def refused(self: Path, pattern: str) -> Any:
        raise OSError(22, "Invalid argument", "/proc/1/task/1/net")

    monkeypatch.setattr(Path, "rglob", refused)
    with pytest.raises(InputError, match=r"cannot list this directory: \[Errno 22\] Invalid argument"):
        classify_sources([str(tmp_path)])


def test_classify_sources(tmp_path: Path) -> None:
    src = classify_sources([str(FIXTURES)])
    assert sorted(Path(p).name for p in src.json_lines) == ["bundle_data.jsonl", "load_reports.jsonl"]
    assert sorted(Path(p).name for p in src.json_docs) == [
        "load_report_b3.json",
        "prometheus_query_range.json",
    ]
    with pytest.raises(InputError, match="not found"):
        classify_sources([str(tmp_path / "missing")])


def test_an_input_that_is_no_file_is_refused() -> None:
    """Spark reads the inputs in its own process: ingest <(cat rec.jsonl) handed it /dev/fd/63, which is
    not that pipe there, and /dev/null was taken as an empty input (until 29 Nov 2026)."""
    with pytest.raises(
        InputError, match=r"^/dev/null: not a file or a directory \(a pipe, a device\): Spark"
    ):
        classify_sources(["/dev/null"])


def test_an_input_given_twice_is_refused(tmp_path: Path) -> None:
    """It was read twice: every row counted as read twice and merged with itself (until 29 Nov 2026)."""
    reports = FIXTURES / "load_reports.jsonl"
    hint = "; give each input once$"
    with pytest.raises(InputError, match=f"^{reports}: given twice \\(as {reports}\\){hint}"):
        classify_sources([str(reports), str(reports)])
    with pytest.raises(
        InputError, match=f"^{reports}: given twice \\(through {FIXTURES} and {reports}\\){hint}"
    ):
        classify_sources([str(FIXTURES), str(reports)])
    (tmp_path / "link.jsonl").symlink_to(reports)
    with pytest.raises(InputError, match="given twice"):
        classify_sources([str(reports), str(tmp_path / "link.jsonl")])


# ------------------------------------------------------------------ Pulsar's semantics


def _measured() -> dict[str, float]:
    return {"usage": 50.0, "limit": 100.0}


def _report(**changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "webServiceUrl": "http://a:8080",
        "cpu": _measured(),
        "memory": _measured(),
        "directMemory": _measured(),
        "bandwidthIn": _measured(),
        "bandwidthOut": _measured(),
        "msgRateIn": 1.0,
        "msgRateOut": 1.0,
        "msgThroughputIn": 1.0,
        "msgThroughputOut": 1.0,
        "lastUpdate": 60_000,
        "bundles": ["t/n/0x00000000_0xffffffff"],
        "lastStats": {"t/n/0x00000000_0xffffffff": {"msgRateIn": 1.0, "topics": 2}},
    }
    body.update(changes)
    return body


def test_unmeasured_resource_is_kept_but_a_negative_measured_one_is_quarantined() -> None:
    """Pulsar writes ``{"usage": -1, "limit": -1}`` for a resource it could not measure (spec §1.1)."""

    def line(broker: str, direct: dict[str, float]) -> str:
        body = _report(directMemory=direct)
        return json.dumps({"broker": broker, "cluster": "c", "timestamp": 60_000, "report": body})

    out = _process([line("a:1", {"usage": -1.0, "limit": -1.0}), line("b:1", {"usage": -1.0, "limit": 8.0})])
    brokers = out[out["kind"] == "broker"].set_index("broker")
    assert brokers.loc["a:1", "status"] != "quarantined"
    assert brokers.loc["b:1", "reason"] == "negative_value"


def test_nic_without_a_known_speed_is_kept_as_reported() -> None:
    """Kubernetes: Pulsar cannot read the NIC speed and writes limit 0; that resource is 0 % (spec §1.1)."""
    out = _process([json.dumps(_report(bandwidthIn={"usage": 48211.7, "limit": 0.0}))])
    assert set(out["status"]) == {"kept"}
    broker = out[out["kind"] == "broker"].iloc[0]
    assert (broker["bandwidth_in_usage"], broker["bandwidth_in_limit"]) == (48211.7, 0.0)


def test_a_nic_whose_counters_went_back_is_kept_as_reported() -> None:
    """LinuxBrokerHostUsageImpl writes the NIC counters' difference unclamped: negative after a reset."""
    out = _process([json.dumps(_report(bandwidthIn={"usage": -3.5e4, "limit": 1e7}))])
    assert set(out["status"]) == {"kept"}
    broker = out[out["kind"] == "broker"].iloc[0]
    assert (broker["bandwidth_in_usage"], broker["bandwidth_in_limit"]) == (-3.5e4, 1e7)


def test_a_negative_nic_gauge_is_kept_and_a_negative_cpu_gauge_quarantined() -> None:
    """Pulsar exports the report's percentages as gauges: a NIC's may be negative, as in the report."""

    def series(name: str, value: str) -> dict[str, Any]:
        return {
            "metric": {"__name__": name, "cluster": "c0", "broker": "b1:8080"},
            "values": [[1735776000, value]],
        }

    gauges = [series("pulsar_lb_bandwidth_in_usage", "-3.5"), series("pulsar_lb_cpu_usage", "-1")]
    out = _process([json.dumps({"status": "success", "data": {"resultType": "matrix", "result": gauges}})])
    points = out[out["kind"] == "prom"].set_index("metric")
    assert points.loc["pulsar_lb_bandwidth_in_usage", "status"] == "kept"
    assert points.loc["pulsar_lb_cpu_usage", "reason"] == "negative_value"
    broker = out[out["kind"] == "prom_broker"].iloc[0]
    assert (broker["bandwidth_in_usage"], broker["bandwidth_in_limit"]) == (-3.5, 100.0)


def _bundle_data() -> dict[str, Any]:
    average = {"msgRateIn": 1.0, "msgRateOut": 2.0, "msgThroughputIn": 3.0, "msgThroughputOut": 4.0}
    return {
        "shortTermData": {"maxSamples": 10, "numSamples": 3, **average},
        "longTermData": {"numSamples": 3, **average},
        "topics": 2,
    }


def test_bundle_data_without_a_timestamp_takes_its_file_time() -> None:
    """BundleData as stored under ``/loadbalance/bundle-data/…`` has no time of its own."""
    bare = json.dumps({"bundle": "t/n/0x00000000_0xffffffff", **_bundle_data()})
    mapped = json.dumps({"bundleData": {"t/n/0x00000000_0x80000000": _bundle_data()}})
    out = _process([bare, mapped], file_time_ms=FILE_TIME)
    assert list(out["status"]) == ["kept", "kept"]
    assert set(out["time_ms"]) == {FILE_TIME}
    assert list(out["long_max_samples"]) == [1000, 1000]  # Pulsar's default for the long-term window
    without = _process([bare])  # no file time known (and none in the record): nothing to place it at
    assert list(without["reason"]) == ["missing_field"]


# ------------------------------------------------------------------ the same payload, the same verdict


def _decide_reads(report: dict[str, Any]) -> LocalBrokerData | None:
    try:
        return LocalBrokerData.from_json(JsonReader(report, "r.json"))
    except InputError:
        return None


def _ingest_reads(report: dict[str, Any]) -> pd.DataFrame:
    out = _process([json.dumps(report, allow_nan=True)])
    return out


def _variants() -> list[tuple[str, dict[str, Any]]]:
    base = _report()
    out: list[tuple[str, dict[str, Any]]] = [("as Pulsar writes it", base)]

    def variant(name: str, **changes: Any) -> None:
        out.append((name, {**copy.deepcopy(base), **changes}))

    variant("NIC speed unknown", bandwidthIn={"usage": 48211.7, "limit": 0.0})
    variant("not measured", directMemory={"usage": -1.0, "limit": -1.0})
    variant("negative usage of a measured resource", cpu={"usage": -1.0, "limit": 100.0})
    variant("a NIC whose counters went back", bandwidthOut={"usage": -812.5, "limit": 10_000_000.0})
    variant("a resource missing", cpu=None)
    variant("usage missing", cpu={"limit": 100.0})
    variant("rates missing", msgRateIn=None, msgThroughputOut=None)
    variant("a quoted number", msgRateIn="12.5")
    variant("NaN", msgRateIn=float("nan"))
    variant("NaN as Jackson quotes it", msgRateOut="NaN")
    variant("a word for a number", msgRateIn="fast")
    variant("a boolean for a number", msgRateIn=True)
    variant("a negative rate", msgThroughputIn=-1.0)
    variant("a negative count", numTopics=-3)
    variant("a fractional count", numConsumers=1.5)
    variant("an integral float count", numConsumers=2.0)
    # past 2^53 - 1: ingest's pandas stage holds it as a double (2^53 + 1 was written as 2^53, 2^63 - 1 was
    # a traceback); decide refuses it too, as it refuses what ingest quarantines
    variant("a count a double cannot hold", numTopics=2**53 + 1)
    variant("the largest count a double holds", numTopics=2**53 - 1)
    variant(
        "a bundle count a double cannot hold",
        lastStats={"t/n/0x00000000_0xffffffff": {"cacheSize": 2**63 - 1}},
    )
    variant("a string for a boolean", persistentTopicsEnabled="yes")
    variant("a number for a string", brokerVersionString=3)
    variant("a bad start time", startTimestamp="soon")
    variant("bundles not a list", bundles="a,b")
    variant("protocols not an object", protocols=[1])
    variant("a negative bundle rate", lastStats={"t/n/0x00000000_0xffffffff": {"msgRateIn": -1.0}})
    variant("a bundle entry not an object", lastStats={"t/n/0x00000000_0xffffffff": 3})
    variant("unknown fields", somethingNew={"x": 1}, maxResourceUsage=0.5)
    return out


_RESOURCE_VALUES = st.sampled_from([-1e6, -812.5, -1.0, -0.0, 0.0, 1.0, 50.0, 1e7])


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(
    resource=st.sampled_from([r.json for r in RESOURCES]), usage=_RESOURCE_VALUES, limit=_RESOURCE_VALUES
)
def test_decide_and_ingest_agree_on_any_resource_reading(resource: str, usage: float, limit: float) -> None:
    """Each resource's rule (formats.Resource.fields) holds in both readers: they accept and refuse the
    same {usage, limit} (a NIC's usage may be negative, a CPU's or memory's not where the limit is > 0)
    and read the same numbers."""
    report = _report(**{resource: {"usage": usage, "limit": limit}})
    model = _decide_reads(report)
    out = _ingest_reads(report)
    assert (model is not None) == (out["status"] != "quarantined").all()
    refused = usage < 0 and limit > 0 and resource not in ("bandwidthIn", "bandwidthOut")
    assert (model is None) == refused
    if model is not None:
        prefix = next(r.prefix for r in RESOURCES if r.json == resource)
        broker = out[out["kind"] == "broker"].iloc[0]
        read = model.resource(resource)
        assert (broker[f"{prefix}_usage"], broker[f"{prefix}_limit"]) == (read.usage, read.limit)


@pytest.mark.parametrize(("name", "report"), _variants(), ids=[n for n, _ in _variants()])
def test_decide_and_ingest_agree_on_a_load_report(name: str, report: dict[str, Any]) -> None:
    """decide accepts a report exactly when ingest keeps all its rows, and both read the same values."""
    model = _decide_reads(report)
    out = _ingest_reads(report)
    quarantined = out[out["status"] == "quarantined"]
    assert (model is not None) == quarantined.empty, (
        name,
        quarantined[["reason", "detail"]].to_dict("records"),
    )
    if model is None:
        return
    broker = out[out["kind"] == "broker"].iloc[0]
    for resource, prefix in (
        ("cpu", "cpu"),
        ("directMemory", "direct_memory"),
        ("bandwidthIn", "bandwidth_in"),
    ):
        usage = model.resource(resource)
        assert (broker[f"{prefix}_usage"], broker[f"{prefix}_limit"]) == (usage.usage, usage.limit)
    assert broker["msg_rate_in"] == model.msgRateIn and broker["msg_rate_out"] == model.msgRateOut
    assert broker["msg_throughput_out"] == model.msgThroughputOut
    assert broker["num_topics"] == model.numTopics and broker["num_bundles"] == model.numBundles
    assert broker["num_consumers"] == model.numConsumers
    bundle = out[out["kind"] == "bundle"].iloc[0]
    stats = model.lastStats[bundle["bundle"]]
    assert (bundle["msg_rate_in"], bundle["topics"], bundle["cache_size"]) == (
        stats.msgRateIn,
        stats.topics,
        stats.cacheSize,
    )


def _bundle_variants() -> list[tuple[str, dict[str, Any]]]:
    base = _bundle_data()
    out: list[tuple[str, dict[str, Any]]] = [("as Pulsar stores it", base)]

    def variant(name: str, part: str | None, **changes: Any) -> None:
        data = copy.deepcopy(base)
        if part is None:
            data.update(changes)
        else:
            data[part].update(changes)
        out.append((name, data))

    variant("no long-term window size", "longTermData", maxSamples=None)
    variant("a negative average", "shortTermData", msgRateIn=-1.0)
    variant("an average missing", "longTermData", msgThroughputIn=None)
    variant("a quoted average", "shortTermData", msgRateOut="2.5")
    variant("short-term data missing", None, shortTermData=None)
    variant("negative topics", None, topics=-1)
    return out


@pytest.mark.parametrize(("name", "data"), _bundle_variants(), ids=[n for n, _ in _bundle_variants()])
def test_decide_and_ingest_agree_on_bundle_data(name: str, data: dict[str, Any]) -> None:
    try:
        model: BundleData | None = BundleData.from_json(JsonReader(data, "b.json"))
    except InputError:
        model = None
    out = _process([json.dumps({"bundle": "t/n/0x00000000_0xffffffff", **data})], file_time_ms=FILE_TIME)
    assert (model is not None) == (out["status"] == "kept").all(), (name, out["detail"].tolist())
    if model is None:
        return
    row = out.iloc[0]
    for prefix, average in (("short", model.shortTermData), ("long", model.longTermData)):
        assert row[f"{prefix}_max_samples"] == average.maxSamples
        assert row[f"{prefix}_num_samples"] == average.numSamples
        assert row[f"{prefix}_msg_rate_out"] == average.msgRateOut
        assert row[f"{prefix}_msg_throughput_in"] == average.msgThroughputIn
    assert row["topics"] == model.topics


# ------------------------------------------------------------------ faults: bytes unlike their names


def _gzip(text: str) -> bytes:
    import gzip

    return gzip.compress(text.encode())


BINARY_CASES = [
    ("reports.json", lambda: _gzip('{"a": 1}\n'), "gzip data"),
    ("reports.jsonl", lambda: _gzip('{"a": 1}\n'), "gzip data"),
    ("reports.json", lambda: b"PAR1" + b"\x00" * 40 + b"PAR1", "Parquet data"),
    ("reports.jsonl", lambda: b'{"a":\x00\x01\x02 1}\n', "binary data"),
    ("reports.json.gz", lambda: b'{"a": 1}\n', "not gzip data"),
    ("reports.jsonl.bz2", lambda: _gzip("{}"), "not bzip2 data"),
    ("samples.parquet", lambda: _gzip("{}"), "not a Parquet file"),
    ("samples.parquet", lambda: b"PAR1" + b"\x00" * 100, "truncated Parquet"),
    ("samples.parquet", lambda: b"", "not a Parquet file"),
]


@pytest.mark.parametrize(("name", "content", "message"), BINARY_CASES)
def test_binary_data_under_a_text_or_parquet_name_is_one_line(
    tmp_path: Path, name: str, content: Any, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content())
    for given in (str(path), str(tmp_path)):  # the file itself, or a directory holding it
        with pytest.raises(InputError, match=message) as info:
            classify_sources([given])
        assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_compressed_files_named_as_such_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl.gz").write_bytes(_gzip('{"a": 1}\n'))
    (tmp_path / "b.json").write_text('{"a": 1}\n')
    sources = classify_sources([str(tmp_path)])
    assert len(sources.json_lines) == 1 and len(sources.json_docs) == 1


def test_a_line_that_is_not_utf8_is_quarantined_and_the_rest_kept() -> None:
    lines = Path(REPORTS).read_text(encoding="utf-8").splitlines()[:3]
    batch = pd.DataFrame(
        {
            "source": ["f.jsonl"] * 3,
            "source_kind": ["json_lines"] * 3,
            "block": [0] * 3,
            "value": [lines[0], lines[1][:40] + "\ufffd", lines[2]],
            "utf8_ok": [True, False, True],
        }
    )
    rows = parse_text_batch(batch, default_cluster="c", web_port=8080)
    bad = rows[rows["kind"] == "quarantine"]
    assert list(bad["reason"]) == ["invalid_utf8"] and list(bad["record"]) == [2]
    assert set(rows.loc[rows["kind"] != "quarantine", "record"]) == {1, 3}
    assert "invalid_utf8" in REASONS
    doc = batch.assign(source_kind="json_doc").iloc[[1]]
    rows = parse_text_batch(doc, default_cluster="c", web_port=8080)
    assert list(rows["reason"]) == ["invalid_utf8"]


def test_replay_input_is_checked_before_spark(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not found"):
        check_ingest_output(str(tmp_path / "absent"))
    with pytest.raises(InputError, match="broker_samples/ is missing"):
        check_ingest_output(str(tmp_path))
    (tmp_path / "broker_samples" / "cluster=c").mkdir(parents=True)
    (tmp_path / "bundle_samples").mkdir()
    check_ingest_output(str(tmp_path))
    (tmp_path / "broker_samples" / "cluster=c" / "part-0.parquet").write_bytes(_gzip("x"))
    with pytest.raises(InputError, match=r"part-0\.parquet: not a Parquet file"):
        check_ingest_output(str(tmp_path))
    (tmp_path / "afile").write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        check_ingest_output(str(tmp_path / "afile"))


def _samples(path: Path, **columns: list[object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"time_ms": [1], "broker": ["b:8080"], **columns}).to_parquet(path, index=False)


def test_the_clusters_of_an_ingest_output_are_read_without_spark(tmp_path: Path) -> None:
    """twin and replay refuse a ``--cluster`` the output lacks before Spark starts: the clusters come
    from ingest's ``cluster=NAME`` directories (unescaped as Spark escapes them), else a file's column."""
    root = tmp_path / "broker_samples"
    _samples(root / "cluster=eu%3Awest" / "day=2025-01-02" / "part-0.parquet")
    _samples(root / "cluster=prod" / "day=2025-01-02" / "part-0.parquet")
    _samples(root / "flat.parquet", cluster=["us"])
    _samples(root / "_temporary" / "cluster=half-written" / "part-0.parquet")
    assert recorded_clusters(str(tmp_path)) == ["eu:west", "prod", "us"]
    other = tmp_path / "other"
    _samples(
        other / "broker_samples" / "cluster=prod" / "day=2025-01-03" / "part-0.parquet", tick_ms=[180_000]
    )
    _samples(other / "broker_samples" / "cluster=eu" / "day=2025-01-03" / "part-0.parquet", tick_ms=[9])
    _samples(other / "broker_samples" / "cluster=prod" / "day=2025-01-02" / "part-0.parquet")
    assert recorded_span(str(other), "prod") is None  # a file without tick_ms: Spark's read decides
    _samples(other / "broker_samples" / "cluster=prod" / "day=2025-01-02" / "part-0.parquet", tick_ms=[0])
    assert recorded_span(str(other), "prod") == (0, 180_000)  # from the footers' statistics
    with pytest.raises(InputError, match=r"\(got 'eu:wst'\); did you mean 'eu:west'\? its clusters: eu:west"):
        choose_cluster(["eu:west", "prod", "us"], "eu:wst", source=str(tmp_path))
    with pytest.raises(InputError, match="several clusters: choose one; eu:west, prod, us"):
        choose_cluster(["eu:west", "prod", "us"], None)
    assert choose_cluster(["prod"], None) == "prod"
    _samples(root / "no-cluster.parquet")  # Spark reads a null cluster: it decides, not this check
    assert recorded_clusters(str(tmp_path)) is None
    assert recorded_clusters("s3a://bucket/snap") is None


def test_a_parquet_file_is_decoded_once_while_it_is_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """twin and replay check their input before Spark starts, and the reader checks it again: every row
    group of the recording was decoded twice. An unchanged file is decoded once; a rewritten one again."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from shedlab.core.ingest import check_parquet_file

    path = tmp_path / "part-0.parquet"
    _samples(path, cluster=["c"])
    check_parquet_file(path)
    with monkeypatch.context() as patch:
        patch.setattr(pq, "ParquetFile", lambda *a: pytest.fail("decoded again"))
        check_parquet_file(path)
    data = path.read_bytes()
    path.write_bytes(data[:4] + b"\xff" * 20 + data[24:] + b"PAR1")  # damaged inside, another size
    with pytest.raises(InputError, match="damaged Parquet file"):
        check_parquet_file(path)


@pytest.mark.parametrize("last_update", [0, -1])
def test_a_reports_time_at_or_before_1970_is_quarantined_beside_a_good_timestamp(last_update: int) -> None:
    """A line's time at or before 1970 was quarantined, but a report's own ``lastUpdate`` of 0 beside a
    good wrapper timestamp was kept (``last_update_ms`` 0), as ``decide`` took a timestamp of 0: one rule
    now (formats.epoch_ms), as for a ``lastUpdate`` past year 9999."""
    line = json.dumps(
        {"broker": "a:1", "cluster": "c", "timestamp": 60_000, "report": _report(lastUpdate=last_update)}
    )
    rows = _parse([line])
    assert rows["kind"].tolist() == ["quarantine"] and rows["reason"].tolist() == ["invalid_timestamp"]
    assert "report.lastUpdate: expected epoch milliseconds after 1970" in rows["detail"].iloc[0]
