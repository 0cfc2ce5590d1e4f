"""Bundles, traffic shapes and the hardware cost model."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from shedlab.core.sim import run_simulation
from shedlab.core.sim.hardware import CostModel, HardwareClass
from shedlab.core.sim.scenario import Scenario, parse_scenario_text
from shedlab.core.sim.spec import Node
from shedlab.core.sim.traffic import (
    Distribution,
    Selector,
    Shape,
    Signal,
    TrafficModel,
    Workload,
    build_population,
    parse_distribution,
    parse_shape,
    ramp_fraction,
)
from shedlab.errors import ShedlabError
from shedlab.model.pulsar import percent_usage


def test_population_names_are_pulsar_names_sorted_and_unique() -> None:
    rng = np.random.default_rng(0)
    pop = build_population(
        [Workload("a", tenants=2, namespaces=3, bundles=4), Workload("b", tenant_prefix="zeta", bundles=2)],
        rng,
    )
    assert pop.size == 2 * 3 * 4 + 2
    assert list(pop.names) == sorted(pop.names)
    assert len(set(pop.names)) == pop.size
    assert pop.names[0] == "tenant-000/ns-0000/0x00000000_0x40000000"
    assert pop.names[-1] == "zeta-000/ns-0000/0x80000000_0xffffffff"
    # arrays follow the sorted names
    assert pop.workloads[pop.workload_index[-1]] == "b"
    assert (pop.topics >= 1).all()


def test_workloads_with_the_same_prefix_continue_tenant_numbers() -> None:
    pop = build_population([Workload("a", bundles=1), Workload("b", bundles=1)], np.random.default_rng(0))
    assert pop.names == (
        "tenant-000/ns-0000/0x00000000_0xffffffff",
        "tenant-001/ns-0000/0x00000000_0xffffffff",
    )


@pytest.mark.parametrize(
    ("spec", "check"),
    [
        ({"dist": "uniform", "low": 10, "high": 20}, lambda v: (v >= 10).all() and (v <= 20).all()),
        ({"dist": "lognormal", "median": 100, "sigma": 1.0}, lambda v: 80 < np.median(v) < 125),
        ({"dist": "pareto", "min": 5, "alpha": 1.5}, lambda v: (v >= 5).all() and v.max() > 50),
        (
            {"dist": "zipf", "max": 1000, "exponent": 1.0},
            lambda v: v.max() == 1000 and np.isclose(v.min(), 1000 / v.size),
        ),
        ({"dist": "choice", "values": [1, 2], "weights": [0, 1]}, lambda v: (v == 2).all()),
        ({"dist": "normal", "mean": 5, "std": 10}, lambda v: (v >= 0).all()),
        (
            {"dist": "uniform", "low": 0, "high": 100, "clip": [10, 20]},
            lambda v: v.min() == 10 and v.max() == 20,
        ),
    ],
)
def test_distributions(
    spec: dict[str, object], check: Callable[[NDArray[np.float64]], bool | np.bool]
) -> None:
    dist = parse_distribution(Node({"x": spec}, "test", ""), "x", Distribution.constant(1))
    values = dist.sample(np.random.default_rng(1), 2000)
    assert check(values)


def test_number_is_a_constant_distribution() -> None:
    dist = parse_distribution(Node({"x": 7}, "test", ""), "x", Distribution.constant(1))
    assert dist == Distribution.constant(7)


def _model(shapes: list[Shape], n: int = 50, tick: float = 60.0) -> TrafficModel:
    pop = build_population(
        [Workload("w", namespaces=1, bundles=n, msg_rate_in=Distribution.constant(100))],
        np.random.default_rng(0),
    )
    return TrafficModel(pop, [(s, None) for s in shapes], np.random.default_rng(1), tick)


def test_constant_traffic_and_throughput_from_message_size() -> None:
    t = _model([]).at(0.0)
    assert np.allclose(t.rate_in, 100) and np.allclose(t.rate_out, 100)
    assert np.allclose(t.tp_in, 100 * 1024)


def test_diurnal_ramp_and_step() -> None:
    diurnal = Shape("diurnal", (("amplitude", 0.5), ("period", 86400.0), ("peak", 0.0)))
    model = _model([diurnal])
    assert np.allclose(model.at(0.0).rate_in, 150)
    assert np.allclose(model.at(43200.0).rate_in, 50)
    ramp = Shape("ramp", (("start", 0.0), ("end", 100.0), ("from", 1.0), ("to", 3.0)))
    assert np.allclose(_model([ramp]).at(50.0).rate_in, 200)
    step = Shape("step", (("at", 60.0), ("factor", 2.0), ("until", 120.0)))
    m = _model([step])
    assert [float(m.at(t).rate_in[0]) for t in (0.0, 60.0, 120.0)] == [100.0, 200.0, 100.0]


@pytest.mark.parametrize(
    ("t", "expected"), [(0.0, 0.0), (59.9, 0.0), (60.0, 1.0), (61.0, 1.0), (3600.0, 1.0)]
)
def test_zero_length_ramp_is_a_step_at_its_start(t: float, expected: float) -> None:
    """Traffic that starts at minute 1: nothing before ``start``, the target from ``start`` on."""
    assert ramp_fraction(t, 60.0, 60.0) == expected
    ramp = Shape("ramp", (("start", 60.0), ("end", 60.0), ("from", 0.0), ("to", 1.0)))
    assert float(_model([ramp]).at(t).rate_in[0]) == 100.0 * expected
    signal = Signal("ramp", (("from", 0.0), ("to", 0.4), ("start", 60.0), ("end", 60.0)))
    assert signal.value(t) == pytest.approx(0.4 * expected)


def test_ramp_fraction_is_linear_inside_and_clamped_outside() -> None:
    assert [ramp_fraction(t, 100.0, 200.0) for t in (0.0, 100.0, 150.0, 199.0, 200.0, 1e9)] == [
        0.0,
        0.0,
        0.5,
        0.99,
        1.0,
        1.0,
    ]


def test_step_can_start_from_zero() -> None:
    """``before`` is the factor before ``at``: a workload that is silent until minute 2, then full."""
    step = Shape("step", (("at", 120.0), ("factor", 1.0), ("until", None), ("before", 0.0)))
    m = _model([step])
    assert [float(m.at(t).rate_in[0]) for t in (0.0, 119.0, 120.0, 600.0)] == [0.0, 0.0, 100.0, 100.0]


def test_step_before_is_read_from_the_scenario_and_written_back() -> None:
    node = Node({"kind": "step", "at": "2m", "factor": 1, "before": 0}, source="s.yaml", path="shapes[0]")
    shape = parse_shape(node)
    assert shape.param("before") == 0.0 and shape.param("at") == 120.0
    assert shape.to_dict() == {"kind": "step", "at": 120.0, "factor": 1.0, "before": 0.0}


def test_a_step_that_ends_before_it_starts_is_refused() -> None:
    """``until`` at or before ``at`` would never act: the scenario names the field, not a silent no-op."""
    node = Node({"kind": "step", "at": "5m", "factor": 2, "until": "3m"}, source="s.yaml", path="shapes[0]")
    with pytest.raises(ShedlabError, match=r"s\.yaml.*until.*must be after at.*3m"):
        parse_shape(node)
    ok = Node({"kind": "step", "at": "5m", "factor": 2, "until": "6m"}, source="s.yaml", path="shapes[0]")
    assert parse_shape(ok).param("until") == 360.0


def test_consumers_stopping_build_a_backlog_that_is_caught_up() -> None:
    """Periodic consumer stop/resume: nothing dispatched while stopped, then up to catchup × normal."""
    onoff = Shape(
        "onoff",
        (("period", 120.0), ("on", 60.0), ("stops", "consumers"), ("phase", "aligned"), ("catchup", 2.0)),
    )
    model = _model([onoff], n=3)
    out = [float(model.at(60.0 * k).rate_out[0]) for k in range(6)]
    assert out == [100.0, 0.0, 200.0, 0.0, 200.0, 0.0]
    # every message produced is eventually dispatched: in 6 ticks 600 msg/s·ticks were produced
    assert sum(out) == 500.0  # the last minute's backlog is still pending
    assert all(float(model.at(60.0 * k).rate_in[0]) == 100.0 for k in range(6, 8))


@pytest.mark.parametrize("stops", ["consumers", "producers"])
def test_throughputs_are_the_final_rates_times_the_message_size(stops: str) -> None:
    """Bundles of an on/off shape over part of the population take their throughputs after the shape."""
    pop = build_population(
        [
            Workload(
                "w",
                namespaces=4,
                bundles=16,
                msg_rate_in=Distribution("lognormal", (("median", 100.0), ("sigma", 1.0))),
                msg_size=Distribution("choice", (("values", (256.0, 1000.0)), ("weights", None))),
            )
        ],
        np.random.default_rng(0),
    )
    onoff = Shape(
        "onoff",
        (("period", 120.0), ("on", 60.0), ("stops", stops), ("phase", "random"), ("catchup", 2.0)),
    )
    noise = Shape("noise", (("sigma", 0.3),))
    some = np.arange(0, pop.size, 3, dtype=np.int64)
    model = TrafficModel(pop, [(noise, None), (onoff, some)], np.random.default_rng(1), 60.0)
    for k in range(4):
        t = model.at(60.0 * k)
        assert np.array_equal(t.tp_in, t.rate_in * pop.msg_size)
        assert np.array_equal(t.tp_out, t.rate_out * pop.msg_size)


def test_producers_stopping_stops_both_directions() -> None:
    onoff = Shape(
        "onoff",
        (("period", 120.0), ("on", 60.0), ("stops", "producers"), ("phase", "aligned"), ("catchup", 2.0)),
    )
    t = _model([onoff]).at(60.0)
    assert not t.rate_in.any() and not t.rate_out.any()


def test_spikes_multiply_some_bundles_for_their_duration() -> None:
    spikes = Shape("spikes", (("rate_per_hour", 60.0), ("duration", 120.0), ("amplitude", 3.0)))
    model = _model([spikes], n=400)
    first = model.at(0.0).rate_in
    assert set(np.unique(first)) <= {100.0, 300.0}
    spiking = np.flatnonzero(first == 300.0)
    assert 100 < spiking.size < 400  # P(start within a minute) = 1 - e^-1
    assert (model.at(60.0).rate_in[spiking] == 300.0).all()  # still within the 2 minutes


def test_noise_is_mean_preserving() -> None:
    noise = Shape("noise", (("sigma", 0.2),))
    values = np.concatenate([_model([noise], n=200).at(60.0 * k).rate_in for k in range(20)])
    assert abs(values.mean() - 100) < 2


def test_selectors() -> None:
    pop = build_population(
        [Workload("a", tenants=2, namespaces=2, bundles=2), Workload("b", tenant_prefix="other", bundles=2)],
        np.random.default_rng(0),
    )
    rng = np.random.default_rng(0)
    assert pop.select(Selector(), rng) is None

    def selected(selector: Selector) -> int:
        chosen = pop.select(selector, rng)
        assert chosen is not None  # None means every bundle: only the empty selector gives it
        return chosen.size

    assert selected(Selector(workloads=("b",))) == 2
    assert selected(Selector(tenants=("tenant-001",))) == 4
    assert selected(Selector(namespaces=("tenant-*/ns-0001",))) == 4
    assert selected(Selector(fraction=0.5)) == 5


def test_cost_model_units_follow_pulsar() -> None:
    hw = HardwareClass(
        cores=8, nic_gbps=10, cpu_idle=0.0, cpu_us_per_msg=10, cpu_ms_per_mib=0, bookkeeper_copies=2
    )
    model = CostModel(
        [hw, HardwareClass(cores=32, nic_gbps=10, cpu_idle=0.0, cpu_us_per_msg=10, cpu_ms_per_mib=0)]
    )
    slots = np.array([0, 1])
    rate = np.array([50_000.0, 50_000.0])
    tp = np.array([1024.0 * 1024.0, 1024.0 * 1024.0])  # 1 MiB/s in and out
    usage = model.usage(slots, rate, rate, tp, tp, np.zeros(2), np.zeros((2, 3)))
    limits = model.limits(slots)
    # 100k msg/s × 10 µs = 1 core = 100 % of one core, out of 800 % and 3200 %
    np.testing.assert_allclose(usage[:, 0], [100.0, 100.0])
    assert limits[:, 0].tolist() == [800.0, 3200.0]
    assert percent_usage(usage[0, 0], limits[0, 0]) == pytest.approx(12.5)
    assert percent_usage(usage[1, 0], limits[1, 0]) == pytest.approx(3.125)
    # NIC in Kbit/s (Pulsar's decimal kilobits): 1 MiB/s = 8388.608 Kbit/s in; out = dispatch + 2 copies
    assert usage[0, 3] == 8388.608 and usage[0, 4] == 3 * 8388.608
    assert limits[0, 3] == 10 * 1000 * 1000
    # background: a fraction of the host
    bg = model.usage(
        slots[:1],
        np.zeros(1),
        np.zeros(1),
        np.zeros(1),
        np.zeros(1),
        np.zeros(1),
        np.array([[0.5, 0.1, 0.0]]),
    )
    assert bg[0, 0] == 400.0 and bg[0, 3] == pytest.approx(0.1 * 10 * 1000 * 1000)


def test_sequence_gives_each_bundle_its_value_in_name_order() -> None:
    """``dist: sequence`` (how a twin writes each recorded bundle's level): no draw, values in order,
    repeated when shorter; ``weights`` belongs to ``choice`` only."""
    import numpy as np

    text = """
name: seq
workloads:
  - bundles: 4
    msg_rate_in: {dist: sequence, values: [10, 20, 30]}
    topics: {dist: sequence, values: [1, 2, 3, 4]}
"""
    scenario = parse_scenario_text(text, "seq")
    a = build_population(scenario.workloads, np.random.default_rng(1))
    b = build_population(scenario.workloads, np.random.default_rng(2))
    assert a.base_rate_in.tolist() == [10.0, 20.0, 30.0, 10.0] == b.base_rate_in.tolist()
    assert a.topics.tolist() == [1, 2, 3, 4]
    with pytest.raises(ShedlabError):
        parse_scenario_text(text.replace("values: [10, 20, 30]}", "values: [1], weights: [1]}"), "seq")


def test_a_workload_selector_matches_the_bundles_it_shares() -> None:
    """Two workloads in one namespace: a whole-bundle selection (``leader_state.recently_unloaded``)
    of the second workload includes the bundles it shares with the first."""
    shared = [
        Workload("a", namespace="t/ns", bundles=4),
        Workload("b", namespace="t/ns", bundles=4),
        Workload("c", bundles=2),
    ]
    pop = build_population(shared, np.random.default_rng(0))
    rng = np.random.default_rng(0)
    b = pop.select(Selector(workloads=("b",)), rng)
    assert b is not None and [pop.names[j] for j in b] == [n for n in pop.names if n.startswith("t/ns/")]
    c = pop.select(Selector(workloads=("c",)), rng)
    assert c is not None and c.size == 2 and not set(c.tolist()) & set(b.tolist())


def _nic_kbit(domains: tuple[str, ...]) -> tuple[float, float, float]:
    """One broker's NIC in and out (Kbit/s) and bookie CPU (% of a core) under workloads of ``domains``,
    each 10 topics of 1,000 msg/s in and out of 1 KiB in one shared namespace; copies 2, reads 0.5."""
    scenario = Scenario.from_mapping(
        {
            "name": "domains",
            "duration": "1m",
            "hardware": {
                "standard": {
                    "nic_gbps": 100,
                    "bookkeeper_copies": 2,
                    "bookkeeper_read_fraction": 0.5,
                    "bookies": 1,
                    "bookie_cpu_ms_per_mib": 10,
                }
            },
            "brokers": [{"count": 1}],
            "workloads": [
                {
                    "name": f"w{i}",
                    "namespace": "t/ns",
                    "bundles": 4,
                    "hashed": {"topics": 10, "prefix": f"w{i}", "domain": domain},
                    "msg_rate_in": 1000,
                    "msg_size": 1024,
                }
                for i, domain in enumerate(domains)
            ],
        },
        "domains.yaml",
    )
    row = run_simulation(scenario).brokers.iloc[-1]
    nic = 100 * 1000 * 1000  # Kbit/s: Mbit/s × 1000, as Pulsar's getTotalNicLimit (BitRateUnit)
    return row["bandwidth_in_pct"] * nic / 100, row["bandwidth_out_pct"] * nic / 100, row["cpu_pct"] * 16


def test_non_persistent_topics_are_neither_written_to_nor_read_from_bookkeeper() -> None:
    # Pulsar dispatches a non-persistent topic without a ledger: its bytes in are not written to the
    # bookies (NIC out), its bytes out are not read back (NIC in), and co-located bookies store nothing.
    one = 10 * 1000 * 1024 * 8 / 1000  # a workload's bytes in (= out), Kbit/s
    stored_cpu = 100 * 10e-3 * 2 * 10 * 1000 * 1024 / 2**20  # its two copies' bookie CPU, % of a core
    persistent_in, persistent_out, persistent_cpu = _nic_kbit(("persistent",))
    assert (persistent_in, persistent_out) == pytest.approx((1.5 * one, 3 * one))
    plain_in, plain_out, plain_cpu = _nic_kbit(("non-persistent",))
    assert (plain_in, plain_out) == pytest.approx((one, one))
    assert persistent_cpu - plain_cpu == pytest.approx(stored_cpu)
    # both kinds in the same bundles: only the persistent share reaches BookKeeper
    both_in, both_out, both_cpu = _nic_kbit(("persistent", "non-persistent"))
    assert (both_in, both_out) == pytest.approx((2.5 * one, 4 * one))
    assert both_cpu - 2 * plain_cpu == pytest.approx(stored_cpu - 100 * 0.02 * 16)
