"""The metric ranges the evaluation keeps intervals inside must hold for real run summaries: a metric
that can be negative (or a fraction above 1) fails here until ``metric_range`` knows it."""

from __future__ import annotations

import math

import pytest

from shedlab.core.evaluation import EXCLUDED_METRICS, metric_range
from shedlab.core.results import RUN_SUMMARY_ARROW
from shedlab.core.sim import load_scenario, run_simulation


@pytest.mark.parametrize(
    ("scenario", "strategy"),
    [
        ("broker-loss", "ThresholdShedder+LeastResourceUsageWithWeight"),
        ("load-jitter", "UniformLoadShedder+LeastLongTermMessageRate"),
        ("over-unloading-90-10", "AvgShedder"),
    ],
)
def test_every_run_metric_lies_in_its_range(scenario: str, strategy: str) -> None:
    summary = run_simulation(load_scenario(scenario), strategy=strategy, seed=2).summary
    metrics = {
        k: v
        for k, v in summary.items()
        if k not in RUN_SUMMARY_ARROW.names and k not in EXCLUDED_METRICS and isinstance(v, int | float)
    }
    assert len(metrics) > 20  # the summary's metrics, not an empty dict that passes vacuously
    for name, value in metrics.items():
        low, high = metric_range(name)
        assert low <= value <= high or math.isnan(value), f"{name} = {value} outside [{low}, {high}]"
