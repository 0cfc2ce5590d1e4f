"""Broker hardware classes and the cost model that turns owned traffic into Pulsar's resource usage.

Usage is computed in the units a Pulsar broker reports (spec §1.1, ``LinuxBrokerHostUsageImpl``):

* **cpu**: percent of one core, limit ``100 × cores``.
  ``usage = 100 × (idle·cores + µs_per_msg·1e-6·(msgRateIn + msgRateOut)
  + ms_per_MiB·1e-3·(throughputIn + throughputOut)/MiB) + 100 × cores × background_cpu``.
  Message rate and bytes cost CPU separately, so two brokers with the same message rate but
  different message sizes, or different core counts, report different CPU usage.
* **bandwidthIn / bandwidthOut**: Kbit/s (bytes × 8 / 1000), limit = NIC speed in Kbit/s
  (Mbit/s × 1000): Pulsar's decimal kilobits (:data:`KILO`). NIC out carries the dispatch to consumers
  *and* the writes to BookKeeper (``bookkeeper_copies`` × bytes in); NIC in carries the producers'
  bytes and the reads back from BookKeeper (``bookkeeper_read_fraction`` × bytes out, i.e. cache
  misses). Background NIC usage is a fraction of the NIC speed. Only persistent topics' bytes go to
  BookKeeper: a non-persistent topic (``hashed.domain``) is dispatched without a ledger, so its bytes
  are neither written to bookies nor read back, and co-located bookies do not store them.
* **connections** (default off): ``cpu_ms_per_topic``, ``cpu_ms_per_producer`` and
  ``cpu_ms_per_consumer`` are CPU milliseconds per second (milli-cores) each topic and each producer
  or consumer connection costs whatever its traffic (keep-alives, stats, dispatcher and cursor
  bookkeeping), so a broker with many small topics burns CPU a byte count does not show.
* **co-located bookies** (default off): ``bookies`` bookies run on the machine. The cluster's write
  traffic (every alive broker's bytes and messages in, × ``bookkeeper_copies``) is spread evenly over
  the bookies of the alive machines; each costs ``bookie_cpu_us_per_entry`` µs per message and
  ``bookie_cpu_ms_per_mib`` ms per MiB it stores. This load scales with cluster-wide traffic, not with
  the broker's own, and lands on the broker's CPU reading because Pulsar reads the whole machine's CPU
  (``/proc/stat``; in a container with cgroup CPU accounting it reads its own, and this term is 0).
  Published coefficients and their sources: ``docs/scenarios.md``, "Broker CPU model".
* **directMemory**: MiB, ``base + mb_per_mibps × (throughputIn + throughputOut)/MiB``, capped at the
  limit. **memory** (heap): MiB, ``base + mb_per_topic × topics``, capped at the limit.

Heterogeneous clusters are a matter of configuration: give brokers different classes and backgrounds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shedlab.core.sim.spec import Node

FloatArray = NDArray[np.float64]
MIB = 1024.0 * 1024.0
KILO = 1000.0
"""The kilo of Pulsar's NIC units: ``LinuxBrokerHostUsageImpl`` reads the speed files (Mbit/s) and the byte
counters through ``LinuxInfoUtils.getTotalNicLimit``/``getTotalNicUsage`` into ``BitRateUnit.Kilobit``,
whose factor is 1000 (``C0``): a limit of Mbit/s × 1000, a usage of bytes × 8 / 1000, so a NIC's
percentage is its true share of the line rate (``LinuxBrokerHostUsageImplTest``: 3 Gbit/s is
3.0 × 1000 × 1000 Kbit/s). Until 29 Nov 2026 shedlab used 1024 for both, as Pulsar did before
``BitRateUnit``: every NIC percentage read 1.024² = 1.049 times too low (85 % of the line showed 81 %)."""

CPU, MEMORY, DIRECT_MEMORY, BANDWIDTH_IN, BANDWIDTH_OUT = range(5)


@dataclass(frozen=True)
class HardwareClass:
    """One kind of broker machine and its costs (see the module docstring for the formulas)."""

    name: str = "standard"
    cores: float = 16.0
    nic_gbps: float = 10.0
    direct_memory_gb: float = 4.0
    heap_gb: float = 8.0
    cpu_idle: float = 0.02
    cpu_us_per_msg: float = 10.0
    cpu_ms_per_mib: float = 2.0
    bookkeeper_copies: float = 2.0
    bookkeeper_read_fraction: float = 0.0
    direct_memory_base_mb: float = 256.0
    direct_memory_mb_per_mibps: float = 4.0
    heap_base_mb: float = 512.0
    heap_mb_per_topic: float = 0.1
    cpu_ms_per_topic: float = 0.0
    cpu_ms_per_producer: float = 0.0
    cpu_ms_per_consumer: float = 0.0
    bookies: int = 0
    bookie_cpu_us_per_entry: float = 0.0
    bookie_cpu_ms_per_mib: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("name")
        return out


_HARDWARE_FIELDS = tuple(k for k in HardwareClass.__dataclass_fields__ if k != "name")
_POSITIVE = {"cores", "nic_gbps", "direct_memory_gb", "heap_gb"}
_FRACTIONS = {"cpu_idle"}
"""Fractions of the machine: an idle broker cannot use more than all of it (``cpu_idle: 2``, meant as
2 %, read as 200 % and every broker overloaded from the start, silently)."""
_COUNTS = {"bookies"}
"""Whole numbers of things on the machine: ``bookies: 0.5`` was taken as half a bookie, and its machine's
share of the cluster's bookie load halved, silently."""


