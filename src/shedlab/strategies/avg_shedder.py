"""AvgShedder (PIP-364): pair the hottest with the coldest broker and split their traffic evenly.

Spec §2.4 (shedding) and §3.3 (placement). One instance serves both roles, because the shedding
side decides each unloaded bundle's destination (the paired under-loaded broker) and the placement
side returns it; that binding is what prevents over placement.

* Score = weighted max resource usage × 100, instantaneous (no history, so no over-unloading).
* Brokers sorted by score are paired from the outside in: (coldest, hottest), (2nd coldest,
  2nd hottest), ...; a pair whose gap reaches the low threshold is a "hit". Hit counters are kept
  **per broker**, not per pair, so a broker keeps counting while its partner changes (the 80/80/20
  example). A pair triggers when any of its two brokers has reached the high-gap hit count (gap ≥
  high threshold) or the low-gap hit count.
* The amount to move is ``(over - under) × maxUnloadPercentage`` in message rate when that exceeds
  ``minUnloadMessage``, otherwise in throughput when that exceeds ``minUnloadMessageThroughput``.
* Bundles are chosen first-fit decreasing by short-term traffic; zero-traffic bundles are never taken.

Quirks reproduced:
* A broker owning one bundle (or none) is *not* protected: its sole bundle may be shed.
* With an odd number of brokers the middle one is paired with itself (gap 0); if the low threshold
  is ≤ 0 that self-pair counts, and its counters are incremented twice.
* The four counters of a triggered pair are removed before the amount is checked, so a pair whose
  traffic gap is too small to move still restarts its count.
* ``onActiveBrokersChange`` does nothing: counters and planned destinations of dead brokers stay.

Deliberate deviations (see the spec's "Decisions for shedlab"):
* Planned destinations are keyed by bundle *name* (upstream PR #26246), not by BundleData value.
* Master's double comparator is used (PR #24954); the pre-fix ``(int)(a - b)`` comparator is not
  emulated because it is not a consistent order and Java's result depends on TimSort internals.
* Placement fallback: Pulsar hashes a fresh ``java.util.Random().nextInt()`` with CRC32 and takes
  it modulo the number of sorted candidates; shedlab does the same with an int drawn from the
  injected generator, so the choice is reproducible from the seed.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot, IntArray
from shedlab.strategies.base import (
    BrokerChoices,
    Placement,
    SheddingResult,
    SkipKind,
    Unload,
    candidate_indices,
)
from shedlab.strategies.greedy import sort_descending


@dataclass(frozen=True)
class BrokerPair:
    """A (less loaded, more loaded) pair of broker indices and their score gap."""

    under: int
    over: int
    gap: float


class AvgShedder:
    """Pulsar's ``org.apache.pulsar.broker.loadbalance.impl.AvgShedder`` (both roles)."""

    name: ClassVar[str] = "AvgShedder"

    def __init__(self, rng: np.random.Generator | None = None) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()
        self.hit_high: dict[str, int] = {}
        self.hit_low: dict[str, int] = {}
        self.planned_destinations: dict[str, str] = {}

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """A no-op, as in Pulsar: stale counters and planned destinations stay."""

    def seed_hit_counts(self, counts: Mapping[str, tuple[int, int]]) -> None:
        """Preset the consecutive hit counters (broker → (high, low)); zero counts are left out."""
        for broker, (high, low) in counts.items():
            if high:
                self.hit_high[broker] = int(high)
            if low:
                self.hit_low[broker] = int(low)

    # ------------------------------------------------------------------ shedding
    def find_bundles_for_unloading(
        self, snapshot: ClusterSnapshot, conf: LoadBalancerConfig
    ) -> SheddingResult:
        result = SheddingResult()
        scores = snapshot.weighted_max_usage(conf.resource_weights()) * 100
        pairs = self._find_pairs(snapshot, scores, conf)
        if not pairs:
            self.hit_high.clear()
            self.hit_low.clear()
            result.skipped.append({"reason": "no broker pair reaches the low threshold"})
            result.note(SkipKind.NO_PAIR)
            return result
        for pair in pairs:
            self._shed_pair(snapshot, scores, pair, conf, result)
        return result

    def _find_pairs(
        self, snapshot: ClusterSnapshot, scores: np.ndarray, conf: LoadBalancerConfig
    ) -> list[BrokerPair]:
        low = conf.load_balancer_avg_shedder_low_threshold
        high = conf.load_balancer_avg_shedder_high_threshold
        ids = snapshot.broker_ids
        order = np.argsort(scores, kind="stable")
        half = (order.size + 1) // 2  # pairs (i, n-1-i) while i <= n-1-i; the middle one with itself
        los, his = order[:half], order[::-1][:half]
        gaps = scores[his] - scores[los]  # float64 differences, as float(scores[hi] - scores[lo])
        cold = gaps < low
        hit_high, hit_low = self.hit_high, self.hit_low
        # Every broker is in one pair (the middle one in its self-pair), so the pairs' counter
        # operations touch different keys: the cold pairs' removals commute with the other pairs'
        # updates (removing keys does not reorder the rest), and only the present keys need removing.
        if hit_high or hit_low:
            cold_ids = {ids[k] for k in los[cold].tolist()} | {ids[k] for k in his[cold].tolist()}
            for counters in (hit_high, hit_low):
                for b in cold_ids & counters.keys():
                    del counters[b]
        pairs: list[BrokerPair] = []
        hot = np.flatnonzero(~cold)
        for lo, hi, gap in zip(los[hot].tolist(), his[hot].tolist(), gaps[hot].tolist(), strict=True):
            lo_id, hi_id = ids[lo], ids[hi]
            pairs.append(BrokerPair(lo, hi, gap))
            for b in (lo_id, hi_id):
                hit_low[b] = hit_low.get(b, 0) + 1
            if gap < high:
                for b in (lo_id, hi_id):
                    hit_high.pop(b, None)
            else:
                for b in (lo_id, hi_id):
                    hit_high[b] = hit_high.get(b, 0) + 1
        return pairs

    def _shed_pair(
        self,
        snapshot: ClusterSnapshot,
        scores: np.ndarray,
        pair: BrokerPair,
        conf: LoadBalancerConfig,
        result: SheddingResult,
    ) -> None:
        ids = snapshot.broker_ids
        under, over = ids[pair.under], ids[pair.over]
        counts = {
            "hit_high_under": self.hit_high.get(under, 0),
            "hit_high_over": self.hit_high.get(over, 0),
            "hit_low_under": self.hit_low.get(under, 0),
            "hit_low_over": self.hit_low.get(over, 0),
        }
        base: dict[str, Any] = {
            "strategy": self.name,
            "pair": [under, over],
            "under_score": float(scores[pair.under]),
            "over_score": float(scores[pair.over]),
            "gap": pair.gap,
            **counts,
        }
        hh, hl = (
            conf.load_balancer_avg_shedder_hit_count_high_threshold,
            conf.load_balancer_avg_shedder_hit_count_low_threshold,
        )
        triggered = (
            counts["hit_high_under"] >= hh
            or counts["hit_high_over"] >= hh
            or counts["hit_low_under"] >= hl
            or counts["hit_low_over"] >= hl
        )
        if not triggered:
            result.skipped.append({**base, "broker": over, "reason": "hit count not reached"})
            result.note(SkipKind.HIT_COUNT_NOT_REACHED, over)
            return
        for b in (under, over):
            self.hit_high.pop(b, None)
            self.hit_low.pop(b, None)
        p = conf.max_unload_percentage
        rate, tp = snapshot.total_msg_rate(), snapshot.total_msg_throughput()
        need_msg = float(rate[pair.over] - rate[pair.under]) * p
        need_tp = float(tp[pair.over] - tp[pair.under]) * p
        candidates = snapshot.shedding_candidates(pair.over)
        if need_msg > conf.min_unload_message:
            mode, amount = "msgRate", need_msg
            keys = snapshot.short_msg_rate_in[candidates] + snapshot.short_msg_rate_out[candidates]
        elif need_tp > conf.min_unload_message_throughput:
            mode, amount = "throughput", need_tp
            keys = (
                snapshot.short_msg_throughput_in[candidates] + snapshot.short_msg_throughput_out[candidates]
            )
        else:
            result.skipped.append(
                {
                    **base,
                    "broker": over,
                    "reason": "traffic gap below minUnloadMessage(Throughput)",
                    "need_msg_rate": need_msg,
                    "need_throughput": need_tp,
                }
            )
            result.note(SkipKind.AMOUNT_BELOW_MINIMUM, over)
            return
        base.update(mode=mode, amount_to_move=amount)
        ordered, keys = sort_descending(candidates, keys)
        remaining = amount
        selected = 0.0
        for j, traffic in zip(ordered.tolist(), keys.tolist(), strict=True):
            if 0 < traffic <= remaining:
                remaining -= traffic
                selected += traffic
                bundle = snapshot.bundle_names[j]
                self.planned_destinations[bundle] = under
                reason = {**base, "bundle_traffic": traffic, "amount_selected": selected}
                result.unloads.append(Unload(over, bundle, reason, destination=under))
        if not selected:
            result.skipped.append({**base, "broker": over, "reason": "no bundle fits the amount to move"})
            result.note(SkipKind.NO_BUNDLE_FITS, over)

    # ------------------------------------------------------------------ placement
    def select_broker(
        self,
        candidates: Sequence[str] | IntArray,
        bundle: str,
        snapshot: ClusterSnapshot,
        conf: LoadBalancerConfig,
    ) -> Placement:
        ordered: Sequence[str]
        if isinstance(candidates, np.ndarray):  # snapshot indices: sorted by id is sorted by name
            ordered = BrokerChoices(snapshot.broker_ids, candidate_indices(snapshot, candidates))
        else:
            ordered = tuple(sorted(set(candidates)))
        planned = self.planned_destinations.get(bundle)
        if planned is not None and _contains(snapshot, ordered, planned):
            return Placement(planned, (planned,), {"strategy": self.name, "rule": "planned destination"})
        if not ordered:
            return Placement(None, (), {"strategy": self.name, "rule": "no candidates"})
        draw = int(self.rng.integers(-(2**31), 2**31))
        chosen = ordered[zlib.crc32(str(draw).encode()) % len(ordered)]
        self.planned_destinations[bundle] = chosen
        rule = (
            "random (planned destination not a candidate)" if planned else "random (no planned destination)"
        )
        return Placement(chosen, ordered, {"strategy": self.name, "rule": rule})


def _contains(snapshot: ClusterSnapshot, ordered: Sequence[str], broker: str) -> bool:
    """``broker in ordered`` without naming every candidate when they are snapshot indices."""
    if isinstance(ordered, BrokerChoices):
        i = snapshot.broker_index.get(broker)
        return i is not None and ordered.holds_index(i)
    return broker in ordered
