"""``shedlab twin`` on a small recording of constant traffic: the fit, and ``--seeds N`` checking the fit
on N runs of the twin, whatever its validation directory already holds from an earlier, longer check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from builders import recorded_cluster

from shedlab.core.sim.scenario import parse_scenario_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

PRODUCER = recorded_cluster("validate-seeds", duration="30m", seed=3, cluster="small")


@pytest.fixture(scope="module")
def snapshots(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shedlab.core.sim.kernel import Simulation
    from shedlab.core.sim.recording import iter_load_reports
    from shedlab.spark.ingest import ingest

    root = tmp_path_factory.mktemp("constant")
    result = Simulation(parse_scenario_text(PRODUCER, "producer"), record=True).run()
    (root / "rec").mkdir()
    lines = [json.dumps(r) for r in iter_load_reports(result)]
    (root / "rec" / "load-reports.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    ingest(spark, [str(root / "rec")], str(root / "snap"))
    return root / "snap"


def test_a_recording_of_constant_traffic_fits(spark: SparkSession, snapshots: Path) -> None:
    """Every bundle keeps its share of its namespace at every tick: the lag-1 autocorrelation of that
    share is undefined, and Spark's corr() under ANSI SQL raised DIVIDE_BY_ZERO (a traceback)."""
    from shedlab.spark.twin import fit

    twin = fit(spark, str(snapshots), strategy="ThresholdShedder+LeastLongTermMessageRate", config={})
    assert len(twin.fit.broker_numbers) == 3
    assert "autocorrelation nan" not in twin.fit.text


def test_fewer_seeds_than_an_earlier_check_are_the_seeds_used(
    spark: SparkSession, snapshots: Path, tmp_path: Path
) -> None:
    from shedlab.spark.twin import fit, validate

    twin = fit(spark, str(snapshots), strategy="ThresholdShedder+LeastLongTermMessageRate", config={})
    twin_path = tmp_path / "twin.yaml"
    twin_path.write_text(twin.fit.text, encoding="utf-8")
    fresh = validate(spark, twin, str(twin_path), str(tmp_path / "fresh"), seeds=2)
    validate(spark, twin, str(twin_path), str(tmp_path / "reused"), seeds=3)
    reused = validate(spark, twin, str(twin_path), str(tmp_path / "reused"), seeds=2)
    assert reused.doc["seeds"] == 2  # was 3: every run of the directory was read
    assert reused.doc["checks"] == fresh.doc["checks"]
    report = json.loads((tmp_path / "reused" / "fit-report.json").read_text(encoding="utf-8"))
    assert report["seeds"] == 2


def test_a_window_without_samples_names_itself_and_the_recordings_span(
    spark: SparkSession, snapshots: Path
) -> None:
    """The error was '--window: fewer than two sample times in the chosen window': no value, and no word
    of when the recording was, so a window in the wrong day (or year) left nothing to go on."""
    import pandas as pd

    from shedlab.errors import InputError
    from shedlab.spark.twin import fit

    def _utc(ms: int) -> str:
        return str(pd.Timestamp(ms, unit="ms", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ"))

    ticks = spark.read.parquet(str(snapshots / "broker_samples")).select("tick_ms").toPandas()["tick_ms"]
    first, last = int(ticks.min()), int(ticks.max())
    day = 86_400_000
    with pytest.raises(InputError) as caught:
        fit(spark, str(snapshots), window=(first + day, 2**62), strategy="AvgShedder", config={})
    assert str(caught.value) == (
        f"--window: fewer than two sample times in the window; the recording of small spans"
        f" {_utc(first)}..{_utc(last)} (got '{_utc(first + day)}..')"
    )
