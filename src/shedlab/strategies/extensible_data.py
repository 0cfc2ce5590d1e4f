"""The extensible load manager's (PIP-192) load data: what TransferShedder and its placement read.

The modular manager's leader keeps its own histories (``LoadData``, spec §1.4–§1.6); the extensible
manager does not. Each broker computes its own load EMA and publishes it, with a top-k bundle
report, on two system topics (spec §8.1). The leader only reads the latest message per broker, so
everything a decision uses was computed *on the brokers*, at *their* sampling times:

* :class:`BrokerLoadData` (``extensions.data.BrokerLoadData``): resources, broker totals, the
  unweighted ``maxResourceUsage``, the broker-side ``weightedMaxEMA`` and ``msgThroughputEMA``,
  ``updatedAt`` (last local sample) and ``reportedAt`` (last publication).
* :class:`TopBundlesLoadData` (``extensions.data.TopBundlesLoadData``): the broker's top-k bundles,
  stored **smallest first** (:func:`top_k_bundles`, ``models.TopKBundles``).
* :class:`ExtensibleLoadData`: the leader's view of both stores plus the available-broker registry.

JSON field names are exactly Pulsar's (Jackson's rendering of the Java fields); the container
document of :func:`read_extensible_load_data` is shedlab's own (Pulsar keeps the two stores in
separate table views), documented there.

These classes live under ``strategies/`` for now because ``model/`` is being rewritten; they belong
in ``model/`` next to ``LocalBrokerData`` once that settles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shedlab.errors import InputError
from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import (
    RESOURCE_NAMES,
    NamespaceBundleStats,
    ResourceUsage,
    is_system_heartbeat_bundle,
    java_max,
    java_round,
    namespace_of,
    resources_from_json,
)

__all__ = [
    "DEFAULT_RESOURCE_USAGE",
    "BrokerLoadData",
    "BundleLoadData",
    "ExtensibleLoadData",
    "ResourceWeights",
    "TopBundlesLoadData",
    "bundle_stats_key",
    "is_system_service_namespace",
    "read_extensible_load_data",
    "top_k_bundles",
]

DEFAULT_RESOURCE_USAGE = 1.0
"""BrokerLoadData's ``maxResourceUsage`` and ``weightedMaxEMA`` before the first sample (100 %)."""


@dataclass(frozen=True)
class ResourceWeights:
    """The five ``loadBalancer*ResourceWeight`` keys as BrokerLoadData multiplies them (spec §8.1).

    Unlike the modular manager (spec §1.5), the extensible manager still multiplies heap memory by
    ``loadBalancerMemoryResourceWeight`` (default 0, so it only matters when set).
    """

    cpu: float = 1.0
    memory: float = 0.0
    direct_memory: float = 0.0
    bandwidth_in: float = 1.0
    bandwidth_out: float = 1.0

    def as_tuple(self) -> tuple[float, float, float, float, float]:
        """In RESOURCE_NAMES order: cpu, memory, directMemory, bandwidthIn, bandwidthOut."""
        return (self.cpu, self.memory, self.direct_memory, self.bandwidth_in, self.bandwidth_out)


