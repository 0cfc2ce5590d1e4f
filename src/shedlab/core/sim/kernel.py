"""The simulation kernel: one tick loop over the cluster's state, in Pulsar's order of events.

Each tick (``simulation.tick``, 60 s by default) at time T runs, in this order (:meth:`Simulation.tick`):

1. **Events** due at T (:mod:`~shedlab.core.sim.events`): brokers join (scale-out, restart) or vanish
   (failure, restart); background or traffic changes. A vanished broker's bundles become unowned and
   their clients look them up again after the reconnection delay. Membership changes reach the leader
   at once (Pulsar: the broker's ephemeral node appears/disappears): a joining broker writes its first
   report, the leader drops a vanished broker's report, runs ``updateAll`` and calls
   ``onActiveBrokersChange`` (spec §4.2). The oldest alive broker leads (§4.1).
2. **Traffic** of every bundle at T (:class:`~shedlab.core.sim.traffic.TrafficModel`).
3. **Lookups** due by T, in the order clients made them: the leader answers each one through
   :meth:`LoadManager.lookup` (affinity, preallocation, or the placement strategy; §4.5, §4.7) on its
   current, stale view; the bundle's traffic is on its new owner from then on.
4. **Stats and reports** (:mod:`~shedlab.core.sim.publishing`): every broker whose stats are due
   (``statsUpdateFrequencyInSecs``) samples its bundles and host usage (cost model) into its local
   LocalBrokerData; each broker writes its report only when §4.3's rule says so; every write runs the
   leader's ``updateBundleData`` (time averages, preallocation cleanup; §4.2), in write order; the
   leader's periodic bundle-data write (§4.9) adds one more update.
5. **Shedding**, when due (every ``loadBalancerSheddingIntervalMinutes`` after the leader's election):
   :meth:`LoadManager.do_load_shedding` on the leader's view (§4.4). An unloaded bundle's traffic
   leaves its broker at once; its clients reconnect (look it up) after ``reconnect_delay``, which lands
   it on the shedding's destination through the one-shot affinity (§4.7).
6. **Metrics** of the tick (:mod:`~shedlab.core.sim.metrics`), from the true usage sampled in step 4;
   with ``record=True``, the local reports of step 4 (:mod:`~shedlab.core.sim.recording`).

The leader is the oldest alive broker. When it vanishes, the next oldest takes over; with
``leader_failover: reset`` (default, as in Pulsar) the new leader starts with an empty recently-unloaded
map, no affinities or preallocations, and fresh strategy instances.

Left out, and why:

* **Bundle splitting** (§4.8): the bundle population is fixed by the scenario. ``decide`` and ``advise``
  run the leader's split check (:mod:`shedlab.manager.split`); here no bundle is split.
* **Two reports listing one bundle** (the stale report of its old owner and its new owner's): the
  leader samples it once per update, not twice (:meth:`LeaderBundleData.apply_writes`).
* **The time averages' last bits**: a tick's identical samples of a bundle are added in closed form
  (:func:`~shedlab.core.sim.reporting.apply_samples`), not one ``TimeAverageMessageData.update``
  (``((n − 1)·v + x)/n``) at a time; the values agree to about 1e-14 relative, not bit for bit (a first
  sample is its stats to within an ulp where Java's is exactly them). Per update, the leader's
  arithmetic would grow with the writes of a tick, on every bundle.
* **One LoadData for every leader**: in Pulsar every broker runs ``updateAll`` on each report
  notification and keeps its own ``loadData`` (``ModularLoadManagerImpl.handleDataNotification``); a
  new leader decides on its own view. Here the leader's bundle averages live in
  :class:`~shedlab.core.sim.publishing.Publishing` and a new leader inherits them. Pulsar's new leader
  has not counted the old leader's periodic bundle-data updates (one sample each
  ``loadBalancerResourceQuotaUpdateIntervalMinutes``, ``writeBundleDataOnZooKeeper``), and a broker
  that started after a bundle was first reported began that bundle's averages from its
  ``/loadbalance/bundle-data`` node (the top ``loadBalancerMaxNumberOfBundlesInBundleLoadReport`` ×
  brokers, ``getBundleDataOrDefault``) or from the defaults: after a rolling restart its long-term
  averages hold a shorter history than the ones inherited here.
* **A fresh broker's first host-usage reading**: ``LinuxBrokerHostUsageImpl``'s constructor reads NIC 0
  (no earlier byte counter) and, under cgroups, a CPU near 0 (its process's CPU over the time since
  the epoch); a broker started during the run reports its idle usage and background instead, until
  its next reading (its NIC the same when the background NIC is 0, the default, and no bundle lands on
  it at once).
* **Time between events within a tick**: everything due in (T − tick, T] happens at T, in the order
  above; a reconnection delay shorter than the tick lands at the next tick. Unless the scenario sets
  ``simulation.resolution``: then steps 1-5 run at every step of that resolution within the tick,
  each Pulsar timer fires at the first step at or after it is due (stats per broker, host usage per
  broker on a timer of its own, report checks every ``loadBalancerReportUpdateMinIntervalMillis``,
  the leader's bundle-data writes, shedding), and a stats sample or host-usage reading reads its
  window's average (:mod:`~shedlab.core.sim.windows`); step 6 still
  runs once per tick, so the tables keep one row per tick.
* **CPU usage over time**: without ``resolution`` a broker's CPU is the instantaneous cost of its
  traffic at the sample, not an average over the stats interval (with it: the average over the
  host-usage window).
* **The host-usage timer** without ``resolution``: a broker samples its host usage (CPU, NIC) with its
  bundle stats, at the tick, while the two intervals are equal (Pulsar's defaults; otherwise each broker
  keeps both timers, at one step a tick, as with ``resolution``). Pulsar has two timers
  (``BrokerService``'s stats updater; ``LinuxBrokerHostUsageImpl``'s own ``scheduleWithFixedDelay``),
  each a window average, and the 5-s report check writes after either one crosses the threshold: a
  step in traffic makes up to 4 writes per broker in Pulsar (a partial then a full window, on each
  timer), 1 here, so the leader's short-term bundle averages take fewer samples after a step
  (docs/published.md, Chapter 5, §5.2).
  With ``resolution`` each broker has both timers (:class:`~shedlab.core.sim.windows.HostUsageWindows`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shedlab.core.sim.events import EventQueue, initial_assignment
from shedlab.core.sim.extensible import ExtensibleDataPath, ExtensibleManager
from shedlab.core.sim.metrics import Churn, RunCounts, TickMetrics
from shedlab.core.sim.publishing import Publishing
from shedlab.core.sim.recording import Recording
from shedlab.core.sim.result import SimulationResult
from shedlab.core.sim.scenario import Scenario, TrafficChange, build_config, tick_ms_of
from shedlab.core.sim.state import NEVER, ClusterState, TrueUsage, broker_layout, measure
from shedlab.core.sim.traffic import BundlePopulation, Shape, Traffic, TrafficModel, build_population
from shedlab.core.sim.windows import HostUsageWindows, StatsWindows
from shedlab.manager import LoadManager, ManagerDecision
from shedlab.strategies import pair_name_of
from shedlab.strategies.registry import is_extensible_pair

__all__ = ["Simulation"]

IntArray = NDArray[np.int64]

_HOST_STREAM = 0x4057
"""The spawn key of the host-usage timers' random stream (``SeedSequence(seed, spawn_key=(0x4057,))``):
apart from the root's children (keys 0, 1, ...), so drawing it moves no other stream."""


