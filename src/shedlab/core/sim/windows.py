"""Stats windows: what a broker's stats sample reads when the kernel steps finer than its stats interval.

Pulsar's bundle stats are rates over the broker's last stats period: every
``statsUpdateFrequencyInSecs`` (60 s) ``BrokerService.updateRates`` divides the messages and bytes each
topic counted since the previous update by the time elapsed (spec §1.2, §4.1), and the host usage the
report carries is likewise measured over its check interval (``loadBalancerHostUsageCheckIntervalMinutes``,
1 min). A burst shorter than the period — consumers draining a backlog for 20 s after resuming — is
therefore seen *averaged* over the period that contains it, and which period that is depends on the
broker's timer, not on the burst.

With ``simulation.resolution`` set the kernel steps through each tick at that resolution and keeps,
per bundle, the sum of its traffic over the steps since its owner's last sample
(:class:`StatsWindows`). A sample then reports each bundle's sum divided by the number of steps in the
broker's window, as Pulsar's rate divides by the elapsed period:

* a bundle the broker acquired during the window reports its traffic over the steps it owned it: its
  producers and consumers connected to the broker then, and each of their ``Rate`` objects divides by
  the time since its construction (``Rate.calculateRate()``, ``lastCalculatedTime`` starts at ``new``),
  so a topic loaded mid-period reports its rate since it was loaded, neither diluted over the whole
  period nor including what its previous owner carried;
* the broker's totals come from these window averages; its host usage comes from a timer of its own
  (:class:`HostUsageWindows`: the average of the broker's true usage since its last reading, which
  ``loadBalancerHostUsageCheckIntervalMinutes`` spaces), and a stats sample leaves it alone.

Without ``resolution`` none of this runs, and a sample reads the traffic of its tick, unless the stats
and host-usage intervals differ: then both timers run at one step a tick (the kernel's constructor).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shedlab.core.sim.traffic import Traffic

__all__ = ["RESTART_LEAD_MS", "HostUsageWindows", "StatsWindows"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass
class StatsWindows:
    """Per-bundle traffic sums since the owner's last stats sample, and each slot's window start.

    ``sums`` (4, m): msgRateIn, msgRateOut, throughputIn, throughputOut summed over the steps of the
    current window; ``owner`` (m,): the slot the sums belong to (-1: unowned, nothing counted);
    ``window_start_ms`` (slots,): the time of each slot's last sample (or of its start);
    ``counted_from_ms`` (m,): where each bundle's count with its current owner starts (one step before
    the step it was first counted for that owner).
    """

    step_ms: int
    sums: FloatArray
    owner: IntArray
    window_start_ms: IntArray
    counted_from_ms: IntArray

    @classmethod
    def new(cls, n_slots: int, m: int, step_ms: int) -> StatsWindows:
        return cls(
            step_ms=step_ms,
            sums=np.zeros((4, m)),
            owner=np.full(m, -1, dtype=np.int64),
            window_start_ms=np.zeros(n_slots, dtype=np.int64),
            counted_from_ms=np.zeros(m, dtype=np.int64),
        )

    def started(self, slot: int, now: int) -> None:
        """A broker starts: its first window holds the step of its start.

        The kernel adds that step's traffic (bundles it got at once, the initial assignment) before any
        sample, so the window is counted from one step earlier: a first sample ``k`` steps after the
        start divides the ``k + 1`` steps summed by ``k + 1``, not by ``k``.
        """
        self.window_start_ms[slot] = now - self.step_ms

    def add(self, owner: IntArray, traffic: Traffic, now: int) -> None:
        """The traffic of the step at ``now``, counted for each bundle's current owner (a new owner
        starts from zero, its count from this step)."""
        moved = np.flatnonzero(owner != self.owner)
        if moved.size:
            self.sums[:, moved] = 0.0
            self.owner[moved] = owner[moved]
            self.counted_from_ms[moved] = now - self.step_ms
        sums = self.sums
        sums[0] += traffic.rate_in
        sums[1] += traffic.rate_out
        sums[2] += traffic.tp_in
        sums[3] += traffic.tp_out
        unowned = np.flatnonzero(owner < 0)
        if unowned.size:
            sums[:, unowned] = 0.0

    def averages(self, now: int) -> Traffic:
        """Every bundle's average over its owner's window ending at ``now`` (what a sample would read),
        over the steps of that window it was owned (``Rate.calculateRate`` of connections made since)."""
        bins = np.maximum(self.owner, 0)
        start = np.maximum(self.window_start_ms[bins], self.counted_from_ms)
        steps = np.maximum((now - start) // self.step_ms, 1).astype(np.float64)
        avg = self.sums / steps
        return Traffic(avg[0], avg[1], avg[2], avg[3])

    def sampled(self, samplers: IntArray, now: int) -> None:
        """The ``samplers`` read their windows at ``now``: their bundles' sums restart from zero."""
        if not samplers.size:
            return
        self.window_start_ms[samplers] = now
        mask = np.zeros(self.window_start_ms.size + 1, dtype=np.bool_)
        mask[samplers] = True
        self.sums[:, mask[self.owner]] = 0.0  # owner -1 reads the trailing False


