"""TransferShedder: the extensible load manager's (PIP-192) shedding strategy, spec §8.

Goal: bring the standard deviation of the brokers' load below ``loadBalancerBrokerLoadTargetStd``
by moving load from the most to the least loaded brokers, pairing them from the outside in, and
naming the destination of every move (a *transfer*) so that placement cannot undo it.

What it reads differs from the modular manager's strategies (``docs/transfer-shedder.md``):

* a broker's load is the **broker-side** ``weightedMaxEMA`` of its :class:`BrokerLoadData` — an EMA
  advanced on every local sample and published on a topic, not a history the leader keeps;
* data older than ``loadBalancerBrokerLoadDataTTLInSeconds`` (by the broker's ``updatedAt``) is ignored;
* bundles come from each broker's **top-k report** (:class:`TopBundlesLoadData`), smallest first, so
  only the k largest bundles of a broker can ever move.

One call (spec §8.3):

1. Sort every broker of the load store by ``weightedMaxEMA`` (min first). Sum the loads of the brokers
   whose data is fresh; stop with **CoolDown** if a recently unloaded broker has not published data
   sampled ``loadBalanceSheddingDelayInSeconds`` after its unload. Skip with **OutDatedData** /
   **NoBrokers** when nothing counts, **NoLoadData** when an available broker has no data.
2. The condition ``std > target ∨ underloaded(min) ∨ overloaded(max)`` must hold on more consecutive
   calls than ``loadBalancerSheddingConditionHitCountThreshold`` (**HitCount** otherwise).
3. Pair max and min brokers, at most ``loadBalancerMaxNumberOfBrokerSheddingPerCycle`` of them: move
   the max broker's smallest top bundles until about half the load gap (in throughput) is marked,
   never its last top bundle; if the next bundle overshoots, try a *swap* (min's bundles go to max).
   After each pair, the std is re-estimated as if the marked share of load had moved.

Quirks reproduced (each tested):

* Brokers whose data is outdated are left out of the average but **stay in the sorted list**, so
  they can still be picked as the max (source) or min (destination) broker.
* Brokers in the store but no longer available are counted and can be picked too (the store, not the
  registry, is iterated); only *available brokers without data* stop the cycle (NoLoadData).
* The cool-down compares the broker's ``updatedAt`` (its own clock) with the unload time, not the
  leader's clock; an expired entry is removed from ``recently_unloaded_brokers`` (the map is mutated).
* The hit count is reset only by a cycle that decides something, or when the condition is false; a
  cycle that passes the hit-count gate but finds nothing to move keeps the count.
* A max broker that yields nothing ("continue") does not advance the min index: the next max broker
  is paired with the same min broker. The sorted list is never re-sorted within a cycle.
* ``isUnderLoaded`` compares the min broker's ``msgThroughputEMA`` with the broker currently at the
  max end of the list (``peekMaxBroker``), which moves as max brokers are polled.
* Swap bundles (min → max) skip the owner, excluded-namespace and recently-unloaded checks that
  the max broker's bundles get; only transferability and zero throughput are checked. The iterator
  over the min broker's bundles is shared by all bundles of one max broker, and swap candidates
  accepted before a failed swap attempt are dropped.
* ``trafficMarkedToGain`` grows by the swapped throughput **only when loadBalancerDebugModeEnabled**,
  so debug mode changes later decisions of the same pair and the std estimate. (Pulsar's test is
  ``ExtensibleLoadManagerImpl.debug``: the key, or TransferShedder's logger at DEBUG; shedlab has no
  logger level to read, so only the key counts.)
* With transfer off, the min broker must still survive the policy filters for a bundle to be
  unloadable, although no destination is bound.

Deliberate deviations:

* Ties in load (Java: ``HashMap`` order through a stable sort) are broken by broker id, and the sum
  of loads is taken in broker-id order (Java: hash order; the last bits of avg/std may differ).
* Decisions come back as a list in decision order (Java returns a ``HashSet``): for each max broker,
  any swap moves before the max-broker bundle that triggered them.
* Java catches any exception and counts Failure/Unknown; here only a failed registry lookup
  (``available_brokers is None``) is a Failure, so bugs keep their traceback. A broker filter raising
  :class:`BrokerFilterError` makes the bundle non-transferable, as in Java.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from shedlab.config import LoadBalancerConfig, to_snake_case
from shedlab.model.pulsar import namespace_of
from shedlab.strategies.base import SheddingResult, Unload
from shedlab.strategies.extensible_data import (
    BrokerLoadData,
    BundleLoadData,
    ExtensibleLoadData,
    ResourceWeights,
)

__all__ = [
    "BrokerFilter",
    "BrokerFilterError",
    "LoadStats",
    "TransferPolicies",
    "TransferShedder",
    "TransferShedderSettings",
    "TransferSheddingResult",
    "UnloadScheduler",
]

Label = Literal["Success", "Skip", "Failure"]
"""``UnloadDecision.Label``."""

OVERLOADED = "Overloaded"
UNDERLOADED = "Underloaded"

_SWAP_MAX_SHARE = 0.75
"""A swap must leave the max broker below 75 % of its throughput (a constant in Pulsar)."""


def _java_div(a: float, b: float) -> float:
    """Java's double division: x/0 is ±∞ (NaN for 0/0) instead of an exception."""
    if b != 0:
        return a / b
    if a == 0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _java_sqrt(x: float) -> float:
    """Java's Math.sqrt: NaN for a negative argument instead of an exception."""
    return math.sqrt(x) if x >= 0 else math.nan


