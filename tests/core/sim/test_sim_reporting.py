"""Pulsar's data path: the report-publishing rule (§4.3) and the leader's bundle time averages (§4.2)."""

from __future__ import annotations

from typing import TypedDict

import numpy as np
import pytest
from builders import WritesWithTopics

from shedlab.config import LoadBalancerConfig
from shedlab.core.sim.reporting import (
    DEFAULT_VALUES,
    LeaderBundleData,
    apply_samples,
    need_broker_data_update,
    need_update_mask,
    percent_change,
)
from shedlab.model.pulsar import (
    NUM_LONG_SAMPLES,
    NUM_SHORT_SAMPLES,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageMessageData,
)

NOW = 1_700_000_000_000


def report(rate: float = 0.0, tp: float = 0.0, bundles: int = 0, cpu: float = 0.0) -> LocalBrokerData:
    data = LocalBrokerData(
        msgRateIn=rate, msgThroughputIn=tp, numBundles=bundles, cpu=ResourceUsage(cpu, 1000.0)
    )
    data.lastUpdate = NOW
    return data


class ReportArgs(TypedDict, total=False):
    """Keyword arguments of :func:`report`, for the parametrized cases."""

    rate: float
    tp: float
    bundles: int
    cpu: float


@pytest.fixture
def conf5() -> LoadBalancerConfig:
    return LoadBalancerConfig().with_overrides({"loadBalancerReportUpdateThresholdPercentage": 5})


@pytest.mark.parametrize(
    ("last", "now", "expected"),
    [
        # ModularLoadManagerImplTest.testNeedBrokerDataUpdate, threshold 5 %
        ({"rate": 100.0}, {"rate": 104.0}, False),
        ({"rate": 100.0}, {"rate": 105.1}, True),
        ({"rate": 105.1}, {"rate": 94.0}, True),
        ({"rate": 94.0}, {"rate": 95.1}, False),
        ({"rate": 0.0}, {"rate": 1e-8}, True),
        ({"rate": 1e-8}, {"rate": 0.0}, True),
        ({"rate": 0.0}, {"rate": 0.0}, False),
        ({"cpu": 100.0}, {"cpu": 106.0}, False),  # 0.6 points of usage
        ({"cpu": 100.0}, {"cpu": 206.0}, True),
        ({"tp": 100.0}, {"tp": 106.0}, True),
        ({"bundles": 100}, {"bundles": 106}, True),
        ({"bundles": 100}, {"bundles": 100}, False),
    ],
)
def test_need_broker_data_update_numbers(
    conf5: LoadBalancerConfig, last: ReportArgs, now: ReportArgs, expected: bool
) -> None:
    assert need_broker_data_update(report(**last), report(**now), conf5, NOW) is expected
    # the vectorised rule agrees
    lr, nr = report(**last), report(**now)
    w = conf5.resource_weights()
    mask = need_update_mask(
        last_rate=np.array([lr.msgRateIn]),
        last_tp=np.array([lr.msgThroughputIn]),
        last_bundles=np.array([float(lr.numBundles)]),
        last_usage=np.array([lr.max_resource_usage_with_weight(*w)]),
        rate=np.array([nr.msgRateIn]),
        tp=np.array([nr.msgThroughputIn]),
        bundles=np.array([float(nr.numBundles)]),
        usage=np.array([nr.max_resource_usage_with_weight(*w)]),
        last_update_ms=np.array([NOW]),
        now_ms=NOW,
        conf=conf5,
    )
    assert bool(mask[0]) is expected


def test_a_nan_usage_change_writes_no_report_whatever_else_changed() -> None:
    # A cpu limit that is 0 as a float32 makes the usage +∞ in both reports: ∞ − ∞ is NaN, and Java's
    # Math.max chain (ModularLoadManagerImpl.needBrokerDataUpdate) is NaN, not above the threshold, though
    # the rate moved by 50 %; the vectorised rule's np.maximum agrees, Python's max() kept the 50.
    last, now = report(rate=100.0), report(rate=150.0)
    last.cpu = now.cpu = ResourceUsage(1.0, 1e-50)
    conf = LoadBalancerConfig()
    assert not need_broker_data_update(last, now, conf, NOW)
    assert need_broker_data_update(report(rate=100.0), report(rate=150.0), conf, NOW)


def test_cpu_change_ignored_with_cpu_weight_zero(conf5: LoadBalancerConfig) -> None:
    conf = conf5.with_overrides({"loadBalancerCPUResourceWeight": 0.0})
    assert not need_broker_data_update(report(cpu=100.0), report(cpu=206.0), conf, NOW)


