"""Pulsar's leader loop (``ModularLoadManagerImpl``, spec §4), independent of where snapshots come from.

:class:`LoadManager` holds the state the Pulsar leader keeps in memory between shedding cycles and
lookups, and nothing else:

* the *recently unloaded* map (bundle → time of its unload) and its grace period (§4.4 step 3);
* the one-shot *affinity* map (bundle → destination chosen during shedding), popped by the next
  lookup of the bundle (§4.7, master semantics: keyed by the full bundle name);
* *preallocations* (broker → bundles assigned to it by lookups but not yet visible in its reports,
  and bundle → broker), with Pulsar's cleanup rule (§4.5 step 12, from #19420);
* the counters Pulsar exports as ``pulsar_lb_unload_bundle_total`` and ``pulsar_lb_unload_broker_total``;
* the shedding and placement strategy instances (their own state: histories, hit counters).

Everything it knows about the cluster comes from the :class:`~shedlab.model.snapshot.ClusterSnapshot`
passed to each call, which stands for the leader's ``LoadData`` as left by the last ``updateAll``
(stale by construction: it holds the last *published* reports). The simulator builds snapshots from
its arrays; the Spark replay builds them from recorded load reports. The manager does not mutate
the snapshots it is given: it works on a shallow copy whose ``bundle_recently_unloaded`` mask and
``preallocated_*`` arrays it fills from its own state (the leader is the only authority for both).
Snapshots are treated as immutable: pass a new object when the data changes.

Candidate filtering (``selectBroker``, §4.5) implemented:

1. the available brokers: every broker of the snapshot whose report serves persistent topics
   (``persistentTopicsEnabled``: the bundles shedlab places hold persistent topics; no isolation policies,
   see "left out" below);
2. the max-topics filter (``loadBalancerBrokerMaxTopics``, counting preallocated topics), undone when
   it would remove every broker;
3. the even-distribution filter (``loadBalancerDistributeBundlesEvenlyEnabled``, always for the
   ``pulsar/system`` namespace): keep the candidates owning the fewest bundle ranges of the bundle's
   namespace, counting reported and preallocated ranges;
4. the broker filter pipeline (``BrokerLoadManagerClassFilter``, ``BrokerVersionFilter`` with
   ``preferLaterVersions``; :mod:`shedlab.manager.filters`), from the report fields a snapshot of Pulsar's
   LoadData carries (the simulator's keep every broker); a throwing version filter restores step 1;
5. an empty set falls back to step 1; the placement strategy chooses (namespaces listed in
   ``loadBalancerSheddingExcludedNamespaces`` use Pulsar's round-robin selector instead, which cycles
   through the candidates in the order of Java's ``HashSet`` of them, :mod:`shedlab.manager.hash_order`);
6. the overload re-check: when the chosen broker's weighted usage is above
   ``loadBalancerBrokerOverloadedThresholdPercentage``, the strategy is asked again over every available
   broker and its answer, if any, is used (stateful strategies thus advance twice, as in Pulsar).

Left out, and why:

* **Namespace isolation policies** (§4.5 step 2, §4.4 b): neither the simulator nor Pulsar's load reports
  carry policies, so every broker is a "shared" broker and step 2 is "all available brokers" that serve
  persistent topics; §4.4 b then unloads only when one of them is not the owner.
* **Anti-affinity groups and failure domains** (§4.5 step 4, §4.4 c): namespace policies again; without
  them Pulsar's filter keeps every candidate.
* **Bundle splitting** (§4.8) and the leader's periodic bundle-data writes (§4.9) are not part of the
  loop here; the simulator accounts for the extra time-average sample of §4.9 itself.
* **Admin errors** (§4.4 f): an unload always succeeds.

One defensive deviation: Pulsar returns an affinity or a preallocation without checking that the
broker is still alive (the lookup then fails and is retried). :meth:`LoadManager.lookup` skips an
affinity or preallocation pointing to a broker that is not in the snapshot and assigns normally.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.manager.filters import SemVer, filter_pipeline, parse_semver
from shedlab.manager.hash_order import FRESH_TABLE, REUSED_MAP_STRATEGIES, hash_map_order
from shedlab.model.pulsar import DEFAULT_MESSAGE_RATE, SYSTEM_NAMESPACE, NameIndex, namespace_of
from shedlab.model.snapshot import BoolArray, ClusterSnapshot, FloatArray, IntArray, LeaderMemory
from shedlab.strategies import guard, make_pair
from shedlab.strategies.base import (
    Placement,
    PlacementStrategy,
    SheddingResult,
    SheddingStrategy,
    Skip,
    SkipKind,
)

"""The namespace Pulsar always distributes evenly, whatever the configuration says."""

AssignmentPath = Literal["affinity", "preallocated", "placement", "none"]


@runtime_checkable
class HistoryState(Protocol):
    """A strategy keeping an exponential usage history per broker, which a scenario may preset."""

    def seed_history(self, values: Mapping[str, float]) -> None: ...


@runtime_checkable
class HitCountState(Protocol):
    """A strategy keeping consecutive hit counters per broker (AvgShedder), which a scenario may preset."""

    def seed_hit_counts(self, counts: Mapping[str, tuple[int, int]]) -> None: ...


@dataclass(frozen=True)
class ManagerDecision:
    """One unload by the leader: ``bundle`` leaves ``source``; its next lookup lands on ``destination``.

    ``reason`` is the shedding strategy's reason (the numbers that led to the unload) plus, under
    ``"placement"``, how the destination was chosen: the placement rule, the set it was drawn from
    (``choices``), the number of candidates after filtering and whether the overload re-check ran.
    """

    time_ms: int
    source: str
    bundle: str
    destination: str
    reason: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class PreallocatedBundle:
    """What the leader keeps of a preallocated bundle: what LeastLongTermMessageRate and the filters read."""

    long_term_msg_rate: float  # longTermData msgRateIn + msgRateOut
    topics: int


@dataclass(frozen=True)
class Assignment:
    """The answer to a lookup of an unowned bundle, and how it was reached."""

    bundle: str
    broker: str | None
    path: AssignmentPath
    placement: Placement | None = None


@dataclass
class _View:
    """The manager's working copy of a snapshot plus derived arrays, valid while the snapshot is."""

    source: ClusterSnapshot
    snap: ClusterSnapshot
    usage: FloatArray  # U(b), weighted max usage
    everyone: IntArray
    pre_rate: FloatArray
    pre_topics: IntArray
    versions: list[SemVer | None] | None = None  # each broker's brokerVersionString, parsed (filters.py)
    topics_kept: IntArray | None = None  # ``everyone`` after the max-topics filter, while pre_topics holds