RESTART_LEAD_MS = 2000
"""How far a (re)started broker's host-usage timer runs ahead of its stats timer (ms).

``PulsarService.start`` creates the load manager (``LoadManager.create`` → ``initialize``, which builds
``LinuxBrokerHostUsageImpl``: one reading in its constructor, the next one interval later) and only
afterwards calls ``brokerService.start()``, whose ``startStatsUpdater`` runs every
``statsUpdateFrequencyInSecs`` after ``statsUpdateInitialDelayInSecs``. The two timers of a broker that
has just started are therefore the time between those two calls apart, the host usage first: about 2 s
(docs/published.md, Chapter 5). At a resolution coarser than that both fire at the same step.
"""


@dataclass
class HostUsageWindows:
    """Each broker's host-usage timer and the usage summed since its last reading (``resolution`` only).

    Pulsar reads a broker's CPU and NIC on a timer of its own, independent of the bundle stats
    (``LinuxBrokerHostUsageImpl.calculateBrokerHostUsage``, every
    ``loadBalancerHostUsageCheckIntervalMinutes``): the CPU is the ``/proc/stat`` (or cgroup) delta since
    the last reading and the NIC the byte counters' delta over the elapsed time, i.e. the averages over
    the window since the last reading. The report check (``writeBrokerDataOnZooKeeper`` →
    ``updateLocalBrokerData``) copies the last reading into the local report, so a step in traffic shows
    up in the report's usage at the host timer's instants and in its rates at the stats timer's, and the
    check may write after each (docs/scenarios.md "Resolution").

    ``sums`` (slots, 5): the true usage (cost model, cpu, memory, direct memory, NIC in, NIC out) summed
    over the steps since the slot's last reading, ``steps`` how many; ``anchor_ms``: an instant of the
    slot's timer (readings at ``anchor_ms + k · period_ms``); ``next_ms``: its next reading; ``offset_ms``:
    each slot's phase after the stats timer for a broker that was already running at the scenario's start.

    Simplifications: ``scheduleWithFixedDelay`` drifts by each reading's run time (milliseconds a
    minute); the timer here keeps a fixed rate at its phase. The window's average of the true usage is
    the usage the cost model gives for the window's average traffic when the cost is linear in the
    traffic (memory's cap aside) and averages the per-step background noise. Memory and direct memory
    come with the reading too, where Pulsar reads them from the JVM at every report check
    (``LoadManagerShared.getSystemResourceUsage``).
    """

    period_ms: int
    sums: FloatArray
    steps: IntArray
    anchor_ms: IntArray
    next_ms: IntArray
    offset_ms: IntArray

    @classmethod
    def new(cls, n_slots: int, period_ms: int, rng: np.random.Generator) -> HostUsageWindows:
        """No readings yet; each slot's phase drawn from ``rng`` (uniform in [0, period), in ms).

        A broker that has run for a while has its host-usage timer at a phase of its own against the
        stats timer: ``scheduleWithFixedDelay`` adds each reading's run time to every period while the
        stats updater runs at a fixed rate, so the offset both timers had at the broker's start
        (:data:`RESTART_LEAD_MS`) drifts, differently on every broker. The phase is drawn independently
        per slot, from a stream of its own (the kernel's), so the other draws are the same with or
        without it.
        """
        return cls(
            period_ms=period_ms,
            sums=np.zeros((n_slots, 5)),
            steps=np.zeros(n_slots, dtype=np.int64),
            anchor_ms=np.zeros(n_slots, dtype=np.int64),
            next_ms=np.full(n_slots, np.iinfo(np.int64).max, dtype=np.int64),
            offset_ms=rng.integers(0, period_ms, n_slots).astype(np.int64),
        )

    def started(self, slot: int, now: int, stats_phase_ms: int, *, fresh: bool) -> None:
        """A broker starts at ``now``: a reading at once (the constructor's), then on its own timer.

        ``fresh``: the broker starts during the run (a scale-out or a restart), so its host-usage timer
        runs :data:`RESTART_LEAD_MS` ahead of its stats timer. Otherwise it is one of the brokers the
        scenario starts with, which stand for brokers already running: their timer has drifted to the
        slot's random phase after the stats timer (:meth:`new`), and the reading at the start stands for
        the one they took before it.
        """
        self.sums[slot] = 0.0
        self.steps[slot] = 0
        lead = -RESTART_LEAD_MS if fresh else int(self.offset_ms[slot])
        self.anchor_ms[slot] = now + stats_phase_ms + lead
        self.next_ms[slot] = now

    def add(self, slots: IntArray, usage: FloatArray) -> None:
        """One step's true usage of the alive brokers ``slots`` (rows of ``usage`` in that order)."""
        self.sums[slots] += usage
        self.steps[slots] += 1

    def read(self, alive: IntArray, now: int) -> tuple[IntArray, FloatArray]:
        """The alive brokers whose reading is due at ``now`` and their window averages (rows in order).

        Their windows restart from zero and their timers move to the next instant after ``now``.
        """
        readers = alive[self.next_ms[alive] <= now]
        if not readers.size:
            return readers, np.zeros((0, 5))
        averages = self.sums[readers] / np.maximum(self.steps[readers], 1)[:, None]
        self.sums[readers] = 0.0
        self.steps[readers] = 0
        anchor = self.anchor_ms[readers]
        self.next_ms[readers] = anchor + self.period_ms * ((now - anchor) // self.period_ms + 1)
        return readers, averages
