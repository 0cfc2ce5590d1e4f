"""Record a run's load data and write it the way a real cluster's would be captured (ingest's known truth).

With ``record=True`` the kernel keeps a :class:`Recording`: every alive broker's *local* report at
every tick where some broker sampled its stats (:meth:`Recording.add`). It is written in two formats:

* **Load reports as JSON lines** (``load-reports.jsonl``): one line per broker per stats time, as polling
  ``GET /admin/v2/broker-stats/load-report`` on every broker would give::

      {"timestamp": <ms>, "broker": "broker-0001:8080", "cluster": "sim-cluster", "report": {...}}

  ``report`` is Pulsar's LocalBrokerData JSON (spec §1.7) with ``lastStats`` per bundle. It is the
  broker's *local* report at that time; ``lastUpdate`` is the time of its last write to the metadata
  store, so ``lastUpdate == timestamp`` marks the reports the leader received at that time (§4.3).
  ``lastBundleGains``/``lastBundleLosses`` are relative to the last written report.
* **Prometheus ``query_range`` responses** (``prometheus/<metric>.json``), one file per metric name, as
  ``GET /api/v1/query_range`` returns them: the ``pulsar_lb_*_usage`` gauges (labels ``cluster``,
  ``broker`` = advertised address, i.e. the host part of the broker id, ``metric="loadBalancing"``) and
  the per-bundle ``pulsar_bundle_*`` gauges (labels ``cluster``, ``broker``, ``bundle``,
  ``metric="loadBalancing"``, as ``ModularLoadManagerImpl.updateLoadBalancingBundlesMetrics`` labels them),
  spec §6.1, sampled at every stats time. Values are strings, timestamps unix seconds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from shedlab.core.sim.state import Reports
from shedlab.errors import InputError
from shedlab.model.pulsar import LocalBrokerData, NamespaceBundleStats, ResourceUsage

BROKER_VERSION = "4.0.0"

LB_GAUGES: tuple[tuple[str, int], ...] = (
    ("pulsar_lb_cpu_usage", 0),
    ("pulsar_lb_memory_usage", 1),
    ("pulsar_lb_directMemory_usage", 2),
    ("pulsar_lb_bandwidth_in_usage", 3),
    ("pulsar_lb_bandwidth_out_usage", 4),
)
BUNDLE_GAUGES: tuple[str, ...] = (
    "pulsar_bundle_msg_rate_in",
    "pulsar_bundle_msg_rate_out",
    "pulsar_bundle_msg_throughput_in",
    "pulsar_bundle_msg_throughput_out",
    "pulsar_bundle_topics_count",
    "pulsar_bundle_consumer_count",
    "pulsar_bundle_producer_count",
)


FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


@dataclass
class RecordedTick:
    """What polling every broker's ``load-report`` endpoint at one stats time would have returned."""

    time_ms: int
    slots: IntArray
    usage: FloatArray
    limit: FloatArray
    agg: FloatArray  # (n, 4): rate in, rate out, throughput in, throughput out
    num_topics: IntArray
    num_consumers: IntArray
    num_producers: IntArray
    last_update_ms: IntArray
    start_ms: IntArray
    bundle_owner: IntArray  # local ownership (the local reports' listing) per bundle
    bundle_values: FloatArray  # (4, m)


@dataclass
class Recording:
    """A run's local load reports at every stats time (only kept with ``record=True``)."""

    cluster: str
    broker_ids: list[str]
    bundle_names: tuple[str, ...]
    bundle_topics: IntArray
    bundle_consumers: IntArray
    bundle_producers: IntArray
    load_manager_class: str
    ticks: list[RecordedTick]

    def add(
        self, now: int, alive: BoolArray, local: Reports, last_update_ms: IntArray, start_ms: IntArray
    ) -> None:
        """Every alive broker's local report at ``now`` (a tick where some broker sampled its stats)."""
        slots = np.flatnonzero(alive).astype(np.int64)
        self.ticks.append(
            RecordedTick(
                time_ms=now,
                slots=slots,
                usage=local.usage[slots].copy(),
                limit=local.limit[slots].copy(),
                agg=local.agg[slots].copy(),
                num_topics=local.topics[slots].copy(),
                num_consumers=local.consumers[slots].copy(),
                num_producers=local.producers[slots].copy(),
                last_update_ms=last_update_ms[slots].copy(),
                start_ms=start_ms[slots].copy(),
                bundle_owner=local.bundle_owner.copy(),
                bundle_values=local.bundle_values.copy(),
            )
        )


