"""The leader's view built by report publishing, checked for values (docs/mutation-testing.md survivors).

The snapshot's per-broker long-term rates are the sums of the leader's time averages of the bundles
each broker's *published* report lists; a broker that left stops listing anything; a broker that joins
starts from an empty report and samples after its stats phase.
"""

from __future__ import annotations

import numpy as np
from core.sim.test_sim_publishing import (
    IDS,
    NAMES,
    START,
    TRAFFIC,
    cluster,
    conf,
    joined,
    population,
    publishing,
    sampled,
)

from shedlab.core.sim.publishing import Publishing
from shedlab.core.sim.state import measure


def test_snapshot_long_term_rates_are_per_owner_sums_of_the_leaders_averages() -> None:
    pub, c = sampled()
    pub.published.bundle_owner = np.array([2, 0, 2])  # broker 2 lists bundles 0 and 2, broker 0 bundle 1
    pub.view.cached = None
    snap = pub.snapshot(START + 5, c.alive)
    ld = pub.leader_data
    assert snap.broker_ids == tuple(IDS)
    assert snap.now_ms == START + 5
    np.testing.assert_array_equal(
        snap.long_term_msg_rate_in, [ld.long[0][1], 0.0, ld.long[0][0] + ld.long[0][2]]
    )
    np.testing.assert_array_equal(
        snap.long_term_msg_rate_out, [ld.long[1][1], 0.0, ld.long[1][0] + ld.long[1][2]]
    )
    assert snap.long_term_msg_rate_in[2] > 0 and snap.long_term_msg_rate_out[0] > 0
    np.testing.assert_array_equal(snap.bundle_topics, ld.topics)
    assert snap.bundle_owner.tolist() == [2, 0, 2]


def test_snapshot_leaves_out_alive_brokers_without_a_report() -> None:
    pub, c = sampled()
    pub.has_report[1] = False
    pub.view.cached = None
    snap = pub.snapshot(START, c.alive)
    assert snap.broker_ids == (IDS[0], IDS[2])
    assert pub.view.slot_to_row.tolist() == [0, -1, 1, -1]
    pub.view.cached = None
    c.alive[2] = False  # dead but still holding a report: left out as well
    assert pub.snapshot(START, c.alive).broker_ids == (IDS[0],)


def test_a_leaving_broker_stops_listing_its_bundles() -> None:
    pub, c = publishing(), cluster([1, 0, 1])
    joined(pub, c, START)
    true = measure(c, population(), TRAFFIC, 0.0, np.random.default_rng(0), pub.weights)
    pub.sample(START, true, c.owner, TRAFFIC, population().topics)
    assert pub.local.bundle_owner.tolist() == [1, 0, 1]
    pub.broker_left(1)
    assert pub.local.bundle_owner.tolist() == [-1, 0, -1]
    assert not pub.has_report[1] and pub.has_report[0]


def test_a_joining_broker_starts_empty_samples_at_once_and_then_at_its_phase() -> None:
    """Its lock node's report is empty; its first sample is at its start, its second at its phase."""
    pub, _ = sampled()
    pub.local.agg[1] = [5.0, 6.0, 7.0, 8.0]
    pub.local.bundles[1] = pub.local.topics[1] = pub.local.consumers[1] = pub.local.producers[1] = 9
    pub.stats_phase_ms[1] = 120_000
    usage, limit = np.arange(5.0), np.full(5, 100.0)
    pub.broker_joined(1, START + 60_000, usage, limit)
    assert pub.local.agg[1].tolist() == [0.0, 0.0, 0.0, 0.0]
    assert [
        int(a[1]) for a in (pub.local.bundles, pub.local.topics, pub.local.consumers, pub.local.producers)
    ] == [0] * 4
    assert pub.local.usage[1].tolist() == usage.tolist() and pub.local.limit[1].tolist() == limit.tolist()
    assert pub.next_sample_ms[1] == START + 60_000
    assert pub.resume_ms[1] == START + 180_000


def test_a_partial_sample_moves_only_the_samplers_listings() -> None:
    pub, c = publishing(), cluster([0, 1, 2])
    joined(pub, c, START)
    true = measure(c, population(), TRAFFIC, 0.0, np.random.default_rng(0), pub.weights)
    pub.sample(START, true, c.owner, TRAFFIC, population().topics)
    # bundle 1 moves from broker 1 to broker 0 and bundle 0 from broker 0 to broker 2; only broker 0 samples
    pub.next_sample_ms[:] = [START + 60_000, START + 120_000, START + 120_000]
    c.owner[:] = [2, 0, 2]
    traffic = type(TRAFFIC)(TRAFFIC.rate_in * 2, TRAFFIC.rate_out * 2, TRAFFIC.tp_in * 2, TRAFFIC.tp_out * 2)
    true = measure(c, population(), traffic, 60.0, np.random.default_rng(0), pub.weights)
    assert pub.sample(START + 60_000, true, c.owner, traffic, population().topics).tolist() == [0]
    # broker 0 no longer lists bundle 0 (stale) and now lists bundle 1 with its new values; broker 2's
    # listing is its last sample's: bundle 2 only
    assert pub.local.bundle_owner.tolist() == [-1, 0, 2]
    assert pub.local.bundle_values[:, 1].tolist() == [400.0, 40.0, 4e5, 4e4]
    assert pub.local.bundle_values[:, 2].tolist() == [300.0, 30.0, 3e5, 3e4]  # not re-sampled


