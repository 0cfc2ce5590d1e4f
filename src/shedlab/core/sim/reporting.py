"""Pulsar's data path: when a broker publishes its load report, and how the leader averages bundles.

Two pieces of spec §4 live here:

* **The report rule** (§4.3, ``needBrokerDataUpdate``): a broker writes its LocalBrokerData to the
  metadata store only when the largest of the relative changes of message rate, throughput and bundle
  count, or the absolute change of the weighted usage ×100, exceeds
  ``loadBalancerReportUpdateThresholdPercentage`` (strict), or when the last write is older than
  ``loadBalancerReportUpdateMaxIntervalMinutes``. The comparison baseline is the last *written* report.
  :func:`need_broker_data_update` applies it to model objects; :func:`need_update_mask` to arrays.
* **The leader's bundle time averages** (§4.2 ``updateBundleData``, §1.3): every report write triggers an
  update in which *every* bundle listed by a published report gets one more sample, short term (10
  samples) and long term (1000). :class:`LeaderBundleData` keeps these as arrays and applies the
  samples of a whole tick in closed form (:func:`apply_samples`), in the order of the writes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from shedlab.config import LoadBalancerConfig
from shedlab.kernels import GAINED, HAS, RESET, SPECIAL, saturated_run, special_runs, tick_samples
from shedlab.model.pulsar import (
    DEFAULT_MESSAGE_RATE,
    DEFAULT_MESSAGE_THROUGHPUT,
    NUM_LONG_SAMPLES,
    NUM_SHORT_SAMPLES,
    LocalBrokerData,
)

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

# Column order of the per-bundle value blocks: (4, m) arrays.
RATE_IN, RATE_OUT, TP_IN, TP_OUT = range(4)
DEFAULT_VALUES = np.array(
    [DEFAULT_MESSAGE_RATE, DEFAULT_MESSAGE_RATE, DEFAULT_MESSAGE_THROUGHPUT, DEFAULT_MESSAGE_THROUGHPUT]
)


# --------------------------------------------------------------------------------------------- report rule


def percent_change(old: float, new: float) -> float:
    """Pulsar's ``percentChange``: 0 if both are 0, +∞ if only ``old`` is 0, else 100·|(old−new)/old|.

    Quirk (``ModularLoadManagerImpl.percentChange``): Java divides first, then takes the absolute value and
    multiplies by 100; ``100·|old−new| / old`` rounds differently, and a change of exactly the threshold
    (10 %) came out 10.000000000000002 where Java has 10.0, or the other way: a report written, or not,
    where Pulsar's broker does the opposite."""
    if old == 0:
        return 0.0 if new == 0 else float("inf")
    return 100 * abs((old - new) / old)


def percent_change_array(old: FloatArray, new: FloatArray) -> FloatArray:
    """Vectorised :func:`percent_change` (the same operations, in the same order)."""
    out = np.zeros(np.broadcast(old, new).shape)
    zero = old == 0
    np.divide(old - new, old, out=out, where=~zero)
    out = 100 * np.abs(out)
    out[zero & (new != 0)] = np.inf
    return out


def need_broker_data_update(
    last: LocalBrokerData, current: LocalBrokerData, conf: LoadBalancerConfig, now_ms: int
) -> bool:
    """§4.3: should a broker whose last written report is ``last`` write ``current`` at ``now_ms``?"""
    max_age_ms = conf.load_balancer_report_update_max_interval_minutes * 60_000
    if now_ms - current.lastUpdate > max_age_ms:
        return True
    weights = conf.resource_weights()
    # Java's Math.max chain (needBrokerDataUpdate) is NaN when one change is (∞ − ∞ usages), as NumPy's
    # maximum and need_update_mask are; Python's max() kept or dropped a NaN by its position.
    change = np.maximum.reduce(
        [
            percent_change(last.msgRateIn + last.msgRateOut, current.msgRateIn + current.msgRateOut),
            percent_change(
                last.msgThroughputIn + last.msgThroughputOut,
                current.msgThroughputIn + current.msgThroughputOut,
            ),
            percent_change(float(last.numBundles), float(current.numBundles)),
            100.0
            * abs(
                last.max_resource_usage_with_weight(*weights)
                - current.max_resource_usage_with_weight(*weights)
            ),
        ]
    )
    return bool(change > conf.load_balancer_report_update_threshold_percentage)