@dataclass(frozen=True)
class TransferShedderSettings:
    """Every setting TransferShedder (and the broker-side EMA it reads) depends on, with Pulsar's defaults.

    Field names are config.py's snake_case forms of the Pulsar keys in :attr:`PULSAR_KEYS`.
    """

    load_balancer_broker_load_target_std: float = 0.25
    load_balancer_shedding_condition_hit_count_threshold: int = 3
    load_balancer_transfer_enabled: bool = True
    load_balancer_max_number_of_broker_shedding_per_cycle: int = 3
    load_balance_shedding_delay_in_seconds: int = 180
    load_balancer_broker_load_data_ttl_in_seconds: int = 1800
    load_balancer_broker_overloaded_threshold_percentage: int = 85
    load_balancer_shedding_excluded_namespaces: frozenset[str] = frozenset()
    load_balancer_shedding_bundles_with_policies_enabled: bool = False
    load_balancer_debug_mode_enabled: bool = False
    load_balancer_max_number_of_bundles_in_bundle_load_report: int = 10
    load_balancer_history_resource_percentage: float = 0.9
    load_balancer_enabled: bool = True
    load_balancer_shedding_enabled: bool = True
    load_balancer_shedding_grace_period_minutes: int = 30
    resource_weights: ResourceWeights = field(default_factory=ResourceWeights)

    PULSAR_KEYS: ClassVar[Mapping[str, str]] = {
        to_snake_case(key): key
        for key in (
            "loadBalancerBrokerLoadTargetStd",
            "loadBalancerSheddingConditionHitCountThreshold",
            "loadBalancerTransferEnabled",
            "loadBalancerMaxNumberOfBrokerSheddingPerCycle",
            "loadBalanceSheddingDelayInSeconds",
            "loadBalancerBrokerLoadDataTTLInSeconds",
            "loadBalancerBrokerOverloadedThresholdPercentage",
            "loadBalancerSheddingExcludedNamespaces",
            "loadBalancerSheddingBundlesWithPoliciesEnabled",
            "loadBalancerDebugModeEnabled",
            "loadBalancerMaxNumberOfBundlesInBundleLoadReport",
            "loadBalancerHistoryResourcePercentage",
            "loadBalancerEnabled",
            "loadBalancerSheddingEnabled",
            "loadBalancerSheddingGracePeriodMinutes",
        )
    }
    """Field → Pulsar key; ``resource_weights`` gathers the five ``loadBalancer*ResourceWeight`` keys."""

    @classmethod
    def from_config(cls, conf: LoadBalancerConfig) -> TransferShedderSettings:
        """The settings of a full config (config.py parses and validates every key)."""
        values: dict[str, Any] = {name: conf.get(key) for name, key in cls.PULSAR_KEYS.items()}
        cpu, direct, bw_in, bw_out = conf.resource_weights()
        memory = float(conf.get("loadBalancerMemoryResourceWeight"))
        values["load_balancer_shedding_excluded_namespaces"] = frozenset(
            values["load_balancer_shedding_excluded_namespaces"]
        )
        return cls(**values, resource_weights=ResourceWeights(cpu, memory, direct, bw_in, bw_out))

    @classmethod
    def from_pulsar(cls, mapping: Mapping[str, Any], source: str = "mapping") -> TransferShedderSettings:
        """Pulsar's defaults overridden by ``mapping`` (Pulsar key names, broker.conf-style values).

        Parsing, type checks and 'did you mean' hints for misspelt keys are config.py's, so a bad value
        raises :class:`~shedlab.errors.ConfigError` naming ``source``, key and value.
        """
        return cls.from_config(LoadBalancerConfig().with_overrides(mapping, source))

    def to_pulsar_dict(self) -> dict[str, Any]:
        """The settings under Pulsar's key names (weights under their non-deprecated keys)."""
        out = {key: getattr(self, name) for name, key in self.PULSAR_KEYS.items()}
        out["loadBalancerSheddingExcludedNamespaces"] = sorted(
            self.load_balancer_shedding_excluded_namespaces
        )
        w = self.resource_weights
        out.update(
            {
                "loadBalancerCPUResourceWeight": w.cpu,
                "loadBalancerMemoryResourceWeight": w.memory,
                "loadBalancerDirectMemoryResourceWeight": w.direct_memory,
                "loadBalancerBandwidthInResourceWeight": w.bandwidth_in,
                "loadBalancerBandwidthOutResourceWeight": w.bandwidth_out,
            }
        )
        return out


