"""The cluster state: broker slot layout, broker ids, report arrays, background draws and true usage."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shedlab.core.sim.hardware import HardwareClass
from shedlab.core.sim.scenario import Background, Scenario
from shedlab.core.sim.state import (
    NEVER,
    ClusterState,
    Reports,
    broker_ids,
    broker_layout,
    measure,
)
from shedlab.core.sim.traffic import Signal, Traffic, build_population


def scenario(**overrides: Any) -> Scenario:
    doc: dict[str, Any] = {
        "name": "state",
        "duration": "10m",
        "hardware": {"big": {"cores": 32}},
        "brokers": [{"count": 2}, {"count": 1, "hardware": "big", "background": {"cpu": 0.1}}],
        "workloads": [{"tenants": 1, "namespaces": 1, "bundles": 3}],
    }
    doc.update(overrides)
    return Scenario.from_mapping(doc, source="test")


def test_layout_puts_initial_groups_first_then_added_brokers_in_time_order() -> None:
    s = scenario(
        events=[
            {"at": "8m", "kind": "add_brokers", "count": 1},
            {"at": "2m", "kind": "add_brokers", "count": 2, "hardware": "big"},
        ]
    )
    layout = broker_layout(s)
    assert layout.initial_slots == [0, 1, 2]
    # the event at 2 min (index 1) gets slots 3-4 although it is listed second
    assert layout.add_slots == {1: [3, 4], 0: [5]}
    assert [h.cores for h in layout.hardware] == [16.0, 16.0, 32.0, 32.0, 32.0, 16.0]
    assert layout.background[2].cpu.value(0.0, np.random.default_rng(0)) == 0.1


def test_broker_ids_are_zero_padded_to_sort_in_slot_order() -> None:
    assert broker_ids(3) == ["broker-0001:8080", "broker-0002:8080", "broker-0003:8080"]
    assert broker_ids(12345)[-1] == "broker-12345:8080"


def test_empty_reports_list_no_bundles() -> None:
    r = Reports.empty(2, 3)
    assert r.usage.shape == (2, 5) and r.agg.shape == (2, 4) and r.bundle_values.shape == (4, 3)
    assert r.bundle_owner.tolist() == [-1, -1, -1]
    assert not r.usage.any() and not r.bundles.any()


def cluster_of(
    hardware: list[HardwareClass], bundles: int, background: list[Background] | None = None
) -> ClusterState:
    layout = broker_layout(scenario())
    layout.hardware = hardware
    layout.background = background or [Background() for _ in hardware]
    return ClusterState.new(layout, bundles)


def test_new_cluster_is_empty() -> None:
    c = cluster_of([HardwareClass(), HardwareClass()], 4)
    assert c.num_slots == 2 and c.slot_of == {"broker-0001:8080": 0, "broker-0002:8080": 1}
    assert not c.alive.any() and c.leader is None
    assert c.owner.tolist() == [-1] * 4 and (c.lookup_at == NEVER).all()


def test_background_is_shared_for_constant_definitions_and_drawn_per_slot_otherwise() -> None:
    shared = Background(cpu=Signal.constant(0.25))
    noisy = Background(cpu=Signal("constant", (("value", 0.5),), noise=0.1))
    c = cluster_of([HardwareClass()] * 4, 1, [shared, shared, noisy, noisy])
    out = c.background_at(np.array([0, 1, 2, 3], dtype=np.int64), 0.0, np.random.default_rng(1))
    assert out.shape == (4, 3)
    assert out[0].tolist() == out[1].tolist() == [0.25, 0.0, 0.0]
    assert out[2, 0] != out[3, 0]  # a varying signal draws for every slot


def test_measure_sums_owned_bundles_per_broker_and_skips_unowned_ones() -> None:
    pop = build_population(scenario().workloads, np.random.default_rng(0))
    assert pop.size == 3
    c = cluster_of([HardwareClass(), HardwareClass(cores=8)], pop.size)
    c.alive[:] = True
    c.owner[:] = [1, 1, -1]
    traffic = Traffic(
        rate_in=np.array([10.0, 20.0, 1000.0]),
        rate_out=np.array([1.0, 2.0, 1000.0]),
        tp_in=np.array([100.0, 200.0, 1000.0]),
        tp_out=np.array([5.0, 6.0, 1000.0]),
    )
    true = measure(c, pop, traffic, 0.0, np.random.default_rng(0), (1.0, 1.0, 1.0, 1.0))
    assert true.slots.tolist() == [0, 1]
    assert true.slot_agg.tolist() == [[0.0, 0.0, 0.0, 0.0], [30.0, 3.0, 300.0, 11.0]]
    assert true.agg.tolist() == true.slot_agg.tolist()
    assert true.bundles.tolist() == [0, 2]
    assert true.topics.tolist() == [0, int(pop.topics[0] + pop.topics[1])]
    assert true.slot_consumers[1] == pop.consumers[0] + pop.consumers[1]
    assert true.bundle_bin.tolist() == [1, 1, 2]  # the overflow bin for the unowned bundle
    expected = c.cost.usage(
        true.slots, np.array([0.0, 30.0]), np.array([0.0, 3.0]), np.array([0.0, 300.0]),
        np.array([0.0, 11.0]), true.topics.astype(float), np.zeros((2, 3)),
    )  # fmt: skip
    np.testing.assert_array_equal(true.usage, expected)
    assert true.limit[1, 0] == 800.0  # 8 cores
    assert true.score.shape == (2,) and true.score[1] > true.score[0]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rounds=st.integers(1, 6), moved=st.sampled_from([0.0, 0.02, 0.5, 1.0]))
def test_owner_counts_kept_up_to_date_equal_a_full_count(seed: int, rounds: int, moved: float) -> None:
    """Counts updated from the bundles that moved equal four bincounts over every bundle, call after call."""
    s = scenario(
        workloads=[
            {"tenants": 2, "namespaces": 3, "bundles": 16, "topics": {"dist": "uniform", "low": 1, "high": 9}}
        ]
    )
    rng = np.random.default_rng(seed)
    pop = build_population(s.workloads, rng)
    cluster = ClusterState.new(broker_layout(s), pop.size)
    n = cluster.num_slots
    bins = rng.integers(0, n + 1, pop.size)
    for _ in range(rounds):
        got = cluster.owner_counts(bins, pop)
        want = [np.bincount(bins, minlength=n + 1)[:n]] + [
            np.bincount(bins, weights=w, minlength=n + 1)[:n].astype(np.int64)
            for w in (pop.topics, pop.consumers, pop.producers)
        ]
        assert [g.tolist() for g in got] == [w.tolist() for w in want]
        bins = np.where(rng.random(pop.size) < moved, rng.integers(0, n + 1, pop.size), bins)