def parse_hardware(name: str, node: Node, base: HardwareClass | None = None) -> HardwareClass:
    """A hardware class from its mapping; missing fields keep the defaults (or ``base``'s values)."""
    start = base if base is not None else HardwareClass()
    values: dict[str, Any] = {"name": name}
    for key in _HARDWARE_FIELDS:
        default = getattr(start, key)
        if key in _COUNTS:
            values[key] = node.integer(key, default, minimum=0)
            continue
        top = 1.0 if key in _FRACTIONS else None
        values[key] = node.number(key, default, minimum=0.0, maximum=top, exclusive_minimum=key in _POSITIVE)
    node.finish(_HARDWARE_FIELDS)
    return HardwareClass(**values)


class CostModel:
    """Per-broker-slot hardware parameters as arrays, and the vectorised usage computation."""

    def __init__(self, classes: list[HardwareClass]) -> None:
        self.classes = list(classes)
        self._rebuild()

    def _rebuild(self) -> None:
        def col(attr: str) -> FloatArray:
            return np.array([float(getattr(c, attr)) for c in self.classes], dtype=np.float64)

        self.cores = col("cores")
        self.cpu_limit = 100.0 * self.cores
        self.nic_kbps = col("nic_gbps") * KILO * KILO  # Gbit/s → the speed file's Mbit/s → Kbit/s
        self.direct_limit_mb = col("direct_memory_gb") * 1024.0
        self.heap_limit_mb = col("heap_gb") * 1024.0
        self.cpu_idle = col("cpu_idle")
        self.us_per_msg = col("cpu_us_per_msg")
        self.ms_per_mib = col("cpu_ms_per_mib")
        self.bk_copies = col("bookkeeper_copies")
        self.bk_read = col("bookkeeper_read_fraction")
        self.direct_base = col("direct_memory_base_mb")
        self.direct_per = col("direct_memory_mb_per_mibps")
        self.heap_base = col("heap_base_mb")
        self.heap_per_topic = col("heap_mb_per_topic")
        self.ms_per_topic = col("cpu_ms_per_topic")
        self.ms_per_producer = col("cpu_ms_per_producer")
        self.ms_per_consumer = col("cpu_ms_per_consumer")
        self.bookies = col("bookies")
        self.bookie_us_per_entry = col("bookie_cpu_us_per_entry")
        self.bookie_ms_per_mib = col("bookie_cpu_ms_per_mib")
        self.connections = bool(
            self.ms_per_topic.any() or self.ms_per_producer.any() or self.ms_per_consumer.any()
        )
        self.colocated = bool(self.bookies.any())
        self.extended = self.connections or self.colocated
        """Whether any CPU term beyond the traffic-linear model is on (off: :meth:`extra_cpu` is None)."""

    def set_class(self, slot: int, hardware: HardwareClass) -> None:
        self.classes[slot] = hardware
        self._rebuild()

    def limits(self, slots: NDArray[np.int64]) -> FloatArray:
        """(n, 5) limits in Pulsar's order: cpu, memory, directMemory, bandwidthIn, bandwidthOut."""
        out = np.empty((slots.size, 5))
        out[:, CPU] = self.cpu_limit[slots]
        out[:, MEMORY] = self.heap_limit_mb[slots]
        out[:, DIRECT_MEMORY] = self.direct_limit_mb[slots]
        out[:, BANDWIDTH_IN] = self.nic_kbps[slots]
        out[:, BANDWIDTH_OUT] = self.nic_kbps[slots]
        return out

    def extra_cpu(
        self,
        slots: NDArray[np.int64],
        topics: FloatArray,
        producers: FloatArray,
        consumers: FloatArray,
        rate_in: FloatArray,
        tp_in: FloatArray,
    ) -> FloatArray | None:
        """CPU (% of one core) of the connection and co-located-bookie terms for ``slots``; None when off.

        ``slots`` are every alive broker and ``rate_in``/``tp_in`` their persistent topics' write traffic
        (msg/s, bytes/s):
        each broker's is replicated its ``bookkeeper_copies`` times, and the sum is spread over the
        bookies of ``slots`` in proportion to their ``bookies``.
        """
        if not self.extended:
            return None
        cpu = np.zeros(slots.size)
        if self.connections:
            cpu += (
                self.ms_per_topic[slots] * topics
                + self.ms_per_producer[slots] * producers
                + self.ms_per_consumer[slots] * consumers
            ) * 1e-3
        if self.colocated:
            bookies = self.bookies[slots]
            total = float(bookies.sum())
            if total > 0:
                copies = self.bk_copies[slots]
                share = bookies / total
                cpu += share * (
                    self.bookie_us_per_entry[slots] * 1e-6 * float((rate_in * copies).sum())
                    + self.bookie_ms_per_mib[slots] * 1e-3 * float((tp_in * copies).sum()) / MIB
                )
        result: FloatArray = 100.0 * cpu
        return result

    def usage(
        self,
        slots: NDArray[np.int64],
        rate_in: FloatArray,
        rate_out: FloatArray,
        tp_in: FloatArray,
        tp_out: FloatArray,
        topics: FloatArray,
        background: FloatArray,
        stored: tuple[FloatArray, FloatArray] | None = None,
    ) -> FloatArray:
        """(n, 5) usage for brokers ``slots`` carrying the given per-broker totals.

        ``background`` is (n, 3): fractions of cpu, NIC in and NIC out capacity used by other processes.
        ``stored``: the bytes in and out of persistent topics, which BookKeeper writes and reads back
        (None: all of ``tp_in`` and ``tp_out``).
        """
        book_in, book_out = (tp_in, tp_out) if stored is None else stored
        out = np.empty((slots.size, 5))
        cores = self.cores[slots]
        cpu_seconds = (
            self.cpu_idle[slots] * cores
            + self.us_per_msg[slots] * 1e-6 * (rate_in + rate_out)
            + self.ms_per_mib[slots] * 1e-3 * (tp_in + tp_out) / MIB
        )
        out[:, CPU] = 100.0 * cpu_seconds + 100.0 * cores * background[:, 0]
        out[:, MEMORY] = np.minimum(
            self.heap_base[slots] + self.heap_per_topic[slots] * topics, self.heap_limit_mb[slots]
        )
        out[:, DIRECT_MEMORY] = np.minimum(
            self.direct_base[slots] + self.direct_per[slots] * (tp_in + tp_out) / MIB,
            self.direct_limit_mb[slots],
        )
        nic = self.nic_kbps[slots]
        reads, writes = self.bk_read[slots] * book_out, self.bk_copies[slots] * book_in  # BookKeeper's
        # BitRateUnit.Byte.toKilobit: bytes × 8 / 1000 (LinuxInfoUtils.getTotalNicUsage)
        out[:, BANDWIDTH_IN] = (tp_in + reads) * 8.0 / KILO + nic * background[:, 1]
        out[:, BANDWIDTH_OUT] = (tp_out + writes) * 8.0 / KILO + nic * background[:, 2]
        return out