def need_update_mask(
    *,
    last_rate: FloatArray,
    last_tp: FloatArray,
    last_bundles: FloatArray,
    last_usage: FloatArray,
    rate: FloatArray,
    tp: FloatArray,
    bundles: FloatArray,
    usage: FloatArray,
    last_update_ms: IntArray,
    now_ms: int,
    conf: LoadBalancerConfig,
) -> BoolArray:
    """Vectorised §4.3 over brokers; ``usage`` arrays are U(b) (weighted max usage, 0–1 scale)."""
    max_age_ms = conf.load_balancer_report_update_max_interval_minutes * 60_000
    change = np.maximum.reduce(
        [
            percent_change_array(last_rate, rate),
            percent_change_array(last_tp, tp),
            percent_change_array(last_bundles, bundles),
            100.0 * np.abs(last_usage - usage),
        ]
    )
    stale = (now_ms - last_update_ms) > max_age_ms
    result: BoolArray = stale | (change > conf.load_balancer_report_update_threshold_percentage)
    return result


# ------------------------------------------------------------------------------------------- time averages


def _decay(max_samples: int, c2: IntArray) -> FloatArray:
    """``(1 − 1/max)^c2`` by table lookup: the same float64 power NumPy computes per element.

    The table is ``base ** arange(k)``, one ``np.power`` call, so ``table[c2]`` is bit for bit what
    ``base ** c2`` gives (``tests/core/sim/test_sim_reporting_fast.py`` checks it); a lookup costs a tenth
    of the power function over 100,000 bundles.
    """
    top = int(c2.max()) if c2.size else 0
    table = _DECAY_TABLES.get(max_samples)
    if table is None or table.size <= top:
        exponents = np.arange(max(top + 1, 1024), dtype=np.int64).astype(np.float64)
        powers: FloatArray = np.power(1.0 - 1.0 / max_samples, exponents)
        _DECAY_TABLES[max_samples] = table = powers
    result: FloatArray = table[c2]
    return result


_DECAY_TABLES: dict[int, FloatArray] = {}


def apply_samples(
    n: IntArray, values: FloatArray, sample: FloatArray, count: IntArray, max_samples: int
) -> tuple[IntArray, FloatArray]:
    """``count`` identical samples added to TimeAverageMessageData arrays, in closed form.

    Pulsar's update is ``n = min(n + 1, max)``, ``v = ((n − 1)·v + x)/n`` per sample: the arithmetic
    mean while ``n < max``, then an EMA with α = 1/max. ``count`` repetitions of the same ``x`` are
    the mean over the first ``c1 = min(count, max − n)`` samples, ``v1 = v + (x − v)·c1/(n + c1)``,
    followed by ``v2 = x + (v1 − x)·(1 − 1/max)^rest``. ``values`` and ``sample`` are (4, m); ``n`` and
    ``count`` are (m,). Returns new arrays.

    Speed without changing a bit: the mean step runs only on the bundles with ``c1 > 0`` (elsewhere
    ``v1 = v + (x − v)·0 = v`` exactly, for finite values), the decay multiplies only where
    ``rest > 0`` (a factor 1.0 is exact), and the decay factors come from a table. The last step still
    runs over every bundle: ``x + (v − x)`` is not always ``v`` in floating point, and the outputs are
    pinned to that arithmetic.
    """
    count = np.maximum(count, 0)
    c1 = np.minimum(count, np.maximum(max_samples - n, 0))
    n1 = n + c1
    c2 = count - c1
    sample = np.broadcast_to(sample, values.shape)
    growing = int(np.count_nonzero(c1))
    if growing * 2 > c1.size:  # most bundles average: dense passes over contiguous arrays
        weight = np.zeros(n.shape)
        np.divide(c1, n1, out=weight, where=n1 > 0)
        out = np.subtract(sample, values)
        out *= weight
        out += values
        out -= sample
    else:
        out = np.subtract(values, sample)
        if growing:
            grow = np.flatnonzero(c1)
            v_g, x_g = values[:, grow], sample[:, grow]
            out[:, grow] = (v_g + (x_g - v_g) * (c1[grow] / n1[grow])) - x_g
    decaying = int(np.count_nonzero(c2))
    if decaying * 16 > c2.size:  # one dense multiply (factor 1.0 elsewhere) beats a gather and scatter
        out *= _decay(max_samples, c2)
    elif decaying:
        decayed = np.flatnonzero(c2)
        out[:, decayed] *= _decay(max_samples, c2[decayed])
    out += sample
    return n1, out


