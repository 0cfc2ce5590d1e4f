"""One shedding cycle on one snapshot: what Pulsar's leader would unload, where to, and why.

This is the ``shedlab decide`` command's engine: the leader's ``doLoadShedding`` (spec §4.4) through
:class:`~shedlab.manager.LoadManager`, i.e. the shedding strategy, then each bundle's destination
through the candidate filters and the placement strategy, skipping a bundle whose destination is
missing or is its current owner. Before the cycle, on a LoadData source, the leader's bundle split
check (:mod:`shedlab.manager.split`): Pulsar runs it in every ``updateAll``, so a bundle over the split
thresholds is being split, not shed, when the shedding cycle comes.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shedlab.config import STRATEGY_KEYS, LoadBalancerConfig
from shedlab.errors import ConfigError, ShedlabError
from shedlab.manager import LoadManager
from shedlab.manager.split import SplitPlan, split_check
from shedlab.model.formats import extensible_kind
from shedlab.model.json_reader import JsonReader, load_json_file
from shedlab.model.pulsar import LoadData
from shedlab.model.snapshot import ClusterSnapshot, newest_report_ms
from shedlab.strategies import pair_config, pair_name_of, resolve_config, resolve_strategy

__all__ = [
    "Decider",
    "Decision",
    "LeftAlone",
    "Outcome",
    "decide_on_snapshot",
    "explain",
    "load_snapshot_file",
    "without_bundle_data",
]


@dataclass(frozen=True)
class Decision:
    """One unload: bundle from ``source`` to ``destination`` (None: no destination found)."""

    source: str
    bundle: str
    destination: str | None
    reason: dict[str, Any]
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class LeftAlone:
    """A broker the cycle unloaded nothing from, and why.

    ``code`` is the strategy's own reason string (``"hit count not reached"``): stable, so it can be
    counted across brokers and cycles; ``why`` is one line with the numbers (``"hit count 3 of 8 at the
    low threshold …"``); ``detail`` holds the strategy's numbers as it reported them.
    """

    broker: str
    code: str
    why: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"broker": self.broker, "code": self.code, "why": self.why, "detail": self.detail}


@dataclass
class Outcome:
    strategy: str
    decisions: list[Decision] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    cycles: int = 1
    left_alone: list[LeftAlone] = field(default_factory=list)
    split: SplitPlan | None = None
    """The leader's split check before the cycle (None: it did not run, :func:`split_check`)."""

    def counts(self) -> dict[str, int]:
        """Brokers left alone per reason, plus the bundles a chosen trigger skipped (``"bundle skipped:
        <reason>"``: excluded namespace, no destination, …), in first-seen order."""
        out: Counter[str] = Counter(a.code for a in self.left_alone)
        out.update(f"bundle skipped: {s.get('reason', '?')}" for s in self.skipped if "bundle" in s)
        return dict(out)

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "cycles": self.cycles,
            "unload": [
                {
                    "broker": d.source,
                    "bundle": d.bundle,
                    "destination": d.destination,
                    "choices": list(d.choices),
                    "reason": d.reason,
                }
                for d in self.decisions
            ],
            "skipped": self.skipped,
            "left_alone": [a.to_json() for a in self.left_alone],
            "counts": self.counts(),
            **({} if self.split is None else self.split.to_json()),
        }


def load_snapshot_file(path: str | Path) -> ClusterSnapshot:
    """Read a LoadData JSON, gzipped or not (or a conformance case, taking its first tick), into a
    snapshot."""
    source = str(path)
    raw = load_json_file(path, gunzip=True)
    reader = JsonReader(raw, source)
    if "ticks" in reader.obj and "loadData" not in reader.obj:
        ticks = reader.obj["ticks"]
        if not isinstance(ticks, list) or not ticks:
            raise ShedlabError("expected a non-empty list of ticks", source=source, field="ticks")
        reader = JsonReader(ticks[0], source, "ticks[0]")
    if "loadData" in reader.obj:
        inner = reader.child("loadData")
        assert inner is not None
        reader = inner
    extensible = extensible_kind(reader.obj)
    if extensible is not None:  # it looks like a report, but "brokers: required field is missing" misleads
        raise ShedlabError(
            f"a {extensible} of the extensible load manager (ExtensibleLoadManagerImpl), not the modular "
            "manager's LoadData",
            source=source,
            hint="decide runs the modular strategies on a LoadData snapshot (see examples/snapshot.json)",
        )
    load_data = LoadData.from_json(reader)
    return ClusterSnapshot.from_load_data(load_data, now_ms=newest_report_ms(load_data), source=source)