class Recorded(Protocol):
    """A run result that may carry a :class:`Recording` (:class:`~shedlab.core.sim.result.SimulationResult`).

    A protocol, not the class, so that the result can import this module without a cycle.
    """

    @property
    def reports(self) -> Recording | None: ...


def _recording(result: Recorded) -> Recording:
    if result.reports is None:
        raise InputError("this run was not recorded: run the simulation with record=True (CLI: --record)")
    return result.reports


def host_of(broker_id: str) -> str:
    """The advertised address of a broker id ``host:port`` (the Prometheus ``broker`` label)."""
    return broker_id.rsplit(":", 1)[0]


def iter_load_reports(result: Recorded) -> Iterator[dict[str, Any]]:
    """The wrapped load reports, in time order, brokers in id order."""
    rec = _recording(result)
    names = rec.bundle_names
    last_written: dict[int, set[str]] = {}
    for tick in rec.ticks:
        owners = tick.bundle_owner
        order = np.argsort(owners, kind="stable")
        sorted_owners = owners[order]
        for i, slot in enumerate(tick.slots.tolist()):
            lo, hi = np.searchsorted(sorted_owners, [slot, slot + 1])
            members = np.sort(order[lo:hi])
            stats = {
                names[j]: NamespaceBundleStats(
                    msgRateIn=float(tick.bundle_values[0, j]),
                    msgThroughputIn=float(tick.bundle_values[2, j]),
                    msgRateOut=float(tick.bundle_values[1, j]),
                    msgThroughputOut=float(tick.bundle_values[3, j]),
                    consumerCount=int(rec.bundle_consumers[j]),
                    producerCount=int(rec.bundle_producers[j]),
                    topics=int(rec.bundle_topics[j]),
                    cacheSize=0,
                )
                for j in members.tolist()
            }
            broker = rec.broker_ids[slot]
            report = local_report(
                broker,
                usage=tick.usage[i],
                limit=tick.limit[i],
                agg=tick.agg[i],
                counts=(int(tick.num_topics[i]), int(tick.num_consumers[i]), int(tick.num_producers[i])),
                stats=stats,
                last_written=last_written.get(slot, set()),
                last_update_ms=int(tick.last_update_ms[i]),
                start_ms=int(tick.start_ms[i]),
                load_manager_class=rec.load_manager_class,
            )
            if int(tick.last_update_ms[i]) == tick.time_ms:
                last_written[slot] = set(stats)
            yield {
                "timestamp": tick.time_ms,
                "broker": broker,
                "cluster": rec.cluster,
                "report": report.to_json(),
            }


def local_report(
    broker: str,
    *,
    usage: FloatArray,
    limit: FloatArray,
    agg: FloatArray,
    counts: tuple[int, int, int],
    stats: dict[str, NamespaceBundleStats],
    last_written: set[str],
    last_update_ms: int,
    start_ms: int,
    load_manager_class: str,
    tls: bool = False,
) -> LocalBrokerData:
    """One broker's LocalBrokerData from the simulator's arrays: the one builder of a simulated load report
    (recordings here, the sandbox's endpoint and znodes in :mod:`shedlab.cluster.sandbox`).

    ``usage``/``limit``: the five resources in Pulsar's order; ``agg``: rate in, rate out, throughput
    in, throughput out; ``counts``: topics, consumers, producers; ``last_written``: the bundles of the
    broker's last written report, which ``lastBundleGains``/``Losses`` are relative to.

    ``tls``: the broker's web service listens with TLS only, on the id's port (``webServicePortTls`` set,
    ``webServicePort`` unset, so the id is ``advertisedAddress:webServicePortTls``), and its binary
    protocol on ``brokerServicePortTls=6651`` beside ``brokerServicePort=6650``. Pulsar's
    ``ModularLoadManagerImpl.start`` fills ``webServiceUrl`` with ``getSafeWebServiceAddress()`` (the
    http:// address, else the https:// one), ``webServiceUrlTls`` with ``getWebServiceAddressTls()`` and
    ``pulsarServiceUrlTls`` with ``pulsar+ssl://host:port``: both web URLs are then https://.
    """
    host = host_of(broker)
    current = set(stats)
    web = f"https://{broker}" if tls else f"http://{broker}"
    return LocalBrokerData(
        webServiceUrl=web,
        webServiceUrlTls=web if tls else None,
        pulsarServiceUrl=f"pulsar://{host}:6650",
        pulsarServiceUrlTls=f"pulsar+ssl://{host}:6651" if tls else None,
        cpu=ResourceUsage(float(usage[0]), float(limit[0])),
        memory=ResourceUsage(float(usage[1]), float(limit[1])),
        directMemory=ResourceUsage(float(usage[2]), float(limit[2])),
        bandwidthIn=ResourceUsage(float(usage[3]), float(limit[3])),
        bandwidthOut=ResourceUsage(float(usage[4]), float(limit[4])),
        msgThroughputIn=float(agg[2]),
        msgThroughputOut=float(agg[3]),
        msgRateIn=float(agg[0]),
        msgRateOut=float(agg[1]),
        lastUpdate=last_update_ms,
        lastStats=stats,
        numTopics=counts[0],
        numBundles=len(stats),
        numConsumers=counts[1],
        numProducers=counts[2],
        bundles=sorted(current),
        lastBundleGains=sorted(current - last_written),
        lastBundleLosses=sorted(last_written - current),
        brokerVersionString=BROKER_VERSION,
        loadManagerClassName=load_manager_class,
        startTimestamp=start_ms,
    )


