"""The numbers behind each decision (``reason``) for hand-made clusters, checked key by key.

``shedlab decide --json``, the simulator's decision table and the report show these reasons; a key
renamed or a value taken from the wrong variable is a user-visible bug. Every value below follows from
the inputs of tests/strategies/test_thresholds.py (see the comments there): e.g. the largest bundle of
``threshold_cluster`` is 20 MB/3 + 2 bytes. If the reason format changes on purpose, change it here.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from builders import bundle_data, cpu_broker, snapshot
from strategies.test_thresholds import (
    AVG,
    DEFAULT,
    THRESHOLD,
    UNIFORM_RATE,
    avg_cluster,
    conf,
    threshold_cluster,
    uniform_cluster,
)

from shedlab.strategies import AvgShedder, OverloadShedder, ThresholdShedder, UniformLoadShedder
from shedlab.strategies.base import SheddingResult

MB = 1024 * 1024
BIGGEST = 20 * MB / 3 + 2  # the largest bundle of threshold_cluster(tp=20 MB, 3 bundles)


def same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert set(got) == set(want)
    for key, value in want.items():
        if isinstance(value, float):
            assert got[key] == pytest.approx(value, rel=1e-12), key
        else:
            assert got[key] == value, key


THRESHOLD_UPPER = {
    "strategy": "ThresholdShedder",
    "pass": "upper",
    "usage_history": 0.75,
    "usage_now": 0.75,
    "avg_usage": 0.5,
    "threshold": 0.25,
    "excess": 0.05,
    "broker_throughput": 20.0 * MB,
    "target_throughput": 1.0 * MB,
}


class TestThresholdShedder:
    def test_upper_pass_unload(self) -> None:
        result = ThresholdShedder().find_bundles_for_unloading(threshold_cluster([75, 25]), conf(**THRESHOLD))
        same(
            result.unloads[0].reason,
            {**THRESHOLD_UPPER, "bundle_throughput": BIGGEST, "marked_throughput": BIGGEST},
        )

    def test_upper_pass_skips(self) -> None:
        keys = {**THRESHOLD, "loadBalancerBundleUnloadMinThroughputThreshold": 1.001}
        (skip,) = (
            ThresholdShedder().find_bundles_for_unloading(threshold_cluster([75, 25]), conf(**keys)).skipped
        )
        same(skip, {**THRESHOLD_UPPER, "broker": "b0", "reason": "target below minimum throughput"})
        one = threshold_cluster([75, 25], bundles=1)
        (skip,) = ThresholdShedder().find_bundles_for_unloading(one, conf(**THRESHOLD)).skipped
        same(skip, {**THRESHOLD_UPPER, "broker": "b0", "reason": "sole namespace bundle"})

    def lower(self, **extra: object) -> SheddingResult:
        keys = {**THRESHOLD, "lowerBoundarySheddingEnabled": True, **extra}
        shedder = ThresholdShedder()
        shedder.find_bundles_for_unloading(threshold_cluster([50, 50, 50]), conf(**keys))
        return shedder.find_bundles_for_unloading(threshold_cluster([75, 50, 0]), conf(**keys))

    LOWER: ClassVar[dict[str, Any]] = {
        "strategy": "ThresholdShedder",
        "pass": "lower-boundary",
        "usage_history": 0.6875,
        "avg_usage": 0.4375,
        "threshold": 0.25,
        "broker_throughput": 20.0 * MB,
        "target_throughput": 2.5 * MB,
    }

    def test_lower_boundary_unload(self) -> None:
        result = self.lower()
        same(
            result.unloads[0].reason,
            {**self.LOWER, "bundle_throughput": BIGGEST, "marked_throughput": BIGGEST},
        )
        assert result.skipped == []

    def test_lower_boundary_skips(self) -> None:
        (skip,) = self.lower(loadBalancerBundleUnloadMinThroughputThreshold=3).skipped
        same(skip, {**self.LOWER, "broker": "b0", "reason": "target below minimum throughput"})
        shedder = ThresholdShedder()
        keys = conf(**{**THRESHOLD, "lowerBoundarySheddingEnabled": True})
        (skip,) = shedder.find_bundles_for_unloading(threshold_cluster([50, 50, 50]), keys).skipped
        same(skip, {"pass": "lower-boundary", "reason": "no broker below the lower bound", "avg_usage": 0.5})


class TestOverloadShedder:
    BASE: ClassVar[dict[str, Any]] = {
        "strategy": "OverloadShedder",
        "usage_now": 0.95,
        "overload_threshold": 0.85,
        "excess": 0.95 - 0.85 + 0.05,
        "broker_throughput": 20.0 * MB,
        "target_throughput": 20.0 * MB * (0.95 - 0.85 + 0.05),
    }

    def test_unload_and_skips(self) -> None:
        result = OverloadShedder().find_bundles_for_unloading(threshold_cluster([95, 10]), DEFAULT)
        same(
            result.unloads[0].reason,
            {**self.BASE, "bundle_throughput": BIGGEST, "marked_throughput": BIGGEST},
        )
        one = threshold_cluster([95, 10], bundles=1)
        (skip,) = OverloadShedder().find_bundles_for_unloading(one, DEFAULT).skipped
        same(skip, {**self.BASE, "broker": "b0", "reason": "sole namespace bundle"})

    def test_no_bundles(self) -> None:
        snap = snapshot({"b0": cpu_broker(95, tp_in=20 * MB), "b1": cpu_broker(10)})
        (skip,) = OverloadShedder().find_bundles_for_unloading(snap, DEFAULT).skipped
        same(skip, {**self.BASE, "broker": "b0", "reason": "no bundles"})


class TestUniformLoadShedder:
    BASE: ClassVar[dict[str, Any]] = {
        "strategy": "UniformLoadShedder",
        "max_msg_rate": 142.0,
        "min_msg_rate": 100.0,
        "msg_rate_difference_pct": 42.0,
        "max_throughput": 0.0,
        "min_throughput": 1.0,
        "throughput_multiplier": 0.0,
        "mode": "msgRate",
        "overloaded_broker": "hot",
        "underloaded_broker": "cold",
        "amount_to_move": 21,
    }
    KEYS: ClassVar[dict[str, Any]] = {**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10}

    def test_unload(self) -> None:
        result = UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(142, 100), conf(**self.KEYS))
        same(result.unloads[0].reason, {**self.BASE, "bundle_traffic": 10.7, "remaining_after": 11})

    def test_skips(self) -> None:
        one = uniform_cluster(142, 100, n_bundles=1)
        (skip,) = UniformLoadShedder().find_bundles_for_unloading(one, conf(**self.KEYS)).skipped
        same(skip, {**self.BASE, "broker": "hot", "reason": "broker owns at most one bundle"})
        keys = {**self.KEYS, "minUnloadMessage": 22}
        (skip,) = (
            UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(142, 100), conf(**keys)).skipped
        )
        same(skip, {**self.BASE, "broker": "hot", "reason": "amount below minimum 22"})


class TestAvgShedder:
    BASE: ClassVar[dict[str, Any]] = {
        "strategy": "AvgShedder",
        "pair": ["a", "c"],
        "under_score": 10.0,
        "over_score": 90.0,
        "gap": 80.0,
        "hit_high_under": 1,
        "hit_high_over": 1,
        "hit_low_under": 1,
        "hit_low_over": 1,
    }

    def test_unload(self) -> None:
        snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 202}, bundles=4)
        result = AvgShedder().find_bundles_for_unloading(snap, conf(**AVG))
        same(
            result.unloads[0].reason,
            {
                **self.BASE,
                "mode": "msgRate",
                "amount_to_move": 101.0,
                "bundle_traffic": 100.0,
                "amount_selected": 100.0,
            },
        )

    def test_skips(self) -> None:
        keys = {
            **AVG,
            "loadBalancerAvgShedderHitCountLowThreshold": 2,
            "loadBalancerAvgShedderHitCountHighThreshold": 2,
        }
        snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 202}, bundles=4)
        (skip,) = AvgShedder().find_bundles_for_unloading(snap, conf(**keys)).skipped
        same(skip, {**self.BASE, "broker": "c", "reason": "hit count not reached"})
        low_gap = {**AVG, "loadBalancerAvgShedderHighThreshold": 90}  # a low hit only: high counters 0
        (skip,) = (
            AvgShedder().find_bundles_for_unloading(avg_cluster({"a": 10, "c": 90}), conf(**low_gap)).skipped
        )
        same(
            skip,
            {
                **self.BASE,
                "hit_high_under": 0,
                "hit_high_over": 0,
                "broker": "c",
                "reason": "traffic gap below minUnloadMessage(Throughput)",
                "need_msg_rate": 0.0,
                "need_throughput": 0.0,
            },
        )
        names = ["c/ns/0"]
        empty = snapshot(
            {"a": cpu_broker(10), "c": cpu_broker(90, rate_in=400, bundles=names)}, {"c/ns/0": bundle_data()}
        )
        (skip,) = AvgShedder().find_bundles_for_unloading(empty, conf(**AVG)).skipped
        same(
            skip,
            {**self.BASE, "broker": "c", "reason": "no bundle fits the amount to move", "mode": "msgRate",
             "amount_to_move": 200.0},
        )  # fmt: skip