class Simulation:
    """One run of a scenario; call :meth:`run` once."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        strategy: str | None = None,
        config_overrides: Mapping[str, Any] | None = None,
        seed: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        record: bool = False,
    ) -> None:
        self.scenario = scenario
        self.conf = conf = build_config(scenario, strategy, config_overrides)
        self.strategy = pair_name_of(conf)
        self.seed = scenario.seed if seed is None else int(seed)
        self.progress = progress
        root = np.random.default_rng(self.seed)
        rng_pop, rng_traffic, self.rng_events, self.rng_manager, rng_phase, self.rng_init = root.spawn(6)
        self.weights = conf.resource_weights()
        sim = scenario.simulation
        self.tick_ms = tick_ms_of(sim.tick)
        # simulation.resolution: steps of res_ms within each tick (docs/scenarios.md "Resolution")
        self.res_ms = sim.step_ms
        self.substeps = self.tick_ms // self.res_ms
        self.start_ms = int(sim.start_time_ms)
        self.reconnect_ms = round(sim.reconnect_delay * 1000)
        self.shed_ms = max(int(conf.load_balancer_shedding_interval_minutes) * 60_000, 1)
        self.n_ticks = scenario.num_ticks

        pop = self.pop = build_population(scenario.workloads, rng_pop, scenario.source or None)
        step_s = scenario.simulation.tick if sim.resolution is None else self.res_ms / 1000.0
        self.traffic_model = _traffic_model(scenario, pop, rng_pop, rng_traffic, step_s)
        self.bundle_index = {name: j for j, name in enumerate(pop.names)}
        layout = broker_layout(scenario)
        self.initial_slots = layout.initial_slots
        self.cluster = cluster = ClusterState.new(layout, pop.size)
        self.publishing = Publishing.new(
            conf,
            cluster.ids,
            pop.names,
            start_ms=self.start_ms,
            tick_ms=self.res_ms,
            random_phase=sim.stats_phase == "random",
            rng=rng_phase,
        )
        self.windows: StatsWindows | None = None
        self.check_ms = max(int(conf.load_balancer_report_update_min_interval_millis), 1)
        self.next_check_ms = self.start_ms
        self.host: HostUsageWindows | None = None
        host_ms = max(int(conf.load_balancer_host_usage_check_interval_minutes) * 60_000, 1)
        # Without a resolution the two timers are one while their intervals are equal (Pulsar's defaults:
        # 60 s and 1 min); set apart (statsUpdateFrequencyInSecs 300, say), each broker keeps both, at one
        # step a tick: its CPU and NICs read every minute, its rates over its stats period
        if sim.resolution is not None or host_ms != self.publishing.stats_ms:
            self.windows = StatsWindows.new(cluster.num_slots, pop.size, self.res_ms)
            # the host-usage timers' phases: a stream of its own, keyed apart from root's children,
            # so every other draw is the same as before (and without resolution nothing is drawn)
            rng_host = np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(_HOST_STREAM,)))
            self.host = HostUsageWindows.new(cluster.num_slots, host_ms, rng_host)
        # The extensible manager's data path (PIP-192: broker-side EMA, load-data topic, top-k reports),
        # or None for the modular manager (core/sim/extensible.py); the hooks below are its only calls.
        self.extensible: ExtensibleDataPath | None = None
        if is_extensible_pair(conf):
            self.extensible = ExtensibleDataPath.new(conf, cluster, pop.names, pop.consumers, pop.producers)
        self.manager = self._new_manager()
        self._seed_leader_state(scenario, root)
        self.pinned_lookups: dict[int, str] = {}  # bundle -> the one broker its first lookup may pick
        self.warmup_ms = round(scenario.metrics.warmup * 1000)
        self.at_warmup: tuple[int, int, int, int, int] | None = None  # counters when the warm-up ended
        self.retired_unloads = (0, 0)  # unload bundle/broker totals of the managers of earlier leaders
        self.next_shed_ms = NEVER
        self.events = EventQueue(scenario, self.start_ms, layout.initial_slots, layout.add_slots)

        self.metrics = self._new_metrics()
        self.next_tick = 0  # the tick :meth:`step` runs next (the sandbox drives the loop one tick at a time)
        self.recording = self._new_recording() if record else None

    def _new_metrics(self) -> TickMetrics:
        """The metrics' collector: the grace period bounds the churn's repeat-move window by default."""
        conf, cluster, pop, scenario = self.conf, self.cluster, self.pop, self.scenario
        grace_ms = int(conf.load_balancer_shedding_grace_period_minutes) * 60_000
        window = scenario.metrics.repeat_move_window
        return TickMetrics(
            start_ms=self.start_ms,
            tick_ms=self.tick_ms,
            weights=self.weights,
            overload_pct=float(conf.load_balancer_broker_overloaded_threshold_percentage),
            settings=scenario.metrics,
            cost=cluster.cost,
            bundle_topics=pop.topics,
            clients=(pop.producers + pop.consumers).astype(np.int64),
            slot_of=cluster.slot_of,
            churn=Churn.new(pop.size, grace_ms, 2 * grace_ms if window is None else round(window * 1000)),
        )

    def _new_recording(self) -> Recording:
        """An empty recording of the reports the brokers will write (``record=True``)."""
        pop = self.pop
        return Recording(
            cluster=self.scenario.simulation.cluster,
            broker_ids=self.cluster.ids,
            bundle_names=pop.names,
            bundle_topics=pop.topics,
            bundle_consumers=pop.consumers,
            bundle_producers=pop.producers,
            load_manager_class=self.conf.load_manager_class_name,
            ticks=[],
        )

    # ------------------------------------------------------------------------------------------- the loop
    def run(self) -> SimulationResult:
        for t in range(self.n_ticks):
            self.tick(t, self.start_ms + t * self.tick_ms)
            if self.progress is not None:
                self.progress(t + 1, self.n_ticks)
        return self.result()

    # ------------------------------------------------------------------ hooks for an external driver
    def step(self) -> bool:
        """Run the next tick; False (nothing run) once the scenario's last tick has run.

        For drivers that advance the simulation one tick at a time (the sandbox,
        :mod:`shedlab.cluster.sandbox`); :meth:`run` does not use it, so a normal run is unchanged.
        """
        if self.next_tick >= self.n_ticks:
            return False
        t = self.next_tick
        self.tick(t, self.start_ms + t * self.tick_ms)
        self.next_tick = t + 1
        return True

    @property
    def now_ms(self) -> int:
        """The time of the last tick run by :meth:`step` (the start time before the first)."""
        return self.start_ms + max(self.next_tick - 1, 0) * self.tick_ms

    def request_unload(self, bundle: str, destination: str | None) -> bool:
        """An unload asked from outside the leader's shedding: the admin API's ``unload?destinationBroker=``.

        As Pulsar's ``setNamespaceBundleAffinityAsync`` then ``unloadNamespaceBundle``: the destination
        goes into the leader's one-shot affinity map first (even when the bundle turns out to be unowned),
        then the owner closes the bundle; its clients look it up again after ``reconnect_delay``, and the
        lookup lands on the destination (§4.7). Not a shedding decision: no strategy counter moves, and
        ``recentlyUnloadedBundles`` is untouched (Pulsar's admin path does not write it). Returns whether
        the bundle was owned (an unowned bundle is left alone, as Pulsar answers 204 without unloading).
        """
        if destination is not None:
            self.set_bundle_affinity(bundle, destination)
        j = self.bundle_index[bundle]
        cluster = self.cluster
        if cluster.owner[j] < 0:
            return False
        now = self.now_ms
        if self.extensible is not None:  # hook: the owner's Releasing event tombstones its load data
            self.extensible.tombstone(cluster.ids[int(cluster.owner[j])], now)
        cluster.owner[j] = -1
        cluster.lookup_at[j] = now + self.reconnect_ms
        self.metrics.churn.count(np.asarray([j], dtype=np.int64), now)
        return True

    def set_bundle_affinity(self, bundle: str, destination: str) -> None:
        """The leader's ``setNamespaceBundleAffinity``: ``bundle``'s next lookup lands on ``destination``."""
        self.manager.affinity[bundle] = destination

    def tick(self, t: int, now: int) -> None:
        """Tick ``t`` at ``now`` (ms): the six steps of the module docstring, in that order.

        With ``simulation.resolution`` steps 1-5 run at every step of (now − tick, now] (tick 0: once,
        at the start) and step 6 once, at ``now``, with every decision of the tick.
        """
        cluster, publishing, metrics = self.cluster, self.publishing, self.metrics
        if self.warmup_ms and self.at_warmup is None and now - self.start_ms >= self.warmup_ms:
            # the first measured row: the summary counts from here, every step of this tick included
            self.at_warmup = self._counters()
        metrics.begin_tick()
        publishing.begin_tick()
        if self.windows is None or t == 0:
            traffic, true, decisions = self._step(t, now)
        else:
            decisions = []
            for i in range(self.substeps):
                traffic, true, shed = self._step(t, now - self.tick_ms + (i + 1) * self.res_ms)
                decisions.extend(shed)
        # 6. metrics; reported_score reads the leader's view, built now if no lookup or shedding has
        # since the last write (the leader holds every written report whether or not it decided on it)
        if publishing.view.cached is None and cluster.leader is not None:
            publishing.snapshot(now, cluster.alive)
        metrics.end_tick(
            t,
            now,
            traffic,
            true,
            decisions,
            owner=cluster.owner,
            view=publishing.view,
            written=publishing.written,
            leader=cluster.leader,
            unload_totals=self.unload_totals(),
        )

    def _step(self, t: int, now: int) -> tuple[Traffic, TrueUsage, list[ManagerDecision]]:
        """Steps 1-5 at ``now``: events, traffic, lookups, stats and reports, shedding."""
        cluster, publishing = self.cluster, self.publishing
        # 1. events due; membership changes reach the leader at once; the start assigns the bundles
        joined, removed = self.events.apply_due(
            now, cluster, self.pop.size, self.rng_events, self.metrics.log_event
        )
        if removed or joined:
            self._membership(now, joined, removed)
        if t == 0:
            sim = self.scenario.simulation
            self.pinned_lookups = initial_assignment(
                cluster,
                self.pop,
                sim.initial_assignment,
                now,
                self.rng_init,
                pinned_lookups=sim.pinned_placement == "strategy",
            )
        # 2. traffic (its own random stream: independent of the events)
        traffic = self.traffic_model.at((now - self.start_ms) / 1000.0)
        # 3. lookups
        self._lookups(now)
        # 4. stats samples, report writes, the leader's bundle data
        true = measure(
            cluster, self.pop, traffic, (now - self.start_ms) / 1000.0, self.rng_events, self.weights
        )
        if self.windows is None:
            samplers = publishing.sample(now, true, cluster.owner, traffic, self.pop.topics)
        else:
            samplers = self._sample_windows(now, traffic, true)
        if self.extensible is not None:  # hook: the extensible manager's EMA, load-data topic, top-k
            self.extensible.advance(now, publishing.local, samplers)
        # PulsarService schedules the report task (and, on election, the bundle-data task) only when
        # loadBalancerEnabled: without it a broker's lock node is the only report the leader sees
        balancing = self.conf.load_balancer_enabled
        if not balancing:
            writers = np.zeros(0, dtype=np.int64)
        elif self.windows is None:
            writers = publishing.writers(now, true.slots)
        else:
            writers = self._check_reports(now, true.slots)
        extra = publishing.quota_updates_due(now) if balancing else 0
        if writers.size or extra:
            self._publish(now, writers, extra)
        if self.recording is not None and samplers.size:
            self.recording.add(
                now, cluster.alive, publishing.local, publishing.last_update_ms, cluster.start_ts
            )
        # 5. shedding
        decisions = self._shed(now, traffic, true)
        if self.manager.skip_log:  # placement fallbacks (step 3) and shedding skips (step 5)
            self.metrics.skipped(now, self.manager.skip_log)
            self.manager.skip_log.clear()
        return traffic, true, decisions

    def _sample_windows(self, now: int, traffic: Traffic, true: TrueUsage) -> IntArray:
        """Host-usage readings and stats samples, each on its broker's own timer, each a window average.

        A reading sets the local report's usage (and limits) to the broker's average true usage since
        its last reading; a stats sample sets its rates, totals and counts to its bundles' averages
        since the last sample and leaves the usage alone (:mod:`~shedlab.core.sim.windows`). Returns
        the stats samplers.
        """
        windows, host, cluster, publishing = self.windows, self.host, self.cluster, self.publishing
        assert windows is not None and host is not None
        windows.add(cluster.owner, traffic, now)
        host.add(true.slots, true.usage)
        readers, usage = host.read(true.slots, now)
        if readers.size:
            publishing.local.usage[readers] = usage
            publishing.local.limit[readers] = cluster.cost.limits(readers)
        if not (publishing.next_sample_ms[true.slots] <= now).any():
            return np.zeros(0, dtype=np.int64)
        averaged = windows.averages(now)
        # the sample takes rates and counts only (its usage is the host-usage reading's), so no
        # background noise is drawn for it: a draw here, made only at steps where some broker's stats
        # are due, moved the events' stream (random removals, later backgrounds) with
        # statsUpdateFrequencyInSecs, so that two configs or pairs saw different clusters
        seen = measure(cluster, self.pop, averaged, (now - self.start_ms) / 1000.0, None, self.weights)
        samplers = publishing.sample(now, seen, cluster.owner, averaged, self.pop.topics, host_usage=False)
        windows.sampled(samplers, now)
        return samplers

    def _check_reports(self, now: int, alive: IntArray) -> IntArray:
        """§4.3's check, every ``loadBalancerReportUpdateMinIntervalMillis`` (at the first step due)."""
        if now < self.next_check_ms:
            return np.zeros(0, dtype=np.int64)
        self.next_check_ms += self.check_ms * ((now - self.next_check_ms) // self.check_ms + 1)
        return self.publishing.writers(now, alive)

    def result(self) -> SimulationResult:
        """The run's tables and summary (after :meth:`run`'s ticks)."""
        churn = self.metrics.churn
        lookups, bundle_total, broker_total, grace, window = self._counters()
        if self.warmup_ms:  # the summary counts what happened after the warm-up
            # a warm-up that outlasts the run never ended: nothing after it to count
            then = self._counters() if self.at_warmup is None else self.at_warmup
            lookups, bundle_total, broker_total, grace, window = (
                now - before for now, before in zip(self._counters(), then, strict=True)
            )
        counts = RunCounts(
            brokers_initial=len(self.initial_slots),
            brokers_final=int(self.cluster.alive.sum()),
            bundles=self.pop.size,
            lookups=lookups,
            unload_bundle_total=bundle_total,
            unload_broker_total=broker_total,
            moved_again_within_grace=grace,
            moved_again_within_window=window,
            repeat_move_window_s=churn.window_ms / 1000.0,
        )
        return SimulationResult.from_run(
            scenario=self.scenario,
            strategy=self.strategy,
            seed=self.seed,
            conf=self.conf,
            collector=self.metrics.collector,
            broker_ids=self.cluster.ids,
            counts=counts,
            recording=self.recording,
            skips=self.metrics.collector.skips_frame(),
        )

    def _counters(self) -> tuple[int, int, int, int, int]:
        """Lookups, unloaded bundles, unloading brokers, moves again within grace and within window."""
        churn = self.metrics.churn
        bundles, brokers = self.unload_totals()
        return (self.metrics.lookups_total, bundles, brokers, churn.within_grace, churn.within_window)

    def unload_totals(self) -> tuple[int, int]:
        """``pulsar_lb_unload_bundle_total`` and ``..._broker_total`` over every leader so far."""
        return (
            self.retired_unloads[0] + self.manager.unload_bundle_total,
            self.retired_unloads[1] + self.manager.unload_broker_total,
        )

    # ------------------------------------------------------------------------------ leader and membership
    def _new_manager(self) -> LoadManager | ExtensibleManager:
        seed = self.rng_manager.spawn(1)[0]
        if self.extensible is not None:
            return ExtensibleManager(self.conf, self.extensible, seed)
        return LoadManager(self.conf, seed=seed)

    def _seed_leader_state(self, scenario: Scenario, root: np.random.Generator) -> None:
        """The first leader's ``leader_state`` (usage histories, hit counters, recent unloads)."""
        state = scenario.leader_state
        if state.is_empty:
            return
        ids = self.cluster.ids
        history = {ids[b.broker - 1]: b.usage_history for b in state.brokers if b.usage_history is not None}
        hits = {ids[b.broker - 1]: (b.hit_high, b.hit_low) for b in state.brokers if b.hit_high or b.hit_low}
        recent: dict[str, int] = {}
        if state.recently_unloaded:
            rng = root.spawn(1)[0]  # its own stream: the other streams are the same with or without it
            for item in state.recently_unloaded:
                chosen = self.pop.select(item.select, rng)
                members = range(self.pop.size) if chosen is None else chosen.tolist()
                at = self.start_ms - round(item.ago * 1000)
                recent.update((self.pop.names[j], at) for j in members)
        self.manager.seed_state(usage_history=history, hit_counts=hits, recently_unloaded=recent)

    def _membership(self, now: int, joined: list[int], removed: list[int]) -> None:
        """Ephemeral nodes gone, then new ones: the leader's updateAll, election, onActiveBrokersChange."""
        cluster, publishing = self.cluster, self.publishing
        for s in removed:
            cluster.alive[s] = False
            publishing.broker_left(s)
            if self.extensible is not None:  # hook
                self.extensible.broker_left(s)
            lost = np.flatnonzero(cluster.owner == s)
            if lost.size:
                self._disconnect(lost, now)
        for s in joined:
            cluster.alive[s] = True
            cluster.start_ts[s] = now
            slot = np.array([s], dtype=np.int64)
            bg = cluster.background_at(slot, (now - self.start_ms) / 1000.0, self.rng_events)
            zero = np.zeros(1)
            usage = cluster.cost.usage(slot, zero, zero, zero, zero, zero, bg)[0]
            fresh = now > self.start_ms  # started during the run, not standing for a running broker
            publishing.broker_joined(s, now, usage, cluster.cost.limits(slot)[0], fresh=fresh)
            if self.windows is not None:
                self.windows.started(s, now)
            if self.host is not None:  # a fresh broker's host-usage timer leads its stats timer (windows.py)
                self.host.started(s, now, int(publishing.stats_phase_ms[s]), fresh=fresh)
            if self.extensible is not None:  # hook
                self.extensible.broker_joined(s, now)
        joining = [s for s in joined if cluster.alive[s]]
        restarted = set(removed) & set(joined)
        # every lock node deleted or created is a notification, and the leader runs updateAll on each
        # (ModularLoadManagerImpl.handleDataNotification): a restarted broker's deletion and creation
        # are two updates, so two publishes (in one, its slot would write once: one update)
        for batch in [removed, joining] if restarted else [[*removed, *joining]]:
            if batch:
                self._publish(now, np.asarray(batch, dtype=np.int64), 0, lock=True)
        if restarted:
            # the lock node was deleted before it was created again: the leader's updateAll on the
            # deletion (cleanupDeadBrokersData) told the strategies the broker was gone
            self.manager.on_active_brokers_change(
                [cluster.ids[s] for s in np.flatnonzero(cluster.alive) if s not in restarted]
            )
        self._elect(now, leader_lost=cluster.leader in removed)
        self.manager.on_active_brokers_change([cluster.ids[s] for s in np.flatnonzero(cluster.alive)])

    def _disconnect(self, bundles: IntArray, now: int) -> None:
        """Bundles lose their owner (broker gone): clients reconnect and look them up after the delay."""
        self.cluster.owner[bundles] = -1
        self.cluster.lookup_at[bundles] = now + self.reconnect_ms
        self.metrics.churn.count(bundles, now)

    def _elect(self, now: int, *, leader_lost: bool = False) -> None:
        """The oldest alive broker leads; a new leader's first shedding is one interval after election.

        Oldest by start time (ties: the lowest number), so a broker that restarts is the youngest and
        does not take the leadership back from the broker that took it over. A leader that went down
        (``leader_lost``, also when it came back within the same step) has lost its leadership: the
        broker elected after it is a new leader even when it is the same one.
        """
        cluster = self.cluster
        alive = np.flatnonzero(cluster.alive)
        leader = int(alive[np.argmin(cluster.start_ts[alive])]) if alive.size else None
        if leader == cluster.leader and not leader_lost:
            return
        previous = cluster.leader
        cluster.leader = leader
        if leader is None:
            self.next_shed_ms = NEVER
            self.publishing.leader_elected(None)
            return
        if previous is not None and self.scenario.simulation.leader_failover == "reset":
            self.retired_unloads = self.unload_totals()
            self.manager = self._new_manager()
            self.manager.on_active_brokers_change([cluster.ids[s] for s in alive])
        if previous is not None:
            self.metrics.log_event(now, "leader_change", f"{cluster.ids[previous]} -> {cluster.ids[leader]}")
        if self.extensible is not None:  # hook: playLeader's forced load-data report
            self.extensible.leader_elected(leader, now)
        # the leader's timers start at its election (PulsarService's leader-election listener)
        self.next_shed_ms = now + self.shed_ms
        self.publishing.leader_elected(now)

    def _publish(self, now: int, writers: IntArray, extra: int, *, lock: bool = False) -> None:
        """Report writes and the leader's updates; then its preallocation cleanup on the new view.

        ``lock``: the writes are lock nodes created or deleted (brokers joining or gone, §4.10).
        """
        cluster, manager = self.cluster, self.manager
        self.publishing.publish(now, writers, extra, cluster.alive, lock=lock)
        if manager.preallocated or manager.preallocated_bundle_to_broker:
            leader_owned: set[str] = set()
            if cluster.leader is not None:
                names = self.pop.names
                leader_owned = {names[j] for j in np.flatnonzero(cluster.owner == cluster.leader).tolist()}
            manager.on_bundle_data_update(
                self.publishing.snapshot(now, cluster.alive), leader_owned=leader_owned
            )

    # ------------------------------------------------------------------------------- lookups and shedding
    def _lookups(self, now: int) -> None:
        """Due lookups in the order clients made them, each answered on the leader's current view."""
        cluster = self.cluster
        due = np.flatnonzero(cluster.lookup_at <= now)
        if due.size == 0:
            return
        due = due[np.lexsort((due, cluster.lookup_at[due]))]
        snap = self.publishing.snapshot(now, cluster.alive)
        names = self.pop.names
        manager = self.manager
        landed = []
        paths = self.metrics.lookup_paths
        pinned = self.pinned_lookups
        for j in due.tolist():
            only = pinned.pop(j, None) if pinned else None
            answer = manager.lookup(names[j], snap, now, candidates=None if only is None else (only,))
            paths[answer.path] += 1
            if answer.broker is None:
                continue
            cluster.owner[j] = cluster.slot_of[answer.broker]
            cluster.lookup_at[j] = NEVER
            landed.append(j)
        self.metrics.lookups_done(landed)

    def _shed(self, now: int, traffic: Traffic, true: TrueUsage) -> list[ManagerDecision]:
        """The leader's shedding when due; unloaded bundles leave their owner and reconnect later.

        A decision on a bundle no broker owns (its clients are still reconnecting after an earlier
        unload, while a stale report still lists it) is recorded, but the unload does nothing and its
        pending lookup keeps its time: Pulsar's admin unload of an unowned bundle returns without
        unloading (as :meth:`request_unload` has it)."""
        if now < self.next_shed_ms:
            return []
        self.next_shed_ms += self.shed_ms * ((now - self.next_shed_ms) // self.shed_ms + 1)
        cluster = self.cluster
        decisions = self.manager.do_load_shedding(self.publishing.snapshot(now, cluster.alive), now)
        if not decisions:
            return decisions
        bundles = [self.bundle_index[d.bundle] for d in decisions]
        owned, moved = [], []
        for j in bundles:
            is_owned = bool(cluster.owner[j] >= 0)  # after the decisions before it (a bundle unloaded twice)
            owned.append(is_owned)
            if is_owned:
                cluster.owner[j] = -1
                cluster.lookup_at[j] = now + self.reconnect_ms
                moved.append(j)
        self.metrics.unloaded(now, decisions, bundles, owned, traffic, true)
        if moved:
            self.metrics.churn.count(np.asarray(moved, dtype=np.int64), now)
        return decisions


def _traffic_model(
    scenario: Scenario,
    pop: BundlePopulation,
    rng_pop: np.random.Generator,
    rng_traffic: np.random.Generator,
    step_s: float,
) -> TrafficModel:
    """The workloads' shapes, and every traffic event as a step shape over its selection.

    Workloads sharing bundles are modelled per unit (workload × bundle), summed into the bundles.
    """
    bundles = pop
    pop = pop.units if pop.units is not None else pop
    m = pop.size
    shapes: list[tuple[Shape, IntArray | None]] = []
    for w_index, workload in enumerate(scenario.workloads):
        members = np.flatnonzero(pop.workload_index == w_index).astype(np.int64)
        for shape in workload.shapes:
            # a fraction is drawn among every workload's matching bundles, then narrowed to this one's:
            # kept, as existing scenarios' results depend on it (scenario._check_fraction, docs/scenarios.md)
            sel = pop.select(shape.select, rng_pop)
            idx = members if sel is None else np.intersect1d(members, sel)
            shapes.append((shape, None if idx.size == m else idx))
    for event in scenario.events:
        if isinstance(event, TrafficChange):
            until = None if event.duration is None else event.at + event.duration
            step = Shape("step", (("at", event.at), ("factor", event.factor), ("until", until)), event.select)
            sel = pop.select(event.select, rng_pop)
            shapes.append((step, None if sel is None or sel.size == m else sel))
    return TrafficModel(pop, shapes, rng_traffic, step_s, into=bundles.unit_bundle, bundles=bundles.size)