@dataclass(frozen=True)
class BrokerLoadData:
    """One broker's published load (``extensions.data.BrokerLoadData``, spec §8.1).

    Frozen: :meth:`updated` returns the next sample's data, as the broker's ``update`` would leave it.
    """

    cpu: ResourceUsage = field(default_factory=ResourceUsage)
    memory: ResourceUsage = field(default_factory=ResourceUsage)
    direct_memory: ResourceUsage = field(default_factory=ResourceUsage)
    bandwidth_in: ResourceUsage = field(default_factory=ResourceUsage)
    bandwidth_out: ResourceUsage = field(default_factory=ResourceUsage)
    msg_throughput_in: float = 0.0
    msg_throughput_out: float = 0.0
    msg_rate_in: float = 0.0
    msg_rate_out: float = 0.0
    bundle_count: int = 0
    topics: int = 0
    max_resource_usage: float = DEFAULT_RESOURCE_USAGE
    weighted_max_ema: float = DEFAULT_RESOURCE_USAGE
    msg_throughput_ema: float = 0.0
    updated_at: int = 0
    reported_at: int = 0

    @property
    def msg_throughput(self) -> float:
        """``msgThroughputIn + msgThroughputOut``: the broker throughput TransferShedder scales by."""
        return self.msg_throughput_in + self.msg_throughput_out

    def resources(self) -> tuple[ResourceUsage, ...]:
        """The five resources in RESOURCE_NAMES order."""
        return (self.cpu, self.memory, self.direct_memory, self.bandwidth_in, self.bandwidth_out)

    def weighted_max(self, weights: ResourceWeights) -> float:
        """``max(resource% × weight)/100`` over all five resources, memory included (spec §8.1).

        The percentages are float32 (spec §1.1), widened to double before the weight multiplies them.
        """
        pcts = [r.percent_usage() for r in self.resources()]
        return java_max(p * w for p, w in zip(pcts, weights.as_tuple(), strict=True)) / 100

    def updated(
        self,
        resources: Mapping[str, ResourceUsage],
        *,
        msg_throughput_in: float,
        msg_throughput_out: float,
        msg_rate_in: float,
        msg_rate_out: float,
        bundle_count: int,
        topics: int,
        weights: ResourceWeights,
        history: float,
        now_ms: int,
    ) -> BrokerLoadData:
        """The data after one local sample (``BrokerLoadData.update``, every reporting tick).

        ``weightedMaxEMA`` and ``msgThroughputEMA`` are seeded with the sample itself when
        ``updatedAt == 0`` (never sampled), else ``EMA·h + (1−h)·sample``; ``maxResourceUsage`` is the
        *unweighted* max of cpu, direct memory and NIC in/out (heap memory left out). The EMA advances
        per sample, not per unit of time, so its time constant is the reporting interval / (1 − h).
        """
        missing = [name for name in RESOURCE_NAMES if name not in resources]
        if missing:
            raise ValueError(f"missing resources: {missing}")
        new = replace(
            self,
            cpu=resources["cpu"],
            memory=resources["memory"],
            direct_memory=resources["directMemory"],
            bandwidth_in=resources["bandwidthIn"],
            bandwidth_out=resources["bandwidthOut"],
            msg_throughput_in=msg_throughput_in,
            msg_throughput_out=msg_throughput_out,
            msg_rate_in=msg_rate_in,
            msg_rate_out=msg_rate_out,
            bundle_count=bundle_count,
            topics=topics,
        )
        unweighted = [
            r.percent_usage() for r in (new.cpu, new.direct_memory, new.bandwidth_in, new.bandwidth_out)
        ]
        sample = new.weighted_max(weights)
        throughput = msg_throughput_in + msg_throughput_out
        first = self.updated_at == 0
        return replace(
            new,
            max_resource_usage=java_max(unweighted) / 100,
            weighted_max_ema=sample if first else self.weighted_max_ema * history + (1 - history) * sample,
            msg_throughput_ema=(
                throughput if first else self.msg_throughput_ema * history + (1 - history) * throughput
            ),
            updated_at=now_ms,
        )

    def to_json(self) -> dict[str, Any]:
        """Pulsar's JSON shape (Jackson field names)."""
        out: dict[str, Any] = {
            name: res.to_json() for name, res in zip(RESOURCE_NAMES, self.resources(), strict=True)
        }
        out.update(
            {
                "msgThroughputIn": float(self.msg_throughput_in),
                "msgThroughputOut": float(self.msg_throughput_out),
                "msgRateIn": float(self.msg_rate_in),
                "msgRateOut": float(self.msg_rate_out),
                "bundleCount": int(self.bundle_count),
                "topics": int(self.topics),
                "maxResourceUsage": float(self.max_resource_usage),
                "weightedMaxEMA": float(self.weighted_max_ema),
                "msgThroughputEMA": float(self.msg_throughput_ema),
                "updatedAt": int(self.updated_at),
                "reportedAt": int(self.reported_at),
            }
        )
        return out

    @classmethod
    def from_json(cls, r: JsonReader) -> BrokerLoadData:
        """Read Pulsar's JSON; missing fields take the Java constructor's defaults, as Jackson does."""

        usage = resources_from_json(r)
        return cls(
            cpu=usage["cpu"],
            memory=usage["memory"],
            direct_memory=usage["directMemory"],
            bandwidth_in=usage["bandwidthIn"],
            bandwidth_out=usage["bandwidthOut"],
            msg_throughput_in=r.number("msgThroughputIn", 0.0),
            msg_throughput_out=r.number("msgThroughputOut", 0.0),
            msg_rate_in=r.number("msgRateIn", 0.0),
            msg_rate_out=r.number("msgRateOut", 0.0),
            bundle_count=r.integer("bundleCount", 0),
            topics=r.integer("topics", 0),
            # >100 % is possible (spec §1.1: no clamping), negative is not.
            max_resource_usage=r.number("maxResourceUsage", DEFAULT_RESOURCE_USAGE),
            weighted_max_ema=r.number("weightedMaxEMA", DEFAULT_RESOURCE_USAGE),
            msg_throughput_ema=r.number("msgThroughputEMA", 0.0),
            updated_at=r.integer("updatedAt", 0),
            reported_at=r.integer("reportedAt", 0),
        )


