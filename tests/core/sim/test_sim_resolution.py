"""``simulation.resolution``: Pulsar's intervals inside a tick, and stats that average over their window.

The experiment: two brokers carry about the same traffic, 16 bundles of 500 msg/s in and out on
broker 1 and 16 of 470 on broker 2. On broker 1 the consumers stop for a minute every two
minutes and then drain their backlog at twice the normal rate (``onoff`` with ``catchup: 2``),
their cycle shifted 30 s from the brokers' stats timers. Pulsar's stats
(``statsUpdateFrequencyInSecs`` = 60) are the messages counted over the last 60 s divided by 60 s,
so broker 1 reports, window after window (r = 8,000 msg/s out normally):

* (60 s, 120 s]: 20 s stopped, 40 s draining at 2r   → 2r·40/60 = 4/3 r = 10,666.7 msg/s out;
* (120 s, 180 s]: 20 s draining at 2r, 40 s stopped  → 2r·20/60 = 2/3 r =  5,333.3 msg/s out;

and so on (the first window, (0, 60 s], has no backlog from before the start: 20 s at r, then 40 s
stopped, 2/6 r). Broker 1's totals (in + out) thus stay between 10,667 and 18,667 msg/s next to
broker 2's steady 15,040: a difference of at most 41 %, so UniformLoadShedder (threshold 50 %) never
sheds. With one 60-s tick for everything the stats read the instant of the tick instead, 0 or 2r
out, and broker 1's total of 8,000 msg/s next to 15,040 (88 %) makes UniformLoadShedder unload
the steady broker's bundles at the first cycle, and then bundles back and forth: an artefact of
the sampling that Pulsar does not show.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shedlab.core.sim import Scenario, run_simulation
from shedlab.core.sim.kernel import Simulation
from shedlab.errors import InputError

UNIFORM = "UniformLoadShedder+LeastLongTermMessageRate"
R_OUT = 16 * 500.0  # broker 1's normal msgRateOut


def scenario(
    resolution: str | None = "10s", phase: str = "30s", config: dict[str, Any] | None = None
) -> Scenario:
    settings: dict[str, Any] = {"initial_assignment": "round_robin"}
    if resolution is not None:
        settings["resolution"] = resolution
    workload = {"bundles": 16, "msg_size": 1024}
    return Scenario.from_mapping(
        {
            "name": "catch-up",
            "duration": "20m",
            "seed": 1,
            "strategy": UNIFORM,
            "config": config or {},
            "simulation": settings,
            "brokers": [{"count": 2}],
            "workloads": [
                {
                    **workload,
                    "msg_rate_in": 500,
                    "tenant_prefix": "pausing",
                    "brokers": [1],
                    "shapes": [
                        {"kind": "onoff", "period": "2m", "on": "1m", "phase": phase, "catchup": 2},
                    ],
                },
                {**workload, "msg_rate_in": 470, "tenant_prefix": "steady", "brokers": [2]},
            ],
        },
        source="test",
    )


def published_rate_out(scen: Scenario) -> list[tuple[float, float]]:
    """Each broker's written msgRateOut after every tick (what the leader reads)."""
    sim = Simulation(scen)
    seen = []
    for t in range(sim.n_ticks):
        sim.tick(t, sim.start_ms + t * sim.tick_ms)
        rates = sim.publishing.published.agg[:, 1]
        seen.append((float(rates[0]), float(rates[1])))
    return seen


def test_a_catch_up_burst_is_seen_as_pulsar_averages_it_over_the_stats_window() -> None:
    seen = published_rate_out(scenario("10s"))
    pausing = [p for p, _ in seen]
    assert pausing[0] == pytest.approx(R_OUT)  # the first sample at the start reads one step
    assert pausing[1] == pytest.approx(R_OUT * 2 / 6)  # (0, 60 s]: 20 s before the first stop
    for t in range(2, len(seen)):
        expected = R_OUT * 4 / 3 if t % 2 == 0 else R_OUT * 2 / 3
        assert pausing[t] == pytest.approx(expected), t
    assert {s for _, s in seen} == {16 * 470.0}


