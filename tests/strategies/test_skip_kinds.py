"""Every ``skipped`` reason a shedding strategy writes has its machine-readable twin in ``skips``: the same
broker and the SkipKind whose message is that reason (the simulator's ``skips`` table counts these)."""

from __future__ import annotations

from typing import Any, TypedDict

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


class LowerBoundary(TypedDict):
    """The key that turns ThresholdShedder's lower-boundary pass on (passed on to ``conf``)."""

    lowerBoundarySheddingEnabled: bool


def test_threshold_lower_boundary() -> None:
    lower: LowerBoundary = {"lowerBoundarySheddingEnabled": True}
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
    # the next cycles, with c's counters still short of 9: the same skip each time (built once, then reused)
    slow = {
        **AVG,
        "loadBalancerAvgShedderHitCountLowThreshold": 9,
        "loadBalancerAvgShedderHitCountHighThreshold": 9,
    }
    strategy = AvgShedder()
    cycles = [strategy.find_bundles_for_unloading(snap, conf(**slow)) for _ in range(3)]
    assert [c.skips for c in cycles] == [[Skip(SkipKind.HIT_COUNT_NOT_REACHED, "c")]] * 3
    assert [c.skipped[0]["hit_low_over"] for c in cycles] == [1, 2, 3]  # counted before the check
    low_gap = {**AVG, "loadBalancerAvgShedderHighThreshold": 90}
    result = AvgShedder().find_bundles_for_unloading(avg_cluster({"a": 10, "c": 90}), conf(**low_gap))
    assert result.skips == [Skip(SkipKind.AMOUNT_BELOW_MINIMUM, "c")]


def test_whole_cycle_skips_name_no_broker() -> None:
    # AvgShedder: no pair's gap reaches the low threshold (25): one skip for the cycle, no broker
    close = AvgShedder().find_bundles_for_unloading(avg_cluster({"a": 40, "b": 50}), conf(**AVG))
    assert close.skips == [Skip(SkipKind.NO_PAIR, None)] and not close.unloads
    # UniformLoadShedder: the rate difference (10 %) is below its threshold (50 %), no throughput test
    keys = conf(**UNIFORM_RATE)
    level = UniformLoadShedder().find_bundles_for_unloading(uniform_cluster(110, 100), keys)
    assert level.skips == [Skip(SkipKind.BELOW_THRESHOLDS, None)] and not level.unloads


def test_avg_shedder_skips_a_pair_when_no_bundle_fits_the_amount() -> None:
    # amount (190 − 0) × 0.5 = 95 msg/s is above minUnloadMessage (10) but every bundle carries 100
    keys = conf(**{**AVG, "minUnloadMessage": 10})
    snap = avg_cluster({"a": 10, "c": 90}, rate={"a": 0, "c": 190}, bundles=2)
    result = AvgShedder().find_bundles_for_unloading(snap, keys)
    assert result.skips == [Skip(SkipKind.NO_BUNDLE_FITS, "c")] and not result.unloads
    twins(result)


def test_every_kind_names_who_skipped_and_has_a_message() -> None:
    """Placement's random fallbacks, the leader's own refusals, the shedding strategy's all the rest."""
    placement = {SkipKind.RANDOM_FALLBACK, SkipKind.ALL_OVERLOADED}
    leader = {SkipKind.EXCLUDED_NAMESPACE, SkipKind.NO_DESTINATION, SkipKind.DESTINATION_IS_OWNER}
    for kind in SkipKind:
        want = "placement" if kind in placement else "leader" if kind in leader else "shedding"
        assert kind.role == want, kind
        assert kind.message
