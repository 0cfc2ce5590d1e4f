"""Issue 12's fidelity mechanisms, each tested for its effect on a run (not only for being parsed).

Skipped decisions as records; the broker CPU model (connections, co-located bookies); topics hashed into
namespace bundles; the initial state placed through the strategies, leader state and warm-up.
"""

from __future__ import annotations

import json
from functools import cache

import pandas as pd

from shedlab.core.sim import Scenario, SimulationResult, load_scenario, run_simulation
from shedlab.strategies import SkipKind

THRESHOLD_LRUWW = "ThresholdShedder+LeastResourceUsageWithWeight"
AVG = "AvgShedder"


@cache
def run(scenario: str, strategy: str) -> SimulationResult:
    return run_simulation(load_scenario(scenario), strategy=strategy)


# ------------------------------------------------------------------------------ 5. skipped decisions


def test_random_placement_fallbacks_are_counted_per_tick_like_the_decisions_show_them() -> None:
    """LeastResourceUsageWithWeight's "all brokers overloaded" fallback, counted without parsing text."""
    result = run("homogeneous-gap", THRESHOLD_LRUWW)
    d = result.decisions
    rules = d["reason"].map(lambda r: json.loads(r)["placement"]["rule"])
    expected = d[rules.str.startswith("no broker clearly below average")].groupby("tick").size()
    skips = result.skips
    fallbacks = skips[skips["kind"] == SkipKind.RANDOM_FALLBACK.value]
    assert len(fallbacks) > 0
    assert set(fallbacks["role"]) == {"placement"}
    assert fallbacks.groupby("tick")["count"].sum().to_dict() == expected.to_dict()
    # the broker column is where each random choice landed, a broker of the cluster
    assert fallbacks["broker"].isin(result.brokers["broker"]).all()


def test_avg_shedder_hit_counts_not_reached_precede_its_first_unload() -> None:
    result = run("homogeneous-gap", AVG)
    first = int(result.decisions["tick"].min())
    source = result.decisions["source"].iloc[0]
    skips = result.skips
    waiting = skips[(skips["kind"] == SkipKind.HIT_COUNT_NOT_REACHED.value) & (skips["tick"] < first)]
    assert source in set(waiting["broker"])
    assert (waiting["count"] >= 1).all()
    assert waiting["message"].eq(SkipKind.HIT_COUNT_NOT_REACHED.message).all()


def test_threshold_shedder_below_the_minimum_throughput_skips_instead_of_unloading() -> None:
    base = load_scenario("homogeneous-gap")
    scenario = Scenario.from_mapping(
        {
            "name": "min-throughput",
            "duration": "10m",
            "strategy": THRESHOLD_LRUWW,
            "config": {"loadBalancerBundleUnloadMinThroughputThreshold": 100000},
            "brokers": [{"count": 5}],
            "workloads": [w for w in _raw_workloads(base)],
        }
    )
    result = run_simulation(scenario)
    assert result.decisions.empty
    below = result.skips[result.skips["kind"] == SkipKind.BELOW_MIN_THROUGHPUT.value]
    assert len(below) > 0 and set(below["role"]) == {"shedding"}
    # one record per skipped broker and tick: counts are per (tick, kind, broker)
    assert not below.duplicated(["tick", "kind", "broker"]).any()


def test_skips_table_is_written_next_to_the_decisions(tmp_path: object) -> None:
    from pathlib import Path

    out = Path(str(tmp_path))
    run("homogeneous-gap", AVG).write(out)
    frame = pd.read_parquet(out / "skips.parquet")
    assert list(frame.columns) == ["tick", "time_s", "role", "kind", "broker", "count", "message"]
    assert frame["count"].sum() > 0


