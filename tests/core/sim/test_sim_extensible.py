"""The extensible manager's data path in the simulator (core/sim/extensible.py); its pair's registry rules."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from builders import cpu_broker, snapshot
from hypothesis import given, settings
from hypothesis import strategies as st

from shedlab.config import LoadBalancerConfig
from shedlab.core.decide import decide_on_snapshot
from shedlab.core.sim import Scenario, load_scenario, run_simulation
from shedlab.core.sim.extensible import ExtensibleManager, top_k_rows
from shedlab.core.sim.kernel import Simulation
from shedlab.errors import ConfigError
from shedlab.manager import ManagerDecision
from shedlab.model.pulsar import NamespaceBundleStats, ResourceUsage
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import make_pair, pair_config, resolve_config, resolve_pair_name
from shedlab.strategies.extensible_data import BrokerLoadData, ResourceWeights, top_k_bundles
from shedlab.strategies.registry import EXTENSIBLE_LOAD_MANAGER, short_pair_name
from shedlab.strategies.transfer_shedder import TransferShedder

PAIR = "TransferShedder+ExtensibleLeastResourceUsageWithWeight"


def small(**overrides: Any) -> Scenario:
    doc: dict[str, Any] = {
        "name": "small",
        "duration": "40m",
        "seed": 1,
        "strategy": PAIR,
        "hardware": {"standard": {"cores": 16, "nic_gbps": 25}},
        "brokers": [{"count": 1}],
        "events": [{"at": "3m", "kind": "add_brokers", "count": 3}],
        "workloads": [
            {
                "tenants": 1,
                "namespaces": 4,
                "bundles": 24,
                "msg_rate_in": {"dist": "lognormal", "median": 9000, "sigma": 0.4},
            }
        ],
    }
    doc.update(overrides)
    return Scenario.from_mapping(doc, source="test")


# ------------------------------------------------------------------------------------------- registry
def test_pair_names_and_sets_the_extensible_manager() -> None:
    assert resolve_pair_name("transfershedder + extensibleleastresourceusagewithweight") == PAIR
    conf = resolve_config(pair_config(PAIR))
    assert conf.load_manager_class_name == EXTENSIBLE_LOAD_MANAGER
    assert conf.load_balancer_load_shedding_strategy.endswith("extensions.scheduler.TransferShedder")
    assert short_pair_name(PAIR) == "Transfer+ExtLRUWW"
    # the modular pairs leave Pulsar's default load manager alone
    assert pair_config("AvgShedder").load_manager_class_name.endswith("ModularLoadManagerImpl")


@pytest.mark.parametrize(
    "pair",
    [
        "TransferShedder+LeastResourceUsageWithWeight",
        "ThresholdShedder+ExtensibleLeastResourceUsageWithWeight",
    ],
)
def test_extensible_classes_pair_only_with_each_other(pair: str) -> None:
    with pytest.raises(ConfigError, match="extensible load manager"):
        resolve_pair_name(pair)


def test_manager_class_must_match_the_pair() -> None:
    modular_with_ext = LoadBalancerConfig().with_overrides(
        {"loadManagerClassName": EXTENSIBLE_LOAD_MANAGER}, "f.conf"
    )
    with pytest.raises(ConfigError, match="runs TransferShedder") as info:
        resolve_config(modular_with_ext)
    assert info.value.source == "f.conf"
    ext_with_modular = pair_config(PAIR).with_overrides(
        {"loadManagerClassName": "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"}, "g.conf"
    )
    with pytest.raises(ConfigError, match="runs in the extensible load manager"):
        resolve_config(ext_with_modular)


def test_the_modular_manager_refuses_the_extensible_pair() -> None:
    with pytest.raises(ConfigError, match="runs in the simulator"):
        make_pair(pair_config(PAIR))


# ------------------------------------------------------------------------------------------- top-k
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 5e5), st.floats(0, 5e5), st.floats(0, 3e6), st.floats(0, 3e6), st.integers(0, 900)
        ),
        min_size=0,
        max_size=25,
    ),
    st.integers(0, 12),
)
def test_vectorised_top_k_equals_the_reference(rows: list[tuple[float, ...]], k: int) -> None:
    names = [f"t/ns{j % 3}/0x{j:08x}_0x{j + 1:08x}" for j in range(len(rows))]
    names += ["pulsar/system/0x00000000_0xffffffff"]
    values = np.zeros((4, len(names)))
    topics = np.zeros(len(names), dtype=np.int64)
    consumers = np.zeros(len(names), dtype=np.int64)
    for j, (ri, ro, ti, to, c) in enumerate(rows):
        values[:, j] = (ri, ro, ti, to)
        topics[j], consumers[j] = c % 7, c
    values[:, -1] = (1.0, 1.0, 9e6, 9e6)  # a system bundle: never reported
    stats = {
        n: NamespaceBundleStats(
            msgRateIn=values[0, j],
            msgRateOut=values[1, j],
            msgThroughputIn=values[2, j],
            msgThroughputOut=values[3, j],
            consumerCount=int(consumers[j]),
            topics=int(topics[j]),
        )
        for j, n in enumerate(names)
    }
    expected = [
        b.bundle_name for b in top_k_bundles(stats, k, excluded_namespaces=["t/ns2"]).top_bundles_load_data
    ]
    rank = np.argsort(np.argsort(np.asarray(names, dtype=object), kind="stable"), kind="stable")
    eligible = np.asarray([not (n.startswith("pulsar/") or n.startswith("t/ns2/")) for n in names])
    got = top_k_rows(np.arange(len(names)), values, topics, consumers, rank, eligible, k)
    assert [names[j] for j in got.tolist()] == expected


def test_vectorised_top_k_rounds_just_below_a_half_down_as_java_math_round() -> None:
    """Math.round(0.49999999999999994) is 0 in Java; floor(x + 0.5) in doubles gave 1, ranking a bundle
    of 49999.99999999999 B/s in over one of 1 MB/s out."""
    values = np.zeros((4, 2))
    values[2, 0] = 49999.99999999999
    values[3, 1] = 1e6
    zero = np.zeros(2, dtype=np.int64)
    got = top_k_rows(np.arange(2), values, zero, zero, np.arange(2), np.ones(2, dtype=np.bool_), 1)
    assert got.tolist() == [1]


def test_n_report_instants_are_one_update_with_history_h_to_the_n() -> None:
    res = {
        n: ResourceUsage(u, 100.0)
        for n, u in zip(
            ("cpu", "memory", "directMemory", "bandwidthIn", "bandwidthOut"),
            (70.0, 0.0, 0.0, 20.0, 30.0),
            strict=True,
        )
    }
    kwargs: dict[str, Any] = dict(
        msg_throughput_in=1e6,
        msg_throughput_out=2e6,
        msg_rate_in=10.0,
        msg_rate_out=20.0,
        bundle_count=3,
        topics=3,
        weights=ResourceWeights(),
    )
    start = BrokerLoadData(weighted_max_ema=0.2, msg_throughput_ema=5e5, updated_at=1)
    stepped = start
    for i in range(12):
        stepped = stepped.updated(res, history=0.9, now_ms=1000 * (i + 2), **kwargs)
    once = start.updated(res, history=0.9**12, now_ms=13_000, **kwargs)
    assert once.weighted_max_ema == pytest.approx(stepped.weighted_max_ema, rel=1e-12)
    assert once.msg_throughput_ema == pytest.approx(stepped.msg_throughput_ema, rel=1e-12)


# ------------------------------------------------------------------------------------------- simulation
def test_same_seed_same_run_and_the_pair_is_named() -> None:
    a = run_simulation(small(), seed=3)
    b = run_simulation(small(), seed=3)
    for x, y in zip((a.ticks, a.brokers, a.decisions), (b.ticks, b.brokers, b.decisions), strict=True):
        pd.testing.assert_frame_equal(x, y)
    assert a.strategy == PAIR


def _traced(scenario: Scenario, seed: int = 1) -> tuple[Simulation, list[tuple[int, Any, list[Any]]]]:
    sim = Simulation(scenario, seed=seed)
    assert isinstance(sim.manager, ExtensibleManager)
    trace: list[tuple[int, Any, list[Any]]] = []
    manager = sim.manager
    original = manager.do_load_shedding

    def wrapped(snapshot: ClusterSnapshot, now_ms: int) -> list[ManagerDecision]:
        decisions = original(snapshot, now_ms)
        trace.append((now_ms, manager.last_result, decisions))
        return decisions

    manager.do_load_shedding = wrapped  # type: ignore[method-assign]  # a trace wrapper, on this instance only
    for t in range(sim.n_ticks):
        sim.tick(t, sim.start_ms + t * sim.tick_ms)
    return sim, trace


def test_transfers_land_on_their_destination_and_cool_down_follows() -> None:
    sim, trace = _traced(small())
    shed = [(now, r, d) for now, r, d in trace if d]
    assert shed, "the skewed start must make TransferShedder shed"
    result = sim.result()
    decisions = result.decisions
    assert (decisions["destination"] != decisions["source"]).all()
    reasons = [json.loads(r) for r in decisions["reason"]]
    assert all(r["strategy"] == "TransferShedder" and r["transfer"] for r in reasons)
    # each transferred bundle is owned by its destination once its clients reconnected
    last = decisions.drop_duplicates("bundle", keep="last")
    for bundle, dest in zip(last["bundle"], last["destination"], strict=True):
        assert sim.cluster.ids[int(sim.cluster.owner[sim.bundle_index[bundle]])] == dest
    # right after a cycle that moved something, the next one waits for the sources' fresh data
    first_now = shed[0][0]
    after = [r for now, r, _ in trace if now > first_now]
    assert after and after[0].reason == "CoolDown"
    # the hit-count gate: three earlier cycles saw the condition before the first decision
    before = [r for now, r, _ in trace if now < first_now and r is not None and r.reason == "HitCount"]
    assert [r.hit_count for r in before[-3:]] == [1, 2, 3]


def test_the_leader_reads_only_published_data() -> None:
    sim, _ = _traced(small(duration="10m"))
    path = sim.extensible
    assert path is not None
    for broker, data in path.published.items():
        local = path.local_data[sim.cluster.slot_of[broker]]
        assert data.reported_at >= data.updated_at
        assert data.updated_at <= local.updated_at
    assert path.reports_published >= len(path.published)


def test_a_starting_broker_publishes_its_load_data_at_once() -> None:
    """ExtensibleLoadManagerImpl.playFollower / playLeader end with ``reportAsync(true)``: a broker
    publishes a sample taken at its start, then every loadBalancerReportUpdateMinIntervalMillis.
    A first report one interval late left the leader a window with an available broker without data
    (a cycle then skips as NoLoadData)."""
    sim = Simulation(small(), seed=1)
    path = sim.extensible
    assert path is not None
    joined_at = sim.start_ms + 180_000
    t = 0
    while (now := sim.start_ms + t * sim.tick_ms) <= joined_at:
        sim.tick(t, now)
        t += 1
    joined = [b for s, b in enumerate(sim.cluster.ids) if sim.cluster.start_ts[s] == joined_at]
    assert len(joined) == 3
    assert all(path.published[b].updated_at == joined_at for b in joined)
    assert all(path.local_data[sim.cluster.slot_of[b]].updated_at == joined_at for b in joined)


def test_a_new_leader_publishes_one_more_sample_at_its_election() -> None:
    """ExtensibleLoadManagerImpl.playLeader ends with ``brokerLoadDataReporter.reportAsync(true)``: the
    broker that takes the leadership over samples once more and publishes, whatever the change rule says
    (its schedule goes on as before). A broker elected as it starts has only its start report."""
    scenario = small(
        events=[
            {"at": "3m", "kind": "add_brokers", "count": 3},
            {"at": "10m", "kind": "remove_brokers", "brokers": [1]},
        ]
    )
    sim = Simulation(scenario, seed=1)
    path = sim.extensible
    assert path is not None
    elected_at = sim.start_ms + 600_000
    t = 0
    while (now := sim.start_ms + t * sim.tick_ms) < elected_at:
        sim.tick(t, now)
        t += 1
    before = {b: path.local_data[s] for s, b in enumerate(sim.cluster.ids) if sim.cluster.alive[s]}
    reports = path.reports_published
    sim.tick(t, elected_at)
    assert sim.cluster.leader is not None
    leader = sim.cluster.ids[sim.cluster.leader]
    assert leader != sim.cluster.ids[0] and before[leader].updated_at < elected_at
    assert path.published[leader].reported_at == elected_at
    assert path.published[leader].updated_at == elected_at
    followers = [b for b in before if b not in (leader, sim.cluster.ids[0])]
    assert all(path.local_data[sim.cluster.slot_of[b]].updated_at == elected_at for b in followers)
    assert path.reports_published >= reports + 1


def test_broker_loss_removes_its_data_and_assigns_its_bundles() -> None:
    scenario = small(
        events=[
            {"at": "3m", "kind": "add_brokers", "count": 3},
            {"at": "25m", "kind": "remove_brokers", "count": 1},
        ]
    )
    sim, _ = _traced(scenario)
    gone = [
        b for s, b in enumerate(sim.cluster.ids) if not sim.cluster.alive[s] and sim.cluster.start_ts[s] >= 0
    ]
    path = sim.extensible
    assert path is not None
    assert gone and all(b not in path.published and b not in path.top for b in gone)
    assert (sim.cluster.owner >= 0).all()


def test_builtin_scenarios_run_with_the_extensible_pair() -> None:
    result = run_simulation(load_scenario("over-unloading-90-10"), strategy=PAIR, seed=1)
    assert result.summary["unloads"] > 0
    assert result.config["loadManagerClassName"] == EXTENSIBLE_LOAD_MANAGER


def test_decide_refuses_the_extensible_pair() -> None:
    snap = snapshot({"a:8080": cpu_broker(90.0), "b:8080": cpu_broker(10.0)})
    with pytest.raises(ConfigError, match="runs in the simulator"):
        decide_on_snapshot(snap, LoadBalancerConfig(), strategy=PAIR)


# ------------------------------------------------------------------------------ the broker filter pipeline
def _settled(limit: int) -> tuple[Simulation, ExtensibleManager, int]:
    """Six minutes of ``small`` (one busy broker, three idle ones joined at 3m) with
    ``loadBalancerBrokerMaxTopics`` = ``limit`` and the hit-count gate open; all four have published."""
    scenario = small(
        config={"loadBalancerBrokerMaxTopics": limit, "loadBalancerSheddingConditionHitCountThreshold": 0}
    )
    sim = Simulation(scenario, seed=1)
    for _ in range(7):
        sim.step()
    now = sim.now_ms
    assert sim.extensible is not None and len(sim.extensible.published) == 4
    assert isinstance(sim.manager, ExtensibleManager)
    return sim, sim.manager, now


def _set_topics(sim: Simulation, topics: dict[str, int]) -> None:
    path = sim.extensible
    assert path is not None
    for broker, n in topics.items():
        path.published[broker] = replace(path.published[broker], topics=n)


def test_placement_skips_brokers_at_the_max_topic_count() -> None:
    """ExtensibleLoadManagerImpl.selectAsync runs the broker filter pipeline before the strategy, and
    BrokerMaxTopicCountFilter.filter removes every broker whose published ``topics >=
    loadBalancerBrokerMaxTopics`` (no published data counts as 0 topics)."""
    sim, manager, now = _settled(limit=1000)
    snap = sim.publishing.snapshot(now, sim.cluster.alive)
    # unfiltered, LeastResourceUsageWithWeight's best set is broker-0002, broker-0003 and broker-0004
    _set_topics(sim, {"broker-0001:8080": 0, "broker-0002:8080": 1000, "broker-0003:8080": 1000})
    _set_topics(sim, {"broker-0004:8080": 999})
    bundle = next(iter(sim.bundle_index))
    path = sim.extensible
    assert path is not None
    published = dict(path.published)
    picked = set()
    for _ in range(30):
        path.published = dict(published)  # each pick on the same data: a lookup tombstones its destination
        manager.transfers.pop(bundle, None)
        picked.add(manager.lookup(bundle, snap, now).broker)
    assert picked == {"broker-0004:8080"}


def test_placement_finds_no_broker_when_every_one_is_at_the_max_topic_count() -> None:
    """selectAsync: no candidate left after the filters completes with no broker (the lookup fails); unlike
    the modular manager's max-topics filter, the extensible pipeline never restores the unfiltered set."""
    sim, manager, now = _settled(limit=1)
    assert sim.extensible is not None
    _set_topics(sim, dict.fromkeys(sim.extensible.published, 5))
    bundle = next(iter(sim.bundle_index))
    manager.transfers.pop(bundle, None)
    assert manager.lookup(bundle, sim.publishing.snapshot(now, sim.cluster.alive), now).broker is None


