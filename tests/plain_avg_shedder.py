"""AvgShedder's pairing as Pulsar writes it, one pair at a time: the reference its fast form must equal.

Shared by ``strategies/test_placement_speed_paths.py`` (pairs and counters) and
``strategies/test_avg_shedder_plain.py`` (the whole shedding cycle).
"""

from __future__ import annotations

import numpy as np

from shedlab.strategies import AvgShedder

__all__ = ["pairs_one_by_one"]


def pairs_one_by_one(
    avg: AvgShedder, ids: tuple[str, ...], scores: np.ndarray, low: float, high: float
) -> list[tuple[int, int, float]]:
    """AvgShedder's pairing as Pulsar writes it: one pair at a time, counters updated in pair order."""
    order = np.argsort(scores, kind="stable").tolist()
    pairs: list[tuple[int, int, float]] = []
    i, j = 0, len(order) - 1
    while i <= j:
        lo, hi = order[i], order[j]
        gap = float(scores[hi] - scores[lo])
        if gap < low:
            for b in (ids[lo], ids[hi]):
                avg.hit_high.pop(b, None)
                avg.hit_low.pop(b, None)
        else:
            pairs.append((lo, hi, gap))
            for b in (ids[lo], ids[hi]):
                avg.hit_low[b] = avg.hit_low.get(b, 0) + 1
            for b in (ids[lo], ids[hi]):
                if gap < high:
                    avg.hit_high.pop(b, None)
                else:
                    avg.hit_high[b] = avg.hit_high.get(b, 0) + 1
        i += 1
        j -= 1
    return pairs