@dataclass(frozen=True)
class BundleLoadData:
    """One entry of a top-k report: a full bundle name and its latest NamespaceBundleStats."""

    bundle_name: str
    stats: NamespaceBundleStats

    @property
    def msg_throughput(self) -> float:
        """``msgThroughputIn + msgThroughputOut`` of the bundle, what TransferShedder moves."""
        return self.stats.msgThroughputIn + self.stats.msgThroughputOut

    def to_json(self) -> dict[str, Any]:
        return {"bundleName": self.bundle_name, "stats": self.stats.to_json()}

    @classmethod
    def from_json(cls, r: JsonReader) -> BundleLoadData:
        name = r.string("bundleName")
        if not name or "/" not in name:
            raise InputError(
                "expected a full bundle name tenant/namespace/0x…_0x…",
                source=r.source,
                field=r.field_path("bundleName"),
                value=name,
            )
        stats = r.child("stats", None)
        return cls(name, NamespaceBundleStats() if stats is None else NamespaceBundleStats.from_json(stats))


@dataclass(frozen=True)
class TopBundlesLoadData:
    """A broker's top-k bundle report, in the stored order (smallest of the top k first)."""

    top_bundles_load_data: tuple[BundleLoadData, ...] = ()

    def __len__(self) -> int:
        return len(self.top_bundles_load_data)

    def to_json(self) -> dict[str, Any]:
        return {"topBundlesLoadData": [b.to_json() for b in self.top_bundles_load_data]}

    @classmethod
    def from_json(cls, r: JsonReader) -> TopBundlesLoadData:
        raw = r.obj.get("topBundlesLoadData")
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise InputError(
                "expected a list", source=r.source, field=r.field_path("topBundlesLoadData"), value=raw
            )
        path = r.field_path("topBundlesLoadData")
        entries: list[BundleLoadData] = []
        seen: dict[str, int] = {}
        for i, item in enumerate(raw):
            entry = BundleLoadData.from_json(JsonReader(item, r.source, f"{path}[{i}]"))
            # TopKBundles.update fills the report from a map: a bundle is in it once at most.
            if entry.bundle_name in seen:
                raise InputError(
                    f"the bundle is already in this report, at [{seen[entry.bundle_name]}]",
                    source=r.source,
                    field=f"{path}[{i}].bundleName",
                    value=entry.bundle_name,
                )
            seen[entry.bundle_name] = i
            entries.append(entry)
        return cls(tuple(entries))


def bundle_stats_key(stats: NamespaceBundleStats) -> tuple[int, int, int, int, int]:
    """NamespaceBundleStats.compareTo as a sort key (spec §1.2): larger key = more loaded.

    Throughput in, then out, each ``Math.round(v/1e5)``; then ``Math.round((rateIn+rateOut)/100)``;
    then ``(topics+consumers+producers)/500``; then ``cacheSize/100000`` (integer divisions).
    The roundings are Java's Math.round (:func:`~shedlab.model.pulsar.java_round`).
    """
    tp_in, tp_out, rate = java_round(
        (
            stats.msgThroughputIn / 1e5,
            stats.msgThroughputOut / 1e5,
            (stats.msgRateIn + stats.msgRateOut) / 100,
        )
    ).tolist()
    return (
        tp_in,
        tp_out,
        rate,
        (stats.topics + stats.consumerCount + stats.producerCount) // 500,
        stats.cacheSize // 100000,
    )


