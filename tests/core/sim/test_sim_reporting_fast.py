"""The fast time-average paths equal the base arithmetic bit for bit (property tests).

``reference_apply_samples`` and ``ReferenceLeaderData`` are the full-array formulas the simulator used
before the subset/table optimisations; the reference outputs pin that arithmetic, so the fast code must
produce the same float64 bits on any finite input, not merely close values.
"""

from __future__ import annotations

import numpy as np
from builders import Writes
from hypothesis import given, settings
from hypothesis import strategies as st

from shedlab.core.sim.reporting import DEFAULT_VALUES, LeaderBundleData, apply_samples
from shedlab.model.pulsar import NUM_LONG_SAMPLES, NUM_SHORT_SAMPLES
from shedlab.model.snapshot import FloatArray, IntArray


def reference_apply_samples(
    n: IntArray, values: FloatArray, sample: FloatArray, count: IntArray, max_samples: int
) -> tuple[IntArray, FloatArray]:
    count = np.maximum(count, 0)
    c1 = np.minimum(count, np.maximum(max_samples - n, 0))
    n1 = n + c1
    weight = np.zeros(n.shape)
    np.divide(c1, n1, out=weight, where=n1 > 0)
    v1 = values + (sample - values) * weight
    c2 = count - c1
    decay = (1.0 - 1.0 / max_samples) ** c2
    v2 = sample + (v1 - sample) * decay
    return n1, v2


def reference_apply_writes(
    ld: LeaderBundleData,
    *,
    listed_by: IntArray,
    values: FloatArray,
    new_listed_by: IntArray,
    new_values: FloatArray,
    new_topics: IntArray,
    write_position: IntArray,
    writes: int,
    extra_updates: int,
) -> IntArray:
    """The base commit's ``LeaderBundleData.apply_writes`` (every step over the full arrays)."""
    total = writes + extra_updates
    if total == 0:
        return listed_by
    inf = np.iinfo(np.int64).max
    listed_before = listed_by >= 0
    old_pos = np.where(listed_before, write_position[np.maximum(listed_by, 0)], 0)
    gains_pos = np.where(new_listed_by >= 0, write_position[np.maximum(new_listed_by, 0)], 0)
    gain_e = np.where(gains_pos > 0, gains_pos, inf)
    loss = listed_before & (old_pos > 0) & (new_listed_by != listed_by)
    loss_e = np.where(loss, old_pos, inf)
    loss_effective = loss & (loss_e < gain_e)
    gained = gain_e != inf
    first_change = np.minimum(gain_e, loss_e)
    old_count = np.where(listed_before & ld.has, np.minimum(first_change, total + 1) - 1, 0)
    sn, sv, ln, lv = ld.short_n, ld.short, ld.long_n, ld.long
    if old_count.any():
        sn, sv = reference_apply_samples(sn, sv, values, old_count, NUM_SHORT_SAMPLES)
        ln, lv = reference_apply_samples(ln, lv, values[:2], old_count, NUM_LONG_SAMPLES)
    reset = gained & (loss_effective | ~listed_before | ~ld.has)
    if reset.any():
        sn = np.where(reset, 0, sn)
        ln = np.where(reset, 0, ln)
        sv = np.where(reset, DEFAULT_VALUES[:, None], sv)
        lv = np.where(reset, DEFAULT_VALUES[:2, None], lv)
    if gained.any():
        new_count = np.where(gained, total - gain_e + 1, 0)
        sn, sv = reference_apply_samples(sn, sv, new_values, new_count, NUM_SHORT_SAMPLES)
        ln, lv = reference_apply_samples(ln, lv, new_values[:2], new_count, NUM_LONG_SAMPLES)
    ld.short_n, ld.short, ld.long_n, ld.long = sn, sv, ln, lv
    ld.has = (listed_before & ld.has & ~loss_effective) | gained
    ld.topics = np.where(gained, new_topics, ld.topics)
    removed = ~ld.has
    if removed.any():
        ld.short_n = np.where(removed, 0, ld.short_n)
        ld.long_n = np.where(removed, 0, ld.long_n)
    ld.updates += total
    result: IntArray = np.where(gained, new_listed_by, np.where(loss_effective, -1, listed_by))
    return result


def _bits(a: FloatArray) -> list[int]:
    return np.ascontiguousarray(a, dtype=np.float64).view(np.int64).ravel().tolist()


rates = st.floats(min_value=0.0, max_value=1e9, allow_nan=False, allow_infinity=False)


@settings(max_examples=200, deadline=None)
@given(
    m=st.integers(1, 40),
    max_samples=st.sampled_from([NUM_SHORT_SAMPLES, NUM_LONG_SAMPLES, 3]),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1e-3, 1.0, 1e3, 1e7]),
    value=rates,
)
def test_apply_samples_equals_the_full_formula_bit_for_bit(
    m: int, max_samples: int, seed: int, scale: float, value: float
) -> None:
    rng = np.random.default_rng(seed)
    n = rng.integers(0, max_samples + 1, m)
    values = rng.random((4, m)) * scale
    values[0, 0] = value
    sample = rng.random((4, m)) * scale * rng.choice([0.1, 1.0, 10.0])
    count = rng.choice([0, 0, 1, 2, 5, 30, 2000], m)
    n_fast, v_fast = apply_samples(n, values, sample, count, max_samples)
    n_ref, v_ref = reference_apply_samples(n, values, sample, count, max_samples)
    assert n_fast.tolist() == n_ref.tolist()
    assert _bits(v_fast) == _bits(v_ref)


