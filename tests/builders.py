"""Small builders for Pulsar load data in tests, named after the Java tests' set-up helpers."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypedDict, Unpack

from shedlab.cluster.sandbox import Sandbox
from shedlab.core.sim.scenario import Scenario, load_scenario
from shedlab.model.pulsar import (
    MODULAR_LOAD_MANAGER,
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    ResourceUsage,
    TimeAverageBrokerData,
    TimeAverageMessageData,
)
from shedlab.model.snapshot import ClusterSnapshot, FloatArray, IntArray

MB = 1024 * 1024


class Writes(TypedDict):
    """The arguments every ``apply_writes`` of the tests takes (``LeaderBundleData.apply_writes`` also takes
    ``topics``, see :class:`WritesWithTopics`, and ``republish``)."""

    listed_by: IntArray
    values: FloatArray
    new_listed_by: IntArray
    new_values: FloatArray
    new_topics: IntArray
    write_position: IntArray
    writes: int
    extra_updates: int


class WritesWithTopics(Writes):
    """The keyword arguments of ``LeaderBundleData.apply_writes``."""

    topics: IntArray


def bundle_data(
    *,
    tp_in: float = 0.0,
    tp_out: float = 0.0,
    rate_in: float = 0.0,
    rate_out: float = 0.0,
    num_samples: int = 10,
    topics: int = 1,
) -> BundleData:
    short = TimeAverageMessageData(10, num_samples, tp_in, tp_out, rate_in, rate_out)
    long = TimeAverageMessageData(1000, num_samples, tp_in, tp_out, rate_in, rate_out)
    return BundleData(short, long, topics)


def broker_data(
    *,
    cpu: tuple[float, float] = (0.0, 0.0),
    memory: tuple[float, float] = (0.0, 0.0),
    direct: tuple[float, float] = (0.0, 0.0),
    bw: tuple[float, float] | None = None,
    bw_in: tuple[float, float] = (0.0, 0.0),
    bw_out: tuple[float, float] = (0.0, 0.0),
    rate_in: float = 0.0,
    rate_out: float = 0.0,
    tp_in: float = 0.0,
    tp_out: float = 0.0,
    bundles: list[str] | None = None,
    long_rate_in: float = 0.0,
    long_rate_out: float = 0.0,
    preallocated: dict[str, BundleData] | None = None,
) -> BrokerData:
    if bw is not None:
        bw_in = bw_out = bw
    local = LocalBrokerData(
        cpu=ResourceUsage(*cpu),
        memory=ResourceUsage(*memory),
        directMemory=ResourceUsage(*direct),
        bandwidthIn=ResourceUsage(*bw_in),
        bandwidthOut=ResourceUsage(*bw_out),
        msgRateIn=rate_in,
        msgRateOut=rate_out,
        msgThroughputIn=tp_in,
        msgThroughputOut=tp_out,
        bundles=list(bundles or []),
        loadManagerClassName=MODULAR_LOAD_MANAGER,  # as every modular broker reports it (the class filter)
    )
    ta = TimeAverageBrokerData(longTermMsgRateIn=long_rate_in, longTermMsgRateOut=long_rate_out)
    return BrokerData(local, ta, dict(preallocated or {}))


def snapshot(
    brokers: dict[str, BrokerData],
    bundles: dict[str, BundleData] | None = None,
    recently_unloaded: dict[str, int] | None = None,
) -> ClusterSnapshot:
    return ClusterSnapshot.from_load_data(
        LoadData(brokers, dict(bundles or {}), dict(recently_unloaded or {}))
    )


class BrokerArgs(TypedDict, total=False):
    """The keyword arguments of :func:`broker_data` other than ``cpu``."""

    memory: tuple[float, float]
    direct: tuple[float, float]
    bw: tuple[float, float] | None
    bw_in: tuple[float, float]
    bw_out: tuple[float, float]
    rate_in: float
    rate_out: float
    tp_in: float
    tp_out: float
    bundles: list[str] | None
    long_rate_in: float
    long_rate_out: float
    preallocated: dict[str, BundleData] | None


def cpu_broker(percent: float, **kwargs: Unpack[BrokerArgs]) -> BrokerData:
    """A broker whose only non-zero resource is cpu at ``percent`` % (the AvgShedder tests' set-up)."""
    return broker_data(cpu=(percent, 100.0), **kwargs)


# A scenario that uses every feature of the format (scenario and kernel tests share it).
FULL = """
name: full
description: every feature
duration: 1h
seed: 3
strategy: ThresholdShedder+LeastResourceUsageWithWeight
config:
  loadBalancerBrokerThresholdShedderPercentage: 5
strategy_config:
  AvgShedder: {maxUnloadPercentage: 0.5}
simulation:
  tick: 30s
  reconnect_delay: 2s
  initial_assignment: round_robin
  stats_phase: random
  leader_failover: keep
  start_time: "2025-03-01T12:00:00Z"
  cluster: c1
hardware:
  big: {cores: 64, nic_gbps: 100}
brokers:
  - {count: 2}
  - {count: 1, hardware: big, background: {cpu: {kind: diurnal, mean: 0.2, amplitude: 0.1}}}
workloads:
  - name: w
    tenants: 2
    namespaces: 2
    bundles: 4
    topics: {dist: uniform, low: 1, high: 9}
    msg_rate_in: {dist: zipf, max: 5000, exponent: 1.2}
    shapes:
      - {kind: onoff, period: 2m, on: 1m}
      - {kind: spikes, rate_per_hour: 2, duration: 1m, amplitude: 2, select: {fraction: 0.5}}
    brokers: [1, 2]
events:
  - {at: 10m, kind: add_brokers, count: 2, hardware: big}
  - {at: 20m, kind: remove_brokers, count: 1, pick: random}
  - {at: 30m, kind: rolling_restart, interval: 2m}
  - {at: 40m, kind: traffic, factor: 2, duration: 5m, select: {tenants: [tenant-001]}}
  - {at: 45m, kind: background, brokers: [3], background: {cpu: 0.5}}
metrics:
  balance_threshold: 12
  balance_hold: 5m
"""


ONE_BUNDLE_SHEDDER = '''
"""Unloads the busiest bundle of the busiest broker, every call."""
import numpy as np

from shedlab.strategies.base import SheddingResult, Unload


class OneBundle:
    name = "OneBundle"

    def __init__(self, rng=None):
        pass

    def on_active_brokers_change(self, active):
        pass

    def find_bundles_for_unloading(self, snapshot, conf):
        result = SheddingResult()
        b = int(np.argmax(snapshot.total_msg_throughput()))
        bundles = snapshot.shedding_candidates(b)
        if bundles.size > 1:
            j = int(bundles[np.argmax(snapshot.short_term_throughput()[bundles])])
            result.unloads.append(Unload(snapshot.broker_ids[b], snapshot.bundle_names[j], {}))
        return result
'''
"""A user's shedder module, as a plugin package holds it: the tests that ship plugins to Spark's executors
write it into a package of their own."""


def fresh_scenario(name: str) -> Scenario:
    """A shipped scenario whose clock starts now, so its reports are as fresh as a live cluster's (the
    cluster tests' guard refuses stale snapshots)."""
    sc = load_scenario(name)
    start = int(time.time() * 1000) - 60_000
    return dataclasses.replace(sc, simulation=dataclasses.replace(sc.simulation, start_time_ms=start))


@contextmanager
def two_broker_sandbox(zookeeper: str, token: str) -> Iterator[Sandbox]:
    """over-unloading-90-10 after its second broker joined (8 ticks), ``token`` an admin's; the
    sandbox's own leader does not shed, so every move is one that a test's ``advise --execute`` asked for."""
    with Sandbox(
        fresh_scenario("over-unloading-90-10"),
        seed=1,
        zookeeper=zookeeper,
        tokens={token: "admin"},
        config_overrides={"loadBalancerSheddingEnabled": False},
    ) as sb:
        sb.advance(8)
        yield sb


def twin_sized_scenario(name: str, rate: int = 9000) -> str:
    """A scenario whose 30-minute recording (31 ticks of 3 brokers and 12 bundles, all starting on the
    first; 93 load reports) is the smallest that twin fits, under Pulsar's old default pair; ``rate`` is
    the bundles' median msg/s in."""
    return f"""
name: {name}
duration: 30m
seed: 5
strategy: ThresholdShedder+LeastLongTermMessageRate
hardware:
  standard: {{cores: 8, nic_gbps: 10}}
brokers:
  - count: 3
workloads:
  - name: main
    bundles: 12
    topics: 4
    msg_rate_in: {{dist: lognormal, median: {rate}, sigma: 0.8}}
    msg_size: 1024
    brokers: [1]
"""


def recorded_cluster(name: str, *, duration: str, seed: int, cluster: str) -> str:
    """A small cluster to record for the twin's tests: three 8-core brokers, eight bundles all starting
    on the first (so ThresholdShedder has something to move), under Pulsar's old default pair."""
    return f"""
name: {name}
duration: {duration}
seed: {seed}
strategy: ThresholdShedder+LeastLongTermMessageRate
simulation: {{tick: 60s, cluster: {cluster}}}
hardware:
  standard: {{cores: 8, nic_gbps: 10}}
brokers:
  - count: 3
workloads:
  - name: main
    bundles: 8
    topics: 4
    msg_rate_in: {{dist: lognormal, median: 9000, sigma: 0.5}}
    msg_size: 1024
    brokers: [1]
"""