def test_transfer_shedder_does_not_transfer_to_a_broker_at_the_max_topic_count() -> None:
    """TransferShedder.isTransferable runs the same brokerFilterPipeline over the available brokers, and a
    destination the max-topic filter removed makes the bundle non-transferable: the pair broker-0001 →
    broker-0003 moves nothing, nor does the next max broker, paired with the same min broker."""
    sim, manager, now = _settled(limit=1000)
    snap = sim.publishing.snapshot(now, sim.cluster.alive)
    _set_topics(sim, {"broker-0001:8080": 0, "broker-0002:8080": 0, "broker-0003:8080": 1000})
    manager.scheduler.recently_unloaded_brokers.clear()
    manager.scheduler.recently_unloaded_bundles.clear()
    assert manager.do_load_shedding(snap, now) == []
    result = manager.last_result
    assert result is not None and result.label == "Skip"
    bundle_skips = [s for s in result.skipped if "bundle" in s]
    assert {s["broker"] for s in bundle_skips} == {"broker-0001:8080", "broker-0002:8080"}
    assert {s["reason"] for s in bundle_skips} == {"not transferable (policies or filters)"}
    # one topic fewer and the same cycle transfers to broker-0003
    _set_topics(sim, {"broker-0003:8080": 999})
    decisions = manager.do_load_shedding(snap, now)
    assert "broker-0003:8080" in {d.destination for d in decisions}


