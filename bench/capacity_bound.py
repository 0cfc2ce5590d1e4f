"""The least score spread k moves can buy on `heterogeneous-strong-machine`, whatever the strategy.

    .venv/bin/python bench/capacity_bound.py [--seeds 10] [--max-moves 3]

Issue 15 asks CapacityAwareShedder for a lower mean spread than ThresholdShedder + LRUWW *and* fewer
unloads on every heterogeneous scenario. On this one, ThresholdShedder + LRUWW makes 0 or 6 unloads
depending on the seed (2.6 on average over the capacity grid's ten seeds, spread 36.5). This script
asks what any strategy could reach with k moves: it starts the cluster with k bundles already moved from
the 8-core brokers to the 32-core one (each way of choosing their sources, up to symmetry), which is
better than any strategy can do (a real one moves only after reports, hit counts and a shedding
interval), runs the scenario's 30 minutes under a strategy that never moves (OverloadShedder far below
its threshold; the unload column shows it), and prints the mean spread over seeds. If k moves at tick 0
cannot beat a spread, no strategy that makes k moves in every run can.

The traffic is the built-in scenario's: each broker's bundles are one workload pinned to it, with the
built-in workload's rate, size and noise.
"""

from __future__ import annotations

import argparse
import importlib.resources
import statistics
from collections.abc import Iterator
from typing import Any

import yaml

from shedlab.core.sim import Scenario, run_simulation

SCENARIO = "heterogeneous-strong-machine"
NEVER_MOVES = "OverloadShedder+LeastLongTermMessageRate"


def builtin_mapping() -> dict[str, Any]:
    text = importlib.resources.files("shedlab").joinpath("data", "scenarios", f"{SCENARIO}.yaml").read_text()
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def pinned(base: dict[str, Any], counts: list[int]) -> Scenario:
    """The built-in scenario started with ``counts[i]`` bundles on broker i + 1."""
    (workload,) = base["workloads"]
    traffic = {key: workload[key] for key in ("msg_rate_in", "msg_size", "shapes")}
    workloads = [
        {
            "name": f"on-{i}",
            "tenant_prefix": f"t{i}",
            "namespaces": 1,
            "bundles": c,
            "brokers": [i],
            **traffic,
        }
        for i, c in enumerate(counts, start=1)
        if c
    ]
    mapping = {key: base[key] for key in ("duration", "seed", "hardware", "brokers")}
    mapping.update(name=f"{SCENARIO}-pinned", strategy=NEVER_MOVES, workloads=workloads)
    return Scenario.from_mapping(mapping, source=f"{SCENARIO} pinned {counts}")


def partitions(k: int, parts: int, largest: int) -> Iterator[tuple[int, ...]]:
    """Ways to take k bundles from ``parts`` identical brokers (non-increasing, so up to symmetry)."""
    if parts == 0:
        if k == 0:
            yield ()
        return
    for first in range(min(k, largest), -1, -1):
        for rest in partitions(k - first, parts - 1, first):
            yield (first, *rest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--max-moves", type=int, default=3)
    args = parser.parse_args(argv)
    base = builtin_mapping()
    (workload,) = base["workloads"]
    per_broker = workload["namespaces"] * workload["bundles"] // 4  # round robin over the four brokers
    print(f"{SCENARIO}: k bundles moved from the 8-core brokers to the 32-core one at tick 0, no move after")
    print(
        f"{'moves':>5}  {'taken from each 8-core broker':<30} {'spread (mean of seeds)':>24} {'unloads':>8}"
    )
    for k in range(args.max_moves + 1):
        for taken in partitions(k, 3, k):
            counts = [per_broker - t for t in taken] + [per_broker + k]
            spreads, unloads = [], 0
            for seed in range(1, args.seeds + 1):
                summary = run_simulation(pinned(base, counts), seed=seed).summary
                spreads.append(float(summary["score_spread_mean"]))
                unloads += int(summary["unloads"])
            print(f"{k:>5}  {list(taken)!s:<30} {statistics.fmean(spreads):>24.2f} {unloads:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
