"""Edge cases found by mutation testing (docs/mutation-testing.md): each test kills a class of mutants
that the boundary tests in test_thresholds.py left alive, by pinning a behaviour Pulsar has."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from builders import MB, broker_data, bundle_data, cpu_broker, snapshot
from strategies.test_thresholds import AVG, THRESHOLD, UNIFORM_RATE, avg_cluster, conf, threshold_cluster

from shedlab.model.pulsar import BrokerData, BundleData
from shedlab.strategies import (
    AvgShedder,
    LeastLongTermMessageRate,
    LeastResourceUsageWithWeight,
    ThresholdShedder,
    UniformLoadShedder,
)
from shedlab.strategies.base import BrokerChoices, SheddingResult, candidate_indices
from shedlab.strategies.greedy import sort_descending

# ---------------------------------------------------------------------------------------- UniformLoadShedder


def uniform(rates: list[float], tps: list[float] | None = None, **keys: object) -> SheddingResult:
    names = {f"b{i}": [f"b{i}/ns/x", f"b{i}/ns/y"] for i in range(len(rates))}
    data = {n: bundle_data(rate_in=0, tp_in=0) for ns in names.values() for n in ns}
    tps = tps or [0.0] * len(rates)
    snap = snapshot(
        {
            f"b{i}": broker_data(rate_in=r, tp_in=t, bundles=names[f"b{i}"])
            for i, (r, t) in enumerate(zip(rates, tps, strict=True))
        },
        data,
    )
    return UniformLoadShedder().find_bundles_for_unloading(snap, conf(**{**UNIFORM_RATE, **keys}))


class TestUniformExtremes:
    def test_empty_cluster_reports_pulsars_initial_extremes(self) -> None:
        result = UniformLoadShedder().find_bundles_for_unloading(snapshot({}), conf(**UNIFORM_RATE))
        (skip,) = result.skipped
        assert (skip["max_msg_rate"], skip["min_msg_rate"]) == (-1.0, 1.0 * 2147483647)
        assert (skip["max_throughput"], skip["min_throughput"]) == (-1.0, 1.0 * 2147483647)

    def test_a_minimum_exactly_at_int_max_has_no_broker(self) -> None:
        reason = uniform([2147483647.0, 6e9]).unloads[0].reason
        assert reason["min_msg_rate"] == 2147483647.0
        assert reason["underloaded_broker"] is None

    def test_single_broker_is_its_own_max_and_min(self) -> None:
        (skip,) = uniform([300.0]).skipped
        assert (skip["max_msg_rate"], skip["min_msg_rate"], skip["msg_rate_difference_pct"]) == (
            300.0,
            300.0,
            0.0,
        )

    @pytest.mark.parametrize(("top", "reported"), [(-5.0, -1.0), (-1.5, -1.0), (0.5, 0.5), (-1.0, -1.0)])
    def test_maximum_starts_at_minus_one(self, top: float, reported: float) -> None:
        # Pulsar starts the maximum at -1: a maximum below -1 is reported as -1.
        (skip,) = uniform([top - 1, top]).skipped
        assert skip["max_msg_rate"] == reported

    def test_minimum_starts_at_int_max_and_then_has_no_broker(self) -> None:
        # every rate ≥ Integer.MAX_VALUE: the minimum stays at 2147483647 and no underloaded broker is found
        result = uniform([3e9, 6e9])
        reason = result.unloads[0].reason
        assert reason["min_msg_rate"] == 2147483647.0
        assert reason["underloaded_broker"] is None
        assert reason["overloaded_broker"] == "b1"

    @pytest.mark.parametrize(("low", "replaced"), [(1e-6, True), (2e-6, False)])
    def test_the_1e6_rule_for_throughput_includes_its_boundary(self, low: float, replaced: bool) -> None:
        result = uniform([1.0, 1.0], [4.0, low], loadBalancerMsgRateDifferenceShedderThreshold=0,
                         loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=4)  # fmt: skip
        entry = result.skipped[0] if result.skipped else result.unloads[0].reason
        assert entry["min_throughput"] == (1.0 if replaced else low)
        assert (entry["throughput_multiplier"] > 4) is not replaced

    def test_a_rate_threshold_below_one_percent_still_counts(self) -> None:
        result = uniform([101.0, 100.0], loadBalancerMsgRateDifferenceShedderThreshold=0.5)
        # 1 % > 0.5 %: the rate criterion fires (the empty bundles always fit the amount int(1 × 0.5) = 0)
        assert result.unloads and result.unloads[0].reason["mode"] == "msgRate"

    def test_a_multiplier_threshold_of_zero_disables_the_throughput_criterion(self) -> None:
        result = uniform([1.0, 1.0], [1e9, 1.0], loadBalancerMsgRateDifferenceShedderThreshold=0,
                         loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=0)  # fmt: skip
        assert result.skipped[0]["reason"] == "difference below both thresholds"

    def test_a_multiplier_threshold_below_one_fires_on_equal_brokers(self) -> None:
        result = uniform([1.0, 1.0], [5.0, 5.0], loadBalancerMsgRateDifferenceShedderThreshold=0,
                         loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=0.5)  # fmt: skip
        assert result.skipped[0]["mode"] == "throughput"  # 5/5 = 1 > 0.5
        assert result.skipped[0]["amount_to_move"] == 0

    def test_throughput_amount_is_the_difference(self) -> None:
        result = uniform([1.0, 1.0], [401.0, 100.0], loadBalancerMsgRateDifferenceShedderThreshold=0,
                         loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold=4,
                         minUnloadMessageThroughput=0)  # fmt: skip
        assert result.unloads[0].reason["amount_to_move"] == 150  # int((401 − 100) × 0.5)


# ---------------------------------------------------------------------------------------- ThresholdShedder


class TestThresholdEdges:
    def test_empty_cluster_has_a_zero_average(self) -> None:
        result = ThresholdShedder().find_bundles_for_unloading(snapshot({}), conf(**THRESHOLD))
        assert result.skipped == [{"reason": "average max resource usage is 0"}]

    def test_a_skipped_broker_does_not_stop_the_others(self) -> None:
        # b0 and b1 both above avg + 0.25; b0's target is below the minimum, b1's is not: b1 still sheds.
        keys = {**THRESHOLD, "loadBalancerBundleUnloadMinThroughputThreshold": 1}
        brokers: dict[str, BrokerData] = {}
        data: dict[str, BundleData] = {}
        for b, tp in (("b0", MB), ("b1", 100 * MB)):
            names = [f"{b}/ns/{k}" for k in range(3)]
            data |= {n: bundle_data(tp_in=tp / 3 + k) for k, n in enumerate(names)}
            brokers[b] = cpu_broker(80, tp_in=tp, bundles=names)
        brokers["b2"] = cpu_broker(0)
        result = ThresholdShedder().find_bundles_for_unloading(snapshot(brokers, data), conf(**keys))
        assert [s["broker"] for s in result.skipped] == ["b0"]
        assert result.by_broker().keys() == {"b1"}

    def test_lower_boundary_sheds_from_a_broker_with_two_bundles(self) -> None:
        keys = {**THRESHOLD, "lowerBoundarySheddingEnabled": True}
        shedder = ThresholdShedder()
        shedder.find_bundles_for_unloading(threshold_cluster([50, 50, 50], bundles=2), conf(**keys))
        result = shedder.find_bundles_for_unloading(threshold_cluster([75, 50, 0], bundles=2), conf(**keys))
        assert result.by_broker().keys() == {"b0"}

    def test_lower_boundary_needs_a_broker_strictly_below(self) -> None:
        # one call at 75/50/25: avg 0.5, lower bound 0.25; b2 is exactly on it, not below. The upper pass
        # skips b0 (target 20 MB × 0.05 = 1 MB < 2 MB) so the lower-boundary pass runs.
        keys = {
            **THRESHOLD,
            "lowerBoundarySheddingEnabled": True,
            "loadBalancerBundleUnloadMinThroughputThreshold": 2,
        }
        result = ThresholdShedder().find_bundles_for_unloading(threshold_cluster([75, 50, 25]), conf(**keys))
        assert not result.unloads
        assert result.skipped[-1]["reason"] == "no broker below the lower bound"


# ---------------------------------------------------------------------------------------- AvgShedder


class TestAvgShedderCounters:
    """Hit counters are per broker, so the two brokers of a pair can have different counts."""

    def test_a_miss_resets_only_the_missing_pair(self) -> None:
        keys = {
            **AVG,
            "loadBalancerAvgShedderHitCountLowThreshold": 9,
            "loadBalancerAvgShedderHitCountHighThreshold": 9,
        }
        shedder = AvgShedder()
        shedder.find_bundles_for_unloading(avg_cluster({"a": 0, "b": 10, "c": 60, "d": 90}), conf(**keys))
        assert shedder.hit_low == {"a": 1, "b": 1, "c": 1, "d": 1}
        # inner pair (b, c) gap 20 < 25: both reset; the outer pair keeps counting
        shedder.find_bundles_for_unloading(avg_cluster({"a": 0, "b": 30, "c": 50, "d": 90}), conf(**keys))
        assert shedder.hit_low == {"a": 2, "d": 2}
        assert shedder.hit_high == {"a": 2, "d": 2}

    @pytest.mark.parametrize(
        ("second", "which", "counts"),
        [
            # over's count reaches the threshold, under's does not
            ({"a": 50, "b": 10, "c": 90}, "low", (1, 2)),
            ({"a": 50, "b": 10, "c": 90}, "high", (1, 2)),
            # under's count reaches it, over's does not
            ({"a": 10, "c": 50, "d": 90}, "low", (2, 1)),
            ({"a": 10, "c": 50, "d": 90}, "high", (2, 1)),
        ],
    )
    def test_either_broker_reaching_either_count_triggers(
        self, second: dict[str, float], which: str, counts: tuple[int, int]
    ) -> None:
        keys = {**AVG, "loadBalancerAvgShedderHitCountLowThreshold": 2 if which == "low" else 9,
                "loadBalancerAvgShedderHitCountHighThreshold": 2 if which == "high" else 9}  # fmt: skip
        shedder = AvgShedder()
        first = shedder.find_bundles_for_unloading(avg_cluster({"a": 10, "c": 90}), conf(**keys))
        assert first.skipped[0]["reason"] == "hit count not reached"
        rates = {b: (400.0 if s == 90 else 0.0) for b, s in second.items()}
        result = shedder.find_bundles_for_unloading(avg_cluster(second, rate=rates, bundles=4), conf(**keys))
        (unload, *_) = result.unloads
        reason = unload.reason
        assert (reason[f"hit_{which}_under"], reason[f"hit_{which}_over"]) == counts

    def test_throughput_amount_is_the_gap_times_the_percentage(self) -> None:
        names = [f"c/ns/{k}" for k in range(4)]
        data = {n: bundle_data(tp_in=MB / 2, tp_out=MB / 2) for n in names}
        keys = {**AVG, "minUnloadMessageThroughput": MB}
        snap = snapshot(
            {"a": cpu_broker(10, tp_in=MB), "c": cpu_broker(90, tp_in=5 * MB, bundles=names)}, data
        )
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**keys))
        assert result.unloads[0].reason["amount_to_move"] == 2 * MB  # (5 − 1) MB × 0.5
        assert [u.bundle for u in result.unloads] == ["c/ns/0", "c/ns/1"]  # keys are in + out: 1 MB each

    def test_bundles_below_one_message_per_second_are_taken(self) -> None:
        names = ["c/ns/0", "c/ns/1"]
        data = {n: bundle_data(rate_in=0.5) for n in names}
        snap = snapshot({"a": cpu_broker(10), "c": cpu_broker(90, rate_in=2, bundles=names)}, data)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**{**AVG, "minUnloadMessage": 0}))
        assert [u.bundle for u in result.unloads] == ["c/ns/0", "c/ns/1"]  # need (2 − 0) × 0.5 = 1

    def test_many_ties_are_paired_in_broker_id_order(self) -> None:
        # 20 brokers: ten at 10 %, ten at 90 % → pairs (b00, b19), (b01, b18) … by id within each tie.
        scores = {f"b{i:02d}": (10.0 if i < 10 else 90.0) for i in range(20)}
        rates = {b: (400.0 if s == 90 else 0.0) for b, s in scores.items()}
        result = AvgShedder().find_bundles_for_unloading(
            avg_cluster(scores, rate=rates, bundles=4), conf(**AVG)
        )
        pairs = [tuple(u.reason["pair"]) for u in result.unloads[::2]]
        assert pairs == [(f"b{i:02d}", f"b{19 - i:02d}") for i in range(10)]


class TestAvgShedderPlacement:
    def test_without_a_generator_it_still_draws(self) -> None:
        snap = snapshot({"a": cpu_broker(10), "b": cpu_broker(20)})
        placed = AvgShedder().select_broker(["a", "b"], "t/ns/0x0_0x1", snap, conf())
        assert placed.broker in {"a", "b"}
        assert placed.reason == {"strategy": "AvgShedder", "rule": "random (no planned destination)"}

    def test_no_candidates(self) -> None:
        snap = snapshot({"a": cpu_broker(10)})
        placed = AvgShedder().select_broker([], "t/ns/0x0_0x1", snap, conf())
        assert placed.broker is None and tuple(placed.choices) == ()
        assert placed.reason == {"strategy": "AvgShedder", "rule": "no candidates"}

    def test_fallback_hashes_a_java_int_with_crc32(self) -> None:
        # Pulsar: candidates sorted, index = CRC32(String.valueOf(random int)) mod n.
        ids = [f"broker-{i:02d}" for i in range(13)]
        snap = snapshot({b: cpu_broker(10) for b in ids})
        for seed in range(5):
            draw = int(np.random.default_rng(seed).integers(-(2**31), 2**31))
            expected = ids[zlib.crc32(str(draw).encode()) % len(ids)]
            placed = AvgShedder(np.random.default_rng(seed)).select_broker(
                list(reversed(ids)), "t/ns/0x0_0x1", snap, conf()
            )
            assert placed.broker == expected
            assert tuple(placed.choices) == tuple(ids)

    def test_planned_destination_with_index_candidates(self) -> None:
        snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 400}, bundles=1)
        shedder = AvgShedder(np.random.default_rng(0))
        shedder.find_bundles_for_unloading(snap, conf(**AVG))
        placed = shedder.select_broker(np.array([0, 1]), "c/ns/0", snap, conf())
        assert placed.broker == "a"
        assert placed.reason == {"strategy": "AvgShedder", "rule": "planned destination"}
        # the planned broker is not among the index candidates: a random draw among them
        placed = shedder.select_broker(np.array([1]), "c/ns/0", snap, conf())
        assert (
            placed.broker == "c" and placed.reason["rule"] == "random (planned destination not a candidate)"
        )
        # the planned broker is not in the snapshot at all
        gone = snapshot(
            {"c": cpu_broker(90, bundles=["c/ns/0"]), "d": cpu_broker(10)}, {"c/ns/0": bundle_data()}
        )
        shedder.planned_destinations["c/ns/0"] = "a"
        placed = shedder.select_broker(np.array([0, 1]), "c/ns/0", gone, conf())
        assert placed.reason["rule"] == "random (planned destination not a candidate)"


# ---------------------------------------------------------------------------------------- shared helpers


class TestHelpers:
    def test_sort_descending_is_stable_on_long_runs_of_ties(self) -> None:
        rng = np.random.default_rng(1)
        keys = rng.integers(0, 3, 200).astype(float)
        idx, sorted_keys = sort_descending(np.arange(200), keys)
        expected = sorted(range(200), key=lambda i: (-keys[i], i))
        assert idx.tolist() == expected
        assert sorted_keys.tolist() == [keys[i] for i in expected]

    def test_a_shedding_result_is_true_even_when_empty(self) -> None:
        assert bool(SheddingResult()) is True
        assert len(SheddingResult()) == 0

    def test_broker_choices_behave_like_a_tuple_of_names(self) -> None:
        choices = BrokerChoices(("a", "b", "c"), np.array([0, 2]))
        assert choices == ("a", "c") and choices == ["a", "c"]
        assert choices != "ac"  # a string is not a sequence of names
        assert hash(choices) == hash(("a", "c"))
        assert repr(choices) == "('a', 'c')"
        assert choices[1] == "c" and choices[0:1] == ("a",)
        assert choices.holds_index(2) and not choices.holds_index(1) and not choices.holds_index(5)
        assert list(choices) == ["a", "c"] and len(choices) == 2

    def test_unsorted_or_repeated_index_candidates_are_sorted_and_deduplicated(self) -> None:
        snap = snapshot({b: cpu_broker(10) for b in ("a", "b", "c", "d")})
        assert candidate_indices(snap, np.array([2, 0, 2, 3])).tolist() == [0, 2, 3]
        assert candidate_indices(snap, np.array([1, 1])).tolist() == [1]
        assert candidate_indices(snap, np.array([0, 3, 2])).tolist() == [0, 2, 3]
        assert candidate_indices(snap, np.array([0, 1, 3])).tolist() == [0, 1, 3]
        assert candidate_indices(snap, ["d", "a", "d"]).tolist() == [0, 3]


# ---------------------------------------------------------------------------------------- placement


class TestPlacementEdges:
    def test_no_candidates_reason(self) -> None:
        snap = snapshot({"a": cpu_broker(10)})
        for cls in (LeastLongTermMessageRate, LeastResourceUsageWithWeight):
            placed = cls(np.random.default_rng(0)).select_broker([], "t/ns/0x0_0x1", snap, conf())
            assert (placed.broker, tuple(placed.choices)) == (None, ())
            assert placed.reason == {"strategy": cls.name, "rule": "no candidates"}

    def test_lruww_reason(self) -> None:
        snap = snapshot(
            {b: cpu_broker(u, rate_in=1, bundles=[f"{b}/ns/0"]) for b, u in (("a", 25), ("b", 75))}
        )
        placed = LeastResourceUsageWithWeight(np.random.default_rng(0)).select_broker(
            ["a", "b"], "x/ns/0", snap, conf()
        )
        rule = "usage + threshold <= average"
        assert placed.reason == {"strategy": "LeastResourceUsageWithWeight", "rule": rule, "avg_usage": 0.5}

    def test_lruww_history_survives_growth_and_changing_broker_lists(self) -> None:
        keys = conf(loadBalancerHistoryResourcePercentage=0.5)
        strategy = LeastResourceUsageWithWeight(np.random.default_rng(0))
        first = snapshot(
            {f"b{i:02d}": cpu_broker(50, rate_in=1, bundles=[f"b{i:02d}/ns/0"]) for i in range(3)}
        )
        strategy.select_broker(list(first.broker_ids), "x/ns/0", first, keys)
        # 40 brokers (the history array grows past its initial 16 slots), with a different broker list
        many = snapshot(
            {f"b{i:02d}": cpu_broker(100, rate_in=1, bundles=[f"b{i:02d}/ns/0"]) for i in range(1, 41)}
        )
        strategy.select_broker(list(many.broker_ids), "x/ns/0", many, keys)
        history = strategy.history
        assert history["b00"] == 0.5  # not a candidate this time: unchanged
        assert history["b01"] == 0.75 and history["b02"] == 0.75  # 0.5·0.5 + 0.5·1.0
        assert history["b03"] == 1.0 and history["b40"] == 1.0  # new brokers start at their usage
        assert len(history) == 41