# ------------------------------------------------------------------------------------------- tombstones
def test_a_transfer_tombstones_its_source_and_destination() -> None:
    """BrokerLoadDataReporter/TopBundleLoadDataReporter.handleEvent: the source of a Releasing bundle and
    the destination of an Owned one clear their local data and remove their store entries; at the next
    report both publish again, their EMAs started afresh from that sample (no decay from the old load)."""
    sim, manager, now = _settled(limit=50_000)
    path = sim.extensible
    assert path is not None
    manager.scheduler.recently_unloaded_brokers.clear()
    manager.scheduler.recently_unloaded_bundles.clear()
    had, before = set(path.published), path.tombstones
    decisions = manager.do_load_shedding(sim.publishing.snapshot(now, sim.cluster.alive), now)
    assert decisions, "the busy broker must shed to the idle ones"
    moved = {d.source for d in decisions} | {d.destination for d in decisions}
    for broker in moved:
        assert broker not in path.published and broker not in path.top
        assert path.local_data[sim.cluster.slot_of[broker]] == BrokerLoadData()
    assert set(path.published) == had - moved  # the others keep theirs
    removals = path.tombstones
    assert removals - before == len(moved)
    # the next tick: published again (forced), each EMA seeded by its first sample after the clear
    sim.step()
    for broker in moved:
        data = path.published[broker]
        # a fresh EMA: the sample itself, however far the broker's load moved
        assert data.weighted_max_ema == data.weighted_max(path.settings.resource_weights)
        assert data.msg_throughput_ema == data.msg_throughput
        assert broker in path.top
    # the clients' lookups of the transferred bundles land on their destination without a second event
    assert path.tombstones == removals


