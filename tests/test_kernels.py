"""Every compiled kernel against the NumPy form it replaced, bit for bit (``shedlab.kernels``).

The NumPy forms below are the code the simulator ran before the kernels (kept here as the reference);
equal bits are what lets the kernels in without moving a pinned reference output.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from shedlab.config import LoadBalancerConfig
from shedlab.core.sim.reporting import need_update_mask
from shedlab.kernels import (
    GAINED,
    HAS,
    RESET,
    SPECIAL,
    group_order,
    normal_affine,
    owner_sums,
    report_rule,
    saturated_run,
    special_runs,
    tick_samples,
    weighted_scores,
)
from shedlab.model.snapshot import weighted_max_percent

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

seeds = st.integers(0, 2**32 - 1)


def bits(a: NDArray[np.float64]) -> NDArray[np.int64]:
    return np.ascontiguousarray(a).view(np.int64)


def values(rng: np.random.Generator, shape: tuple[int, ...]) -> FloatArray:
    """Rates over many orders of magnitude, with exact zeros: where last bits differ if anything does."""
    out: FloatArray = rng.lognormal(3.0, 3.0, shape) * (rng.random(shape) > 0.1)
    return out


# ------------------------------------------------------------------------------ the leader's averages
@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(1, 300), st.booleans(), st.booleans(), st.integers(2, 4), st.booleans())
def test_saturated_run_is_numpys_two_runs_then_the_masked_copy(
    seed: int, m: int, run_old: bool, run_new: bool, rows: int, republish: bool
) -> None:
    rng = np.random.default_rng(seed)
    v, x_old, x_new = values(rng, (rows, m)), values(rng, (4, m)), values(rng, (4, m))
    table = np.power(1.0 - 1.0 / 10, np.arange(40, dtype=np.float64))
    c_old, c_new = rng.integers(0, 40, m), rng.integers(0, 40, m)
    mask = rng.random(m) < 0.3
    expected = v.copy()
    if run_old:
        expected = (expected - x_old[:rows]) * table[c_old] + x_old[:rows]
    if run_new:
        expected = (expected - x_new[:rows]) * table[c_new] + x_new[:rows]
    expected_old = x_old.copy()
    if republish:
        expected_old[:rows, mask] = x_new[:rows, mask]
    out = np.empty_like(v)
    copied = mask if republish else mask[:0]
    saturated_run(out, v, table, x_old[:rows], c_old, run_old, x_new[:rows], c_new, run_new, copied)
    assert np.array_equal(bits(out), bits(expected))
    assert np.array_equal(bits(x_old), bits(expected_old))


def numpy_advance(
    n: IntArray, v: FloatArray, x: FloatArray, count: IntArray, max_samples: int, table: FloatArray
) -> tuple[IntArray, FloatArray]:
    """The NumPy run of ``count`` samples of ``x`` that :func:`special_runs` replaced (``_advance``)."""
    c1 = np.minimum(count, max_samples - n)
    grow = np.flatnonzero(c1)
    n1 = n + c1
    v_g = v[:, grow]
    out = np.subtract(v, x)
    if grow.size:
        x_g = x[:, grow]
        out[:, grow] = (v_g + (x_g - v_g) * (c1[grow] / n1[grow])) - x_g
        c2 = count - c1
    else:
        c2 = count
    out *= table[c2]
    out += x
    return n1, out


@settings(max_examples=80, deadline=None)
@given(
    seeds, st.integers(1, 200), st.booleans(), st.booleans(), st.integers(2, 4), st.sampled_from([10, 1000])
)
def test_special_runs_are_numpys_runs_reset_and_counts(
    seed: int, m: int, run_old: bool, run_new: bool, rows: int, max_samples: int
) -> None:
    rng = np.random.default_rng(seed)
    v, x_old, x_new = values(rng, (rows, m)), values(rng, (4, m)), values(rng, (4, m))
    n = np.minimum(rng.integers(0, max_samples + 5, m), max_samples)
    c_old, c_new = rng.integers(0, 30, m), rng.integers(0, 30, m)
    reset, has = rng.random(m) < 0.2, rng.random(m) < 0.8
    special = np.flatnonzero(rng.random(m) < 0.5)
    table = np.power(1.0 - 1.0 / max_samples, np.arange(40, dtype=np.float64))
    defaults = values(rng, (4,))[:rows]
    s_n, s_v = n[special], v[:, special]
    if run_old:
        s_n, s_v = numpy_advance(s_n, s_v, x_old[:rows, special], c_old[special], max_samples, table)
    s_n = np.where(reset[special], 0, s_n)
    s_v = np.where(reset[special], defaults[:, None], s_v)
    if run_new:
        s_n, s_v = numpy_advance(s_n, s_v, x_new[:rows, special], c_new[special], max_samples, table)
    n_out, v_out = rng.integers(0, 5, m), values(rng, (rows, m))
    expected_n, expected_v = n_out.copy(), v_out.copy()
    expected_n[special] = s_n * has[special]
    expected_v[:, special] = s_v
    special_runs(
        special,
        n,
        v,
        x_old[:rows, special],
        c_old,
        run_old,
        x_new[:rows],
        c_new,
        run_new,
        reset,
        has,
        max_samples,
        table,
        defaults,
        n_out,
        v_out,
    )
    assert np.array_equal(n_out, expected_n)
    assert np.array_equal(bits(v_out), bits(expected_v))


class Bookkeeping(NamedTuple):
    old_count: IntArray
    new_count: IntArray
    gained: BoolArray
    reset: BoolArray
    has: BoolArray
    after: IntArray


def numpy_tick_samples(
    listed_by: IntArray, has: BoolArray, new_listed_by: IntArray, write_position: IntArray, total: int
) -> Bookkeeping:
    """The NumPy ``_TickSamples.of`` and the lines of ``apply_writes`` that :func:`tick_samples` replaced."""
    position = np.append(write_position, 0)
    writes_at = position > 0
    new_pos = position[new_listed_by]
    gained = new_pos > 0
    keep = (listed_by >= 0) & has
    old_count = np.where(writes_at, position - 1, total)[new_listed_by]
    changed = np.flatnonzero(new_listed_by != listed_by)
    old_pos = position[listed_by[changed]]
    lost = old_pos > 0
    loss, loss_pos = changed[lost], old_pos[lost]
    old_count[loss] = np.minimum(old_count[loss], loss_pos - 1)
    effective = loss[~(gained[loss] & (new_pos[loss] < loss_pos))]
    old_count *= keep
    reset = gained & ~keep
    reset[effective[gained[effective]]] = True
    new_count = np.where(writes_at, total + 1 - position, 0)[new_listed_by]
    has_after = keep.copy()
    has_after[effective] = False
    has_after |= gained
    after = np.where(gained, new_listed_by, listed_by)
    after[effective[~gained[effective]]] = -1
    return Bookkeeping(old_count, new_count, gained, reset, has_after, after)


@settings(max_examples=80, deadline=None)
@given(seeds, st.integers(1, 200), st.integers(1, 12), st.integers(0, 3), st.booleans())
def test_tick_samples_is_the_numpy_bookkeeping(
    seed: int, m: int, n_slots: int, extra: int, republish: bool
) -> None:
    rng = np.random.default_rng(seed)
    listed_by = rng.integers(-1, n_slots, m)
    new_listed_by = np.where(rng.random(m) < 0.3, rng.integers(-1, n_slots, m), listed_by)
    has = rng.random(m) < 0.8
    writers = rng.permutation(n_slots)[: rng.integers(0, n_slots + 1)]
    position = np.zeros(n_slots + 1, dtype=np.int64)
    position[writers] = np.arange(1, writers.size + 1)
    total = writers.size + extra
    short_n, long_n = rng.integers(0, 11, m), rng.integers(990, 1001, m)
    topics, new_topics, published = rng.integers(0, 50, m), rng.integers(0, 50, m), rng.integers(0, 50, m)
    published_before = published.copy()
    topics_after = np.empty(m, dtype=np.int64)
    counts = np.empty((2, m), dtype=np.int64)
    masks = np.empty((4, m), dtype=np.bool_)
    after = np.empty(m, dtype=np.int64)
    short_before, long_before = short_n.copy(), long_n.copy()
    run_old, run_new = tick_samples(
        listed_by,
        has,
        new_listed_by,
        position,
        total,
        short_n,
        long_n,
        10,
        1000,
        topics,
        new_topics,
        counts,
        masks,
        after,
        topics_after,
        published if republish else published[:0],
    )
    ref = numpy_tick_samples(listed_by, has, new_listed_by, position, total)
    assert np.array_equal(counts[0], ref.old_count)
    assert np.array_equal(counts[1][ref.gained], ref.new_count[ref.gained])
    assert not counts[1][~ref.gained].any()
    assert np.array_equal(masks[GAINED], ref.gained)
    assert np.array_equal(masks[RESET], ref.reset)
    assert np.array_equal(masks[HAS], ref.has)
    assert np.array_equal(masks[SPECIAL], (short_before < 10) | (long_before < 1000) | ref.reset)
    assert np.array_equal(after, ref.after)
    kept = ref.has | masks[SPECIAL]  # the special bundles' counts are special_runs' to write
    assert np.array_equal(short_n, short_before * kept) and np.array_equal(long_n, long_before * kept)
    assert (run_old, run_new) == (bool(ref.old_count.any()), bool(ref.gained.any()))
    assert np.array_equal(topics_after, np.where(ref.gained, new_topics, topics))
    if republish:
        np.copyto(published_before, new_topics, where=ref.gained)
    assert np.array_equal(published, published_before)


# ------------------------------------------------------------------------------ sums, order and draws
@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(0, 300), st.integers(1, 20), st.integers(1, 4), st.booleans())
def test_owner_sums_are_the_where_and_the_bincounts(
    seed: int, m: int, n_slots: int, rows: int, masked: bool
) -> None:
    rng = np.random.default_rng(seed)
    owner, v, mask = rng.integers(-1, n_slots, m), values(rng, (rows, m)), rng.random(m) < 0.7
    bins, sums = np.empty(m, dtype=np.int64), np.zeros((n_slots + 1, rows))
    owner_sums(owner, n_slots, v, mask if masked else mask[:0], bins, sums)
    expected_bins = np.where(owner >= 0, owner, n_slots)
    assert np.array_equal(bins, expected_bins)
    counted = np.where(mask, expected_bins, n_slots) if masked else expected_bins  # uncounted: overflow
    for r in range(rows):
        expected = np.bincount(counted, weights=v[r], minlength=n_slots + 1).astype(np.float64)
        assert np.array_equal(bits(sums[:n_slots, r]), bits(expected[:n_slots]))


@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(0, 300), st.integers(1, 20))
def test_group_order_is_a_stable_argsort_with_offsets(seed: int, m: int, n_groups: int) -> None:
    keys = np.random.default_rng(seed).integers(0, n_groups, m).astype(np.int64)
    order, offsets = np.empty(m, dtype=np.int64), np.empty(n_groups + 1, dtype=np.int64)
    group_order(keys, n_groups, order, offsets)
    assert np.array_equal(order, np.argsort(keys, kind="stable"))
    assert np.array_equal(offsets, np.concatenate(([0], np.cumsum(np.bincount(keys, minlength=n_groups)))))


@settings(max_examples=30, deadline=None)
@given(seeds, st.integers(0, 500), st.floats(0.0, 3.0))
def test_normal_affine_draws_what_numpy_draws_and_leaves_the_generator_there(
    seed: int, n: int, sigma: float
) -> None:
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    out = np.empty(n)
    normal_affine(ours, out, sigma, 0.5 * sigma * sigma)
    expected = theirs.standard_normal(n)
    expected *= sigma
    expected -= 0.5 * sigma * sigma
    assert np.array_equal(bits(out), bits(expected))
    assert np.array_equal(ours.standard_normal(5), theirs.standard_normal(5))  # the stream goes on alike


# ------------------------------------------------------------------------------------ the report rule
def report_usage(rng: np.random.Generator, n: int) -> tuple[FloatArray, FloatArray]:
    """(n, 5) usage and limits with what tests the float32 path: zero, negative and NaN limits, usage
    beyond float32's range, NaN and infinite usage, equal rows (a change of exactly 0)."""
    usage = rng.lognormal(2.0, 3.0, (n, 5))
    limit = rng.lognormal(4.0, 2.0, (n, 5))
    odd = rng.random((n, 5))
    usage[odd < 0.05] = 0.0
    usage[(odd > 0.05) & (odd < 0.07)] = 1e300
    usage[(odd > 0.07) & (odd < 0.08)] = np.nan
    usage[(odd > 0.08) & (odd < 0.09)] = np.inf
    limit[(odd > 0.1) & (odd < 0.15)] = 0.0
    limit[(odd > 0.15) & (odd < 0.17)] = -1.0
    limit[(odd > 0.17) & (odd < 0.18)] = np.nan
    return usage, limit


