"""Which bundles of a simulated cluster Pulsar's leader would split, which the simulator does not model.

    .venv/bin/python scripts/split-thresholds.py                      # every built-in scenario
    .venv/bin/python scripts/split-thresholds.py slow-balancing my-twin.yaml --seed 2

Each scenario runs to its end under its own strategy pair and seed (or ``--seed``), with the leader's
long-term throughputs kept (as the sandbox keeps them for its bundle-data znodes). Its last state is
read as Pulsar's leader would hold it (every alive broker's local report and the leader's BundleData,
built by the sandbox's views, so the same shapes the admin API serves), and the leader's split check
(:func:`shedlab.manager.split.find_bundles_to_split`, the check ``decide`` and ``advise`` run) is applied
with the scenario's configuration. Printed per scenario: bundles, the largest long-term message rate of
a bundle, the bundles the check splits, and those its namespace cap refuses.

Why: the simulator's bundle population is fixed (bundle splitting is left out, ``core/sim/kernel.py``),
so a scenario whose bundles pass Pulsar's split thresholds simulates a cluster whose real leader
(``loadBalancerAutoBundleSplitEnabled`` true by default) would have split them. This tells how far a
scenario is from that regime; ``docs/scenarios.md`` quotes it for the built-in scenarios.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from shedlab.cluster.sandbox.views import Names, bundle_data, local_broker_data
from shedlab.core.sim import builtin_scenarios, load_scenario
from shedlab.core.sim.kernel import Simulation
from shedlab.manager.split import find_bundles_to_split
from shedlab.model.pulsar import BrokerData, LoadData
from shedlab.model.snapshot import SplitInputs


def leader_load_data(sim: Simulation) -> LoadData:
    """The simulation's last state as the leader's LoadData: each alive broker's local report, the
    leader's BundleData; broker ids stand for addresses."""
    ids = list(sim.cluster.ids)
    names = Names(ids, ids)
    brokers = {
        ids[slot]: BrokerData(local_broker_data(sim, names, slot, last_written=()))
        for slot in np.flatnonzero(sim.cluster.alive).tolist()
    }
    return LoadData(brokers, bundle_data(sim), {})


def measure(name: str, seed: int | None) -> str:
    sim = Simulation(load_scenario(name), seed=seed)
    sim.publishing.leader_data.track_long_throughputs()
    while sim.step():
        pass
    load_data = leader_load_data(sim)
    plan = find_bundles_to_split(SplitInputs.of(load_data), sim.conf)
    rates = [d.longTermData.total_msg_rate() for d in load_data.bundleData.values()]
    top = max(rates, default=0.0)
    return f"{name:<40} {sim.pop.size:>8} {top:>14,.0f} {len(plan.splits):>8} {len(plan.refused):>8}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="built-in names or YAML paths (default: every built-in)")
    parser.add_argument("--seed", type=int, default=None, help="replaces each scenario's seed")
    args = parser.parse_args(argv)
    names = args.scenarios or sorted(builtin_scenarios())
    print(f"{'scenario':<40} {'bundles':>8} {'max msg/s':>14} {'split':>8} {'refused':>8}")
    for name in names:
        print(measure(name, args.seed), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
