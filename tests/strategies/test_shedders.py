"""Shedding strategies: the behaviours of Pulsar's own unit tests (spec §7) and PIP-364's examples."""

from __future__ import annotations

import pytest
from builders import MB, broker_data, bundle_data, cpu_broker, snapshot

from shedlab.config import LoadBalancerConfig
from shedlab.model.pulsar import BrokerData, BundleData
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import AvgShedder, OverloadShedder, ThresholdShedder, UniformLoadShedder

DEFAULT = LoadBalancerConfig()


def ten_bundle_cluster(recent: dict[str, int] | None = None) -> ClusterSnapshot:
    """broker-1 at 99.9 % owning bundle-1..10 (tp i MB each way); broker2 idle with copies."""
    bundles = {f"bundle-{i}": bundle_data(tp_in=i * MB, tp_out=i * MB) for i in range(1, 11)}
    bundles |= {f"broker2-bundle-{i + 10}": bundle_data(tp_in=i * MB, tp_out=i * MB) for i in range(1, 11)}
    brokers = {
        "broker-1": broker_data(
            bw=(999, 1000), tp_in=55 * MB, tp_out=55 * MB, bundles=[f"bundle-{i}" for i in range(1, 11)]
        ),
        "broker2": broker_data(bundles=[f"broker2-bundle-{i}" for i in range(11, 21)]),
    }
    return snapshot(brokers, bundles, recent)