def _resolve(conf: LoadBalancerConfig, strategy: str | None) -> tuple[str, LoadBalancerConfig]:
    """The pair to run and its config; every strategy name is resolved (and checked) by the registry.

    ``strategy`` is a pair name, or a shedding strategy alone, which keeps the configured placement.
    """
    if strategy is not None:
        try:
            conf = pair_config(strategy, conf, source="--strategy")
        except ConfigError:
            if "+" in strategy:
                raise
            info = resolve_strategy(strategy, role="shedding", source="--strategy")
            conf = conf.with_overrides({STRATEGY_KEYS["shedding"]: info.config_value}, source="--strategy")
    conf = resolve_config(conf)
    return pair_name_of(conf), conf


class Decider:
    """The leader's shedding cycles on successive snapshots, keeping strategy state between them.

    Pulsar's leader keeps one strategy instance for its whole term, so AvgShedder's hit counters and
    LeastResourceUsageWithWeight's history carry from one cycle to the next; ``advise --watch`` runs one
    :class:`Decider` for the same reason, while ``decide`` runs a fresh one per snapshot.
    """

    def __init__(self, conf: LoadBalancerConfig, *, strategy: str | None = None, seed: int = 0) -> None:
        self.name, self.conf = _resolve(conf, strategy)
        self.manager = LoadManager(self.conf, seed=np.random.default_rng(seed))
        self._last: list[Decision] = []  # the last cycle's decisions, for keep_unloaded

    def cycle(self, snapshot: ClusterSnapshot, *, cycles: int = 1) -> Outcome:
        """One shedding cycle (repeated up to ``cycles`` times while it unloads nothing), explained.

        In Java's arithmetic, as the strategies' own: an overflow is Infinity and Infinity − Infinity is
        NaN, with no warning (a report claiming a usage of 1e308 decides as Pulsar's leader would, and
        stderr carries no NumPy RuntimeWarning)."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return self._cycle(snapshot, cycles)

    def keep_unloaded(self, unloaded: Collection[str]) -> None:
        """Of the last cycle's decisions, only the bundles in ``unloaded`` (their unload succeeded) stay in
        the leader's bookkeeping (the grace period, the affinity, the unload counters); the others are
        withdrawn (:meth:`LoadManager.withdraw_unloads`), as Pulsar's ``doLoadShedding`` records a bundle
        only after its unload call returned. Without this call every decision counts as done, as the
        leader that sent them all would (``decide``, a dry-run ``advise``)."""
        unloads = [(d.source, d.bundle) for d in self._last]
        self.manager.withdraw_unloads(unloads, unloaded)
        self._last = []

    def _cycle(self, snapshot: ClusterSnapshot, cycles: int) -> Outcome:
        manager = self.manager
        now_ms = snapshot.now_ms
        if snapshot.leader_memory is not None:  # a LoadData dump: its unload times and preallocations
            manager.restore(snapshot.leader_memory)
        else:  # a reading knows no times: its recently unloaded bundles are taken as just unloaded
            for j in np.flatnonzero(snapshot.bundle_recently_unloaded).tolist():
                manager.recently_unloaded.setdefault(snapshot.bundle_names[j], now_ms)
        split = split_check(snapshot, self.conf)
        if split is not None and split.splits:
            snapshot = without_bundle_data(snapshot, split.bundles)
        decisions = manager.do_load_shedding(snapshot, now_ms)
        cycle = 1
        while not decisions and cycle < cycles:
            decisions = manager.do_load_shedding(snapshot, now_ms)
            cycle += 1
        outcome = Outcome(self.name, skipped=cycle_skips(snapshot, self.conf, manager), cycles=cycle)
        outcome.split = split
        for d in decisions:
            reason = dict(d.reason)
            placement = reason.pop("placement", {}) or {}
            choices = tuple(placement.get("choices", ()))
            reason["placement"] = placement.get("rule")
            outcome.decisions.append(Decision(d.source, d.bundle, d.destination, reason, choices))
        outcome.left_alone = explain(snapshot, self.conf, outcome)
        self._last = list(outcome.decisions)
        return outcome


def without_bundle_data(snapshot: ClusterSnapshot, bundles: Collection[str]) -> ClusterSnapshot:
    """``snapshot`` as the leader holds it after splitting ``bundles``: their BundleData removed
    (``checkNamespaceBundleSplit``), so no strategy sheds them. A copy; ``snapshot`` is unchanged."""
    rows = [j for j in map(snapshot.bundle_index, bundles) if j is not None]
    clone = copy.copy(snapshot)
    clone.bundle_has_data = snapshot.bundle_has_data.copy()
    clone.bundle_sheddable = snapshot.bundle_sheddable.copy()
    clone.bundle_has_data[rows] = False
    clone.bundle_sheddable[rows] = False
    return clone


def decide_on_snapshot(
    snapshot: ClusterSnapshot,
    conf: LoadBalancerConfig,
    *,
    strategy: str | None = None,
    seed: int = 0,
    cycles: int = 1,
) -> Outcome:
    """Run the leader's shedding cycle (:meth:`LoadManager.do_load_shedding`) on ``snapshot``.

    A snapshot of a LoadData dump (:func:`load_snapshot_file`) decides at the newest report's
    ``lastUpdate``, from the leader's memory the dump holds: its recently unloaded bundles at their
    unload times, so those older than the grace period are pruned as Pulsar's cycle prunes them, and
    its brokers' preallocated bundles. A snapshot of another source (a reading of reports) knows no
    unload times: the bundles it lists as recently unloaded are taken as still inside the grace period.
    With ``cycles > 1`` the cycle is repeated on the same snapshot (as if the cluster stayed in
    this state) until it unloads something, so strategies that need several consecutive hits
    (AvgShedder) show what they would do once their counters are reached.
    """
    return Decider(conf, strategy=strategy, seed=seed).cycle(snapshot, cycles=cycles)


def _why(entry: dict[str, Any], conf: LoadBalancerConfig) -> str:
    """One line for a strategy's skipped entry, with the numbers that make it concrete."""
    reason = str(entry.get("reason", "no reason given"))
    if reason == "hit count not reached":
        low = max(int(entry.get("hit_low_under", 0)), int(entry.get("hit_low_over", 0)))
        high = max(int(entry.get("hit_high_under", 0)), int(entry.get("hit_high_over", 0)))
        gap = float(entry.get("gap", 0.0))
        low_max = conf.load_balancer_avg_shedder_hit_count_low_threshold
        high_max = conf.load_balancer_avg_shedder_hit_count_high_threshold
        return (
            f"hit count {low} of {low_max} at the low threshold, {high} of {high_max} at the high "
            f"(score gap {gap:.1f} points)"
        )
    if reason.startswith("traffic gap below minUnloadMessage"):
        msg, tp = float(entry.get("need_msg_rate", 0.0)), float(entry.get("need_throughput", 0.0))
        return (
            f"amount below minUnloadMessage ({msg:.1f} ≤ {conf.min_unload_message} msg/s) and "
            f"minUnloadMessageThroughput ({tp:.0f} ≤ {conf.min_unload_message_throughput} B/s)"
        )
    if "bundle" in entry:
        return f"{reason} (bundle {entry['bundle']})"
    return reason