@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(1, 60), st.sampled_from([(1.0, 1.0, 1.0, 1.0), (0.5, 2.0, 1.0, 0.0)]))
def test_report_rule_is_the_numpy_rule_over_both_reports_scores(
    seed: int, n: int, weights: tuple[float, float, float, float]
) -> None:
    rng = np.random.default_rng(seed)
    conf = LoadBalancerConfig()
    (pub_usage, pub_limit), (loc_usage, loc_limit) = report_usage(rng, n), report_usage(rng, n)
    same = rng.random(n) < 0.3  # unchanged reports: every change is 0
    loc_usage[same], loc_limit[same] = pub_usage[same], pub_limit[same]
    pub_agg, loc_agg = values(rng, (n, 4)), values(rng, (n, 4))
    loc_agg[same] = pub_agg[same]
    pub_bundles, loc_bundles = rng.integers(0, 4, n), rng.integers(0, 4, n)
    last_update = rng.integers(0, 2_000_000, n)
    reporting = np.flatnonzero(rng.random(n) < 0.8).astype(np.int64)
    empty = rng.random(reporting.size) < 0.2
    now, w = 1_500_000, np.asarray(weights)
    r = reporting
    with np.errstate(invalid="ignore"):  # inf − inf and 0·inf: NaN, as the kernel has it
        last_u = weighted_max_percent(pub_usage[r], pub_limit[r], weights) / 100.0
        now_u = weighted_max_percent(loc_usage[r], loc_limit[r], weights) / 100.0
        mask = need_update_mask(
            last_rate=np.where(empty, 0.0, pub_agg[r, 0] + pub_agg[r, 1]),
            last_tp=np.where(empty, 0.0, pub_agg[r, 2] + pub_agg[r, 3]),
            last_bundles=np.where(empty, 0.0, pub_bundles[r].astype(float)),
            last_usage=np.where(empty, 0.0, last_u),
            rate=loc_agg[r, 0] + loc_agg[r, 1],
            tp=loc_agg[r, 2] + loc_agg[r, 3],
            bundles=loc_bundles[r].astype(float),
            usage=now_u,
            last_update_ms=last_update[r],
            now_ms=now,
            conf=conf,
        )
    expected = r[mask]
    writers = np.empty(reporting.size, dtype=np.int64)
    last_scores, now_scores = np.empty(r.size), np.empty(r.size)  # the simulator's: weighted_scores'
    weighted_scores(np.ascontiguousarray(pub_usage[r]), np.ascontiguousarray(pub_limit[r]), w, last_scores)
    weighted_scores(np.ascontiguousarray(loc_usage[r]), np.ascontiguousarray(loc_limit[r]), w, now_scores)
    k = report_rule(
        reporting,
        empty,
        (last_scores, now_scores),
        (pub_agg, pub_bundles),
        (loc_agg, loc_bundles),
        last_update,
        now,
        conf.load_balancer_report_update_max_interval_minutes * 60_000,
        float(conf.load_balancer_report_update_threshold_percentage),
        writers,
    )
    assert np.array_equal(writers[:k], expected)


