"""The extensible load manager's data path in the simulator (PIP-192, spec §8), where it differs.

The kernel (:mod:`~shedlab.core.sim.kernel`) runs the modular manager's data path for every pair; with
``loadManagerClassName=…ExtensibleLoadManagerImpl`` (the pair
``TransferShedder+ExtensibleLeastResourceUsageWithWeight``) it also calls these hooks of
:class:`ExtensibleDataPath` and asks :class:`ExtensibleManager` instead of
:class:`~shedlab.manager.LoadManager` for lookups and shedding:

* ``broker_joined`` / ``broker_left`` (membership, step 1): a restarted broker starts with a fresh
  ``BrokerLoadData`` (``updatedAt = 0``) and publishes a first sample at its start (the forced report
  of ``playFollower``/``playLeader``); a vanished broker's entries leave both load-data stores;
* ``leader_elected`` (election, step 1): a broker taking the leadership over samples and publishes
  once more (``playLeader``'s forced report), with the tick's report instants;
* ``advance`` (after the stats samples of step 4).

What the extensible manager reads, and how it is modelled here:

* **The broker-side EMA.** Every broker runs ``BrokerLoadDataReporter.reportAsync`` every
  ``loadBalancerReportUpdateMinIntervalMillis`` (5 s): ``BrokerLoadData.update`` advances
  ``weightedMaxEMA`` and ``msgThroughputEMA`` with ``loadBalancerHistoryResourcePercentage`` on each call
  (spec §8.1), from the broker's host usage and stats — in the simulator, its *local* report as of its
  last stats sample (:class:`~shedlab.core.sim.publishing.Publishing`). The sample is constant between
  two simulator ticks, so the *n* report instants of a tick are one :meth:`BrokerLoadData.updated` call
  with history ``h**n`` (``EMA·hⁿ + (1−hⁿ)·w`` is exactly *n* steps of ``EMA·h + (1−h)·w``); ``updatedAt``
  is the last instant.
* **The load-data topic's freshness.** A broker publishes its data only when §4.3's change rule holds
  with the *unweighted* ``maxResourceUsage`` (or on its first report, or when
  ``loadBalancerReportUpdateMaxIntervalMinutes`` have passed); the leader reads the latest published
  message of each broker (a table view: no delay). The rule is evaluated once per tick, at its last
  instant. TransferShedder's TTL (``loadBalancerBrokerLoadDataTTLInSeconds``) and cool-down compare the
  published ``updatedAt``.
* **Top-k bundle reports** (``TopBundleLoadDataReporter``): refreshed whenever the broker's bundle stats
  were (its stats samples), from the bundles its local report lists, with Pulsar's order and filters
  (:func:`top_k_rows`, equal to :func:`~shedlab.strategies.extensible_data.top_k_bundles`).
* **Tombstones after ownership changes** (``BrokerLoadDataReporter`` and ``TopBundleLoadDataReporter``
  are state-change listeners): a broker that is the source of a ``Releasing`` (or ``Splitting``) bundle,
  or the destination of an ``Owned`` one, clears its local ``BrokerLoadData`` (its EMA starts again from
  the next sample, ``updatedAt = 0``) and removes its entries from both load-data stores, the removal at
  most once per ``TOMBSTONE_DELAY_IN_MILLIS`` (10 s) per broker (:meth:`ExtensibleDataPath.tombstone`).
  Its next report is published whatever the change rule says (its ``reportedAt`` is 0 again); its top-k
  report comes back with its next stats sample (``TopBundleLoadDataReporter`` pushes only new stats).
  So the leader never sees a moved bundle's load on both brokers, and after a transfer both brokers'
  EMAs restart at their new load instead of decaying towards it. When: a transfer's source and
  destination at the decision (Pulsar's channel goes ``Releasing`` → ``Owned`` within the transfer); an
  unload without transfer's source at the decision, and every assignment's destination (lookups of
  unowned bundles: a failed broker's, a restarted one's, an unload without transfer's) at its lookup.
* **Unload → assign.** :class:`ExtensibleManager` runs ``UnloadScheduler.execute`` every
  ``loadBalancerSheddingIntervalMinutes``; each decision is a *transfer* naming its destination, and the
  service-unit state channel assigns the bundle there: its clients reconnect after the kernel's
  ``reconnect_delay`` and land on the destination (the lookup path is counted as ``affinity``). Unloads
  complete at the decision (``record_completed``), which starts the source's **cool-down**: TransferShedder
  skips whole cycles until that broker has published data sampled ``loadBalanceSheddingDelayInSeconds``
  after the unload. Swap moves (min → max) are transfers too. A bundle without an owner (a vanished
  broker's, or a new one) is assigned by the extensible LeastResourceUsageWithWeight over the available
  brokers on the published ``weightedMaxEMA``: no preallocation, and placements do not move the EMA.
* **Ownership** for TransferShedder's owner check is the simulator's true owner (the state channel is
  authoritative, unlike the modular manager's reports).

Deviations and simplifications (documented in ``docs/transfer-shedder.md``):

* With ``loadBalancerTransferEnabled=false`` an unload has no destination in Pulsar and the clients'
  lookup picks one with the same placement on the same published data (the EMA store changes only on
  publication); the simulator picks it at the unload and binds it, so the decision row names it. That
  placement excludes no broker (``selectAsync``), so it can be the source itself: the unload still
  happens, is counted and starts the source's cool-down, and the clients reconnect to the same broker.
* Of the broker filter pipeline (``ExtensibleLoadManagerImpl``'s ``brokerFilterPipeline``) only
  ``BrokerMaxTopicCountFilter`` can remove a broker here: every broker runs one load-manager class and
  version, and there are no isolation or anti-affinity policies, as in the modular path. It is applied
  where Pulsar applies the pipeline: to the candidates of every placement (``selectAsync``) and, through
  :class:`~shedlab.strategies.transfer_shedder.TransferPolicies`, in TransferShedder's ``isTransferable``.
* The modular reports (``reports_published``, ``reported_score``) are still computed and recorded; they
  describe the modular report rule, which the extensible pair does not read.
* ``loadBalancerSheddingExcludedNamespaces`` (PIP-380) keeps a namespace's bundles out of the top-k
  reports and TransferShedder's walk, and its bundles are *placed* like every other bundle, by the
  LeastResourceUsageWithWeight above. That is what every stored ``ExtensibleLoadManagerImpl.selectAsync``
  read here does (one ``getBrokerSelectionStrategy().select(...)`` for every bundle); the spec says how
  the modular manager places them (round robin, §3.4) and nothing of the extensible one. Pulsar has an
  ``extensions.strategy.RoundRobinBrokerSelectionStrategy`` (the modular ``RoundRobinBrokerSelector``
  wrapped) whose caller, if the spec's commit has one, could not be read here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shedlab.config import LoadBalancerConfig
from shedlab.core.sim.reporting import need_update_mask
from shedlab.core.sim.state import NEVER, ClusterState, Reports
from shedlab.manager import Assignment, ManagerDecision
from shedlab.model.pulsar import (
    RESOURCE_NAMES,
    NamespaceBundleStats,
    ResourceUsage,
    java_round,
    namespace_of,
)
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies.base import Skip
from shedlab.strategies.extensible_data import (
    BrokerLoadData,
    BundleLoadData,
    ExtensibleLoadData,
    TopBundlesLoadData,
    is_system_service_namespace,
)
from shedlab.strategies.extensible_least_resource_usage_with_weight import (
    ExtensibleLeastResourceUsageWithWeight,
)
from shedlab.strategies.transfer_shedder import (
    TransferPolicies,
    TransferShedder,
    TransferShedderSettings,
    TransferSheddingResult,
    UnloadScheduler,
)

__all__ = ["ExtensibleDataPath", "ExtensibleManager", "top_k_rows"]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

TOMBSTONE_DELAY_MS = 10_000
"""The reporters' ``TOMBSTONE_DELAY_IN_MILLIS``: a broker removes its load data from a store at most once
in 10 s (the local data is cleared at every event)."""
_LONG_AGO = np.iinfo(np.int64).min // 2  # Java's lastTombstonedAt = 0: the first tombstone always removes


def top_k_rows(
    rows: IntArray,
    values: FloatArray,
    topics: IntArray,
    clients: IntArray,
    name_rank: IntArray,
    eligible: BoolArray,
    k: int,
) -> IntArray:
    """The bundles of one broker's top-k report, smallest first (``TopKBundles.update``, spec §8.1).

    ``rows``: the bundles its report lists; ``values`` (4, m): rate in/out, throughput in/out; ``clients``:
    consumers + producers; ``name_rank``: each bundle's rank in name order (ties, as
    :func:`~shedlab.strategies.extensible_data.top_k_bundles` breaks them); ``eligible``: not in a
    system-service or excluded namespace. Zero-throughput bundles are left out. The order is
    NamespaceBundleStats.compareTo's key (:func:`~shedlab.strategies.extensible_data.bundle_stats_key`,
    cache size 0) then the name.
    """
    tp = values[2, rows] + values[3, rows]
    keep = rows[eligible[rows] & (tp != 0)]
    if keep.size == 0 or k <= 0:
        none: IntArray = keep[:0]
        return none
    order = np.lexsort(
        (
            name_rank[keep],
            (topics[keep] + clients[keep]) // 500,
            java_round((values[0, keep] + values[1, keep]) / 100),
            java_round(values[3, keep] / 1e5),
            java_round(values[2, keep] / 1e5),
        )
    )
    ranked: IntArray = keep[order]
    top: IntArray = ranked[max(0, ranked.size - k) :]
    return top


@dataclass
class ExtensibleDataPath:
    """The brokers' side of the extensible manager: each broker's BrokerLoadData (its EMA), what it last
    published on the load-data topic, and its top-k report. Outlives leader changes (it is the brokers')."""

    conf: LoadBalancerConfig
    settings: TransferShedderSettings
    cluster: ClusterState
    bundle_names: tuple[str, ...]
    bundle_index: Mapping[str, int]
    bundle_consumers: IntArray
    bundle_producers: IntArray
    bundle_clients: IntArray
    interval_ms: int
    local_data: list[BrokerLoadData]
    published: dict[str, BrokerLoadData] = field(default_factory=dict)
    top: dict[str, _TopReport] = field(default_factory=dict)
    next_report_ms: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    name_rank: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    eligible: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    last_tombstone_ms: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    forced: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))  # publish next report
    flush_leader: int | None = None  # a new leader's playLeader report, taken at the next advance
    reports_published: int = 0
    tombstones: int = 0  # store removals (the 10 s dedup applied)

    @classmethod
    def new(
        cls,
        conf: LoadBalancerConfig,
        cluster: ClusterState,
        bundle_names: tuple[str, ...],
        bundle_consumers: IntArray,
        bundle_producers: IntArray,
    ) -> ExtensibleDataPath:
        """No data yet; reporting starts when a broker joins (the initial brokers at the first tick)."""
        settings = TransferShedderSettings.from_config(conf)
        n = len(cluster.ids)
        excluded = settings.load_balancer_shedding_excluded_namespaces
        eligible = np.asarray(
            [
                not (is_system_service_namespace(ns) or ns in excluded)
                for ns in (namespace_of(b) for b in bundle_names)
            ],
            dtype=np.bool_,
        )
        rank = np.empty(len(bundle_names), dtype=np.int64)
        rank[np.argsort(np.asarray(bundle_names, dtype=object), kind="stable")] = np.arange(len(bundle_names))
        return cls(
            conf=conf,
            settings=settings,
            cluster=cluster,
            bundle_names=bundle_names,
            bundle_index={name: j for j, name in enumerate(bundle_names)},
            bundle_consumers=bundle_consumers.astype(np.int64),
            bundle_producers=bundle_producers.astype(np.int64),
            bundle_clients=(bundle_consumers + bundle_producers).astype(np.int64),
            interval_ms=max(int(conf.load_balancer_report_update_min_interval_millis), 1),
            local_data=[BrokerLoadData() for _ in range(n)],
            next_report_ms=np.full(n, NEVER, dtype=np.int64),
            name_rank=rank,
            eligible=eligible,
            last_tombstone_ms=np.full(n, _LONG_AGO, dtype=np.int64),
            forced=np.zeros(n, dtype=np.bool_),
        )

    # ------------------------------------------------------------------------------------- membership
    def broker_joined(self, slot: int, now: int) -> None:
        """A (re)started broker: fresh BrokerLoadData, its first report at its start.

        Pulsar: ``ExtensibleLoadManagerImpl.playFollower`` (``playLeader`` for the leader) ends with
        ``brokerLoadDataReporter.reportAsync(true)`` as the broker becomes ready, a sample published
        whatever the change rule says; the scheduled reports follow every
        ``loadBalancerReportUpdateMinIntervalMillis`` from then on.
        """
        self.local_data[slot] = BrokerLoadData()
        self.next_report_ms[slot] = now
        self.last_tombstone_ms[slot] = _LONG_AGO  # a new process: its reporters never tombstoned
        self.forced[slot] = False

    def broker_left(self, slot: int) -> None:
        """Its ephemeral registration is gone; the leader drops its entries from both stores."""
        broker = self.cluster.ids[slot]
        self.published.pop(broker, None)
        self.top.pop(broker, None)
        self.next_report_ms[slot] = NEVER

    def tombstone(self, broker: str, now: int) -> None:
        """``broker`` is the source of a ``Releasing`` bundle or the destination of an ``Owned`` one at
        ``now``: both reporters' ``handleEvent`` (see the module docstring).

        The stored Pulsar tests show the local data cleared after every such event and the store entry
        removed once per 10 s (``BrokerLoadDataReporterTest.testTombstone``); the top-k reporter's
        ``tombstone`` is the same dedup around its own store. Both reporters see the same events, so
        one timestamp per broker serves both. A broker that is not alive has no reporters.
        """
        s = self.cluster.slot_of.get(broker)
        if s is None or not self.cluster.alive[s]:
            return
        self.local_data[s] = BrokerLoadData()
        self.forced[s] = True
        if now - int(self.last_tombstone_ms[s]) < TOMBSTONE_DELAY_MS:
            return
        self.last_tombstone_ms[s] = now
        if self.published.pop(broker, None) is not None:
            self.tombstones += 1
        self.top.pop(broker, None)

    def leader_elected(self, slot: int, now: int) -> None:
        """``slot`` takes the leadership over at ``now``: ``ExtensibleLoadManagerImpl.playLeader`` ends
        with ``brokerLoadDataReporter.reportAsync(true)``, one more sample (an EMA step) published
        whatever the change rule says; its scheduled reports go on as before. It is taken with this
        tick's report instants. A broker elected as it starts has only its start report (that one is its
        playLeader's). The top-k reporter's forced push is not modelled (its report is the store's)."""
        if int(self.cluster.start_ts[slot]) != now:
            self.flush_leader = slot

    # ------------------------------------------------------------------------------------- each tick
    def advance(self, now: int, local: Reports, samplers: IntArray) -> None:
        """Top-k reports of the brokers that sampled their stats; EMA steps and publications of the
        brokers whose report instants fell in this tick, and of a new leader (:meth:`leader_elected`)."""
        for s in samplers.tolist():
            self._refresh_top(s, local)
        scheduled = self.next_report_ms <= now
        extra = np.zeros_like(scheduled)
        if self.flush_leader is not None and self.cluster.alive[self.flush_leader]:
            extra[self.flush_leader] = self.forced[self.flush_leader] = True
        self.flush_leader = None
        due = np.flatnonzero(scheduled | extra)
        if not due.size:
            return
        on_time, flushed = scheduled[due], extra[due]
        steps = np.where(on_time, (now - self.next_report_ms[due]) // self.interval_ms + 1, 0)
        last_instant = np.where(flushed, now, self.next_report_ms[due] + (steps - 1) * self.interval_ms)
        self.next_report_ms[due] += steps * self.interval_ms
        steps = steps + flushed
        h = float(self.settings.load_balancer_history_resource_percentage)
        for s, n, at in zip(due.tolist(), steps.tolist(), last_instant.tolist(), strict=True):
            self.local_data[s] = self._sampled(s, local, h**n, at)
        self._publish(due, now)

    def _sampled(self, s: int, local: Reports, history: float, at: int) -> BrokerLoadData:
        usage, limit, agg = local.usage[s], local.limit[s], local.agg[s]
        resources = {
            name: ResourceUsage(float(usage[r]), float(limit[r])) for r, name in enumerate(RESOURCE_NAMES)
        }
        return self.local_data[s].updated(
            resources,
            msg_throughput_in=float(agg[2]),
            msg_throughput_out=float(agg[3]),
            msg_rate_in=float(agg[0]),
            msg_rate_out=float(agg[1]),
            bundle_count=int(local.bundles[s]),
            topics=int(local.topics[s]),
            weights=self.settings.resource_weights,
            history=history,
            now_ms=at,
        )

    def _publish(self, due: IntArray, now: int) -> None:
        """§4.3's rule on the unweighted maxResourceUsage against each broker's last published data."""
        ids = self.cluster.ids
        slots = [s for s in due.tolist() if self.cluster.alive[s]]
        if not slots:
            return
        fresh = [self.local_data[s] for s in slots]
        last = [self.published.get(ids[s]) for s in slots]
        never = np.asarray([p is None for p in last], dtype=np.bool_)
        prev = [p if p is not None else BrokerLoadData() for p in last]
        mask = need_update_mask(
            last_rate=np.asarray([p.msg_rate_in + p.msg_rate_out for p in prev]),
            last_tp=np.asarray([p.msg_throughput for p in prev]),
            last_bundles=np.asarray([float(p.bundle_count) for p in prev]),
            last_usage=np.asarray([p.max_resource_usage for p in prev]),
            rate=np.asarray([d.msg_rate_in + d.msg_rate_out for d in fresh]),
            tp=np.asarray([d.msg_throughput for d in fresh]),
            bundles=np.asarray([float(d.bundle_count) for d in fresh]),
            usage=np.asarray([d.max_resource_usage for d in fresh]),
            last_update_ms=np.asarray([p.reported_at for p in prev], dtype=np.int64),
            now_ms=now,
            conf=self.conf,
        )
        forced = self.forced[np.asarray(slots, dtype=np.int64)]
        for s, data, go in zip(slots, fresh, (mask | never | forced).tolist(), strict=True):
            if go:
                self.published[ids[s]] = _reported(data, now)
                self.reports_published += 1
                self.forced[s] = False

    def _refresh_top(self, s: int, local: Reports) -> None:
        if not self.cluster.alive[s]:
            return
        rows = np.flatnonzero(local.bundle_owner == s).astype(np.int64)
        picked = top_k_rows(
            rows,
            local.bundle_values,
            local.bundle_topics,
            self.bundle_clients,
            self.name_rank,
            self.eligible,
            int(self.settings.load_balancer_max_number_of_bundles_in_bundle_load_report),
        )
        # The report as sampled: its rows' values and topics, copied (the local report changes later).
        self.top[self.cluster.ids[s]] = _TopReport(
            picked, local.bundle_values[:, picked].copy(), local.bundle_topics[picked].copy()
        )

    # ------------------------------------------------------------------------------- the leader's view
    def available(self) -> frozenset[str]:
        """The broker registry: every alive broker (with or without published data)."""
        ids = self.cluster.ids
        return frozenset(ids[s] for s in np.flatnonzero(self.cluster.alive).tolist())

    def view(self) -> ExtensibleLoadData:
        """Both load-data stores and the registry, as the leader's table views hold them now."""
        return ExtensibleLoadData(
            brokers=dict(self.published), top_bundles=_TopView(self), available_brokers=self.available()
        )

    def top_report(self, broker: str) -> TopBundlesLoadData | None:
        """A broker's last top-k report as Pulsar's data (built when the leader reads it)."""
        report = self.top.get(broker)
        if report is None:
            return None
        if report.built is None:
            consumers, producers = self.bundle_consumers, self.bundle_producers
            values = report.values
            report.built = TopBundlesLoadData(
                tuple(
                    BundleLoadData(
                        self.bundle_names[j],
                        NamespaceBundleStats(
                            msgRateIn=float(values[0, i]),
                            msgThroughputIn=float(values[2, i]),
                            msgRateOut=float(values[1, i]),
                            msgThroughputOut=float(values[3, i]),
                            consumerCount=int(consumers[j]),
                            producerCount=int(producers[j]),
                            topics=int(report.topics[i]),
                        ),
                    )
                    for i, j in enumerate(report.rows.tolist())
                )
            )
        return report.built


@dataclass
class _TopReport:
    """A top-k report as sampled: bundle rows (smallest first), their values (4, k) and topics; the
    TopBundlesLoadData is built on first read (most reports are replaced before the leader reads them)."""

    rows: IntArray
    values: FloatArray
    topics: IntArray
    built: TopBundlesLoadData | None = None


class _TopView(Mapping[str, TopBundlesLoadData]):
    """The top-bundles store as the leader's table view: reports built when read."""

    def __init__(self, path: ExtensibleDataPath) -> None:
        self._path = path

    def __getitem__(self, broker: str) -> TopBundlesLoadData:
        report = self._path.top_report(broker)
        if report is None:
            raise KeyError(broker)
        return report

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._path.top))

    def __len__(self) -> int:
        return len(self._path.top)


