"""What a running simulation looks like through Pulsar's eyes: its load reports, bundle data and topics.

Every function here reads a :class:`~shedlab.core.sim.kernel.Simulation` between two ticks and builds
Pulsar's objects with the model's classes (:mod:`shedlab.model.pulsar`), which own the JSON. Nothing
here writes JSON by hand except the shapes the model does not hold (``broker-stats/topics``,
``BundlesData``, ``BrokerInfo``), and those follow Pulsar's code as cited next to them.

Broker names: the simulator keeps its own ids (``broker-0001:8080``) so that a sandbox run decides
exactly as ``shedlab simulate`` does with the same seed; the outside world sees each broker under the
address it really listens on (``127.0.0.1:<port>``). :class:`Names` translates at the edge.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shedlab.config import runtime_configuration as config_runtime
from shedlab.core.sim.kernel import Simulation
from shedlab.core.sim.recording import local_report
from shedlab.model.bundles import bundle_index, even_boundaries, parse_range, topic_hash
from shedlab.model.pulsar import (
    NUM_LONG_SAMPLES,
    NUM_SHORT_SAMPLES,
    BundleData,
    LocalBrokerData,
    NamespaceBundleStats,
    TimeAverageBrokerData,
    TimeAverageMessageData,
    namespace_of,
)

__all__ = [
    "Names",
    "bundle_data",
    "bundles_data",
    "local_broker_data",
    "namespace_ephemeral_data",
    "owned_namespaces",
    "persisted_bundle_data",
    "runtime_configuration",
    "time_average_broker_data",
    "topic_names",
    "topics_stats",
]


@dataclass
class Names:
    """Simulator broker ids ↔ the addresses the sandbox's brokers listen on (``host:port``), and the
    scheme of their web addresses (``https`` when the sandbox serves TLS)."""

    sim_ids: list[str]
    addresses: list[str]  # per slot, same order as sim_ids
    scheme: str = "http"
    by_address: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.by_address = {a: s for s, a in enumerate(self.addresses)}

    def address(self, slot: int) -> str:
        return self.addresses[slot]

    def url(self, slot: int) -> str:
        return f"{self.scheme}://{self.addresses[slot]}"

    def slot(self, address: str) -> int | None:
        """The slot of ``host:port`` (a leading ``http://``/``https://`` is dropped, as Pulsar does)."""
        for prefix in ("http://", "https://"):
            if address.startswith(prefix):
                address = address[len(prefix) :]
                break
        return self.by_address.get(address)


def _bundles_of(owner: np.ndarray[Any, Any], slot: int) -> list[int]:
    return [int(j) for j in np.flatnonzero(owner == slot)]


def local_broker_data(
    sim: Simulation, names: Names, slot: int, *, last_written: Iterable[str]
) -> LocalBrokerData:
    """Broker ``slot``'s LocalBrokerData: its *local* report (last stats sample), as Pulsar holds it.

    ``lastUpdate`` is the time of its last write to the metadata store (for a report written in this
    tick, that write's own time). ``lastBundleGains``/``Losses`` are relative to ``last_written``, the
    bundles of the last written report (Pulsar clears them after each write).
    """
    loc = sim.publishing.local
    pop = sim.pop
    members = _bundles_of(loc.bundle_owner, slot)
    stats = {
        pop.names[j]: NamespaceBundleStats(
            msgRateIn=float(loc.bundle_values[0, j]),
            msgThroughputIn=float(loc.bundle_values[2, j]),
            msgRateOut=float(loc.bundle_values[1, j]),
            msgThroughputOut=float(loc.bundle_values[3, j]),
            consumerCount=int(pop.consumers[j]),
            producerCount=int(pop.producers[j]),
            topics=int(loc.bundle_topics[j]),
            cacheSize=0,
        )
        for j in members
    }
    return local_report(
        names.address(slot),
        usage=loc.usage[slot],
        limit=loc.limit[slot],
        agg=loc.agg[slot],
        counts=(int(loc.topics[slot]), int(loc.consumers[slot]), int(loc.producers[slot])),
        stats=stats,
        last_written=set(last_written),
        last_update_ms=int(sim.publishing.last_update_ms[slot]),
        start_ms=int(sim.cluster.start_ts[slot]),
        load_manager_class=sim.conf.load_manager_class_name,
        tls=names.scheme == "https",
    )


def bundle_data(sim: Simulation) -> dict[str, BundleData]:
    """The leader's ``loadData.bundleData``: every bundle that has data, short- and long-term averages."""
    ld = sim.publishing.leader_data
    names = sim.pop.names
    out: dict[str, BundleData] = {}
    for j in np.flatnonzero(ld.has).tolist():
        out[names[j]] = BundleData(
            shortTermData=_average(ld.short, int(ld.short_n[j]), j, NUM_SHORT_SAMPLES),
            longTermData=_average(ld.long, int(ld.long_n[j]), j, NUM_LONG_SAMPLES),
            topics=int(ld.topics[j]),
        )
    return out


def persisted_bundle_data(sim: Simulation, data: Mapping[str, BundleData]) -> dict[str, BundleData]:
    """What the leader's ``writeBundleDataOnZooKeeper`` writes of ``data`` (``selectTopKBundle``, PIP-354):
    without the shedding-excluded namespaces, the ``loadBalancerMaxNumberOfBundlesInBundleLoadReport`` ×
    brokers (of the leader's LoadData, at least one) highest by ``BundleData.compareTo``; every bundle when
    that setting is ≤ 0. Ties at the cut go by bundle name (Pulsar's quick-select order; a deviation)."""
    conf = sim.conf
    excluded = conf.load_balancer_shedding_excluded_namespaces
    kept = {name: bd for name, bd in data.items() if namespace_of(name) not in excluded}
    per_broker = int(conf.load_balancer_max_number_of_bundles_in_bundle_load_report)
    if per_broker <= 0:
        return kept
    brokers = int(np.count_nonzero(sim.publishing.has_report & sim.cluster.alive))
    k = min(per_broker * max(1, brokers), len(kept))
    ranked = sorted(sorted(kept), key=lambda name: kept[name].compare_key(), reverse=True)
    return {name: kept[name] for name in ranked[:k]}


def _average(block: np.ndarray[Any, Any], n: int, j: int, max_samples: int) -> TimeAverageMessageData:
    return TimeAverageMessageData(
        maxSamples=max_samples,
        numSamples=n,
        msgThroughputIn=float(block[2, j]),
        msgThroughputOut=float(block[3, j]),
        msgRateIn=float(block[0, j]),
        msgRateOut=float(block[1, j]),
    )


def time_average_broker_data(
    sim: Simulation, slot: int, data: Mapping[str, BundleData]
) -> TimeAverageBrokerData:
    """``TimeAverageBrokerData.reset`` over the bundles of the broker's *published* report (updateAll)."""
    pub = sim.publishing.published
    listed = [sim.pop.names[j] for j in _bundles_of(pub.bundle_owner, slot)]
    average = TimeAverageBrokerData()
    average.reset(listed, dict(data))
    return average


# ------------------------------------------------------------------------------------------- ownership


def namespace_ephemeral_data(names: Names, slot: int, *, disabled: bool = False) -> dict[str, Any]:
    """``NamespaceEphemeralData`` of broker ``slot``, the data of its ownership znodes
    (``/namespace/<bundle>``), as ``OwnershipCache`` builds ``selfOwnerInfo``: ``nativeUrl`` (the binary
    protocol, ``brokerServicePort``), ``nativeUrlTls``, ``httpUrl`` (``getSafeWebServiceAddress``: the
    http:// address, else the https:// one), ``httpUrlTls``, ``disabled`` and ``advertisedListeners``; the
    ports as in the load reports (``local_report``). ``disabled``: ``selfOwnerInfoDisabled``, the same
    data with ``disabled: true``, which ``OwnershipCache.disableOwnership`` writes over the znode of a
    bundle being unloaded."""
    host = names.address(slot).rsplit(":", 1)[0]
    tls = names.scheme == "https"
    web = names.url(slot)
    return {
        "nativeUrl": f"pulsar://{host}:6650",
        "nativeUrlTls": f"pulsar+ssl://{host}:6651" if tls else None,
        "httpUrl": web,
        "httpUrlTls": web if tls else None,
        "disabled": disabled,
        "advertisedListeners": {},
    }


def owned_namespaces(
    sim: Simulation, slot: int, unloading: Collection[str] = ()
) -> dict[str, dict[str, Any]]:
    """``GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces`` of broker ``slot``
    (``NamespaceService.getOwnedNameSpacesStatus``): every bundle it owns now → ``NamespaceOwnershipStatus``;
    no isolation policy in the sandbox, so ``shared`` and not controlled; ``is_active`` is
    ``OwnedBundle.isActive()``, false for the bundles it is in the middle of unloading (``unloading``, held
    there by ``Sandbox.disable_ownership``; a plain unload releases a bundle at once)."""
    names = sim.pop.names
    return {
        names[j]: {
            "broker_assignment": "shared",
            "is_controlled": False,
            "is_active": names[j] not in unloading,
        }
        for j in _bundles_of(sim.cluster.owner, slot)
    }


# ------------------------------------------------------------------------------------ namespaces, topics


def namespaces(sim: Simulation) -> dict[str, list[str]]:
    """Namespace → its bundles' ranges (``0x…_0x…``), in order."""
    out: dict[str, list[str]] = {}
    for name in sim.pop.names:
        out.setdefault(namespace_of(name), []).append(name.rsplit("/", 1)[1])
    return out


def bundles_data(ranges: list[str]) -> dict[str, Any]:
    """``BundlesData`` (``GET …/namespaces/{t}/{ns}/bundles``): ``boundaries`` as ``0x%08x`` strings and
    ``numBundles``. The boundaries are every range's lower bound and the last upper bound."""
    parsed = sorted(r for r in (parse_range(x) for x in ranges) if r is not None)
    bounds = [lo for lo, _ in parsed] + ([parsed[-1][1]] if parsed else [])
    return {"boundaries": [f"0x{b:08x}" for b in bounds], "numBundles": len(parsed)}


def topic_names(namespace: str, ranges: list[str], counts: list[int]) -> dict[str, list[str]]:
    """Topic names for each bundle that really hash into it (``persistent://<ns>/topic-<k>``).

    The simulator knows how many topics a bundle holds, not their names; the sandbox names them so that
    Pulsar's hashing (:mod:`shedlab.model.bundles`) maps every topic back to its bundle. Names are
    tried in order ``topic-0``, ``topic-1``, … and each goes to the bundle it hashes into until every
    bundle has its count: deterministic, and consistent with the bundles endpoint.
    """
    parsed = [parse_range(r) for r in ranges]
    if any(p is None for p in parsed) or not parsed:
        return {r: [] for r in ranges}
    bounds = [p[0] for p in parsed if p is not None] + [max(p[1] for p in parsed if p is not None)]
    if bounds[0] != 0:
        bounds = even_boundaries(len(ranges))
    need = dict(zip(ranges, counts, strict=True))
    out: dict[str, list[str]] = {r: [] for r in ranges}
    missing = sum(need.values())
    k = 0
    limit = 64 * max(missing, 1) + 10_000
    while missing and k < limit:
        topic = f"persistent://{namespace}/topic-{k}"
        k += 1
        index = int(bundle_index([topic_hash(topic)], bounds)[0])
        name = ranges[index]
        if len(out[name]) < need[name]:
            out[name].append(topic)
            missing -= 1
    return out


def topics_stats(sim: Simulation, slot: int, topics: Mapping[str, Mapping[str, list[str]]]) -> dict[str, Any]:
    """``GET /admin/v2/broker-stats/topics`` of one broker: namespace → bundle range → ``persistent`` →
    topic → stats, as ``PulsarStats.updateStats`` streams them (``PersistentTopic.updateRates`` writes
    each topic's pairs). A bundle's traffic and clients are split evenly over its topics."""
    loc = sim.publishing.local
    pop = sim.pop
    out: dict[str, Any] = {}
    for j in _bundles_of(loc.bundle_owner, slot):
        name = pop.names[j]
        namespace, rng = name.rsplit("/", 1)
        names = topics.get(namespace, {}).get(rng, [])
        n = max(len(names), 1)
        rate_in, rate_out, tp_in, tp_out = (float(loc.bundle_values[k, j]) / n for k in range(4))
        producers = _split(int(pop.producers[j]), len(names))
        consumers = _split(int(pop.consumers[j]), len(names))
        per_topic: dict[str, Any] = {}
        for i, topic in enumerate(names):
            per_topic[topic] = _topic_stats(rate_in, rate_out, tp_in, tp_out, producers[i], consumers[i])
        out.setdefault(namespace, {})[rng] = {"persistent": per_topic}
    return out


def _split(total: int, parts: int) -> list[int]:
    if parts <= 0:
        return []
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _topic_stats(
    rate_in: float, rate_out: float, tp_in: float, tp_out: float, producers: int, consumers: int
) -> dict[str, Any]:
    subscriptions: dict[str, Any] = {}
    if consumers:
        subscriptions["sub"] = {
            "consumers": [{"msgRateOut": rate_out / consumers, "msgThroughputOut": tp_out / consumers}]
            * consumers,
            "msgBacklog": 0,
            "msgRateExpired": 0.0,
            "msgRateOut": rate_out,
            "messageAckRate": rate_out,
            "msgThroughputOut": tp_out,
            "msgRateRedeliver": 0.0,
            "type": "Shared",
        }
    return {
        "publishers": [{"msgRateIn": rate_in / producers, "msgThroughputIn": tp_in / producers}] * producers,
        "replication": {},
        "subscriptions": subscriptions,
        "producerCount": producers,
        "averageMsgSize": tp_in / rate_in if rate_in else 0.0,
        "msgRateIn": rate_in,
        "msgRateOut": rate_out,
        "msgThroughputIn": tp_in,
        "msgThroughputOut": tp_out,
        "storageSize": 0,
        "backlogSize": 0,
        "pendingAddEntriesCount": 0,
    }


# ------------------------------------------------------------------------------------------- configuration


def runtime_configuration(sim: Simulation, cluster: str) -> dict[str, str]:
    """``GET /admin/v2/brokers/configuration/runtime``: key → string; the load-balancer keys shedlab knows
    (``config.py``) and ``clusterName``. Pulsar lists every ServiceConfiguration field; the others
    are not part of the simulation and are left out. ``loadBalancerAutoBundleSplitEnabled`` is ``false``
    whatever the scenario sets: the simulator splits no bundle (:mod:`shedlab.core.sim.kernel`), so the
    sandbox's leader behaves as Pulsar's with splitting off, and says so to a reader that checks."""
    out = config_runtime(
        sim.conf.with_overrides({"loadBalancerAutoBundleSplitEnabled": False}, source="sandbox")
    )
    out["clusterName"] = cluster
    return dict(sorted(out.items()))