def _random_ld(rng: np.random.Generator, m: int) -> LeaderBundleData:
    ld = LeaderBundleData.empty(m)
    ld.has = rng.random(m) < 0.8
    ld.short_n = np.where(ld.has, rng.integers(0, NUM_SHORT_SAMPLES + 1, m), 0)
    ld.long_n = np.where(ld.has, rng.integers(0, NUM_LONG_SAMPLES + 1, m), 0)
    ld.short = rng.random((4, m)) * 1e4
    ld.long = rng.random((2, m)) * 1e4  # long-term msgRateIn/Out only
    ld.topics = rng.integers(0, 50, m)
    return ld


@settings(max_examples=200, deadline=None)
@given(
    m=st.integers(1, 60),
    n_slots=st.integers(1, 8),
    seed=st.integers(0, 2**32 - 1),
    extra=st.integers(0, 2),
    ticks=st.integers(1, 4),
)
def test_apply_writes_equals_the_full_recomputation(
    m: int, n_slots: int, seed: int, extra: int, ticks: int
) -> None:
    """Random listings, moves, writes and write orders over a few ticks: same bits, counts, listings."""
    rng = np.random.default_rng(seed)
    fast = _random_ld(rng, m)
    ref = _random_ld(np.random.default_rng(seed), m)
    listed_by = np.where(rng.random(m) < 0.8, rng.integers(0, n_slots, m), -1)
    values = rng.random((4, m)) * 1e3
    for _ in range(ticks):
        new_listed_by = np.where(rng.random(m) < 0.3, rng.integers(-1, n_slots, m), listed_by)
        new_values = np.where(rng.random(m) < 0.5, values, rng.random((4, m)) * 1e3)
        new_topics = rng.integers(0, 50, m)
        writers = rng.permutation(n_slots)[: rng.integers(0, n_slots + 1)]
        position = np.zeros(n_slots + 1, dtype=np.int64)
        position[writers] = np.arange(1, writers.size + 1)
        kwargs = Writes(
            listed_by=listed_by,
            values=values,
            new_listed_by=new_listed_by,
            new_values=new_values,
            new_topics=new_topics,
            write_position=position,
            writes=int(writers.size),
            extra_updates=extra,
        )
        published = values.copy()
        published_writes: Writes = {**kwargs, "values": published}
        got = fast.apply_writes(topics=np.zeros(m, dtype=np.int64), **published_writes, republish=True)
        want = reference_apply_writes(ref, **kwargs)
        assert got.tolist() == want.tolist()
        # republished in place: the bundles listed by a write now read the writer's values
        listed_by_writer = position[want] > 0
        assert _bits(published) == _bits(np.where(listed_by_writer, new_values, values))
        for name in ("short_n", "long_n", "has", "topics"):
            assert getattr(fast, name).tolist() == getattr(ref, name).tolist(), name
        assert _bits(fast.short) == _bits(ref.short)
        assert _bits(fast.long) == _bits(ref.long)
        assert fast.updates == ref.updates
        listed_by, values = got, np.where(rng.random(m) < 0.5, new_values, values)


def test_apply_writes_leaves_the_arrays_a_snapshot_holds_untouched() -> None:
    """Snapshots hold ``short``/``long``: an update builds new arrays, never writes into the old ones."""
    rng = np.random.default_rng(7)
    ld = _random_ld(rng, 30)
    held_short, held_long = ld.short, ld.long
    before = _bits(held_short) + _bits(held_long)
    position = np.array([1, 2, 0], dtype=np.int64)
    ld.apply_writes(
        listed_by=rng.integers(-1, 2, 30), values=rng.random((4, 30)), topics=np.zeros(30, dtype=np.int64),
        new_listed_by=rng.integers(-1, 2, 30), new_values=rng.random((4, 30)),
        new_topics=np.zeros(30, dtype=np.int64), write_position=position, writes=2, extra_updates=1,
    )  # fmt: skip
    assert _bits(held_short) + _bits(held_long) == before
    assert ld.short is not held_short and ld.long is not held_long


def test_decay_factors_from_the_table_equal_numpys_power() -> None:
    rng = np.random.default_rng(3)
    for max_samples in (NUM_SHORT_SAMPLES, NUM_LONG_SAMPLES):
        c2 = rng.integers(0, 5000, 100_001)
        counts = np.zeros_like(c2)
        n = np.full_like(c2, max_samples)  # saturated: every sample is a decay step
        values, sample = rng.random((4, c2.size)), rng.random((4, c2.size))
        _, fast = apply_samples(n, values, sample, counts + c2, max_samples)
        _, ref = reference_apply_samples(n, values, sample, counts + c2, max_samples)
        assert _bits(fast) == _bits(ref)
