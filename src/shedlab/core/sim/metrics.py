"""Run metrics: per-tick cluster imbalance and churn, per-broker usage, and the run summary.

Every metric is defined precisely in ``docs/metrics.md``; the functions here are the definitions.
The *score* of a broker is Pulsar's weighted max resource usage ×100 (``U(b)·100``, spec §1.5, with the
run's resource weights and float32 percentages) computed from the broker's **true** usage at the tick,
not from the leader's stale view (that one is reported separately as ``reported_score``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from shedlab.model.snapshot import weighted_max_percent

FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]


def scores(usage: FloatArray, limit: FloatArray, weights: tuple[float, float, float, float]) -> FloatArray:
    """``U(b)·100`` per broker from (n, 5) usage and limits (Pulsar's float32 percentages)."""
    return weighted_max_percent(usage, limit, weights)


def ratio(values: FloatArray) -> float:
    """max/min of non-negative values: 1 for equal values, +∞ when the minimum is 0 and the maximum is not."""
    if values.size == 0:
        return float("nan")
    hi, lo = float(values.max()), float(values.min())
    if lo <= 0:
        return 1.0 if hi <= 0 else float("inf")
    return hi / lo


def imbalance(score: FloatArray) -> dict[str, float]:
    """Spread (max − min), max/mean, population standard deviation and coefficient of variation of scores."""
    if score.size == 0:
        nan = float("nan")
        return {"score_max": nan, "score_min": nan, "score_mean": nan, "score_std": nan, "score_cv": nan,
                "score_spread": nan, "score_max_over_mean": nan}  # fmt: skip
    mean = float(score.mean())
    std = float(score.std())
    return {
        "score_max": float(score.max()),
        "score_min": float(score.min()),
        "score_mean": mean,
        "score_std": std,
        "score_cv": std / mean if mean > 0 else float("nan"),
        "score_spread": float(score.max() - score.min()),
        "score_max_over_mean": float(score.max()) / mean if mean > 0 else float("nan"),
    }


def over_placement(
    score_with: FloatArray,
    score_without: FloatArray,
    mean: float,
    overload: float,
    margin: float,
) -> BoolArray:
    """Destinations pushed over a line by the bundles that landed on them in one tick.

    The lines are the overload threshold (``overload``, score points) and the cluster mean plus
    ``margin``. An event is a destination whose score without the landed bundles is at or below a line
    and whose score with them is above it.
    """
    crossed_overload = (score_without <= overload) & (score_with > overload)
    line = mean + margin
    crossed_mean = (score_without <= line) & (score_with > line)
    result: BoolArray = crossed_overload | crossed_mean
    return result


def over_unloading_flip(source_score: float, scores_now: FloatArray, margin: float) -> bool:
    """A source that was on the hot side is now the coldest broker, ``margin`` points below the mean."""
    if scores_now.size == 0:
        return False
    return bool(source_score <= float(scores_now.min()) and source_score < float(scores_now.mean()) - margin)


def time_to_balance(
    times: FloatArray,
    spread: FloatArray,
    threshold: float,
    hold: float,
    start: float,
    end: float,
) -> float | None:
    """Seconds from ``start`` to the first tick whose spread is below ``threshold`` and stays there.

    "Stays there" means every tick from that one up to ``hold`` seconds later, or up to ``end`` (the
    next event or the end of the run) if that comes first, is below the threshold. None if never.
    """
    sel = (times >= start) & (times < end)
    t = times[sel]
    ok = spread[sel] < threshold
    if t.size == 0:
        return None
    # run_end[i]: time of the last tick of the run of 'ok' ticks starting at i
    run_last = np.empty(t.size)
    last = -math.inf
    for i in range(t.size - 1, -1, -1):
        if not ok[i]:
            last = -math.inf
        elif last == -math.inf:
            last = float(t[i])
        run_last[i] = last
    window_last = float(t[-1])
    for i in range(t.size):
        if ok[i] and run_last[i] >= min(float(t[i]) + hold, window_last):
            return float(t[i] - start)
    return None


@dataclass
class Collector:
    """Accumulates per-tick rows, per-broker rows, decisions and events during a run."""

    tick_rows: list[dict[str, Any]] = field(default_factory=list)
    broker_cols: dict[str, list[NDArray[Any]]] = field(default_factory=dict)
    decision_rows: list[dict[str, Any]] = field(default_factory=list)
    event_rows: list[dict[str, Any]] = field(default_factory=list)

    def add_brokers(self, **columns: NDArray[Any]) -> None:
        for k, v in columns.items():
            self.broker_cols.setdefault(k, []).append(v)

    def frames(
        self, broker_ids: Sequence[str] = ()
    ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
        """The four tables; per-broker rows hold broker slot numbers, mapped here to ``broker_ids``."""
        ticks = pd.DataFrame(self.tick_rows)
        columns: dict[str, Any] = {}
        for k in list(self.broker_cols):  # release the per-tick chunks as they are joined
            columns[k] = np.concatenate(self.broker_cols.pop(k))
        if "broker" in columns and broker_ids:
            columns["broker"] = np.asarray(list(broker_ids), dtype=object)[columns["broker"]]
        brokers = pd.DataFrame(columns)
        decisions = pd.DataFrame(
            self.decision_rows,
            columns=[
                "tick",
                "time_s",
                "source",
                "bundle",
                "destination",
                "msg_rate",
                "throughput",
                "topics",
                "clients",
                "source_score",
                "destination_score",
                "reason",
            ],
        )
        events = pd.DataFrame(self.event_rows, columns=["time_s", "kind", "detail", "time_to_balance_s"])
        return ticks, brokers, decisions, events


def _finite(value: Any) -> Any:
    if isinstance(value, (float, np.floating)):
        v = float(value)
        return v if math.isfinite(v) else None
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.bool_,)):
        return bool(value)
    return value


