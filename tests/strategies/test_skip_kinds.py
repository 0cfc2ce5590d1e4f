"""Every ``skipped`` reason a shedding strategy writes has its machine-readable twin in ``skips``: the same
broker and the SkipKind whose message is that reason (the simulator's ``skips`` table counts these)."""

from __future__ import annotations

from typing import Any

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

from shedlab.strategies import (
    AvgShedder,
    OverloadShedder,
    SheddingResult,
    ThresholdShedder,
    UniformLoadShedder,
)
from shedlab.strategies.base import Skip, SkipKind


def twins(result: SheddingResult) -> None:
    assert result.skipped, "the scenario must skip something"
    assert [s.broker for s in result.skips] == [d.get("broker") for d in result.skipped]
    for skip, entry in zip(result.skips, result.skipped, strict=True):
        # the message may add a gloss: "average max resource usage is 0 (no traffic to balance)"
        assert skip.kind.message.startswith(entry["reason"]), (skip.kind, entry["reason"])


def threshold(
    usages: list[float], bundles: int = 3, first: list[float] | None = None, **keys: Any
) -> SheddingResult:
    shedder = ThresholdShedder()
    if first is not None:
        shedder.find_bundles_for_unloading(threshold_cluster(first), conf(**{**THRESHOLD, **keys}))
    return shedder.find_bundles_for_unloading(
        threshold_cluster(usages, bundles=bundles), conf(**{**THRESHOLD, **keys})
    )


def test_threshold_upper_pass() -> None:
    twins(threshold([75, 25], loadBalancerBundleUnloadMinThroughputThreshold=1.001))  # below min throughput
    twins(threshold([75, 25], bundles=1))  # sole namespace bundle
    twins(threshold([75, 25], bundles=0))  # no bundles


def test_threshold_lower_boundary() -> None:
    lower = {"lowerBoundarySheddingEnabled": True}
    twins(
        threshold([75, 50, 0], first=[50, 50, 50], loadBalancerBundleUnloadMinThroughputThreshold=3, **lower)
    )
    twins(threshold([50, 50, 50], **lower))  # no broker below the lower bound
    twins(
        threshold([75, 50, 0], bundles=1, first=[50, 50, 50], **lower)
    )  # no broker with more than one bundle


def test_threshold_no_traffic() -> None:
    twins(threshold([0, 0]))


def test_overload_shedder() -> None:
    twins(OverloadShedder().find_bundles_for_unloading(threshold_cluster([95, 10], bundles=1), DEFAULT))
    twins(OverloadShedder().find_bundles_for_unloading(threshold_cluster([95, 10], bundles=0), DEFAULT))


def test_uniform_load_shedder() -> None:
    keys = conf(**{**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10})
    one = UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(142, 100, n_bundles=1), keys)
    assert one.skips == [Skip(SkipKind.SOLE_BUNDLE, "hot")]
    keys = conf(
        **{**UNIFORM_RATE, "loadBalancerMsgRateDifferenceShedderThreshold": 10, "minUnloadMessage": 22}
    )
    small = UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(142, 100), keys)
    assert small.skips == [Skip(SkipKind.AMOUNT_BELOW_MINIMUM, "hot")]


def test_avg_shedder() -> None:
    hits = {
        **AVG,
        "loadBalancerAvgShedderHitCountLowThreshold": 2,
        "loadBalancerAvgShedderHitCountHighThreshold": 2,
    }
    snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 202}, bundles=4)
    assert AvgShedder().find_bundles_for_unloading(snap, conf(**hits)).skips == [
        Skip(SkipKind.HIT_COUNT_NOT_REACHED, "c")
    ]
    low_gap = {**AVG, "loadBalancerAvgShedderHighThreshold": 90}
    result = AvgShedder().find_bundles_for_unloading(avg_cluster({"a": 10, "c": 90}), conf(**low_gap))
    assert result.skips == [Skip(SkipKind.AMOUNT_BELOW_MINIMUM, "c")]
