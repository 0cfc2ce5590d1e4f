"""One shedding cycle on one snapshot: what Pulsar's leader would unload, where to, and why.

This is the ``shedlab decide`` command's engine: the leader's ``doLoadShedding`` (spec §4.4) through
:class:`~shedlab.manager.LoadManager`, i.e. the shedding strategy, then each bundle's destination
through the candidate filters and the placement strategy, skipping a bundle whose destination is
missing or is its current owner.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shedlab.config import STRATEGY_KEYS, LoadBalancerConfig
from shedlab.errors import ConfigError, ShedlabError
from shedlab.manager import LoadManager
from shedlab.model.formats import extensible_kind
from shedlab.model.json_reader import JsonReader, load_json_file
from shedlab.model.pulsar import LoadData
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import pair_config, pair_name_of, resolve_config, resolve_strategy


@dataclass(frozen=True)
class Decision:
    """One unload: bundle from ``source`` to ``destination`` (None: no destination found)."""

    source: str
    bundle: str
    destination: str | None
    reason: dict[str, Any]
    choices: tuple[str, ...] = ()


@dataclass
class Outcome:
    strategy: str
    decisions: list[Decision] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    cycles: int = 1

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
        }


def load_snapshot_file(path: str | Path) -> ClusterSnapshot:
    """Read a LoadData JSON (or a conformance case, taking its first tick) into a snapshot."""
    source = str(path)
    raw = load_json_file(path)
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
    return ClusterSnapshot.from_load_data(LoadData.from_json(reader), source=source)


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


def decide_on_snapshot(
    snapshot: ClusterSnapshot,
    conf: LoadBalancerConfig,
    *,
    strategy: str | None = None,
    seed: int = 0,
    cycles: int = 1,
) -> Outcome:
    """Run the leader's shedding cycle (:meth:`LoadManager.do_load_shedding`) on ``snapshot``.

    Bundles the snapshot lists as recently unloaded are taken as still inside the grace period.
    With ``cycles > 1`` the cycle is repeated on the same snapshot (as if the cluster stayed in
    this state) until it unloads something, so strategies that need several consecutive hits
    (AvgShedder) show what they would do once their counters are reached.
    """
    name, conf = _resolve(conf, strategy)
    manager = LoadManager(conf, seed=np.random.default_rng(seed))
    now_ms = snapshot.now_ms
    recent = np.flatnonzero(snapshot.bundle_recently_unloaded).tolist()
    manager.recently_unloaded = {snapshot.bundle_names[j]: now_ms for j in recent}
    decisions = manager.do_load_shedding(snapshot, now_ms)
    cycle = 1
    while not decisions and cycle < cycles:
        decisions = manager.do_load_shedding(snapshot, now_ms)
        cycle += 1
    skipped = list(manager.last_result.skipped) if manager.last_result is not None else []
    skipped += manager.last_skipped
    if snapshot.num_brokers <= 1:
        skipped.append({"reason": "at most one broker: the leader does not shed"})
    outcome = Outcome(name, skipped=skipped, cycles=cycle)
    for d in decisions:
        reason = dict(d.reason)
        placement = reason.pop("placement", {}) or {}
        choices = tuple(placement.get("choices", ()))
        reason["placement"] = placement.get("rule")
        outcome.decisions.append(Decision(d.source, d.bundle, d.destination, reason, choices))
    return outcome
