"""Per-tick metrics collection: churn counters, unload rows, tick rows, flips, over-placements."""

from __future__ import annotations

import json

import numpy as np

from shedlab.core.sim.hardware import CostModel, HardwareClass
from shedlab.core.sim.metrics import Churn, TickMetrics
from shedlab.core.sim.publishing import LeaderView
from shedlab.core.sim.scenario import MetricsSettings
from shedlab.core.sim.state import TrueUsage, broker_scores
from shedlab.core.sim.traffic import Traffic
from shedlab.manager import ManagerDecision

START = 1_000_000
IDS = ["broker-0001:8080", "broker-0002:8080", "broker-0003:8080"]
WEIGHTS = (1.0, 1.0, 1.0, 1.0)
TRAFFIC = Traffic(
    rate_in=np.array([100.0, 200.0, 300.0, 400.0]),
    rate_out=np.array([1.0, 2.0, 3.0, 4.0]),
    tp_in=np.array([1e8, 2e8, 3e8, 4e8]),
    tp_out=np.array([1e7, 2e7, 3e7, 4e7]),
)


def test_churn_counts_moves_within_grace_and_window() -> None:
    churn = Churn.new(3, grace_ms=1000, window_ms=5000)
    churn.count(np.array([0, 1]), 10_000)
    assert (churn.within_grace, churn.within_window) == (0, 0)  # first moves
    churn.count(np.array([0]), 11_000)  # 1 s later: within both
    churn.count(np.array([1]), 14_000)  # 4 s later: within the window only
    churn.count(np.array([0]), 20_000)  # 9 s later: neither
    assert (churn.within_grace, churn.within_window) == (1, 2)
    assert churn.last_move_ms.tolist() == [20_000, 14_000, -(2**62)]


def metrics(topics: list[int] | None = None) -> TickMetrics:
    hardware = [HardwareClass(cores=4)] * 3
    return TickMetrics(
        start_ms=START,
        tick_ms=60_000,
        weights=WEIGHTS,
        overload_pct=85.0,
        settings=MetricsSettings(over_placement_margin=10.0, over_unloading_margin=5.0),
        cost=CostModel(hardware),
        bundle_topics=np.asarray(topics or [1, 2, 3, 4], dtype=np.int64),
        clients=np.array([10, 20, 30, 40], dtype=np.int64),
        slot_of={b: s for s, b in enumerate(IDS)},
        churn=Churn.new(4, 1000, 2000),
    )


def true_usage(m: TickMetrics, owner: list[int], slots: list[int]) -> TrueUsage:
    alive = np.asarray(slots, dtype=np.int64)
    agg = np.zeros((3, 4))
    for j, s in enumerate(owner):
        if s >= 0:
            agg[s] += [TRAFFIC.rate_in[j], TRAFFIC.rate_out[j], TRAFFIC.tp_in[j], TRAFFIC.tp_out[j]]
    topics = np.zeros(3, dtype=np.int64)
    bundles = np.zeros(3, dtype=np.int64)
    for j, s in enumerate(owner):
        if s >= 0:
            topics[s] += m.bundle_topics[j]
            bundles[s] += 1
    bg = np.zeros((alive.size, 3))
    usage = m.cost.usage(
        alive, agg[alive, 0], agg[alive, 1], agg[alive, 2], agg[alive, 3], topics[alive].astype(float), bg
    )
    limit = m.cost.limits(alive)
    return TrueUsage(
        slots=alive,
        usage=usage,
        limit=limit,
        score=broker_scores(usage, limit, WEIGHTS),
        background=bg,
        agg=agg[alive],
        bundles=bundles[alive],
        topics=topics[alive],
        slot_agg=agg,
        slot_bundles=bundles,
        slot_topics=topics,
        slot_consumers=bundles,
        slot_producers=bundles,
        bundle_bin=np.asarray([s if s >= 0 else 3 for s in owner], dtype=np.int64),
        unowned=sum(1 for s in owner if s < 0),
    )


def end_tick(
    m: TickMetrics,
    t: int,
    true: TrueUsage,
    decisions: list[ManagerDecision],
    owner: np.ndarray,
    written: np.ndarray,
    totals: tuple[int, int],
) -> None:
    """Tick ``t`` with broker 1 as the leader and no snapshot built yet."""
    view = LeaderView(IDS, ("b0", "b1", "b2", "b3"))
    m.end_tick(
        t,
        START + t * 60_000,
        TRAFFIC,
        true,
        decisions,
        owner=owner,
        view=view,
        written=written,
        leader=0,
        unload_totals=totals,
    )


