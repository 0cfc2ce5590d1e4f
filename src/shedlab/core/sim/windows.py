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

* a bundle the broker acquired during the window counts only the steps it owned it (its rate is
  under-reported for that window, as a topic loaded mid-period is);
* the broker's totals and host usage come from these window averages (the cost model of the
  averaged traffic, which is the average cost when the cost is linear in the traffic).

Without ``resolution`` none of this runs: a sample reads the traffic of its tick, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shedlab.core.sim.traffic import Traffic

__all__ = ["StatsWindows"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass
class StatsWindows:
    """Per-bundle traffic sums since the owner's last stats sample, and each slot's window start.

    ``sums`` (4, m): msgRateIn, msgRateOut, throughputIn, throughputOut summed over the steps of the
    current window; ``owner`` (m,): the slot the sums belong to (-1: unowned, nothing counted);
    ``window_start_ms`` (slots,): the time of each slot's last sample (or of its start).
    """

    step_ms: int
    sums: FloatArray
    owner: IntArray
    window_start_ms: IntArray

    @classmethod
    def new(cls, n_slots: int, m: int, step_ms: int) -> StatsWindows:
        return cls(
            step_ms=step_ms,
            sums=np.zeros((4, m)),
            owner=np.full(m, -1, dtype=np.int64),
            window_start_ms=np.zeros(n_slots, dtype=np.int64),
        )

    def started(self, slot: int, now: int) -> None:
        """A broker starts: its first window holds the step of its start.

        The kernel adds that step's traffic (bundles it got at once, the initial assignment) before any
        sample, so the window is counted from one step earlier: a first sample ``k`` steps after the
        start divides the ``k + 1`` steps summed by ``k + 1``, not by ``k``.
        """
        self.window_start_ms[slot] = now - self.step_ms

    def add(self, owner: IntArray, traffic: Traffic) -> None:
        """One step's traffic, counted for each bundle's current owner (a new owner starts from zero)."""
        moved = np.flatnonzero(owner != self.owner)
        if moved.size:
            self.sums[:, moved] = 0.0
            self.owner[moved] = owner[moved]
        sums = self.sums
        sums[0] += traffic.rate_in
        sums[1] += traffic.rate_out
        sums[2] += traffic.tp_in
        sums[3] += traffic.tp_out
        unowned = np.flatnonzero(owner < 0)
        if unowned.size:
            sums[:, unowned] = 0.0

    def averages(self, now: int) -> Traffic:
        """Every bundle's average over its owner's window ending at ``now`` (what a sample would read)."""
        bins = np.maximum(self.owner, 0)
        steps = np.maximum((now - self.window_start_ms[bins]) // self.step_ms, 1).astype(np.float64)
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
