"""Run metrics: per-tick cluster imbalance and churn, per-broker usage, and the run summary.

Every metric is defined precisely in ``docs/metrics.md``; the functions here are the definitions.
The *score* of a broker is Pulsar's weighted max resource usage ×100 (``U(b)·100``, spec §1.5, with the
run's resource weights and float32 percentages) computed from the broker's **true** usage at the tick,
not from the leader's stale view (that one is reported separately as ``reported_score``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from shedlab.core.sim.hardware import CostModel
from shedlab.core.sim.publishing import LeaderView
from shedlab.core.sim.scenario import MetricsSettings
from shedlab.core.sim.state import TrueUsage, broker_scores
from shedlab.core.sim.traffic import Traffic
from shedlab.jsonout import json_ready
from shedlab.manager import ManagerDecision
from shedlab.strategies import Skip, SkipKind

__all__ = [
    "NOT_DISTURBANCES",
    "SKIP_COLUMNS",
    "Churn",
    "Collector",
    "RunCounts",
    "TickMetrics",
    "TickMoves",
    "event_time_to_balance",
    "imbalance",
    "over_placement",
    "over_unloading_flip",
    "ratio",
    "summarize",
    "time_to_balance",
]

SKIP_COLUMNS = ("tick", "time_s", "role", "kind", "broker", "count", "message")
"""Columns of the ``skips`` table."""

_SKIP_KIND_COLUMNS: dict[SkipKind, tuple[str, str, str]] = {k: (k.role, k.value, k.message) for k in SkipKind}
"""Each kind's ``role``, ``kind`` and ``message`` columns: a day of 1,000 brokers writes about 150,000 skip
rows, and reading the three through the enum's properties (``value`` is a descriptor) cost 0.04 ms a tick."""

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


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
    top, bottom = float(score.max()), float(score.min())  # each reduction once (the same float64 values)
    return {
        "score_max": top,
        "score_min": bottom,
        "score_mean": mean,
        "score_std": std,
        "score_cv": std / mean if mean > 0 else float("nan"),
        "score_spread": top - bottom,
        "score_max_over_mean": top / mean if mean > 0 else float("nan"),
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
    skip_rows: list[dict[str, Any]] = field(default_factory=list)

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
        # the columns as they are, each its own block: consolidating a day of 1,000 brokers copied them
        # all (0.8 s of a 16 s run); the arrays are fresh from the concatenation above, nobody else's
        brokers = pd.DataFrame(columns, copy=False)
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

    def skips_frame(self) -> pd.DataFrame:
        """The ``skips`` table: decisions not taken, counted per tick, kind and broker (docs/metrics.md)."""
        frame = pd.DataFrame(self.skip_rows, columns=list(SKIP_COLUMNS))
        frame["count"] = frame["count"].astype(np.int64)
        return frame


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
    """The flat, JSON-serialisable run summary (docs/metrics.md, "`summary`")."""
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
    return cast(dict[str, Any], json_ready(out))  # non-finite → None, NumPy scalars → Python (jsonout)


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


# ------------------------------------------------------------------------------------ collecting a run


@dataclass
class TickMoves:
    """The unloads of one tick: how many, and the traffic, topics and clients they disconnected."""

    unloads: int = 0
    msg_rate: float = 0.0
    throughput: float = 0.0
    topics: int = 0
    clients: int = 0
    hot_placements: int = 0


@dataclass
class Churn:
    """Bundles moved again (unloaded or orphaned) soon after their previous move.

    ``last_move_ms`` is per bundle ("never moved" is far in the past, away from overflow); a move counts
    as *within grace* when it comes at most ``grace_ms`` after the previous one, *within window* at most
    ``window_ms`` after.
    """

    grace_ms: int
    window_ms: int
    last_move_ms: IntArray
    within_grace: int = 0
    within_window: int = 0

    @classmethod
    def new(cls, bundles: int, grace_ms: int, window_ms: int) -> Churn:
        return cls(grace_ms, window_ms, np.full(bundles, -(2**62), dtype=np.int64))

    def count(self, bundles: IntArray, now: int) -> None:
        last = self.last_move_ms[bundles]
        self.within_grace += int(np.count_nonzero(now - last <= self.grace_ms))
        self.within_window += int(np.count_nonzero(now - last <= self.window_ms))
        self.last_move_ms[bundles] = now


@dataclass(frozen=True)
class RunCounts:
    """Run totals the kernel knows at the end, for the summary (docs/metrics.md, "`summary`")."""

    brokers_initial: int
    brokers_final: int
    bundles: int
    lookups: int
    unload_bundle_total: int
    unload_broker_total: int
    moved_again_within_grace: int
    moved_again_within_window: int
    repeat_move_window_s: float


class TickMetrics:
    """Collects a run's tables tick by tick: the kernel reports lookups, unloads and events as they
    happen and calls :meth:`end_tick` once per tick with the true usage sampled at that tick."""

    def __init__(
        self,
        *,
        start_ms: int,
        tick_ms: int,
        weights: tuple[float, float, float, float],
        overload_pct: float,
        settings: MetricsSettings,
        cost: CostModel,
        bundle_topics: IntArray,
        clients: IntArray,
        slot_of: dict[str, int],
        churn: Churn,
    ) -> None:
        self.start_ms = start_ms
        self.tick_ms = tick_ms
        self.weights = weights
        self.overload_pct = overload_pct
        self.settings = settings
        self.cost = cost
        self.bundle_topics = bundle_topics
        self.clients = clients
        self.slot_of = slot_of
        self.churn = churn
        self.collector = Collector()
        self.lookups_total = 0
        self.lookup_paths: dict[str, int] = {"affinity": 0, "preallocated": 0, "placement": 0, "none": 0}
        self.landed: list[int] = []  # bundles that landed on a broker this tick (lookups)
        self.lookups = 0
        self.moves = TickMoves()
        self._pending_flips: list[tuple[int, bool]] = []  # sources of the last unloads: (slot, was hot)
        self._positions: tuple[bytes, dict[int, int]] = (b"", {})  # alive slots -> slot → row

    def _position(self, slots: IntArray) -> dict[int, int]:
        """Slot → row in ``slots`` (the alive brokers), rebuilt only when the alive set changes."""
        key = slots.tobytes()
        if key != self._positions[0]:
            self._positions = (key, {s: i for i, s in enumerate(slots.tolist())})
        return self._positions[1]

    def begin_tick(self) -> None:
        self.landed = []
        self.lookups = 0
        self.moves = TickMoves()

    def tick_of(self, now: int) -> int:
        """The tick whose row counts what happens at ``now``: with ``simulation.resolution`` tick ``t``
        runs the steps of (T − tick, T], so a step between two ticks belongs to the later one."""
        return -((self.start_ms - now) // self.tick_ms)

    def log_event(self, now: int, kind: str, detail: str) -> None:
        self.collector.event_rows.append(
            {
                "time_s": (now - self.start_ms) / 1000.0,
                "kind": kind,
                "detail": detail,
                "time_to_balance_s": None,
            }
        )

    def skipped(self, now: int, skips: Sequence[Skip]) -> None:
        """Rows of the ``skips`` table for this tick: one per (kind, broker), in first-seen order."""
        counts: dict[tuple[SkipKind, str | None], int] = {}
        for skip in skips:
            key = (skip.kind, skip.broker)
            counts[key] = counts.get(key, 0) + 1
        tick = self.tick_of(now)
        time_s = (now - self.start_ms) / 1000.0
        rows = self.collector.skip_rows
        for (kind, broker), count in counts.items():
            role, value, message = _SKIP_KIND_COLUMNS[kind]  # one lookup: a SkipKind hashes in Python
            rows.append(
                {
                    "tick": tick,
                    "time_s": time_s,
                    "role": role,
                    "kind": value,
                    "broker": broker,
                    "count": count,
                    "message": message,
                }
            )

    def lookups_done(self, landed: list[int]) -> None:
        """Bundles a step's lookups assigned. With ``simulation.resolution`` a tick runs several steps,
        each with its lookups: the tick's row counts them all (it once kept only the last step's, so
        ``lookups`` fell short of the summary's and over-placements missed earlier landings), and a
        bundle that landed twice in the tick is one landing for the over-placement check."""
        self.lookups_total += len(landed)
        self.lookups += len(landed)
        self.landed = list(dict.fromkeys([*self.landed, *landed]))

    def true_scores(self, true: TrueUsage) -> tuple[float, FloatArray]:
        """The hot line (mean score + over-placement margin) and every slot's true score (NaN: not alive).

        An array by slot, not a dict: a shedding reads a few dozen scores, and the dict of a thousand
        brokers cost 0.2 ms to build at every shedding.
        """
        score = true.score
        hot_line = float(score.mean()) + self.settings.over_placement_margin if score.size else np.inf
        true_score = np.full(len(self.slot_of), np.nan)
        true_score[true.slots] = score
        return hot_line, true_score

    def unloaded(
        self,
        now: int,
        decisions: Sequence[ManagerDecision],
        bundles: Sequence[int],
        owned: Sequence[bool],
        traffic: Traffic,
        true: TrueUsage,
    ) -> None:
        """A shedding's decision rows (decision ``k`` unloaded bundle ``bundles[k]``, which a broker owned
        when ``owned[k]``), and their disconnected traffic in the tick's moves (0 for an unowned bundle).

        One call per shedding, with its bundles' traffic, topics and clients gathered at once: a call per
        decision read a dozen NumPy scalars each (with the encoder below, 0.05 ms a tick less; the reasons'
        JSON, 15 µs each, is most of what remains)."""
        if not decisions:
            return
        hot_line, true_score = self.true_scores(true)
        j = np.asarray(bundles, dtype=np.int64)
        held = np.asarray(owned, dtype=np.bool_)
        zero = np.zeros(j.size)
        rates = np.where(held, traffic.rate_in[j] + traffic.rate_out[j], zero).tolist()
        tps = np.where(held, traffic.tp_in[j] + traffic.tp_out[j], zero).tolist()
        topics = np.where(held, self.bundle_topics[j], 0).tolist()
        clients = np.where(held, self.clients[j], 0).tolist()
        tick, time_s, slot_of, rows = self.tick_of(now), (now - self.start_ms) / 1000.0, self.slot_of, []
        moves = self.moves
        for d, rate, tp, n_topics, n_clients in zip(decisions, rates, tps, topics, clients, strict=True):
            dest_score = float(true_score[slot_of[d.destination]])
            rows.append(
                {
                    "tick": tick,
                    "time_s": time_s,
                    "source": d.source,
                    "bundle": d.bundle,
                    "destination": d.destination,
                    "msg_rate": rate,
                    "throughput": tp,
                    "topics": n_topics,
                    "clients": n_clients,
                    "source_score": float(true_score[slot_of[d.source]]),
                    "destination_score": dest_score,
                    "reason": _REASON_JSON.encode(d.reason),
                }
            )
            moves.unloads += 1
            moves.msg_rate += rate
            moves.throughput += tp
            moves.topics += n_topics
            moves.clients += n_clients
            if dest_score > hot_line:  # False for NaN (no alive destination)
                moves.hot_placements += 1
        self.collector.decision_rows.extend(rows)

    def end_tick(
        self,
        t: int,
        now: int,
        traffic: Traffic,
        true: TrueUsage,
        decisions: list[ManagerDecision],
        *,
        owner: IntArray,
        view: LeaderView,
        written: BoolArray,
        leader: int | None,
        unload_totals: tuple[int, int],
    ) -> None:
        """The tick's row and its per-broker rows, from the true usage sampled at the tick."""
        slots, score = true.slots, true.score
        agg = true.agg
        rate = agg[:, 0] + agg[:, 1]
        tp = agg[:, 2] + agg[:, 3]
        stats = imbalance(score)
        margin = self.settings
        position = self._position(slots)
        flips = self._flips(score, position, decisions, stats["score_mean"])
        over = self._over_placements(t, traffic, true, owner, position, stats["score_mean"])
        reported = self._reported_scores(view, slots)
        rep_valid = reported[np.isfinite(reported)]
        moves = self.moves
        time_s = (now - self.start_ms) / 1000.0
        self.collector.tick_rows.append(
            {
                "tick": t,
                "time_s": time_s,
                "brokers": int(slots.size),
                # at the measurement, as the brokers' ``bundles``, so that the two add up to the
                # bundles; counted after the shedding, the tick's unloads were in both
                "bundles_unowned": true.unowned,
                "msg_rate_total": float(rate.sum()),
                "throughput_total": float(tp.sum()),
                **stats,
                "msg_rate_max_min_ratio": ratio(rate),
                "throughput_max_min_ratio": ratio(tp),
                "brokers_overloaded": int(np.count_nonzero(score > self.overload_pct)),
                "unloads": moves.unloads,
                "msg_rate_moved": moves.msg_rate,
                "throughput_moved": moves.throughput,
                "topics_disconnected": moves.topics,
                "clients_disconnected": moves.clients,
                "lookups": self.lookups,
                "over_placements": over,
                "hot_placements": moves.hot_placements,
                "over_unloading_flips": flips,
                "reports_published": int(np.count_nonzero(written)),
                "reported_score_spread": float(rep_valid.max() - rep_valid.min())
                if rep_valid.size
                else np.nan,
                "balanced": bool(stats["score_spread"] < margin.balance_threshold) if score.size else False,
                "unload_bundle_total": unload_totals[0],
                "unload_broker_total": unload_totals[1],
            }
        )
        self._broker_rows(t, time_s, true, reported, written[slots].copy(), leader)

    def _reported_scores(self, view: LeaderView, slots: IntArray) -> FloatArray:
        """Each live broker's score as the leader's view has it (NaN where the leader has no report)."""
        snap = view.cached
        reported = np.full(slots.size, np.nan)
        if snap is not None and snap.num_brokers:
            rep_scores = snap.weighted_max_percent(self.weights)  # U(b)·100, as the leader computed them
            idx = view.slot_to_row[slots]
            has = idx >= 0
            reported[has] = rep_scores[idx[has]]
        return reported

    def _broker_rows(
        self,
        t: int,
        time_s: float,
        true: TrueUsage,
        reported: FloatArray,
        published: BoolArray,
        leader: int | None,
    ) -> None:
        """The tick's per-broker rows: true usage by resource, traffic, the leader's score of each."""
        slots, agg = true.slots, true.agg
        usage, limit = true.usage, true.limit
        # one contiguous row per resource (a transposed copy, the same values): the run's end joins each
        # column's chunks, and strided chunks (columns of the (n, 5) array) take NumPy's slow path, twice
        # the time (a day of 1,000 brokers: the join took 0.21-0.33 s, now 0.11-0.16 s)
        pct = np.ascontiguousarray((usage / np.where(limit > 0, limit, np.inf) * 100.0).T)
        n = slots.size
        self.collector.add_brokers(
            tick=np.full(n, t, dtype=np.int64),
            time_s=np.full(n, time_s),
            broker=slots.copy(),
            score=true.score,
            cpu_pct=pct[0],
            memory_pct=pct[1],
            direct_memory_pct=pct[2],
            bandwidth_in_pct=pct[3],
            bandwidth_out_pct=pct[4],
            msg_rate_in=agg[:, 0].copy(),
            msg_rate_out=agg[:, 1].copy(),
            msg_rate=agg[:, 0] + agg[:, 1],
            throughput_in=agg[:, 2].copy(),
            throughput_out=agg[:, 3].copy(),
            throughput=agg[:, 2] + agg[:, 3],
            bundles=true.bundles,
            topics=true.topics,
            reported_score=reported,
            published=published,
            leader=slots == (leader if leader is not None else -1),
        )

    def _flips(
        self, score: FloatArray, position: dict[int, int], decisions: list[ManagerDecision], mean: float
    ) -> int:
        """Over-unloading: sources of the previous cycle that were hot and are now the coldest."""
        flips = 0
        for s, hot in self._pending_flips:
            i = position.get(s)
            if (
                hot
                and i is not None
                and over_unloading_flip(float(score[i]), score, self.settings.over_unloading_margin)
            ):
                flips += 1
        self._pending_flips = []
        if decisions and score.size:
            for source in sorted({d.source for d in decisions}):
                s = self.slot_of[source]
                i = position.get(s)
                self._pending_flips.append((s, i is not None and float(score[i]) > mean))
        return flips

    def _over_placements(
        self,
        t: int,
        traffic: Traffic,
        true: TrueUsage,
        owner: IntArray,
        position: dict[int, int],
        mean: float,
    ) -> int:
        """Destinations pushed over a line by the bundles that landed this tick."""
        score, slots = true.score, true.slots
        if not (self.landed and t > 0 and score.size):
            return 0
        landed = np.asarray(self.landed, dtype=np.int64)
        dests = owner[landed]
        uniq = np.unique(dests)
        keep = np.asarray([position[int(s)] for s in uniq.tolist() if int(s) in position], dtype=np.int64)
        uniq = slots[keep]
        if not uniq.size:
            return 0
        minus = np.zeros((uniq.size, 4))
        where = np.searchsorted(uniq, dests)
        ok = (where < uniq.size) & (uniq[np.minimum(where, uniq.size - 1)] == dests)
        rows, bundles = where[ok], landed[ok]  # each landed bundle of an alive destination, and its row
        for k, values in enumerate((traffic.rate_in, traffic.rate_out, traffic.tp_in, traffic.tp_out)):
            minus[:, k] = np.bincount(rows, weights=values[bundles], minlength=uniq.size)
        topics_minus = np.bincount(rows, weights=self.bundle_topics[bundles], minlength=uniq.size)
        base = true.agg[keep] - minus
        stored = None
        if true.stored is not None and traffic.stored is not None:  # non-persistent topics: not in bookies
            stored_minus = [
                np.bincount(rows, weights=traffic.stored[k, bundles], minlength=uniq.size) for k in (2, 3)
            ]
            stored = (true.stored[keep, 2] - stored_minus[0], true.stored[keep, 3] - stored_minus[1])
        without_usage = self.cost.usage(
            uniq,
            base[:, 0],
            base[:, 1],
            base[:, 2],
            base[:, 3],
            np.subtract(true.topics[keep], topics_minus, dtype=np.float64),
            true.background[keep],
            stored=stored,
        )
        if true.extra_cpu is not None:  # approximation: the landed bundles' connections are kept
            without_usage[:, 0] += true.extra_cpu[keep]
        without = broker_scores(without_usage, true.limit[keep], self.weights)
        margin = self.settings.over_placement_margin
        return int(over_placement(score[keep], without, mean, self.overload_pct, margin).sum())


def _json_default(value: Any) -> Any:
    """JSON for the values a decision's ``reason`` may hold (NumPy scalars and arrays, sets, tuples)."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (np.ndarray,)):
        return value.tolist()
    if isinstance(value, (set, frozenset, tuple)):
        return sorted(value) if isinstance(value, (set, frozenset)) else list(value)
    return str(value)


_REASON_JSON = json.JSONEncoder(default=_json_default, sort_keys=True)
"""``json.dumps(reason, default=_json_default, sort_keys=True)``, the encoder built once (dumps builds one
per call: a fifth of a reason's 15 µs)."""