class TestThresholdShedder:
    def test_no_brokers(self) -> None:
        assert not ThresholdShedder().find_bundles_for_unloading(snapshot({}), DEFAULT).unloads

    def test_single_broker_without_bundles_is_its_own_average(self) -> None:
        snap = snapshot({"b": broker_data(bw=(999, 1000))})
        assert not ThresholdShedder().find_bundles_for_unloading(snap, DEFAULT).unloads

    def test_single_bundle_broker_is_never_shed(self) -> None:
        snap = snapshot(
            {
                "a": broker_data(bw=(999, 1000), tp_in=100 * MB, bundles=["x"]),
                "b": broker_data(bundles=["y", "z"]),
            },
            {"x": bundle_data(tp_in=MB)},
        )
        result = ThresholdShedder().find_bundles_for_unloading(snap, DEFAULT)
        assert not result.unloads
        assert result.skipped[0]["reason"] == "sole namespace bundle"

    def test_largest_bundles_first_until_target(self) -> None:
        result = ThresholdShedder().find_bundles_for_unloading(ten_bundle_cluster(), DEFAULT)
        assert result.by_broker() == {"broker-1": ["bundle-10", "bundle-9", "bundle-8"]}
        reason = result.unloads[0].reason
        assert reason["avg_usage"] == pytest.approx(0.4995)
        assert reason["target_throughput"] == pytest.approx(110 * MB * 0.4495)

    def test_recently_unloaded_bundles_are_skipped(self) -> None:
        snap = ten_bundle_cluster({"bundle-10": 1, "bundle-9": 1})
        result = ThresholdShedder().find_bundles_for_unloading(snap, DEFAULT)
        assert result.by_broker() == {"broker-1": ["bundle-8", "bundle-7", "bundle-6", "bundle-5"]}

    def test_usage_above_100_percent_is_not_clamped(self) -> None:
        brokers = {
            "broker-2": broker_data(
                cpu=(140, 100),
                memory=(10, 100),
                direct=(10, 100),
                bw=(500, 1000),
                tp_in=1e300,
                bundles=["bundle-1", "bundle-2"],
            ),
            "broker-3": broker_data(cpu=(10, 100), bw=(500, 1000), bundles=["bundle-3", "bundle-4"]),
        }
        snap = snapshot(brokers, {"bundle-2": bundle_data(tp_in=1000, tp_out=1000)})
        result = ThresholdShedder().find_bundles_for_unloading(snap, DEFAULT)
        assert result.by_broker() == {"broker-2": ["bundle-2"]}
        assert result.unloads[0].reason["usage_history"] == pytest.approx(1.4)

    def test_min_throughput_skips_small_targets(self) -> None:
        snap = snapshot(
            {"a": broker_data(bw=(90, 100), tp_in=MB, bundles=["x", "y"]), "b": broker_data(bundles=["z"])},
            {"x": bundle_data(tp_in=MB)},
        )
        result = ThresholdShedder().find_bundles_for_unloading(snap, DEFAULT)
        assert not result.unloads
        assert result.skipped[0]["reason"] == "target below minimum throughput"

    def test_clean_cache_forgets_dead_brokers(self) -> None:
        shedder = ThresholdShedder()
        shedder.find_bundles_for_unloading(ten_bundle_cluster(), DEFAULT)
        assert set(shedder.history) == {"broker-1", "broker2"}
        shedder.on_active_brokers_change({"leader"})
        assert shedder.history == {}

    def test_pip364_history_over_unloading(self) -> None:
        """90/10, then really 50/50 (history says 86/14), then really 14/86 (history 78.8/21.2)."""
        shedder = ThresholdShedder()
        bundles = {f"b{i}": bundle_data(tp_in=(i + 1) * MB, tp_out=(i + 1) * MB) for i in range(20)}

        def cluster(u1: float, u2: float) -> ClusterSnapshot:
            return snapshot(
                {
                    "broker1": broker_data(
                        cpu=(u1, 100), tp_in=100 * MB, tp_out=100 * MB, bundles=[f"b{i}" for i in range(10)]
                    ),
                    "broker2": broker_data(
                        cpu=(u2, 100),
                        tp_in=100 * MB,
                        tp_out=100 * MB,
                        bundles=[f"b{i}" for i in range(10, 20)],
                    ),
                },
                bundles,
            )

        first = shedder.find_bundles_for_unloading(cluster(90, 10), DEFAULT)
        assert set(first.by_broker()) == {"broker1"}
        second = shedder.find_bundles_for_unloading(cluster(50, 50), DEFAULT)
        assert shedder.history == pytest.approx({"broker1": 0.86, "broker2": 0.14})
        assert set(second.by_broker()) == {"broker1"}, "equal real load, yet broker1 still sheds"
        third = shedder.find_bundles_for_unloading(cluster(14, 86), DEFAULT)
        assert shedder.history == pytest.approx({"broker1": 0.788, "broker2": 0.212})
        assert set(third.by_broker()) == {"broker1"}, "broker1 is now the coldest and still sheds"

    def lower_boundary_cluster(self) -> tuple[dict[str, BrokerData], dict[str, BundleData]]:
        brokers: dict[str, BrokerData] = {}
        bundles: dict[str, BundleData] = {}
        for b in range(10):
            owned = []
            for k in range(10):
                name = f"tenant/ns{b}/0x{k:08x}_0x{k + 1:08x}"
                bundles[name] = bundle_data(tp_in=100 * MB, tp_out=100 * MB, num_samples=b * 10 + k + 1)
                owned.append(name)
            owned += [f"tenant/nodata{b}/0x{k:08x}_0x{k + 1:08x}" for k in range(10)]
            brokers[f"broker-{b}"] = broker_data(bw=(80, 100), tp_in=100 * MB, tp_out=100 * MB, bundles=owned)
        brokers["broker-10"] = broker_data(
            bundles=["tenant/idle/0x00000000_0x00000001", "tenant/idle/0x1_0x2"]
        )
        return brokers, bundles

    def test_lower_boundary_off_sheds_nothing(self) -> None:
        brokers, bundles = self.lower_boundary_cluster()
        assert not ThresholdShedder().find_bundles_for_unloading(snapshot(brokers, bundles), DEFAULT).unloads

    def test_lower_boundary_on_sheds_from_the_most_loaded_broker(self) -> None:
        brokers, bundles = self.lower_boundary_cluster()
        conf = DEFAULT.with_overrides({"lowerBoundarySheddingEnabled": True})
        result = ThresholdShedder().find_bundles_for_unloading(snapshot(brokers, bundles), conf)
        assert list(result.by_broker()) == ["broker-0"]
        # target = 200 MiB × 0.1 × 0.5 = 10 MiB, exactly the minimum: proceeds (strict check)
        assert result.unloads[0].reason["target_throughput"] == pytest.approx(10 * MB)
        assert result.unloads[0].reason["pass"] == "lower-boundary"

    def test_lower_boundary_needs_a_broker_below_the_bound(self) -> None:
        brokers = {
            f"b{i}": broker_data(bw=(80, 100), tp_in=100 * MB, bundles=[f"x{i}", f"y{i}"]) for i in range(11)
        }
        conf = DEFAULT.with_overrides({"lowerBoundarySheddingEnabled": True})
        assert not ThresholdShedder().find_bundles_for_unloading(snapshot(brokers), conf).unloads


