"""``decide``'s engine: what the leader would unload, and why it left the other brokers alone."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_support import error_line

from shedlab.config import LoadBalancerConfig
from shedlab.core.decide import Decider, decide_on_snapshot, load_snapshot_file
from shedlab.strategies.base import SheddingResult

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snapshot.json"


def test_a_cycle_that_unloads_nothing_still_says_why() -> None:
    """AvgShedder needs consecutive hits: one cycle unloads nothing, and each pair's reason is kept."""
    outcome = decide_on_snapshot(load_snapshot_file(EXAMPLE), LoadBalancerConfig(), strategy="AvgShedder")
    assert outcome.decisions == []
    reasons = [s["reason"] for s in outcome.skipped]
    assert reasons and all(r == "hit count not reached" for r in reasons)
    assert outcome.to_json()["skipped"] == outcome.skipped


def test_an_empty_shedding_result_is_still_a_result() -> None:
    result = SheddingResult(skipped=[{"reason": "below threshold"}])
    assert len(result) == 0
    assert bool(result) is True


@pytest.mark.parametrize(
    "strategy",
    [
        "AvgShedder",
        "ThresholdShedder",
        "OverloadShedder",
        "UniformLoadShedder",
        "ThresholdShedder+LeastResourceUsageWithWeight",
    ],
)
@pytest.mark.parametrize("cycles", [1, 3])
def test_every_broker_is_unloaded_from_or_explained(strategy: str, cycles: int) -> None:
    snap = load_snapshot_file(EXAMPLE)
    outcome = decide_on_snapshot(snap, LoadBalancerConfig(), strategy=strategy, cycles=cycles)
    sources = {d.source for d in outcome.decisions}
    alone = [a.broker for a in outcome.left_alone]
    assert sorted(alone) == sorted(set(alone)) and sources.isdisjoint(alone)
    assert sources | set(alone) == set(snap.broker_ids)
    assert all(a.why and a.code for a in outcome.left_alone)
    counts = outcome.counts()
    assert sum(v for k, v in counts.items() if not k.startswith("bundle skipped")) == len(alone)


def test_avg_shedder_counts_its_hits_across_cycles() -> None:
    """One Decider keeps the strategy between cycles, as the leader does (advise --watch)."""
    decider = Decider(LoadBalancerConfig(), strategy="AvgShedder")
    snap = load_snapshot_file(EXAMPLE)
    first = decider.cycle(snap)
    assert not first.decisions and all("hit count 1 of 8" in a.why for a in first.left_alone)
    second = decider.cycle(snap)  # the 70-point pair reaches the high threshold's 2 hits and sheds
    assert second.decisions
    destinations = {d.destination for d in second.decisions}
    for a in second.left_alone:
        assert a.why.startswith("receiving") if a.broker in destinations else "hit count 2 of 8" in a.why


def test_one_broker_and_disabled_shedding_are_said() -> None:
    snap = load_snapshot_file(EXAMPLE)
    off = LoadBalancerConfig().with_overrides({"loadBalancerSheddingEnabled": False})
    outcome = decide_on_snapshot(snap, off, strategy="ThresholdShedder")
    assert {a.code for a in outcome.left_alone} == {
        "load balancing or shedding is disabled in the configuration"
    }


def _dump(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """The example LoadData, every report written at :data:`NOW`, edited by ``edit``."""
    doc = json.loads(EXAMPLE.read_text())
    for broker in doc["brokers"].values():
        broker["localData"]["lastUpdate"] = NOW
    edit(doc)
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(doc))
    return path


NOW = 1_750_000_000_000
MINUTE = 60_000
FIRST, SECOND = "public/default/0x09000000_0x0a000000", "public/default/0x08000000_0x09000000"
"""The two bundles ThresholdShedder unloads from broker-1 on the example."""


def test_a_dumps_recent_unloads_leave_the_grace_period_at_their_own_times(tmp_path: Path) -> None:
    """Pulsar's cycle first drops the recently unloaded bundles older than the grace period (30 min);
    a dump's entries carry their unload times, and the newest report's time is the cycle's "now"."""
    example = load_snapshot_file(EXAMPLE)
    before = decide_on_snapshot(example, LoadBalancerConfig(), strategy="ThresholdShedder")
    assert [d.bundle for d in before.decisions] == [FIRST, SECOND]

    def recent(doc: dict[str, Any]) -> None:
        doc["recentlyUnloadedBundles"] = {FIRST: NOW - 31 * MINUTE, SECOND: NOW - 29 * MINUTE}

    snap = load_snapshot_file(_dump(tmp_path, recent))
    assert snap.now_ms == NOW
    outcome = decide_on_snapshot(snap, LoadBalancerConfig(), strategy="ThresholdShedder")
    unloaded = [d.bundle for d in outcome.decisions]
    assert FIRST in unloaded and SECOND not in unloaded


def test_a_dumps_preallocations_count_for_the_destination(tmp_path: Path) -> None:
    """A preallocated bundle adds its long-term rate to its broker's LeastLongTermMessageRate score (the
    even-distribution filter off, which on the example admits one destination only)."""
    conf = LoadBalancerConfig(load_balancer_distribute_bundles_evenly_enabled=False)
    before = decide_on_snapshot(load_snapshot_file(EXAMPLE), conf, strategy="ThresholdShedder")
    target = before.decisions[0].destination
    assert target == "broker-4:8080"

    def preallocate(doc: dict[str, Any]) -> None:
        data = json.loads(json.dumps(next(iter(doc["bundleData"].values()))))
        data["longTermData"]["msgRateIn"] = data["longTermData"]["msgRateOut"] = 1e6
        doc["brokers"][target]["preallocatedBundleData"] = {"public/default/0x00000000_0x01000000": data}

    dump = load_snapshot_file(_dump(tmp_path, preallocate))
    outcome = decide_on_snapshot(dump, conf, strategy="ThresholdShedder")
    assert outcome.decisions and all(d.destination not in (None, target) for d in outcome.decisions)


def test_an_integer_out_of_range_names_its_value_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reader's message names the range and the caller adds ``(got …)``: the value had been written
    twice (``…exactly: 1152921504606846976 (got 1152921504606846976)``)."""
    doc = json.loads(EXAMPLE.read_text())
    next(iter(doc["brokers"].values()))["localData"]["numTopics"] = 2**60
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    line = error_line(["decide", str(path)], capsys)
    range_ = "±(2^53 - 1), the integers ingest keeps exactly"
    assert line.endswith(f"numTopics: integer out of {range_} (got 1152921504606846976)")
    assert line.count("1152921504606846976") == 1
