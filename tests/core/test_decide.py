"""``decide``'s engine: what the leader would unload, and why it left the other brokers alone."""

from __future__ import annotations

from pathlib import Path

from shedlab.config import LoadBalancerConfig
from shedlab.core.decide import decide_on_snapshot, load_snapshot_file
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
