"""Could CapacityAwareShedder estimate a CPU cost per topic beside its cost per message? Measured: no.

    .venv/bin/python scripts/capacity-topic-cost.py examples/capacity-probes/probe-connection-heavy.yaml
    .venv/bin/python scripts/capacity-topic-cost.py SCENARIO... --seed 1

Rule 1 of docs/capacity-aware.md estimates one CPU cost per message as the lower envelope of the
brokers' ``cpu / msg/s`` (background only adds usage). The natural extension to two costs is the
largest explained CPU under the same envelope: costs ``(c_m, c_t) ≥ 0`` with ``c_m·msgs_b + c_t·topics_b
≤ cpu_b`` on every broker with traffic, maximising ``Σ_b c_m·msgs_b + c_t·topics_b``; with ``c_t = 0`` it
is rule 1's estimate. This script runs the strategy on each scenario, solves that problem on the
leader's snapshots it planned from (the second, the middle and the last one) and prints, for each, the
share of the explained CPU it puts on topics and how much more CPU it explains than rule 1 (``+0.17``:
17 % more). docs/capacity-aware.md ("Limits") quotes it: the share comes out as large on clusters
whose simulated CPU charges nothing per topic as on those that do, so the per-topic cost cannot be
told from a background, and it was not built.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from shedlab import api
from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import CPU, ClusterSnapshot, FloatArray
from shedlab.strategies.base import SheddingResult
from shedlab.strategies.capacity_aware import MSGS, CapacityAwareShedder, broker_load

PLUGIN = "shedlab.strategies.capacity_aware:CapacityAwareShedder"


def envelope(msgs: FloatArray, topics: FloatArray, cpu: FloatArray) -> tuple[float, float]:
    """The two costs explaining the most CPU under every broker's: the best vertex of the 2-variable
    problem (an axis' intercept or where two brokers' constraints cross)."""
    vertices = [(float(np.min(cpu / msgs)), 0.0)]
    if bool((topics > 0).all()):
        vertices.append((0.0, float(np.min(cpu / topics))))
    i, j = np.triu_indices(msgs.size, 1)
    det = msgs[i] * topics[j] - msgs[j] * topics[i]
    ok = det != 0
    i, j, det = i[ok], j[ok], det[ok]
    c_m = (cpu[i] * topics[j] - cpu[j] * topics[i]) / det
    c_t = (msgs[i] * cpu[j] - msgs[j] * cpu[i]) / det
    vertices += [(m, t) for m, t in zip(c_m.tolist(), c_t.tolist(), strict=True) if m >= 0 and t >= 0]
    feasible = [(m, t) for m, t in vertices if bool(np.all(m * msgs + t * topics <= cpu * (1 + 1e-12)))]
    return max(feasible, key=lambda v: v[0] * msgs.sum() + v[1] * topics.sum())


def topic_share(snapshot: ClusterSnapshot) -> tuple[float, float] | None:
    """(share of the explained CPU on topics, CPU explained beyond rule 1's estimate), None under two
    brokers with traffic."""
    msgs = broker_load(snapshot)[:, MSGS]
    loaded = msgs > 0
    if int(loaded.sum()) < 2:
        return None
    m, t = msgs[loaded], snapshot.num_topics[loaded].astype(np.float64)
    cpu = np.maximum(snapshot.resource_usage[loaded, CPU], 0.0)
    c_m, c_t = envelope(m, t, cpu)
    explained, messages_only = c_m * m.sum() + c_t * t.sum(), float(np.min(cpu / m)) * m.sum()
    return c_t * t.sum() / explained, explained / messages_only - 1


@contextmanager
def planned_snapshots() -> Iterator[list[ClusterSnapshot]]:
    """The snapshots the strategy's shedding cycles plan from (not its placements'), while the block runs."""
    seen: list[ClusterSnapshot] = []
    original = CapacityAwareShedder.find_bundles_for_unloading

    def recording(
        self: CapacityAwareShedder, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        seen.append(snapshot)
        return original(self, snapshot, conf)

    CapacityAwareShedder.find_bundles_for_unloading = recording  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        CapacityAwareShedder.find_bundles_for_unloading = original  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="+")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"{'scenario':<52} topics' share / CPU explained beyond rule 1: 2nd, middle, last snapshot")
    for scenario in args.scenarios:
        with planned_snapshots() as seen:
            api.simulate(scenario, strategy=PLUGIN, seed=args.seed)
        picks = [seen[k] for k in sorted({1, len(seen) // 2, len(seen) - 1}) if 0 <= k < len(seen)]
        shares = [topic_share(s) for s in picks]
        cells = ["-" if v is None else f"{v[0]:.2f} / {v[1]:+.2f}" for v in shares]
        print(f"{scenario.rsplit('/', 1)[-1]:<52} " + "   ".join(cells))


if __name__ == "__main__":
    main()
