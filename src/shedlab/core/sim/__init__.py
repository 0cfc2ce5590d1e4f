"""The cluster simulator: scenarios, a tick kernel over arrays, Pulsar's data path, metrics, recordings.

>>> from shedlab.core.sim import load_scenario, run_simulation
>>> result = run_simulation(load_scenario("over-unloading-90-10"), strategy="AvgShedder", seed=1)
>>> result.summary["over_unloading_flips"]  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

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
    # Imported here, not at the top: the kernel is the top of this package's import graph (it imports
    # every other module of core/sim), so importing a lower module such as ``shedlab.core.sim.result``
    # or ``.scenario`` (which first runs this __init__) must not load it.
    from shedlab.core.sim.kernel import Simulation

    sim = Simulation(
        scenario,
        strategy=strategy,
        config_overrides=config_overrides,
        seed=seed,
        progress=progress,
        record=record,
    )
    return sim.run()
