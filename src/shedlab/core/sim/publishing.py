"""Pulsar's report publishing in the simulator: stats samples, report writes, the leader's view.

Every broker keeps a *local* LocalBrokerData, refreshed at each stats sample
(``statsUpdateFrequencyInSecs``, with an optional per-broker phase), and writes it to the metadata
store only when the report rule of spec §4.3 says so (:func:`~shedlab.core.sim.reporting.need_update_mask`).
Each write runs the leader's ``updateBundleData`` (spec §4.2), in write order, which moves the bundles'
time averages (:class:`~shedlab.core.sim.reporting.LeaderBundleData`); the leader's periodic bundle-data
write (``loadBalancerResourceQuotaUpdateIntervalMinutes``, spec §4.9) adds one update without a write.
The leader decides on a :class:`~shedlab.model.snapshot.ClusterSnapshot` of the *published* reports and
its bundle data: :meth:`Publishing.snapshot` builds it, once per change.

The pure rules (report rule, time averages in closed form) live in :mod:`shedlab.core.sim.reporting`,
which the replay core shares; this module holds the simulator's state around them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from shedlab.config import LoadBalancerConfig
from shedlab.core.sim.reporting import LeaderBundleData
from shedlab.core.sim.state import NEVER, Reports, TrueUsage, broker_scores
from shedlab.core.sim.traffic import Traffic
from shedlab.kernels import group_order, report_rule
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.shed_kernels import lister_rows, regroup

__all__ = ["LeaderView", "Publishing"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

_NO_ROWS = np.zeros(0, dtype=np.int64)  # lister_rows without an earlier snapshot: every row is new
_REGROUP_SHARE = 8  # regroup the moved bundles while they are at most 1/8 of all; beyond, sort afresh


@dataclass
class LeaderView:
    """The leader's snapshot, cached until the next write, and the slot → snapshot-row map.

    ``cached`` is None after a write (the next :meth:`snapshot` builds a new object); ``slot_to_row``
    maps a broker slot to its row in the last built snapshot (-1: not in it).
    """

    ids: list[str]
    bundle_names: tuple[str, ...]
    cached: ClusterSnapshot | None = None
    slot_to_row: IntArray = field(init=False)
    rows_key: bytes = b""
    row_ids: tuple[str, ...] = ()
    last: ClusterSnapshot | None = None
    moved: IntArray = field(default_factory=lambda: _NO_ROWS)  # lister_rows' buffer of moved bundles

    def __post_init__(self) -> None:
        self.slot_to_row = np.full(len(self.ids) + 1, -1, dtype=np.int64)

    def snapshot(
        self,
        now: int,
        alive: BoolArray,
        has_report: BoolArray,
        published: Reports,
        leader_data: LeaderBundleData,
    ) -> ClusterSnapshot:
        """Published reports of the alive brokers and the leader's bundle time averages."""
        snap = self.cached
        if snap is not None:
            snap.now_ms = now
            return snap
        n_slots = has_report.size
        slots = np.flatnonzero(alive & has_report).astype(np.int64)
        key = slots.tobytes()
        if key != self.rows_key:
            self.rows_key = key
            self.row_ids = tuple(self.ids[s] for s in slots.tolist())
            self.slot_to_row = np.full(n_slots + 1, -1, dtype=np.int64)
            self.slot_to_row[slots] = np.arange(slots.size)
        ld = leader_data
        # each bundle's row (its lister's; -1: none), each lister's sum of its bundles' long-term rates
        # (bundles with data only) and the bundles whose row moved since the last build: one compiled pass
        owner_idx = np.empty(ld.has.size, dtype=np.int64)
        long_sums = np.zeros((n_slots + 1, 2))
        last = self.last
        last_rows = last.bundle_owner if last is not None else _NO_ROWS
        if self.moved.size != owner_idx.size:
            self.moved = np.empty(owner_idx.size, dtype=np.int64)
        n_moved = lister_rows(
            published.bundle_owner,
            self.slot_to_row,
            ld.long[0],
            ld.long[1],
            ld.has,
            last_rows,
            owner_idx,
            long_sums,
            self.moved,
        )
        snap = ClusterSnapshot.from_columns(
            broker_ids=self.row_ids,
            resource_usage=published.usage[slots],
            resource_limit=published.limit[slots],
            broker_rates=published.agg[slots],
            num_owned_bundles=published.bundles[slots],
            num_topics=published.topics[slots],
            long_term_msg_rate_in=long_sums[slots, 0],
            long_term_msg_rate_out=long_sums[slots, 1],
            bundle_names=self.bundle_names,
            bundle_owner=owner_idx,
            bundle_has_data=ld.has,
            bundle_sheddable=ld.has,
            short=ld.short,
            long=ld.long,
            bundle_topics=ld.topics,
            now_ms=now,
            like=self.last,  # the indexes of the last build hold while rows and owners do
            owner_index=self._owner_index(owner_idx, slots.size, n_moved),
        )
        self.cached = self.last = snap
        return snap

    def _owner_index(self, owner_idx: IntArray, n_rows: int, n_moved: int) -> tuple[IntArray, IntArray]:
        """The by-owner index of ``owner_idx`` (row of each bundle's lister, -1: none), which differs from
        the last snapshot's rows at ``self.moved[:n_moved]``: the last snapshot's index while nothing moved
        (some ticks), that index with the moved bundles regrouped while few did (most ticks: a dozen of
        100,000), else a compiled counting sort. All three equal the arrays of the snapshot's own NumPy
        sort (``tests/test_kernels.py``, ``tests/test_shed_kernels.py``)."""
        last = self.last
        same_rows = last is not None and last.num_brokers == n_rows and last.num_bundles == owner_idx.size
        if last is not None and same_rows and n_moved == 0:
            return last.by_owner_index
        order = np.empty(owner_idx.size, dtype=np.int64)
        offsets = np.empty(n_rows + 2, dtype=np.int64)
        if last is not None and same_rows and n_moved <= owner_idx.size // _REGROUP_SHARE:
            last_order, last_offsets = last.by_owner_index
            regroup(
                owner_idx, last.bundle_owner, self.moved, n_moved, last_order, last_offsets, order, offsets
            )
        else:
            group_order(owner_idx + 1, n_rows + 1, order, offsets)
        return order, offsets