def _decay_table(max_samples: int, top: int) -> FloatArray:
    """The table of :func:`_decay` with at least ``top + 1`` entries (``table[c]`` = ``(1 − 1/max)^c``)."""
    table = _DECAY_TABLES.get(max_samples)
    if table is None or table.size <= top:
        _decay(max_samples, np.array([top], dtype=np.int64))
        table = _DECAY_TABLES[max_samples]
    return table


@dataclass
class LeaderBundleData:
    """The leader's ``loadData.bundleData`` as arrays over every bundle of the scenario.

    ``has`` marks bundles that currently have BundleData (a bundle no published report lists is
    dropped, as Pulsar does, and comes back with default data when a report lists it again).
    ``short`` is a (4, m) block in the order msgRateIn, msgRateOut, throughputIn, throughputOut;
    ``long`` is (2, m), the long-term msgRateIn and msgRateOut only: nothing reads the long-term
    throughputs (the leader's snapshot has no column for them, spec §3.1 reads the rates), and
    advancing them was a quarter of the leader's arithmetic per tick. A caller that must publish the
    whole BundleData (the sandbox's ``/loadbalance/bundle-data`` znodes) calls
    :meth:`track_long_throughputs` before the first update, and ``long`` becomes (4, m).
    """

    has: BoolArray
    short_n: IntArray
    long_n: IntArray
    short: FloatArray
    long: FloatArray
    topics: IntArray
    updates: int = 0  # number of updateBundleData runs so far
    _spare: list[FloatArray] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def empty(cls, m: int) -> LeaderBundleData:
        return cls(
            has=np.zeros(m, dtype=np.bool_),
            short_n=np.zeros(m, dtype=np.int64),
            long_n=np.zeros(m, dtype=np.int64),
            short=np.repeat(DEFAULT_VALUES[:, None], m, axis=1),
            long=np.repeat(DEFAULT_VALUES[:2, None], m, axis=1),
            topics=np.zeros(m, dtype=np.int64),
        )

    def track_long_throughputs(self) -> None:
        """Keep the long-term throughputs too (``long`` (4, m)); only before the first update, since a
        history that was not kept cannot be made up."""
        if self.updates:
            raise RuntimeError("long-term throughputs must be tracked from the start")
        self.long = np.repeat(DEFAULT_VALUES[:, None], self.long.shape[1], axis=1)

    def apply_writes(
        self,
        *,
        listed_by: IntArray,
        values: FloatArray,
        topics: IntArray,
        new_listed_by: IntArray,
        new_values: FloatArray,
        new_topics: IntArray,
        write_position: IntArray,
        writes: int,
        extra_updates: int = 0,
        republish: bool = False,
    ) -> IntArray:
        """One tick of ``updateBundleData`` runs; returns the bundles' listing broker after the tick.

        ``listed_by[j]`` is the broker slot whose published report lists bundle j before the tick (-1:
        none) and ``values`` (4, m) / ``topics`` what that report says. ``new_listed_by``/``new_values``/
        ``new_topics`` are the *local* reports of the brokers (what a broker would write). During the
        tick ``writes`` brokers write, broker slot s at position ``write_position[s]`` (1-based; 0 for
        brokers that do not write); each write is followed by an update in which every listed bundle
        gets one sample. ``extra_updates`` updates without a write follow (the leader's periodic
        bundle-data write, §4.9). A broker's write replaces its listing: bundles it no longer lists
        lose their BundleData unless another write lists them, and re-listed bundles start again from
        Pulsar's defaults.

        With ``republish``, ``values`` and ``topics`` are updated in place to what the published
        reports say after the tick: the bundles listed by a write take ``new_values`` and ``new_topics``
        (the caller's published copies; the values in the same pass over memory as the averages).

        Simplification: a bundle listed by two published reports at once (the stale report of its
        previous owner and its new owner's) counts once, under the most recent write; Pulsar would
        sample it twice per update.

        The arithmetic is two runs of :func:`apply_samples`' closed form (the samples of the old
        listing, then, after the resets, those of the new one), and its bits are pinned. It is
        evaluated in two parts that give the same bits: the bundles whose sample counts are saturated
        before the tick and that are not reset (nearly all of them once the leader has run a few
        minutes) take the saturated form of both runs, ``(((v − x_old)·d_old + x_old) − x_new)·d_new +
        x_new``, in one compiled loop per average (:func:`_saturated_steps`); the few others, by index,
        the whole form (:func:`_special_steps`).
        """
        total = writes + extra_updates
        if total == 0:
            return listed_by
        sn, sv, ln, lv = self.short_n, self.short, self.long_n, self.long
        topics_after = np.empty_like(self.topics)
        topic_io = (self.topics, new_topics, topics_after, topics if republish else topics[:0])
        plan = _TickSamples.of(listed_by, self.has, new_listed_by, write_position, total, sn, ln, topic_io)
        # not the current arrays (snapshots hold them); the counts change in place (nothing holds them)
        out_s, out_l = _recycle(self._spare, 0, sv), _recycle(self._spare, 1, lv)
        self._spare = [sv, lv]
        x_special = values[:, plan.special]  # before ``values`` is republished below
        tables = _decay_table(NUM_SHORT_SAMPLES, total), _decay_table(NUM_LONG_SAMPLES, total)
        blocks = [(sn, sv, out_s, NUM_SHORT_SAMPLES, tables[0]), (ln, lv, out_l, NUM_LONG_SAMPLES, tables[1])]
        _saturated_steps(blocks, values, new_values, plan, plan.gained if republish else None)
        if plan.special.size:
            _special_steps(plan, blocks, x_special, new_values)
        self.has = plan.has_after
        self.topics = topics_after
        self.short, self.long = out_s, out_l
        self.updates += total
        return plan.listed_after