class TestOverloadShedder:
    def test_sheds_largest_first_until_target(self) -> None:
        result = OverloadShedder().find_bundles_for_unloading(ten_bundle_cluster(), DEFAULT)
        assert result.by_broker() == {"broker-1": ["bundle-10", "bundle-9"]}

    def test_not_overloaded_or_single_bundle(self) -> None:
        one = snapshot({"a": broker_data(bw=(999, 1000), bundles=["x"])}, {"x": bundle_data(tp_in=1)})
        below = snapshot({"a": broker_data(bw=(500, 1000), bundles=["x", "y"])}, {"x": bundle_data(tp_in=1)})
        assert not OverloadShedder().find_bundles_for_unloading(one, DEFAULT).unloads
        assert not OverloadShedder().find_bundles_for_unloading(below, DEFAULT).unloads

    def test_resource_weights_apply(self) -> None:
        conf = DEFAULT.with_overrides(
            {"loadBalancerBandwidthInResourceWeight": 0.0, "loadBalancerBandwidthOutResourceWeight": 0.0}
        )
        assert OverloadShedder().find_bundles_for_unloading(ten_bundle_cluster(), DEFAULT).unloads
        assert not OverloadShedder().find_bundles_for_unloading(ten_bundle_cluster(), conf).unloads

    def test_recently_unloaded(self) -> None:
        snap = ten_bundle_cluster({"bundle-10": 1, "bundle-9": 1})
        assert OverloadShedder().find_bundles_for_unloading(snap, DEFAULT).by_broker() == {
            "broker-1": ["bundle-8", "bundle-7"]
        }

    def test_exactly_at_threshold_sheds(self) -> None:
        snap = snapshot(
            {"a": broker_data(cpu=(85, 100), tp_in=MB, bundles=["x", "y"]), "b": broker_data()},
            {"x": bundle_data(tp_in=1), "y": bundle_data(tp_in=2)},
        )
        assert OverloadShedder().find_bundles_for_unloading(snap, DEFAULT).by_broker() == {"a": ["y", "x"]}


