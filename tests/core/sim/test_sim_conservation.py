"""The simulator conserves traffic: moving bundles neither creates nor destroys any (hypothesis).

The offered traffic is exogenous (workloads, shapes, noise from the seed), so at every tick where no
bundle is in transit the cluster's total must be the same whatever the strategy did; while bundles
are in transit it can only be lower (their clients are reconnecting). Per tick, the brokers' rows add
up to the cluster's total.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shedlab.core.sim import Scenario, run_simulation

PAIRS = [
    "AvgShedder",
    "ThresholdShedder+LeastLongTermMessageRate",
    "UniformLoadShedder+LeastResourceUsageWithWeight",
    "OverloadShedder+LeastLongTermMessageRate",
]


def scenario(seed: int, added: int) -> Scenario:
    doc: dict[str, Any] = {
        "name": "conservation",
        "duration": "15m",
        "seed": seed,
        "strategy": "AvgShedder",
        "config": {"loadBalancerBrokerThresholdShedderPercentage": 5},
        "hardware": {"standard": {"cores": 8, "nic_gbps": 10}},
        "brokers": [{"count": 3}],
        "workloads": [
            {
                "tenants": 1,
                "namespaces": 3,
                "bundles": 6,
                "msg_rate_in": {"dist": "lognormal", "median": 20000, "sigma": 1.0},
                "shapes": [{"kind": "noise", "sigma": 0.05}],
            }
        ],
        "events": [{"at": "3m", "kind": "add_brokers", "count": added}] if added else [],
    }
    return Scenario.from_mapping(doc, source="test")


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 2), st.sampled_from(PAIRS[1:]))
def test_moves_neither_create_nor_destroy_traffic(seed: int, added: int, pair: str) -> None:
    reference = run_simulation(scenario(seed, added), strategy=PAIRS[0]).ticks.set_index("tick")
    result = run_simulation(scenario(seed, added), strategy=pair)
    ticks = result.ticks.set_index("tick")
    assert ticks.index.equals(reference.index)
    settled = (ticks["bundles_unowned"] == 0) & (reference["bundles_unowned"] == 0)
    for column in ("msg_rate_total", "throughput_total"):
        np.testing.assert_allclose(ticks.loc[settled, column], reference.loc[settled, column], rtol=1e-9)
    in_transit = ticks["bundles_unowned"] > 0
    assert (
        ticks.loc[in_transit, "msg_rate_total"] <= reference.loc[in_transit, "msg_rate_total"] * (1 + 1e-9)
    ).all()
    per_tick = result.brokers.groupby("tick")[["msg_rate", "throughput"]].sum()
    np.testing.assert_allclose(per_tick["msg_rate"], ticks["msg_rate_total"], rtol=1e-9)
    np.testing.assert_allclose(per_tick["throughput"], ticks["throughput_total"], rtol=1e-9)
    moved = result.decisions
    assert (moved["source"] != moved["destination"]).all()
    assert len(moved) == int(ticks["unloads"].sum()) == result.summary["unloads"]


def test_the_strategies_really_move_bundles_in_this_scenario() -> None:
    """Guard for the property above: with brokers added, some pair moves something."""
    moved = sum(len(run_simulation(scenario(3, 2), strategy=p).decisions) for p in PAIRS)
    assert moved > 0


@pytest.mark.parametrize("pair", PAIRS)
def test_no_bundle_is_lost(pair: str) -> None:
    result = run_simulation(scenario(7, 2), strategy=pair)
    final = result.ticks.iloc[-1]
    bundles = result.brokers[result.brokers["tick"] == final["tick"]]["bundles"].sum()
    assert bundles + final["bundles_unowned"] == 18
