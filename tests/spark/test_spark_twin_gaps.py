"""``shedlab twin`` on a recording with a gap (the collector down for 25 minutes): the gap goes from the
fit to the validation, and the fit report compares the twin with the recording outside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from shedlab.core.sim.scenario import parse_scenario_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

PRODUCER = """
name: twin-gaps
duration: 60m
seed: 5
strategy: ThresholdShedder+LeastLongTermMessageRate
simulation: {tick: 60s, cluster: gappy}
hardware:
  standard: {cores: 8, nic_gbps: 10}
brokers:
  - count: 3
workloads:
  - name: main
    bundles: 8
    topics: 4
    msg_rate_in: {dist: lognormal, median: 9000, sigma: 0.5}
    msg_size: 1024
    brokers: [1]
"""

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