class TestUniformLoadShedder:
    def test_bundle_cap(self) -> None:
        conf = DEFAULT.with_overrides({"maxUnloadBundleNumPerShedding": 2})
        bundles = {f"b{i}": bundle_data(tp_in=MB, tp_out=MB, num_samples=i + 1) for i in range(20)}
        snap = snapshot(
            {
                "broker-1": broker_data(tp_in=20 * MB, tp_out=20 * MB, bundles=list(bundles)),
                "broker2": broker_data(),
            },
            bundles,
        )
        result = UniformLoadShedder().find_bundles_for_unloading(snap, conf)
        assert len(result.unloads) == 2
        assert result.unloads[0].reason["mode"] == "throughput"

    def overload_select_cluster(self) -> ClusterSnapshot:
        rates = [50e3, 60e3, 70e3, 10e3, 20e3]
        tps = [50, 60, 70, 80, 10]
        brokers: dict[str, BrokerData] = {}
        bundles: dict[str, BundleData] = {}
        for b, (r, t) in enumerate(zip(rates, tps, strict=True)):
            names = [f"broker{b}/ns/0x{k:08x}_0x{k + 1:08x}" for k in range(5)]
            for k, n in enumerate(names):
                bundles[n] = bundle_data(rate_in=r / 5, tp_in=t * MB / 5, num_samples=k + 1)
            brokers[f"broker{b}"] = broker_data(rate_in=r, tp_in=t * MB, bundles=names)
        return snapshot(brokers, bundles)

    @pytest.mark.parametrize(
        ("rate_thr", "tp_mult", "expected_broker"),
        [(50, 0, "broker2"), (0, 2, "broker3"), (50, 2, "broker2")],
    )
    def test_overloaded_broker_choice(self, rate_thr: float, tp_mult: float, expected_broker: str) -> None:
        conf = DEFAULT.with_overrides(
            {
                "maxUnloadBundleNumPerShedding": 1,
                "maxUnloadPercentage": 0.5,
                "loadBalancerMsgRateDifferenceShedderThreshold": rate_thr,
                "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": tp_mult,
            }
        )
        result = UniformLoadShedder().find_bundles_for_unloading(self.overload_select_cluster(), conf)
        assert list(result.by_broker()) == [expected_broker]
        assert len(result.unloads) == 1

    def test_small_traffic_int_truncation(self) -> None:
        conf = DEFAULT.with_overrides(
            {"minUnloadMessage": 0, "minUnloadMessageThroughput": 0, "maxUnloadPercentage": 0.5}
        )
        names = [f"b{i}" for i in range(5)]
        rate_bundles = {
            n: bundle_data(rate_in=50, rate_out=50, num_samples=i + 1) for i, n in enumerate(names)
        }
        snap = snapshot(
            {"broker-1": broker_data(rate_in=250, rate_out=250, bundles=names), "broker-2": broker_data()},
            rate_bundles,
        )
        result = UniformLoadShedder().find_bundles_for_unloading(snap, conf)
        assert len(result.unloads) == 2  # need = int(0.5 × (500 − 1)) = 249 → 100 + 100
        assert result.unloads[0].reason["amount_to_move"] == 249
        tp_bundles = {n: bundle_data(tp_in=1024, tp_out=1024, num_samples=i + 1) for i, n in enumerate(names)}
        snap = snapshot(
            {"broker-1": broker_data(tp_in=5120, tp_out=5120, bundles=names), "broker-2": broker_data()},
            tp_bundles,
        )
        conf = conf.with_overrides({"loadBalancerMsgRateDifferenceShedderThreshold": 0})
        assert len(UniformLoadShedder().find_bundles_for_unloading(snap, conf).unloads) == 2

    def test_subtracts_truncated_bundle_rates(self) -> None:
        conf = DEFAULT.with_overrides({"minUnloadMessage": 0, "maxUnloadPercentage": 1.0})
        bundles = {
            "x": bundle_data(rate_in=10.7),
            "y": bundle_data(rate_in=10.7),
            "z": bundle_data(rate_in=0.0),
        }
        snap = snapshot({"a": broker_data(rate_in=21.4, bundles=list(bundles)), "b": broker_data()}, bundles)
        # need = int(21.4 - 1.0) = 20; x: 10.7 ≤ 20 → need 10; y: 10.7 > 10 → skipped; z always fits
        result = UniformLoadShedder().find_bundles_for_unloading(snap, conf)
        assert result.by_broker() == {"a": ["x", "z"]}

    def test_below_both_thresholds(self) -> None:
        snap = snapshot({"a": broker_data(rate_in=100, bundles=["x", "y"]), "b": broker_data(rate_in=90)})
        assert not UniformLoadShedder().find_bundles_for_unloading(snap, DEFAULT).unloads


