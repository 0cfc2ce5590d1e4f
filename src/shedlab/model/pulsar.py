"""Pulsar's load-balancer data classes and their JSON form (spec §1).

These mirror ``org.apache.pulsar.policies.data.loadbalancer`` field for field, and read and write
the JSON that Pulsar's admin API and metadata store hold (Jackson, NON_NULL inclusion, unknown
fields ignored). They are used at the edges (files, recordings, the ``decide`` command); the
strategies read the columnar :class:`~shedlab.model.snapshot.ClusterSnapshot` instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from shedlab.errors import InputError, did_you_mean
from shedlab.model.bundles import bundle_name_problem
from shedlab.model.formats import (
    BUNDLE_DATA,
    BUNDLE_STATS,
    LOCAL_BROKER_DATA,
    RESOURCE_USAGE,
    RESOURCES,
    TIME_AVERAGE,
    TIME_AVERAGE_PARTS,
    Field,
    check_collections,
)
from shedlab.model.json_reader import JsonReader

RESOURCE_NAMES: tuple[str, ...] = tuple(r.json for r in RESOURCES)
"""The five resources of a load report, in Pulsar's field order."""

NUM_SHORT_SAMPLES = 10
NUM_LONG_SAMPLES = 1000
DEFAULT_MESSAGE_RATE = 50.0
DEFAULT_MESSAGE_THROUGHPUT = 50000.0
MODULAR_LOAD_MANAGER = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"

_F32_100 = np.float32(100.0)


def percent_usage(usage: float, limit: float) -> float:
    """ResourceUsage.percentUsage(): computed in float32 exactly as Java does (spec §1.1).

    Java tests ``limit > 0`` on the double and divides the float casts: a positive limit too small for a
    float (below about 7e-46) is 0f there, so the percentage is ±∞ (NaN for a usage of 0), not 0 %."""
    if limit > 0:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return float((np.float32(usage) / np.float32(limit)) * _F32_100)
    return 0.0


