"""Report publishing in the simulator: stats samples, §4.3's writes, the leader's updates and its view."""

from __future__ import annotations

import numpy as np
import pytest

from shedlab.config import LoadBalancerConfig
from shedlab.core.sim.hardware import HardwareClass
from shedlab.core.sim.publishing import Publishing
from shedlab.core.sim.scenario import Background
from shedlab.core.sim.state import NEVER, BrokerLayout, ClusterState, measure
from shedlab.core.sim.traffic import BundlePopulation, Traffic
from shedlab.model.snapshot import CPU

START = 1_000_000_000
IDS = ["broker-0001:8080", "broker-0002:8080", "broker-0003:8080"]
NAMES = ("t/ns/0x0_0x4", "t/ns/0x4_0x8", "t/ns/0x8_0xc")


def conf() -> LoadBalancerConfig:
    return LoadBalancerConfig().with_overrides(
        {
            "loadBalancerReportUpdateThresholdPercentage": 10,
            "loadBalancerReportUpdateMaxIntervalMinutes": 15,
            "statsUpdateFrequencyInSecs": 60,
            "loadBalancerResourceQuotaUpdateIntervalMinutes": 15,
        }
    )


def publishing(rng_seed: int = 0) -> Publishing:
    return Publishing.new(
        conf(),
        IDS,
        NAMES,
        start_ms=START,
        tick_ms=60_000,
        random_phase=False,
        rng=np.random.default_rng(rng_seed),
    )


def population() -> BundlePopulation:
    m = len(NAMES)
    zeros = np.zeros(m, dtype=np.int64)
    return BundlePopulation(
        names=NAMES,
        namespace_index=zeros,
        namespaces=("t/ns",),
        tenant_index=zeros,
        tenants=("t",),
        workload_index=zeros,
        workloads=("w",),
        topics=np.array([2, 3, 4], dtype=np.int64),
        producers=np.ones(m, dtype=np.int64),
        consumers=np.ones(m, dtype=np.int64),
        base_rate_in=np.ones(m),
        fanout=np.ones(m),
        msg_size=np.ones(m),
        pinned_brokers=((),),
    )


TRAFFIC = Traffic(
    rate_in=np.array([100.0, 200.0, 300.0]),
    rate_out=np.array([10.0, 20.0, 30.0]),
    tp_in=np.array([1e5, 2e5, 3e5]),
    tp_out=np.array([1e4, 2e4, 3e4]),
)


def cluster(owner: list[int]) -> ClusterState:
    layout = BrokerLayout([HardwareClass()] * 3, [Background()] * 3, [0, 1, 2], {})
    c = ClusterState.new(layout, len(NAMES))
    c.alive[:] = True
    c.owner[:] = owner
    return c


def joined(pub: Publishing, c: ClusterState, now: int) -> None:
    """Every broker joins at ``now`` and writes its first report (as the kernel does)."""
    for s in range(3):
        pub.broker_joined(s, now, np.zeros(5), c.cost.limits(np.array([s]))[0])
    pub.publish(now, np.arange(3, dtype=np.int64), 0, c.alive, lock=True)


def test_new_schedules_nothing_but_the_quota_update() -> None:
    pub = publishing()
    assert sorted(pub.write_rank.tolist()) == [0, 1, 2]
    assert (pub.next_sample_ms == NEVER).all() and not pub.has_report.any()
    assert pub.stats_ms == 60_000 and pub.next_quota_ms == START + 15 * 60_000


def test_random_phases_are_whole_ticks_within_the_stats_interval() -> None:
    c = conf().with_overrides({"statsUpdateFrequencyInSecs": 300})
    pub = Publishing.new(
        c, IDS, NAMES, start_ms=START, tick_ms=60_000, random_phase=True, rng=np.random.default_rng(4)
    )
    assert set(pub.stats_phase_ms.tolist()) <= {0, 60_000, 120_000, 180_000, 240_000}


def test_join_writes_a_first_report_and_schedules_stats() -> None:
    pub, c = publishing(), cluster([0, 1, 2])
    joined(pub, c, START)
    assert pub.has_report.all() and pub.written.all() and (pub.last_update_ms == START).all()
    assert (pub.next_sample_ms == START).all()
    assert pub.published.limit[0, 0] == 1600.0  # 16 cores
    pub.broker_left(1)
    assert not pub.has_report[1] and pub.next_sample_ms[1] == NEVER


def test_a_new_brokers_first_check_compares_with_an_empty_report() -> None:
    # ModularLoadManagerImpl.start() acquires the lock node with localData but leaves lastData empty;
    # only writeBrokerDataOnZooKeeper updates it. An idle broker at 20 % CPU (above the 10 % threshold)
    # therefore writes again at its first check; idle brokers at 0 % do not
    pub, c = publishing(), cluster([0, 1, 1])
    for s in range(3):
        usage = np.zeros(5)
        usage[CPU] = 320.0 if s == 2 else 0.0  # 20 % of 16 cores
        pub.broker_joined(s, START, usage, c.cost.limits(np.array([s]))[0])
    pub.publish(START, np.arange(3, dtype=np.int64), 0, c.alive, lock=True)
    alive = np.arange(3, dtype=np.int64)
    assert pub.writers(START + 5_000, alive).tolist() == [2]
    pub.publish(START + 5_000, np.array([2], dtype=np.int64), 0, c.alive)
    assert pub.writers(START + 10_000, alive).size == 0  # the baseline is now the written report