def test_one_tick_for_everything_reads_the_instant_instead() -> None:
    quiet = {"loadBalancerSheddingEnabled": False}  # nothing moves: the sampling alone
    pausing = [p for p, _ in published_rate_out(scenario(None, config=quiet))]
    assert set(pausing[1:]) == {0.0, 2 * R_OUT}


def test_uniform_load_shedder_sheds_only_on_the_instantaneous_view() -> None:
    fine = run_simulation(scenario("10s"))
    coarse = run_simulation(scenario(None))
    assert fine.summary["unloads"] == 0
    assert coarse.summary["unloads"] > 0
    first = coarse.decisions.iloc[0]
    assert (first["tick"], first["source"]) == (1, "broker-0002:8080")  # the steady broker
    # the metrics keep one row per tick, at the tick's time
    assert fine.ticks["time_s"].tolist() == coarse.ticks["time_s"].tolist()
    # the summary says which resolution it was measured at (absent: one step per tick)
    assert fine.summary["resolution_s"] == 10.0 and "resolution_s" not in coarse.summary


def test_a_bundle_acquired_mid_window_reports_its_rate_over_the_time_it_was_owned() -> None:
    """A topic its new owner loaded 20 s before its stats update counts 20 s of messages over those 20 s:
    its producers' and consumers' ``Rate`` objects start their period at their construction (the
    reconnection), and ``Rate.calculateRate()`` divides by the time since. It was reported at a third
    of its rate (20 s of messages over the broker's 60-s window)."""
    sim = Simulation(scenario("10s", config={"loadBalancerSheddingEnabled": False}))
    for t in range(2):
        sim.tick(t, sim.start_ms + t * sim.tick_ms)
    moving = 16  # the first steady bundle (sorted after the pausing ones), on broker 2
    assert sim.cluster.owner[moving] == 1
    for i in range(6):  # tick 2's steps: 70 s ... 120 s; the bundle moves to broker 1 before 100 s
        now = sim.start_ms + 60_000 + (i + 1) * sim.res_ms
        if now == sim.start_ms + 100_000:
            sim.cluster.owner[moving] = 0
        sim._step(2, now)
    local = sim.publishing.local
    assert local.bundle_owner[moving] == 0
    assert local.bundle_values[0, moving] == pytest.approx(470.0)  # 100, 110 and 120 s, over those steps
    assert local.agg[1, 0] == pytest.approx(15 * 470.0)  # broker 2 no longer lists it at all


def test_reports_are_checked_every_min_interval_not_every_step() -> None:
    """LoadReportUpdaterTask runs every loadBalancerReportUpdateMinIntervalMillis, not every 1-s step."""
    sim = Simulation(scenario("1s", config={"loadBalancerReportUpdateMinIntervalMillis": 7000}))
    sim.run()
    writes = sim.publishing.last_update_ms - sim.start_ms
    assert np.all(writes % 7000 == 0)
    assert writes.max() > 0


def test_resolution_must_divide_the_tick() -> None:
    with pytest.raises(InputError, match=r"simulation\.resolution: must divide simulation\.tick"):
        scenario("7s")
    with pytest.raises(InputError, match=r"simulation\.resolution"):
        scenario("2m")


def test_without_resolution_the_kernel_keeps_one_step_per_tick() -> None:
    sim = Simulation(scenario(None))
    assert sim.windows is None and sim.substeps == 1
    fine = Simulation(scenario("15s"))
    assert fine.windows is not None and fine.substeps == 4


def test_a_fine_resolution_counts_its_steps_against_the_tick_limit() -> None:
    with pytest.raises(InputError, match=r"steps of 0\.001 s: the limit is 1000000 ticks"):
        Scenario.from_mapping(
            {"name": "x", "duration": "1h", "simulation": {"tick": "1s", "resolution": "1ms"}}, source="test"
        )


def test_onoff_phase_takes_a_fixed_shift() -> None:
    shape = scenario("10s", phase="30s").workloads[0].shapes[0]
    assert shape.param("phase") == 30.0
    with pytest.raises(InputError, match=r"phase"):
        scenario("10s", phase="sometimes")