def cycle_skips(
    snapshot: ClusterSnapshot, conf: LoadBalancerConfig, manager: LoadManager
) -> list[dict[str, Any]]:
    """What the last :meth:`LoadManager.do_load_shedding` skipped: the strategy's entries, the leader's
    per-bundle skips, and the leader's reasons for not calling the strategy at all."""
    skipped = list(manager.last_result.skipped) if manager.last_result is not None else []
    skipped += manager.last_skipped
    if snapshot.num_brokers <= 1:
        skipped.append({"reason": "at most one broker: the leader does not shed"})
    if not (conf.load_balancer_enabled and conf.load_balancer_shedding_enabled):
        skipped.append({"reason": "load balancing or shedding is disabled in the configuration"})
    return skipped


def explain_cycle(
    snapshot: ClusterSnapshot,
    conf: LoadBalancerConfig,
    strategy: str,
    manager: LoadManager,
    sources: list[str],
) -> Outcome:
    """The explanation of a cycle that :meth:`LoadManager.do_load_shedding` just ran (``sources``: the
    brokers of its decisions), for callers that drive the manager themselves (replay): ``left_alone`` and
    ``skipped`` filled, decisions carrying only their source."""
    outcome = Outcome(strategy, skipped=cycle_skips(snapshot, conf, manager))
    outcome.decisions = [Decision(s, "", None, {}) for s in sources]
    outcome.left_alone = explain(snapshot, conf, outcome)
    return outcome


