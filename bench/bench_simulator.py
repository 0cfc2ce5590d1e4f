"""Benchmark: simulate a day of a 1,000-broker, 100,000-bundle cluster and print ticks/s and peak memory.

    .venv/bin/python bench/bench_simulator.py                 # the full day: 1,440 one-minute ticks
    .venv/bin/python bench/bench_simulator.py --ticks 120     # shorter
    .venv/bin/python bench/bench_simulator.py --initial-assignment placement   # Pulsar's lookups at start
    .venv/bin/python bench/bench_simulator.py --resolution 30s   # two steps per tick (simulation.resolution)
    .venv/bin/python bench/bench_simulator.py --ticks 600 --phases   # ms per tick of each kernel step

``--phases`` times the kernel's steps (traffic, lookups, measure, stats samples, the report check, the
report writes with the leader's averages, shedding with its snapshot, the tick's metrics) after a
warm-up of 100 ticks and counts the brokers that write per tick: a profile by phase, not by function,
with a few timer calls per step added to the run (the other figures are then slightly higher).

Peak memory is the process's maximum resident set size (``resource.getrusage``), which includes the
Python interpreter and the imported libraries (about 150 MB before the simulation starts).
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from shedlab.core.sim import Scenario, run_simulation
from shedlab.core.sim import kernel as sim_kernel
from shedlab.core.sim.metrics import TickMetrics
from shedlab.core.sim.publishing import Publishing
from shedlab.core.sim.traffic import TrafficModel

WARMUP_TICKS = 100
PHASES: tuple[tuple[Any, str, str], ...] = (
    (sim_kernel.Simulation, "tick", "whole tick"),
    (sim_kernel.Simulation, "_shed", "shedding (with its snapshot)"),
    (Publishing, "snapshot", "  of which the leader's snapshot"),
    (sim_kernel.Simulation, "_publish", "report writes and the leader's averages"),
    (TrafficModel, "at", "traffic"),
    (sim_kernel, "measure", "measure (true usage)"),
    (TickMetrics, "end_tick", "the tick's metrics"),
    (Publishing, "writers", "report check"),
    (Publishing, "sample", "stats samples"),
    (sim_kernel.Simulation, "_lookups", "lookups"),
)
"""(owner, attribute, label) of each timed phase; the kernel looks these names up at call time."""


def scenario(
    brokers: int, bundles: int, ticks: int, assignment: str, strategy: str, seed: int, resolution: str | None
) -> Scenario:
    namespaces = max(bundles // 16, 1)
    tenants = max(namespaces // 25, 1)
    per_tenant = max(namespaces // tenants, 1)
    return Scenario.from_mapping(
        {
            "name": f"bench-{brokers}x{bundles}",
            "duration": f"{(ticks - 1) * 60}s",
            "seed": seed,
            "strategy": strategy,
            "simulation": {
                "initial_assignment": assignment,
                **({"resolution": resolution} if resolution else {}),
            },
            "brokers": [
                {"count": brokers * 3 // 4},
                {"count": brokers - brokers * 3 // 4, "hardware": "big", "background": {"cpu": 0.05}},
            ],
            "hardware": {"big": {"cores": 32, "nic_gbps": 25}},
            "workloads": [
                {
                    "tenants": tenants,
                    "namespaces": per_tenant,
                    "bundles": 16,
                    "topics": {"dist": "uniform", "low": 1, "high": 40},
                    "msg_rate_in": {"dist": "lognormal", "median": 300, "sigma": 1.2},
                    "msg_size": {"dist": "choice", "values": [256, 1024, 4096]},
                    "fanout": {"dist": "choice", "values": [1, 2, 3]},
                    "shapes": [
                        {"kind": "diurnal", "amplitude": 0.4},
                        {"kind": "noise", "sigma": 0.1},
                        {"kind": "spikes", "rate_per_hour": 0.5, "duration": "3m", "amplitude": 3},
                        {
                            "kind": "onoff",
                            "period": "2m",
                            "on": "1m",
                            "select": {"fraction": 0.02},
                        },
                    ],
                }
            ],
        },
        source="bench",
    )


@contextmanager
def timed_phases(seconds: dict[str, float], writers: list[int]) -> Iterator[None]:
    """Wrap each of :data:`PHASES` with a timer (seconds summed per label once the warm-up is over) and
    count the brokers :meth:`Publishing.writers` returns per call; restore the originals on exit."""
    state = {"tick": 0}

    def wrap(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if label == "whole tick":
                state["tick"] = int(args[1])
            started = time.perf_counter()
            out = fn(*args, **kwargs)
            if state["tick"] >= WARMUP_TICKS:
                seconds[label] += time.perf_counter() - started
                if fn is original_writers:
                    writers.append(int(np.asarray(out).size))
            return out

        return timed

    original_writers = Publishing.writers
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in PHASES]
    for (owner, name, label), (_, _, fn) in zip(PHASES, saved, strict=True):
        setattr(owner, name, wrap(label, fn))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def print_phases(seconds: dict[str, float], writers: list[int], ticks: int) -> None:
    """Milliseconds per tick of each phase after the warm-up, and the brokers writing per tick."""
    measured = max(ticks - WARMUP_TICKS, 1)
    print(f"phases          ms per tick, ticks {WARMUP_TICKS}-{ticks - 1}")
    for _, _, label in PHASES:
        print(f"  {label:<42}{1000 * seconds[label] / measured:7.2f}")
    if writers:
        print(f"  {'brokers writing a report, per tick':<42}{np.mean(writers):7.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--bundles", type=int, default=100_000)
    parser.add_argument("--ticks", type=int, default=1440, help="one-minute ticks (1,440 = one day)")
    parser.add_argument("--strategy", default="AvgShedder")
    parser.add_argument(
        "--initial-assignment", default="round_robin", choices=["placement", "round_robin", "random"]
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--resolution", default=None, help="simulation.resolution, e.g. 30s (default: off)")
    parser.add_argument("--phases", action="store_true", help="also print ms per tick of each kernel step")
    args = parser.parse_args(argv)
    scen = scenario(
        args.brokers,
        args.bundles,
        args.ticks,
        args.initial_assignment,
        args.strategy,
        args.seed,
        args.resolution,
    )
    started = time.perf_counter()
    cpu_started = time.process_time()
    first_tick: list[float] = []

    def progress(done: int, total: int) -> None:
        if done == 1:
            first_tick.append(time.perf_counter() - started)

    seconds: dict[str, float] = defaultdict(float)
    writers: list[int] = []
    if args.phases:
        with timed_phases(seconds, writers):
            result = run_simulation(scen, progress=progress)
    else:
        result = run_simulation(scen, progress=progress)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    if sys.platform == "darwin":  # pragma: no cover - macOS reports bytes
        peak_mb /= 1024.0
    ticks = len(result.ticks)
    first = first_tick[0] if first_tick else 0.0
    steady = (ticks - 1) / (elapsed - first) if elapsed > first else float("nan")
    rows = [
        (
            "scenario",
            f"{scen.name}, {result.strategy}, initial assignment: {args.initial_assignment}"
            + (f", resolution: {args.resolution}" if args.resolution else ""),
        ),
        ("brokers/bundles", f"{args.brokers} / {result.summary['bundles']}"),
        ("ticks", f"{ticks}"),
        ("wall time", f"{elapsed:.1f} s (first tick, with the initial assignment: {first:.1f} s)"),
        ("cpu time", f"{cpu:.1f} s (this process; less sensitive than wall time to other load)"),
        ("ticks/s", f"{ticks / elapsed:.1f} overall, {steady:.1f} after the first tick"),
        ("unloads", f"{result.summary['unloads']}"),
        ("peak memory", f"{peak_mb:.0f} MB (max RSS)"),
    ]
    for label, value in rows:
        print(f"{label:<16}{value}")
    if args.phases:
        print_phases(seconds, writers, ticks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
