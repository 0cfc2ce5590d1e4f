"""The report-publishing rule (spec §4.3) exactly on its thresholds, through ``Publishing.writers``.

A broker writes its local report when some quantity changed by *more than*
``loadBalancerReportUpdateThresholdPercentage`` or when its last write is *older than*
``loadBalancerReportUpdateMaxIntervalMinutes``; equality writes nothing. The numbers are exact in
binary floating point, so the boundary cases really sit on the boundary.
"""

from __future__ import annotations

import numpy as np
import pytest

from shedlab.config import LoadBalancerConfig
from shedlab.core.sim.publishing import Publishing

START = 1_000_000_000
MINUTE = 60_000
IDS = ["broker-0001:8080", "broker-0002:8080"]


def publishing(threshold: int = 25) -> Publishing:
    conf = LoadBalancerConfig().with_overrides(
        {
            "loadBalancerReportUpdateThresholdPercentage": threshold,
            "loadBalancerReportUpdateMaxIntervalMinutes": 15,
        }
    )
    pub = Publishing.new(
        conf,
        IDS,
        ("t/ns/0x0_0x1",),
        start_ms=START,
        tick_ms=MINUTE,
        random_phase=False,
        rng=np.random.default_rng(0),
    )
    for reports in (pub.published, pub.local):
        reports.limit[:] = 100.0
        reports.usage[:, 0] = 50.0  # cpu 50 %
        reports.agg[:] = [100.0, 100.0, 1000.0, 1000.0]
        reports.bundles[:] = 4
    pub.has_report[:] = True
    pub.last_update_ms[:] = START
    return pub


ALIVE = np.array([0, 1], dtype=np.int64)
NOW = START + MINUTE


def test_nothing_changed_nothing_written() -> None:
    assert publishing().writers(NOW, ALIVE).size == 0


@pytest.mark.parametrize(
    ("column", "on", "above"),
    [
        (0, 150.0, 151.0),  # message rate in: 200 → 250 is +25 %
        (1, 50.0, 49.0),  # message rate out: 200 → 150 is −25 %
        (2, 1500.0, 1501.0),  # throughput in: 2000 → 2500
        (3, 500.0, 499.0),  # throughput out: 2000 → 1500
    ],
)
def test_rate_and_throughput_changes_must_exceed_the_threshold(column: int, on: float, above: float) -> None:
    pub = publishing()
    pub.local.agg[1, column] = on
    assert pub.writers(NOW, ALIVE).size == 0
    pub.local.agg[1, column] = above
    assert pub.writers(NOW, ALIVE).tolist() == [1]


def test_bundle_count_change_must_exceed_the_threshold() -> None:
    pub = publishing()
    pub.local.bundles[0] = 5  # 4 → 5: +25 %
    assert pub.writers(NOW, ALIVE).size == 0
    pub = publishing(threshold=24)
    pub.local.bundles[0] = 5
    assert pub.writers(NOW, ALIVE).tolist() == [0]


def test_usage_change_in_points_must_exceed_the_threshold() -> None:
    pub = publishing()
    pub.local.usage[0, 0] = 75.0  # U 0.5 → 0.75: 25 points
    assert pub.writers(NOW, ALIVE).size == 0
    pub.local.usage[0, 0] = 78.125
    assert pub.writers(NOW, ALIVE).tolist() == [0]
    pub = publishing()
    pub.local.usage[1, 3] = 75.5  # bandwidth in now the max resource: 50 → 75.5
    assert pub.writers(NOW, ALIVE).tolist() == [1]


def test_a_report_exactly_max_interval_old_is_not_stale() -> None:
    pub = publishing()
    assert pub.writers(START + 15 * MINUTE, ALIVE).size == 0
    assert pub.writers(START + 15 * MINUTE + 1, ALIVE).tolist() != []
    assert sorted(pub.writers(START + 15 * MINUTE + 1, ALIVE).tolist()) == [0, 1]


def test_writers_come_in_write_rank_order_and_need_a_report() -> None:
    pub = publishing()
    late = START + 16 * MINUTE
    writers = pub.writers(late, ALIVE).tolist()
    assert writers == sorted([0, 1], key=lambda s: int(pub.write_rank[s]))
    pub.has_report[0] = False
    assert pub.writers(late, ALIVE).tolist() == [1]
    assert pub.writers(late, np.array([0], dtype=np.int64)).size == 0
