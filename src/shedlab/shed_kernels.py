"""Compiled loops of the leader's shedding path: its snapshot of the published reports, incrementally.

Why: each shedding cycle of a large simulated cluster (1,000 brokers, 100,000 bundles) builds the
leader's snapshot from the reports written since the last one. Most of a snapshot is new every tick
(the bundles' time averages move at every report write), but its by-owner index, the bundles grouped by
the broker whose report lists them, changes for a dozen bundles a tick, when reports list moved
bundles. The NumPy form (or a counting sort) rebuilds the whole index; :func:`regroup` moves the dozen
and copies the rest, and :func:`lister_rows` finds them in the pass that sums the listers' long-term
rates, so the snapshot reads each bundle array once.

Why the same bits: see :mod:`shedlab.kernels`; the sums here add, per broker and rate, the same values
in the same (ascending bundle) order as :func:`shedlab.kernels.owner_sums`, and the index is a
permutation (no arithmetic). ``tests/test_shed_kernels.py`` compares both with their plain forms.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shedlab.kernels import _compiled

__all__ = ["lister_rows", "regroup"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


@_compiled
def lister_rows(
    owner: IntArray,
    slot_to_row: IntArray,
    rate_in: FloatArray,
    rate_out: FloatArray,
    mask: BoolArray,
    last_rows: IntArray,
    rows: IntArray,
    sums: FloatArray,
    changed: IntArray,
) -> int:
    """Each bundle's snapshot row, the listers' sums of two rates, and the bundles whose row changed.

    ``owner[j]`` is the broker slot whose report lists bundle j (-1: none), ``slot_to_row`` (one entry
    more than there are slots, the last -1) its snapshot row. Fills ``rows[j] = slot_to_row[owner[j]]``
    (-1 for an unlisted bundle); adds ``rate_in[j]`` and ``rate_out[j]`` into ``sums[owner[j], 0]`` and
    ``sums[owner[j], 1]`` where ``mask[j]`` (unlisted bundles into the last row of ``sums``), in ascending
    j as :func:`shedlab.kernels.owner_sums` does over the rows ``(rate_in, rate_out)``; writes into
    ``changed`` (size m) the positions, ascending, where ``rows`` differs from ``last_rows`` and returns
    how many. With an empty ``last_rows`` (no earlier snapshot) every position counts as changed and none
    is written. (Two named rates, not an (R, m) block: a loop over R costs this pass half its speed.)
    """
    overflow = slot_to_row.size - 1
    compare = last_rows.size == owner.size
    n_changed = 0
    for j in range(owner.size):
        o = owner[j]
        b = o if o >= 0 else overflow
        r = slot_to_row[b]
        rows[j] = r
        if compare and r != last_rows[j]:
            changed[n_changed] = j
            n_changed += 1
        if mask[j]:
            sums[b, 0] += rate_in[j]
            sums[b, 1] += rate_out[j]
    return n_changed if compare else owner.size


@_compiled
def regroup(
    rows: IntArray,
    last_rows: IntArray,
    changed: IntArray,
    n_changed: int,
    last_order: IntArray,
    last_offsets: IntArray,
    order: IntArray,
    offsets: IntArray,
) -> None:
    """The by-owner index of ``rows`` from that of ``last_rows``, which differ at ``changed[:n_changed]``.

    The index (``order``, ``offsets``) is :func:`shedlab.kernels.group_order`'s of ``rows + 1``: the
    positions grouped by row (-1 first), ascending within a group, and where each group starts. Runs of
    groups nothing left or joined are copied, one slice a run; the other groups merge their staying
    members with their arrivals, both ascending. ``changed`` must list, ascending, exactly the positions
    where the two differ.
    """
    n_groups = last_offsets.size - 1
    delta = np.zeros(n_groups, dtype=np.int64)
    arrivals = np.zeros(n_groups + 1, dtype=np.int64)
    touched = np.zeros(n_groups, dtype=np.bool_)
    for c in range(n_changed):
        j = changed[c]
        before, after = last_rows[j] + 1, rows[j] + 1
        delta[before] -= 1
        delta[after] += 1
        arrivals[after + 1] += 1
        touched[before] = True
        touched[after] = True
    offsets[0] = 0
    for g in range(n_groups):
        offsets[g + 1] = offsets[g] + last_offsets[g + 1] - last_offsets[g] + delta[g]
        arrivals[g + 1] += arrivals[g]
    arrived = np.empty(max(n_changed, 1), dtype=np.int64)
    fill = arrivals[:-1].copy()
    for c in range(n_changed):
        j = changed[c]
        g = rows[j] + 1
        arrived[fill[g]] = j
        fill[g] += 1
    run = 0  # the first group of the current run of untouched groups: they moved by one shift, together
    for g in range(n_groups + 1):
        if g < n_groups and not touched[g]:
            continue
        start, end = last_offsets[run], last_offsets[g]
        order[offsets[run] : offsets[run] + end - start] = last_order[start:end]
        run = g + 1
        if g == n_groups:
            break
        dst, p, end = offsets[g], last_offsets[g], last_offsets[g + 1]
        a, a_end = arrivals[g], arrivals[g + 1]
        while True:
            while p < end and rows[last_order[p]] + 1 != g:  # it left the group
                p += 1
            if p < end and (a >= a_end or last_order[p] < arrived[a]):
                order[dst] = last_order[p]
                p += 1
            elif a < a_end:
                order[dst] = arrived[a]
                a += 1
            else:
                break
            dst += 1