def summarize(
    ticks: pd.DataFrame,
    brokers: pd.DataFrame,
    decisions: pd.DataFrame,
    events: pd.DataFrame,
    *,
    tick_s: float,
    overload: float,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The flat, JSON-serialisable run summary (docs/metrics.md, "Run summary")."""
    out: dict[str, Any] = dict(extra)
    n = len(ticks)
    out["ticks"] = n
    if n:
        spread = ticks["score_spread"].to_numpy(dtype=float)
        for name in ("score_spread", "score_std", "score_cv", "score_max_over_mean"):
            values = ticks[name].to_numpy(dtype=float)
            finite = values[np.isfinite(values)]
            out[f"{name}_mean"] = float(finite.mean()) if finite.size else None
            out[f"{name}_p95"] = float(np.percentile(finite, 95)) if finite.size else None
            out[f"{name}_final"] = float(values[-1])
        out["score_spread_max"] = float(np.nanmax(spread)) if np.isfinite(spread).any() else None
        out["msg_rate_ratio_final"] = float(ticks["msg_rate_max_min_ratio"].iloc[-1])
        out["throughput_ratio_final"] = float(ticks["throughput_max_min_ratio"].iloc[-1])
        out["balanced_fraction"] = float(ticks["balanced"].mean())
    out["unloads"] = len(decisions)
    out["bundles_moved"] = int(decisions["bundle"].nunique()) if len(decisions) else 0
    out["msg_rate_moved"] = float(decisions["msg_rate"].sum()) if len(decisions) else 0.0
    out["throughput_moved"] = float(decisions["throughput"].sum()) if len(decisions) else 0.0
    out["topics_disconnected"] = int(ticks["topics_disconnected"].sum()) if n else 0
    out["clients_disconnected"] = int(ticks["clients_disconnected"].sum()) if n else 0
    out["shedding_cycles_with_unloads"] = int((ticks["unloads"] > 0).sum()) if n else 0
    out["over_placement_events"] = int(ticks["over_placements"].sum()) if n else 0
    out["hot_placements"] = int(ticks["hot_placements"].sum()) if n else 0
    out["over_unloading_flips"] = int(ticks["over_unloading_flips"].sum()) if n else 0
    out["broker_minutes_overloaded"] = (
        float((brokers["score"] > overload).sum() * tick_s / 60.0) if len(brokers) else 0.0
    )
    ttb = events["time_to_balance_s"].to_numpy(dtype=float) if len(events) else np.zeros(0)
    balanced = ttb[np.isfinite(ttb)]
    out["time_to_balance_s_max"] = float(balanced.max()) if balanced.size else None
    out["time_to_balance_s_last_event"] = float(ttb[-1]) if ttb.size and np.isfinite(ttb[-1]) else None
    out["events_never_balanced"] = int((~np.isfinite(ttb)).sum())
    return {k: _finite(v) for k, v in out.items()}


NOT_DISTURBANCES = frozenset({"leader_change", "traffic_end", "broker_up"})
"""Event kinds that do not start a new time-to-balance measurement."""


def event_time_to_balance(
    events: Sequence[dict[str, Any]], ticks: pd.DataFrame, threshold: float, hold: float, end: float
) -> None:
    """Fill ``time_to_balance_s`` of every disturbance row (the start and the scenario events)."""
    if not len(ticks):
        return
    times = ticks["time_s"].to_numpy(dtype=float)
    spread = ticks["score_spread"].to_numpy(dtype=float)
    disturbances = [e for e in events if e["kind"] not in NOT_DISTURBANCES]
    starts = sorted({float(e["time_s"]) for e in disturbances})
    for e in disturbances:
        start = float(e["time_s"])
        later = [s for s in starts if s > start]
        stop = later[0] if later else end + 1e-9
        e["time_to_balance_s"] = time_to_balance(times, spread, threshold, hold, start, stop)