class BrokerFilterError(Exception):
    """A broker filter failed (Pulsar: ``BrokerFilterException`` or a timeout): the bundle stays put."""


BrokerFilter = Callable[[frozenset[str], str], frozenset[str]]
"""One stage of the broker filter pipeline: (candidate broker ids, full bundle name) → kept ids."""


@dataclass(frozen=True)
class TransferPolicies:
    """What ``isTransferable`` consults: namespace policies and the broker filter pipeline.

    Passing no policies to :meth:`TransferShedder.find_bundles_for_unloading` makes every bundle
    transferable, as Pulsar's test constructor (no ``PulsarService``) does.
    """

    isolation_namespaces: frozenset[str] = frozenset()
    anti_affinity_namespaces: frozenset[str] = frozenset()
    broker_filters: tuple[BrokerFilter, ...] = ()

    def shedding_allowed(self, bundle: str, settings: TransferShedderSettings) -> bool:
        """``isLoadBalancerSheddingBundlesWithPoliciesEnabled``: a bundle whose namespace has isolation or
        anti-affinity policies may be shed only when ``loadBalancerSheddingBundlesWithPoliciesEnabled``."""
        ns = namespace_of(bundle)
        if ns in self.isolation_namespaces or ns in self.anti_affinity_namespaces:
            return settings.load_balancer_shedding_bundles_with_policies_enabled
        return True


class LoadStats:
    """TransferShedder's ``LoadStats``: the brokers sorted by load and the running avg/std estimate."""

    def __init__(self, brokers: Mapping[str, BrokerLoadData]) -> None:
        # Java: brokersSortedByLoad.sort(Comparator.comparingDouble(weightedMaxEMA)) in setLoadDataStore,
        # i.e. Double.compare, for which -0.0 < 0.0 (the sign is the second key; NaN cannot be read).
        # Deviation: ties by broker id (Java: HashMap order through a stable sort).
        self.sorted_brokers: list[str] = sorted(
            brokers,
            key=lambda b: (
                brokers[b].weighted_max_ema,
                math.copysign(1.0, brokers[b].weighted_max_ema),
                b,
            ),
        )
        self.max_index = len(self.sorted_brokers) - 1
        self.min_index = 0
        self.sum = 0.0
        self.sq_sum = 0.0
        self.total_brokers = 0
        self.avg = 0.0
        self.std = 0.0
        self.shed_count = 0

    def set_sums(self, total: float, sq_sum: float, count: int) -> None:
        """Population mean and std of the counted loads (``LoadStats.update``)."""
        self.sum, self.sq_sum, self.total_brokers = total, sq_sum, count
        if count == 0:
            self.avg = self.std = 0.0
        else:
            self.avg = total / count
            # Quirk: equal loads can round the variance to a tiny negative number; Java's sqrt then
            # gives NaN, and NaN > targetStd is false (only offload() takes the abs).
            self.std = _java_sqrt(sq_sum / count - self.avg * self.avg)

    def offload(self, max_load: float, min_load: float, amount: float) -> None:
        """Re-estimate std as if ``amount`` of load moved from max to min (avg unchanged), then advance min.

        The max broker cannot go below 0; ``abs`` guards the rounding of a variance near 0.
        """
        self.sq_sum -= max_load * max_load + min_load * min_load
        new_max = max(0.0, max_load - amount)
        new_min = min_load + amount
        self.sq_sum += new_max * new_max + new_min * new_min
        self.std = math.sqrt(abs(self.sq_sum / self.total_brokers - self.avg * self.avg))
        self.shed_count += 1
        self.min_index += 1

    def peek_min(self) -> str:
        return self.sorted_brokers[self.min_index]

    def peek_max(self) -> str:
        return self.sorted_brokers[self.max_index]

    def poll_max(self) -> str:
        broker = self.sorted_brokers[self.max_index]
        self.max_index -= 1
        return broker

    def has_transferable_brokers(self, max_per_cycle: int) -> bool:
        return self.shed_count < max_per_cycle and self.min_index < self.max_index


