"""``simulation.resolution``: each broker's host usage on a timer of its own, beside its bundle stats.

One broker, idle until 5m, then 8 bundles of 4,000 msg/s in and out (1 KiB messages). Its stats
timer samples at 0, 60, ..., 300 s (the step's first step: 1 of the window's 12 steps carries traffic)
and 360 s (a full window); its host-usage timer is set 30 s after it, so it reads at 330 s (7 of 12
steps) and 390 s (a full window). Pulsar's report check (every 5 s, 10 % threshold) then writes after
each of the four, as a Pulsar broker does when its two timers are apart
(``LinuxBrokerHostUsageImpl`` and ``BrokerService``'s stats updater); sampled together, the step
makes two writes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from shedlab.core.sim import Scenario
from shedlab.core.sim.kernel import Simulation
from shedlab.core.sim.windows import RESTART_LEAD_MS, HostUsageWindows

STEP_S = 300


def _scenario(
    *, at: str = "5m", duration: str = "8m", simulation: dict[str, Any] | None = None, **doc: Any
) -> Scenario:
    """One 1-core broker, idle until ``at``, then 8 bundles of 4,000 msg/s (1 KiB); 5-s steps by default."""
    return Scenario.from_mapping(
        {
            "name": "host-timer",
            "duration": duration,
            "seed": 1,
            "simulation": {"resolution": "5s"} if simulation is None else simulation,
            "hardware": {"small": {"cores": 1}},  # the step moves the CPU by ~45 points
            "brokers": [{"count": 1, "hardware": "small"}],
            "workloads": [
                {
                    "bundles": 8,
                    "msg_size": 1024,
                    "msg_rate_in": 4000,
                    "shapes": [{"kind": "step", "at": at, "factor": 1, "before": 0}],
                }
            ],
            **doc,
        }
    )


def _writes(monkeypatch: pytest.MonkeyPatch, offset_ms: int = 30_000) -> list[tuple[int, float, float]]:
    """Every report write of broker 1 after the start: (seconds, its local CPU, its local msg rate)."""
    sim = Simulation(_scenario())
    assert sim.host is not None
    sim.host.offset_ms[:] = offset_ms
    publishing = sim.publishing
    original = publishing.publish
    seen: list[tuple[int, float, float]] = []

    def publish(now: int, writers: Any, extra: int, alive: Any, *, lock: bool = False) -> None:
        if not lock and 0 in writers.tolist():
            loc = publishing.local
            seen.append(
                ((now - sim.start_ms) // 1000, float(loc.usage[0, 0]), float(loc.agg[0, 0] + loc.agg[0, 1]))
            )
        original(now, writers, extra, alive, lock=lock)

    monkeypatch.setattr(publishing, "publish", publish)
    sim.run()
    return seen


def test_a_step_in_traffic_makes_a_partial_then_a_full_window_on_each_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    after = [t for t, _, _ in _writes(monkeypatch) if t >= STEP_S]
    assert after[:4] == [300, 330, 360, 390]


def test_timers_that_fire_together_write_once_per_window(monkeypatch: pytest.MonkeyPatch) -> None:
    after = [t for t, _, _ in _writes(monkeypatch, offset_ms=0) if t >= STEP_S]
    assert after[:2] == [300, 360] and 330 not in after and 390 not in after


def test_the_host_usage_reading_averages_its_own_window(monkeypatch: pytest.MonkeyPatch) -> None:
    writes = {t: (cpu, rate) for t, cpu, rate in _writes(monkeypatch)}
    idle = writes[300][0]  # the reading at 270 s: the idle broker
    full = writes[390][0]  # the reading at 390 s: (330, 390], traffic throughout
    assert full > idle + 20
    assert writes[330][0] == pytest.approx(idle + (full - idle) * 7 / 12)  # (270, 330]: 7 of 12 steps


def test_a_stats_sample_leaves_the_usage_as_the_last_reading_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    writes = {t: (cpu, rate) for t, cpu, rate in _writes(monkeypatch)}
    full_rate = 2 * 8 * 4000.0
    assert writes[300][1] == pytest.approx(full_rate / 12)  # the stats window (240, 300]: 1 step of 12
    assert writes[330][1] == writes[300][1]  # a host-usage reading leaves the rates alone
    assert writes[360][1] == pytest.approx(full_rate)  # the stats window (300, 360]
    assert writes[360][0] == writes[330][0]  # ... and the stats sample leaves the usage alone


def test_host_timer_phases_are_drawn_per_broker_from_the_seed() -> None:
    a = HostUsageWindows.new(4, 60_000, np.random.default_rng(7))
    b = HostUsageWindows.new(4, 60_000, np.random.default_rng(7))
    assert np.array_equal(a.offset_ms, b.offset_ms)
    assert ((a.offset_ms >= 0) & (a.offset_ms < 60_000)).all() and np.unique(a.offset_ms).size > 1


def test_a_restarted_broker_reads_its_host_usage_just_before_its_stats() -> None:
    host = HostUsageWindows.new(1, 60_000, np.random.default_rng(7))
    host.started(0, 600_000, 0, fresh=True)
    alive = np.zeros(1, dtype=np.int64)
    host.add(alive, np.ones((1, 5)))
    readers, _ = host.read(alive, 600_000)  # the constructor's reading, at the start
    assert readers.tolist() == [0]
    assert int(host.next_ms[0]) == 600_000 + 60_000 - RESTART_LEAD_MS


def test_without_resolution_there_is_no_host_timer() -> None:
    sim = Simulation(
        Scenario.from_mapping(
            {"name": "plain", "duration": "2m", "brokers": [{"count": 1}], "workloads": [{"bundles": 2}]}
        )
    )
    assert sim.host is None


def test_without_resolution_a_longer_stats_interval_keeps_the_host_usage_timer_of_its_own() -> None:
    """statsUpdateFrequencyInSecs 300 without ``resolution``: the CPU is read every minute, the rates every 5.

    Pulsar reads the host usage every ``loadBalancerHostUsageCheckIntervalMinutes`` (1) whatever the stats
    interval; sampled together, the broker's CPU reading was 5 minutes old when its rates were. Here the
    traffic starts at 2 min: the report's CPU moves within a minute, its rates at the 5-min sample, as the
    average of the window's five ticks (four with traffic: 2, 3, 4 and 5 min).
    """
    scen = _scenario(at="2m", duration="6m", simulation={}, config={"statsUpdateFrequencyInSecs": 300})
    sim = Simulation(scen)
    assert sim.host is not None and sim.substeps == 1
    loc, cpu, rate = sim.publishing.local, [], []
    for t in range(6):
        sim.tick(t, sim.start_ms + t * sim.tick_ms)
        cpu.append(float(loc.usage[0, 0]))
        rate.append(float(loc.agg[0, 0] + loc.agg[0, 1]))
    assert cpu[3] > cpu[1] + 20  # read by 3 min: the host timer's phase is under a minute
    assert rate[:5] == [0.0] * 5  # the stats sampled at 0 only
    assert rate[5] == pytest.approx(2 * 8 * 4000.0 * 4 / 5)