def _reported(data: BrokerLoadData, now: int) -> BrokerLoadData:
    """The message as published (``reportedAt`` set; BrokerLoadData is frozen)."""
    return replace(data, reported_at=now)


class _Owners(Mapping[str, str]):
    """The service-unit state channel's owner of each bundle: the simulator's true owner, read lazily."""

    def __init__(self, path: ExtensibleDataPath) -> None:
        self._path = path

    def __getitem__(self, bundle: str) -> str:
        slot = int(self._path.cluster.owner[self._path.bundle_index[bundle]])
        if slot < 0:
            raise KeyError(bundle)
        return self._path.cluster.ids[slot]

    def __iter__(self) -> Iterator[str]:
        owner = self._path.cluster.owner
        return iter([self._path.bundle_names[j] for j in np.flatnonzero(owner >= 0).tolist()])

    def __len__(self) -> int:
        return int(np.count_nonzero(self._path.cluster.owner >= 0))


class _MaxTopicCountFilter:
    """``BrokerMaxTopicCountFilter``: drops every candidate whose *published* BrokerLoadData has
    ``topics >= loadBalancerBrokerMaxTopics``; a broker without published data counts 0 topics.

    Unlike the modular manager's max-topics filter (:mod:`shedlab.manager.loop`), it counts no preallocated
    topics (the extensible manager has none), removes a broker *at* the limit, and never falls back to the
    unfiltered set: with every candidate removed, a placement finds no broker and ``isTransferable`` is
    false. The published count can lag the broker's own (Pulsar's TODO says as much); the leader only has it.
    """

    def __init__(self, path: ExtensibleDataPath, limit: int) -> None:
        self._path = path
        self._limit = limit

    def __call__(self, candidates: frozenset[str], bundle: str) -> frozenset[str]:
        published = self._path.published
        return frozenset(
            b for b in candidates if (published[b].topics if b in published else 0) < self._limit
        )