def test_before_any_report_the_leader_sees_no_broker_and_no_owner() -> None:
    # Pins the leader's view before the first write: no broker rows, every bundle unowned (-1), every
    # slot mapped to no row; owners stay integers (the manager counts them with np.bincount). Also pins
    # that a tick with no writer publishes nothing but still runs the leader's periodic update.
    pub, c = publishing(), cluster([0, 1, 2])
    alive = np.arange(3, dtype=np.int64)
    writers = pub.writers(START, alive)
    assert writers.size == 0
    pub.publish(START, writers, 1, c.alive)
    assert not pub.written.any() and not pub.has_report.any()
    assert pub.leader_data.updates == 1
    snap = pub.snapshot(START, c.alive)
    assert snap.broker_ids == () and snap.num_brokers == 0
    assert snap.bundle_owner.tolist() == [-1, -1, -1] and snap.bundle_owner.dtype.kind == "i"
    assert pub.view.slot_to_row.tolist() == [-1, -1, -1, -1]


def test_the_leaders_owners_are_integers_after_reports() -> None:
    # Pins the slot → row map rebuilt when the broker rows change: integer rows, so owners index arrays.
    pub, c = sampled()
    snap = pub.snapshot(START, c.alive)
    assert snap.bundle_owner.tolist() == [0, 1, 2] and snap.bundle_owner.dtype.kind == "i"
    assert np.bincount(snap.bundle_owner, minlength=3).tolist() == [1, 1, 1]


def test_publish_takes_bundle_values_and_topics_from_the_writers_reports_only() -> None:
    # Pins which bundles a write updates: those the *writers'* local reports list (broker slot 0
    # included); a broker that sampled but did not write keeps its published values, and the leader's
    # topic counts are the written reports' (spec §4.2: updateBundleData reads the written reports).
    pub, c = sampled()
    pub.begin_tick()
    pub.local.bundle_values[:, 0] = [7.0, 8.0, 9.0, 10.0]  # bundle 0: listed by slot 0, which writes
    pub.local.bundle_values[:, 1] = [1.0, 2.0, 3.0, 4.0]  # bundle 1: listed by slot 1, which does not
    pub.local.bundle_topics = np.array([12, 13, 14], dtype=np.int64)
    before = pub.published.bundle_topics.tolist()
    pub.publish(START + 60_000, np.array([0], dtype=np.int64), 0, c.alive)
    # the published reports' topic counts: the writer's bundle takes its local count, the others keep theirs
    assert pub.published.bundle_topics.tolist() == [12, before[1], before[2]]
    assert before[1:] != [13, 14]
    assert pub.published.bundle_values[:, 0].tolist() == [7.0, 8.0, 9.0, 10.0]
    assert pub.published.bundle_values[:, 1].tolist() == [200.0, 20.0, 2e5, 2e4]  # the last written
    assert pub.published.bundle_values[:, 2].tolist() == [300.0, 30.0, 3e5, 3e4]
    assert pub.leader_data.topics.tolist() == [12, 3, 4]
    assert pub.written.tolist() == [True, False, False]


def test_stats_phases_are_whole_ticks_drawn_only_when_asked() -> None:
    # Pins Publishing.new's phases: zero without random_phase; with it, whole ticks in
    # [0, statsUpdateFrequency) — both 0 and one tick occur among 40 brokers for a 2-tick interval, and a
    # 1-tick interval leaves no room for a phase.
    ids = [f"broker-{k:04d}:8080" for k in range(40)]

    def phases(stats_s: int, random_phase: bool) -> set[int]:
        c = conf().with_overrides({"statsUpdateFrequencyInSecs": stats_s})
        pub = Publishing.new(
            c, ids, NAMES, start_ms=START, tick_ms=60_000, random_phase=random_phase,
            rng=np.random.default_rng(1),
        )  # fmt: skip
        return set(pub.stats_phase_ms.tolist())

    assert phases(120, random_phase=False) == {0}
    assert phases(120, random_phase=True) == {0, 60_000}
    assert phases(60, random_phase=True) == {0}