@dataclass
class _TickSamples:
    """How many samples each bundle takes in one tick of :meth:`LeaderBundleData.apply_writes`.

    ``old_count``: samples of the old listing's values, up to the first write that changes the listing
    (all ``total`` updates if none does), 0 for a bundle without data; ``new_count``: samples of the new
    listing's, from its lister's write on; ``gained``: a write lists the bundle; ``reset_mask``: bundles
    that start again from Pulsar's defaults; ``has_after``: bundles with data after the tick (listed
    with data before it and not dropped by their old lister's write before a new write lists them, or
    listed by a write); ``special``: the bundles the saturated closed form does not cover (a count
    below its maximum, or reset); ``listed_after``: each bundle's listing broker after the tick (-1: its
    lister dropped it and no write lists it). All from one compiled pass
    (:func:`~shedlab.kernels.tick_samples`).
    """

    total: int
    old_count: IntArray
    new_count: IntArray
    gained: BoolArray
    reset_mask: BoolArray
    has_after: BoolArray
    special: IntArray
    listed_after: IntArray
    run_old: bool
    run_new: bool

    @classmethod
    def of(
        cls,
        listed_by: IntArray,
        has: BoolArray,
        new_listed_by: IntArray,
        write_position: IntArray,
        total: int,
        short_n: IntArray,
        long_n: IntArray,
        topics: tuple[IntArray, IntArray, IntArray, IntArray],
    ) -> _TickSamples:
        """The plan of one tick. On the way :func:`~shedlab.kernels.tick_samples` zeroes, in place, the
        counts ``short_n``/``long_n`` of the bundles left without data (but the special ones', which
        the caller writes) and updates ``topics`` (leader's, local reports', leader's after, published).
        """
        before, new_topics, after_topics, published = topics
        m = listed_by.size
        counts = np.empty((2, m), dtype=np.int64)
        masks = np.empty((4, m), dtype=np.bool_)
        after = np.empty(m, dtype=np.int64)
        run_old, run_new = tick_samples(
            listed_by,
            has,
            new_listed_by,
            write_position,
            total,
            short_n,
            long_n,
            NUM_SHORT_SAMPLES,
            NUM_LONG_SAMPLES,
            before,
            new_topics,
            counts,
            masks,
            after,
            after_topics,
            published,
        )
        special = np.flatnonzero(masks[SPECIAL])
        return cls(
            total,
            counts[0],
            counts[1],
            masks[GAINED],
            masks[RESET],
            masks[HAS],
            special,
            after,
            run_old,
            run_new,
        )