def java_round(values: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Java's ``Math.round`` on doubles, element-wise: the long nearest each value, halves up.

    Quirk reproduced: Java computes ``floor(x + ½)`` in exact arithmetic, so 0.49999999999999994 rounds
    to 0. ``floor(x + 0.5)`` in doubles rounds the sum first (0.49999999999999994 + 0.5 is 1.0) and gave
    1. ``x − floor(x)`` is exact for a double, so comparing it with ½ is Java's result. The values must
    be finite and in a long's range (the readers refuse NaN and ∞).
    """
    x = np.asarray(values, dtype=np.float64)
    low = np.floor(x)
    out: npt.NDArray[np.int64] = (low + (x - low >= 0.5)).astype(np.int64)
    return out


def java_sum(values: npt.ArrayLike) -> float:
    """A sum of doubles added one by one in the given order, as Java's ``total += v`` loops add them.

    Why not ``sum()``: from Python 3.12 ``sum()`` of floats is compensated (Neumaier), and NumPy's
    ``sum`` adds pairwise; both can differ from Java's running total in the last bit, and a last bit can
    tip a comparison (an average against a threshold). ``np.cumsum`` adds sequentially. An empty sum is
    0.0; ∞ and −∞ together give NaN, as in Java.
    """
    x = np.asarray(values, dtype=np.float64).ravel()
    with np.errstate(invalid="ignore"):  # ∞ + −∞: Java's NaN, not an error
        return float(np.cumsum(x)[-1]) if x.size else 0.0


def java_max(values: Iterable[float]) -> float:
    """``LocalBrokerData.max``: starts at -∞ and keeps strictly larger values, so a NaN never wins (an
    ∞ % times a weight of 0 is NaN: the other resources decide) and all NaN give -∞."""
    best = float("-inf")
    for v in values:
        if v > best:
            best = v
    return best


@dataclass
class ResourceUsage:
    """One resource: ``usage`` out of ``limit`` (cpu in %-of-a-core, NIC in Kbit/s, memory in MiB)."""

    usage: float = 0.0
    limit: float = 0.0

    def percent_usage(self) -> float:
        return percent_usage(self.usage, self.limit)

    def to_json(self) -> dict[str, Any]:
        return {"usage": float(self.usage), "limit": float(self.limit)}

    @classmethod
    def from_json(cls, r: JsonReader, fields: tuple[Field, ...] = RESOURCE_USAGE) -> ResourceUsage:
        """Rules in ``fields`` (a :data:`~shedlab.model.formats.Resource`'s): by default
        :data:`~shedlab.model.formats.RESOURCE_USAGE`, any usage if ``limit ≤ 0`` (spec §1.1); a NIC's
        (:data:`~shedlab.model.formats.NIC_USAGE`) may also be negative."""
        return cls(**r.fields(fields))


def resources_from_json(r: JsonReader) -> dict[str, ResourceUsage]:
    """The five resources of a report by JSON name, each read by its own rules (a missing one is
    ``ResourceUsage()``, 0 out of 0); the modular manager's LocalBrokerData and the extensible manager's
    BrokerLoadData carry the same host usage."""
    return {
        res.json: ResourceUsage()
        if (child := r.child(res.json, None)) is None
        else ResourceUsage.from_json(child, res.fields)
        for res in RESOURCES
    }


@dataclass
class NamespaceBundleStats:
    """A bundle's instantaneous traffic sample, as a broker reports it in ``lastStats``."""

    msgRateIn: float = 0.0  # noqa: N815 - Pulsar's field names are the interface
    msgThroughputIn: float = 0.0  # noqa: N815
    msgRateOut: float = 0.0  # noqa: N815
    msgThroughputOut: float = 0.0  # noqa: N815
    consumerCount: int = 0  # noqa: N815
    producerCount: int = 0  # noqa: N815
    topics: int = 0
    cacheSize: int = 0  # noqa: N815

    def to_json(self) -> dict[str, Any]:
        return {
            "msgRateIn": float(self.msgRateIn),
            "msgThroughputIn": float(self.msgThroughputIn),
            "msgRateOut": float(self.msgRateOut),
            "msgThroughputOut": float(self.msgThroughputOut),
            "consumerCount": int(self.consumerCount),
            "producerCount": int(self.producerCount),
            "topics": int(self.topics),
            "cacheSize": int(self.cacheSize),
        }

    @classmethod
    def from_json(cls, r: JsonReader) -> NamespaceBundleStats:
        return cls(**r.fields(BUNDLE_STATS))


@dataclass
class TimeAverageMessageData:
    """A running average of a bundle's traffic: arithmetic mean, then an EMA with α = 1/maxSamples."""

    maxSamples: int = NUM_SHORT_SAMPLES  # noqa: N815
    numSamples: int = 0  # noqa: N815
    msgThroughputIn: float = 0.0  # noqa: N815
    msgThroughputOut: float = 0.0  # noqa: N815
    msgRateIn: float = 0.0  # noqa: N815
    msgRateOut: float = 0.0  # noqa: N815

    @classmethod
    def with_defaults(cls, max_samples: int) -> TimeAverageMessageData:
        """Pulsar's defaults for a bundle never seen before (50 msg/s, 50000 B/s each way)."""
        return cls(
            maxSamples=max_samples,
            numSamples=0,
            msgThroughputIn=DEFAULT_MESSAGE_THROUGHPUT,
            msgThroughputOut=DEFAULT_MESSAGE_THROUGHPUT,
            msgRateIn=DEFAULT_MESSAGE_RATE,
            msgRateOut=DEFAULT_MESSAGE_RATE,
        )

    def update(self, sample: NamespaceBundleStats) -> None:
        """Add one sample: the first overwrites the defaults, then mean, then EMA (spec §1.3)."""
        self.numSamples = min(self.numSamples + 1, self.maxSamples)
        n = self.numSamples
        self.msgThroughputIn = ((n - 1) * self.msgThroughputIn + sample.msgThroughputIn) / n
        self.msgThroughputOut = ((n - 1) * self.msgThroughputOut + sample.msgThroughputOut) / n
        self.msgRateIn = ((n - 1) * self.msgRateIn + sample.msgRateIn) / n
        self.msgRateOut = ((n - 1) * self.msgRateOut + sample.msgRateOut) / n

    def total_msg_rate(self) -> float:
        return self.msgRateIn + self.msgRateOut

    def compare_key(self) -> tuple[int, int, int]:
        """``compareTo`` as a sort key (spec §1.3): throughput in, then out, at a resolution of 1e5, then the
        total message rate at 100, each truncated as ``CompareUtil.compareDoubleWithResolution`` does."""
        return (
            int(self.msgThroughputIn / 1e5),
            int(self.msgThroughputOut / 1e5),
            int((self.msgRateIn + self.msgRateOut) / 100),
        )

    def total_msg_throughput(self) -> float:
        return self.msgThroughputIn + self.msgThroughputOut

    def to_json(self) -> dict[str, Any]:
        return {
            "maxSamples": int(self.maxSamples),
            "numSamples": int(self.numSamples),
            "msgThroughputIn": float(self.msgThroughputIn),
            "msgThroughputOut": float(self.msgThroughputOut),
            "msgRateIn": float(self.msgRateIn),
            "msgRateOut": float(self.msgRateOut),
        }

    @classmethod
    def from_json(cls, r: JsonReader, max_samples: int) -> TimeAverageMessageData:
        return cls(**r.fields(TIME_AVERAGE, {"maxSamples": max_samples}))


@dataclass
class BundleData:
    """The leader's history of one bundle: short-term (10 samples) and long-term (1000) averages."""

    shortTermData: TimeAverageMessageData = field(  # noqa: N815
        default_factory=lambda: TimeAverageMessageData.with_defaults(NUM_SHORT_SAMPLES)
    )
    longTermData: TimeAverageMessageData = field(  # noqa: N815
        default_factory=lambda: TimeAverageMessageData.with_defaults(NUM_LONG_SAMPLES)
    )
    topics: int = 0

    def update(self, stats: NamespaceBundleStats) -> None:
        self.shortTermData.update(stats)
        self.longTermData.update(stats)
        self.topics = int(stats.topics)

    def compare_key(self) -> tuple[int, ...]:
        """``BundleData.compareTo`` as a sort key (spec §1.4): short-term data first, ties by long-term."""
        return (*self.shortTermData.compare_key(), *self.longTermData.compare_key())

    def to_json(self) -> dict[str, Any]:
        return {
            "shortTermData": self.shortTermData.to_json(),
            "longTermData": self.longTermData.to_json(),
            "topics": int(self.topics),
        }

    @classmethod
    def from_json(cls, r: JsonReader) -> BundleData:
        """Both averages are required (:data:`~shedlab.model.formats.TIME_AVERAGE_PARTS`); no time."""
        (short, short_max), (long, long_max) = ((r.child(part), m) for part, _p, m in TIME_AVERAGE_PARTS)
        assert short is not None and long is not None  # child() without a default raises if missing
        return cls(
            shortTermData=TimeAverageMessageData.from_json(short, short_max),
            longTermData=TimeAverageMessageData.from_json(long, long_max),
            **r.fields(BUNDLE_DATA),
        )


@dataclass
class LocalBrokerData:
    """A broker's load report (``/loadbalance/brokers/<id>``, admin ``broker-stats/load-report``)."""

    webServiceUrl: str | None = None  # noqa: N815
    webServiceUrlTls: str | None = None  # noqa: N815
    pulsarServiceUrl: str | None = None  # noqa: N815
    pulsarServiceUrlTls: str | None = None  # noqa: N815
    persistentTopicsEnabled: bool = True  # noqa: N815
    nonPersistentTopicsEnabled: bool = True  # noqa: N815
    cpu: ResourceUsage = field(default_factory=ResourceUsage)
    memory: ResourceUsage = field(default_factory=ResourceUsage)
    directMemory: ResourceUsage = field(default_factory=ResourceUsage)  # noqa: N815
    bandwidthIn: ResourceUsage = field(default_factory=ResourceUsage)  # noqa: N815
    bandwidthOut: ResourceUsage = field(default_factory=ResourceUsage)  # noqa: N815
    msgThroughputIn: float = 0.0  # noqa: N815
    msgThroughputOut: float = 0.0  # noqa: N815
    msgRateIn: float = 0.0  # noqa: N815
    msgRateOut: float = 0.0  # noqa: N815
    lastUpdate: int = 0  # noqa: N815
    lastStats: dict[str, NamespaceBundleStats] = field(default_factory=dict)  # noqa: N815
    numTopics: int = 0  # noqa: N815
    numBundles: int = 0  # noqa: N815
    numConsumers: int = 0  # noqa: N815
    numProducers: int = 0  # noqa: N815
    bundles: list[str] = field(default_factory=list)
    lastBundleGains: list[str] = field(default_factory=list)  # noqa: N815
    lastBundleLosses: list[str] = field(default_factory=list)  # noqa: N815
    brokerVersionString: str | None = None  # noqa: N815
    protocols: dict[str, str] = field(default_factory=dict)
    advertisedListeners: dict[str, Any] = field(default_factory=dict)  # noqa: N815
    loadManagerClassName: str | None = None  # noqa: N815
    startTimestamp: int = 0  # noqa: N815

    def resource(self, name: str) -> ResourceUsage:
        value: ResourceUsage = getattr(self, name)
        return value

    def max_resource_usage(self) -> float:
        """getMaxResourceUsage(): max of cpu, directMemory, NIC in/out (memory excluded), float32."""
        pcts = [self.resource(n).percent_usage() for n in RESOURCE_NAMES if n != "memory"]  # float32 values
        return float(np.float32(java_max(pcts)) / _F32_100)

    def max_resource_usage_with_weight(
        self, cpu_w: float, direct_memory_w: float, bw_in_w: float, bw_out_w: float
    ) -> float:
        """getMaxResourceUsageWithWeight(): widened float32 percentages × weights, / 100 in double."""
        return (
            java_max(
                (
                    self.cpu.percent_usage() * cpu_w,
                    self.directMemory.percent_usage() * direct_memory_w,
                    self.bandwidthIn.percent_usage() * bw_in_w,
                    self.bandwidthOut.percent_usage() * bw_out_w,
                )
            )
            / 100
        )

    def update(self, resources: dict[str, ResourceUsage], stats: dict[str, NamespaceBundleStats]) -> None:
        """Recompute the report from fresh resources and bundle stats (LocalBrokerData.update)."""
        for name in RESOURCE_NAMES:
            setattr(self, name, resources[name])
        values = list(stats.values())
        # LocalBrokerData.updateBundleData adds each bundle's rates to running totals: java_sum
        self.msgRateIn = java_sum([s.msgRateIn for s in values])
        self.msgRateOut = java_sum([s.msgRateOut for s in values])
        self.msgThroughputIn = java_sum([s.msgThroughputIn for s in values])
        self.msgThroughputOut = java_sum([s.msgThroughputOut for s in values])
        self.numTopics = sum(s.topics for s in values)
        self.numBundles = len(values)
        self.numConsumers = sum(s.consumerCount for s in values)
        self.numProducers = sum(s.producerCount for s in values)
        owned = set(self.bundles)
        for name in list(self.bundles):
            if name not in stats:
                self.lastBundleLosses.append(name)
                owned.discard(name)
        for name in stats:
            if name not in owned:
                self.lastBundleGains.append(name)
                owned.add(name)
        self.bundles = sorted(owned)
        self.lastStats = dict(stats)

    def clean_deltas(self) -> None:
        self.lastBundleGains.clear()
        self.lastBundleLosses.clear()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("webServiceUrl", "webServiceUrlTls", "pulsarServiceUrl", "pulsarServiceUrlTls"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out["persistentTopicsEnabled"] = self.persistentTopicsEnabled
        out["nonPersistentTopicsEnabled"] = self.nonPersistentTopicsEnabled
        for name in RESOURCE_NAMES:
            out[name] = self.resource(name).to_json()
        out["msgThroughputIn"] = float(self.msgThroughputIn)
        out["msgThroughputOut"] = float(self.msgThroughputOut)
        out["msgRateIn"] = float(self.msgRateIn)
        out["msgRateOut"] = float(self.msgRateOut)
        out["lastUpdate"] = int(self.lastUpdate)
        out["lastStats"] = {k: v.to_json() for k, v in self.lastStats.items()}
        out["numTopics"] = int(self.numTopics)
        out["numBundles"] = int(self.numBundles)
        out["numConsumers"] = int(self.numConsumers)
        out["numProducers"] = int(self.numProducers)
        out["bundles"] = list(self.bundles)
        out["lastBundleGains"] = list(self.lastBundleGains)
        out["lastBundleLosses"] = list(self.lastBundleLosses)
        if self.brokerVersionString is not None:
            out["brokerVersionString"] = self.brokerVersionString
        out["protocols"] = dict(self.protocols)
        out["advertisedListeners"] = dict(self.advertisedListeners)
        if self.loadManagerClassName is not None:
            out["loadManagerClassName"] = self.loadManagerClassName
        out["startTimestamp"] = int(self.startTimestamp)
        out["maxResourceUsage"] = self.max_resource_usage()
        out["loadReportType"] = "LocalBrokerData"
        return out

    @classmethod
    def from_json(cls, r: JsonReader) -> LocalBrokerData:
        """Read a load report; Pulsar's derived and unknown fields are ignored, as Jackson does."""
        r.check(check_collections)
        resources = resources_from_json(r)
        last_stats = {name: NamespaceBundleStats.from_json(s) for name, s in r.items("lastStats", {})}
        bundles = r.string_list("bundles", [])
        return cls(
            **r.fields(LOCAL_BROKER_DATA, {"numBundles": len(bundles)}),
            lastStats=last_stats,
            bundles=bundles,
            lastBundleGains=r.string_list("lastBundleGains", []),
            lastBundleLosses=r.string_list("lastBundleLosses", []),
            protocols=dict(r.raw_mapping("protocols", {})),
            advertisedListeners=dict(r.raw_mapping("advertisedListeners", {})),
            **resources,  # type: ignore[arg-type]
        )


_TIME_AVERAGE_FIELDS: tuple[str, ...] = (
    "shortTermMsgThroughputIn",
    "shortTermMsgThroughputOut",
    "shortTermMsgRateIn",
    "shortTermMsgRateOut",
    "longTermMsgThroughputIn",
    "longTermMsgThroughputOut",
    "longTermMsgRateIn",
    "longTermMsgRateOut",
)


@dataclass
class TimeAverageBrokerData:
    """A broker's traffic aggregated from its bundles' short- and long-term averages."""

    shortTermMsgThroughputIn: float = 0.0  # noqa: N815
    shortTermMsgThroughputOut: float = 0.0  # noqa: N815
    shortTermMsgRateIn: float = 0.0  # noqa: N815
    shortTermMsgRateOut: float = 0.0  # noqa: N815
    longTermMsgThroughputIn: float = 0.0  # noqa: N815
    longTermMsgThroughputOut: float = 0.0  # noqa: N815
    longTermMsgRateIn: float = 0.0  # noqa: N815
    longTermMsgRateOut: float = 0.0  # noqa: N815

    FIELDS = _TIME_AVERAGE_FIELDS

    def reset(self, bundles: list[str], bundle_data: dict[str, BundleData]) -> None:
        """Re-aggregate from the given bundles; unknown bundles count with Pulsar's defaults."""
        for name in self.FIELDS:
            setattr(self, name, 0.0)
        for bundle in bundles:
            data = bundle_data.get(bundle)
            short = data.shortTermData if data else TimeAverageMessageData.with_defaults(NUM_SHORT_SAMPLES)
            long = data.longTermData if data else TimeAverageMessageData.with_defaults(NUM_LONG_SAMPLES)
            self.shortTermMsgThroughputIn += short.msgThroughputIn
            self.shortTermMsgThroughputOut += short.msgThroughputOut
            self.shortTermMsgRateIn += short.msgRateIn
            self.shortTermMsgRateOut += short.msgRateOut
            self.longTermMsgThroughputIn += long.msgThroughputIn
            self.longTermMsgThroughputOut += long.msgThroughputOut
            self.longTermMsgRateIn += long.msgRateIn
            self.longTermMsgRateOut += long.msgRateOut

    def to_json(self) -> dict[str, Any]:
        return {name: float(getattr(self, name)) for name in self.FIELDS}

    @classmethod
    def from_json(cls, r: JsonReader) -> TimeAverageBrokerData:
        return cls(**{name: r.number(name, 0.0) for name in cls.FIELDS})


@dataclass
class BrokerData:
    """The leader's view of one broker: its report, its time averages, and placements in flight."""

    localData: LocalBrokerData = field(default_factory=LocalBrokerData)  # noqa: N815
    timeAverageData: TimeAverageBrokerData = field(default_factory=TimeAverageBrokerData)  # noqa: N815
    preallocatedBundleData: dict[str, BundleData] = field(default_factory=dict)  # noqa: N815

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "localData": self.localData.to_json(),
            "timeAverageData": self.timeAverageData.to_json(),
        }
        if self.preallocatedBundleData:
            out["preallocatedBundleData"] = {k: v.to_json() for k, v in self.preallocatedBundleData.items()}
        return out

    @classmethod
    def from_json(cls, r: JsonReader) -> BrokerData:
        local = r.child("localData")
        assert local is not None
        ta = r.child("timeAverageData", None)
        return cls(
            localData=LocalBrokerData.from_json(local),
            timeAverageData=TimeAverageBrokerData() if ta is None else TimeAverageBrokerData.from_json(ta),
            preallocatedBundleData={
                name: BundleData.from_json(b) for name, b in r.items("preallocatedBundleData", {})
            },
        )


# NamespaceService's three patterns, matched against the whole namespace (Java ``matches()``):
# heartbeat ``pulsar/<cluster>/<host>:<port>`` (v1) and ``pulsar/<host>:<port>`` (v2), and SLA monitor
# ``sla-monitor/<cluster>/<host>:<port>``. The spec's §1.6 abbreviates them; these are Pulsar's own, so
# ``sla-monitor/<host>:<port>`` (no cluster) is an ordinary namespace and ``pulsar/system`` is too.
SYSTEM_NAMESPACE = "pulsar/system"
"""The namespace Pulsar always distributes evenly over brokers, whatever the configuration (spec §4.5)."""

_SYSTEM_NAMESPACES = (
    re.compile(r"pulsar/[^/]+/([^:]+:\d+)", re.ASCII),
    re.compile(r"pulsar/([^:]+:\d+)", re.ASCII),
    re.compile(r"sla-monitor/[^/]+/([^:]+:\d+)", re.ASCII),
)
"""``NamespaceService``'s heartbeat and SLA-monitor patterns. Java's ``\\d`` is 0-9 only: Python's took any
script's digits, and a namespace ``pulsar/host:٨٠٨٠`` was left out of shedding, where Pulsar sheds it."""


_NAMED_ENTITY = re.compile(r"[-=:.\w]*", re.ASCII)


def is_named_entity(name: str) -> bool:
    """Pulsar's ``NamedEntity.checkName``: a tenant, cluster or namespace name is ASCII letters, digits and
    ``_ - = : .`` only (Java's ``\\w`` is ASCII). ``createCluster`` refuses any other cluster name."""
    return _NAMED_ENTITY.fullmatch(name) is not None


def namespace_of(bundle: str) -> str:
    """The namespace of a full bundle name ``tenant/namespace/0xLLLLLLLL_0xUUUUUUUU``."""
    return bundle.rsplit("/", 1)[0]


class NameIndex:
    """Bundle name → index and namespace → member indices, for one tuple of bundle names.

    Built once per set of bundles and kept by its users (:meth:`reuse`): a leader's or a simulation's
    snapshots share one tuple of names while the bundles are the same, and grouping 100,000 names by
    namespace takes about 60 ms (the even-distribution filter asks for one namespace at a time).
    """

    def __init__(self, names: tuple[str, ...]) -> None:
        self.names = names
        self.index = {n: i for i, n in enumerate(names)}
        groups: dict[str, list[int]] = {}
        for i, n in enumerate(names):
            groups.setdefault(namespace_of(n), []).append(i)
        self.members = {ns: np.asarray(ix, dtype=np.int64) for ns, ix in groups.items()}

    @classmethod
    def reuse(cls, index: NameIndex | None, names: tuple[str, ...]) -> NameIndex:
        """``index`` when it was built for ``names`` (the same tuple, or an equal one), else a new one."""
        if index is not None and (index.names is names or index.names == names):
            return index
        return cls(names)


def is_system_heartbeat_bundle(bundle: str) -> bool:
    """Heartbeat and SLA-monitor bundles, which getBundleDataForLoadShedding() leaves out."""
    ns = namespace_of(bundle)
    return any(pattern.fullmatch(ns) for pattern in _SYSTEM_NAMESPACES)


_LOAD_DATA_KEYS = ("brokers", "brokerData", "bundleData", "recentlyUnloadedBundles")
# what Jackson writes for LoadData's derived getter (bundleData less the heartbeat bundles): not read
_DERIVED_KEYS = ("bundleDataForLoadShedding",)


def _check_load_data_keys(r: JsonReader) -> None:
    """Refuse a LoadData key that is none of its fields (``recentlyUnloadedBundle``: the bundles in their
    grace period were read as none) and both spellings of the brokers (only ``brokers`` was read)."""
    for key in r.obj:
        if key not in _LOAD_DATA_KEYS + _DERIVED_KEYS:
            raise InputError(
                f"unknown LoadData field (expected one of {', '.join(_LOAD_DATA_KEYS)})",
                source=r.source,
                field=r.field_path(key),
                hint=did_you_mean(key, _LOAD_DATA_KEYS),
            )
    if r.has("brokers") and r.has("brokerData"):
        raise InputError(
            "both brokers and brokerData (Pulsar's name for it): give one",
            source=r.source,
            field=r.field_path("brokerData"),
        )


def _check_bundle_names(
    r: JsonReader, brokers: dict[str, BrokerData], bundles: dict[str, BundleData], recent: dict[str, int]
) -> None:
    """Refuse a name that is no Pulsar bundle's wherever a LoadData names bundles (it was taken, and could
    be chosen to unload)."""
    key = "brokers" if r.has("brokers") else "brokerData"
    named = [
        (f"{key}.{b}.localData.bundles", n) for b, data in brokers.items() for n in data.localData.bundles
    ]
    named += [
        (f"{key}.{b}.preallocatedBundleData", n) for b, d in brokers.items() for n in d.preallocatedBundleData
    ]
    named += [("bundleData", n) for n in bundles] + [("recentlyUnloadedBundles", n) for n in recent]
    for where, name in named:
        problem = bundle_name_problem(name)
        if problem is not None:
            raise InputError(problem, source=r.source, field=r.field_path(where), value=name)


@dataclass
class LoadData:
    """The leader's in-memory view: brokers, bundle histories and recently unloaded bundles."""

    brokerData: dict[str, BrokerData] = field(default_factory=dict)  # noqa: N815
    bundleData: dict[str, BundleData] = field(default_factory=dict)  # noqa: N815
    recentlyUnloadedBundles: dict[str, int] = field(default_factory=dict)  # noqa: N815

    def bundle_data_for_load_shedding(self) -> dict[str, BundleData]:
        return {k: v for k, v in self.bundleData.items() if not is_system_heartbeat_bundle(k)}

    def to_json(self) -> dict[str, Any]:
        return {
            "brokers": {k: v.to_json() for k, v in self.brokerData.items()},
            "bundleData": {k: v.to_json() for k, v in self.bundleData.items()},
            "recentlyUnloadedBundles": {k: int(v) for k, v in self.recentlyUnloadedBundles.items()},
        }

    @classmethod
    def from_json(cls, r: JsonReader) -> LoadData:
        """Read the case format's ``loadData`` (``brokers``; Pulsar's own name ``brokerData`` also works)."""
        _check_load_data_keys(r)
        key = "brokers" if r.has("brokers") or not r.has("brokerData") else "brokerData"
        brokers = {name: BrokerData.from_json(b) for name, b in r.items(key)}
        bundles = {name: BundleData.from_json(b) for name, b in r.items("bundleData", {})}
        recent_map = r.child("recentlyUnloadedBundles", None)
        recent = {} if recent_map is None else {k: recent_map.integer(k) for k in recent_map.obj}
        _check_bundle_names(r, brokers, bundles, recent)
        return cls(brokerData=brokers, bundleData=bundles, recentlyUnloadedBundles=recent)