def test_old_report_is_always_rewritten() -> None:
    conf = LoadBalancerConfig()
    last = report(rate=100.0)
    now = report(rate=100.0)
    max_age = conf.load_balancer_report_update_max_interval_minutes * 60_000
    assert not need_broker_data_update(last, now, conf, NOW + max_age)
    assert need_broker_data_update(last, now, conf, NOW + max_age + 1)


def test_percent_change() -> None:
    assert percent_change(0.0, 0.0) == 0.0
    assert percent_change(0.0, 1.0) == float("inf")
    assert percent_change(200.0, 150.0) == 25.0


# Rates whose change is 10 % give 10.0 or 10.000000000000002 by the order of the operations: Java's
# ``100 * Math.abs((old - new) / old)`` (ModularLoadManagerImpl.percentChange) against 100·|old − new| / old.
AT_THRESHOLD = [(249559.97609419716, 274515.9737036169, False), (835332.5155505129, 751799.2639954616, True)]


@pytest.mark.parametrize(("old", "new", "writes"), AT_THRESHOLD)
def test_a_change_on_the_threshold_is_computed_as_java_does(old: float, new: float, writes: bool) -> None:
    conf = LoadBalancerConfig()  # loadBalancerReportUpdateThresholdPercentage 10, strict
    assert percent_change(old, new) == 100 * abs((old - new) / old)
    assert need_broker_data_update(report(rate=old), report(rate=new), conf, NOW) is writes
    zero = np.zeros(1)
    mask = need_update_mask(
        last_rate=np.array([old]),
        last_tp=zero,
        last_bundles=zero,
        last_usage=zero,
        rate=np.array([new]),
        tp=zero,
        bundles=zero,
        usage=zero,
        last_update_ms=np.array([NOW]),
        now_ms=NOW,
        conf=conf,
    )
    assert bool(mask[0]) is writes


@pytest.mark.parametrize("max_samples", [NUM_SHORT_SAMPLES, NUM_LONG_SAMPLES])
@pytest.mark.parametrize(("n0", "count"), [(0, 1), (0, 3), (4, 3), (8, 5), (10, 7), (0, 25), (999, 4)])
def test_closed_form_samples_match_pulsars_update(max_samples: int, n0: int, count: int) -> None:
    n0 = min(n0, max_samples)
    data = TimeAverageMessageData(max_samples, n0, 1000.0, 2000.0, 30.0, 40.0)
    sample = NamespaceBundleStats(
        msgRateIn=7.0, msgThroughputIn=700.0, msgRateOut=9.0, msgThroughputOut=900.0
    )
    values = np.array([[data.msgRateIn], [data.msgRateOut], [data.msgThroughputIn], [data.msgThroughputOut]])
    x = np.array([[7.0], [9.0], [700.0], [900.0]])
    n, v = apply_samples(np.array([n0]), values, x, np.array([count]), max_samples)
    for _ in range(count):
        data.update(sample)
    assert int(n[0]) == data.numSamples
    np.testing.assert_allclose(
        v[:, 0], [data.msgRateIn, data.msgRateOut, data.msgThroughputIn, data.msgThroughputOut], rtol=1e-9
    )


def _values(*rows: float) -> np.ndarray:
    return np.repeat(np.array(rows, dtype=float)[:, None], 1, axis=1)


def test_leader_data_first_write_creates_data_from_one_sample_per_update() -> None:
    ld = LeaderBundleData.empty(2)
    new_values = np.array([[10.0, 20.0], [10.0, 20.0], [1e4, 2e4], [1e4, 2e4]])
    position = np.zeros(4, dtype=np.int64)
    position[[0, 1]] = [1, 2]  # broker 0 writes first, then broker 1
    listed = ld.apply_writes(
        listed_by=np.array([-1, -1]),
        values=np.zeros((4, 2)),
        topics=np.zeros(2, dtype=np.int64),
        new_listed_by=np.array([0, 1]),
        new_values=new_values,
        new_topics=np.array([3, 4]),
        write_position=position,
        writes=2,
    )
    assert listed.tolist() == [0, 1]
    assert ld.has.all()
    # bundle 0 is sampled by both updates, bundle 1 only by the second one
    assert ld.short_n.tolist() == [2, 1]
    assert ld.long_n.tolist() == [2, 1]
    np.testing.assert_allclose(ld.short[:, 0], new_values[:, 0])
    assert ld.topics.tolist() == [3, 4]
    assert ld.updates == 2


