"""Benchmark: a LoadData snapshot's build and the leader's bundle split check on it, and print both.

    .venv/bin/python bench/bench_split_check.py                       # 1,000 brokers × 100 bundles
    .venv/bin/python bench/bench_split_check.py --brokers 200 --bundles 50

``decide`` and ``advise`` build a :class:`~shedlab.model.snapshot.ClusterSnapshot` from the LoadData they
read, then run the split check (:mod:`shedlab.manager.split`) before the shedding cycle. The check walks
every broker's ``lastStats``; its inputs are read from the LoadData only when it runs. Printed: the
median of ``--repeat`` builds and checks, and the number of bundles split (every bundle here has 3
topics and a long-term rate under the thresholds, so none: the walk is the cost).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from shedlab.config import LoadBalancerConfig
from shedlab.manager.split import split_check
from shedlab.model.pulsar import BrokerData, BundleData, LoadData, LocalBrokerData, NamespaceBundleStats
from shedlab.model.snapshot import ClusterSnapshot


def load_data(brokers: int, bundles: int) -> LoadData:
    """``brokers`` brokers of ``bundles`` bundles each, one namespace a broker, every bundle with data."""
    broker_data: dict[str, BrokerData] = {}
    bundle_data: dict[str, BundleData] = {}
    for b in range(brokers):
        stats = {}
        for k in range(bundles):
            name = f"t/ns{b}/0x{k * 1000:08x}_0x{k * 1000 + 1000:08x}"
            stats[name] = NamespaceBundleStats(msgRateIn=10.0, topics=3, consumerCount=1, producerCount=1)
            bundle_data[name] = BundleData()
        local = LocalBrokerData(bundles=list(stats))
        local.lastStats = stats
        broker_data[f"10.{b // 62500}.{b // 250 % 250}.{b % 250}:8080"] = BrokerData(local)
    return LoadData(broker_data, bundle_data, {})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--bundles", type=int, default=100, help="bundles per broker")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    data = load_data(args.brokers, args.bundles)
    conf = LoadBalancerConfig()
    builds, checks, split = [], [], 0
    for _ in range(args.repeat):
        started = time.perf_counter()
        snapshot = ClusterSnapshot.from_load_data(data)
        built = time.perf_counter()
        plan = split_check(snapshot, conf)
        builds.append(built - started)
        checks.append(time.perf_counter() - built)
        split = 0 if plan is None else len(plan.splits)
    print(f"brokers/bundles {args.brokers} / {args.brokers * args.bundles}")
    print(f"snapshot build  {statistics.median(builds) * 1000:.0f} ms (median of {args.repeat})")
    print(f"split check     {statistics.median(checks) * 1000:.0f} ms (median of {args.repeat})")
    print(f"bundles split   {split}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
