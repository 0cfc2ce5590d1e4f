"""The hot array loops compiled with Numba: one loop where NumPy makes several passes.

Why compiled loops: a tick of a large simulated cluster (1,000 brokers, 100,000 bundles) is a few dozen
passes over (m,) and (4, m) arrays, and each NumPy pass pays its call, its temporaries and its own trip
over memory; a loop that does the work of several passes in one trip pays once. Measured per tick of
``bench/bench_simulator.py``'s day (1,000 brokers, 100,000 bundles) on a 2-core AMD EPYC: the leader's
averages 2.3 → 1.1 ms, a tick's sample bookkeeping about 20 passes → one, the noise's normal draws
1.2 → 0.3–0.5 ms, the snapshot's by-owner sort 0.8 → 0.25 ms; the whole day in the README's "Speed".
These loops now run at the speed of memory, so what is left to gain is passes: work folded into a
pass that already reads the same columns (the republish copy into :func:`saturated_run`, the topic
updates and the count resets into :func:`tick_samples`) and the special bundles' ~30 small NumPy
calls in one loop (:func:`special_runs`): the leader's update per tick 2.2 → 1.8 ms (medians).
Measured and left out: one j-outer loop for both averages (0.63 → 0.81 ms: it no longer vectorises),
int32 sample counts (no change), a j-outer :func:`owner_sums` (0.28 → 0.31–0.50 ms), the traffic's
four multiplies in one loop (0.36 → 0.30 ms alone, no change measurable in a tick), ``prange`` (two
threads: 0.18 ms at best but a 7.5 ms median with the second core busy, as it is while a sweep runs).
The next step's traffic computed while the kernel runs this one (27 Nov 2026, the day of
``bench/bench_simulator.py``, medians of alternated runs): on a second thread no gain (10.2 → 10.4 s,
and 2 s more CPU: the traffic's Python between its NumPy calls waits for the GIL); in a forked child
process through shared memory 10.3 → 9.4 s, 9 %, less than traffic's 17 % of a tick because the block
is copied out of the shared slot (a local report keeps it); not worth a process per simulation and its
failure modes (a prototype on a branch that was not kept).
A lazy leader view (each bundle's average kept as an anchor and evaluated only where read) is
bounded by the pass it would save: with ``reporting._saturated_steps`` patched to do nothing (wrong
averages, a timing bound only; ``bench_simulator.py --ticks 400 --phases``, alternated, 27 Nov 2026) the
report writes with the leader's averages fall 2.2 → 1.0 ms of an 8.3 ms tick, about 14 %, and it would
change the averages' rounding (an anchor's decay is one power, not a product per tick).
The shedding's remaining NumPy calls compiled (the brokers' score, AvgShedder's pairing, the
even-distribution filter; a branch that was not kept): the shedding step 2.35 → 2.22 ms a
tick, the day 14.6 → 14.0 s (``bench/compare_revisions.py``, medians of 5 alternated runs, 27 Nov 2026:
1.04×, within the runs' spread); not merged, since each would keep its NumPy form beside it (the light
commands do not load Numba) for about 4 %.
Issue 12's session of 28 Nov 2026 (the other core busy with another Spark job; timers around the
methods, medians of ticks 100-799, alternated with ``3d965cd``; a branch that was not kept), not
merged. Each step gained about 1 % at the price of a second form of logic that already has a home:
* :func:`tick_samples` with a branch of constants for steady bundles (one lister in both reports, data,
  full counts): the kernel 0.38 → 0.29-0.34 ms, in the run 0.530 → 0.514 ms a tick;
* :func:`owner_sums` also listing the bundles whose bin moved, for ``ClusterState.owner_counts``:
  ``measure`` 0.525 → 0.503 ms;
* together, the day 7.3 → 7.2 s (``bench/compare_revisions.py`` against ``3d965cd``, 5 rounds, 1.01×; 2.60×
  against ``9c4f585``).
Measured and left out there as well:
* the bookkeeping and both saturated runs fused into one kernel over blocks of 1,024 bundles: both
  averages took 0.69 → 0.4-0.55 ms, but the per-block factors and change lists cost as much (the
  kernel 1.03 → 1.0-1.2 ms);
* the traffic's population-wide factors folded into one scale (``TrafficModel.at`` unchanged within
  0.81-0.92 ms: its random draws are the cost);
* per-broker metric rows written into columns (the day 8.5 → 8.85 s: first touches of fresh pages);
* skips counted by a ``Counter`` (0.03 ms a call either way; the 0.2 ms mean there is the cyclic
  collector, 0.14 s a day).

Both averages in one r-outer loop (each sample and count read once for the short and the long run, no
blocks; 28 Nov 2026, the next session, 4 × 100,000, medians of 200 alternated calls): 0.74 → 0.88 ms with
the arrays in the cache, 0.98 → 0.99 ms with them evicted; not kept.

Where a tick goes now (4.6-4.9 ms with the other core busy): 2.2 ms in these kernels, of which the
leader's averages take 1.3. The rest is some thirty Python and small NumPy steps of 0.03-0.3 ms
each. They run slower in a tick than when repeated at once (the leader's shedding 0.64-0.71 ms
against 0.43 ms on the same snapshot), because some 50 MB of 100,000-bundle arrays a tick evict their
data. Issue 12's 4× would take the tick's Python into compiled code, or a second core.

The second core's bound was measured the same day (``bench/bench_second_core.py``). The two
:func:`saturated_run` calls of a tick (4 × 100,000) were split by rows, two rows on a pool thread
and two on the caller's; the kernel releases the GIL, and the bits are the same, since rows are
independent. Medians of 300 calls:
* other core idle: 0.60 → 0.36 ms;
* other core busy (a spinning shell pinned to it): 0.61 → 0.65 ms, with a worse p90.
The other row-separable kernels (:func:`tick_samples`, :func:`owner_sums`, ``lister_rows``) would add
about 0.35 ms more. That is at most about 0.6 ms of a 4.6 ms tick, some 13 %: about 3× in all, not 4×.
It would cost a thread pool and a rule to turn it off inside Spark's workers, so it was not built.

Why the same bits: every kernel performs, element by element, exactly the IEEE-754 operations of the
NumPy code it replaces, in the same order. ``+ − × ÷`` are correctly rounded wherever they run, and
Numba emits no fused multiply-add unless ``fastmath`` asks for it (it is off). What depends on a
library's own implementation (``exp``, ``log``, power tables) stays in NumPy and reaches the kernels
as an argument. Random draws are the one exception, and a checked one: Numba's ``Generator`` methods
run NumPy's own algorithms on the same bit generator, so :func:`normal_affine` draws the numbers NumPy
would and leaves the generator where NumPy would. ``tests/test_kernels.py`` compares every kernel with
its NumPy form bit for bit; the pinned reference outputs (``tests/reference``) hold the whole simulator.

Compilation: on first use, about a second per kernel, cached on disk (``cache=True``: beside this file,
or in Numba's user cache when the package is installed read-only), so later processes (a sweep's Spark
workers) load machine code. ``NUMBA_DISABLE_JIT=1`` runs the same functions as plain Python.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar, cast

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "GAINED",
    "HAS",
    "RESET",
    "SPECIAL",
    "group_order",
    "normal_affine",
    "owner_sums",
    "report_rule",
    "saturated_run",
    "special_runs",
    "tick_samples",
    "weighted_scores",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

_F = TypeVar("_F", bound=Callable[..., object])


def _compiled(fn: _F) -> _F:
    """``fn`` compiled in nopython mode on its first call, cached on disk; typed as ``fn``.

    Numba is imported at the first call, not with this module: every command that reads a scenario
    imports the simulator's package, and Numba costs 0.3 s and 110 MB at start-up (it brings SciPy),
    which ``shedlab report`` or a sweep's driver would pay for nothing (``bench/bench_startup.py``).
    """
    compiled: Callable[..., object] | None = None

    @functools.wraps(fn)
    def call(*args: object) -> object:
        nonlocal compiled
        if compiled is None:
            import numba  # here, not at the top: a measured start-up cost (above)

            compiled = numba.njit(cache=True, nogil=True, boundscheck=False, fastmath=False)(fn)
        return compiled(*args)

    return cast(_F, call)


@_compiled
def saturated_run(
    out: FloatArray,
    values: FloatArray,
    table: FloatArray,
    x_old: FloatArray,
    c_old: IntArray,
    run_old: bool,
    x_new: FloatArray,
    c_new: IntArray,
    run_new: bool,
    republish: BoolArray,
) -> None:
    """Both runs of the leader's saturated time average, ``(v − x)·table[c] + x``, into ``out`` (R, m).

    Row r of ``values`` reads row r of the samples. A run that is off leaves its input as it is (the
    NumPy form copied ``values`` then); with both off, ``out`` is a copy of ``values``. Unless
    ``republish`` is empty, each row of ``x_old`` then takes ``x_new`` where ``republish`` (NumPy's
    ``x_old[:, republish] = x_new[:, republish]``), right after the row is read: both rows are still in
    the cache, where a separate pass would fetch them again.
    """
    rows, m = values.shape
    copy = republish.size > 0
    for r in range(rows):
        for j in range(m):
            o = values[r, j]
            if run_old:
                x = x_old[r, j]
                o = (o - x) * table[c_old[j]] + x
            if run_new:
                x = x_new[r, j]
                o = (o - x) * table[c_new[j]] + x
            out[r, j] = o
        if copy:
            for j in range(m):
                if republish[j]:
                    x_old[r, j] = x_new[r, j]


@_compiled
def special_runs(
    special: IntArray,
    n: IntArray,
    v: FloatArray,
    x_old: FloatArray,
    c_old: IntArray,
    run_old: bool,
    x_new: FloatArray,
    c_new: IntArray,
    run_new: bool,
    reset: BoolArray,
    has: BoolArray,
    max_samples: int,
    table: FloatArray,
    defaults: FloatArray,
    n_out: IntArray,
    v_out: FloatArray,
) -> None:
    """Both runs of the leader's time average for the bundles ``special`` (still averaging, or reset).

    For each ``j = special[i]``: the old listing's run (``x_old[:, i]``, gathered, ``c_old[j]``
    samples), the reset to ``defaults`` and a count of 0 where ``reset[j]``, the new listing's run
    (``x_new[:, j]``, ``c_new[j]`` samples); the count goes to ``n_out[j]`` (0 where not ``has[j]``),
    the values to ``v_out[:, j]``. Each run is ``numpy_advance`` of ``tests/test_kernels.py``
    element by element: ``c1 = min(c, max − n)`` samples of the mean, ``(v + (x − v)·(c1/n1)) − x`` where
    ``c1 > 0`` (else ``v − x``), times ``table[c − c1]``, plus ``x``.
    """
    rows = v.shape[0]
    for i in range(special.size):
        j = special[i]
        n_old = n[j]
        c1_old = min(c_old[j], max_samples - n_old) if run_old else 0
        n_mid = 0 if reset[j] else n_old + c1_old
        c1_new = min(c_new[j], max_samples - n_mid) if run_new else 0
        for r in range(rows):
            o = v[r, j]
            if run_old:
                x = x_old[r, i]
                o = (o + (x - o) * (c1_old / (n_old + c1_old))) - x if c1_old != 0 else o - x
                o = o * table[c_old[j] - c1_old] + x
            if reset[j]:
                o = defaults[r]
            if run_new:
                x = x_new[r, j]
                o = (o + (x - o) * (c1_new / (n_mid + c1_new))) - x if c1_new != 0 else o - x
                o = o * table[c_new[j] - c1_new] + x
            v_out[r, j] = o
        n_out[j] = (n_mid + c1_new) * has[j]


@_compiled
def normal_affine(rng: np.random.Generator, out: FloatArray, scale: float, shift: float) -> None:
    """``out[j] = z_j·scale − shift`` for ``z = rng.standard_normal(out.size)``, drawn in order.

    Equal to ``z = rng.standard_normal(n); z *= scale; z -= shift`` bit for bit, the generator
    included, at a third of NumPy's cost (its per-call dispatch and the temporary go).
    """
    for j in range(out.size):
        out[j] = rng.standard_normal() * scale - shift


@_compiled
def group_order(keys: IntArray, n_groups: int, order: IntArray, offsets: IntArray) -> None:
    """A stable counting sort of ``keys`` (each in ``[0, n_groups)``): positions grouped by key.

    Fills ``order`` (size m) with the positions j in ascending key, ascending j within a key (what a
    stable ``argsort`` gives) and ``offsets`` (size ``n_groups + 1``) with where each key's run starts.
    Two passes over the keys instead of a sort.
    """
    offsets[:] = 0
    for j in range(keys.size):
        offsets[keys[j] + 1] += 1
    for g in range(n_groups):
        offsets[g + 1] += offsets[g]
    fill = offsets[:-1].copy()
    for j in range(keys.size):
        k = keys[j]
        order[fill[k]] = j
        fill[k] += 1


@_compiled
def owner_sums(
    owner: IntArray,
    overflow: int,
    values: FloatArray,
    mask: BoolArray,
    bins: IntArray,
    sums: FloatArray,
) -> None:
    """Per-owner sums of ``values`` (R, m) into ``sums`` (zeroed, one row per bin, R columns).

    ``bins[j]`` becomes ``owner[j]``, or ``overflow`` for an unowned bundle (-1); ``sums[bins[j], r]``
    adds ``values[r, j]`` for every j (only where ``mask[j]``, unless ``mask`` is empty), in ascending
    j: per bin the same additions in the same order as ``np.bincount(bins, weights=values[r])`` (which
    adds sequentially in index order, skipping nothing a zero weight would change), so the same bits. One
    call for the ``np.where`` and the R bincounts it replaces.
    """
    rows, m = values.shape
    masked = mask.size > 0
    for j in range(m):
        o = owner[j]
        bins[j] = o if o >= 0 else overflow
    for r in range(rows):
        for j in range(m):
            if not masked or mask[j]:
                sums[bins[j], r] += values[r, j]


# The rows of :func:`tick_samples`' ``masks``.
GAINED, RESET, HAS, SPECIAL = range(4)


@_compiled
def tick_samples(
    listed_by: IntArray,
    has: BoolArray,
    new_listed_by: IntArray,
    position: IntArray,
    total: int,
    short_n: IntArray,
    long_n: IntArray,
    max_short: int,
    max_long: int,
    topics: IntArray,
    new_topics: IntArray,
    counts: IntArray,
    masks: BoolArray,
    listed_after: IntArray,
    topics_after: IntArray,
    published_topics: IntArray,
) -> tuple[bool, bool]:
    """Per bundle, what one tick of the leader's ``updateBundleData`` runs does to its bookkeeping.

    Inputs: ``listed_by``/``new_listed_by``, the broker slot whose published/local report lists each
    bundle (-1: none); ``has``, it has BundleData; ``position[s]``, the 1-based write position of slot
    s in the tick (0: no write); ``short_n``/``long_n``, the short- and long-term sample counts, whose
    maxima are ``max_short``/``max_long``; ``topics``/``new_topics``, the topic counts of the leader's
    data and of the local reports.

    Outputs: ``counts`` (2, m), the samples of the old listing's values (up to the first write that
    changes the listing, all ``total`` updates if none does; 0 without data before the tick) and of
    the new listing's (from its lister's write on); ``masks`` (4, m), the rows ``GAINED`` (a write
    lists the bundle), ``RESET`` (it starts again from Pulsar's defaults), ``HAS`` (it has data after
    the tick: listed with data before and not dropped by its old lister's write before a new write
    lists it, or listed by a write) and ``SPECIAL`` (a count below its maximum, or reset: the
    saturated closed form does not apply); ``listed_after``, its lister after the tick (-1: none);
    ``short_n``/``long_n`` in place, 0 without data after the tick but for ``SPECIAL`` bundles (whose
    counts :func:`special_runs` writes; a store only where a count changes, not a new array);
    ``topics_after``, ``new_topics`` where a write lists the bundle, else ``topics``; there, unless it
    is empty, ``published_topics`` takes ``new_topics`` in place (what the published reports say after
    the tick). Returns whether any bundle takes a sample of the old listing and whether any gains one.
    One pass for about twenty.
    """
    republish = published_topics.size > 0
    any_old = False
    any_new = False
    for j in range(listed_by.size):
        old, new = listed_by[j], new_listed_by[j]
        new_pos = position[new] if new >= 0 else 0
        gained = new_pos > 0
        keep = old >= 0 and has[j]
        old_count = new_pos - 1 if gained else total
        effective = False  # the old lister's write drops it before any new write lists it
        if new != old:
            old_pos = position[old] if old >= 0 else 0
            if old_pos > 0:
                old_count = min(old_count, old_pos - 1)
                effective = not (gained and new_pos < old_pos)
        if not keep:
            old_count = 0
        counts[0, j] = old_count
        counts[1, j] = total + 1 - new_pos if gained else 0
        any_old |= old_count != 0
        any_new |= gained
        reset = gained and (not keep or effective)
        has_after = (keep and not effective) or gained
        short, long = short_n[j], long_n[j]
        masks[GAINED, j] = gained
        masks[RESET, j] = reset
        masks[HAS, j] = has_after
        masks[SPECIAL, j] = short < max_short or long < max_long or reset
        listed_after[j] = new if gained else (-1 if effective else old)
        if not has_after and short + long != 0 and not masks[SPECIAL, j]:
            short_n[j] = 0
            long_n[j] = 0
        if gained:
            topics_after[j] = new_topics[j]
            if republish:
                published_topics[j] = new_topics[j]
        else:
            topics_after[j] = topics[j]
    return any_old, any_new


@_compiled
def report_rule(
    reporting: IntArray,
    empty: BoolArray,
    scores: tuple[FloatArray, FloatArray],
    published: tuple[FloatArray, IntArray],
    local: tuple[FloatArray, IntArray],
    last_update_ms: IntArray,
    now_ms: int,
    max_age_ms: int,
    threshold: float,
    writers: IntArray,
) -> int:
    """§4.3's rule for the slots ``reporting``: writes those that write into ``writers``; returns how many.

    ``scores`` are both reports' ``U(b)·100`` per row of ``reporting`` (published, then local: from
    :func:`weighted_scores`); ``published``/``local`` are each (rates (n, 4), bundle counts) by slot;
    ``empty[k]`` says slot ``reporting[k]`` compares with an empty report. Per slot, the NumPy form's
    operations on its row (``need_update_mask``; ``tests/test_kernels.py``): the relative changes (0 from
    0 to 0, +∞ from 0), their maximum propagating NaN as ``np.maximum`` does, and the strict
    comparisons. The NumPy form made some twenty passes over the thousand brokers, 0.26 ms a tick.
    """
    last_scores, now_scores = scores
    pub_agg, pub_bundles = published
    loc_agg, loc_bundles = local
    n = 0
    for k in range(reporting.size):
        s = reporting[k]
        change = 0.0
        for i in range(4):  # message rate, throughput, bundle count, usage: need_update_mask's order
            if i < 2:
                old = pub_agg[s, 2 * i] + pub_agg[s, 2 * i + 1]
                new = loc_agg[s, 2 * i] + loc_agg[s, 2 * i + 1]
            elif i == 2:
                old, new = np.float64(pub_bundles[s]), np.float64(loc_bundles[s])
            else:  # U(b) as a fraction, the NumPy form's ``/ 100.0``
                old, new = last_scores[k] / 100.0, now_scores[k] / 100.0
            old = 0.0 if empty[k] else old
            if i == 3:
                pc = 100.0 * abs(old - new)
            elif old == 0:
                pc = 0.0 if new == 0 else np.inf
            else:  # percent_change's operations: Java's 100 * |(old - new) / old|
                pc = 100.0 * abs((old - new) / old)
            change = pc if i == 0 or not (change >= pc or change != change) else change
        if (now_ms - last_update_ms[s]) > max_age_ms or change > threshold:
            writers[n] = s
            n += 1
    return n


@_compiled
def weighted_scores(usage: FloatArray, limit: FloatArray, weights: FloatArray, out: FloatArray) -> None:
    """``U(b)·100`` of each row of (n, 5) ``usage``/``limit`` into ``out``: ``weighted_max_percent``'s
    operations (``shedlab.model.snapshot``; the light commands keep that NumPy form) per row.

    Float32 percentages (0 where the limit, as a double, is not above 0; a usage beyond float32's range
    is +∞, as NumPy's cast; a positive limit that is 0 as a float divides by 0), times 100 in float32, in
    float64 times the weights of cpu, direct memory and the bandwidths, their maximum Java's (a NaN term
    never wins; all NaN: -∞). The simulator scores its thousand brokers every tick: eleven NumPy passes
    and their temporaries took 0.1 ms there.
    """
    hundred = np.float32(100.0)
    for s in range(usage.shape[0]):
        best = -np.inf
        for i in range(4):  # cpu, direct memory, bandwidth in and out: heap memory is not weighed
            res = 0 if i == 0 else i + 1
            u = np.float32(usage[s, res])
            lim = np.float32(limit[s, res])
            if not limit[s, res] > 0:
                pct = np.float32(0.0)
            elif lim > 0:
                pct = u / lim
            else:  # x / 0f, written out: Numba's division by zero raises
                pct = np.float32(np.inf) if u > 0 else np.float32(-np.inf) if u < 0 else np.float32(np.nan)
            v = np.float64(pct * hundred) * weights[i]
            if v > best:
                best = v
        out[s] = best