@dataclass
class TransferSheddingResult(SheddingResult):
    """A TransferShedder decision: the unloads (each with its destination when transfer is on) plus
    Pulsar's ``UnloadDecision`` label and reason for the cycle and the load statistics.

    ``label``/``reason`` are what Pulsar's unload counter records: ``Success`` with no reason, or
    ``Skip``/``Failure`` with one of CoolDown, OutDatedData, NoBrokers, NoLoadData, HitCount, NoBundles,
    Unknown. ``load_avg``/``load_std`` are the values the counter publishes (None when the cycle stopped
    before computing them); ``load_std_after`` is the std estimate after the planned moves.
    """

    label: Label = "Success"
    reason: str | None = None
    load_avg: float | None = None
    load_std: float | None = None
    load_std_after: float | None = None
    hit_count: int = 0

    def skip(self, label: Label, reason: str, **detail: Any) -> TransferSheddingResult:
        self.label, self.reason = label, reason
        self.skipped.append({"label": label, "reason": reason, **detail})
        return self


@dataclass
class _PairOutcome:
    """What walking one max broker's top bundles decided."""

    unloads: list[Unload] = field(default_factory=list)
    marked: float = 0.0
    gained: float = 0.0


class TransferShedder:
    """Pulsar's ``org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder``.

    Not a :class:`~shedlab.strategies.base.SheddingStrategy`: it reads the extensible manager's data
    (:class:`ExtensibleLoadData`), not a modular-manager snapshot. The only state between calls is the
    hit count of the shedding condition, as in Pulsar.
    """

    name: ClassVar[str] = "TransferShedder"

    def __init__(self) -> None:
        self.unload_condition_hit_count = 0

    def on_active_brokers_change(self, active: Collection[str]) -> None:
        """Nothing per broker to forget (the hit count is cluster-wide)."""

    # ------------------------------------------------------------------------------------------ a cycle
    def find_bundles_for_unloading(
        self,
        data: ExtensibleLoadData,
        settings: TransferShedderSettings | None = None,
        *,
        now_ms: int,
        recently_unloaded_bundles: Mapping[str, int] | None = None,
        recently_unloaded_brokers: MutableMapping[str, int] | None = None,
        owners: Mapping[str, str] | None = None,
        policies: TransferPolicies | None = None,
    ) -> TransferSheddingResult:
        """One shedding cycle at leader time ``now_ms``.

        ``recently_unloaded_*`` are the UnloadScheduler's maps (bundle / source broker → unload time, ms);
        expired broker entries are removed from ``recently_unloaded_brokers`` as Pulsar does. ``owners``
        (bundle → owner broker) stands for the service-unit state channel: a top bundle whose owner is
        not the max broker is skipped; None skips that check. ``policies``: see :class:`TransferPolicies`.
        """
        conf = settings if settings is not None else TransferShedderSettings()
        result = TransferSheddingResult()
        if data.available_brokers is None:
            return result.skip("Failure", "Unknown", detail="available brokers lookup failed")
        stats = LoadStats(data.brokers)
        skip_reason = self._update_stats(
            stats,
            data,
            conf,
            now_ms,
            recently_unloaded_brokers if recently_unloaded_brokers is not None else {},
            result.skipped,
        )
        if skip_reason is not None:
            return result.skip("Skip", skip_reason)
        result.load_avg, result.load_std = stats.avg, stats.std

        if self._condition(stats, data, conf):
            self.unload_condition_hit_count += 1
        else:
            self.unload_condition_hit_count = 0
        result.hit_count = self.unload_condition_hit_count
        threshold = conf.load_balancer_shedding_condition_hit_count_threshold
        if self.unload_condition_hit_count <= threshold:
            result.load_std_after = stats.std
            return result.skip(
                "Skip", "HitCount", hit_count=self.unload_condition_hit_count, threshold=threshold
            )

        counts = self._shed(stats, data, conf, result, recently_unloaded_bundles or {}, owners, policies)
        result.load_std_after = stats.std
        if not result.unloads:
            no_data, few_bundles = counts
            reason = "NoLoadData" if no_data > 0 else "NoBundles" if few_bundles > 0 else "HitCount"
            return result.skip("Skip", reason)
        self.unload_condition_hit_count = 0
        result.hit_count = 0
        return result

    @staticmethod
    def _update_stats(
        stats: LoadStats,
        data: ExtensibleLoadData,
        conf: TransferShedderSettings,
        now_ms: int,
        recently_unloaded_brokers: MutableMapping[str, int],
        skipped: list[dict[str, Any]],
    ) -> str | None:
        """``LoadStats.update``: the skip reason, or None with avg/std set (spec §8.3 step 2).

        Brokers left out of the statistics, and why, are appended to ``skipped``.
        """
        ttl_ms = conf.load_balancer_broker_load_data_ttl_in_seconds * 1000
        delay_ms = conf.load_balance_shedding_delay_in_seconds * 1000
        reason: str | None = None
        total = sq_sum = 0.0
        count = 0
        for broker in sorted(data.brokers):  # deviation: id order (Java: hash order)
            load_data = data.brokers[broker]
            if now_ms - load_data.updated_at > ttl_ms:
                reason = "OutDatedData"
                skipped.append({"broker": broker, "reason": reason, "age_ms": now_ms - load_data.updated_at})
                continue
            unloaded_at = recently_unloaded_brokers.get(broker)
            if unloaded_at is not None:
                elapsed = load_data.updated_at - unloaded_at
                if elapsed < delay_ms:
                    stats.set_sums(0.0, 0.0, 0)
                    skipped.append(
                        {"broker": broker, "reason": "CoolDown", "sampled_after_unload_ms": elapsed}
                    )
                    return "CoolDown"
                del recently_unloaded_brokers[broker]
            load = load_data.weighted_max_ema
            total += load
            sq_sum += load * load
            count += 1
        if count == 0:
            stats.set_sums(0.0, 0.0, 0)
            return reason or "NoBrokers"
        assert data.available_brokers is not None
        missing = sorted(b for b in data.available_brokers if b not in data.brokers)
        if missing:
            stats.set_sums(0.0, 0.0, 0)
            skipped.append(
                {"brokers": missing, "reason": "NoLoadData", "detail": "available without load data"}
            )
            return "NoLoadData"
        stats.set_sums(total, sq_sum, count)
        return None

    # ------------------------------------------------------------------------------------- conditions
    def _condition(self, stats: LoadStats, data: ExtensibleLoadData, conf: TransferShedderSettings) -> bool:
        return (
            stats.std > conf.load_balancer_broker_load_target_std
            or self.is_under_loaded(stats.peek_min(), stats, data, conf)
            or self.is_over_loaded(stats.peek_max(), stats.avg, data, conf)
        )

    @staticmethod
    def is_under_loaded(
        broker: str, stats: LoadStats, data: ExtensibleLoadData, conf: TransferShedderSettings
    ) -> bool:
        """Load below ``avg·m``, or throughput EMA below ``m`` × the current max broker's, with
        ``m = min(0.5, max(0, targetStd/2))`` (spec §8.3)."""
        load_data = data.brokers.get(broker)
        if load_data is None:
            return False
        m = min(0.5, max(0.0, conf.load_balancer_broker_load_target_std / 2.0))
        if load_data.weighted_max_ema < stats.avg * m:
            return True
        max_data = data.brokers.get(stats.peek_max())
        if max_data is None:
            return False
        return load_data.msg_throughput_ema < max_data.msg_throughput_ema * m

    @staticmethod
    def is_over_loaded(
        broker: str, avg: float, data: ExtensibleLoadData, conf: TransferShedderSettings
    ) -> bool:
        """Load above the overload threshold **and** above ``avg + targetStd`` (both strict)."""
        load_data = data.brokers.get(broker)
        if load_data is None:
            return False
        load = load_data.weighted_max_ema
        threshold = conf.load_balancer_broker_overloaded_threshold_percentage / 100.0
        return load > threshold and load > avg + conf.load_balancer_broker_load_target_std

    @staticmethod
    def is_transferable(
        bundle: str,
        source: str,
        destination: str,
        available_brokers: Collection[str],
        conf: TransferShedderSettings,
        policies: TransferPolicies | None,
    ) -> bool:
        """``isTransferable``: policies allow shedding, and ``destination`` survives the filter pipeline.

        With transfer on, the destination must remain a candidate; with transfer off, any candidate other
        than the source will do — but the destination must still have survived the filters (quirk).
        """
        if policies is None:
            return True
        if not policies.shedding_allowed(bundle, conf):
            return False
        candidates = frozenset(available_brokers)
        for broker_filter in policies.broker_filters:
            try:
                candidates = broker_filter(candidates, bundle)
            except BrokerFilterError:
                return False
        if destination not in candidates:
            return False
        candidates = candidates - {source}
        if not conf.load_balancer_transfer_enabled:
            return bool(candidates)
        return destination in candidates

    # --------------------------------------------------------------------------------------- shedding
    def _cycle_reason(
        self, stats: LoadStats, data: ExtensibleLoadData, conf: TransferShedderSettings
    ) -> str | None:
        if stats.std > conf.load_balancer_broker_load_target_std:
            return OVERLOADED
        if self.is_under_loaded(stats.peek_min(), stats, data, conf):
            return UNDERLOADED
        if self.is_over_loaded(stats.peek_max(), stats.avg, data, conf):
            return OVERLOADED
        return None

    def _shed(
        self,
        stats: LoadStats,
        data: ExtensibleLoadData,
        conf: TransferShedderSettings,
        result: TransferSheddingResult,
        recent_bundles: Mapping[str, int],
        owners: Mapping[str, str] | None,
        policies: TransferPolicies | None,
    ) -> tuple[int, int]:
        """The pairing loop (spec §8.3 step 4).

        Returns (#brokers without data, #brokers with too few bundles) for the final skip reason.
        """
        no_data = few_bundles = 0
        while stats.has_transferable_brokers(conf.load_balancer_max_number_of_broker_shedding_per_cycle):
            reason = self._cycle_reason(stats, data, conf)
            if reason is None:
                result.skipped.append({"reason": "target met", "std": stats.std})
                break
            max_broker = stats.poll_max()
            min_broker = stats.peek_min()
            max_data, min_data = data.brokers.get(max_broker), data.brokers.get(min_broker)
            top = data.top_bundles.get(max_broker)
            if max_data is None or min_data is None or top is None or len(top) == 0:
                no_data += 1
                result.skipped.append(
                    {"broker": max_broker, "reason": "NoLoadData", "detail": "no top bundles"}
                )
                continue
            if len(top) == 1:
                few_bundles += 1
                result.skipped.append(
                    {"broker": max_broker, "reason": "NoBundles", "detail": "sole top bundle"}
                )
                continue
            pair = _Pair(max_broker, min_broker, max_data, min_data, reason)
            outcome = self._walk(
                pair, top.top_bundles_load_data, data, conf, result, recent_bundles, owners, policies
            )
            if outcome.marked > 0:
                result.unloads.extend(outcome.unloads)
                moved = _java_div((outcome.marked - outcome.gained) * pair.max_load, pair.max_tp)
                stats.offload(pair.max_load, pair.min_load, moved)
            else:
                few_bundles += 1
                result.skipped.append(
                    {"broker": max_broker, "reason": "NoBundles", "detail": "nothing movable"}
                )
        else:
            result.skipped.append(
                {
                    "reason": "pairs exhausted",
                    "brokers_shed": stats.shed_count,
                    "limit": conf.load_balancer_max_number_of_broker_shedding_per_cycle,
                }
            )
        return no_data, few_bundles

    def _walk(
        self,
        pair: _Pair,
        top: tuple[BundleLoadData, ...],
        data: ExtensibleLoadData,
        conf: TransferShedderSettings,
        result: TransferSheddingResult,
        recent_bundles: Mapping[str, int],
        owners: Mapping[str, str] | None,
        policies: TransferPolicies | None,
    ) -> _PairOutcome:
        """Walk the max broker's top bundles, smallest first, marking moves until the offload target."""
        available = data.available_brokers or frozenset()
        transfer = conf.load_balancer_transfer_enabled
        min_top = data.top_bundles.get(pair.min_broker)
        swap_iter = iter(min_top.top_bundles_load_data) if min_top is not None else None
        out = _PairOutcome()
        remaining = len(top)
        excluded = conf.load_balancer_shedding_excluded_namespaces
        for entry in top:
            bundle = entry.bundle_name
            skip = self._bundle_skip(bundle, pair, owners, excluded, recent_bundles)
            if skip is None and not self.is_transferable(
                bundle, pair.max_broker, pair.min_broker, available, conf, policies
            ):
                skip = "not transferable (policies or filters)"
            if skip is not None:
                result.skipped.append({"broker": pair.max_broker, "bundle": bundle, "reason": skip})
                continue
            if remaining <= 1:
                result.skipped.append(
                    {"broker": pair.max_broker, "bundle": bundle, "reason": "last top bundle"}
                )
                break
            tp = entry.msg_throughput
            if tp == 0:
                result.skipped.append(
                    {"broker": pair.max_broker, "bundle": bundle, "reason": "zero throughput"}
                )
                continue
            swaps: list[Unload] = []
            if out.marked - out.gained + tp > pair.offload_tp:
                swaps, swapped_tp = self._try_swap(pair, tp, out, swap_iter, available, conf, policies)
                if not swaps:
                    result.skipped.append(
                        {
                            "broker": pair.max_broker,
                            "bundle": bundle,
                            "reason": "exceeds offload target and no swap",
                            "marked": out.marked - out.gained + tp,
                            "target": pair.offload_tp,
                        }
                    )
                    break
                out.unloads.extend(swaps)
                if conf.load_balancer_debug_mode_enabled:  # quirk: only debug mode books the gain
                    out.gained += swapped_tp
            out.unloads.append(
                Unload(
                    pair.max_broker,
                    bundle,
                    pair.reason_detail(tp, swap=bool(swaps)),
                    destination=pair.min_broker if transfer else None,
                )
            )
            out.marked += tp
            remaining -= 1
        return out

    @staticmethod
    def _bundle_skip(
        bundle: str,
        pair: _Pair,
        owners: Mapping[str, str] | None,
        excluded: frozenset[str],
        recent_bundles: Mapping[str, int],
    ) -> str | None:
        if owners is not None and owners.get(bundle) != pair.max_broker:
            return "max broker is not the owner"
        if namespace_of(bundle) in excluded:
            return "excluded namespace"
        if bundle in recent_bundles:
            return "recently unloaded"
        return None

    def _try_swap(
        self,
        pair: _Pair,
        tp: float,
        out: _PairOutcome,
        swap_iter: Iterator[BundleLoadData] | None,
        available: Collection[str],
        conf: TransferShedderSettings,
        policies: TransferPolicies | None,
    ) -> tuple[list[Unload], float]:
        """Look for min-broker bundles to send back so the pair ends balanced; ([], 0) if none works.

        Continues the iterator shared by the max broker's bundles; accepted candidates are dropped if
        the swap condition (min ≤ max and max < 75 % of its throughput) is never reached.
        """
        if not conf.load_balancer_transfer_enabled or swap_iter is None:
            return [], 0.0
        max_new = pair.max_tp - out.marked + out.gained - tp
        min_new = pair.min_tp + out.marked - out.gained + tp
        accepted: list[Unload] = []
        swapped = 0.0
        for entry in swap_iter:
            if not self.is_transferable(
                entry.bundle_name, pair.min_broker, pair.max_broker, available, conf, policies
            ):
                continue
            b_tp = entry.msg_throughput
            if b_tp == 0:
                continue
            max_tmp, min_tmp = max_new + b_tp, min_new - b_tp
            if max_tmp < pair.max_tp and min_tmp < pair.max_tp:
                accepted.append(
                    Unload(
                        pair.min_broker,
                        entry.bundle_name,
                        pair.reason_detail(b_tp, swap=True, direction="min to max"),
                        destination=pair.max_broker,
                    )
                )
                max_new, min_new = max_tmp, min_tmp
                swapped += b_tp
                if min_new <= max_new and max_new < pair.max_tp * _SWAP_MAX_SHARE:
                    return accepted, swapped
        return [], 0.0