def test_tombstones_remove_store_entries_at_most_once_per_ten_seconds() -> None:
    """The reporters' dedup (TOMBSTONE_DELAY_IN_MILLIS = 10 s, lastTombstonedAt set first): a second
    event within 10 s clears the local data again but removes nothing; the next report is published
    whatever the change rule says (reportedAt is 0 again)."""
    from shedlab.core.sim.extensible import TOMBSTONE_DELAY_MS

    sim, _, now = _settled(limit=50_000)
    path = sim.extensible
    assert path is not None
    broker = "broker-0002:8080"
    before = path.tombstones
    path.tombstone(broker, now)
    assert path.tombstones == before + 1 and broker not in path.published
    data = BrokerLoadData()
    path.published[broker] = data  # as if it had published again
    path.tombstone(broker, now + TOMBSTONE_DELAY_MS - 1)
    assert path.published[broker] is data and path.tombstones == before + 1
    assert path.forced[sim.cluster.slot_of[broker]]
    path.tombstone(broker, now + TOMBSTONE_DELAY_MS)
    assert broker not in path.published and path.tombstones == before + 2
    path.tombstone("broker-9999:8080", now)  # not a broker of the cluster: nothing to do
    assert path.tombstones == before + 2


def test_an_assignment_tombstones_its_destination() -> None:
    """A bundle without an owner assigned by a lookup: Owned at the chosen broker, which tombstones."""
    sim, manager, now = _settled(limit=50_000)
    path = sim.extensible
    assert path is not None
    bundle = next(iter(sim.bundle_index))
    manager.transfers.pop(bundle, None)
    answer = manager.lookup(bundle, sim.publishing.snapshot(now, sim.cluster.alive), now)
    assert answer.path == "placement" and answer.broker is not None
    assert answer.broker not in path.published
    # an unload without transfer (or an admin unload) bound to a destination: Owned there at the lookup
    dest = "broker-0003:8080"
    manager.transfers[bundle] = dest
    answer = manager.lookup(bundle, sim.publishing.snapshot(now, sim.cluster.alive), now)
    assert (answer.path, answer.broker) == ("affinity", dest)
    assert dest not in path.published


