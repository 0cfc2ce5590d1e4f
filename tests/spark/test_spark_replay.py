"""Replay end to end: simulator recording → ingest → replay, checked against the load manager run
directly on snapshots built independently (model objects from the raw JSON), and against the
simulator's own decisions (known truth)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pandas as pd
import pytest

from shedlab.config import LoadBalancerConfig
from shedlab.core.local_parquet import read_local_parquet
from shedlab.manager import LoadManager
from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    TimeAverageBrokerData,
)
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import pair_config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCENARIO = "over-unloading-90-10"
RECORDED_WITH = "ThresholdShedder+LeastLongTermMessageRate"
STRATEGIES = [RECORDED_WITH, "AvgShedder"]


@pytest.fixture(scope="module")
def recorded(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from shedlab.core.replay import strategy_configs
    from shedlab.core.sim import load_scenario, run_simulation
    from shedlab.core.sim.recording import write_recording
    from shedlab.spark.ingest import ingest
    from shedlab.spark.replay import replay

    root = tmp_path_factory.mktemp("replay")
    result = run_simulation(load_scenario(SCENARIO), strategy=RECORDED_WITH, seed=3, record=True)
    write_recording(result, root / "rec")
    ing = ingest(spark, [str(root / "rec" / "load-reports.jsonl")], str(root / "snap"))
    rep = replay(spark, str(root / "snap"), str(root / "out"), strategy_configs(STRATEGIES), seed=1)
    return {"root": root, "sim": result, "ingest": ing, "replay": rep}


def _replayed(root: Path, table: str) -> pd.DataFrame:
    frame = read_local_parquet(root / "out" / table)
    frame["strategy"] = frame["strategy"].astype(str)
    frame["cluster"] = frame["cluster"].astype(str)
    return frame


def _direct_decisions(jsonl: Path, strategy: str, seed: int = 1) -> list[tuple[int, str, str, str]]:
    """The load manager on snapshots built from model objects, one per sample time (the replay's rules)."""
    by_time: dict[int, list[dict[str, Any]]] = {}
    for line in jsonl.read_text().splitlines():
        rec = json.loads(line)
        by_time.setdefault(int(rec["timestamp"]), []).append(rec)
    conf = pair_config(strategy, LoadBalancerConfig())
    manager = LoadManager(conf, seed=seed)
    bundle_data: dict[str, BundleData] = {}
    active: tuple[str, ...] | None = None
    out = []
    for t in sorted(by_time):
        tick = t - t % 60_000
        reports = {r["broker"]: LocalBrokerData.from_json(JsonReader(r["report"], "rec")) for r in by_time[t]}
        reported = {b for local in reports.values() for b in local.lastStats}
        bundle_data = {
            b: d for b, d in bundle_data.items() if b in reported
        }  # updateBundleData drops the rest
        for local in reports.values():
            for name, stats in local.lastStats.items():
                bundle_data.setdefault(name, BundleData()).update(stats)
        brokers = {}
        for broker, local in reports.items():
            average = TimeAverageBrokerData()
            average.reset(list(local.lastStats), bundle_data)
            brokers[broker] = BrokerData(localData=local, timeAverageData=average)
        snapshot = ClusterSnapshot.from_load_data(
            LoadData(brokerData=brokers, bundleData=dict(bundle_data)), now_ms=tick
        )
        if snapshot.broker_ids != active:
            manager.on_active_brokers_change(list(snapshot.broker_ids))
            active = snapshot.broker_ids
        manager.on_bundle_data_update(snapshot)
        for d in manager.do_load_shedding(snapshot, tick):
            out.append((tick, d.source, d.bundle, d.destination))
    return out


def _decisions_of(frame: pd.DataFrame, strategy: str) -> list[tuple[int, str, str, str]]:
    sub = frame[frame["strategy"] == strategy].sort_values(["tick_ms", "seq"])
    return [
        (int(cast(int, r.tick_ms)), cast(str, r.source), cast(str, r.bundle), cast(str, r.destination))
        for r in sub.itertuples()
    ]


@pytest.mark.spark
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_replay_equals_the_manager_run_directly(recorded: dict[str, Any], strategy: str) -> None:
    root: Path = recorded["root"]
    replayed = _decisions_of(_replayed(root, "decisions"), strategy)
    direct = _direct_decisions(root / "rec" / "load-reports.jsonl", strategy)
    assert replayed, "the scenario should make the strategy unload"
    assert replayed == direct


@pytest.mark.spark
def test_replay_matches_the_simulators_truth(recorded: dict[str, Any]) -> None:
    """Replaying the recording with the strategy that produced it finds (almost) the same unloads."""
    root: Path = recorded["root"]
    sim = recorded["sim"].decisions
    replayed = _replayed(root, "decisions")
    mine = replayed[replayed["strategy"] == RECORDED_WITH]
    truth = {(int(cast(float, r.time_s) * 1000), r.bundle) for r in sim.itertuples()}
    t0 = int(mine["tick_ms"].min()) - int(sim["time_s"].min() * 1000)
    found = {(int(cast(int, r.tick_ms)) - t0, r.bundle) for r in mine.itertuples()}
    assert len(truth & found) >= 0.9 * len(truth)
    # and what really happened afterwards is recorded next to each decision
    assert mine["actually_moved"].mean() >= 0.9
    assert (
        mine.loc[mine["actually_moved"], "actual_destination"]
        == mine.loc[mine["actually_moved"], "destination"]
    ).mean() >= 0.9


@pytest.mark.spark
def test_replay_load_estimate_and_comparison(recorded: dict[str, Any]) -> None:
    root: Path = recorded["root"]
    load = _replayed(root, "load")
    decisions = _replayed(root, "decisions")
    comparison = _replayed(root, "comparison")
    ownership = read_local_parquet(root / "out" / "ownership_changes")
    sim_moves = len(recorded["sim"].decisions)
    assert abs(len(ownership) - sim_moves) <= 2  # every unload shows up as an ownership change
    for strategy in STRATEGIES:
        dec = decisions[decisions["strategy"] == strategy]
        lo = load[load["strategy"] == strategy]
        cmp = comparison[comparison["strategy"] == strategy]
        assert cmp["strategy_unloads"].sum() == len(dec)
        assert cmp["actual_moves"].sum() == len(ownership)
        # Moving bundles conserves traffic: per tick the estimated total equals the recorded total.
        totals = lo.groupby("tick_ms")[["throughput", "est_throughput", "bundles", "est_bundles"]].sum()
        assert (totals["throughput"] - totals["est_throughput"]).abs().max() < 1e-6 * totals[
            "throughput"
        ].max()
        assert (totals["bundles"] == totals["est_bundles"]).all()
        # At a tick with unloads the source's estimated usage drops and the destination's rises.
        first = dec.iloc[0]
        at = lo[lo["tick_ms"] == first["tick_ms"]].set_index("broker")
        assert at.loc[first["source"], "est_usage"] < at.loc[first["source"], "usage"]
        assert at.loc[first["destination"], "est_usage"] > at.loc[first["destination"], "usage"]
        assert 0 < first["usage_share"] <= 1
        assert json.loads(first["reason"])  # the strategy's reason, as JSON


@pytest.mark.spark
def test_replay_cli_and_prometheus_recording(
    spark: SparkSession, recorded: dict[str, Any], tmp_path: Path
) -> None:
    """The Prometheus export of the same run ingests to the same ownership, and replays from the CLI."""
    import typer
    from typer.testing import CliRunner

    from shedlab.cli.spark_cmd import register
    from shedlab.spark.ingest import ingest

    root: Path = recorded["root"]
    prom = ingest(spark, [str(root / "rec" / "prometheus")], str(tmp_path / "snap"), web_port=8080)
    assert prom.quarantined_rows == 0
    from_reports = read_local_parquet(root / "snap" / "bundle_samples")[["tick_ms", "bundle", "broker"]]
    from_prom = read_local_parquet(tmp_path / "snap" / "bundle_samples")[["tick_ms", "bundle", "broker"]]
    key = ["tick_ms", "bundle"]
    merged = from_reports.merge(from_prom, on=key, suffixes=("_r", "_p"))
    assert len(merged) == len(from_reports) == len(from_prom)
    assert (merged["broker_r"] == merged["broker_p"]).all()
    app = typer.Typer()
    register(app)
    res = CliRunner().invoke(
        app,
        ["replay", str(tmp_path / "snap"), "--strategies", "AvgShedder", "--out", str(tmp_path / "rp"),
         "--set", "maxUnloadPercentage=0.5"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "strategy would have done" in " ".join(res.output.split())
    cfg = json.loads((tmp_path / "rp" / "replay.json").read_text())
    assert cfg["configs"][0]["overrides"] == {"maxUnloadPercentage": "0.5"}


def test_replay_of_a_cluster_not_in_the_ingest_output_names_it(
    spark: SparkSession, recorded: dict[str, Any]
) -> None:
    """``--cluster`` naming no cluster of the output is refused naming it and the clusters there (it said
    only 'no broker samples to replay', as for an empty output)."""
    from shedlab.core.replay import strategy_configs
    from shedlab.errors import InputError
    from shedlab.spark.replay import replay

    root = recorded["root"]
    with pytest.raises(
        InputError,
        match=r"--cluster: no such cluster in the ingest output \(got 'prod'\); its clusters: sim-cluster",
    ):
        replay(
            spark,
            str(root / "snap"),
            str(root / "out-x"),
            strategy_configs(["AvgShedder"]),
            clusters=["prod"],
        )


def _with_checksum_sidecars(spark: SparkSession, root: Path) -> None:
    """Rewrite every Parquet file under ``root`` through Hadoop's default local filesystem (checksummed),
    which writes the ``.crc`` beside it: the output as Spark writes it with Hadoop's defaults, and as
    shedlab wrote it before it stopped writing checksums."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    hadoop = jvm.org.apache.hadoop
    fs = hadoop.fs.LocalFileSystem()
    fs.initialize(jvm.java.net.URI("file:///"), hadoop.conf.Configuration())
    for path in root.rglob("*.parquet"):
        data = path.read_bytes()
        sink = fs.create(hadoop.fs.Path(str(path)), True)
        sink.write(bytearray(data))
        sink.close()
    assert len(list(root.rglob(".*.parquet.crc"))) == len(list(root.rglob("*.parquet"))) > 0


@pytest.mark.spark
def test_replay_reads_an_ingest_output_whose_file_a_user_rewrote(
    spark: SparkSession, recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A broker_samples file rewritten with pandas beside its stale ``.crc`` sidecar replays as the file it
    replaced (Hadoop's checksummed filesystem failed with ChecksumException and a Java stack), and the
    replay's own output has no sidecars."""
    from py4j.protocol import Py4JJavaError

    from shedlab.cli import main

    snap = tmp_path / "snap"
    shutil.copytree(recorded["root"] / "snap", snap)
    _with_checksum_sidecars(spark, snap)
    edited = next((snap / "broker_samples").rglob("*.parquet"))
    read_local_parquet(edited).to_parquet(edited, index=False)  # same rows, other bytes
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    checksummed = jvm.org.apache.hadoop.fs.LocalFileSystem()
    checksummed.initialize(jvm.java.net.URI("file:///"), jvm.org.apache.hadoop.conf.Configuration())
    stream = checksummed.open(jvm.org.apache.hadoop.fs.Path(str(edited)))
    with pytest.raises(Py4JJavaError, match="ChecksumException"):  # the sidecar is real, and stale
        stream.readFully(0, bytearray(edited.stat().st_size))
    stream.close()
    with pytest.raises(SystemExit) as exit_info:
        main(["replay", str(snap), "-s", "AvgShedder", "--out", str(tmp_path / "out"), "--json"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 0, captured.err
    assert _decisions_of(read_local_parquet(tmp_path / "out" / "decisions"), "AvgShedder") == _decisions_of(
        _replayed(recorded["root"], "decisions"), "AvgShedder"
    )
    assert list((tmp_path / "out").rglob("*.crc")) == []