def test_leader_data_drops_a_bundle_nobody_lists_and_restarts_it_from_defaults() -> None:
    ld = LeaderBundleData.empty(1)
    values = np.array([[100.0], [100.0], [1e5], [1e5]])
    position = np.zeros(3, dtype=np.int64)
    position[0] = 1
    ld.apply_writes(
        listed_by=np.array([-1]), values=values, topics=np.array([1]), new_listed_by=np.array([0]),
        new_values=values, new_topics=np.array([1]), write_position=position, writes=1,
    )  # fmt: skip
    # the bundle moved to broker 1; broker 0 writes first (without it), then broker 1 (with it)
    position = np.zeros(3, dtype=np.int64)
    position[[0, 1]] = [1, 2]
    moved = np.array([[50.0], [50.0], [5e4], [5e4]])
    listed = ld.apply_writes(
        listed_by=np.array([0]), values=values, topics=np.array([1]), new_listed_by=np.array([1]),
        new_values=moved, new_topics=np.array([1]), write_position=position, writes=2,
    )  # fmt: skip
    assert listed.tolist() == [1]
    assert ld.short_n.tolist() == [1]  # restarted: one sample after the re-creation
    np.testing.assert_allclose(ld.short[:, 0], moved[:, 0])
    # the new owner wrote first: the old owner's later write does not remove it
    ld2 = LeaderBundleData.empty(1)
    ld2.apply_writes(
        listed_by=np.array([-1]), values=values, topics=np.array([1]), new_listed_by=np.array([0]),
        new_values=values, new_topics=np.array([1]), write_position=np.array([1, 0, 0]), writes=1,
    )  # fmt: skip
    listed = ld2.apply_writes(
        listed_by=np.array([0]), values=values, topics=np.array([1]), new_listed_by=np.array([1]),
        new_values=moved, new_topics=np.array([1]), write_position=np.array([2, 1, 0]), writes=2,
    )  # fmt: skip
    assert listed.tolist() == [1]
    assert ld2.short_n.tolist() == [3]  # 1 before, then both updates sample the new owner's value
    # a bundle whose old owner writes without it and whose new owner does not write is dropped
    ld3 = LeaderBundleData.empty(1)
    ld3.apply_writes(
        listed_by=np.array([-1]), values=values, topics=np.array([1]), new_listed_by=np.array([0]),
        new_values=values, new_topics=np.array([1]), write_position=np.array([1, 0, 0]), writes=1,
    )  # fmt: skip
    listed = ld3.apply_writes(
        listed_by=np.array([0]), values=values, topics=np.array([1]), new_listed_by=np.array([1]),
        new_values=moved, new_topics=np.array([1]), write_position=np.array([1, 0, 0]), writes=1,
    )  # fmt: skip
    assert listed.tolist() == [-1]
    assert not ld3.has[0]
    np.testing.assert_allclose(DEFAULT_VALUES, [50.0, 50.0, 50000.0, 50000.0])


def test_unchanged_reports_still_add_samples_on_every_update() -> None:
    """Samples are event-driven: a bundle of a broker that did not write still gets one per update."""
    ld = LeaderBundleData.empty(1)
    values = np.array([[100.0], [100.0], [1e5], [1e5]])
    ld.apply_writes(
        listed_by=np.array([-1]), values=values, topics=np.array([1]), new_listed_by=np.array([0]),
        new_values=values, new_topics=np.array([1]), write_position=np.array([1, 0, 0]), writes=1,
    )  # fmt: skip
    ld.apply_writes(
        listed_by=np.array([0]), values=values, topics=np.array([1]), new_listed_by=np.array([0]),
        new_values=values, new_topics=np.array([1]), write_position=np.array([0, 1, 2]), writes=2,
        extra_updates=1,
    )  # fmt: skip
    assert ld.short_n.tolist() == [4]
    assert ld.updates == 4


def test_long_term_throughputs_tracked_on_request_with_the_same_rates() -> None:
    """The sandbox publishes whole BundleData: its long-term throughputs advance like the rates, and
    tracking them leaves the rates' bits exactly as the simulator's two-row arrays have them."""
    new_values = np.array([[10.0, 20.0], [11.0, 21.0], [1e4, 2e4], [3e4, 4e4]])
    kwargs: WritesWithTopics = {
        "listed_by": np.array([-1, -1]),
        "values": np.zeros((4, 2)),
        "topics": np.zeros(2, dtype=np.int64),
        "new_listed_by": np.array([0, 1]),
        "new_values": new_values,
        "new_topics": np.array([3, 4]),
        "write_position": np.array([1, 2, 0, 0]),
        "writes": 2,
        "extra_updates": 3,
    }
    plain, full = LeaderBundleData.empty(2), LeaderBundleData.empty(2)
    full.track_long_throughputs()
    plain.apply_writes(**kwargs)
    full.apply_writes(**kwargs)
    assert plain.long.shape == (2, 2) and full.long.shape == (4, 2)
    assert full.long[:2].tobytes() == plain.long.tobytes()
    np.testing.assert_allclose(full.long[2:], new_values[2:])
    with pytest.raises(RuntimeError):
        full.track_long_throughputs()  # after an update: the history was not kept