def test_only_due_brokers_sample_and_only_their_listing_changes() -> None:
    pub, c = publishing(), cluster([0, 1, 1])
    joined(pub, c, START)
    true = measure(c, population(), TRAFFIC, 0.0, np.random.default_rng(0), pub.weights)
    assert pub.sample(START, true, c.owner, TRAFFIC, population().topics).tolist() == [0, 1, 2]
    assert pub.local.bundle_owner.tolist() == [0, 1, 1]
    assert pub.local.agg[1].tolist() == [500.0, 50.0, 5e5, 5e4]
    assert pub.next_sample_ms.tolist() == [START + 60_000] * 3
    # bundle 2 moves from broker 1 to broker 0; only broker 0 samples (broker 1 is late)
    pub.next_sample_ms[1] = START + 120_000
    pub.next_sample_ms[2] = START + 120_000
    c.owner[2] = 0
    true = measure(c, population(), TRAFFIC, 60.0, np.random.default_rng(0), pub.weights)
    assert pub.sample(START + 60_000, true, c.owner, TRAFFIC, population().topics).tolist() == [0]
    assert pub.local.bundle_owner.tolist() == [0, 1, 0]  # broker 0 now lists it; 1's report is stale
    assert pub.local.bundles.tolist() == [2, 2, 0]
    assert pub.local.agg[0].tolist() == [400.0, 40.0, 4e5, 4e4]


def test_a_late_sample_keeps_the_stats_grid() -> None:
    pub, c = publishing(), cluster([0, 1, 2])
    joined(pub, c, START)
    true = measure(c, population(), TRAFFIC, 0.0, np.random.default_rng(0), pub.weights)
    pub.sample(START + 150_000, true, c.owner, TRAFFIC, population().topics)
    assert pub.next_sample_ms.tolist() == [START + 180_000] * 3


def sampled() -> tuple[Publishing, ClusterState]:
    pub, c = publishing(), cluster([0, 1, 2])
    joined(pub, c, START)
    pub.begin_tick()
    true = measure(c, population(), TRAFFIC, 0.0, np.random.default_rng(0), pub.weights)
    pub.sample(START, true, c.owner, TRAFFIC, population().topics)
    pub.publish(START, pub.writers(START, true.slots), 0, c.alive)
    return pub, c


def test_report_rule_writes_on_a_change_above_the_threshold_or_when_stale() -> None:
    pub, _ = sampled()
    alive = np.arange(3, dtype=np.int64)
    now = START + 60_000
    assert pub.writers(now, alive).size == 0  # nothing changed
    pub.local.agg[1, 0] *= 1.05  # rate +4.5 %: below 10 %
    pub.local.agg[2, 0] *= 1.5  # rate +45 %
    assert pub.writers(now, alive).tolist() == [2]
    pub.last_update_ms[0] = now - 15 * 60_000 - 1  # older than the max interval
    writers = pub.writers(now, alive)
    assert sorted(writers.tolist()) == [0, 2]
    assert pub.write_rank[writers[0]] < pub.write_rank[writers[1]]  # in write order
    pub.has_report[2] = False
    assert pub.writers(now, alive).tolist() == [0]


def test_publish_copies_the_writers_local_reports_and_feeds_the_leader() -> None:
    pub, c = sampled()
    updates = pub.leader_data.updates
    assert pub.published.bundle_owner.tolist() == [0, 1, 2] and pub.leader_data.has.all()
    pub.begin_tick()
    pub.local.agg[2] = [1.0, 2.0, 3.0, 4.0]
    pub.local.bundle_values[:, 2] = [7.0, 8.0, 9.0, 10.0]
    now = START + 60_000
    pub.publish(now, np.array([2], dtype=np.int64), 1, c.alive)
    assert pub.published.agg[2].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert pub.published.agg[1].tolist() == [200.0, 20.0, 2e5, 2e4]  # not written
    assert pub.published.bundle_values[:, 2].tolist() == [7.0, 8.0, 9.0, 10.0]
    assert pub.written.tolist() == [False, False, True]
    assert pub.last_update_ms[2] == now and pub.last_update_ms[1] == START
    assert pub.leader_data.updates == updates + 2  # one write, one periodic update


def test_quota_update_is_due_once_per_interval() -> None:
    pub = publishing()
    assert pub.quota_updates_due(START + 14 * 60_000) == 0
    assert pub.quota_updates_due(START + 15 * 60_000) == 1
    assert pub.quota_updates_due(START + 16 * 60_000) == 0
    assert pub.quota_updates_due(START + 47 * 60_000) == 1  # late: next one on the grid
    assert pub.next_quota_ms == START + 60 * 60_000


def test_snapshot_is_cached_until_the_next_write_and_shows_published_brokers_only() -> None:
    pub, c = sampled()
    c.alive[1] = False
    pub.broker_left(1)
    pub.publish(START, np.array([1], dtype=np.int64), 0, c.alive)
    snap = pub.snapshot(START, c.alive)
    assert snap.broker_ids == (IDS[0], IDS[2])
    assert pub.view.slot_to_row.tolist() == [0, -1, 1, -1]
    assert pub.snapshot(START + 1, c.alive) is snap and snap.now_ms == START + 1
    assert pub.view.cached is snap
    pub.publish(START + 2, np.zeros(0, dtype=np.int64), 1, c.alive)
    assert pub.view.cached is None
    assert pub.snapshot(START + 2, c.alive) is not snap


@pytest.mark.parametrize("writers", [[], [0]])
def test_publish_without_a_live_writer_changes_no_report(writers: list[int]) -> None:
    pub, c = sampled()
    c.alive[0] = False
    before = pub.published.usage.copy()
    pub.local.usage[0] = 99.0
    pub.publish(START + 60_000, np.asarray(writers, dtype=np.int64), 0, c.alive)
    np.testing.assert_array_equal(pub.published.usage, before)