@pytest.mark.parametrize(
    ("old", "new", "writes"),
    [(249559.97609419716, 274515.9737036169, False), (835332.5155505129, 751799.2639954616, True)],
)
def test_report_rule_computes_a_change_on_the_threshold_as_java_does(
    old: float, new: float, writes: bool
) -> None:
    """A 10 % change is 10.0 or just above, by the order of the operations (Java: 100·|(old − new)/old|)."""
    published = (np.array([[old, 0.0, 0.0, 0.0]]), np.zeros(1, dtype=np.int64))
    local = (np.array([[new, 0.0, 0.0, 0.0]]), np.zeros(1, dtype=np.int64))
    writers = np.empty(1, dtype=np.int64)
    k = report_rule(
        np.zeros(1, dtype=np.int64),
        np.zeros(1, dtype=np.bool_),
        (np.zeros(1), np.zeros(1)),
        published,
        local,
        np.zeros(1, dtype=np.int64),
        0,
        60_000,
        10.0,
        writers,
    )
    assert k == int(writes)


@settings(max_examples=60, deadline=None)
@given(seeds, st.integers(0, 80), st.sampled_from([(1.0, 1.0, 1.0, 1.0), (0.5, 2.0, 1.0, 0.0)]))
def test_weighted_scores_are_weighted_max_percent_bit_for_bit(
    seed: int, n: int, weights: tuple[float, float, float, float]
) -> None:
    usage, limit = report_usage(np.random.default_rng(seed), n)
    with np.errstate(invalid="ignore"):  # 0·inf: NaN, as the kernel has it
        expected = weighted_max_percent(usage, limit, weights)
    out = np.empty(n)
    weighted_scores(usage, limit, np.asarray(weights), out)
    assert np.array_equal(bits(out), bits(expected))