@dataclass
class Publishing:
    """Local and published reports of every broker slot, the write schedule and the leader's bundle data.

    ``has_report``: the slot has a published report the leader reads (an alive broker after its first
    write). ``baseline_empty``: the slot has not written through §4.3's check since it started, so the
    rule compares its local report with an empty one (Pulsar's ``lastData``, see :meth:`writers`).
    ``last_update_ms``: time of the slot's last write. ``next_sample_ms``: its next stats sample
    (``NEVER`` while down). ``resume_ms``: where a broker the scenario starts with takes its second
    sample, at its stats phase (``NEVER`` once taken, or with phase 0). ``write_rank``: the order in
    which brokers that write at the same tick reach the metadata store. ``written``: the slots that
    wrote during the current tick.
    """

    conf: LoadBalancerConfig
    weights: tuple[float, float, float, float]
    stats_ms: int
    quota_ms: int
    local: Reports
    published: Reports
    has_report: BoolArray
    baseline_empty: BoolArray
    last_update_ms: IntArray
    next_sample_ms: IntArray
    resume_ms: IntArray
    write_rank: IntArray
    stats_phase_ms: IntArray
    leader_data: LeaderBundleData
    next_quota_ms: int
    written: BoolArray
    view: LeaderView
    quota_writes: int = 0  # the leader's periodic bundle-data writes so far (§4.9)

    @classmethod
    def new(
        cls,
        conf: LoadBalancerConfig,
        ids: list[str],
        bundle_names: tuple[str, ...],
        *,
        start_ms: int,
        tick_ms: int,
        random_phase: bool,
        rng: np.random.Generator,
    ) -> Publishing:
        """No reports yet; write order and (with ``random_phase``) stats phases drawn from ``rng``."""
        n_slots, m = len(ids), len(bundle_names)
        stats_ms = max(int(conf.stats_update_frequency_in_secs) * 1000, 1)
        quota_ms = max(int(conf.load_balancer_resource_quota_update_interval_minutes) * 60_000, 1)
        write_rank = rng.permutation(n_slots).astype(np.int64)
        phase = (
            rng.integers(0, max(stats_ms // tick_ms, 1), n_slots).astype(np.int64) * tick_ms
            if random_phase
            else np.zeros(n_slots, dtype=np.int64)
        )
        return cls(
            conf=conf,
            weights=conf.resource_weights(),
            stats_ms=stats_ms,
            quota_ms=quota_ms,
            local=Reports.empty(n_slots, m),
            published=Reports.empty(n_slots, m),
            has_report=np.zeros(n_slots, dtype=np.bool_),
            baseline_empty=np.zeros(n_slots, dtype=np.bool_),
            last_update_ms=np.zeros(n_slots, dtype=np.int64),
            next_sample_ms=np.full(n_slots, NEVER, dtype=np.int64),
            resume_ms=np.full(n_slots, NEVER, dtype=np.int64),
            write_rank=write_rank,
            stats_phase_ms=phase,
            leader_data=LeaderBundleData.empty(m),
            next_quota_ms=start_ms + quota_ms,
            written=np.zeros(n_slots, dtype=np.bool_),
            view=LeaderView(ids, bundle_names),
        )

    def begin_tick(self) -> None:
        self.written[:] = False

    # ---------------------------------------------------------------------------------- membership
    def broker_left(self, slot: int) -> None:
        """The broker's ephemeral node is gone: the leader drops its report; its local one lists nothing."""
        self.has_report[slot] = False
        self.next_sample_ms[slot] = NEVER
        self.resume_ms[slot] = NEVER
        loc = self.local
        loc.bundle_owner[loc.bundle_owner == slot] = -1

    def broker_joined(
        self, slot: int, now: int, usage: FloatArray, limit: FloatArray, *, fresh: bool = False
    ) -> None:
        """A starting broker's first local report: no bundles, its idle host usage; stats at once.

        The report goes to the metadata store as the broker's lock node (``publish(..., lock=True)``);
        the baseline of its report rule stays empty until its first write by the rule (:meth:`writers`).
        A broker the scenario starts with stands for one already running, its stats timer at a random
        phase: its sample at the start stands for the last one it took before the run (a running
        broker's report lists its bundles; until 29 Nov 2026 the leader read an empty report from it
        until its phase, up to an interval: a broker with no bundles at 2 % idle usage), and its timer
        then resumes at its phase. A ``fresh`` one (started during the run: a scale-out or a restart)
        samples at once and then every ``statsUpdateFrequencyInSecs`` from its start, as
        ``BrokerService.startStatsUpdater`` does (``updateRates()`` at start, then the timer from
        ``statsUpdateInitialDelayInSecs``, 60 s, which shedlab takes equal to the interval): its phase
        becomes 0. With one-minute stats and ticks every phase is 0 anyway; with a finer
        ``simulation.resolution`` a fresh broker's first sample with bundles came up to an interval
        early.
        """
        if fresh:
            self.stats_phase_ms[slot] = 0
        self.baseline_empty[slot] = True
        loc = self.local
        loc.agg[slot] = 0.0
        loc.bundles[slot] = loc.topics[slot] = loc.consumers[slot] = loc.producers[slot] = 0
        loc.usage[slot] = usage
        loc.limit[slot] = limit
        # every broker samples at its start: a fresh one as startStatsUpdater does, one the scenario
        # starts with for the sample a running broker took before the run (else the leader would read
        # an empty report from it until its phase: a broker with no bundles); its timer then resumes
        # at its phase
        phase = int(self.stats_phase_ms[slot])
        self.next_sample_ms[slot] = now
        self.resume_ms[slot] = now + phase if phase else NEVER

    # ------------------------------------------------------------------------------ stats and writes
    def sample(
        self,
        now: int,
        true: TrueUsage,
        owner: IntArray,
        traffic: Traffic,
        topics: IntArray,
        *,
        host_usage: bool = True,
    ) -> IntArray:
        """Brokers whose stats are due copy their true usage into their local report; returns them.

        ``host_usage=False`` (``simulation.resolution``): the host usage has a timer of its own
        (:class:`~shedlab.core.sim.windows.HostUsageWindows`), so the sample leaves the report's usage
        and limits as the last host-usage reading set them and refreshes the rates and counts only.
        """
        alive = true.slots
        due = self.next_sample_ms[alive] <= now
        samplers = alive[due]
        if not samplers.size:
            return samplers
        loc = self.local
        if host_usage:
            loc.usage[samplers] = true.usage[due]
            loc.limit[samplers] = true.limit[due]
        loc.agg[samplers] = true.slot_agg[samplers]
        loc.bundles[samplers] = true.slot_bundles[samplers]
        loc.topics[samplers] = true.slot_topics[samplers]
        loc.consumers[samplers] = true.slot_consumers[samplers]
        loc.producers[samplers] = true.slot_producers[samplers]
        values = traffic.block  # a new array every tick, never written into: the report may hold it
        if values is None:
            values = np.stack((traffic.rate_in, traffic.rate_out, traffic.tp_in, traffic.tp_out))
        # the local report's values and topics are never written into (new arrays when some brokers
        # sample), so it holds the population's topic counts themselves, not a copy; the owners change
        if samplers.size == alive.size:
            loc.bundle_owner = owner.copy()
            loc.bundle_values = values
            loc.bundle_topics = topics
        else:
            n_slots = self.has_report.size
            sampling = np.zeros(n_slots + 1, dtype=np.bool_)
            sampling[samplers] = True
            stale = sampling[np.where(loc.bundle_owner >= 0, loc.bundle_owner, n_slots)]
            loc.bundle_owner[stale] = -1
            fresh = sampling[true.bundle_bin]
            loc.bundle_owner[fresh] = owner[fresh]
            # a new array (a masked copyto over (4, m) costs several times more), same values
            loc.bundle_values = np.where(fresh, values, loc.bundle_values)
            loc.bundle_topics = np.where(fresh, topics, loc.bundle_topics)
        step = self.stats_ms
        behind = (now - self.next_sample_ms[samplers]) // step + 1
        self.next_sample_ms[samplers] += behind * step
        resume = self.resume_ms[samplers]
        resuming = resume != NEVER
        if resuming.any():  # the start's sample taken: the timer goes on at the broker's phase
            self.next_sample_ms[samplers[resuming]] = resume[resuming]
            self.resume_ms[samplers[resuming]] = NEVER
        return samplers

    def writers(self, now: int, alive: IntArray) -> IntArray:
        """The alive brokers with a report whose local report passes §4.3's rule, in write order.

        The baseline is the last report written by the rule. A broker that has not written by the rule
        since it started compares with an empty report (rates, bundles and usage 0): Pulsar's
        ``ModularLoadManagerImpl.start()`` builds ``lastData`` empty and acquires the lock node with
        ``localData`` without updating ``lastData``, which only ``writeBrokerDataOnZooKeeper`` does. So
        an idle new broker whose usage is above the threshold writes again at its first check.
        """
        reporting = alive[self.has_report[alive]]
        if not reporting.size:
            return np.zeros(0, dtype=np.int64)
        pub, loc, conf, w = self.published, self.local, self.conf, self.weights
        scores = (
            broker_scores(pub.usage[reporting], pub.limit[reporting], w),
            broker_scores(loc.usage[reporting], loc.limit[reporting], w),
        )
        # need_update_mask over the reporting brokers' rows, compiled (the same operations per row)
        writers = np.empty(reporting.size, dtype=np.int64)
        k = report_rule(
            reporting,
            self.baseline_empty[reporting],
            scores,
            (pub.agg, pub.bundles),
            (loc.agg, loc.bundles),
            self.last_update_ms,
            now,
            conf.load_balancer_report_update_max_interval_minutes * 60_000,
            float(conf.load_balancer_report_update_threshold_percentage),
            writers,
        )
        writers = writers[:k]
        result: IntArray = writers[np.argsort(self.write_rank[writers], kind="stable")]
        return result

    def leader_elected(self, now: int | None) -> None:
        """A leader was elected at ``now`` (None: no broker is left to lead): its bundle-data write timer.

        Pulsar schedules ``LoadResourceQuotaUpdaterTask`` when a broker becomes leader (at a fixed rate of
        ``loadBalancerResourceQuotaUpdateIntervalMinutes``, the first run one interval after the election)
        and cancels it when the broker loses the leadership (``PulsarService``'s leader-election listener,
        spec §4.1), so the writes follow the leader's election, not the cluster's start.
        """
        self.next_quota_ms = NEVER if now is None else now + self.quota_ms

    def quota_updates_due(self, now: int) -> int:
        """1 when the leader's periodic bundle-data write (§4.9) is due at ``now`` (then reschedules it)."""
        if now < self.next_quota_ms:
            return 0
        self.next_quota_ms += self.quota_ms * ((now - self.next_quota_ms) // self.quota_ms + 1)
        self.quota_writes += 1
        return 1

    def publish(
        self, now: int, writers: IntArray, extra: int, alive: BoolArray, *, lock: bool = False
    ) -> None:
        """Writes by ``writers`` (in order), each followed by the leader's updateAll; then ``extra`` more.

        With ``lock`` the writes are the brokers' lock nodes at their start (and the deletions of the
        nodes of brokers gone), not writes by §4.3's rule: the rule's baselines stay as they are.
        """
        n_slots = self.has_report.size
        pub, loc = self.published, self.local
        k = int(writers.size)
        position = np.zeros(n_slots + 1, dtype=np.int64)
        position[writers] = np.arange(1, k + 1)
        new_owner = self.leader_data.apply_writes(
            listed_by=pub.bundle_owner,
            values=pub.bundle_values,
            topics=pub.bundle_topics,
            new_listed_by=loc.bundle_owner,
            new_values=loc.bundle_values,
            new_topics=loc.bundle_topics,
            write_position=position,
            writes=k,
            extra_updates=extra,
            republish=True,  # pub.bundle_values/topics: the writers' bundles take their local ones
        )
        if k:
            live = writers[alive[writers]]
            pub.usage[live] = loc.usage[live]
            pub.limit[live] = loc.limit[live]
            pub.agg[live] = loc.agg[live]
            pub.bundles[live] = loc.bundles[live]
            pub.topics[live] = loc.topics[live]
            self.last_update_ms[live] = now
            self.has_report[live] = True
            if not lock:
                self.baseline_empty[live] = False
            self.written[live] = True
        pub.bundle_owner = new_owner
        self.view.cached = None

    # ------------------------------------------------------------------------------ the leader's view
    def snapshot(self, now: int, alive: BoolArray) -> ClusterSnapshot:
        """The leader's view at ``now`` (see :meth:`LeaderView.snapshot`).

        A new view comes with its brokers' scores, which its readers (the leader's shedding or lookups,
        the tick's reported scores) all ask for: computed by the compiled loop, the NumPy form's values
        (0.09 → 0.02 ms a tick)."""
        fresh = self.view.cached is None
        snap = self.view.snapshot(now, alive, self.has_report, self.published, self.leader_data)
        if fresh:
            scores = broker_scores(snap.resource_usage, snap.resource_limit, self.weights)
            snap.seed_percent(self.weights, scores)
        return snap
