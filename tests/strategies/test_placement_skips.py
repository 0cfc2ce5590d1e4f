"""Placement strategies' skip kinds and seeded histories (docs/mutation-testing.md survivors).

A random choice among every candidate is reported as a skip (``skips`` table): LeastLongTermMessageRate
when every candidate is overloaded (Pulsar: +∞ == +∞, all are "best"), LeastResourceUsageWithWeight
when no broker is clearly below the average ("Assign randomly as all brokers are overloaded").
"""

from __future__ import annotations

import numpy as np
import strategies.test_placement as placement_tests
from builders import broker_data, snapshot

from shedlab.strategies import LeastLongTermMessageRate, LeastResourceUsageWithWeight, SkipKind

BUNDLE = "t/ns/0x0_0x1"


def test_least_long_term_message_rate_skips_only_when_every_candidate_is_overloaded() -> None:
    overloaded = snapshot({b: broker_data(cpu=(95, 100), long_rate_in=r) for b, r in (("a", 1), ("b", 2))})
    placement = LeastLongTermMessageRate().select_broker(
        ["a", "b"], BUNDLE, overloaded, placement_tests.DEFAULT
    )
    assert placement.skip == SkipKind.ALL_OVERLOADED and placement.choices == ("a", "b")
    one_fine = snapshot({"a": broker_data(cpu=(95, 100), long_rate_in=1), "b": broker_data(long_rate_in=2)})
    placement = LeastLongTermMessageRate().select_broker(
        ["a", "b"], BUNDLE, one_fine, placement_tests.DEFAULT
    )
    assert placement.skip is None and placement.choices == ("b",)


def test_least_resource_usage_with_weight_skips_when_no_broker_is_clearly_below_average() -> None:
    conf = placement_tests.TestLeastResourceUsageWithWeight.CONF  # difference threshold 5 %
    even = placement_tests.lruww_snapshot({"1": 30, "2": 30})  # average 30: nobody at or below 25
    placement = LeastResourceUsageWithWeight(np.random.default_rng(1)).select_broker(
        ["1", "2"], BUNDLE, even, conf
    )
    assert placement.skip == SkipKind.RANDOM_FALLBACK and placement.choices == ("1", "2")
    uneven = placement_tests.lruww_snapshot({"1": 10, "2": 30})  # average 20: 10 + 5 <= 20
    placement = LeastResourceUsageWithWeight(np.random.default_rng(1)).select_broker(
        ["1", "2"], BUNDLE, uneven, conf
    )
    assert placement.skip is None and placement.choices == ("1",)


def test_seeded_history_of_many_brokers_is_kept_whole() -> None:
    # more brokers than the history's first allocation: every seeded value is kept, and a broker that
    # leaves drops out while the others stay
    values = {f"broker-{k}": k / 100 for k in range(40)}
    strategy = LeastResourceUsageWithWeight(np.random.default_rng(0))
    strategy.seed_history(values)
    assert strategy.history == values
    strategy.seed_history({"broker-99": 0.5})
    assert strategy.history == {**values, "broker-99": 0.5}
    strategy.on_active_brokers_change({b for b in values if b != "broker-3"})
    assert strategy.history == {b: v for b, v in values.items() if b != "broker-3"}


def test_a_broker_first_seen_after_the_seeded_history_grew_starts_without_history() -> None:
    # 20 seeded brokers outgrow the history's first allocation; the slots the growth added are "no
    # history yet" (NaN), so a broker first seen at placement starts from its current usage
    strategy = LeastResourceUsageWithWeight(np.random.default_rng(0))
    strategy.seed_history({str(k): 0.5 for k in range(20)})
    loads = {**{str(k): 50.0 for k in range(20)}, "new": 10.0}
    conf = placement_tests.TestLeastResourceUsageWithWeight.CONF
    placement = strategy.select_broker(list(loads), BUNDLE, placement_tests.lruww_snapshot(loads), conf)
    assert placement.skip is None and placement.choices == ("new",)
    assert 0.0 < strategy.history["new"] <= 0.5