def explain(snapshot: ClusterSnapshot, conf: LoadBalancerConfig, outcome: Outcome) -> list[LeftAlone]:
    """Every broker of ``snapshot`` that ``outcome`` unloads nothing from, with the reason.

    A destination of this cycle's unloads says so; otherwise the strategy's own skipped entry for a
    broker comes first; AvgShedder's pair entries also explain the pair's less-loaded side; a broker no
    entry names gets the cycle's general reason, if the strategy gave
    one (``"no broker pair reaches the low threshold"``), else ``"not selected"``, with its weighted max
    usage (the score most strategies rank by) as the number.
    """
    sources = {d.source for d in outcome.decisions}
    found: dict[str, LeftAlone] = {}
    general: dict[str, Any] | None = None
    for entry in outcome.skipped:
        code = str(entry.get("reason", "no reason given"))
        detail = {k: v for k, v in entry.items() if k not in ("reason", "strategy", "broker")}
        broker = entry.get("broker")
        pair = entry.get("pair")
        if isinstance(broker, str):
            if broker not in sources and broker not in found:
                found[broker] = LeftAlone(broker, code, _why(entry, conf), detail)
        elif general is None and not isinstance(pair, list):
            general = entry
        if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str):
            under = pair[0]
            if under not in sources and under not in found:
                why = f"the less-loaded side of a pair with {pair[1]}: {_why(entry, conf)}"
                found[under] = LeftAlone(under, code, why, detail)
    incoming: dict[str, list[str]] = {}
    for d in outcome.decisions:
        if d.destination is not None:
            incoming.setdefault(d.destination, []).append(d.source)
    for broker, senders in incoming.items():
        if broker not in sources:  # a destination is not shed from: that is the point of the cycle
            why = f"receiving {len(senders)} bundle(s) from {', '.join(sorted(set(senders)))}"
            found[broker] = LeftAlone(
                broker, "destination of this cycle's unloads", why, {"bundles": len(senders)}
            )
    scores = snapshot.weighted_max_usage(conf.resource_weights()) * 100
    out: list[LeftAlone] = []
    for i, broker in enumerate(snapshot.broker_ids):
        if broker in sources:
            continue
        if broker in found:
            out.append(found[broker])
            continue
        usage = float(scores[i])
        if general is not None:
            code = str(general.get("reason", "no reason given"))
            out.append(
                LeftAlone(broker, code, f"{code} (weighted max usage {usage:.1f} %)", {"usage": usage})
            )
        else:
            why = f"not selected by {outcome.strategy} (weighted max usage {usage:.1f} %)"
            out.append(LeftAlone(broker, "not selected", why, {"usage": usage}))
    return out
