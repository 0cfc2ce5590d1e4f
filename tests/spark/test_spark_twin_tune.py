"""The path from a recording to a recommendation, on Spark, against known truth.

A scenario written here (not the demo's) is simulated with recording on; the recording goes through
ingest, ``twin`` and ``tune``. The twin must recover what the scenario says (broker count, machine
sizes and costs, background load, every bundle's traffic level, the joining and the leaving broker)
within the tolerances stated below, fit the recording by its own fit report, and the recommended
configuration must beat the recorded one on the objective both in the twin and in the scenario that
produced the recording.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from shedlab.core.sim.scenario import parse_scenario_text

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

PRODUCER = """
name: held-out-producer
duration: 3h
seed: 77
strategy: ThresholdShedder+LeastLongTermMessageRate
simulation: {tick: 60s, cluster: held-out}
hardware:
  small: {cores: 8, nic_gbps: 10, cpu_us_per_msg: 12, cpu_ms_per_mib: 3}
  large: {cores: 32, nic_gbps: 25, cpu_us_per_msg: 12, cpu_ms_per_mib: 3}
brokers:
  - {count: 2, hardware: small}
  - {count: 1, hardware: small, background: {cpu: 0.1}}
  - {count: 2, hardware: large}
workloads:
  - name: shop
    tenant_prefix: shop
    bundles: 16
    topics: {dist: uniform, low: 2, high: 20}
    msg_rate_in: {dist: lognormal, median: 9000, sigma: 0.5}
    msg_size: 2048
    fanout: 2
    brokers: [1, 2, 3]
    shapes: [{kind: noise, sigma: 0.1}]
  - name: logs
    tenant_prefix: logs
    bundles: 8
    topics: 5
    msg_rate_in: {dist: lognormal, median: 20000, sigma: 0.4}
    msg_size: 512
    brokers: [1, 2]
    shapes:
      - {kind: diurnal, amplitude: 0.3, period: 1d, peak: 2h}
      - {kind: noise, sigma: 0.05}
events:
  - {at: 1h, kind: add_brokers, count: 1, hardware: small}
  - {at: 2h, kind: remove_brokers, brokers: [2]}
"""

SPACE = """
ThresholdShedder+LeastLongTermMessageRate:
  loadBalancerBrokerThresholdShedderPercentage: [5, 10, 20]
  loadBalancerHistoryResourcePercentage: [0.5, 0.9]
ThresholdShedder+LeastResourceUsageWithWeight:
  loadBalancerBrokerThresholdShedderPercentage: [5, 10, 20]
  loadBalancerHistoryResourcePercentage: [0.5, 0.9]
"""

# Stated tolerances of the recovery (docs/twin.md repeats them)
LEVEL_TOLERANCE = 0.05  # relative error of each bundle's mean message rate in
COST_TOLERANCE = 0.10  # relative error of the CPU cost per message
BACKGROUND_TOLERANCE = 0.03  # absolute error of a background CPU share


@pytest.fixture(scope="module")
def path(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from shedlab.core.grid import scenario_ref
    from shedlab.core.sim.kernel import Simulation
    from shedlab.core.sim.recording import iter_load_reports
    from shedlab.core.tune import load_space
    from shedlab.spark.ingest import ingest
    from shedlab.spark.tune import tune
    from shedlab.spark.twin import fit, validate

    root = tmp_path_factory.mktemp("twin")
    producer = parse_scenario_text(PRODUCER, "producer")
    sim = Simulation(producer, record=True)
    result = sim.run()
    lines = [json.dumps(r) for r in iter_load_reports(result)]
    (root / "rec").mkdir()
    (root / "rec" / "load-reports.jsonl").write_text("\n".join(lines) + "\n")
    ingest(spark, [str(root / "rec")], str(root / "snap"))
    twin = fit(spark, str(root / "snap"), strategy=producer.strategy, config={})
    twin_path = root / "twin.yaml"
    twin_path.write_text(twin.fit.text)
    validation = validate(spark, twin, str(twin_path), str(root / "fit"), seeds=5)
    (root / "producer.yaml").write_text(PRODUCER)
    (root / "space.yaml").write_text(SPACE)
    space = load_space(root / "space.yaml")
    tuned = tune(
        spark,
        [scenario_ref(str(twin_path))],
        str(root / "tune"),
        pairs=["ThresholdShedder+LeastLongTermMessageRate", "ThresholdShedder+LeastResourceUsageWithWeight"],
        space=space,
        seeds=3,
        objective="imbalance",
        per_pair=7,
    )
    return {
        "root": root,
        "sim": sim,
        "twin": twin,
        "validation": validation,
        "tune": tuned,
        "producer": producer,
    }


def test_twin_recovers_brokers_machines_and_events(path: dict[str, Any]) -> None:
    scenario = path["twin"].fit.scenario
    assert len(path["twin"].fit.broker_numbers) == 6  # five at the start, one joins
    assert len(scenario["brokers"]) == 5
    cores = sorted(c["cores"] for c in scenario["hardware"].values())
    assert cores == [8, 32]
    for cls in scenario["hardware"].values():
        assert abs(cls["cpu_us_per_msg"] - 12) <= 12 * COST_TOLERANCE
    small = next(name for name, c in scenario["hardware"].items() if c["cores"] == 8)
    assert [g["hardware"] == small for g in scenario["brokers"]] == [True, True, True, False, False]
    background = scenario["brokers"][2].get("background", {}).get("cpu", 0)
    value = background["value"] if isinstance(background, dict) else background
    assert abs(value - 0.1) <= BACKGROUND_TOLERANCE
    for group in (scenario["brokers"][0], scenario["brokers"][3]):
        bg = group.get("background", {}).get("cpu", 0)
        assert (bg["value"] if isinstance(bg, dict) else bg) <= BACKGROUND_TOLERANCE
    kinds = [(e["kind"], e["at"]) for e in scenario["events"]]
    assert ("add_brokers", "1h") in kinds
    assert ("remove_brokers", "2h") in kinds


def _diurnal_mean(shapes: list[dict[str, Any]], seconds: float) -> float:
    """The mean of a workload's diurnal factor over the recorded window (1 without one)."""
    from shedlab.units import parse_duration

    t = np.arange(0.0, seconds + 1.0, 60.0)
    for s in shapes:
        if s["kind"] == "diurnal":
            peak, period = parse_duration(s["peak"]), parse_duration(s.get("period", "1d"))
            return float(np.mean(1.0 + float(s["amplitude"]) * np.cos(2 * np.pi * (t - peak) / period)))
    return 1.0


