"""How CapacityAwareShedder's predicted change of a broker's score compares with what followed.

    .venv/bin/python scripts/capacity-prediction-error.py examples/capacity-probes/probe-schema-growth.yaml
    .venv/bin/python scripts/capacity-prediction-error.py SCENARIO... --seeds 1 2 3 --after 2

For every broker a cycle's moves touched, the plan's predicted change of its score (the sum over the
cycle's unloads of ``source_predicted − source_predicted_before``, and of the destination's) is
compared with its true score ``--after`` ticks later against the tick of the moves (``true``), and
with its own change over the ``--after`` ticks before (``trend``). Printed per scenario: the means per
side (sources, destinations) over the seeds. Where ``true ≈ predicted + trend``, the predictions are
right and the gap is the cluster's own drift: docs/capacity-aware.md, "Why the growing clusters'
spreads are lost", quotes this on probe-subscriptions-multiply, probe-weak-class-surge and
probe-schema-growth (seeds 1-3).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import pandas as pd

from shedlab import api

PLUGIN = "shedlab.strategies.capacity_aware:CapacityAwareShedder"


def predicted_changes(decisions: pd.DataFrame) -> dict[tuple[int, str], float]:
    """(tick, broker) → the predicted change of its score by that tick's moves."""
    change: dict[tuple[int, str], float] = defaultdict(float)
    columns = decisions[["tick", "source", "destination", "reason"]]
    for tick, source, destination, reason in columns.itertuples(index=False):
        why = json.loads(reason)
        if "source_predicted" not in why:  # rule 0's AvgShedder pairs carry no prediction
            continue
        change[(int(tick), source)] += why["source_predicted"] - why["source_predicted_before"]
        change[(int(tick), destination)] += why["destination_predicted"] - why["destination_predicted_before"]
    return change


def rows_of(scenario: str, seed: int, after: int) -> list[tuple[str, float, float, float]]:
    """(side, predicted, true, trend) for every broker a cycle's moves touched in one run."""
    result = api.simulate(scenario, strategy=PLUGIN, seed=seed)
    brokers = result.brokers
    ticks, names = brokers["tick"].tolist(), brokers["broker"].astype(str).tolist()
    scores = dict(zip(zip(ticks, names, strict=True), brokers["score"].tolist(), strict=True))
    rows = []
    for (tick, broker), predicted in predicted_changes(result.decisions).items():
        if (tick - after, broker) not in scores or (tick + after, broker) not in scores:
            continue
        now = scores[(tick, broker)]
        true = scores[(tick + after, broker)] - now
        trend = now - scores[(tick - after, broker)]
        rows.append(("source" if predicted < 0 else "destination", predicted, true, trend))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="+")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--after", type=int, default=2, help="ticks after (and before) the moves")
    args = parser.parse_args()
    for scenario in args.scenarios:
        rows = [row for seed in args.seeds for row in rows_of(scenario, seed, args.after)]
        frame = pd.DataFrame(rows, columns=["side", "predicted", "true", "trend"])
        print(scenario)
        print(frame.groupby("side")[["predicted", "true", "trend"]].mean().round(2).to_string())


if __name__ == "__main__":
    main()
