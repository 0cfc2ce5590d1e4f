"""The twin's events from a recording's presence of brokers (no Spark): a broker missing while others
report is away; a time no broker reported is a gap of the recording, not a restart of every broker."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from shedlab.core.twin import TwinInputs, _by_last_tick, _events

MIN = 60_000


def test_a_gap_of_the_recording_is_no_restart_of_every_broker() -> None:
    # Samples every minute for 30 minutes, nothing for 3 hours (the collector was down), 30 more minutes.
    ticks = np.array([*range(0, 31 * MIN, MIN), *range(210 * MIN, 241 * MIN, MIN)], dtype=np.int64)
    gaps = pd.DataFrame(
        {
            "broker": ["a:8080", "b:8080", "b:8080"],
            "from_ms": [30 * MIN, 10 * MIN, 30 * MIN],  # b also missed minutes 11-14 while a reported
            "to_ms": [210 * MIN, 15 * MIN, 210 * MIN],
        }
    )
    brokers = pd.DataFrame(
        {
            "broker": ["a:8080", "b:8080"],
            "number": [1, 2],
            "first_ms": [0, 0],
            "last_ms": [240 * MIN, 240 * MIN],
            "hardware": ["c", "c"],
            **{c: [0.0, 0.0] for c in ("bg_cpu", "bg_cpu_noise", "bg_nic_in", "bg_nic_out")},
        }
    )
    inputs = TwinInputs("c1", ticks, brokers, gaps, pd.DataFrame(), pd.DataFrame())
    events, notes = _events(inputs, brokers, {"a:8080": 1, "b:8080": 2}, 60.0)
    assert events == [
        {"at": "11m", "kind": "rolling_restart", "interval": "1m", "downtime": "4m", "brokers": [2]}
    ]
    assert any("no sample for 179m from +31m" in n and "gap of the recording" in n for n in notes), notes


def test_events_after_the_twins_last_tick_move_back_to_it() -> None:
    """Jittered samples: a 59 min 50 s span of 1-min ticks has its last tick at 59 min, so a broker
    first seen at the last sample (59 min 50 s) joins at 59 min, not never (a scenario refuses an event
    after its last tick); one that left then (+1 tick: 60 min 50 s, after the end) leaves at 59 min."""
    events: list[dict[str, Any]] = [
        {"at": "30m", "kind": "add_brokers", "count": 1, "hardware": "c"},
        {"at": "3590s", "kind": "add_brokers", "count": 1, "hardware": "c"},
        {"at": "3650s", "kind": "remove_brokers", "brokers": [1]},
    ]
    moved = _by_last_tick(events, 3590.0, 60.0)
    assert [e["at"] for e in moved] == ["30m", "59m", "59m"]
    assert moved[1] == {**events[1], "at": "59m"}


def test_an_onoff_shape_the_twin_writes_is_off_for_a_tick_at_least() -> None:
    """Bundles off 5 % of a two-tick cycle: the off time rounded to no tick and the twin wrote ``on`` equal
    to ``period``, a cycle on at every step (it did nothing), which the scenario now refuses."""
    from shedlab.core.sim.scenario import Scenario
    from shedlab.core.twin import _onoff

    columns = {
        "n": 100,
        "off_out_fraction": 0.05,
        "off_out_starts": 50,
        "off_in_fraction": 0.0,
        "off_in_starts": 0,
    }
    (shape,) = _onoff(
        pd.DataFrame({k: [v] for k, v in columns.items()}), ["t/ns/0x00000000_0xffffffff"], 60.0
    )
    assert (shape["period"], shape["on"]) == ("2m", "1m")
    workload = {"name": "w", "namespace": "t/ns", "bundles": 1, "shapes": [{**shape, "select": {}}]}
    Scenario.from_mapping({"name": "twin", "duration": "10m", "workloads": [workload]}, source="twin.yaml")


def test_a_jitter_past_the_noise_bound_is_written_at_the_bound_and_said() -> None:
    """A namespace whose bundles' shares jitter by more than a noise shape may (traffic.MAX_NOISE_SIGMA)
    gets the bound, and its comment says the recorded σ is larger: written as recorded, the twin was a
    scenario that its own reader refuses."""
    from shedlab.core.sim.scenario import Scenario
    from shedlab.core.sim.traffic import MAX_NOISE_SIGMA
    from shedlab.core.twin import _workloads

    ticks = np.arange(0, 10 * MIN, MIN, dtype=np.int64)
    bundles = pd.DataFrame(
        {
            "bundle": ["t/ns/0x00000000_0x80000000", "t/ns/0x80000000_0xffffffff"],
            "first_owner": ["a:8080", "a:8080"],
            **{c: [100.0, 100.0] for c in ("rate_in", "rate_out", "tp_in", "tp_out", "topics")},
            **{c: [1.0, 1.0] for c in ("producers", "consumers")},
            "log_share_std": [5.0, 7.0],
            "log_share_ac1": [np.nan, np.nan],
            **{c: [0.0, 0.0] for c in ("off_out_fraction", "off_out_starts", "off_in_fraction")},
            "off_in_starts": [0.0, 0.0],
            "n": [10, 10],
        }
    )
    series = pd.DataFrame({"namespace": "t/ns", "tick_ms": ticks, "rate_in": 200.0})
    inputs = TwinInputs("c1", ticks, pd.DataFrame(), pd.DataFrame(), bundles, series)
    (workload,), _mapping, (comment,) = _workloads(inputs, {"a:8080": 1}, 1, 60.0)
    assert {"kind": "noise", "sigma": MAX_NOISE_SIGMA} in workload["shapes"]
    assert "jitter σ 3 (capped: the recorded σ is larger)" in comment
    Scenario.from_mapping({"name": "twin", "duration": "10m", "workloads": [workload]}, source="twin.yaml")
