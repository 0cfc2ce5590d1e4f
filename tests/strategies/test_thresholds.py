"""Every strategy threshold tested exactly on its boundary, and every documented quirk exercised.

Each test pins one comparison (``>`` vs ``>=``, ``<=`` vs ``<``) or one quirk named in a strategy's
docstring, with numbers chosen to be exact in binary floating point (0.25, 0.5, 0.75 …), so the
boundary case really is the boundary. The expected values are computed by hand in the comments.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from builders import MB, broker_data, bundle_data, cpu_broker, snapshot

from shedlab.config import LoadBalancerConfig
from shedlab.model.pulsar import BrokerData, BundleData
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import (
    AvgShedder,
    LeastLongTermMessageRate,
    LeastResourceUsageWithWeight,
    OverloadShedder,
    ThresholdShedder,
    UniformLoadShedder,
)
from shedlab.strategies.base import SheddingResult
from shedlab.strategies.greedy import greedy_largest_first, java_int, sort_descending

DEFAULT = LoadBalancerConfig()


def conf(**keys: object) -> LoadBalancerConfig:
    return DEFAULT.with_overrides(keys)


def moves(result: SheddingResult) -> list[tuple[str, str, str | None]]:
    return [(u.broker, u.bundle, u.destination) for u in result.unloads]


# ---------------------------------------------------------------------------------------- UniformLoadShedder


def uniform_cluster(
    max_rate: float,
    min_rate: float,
    *,
    max_tp: float = 0.0,
    min_tp: float = 0.0,
    bundle_rate: float = 10.7,
    n_bundles: int = 3,
) -> ClusterSnapshot:
    """'hot' (rates/throughputs max_*) owning n_bundles bundles of bundle_rate msg/s each; 'cold' (min_*)."""
    names = [f"hot/ns/b{i}" for i in range(n_bundles)]
    bundles = {n: bundle_data(rate_in=bundle_rate, tp_in=bundle_rate) for n in names}
    bundles["cold/ns/c0"] = bundle_data(rate_in=1, tp_in=1)
    return snapshot(
        {
            "hot": broker_data(rate_in=max_rate, tp_in=max_tp, bundles=names),
            "cold": broker_data(rate_in=min_rate, tp_in=min_tp, bundles=["cold/ns/c0"]),
        },
        bundles,
    )


UNIFORM_RATE = {
    "loadBalancerMsgRateDifferenceShedderThreshold": 50,
    "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 0,
    "minUnloadMessage": 0,
    "maxUnloadPercentage": 0.5,
}


class TestUniformThresholds:
    def test_rate_difference_exactly_on_the_threshold_does_not_shed(self) -> None:
        # (150 − 100)·100/100 = 50 %: Pulsar sheds only when the difference is *above* the threshold.
        result = UniformLoadShedder().find_bundles_for_unloading(
            uniform_cluster(150, 100), conf(**UNIFORM_RATE)
        )
        assert not result.unloads
        assert result.skipped[0]["msg_rate_difference_pct"] == 50.0
        assert result.skipped[0]["reason"] == "difference below both thresholds"

    def test_rate_difference_just_above_the_threshold_sheds(self) -> None:
        result = UniformLoadShedder().find_bundles_for_unloading(
            uniform_cluster(151, 100), conf(**UNIFORM_RATE)
        )
        assert result.unloads
        assert result.unloads[0].reason["mode"] == "msgRate"
        assert result.unloads[0].reason["msg_rate_difference_pct"] == 51.0

    def test_throughput_multiplier_exactly_on_the_threshold_does_not_shed(self) -> None:
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 0,
                "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 4,
                "minUnloadMessageThroughput": 0}  # fmt: skip
        on = uniform_cluster(1, 1, max_tp=400, min_tp=100)
        assert not UniformLoadShedder().find_bundles_for_unloading(on, conf(**keys)).unloads
        above = uniform_cluster(1, 1, max_tp=401, min_tp=100)
        result = UniformLoadShedder().find_bundles_for_unloading(above, conf(**keys))
        assert result.unloads and result.unloads[0].reason["mode"] == "throughput"
        assert result.unloads[0].reason["throughput_multiplier"] == 4.01

    def test_throughput_multiplier_is_a_ratio_not_a_difference(self) -> None:
        # 300/100 = 3 < 4: no shedding, although the difference 200 is far above 4.
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 0,
                "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 4,
                "minUnloadMessageThroughput": 0}  # fmt: skip
        result = UniformLoadShedder().find_bundles_for_unloading(
            uniform_cluster(1, 1, max_tp=300, min_tp=100), conf(**keys)
        )
        assert not result.unloads
        assert result.skipped[0]["throughput_multiplier"] == 3.0

    def test_rate_has_priority_over_throughput(self) -> None:
        keys = {**UNIFORM_RATE, "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 2,
                "minUnloadMessageThroughput": 0}  # fmt: skip
        snap = uniform_cluster(200, 100, max_tp=1000, min_tp=100)
        result = UniformLoadShedder().find_bundles_for_unloading(snap, conf(**keys))
        assert result.unloads[0].reason["mode"] == "msgRate"
        assert result.unloads[0].reason["amount_to_move"] == 50  # int((200 − 100) × 0.5)

    def test_subtraction_is_truncated_to_int(self) -> None:
        # need = int((142 − 100) × 0.5) = 21; 10.7 ≤ 21 → remaining 21 − 10 = 11; 10.7 ≤ 11 → 1; third: no.
        # Without truncation: 21 − 10.7 = 10.3 < 10.7, so only one bundle would go.
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10}
        result = UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(142, 100), conf(**keys))
        assert [u.reason["remaining_after"] for u in result.unloads] == [11, 1]
        assert result.unloads[0].reason["amount_to_move"] == 21
        assert moves(result) == [("hot", "hot/ns/b0", None), ("hot", "hot/ns/b1", None)]

    def test_amount_is_truncated_before_it_is_compared(self) -> None:
        # (142.9 − 100) × 0.5 = 21.45 → 21: the same two bundles.
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10}
        result = UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(142.9, 100), conf(**keys))
        assert result.unloads[0].reason["amount_to_move"] == 21
        assert isinstance(result.unloads[0].reason["amount_to_move"], int)

    @pytest.mark.parametrize(("cap", "expected"), [(-1, 2), (1, 1), (2, 2), (0, 0), (-2, 0)])
    def test_max_unload_bundle_num_per_shedding(self, cap: int, expected: int) -> None:
        # -1 is unlimited; any other value ≤ 0 selects nothing.
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10,
                "maxUnloadBundleNumPerShedding": cap}  # fmt: skip
        result = UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(142, 100), conf(**keys))
        assert len(result.unloads) == expected

    def test_minimum_rate_of_zero_becomes_one(self) -> None:
        # min 0 → 1.0: (2 − 1)·100/1 = 100 %, exactly on a threshold of 100 → no shedding; 99 → shedding.
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 100}
        result = UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(2, 0), conf(**keys))
        assert not result.unloads
        assert result.skipped[0]["min_msg_rate"] == 1.0
        assert result.skipped[0]["msg_rate_difference_pct"] == 100.0
        keys["loadBalancerMsgRateDifferenceShedderThreshold"] = 99
        result = UniformLoadShedder().find_bundles_for_unloading(
            uniform_cluster(2, 0, bundle_rate=0), conf(**keys)
        )
        assert result.unloads and result.unloads[0].reason["amount_to_move"] == 0  # int((2 − 1) × 0.5)

    @pytest.mark.parametrize(("low", "replaced"), [(1e-6, True), (-1e-6, True), (2e-6, False)])
    def test_the_1e6_rule_includes_its_boundary(self, low: float, replaced: bool) -> None:
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 100}
        result = UniformLoadShedder().find_bundles_for_unloading(
            uniform_cluster(2, low, bundle_rate=0), conf(**keys)
        )
        assert bool(result.unloads) is not replaced
        minimum = (result.skipped[0] if not result.unloads else result.unloads[0].reason)["min_msg_rate"]
        assert minimum == (1.0 if replaced else low)

    def test_minimum_throughput_of_zero_becomes_one(self) -> None:
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 0,
                "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": 4}  # fmt: skip
        result = UniformLoadShedder().find_bundles_for_unloading(
            uniform_cluster(1, 1, max_tp=4, min_tp=0), conf(**keys)
        )
        assert not result.unloads  # 4 / 1.0 = 4, not above 4
        assert result.skipped[0]["min_throughput"] == 1.0
        assert result.skipped[0]["throughput_multiplier"] == 4.0

    def test_amount_equal_to_the_minimum_sheds(self) -> None:
        # need = int((142 − 100) × 0.5) = 21 and minUnloadMessage 21: `need < minimum` is false.
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10, "minUnloadMessage": 21}
        assert (
            UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(142, 100), conf(**keys)).unloads
        )
        keys["minUnloadMessage"] = 22
        result = UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(142, 100), conf(**keys))
        assert not result.unloads
        assert result.skipped[0]["reason"] == "amount below minimum 22"

    def test_a_broker_with_one_bundle_is_not_shed_from_and_two_are(self) -> None:
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10}
        one = uniform_cluster(142, 100, n_bundles=1)
        result = UniformLoadShedder().find_bundles_for_unloading(one, conf(**keys))
        assert not result.unloads
        assert result.skipped[0]["reason"] == "broker owns at most one bundle"
        two = uniform_cluster(142, 100, n_bundles=2)
        assert len(UniformLoadShedder().find_bundles_for_unloading(two, conf(**keys)).unloads) == 2

    def test_zero_traffic_bundles_always_fit(self) -> None:
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10}
        names = ["hot/ns/a", "hot/ns/b", "hot/ns/z"]
        bundles = {"hot/ns/a": bundle_data(rate_in=30), "hot/ns/b": bundle_data(), "hot/ns/z": bundle_data()}
        snap = snapshot(
            {"hot": broker_data(rate_in=142, bundles=names), "cold": broker_data(rate_in=100)}, bundles
        )
        result = UniformLoadShedder().find_bundles_for_unloading(snap, conf(**keys))
        # a (30) does not fit in 21; the two empty bundles do, in name order.
        assert [u.bundle for u in result.unloads] == ["hot/ns/b", "hot/ns/z"]
        assert result.unloads[0].reason["remaining_after"] == 21

    def test_ties_on_the_extremes_pick_the_first_broker(self) -> None:
        keys = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10}
        names = {b: [f"{b}/ns/x", f"{b}/ns/y"] for b in ("a", "b", "c", "d")}
        bundles = {n: bundle_data(rate_in=1) for ns in names.values() for n in ns}
        rates = {"a": 100, "b": 142, "c": 142, "d": 100}
        snap = snapshot({b: broker_data(rate_in=r, bundles=names[b]) for b, r in rates.items()}, bundles)
        result = UniformLoadShedder().find_bundles_for_unloading(snap, conf(**keys))
        assert result.unloads[0].reason["overloaded_broker"] == "b"
        assert result.unloads[0].reason["underloaded_broker"] == "a"


# ---------------------------------------------------------------------------------------- ThresholdShedder

THRESHOLD = {
    "loadBalancerBrokerThresholdShedderPercentage": 25,
    "loadBalancerBundleUnloadMinThroughputThreshold": 0,
    "loadBalancerHistoryResourcePercentage": 0.5,
}


def threshold_cluster(usages: list[float], tp: float = 20 * MB, bundles: int = 3) -> ClusterSnapshot:
    """Brokers b0, b1 … at cpu usages (percent); each owns ``bundles`` bundles of tp/bundles each way."""
    brokers: dict[str, BrokerData] = {}
    data: dict[str, BundleData] = {}
    for i, u in enumerate(usages):
        names = [f"b{i}/ns/{k}" for k in range(bundles)]
        for k, n in enumerate(names):
            data[n] = bundle_data(tp_in=tp / bundles + k, tp_out=0)
        brokers[f"b{i}"] = cpu_broker(u, tp_in=tp, bundles=names)
    return snapshot(brokers, data)


class TestThresholdShedderThresholds:
    def test_usage_exactly_avg_plus_threshold_sheds(self) -> None:
        # avg = (75 + 25)/2 = 50 %; 75 ≥ 50 + 25: equality sheds (`cur < avg + threshold` skips).
        result = ThresholdShedder().find_bundles_for_unloading(threshold_cluster([75, 25]), conf(**THRESHOLD))
        assert result.by_broker().keys() == {"b0"}
        reason = result.unloads[0].reason
        assert reason["avg_usage"] == 0.5
        assert reason["excess"] == pytest.approx(0.05)
        assert reason["target_throughput"] == pytest.approx(20 * MB * 0.05)

    def test_usage_just_below_avg_plus_threshold_does_not_shed(self) -> None:
        result = ThresholdShedder().find_bundles_for_unloading(threshold_cluster([74, 25]), conf(**THRESHOLD))
        assert not result.unloads

    def test_target_equal_to_the_minimum_throughput_sheds(self) -> None:
        # target = 20 MB × 0.05 = 1 MB exactly; minimum 1 MB: `target < minimum` is false.
        keys = {**THRESHOLD, "loadBalancerBundleUnloadMinThroughputThreshold": 1}
        result = ThresholdShedder().find_bundles_for_unloading(threshold_cluster([75, 25]), conf(**keys))
        assert result.unloads[0].reason["target_throughput"] == MB
        keys["loadBalancerBundleUnloadMinThroughputThreshold"] = 1.001
        result = ThresholdShedder().find_bundles_for_unloading(threshold_cluster([75, 25]), conf(**keys))
        assert not result.unloads
        assert result.skipped[0]["reason"] == "target below minimum throughput"

    def test_history_is_an_exponential_average_with_the_configured_weight(self) -> None:
        shedder = ThresholdShedder()
        shedder.find_bundles_for_unloading(threshold_cluster([50, 50]), conf(**THRESHOLD))
        assert shedder.history == {"b0": 0.5, "b1": 0.5}
        shedder.find_bundles_for_unloading(threshold_cluster([100, 0]), conf(**THRESHOLD))
        assert shedder.history == {"b0": 0.75, "b1": 0.25}  # 0.5·0.5 + 0.5·1.0 and 0.5·0.5 + 0.5·0
        result = shedder.find_bundles_for_unloading(threshold_cluster([100, 0]), conf(**THRESHOLD))
        assert shedder.history == {"b0": 0.875, "b1": 0.125}
        assert result.unloads[0].reason["usage_history"] == 0.875
        assert result.unloads[0].reason["usage_now"] == 1.0

    def test_lower_boundary_pass_takes_a_second_history_step(self) -> None:
        # h = 0.5, threshold 0.25. Call 1 at 50/50/50 %. Call 2 at 75/50/0 %:
        #   step 1: 0.625, 0.5, 0.25 (avg 0.4583): nobody ≥ avg + 0.25, nobody < avg − 0.25 = 0.2083;
        #   step 2 (the lower-boundary pass): 0.6875, 0.5, 0.125 (avg 0.4375, lower 0.1875): b2 is below,
        #   so the most loaded broker b0 (0.6875) sheds. With one step only, nothing would be shed.
        keys = {**THRESHOLD, "lowerBoundarySheddingEnabled": True}
        shedder = ThresholdShedder()
        first = shedder.find_bundles_for_unloading(threshold_cluster([50, 50, 50]), conf(**keys))
        assert not first.unloads
        assert first.skipped[-1]["reason"] == "no broker below the lower bound"
        result = shedder.find_bundles_for_unloading(threshold_cluster([75, 50, 0]), conf(**keys))
        assert result.by_broker().keys() == {"b0"}
        reason = result.unloads[0].reason
        assert reason["pass"] == "lower-boundary"
        assert reason["usage_history"] == 0.6875
        assert reason["avg_usage"] == pytest.approx((0.6875 + 0.5 + 0.125) / 3)
        assert reason["target_throughput"] == 20 * MB * 0.25 * 0.5
        assert shedder.history == {"b0": 0.6875, "b1": 0.5, "b2": 0.125}

    def test_lower_boundary_is_off_by_default(self) -> None:
        shedder = ThresholdShedder()
        shedder.find_bundles_for_unloading(threshold_cluster([50, 50, 50]), conf(**THRESHOLD))
        result = shedder.find_bundles_for_unloading(threshold_cluster([75, 50, 0]), conf(**THRESHOLD))
        assert not result.unloads
        assert shedder.history == {"b0": 0.625, "b1": 0.5, "b2": 0.25}  # one step only

    def test_lower_boundary_minimum_throughput_equal_to_target_proceeds(self) -> None:
        # target = tp × 0.25 × 0.5 = tp/8; tp = 8 MB → target 1 MB = the minimum: proceeds (strict `>`).
        keys = {**THRESHOLD, "lowerBoundarySheddingEnabled": True,
                "loadBalancerBundleUnloadMinThroughputThreshold": 1}  # fmt: skip
        shedder = ThresholdShedder()
        shedder.find_bundles_for_unloading(threshold_cluster([50, 50, 50], tp=8 * MB), conf(**keys))
        result = shedder.find_bundles_for_unloading(threshold_cluster([75, 50, 0], tp=8 * MB), conf(**keys))
        assert result.unloads and result.unloads[0].reason["target_throughput"] == MB
        keys["loadBalancerBundleUnloadMinThroughputThreshold"] = 1.001
        shedder = ThresholdShedder()
        shedder.find_bundles_for_unloading(threshold_cluster([50, 50, 50], tp=8 * MB), conf(**keys))
        result = shedder.find_bundles_for_unloading(threshold_cluster([75, 50, 0], tp=8 * MB), conf(**keys))
        assert not result.unloads
        assert result.skipped[-1]["reason"] == "target below minimum throughput"
        assert result.skipped[-1]["pass"] == "lower-boundary"

    def test_lower_boundary_skips_brokers_with_one_bundle(self) -> None:
        keys = {**THRESHOLD, "lowerBoundarySheddingEnabled": True}
        shedder = ThresholdShedder()
        shedder.find_bundles_for_unloading(threshold_cluster([50, 50, 50], bundles=1), conf(**keys))
        result = shedder.find_bundles_for_unloading(threshold_cluster([75, 50, 0], bundles=1), conf(**keys))
        assert not result.unloads
        assert result.skipped[-1]["reason"] == "no broker with more than one bundle"

    def test_sole_bundle_and_no_bundle_reasons(self) -> None:
        one = threshold_cluster([75, 25], bundles=1)
        result = ThresholdShedder().find_bundles_for_unloading(one, conf(**THRESHOLD))
        assert [s["reason"] for s in result.skipped] == ["sole namespace bundle"]
        none = snapshot({"b0": cpu_broker(75, tp_in=MB), "b1": cpu_broker(25)})
        result = ThresholdShedder().find_bundles_for_unloading(none, conf(**THRESHOLD))
        assert [s["reason"] for s in result.skipped] == ["no bundles"]

    def test_zero_average_sheds_nothing(self) -> None:
        result = ThresholdShedder().find_bundles_for_unloading(threshold_cluster([0, 0]), conf(**THRESHOLD))
        assert result.skipped == [{"reason": "average max resource usage is 0"}]

    def test_a_nan_average_skips_no_broker(self) -> None:
        # A limit that is 0 as a float32 gives ∞ % (b0: U = +∞) or, over a usage of 0, NaN, and a broker
        # whose four terms are NaN has U = −∞ (b1): the average is NaN. Java's skip test
        # `cur < avg + threshold` is false for every broker, the target (NaN) is not below the minimum,
        # and each broker's walk takes its largest bundle only (`marked < NaN` is false).
        tiny = (0.0, 1e-50)
        brokers = {
            "b0": broker_data(cpu=(1.0, 1e-50), tp_in=20 * MB, bundles=["b0/ns/0", "b0/ns/1"]),
            "b1": broker_data(cpu=tiny, direct=tiny, bw=tiny, tp_in=20 * MB, bundles=["b1/ns/0", "b1/ns/1"]),
            "b2": cpu_broker(50, tp_in=20 * MB, bundles=["b2/ns/0", "b2/ns/1"]),
        }
        data = {f"b{i}/ns/{k}": bundle_data(tp_in=(k + 1) * MB) for i in range(3) for k in range(2)}
        result = ThresholdShedder().find_bundles_for_unloading(snapshot(brokers, data), DEFAULT)
        assert math.isnan(result.unloads[0].reason["avg_usage"])
        assert result.by_broker() == {"b0": ["b0/ns/1"], "b1": ["b1/ns/1"], "b2": ["b2/ns/1"]}

    def test_forgets_brokers_that_left(self) -> None:
        shedder = ThresholdShedder()
        shedder.find_bundles_for_unloading(threshold_cluster([50, 50]), conf(**THRESHOLD))
        shedder.on_active_brokers_change(["b1"])
        assert shedder.history == {"b1": 0.5}


class TestOverloadShedderThreshold:
    def test_exactly_at_the_overload_threshold_sheds(self) -> None:
        snap = threshold_cluster([85, 10])
        result = OverloadShedder().find_bundles_for_unloading(snap, DEFAULT)
        assert result.by_broker().keys() == {"b0"}
        assert result.unloads[0].reason["excess"] == pytest.approx(0.05)
        assert (
            not OverloadShedder().find_bundles_for_unloading(threshold_cluster([84.9, 10]), DEFAULT).unloads
        )

    def test_target_is_throughput_times_excess_plus_margin(self) -> None:
        # usage 0.95, excess = 0.95 − 0.85 + 0.05 = 0.15; target 0.15 × 20 MB = 3 MB: greedy takes
        # the largest bundle (≈ 6.67 MB) and stops.
        result = OverloadShedder().find_bundles_for_unloading(threshold_cluster([95, 10]), DEFAULT)
        assert result.unloads[0].reason["target_throughput"] == pytest.approx(0.15 * 20 * MB)
        assert len(result.unloads) == 1

    def test_sole_bundle_is_not_shed(self) -> None:
        result = OverloadShedder().find_bundles_for_unloading(threshold_cluster([95, 10], bundles=1), DEFAULT)
        assert not result.unloads
        assert result.skipped[0]["reason"] == "sole namespace bundle"


# ---------------------------------------------------------------------------------------- greedy helpers


class TestGreedy:
    def snap(self, tps: list[float]) -> ClusterSnapshot:
        names = [f"a/ns/{i}" for i in range(len(tps))]
        data = {n: bundle_data(tp_in=t) for n, t in zip(names, tps, strict=True)}
        return snapshot({"a": broker_data(bundles=names), "b": broker_data()}, data)

    def test_takes_bundles_while_the_marked_total_is_below_the_target(self) -> None:
        snap = self.snap([1, 5, 3, 2])
        chosen, keys, marked = greedy_largest_first(snap, 0, 8)
        assert keys.tolist() == [5, 3]  # marked 0 < 8 → 5; 5 < 8 → 3; 8 < 8 is false: stop
        assert marked.tolist() == [5, 8]
        chosen, keys, marked = greedy_largest_first(snap, 0, 8.5)
        assert keys.tolist() == [5, 3, 2]
        assert [snap.bundle_names[j] for j in chosen.tolist()] == ["a/ns/1", "a/ns/2", "a/ns/3"]

    def test_always_takes_one_and_can_take_all(self) -> None:
        snap = self.snap([1, 5, 3, 2])
        assert greedy_largest_first(snap, 0, 0)[1].tolist() == [5]
        assert greedy_largest_first(snap, 0, -1)[1].tolist() == [5]
        assert greedy_largest_first(snap, 0, 100)[1].tolist() == [5, 3, 2, 1]
        assert greedy_largest_first(snap, 1, 100)[0].size == 0

    def test_sort_descending_keeps_name_order_on_ties(self) -> None:
        idx, keys = sort_descending(np.array([7, 3, 5, 1]), np.array([2.0, 9.0, 2.0, 2.0]))
        assert idx.tolist() == [3, 7, 5, 1]
        assert keys.tolist() == [9.0, 2.0, 2.0, 2.0]

    @pytest.mark.parametrize(
        ("value", "expected"),
        [(10.7, 10), (-10.7, -10), (math.nan, 0), (2147483647.0, 2147483647), (2147483646.5, 2147483646),
         (1e300, 2147483647), (-2147483648.0, -2147483648), (-2147483647.5, -2147483647),
         (-1e300, -2147483648), (0.0, 0)],
    )  # fmt: skip
    def test_java_int(self, value: float, expected: int) -> None:
        assert java_int(value) == expected
        assert isinstance(java_int(value), int)


# ---------------------------------------------------------------------------------------- AvgShedder

AVG = {
    "loadBalancerAvgShedderLowThreshold": 25,
    "loadBalancerAvgShedderHighThreshold": 50,
    "loadBalancerAvgShedderHitCountLowThreshold": 1,
    "loadBalancerAvgShedderHitCountHighThreshold": 1,
    "minUnloadMessage": 100,
    "maxUnloadPercentage": 0.5,
}


def avg_cluster(
    scores: dict[str, float], *, rate: dict[str, float] | None = None, bundles: int = 2
) -> ClusterSnapshot:
    """Brokers at cpu ``scores`` %; each owns ``bundles`` bundles of 100 msg/s; broker rate from ``rate``."""
    brokers: dict[str, BrokerData] = {}
    data: dict[str, BundleData] = {}
    for b, s in scores.items():
        names = [f"{b}/ns/{k}" for k in range(bundles)]
        for n in names:
            data[n] = bundle_data(rate_in=100)
        r = (rate or {}).get(b, 100.0 * bundles)
        brokers[b] = cpu_broker(s, rate_in=r, bundles=names)
    return snapshot(brokers, data)


class TestAvgShedderPairs:
    def test_pairs_go_from_the_outside_in_without_skipping_the_inner_pair(self) -> None:
        # scores 10, 20, 70, 80 → pairs (a, d) gap 70 and (b, c) gap 50; both hit and trigger.
        snap = avg_cluster({"a": 10, "b": 20, "c": 70, "d": 80},
                           rate={"a": 0, "b": 0, "c": 200, "d": 200})  # fmt: skip
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**AVG))
        # (amount (200 − 0) × 0.5 = 100 is not above minUnloadMessage: both pairs are skipped, with reasons.)
        pairs = [s.get("pair") for s in result.skipped] + [u.reason["pair"] for u in result.unloads]
        assert ["a", "d"] in pairs and ["b", "c"] in pairs

    def test_each_pair_sheds_to_its_own_partner(self) -> None:
        snap = avg_cluster({"a": 10, "b": 20, "c": 70, "d": 80},
                           rate={"a": 0, "b": 0, "c": 400, "d": 400}, bundles=4)  # fmt: skip
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**AVG))
        # amount (400 − 0) × 0.5 = 200: two 100 msg/s bundles from each hot broker.
        assert moves(result) == [
            ("d", "d/ns/0", "a"), ("d", "d/ns/1", "a"), ("c", "c/ns/0", "b"), ("c", "c/ns/1", "b"),
        ]  # fmt: skip
        assert result.unloads[0].reason["amount_to_move"] == 200.0
        assert result.unloads[1].reason["amount_selected"] == 200.0

    def test_gap_exactly_on_the_low_threshold_is_a_hit(self) -> None:
        # 50 − 25 = 25 = low threshold: a hit (`gap < low` misses).
        shedder = AvgShedder()
        keys = {**AVG, "loadBalancerAvgShedderHitCountLowThreshold": 5,
                "loadBalancerAvgShedderHitCountHighThreshold": 5}  # fmt: skip
        shedder.find_bundles_for_unloading(avg_cluster({"a": 25, "b": 50}), conf(**keys))
        assert shedder.hit_low == {"a": 1, "b": 1}
        assert shedder.hit_high == {}
        shedder.find_bundles_for_unloading(avg_cluster({"a": 25.5, "b": 50}), conf(**keys))
        assert shedder.hit_low == {}  # 24.5 < 25: a miss resets both counters

    def test_gap_exactly_on_the_high_threshold_is_a_high_hit(self) -> None:
        shedder = AvgShedder()
        keys = {**AVG, "loadBalancerAvgShedderHitCountLowThreshold": 5,
                "loadBalancerAvgShedderHitCountHighThreshold": 5}  # fmt: skip
        shedder.find_bundles_for_unloading(avg_cluster({"a": 25, "b": 75}), conf(**keys))
        assert shedder.hit_high == {"a": 1, "b": 1}
        assert shedder.hit_low == {"a": 1, "b": 1}
        shedder.find_bundles_for_unloading(avg_cluster({"a": 25, "b": 74.5}), conf(**keys))
        assert shedder.hit_high == {}  # a low hit but not a high one: high counters reset
        assert shedder.hit_low == {"a": 2, "b": 2}

    @pytest.mark.parametrize("which", ["low", "high"])
    def test_hit_count_exactly_on_its_threshold_triggers(self, which: str) -> None:
        keys = {**AVG, "loadBalancerAvgShedderHitCountLowThreshold": 2 if which == "low" else 9,
                "loadBalancerAvgShedderHitCountHighThreshold": 2 if which == "high" else 9}  # fmt: skip
        snap = avg_cluster({"a": 0, "b": 75}, rate={"a": 0, "b": 400}, bundles=4)
        shedder = AvgShedder()
        first = shedder.find_bundles_for_unloading(snap, conf(**keys))
        assert not first.unloads
        assert first.skipped[0]["reason"] == "hit count not reached"
        assert first.skipped[0][f"hit_{which}_over"] == 1
        second = shedder.find_bundles_for_unloading(snap, conf(**keys))
        assert len(second.unloads) == 2
        assert shedder.hit_low == {} and shedder.hit_high == {}  # a triggered pair restarts its counts

    def test_self_pair_with_a_low_threshold_of_zero_counts_twice(self) -> None:
        # Three brokers: (a, c) and the middle b paired with itself, gap 0 ≥ low 0: a hit, counted twice.
        keys = {**AVG, "loadBalancerAvgShedderLowThreshold": 0, "loadBalancerAvgShedderHighThreshold": 0,
                "loadBalancerAvgShedderHitCountLowThreshold": 2,
                "loadBalancerAvgShedderHitCountHighThreshold": 2}  # fmt: skip
        shedder = AvgShedder()
        result = shedder.find_bundles_for_unloading(avg_cluster({"a": 10, "b": 50, "c": 90}), conf(**keys))
        by_pair = {tuple(s["pair"]): s for s in result.skipped}
        assert by_pair[("a", "c")]["reason"] == "hit count not reached"  # 1 < 2
        assert by_pair[("a", "c")]["hit_low_over"] == 1
        assert by_pair[("b", "b")]["hit_low_over"] == 2  # counted twice in one call: triggers
        assert by_pair[("b", "b")]["reason"] == "traffic gap below minUnloadMessage(Throughput)"
        assert by_pair[("b", "b")]["gap"] == 0.0
        assert shedder.hit_low == {"a": 1, "c": 1}  # the triggered self pair restarted its count

    def test_self_pair_is_ignored_with_a_positive_low_threshold(self) -> None:
        keys = {**AVG, "loadBalancerAvgShedderHitCountLowThreshold": 2,
                "loadBalancerAvgShedderHitCountHighThreshold": 2}  # fmt: skip
        shedder = AvgShedder()
        result = shedder.find_bundles_for_unloading(avg_cluster({"a": 10, "b": 50, "c": 90}), conf(**keys))
        assert [tuple(s["pair"]) for s in result.skipped] == [("a", "c")]
        assert "b" not in shedder.hit_low

    def test_ties_are_broken_by_broker_id(self) -> None:
        # a and b tie at 10: sorted order is a, b, c, so the pairs are (a, c) and the self pair (b, b);
        # c's bundles go to a. Reversed ties would pair (b, c) and send them to b.
        snap = avg_cluster({"a": 10, "b": 10, "c": 90}, rate={"a": 0, "b": 0, "c": 400}, bundles=4)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**AVG))
        assert {u.destination for u in result.unloads} == {"a"}
        assert result.unloads[0].reason["pair"] == ["a", "c"]

    def test_bundle_ties_are_taken_in_name_order(self) -> None:
        snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 202}, bundles=4)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**AVG))
        assert [u.bundle for u in result.unloads] == ["c/ns/0"]  # amount 101: one bundle, the first name

    def test_amount_equal_to_min_unload_message_is_not_enough(self) -> None:
        # (200 − 0) × 0.5 = 100 = minUnloadMessage: not above it; the throughput gap is 0 → nothing.
        snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 200}, bundles=4)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**AVG))
        assert not result.unloads
        assert result.skipped[0]["reason"] == "traffic gap below minUnloadMessage(Throughput)"
        assert result.skipped[0]["need_msg_rate"] == 100.0
        # 202 → 101 > 100: one 100 msg/s bundle fits (a second would exceed 101).
        snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 202}, bundles=4)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**AVG))
        assert moves(result) == [("c", "c/ns/0", "a")]
        assert result.unloads[0].reason["mode"] == "msgRate"

    def test_throughput_mode_and_its_minimum(self) -> None:
        names = ["c/ns/0", "c/ns/1", "c/ns/2"]
        data = {n: bundle_data(tp_in=MB) for n in names}
        keys = {**AVG, "minUnloadMessageThroughput": MB}
        # throughput gap 4 MB × 0.5 = 2 MB > 1 MB: two 1 MB bundles (the sum stops exactly at 2 MB).
        snap = snapshot({"a": cpu_broker(10), "c": cpu_broker(90, tp_in=4 * MB, bundles=names)}, data)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**keys))
        assert result.unloads[0].reason["mode"] == "throughput"
        assert [u.bundle for u in result.unloads] == ["c/ns/0", "c/ns/1"]
        # 2 MB × 0.5 = 1 MB, equal to the minimum: nothing.
        snap = snapshot({"a": cpu_broker(10), "c": cpu_broker(90, tp_in=2 * MB, bundles=names)}, data)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**keys))
        assert not result.unloads
        assert result.skipped[0]["need_throughput"] == MB

    def test_zero_traffic_bundles_are_never_taken(self) -> None:
        names = ["c/ns/0", "c/ns/1"]
        data = {"c/ns/0": bundle_data(), "c/ns/1": bundle_data()}
        snap = snapshot({"a": cpu_broker(10), "c": cpu_broker(90, rate_in=400, bundles=names)}, data)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**AVG))
        assert not result.unloads
        assert result.skipped[0]["reason"] == "no bundle fits the amount to move"

    def test_a_sole_bundle_is_not_protected(self) -> None:
        snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 400}, bundles=1)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**AVG))
        assert moves(result) == [("c", "c/ns/0", "a")]

    def test_no_pair_clears_every_counter(self) -> None:
        shedder = AvgShedder()
        keys = {**AVG, "loadBalancerAvgShedderHitCountLowThreshold": 5,
                "loadBalancerAvgShedderHitCountHighThreshold": 5}  # fmt: skip
        shedder.find_bundles_for_unloading(avg_cluster({"a": 10, "b": 90}), conf(**keys))
        shedder.hit_low["ghost"] = 3
        result = shedder.find_bundles_for_unloading(avg_cluster({"a": 50, "b": 50}), conf(**keys))
        assert result.skipped == [{"reason": "no broker pair reaches the low threshold"}]
        assert shedder.hit_low == {} and shedder.hit_high == {}

    def test_planned_destination_is_returned_by_placement(self) -> None:
        snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 400}, bundles=1)
        shedder = AvgShedder(np.random.default_rng(0))
        shedder.find_bundles_for_unloading(snap, conf(**AVG))
        placed = shedder.select_broker(["a", "c"], "c/ns/0", snap, DEFAULT)
        assert (placed.broker, tuple(placed.choices)) == ("a", ("a",))
        assert placed.reason["rule"] == "planned destination"
        other = shedder.select_broker(["c"], "c/ns/0", snap, DEFAULT)
        assert other.broker == "c" and other.reason["rule"] == "random (planned destination not a candidate)"


# ---------------------------------------------------------------------------------------- placement


class TestLeastResourceUsageWithWeight:
    def cluster(self) -> ClusterSnapshot:
        brokers = {b: cpu_broker(u, rate_in=1, bundles=[f"{b}/ns/0"]) for b, u in (("lo", 25), ("hi", 75))}
        return snapshot(brokers, {})

    def test_history_plus_threshold_equal_to_the_average_is_best(self) -> None:
        # avg 0.5; 0.25 + 0.25 = 0.5 ≤ 0.5: 'lo' alone is best ('<' would make every candidate best).
        keys = conf(loadBalancerAverageResourceUsageDifferenceThresholdPercentage=25)
        for seed in range(8):
            placed = LeastResourceUsageWithWeight(np.random.default_rng(seed)).select_broker(
                ["lo", "hi"], "x/ns/0", self.cluster(), keys
            )
            assert placed.broker == "lo"
            assert tuple(placed.choices) == ("lo",)
            assert placed.reason["rule"] == "usage + threshold <= average"
            assert placed.reason["avg_usage"] == 0.5

    def test_just_above_the_threshold_every_candidate_is_best(self) -> None:
        keys = conf(loadBalancerAverageResourceUsageDifferenceThresholdPercentage=26)
        placed = LeastResourceUsageWithWeight(np.random.default_rng(0)).select_broker(
            ["lo", "hi"], "x/ns/0", self.cluster(), keys
        )
        assert tuple(placed.choices) == ("hi", "lo")
        assert placed.reason["rule"] == "no broker clearly below average: all candidates"

    def test_history_is_advanced_per_call_and_reset_for_idle_brokers(self) -> None:
        keys = conf(loadBalancerHistoryResourcePercentage=0.5)
        strategy = LeastResourceUsageWithWeight(np.random.default_rng(0))
        strategy.select_broker(["lo", "hi"], "x/ns/0", self.cluster(), keys)
        assert strategy.history == {"lo": 0.25, "hi": 0.75}
        later = snapshot(
            {"lo": cpu_broker(75, rate_in=1, bundles=["lo/ns/0"]), "hi": cpu_broker(25, bundles=["hi/ns/0"])},
            {},
        )
        strategy.select_broker(["lo", "hi"], "x/ns/0", later, keys)
        # lo: 0.5·0.25 + 0.5·0.75 = 0.5; hi reports no message rate: history reset to its usage 0.25.
        assert strategy.history == {"lo": 0.5, "hi": 0.25}
        strategy.on_active_brokers_change(["lo"])
        assert strategy.history == {"lo": 0.5}

    def test_a_nan_history_stays_nan_and_no_broker_is_best(self) -> None:
        # A limit that is 0 as a float32: b0's usage is +∞ at the first call (a usage of 1: ∞ %) and −∞ at
        # the second (every term 0/0: NaN, and Java's max of NaNs is −∞). Its history is then
        # 0.9·∞ + 0.1·(−∞) = NaN, which Java keeps (a Double, not a missing entry): the average is NaN,
        # no broker passes `usage + threshold <= average`, and the choice is among every candidate.
        tiny = (0.0, 1e-50)
        others = {b: cpu_broker(u, rate_in=1, bundles=[f"{b}/ns/0"]) for b, u in (("b1", 10), ("b2", 90))}
        hot = broker_data(cpu=(1.0, 1e-50), rate_in=1, bundles=["b0/ns/0"])
        nan = broker_data(cpu=tiny, direct=tiny, bw=tiny, rate_in=1, bundles=["b0/ns/0"])
        strategy, everyone = LeastResourceUsageWithWeight(np.random.default_rng(0)), ["b0", "b1", "b2"]
        strategy.select_broker(everyone, "x/ns/0", snapshot({"b0": hot, **others}), DEFAULT)
        placed = strategy.select_broker(everyone, "x/ns/0", snapshot({"b0": nan, **others}), DEFAULT)
        assert math.isnan(strategy.history["b0"])
        assert tuple(placed.choices) == ("b0", "b1", "b2")
        assert math.isnan(placed.reason["avg_usage"])
        # and stays NaN at 50 % (0.9·NaN + 0.05): shedlab restarted it at 0.5, and b1 alone was best
        calm = cpu_broker(50, rate_in=1, bundles=["b0/ns/0"])
        placed = strategy.select_broker(everyone, "x/ns/0", snapshot({"b0": calm, **others}), DEFAULT)
        assert tuple(placed.choices) == ("b0", "b1", "b2")


class TestLeastLongTermMessageRate:
    def test_exactly_at_the_overload_threshold_is_not_excluded(self) -> None:
        snap = snapshot({"a": cpu_broker(85, long_rate_in=10), "b": cpu_broker(10, long_rate_in=20)})
        placed = LeastLongTermMessageRate(np.random.default_rng(0)).select_broker(
            ["a", "b"], "x", snap, DEFAULT
        )
        assert placed.broker == "a"
        assert placed.reason["best_score"] == 10.0
        snap = snapshot({"a": cpu_broker(85.01, long_rate_in=10), "b": cpu_broker(10, long_rate_in=20)})
        placed = LeastLongTermMessageRate(np.random.default_rng(0)).select_broker(
            ["a", "b"], "x", snap, DEFAULT
        )
        assert placed.broker == "b"

    def test_all_overloaded_are_all_best(self) -> None:
        snap = snapshot({"a": cpu_broker(90, long_rate_in=10), "b": cpu_broker(95, long_rate_in=20)})
        placed = LeastLongTermMessageRate(np.random.default_rng(0)).select_broker(
            ["b", "a"], "x", snap, DEFAULT
        )
        assert tuple(placed.choices) == ("a", "b")
        assert placed.reason["rule"] == "all candidates overloaded"
        assert placed.reason["best_score"] == math.inf

    def test_a_nan_score_is_never_best(self) -> None:
        snap = snapshot({"a": cpu_broker(10, long_rate_in=math.nan), "b": cpu_broker(10, long_rate_in=20)})
        placed = LeastLongTermMessageRate(np.random.default_rng(0)).select_broker(
            ["a", "b"], "x", snap, DEFAULT
        )
        assert placed.broker == "b" and tuple(placed.choices) == ("b",)
        assert placed.reason["rule"] == "least long-term message rate"

    def test_every_score_nan_draws_from_all_candidates(self) -> None:
        snap = snapshot(
            {"a": cpu_broker(10, long_rate_in=math.nan), "b": cpu_broker(10, long_rate_out=math.nan)}
        )
        placed = LeastLongTermMessageRate(np.random.default_rng(0)).select_broker(
            ["a", "b"], "x", snap, DEFAULT
        )
        assert tuple(placed.choices) == ("a", "b")
        assert placed.reason["rule"] == "no valid score: all candidates"
        assert math.isnan(placed.reason["best_score"])

    def test_score_adds_in_and_out_and_preallocated_rates(self) -> None:
        snap = snapshot(
            {
                "a": cpu_broker(10, long_rate_in=10, long_rate_out=15),
                "b": cpu_broker(
                    10,
                    long_rate_in=20,
                    long_rate_out=0,
                    preallocated={"p": bundle_data(rate_in=1, rate_out=2)},
                ),
            }
        )
        strategy = LeastLongTermMessageRate(np.random.default_rng(0))
        assert strategy.scores(snap, np.array([0, 1]), DEFAULT).tolist() == [25.0, 23.0]
        assert strategy.select_broker(["a", "b"], "x", snap, DEFAULT).broker == "b"

    def test_no_candidates(self) -> None:
        snap = snapshot({"a": cpu_broker(10)})
        placed = LeastLongTermMessageRate().select_broker([], "x", snap, DEFAULT)
        assert placed.broker is None and placed.reason["rule"] == "no candidates"
