"""Benchmark: how fast the sandbox can run, with and without ZooKeeper, and how long one load report takes.

    .venv/bin/python bench/bench_sandbox.py                      # slow-balancing: 100 brokers, 1600 bundles
    .venv/bin/python bench/bench_sandbox.py --scenario broker-loss --ticks 40

Prints simulated ticks per wall-clock second (the most ``--speed`` can reach: ``ticks/s × tick``), with
the znodes written to a private ZooKeeper and without, and the median time of one
``GET /admin/v2/broker-stats/load-report`` over loopback. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import statistics
import time

import httpx

from shedlab.cluster.sandbox import Sandbox


def _ticks_per_second(scenario: str, ticks: int, zookeeper: str | None) -> tuple[float, float]:
    with Sandbox(scenario, zookeeper=zookeeper) as sb:
        start = time.perf_counter()
        done = sb.advance(ticks)
        elapsed = time.perf_counter() - start
        tick_s = sb.simulation.tick_ms / 1000.0
        return done / elapsed, done / elapsed * tick_s


def _report_latency(scenario: str, requests: int) -> float:
    with Sandbox(scenario, zookeeper=None) as sb, httpx.Client(timeout=10.0) as http:
        url = next(iter(sb.broker_urls.values())) + "/admin/v2/broker-stats/load-report"
        times = []
        for _ in range(requests):
            start = time.perf_counter()
            http.get(url).raise_for_status()
            times.append(time.perf_counter() - start)
        return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="slow-balancing")
    parser.add_argument("--ticks", type=int, default=30)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    for label, zk in (("without ZooKeeper", None), ("with ZooKeeper", "auto")):
        rate, speed = _ticks_per_second(args.scenario, args.ticks, zk)
        print(f"{args.scenario} {label}: {rate:.1f} ticks/s (up to --speed {speed:.0f})")
    latency = _report_latency(args.scenario, args.requests)
    print(f"load-report over loopback: median {latency * 1000:.1f} ms")


if __name__ == "__main__":
    main()
