"""Every bad input to a command gets one clear line on stderr, exit status 2, no traceback, no hang.

A table of bad inputs, grouped by class, each run through the real command line in a subprocess (with a
timeout). A case passes when the command exits 2, stderr is one line naming the file, field or value,
and there is no Python traceback and no Java stack. The ``sweep`` cases use grids that fail when they are
loaded, with ``JAVA_HOME`` pointing nowhere: had Spark started first, its error would not name the grid.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from shedlab.report.load import REPLAY_COLUMNS_READ

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = (ROOT / "examples" / "snapshot.json").read_text(encoding="utf-8")
# a hang is caught all the same; a Spark command starts a JVM, which took over 30 s on a loaded machine
TIMEOUT_S = 60

SCENARIO = """\
name: small
duration: 10m
brokers:
  - count: 3
workloads:
  - name: w
    bundles: 4
"""
TRANSFER = "TransferShedder+ExtensibleLeastResourceUsageWithWeight"
TOP_K = "loadBalancerMaxNumberOfBundlesInBundleLoadReport"
GRID = "name: g\nscenarios: [{scenario}]\nstrategies: [AvgShedder]\nseeds: [1]\n"


@dataclass(frozen=True)
class Case:
    """A command line (``{dir}`` is the case's folder), the files it needs, and what stderr must name."""

    id: str
    args: tuple[str, ...]
    names: str
    files: Mapping[str, bytes] = field(default_factory=dict)


def scenario(extra: str = "", *, brokers: str = "  - count: 3\n", duration: str = "10m") -> bytes:
    text = f"name: small\nduration: {duration}\nbrokers:\n{brokers}workloads:\n  - name: w\n    bundles: 4\n"
    return (text + extra).encode()


def event(body: str) -> bytes:
    return scenario("events:\n  - " + body + "\n")


def snapshot(mutate: str, value: str) -> bytes:
    """The example snapshot with the text ``mutate`` replaced by ``value``."""
    assert mutate in SNAPSHOT
    return SNAPSHOT.replace(mutate, value, 1).encode()


GZIP = gzip.compress(SNAPSHOT.encode())
ZIP = b"PK\x03\x04\x14\x00\x00\x00" + b"\x00" * 20
PARQUET = b"PAR1\x15\x04\x15" + b"\x00" * 20 + b"PAR1"


def case(change: Callable[[dict[str, Any]], object]) -> bytes:
    """The shipped case avg-3-brokers-pairs.json, changed by ``change`` (its ``expected`` left out)."""
    raw = json.loads((ROOT / "conformance" / "AvgShedder" / "avg-3-brokers-pairs.json").read_text("utf-8"))
    raw.pop("expected")
    change(raw)
    return json.dumps(raw).encode()


HUGE = "1" + "0" * 400
LONG = "x" * 10_000
MAX_LINE = 2_000
"""Characters of an error line at most: each value it echoes is cut to ``MAX_SHOWN_VALUE``."""


def _decide(name: str, data: bytes, names: str | None = None, *extra: str) -> Case:
    return Case(
        f"decide-{name}", ("decide", "{dir}/snap.json", *extra), names or "snap.json", {"snap.json": data}
    )


def _config(name: str, file: str, data: bytes, names: str | None = None) -> Case:
    return Case(
        f"config-{name}", ("config", "show", "--config", f"{{dir}}/{file}"), names or file, {file: data}
    )


def _simulate(name: str, data: bytes, names: str | None = None, *extra: str) -> Case:
    return Case(f"simulate-{name}", ("simulate", "{dir}/s.yaml", *extra), names or "s.yaml", {"s.yaml": data})


def _compare(name: str, data: bytes, names: str | None = None) -> Case:
    args = ("compare", "{dir}/s.yaml", "--strategies", "AvgShedder")
    return Case(f"compare-{name}", args, names or "s.yaml", {"s.yaml": data})


def _sweep(
    name: str, data: bytes, names: str | None = None, files: Mapping[str, bytes] | None = None
) -> Case:
    args = ("sweep", "{dir}/g.yaml", "--out", "{dir}/out")
    return Case(f"sweep-{name}", args, names or "g.yaml", {"g.yaml": data, **(files or {})})


EXTENSIBLE = b'{"cpu": {"usage": 1, "limit": 4}, "weightedMaxEMA": 0.3, "updatedAt": 1735776000000}'


def _ingest_bundles(name: str, data: bytes, names: str) -> Case:
    args = ("ingest", "{dir}/r.jsonl", "--out", "{dir}/out", "--bundles", "{dir}/b.json")
    return Case(f"ingest-bundles-{name}", args, names, {"b.json": data, "r.jsonl": b"{}\n"})


def _parquet(**columns: list[object]) -> bytes:
    out = io.BytesIO()
    pd.DataFrame(columns).to_parquet(out, index=False)
    return out.getvalue()


_COMPARISON_COLUMNS: dict[str, list[object]] = {name: [0] for name in REPLAY_COLUMNS_READ["comparison"]}
SUMMARY = b'{"scenario": "small", "strategy": "AvgShedder", "seed": 1, "unloads": 0}'
SIMULATION = {
    "sim/summary.json": SUMMARY,
    "sim/ticks.parquet": _parquet(time_s=[0.0], score_spread=[1.0]),
    "sim/brokers.parquet": _parquet(time_s=[0.0], broker=["b1"], score=[1.0]),
    "sim/decisions.parquet": _parquet(time_s=[0.0], source=["b1"], destination=["b2"], bundle=["t/n/0_1"]),
    "sim/events.parquet": _parquet(time_s=[0.0], kind=["start"], detail=[""]),
}


def _damaged(data: bytes) -> bytes:
    """Parquet overwritten inside (the first page header): both magic numbers intact."""
    return data[:4] + b"\xff" * 20 + data[24:]


SAMPLES = _parquet(cluster=["c"], time_ms=[1735776000000], broker=["b1:8080"], bundle=["t/n/0x0_0x1"])
INGESTED = {
    "snap/broker_samples/cluster=c/day=2025-01-02/part-0.parquet": SAMPLES,
    "snap/bundle_samples/cluster=c/day=2025-01-02/part-0.parquet": _damaged(SAMPLES),
}

EU_SAMPLES = _parquet(
    tick_ms=[1735776000000], time_ms=[1735776000000], broker=["b1:8080"], bundle=["t/n/0x0_0x1"]
)
EU_INGESTED = {
    f"snap/{table}/cluster=prod-eu/day=2025-01-02/part-0.parquet": EU_SAMPLES
    for table in ("broker_samples", "bundle_samples")
}
"""A whole ingest output of one cluster, ``prod-eu`` (named by its directories, as ingest writes it)."""


def _report(name: str, files: Mapping[str, bytes], names: str) -> Case:
    return Case(f"report-{name}", ("report", "{dir}/res", "--out", "{dir}/r.html"), names, files)


def _simulation(**changed: bytes) -> dict[str, bytes]:
    return {f"res/{k}": v for k, v in {**SIMULATION, **{f"sim/{n}": d for n, d in changed.items()}}.items()}


# ------------------------------------------------------------------------------------------- the table

CASES: dict[str, list[Case]] = {
    "encodings and binary data": [
        _decide("gzip", GZIP, "gzip file"),
        _decide("zip", ZIP, "zip file"),
        _decide("parquet", PARQUET, "Parquet file"),
        _decide("nul-bytes", b'{"brokers": {}\x00}', "NUL byte"),
        _decide("utf16-without-bom", SNAPSHOT.encode("utf-16-le"), "snap.json"),
        _decide("latin1", '{"brokers": {"caf\xe9": 1}}'.encode("latin-1"), "not UTF-8"),
        _decide("bad-utf16-after-bom", codecs.BOM_UTF16_LE + b"{\x00\xd8", "UTF-16"),
        _config("gzip-yaml", "lb.yaml", gzip.compress(b"maxUnloadPercentage: 0.5\n"), "gzip file"),
        _config("gzip-json", "lb.json", gzip.compress(b'{"maxUnloadPercentage": 0.5}'), "gzip file"),
        _config("parquet-json", "lb.json", PARQUET, "Parquet file"),
        _config("nul-conf", "broker.conf", b"maxUnloadPercentage=0.5\n\x00\x01", "NUL byte"),
        _config("utf16-bom-bad-value", "broker.conf", "maxUnloadPercentage=abc\n".encode("utf-16"), "abc"),
        _simulate("gzip", gzip.compress(scenario()), "gzip file"),
        _simulate("zip", ZIP, "zip file"),
        _simulate("latin1", "name: caf\xe9\n".encode("latin-1"), "not UTF-8"),
        _sweep("gzip", gzip.compress(b"scenarios: all\n"), "gzip file"),
        _sweep(
            "scenario-gzip",
            GRID.format(scenario="s.yaml").encode(),
            "s.yaml",
            {"s.yaml": gzip.compress(scenario())},
        ),
    ],
    "names Pulsar cannot have": [
        # topics named 'my topic-0000' (no Pulsar topic has a space), or read by Pulsar as partitions of
        # another topic (a-partition-0001: partition 1 of 'a'), were simulated (until 29 Nov 2026)
        *(
            _simulate(
                f"hashed-prefix-{label}",
                scenario().replace(
                    b"bundles: 4\n", f"bundles: 4\n    hashed: {{topics: 8, prefix: '{prefix}'}}\n".encode()
                ),
                f"s.yaml: workloads[0].hashed.prefix: must {must}",
            )
            for label, prefix, must in (
                ("with-a-space", "my topic", "be a non-empty name"),
                ("with-a-colon", "t:1", "be a non-empty name"),
                ("making-partition-names", "a-partition", "not make names with '-partition-'"),
            )
        ),
        _decide(
            "broker-name-with-escapes",
            snapshot('"broker-1:8080"', '"b\\u001b[31m:8080"'),
            "control characters",
        ),
        _decide("empty-broker-name", snapshot('"broker-1:8080"', '""'), "(got '')"),
        # taken, and chosen for an unload (the one advise --execute would send)
        _decide(
            "not-a-bundle-name",
            SNAPSHOT.replace('"public/default/0x01000000_0x02000000"', '"notabundle"').encode(),
            "localData.bundles: not a bundle name",
        ),
        _decide(
            "inverted-bundle-range",
            snapshot('"public/default/0x01000000_0x02000000"', '"public/default/0x02000000_0x01000000"'),
            "not a bundle range",
        ),
    ],
    "LoadData fields read as none": [
        # a typo'd field was ignored (no bundle in its grace period); with both spellings of the brokers,
        # brokerData was ignored
        _decide(
            "typo-of-a-field",
            snapshot('"recentlyUnloadedBundles"', '"recentlyUnloadedBundle"'),
            "did you mean 'recentlyUnloadedBundles'?",
        ),
        _decide(
            "brokers-and-brokerData", snapshot('"bundleData"', '"brokerData": {}, "bundleData"'), "brokerData"
        ),
    ],
    "duplicate keys": [
        _decide("json", b'{"brokers": {}, "brokers": {}}', "'brokers' appears twice"),
        _decide("nested-json", snapshot('"cpu": {', '"cpu": {"usage": 1, '), "'usage' appears twice"),
        _config("yaml", "lb.yaml", b"maxUnloadPercentage: 0.5\nmaxUnloadPercentage: 0.7\n", "line 2"),
        _config("json", "lb.json", b'{"minUnloadMessage": 1,\n "minUnloadMessage": 2}', "'minUnloadMessage'"),
        _config(
            "nested-yaml", "lb.yaml", b"config:\n  minUnloadMessage: 1\n  minUnloadMessage: 2\n", "line 3"
        ),
        _simulate("top-level", scenario("duration: 20m\n"), "'duration' appears twice"),
        _simulate("nested", scenario("", brokers="  - count: 3\n    count: 4\n"), "'count' appears twice"),
        _compare("top-level", scenario("name: other\n"), "'name' appears twice"),
        _sweep("grid", b"scenarios: [scale-out]\nscenarios: [broker-loss]\n", "'scenarios' appears twice"),
        _sweep(
            "scenario-of-grid",
            GRID.format(scenario="s.yaml").encode(),
            "'duration'",
            {"s.yaml": scenario("duration: 5m\n")},
        ),
    ],
    "numbers out of range": [
        _decide("huge-int", snapshot('"usage": 656.0', f'"usage": {HUGE}'), "2^63 - 1"),
        _decide("negative-seed", SNAPSHOT.encode(), "--seed", "--seed", "-1"),
        _decide("seed-beyond-64-bits", SNAPSHOT.encode(), "--seed", "--seed", str(2**64)),
        _decide("zero-cycles", SNAPSHOT.encode(), "--cycles", "--cycles", "0"),
        _decide("absurd-cycles", SNAPSHOT.encode(), "--cycles", "--cycles", str(10**12)),
        _decide("negative-rate", snapshot('"msgRateIn": ', '"msgRateIn": -'), "msgRateIn"),
        Case(
            "decide-set-negative-max-unload",
            ("decide", "{dir}/snap.json", "--set", "maxUnloadPercentage=-0.5"),
            "maxUnloadPercentage",
            {"snap.json": SNAPSHOT.encode()},
        ),
        Case("conform-negative-timing", ("conform", str(ROOT / "conformance"), "--timing", "-1"), "--timing"),
        Case("conform-negative-seed", ("conform", str(ROOT / "conformance"), "--seed", "-5"), "--seed"),
        # a case that cannot be run exited 1, its error on stdout only (28 Nov 2026)
        Case(
            "conform-case-without-strategy",
            ("conform", "{dir}/case.json"),
            "case.json: strategy: required field is missing",
            {"case.json": b'{"name": "x", "ticks": []}'},
        ),
        # a key the case format does not have was ignored: the case ran without its assign requests or
        # its config, silently (until 29 Nov 2026)
        Case(
            "conform-tick-key-typo",
            ("conform", "{dir}/case.json"),
            "case.json: ticks[0].asign: unknown key",
            {"case.json": case(lambda c: c["ticks"][0].update(asign=[]))},
        ),
        Case(
            "conform-case-key-typo",
            ("conform", "{dir}/case.json"),
            "case.json: confg: unknown key",
            {"case.json": case(lambda c: c.update(confg={"maxUnloadPercentage": 0.5}))},
        ),
        Case(
            "conform-assign-key-typo",
            ("conform", "{dir}/case.json"),
            "case.json: ticks[0].assign[0].candidate: unknown key",
            {
                "case.json": case(
                    lambda c: c["ticks"][0].update(assign=[{"bundle": "a/b/c", "candidate": []}])
                )
            },
        ),
        # the case's strategy ran, and the key naming another one was ignored (until 29 Nov 2026)
        Case(
            "conform-config-names-another-strategy",
            ("conform", "{dir}/case.json"),
            "case.json: config.loadBalancerLoadSheddingStrategy: names ThresholdShedder",
            {
                "case.json": case(
                    lambda c: c.update(config={"loadBalancerLoadSheddingStrategy": "ThresholdShedder"})
                )
            },
        ),
        _config("negative-max-unload", "lb.yaml", b"maxUnloadPercentage: -0.5\n", "maxUnloadPercentage"),
        _config("negative-min-unload-conf", "broker.conf", b"minUnloadMessage=-1\n", "minUnloadMessage"),
        _config(
            "zero-shedding-interval",
            "lb.json",
            b'{"loadBalancerSheddingIntervalMinutes": 0}',
            "loadBalancerSheddingIntervalMinutes",
        ),
        _config(
            "history-above-one",
            "lb.yaml",
            b"loadBalancerHistoryResourcePercentage: 1.5\n",
            "loadBalancerHistoryResourcePercentage",
        ),
        _config("huge-int-json", "lb.json", f'{{"minUnloadMessage": {HUGE}}}'.encode(), "2^63 - 1"),
        _config("huge-int-yaml", "lb.yaml", f"minUnloadMessage: {'9' * 5000}\n".encode(), "2^63 - 1"),
        _config("int-beyond-java-int", "broker.conf", b"minUnloadMessage=99999999999\n", "minUnloadMessage"),
        _simulate("negative-seed-option", scenario(), "--seed", "--seed", "-1"),
        _simulate("negative-seed-field", scenario("seed: -3\n"), "seed"),
        _simulate("huge-seed-field", scenario(f"seed: {HUGE}\n"), "2^63 - 1"),
        # 2^63 fits 64 bits (unsigned); the readers said "more than 64 bits" of it
        _simulate("seed-field-two-to-the-63", scenario(f"seed: {2**63}\n"), "-2^63 to 2^63 - 1"),
        _config(
            "two-to-the-63-json", "lb.json", f'{{"minUnloadMessage": {2**63}}}'.encode(), "-2^63 to 2^63 - 1"
        ),
        _simulate("trillion-brokers", scenario("", brokers="  - count: 1000000000000\n"), "brokers"),
        _simulate("huge-duration", scenario("", duration="1000000000000000"), "duration"),
        _simulate(
            "tiny-tick",
            scenario("simulation:\n  tick: 0.000001\n"),
            "simulation.tick: must be a whole number",
        ),
        _simulate("million-added-brokers", event("{at: 1m, kind: add_brokers, count: 1000000}"), "count"),
        _simulate(
            "ten-million-bundles",
            scenario("", duration="10m").replace(b"bundles: 4", b"bundles: 10000000"),
            "bundles",
        ),
        _simulate("infinite-duration", scenario("", duration=".inf"), "duration"),
        # 5 minutes, silently: 5M is months to systemd, ٥ and ５ are digits to Python only
        _simulate("upper-case-unit", scenario("", duration="5M"), "duration: units are lower case"),
        _simulate("arabic-indic-digit", scenario("", duration="٥m"), "did you mean '5m'?"),
        _simulate("fullwidth-digit", scenario("", duration="５m"), "did you mean '5m'?"),
        _simulate("nan-factor", event("{at: 1m, kind: traffic, factor: .nan}"), "factor"),
        Case(
            "compare-negative-seed",
            ("compare", "{dir}/s.yaml", "--seed", "-2"),
            "--seed",
            {"s.yaml": scenario()},
        ),
        _sweep("negative-seed", b"scenarios: [scale-out]\nseeds: [-1]\n", "seeds"),
        _sweep("trillion-seeds", b"scenarios: [scale-out]\nseeds: {count: 1000000000000}\n", "seeds.count"),
        Case("sweep-negative-limit", ("sweep", "tiny", "--out", "{dir}/out", "--limit", "-1"), "--limit"),
        Case(
            "sweep-negative-timeout", ("sweep", "tiny", "--out", "{dir}/out", "--timeout", "-5"), "--timeout"
        ),
    ],
    "names that do not exist": [
        Case(
            "replay-extensible-pair",
            (
                "replay",
                "{dir}",
                "--strategies",
                TRANSFER,
                "-o",
                "{dir}/o",
            ),
            "--strategies: TransferShedder belongs to the extensible load manager",
        ),
        _simulate("remove-missing-broker", event("{at: 1m, kind: remove_brokers, brokers: [9]}"), "broker 9"),
        _simulate(
            "restart-missing-broker",
            event("{at: 1m, kind: rolling_restart, interval: 1m, brokers: [2, 7]}"),
            "broker 7",
        ),
        _simulate(
            "background-missing-broker",
            event("{at: 1m, kind: background, brokers: [4], background: {cpu: 0.1}}"),
            "broker 4",
        ),
        _simulate(
            "remove-broker-added-later",
            scenario(
                "events:\n  - {at: 5m, kind: add_brokers, count: 2}\n"
                "  - {at: 1m, kind: remove_brokers, brokers: [5]}\n"
            ),
            "events[1].brokers",
        ),
        _simulate("empty-broker-list", scenario("", brokers="  []\n"), "brokers"),
        _simulate("zero-count", scenario("", brokers="  - count: 0\n"), "count"),
        _simulate("unknown-hardware", scenario("", brokers="  - count: 3\n    hardware: huge\n"), "huge"),
        Case("simulate-unknown-builtin", ("simulate", "scale-outt"), "scale-outt"),
        # named the field 'strategy', not the option the user typed
        Case(
            "compare-unknown-strategy",
            ("compare", "scale-out", "--strategies", "AvgShedder,AvgShedderr"),
            "--strategies: unknown strategy pair (got 'AvgShedderr'); did you mean 'AvgShedder'?",
        ),
        # one reader of --strategies (strategies.pair_list): compare and replay dropped a pair named twice,
        # and all three commands an empty item, silently
        Case(
            "compare-strategy-twice",
            ("compare", "scale-out", "--strategies", "AvgShedder,avgshedder"),
            "--strategies: names a strategy pair twice (got 'AvgShedder')",
        ),
        Case(
            "compare-strategy-trailing-comma",
            ("compare", "scale-out", "--strategies", "AvgShedder,"),
            "--strategies: an empty name in the list (a comma too many?) (got 'AvgShedder,')",
        ),
        Case(
            "replay-strategy-twice",
            ("replay", "{dir}/snap", "--strategies", "AvgShedder,AvgShedder", "--out", "{dir}/out"),
            "--strategies: names a strategy pair twice (got 'AvgShedder')",
        ),
        Case(
            "tune-strategy-empty-item",
            ("tune", "--demo", "--strategies", "AvgShedder,,OverloadShedder", "--out", "{dir}/t"),
            "--strategies: an empty name in the list",
        ),
        Case(
            "config-show-unknown-strategy",
            ("config", "show", "--strategy", "AvgShedde"),
            "--strategy: unknown strategy pair (got 'AvgShedde'); did you mean 'AvgShedder'?",
        ),
        Case(
            "sandbox-unknown-strategy",
            ("sandbox", "scale-out", "--strategy", "AvgShedde", "--zookeeper", "none"),
            "--strategy: unknown strategy pair (got 'AvgShedde'); did you mean 'AvgShedder'?",
        ),
        _compare("remove-missing-broker", event("{at: 1m, kind: remove_brokers, brokers: [9]}"), "broker 9"),
        _simulate(
            "traffic-event-selecting-a-tenant-that-does-not-exist",
            event("{at: 1m, kind: traffic, factor: 2, select: {tenants: [tenant-007]}}"),
            "s.yaml: events[0].select.tenants: matches no tenant of the scenario",
        ),
        _simulate(
            "empty-workload-name",
            scenario().replace(b"  - name: w\n", b"  - name: ' '\n"),
            "s.yaml: workloads[0].name: expected a non-empty name on one line",
        ),
        _simulate(
            "remove-a-broker-twice",
            event("{at: 1m, kind: remove_brokers, brokers: [2, 2]}"),
            "s.yaml: events[0].brokers[1]: a broker listed twice (got 2)",
        ),
        _sweep("empty-scenario-list", b"scenarios: []\n", "scenarios"),
        _sweep("unknown-scenario", b"scenarios: [no-such-scenario]\n", "no-such-scenario"),
        _sweep("pattern-matches-nothing", b"scenarios: ['zzz*']\n", "zzz*"),
        _sweep("missing-scenario-file", b"scenarios: [nope.yaml]\n", "nope.yaml"),
        _sweep(
            "event-missing-broker",
            GRID.format(scenario="s.yaml").encode(),
            "broker 9",
            {"s.yaml": event("{at: 1m, kind: remove_brokers, brokers: [9]}")},
        ),
        _sweep("unknown-field", b"scenarios: [scale-out]\nseed: [1]\n", "seed"),
        Case(  # the run knew the file's keys only as "config overrides"
            "compare-config-manager-against-the-pair",
            ("compare", "scale-out", "--strategies", TRANSFER, "--config", "{dir}/broker.conf"),
            "broker.conf:2: loadManagerClassName: TransferShedder runs in the extensible load manager",
            {"broker.conf": b"maxUnloadPercentage=0.3\nloadManagerClassName=abc\n"},
        ),
        # each named twice would run once while the sweep counted two: refused as seeds twice are
        _sweep("name-a-list", b"name: [a, b]\nscenarios: [scale-out]\n", "g.yaml: name: expected text"),
        _sweep(
            "name-of-two-lines",
            b'name: "a\\nb"\nscenarios: [scale-out]\n',
            "g.yaml: name: expected text on one line of at most 200 characters",
        ),
        _sweep(
            "pair-twice",
            b"scenarios: [scale-out]\nstrategies: [AvgShedder, avgshedder]\n",
            "g.yaml: strategies: the grid names a strategy pair twice (got 'AvgShedder')",
        ),
        _sweep(
            "parameter-value-twice",
            b"scenarios: [scale-out]\nparameters: {loadBalancerAvgShedderLowThreshold: [15, 15.0]}\n",
            "g.yaml: parameters.loadBalancerAvgShedderLowThreshold: a value given twice would run once",
        ),
        Case(
            "tune-space-value-twice",
            ("tune", "scale-out", "--space", "{dir}/space.yaml", "--out", "{dir}/out"),
            "space.yaml: common.loadBalancerBrokerThresholdShedderPercentage: a value given twice",
            {"space.yaml": b"common:\n  loadBalancerBrokerThresholdShedderPercentage: [10, 20, 10]\n"},
        ),
    ],
    "empty and missing input": [
        Case(
            "conform-empty-directory",
            ("conform", "{dir}/cases"),
            "no conformance cases",
            {"cases/README.md": b"none\n"},
        ),
        Case(
            "conform-empty-directory-check",
            ("conform", "--check", "{dir}/cases"),
            "cases",
            {"cases/x.txt": b""},
        ),
        _decide("empty-file", b"", "snap.json"),
        Case("decide-missing-file", ("decide", "{dir}/nope.json"), "nope.json"),
        Case("decide-directory", ("decide", "{dir}"), "directory"),
        _simulate("empty-file", b"", "empty"),
        Case("simulate-missing-file", ("simulate", "{dir}/nope.yaml"), "nope.yaml"),
        _config("yaml-list", "lb.yaml", b"- maxUnloadPercentage\n", "lb.yaml"),
        Case("config-missing-file", ("config", "show", "--config", "{dir}/nope.conf"), "nope.conf"),
        _sweep("empty-file", b"", "g.yaml"),
        Case("sweep-missing-grid", ("sweep", "{dir}/nope.yaml", "--out", "{dir}/out"), "nope.yaml"),
        # a shipped grid's name mistyped got 'grid file not found' without the name it meant
        Case(
            "sweep-mistyped-shipped-grid",
            ("sweep", "tnyy", "--out", "{dir}/out"),
            "tnyy: no shipped grid or grid file of this name; did you mean 'tiny'?",
        ),
        Case(
            "sweep-missing-grid-file-near-a-shipped-name",
            ("sweep", "pip346.yaml", "--out", "{dir}/out"),
            "pip346.yaml: grid file not found; did you mean 'pip364'?",
        ),
    ],
    # a 10,000-character value or key was echoed whole inside the message: a line of 10 to 20 kB
    "values too long to show whole": [
        # a document pasted where its file's name goes: Path.is_dir raised ENAMETOOLONG, a traceback
        # (until 29 Nov 2026)
        Case("decide-name-too-long", ("decide", "x" * 300), "a path too long for the file system"),
        # typer's refusal echoed all of it: a line of 10,000 characters (until 29 Nov 2026)
        _decide("seed-too-long-to-show", SNAPSHOT.encode(), "--seed: expected a whole", "--seed", LONG),
        Case("simulate-out-name-too-long", ("simulate", "scale-out", "--out", "x" * 300), "a path too long"),
        Case("evaluate-name-too-long", ("evaluate", "x" * 300), "a path too long for the file system"),
        _config(
            "split-algorithm-item",
            "broker.conf",
            b"supportedNamespaceBundleSplitAlgorithms=" + LONG.encode() + b"\n",
            f"supportedNamespaceBundleSplitAlgorithms: expected items from range_equally_divide, "
            f"topic_count_equally_divide, specified_positions_divide, flow_or_qps_equally_divide "
            f"(unknown item '{'x' * 199}… (10002 characters))",
        ),
        _config(
            "unknown-key",
            "lb.json",
            b'{"loadBalancer' + LONG.encode() + b'": 1}',
            f"lb.json:1: loadBalancer{'x' * 188}… (10012 characters): unknown load balancer "
            "configuration key",
        ),
        Case(  # named twice, in the source and as the field
            "tune-space-unknown-key",
            ("tune", "scale-out", "--space", "{dir}/space.yaml", "--out", "{dir}/out"),
            f"space.yaml: common: loadBalancer{'x' * 188}… (10012 characters): unknown load balancer "
            "configuration key",
            {"space.yaml": f"common:\n  ? loadBalancer{LONG}\n  : [1]\n".encode()},
        ),
    ],
    "malformed documents": [
        _decide("truncated", SNAPSHOT[:200].encode(), "malformed JSON"),
        # names Pulsar's NamedEntity refuses: they become the sandbox's admin paths and znodes
        _simulate(
            "tenant-prefix-with-a-space",
            scenario("    tenant_prefix: a b\n"),
            "workloads[0].tenant_prefix: must be a non-empty name, each part ASCII letters",
        ),
        _simulate(
            "namespace-out-of-its-folder",
            scenario("    namespace: ../x\n"),
            "workloads[0].namespace: expected tenant/namespace",
        ),
        _decide(
            "usage-text",
            snapshot('"usage": 656.0', '"usage": "abc"'),
            "cpu.usage: expected a number (got 'abc')",
        ),
        _simulate(
            "msg-size-list",
            scenario("    msg_size: [1024]\n"),
            "msg_size: expected a number or a distribution",
        ),
        _sweep(
            "brokers-every-word",
            b"scenarios: [scale-out]\nstrategies: [AvgShedder]\nseeds: [1]\nbrokers_every: five\n",
            "brokers_every: expected a non-negative integer (0 = no broker rows) (got 'five')",
        ),
        _sweep(
            "parameter-not-a-number",
            b"scenarios: [scale-out]\nstrategies: [AvgShedder]\nseeds: [1]\n"
            b"parameters:\n  maxUnloadPercentage: [abc]\n",
            "g.yaml: parameters: maxUnloadPercentage: expected a finite number",
        ),
        _decide("deep-nesting", b"[" * 100_000, "nested too deeply"),
        _decide("top-level-list", b"[1, 2]", "snap.json"),
        _decide("brokers-is-a-list", b'{"brokers": []}', "brokers"),
        _simulate("tabs", b"name: x\n\tduration: 5m\n", "s.yaml"),
        _simulate("deep-nesting", b"a: " + b"[" * 20_000, "s.yaml"),
        _simulate("top-level-list", b"- 1\n- 2\n", "s.yaml"),
        _config("bad-escape", "broker.conf", b"minUnloadMessage=\\u12\n", "broker.conf"),
        _sweep("not-a-mapping", b"- scale-out\n", "g.yaml"),
        _decide("extensible-broker-load-data", EXTENSIBLE, "BrokerLoadData of the extensible load manager"),
        _ingest_bundles(
            "unsorted",
            b'{"public/default": {"boundaries": ["0x00000000", "0x90000000", "0x80000000", "0xffffffff"]}}',
            "boundaries[2]",
        ),
        _ingest_bundles(
            "count", b'{"p/d": {"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 4}}', "numBundles"
        ),
        _ingest_bundles("not-hex", b'{"p/d": {"boundaries": ["0", "0xffffffff"]}}', "boundaries[0]"),
        Case("advise-zookeeper-port-not-a-number", ("advise", "--zookeeper", "zk1:21B1"), "'zk1:21B1'"),
        Case(  # the password was printed back in every error ("GET http://admin:s3cret@…: HTTP 401")
            "advise-admin-url-with-credentials",
            ("advise", "--admin-url", "http://admin:s3cret@127.0.0.1:9"),
            "credentials in the URL are refused (they would be printed in errors); give a token with"
            " --token-file or --token-env (got 'http://***@127.0.0.1:9')",
        ),
        Case(  # the query was glued to every path and printed: http://127.0.0.1:9/?token=…/admin/v2/clusters
            "collect-admin-url-with-a-query",
            ("collect", "--out", "{dir}/rec", "--admin-url", "http://127.0.0.1:9/?token=s3cret"),
            "has no ?query, #fragment or ;parameters (a token goes in --token-file) (got 'http://127.0.0.1:9/?…')",
        ),
        Case(  # every cycle was refused, silently (exit 0) in one without decisions
            "advise-execute-from-zookeeper-without-admin-url",
            ("advise", "--zookeeper", "127.0.0.1:9", "--execute", "--audit", "{dir}/audit.jsonl"),
            "--execute: --zookeeper is only read; the unloads go through a broker's admin API",
        ),
        Case(
            "collect-zookeeper-port-out-of-range",
            ("collect", "--out", "{dir}/rec", "--zookeeper", "zk1:99999"),
            "--zookeeper",
        ),
        # the sandbox wrote its brokers into ZooKeeper's own tree; ZooKeeper refuses '//a' as a path
        *(
            Case(
                f"sandbox-zookeeper-chroot-{name}",
                ("sandbox", "scale-out", "--zookeeper", f"127.0.0.1:9{chroot}"),
                f"--zookeeper: the chroot {chroot} is",
            )
            for name, chroot in (
                ("reserved", "/zookeeper"),
                ("under-reserved", "/zookeeper/pulsar"),
                ("empty-name", "//pulsar"),
                ("trailing-slash", "/pulsar/"),
                ("dot-dot", "/a/../pulsar"),
            )
        ),
        Case(
            "advise-zookeeper-chroot-reserved",
            ("advise", "--zookeeper", "127.0.0.1:9/zookeeper/quota"),
            "--zookeeper: the chroot /zookeeper/quota is ZooKeeper's own tree",
        ),
        # kazoo reads a port 0 as its default 2181 (the sandbox wrote its brokers into that ZooKeeper), and a
        # URL as the host 'http' with the chroot '//zk1:2181'
        # Path collapsed s3://bucket/rec to s3:/bucket/rec: a local directory of that name was written
        *(
            Case(
                f"collect-out-{scheme}-uri",
                ("collect", "--out", f"{scheme}://bucket/rec", "--admin-url", "http://127.0.0.1:9"),
                "--out: a local directory is expected, not a URI",
            )
            for scheme in ("s3", "file")
        ),
        # '' was read as the default cluster; 'a b' labelled a recording whose every line ingest quarantined
        Case(
            "collect-cluster-with-a-space",
            ("collect", "--out", "{dir}/rec", "--zookeeper", "127.0.0.1:9", "--cluster", "a b"),
            "--cluster: not a Pulsar cluster name",
        ),
        # labelled a recording every line of which ingest then quarantined (until 29 Nov 2026)
        Case(
            "sandbox-cluster-too-long",
            ("sandbox", "scale-out", "--zookeeper", "none", "--cluster", "c" * 300, "--duration", "1s"),
            "--cluster: a cluster name of 300 characters is too long for a partition directory",
        ),
        Case(
            "advise-cluster-empty",
            ("advise", "--zookeeper", "127.0.0.1:9", "--cluster", ""),
            "--cluster: an empty value (got '')",
        ),
        Case(
            "sandbox-cluster-empty",
            ("sandbox", "scale-out", "--zookeeper", "none", "--cluster", ""),
            "--cluster: an empty value (got '')",
        ),
        Case("advise-zookeeper-port-zero", ("advise", "--zookeeper", "zk1:0"), "port 0 in a HOST:PORT"),
        # kazoo's thread printed the resolver's UnicodeError traceback before the one-line error, and an
        # admin URL's error was as long as the name (until 29 Nov 2026)
        Case(
            "advise-zookeeper-label-too-long",
            ("advise", "--zookeeper", "z" * 64 + ":2181", "--timeout", "2s"),
            "--zookeeper: not a host name (a label of more than 63 characters",
        ),
        Case(
            "collect-admin-url-name-too-long",
            (
                "collect",
                "--out",
                "{dir}/rec",
                "--admin-url",
                "http://" + "b" * 300 + ":8080",
                "--retries",
                "1",
            ),
            "--admin-url: not a host name",
        ),
        # a host of no DNS name: each call was tried --retries times, then 'unreachable' (until 29 Nov 2026)
        Case(
            "collect-admin-url-host-with-a-space",
            ("collect", "--out", "{dir}/rec", "--admin-url", "http://broker 1:8080", "--timeout", "30s"),
            "--admin-url: not a host name (it holds a space or a control character) "
            "(got 'http://broker 1:8080')",
        ),
        # urlparse dropped the tab and the newline: another host, another port, silently (until 29 Nov 2026)
        Case(
            "collect-admin-url-tab-in-host",
            ("collect", "--out", "{dir}/rec", "--admin-url", "http://bro\tker:8080", "--timeout", "30s"),
            "--admin-url: not a URL (it holds a space or a control character)",
        ),
        Case(
            "advise-admin-url-newline-in-port",
            ("advise", "--admin-url", "http://broker:80\n80", "--timeout", "30s"),
            "--admin-url: not a URL (it holds a space or a control character)",
        ),
        Case(
            "advise-zookeeper-host-with-a-tab",
            ("advise", "--zookeeper", "zk\t1:2181", "--timeout", "30s"),
            "--zookeeper: not a host name (it holds a space or a control character)",
        ),
        # kazoo dropped the tab and connected to zk1, another host (until 29 Nov 2026)
        Case(
            "collect-zookeeper-host-with-a-tab-kazoo-drops",
            ("collect", "--out", "{dir}/rec", "--zookeeper", "zk\t1:2181,zk2:2181", "--timeout", "30s"),
            "--zookeeper: not a host name",
        ),
        Case(
            "collect-zookeeper-url",
            ("collect", "--out", "{dir}/rec", "--zookeeper", "http://zk1:2181"),
            "not a URL",
        ),
        # kazoo dropped them, silently: ZooKeeper was read without the credentials, which every error and
        # the reading's source printed back (until 29 Nov 2026)
        Case(
            "advise-zookeeper-credentials",
            ("advise", "--zookeeper", "zk0:2181,admin:hunter2@127.0.0.1:9/pulsar", "--timeout", "2s"),
            "--zookeeper: credentials in a ZooKeeper address are not used (ZooKeeper is read without "
            "authentication) and would be printed in errors (got 'zk0:2181,***@127.0.0.1:9')",
        ),
        Case(
            "collect-zookeeper-query",
            ("collect", "--out", "{dir}/rec", "--zookeeper", "127.0.0.1:9?chroot=/pulsar", "--timeout", "2s"),
            "--zookeeper: not a HOST:PORT[,HOST:PORT...][/chroot] list: no ?query or #fragment",
        ),
        Case(
            "sandbox-zookeeper-port-zero",
            ("sandbox", "scale-out", "--zookeeper", "127.0.0.1:0/x"),
            "--zookeeper: port 0 in a HOST:PORT",
        ),
    ],
    # a KeyError from pandas deep in the report: the readers did not check the columns they index
    "results of another program or version": [
        _report(
            "summary-without-scenario",
            _simulation(**{"summary.json": b'{"strategy": "AvgShedder", "seed": 1}'}),
            "sim/summary.json: scenario: missing",
        ),
        _report(
            "summary-with-a-list-for-strategy",
            _simulation(**{"summary.json": b'{"scenario": "s", "strategy": ["AvgShedder"]}'}),
            "sim/summary.json: strategy: expected a name",
        ),
        _report(
            "ticks-of-another-table",
            _simulation(**{"ticks.parquet": _parquet(time_s=[0.0], broker=["b1"], score=[1.0])}),
            "sim/ticks.parquet: not a table shedlab wrote here: no column 'score_spread'",
        ),
        _report(
            "sweep-run-of-another-table",
            {
                "res/sweep.json": b'{"grids": []}',
                "res/runs/scenario=s/strategy=AvgShedder/run-0123456789abcdef0123.parquet": _parquet(
                    run_id=["0123456789abcdef0123"], time_s=[0.0], score_spread=[1.0]
                ),
            },
            "run-0123456789abcdef0123.parquet: not a table shedlab wrote here: no column 'status'",
        ),
        _report(
            "pip364-csv-of-another-table",
            {"res/evaluation/pip364.csv": b"a,b\n1,2\n"},
            "pip364.csv: not a table shedlab wrote here: no column 'strategy', 'problem'",
        ),
        _report(
            "goal-csv-of-another-table",
            {
                "res/evaluation/pip364.csv": b"strategy,problem,metric,n_runs,value,ci_low,ci_high,rating\n",
                "res/evaluation/goal.csv": b"a,b\n1,2\n",
            },
            "goal.csv: not a table shedlab wrote here: no column 'scenario', 'class'",
        ),
        _report(
            "replay-table-of-another-table",
            {
                "res/replay.json": b'{"configs": []}',
                "res/comparison/cluster=c/strategy=AvgShedder/part-0.parquet": _parquet(time_s=[0.0]),
            },
            "part-0.parquet: not a table shedlab wrote here: no column 'tick_ms'",
        ),
        _report(
            "replay-without-its-load-table",
            # a damaged replay output: the report left out the table's section, silently
            {
                "res/replay.json": b'{"configs": []}',
                "res/comparison/cluster=c/strategy=AvgShedder/part-0.parquet": _parquet(
                    **_COMPARISON_COLUMNS
                ),
            },
            "res/replay.json: a replay output without its load/ table",
        ),
        _report(
            "replay-manifest-configs-not-a-list",
            {"res/replay.json": b'{"configs": 5}'},
            "replay.json: configs: expected a list of strategy configurations (objects) (got 5)",
        ),
    ],
    "a remote location that is no URI": [
        # Arrow's ArrowInvalid or Spark's Java URISyntaxException, as a stack trace (28 Nov 2026)
        Case(
            "sweep-out-is-no-uri",
            ("sweep", "tiny", "--out", "s3a://b:abc/x"),
            "--out: not a URI (Port could not be cast to integer value as 'abc') (got 's3a://b:abc/x')",
        ),
        Case(
            "evaluate-sweep-is-no-uri",
            ("evaluate", "hdfs://[x/y"),
            "not a URI (Invalid IPv6 URL) (got 'hdfs://[x/y')",
        ),
        Case(
            "twin-snapshots-are-no-uri",
            ("twin", "http://[x", "--out", "{dir}/t.yaml"),
            "not a URI (Invalid IPv6 URL)",
        ),
    ],
    "a tick past any use": [
        # a number past a Java long of milliseconds was a Spark stack trace; 100000d was accepted
        Case(
            "ingest-interval-past-a-java-long",
            ("ingest", "{dir}/r.jsonl", "--out", "{dir}/out", "--interval", "9" * 30),
            f"--interval: must be at most a day (1d) (got '{'9' * 30}')",
            {"r.jsonl": b"{}\n"},
        ),
        Case(
            "ingest-interval-longer-than-a-day",
            ("ingest", "{dir}/r.jsonl", "--out", "{dir}/out", "--interval", "100000d"),
            "--interval: must be at most a day (1d)",
            {"r.jsonl": b"{}\n"},
        ),
    ],
    "an output over its input": [
        # exit 0, and SNAP's tables were replaced by what could still be read: bundle_samples had no row
        Case(
            "ingest-out-holds-its-input",
            ("ingest", "{dir}/snap/broker_samples", "--out", "{dir}/snap"),
            "--out: holds the input",
            EU_INGESTED,
        ),
        Case(
            "ingest-out-is-its-input",
            ("ingest", "{dir}/snap", "--out", "{dir}/snap/"),
            "--out: is the input itself",
            EU_INGESTED,
        ),
        # the next ingest of rec/ read the output's Parquet as input
        Case(
            "ingest-out-inside-its-input",
            ("ingest", "{dir}/rec", "--out", "{dir}/rec/snap"),
            "--out: lies inside the input",
            {"rec/r.jsonl": b"{}\n"},
        ),
        # a file among the recording's tables: Spark read it as Parquet the next time
        Case(
            "twin-out-inside-its-recording",
            ("twin", "{dir}/snap", "--out", "{dir}/snap/broker_samples/twin.yaml"),
            "--out: lies inside the input",
            EU_INGESTED,
        ),
        Case(
            "twin-out-is-its-config",
            ("twin", "{dir}/snap", "--config", "{dir}/broker.conf", "--out", "{dir}/broker.conf"),
            "--out: is the input itself",
            {**EU_INGESTED, "broker.conf": b"maxUnloadPercentage=0.5\n"},
        ),
        Case(
            "ingest-out-inside-the-bundles-dir",
            ("ingest", "{dir}/r.jsonl", "--bundles", "{dir}/b", "--out", "{dir}/b/out"),
            "--out: lies inside the input",
            {
                "r.jsonl": b"{}\n",
                "b/public/default.json": b'{"boundaries": ["0x00000000", "0xffffffff"], "numBundles": 1}',
            },
        ),
    ],
    "an output into another command's output": [
        # each wrote its files among the other command's, exit 0
        Case(
            "sweep-out-is-an-ingest-output",
            ("sweep", "tiny", "--out", "{dir}/snap"),
            "--out: is an ingest output (broker_samples/), not a sweep directory",
            EU_INGESTED,
        ),
        Case(
            "sweep-out-is-a-replay-output",
            ("sweep", "tiny", "--out", "{dir}/o"),
            "--out: is a replay output (replay.json), not a sweep directory",
            {"o/replay.json": b"{}"},
        ),
        Case(
            "sweep-out-is-an-evaluate-output",
            ("sweep", "tiny", "--out", "{dir}/o"),
            "--out: is an evaluate output (pip364.csv), not a sweep directory",
            {"o/pip364.csv": b"strategy\n"},
        ),
        Case(
            "sweep-out-is-a-report-directory",
            ("sweep", "tiny", "--out", "{dir}/o"),
            "--out: is a directory of shedlab results with their report (report.html)",
            {"o/report.html": b"<!DOCTYPE html>"},
        ),
        Case(
            "sweep-out-is-an-interrupted-tune",
            ("sweep", "tiny", "--out", "{dir}/o"),
            "--out: is a tune output (sweep.json), not a sweep directory",
            {"o/runs/_SUCCESS": b"", "o/sweep.json": b'{"grids": [{"name": "tune", "scenarios": {}}]}'},
        ),
        Case(
            "replay-out-is-its-ingest-output",
            ("replay", "{dir}/snap", "-s", "AvgShedder", "--out", "{dir}/snap"),
            "--out: is an ingest output (broker_samples/), not a replay output",
            EU_INGESTED,
        ),
        Case(
            "evaluate-out-is-the-sweep",
            ("evaluate", "{dir}/sw", "--out", "{dir}/sw"),
            "--out: is a sweep directory (sweep.json), not an evaluate output",
            {"sw/runs/_SUCCESS": b"", "sw/sweep.json": b'{"grids": []}'},
        ),
        Case(
            "ingest-out-is-a-sweep",
            ("ingest", "{dir}/r.jsonl", "--out", "{dir}/sw"),
            "--out: is a sweep directory (runs/), not an ingest output",
            {"r.jsonl": b"{}\n", "sw/runs/_SUCCESS": b""},
        ),
        Case(
            "twin-report-dir-is-a-sweep",
            ("twin", "{dir}/snap", "--out", "{dir}/t.yaml", "--report-dir", "{dir}/sw"),
            "--report-dir: is a sweep directory (runs/), not a twin's fit report directory",
            {**EU_INGESTED, "sw/runs/_SUCCESS": b""},
        ),
        # no validation runs, no fit report: both were ignored, silently (until 29 Nov 2026)
        *(
            Case(
                f"twin-no-validate-{option[2:]}",
                ("twin", "{dir}/snap", "--out", "{dir}/t.yaml", "--no-validate", option, value),
                f"{option}: is the validation's: give it without --no-validate (got ",
                EU_INGESTED,
            )
            for option, value in (("--seeds", "3"), ("--report-dir", "{dir}/r"))
        ),
        # a traceback from the first write of the sweep's manifest, once Spark had started (until 29 Nov 2026)
        Case(
            "sweep-out-that-cannot-be-created",
            ("sweep", "tiny", "--out", "/proc/shedlab-sweep"),
            "/proc/shedlab-sweep: --out: cannot be created: No such file or directory",
        ),
        # the simulation ran, then a PermissionError traceback (until 29 Nov 2026)
        _simulate(
            "out-not-writable",
            scenario(),
            "/sys/kernel: --out: cannot be written into",
            "--out",
            "/sys/kernel",
        ),
        # named --out, which was a fine new file (until 29 Nov 2026)
        Case(
            "twin-report-dir-is-a-file",
            ("twin", "{dir}/snap", "--out", "{dir}/t.yaml", "--report-dir", "{dir}/r.txt"),
            "r.txt: --report-dir: exists and is not a directory",
            {**EU_INGESTED, "r.txt": b"notes"},
        ),
        Case(
            "tune-out-is-a-replay-output",
            ("tune", "scale-out", "--out", "{dir}/o"),
            "--out: is a replay output (replay.json), not a tune output",
            {"o/replay.json": b"{}"},
        ),
        # a URI where simulate and compare write locally: pandas took the Path's text for a URL (urllib,
        # S3) after the whole run and printed a traceback (28 Nov 2026)
        Case(
            "simulate-out-is-a-uri",
            ("simulate", "scale-out", "--out", "http://[x"),
            "--out: a local directory is expected, not a URI",
        ),
        Case(
            "compare-out-is-a-uri",
            ("compare", "scale-out", "--strategies", "AvgShedder", "--out", "s3://bucket/run"),
            "not a URI (sweep writes to remote locations) (got 's3:/bucket/run')",
        ),
        Case(
            "simulate-out-is-a-sweep",
            ("simulate", "scale-out", "--out", "{dir}/sw"),
            "--out: is a sweep directory (runs/), not a simulate output",
            {"sw/runs/_SUCCESS": b""},
        ),
        Case(
            "compare-out-is-a-simulate-output",
            ("compare", "scale-out", "--strategies", "AvgShedder", "--out", "{dir}/res/sim"),
            "--out: is a simulate output (summary.json), not a compare output",
            _simulation(),
        ),
        Case(
            "report-out-over-the-results",
            ("report", "{dir}/res", "--out", "{dir}/res/sim/summary.json"),
            "--out: exists and is not a shedlab report: writing there would replace it (got '",
            _simulation(),
        ),
        Case(
            "demo-out-is-a-sweep",
            ("demo", "--out", "{dir}/sw"),
            "--out: is a sweep directory (runs/), not a demo output",
            {"sw/runs/_SUCCESS": b""},
        ),
        Case(  # each part of the demo's directory is the output of the command that writes it
            "demo-sweep-is-an-ingest-output",
            ("demo", "--out", "{dir}/d", "--no-recommend"),
            "--out: is an ingest output (broker_samples/), not a sweep directory",
            {"d/sweep/broker_samples/_SUCCESS": b""},
        ),
        Case(
            "tune-demo-out-is-a-replay-output",
            ("tune", "--demo", "--out", "{dir}/o"),
            "--out: is a replay output (replay.json), not a tune --demo output",
            {"o/replay.json": b"{}"},
        ),
        # a file per read among the sweep's files, exit 0; ingest of it then read them all as the recording
        Case(
            "collect-out-is-a-sweep",
            ("collect", "--admin-url", "http://127.0.0.1:9", "--out", "{dir}/sw"),
            "--out: is a sweep directory (runs/), not a collect recording",
            {"sw/runs/_SUCCESS": b""},
        ),
        Case(
            "collect-out-is-a-folder-of-other-files",
            ("collect", "--admin-url", "http://127.0.0.1:9", "--out", "{dir}/home"),
            "--out: is a directory of other files (notes.txt), not a collect recording",
            {"home/notes.txt": b"mine\n"},
        ),
    ],
    # replaced, exit 0: any existing file was overwritten
    "an output over a file that is not its own": [
        Case(
            "twin-out-is-a-readme",
            ("twin", "{dir}/snap", "--out", "{dir}/README.md"),
            "--out: exists and is not a twin: writing there would replace it",
            {**EU_INGESTED, "README.md": b"# my project\n"},
        ),
        Case(
            "twin-out-is-a-users-scenario",
            ("twin", "{dir}/snap", "--out", "{dir}/mine.yaml"),
            "--out: exists and is not a twin",
            {**EU_INGESTED, "mine.yaml": scenario()},
        ),
        Case(
            "twin-out-is-a-report",
            ("twin", "{dir}/snap", "--out", "{dir}/r.html"),
            "--out: is a shedlab report, not a twin",
            {**EU_INGESTED, "r.html": b'<!DOCTYPE html>\n<meta name="generator" content="shedlab report">\n'},
        ),
        Case(
            "report-out-is-a-users-page",
            ("report", "{dir}/res", "--out", "{dir}/index.html"),
            "--out: exists and is not a shedlab report",
            {**_simulation(), "index.html": b"<!DOCTYPE html><html><body>mine</body></html>\n"},
        ),
        Case(
            "report-out-is-a-twin",
            ("report", "{dir}/res", "--out", "{dir}/twin.yaml"),
            "--out: is a twin, not a shedlab report",
            {**_simulation(), "twin.yaml": b"# A twin fitted by `shedlab twin`: ...\nname: t\n"},
        ),
        Case(  # --out DIR is DIR/report.html
            "report-out-dir-holds-a-users-page",
            ("report", "{dir}/res", "--out", "{dir}/site"),
            "--out: exists and is not a shedlab report",
            {**_simulation(), "site/report.html": b"<html><body>mine</body></html>\n"},
        ),
    ],
    "results with nothing to report": [
        # an empty report was written, exit 0: an interrupted sweep looked like one that had run
        _report(
            "sweep-without-runs",
            {"res/runs/_SUCCESS": b"", "res/sweep.json": b'{"grids": []}'},
            "res/runs: no runs to report: the sweep holds no run summaries yet",
        ),
        _report(
            "sweep-without-runs-with-ticks",
            {"res/runs/scenario=s/strategy=AvgShedder/.keep": b"", "res/ticks/_SUCCESS": b""},
            "res/runs: no runs to report",
        ),
        _report("runs-dir-only", {"res/runs/_SUCCESS": b""}, "res/runs: no runs to report"),
    ],
    "options typer refuses": [
        _decide("seed-not-a-number", SNAPSHOT.encode(), "--seed: ", "--seed", "abc"),
        _decide("seed-with-equals", SNAPSHOT.encode(), "(got 'x1')", "--seed=x1"),
        _decide("unknown-option", SNAPSHOT.encode(), "--bogus", "--bogus"),
        _decide("extra-argument", SNAPSHOT.encode(), "unexpected extra argument", "other.json"),
        Case("decide-missing-argument", ("decide",), "'snapshot'"),
        _simulate("float-seed", scenario(), "(got '1.5')", "--seed", "1.5"),
        Case("report-max-points-below-range", ("report", "{dir}", "--max-points", "5"), "--max-points"),
        Case("demo-negative-seeds", ("demo", "--out", "{dir}/out", "--seeds", "-1"), "(got '-1')"),
        # a MemoryError traceback, building the seeds (until 29 Nov 2026)
        Case(
            "demo-seeds-past-a-grid",
            ("demo", "--out", "{dir}/out", "--seeds", "100000000000"),
            "--seeds: must be between 0 and 100000 (got 100000000000)",
        ),
        Case("sandbox-port-beyond-65535", ("sandbox", "scale-out", "--port", "70000"), "--port"),
        # typer takes nan and inf as floats: nan ran no tick ("speed ×nan"), inf the whole scenario at once
        *(
            Case(
                f"sandbox-speed-{v}", ("sandbox", "scale-out", "--speed", v, "--zookeeper", "none"), "--speed"
            )
            for v in ("nan", "inf")
        ),
        # Python's int() and float() read them: --seed 1_0 ran seed 10, ' 7' and 7.0 seed 7 (to 29 Nov 2026)
        *(
            _decide(
                f"seed-spelt-{i}",
                SNAPSHOT.encode(),
                f"--seed: expected a whole number in plain digits (such as 10) (got {v!r})",
                "--seed",
                v,
            )
            for i, v in enumerate(("1_0", " 7", "7.0", "+7"))
        ),
        Case(
            "sandbox-speed-with-underscore",
            ("sandbox", "scale-out", "--speed", "1_0", "--zookeeper", "none"),
            "--speed: expected a number in plain digits (such as 2.5 or 1e-3) (got '1_0')",
        ),
        Case("misspelt-command", ("simulte", "scale-out"), "Did you mean 'simulate'?"),
        _simulate("empty-strategy", scenario(), "--strategy: an empty value (got '')", "--strategy", ""),
    ],
    # Path('') is the current directory, and other options read '' as not given (until 29 Nov 2026)
    "empty values": [
        # read the load reports of the directory the command ran in
        Case(
            "decide-empty-snapshot",
            ("decide", "", "--json"),
            "snapshot: an empty value (got ''); give a value",
            {"snap.json": SNAPSHOT.encode()},
        ),
        # read as the directory '.': "expected a config file, found a directory", naming neither
        Case(
            "decide-empty-config",
            ("decide", "{dir}/snap.json", "--config", ""),
            "--config: an empty value (got ''); give --config a value, or leave it out",
            {"snap.json": SNAPSHOT.encode()},
        ),
        # wrote its tables into the directory the command ran in, exit 0
        _simulate("empty-out", scenario(), "--out: an empty value (got ''); give --out a value", "--out", ""),
        # listened on every interface, not the loopback
        Case(
            "sandbox-empty-host",
            ("sandbox", "scale-out", "--zookeeper", "none", "--host", "", "--duration", "1s"),
            "--host: an empty value (got '')",
        ),
        # read as no --spark-conf: Spark started without the file
        Case(
            "sweep-empty-spark-conf",
            ("sweep", "tiny", "--out", "{dir}/o", "--spark-conf", ""),
            "--spark-conf: an empty value (got '')",
        ),
        # a blank audit log name: the log went to a file named ' '
        Case(
            "advise-blank-audit",
            ("advise", "--snapshot", "{dir}/s.json", "--execute", "--audit", " "),
            "--audit: an empty value (got ' ')",
            {"s.json": SNAPSHOT.encode()},
        ),
        Case(
            "tune-empty-twin", ("tune", "--twin", "", "--out", "{dir}/o"), "--twin: an empty value (got '')"
        ),
        Case("ingest-empty-source", ("ingest", "", "--out", "{dir}/o"), "sources: an empty value (got '')"),
        Case(
            "config-show-empty-config", ("config", "show", "--config="), "--config: an empty value (got '')"
        ),
    ],
    # typer kept the last one, silently (until 29 Nov 2026)
    "options given twice": [
        _decide(
            "strategy-twice",
            SNAPSHOT.encode(),
            "--strategy: given more than once (only the last would be taken) (got ['AvgShedder', "
            "'ThresholdShedder']); give it once",
            "--strategy",
            "AvgShedder",
            "--strategy=ThresholdShedder",
        ),
        _simulate(
            "out-twice", scenario(), "--out: given more than once", "--out", "{dir}/a", "--out={dir}/b"
        ),
        Case(
            "sweep-ui-and-no-ui",
            ("sweep", "tiny", "--out", "{dir}/o", "--ui", "--no-ui"),
            "--ui: given more than once (only the last would be taken) (got ['--ui', '--no-ui'])",
        ),
        Case(
            "config-show-changed-twice", ("config", "show", "--changed", "--changed"), "--changed: given more"
        ),
    ],
    "contradictions once read silently": [
        # written into the page's heading and its <title>, where a browser shows neither (until 29 Nov 2026)
        *(
            Case(
                f"report-title-with-{name}",
                ("report", "{dir}/res", "--out", "{dir}/r.html", "--title", f"My{char}run"),
                f"--title: holds a control character or a line break (got 'My{shown}run')",
                _simulation(),
            )
            for name, char, shown in (
                ("newline", "\n", "\\n"),
                ("escape", "\x1b", "\\x1b"),
                ("u2028", "\u2028", "\\u2028"),
            )
        ),
        _simulate(
            "clip-below-the-quantity",
            scenario("    msg_rate_in: {dist: normal, mean: 10, std: 100, clip: [-100, null]}\n"),
            "s.yaml: workloads[0].msg_rate_in.clip[0]: must be at least 0 (got -100)",
        ),
        _compare(
            "strategy-key-in-config",
            scenario("config: {loadBalancerLoadSheddingStrategy: AvgShedder}\n"),
            "s.yaml: config.loadBalancerLoadSheddingStrategy: the strategy pair is chosen by",
        ),
        _simulate(
            "remove-a-removed-broker",
            scenario(
                "events:\n  - {at: 1m, kind: remove_brokers, brokers: [2]}\n"
                "  - {at: 2m, kind: remove_brokers, brokers: [2]}\n"
            ),
            "s.yaml: events[1].brokers: remove_brokers at 120 s names broker 2, which events[0] removed",
        ),
        _simulate(
            "traffic-between-two-ticks",
            event("{at: 65s, kind: traffic, factor: 3, duration: 10s}"),
            "s.yaml: events[0].duration: traffic changed from 65 s to 75 s holds no step of the run",
        ),
        _simulate(
            "percent-as-a-fraction",
            scenario(),
            "--set: maxUnloadPercentage",
            "--set",
            "maxUnloadPercentage=80",
        ),
        _sweep(
            "strategy-key-as-a-parameter",
            (
                GRID.format(scenario="scale-out")
                + "parameters: {loadBalancerLoadSheddingStrategy: [ThresholdShedder]}\n"
            ).encode(),
            "g.yaml: parameters.loadBalancerLoadSheddingStrategy: a grid cannot change the strategy pair",
        ),
        # --metrics was ignored under --json, and an empty name printed no table, exit 0
        Case(
            "evaluate-metrics-with-json",
            ("evaluate", "{dir}/sw", "--json", "--metrics", "unloads"),
            "--metrics: chooses the columns of the metric table, which --json does not print",
            {"sw/runs/_SUCCESS": b"", "sw/sweep.json": b'{"grids": []}'},
        ),
        Case(
            "evaluate-metrics-empty-name",
            ("evaluate", "{dir}/sw", "--metrics", "unloads,"),
            "--metrics: an empty metric name (got 'unloads,')",
            {"sw/runs/_SUCCESS": b"", "sw/sweep.json": b'{"grids": []}'},
        ),
        # its column was printed twice, after Spark had started (until 29 Nov 2026)
        Case(
            "evaluate-metrics-twice",
            ("evaluate", "{dir}/sw", "--metrics", "unloads,imbalance_mean,unloads"),
            "--metrics: names a metric twice (got 'unloads')",
            {"sw/runs/_SUCCESS": b"", "sw/sweep.json": b'{"grids": []}'},
        ),
        # <= 0 is "all bundles" to the modular manager only: the extensible manager's brokers report no
        # top bundles, and TransferShedder never unloaded, silently (until 29 Nov 2026)
        Case(
            "simulate-extensible-top-bundles-zero",
            ("simulate", "scale-out", "--strategy", TRANSFER, "--set", TOP_K + "=0"),
            f"--set: {TOP_K}: with the extensible load manager every broker's top-bundles report would "
            "be empty",
        ),
        Case(
            "compare-extensible-top-bundles-negative-in-config",
            ("compare", "scale-out", "--strategies", "AvgShedder," + TRANSFER, "--config", "{dir}/b.conf"),
            f"b.conf:1: {TOP_K}: with the extensible load manager",
            {"b.conf": f"{TOP_K}=-1\n".encode()},
        ),
        _sweep(
            "extensible-top-bundles-zero",
            f"scenarios: [scale-out]\nstrategies: [AvgShedder, {TRANSFER}]\n"
            f"parameters: {{{TOP_K}: [10, 0]}}\n".encode(),
            f"g.yaml: parameters: {TOP_K}: with the extensible load manager",
        ),
        Case(
            "tune-space-extensible-top-bundles-zero",
            (
                "tune",
                "scale-out",
                "--strategies",
                TRANSFER,
                "--space",
                "{dir}/space.yaml",
                "--out",
                "{dir}/o",
            ),
            f"space.yaml: common: {TOP_K}: with the extensible load manager",
            {"space.yaml": f"common:\n  {TOP_K}: [5, 0]\n".encode()},
        ),
        Case(  # -1 is what Pulsar's docs advise for the modular manager: a twin of such a cluster has it
            "tune-extensible-on-a-scenario-without-top-bundles",
            ("tune", "{dir}/s.yaml", "--strategies", TRANSFER, "--out", "{dir}/o"),
            f"s.yaml: config: {TOP_K}: with the extensible load manager",
            {"s.yaml": scenario(f"config:\n  {TOP_K}: -1\n")},
        ),
    ],
    "Spark settings, refused before the grid is announced": [
        Case(
            "sweep-conf-without-equals",
            ("sweep", "tiny", "--out", "{dir}/out", "--conf", "spark.x"),
            "--conf",
        ),
        # Spark parses these when the driver starts: spark-submit exited (JAVA_GATEWAY_EXITED) or the
        # session failed, each after a Java stack and before a Python traceback
        Case(
            "sweep-conf-memory-not-a-size",
            ("sweep", "tiny", "--out", "{dir}/out", "--conf", "spark.executor.memory=lots"),
            "--conf: spark.executor.memory: expected a size such as 512m or 4g (more than 0) (got 'lots')",
        ),
        Case(
            "ingest-conf-partitions-not-an-integer",
            ("ingest", "{dir}/r.jsonl", "--out", "{dir}/out", "--conf", "spark.sql.shuffle.partitions=abc"),
            "--conf: spark.sql.shuffle.partitions: expected an integer",
            {"r.jsonl": b"{}\n"},
        ),
        Case(
            "sweep-spark-conf-fractional-memory",
            ("sweep", "tiny", "--out", "{dir}/out", "--spark-conf", "{dir}/spark-defaults.conf"),
            "spark-defaults.conf:2: spark.driver.memory: expected a size",
            {"spark-defaults.conf": b"# mine\nspark.driver.memory 1.5g\n"},
        ),
        Case(
            "sweep-spark-conf-missing",
            ("sweep", "tiny", "--out", "{dir}/out", "--spark-conf", "{dir}/s.conf"),
            "s.conf",
        ),
        # the table's JAVA_HOME names a folder without bin/java: PySpark's JAVA_GATEWAY_EXITED traceback
        Case("sweep-java-home-without-java", ("sweep", "tiny", "--out", "{dir}/out"), "JAVA_HOME"),
        # a file damaged inside passed the PAR1 check: a Java stack per Spark task, then a traceback
        Case(
            "replay-damaged-parquet",
            ("replay", "{dir}/snap", "--strategies", "AvgShedder", "--out", "{dir}/out"),
            "part-0.parquet: damaged Parquet file",
            INGESTED,
        ),
        # a cluster the output lacks was refused by Spark's read, 10 s after the JVM started
        Case(
            "twin-unknown-cluster",
            ("twin", "{dir}/snap", "--out", "{dir}/t.yaml", "--cluster", "prod-ue"),
            "--cluster: no such cluster in the ingest output (got 'prod-ue'); did you mean 'prod-eu'? "
            "its clusters: prod-eu",
            EU_INGESTED,
        ),
        # a window in another year took the fit's first Spark job (8 s) to find
        Case(
            "twin-window-outside-the-recording",
            (
                "twin",
                "{dir}/snap",
                "--out",
                "{dir}/t.yaml",
                "--window",
                "2020-01-01T00:00Z..2020-01-02T00:00Z",
            ),
            "--window: fewer than two sample times in the window; the recording of prod-eu spans "
            "2025-01-02T00:00:00Z..2025-01-02T00:00:00Z (got '2020-01-01T00:00:00Z..2020-01-02T00:00:00Z')",
            EU_INGESTED,
        ),
        Case(
            "replay-unknown-cluster",
            ("replay", "{dir}/snap", "-s", "AvgShedder", "--out", "{dir}/out", "--cluster", "prod"),
            "--cluster: no such cluster in the ingest output (got 'prod'); did you mean 'prod-eu'?",
            EU_INGESTED,
        ),
        # strategy_config of the recorded pair was not compared: both were tuned as one recorded configuration
        Case(
            "tune-scenarios-disagree-on-strategy-config",
            ("tune", "{dir}/a.yaml", "{dir}/b.yaml", "--out", "{dir}/out"),
            "strategy_config.AvgShedder.maxUnloadPercentage: the scenarios disagree on the recorded "
            "configuration",
            {
                "a.yaml": scenario("strategy: AvgShedder\n"),
                "b.yaml": scenario(
                    "strategy: AvgShedder\nstrategy_config: {AvgShedder: {maxUnloadPercentage: 0.5}}\n"
                ).replace(b"name: small", b"name: other"),
            },
        ),
        # a swept grid's pip364 section was checked 5 s in, after Spark had started
        Case(
            "evaluate-bad-pip364-in-sweep-json",
            ("evaluate", "{dir}/sw"),
            "sweep.json: grids[0].pip364.bogus: expected a mapping",
            {
                "sw/runs/_SUCCESS": b"",
                "sw/sweep.json": b'{"grids": [{"name": "g", "scenarios": {}, "pip364": {"bogus": 5}}]}',
            },
        ),
        Case(
            "ingest-damaged-parquet",
            ("ingest", "{dir}/snap", "--out", "{dir}/out"),
            "part-0.parquet: damaged Parquet file",
            INGESTED,
        ),
        Case(
            "ingest-java-home-without-java",
            ("ingest", "{dir}/r.jsonl", "--out", "{dir}/out"),
            "JAVA_HOME",
            {"r.jsonl": b"{}\n"},
        ),
    ],
}

ALL = [(group, case) for group, cases in CASES.items() for case in cases]


def _materialise(case: Case, folder: Path) -> list[str]:
    for name, data in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return [arg.replace("{dir}", str(folder)) for arg in case.args]


def _run(case: Case, folder: Path) -> subprocess.CompletedProcess[str]:
    folder.mkdir(parents=True, exist_ok=True)
    args = _materialise(case, folder)
    env = {**os.environ, "COLUMNS": "200", "JAVA_HOME": str(folder / "no-java")}
    return subprocess.run(
        [sys.executable, "-m", "shedlab", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
        cwd=folder,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, subprocess.CompletedProcess[str]]:
    """Every case run once, four at a time (each is a fresh interpreter)."""
    base = tmp_path_factory.mktemp("bad-inputs")
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {case.id: pool.submit(_run, case, base / case.id) for _, case in ALL}
        return {name: future.result() for name, future in futures.items()}


def test_the_table_is_big_enough() -> None:
    assert len(ALL) >= 60
    assert len({case.id for _, case in ALL}) == len(ALL), "case ids must be unique"


@pytest.mark.parametrize(("group", "case"), ALL, ids=[f"{g.split()[0]}:{c.id}" for g, c in ALL])
def test_bad_input_is_one_clear_line(
    group: str, case: Case, outcomes: dict[str, subprocess.CompletedProcess[str]]
) -> None:
    run = outcomes[case.id]
    stderr = run.stderr
    assert "Traceback" not in stderr, stderr
    assert "Exception in thread" not in stderr and "at org.apache" not in stderr, stderr
    assert run.returncode == 2, f"exit {run.returncode}: {stderr}"
    line = stderr.rstrip("\n")
    assert line and "\n" not in line, f"not one line: {stderr!r}"
    assert line.startswith("error: "), line
    assert case.names in line, f"{case.names!r} not in {line!r}"
    assert len(line) <= MAX_LINE, f"{len(line)} characters: {line[:300]!r}…"


def test_a_byte_order_mark_is_fine(tmp_path: Path) -> None:
    """UTF-16 and UTF-8-with-BOM files are read, not refused (the other half of the encodings class)."""
    conf = tmp_path / "broker.conf"
    conf.write_bytes("maxUnloadPercentage=0.7\n".encode("utf-16"))
    snap = tmp_path / "snap.json"
    snap.write_bytes(codecs.BOM_UTF8 + SNAPSHOT.encode())
    run = subprocess.run(
        [sys.executable, "-m", "shedlab", "decide", str(snap), "--config", str(conf), "--json"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["strategy"]