class _RecentMask:
    """The recently-unloaded mask over one :class:`NameIndex`, kept in step with the map it mirrors.

    Rebuilding it every cycle looked up each recently unloaded bundle (hundreds: a grace period of
    unloads) in the name index (100,000 entries, far out of the CPU's caches); between two cycles only the
    bundles unloaded or expired since differ, so only those are looked up. The map is compared whole
    (the symmetric difference of its keys and the mirrored ones, one C-level pass), so changes made to it
    from outside are seen too.
    """

    def __init__(self, names: NameIndex) -> None:
        self.names = names
        self.mask = np.zeros(len(names.names), dtype=np.bool_)
        self.rows: dict[str, int] = {}  # the bundles the mask holds → their row (-1: not one of the names)

    def of(self, recent: dict[str, int]) -> BoolArray:
        """The mask of ``recent``'s bundles (a copy: the snapshot holding it must not change)."""
        rows, mask, index = self.rows, self.mask, self.names.index
        for bundle in rows.keys() ^ recent.keys():  # unloaded or expired since the last call
            if bundle in rows:
                j = rows.pop(bundle)
                if j >= 0:
                    mask[j] = False
            else:
                j = rows[bundle] = index.get(bundle, -1)
                if j >= 0:
                    mask[j] = True
        return mask.copy()


class _RoundRobin:
    """Pulsar's RoundRobinBrokerSelector (spec §3.4), for shedding-excluded namespaces."""

    def __init__(self) -> None:
        self.count = 0
        self.cache: list[str] = []

    def select(self, candidates: list[str]) -> str | None:
        n = len(candidates)
        if n == 0:
            return None
        index = self.count % n
        self.count = 0 if self.count == 2147483647 else self.count + 1
        if len(self.cache) <= index or n != len(self.cache):
            self.cache = list(candidates)
        selected = self.cache[index]
        if selected not in candidates:
            self.cache = list(candidates)
            selected = self.cache[index]
        return selected


