"""``shedlab twin`` on a recording with a gap (the collector down for 25 minutes): the gap goes from the
fit to the validation, and the fit report compares the twin with the recording outside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import pytest
from builders import recorded_cluster

from shedlab.core.sim.scenario import parse_scenario_text
from shedlab.core.twin import QUANTILES
from shedlab.spark.twin import _recorded

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

PRODUCER = recorded_cluster("twin-gaps", duration="60m", seed=5, cluster="gappy")

GAP_S = (15 * 60.0, 40 * 60.0)


@pytest.fixture(scope="module")
def snapshots(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shedlab.core.sim.kernel import Simulation
    from shedlab.core.sim.recording import iter_load_reports
    from shedlab.spark.ingest import ingest

    root = tmp_path_factory.mktemp("gappy")
    result = Simulation(parse_scenario_text(PRODUCER, "producer"), record=True).run()
    reports = list(iter_load_reports(result))
    start = min(int(r["timestamp"]) for r in reports)
    kept = [r for r in reports if not GAP_S[0] < (int(r["timestamp"]) - start) / 1000.0 < GAP_S[1]]
    (root / "rec").mkdir()
    (root / "rec" / "load-reports.jsonl").write_text(
        "\n".join(json.dumps(r) for r in kept) + "\n", encoding="utf-8"
    )
    ingest(spark, [str(root / "rec")], str(root / "snap"))
    return root / "snap"


def test_the_gap_goes_from_fit_to_the_fit_report(
    spark: SparkSession, snapshots: Path, tmp_path: Path
) -> None:
    from shedlab.spark.twin import fit, validate

    twin = fit(spark, str(snapshots), strategy="ThresholdShedder+LeastLongTermMessageRate", config={})
    assert twin.fit.gaps.spans == (GAP_S,)
    assert twin.fit.gaps.tick_s == 60.0
    assert any("a gap of the recording" in n for n in twin.fit.notes)
    twin_path = tmp_path / "twin.yaml"
    twin_path.write_text(twin.fit.text, encoding="utf-8")
    result = validate(spark, twin, str(twin_path), str(tmp_path / "fit"), seeds=2)
    report = json.loads((tmp_path / "fit" / "fit-report.json").read_text(encoding="utf-8"))
    assert report["recording_gaps_s"] == [list(GAP_S)]
    assert "1 gap(s) (no broker reported: +15m..+40m)" in result.markdown


def test_the_recordings_broker_quantiles_are_the_ones_the_twins_runs_get(spark: SparkSession) -> None:
    """The recording's per-broker quantiles are taken as the twin's are (pandas' linear interpolation):
    with Spark's ``percentile_approx`` they were a sample near the rank, a few points off the same
    scores' quantiles on the twin's side, so an exact twin did not fit exactly."""
    rng = np.random.default_rng(3)
    rows = [
        {"tick_ms": 60_000 * k, "broker": f"b{b}", "cpu_usage": float(u), "cpu_limit": 100.0}
        for b in range(3)
        for k, u in enumerate(rng.uniform(5, 95, 17))
    ]
    frame = pd.DataFrame(rows)
    for column in ("memory", "bandwidth_in", "bandwidth_out", "direct_memory"):
        frame[f"{column}_usage"], frame[f"{column}_limit"] = 0.0, 100.0
    b = spark.createDataFrame(frame)
    u = spark.createDataFrame(
        pd.DataFrame({"tick_ms": [0], "bundle": ["t/n/0x0_0x1"], "broker": ["b0"],
                      "msg_throughput_in": [1.0], "msg_throughput_out": [1.0]})
    )  # fmt: skip
    _, quantiles, _ = _recorded(b, u, 60_000.0, {})
    expected = frame.assign(score=frame["cpu_usage"]).groupby("broker")["score"].quantile(np.array(QUANTILES))
    for _, row in quantiles.iterrows():
        got = [row[f"q{int(q * 100)}"] for q in QUANTILES]
        assert got == pytest.approx(expected[row["broker"]].tolist(), rel=1e-12)
