"""One shedding cycle on one snapshot: what Pulsar's leader would unload, where to, and why.

This is the ``shedlab decide`` command's engine. It runs the configured shedding strategy, then
asks the placement strategy for each bundle's destination among all brokers, and skips a bundle
whose destination is missing or is its current owner, as ``doLoadShedding`` does (spec §4.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.errors import ShedlabError
from shedlab.model.json_reader import JsonReader, load_json_file
from shedlab.model.pulsar import LoadData
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import STRATEGY_PAIRS, make_pair, pair_config, resolve_pair_name


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
    return ClusterSnapshot.from_load_data(LoadData.from_json(reader), source=source)


def _resolve(conf: LoadBalancerConfig, strategy: str | None) -> tuple[str, LoadBalancerConfig]:
    if strategy is None:
        shed, place = conf.shedding_strategy_name, conf.placement_strategy_name
        return ("AvgShedder" if shed == "AvgShedder" else f"{shed}+{place}"), conf
    if "+" in strategy or strategy in STRATEGY_PAIRS:
        name = resolve_pair_name(strategy)
        return name, pair_config(name, conf, source="--strategy")
    # a single shedding strategy: keep the configured placement strategy
    conf = conf.with_overrides({"loadBalancerLoadSheddingStrategy": strategy}, source="--strategy")
    if conf.shedding_strategy_name == "AvgShedder":
        conf = conf.with_overrides({"loadBalancerLoadPlacementStrategy": "AvgShedder"}, source="--strategy")
    return _resolve(conf, None)[0], conf


def decide_on_snapshot(
    snapshot: ClusterSnapshot,
    conf: LoadBalancerConfig,
    *,
    strategy: str | None = None,
    seed: int = 0,
    cycles: int = 1,
) -> Outcome:
    """Run a shedding cycle with destination selection on ``snapshot``.

    With ``cycles > 1`` the shedding call is repeated on the same snapshot (as if the cluster
    stayed in this state) until it unloads something, so strategies that need several
    consecutive hits (AvgShedder) show what they would do once their counters are reached.
    """
    name, conf = _resolve(conf, strategy)
    shedder, placer = make_pair(conf, np.random.default_rng(seed))
    result = shedder.find_bundles_for_unloading(snapshot, conf)
    cycle = 1
    while not result.unloads and cycle < cycles:
        result = shedder.find_bundles_for_unloading(snapshot, conf)
        cycle += 1
    outcome = Outcome(name, skipped=result.skipped, cycles=cycle)
    if snapshot.num_brokers <= 1:
        outcome.skipped.append({"reason": "at most one broker: the leader does not shed"})
        return outcome
    everyone = np.arange(snapshot.num_brokers, dtype=np.int64)
    for unload in result.unloads:
        placement = placer.select_broker(everyone, unload.bundle, snapshot, conf)
        dest = placement.broker
        reason = dict(unload.reason)
        if dest is None or dest == unload.broker:
            reason["skipped"] = "no destination" if dest is None else "destination is the current owner"
            outcome.skipped.append({"broker": unload.broker, "bundle": unload.bundle, **reason})
            continue
        reason["placement"] = placement.reason.get("rule")
        outcome.decisions.append(Decision(unload.broker, unload.bundle, dest, reason, placement.choices))
    return outcome