def prometheus_value(value: float) -> str:
    """A sample value as Prometheus prints it (shortest round-trip decimal, no exponent)."""
    if np.isnan(value):
        return "NaN"
    if np.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return str(np.format_float_positional(float(value), trim="-"))


def _seconds(ms: int) -> float | int:
    return ms // 1000 if ms % 1000 == 0 else ms / 1000.0


def prometheus_responses(result: Recorded) -> dict[str, dict[str, Any]]:
    """One ``query_range`` response per metric name (spec §6.1 names and labels)."""
    rec = _recording(result)
    series: dict[str, dict[tuple[str, ...], list[list[Any]]]] = {}
    key: tuple[str, ...]
    lb_names = {name for name, _ in LB_GAUGES}
    for tick in rec.ticks:
        ts = _seconds(tick.time_ms)
        pct = np.zeros_like(tick.usage, dtype=np.float32)
        usage32 = tick.usage.astype(np.float32)
        limit32 = tick.limit.astype(np.float32)
        np.divide(usage32, limit32, out=pct, where=limit32 > 0)
        pct *= np.float32(100.0)
        for i, slot in enumerate(tick.slots.tolist()):
            host = host_of(rec.broker_ids[slot])
            for name, r in LB_GAUGES:
                series.setdefault(name, {}).setdefault((host,), []).append(
                    [ts, prometheus_value(float(pct[i, r]))]
                )
        owned = np.flatnonzero(tick.bundle_owner >= 0)
        for j in owned.tolist():
            host = host_of(rec.broker_ids[int(tick.bundle_owner[j])])
            key = (host, rec.bundle_names[j])
            bundle_values = (
                tick.bundle_values[0, j],
                tick.bundle_values[1, j],
                tick.bundle_values[2, j],
                tick.bundle_values[3, j],
                rec.bundle_topics[j],
                rec.bundle_consumers[j],
                rec.bundle_producers[j],
            )
            for name, value in zip(BUNDLE_GAUGES, bundle_values, strict=True):
                series.setdefault(name, {}).setdefault(key, []).append([ts, prometheus_value(float(value))])
    responses: dict[str, dict[str, Any]] = {}
    for name in [n for n, _ in LB_GAUGES] + list(BUNDLE_GAUGES):
        result_list = []
        for key, values in sorted(series.get(name, {}).items()):
            metric: dict[str, str] = {"__name__": name, "cluster": rec.cluster, "broker": key[0]}
            if name not in lb_names:
                metric["bundle"] = key[1]
            metric["metric"] = "loadBalancing"  # Pulsar labels both families so
            result_list.append({"metric": metric, "values": values})
        responses[name] = {"status": "success", "data": {"resultType": "matrix", "result": result_list}}
    return responses


def write_recording(result: Recorded, out_dir: str | Path) -> list[Path]:
    """Write ``load-reports.jsonl`` and ``prometheus/<metric>.json`` into ``out_dir``; returns the paths."""
    out = Path(out_dir)
    (out / "prometheus").mkdir(parents=True, exist_ok=True)
    paths = []
    reports = out / "load-reports.jsonl"
    with reports.open("w", encoding="utf-8") as fh:
        for line in iter_load_reports(result):
            fh.write(json.dumps(line, separators=(",", ":")) + "\n")
    paths.append(reports)
    for name, response in prometheus_responses(result).items():
        path = out / "prometheus" / f"{name}.json"
        path.write_text(json.dumps(response, separators=(",", ":")) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


__all__ = [
    "BUNDLE_GAUGES",
    "LB_GAUGES",
    "Recorded",
    "RecordedTick",
    "Recording",
    "host_of",
    "iter_load_reports",
    "local_report",
    "prometheus_responses",
    "prometheus_value",
    "write_recording",
]
