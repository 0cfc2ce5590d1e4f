"""How long one shedding decision and one placement call take on a large cluster.

    .venv/bin/python bench/bench_strategies.py [--brokers 1000] [--bundles 100000] [--repeat 7]

Builds a snapshot with heavy-tailed (lognormal) bundle traffic and uneven broker usage, then
times each strategy on fresh instances (the first call, as ``shedlab conform --timing`` does) and,
for AvgShedder, also the call that actually sheds once the hit counts are reached (the expensive
path). Snapshot construction is not timed. Prints a table of median and minimum milliseconds.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import make_placement, make_shedding


def build_snapshot(n_brokers: int, n_bundles: int, seed: int = 1) -> ClusterSnapshot:
    rng = np.random.default_rng(seed)
    owner = np.sort(rng.integers(0, n_brokers, n_bundles)).astype(np.int64)
    rate = rng.lognormal(mean=5.0, sigma=1.5, size=n_bundles)  # msg/s, heavy tail
    size = rng.lognormal(mean=7.0, sigma=1.0, size=n_bundles)  # bytes per message
    tp = rate * size
    broker_rate = np.bincount(owner, weights=rate, minlength=n_brokers)
    broker_tp = np.bincount(owner, weights=tp, minlength=n_brokers)
    capacity = rng.choice([0.5, 1.0, 2.0], size=n_brokers)  # heterogeneous hardware
    cpu = np.minimum(100 * broker_rate / broker_rate.mean() * 0.45 / capacity, 140.0)
    usage = np.zeros((n_brokers, 5))
    limit = np.full((n_brokers, 5), 100.0)
    usage[:, 0] = cpu
    usage[:, 3] = usage[:, 4] = 100 * broker_tp / broker_tp.max() * 0.6
    names = tuple(f"tenant/ns-{i // 64:05d}/0x{i:08x}_0x{i + 1:08x}" for i in range(n_bundles))
    half = tp / 2
    return ClusterSnapshot(
        broker_ids=tuple(f"broker-{i:04d}:8080" for i in range(n_brokers)),
        resource_usage=usage,
        resource_limit=limit,
        msg_rate_in=broker_rate / 2,
        msg_rate_out=broker_rate / 2,
        msg_throughput_in=broker_tp / 2,
        msg_throughput_out=broker_tp / 2,
        num_owned_bundles=np.bincount(owner, minlength=n_brokers).astype(np.int64),
        num_topics=np.bincount(owner, minlength=n_brokers).astype(np.int64) * 4,
        long_term_msg_rate_in=broker_rate / 2,
        long_term_msg_rate_out=broker_rate / 2,
        preallocated_long_term_msg_rate=np.zeros(n_brokers),
        preallocated_topics=np.zeros(n_brokers, dtype=np.int64),
        bundle_names=names,
        bundle_owner=owner,
        bundle_has_data=np.ones(n_bundles, dtype=np.bool_),
        bundle_sheddable=np.ones(n_bundles, dtype=np.bool_),
        bundle_recently_unloaded=rng.random(n_bundles) < 0.01,
        short_msg_rate_in=rate / 2,
        short_msg_rate_out=rate / 2,
        short_msg_throughput_in=half,
        short_msg_throughput_out=half,
        long_msg_rate_in=rate / 2,
        long_msg_rate_out=rate / 2,
        bundle_topics=np.full(n_bundles, 4, dtype=np.int64),
    )


def timed(
    fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None
) -> tuple[float, float]:
    samples = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples), min(samples)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--bundles", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    t0 = time.perf_counter()
    snap = build_snapshot(args.brokers, args.bundles)
    print(
        f"snapshot: {args.brokers} brokers, {args.bundles} bundles, built in {time.perf_counter() - t0:.2f} s"
    )
    conf = LoadBalancerConfig().with_overrides(
        {"maxUnloadPercentage": 0.5, "lowerBoundarySheddingEnabled": True}
    )
    rows: list[tuple[str, str, float, float, str]] = []

    for name in ("ThresholdShedder", "OverloadShedder", "UniformLoadShedder", "AvgShedder"):
        state: dict[str, object] = {}

        def fresh(name: str = name, state: dict[str, object] = state) -> None:
            state["s"] = make_shedding(name, 0)

        def call(state: dict[str, object] = state) -> None:
            state["r"] = state["s"].find_bundles_for_unloading(snap, conf)  # type: ignore[attr-defined]

        fresh()
        call()  # warm-up
        med, low = timed(call, args.repeat, fresh)
        rows.append((name, "shed (first call)", med, low, f"{len(state['r'])} unloads"))  # type: ignore[arg-type]

    avg_state: dict[str, object] = {}

    def primed() -> None:
        avg = make_shedding("AvgShedder", 0)
        avg.find_bundles_for_unloading(snap, conf)  # first hit; the second call sheds
        avg_state["s"] = avg

    def shed_again() -> None:
        avg_state["r"] = avg_state["s"].find_bundles_for_unloading(snap, conf)  # type: ignore[attr-defined]

    med, low = timed(shed_again, args.repeat, primed)
    rows.append(("AvgShedder", "shed (hit counts reached)", med, low, f"{len(avg_state['r'])} unloads"))  # type: ignore[arg-type]

    everyone = list(snap.broker_ids)
    everyone_idx = np.arange(snap.num_brokers, dtype=np.int64)
    for name in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight", "AvgShedder"):
        placer = make_placement(name, 0)
        for label, cands in (("ids", everyone), ("indices", everyone_idx)):
            placer.select_broker(cands, snap.bundle_names[0], snap, conf)  # warm-up (and history)
            reps = max(args.repeat, 200)
            place = functools.partial(placer.select_broker, cands, snap.bundle_names[1], snap, conf)
            med, low = timed(place, reps)
            rows.append((name, f"place ({args.brokers} candidates as {label})", med, low, ""))

    print(f"{'strategy':<30} {'call':<42} {'median ms':>10} {'min ms':>10}  note")
    for name, call_name, med, low, note in rows:
        print(f"{name:<30} {call_name:<42} {med:>10.3f} {low:>10.3f}  {note}")


if __name__ == "__main__":
    main()