def is_system_service_namespace(namespace: str) -> bool:
    """NamespaceService.isSystemServiceNamespace: ``pulsar/system``, heartbeat and SLA-monitor namespaces."""
    return namespace == "pulsar/system" or is_system_heartbeat_bundle(namespace + "/0x00000000_0xffffffff")


def top_k_bundles(
    bundle_stats: Mapping[str, NamespaceBundleStats],
    k: int,
    *,
    excluded_namespaces: Iterable[str] = (),
    shedding_with_policies: bool = False,
    has_policies: Callable[[str], bool] | None = None,
) -> TopBundlesLoadData:
    """A broker's top-k report (``TopKBundles.update``, spec §8.1): its k largest bundles, smallest first.

    Left out: system-service namespaces, ``excluded_namespaces`` (PIP-380), bundles with zero throughput
    (master; a broker would otherwise keep reporting, and the leader keep moving, idle bundles), and —
    unless ``shedding_with_policies`` — bundles ``has_policies`` says carry isolation or anti-affinity
    policies. Ties in compareTo are ordered by bundle name (Pulsar: quick-select order; a deviation).
    """
    excluded = frozenset(excluded_namespaces)
    eligible: list[tuple[str, NamespaceBundleStats]] = []
    for name in sorted(bundle_stats):
        stats = bundle_stats[name]
        ns = namespace_of(name)
        if is_system_service_namespace(ns) or ns in excluded:
            continue
        if stats.msgThroughputIn + stats.msgThroughputOut == 0:
            continue
        if not shedding_with_policies and has_policies is not None and has_policies(name):
            continue
        eligible.append((name, stats))
    # Ascending by (compareTo key, name): the stored order. The k largest are the last k.
    eligible.sort(key=lambda item: (bundle_stats_key(item[1]), item[0]))
    keep = max(0, min(k, len(eligible)))
    top = eligible[len(eligible) - keep :]
    return TopBundlesLoadData(tuple(BundleLoadData(n, s) for n, s in top))


@dataclass(frozen=True)
class ExtensibleLoadData:
    """The leader's view in one object: both load-data stores and the broker registry.

    ``brokers`` is the broker load-data store (every broker that published and was not yet removed —
    possibly including brokers no longer available), ``top_bundles`` the top-bundles store, and
    ``available_brokers`` the registry's answer, or None when that lookup failed (Failure/Unknown).
    """

    brokers: Mapping[str, BrokerLoadData] = field(default_factory=dict)
    top_bundles: Mapping[str, TopBundlesLoadData] = field(default_factory=dict)
    available_brokers: frozenset[str] | None = frozenset()

    def to_json(self) -> dict[str, Any]:
        return {
            "availableBrokers": None if self.available_brokers is None else sorted(self.available_brokers),
            "brokerLoadData": {b: d.to_json() for b, d in sorted(self.brokers.items())},
            "topBundlesLoadData": {b: d.to_json() for b, d in sorted(self.top_bundles.items())},
        }


def read_extensible_load_data(obj: Any, source: str | None = None) -> ExtensibleLoadData:
    """Read ``{"availableBrokers": [...], "brokerLoadData": {id: BrokerLoadData}, "topBundlesLoadData":
    {id: TopBundlesLoadData}}``: each value in Pulsar's JSON, the container shedlab's own.

    ``availableBrokers`` may be null (the registry lookup failed); when absent it defaults to the brokers
    of ``brokerLoadData``. Bad values raise :class:`~shedlab.errors.InputError` naming file and field.
    """
    r = JsonReader(obj, source)
    brokers = {name: BrokerLoadData.from_json(sub) for name, sub in r.items("brokerLoadData", None)}
    top = {name: TopBundlesLoadData.from_json(sub) for name, sub in r.items("topBundlesLoadData", None)}
    available: frozenset[str] | None
    if "availableBrokers" in r.obj and r.obj["availableBrokers"] is None:
        available = None
    elif r.has("availableBrokers"):
        available = frozenset(r.string_list("availableBrokers"))
    else:
        available = frozenset(brokers)
    return ExtensibleLoadData(brokers=brokers, top_bundles=top, available_brokers=available)
