"""Issue 12's fidelity mechanisms, each tested for its effect on a run (not only for being parsed).

Skipped decisions as records; the broker CPU model (connections, co-located bookies); topics hashed into
namespace bundles; the initial state placed through the strategies, leader state and warm-up.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.resources
import json
from collections import Counter
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from shedlab.core.local_parquet import read_local_parquet
from shedlab.core.sim import Scenario, SimulationResult, load_scenario, run_simulation
from shedlab.core.sim.kernel import Simulation
from shedlab.errors import InputError
from shedlab.model.bundles import bundle_name, bundle_of_topic, even_boundaries, even_ranges, parse_range
from shedlab.strategies import AvgShedder, LeastResourceUsageWithWeight, SkipKind

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
    frame = read_local_parquet(out / "skips.parquet")
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


# ------------------------------------------------------------------- 1. initial state through the strategies


@cache
def _builtin_mapping(name: str) -> dict[str, Any]:
    text = importlib.resources.files("shedlab").joinpath("data", "scenarios", f"{name}.yaml").read_text()
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def _variant(name: str, **changes: Any) -> Scenario:
    data = copy.deepcopy(_builtin_mapping(name))
    for key, value in changes.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and key in data else value
    return Scenario.from_mapping(data, source=f"variant of {name}")


def _started(scenario: Scenario, strategy: str) -> Simulation:
    sim = Simulation(scenario, strategy=strategy)
    sim.tick(0, sim.start_ms)
    return sim


def test_a_pinned_start_placed_by_least_resource_usage_with_weight_leaves_its_history_behind() -> None:
    direct = _started(_variant("homogeneous-gap"), THRESHOLD_LRUWW)
    placed = _started(
        _variant("homogeneous-gap", simulation={"pinned_placement": "strategy"}), THRESHOLD_LRUWW
    )
    assert isinstance(direct.manager.placement, LeastResourceUsageWithWeight)
    assert isinstance(placed.manager.placement, LeastResourceUsageWithWeight)
    assert direct.manager.placement.history == {}
    assert set(placed.manager.placement.history) == set(placed.cluster.ids[:5])
    # the same ownership: every pinned bundle was looked up, restricted to its broker
    assert (placed.cluster.owner == direct.cluster.owner).all()
    assert placed.metrics.lookup_paths["placement"] == placed.pop.size
    assert direct.metrics.lookup_paths["placement"] == 0


def test_a_pinned_start_placed_by_avg_shedder_plans_every_bundle_on_its_broker() -> None:
    placed = _started(_variant("homogeneous-gap", simulation={"pinned_placement": "strategy"}), AVG)
    strategy = placed.manager.placement
    assert isinstance(strategy, AvgShedder)
    owner_of = {placed.pop.names[j]: placed.cluster.ids[s] for j, s in enumerate(placed.cluster.owner)}
    assert strategy.planned_destinations == owner_of


def test_a_seeded_usage_history_makes_threshold_shedder_over_unload_a_balanced_cluster() -> None:
    """A leader remembering broker 1 at 90 % keeps shedding it although all five brokers are equal."""
    even = [
        {"name": f"w{b}", "tenant_prefix": f"w{b}", "namespaces": 4, "bundles": 4, "brokers": [b],
         "msg_rate_in": 20000, "msg_size": 1024}
        for b in range(1, 6)
    ]  # fmt: skip
    plain = _variant("homogeneous-gap", strategy=THRESHOLD_LRUWW, workloads=even)
    seeded = _variant(
        "homogeneous-gap",
        strategy=THRESHOLD_LRUWW,
        workloads=even,
        leader_state={"brokers": [{"broker": 1, "usage_history": 0.9}]},
    )
    assert run_simulation(plain).decisions.empty
    d = run_simulation(seeded).decisions
    first = d[d["tick"] == d["tick"].min()]
    assert int(first["tick"].iloc[0]) == 1 and set(first["source"]) == {"broker-0001:8080"}
    assert json.loads(first["reason"].iloc[0])["usage_history"] > 0.5


def test_seeded_hit_counters_let_avg_shedder_act_one_cycle_earlier() -> None:
    plain = run_simulation(_variant("homogeneous-gap"))
    hits = {"brokers": [{"broker": 1, "hit_high": 1}, {"broker": 5, "hit_high": 1}]}
    seeded = run_simulation(_variant("homogeneous-gap", leader_state=hits))
    assert int(seeded.decisions["tick"].min()) == int(plain.decisions["tick"].min()) - 1


def test_bundles_unloaded_before_the_start_wait_out_their_grace_period() -> None:
    recent = {"recently_unloaded": [{"select": {"workloads": ["b5"]}, "ago": "10m"}]}
    plain = run_simulation(_variant("homogeneous-gap"))
    seeded = run_simulation(_variant("homogeneous-gap", leader_state=recent))
    hot = "broker-0005:8080"
    assert (plain.decisions["source"] == hot).any()
    early = seeded.decisions[seeded.decisions["time_s"] < 20 * 60]  # grace 30 min, unloaded 10 min ago
    assert not (early["source"] == hot).any()


def test_the_warm_up_is_left_out_of_the_summary_but_not_out_of_the_tables() -> None:
    plain = run_simulation(_variant("homogeneous-gap"))
    warm = run_simulation(_variant("homogeneous-gap", metrics={"warmup": "5m"}))
    pd.testing.assert_frame_equal(plain.decisions, warm.decisions)
    after = plain.decisions[plain.decisions["time_s"] >= 300]
    assert warm.summary["unloads"] == len(after) < plain.summary["unloads"]
    assert warm.summary["unload_bundle_total"] == len(after)
    assert warm.summary["ticks"] == int((plain.ticks["time_s"] >= 300).sum())
    assert warm.summary["warmup_s"] == 300.0 and "warmup_s" not in plain.summary


def test_a_warm_up_longer_than_the_run_leaves_nothing_in_the_summary() -> None:
    # the counters (lookups, unload totals, repeat moves) were those of the whole run
    doc: dict[str, Any] = {
        "name": "long-warm-up",
        "duration": "10m",
        "brokers": [{"count": 3}],
        "workloads": [{"bundles": 12, "msg_rate_in": 20000, "brokers": [1]}],
    }
    plain = run_simulation(Scenario.from_mapping(doc), strategy="ThresholdShedder+LeastLongTermMessageRate")
    assert plain.summary["lookups"] > 0 and plain.summary["unload_bundle_total"] > 0
    # a scenario file's is refused at load (no tick to measure); the kernel's guard stays for a built one
    with pytest.raises(InputError, match=r"metrics\.warmup: leaves no tick to measure"):
        Scenario.from_mapping({**doc, "metrics": {"warmup": "30m"}})
    scenario = Scenario.from_mapping(doc)
    built = dataclasses.replace(scenario, metrics=dataclasses.replace(scenario.metrics, warmup=1800.0))
    warm = run_simulation(built, strategy="ThresholdShedder+LeastLongTermMessageRate")
    assert warm.summary["ticks"] == 0 and warm.summary["unloads"] == 0
    counted = ("lookups", "unload_bundle_total", "unload_broker_total", "moved_again_within_grace")
    assert {key: warm.summary[key] for key in counted} == dict.fromkeys(counted, 0)


# ------------------------------------------------------------------------------ 3. topics hashed into bundles


def _hashed(workloads: list[dict[str, Any]], **extra: Any) -> Scenario:
    return Scenario.from_mapping(
        {
            "name": "hashed",
            "duration": "10m",
            "brokers": [{"count": 2}],
            "simulation": {"initial_assignment": "round_robin"},
            "workloads": workloads,
            **extra,
        }
    )


ORDERS = {
    "name": "orders",
    "namespace": "shop/events",
    "bundles": 8,
    "hashed": {"topics": 20, "partitions": 4, "prefix": "orders"},
    "producers": 2,
    "consumers": 3,
    "msg_rate_in": 400,
    "msg_size": 1024,
}
AUDIT = {
    "name": "audit",
    "namespace": "shop/events",
    "bundles": 8,
    "hashed": {"topics": 50, "prefix": "audit"},
    "msg_rate_in": 10,
    "msg_size": 256,
}


def test_topic_partitions_land_in_the_bundles_pulsars_hash_puts_them_in() -> None:
    pop = Simulation(_hashed([ORDERS])).pop
    boundaries = even_boundaries(8)
    partitions = [
        f"persistent://shop/events/orders-{i:04d}-partition-{k}" for i in range(20) for k in range(4)
    ]
    expected = Counter(bundle_of_topic(t, boundaries) for t in partitions)
    ranges = even_ranges(8)
    names = [bundle_name("shop/events", *ranges[b]) for b in sorted(expected)]
    assert list(pop.names) == names  # bundles no partition hashes into stay out
    assert pop.topics.tolist() == [expected[b] for b in sorted(expected)]
    # a topic's 400 msg/s is split over its 4 partitions; its clients connect to every partition
    assert pop.base_rate_in.tolist() == [100.0 * expected[b] for b in sorted(expected)]
    assert pop.producers.tolist() == [2 * expected[b] for b in sorted(expected)]
    assert pop.consumers.tolist() == [3 * expected[b] for b in sorted(expected)]


def test_two_workloads_sharing_a_namespace_add_up_in_its_bundles() -> None:
    alone = Simulation(_hashed([ORDERS])).pop
    shared = Simulation(_hashed([ORDERS, AUDIT])).pop
    assert shared.units is not None and shared.unit_bundle is not None
    assert set(alone.names) <= set(shared.names)
    audit_topics = Counter(
        bundle_of_topic(f"persistent://shop/events/audit-{i:04d}", even_boundaries(8)) for i in range(50)
    )
    assert int(shared.topics.sum()) == 80 + 50
    ranges = even_ranges(8)
    for j, name in enumerate(shared.names):
        b = ranges.index(parse_range(name.rsplit("/", 1)[1]) or (0, 0))
        orders = alone.base_rate_in[alone.names.index(name)] if name in alone.names else 0.0
        assert shared.base_rate_in[j] == orders + 10.0 * audit_topics[b]
    # the bundle's message size is the rate-weighted mean of its workloads' sizes
    j = int(np.argmax(shared.base_rate_in))
    rates = shared.units.base_rate_in[shared.unit_bundle == j]
    sizes = shared.units.msg_size[shared.unit_bundle == j]
    assert shared.msg_size[j] == float((rates * sizes).sum() / rates.sum())


def test_a_shape_of_one_sharing_workload_moves_only_its_share() -> None:
    step = {**AUDIT, "shapes": [{"kind": "step", "at": "5m", "factor": 10}]}
    result = run_simulation(_hashed([ORDERS, step]))
    total = result.brokers.groupby("tick")["msg_rate_in"].sum()
    assert total[4] == 80 * 100.0 + 50 * 10.0
    assert total[6] == 80 * 100.0 + 50 * 100.0


def test_hashed_workloads_are_checked_when_loaded() -> None:
    with pytest.raises(InputError, match=r"hashed\.topics"):
        _hashed([{**ORDERS, "topics": 3}])
    with pytest.raises(InputError, match="explicit namespace"):
        _hashed([{**ORDERS, "tenants": 2}])
    with pytest.raises(InputError, match="tenant/namespace"):
        _hashed([{**ORDERS, "namespace": "just-one-part"}])
    with pytest.raises(InputError, match="different bundle counts"):
        _hashed([ORDERS, {**AUDIT, "bundles": 4}])


def test_the_extensible_pair_takes_a_pinned_start_and_leader_state() -> None:
    """The extensible manager keeps no modular state: a pinned start still goes through its placement
    (restricted to the pinned broker) and a scenario's leader_state is accepted and ignored."""
    transfer = "TransferShedder+ExtensibleLeastResourceUsageWithWeight"
    direct = _started(_variant("homogeneous-gap"), transfer)
    placed = _started(
        _variant(
            "homogeneous-gap",
            simulation={"pinned_placement": "strategy"},
            leader_state={"brokers": [{"broker": 1, "usage_history": 0.9, "hit_high": 2}]},
        ),
        transfer,
    )
    assert (placed.cluster.owner == direct.cluster.owner).all()
    assert placed.metrics.lookup_paths["placement"] == placed.pop.size
    assert placed.manager.skip_log == []