def avg_cluster(cpus: list[float], rates: list[float], n_bundles: list[int]) -> ClusterSnapshot:
    """The AvgShedderTest set-up: cpu-only scores, msg rate in = out, bundles of 450+450 msg/s."""
    brokers: dict[str, BrokerData] = {}
    bundles: dict[str, BundleData] = {}
    sample = 0
    for b, (cpu, rate, count) in enumerate(zip(cpus, rates, n_bundles, strict=True), start=1):
        names = []
        for k in range(count):
            sample += 1
            name = f"tenant/ns{b}/0x{k:08x}_0x{k + 1:08x}"
            bundles[name] = bundle_data(rate_in=450, rate_out=450, num_samples=sample)
            names.append(name)
        brokers[f"broker{b}"] = cpu_broker(cpu, rate_in=rate, rate_out=rate, bundles=names)
    return snapshot(brokers, bundles)


AVG_CONF = DEFAULT.with_overrides({"maxUnloadPercentage": 0.5})


class TestAvgShedder:
    def test_hit_high_threshold(self) -> None:
        snap = avg_cluster([80, 30, 50], [10000, 1000, 5000], [11, 1, 1])
        avg = AvgShedder()
        assert not avg.find_bundles_for_unloading(snap, AVG_CONF).unloads
        result = avg.find_bundles_for_unloading(snap, AVG_CONF)
        assert len(result.unloads) == 10 and set(result.by_broker()) == {"broker1"}
        reason = result.unloads[-1].reason
        assert reason["mode"] == "msgRate" and reason["amount_to_move"] == pytest.approx(9000)
        assert reason["amount_selected"] == pytest.approx(9000)
        assert reason["pair"] == ["broker2", "broker1"] and reason["hit_high_over"] == 2
        for u in result.unloads:
            assert (
                avg.select_broker(["broker1", "broker2", "broker3"], u.bundle, snap, AVG_CONF).broker
                == "broker2"
            )

    def test_hit_low_threshold(self) -> None:
        conf = AVG_CONF.with_overrides(
            {"loadBalancerAvgShedderLowThreshold": 20, "loadBalancerAvgShedderHitCountLowThreshold": 6}
        )
        snap = avg_cluster([60, 40, 50], [10000, 1000, 5000], [11, 1, 1])
        avg = AvgShedder()
        for _ in range(5):
            assert not avg.find_bundles_for_unloading(snap, conf).unloads
        result = avg.find_bundles_for_unloading(snap, conf)
        assert len(result.unloads) == 10 and all(u.destination == "broker2" for u in result.unloads)

    def test_multiple_pairs_in_one_cycle(self) -> None:
        snap = avg_cluster([80, 30, 75, 35], [10000, 1000, 10000, 1000], [11, 1, 11, 1])
        avg = AvgShedder()
        assert not avg.find_bundles_for_unloading(snap, AVG_CONF).unloads
        result = avg.find_bundles_for_unloading(snap, AVG_CONF)
        assert {b: len(v) for b, v in result.by_broker().items()} == {"broker1": 10, "broker3": 10}
        assert {u.destination for u in result.unloads if u.broker == "broker1"} == {"broker2"}
        assert {u.destination for u in result.unloads if u.broker == "broker3"} == {"broker4"}

    def test_pip_pairing_20_30_52_70_80(self) -> None:
        snap = avg_cluster([20, 30, 52, 70, 80], [100] * 5, [2] * 5)
        avg = AvgShedder()
        pairs = avg._find_pairs(snap, snap.weighted_max_usage((1, 0, 1, 1)) * 100, DEFAULT)
        assert [(snap.broker_ids[p.under], snap.broker_ids[p.over]) for p in pairs] == [
            ("broker1", "broker5"),
            ("broker2", "broker4"),
        ]
        # Quirk: the PIP counts 70 − 30 as a gap of 40 (a high-threshold hit), but in Pulsar's arithmetic
        # 30 % is 30.000001907 after float32 percentUsage, so the gap is 39.999998 < 40: a low hit only.
        assert avg.hit_high == {"broker1": 1, "broker5": 1}
        assert avg.hit_low == {"broker1": 1, "broker5": 1, "broker2": 1, "broker4": 1}
        assert "broker3" not in avg.hit_low  # the middle broker's self-pair (gap 0) resets it

    def test_hit_counts_are_per_broker_80_80_20(self) -> None:
        """The chapter's example: the cold broker's count grows while its partner alternates."""
        conf = DEFAULT.with_overrides({"loadBalancerAvgShedderHitCountHighThreshold": 3})
        avg = AvgShedder()
        first = avg_cluster([80, 79, 20], [5000, 5000, 100], [3, 3, 1])  # broker1 is the hottest
        second = avg_cluster([79, 80, 20], [5000, 5000, 100], [3, 3, 1])  # now broker2 is
        assert not avg.find_bundles_for_unloading(first, conf).unloads
        assert avg.hit_high == {"broker3": 1, "broker1": 1}
        assert not avg.find_bundles_for_unloading(second, conf).unloads
        assert avg.hit_high == {"broker3": 2, "broker2": 1}, "broker1 reset, broker3 kept counting"
        third = avg.find_bundles_for_unloading(second, conf)
        assert third.unloads and {u.destination for u in third.unloads} == {"broker3"}
        assert (
            third.unloads[0].reason["hit_high_under"] == 3 and third.unloads[0].reason["hit_high_over"] == 2
        )

    def test_sole_bundle_is_not_protected(self) -> None:
        snap = avg_cluster([90, 10], [5000, 0], [1, 0])
        avg = AvgShedder()
        avg.find_bundles_for_unloading(snap, AVG_CONF)
        assert avg.find_bundles_for_unloading(snap, AVG_CONF).by_broker() == {
            "broker1": ["tenant/ns1/0x00000000_0x00000001"]
        }

    def test_small_gap_resets_counters_without_shedding(self) -> None:
        snap = avg_cluster([90, 10], [600, 0], [3, 0])
        avg = AvgShedder()
        avg.find_bundles_for_unloading(snap, AVG_CONF)
        result = avg.find_bundles_for_unloading(snap, AVG_CONF)
        assert not result.unloads
        assert "below minUnloadMessage" in result.skipped[0]["reason"]
        assert avg.hit_high == {} and avg.hit_low == {}

    def test_no_pairs_clears_all_counters(self) -> None:
        avg = AvgShedder()
        avg.find_bundles_for_unloading(avg_cluster([90, 10], [5000, 0], [3, 0]), AVG_CONF)
        assert avg.hit_high
        avg.find_bundles_for_unloading(avg_cluster([50, 45], [5000, 0], [3, 0]), AVG_CONF)
        assert avg.hit_high == {} and avg.hit_low == {}

    def test_throughput_mode_and_zero_traffic_never_taken(self) -> None:
        bundles = {"t/n/0x0_0x1": bundle_data(tp_in=3 * MB), "t/n/0x1_0x2": bundle_data(tp_in=0.0)}
        snap = snapshot(
            {"hot": cpu_broker(90, tp_in=3 * MB, bundles=list(bundles)), "cold": cpu_broker(10)}, bundles
        )
        avg = AvgShedder()
        avg.find_bundles_for_unloading(snap, AVG_CONF)
        result = avg.find_bundles_for_unloading(snap, AVG_CONF.with_overrides({"maxUnloadPercentage": 1.0}))
        assert result.by_broker() == {"hot": ["t/n/0x0_0x1"]}
        assert result.unloads[0].reason["mode"] == "throughput"