class _Pair:
    """One (max, min) broker pair and its offload target (spec §8.3 step 4)."""

    def __init__(
        self,
        max_broker: str,
        min_broker: str,
        max_data: BrokerLoadData,
        min_data: BrokerLoadData,
        reason: str,
    ) -> None:
        self.max_broker, self.min_broker, self.reason = max_broker, min_broker, reason
        self.max_load = max_data.weighted_max_ema
        self.min_load = min_data.weighted_max_ema
        self.offload = (self.max_load - self.min_load) / 2
        self.max_tp = max_data.msg_throughput
        self.min_tp = min_data.msg_throughput
        # A max load of 0 (reached through the throughput-EMA underload test) gives NaN as in Java, and
        # every "exceeds the target" comparison with NaN is false.
        self.offload_tp = _java_div(self.max_tp * self.offload, self.max_load)

    def reason_detail(
        self, throughput: float, *, swap: bool, direction: str = "max to min"
    ) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "direction": direction,
            "swap": swap,
            "bundle_throughput": throughput,
            "offload_throughput": self.offload_tp,
            "max_load": self.max_load,
            "min_load": self.min_load,
        }


class UnloadScheduler:
    """The leader's shedding task around TransferShedder (``UnloadScheduler.execute``, spec §8.2).

    It owns the two maps TransferShedder reads: ``recently_unloaded_bundles`` (bundle → completion time)
    and ``recently_unloaded_brokers`` (source broker → completion time). Unloads are asynchronous in
    Pulsar: the caller reports each completed one with :meth:`record_completed`, which is when both
    maps are written — for swap moves too, so after a swap *both* brokers of the pair cool down.
    """

    def __init__(self, shedder: TransferShedder | None = None) -> None:
        self.shedder = shedder if shedder is not None else TransferShedder()
        self.recently_unloaded_bundles: dict[str, int] = {}
        self.recently_unloaded_brokers: dict[str, int] = {}

    def execute(
        self,
        data: ExtensibleLoadData,
        settings: TransferShedderSettings | None = None,
        *,
        now_ms: int,
        channel_owner: bool = True,
        owners: Mapping[str, str] | None = None,
        policies: TransferPolicies | None = None,
    ) -> TransferSheddingResult | None:
        """One scheduled run; None when the strategy is not called (disabled, not the channel owner, a
        failed registry lookup, or at most one available broker)."""
        conf = settings if settings is not None else TransferShedderSettings()
        if not (conf.load_balancer_enabled and conf.load_balancer_shedding_enabled):
            return None
        # The grace period is applied before the ownership check, so every broker prunes its map.
        oldest = now_ms - conf.load_balancer_shedding_grace_period_minutes * 60_000
        for bundle in [b for b, t in self.recently_unloaded_bundles.items() if t < oldest]:
            del self.recently_unloaded_bundles[bundle]
        if not channel_owner or data.available_brokers is None or len(data.available_brokers) <= 1:
            return None
        return self.shedder.find_bundles_for_unloading(
            data,
            conf,
            now_ms=now_ms,
            recently_unloaded_bundles=self.recently_unloaded_bundles,
            recently_unloaded_brokers=self.recently_unloaded_brokers,
            owners=owners,
            policies=policies,
        )

    def record_completed(self, unload: Unload, now_ms: int) -> None:
        """An unload or transfer finished at ``now_ms`` (within ``namespaceBundleUnloadingTimeoutMs``)."""
        self.recently_unloaded_bundles[unload.bundle] = now_ms
        self.recently_unloaded_brokers[unload.broker] = now_ms
