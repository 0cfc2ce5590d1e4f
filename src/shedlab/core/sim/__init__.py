"""The cluster simulator: scenarios, a tick kernel over arrays, Pulsar's data path, metrics, recordings.

>>> from shedlab.core.sim import load_scenario, run_simulation
>>> result = run_simulation(load_scenario("over-unloading-90-10"), strategy="AvgShedder", seed=1)
>>> result.summary["over_unloading_flips"]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from shedlab.core.sim.kernel import Simulation
from shedlab.core.sim.result import SimulationResult
from shedlab.core.sim.scenario import Scenario, builtin_scenarios, load_scenario

__all__ = [
    "Scenario",
    "SimulationResult",
    "builtin_scenarios",
    "load_scenario",
    "run_simulation",
]


def run_simulation(
    scenario: Scenario,
    *,
    strategy: str | None = None,
    config_overrides: Mapping[str, Any] | None = None,
    seed: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    record: bool = False,
) -> SimulationResult:
    """Run ``scenario`` and return its metrics.

    ``strategy`` (a pair name such as ``"AvgShedder"`` or ``"ThresholdShedder+LeastResourceUsageWithWeight"``)
    replaces the scenario's pair; ``config_overrides`` (Pulsar keys) are applied last; ``seed`` replaces
    the scenario's seed. ``progress(done_ticks, total_ticks)`` is called after every tick. With
    ``record=True`` the result also carries the load reports for :mod:`shedlab.core.sim.recording`.
    The same scenario, strategy, overrides and seed always give identical results.
    """
    sim = Simulation(
        scenario,
        strategy=strategy,
        config_overrides=config_overrides,
        seed=seed,
        progress=progress,
        record=record,
    )
    result: SimulationResult = sim.run()
    return result