class ExtensibleManager:
    """The extensible manager's leader: ``UnloadScheduler`` around TransferShedder, and ``assign`` with its
    LeastResourceUsageWithWeight. Duck-typed like :class:`~shedlab.manager.LoadManager` where the kernel
    calls it (no preallocations: the extensible manager has none)."""

    def __init__(self, conf: LoadBalancerConfig, path: ExtensibleDataPath, seed: np.random.Generator) -> None:
        self.conf = conf
        self.path = path
        self.settings = path.settings
        self.scheduler = UnloadScheduler(TransferShedder())
        self.placement = ExtensibleLeastResourceUsageWithWeight(rng=seed)
        # The broker filter pipeline as it can act here (see the module docstring); TransferShedder gets it
        # as policies, so its isTransferable runs it over the available brokers as Pulsar's does.
        self.max_topics = _MaxTopicCountFilter(path, int(conf.load_balancer_broker_max_topics))
        self.policies = TransferPolicies(broker_filters=(self.max_topics,))
        self.transfers: dict[str, str] = {}
        # bundles whose destination already saw its ``Owned`` event (a transfer's, at the decision), so the
        # clients' arrival there is no new assignment: no second tombstone at the lookup
        self.owned_at_decision: set[str] = set()
        self.preallocated: dict[str, dict[str, Any]] = {}
        self.preallocated_bundle_to_broker: dict[str, str] = {}
        self.unload_bundle_total = 0
        self.unload_broker_total = 0
        self.last_result: TransferSheddingResult | None = None
        self._difference = float(conf.load_balancer_average_resource_usage_difference_threshold_percentage)
        # TransferShedder's skipped triggers are not yet typed records (its reasons are in last_result);
        # the kernel drains this list like the modular manager's
        self.skip_log: list[Skip] = []

    @property
    def affinity(self) -> dict[str, str]:
        """An admin unload with a destination (the sandbox's ``setNamespaceBundleAffinity``) is a transfer
        in the extensible manager: the bundle's next assignment lands on it."""
        return self.transfers

    def seed_state(
        self,
        *,
        usage_history: Mapping[str, float] | None = None,
        hit_counts: Mapping[str, tuple[int, int]] | None = None,
        recently_unloaded: Mapping[str, int] | None = None,
    ) -> None:
        """A scenario's ``leader_state`` is the modular strategies' state (usage histories, AvgShedder's hit
        counters, bundles in their grace period); the extensible manager keeps none of it, and ignores it
        as a modular strategy without such state does, so one scenario serves every pair."""

    def on_active_brokers_change(self, active: list[str]) -> None:
        """Transfers to a broker that left are dropped (the state channel would fail them)."""
        alive = set(active)
        self.transfers = {b: d for b, d in self.transfers.items() if d in alive}

    def on_bundle_data_update(self, snapshot: ClusterSnapshot, *, leader_owned: set[str]) -> None:
        """No preallocations to clean up."""

    def _select(self, bundle: str, candidates: tuple[str, ...] | None = None) -> str | None:
        available = self.path.available()
        pool = available if candidates is None else available & frozenset(candidates)
        return self.placement.select_broker(
            self.max_topics(pool, bundle),
            bundle,
            self.path.published,
            difference_threshold_percentage=self._difference,
        ).broker

    def lookup(
        self,
        bundle: str,
        snapshot: ClusterSnapshot,
        now_ms: int,
        candidates: tuple[str, ...] | None = None,
    ) -> Assignment:
        """A transfer's destination (bound by the state channel), else the extensible placement among
        ``candidates`` when given (a pinned start: the brokers an isolation policy would allow)."""
        dest = self.transfers.pop(bundle, None)
        announced = bundle in self.owned_at_decision
        self.owned_at_decision.discard(bundle)
        if dest is not None and dest in self.path.available():
            if not announced:  # an unload without transfer, an admin unload: assigned now
                self.path.tombstone(dest, now_ms)
            return Assignment(bundle, dest, "affinity")
        broker = self._select(bundle, candidates)
        if broker is None:
            return Assignment(bundle, None, "none")
        self.path.tombstone(broker, now_ms)  # Owned at its destination
        return Assignment(bundle, broker, "placement")

    def do_load_shedding(self, snapshot: ClusterSnapshot, now_ms: int) -> list[ManagerDecision]:
        """``UnloadScheduler.execute`` on the published stores; every decision completes at ``now_ms``."""
        result = self.scheduler.execute(
            self.path.view(), self.settings, now_ms=now_ms, owners=_Owners(self.path), policies=self.policies
        )
        self.last_result = result
        if result is None or not result.unloads:
            return []
        decisions = []
        sources: set[str] = set()
        for unload in result.unloads:
            dest = unload.destination if unload.destination is not None else self._select(unload.bundle)
            # Quirk (transfer off): the lookup's selectAsync excludes no broker, so the bundle can land on
            # its source again; the unload (Releasing, Free) and its bookkeeping happen all the same. Pulsar
            # has no "destination is the current owner" skip here, unlike the modular manager's.
            if dest is None:
                continue
            self.transfers[unload.bundle] = dest
            self.path.tombstone(unload.broker, now_ms)  # Releasing at its source
            if unload.destination is not None:  # a transfer: Owned at the destination right after
                self.path.tombstone(dest, now_ms)
                self.owned_at_decision.add(unload.bundle)
            self.scheduler.record_completed(unload, now_ms)
            self.unload_bundle_total += 1
            sources.add(unload.broker)
            reason = {
                "strategy": "TransferShedder",
                **unload.reason,
                "transfer": unload.destination is not None,
                "load_avg": result.load_avg,
                "load_std": result.load_std,
                "load_std_after": result.load_std_after,
            }
            decisions.append(ManagerDecision(now_ms, unload.broker, unload.bundle, dest, reason))
        self.unload_broker_total += len(sources)
        return decisions