def _random_phases(name: str, duration: str, **extra: Any) -> Scenario:
    """Four brokers sharing 16 steady bundles, no shedding, stats at random phases on 10-s steps."""
    return Scenario.from_mapping(
        {
            "name": name,
            "duration": duration,
            "seed": 3,
            "config": {"loadBalancerSheddingEnabled": False},
            "simulation": {"resolution": "10s", "stats_phase": "random", "initial_assignment": "round_robin"},
            "brokers": [{"count": 4}],
            "workloads": [{"bundles": 16, "msg_rate_in": 500, "msg_size": 1024}],
            **extra,
        },
        source="test",
    )


def test_a_brokers_first_window_averages_steady_traffic_to_its_rate() -> None:
    """A broker's first stats window after it starts (random phase: 10 to 50 s later) reads the true rate.

    The step at which the broker started (and got its bundles) was summed into its first window but not
    counted in its length: a first sample 20 s after the start read 3 steps of traffic over 2.
    """
    sim = Simulation(_random_phases("first-window", "5m"))
    assert sim.publishing.stats_phase_ms.max() > 0  # some broker samples after the start
    for t in range(2):  # every broker has sampled by 60 s
        sim.tick(t, sim.start_ms + t * sim.tick_ms)
    assert sim.publishing.local.agg[:4, 0].tolist() == pytest.approx([4 * 500.0] * 4)


def _shedding_between_ticks(**extra: Any) -> Scenario:
    """Broker 1 (the leader) fails at 90 s: the new leader sheds at 150 s, 210 s, ... between ticks."""
    return Scenario.from_mapping(
        {
            "name": "between-ticks",
            "duration": "6m",
            "seed": 1,
            "config": {"loadBalancerSheddingGracePeriodMinutes": 0},
            "simulation": {"resolution": "10s"},
            "brokers": [{"count": 4}],
            "workloads": [
                {
                    "bundles": 24,
                    "msg_rate_in": {"dist": "lognormal", "median": 20000, "sigma": 1},
                    "brokers": [1, 2],
                    "shapes": [{"kind": "noise", "sigma": 0.3}],
                }
            ],
            "events": [{"at": "90s", "kind": "remove_brokers", "brokers": [1]}],
            **extra,
        },
        source="test",
    )


def test_decisions_and_skips_between_ticks_name_the_tick_whose_row_counts_them() -> None:
    """A decision at 150 s is in tick 3's row (the steps of (120 s, 180 s]); it was labelled tick 2."""
    result = run_simulation(_shedding_between_ticks(), strategy=UNIFORM)
    decisions = result.decisions
    assert (decisions["time_s"] % 60 != 0).any()  # the case under test: shedding between ticks
    per_tick = decisions.groupby("tick").size()
    unloads = result.ticks.set_index("tick")["unloads"]
    assert per_tick.to_dict() == unloads[unloads > 0].to_dict()
    for frame in (decisions, result.skips):
        times = frame["time_s"].to_numpy(dtype=float)
        assert (frame["tick"].to_numpy() == np.ceil(times / 60.0)).all()


def test_a_warm_up_ending_between_ticks_counts_the_whole_first_measured_tick() -> None:
    """warmup 165 s: tick 3 (180 s) is the first measured row; its 130-180 s steps all count."""
    result = run_simulation(_shedding_between_ticks(metrics={"warmup": "165s"}), strategy=UNIFORM)
    measured = result.ticks[result.ticks["time_s"] >= 165]
    assert result.summary["lookups"] == measured["lookups"].sum()
    assert result.summary["unload_bundle_total"] == measured["unloads"].sum() == result.summary["unloads"]


def test_a_tick_row_counts_the_lookups_of_every_step() -> None:
    """Two brokers fail 30 s apart within one tick: both re-placements are the tick's lookups."""
    doc: dict[str, Any] = {
        "name": "lookups-per-step",
        "duration": "3m",
        "simulation": {"resolution": "10s", "initial_assignment": "round_robin"},
        "brokers": [{"count": 3}],
        "workloads": [{"bundles": 6}],
        "events": [
            {"at": "70s", "kind": "remove_brokers", "brokers": [2]},
            {"at": "100s", "kind": "remove_brokers", "brokers": [3]},
        ],
    }
    result = run_simulation(Scenario.from_mapping(doc, source="test"))
    # tick 2, (60 s, 120 s]: broker 2's two bundles land at 80 s (one of them on broker 3), then
    # broker 3's three at 110 s; the row once kept the last step's 3
    assert result.ticks["lookups"].tolist() == [0, 0, 5, 0]
    assert int(result.ticks["lookups"].sum()) == result.summary["lookups"]


