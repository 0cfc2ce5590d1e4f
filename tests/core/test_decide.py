"""``decide``'s engine: what the leader would unload, and why it left the other brokers alone."""

from __future__ import annotations

from pathlib import Path

import pytest

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
