"""The shedding path's compiled kernels against their plain forms, bit for bit (``shedlab.shed_kernels``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from shedlab.kernels import group_order, owner_sums
from shedlab.shed_kernels import lister_rows, regroup

IntArray = NDArray[np.int64]

seeds = st.integers(0, 2**32 - 1)


def bits(a: NDArray[np.float64]) -> NDArray[np.int64]:
    return np.ascontiguousarray(a).view(np.int64)


def index_of(rows: IntArray, n_rows: int) -> tuple[IntArray, IntArray]:
    """The plain by-owner index: the counting sort of ``rows + 1`` (itself a stable argsort)."""
    order = np.empty(rows.size, dtype=np.int64)
    offsets = np.empty(n_rows + 2, dtype=np.int64)
    group_order(rows + 1, n_rows + 1, order, offsets)
    return order, offsets


@settings(max_examples=80, deadline=None)
@given(seeds, st.integers(0, 300), st.integers(1, 20), st.booleans())
def test_lister_rows_are_the_gather_the_sums_and_the_differences(
    seed: int, m: int, n_slots: int, with_last: bool
) -> None:
    rng = np.random.default_rng(seed)
    owner = rng.integers(-1, n_slots, m)
    v = rng.lognormal(3.0, 3.0, (2, m)) * (rng.random((2, m)) > 0.1)
    mask = rng.random(m) < 0.7
    slot_to_row = np.full(n_slots + 1, -1, dtype=np.int64)
    listed = np.flatnonzero(rng.random(n_slots) < 0.8)
    slot_to_row[listed] = np.arange(listed.size)
    bins, want_sums = np.empty(m, dtype=np.int64), np.zeros((n_slots + 1, 2))
    owner_sums(owner, n_slots, v, mask, bins, want_sums)
    want_rows = slot_to_row[bins]
    last = (
        np.where(rng.random(m) < 0.2, rng.integers(-1, listed.size, m), want_rows) if with_last else owner[:0]
    )
    rows, sums, changed = np.empty(m, dtype=np.int64), np.zeros((n_slots + 1, 2)), np.empty(m, dtype=np.int64)
    n_changed = lister_rows(owner, slot_to_row, v[0], v[1], mask, last, rows, sums, changed)
    assert np.array_equal(rows, want_rows)
    assert np.array_equal(bits(sums), bits(want_sums))
    if with_last:
        assert changed[:n_changed].tolist() == np.flatnonzero(last != want_rows).tolist()
    else:
        assert n_changed == m


@settings(max_examples=150, deadline=None)
@given(seeds, st.integers(0, 300), st.integers(0, 20), st.sampled_from([0.0, 0.01, 0.2, 1.0]))
def test_regroup_is_the_index_built_afresh(seed: int, m: int, n_rows: int, moved: float) -> None:
    """Some bundles change rows (to -1, from -1, between rows): the same index as a fresh counting sort."""
    rng = np.random.default_rng(seed)
    last = rng.integers(-1, n_rows, m)
    rows = np.where(rng.random(m) < moved, rng.integers(-1, n_rows, m), last)
    last_order, last_offsets = index_of(last, n_rows)
    changed = np.flatnonzero(rows != last)
    order, offsets = np.full(m, -7, dtype=np.int64), np.full(n_rows + 2, -7, dtype=np.int64)
    regroup(rows, last, changed, changed.size, last_order, last_offsets, order, offsets)
    want_order, want_offsets = index_of(rows, n_rows)
    assert np.array_equal(order, want_order)
    assert np.array_equal(offsets, want_offsets)
    assert np.array_equal(order, np.argsort(rows, kind="stable"))
