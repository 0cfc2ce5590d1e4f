"""How far CapacityAwareShedder's view of each broker lags its true score, minute by minute.

    .venv/bin/python scripts/capacity-view-lag.py examples/capacity-probes/probe-subscriptions-multiply.yaml
    .venv/bin/python scripts/capacity-view-lag.py SCENARIO --seed 1 --brokers 4 --every 2

The view is the score a cycle's plan starts from: the broker's published report, corrected by rule 7
for this strategy's own moves the report does not show yet (``_with_unseen_moves``, whose result is
recorded while the scenario runs). The truth is the broker's score that minute (``brokers.parquet``'s
``score``). Printed: for the ``--brokers`` brokers whose view lags most on average (true − view), each
cycle's ``view / true``. docs/capacity-aware.md ("Why the growing clusters' spreads are lost") quotes it
on probe-subscriptions-multiply, seed 1: a broker rewrites its report only after a change of more than
``loadBalancerReportUpdateThresholdPercentage``, which this strategy's small moves do not make.
"""

from __future__ import annotations

import argparse

import pandas as pd

from shedlab import api
from shedlab.core.sim.scenario import load_scenario
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies.base import SheddingResult
from shedlab.strategies.capacity_aware import CapacityAwareShedder, CapacityModel

PLUGIN = "shedlab.strategies.capacity_aware:CapacityAwareShedder"


def views_and_truth(scenario: str, seed: int) -> pd.DataFrame:
    """(time_s, broker, view, true, reported): each planned cycle's view of each broker beside its true
    score and its published report's (the view without rule 7's corrections)."""
    views: list[tuple[float, str, float]] = []
    start_ms = load_scenario(scenario).simulation.start_time_ms
    planned = CapacityAwareShedder._with_unseen_moves

    def recorded(
        self: CapacityAwareShedder, snapshot: ClusterSnapshot, model: CapacityModel, result: SheddingResult
    ) -> CapacityModel:
        view = planned(self, snapshot, model, result)
        seconds = (snapshot.now_ms - start_ms) / 1000
        views.extend((seconds, b, s) for b, s in zip(snapshot.broker_ids, view.scores.tolist(), strict=True))
        return view

    CapacityAwareShedder._with_unseen_moves = recorded  # type: ignore[method-assign]
    try:
        brokers = api.simulate(scenario, strategy=PLUGIN, seed=seed).brokers
    finally:
        CapacityAwareShedder._with_unseen_moves = planned  # type: ignore[method-assign]
    frame = pd.DataFrame(views, columns=["time_s", "broker", "view"])
    truth = brokers[["time_s", "broker", "score", "reported_score"]]
    truth = truth.rename(columns={"score": "true", "reported_score": "reported"})
    truth["broker"] = truth["broker"].astype(str)
    return frame.merge(truth, on=["time_s", "broker"], how="inner")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--brokers", type=int, default=4, help="how many of the most lagging brokers")
    parser.add_argument("--every", type=int, default=1, help="print every k-th planned minute")
    args = parser.parse_args()
    joined = views_and_truth(args.scenario, args.seed)
    joined["lag"] = joined["true"] - joined["view"]
    worst = joined.groupby("broker")["lag"].mean().nlargest(args.brokers).index.tolist()
    shown = joined[joined["broker"].isin(worst)].copy()
    shown["cell"] = [f"{v:5.1f} / {t:5.1f}" for v, t in zip(shown["view"], shown["true"], strict=True)]
    table = shown.pivot(index="time_s", columns="broker", values="cell")[worst]
    table.index = (table.index // 60).astype(int).rename("minute")
    print(f"view / true score of the {len(worst)} brokers whose view lags most, seed {args.seed}")
    print(table.iloc[:: args.every].to_string())


if __name__ == "__main__":
    main()