def _raw_workloads(scenario: Scenario) -> list[dict[str, object]]:
    """The built-in's workloads as mappings (pinned loads), to reuse them in a variant scenario."""
    return [
        {
            "name": w.name,
            "tenant_prefix": w.tenant_prefix,
            "bundles": w.bundles,
            "msg_rate_in": w.msg_rate_in.to_dict(),
            "msg_size": w.msg_size.to_dict(),
            "topics": w.topics.to_dict(),
            "brokers": list(w.brokers),
        }
        for w in scenario.workloads
    ]


# ------------------------------------------------------------------------------------ 2. broker CPU model

COLOCATED = {
    "cores": 8,
    "cpu_us_per_msg": 20,
    "cpu_ms_per_mib": 32,
    "cpu_ms_per_topic": 0.3,
    "cpu_ms_per_producer": 0.14,
    "cpu_ms_per_consumer": 0.14,
    "bookies": 1,
    "bookie_cpu_us_per_entry": 20,
    "bookie_cpu_ms_per_mib": 40,
}


def _cpu_scenario(hardware: dict[str, float], big_shapes: list[dict[str, object]] | None = None) -> Scenario:
    return Scenario.from_mapping(
        {
            "name": "cpu-model",
            "duration": "10m",
            "config": {"loadBalancerSheddingEnabled": False},
            "hardware": {"standard": hardware},
            "brokers": [{"count": 3}],
            "workloads": [
                {"name": "many-small", "tenant_prefix": "small", "bundles": 4, "topics": 1000,
                 "msg_rate_in": 1536, "msg_size": 1024, "brokers": [1]},
                {"name": "few-big", "tenant_prefix": "big", "bundles": 4, "topics": 4, "msg_rate_in": 1664,
                 "msg_size": 4096, "brokers": [2], "shapes": big_shapes or []},
                {"name": "rest", "tenant_prefix": "rest", "bundles": 4, "topics": 10, "msg_rate_in": 960,
                 "msg_size": 4096, "brokers": [3]},
            ],
        }
    )  # fmt: skip


def _cpu_at(result: SimulationResult, tick: int) -> dict[str, tuple[float, float]]:
    rows = result.brokers[result.brokers["tick"] == tick]
    return {
        b: (cpu, tp / 2**20)
        for b, cpu, tp in zip(rows["broker"], rows["cpu_pct"], rows["throughput"], strict=True)
    }


def test_connections_and_colocated_bookies_put_57_percent_at_12_mib_next_to_45_at_52() -> None:
    """The real-cluster observation, from costs alone: no hand-set background on any machine."""
    at = _cpu_at(run_simulation(_cpu_scenario(COLOCATED)), 1)
    small_cpu, small_mib = at["broker-0001:8080"]
    big_cpu, big_mib = at["broker-0002:8080"]
    assert (round(small_mib), round(big_mib)) == (12, 52)
    assert round(small_cpu) == 57 and round(big_cpu) == 45
    # with the traffic-linear model alone, the broker carrying more bytes is the busier one
    plain = {k: v for k, v in COLOCATED.items() if k in ("cores", "cpu_us_per_msg", "cpu_ms_per_mib")}
    at = _cpu_at(run_simulation(_cpu_scenario(plain)), 1)
    assert at["broker-0001:8080"][0] < at["broker-0002:8080"][0]


def test_a_colocated_bookie_burns_cpu_in_step_with_the_clusters_traffic() -> None:
    """Broker 1's own traffic is constant; broker 2's triples: broker 1's bookie (and CPU) follows."""
    ramp = [{"kind": "step", "at": "5m", "factor": 3}]
    result = run_simulation(_cpu_scenario(COLOCATED, ramp))
    before, after = _cpu_at(result, 4), _cpu_at(result, 6)
    assert before["broker-0001:8080"][1] == after["broker-0001:8080"][1]  # same own traffic
    assert after["broker-0001:8080"][0] > before["broker-0001:8080"][0] + 10
    without = {**COLOCATED, "bookies": 0}
    result = run_simulation(_cpu_scenario(without, ramp))
    assert _cpu_at(result, 6)["broker-0001:8080"][0] == _cpu_at(result, 4)["broker-0001:8080"][0]