class LoadManager:
    """Pulsar's leader: shedding cycles (``doLoadShedding``) and lookups of unowned bundles.

    ``seed`` drives the strategies' random choices (ignored for strategies passed in). Both
    strategies default to the configured pair, built with :func:`shedlab.strategies.make_pair`.
    """

    def __init__(
        self,
        conf: LoadBalancerConfig,
        *,
        seed: int | np.random.Generator | None = None,
        shedding: SheddingStrategy | None = None,
        placement: PlacementStrategy | None = None,
    ) -> None:
        if shedding is None or placement is None:
            default_shedding, default_placement = make_pair(conf, seed)
            shedding = shedding if shedding is not None else default_shedding
            placement = placement if placement is not None else default_placement
        self.conf = conf
        self.shedding: SheddingStrategy = shedding
        self.placement: PlacementStrategy = placement
        self.recently_unloaded: dict[str, int] = {}
        self.affinity: dict[str, str] = {}
        self.preallocated: dict[str, dict[str, PreallocatedBundle]] = {}
        self.preallocated_bundle_to_broker: dict[str, str] = {}
        self._preallocated_by_namespace: dict[str, dict[str, str]] = {}
        self.unload_bundle_total = 0
        self.unload_broker_total = 0
        self.last_result: SheddingResult | None = None
        self.last_skipped: list[dict[str, Any]] = []
        self.skip_log: list[Skip] = []
        """Every decision not taken since the caller last cleared it (shedding and placement), typed."""
        self._view: _View | None = None
        self._names: NameIndex | None = None
        self._recent: _RecentMask | None = None
        self._round_robin = _RoundRobin()
        self._plan_table = FRESH_TABLE  # the length of the hash table of the strategy's multimap
        self._candidate_table = FRESH_TABLE  # the same of the leader's brokerCandidateCache (a HashSet)
        self._overload = conf.load_balancer_broker_overloaded_threshold_percentage / 100.0
        self._excluded = frozenset(conf.load_balancer_shedding_excluded_namespaces)

    # ------------------------------------------------------------------ shedding (§4.4)
    def do_load_shedding(self, snapshot: ClusterSnapshot, now_ms: int) -> list[ManagerDecision]:
        """One shedding cycle at ``now_ms``; returns the unloads performed, in Pulsar's order
        (``ModularLoadManagerImpl.doLoadShedding``: source brokers in hash order, see :meth:`_plan_order`,
        each one's bundles in the strategy's order)."""
        conf = self.conf
        self.last_result = None
        self.last_skipped = []
        if not (conf.load_balancer_enabled and conf.load_balancer_shedding_enabled):
            return []
        if snapshot.num_brokers <= 1:
            return []
        cutoff = now_ms - conf.load_balancer_shedding_grace_period_minutes * 60_000
        recent = self.recently_unloaded  # drop the entries older than the grace period, keep the order
        for bundle in list(compress(recent, map(operator.lt, recent.values(), repeat(cutoff)))):
            del recent[bundle]
        view = self._refresh(snapshot, now_ms, force=True)
        result = guard.shed(self.shedding, view.snap, conf)
        self.last_result = result
        self.skip_log.extend(result.skips)
        by_source: dict[str, list[int]] = {}
        for k, unload in enumerate(result.unloads):
            by_source.setdefault(unload.broker, []).append(k)
        decisions: list[ManagerDecision] = []
        for source in self._plan_order(list(by_source)):
            unloaded_any = False
            for k in by_source[source]:
                unload = result.unloads[k]
                skip = self._skip_reason(unload.bundle)
                if skip is not None:
                    self.last_skipped.append({"broker": source, "bundle": unload.bundle, "reason": skip})
                    self.skip_log.append(Skip(SkipKind.EXCLUDED_NAMESPACE, source))
                    continue
                if not self._has_other_candidate(view, source):
                    why = "no other broker for the namespace's policies"
                    self.last_skipped.append({"broker": source, "bundle": unload.bundle, "reason": why})
                    self.skip_log.append(Skip(SkipKind.NO_DESTINATION, source))
                    continue
                placement, info = self._select_broker(view, unload.bundle)
                info["choices"] = list(placement.choices)  # named here only: lookups do not need them
                dest = placement.broker
                if dest is None or dest == source:
                    why = "no destination broker" if dest is None else "destination is the current owner"
                    self.last_skipped.append(
                        {"broker": source, "bundle": unload.bundle, "reason": why, "placement": info}
                    )
                    kind = SkipKind.NO_DESTINATION if dest is None else SkipKind.DESTINATION_IS_OWNER
                    self.skip_log.append(Skip(kind, source))
                    continue
                self.affinity[unload.bundle] = dest
                self.recently_unloaded[unload.bundle] = now_ms
                self.unload_bundle_total += 1
                unloaded_any = True
                reason = {**unload.reason, "placement": info}
                decisions.append(ManagerDecision(now_ms, source, unload.bundle, dest, reason))
            if unloaded_any:
                self.unload_broker_total += 1
        return decisions

    def restore(self, memory: LeaderMemory) -> None:
        """Take over a leader's memory (a LoadData dump's): its recently unloaded bundles, at their unload
        times, and its brokers' preallocated bundles. What this manager already holds is kept, so a
        dump read again every cycle (``advise --watch`` on a file) does not reset it. The grace period
        then prunes the unloads at the next cycle, as Pulsar's ``doLoadShedding`` does at its start."""
        for bundle, at in memory.recently_unloaded.items():
            self.recently_unloaded.setdefault(bundle, at)
        for broker, entries in memory.preallocated.items():
            per_broker = self.preallocated.setdefault(broker, {})
            for bundle, (rate, topics) in entries.items():
                per_broker.setdefault(bundle, PreallocatedBundle(rate, topics))
        self._reindex_preallocations()
        self._view = None

    def withdraw_unloads(self, unloads: Sequence[tuple[str, str]], done: Collection[str]) -> None:
        """Undo the bookkeeping of ``unloads`` (source broker, bundle: the last :meth:`do_load_shedding`'s)
        whose unload did not happen, i.e. whose bundle is not in ``done``: for a caller that sends the
        unloads itself and some are not sent or fail (``advise --execute``). Pulsar's ``doLoadShedding``
        records a bundle in ``recentlyUnloadedBundles`` and counts it (``unloadBundleCount``, and its
        broker in ``unloadBrokerCount``) only after the admin call returned; the affinity is set by the
        leader's unload endpoint, which a call not sent never reached."""
        sources = {source for source, _ in unloads}
        kept = {source for source, bundle in unloads if bundle in done}
        for _source, bundle in unloads:
            if bundle not in done:
                self.recently_unloaded.pop(bundle, None)
                self.affinity.pop(bundle, None)
                self.unload_bundle_total -= 1
        self.unload_broker_total -= len(sources - kept)

    def _plan_order(self, sources: list[str]) -> list[str]:
        """The source brokers in the order ``doLoadShedding`` walks ``bundlesToUnload.asMap()``: a Java
        ``HashMap``'s (:mod:`shedlab.manager.hash_order`). The order can change decisions, not only the
        order of the lines: each destination is chosen in turn by a placement strategy that may keep state
        between calls (the modular LeastResourceUsageWithWeight's usage history)."""
        reused = self.shedding.name in REUSED_MAP_STRATEGIES
        order, table = hash_map_order(sources, self._plan_table if reused else FRESH_TABLE)
        if reused:  # the strategy's multimap is a field, cleared each call: its table never shrinks
            self._plan_table = table
        return order

    @staticmethod
    def _has_other_candidate(view: _View, source: str) -> bool:
        """Quirk (ModularLoadManagerImpl.shouldNamespacePoliciesUnload, spec §4.4 step 5b): the leader
        unloads only when the bundle's policy set (§4.5 step 2: without isolation policies, the brokers
        serving its persistent topics) holds a broker besides its owner, and checks it before it asks
        the placement strategy, whose state a call would move even though the unload is skipped."""
        everyone = view.everyone  # distinct broker indices: one besides the source unless it is all
        i = view.snap.broker_index.get(source)
        return everyone.size > 1 or (everyone.size == 1 and int(everyone[0]) != i)

    def _skip_reason(self, bundle: str) -> str | None:
        """§4.4 step 5 a–c; only the shedding-excluded namespaces apply here (see module docstring)."""
        if self._excluded and namespace_of(bundle) in self._excluded:
            return "namespace excluded from shedding"
        return None

    # ------------------------------------------------------------------ state at the start
    def seed_state(
        self,
        *,
        usage_history: Mapping[str, float] | None = None,
        hit_counts: Mapping[str, tuple[int, int]] | None = None,
        recently_unloaded: Mapping[str, int] | None = None,
    ) -> None:
        """Start as a leader that has been running: strategies' state and the recently-unloaded map.

        ``usage_history`` (broker → weighted max usage as a fraction) goes to every strategy that keeps
        one (ThresholdShedder's and LeastResourceUsageWithWeight's exponential histories);
        ``hit_counts`` (broker → (high, low) consecutive hits) to AvgShedder; ``recently_unloaded``
        (bundle → unload time, ms) makes those bundles wait out their grace period. A strategy without
        such state ignores it, so one scenario serves every pair.
        """
        for strategy in {id(s): s for s in (self.shedding, self.placement)}.values():
            if usage_history and isinstance(strategy, HistoryState):
                strategy.seed_history(usage_history)
            if hit_counts and isinstance(strategy, HitCountState):
                strategy.seed_hit_counts(hit_counts)
        if recently_unloaded:
            self.recently_unloaded.update(recently_unloaded)
        self._view = None

    # ------------------------------------------------------------------ lookups (§4.5, §4.7)
    def assign(self, bundle: str, snapshot: ClusterSnapshot, now_ms: int) -> str | None:
        """The broker a lookup of the unowned ``bundle`` lands on (None when no broker is available)."""
        return self.lookup(bundle, snapshot, now_ms).broker

    def lookup(
        self,
        bundle: str,
        snapshot: ClusterSnapshot,
        now_ms: int,
        *,
        candidates: Collection[str] | None = None,
    ) -> Assignment:
        """Like :meth:`assign`, also telling which path answered (affinity, preallocation or placement).

        ``candidates`` restricts placement to those brokers, as a namespace isolation policy's primary
        brokers would (§4.5 step 2): the filters and the strategy then run on that set only.
        """
        dest = self.affinity.pop(bundle, None)
        if dest and dest in snapshot.broker_index:
            return Assignment(bundle, dest, "affinity")
        pre = self.preallocated_bundle_to_broker.get(bundle)
        if pre is not None and pre in snapshot.broker_index:
            return Assignment(bundle, pre, "preallocated")
        view = self._refresh(snapshot, now_ms)
        allowed = None
        if candidates is not None:
            allowed = snapshot.indices_of(sorted(c for c in candidates if c in snapshot.broker_index))
        placement, _ = self._select_broker(view, bundle, allowed)
        if placement.broker is None:
            return Assignment(bundle, None, "none", placement)
        self._preallocate(view, bundle, placement.broker)
        return Assignment(bundle, placement.broker, "placement", placement)

    def select_broker(self, bundle: str, snapshot: ClusterSnapshot, now_ms: int) -> Placement:
        """``selectBroker`` (§4.5 steps 1–11) without preallocation, e.g. to preview a destination."""
        return self._select_broker(self._refresh(snapshot, now_ms), bundle)[0]

    def _select_broker(
        self, view: _View, bundle: str, allowed: IntArray | None = None
    ) -> tuple[Placement, dict[str, Any]]:
        snap, conf = view.snap, self.conf
        namespace = namespace_of(bundle)
        everyone = view.everyone if allowed is None else allowed
        candidates = everyone
        candidates = self._max_topics_filter(view, candidates)
        if conf.load_balancer_distribute_bundles_evenly_enabled or namespace == SYSTEM_NAMESPACE:
            candidates = self._even_distribution_filter(view, candidates, namespace)
        candidates = filter_pipeline(snap, candidates, everyone, conf, view.versions)
        if candidates.size == 0:
            candidates = everyone
        info: dict[str, Any] = {"candidates": int(candidates.size)}
        if self._excluded and namespace in self._excluded:
            # Quirk (RoundRobinBrokerSelector.selectBroker): it copies the candidate set as it iterates,
            # and the leader's set is a java.util.HashSet (ModularLoadManagerImpl.brokerCandidateCache):
            # the brokers come in its bucket order (ties within a bucket by broker id), not by id.
            by_id = [snap.broker_ids[i] for i in candidates.tolist()]
            names, _ = hash_map_order(by_id, self._candidate_table)
            chosen = self._round_robin.select(names)
            placement = Placement(chosen, tuple(sorted(names)), {"strategy": "RoundRobinBrokerSelector"})
        else:
            placement = guard.select_broker(self.placement, candidates, bundle, snap, conf)
        if placement.broker is not None:
            i = snap.broker_index.get(placement.broker)
            if i is not None and view.usage[i] > self._overload:
                info["overload_recheck"] = {"broker": placement.broker, "usage": float(view.usage[i])}
                again = guard.select_broker(self.placement, everyone, bundle, snap, conf)
                if again.broker is not None:
                    placement = again
        info.update(rule=placement.reason.get("rule"), strategy=placement.reason.get("strategy"))
        if placement.skip is not None:
            self.skip_log.append(Skip(placement.skip, placement.broker))
        return placement, info

    def _max_topics_filter(self, view: _View, candidates: IntArray) -> IntArray:
        if candidates is view.everyone:  # every lookup and unload of a cycle: filtered once per view
            if view.topics_kept is None:
                view.topics_kept = self._below_max_topics(view, candidates)
            return view.topics_kept
        return self._below_max_topics(view, candidates)

    def _below_max_topics(self, view: _View, candidates: IntArray) -> IntArray:
        limit = self.conf.load_balancer_broker_max_topics
        topics = view.snap.num_topics[candidates] + view.pre_topics[candidates]
        kept = candidates[topics <= limit]
        return kept if kept.size else candidates

    def _even_distribution_filter(self, view: _View, candidates: IntArray, namespace: str) -> IntArray:
        """Keep the candidates owning the fewest ranges of ``namespace`` (reported + preallocated)."""
        snap = view.snap
        names = self._name_index(snap)
        members = names.members.get(namespace)
        owners = snap.bundle_owner[members] if members is not None else snap.bundle_owner[:0]
        counts = np.bincount(owners[owners >= 0], minlength=snap.num_brokers).astype(np.int64, copy=False)
        for bundle, broker in self._preallocated_by_namespace.get(namespace, {}).items():
            i = snap.broker_index.get(broker)
            if i is None:
                continue
            j = names.index.get(bundle)
            if j is None or snap.bundle_owner[j] != i:
                counts[i] += 1
        if candidates.size == 0:
            return candidates
        candidate_counts = counts[candidates]
        result: IntArray = candidates[candidate_counts == candidate_counts.min()]
        return result

    # ------------------------------------------------------------------ preallocation (§4.5 step 12)
    def _preallocate(self, view: _View, bundle: str, broker: str) -> None:
        snap = view.snap
        j = self._name_index(snap).index.get(bundle)
        if j is not None and snap.bundle_has_data[j]:
            entry = PreallocatedBundle(
                float(snap.long_msg_rate_in[j] + snap.long_msg_rate_out[j]), int(snap.bundle_topics[j])
            )
        else:  # getBundleDataOrDefault: Pulsar's default BundleData (50 + 50 msg/s, no topics)
            entry = PreallocatedBundle(2 * DEFAULT_MESSAGE_RATE, 0)
        per_broker = self.preallocated.setdefault(broker, {})
        old = per_broker.get(bundle)
        per_broker[bundle] = entry
        self.preallocated_bundle_to_broker[bundle] = broker
        self._preallocated_by_namespace.setdefault(namespace_of(bundle), {})[bundle] = broker
        i = snap.broker_index[broker]
        if old is not None:
            view.pre_rate[i] -= old.long_term_msg_rate
            view.pre_topics[i] -= old.topics
        view.pre_rate[i] += entry.long_term_msg_rate
        view.pre_topics[i] += entry.topics
        view.topics_kept = None

    def on_bundle_data_update(
        self,
        snapshot: ClusterSnapshot,
        *,
        leader_owned: Collection[str] = (),
    ) -> None:
        """Pulsar's preallocation cleanup, run by every ``updateBundleData`` (a report arrived).

        Every preallocated bundle is dropped from the bundle → broker map. A broker's preallocated
        data is kept only for bundles owned by the leader broker itself (``leader_owned``, its local
        ownership cache) that the broker does not yet report with bundle data. In practice a
        preallocation for another broker lives until the next report arrives anywhere.
        """
        self.preallocated_bundle_to_broker.clear()
        if not self.preallocated:
            return
        names = self._name_index(snapshot)
        owned = leader_owned if isinstance(leader_owned, (set, frozenset, dict)) else set(leader_owned)
        for broker in list(self.preallocated):
            entries = self.preallocated[broker]
            i = snapshot.broker_index.get(broker)
            kept: dict[str, PreallocatedBundle] = {}
            for bundle, entry in entries.items():
                if bundle not in owned:
                    continue
                j = names.index.get(bundle)
                reported = (
                    i is not None
                    and j is not None
                    and snapshot.bundle_owner[j] == i
                    and bool(snapshot.bundle_has_data[j])
                )
                if not reported:
                    kept[bundle] = entry
            if kept:
                self.preallocated[broker] = kept
            else:
                del self.preallocated[broker]
        self._reindex_preallocations()
        self._view = None

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """The broker set changed: tell both strategies and reap preallocations of dead brokers."""
        alive = active if isinstance(active, (set, frozenset)) else set(active)
        guard.notify_active_brokers(self.shedding, alive)
        if self.placement is not self.shedding:  # type: ignore[comparison-overlap]
            guard.notify_active_brokers(self.placement, alive)
        for broker in [b for b in self.preallocated if b not in alive]:
            del self.preallocated[broker]
        self.preallocated_bundle_to_broker = {
            b: owner for b, owner in self.preallocated_bundle_to_broker.items() if owner in alive
        }
        self._reindex_preallocations()
        self._view = None

    def _reindex_preallocations(self) -> None:
        """Rebuild namespace → (bundle → broker) of the preallocated data (the leader's range cache)."""
        by_ns: dict[str, dict[str, str]] = {}
        for broker, entries in self.preallocated.items():
            for bundle in entries:
                by_ns.setdefault(namespace_of(bundle), {})[bundle] = broker
        self._preallocated_by_namespace = by_ns

    # ------------------------------------------------------------------ views
    def _name_index(self, snapshot: ClusterSnapshot) -> NameIndex:
        self._names = NameIndex.reuse(self._names, snapshot.bundle_names)
        return self._names

    def _refresh(self, snapshot: ClusterSnapshot, now_ms: int, *, force: bool = False) -> _View:
        """The working copy of ``snapshot`` with the manager's recently-unloaded and preallocation data."""
        view = self._view
        if view is not None and view.source is snapshot and not force:
            return view
        # U(b) on the snapshot itself, before the copy shares its caches: its other readers (the
        # simulator's metrics) then find it computed
        usage = snapshot.weighted_max_usage(self.conf.resource_weights())
        snap = copy.copy(snapshot)
        snap.now_ms = now_ms
        names = self._name_index(snapshot)
        if self._recent is None or self._recent.names is not names:
            self._recent = _RecentMask(names)
        snap.bundle_recently_unloaded = self._recent.of(self.recently_unloaded)
        n = snapshot.num_brokers
        pre_rate = np.zeros(n)
        pre_topics = np.zeros(n, dtype=np.int64)
        for broker, entries in self.preallocated.items():
            i = snapshot.broker_index.get(broker)
            if i is None:
                continue
            # Java sums the preallocated bundles in map order (LeastLongTermMessageRate.getScore).
            total = 0.0
            for entry in entries.values():
                total += entry.long_term_msg_rate
                pre_topics[i] += entry.topics
            pre_rate[i] = total
        snap.preallocated_long_term_msg_rate = pre_rate
        snap.preallocated_topics = pre_topics
        persistent = snapshot.broker_persistent_topics
        everyone = np.arange(n, dtype=np.int64) if persistent is None else np.flatnonzero(persistent)
        view = _View(snapshot, snap, usage, everyone, pre_rate, pre_topics)
        if self._excluded:  # every selectBroker fills brokerCandidateCache with these: its table grows
            ids = [snapshot.broker_ids[i] for i in everyone.tolist()]
            _, self._candidate_table = hash_map_order(ids, self._candidate_table)
        if snapshot.broker_version is not None and self.conf.prefer_later_versions:
            view.versions = [parse_semver(v) for v in snapshot.broker_version]
        self._view = view
        return view
