"""Selection rules shared by several shedding strategies."""

from __future__ import annotations

import numpy as np

from shedlab.model.snapshot import ClusterSnapshot, FloatArray, IntArray


def sort_descending(indices: IntArray, keys: FloatArray) -> tuple[IntArray, FloatArray]:
    """Bundles sorted by key, largest first; ties keep bundle-name order (stable sort)."""
    order = np.argsort(-keys, kind="stable")
    return indices[order], keys[order]


def greedy_largest_first(
    snapshot: ClusterSnapshot, broker: int, target: float
) -> tuple[IntArray, FloatArray, FloatArray]:
    """Pulsar's shared selection for ThresholdShedder and OverloadShedder (spec §2, "GREEDY").

    Walk the broker's sheddable bundles by short-term throughput, largest first, taking a bundle
    while the throughput marked so far is below ``target``, and always at least one. Because the
    keys only shrink, that is a prefix of the sorted list. Returns the bundle indices, their
    throughputs and the running marked total after each one (a sequential sum, as Java adds).
    """
    candidates = snapshot.shedding_candidates(broker)
    if candidates.size == 0:
        empty = np.zeros(0)
        return candidates, empty, empty
    keys = snapshot.short_msg_throughput_in[candidates] + snapshot.short_msg_throughput_out[candidates]
    ordered, keys = sort_descending(candidates, keys)
    marked_after = np.cumsum(keys)
    marked_before = np.concatenate(([0.0], marked_after[:-1]))
    take = marked_before < target
    take[0] = True
    count = int(np.argmin(take)) if not take.all() else take.size
    return ordered[:count], keys[:count], marked_after[:count]


def java_int(value: float) -> int:
    """Java's ``(int) double``: truncation toward zero, saturating at the int range, NaN → 0."""
    if value != value:  # NaN
        return 0
    if value >= 2147483647:
        return 2147483647
    if value <= -2147483648:
        return -2147483648
    return int(value)
