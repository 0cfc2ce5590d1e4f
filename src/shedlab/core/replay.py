"""The replay core: strategies over recorded load data, one cluster at a time (pandas/NumPy only).

:func:`replay_cluster` walks a cluster's broker and bundle samples in time order and, at every
tick, builds the leader's view as a :class:`ClusterSnapshot` (:func:`build_snapshots`), lets a
:class:`~shedlab.manager.LoadManager` run one shedding cycle on it and records:

* **decisions** — what the strategy would have unloaded, where to, and why (the strategy's reason
  as JSON), next to what really happened to that bundle afterwards (:func:`ownership_changes`);
* **load** — per broker: the recorded weighted usage U(b), throughput and message rate, and the
  estimate after that tick's decisions (:func:`estimate_moves`). Moving a bundle moves its traffic
  and its share of the owner's resource usage, proportional to throughput (message rate when the
  owner has no throughput): ``moved = usage(source) · T(bundle) / T(source)`` per resource, added to
  the destination's usage (in its own limits, so a bigger machine rises less);
* **comparison** — per tick: the ownership changes that happened in the data next to the
  strategy's unloads, the max and spread of U(b) before and after, and why the other brokers were
  left alone (``left_alone``, ``reasons``: :func:`shedlab.core.decide.explain_cycle`; summed over
  ticks by :func:`total_reasons`).

The leader's view at a tick (documented in ``docs/spark.md``): every broker's sample of that tick
is its report; each bundle's BundleData advances by one sample per tick from its owner's stats
(seeded from a BundleData dump when the data has one, else Pulsar's defaults), and is dropped
when no broker reports the bundle — Pulsar's ``updateBundleData`` with one update per tick. The
replay is *open loop*: the strategy's decisions are not applied to later ticks (the data already
contains what the real balancer did); the manager keeps its own state across ticks (grace
period, hit counters, usage history), exactly as a leader would.

``shedlab.spark.replay`` runs :func:`replay_cluster` per cluster × configuration inside a Spark
``cogroup(...).applyInPandas``; a notebook can call it directly on pandas frames.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from shedlab.config import LoadBalancerConfig, layered_config
from shedlab.core.decide import Outcome, explain_cycle
from shedlab.core.grid import params_id_of
from shedlab.core.sim.reporting import DEFAULT_VALUES, apply_samples
from shedlab.errors import ConfigError
from shedlab.manager import LoadManager
from shedlab.manager.loop import ManagerDecision
from shedlab.model.pulsar import NUM_LONG_SAMPLES, NUM_SHORT_SAMPLES, is_system_heartbeat_bundle
from shedlab.model.snapshot import ClusterSnapshot, weighted_max_usage
from shedlab.strategies import pair_config, require_modular, resolve_config, resolve_pair_name

__all__ = [
    "MoveEstimate",
    "StrategyConfig",
    "TickView",
    "build_snapshots",
    "estimate_moves",
    "ownership_changes",
    "replay_cluster",
    "strategy_configs",
    "total_reasons",
]

_VALUE_COLS = ("msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out")
_RESOURCES = ("cpu", "memory", "direct_memory", "bandwidth_in", "bandwidth_out")


@dataclass(frozen=True)
class StrategyConfig:
    """A strategy pair with Pulsar overrides; ``config_id`` identifies the overrides."""

    strategy: str
    overrides: Mapping[str, Any]
    config_id: str

    @property
    def overrides_json(self) -> str:
        return json.dumps(dict(self.overrides), sort_keys=True, separators=(",", ":"), default=str)


def strategy_configs(
    strategies: Sequence[str],
    overrides: Mapping[str, Any] | None = None,
    sources: Mapping[str, str] | None = None,
) -> list[StrategyConfig]:
    """Validated strategy configurations (pair names resolved, overrides checked against Pulsar's keys).

    ``sources`` says where each override was set (``broker.conf:3``; ``--set`` for the others), for the
    errors: a file's key refused with the pair was named as ``--set``."""
    if not strategies:
        raise ConfigError("name at least one strategy pair", field="--strategies")
    out = []
    seen = set()
    where = sources or {}
    for name in strategies:
        pair = resolve_pair_name(name.strip(), field="--strategies")
        require_modular(pair, field="--strategies")
        ov = dict(overrides or {})
        layers = [(where.get(key, "--set"), {key: value}) for key, value in ov.items()]
        resolve_config(pair_config(pair, layered_config(*layers)))
        cfg = StrategyConfig(pair, ov, params_id_of(ov))
        if (cfg.strategy, cfg.config_id) not in seen:
            seen.add((cfg.strategy, cfg.config_id))
            out.append(cfg)
    return out


# ---------------------------------------------------------------------------------------------
# Snapshots from samples
# ---------------------------------------------------------------------------------------------


@dataclass
class TickView:
    """One tick of the leader's view: the snapshot plus the per-bundle stats it was built from."""

    tick_ms: int
    snapshot: ClusterSnapshot
    bundle_tp: np.ndarray  # instantaneous throughput in+out per snapshot bundle
    bundle_rate: np.ndarray  # instantaneous msg rate in+out per snapshot bundle


def _dump_table(
    dumps: pd.DataFrame | None,
) -> dict[str, list[tuple[int, np.ndarray, np.ndarray, int, int, int]]]:
    """bundle → [(tick, short values (4,), long values (4,), short n, long n, topics)] sorted by tick."""
    table: dict[str, list[tuple[int, np.ndarray, np.ndarray, int, int, int]]] = {}
    if dumps is None or dumps.empty:
        return table
    row: Any
    for row in dumps.sort_values("tick_ms").itertuples(index=False):
        short = np.array([row.short_msg_rate_in, row.short_msg_rate_out, row.short_msg_throughput_in,
                          row.short_msg_throughput_out], dtype=float)  # fmt: skip
        long = np.array([row.long_msg_rate_in, row.long_msg_rate_out, row.long_msg_throughput_in,
                         row.long_msg_throughput_out], dtype=float)  # fmt: skip
        sn = _as_int(row.short_num_samples)
        ln = _as_int(row.long_num_samples)
        topics = _as_int(row.topics)
        table.setdefault(str(row.bundle), []).append((int(row.tick_ms), short, long, sn, ln, topics))
    return table


def _as_int(value: Any) -> int:
    """An integer from a pandas cell (0 for null)."""
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return 0
    return int(value)


class _BundleHistory:
    """The leader's BundleData for every bundle of one cluster, carried from tick to tick (the time
    averages :func:`apply_samples` advances; topics; which bundles have data)."""

    def __init__(self, names: NDArray[Any], dumps: pd.DataFrame | None) -> None:
        m = len(names)
        self.names = names
        self.index = {b: i for i, b in enumerate(names.tolist())}
        self.has = np.zeros(m, dtype=np.bool_)
        self.short_n = np.zeros(m, dtype=np.int64)
        self.long_n = np.zeros(m, dtype=np.int64)
        self.short = np.repeat(DEFAULT_VALUES[:, None], m, axis=1).astype(float)
        self.long = np.repeat(DEFAULT_VALUES[:, None], m, axis=1).astype(float)
        self.topics = np.zeros(m, dtype=np.int64)
        self.system = np.array([is_system_heartbeat_bundle(b) for b in names.tolist()], dtype=np.bool_)
        self.dumps = _dump_table(dumps)

    def forget_missing(self, present: NDArray[np.int64]) -> None:
        """updateBundleData: bundles no broker reports lose their data (back to defaults)."""
        now_present = np.zeros(self.has.size, dtype=np.bool_)
        now_present[present] = True
        dropped = self.has & ~now_present
        if dropped.any():
            self.has[dropped] = False
            self.short_n[dropped] = 0
            self.long_n[dropped] = 0
            self.short[:, dropped] = DEFAULT_VALUES[:, None]
            self.long[:, dropped] = DEFAULT_VALUES[:, None]

    def seed_new(self, present: NDArray[np.int64], t: int) -> None:
        """A bundle that (re)appears starts from its latest BundleData dump at or before ``t``, if any."""
        for j in present[~self.has[present]].tolist():
            seeded = [d for d in self.dumps.get(str(self.names[j]), []) if d[0] <= t]
            if seeded:
                _, sv, lv, sn, ln, tp = seeded[-1]
                self.short[:, j], self.long[:, j] = sv, lv
                self.short_n[j], self.long_n[j], self.topics[j] = sn, ln, tp

    def sample(
        self, present: NDArray[np.int64], values: NDArray[np.float64], topics: NDArray[np.int64]
    ) -> None:
        """One sample of every present bundle into its short- and long-term averages."""
        if present.size:
            ones = np.ones(present.size, dtype=np.int64)
            sub_sn, sub_sv = apply_samples(
                self.short_n[present], self.short[:, present], values, ones, NUM_SHORT_SAMPLES
            )
            sub_ln, sub_lv = apply_samples(
                self.long_n[present], self.long[:, present], values, ones, NUM_LONG_SAMPLES
            )
            self.short_n[present], self.short[:, present] = sub_sn, sub_sv
            self.long_n[present], self.long[:, present] = sub_ln, sub_lv
            self.topics[present] = topics
        self.has[present] = True


def _resources(b_rows: pd.DataFrame) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The brokers' (n, 5) resource usage and limits, in :data:`_RESOURCES` order (null → 0)."""
    n = len(b_rows)
    usage = np.zeros((n, 5))
    limit = np.zeros((n, 5))
    for r, prefix in enumerate(_RESOURCES):
        usage[:, r] = b_rows[f"{prefix}_usage"].fillna(0.0).to_numpy(dtype=float)
        limit[:, r] = b_rows[f"{prefix}_limit"].fillna(0.0).to_numpy(dtype=float)
    return usage, limit


def _in_precedence(rows: pd.DataFrame, key: str) -> pd.DataFrame:
    """``rows`` in (tick, ``key``) order, and within one tick and key in the order that decides which row
    :func:`_tick_view` keeps (the last): a row that is not a load report's before a load report's (the
    load report is what Pulsar's leader reads; a broker recorded both ways has one row of each per tick,
    ``docs/spark.md``), then by sample time, then by source file. Before, the row kept was the one that
    came last from Spark, an order no rule fixed."""
    rank = {}
    if "source_kind" in rows:
        rank["_load_report"] = (rows["source_kind"] == "load_report").astype(np.int8)
    ties = [c for c in ("time_ms", "source") if c in rows]
    ordered = rows.assign(**rank).sort_values(["tick_ms", key, *rank, *ties], kind="stable")
    return ordered.drop(columns=list(rank))


def build_snapshots(
    brokers: pd.DataFrame, bundles: pd.DataFrame, dumps: pd.DataFrame | None = None
) -> list[TickView]:
    """The leader's view at every tick of one cluster's samples (see the module docstring)."""
    if brokers.empty:
        return []
    brokers = _in_precedence(brokers, "broker")
    bundles = _in_precedence(bundles, "bundle")
    history = _BundleHistory(np.array(sorted(set(bundles["bundle"].astype(str))), dtype=object), dumps)
    bundle_groups = {_as_int(t): g for t, g in bundles.groupby("tick_ms", sort=True)}
    views: list[TickView] = []
    tick: Any
    for tick, b_rows in brokers.groupby("tick_ms", sort=True):
        t = _as_int(tick)
        s_rows = bundle_groups.get(t)
        views.append(_tick_view(t, b_rows, bundles.iloc[0:0] if s_rows is None else s_rows, history))
    return views


def _filter_fields(b_rows: pd.DataFrame) -> dict[str, Any]:
    """The report fields the leader's candidate filters read (:mod:`shedlab.manager.filters`), from the
    recorded columns where the recording has them; a null flag is Pulsar's default (true), a null class or
    version a report without one."""
    out: dict[str, Any] = {}
    if "persistent_topics_enabled" in b_rows:
        flags = b_rows["persistent_topics_enabled"].astype(object)
        out["broker_persistent_topics"] = np.array([f is not False for f in flags.tolist()], dtype=np.bool_)
    for column, field in (
        ("load_manager_class", "broker_load_manager_class"),
        ("broker_version", "broker_version"),
    ):
        if column in b_rows:
            out[field] = tuple(None if pd.isna(v) else str(v) for v in b_rows[column].tolist())
    return out


def _tick_view(t: int, b_rows: pd.DataFrame, s_rows: pd.DataFrame, history: _BundleHistory) -> TickView:
    """One tick: the samples into the history, then the snapshot of the bundles with data."""
    b_rows = b_rows.drop_duplicates("broker", keep="last")
    ids = tuple(str(b) for b in b_rows["broker"])
    bidx = {b: i for i, b in enumerate(ids)}
    n = len(ids)
    s_rows = s_rows.drop_duplicates("bundle", keep="last")
    present = np.array([history.index[b] for b in s_rows["bundle"].astype(str)], dtype=np.int64)
    owners = np.array([bidx.get(str(b), -1) for b in s_rows["broker"]], dtype=np.int64)
    # Pulsar's columns are (rateIn, rateOut, tpIn, tpOut) = our _VALUE_COLS order.
    values = np.vstack([s_rows[c].fillna(0.0).to_numpy(dtype=float) for c in _VALUE_COLS]).reshape(4, -1)
    history.forget_missing(present)
    history.seed_new(present, t)
    history.sample(present, values, s_rows["topics"].fillna(0).to_numpy(dtype=np.int64))
    # The snapshot lists the bundles with data (all present ones), in name order.
    order = np.sort(present)
    pos_of = {int(j): k for k, j in enumerate(present.tolist())}
    k_idx = np.array([pos_of[int(j)] for j in order.tolist()], dtype=np.int64)
    owner = owners[k_idx] if order.size else np.zeros(0, dtype=np.int64)
    owned_count = np.bincount(owner[owner >= 0], minlength=n).astype(np.int64) if n else np.zeros(0, np.int64)
    # TimeAverageBrokerData: Σ long-term rates of the broker's reported bundles.
    lt_in = np.zeros(n)
    lt_out = np.zeros(n)
    valid = owner >= 0
    if valid.any():
        np.add.at(lt_in, owner[valid], history.long[0, order][valid])
        np.add.at(lt_out, owner[valid], history.long[1, order][valid])
    usage, limit = _resources(b_rows)
    rates = b_rows[["msg_rate_in", "msg_rate_out", "msg_throughput_in", "msg_throughput_out"]]
    snap = ClusterSnapshot.from_columns(
        broker_ids=ids,
        resource_usage=usage,
        resource_limit=limit,
        broker_rates=rates.fillna(0.0).to_numpy(dtype=float),
        num_owned_bundles=owned_count,
        num_topics=b_rows["num_topics"].fillna(0).to_numpy(dtype=np.int64),
        long_term_msg_rate_in=lt_in,
        long_term_msg_rate_out=lt_out,
        bundle_names=tuple(history.names[order].tolist()),
        bundle_owner=owner.astype(np.int64),
        bundle_has_data=np.ones(order.size, dtype=np.bool_),
        bundle_sheddable=~history.system[order],
        short=history.short[:, order],
        long=history.long[:, order],
        bundle_topics=history.topics[order].copy(),
        now_ms=t,
        **_filter_fields(b_rows),
    )
    inst = values[:, k_idx] if order.size else np.zeros((4, 0))
    return TickView(t, snap, inst[2] + inst[3], inst[0] + inst[1])


@dataclass
class MoveEstimate:
    """The brokers' load after one tick's unloads, estimated (see the module docstring).

    ``usage``/``throughput``/``msg_rate``/``bundles`` are per broker (``usage`` per resource, in the
    broker's own units); ``moves`` holds per decision the bundle's throughput and message rate and
    its estimated share of the source's usage (``usage_share``).
    """

    usage: np.ndarray
    throughput: np.ndarray
    msg_rate: np.ndarray
    bundles: np.ndarray
    moves: list[dict[str, float]]


def _usage_share(b_tp: float, b_rate: float, tp: float, rate: float, nb: int) -> float:
    """A bundle's share of its owner's usage: by throughput, else message rate, else bundle count."""
    share = 0.0
    if tp > 0:
        share = b_tp / tp
    elif rate > 0:
        share = b_rate / rate
    elif nb > 0:
        share = 1.0 / nb
    return min(max(share, 0.0), 1.0)


def estimate_moves(view: TickView, decisions: Sequence[ManagerDecision]) -> MoveEstimate:
    """Apply ``decisions`` to the recorded load of ``view`` (estimates; the recorded data is unchanged).

    A moved bundle takes its instantaneous traffic and its usage share of every resource but the
    JVM heap (memory does not travel with a bundle) from its source to its destination.
    """
    snap = view.snapshot
    usage = snap.resource_usage.copy()
    tp = snap.total_msg_throughput().copy()
    rate = snap.total_msg_rate().copy()
    nb = snap.num_owned_bundles.copy()
    est_usage = usage.copy()
    est_tp, est_rate, est_nb = tp.copy(), rate.copy(), nb.copy()
    moves: list[dict[str, float]] = []
    for d in decisions:
        j = snap.bundle_index(d.bundle)
        src = snap.broker_index.get(d.source)
        dst = snap.broker_index.get(d.destination)
        b_tp = float(view.bundle_tp[j]) if j is not None else 0.0
        b_rate = float(view.bundle_rate[j]) if j is not None else 0.0
        share = 0.0
        if src is not None:
            share = _usage_share(b_tp, b_rate, float(tp[src]), float(rate[src]), int(nb[src]))
            moved = usage[src] * share
            moved[1] = 0.0  # JVM heap does not travel with a bundle
            est_usage[src] -= moved
            est_tp[src] -= b_tp
            est_rate[src] -= b_rate
            est_nb[src] -= 1
            if dst is not None:
                est_usage[dst] += moved
                est_tp[dst] += b_tp
                est_rate[dst] += b_rate
                est_nb[dst] += 1
        moves.append({"bundle_throughput": b_tp, "bundle_msg_rate": b_rate, "usage_share": share})
    return MoveEstimate(est_usage, est_tp, est_rate, est_nb, moves)


def _load_rows(
    base: Mapping[str, Any], view: TickView, est: MoveEstimate, u_now: np.ndarray, u_est: np.ndarray
) -> list[dict[str, Any]]:
    snap = view.snapshot
    tp = snap.total_msg_throughput()
    rate = snap.total_msg_rate()
    nb = snap.num_owned_bundles
    return [
        {
            **base,
            "tick_ms": view.tick_ms,
            "broker": broker,
            "usage": float(u_now[i]),
            "est_usage": float(u_est[i]),
            "throughput": float(tp[i]),
            "est_throughput": float(max(est.throughput[i], 0.0)),
            "msg_rate": float(rate[i]),
            "est_msg_rate": float(max(est.msg_rate[i], 0.0)),
            "bundles": int(nb[i]),
            "est_bundles": int(est.bundles[i]),
        }
        for i, broker in enumerate(snap.broker_ids)
    ]


def _comparison_row(
    base: Mapping[str, Any],
    tick_ms: int,
    actual: set[str],
    decisions: Sequence[ManagerDecision],
    u_now: np.ndarray,
    u_est: np.ndarray,
    why: Outcome,
) -> dict[str, Any]:
    decided = {d.bundle for d in decisions}
    return {
        **base,
        "tick_ms": tick_ms,
        "actual_moves": len(actual),
        "strategy_unloads": len(decisions),
        "both": len(actual & decided),
        "max_usage": float(u_now.max()) if u_now.size else None,
        "est_max_usage": float(u_est.max()) if u_est.size else None,
        "usage_spread": float(u_now.max() - u_now.min()) if u_now.size else None,
        "est_usage_spread": float(u_est.max() - u_est.min()) if u_est.size else None,
        "left_alone": len(why.left_alone),
        "reasons": json.dumps(why.counts(), sort_keys=True),
    }


def total_reasons(reasons: Iterable[str | None]) -> dict[str, int]:
    """The sum of the comparison table's per-tick ``reasons`` (JSON reason → count), most frequent first."""
    total: Counter[str] = Counter()
    for text in reasons:
        if text:
            total.update(json.loads(text))
    return dict(total.most_common())


def replay_cluster(
    cluster: str,
    config: StrategyConfig,
    brokers: pd.DataFrame,
    bundles: pd.DataFrame,
    dumps: pd.DataFrame | None = None,
    *,
    seed: int = 1,
) -> dict[str, pd.DataFrame]:
    """Replay one cluster's samples under one strategy configuration (see the module docstring).

    Returns ``decisions``, ``load`` and ``comparison`` frames (the columns of the Spark schemas
    ``REPLAY_DECISION``, ``REPLAY_LOAD``, ``REPLAY_COMPARISON``).
    """
    conf = pair_config(
        config.strategy, LoadBalancerConfig().with_overrides(dict(config.overrides), source="replay")
    )
    weights = conf.resource_weights()
    manager = LoadManager(conf, seed=seed)
    moves = ownership_changes(bundles)
    moved_after: dict[int, set[str]] = {}
    next_owner: dict[tuple[str, int], str] = {}
    row: Any
    for row in moves.itertuples(index=False):
        moved_after.setdefault(int(row.previous_tick_ms), set()).add(str(row.bundle))
        next_owner[(str(row.bundle), int(row.previous_tick_ms))] = str(row.to_broker)
    dec_rows: list[dict[str, Any]] = []
    load_rows: list[dict[str, Any]] = []
    cmp_rows: list[dict[str, Any]] = []
    active: tuple[str, ...] | None = None
    base = {"cluster": cluster, "strategy": config.strategy, "config_id": config.config_id}
    for view in build_snapshots(brokers, bundles, dumps):
        manager.skip_log.clear()  # skipped decisions are not among replay's outputs: keep memory flat
        snap = view.snapshot
        if snap.broker_ids != active:
            manager.on_active_brokers_change(list(snap.broker_ids))
            active = snap.broker_ids
        manager.on_bundle_data_update(snap)
        decisions = manager.do_load_shedding(snap, view.tick_ms)
        est = estimate_moves(view, decisions)
        for seq, (d, move) in enumerate(zip(decisions, est.moves, strict=True)):
            actual = next_owner.get((d.bundle, view.tick_ms))
            dec_rows.append(
                {
                    **base,
                    "tick_ms": view.tick_ms,
                    "seq": seq,
                    "source": d.source,
                    "bundle": d.bundle,
                    "destination": d.destination,
                    "reason": json.dumps(d.reason, default=str, sort_keys=True),
                    **move,
                    "actually_moved": actual is not None,
                    "actual_destination": actual,
                }
            )
        u_now = weighted_max_usage(snap.resource_usage, snap.resource_limit, weights)
        u_est = weighted_max_usage(np.maximum(est.usage, 0.0), snap.resource_limit, weights)
        load_rows.extend(_load_rows(base, view, est, u_now, u_est))
        why = explain_cycle(snap, conf, config.strategy, manager, [d.source for d in decisions])
        cmp_rows.append(
            _comparison_row(
                base, view.tick_ms, moved_after.get(view.tick_ms, set()), decisions, u_now, u_est, why
            )
        )
    return {
        "decisions": pd.DataFrame(dec_rows),
        "load": pd.DataFrame(load_rows),
        "comparison": pd.DataFrame(cmp_rows),
    }


def ownership_changes(bundles: pd.DataFrame, cluster: str | None = None) -> pd.DataFrame:
    """Changes of a bundle's owner between consecutive samples of that bundle (OWNERSHIP_CHANGE)."""
    cols = ["cluster", "tick_ms", "bundle", "from_broker", "to_broker", "previous_tick_ms"]
    if bundles.empty:
        return pd.DataFrame(columns=cols)
    frame = (
        bundles[["tick_ms", "bundle", "broker"]]
        .drop_duplicates(["tick_ms", "bundle"], keep="last")
        .sort_values(["bundle", "tick_ms"], kind="stable")
    )
    prev_owner = frame.groupby("bundle")["broker"].shift(1)
    prev_tick = frame.groupby("bundle")["tick_ms"].shift(1)
    changed = prev_owner.notna() & (prev_owner != frame["broker"])
    out = pd.DataFrame(
        {
            "cluster": cluster
            if cluster is not None
            else (bundles["cluster"].iloc[0] if "cluster" in bundles else None),
            "tick_ms": frame.loc[changed, "tick_ms"].astype("int64"),
            "bundle": frame.loc[changed, "bundle"],
            "from_broker": prev_owner[changed],
            "to_broker": frame.loc[changed, "broker"],
            "previous_tick_ms": prev_tick[changed].astype("int64"),
        }
    )
    return out.sort_values(["tick_ms", "bundle"]).reset_index(drop=True)[cols]