def _recycle(spare: list[FloatArray], k: int, like: FloatArray) -> FloatArray:
    """``spare[k]`` to write the next averages into, if no one else holds it; else a new array.

    The arrays an update replaces are snapshots' columns while those snapshots live, so an update
    never writes into the arrays it replaces. Two updates later they are usually free: the reference
    count (the list, the local name, the call's argument; a view of the array holds one more) says
    so, and writing into memory the process already has saves the page faults of a new 3 MB block.
    The values written do not depend on which array receives them.
    """
    if len(spare) > k:
        arr = spare[k]
        if arr.shape == like.shape and sys.getrefcount(arr) <= 3:
            return arr
    return np.empty_like(like)


_Block = tuple[IntArray, FloatArray, FloatArray, int, FloatArray]
"""One average of :meth:`LeaderBundleData.apply_writes`: sample counts (updated in place), values (R, m),
the array the new values go to, the maximum count and the decay table; its R rows read the first R rows
of the samples."""


def _saturated_steps(
    blocks: list[_Block],
    x_old: FloatArray,
    x_new: FloatArray,
    plan: _TickSamples,
    republish: BoolArray | None,
) -> None:
    """Both runs for bundles whose counts stay at the maximum (the closed form without its mean step).

    ``plan.old_count``/``plan.new_count`` are the samples of the old and the new listing's runs (a run
    is skipped where ``plan.run_old``/``run_new`` say nobody samples in it, as the whole form skips
    it). Saturated, a run of ``c`` samples of ``x`` is ``(v − x)·table[c] + x`` (no mean step; a
    factor ``table[0] = 1.0`` where ``c = 0``): exactly the operations the whole form performs on such
    a bundle (``v − x``, the decay, ``+ x``), here in one compiled loop per average
    (:func:`~shedlab.kernels.saturated_run`).

    With ``republish``, ``x_old`` then becomes what the published reports say after the tick: the
    columns of ``republish`` take ``x_new``. The block that reads every row of ``x_old`` runs last and
    copies each row once it has read it, so every block reads the old values.
    """
    ordered = sorted(blocks, key=lambda block: block[1].shape[0])  # stable: a full block (R = 4) last
    mask = _NO_COLUMNS if republish is None else republish
    in_kernel = bool(ordered) and ordered[-1][1].shape[0] == x_old.shape[0]
    for k, (_, values, out, _, table) in enumerate(ordered):
        rows = values.shape[0]
        saturated_run(
            out,
            values,
            table,
            x_old[:rows],
            plan.old_count,
            plan.run_old,
            x_new[:rows],
            plan.new_count,
            plan.run_new,
            mask if in_kernel and k == len(ordered) - 1 else _NO_COLUMNS,
        )
    if mask.size and not in_kernel:  # no block reads every row (not the simulator's blocks)
        np.copyto(x_old, x_new, where=mask)


_NO_COLUMNS = np.zeros(0, dtype=np.bool_)  # saturated_run: republish nothing


def _special_steps(
    plan: _TickSamples, blocks: list[_Block], x_special: FloatArray, x_new: FloatArray
) -> None:
    """Both runs for ``plan.special``, the bundles still averaging or reset, over the saturated form.

    The samples are ``x_special`` (the old listing's values of the special bundles, gathered before the
    republish) and ``x_new``. The mean step, the reset to Pulsar's defaults
    and the counts of a few hundred bundles, in one compiled loop per average
    (:func:`~shedlab.kernels.special_runs`) where NumPy took some thirty small calls.
    """
    for counts, values, out, max_samples, table in blocks:
        rows = values.shape[0]
        special_runs(
            plan.special,
            counts,
            values,
            x_special[:rows],
            plan.old_count,
            plan.run_old,
            x_new[:rows],
            plan.new_count,
            plan.run_new,
            plan.reset_mask,
            plan.has_after,
            max_samples,
            table,
            DEFAULT_VALUES[:rows],
            counts,
            out,
        )