def test_twin_recovers_each_bundle_level(path: dict[str, Any]) -> None:
    """Each bundle's traffic over the recorded window: level × the mean of its diurnal factor. (Over three
    hours, a level and a diurnal amplitude trade off; their product is what the recording determines.)"""
    pop = path["sim"].pop
    true_factor = {
        "shop": 1.0,
        "logs": _diurnal_mean([{"kind": "diurnal", "amplitude": 0.3, "peak": "2h"}], 3 * 3600),
    }
    truth = {n: r * true_factor[n.split("-")[0]] for n, r in zip(pop.names, pop.base_rate_in, strict=True)}
    fitted: dict[str, float] = {}
    for w in path["twin"].fit.scenario["workloads"]:
        names = sorted(b for b in path["twin"].fit.bundle_map if b.startswith(str(w["name"]) + "/"))
        factor = _diurnal_mean(w.get("shapes", []), 3 * 3600)
        fitted.update(zip(names, [v * factor for v in w["msg_rate_in"]["values"]], strict=True))
    assert set(fitted) == set(truth)
    errors = np.array([abs(fitted[b] - truth[b]) / truth[b] for b in truth])
    assert errors.max() <= LEVEL_TOLERANCE, errors


def test_twin_is_a_scenario_and_fits_its_recording(path: dict[str, Any]) -> None:
    twin = parse_scenario_text(path["twin"].fit.text, "twin")
    assert twin.num_bundles == 24
    validation = path["validation"]
    assert validation.fits, validation.markdown
    assert (path["root"] / "fit" / "fit-report.md").read_text().startswith("# Fit report")


def test_recommendation_beats_recorded_in_twin_and_producer(path: dict[str, Any]) -> None:
    from shedlab.core.evaluation import evaluate_expression
    from shedlab.core.sim import run_simulation
    from shedlab.core.tune import DERIVED

    result = path["tune"]
    rec = result.recommendation
    assert not rec.is_recorded
    assert rec.candidate["objective"] < rec.recorded["objective"]
    assert rec.improvement["objective"]["mean"] < 0
    assert result.runs_spent < result.full_grid
    params = json.loads(rec.candidate["params_json"])

    def imbalance(strategy: str, overrides: dict[str, Any]) -> float:
        import pandas as pd

        rows = [
            run_simulation(
                path["producer"], strategy=strategy, config_overrides=overrides or None, seed=s
            ).summary
            for s in (11, 12, 13)  # seeds the tune never saw
        ]
        return float(np.mean(evaluate_expression(DERIVED["imbalance"], pd.DataFrame(rows))))

    recommended = imbalance(str(rec.candidate["strategy"]), params)
    recorded = imbalance(path["producer"].strategy, {})
    assert recommended < recorded


def test_fragment_parses_with_shedlabs_config_reader(path: dict[str, Any]) -> None:
    from shedlab.config import LoadBalancerConfig
    from shedlab.strategies import resolve_config
    from shedlab.strategies.registry import pair_name_of

    conf_path = Path(path["root"]) / "tune" / "recommendation.conf"
    conf = resolve_config(LoadBalancerConfig.from_file(conf_path))
    rec = path["tune"].recommendation
    assert pair_name_of(conf) == rec.candidate["strategy"]
    for key, value in json.loads(rec.candidate["params_json"]).items():
        assert conf.get(key) == pytest.approx(value)
    assert all(line.startswith("#") for line in conf_path.read_text().splitlines()[:3])
