"""Real shapes of Pulsar's data in ingest: the extensible manager's documents, BundleData named by its
znode, Prometheus topic-level series placed in bundles, and ``exported_*`` label renames."""

from __future__ import annotations

import json
import os
import threading
import zlib
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from shedlab.core.ingest import REASONS, parse_text_batch, process_group
from shedlab.errors import InputError
from shedlab.model.bundles import read_bundle_boundaries

T0 = 1_735_776_000  # seconds


def _rows(values: list[str], kind: str = "json_lines", source: str = "f.jsonl", **kw: Any) -> pd.DataFrame:
    n = len(values)
    batch = pd.DataFrame(
        {
            "source": [source] * n,
            "source_kind": [kind] * n,
            "block": [0] * n,
            "value": values,
            "file_time_ms": [T0 * 1000] * n,
        }
    )
    rows = parse_text_batch(batch, default_cluster="c0", web_port=8080, **kw)
    rows["tick_ms"] = (rows["time_ms"] // 60_000) * 60_000
    return process_group(rows)


_AVERAGE = {"msgRateIn": 1.0, "msgRateOut": 2.0, "msgThroughputIn": 3.0, "msgThroughputOut": 4.0}
_RESOURCE = {"usage": 10.0, "limit": 100.0}
BROKER_LOAD_DATA = {
    "cpu": _RESOURCE,
    "memory": _RESOURCE,
    "directMemory": _RESOURCE,
    "bandwidthIn": _RESOURCE,
    "bandwidthOut": _RESOURCE,
    "msgThroughputIn": 1.0,
    "msgThroughputOut": 1.0,
    "msgRateIn": 1.0,
    "msgRateOut": 1.0,
    "bundleCount": 3,
    "topics": 4,
    "maxResourceUsage": 0.1,
    "weightedMaxEMA": 0.1,
    "msgThroughputEMA": 2.0,
    "updatedAt": 1735776000000,
    "reportedAt": 1735776000000,
}
LOOKUP = {
    "webServiceUrl": "http://b1:8080",
    "pulsarServiceUrl": "pulsar://b1:6650",
    "persistentTopicsEnabled": True,
    "nonPersistentTopicsEnabled": True,
    "brokerVersion": "3.3.0",
    "startTimestamp": 1,
    "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
}
TOP_BUNDLES = {"topBundlesLoadData": [{"bundleName": "t/n/0x00000000_0xffffffff", "stats": _AVERAGE}]}


@pytest.mark.parametrize(
    ("doc", "name"),
    [
        (BROKER_LOAD_DATA, "BrokerLoadData"),
        ({"timestamp": 1735776000000, "broker": "b1:8080", "report": BROKER_LOAD_DATA}, "BrokerLoadData"),
        (LOOKUP, "BrokerLookupData"),
        (TOP_BUNDLES, "TopBundlesLoadData"),
    ],
)
def test_the_extensible_managers_data_is_named_as_such(doc: dict[str, Any], name: str) -> None:
    out = _rows([json.dumps(doc)])
    assert list(out["status"]) == ["quarantined"]
    assert list(out["reason"]) == ["extensible_load_data"]
    assert name in out["detail"].iloc[0] and "timestamp" not in out["detail"].iloc[0]
    assert "extensible_load_data" in REASONS


def test_bare_bundle_data_takes_the_bundle_its_file_is_named_after() -> None:
    bare = {"shortTermData": _AVERAGE, "longTermData": _AVERAGE, "topics": 2}
    path = "/dump/loadbalance/bundle-data/public/default/0x40000000_0x80000000.json"
    out = _rows([json.dumps(bare)], kind="json_doc", source=path)
    assert list(out["status"]) == ["kept"]
    assert list(out["bundle"]) == ["public/default/0x40000000_0x80000000"]
    other = _rows([json.dumps(bare)], kind="json_doc", source="/dump/bundle.json")  # no name: refused
    assert list(other["reason"]) == ["missing_field"] and "bundle" in other["detail"].iloc[0]
    wrapped = {
        "timestamp": T0 * 1000,
        "path": "/loadbalance/bundle-data/t/n/0x00000000_0xffffffff",
        "data": bare,
    }
    assert list(_rows([json.dumps(wrapped)])["bundle"]) == ["t/n/0x00000000_0xffffffff"]


def _series(name: str, value: float, **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": name, **labels}, "values": [[T0, str(value)], [T0 + 60, str(value + 1)]]}


def _prom(*series: dict[str, Any]) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": list(series)}})


QUARTERS = {"public/default": [0, 0x40000000, 0x80000000, 0xC0000000, 0xFFFFFFFF]}


def _quarter(topic: str) -> str:
    """The bundle of ``topic`` among four even bundles, computed here from the CRC-32 directly."""
    h = zlib.crc32(topic.encode())
    lo = [b for b in QUARTERS["public/default"][:-1] if b <= h][-1]
    hi = QUARTERS["public/default"][QUARTERS["public/default"].index(lo) + 1]
    return f"public/default/0x{lo:08x}_0x{hi:08x}"


def _topic_doc(**extra: str) -> str:
    base = {"cluster": "c2", "namespace": "public/default", "instance": "b1:8080", **extra}
    topics = [f"persistent://public/default/t{i}" for i in range(12)]
    series = [
        _series(m, 10.0 * (i + 1), topic=t, **base)
        for i, t in enumerate(topics)
        for m in ("pulsar_rate_in", "pulsar_throughput_out", "pulsar_consumers_count")
    ]
    series.append(
        _series("pulsar_topics_count", 12, cluster="c2", namespace="public/default", instance="b1:8080")
    )
    series.append(
        _series(
            "pulsar_lb_cpu_usage", 50, cluster="c2", broker="b1", instance="b1:8080", metric="loadBalancing"
        )
    )
    return _prom(*series)


def test_topic_series_are_summed_into_the_bundles_pulsar_hashes_them_to() -> None:
    out = _rows([_topic_doc()], kind="json_doc", source="prom.json", boundaries=QUARTERS)
    bundles = out[out["kind"] == "prom_bundle"]
    topics = [f"persistent://public/default/t{i}" for i in range(12)]
    expected: dict[str, list[float]] = {}
    for i, t in enumerate(topics):
        expected.setdefault(_quarter(t), []).append(10.0 * (i + 1))
    first = bundles[bundles["tick_ms"] == T0 * 1000].set_index("bundle")
    assert set(first.index) == set(expected)
    for bundle, rates in expected.items():
        assert first.loc[bundle, "msg_rate_in"] == pytest.approx(sum(rates))
        assert first.loc[bundle, "msg_throughput_out"] == pytest.approx(sum(rates))
        assert first.loc[bundle, "consumer_count"] == pytest.approx(sum(rates))
        assert first.loc[bundle, "topics"] == len(rates)
        assert first.loc[bundle, "broker"] == "b1:8080"
    broker = out[(out["kind"] == "prom_broker") & (out["tick_ms"] == T0 * 1000)].iloc[0]
    assert broker["msg_rate_in"] == pytest.approx(sum(10.0 * (i + 1) for i in range(12)))
    assert broker["num_bundles"] == len(expected)
    totals = out[out["detail"].fillna("").str.startswith("pulsar_topics_count")]
    assert len(totals) == 2 and set(totals["reason"]) == {"aggregate_series"}


def test_topic_series_without_boundaries_are_refused_with_the_reason() -> None:
    out = _rows([_topic_doc()], kind="json_doc", source="prom.json")
    topic_rows = out[out["reason"] == "no_bundle_boundaries"]
    assert len(topic_rows) == 12 * 3 * 2 and set(out.loc[out["kind"] == "prom", "status"]) == {"kept"}
    assert "public/default" in topic_rows["detail"].iloc[0] and "--bundles" in topic_rows["detail"].iloc[0]


def test_exported_labels_are_pulsars_and_the_renames_are_counted() -> None:
    doc = _prom(
        _series(
            "pulsar_lb_cpu_usage",
            50,
            cluster="k8s-prod",
            exported_cluster="c2",
            broker="b1",
            instance="b1:8080",
            metric="loadBalancing",
        ),
        _series(
            "pulsar_rate_in",
            5,
            cluster="k8s-prod",
            exported_cluster="c2",
            namespace="pulsar",
            exported_namespace="public/default",
            topic="persistent://public/default/x",
            instance="b1:8080",
        ),
    )
    out = _rows([doc], kind="json_doc", source="prom.json", boundaries=QUARTERS)
    assert set(out["cluster"].dropna()) == {"c2"}  # never the phantom cluster k8s-prod
    points = out[out["kind"] == "prom"]
    assert list(points["relabelled"]) == ["cluster"] * 2 + ["cluster,namespace"] * 2
    assert set(points["status"]) == {"kept"}


def test_bundle_boundaries_files(tmp_path: Path) -> None:
    bounds = {"boundaries": ["0x00000000", "0x80000000", "0xffffffff"], "numBundles": 2}
    (tmp_path / "map.json").write_text(json.dumps({"public/default": bounds}))
    assert read_bundle_boundaries([tmp_path / "map.json"]) == {"public/default": [0, 0x80000000, 0xFFFFFFFF]}
    tree = tmp_path / "tree" / "public"
    tree.mkdir(parents=True)
    (tree / "default.json").write_text(json.dumps(bounds))
    assert read_bundle_boundaries([tmp_path / "tree"]) == {"public/default": [0, 0x80000000, 0xFFFFFFFF]}
    bad = [
        ({"public/default": {**bounds, "numBundles": 3}}, "numBundles"),
        (
            {"public/default": {"boundaries": ["0x00000000", "0x90000000", "0x80000000", "0xffffffff"]}},
            "boundaries[2]",
        ),
        ({"public/default": {"boundaries": ["0x00000001", "0xffffffff"]}}, "boundaries"),
        ({"public/default": {"boundaries": ["0", "0xffffffff"]}}, "boundaries[0]"),
        ({"nonamespace": bounds}, "nonamespace"),
        (bounds, "name the file"),
    ]
    for i, (doc, where) in enumerate(bad):
        path = tmp_path / f"bad{i}.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(InputError) as err:
            read_bundle_boundaries([path])
        assert where in str(err.value) and str(path) in str(err.value)
    with pytest.raises(InputError, match="twice"):
        read_bundle_boundaries([tmp_path / "map.json", tmp_path / "tree"])


def test_bundle_boundaries_from_a_pipe(tmp_path: Path) -> None:
    """``--bundles <(curl …/bundles)`` is read once, as a file is: it was 'not found' (until 29 Nov 2026)."""
    pipe = tmp_path / "bundles.json"
    os.mkfifo(pipe)
    doc = {"public/default": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1}}

    def write() -> None:
        with pipe.open("w", encoding="utf-8") as out:  # blocks until the reader opens it
            out.write(json.dumps(doc))

    threading.Thread(target=write, daemon=True).start()
    assert read_bundle_boundaries([pipe]) == {"public/default": [0, 0xFFFFFFFF]}