def test_unload_rows_and_moves() -> None:
    m = metrics()
    m.begin_tick()
    true = true_usage(m, [0, 0, 1, 2], [0, 1, 2])
    hot_line, true_score = m.true_scores(true)
    alive = np.flatnonzero(~np.isnan(true_score))
    assert alive.tolist() == [0, 1, 2]
    assert hot_line == float(np.mean(true_score[alive])) + 10.0
    m.unloaded(START + 120_000, [], [], [], TRAFFIC, true)  # a shedding without decisions: no rows
    assert m.collector.decision_rows == [] and m.moves.unloads == 0
    d = ManagerDecision(START + 120_000, IDS[0], "b1", IDS[1], {"x": np.int64(3), "s": {2, 1}})
    m.unloaded(START + 120_000, [d, d], [1, 1], [True, False], TRAFFIC, true)  # then unowned: no traffic
    rows = m.collector.decision_rows
    assert rows[0]["tick"] == 2 and rows[0]["time_s"] == 120.0
    assert rows[0]["msg_rate"] == 202.0 and rows[0]["throughput"] == 2.2e8
    assert rows[0]["topics"] == 2 and rows[0]["clients"] == 20
    assert rows[0]["source_score"] == true_score[0] and rows[0]["destination_score"] == true_score[1]
    assert json.loads(rows[0]["reason"]) == {"s": [1, 2], "x": 3}
    assert rows[1]["msg_rate"] == 0.0 and rows[1]["clients"] == 0
    assert (m.moves.unloads, m.moves.msg_rate, m.moves.topics, m.moves.clients) == (2, 202.0, 2, 20)
    m.begin_tick()
    assert m.moves.unloads == 0


def test_tick_row_counts_and_flips() -> None:
    m = metrics()
    owner = np.array([0, 0, 1, -1], dtype=np.int64)
    written = np.array([True, False, True])
    m.begin_tick()
    m.lookups_done([])
    true = true_usage(m, owner.tolist(), [0, 1, 2])
    assert true.score[0] > true.score.mean()  # broker 1 is on the hot side
    unload = [ManagerDecision(START, IDS[0], "b0", IDS[2])]
    end_tick(m, 0, true, unload, owner, written, (1, 1))
    row = m.collector.tick_rows[-1]
    assert row["brokers"] == 3 and row["bundles_unowned"] == 1
    assert row["msg_rate_total"] == 606.0  # bundles 0-2 (bundle 3 is unowned)
    assert row["reports_published"] == 2 and row["over_unloading_flips"] == 0
    assert np.isnan(row["reported_score_spread"])  # no snapshot built yet
    assert row["unload_bundle_total"] == 1
    # next tick broker 1 is the coldest, well below the mean: a flip
    m.begin_tick()
    owner = np.array([2, 2, 1, 2], dtype=np.int64)
    true = true_usage(m, owner.tolist(), [0, 1, 2])
    end_tick(m, 1, true, [], owner, written, (1, 1))
    assert m.collector.tick_rows[-1]["over_unloading_flips"] == 1
    _, brokers, _, _ = m.collector.frames(IDS)
    assert brokers["broker"].tolist() == IDS * 2
    assert brokers["leader"].tolist() == [True, False, False] * 2
    assert brokers["published"].tolist() == written.tolist() * 2


def test_over_placement_counts_destinations_pushed_over_the_line_by_landed_bundles() -> None:
    m = metrics()
    owner = np.array([1, 2, 2, 2], dtype=np.int64)
    none = np.zeros(3, dtype=np.bool_)
    m.begin_tick()
    m.lookups_done([3])  # bundle 3 pushes broker 3 from 80 % to over 85 %
    true = true_usage(m, owner.tolist(), [0, 1, 2])
    end_tick(m, 1, true, [], owner, none, (0, 0))
    row = m.collector.tick_rows[-1]
    assert row["lookups"] == 1 and row["over_placements"] == 1
    m.begin_tick()
    m.lookups_done([0])  # bundle 0 on broker 2 keeps it cold
    end_tick(m, 2, true, [], owner, none, (0, 0))
    assert m.collector.tick_rows[-1]["over_placements"] == 0
    assert m.lookups_total == 2


def test_log_event_rows() -> None:
    m = metrics()
    m.log_event(START + 1500, "start", "3 brokers")
    assert m.collector.event_rows == [
        {"time_s": 1.5, "kind": "start", "detail": "3 brokers", "time_to_balance_s": None}
    ]