@pytest.mark.parametrize("seed", [0, 3])
def test_the_stats_interval_does_not_move_the_events_random_stream(seed: int) -> None:
    """Random removals (and noisy backgrounds) come from the events' stream: a stats sample drew
    background noise it never used, at steps where some broker's stats were due, so changing
    statsUpdateFrequencyInSecs removed other brokers."""

    def removed(stats: int) -> list[str]:
        doc: dict[str, Any] = {
            "name": "stats-independent",
            "duration": "5m",
            "seed": seed,
            "config": {"statsUpdateFrequencyInSecs": stats},
            "simulation": {"resolution": "10s"},
            "brokers": [
                {"count": 6, "background": {"cpu": {"kind": "constant", "value": 0.2, "noise": 0.05}}}
            ],
            "events": [{"at": "4m", "kind": "remove_brokers", "count": 2, "pick": "random"}],
        }
        events = run_simulation(Scenario.from_mapping(doc, source="test")).events
        return [str(d) for d in events.loc[events["kind"] == "remove_brokers", "detail"]]

    assert removed(60) == removed(20)


def test_a_broker_started_during_the_run_samples_at_its_start_then_every_interval_from_it() -> None:
    """BrokerService.startStatsUpdater: ``updateRates()`` at once, then the timer one interval later.

    The brokers the scenario starts with stand for running brokers (random phases); a broker that joins
    at 2 min samples at its start and next at 3 min, not at its slot's random phase after the join.
    """
    sim = Simulation(
        _random_phases("join-phase", "4m", events=[{"at": "2m", "kind": "add_brokers", "count": 1}])
    )
    joined = 4  # the fifth slot
    sim.publishing.stats_phase_ms[joined] = 30_000  # what a random phase could have drawn
    assert sim.publishing.stats_phase_ms[:4].max() > 0
    for t in range(3):  # ticks at 0, 1 and 2 min: the join at 2 min
        sim.tick(t, sim.start_ms + t * sim.tick_ms)
    assert sim.publishing.stats_phase_ms[joined] == 0
    assert sim.publishing.next_sample_ms[joined] == sim.start_ms + 3 * 60_000


@pytest.mark.parametrize("resolution", [None, "60s"])
def test_brokers_the_scenario_starts_with_report_their_bundles_from_the_start(resolution: str | None) -> None:
    """A running broker's report lists its bundles: at random stats phases, none reads empty at the start.

    With stats every 300 s the phases fall at 0 to 240 s. Before, a broker whose phase was not 0 published
    its lock node's empty report (no bundles, idle usage) and kept it until its first sample: the leader
    read three of four identical brokers at 2 points against a true 18.75 for minutes. The timer then
    goes on at the broker's phase: its second sample comes at its phase, not an interval after the start.
    """
    sim_doc: dict[str, Any] = {"initial_assignment": "round_robin", "stats_phase": "random"}
    if resolution is not None:
        sim_doc["resolution"] = resolution
    scen = Scenario.from_mapping(
        {
            "name": "running-brokers",
            "duration": "6m",
            "seed": 5,
            "config": {"statsUpdateFrequencyInSecs": 300},
            "simulation": sim_doc,
            "brokers": [{"count": 4}],
            "workloads": [{"bundles": 16, "msg_rate_in": 20000, "msg_size": 1024}],
        },
        source="test",
    )
    sim = Simulation(scen)
    phases = sim.publishing.stats_phase_ms[:4].copy()
    assert phases.max() > 0  # some broker's timer is not at the start
    sim.tick(0, sim.start_ms)
    assert sim.publishing.published.bundles[:4].tolist() == [4, 4, 4, 4]
    assert sim.publishing.published.agg[:4, 0].tolist() == pytest.approx([4 * 20000.0] * 4)
    expected = [sim.start_ms + (int(p) if p else 300_000) for p in phases]
    assert sim.publishing.next_sample_ms[:4].tolist() == expected