def test_an_admin_unload_tombstones_the_owner() -> None:
    """The admin API's unload (the sandbox's) releases the bundle: its owner's Releasing event."""
    sim, _, _ = _settled(limit=50_000)
    path = sim.extensible
    assert path is not None
    j = int(np.flatnonzero(sim.cluster.owner >= 0)[0])
    owner = sim.cluster.ids[int(sim.cluster.owner[j])]
    assert owner in path.published
    assert sim.request_unload(sim.pop.names[j], None)
    assert owner not in path.published
    assert path.local_data[sim.cluster.slot_of[owner]] == BrokerLoadData()


def test_an_unload_without_transfer_happens_even_when_its_lookup_picks_the_source() -> None:
    """loadBalancerTransferEnabled=false: TransferShedder's Unload has no destination; UnloadScheduler
    publishes it (ServiceUnitStateChannelImpl.publishUnloadEventAsync: Releasing with no destination, then
    Free) and records the bundle and its source once it completes. The clients' lookup then assigns it
    with selectAsync, which excludes no broker, so it may land on the source again: the unload, its
    counters and the source's cool-down happen all the same (unlike the modular manager, Pulsar has no
    "destination is the current owner" skip here)."""
    sim, manager, now = _settled(limit=50_000)
    path = sim.extensible
    assert path is not None
    manager.settings = replace(manager.settings, load_balancer_transfer_enabled=False)
    manager.scheduler.recently_unloaded_brokers.clear()
    manager.scheduler.recently_unloaded_bundles.clear()
    snap = sim.publishing.snapshot(now, sim.cluster.alive)
    # what the cycle will decide (the hit-count gate is open, and a probe changes no other state)
    result = TransferShedder().find_bundles_for_unloading(path.view(), manager.settings, now_ms=now)
    assert result.unloads and all(u.destination is None for u in result.unloads)
    owners = {u.bundle: u.broker for u in result.unloads}
    manager._select = lambda bundle, candidates=None: owners[bundle]  # type: ignore[method-assign]
    before = manager.unload_bundle_total
    decisions = manager.do_load_shedding(snap, now)
    assert [(d.source, d.bundle, d.destination) for d in decisions] == [
        (u.broker, u.bundle, u.broker) for u in result.unloads
    ]
    assert manager.unload_bundle_total == before + len(decisions)
    assert set(owners.values()) <= set(manager.scheduler.recently_unloaded_brokers)
    assert set(owners) <= set(manager.scheduler.recently_unloaded_bundles)
    assert all(manager.transfers[b] == src for b, src in owners.items())
