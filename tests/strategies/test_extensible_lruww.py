"""The extensible manager's LeastResourceUsageWithWeight (spec §3.5) and the facts of spec §7.6.

Java fixture (``extensions/strategy/LeastResourceUsageWithWeightTest``): weights cpu 1, memory 0.1,
direct memory 0.1, NIC 1/1; history 0.5; difference threshold 5 %; every resource of a broker at the
same percentage, built with ``BrokerLoadData.update`` (so the first sample seeds the EMA).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shedlab.model.pulsar import RESOURCE_NAMES, ResourceUsage
from shedlab.strategies import extensible_least_resource_usage_with_weight as module
from shedlab.strategies.extensible_data import BrokerLoadData, ResourceWeights
from shedlab.strategies.extensible_least_resource_usage_with_weight import (
    ExtensibleLeastResourceUsageWithWeight,
)

WEIGHTS = ResourceWeights(cpu=1.0, memory=0.1, direct_memory=0.1, bandwidth_in=1.0, bandwidth_out=1.0)
HISTORY = 0.5
DIFF = 5
BUNDLE = "t/ns/0x00000000_0xffffffff"


def sample(previous: BrokerLoadData, usage: float, now: int = 1) -> BrokerLoadData:
    """``BrokerLoadData.update`` with every resource at ``usage`` % and 1 for every counter."""
    resources = {name: ResourceUsage(usage, 100.0) for name in RESOURCE_NAMES}
    return previous.updated(
        resources,
        msg_throughput_in=1,
        msg_throughput_out=1,
        msg_rate_in=1,
        msg_rate_out=1,
        bundle_count=1,
        topics=1,
        weights=WEIGHTS,
        history=HISTORY,
        now_ms=now,
    )


def fresh(usage: float) -> BrokerLoadData:
    return sample(BrokerLoadData(), usage)


def select(store: dict[str, BrokerLoadData], candidates: set[str], seed: int = 0) -> str | None:
    strategy = ExtensibleLeastResourceUsageWithWeight(np.random.default_rng(seed))
    return strategy.select_broker(candidates, BUNDLE, store, difference_threshold_percentage=DIFF).broker


def setup_store() -> dict[str, BrokerLoadData]:
    return {"1": fresh(10), "2": fresh(30), "3": fresh(60), "4": fresh(5)}


def test_select() -> None:
    """LeastResourceUsageWithWeightTest.testSelect: "1","1","1","1","2", then "3" after broker3 restarts."""
    store = setup_store()
    c = {"1", "2", "3"}
    assert select(store, c) == "1"
    store.update({"1": fresh(20), "2": fresh(30), "3": fresh(50)})
    assert select(store, c) == "1"
    for usage in ({"1": 30, "2": 30, "3": 40}, {"1": 30, "2": 30, "3": 40}):
        store.update({b: sample(store[b], u) for b, u in usage.items()})
        assert select(store, c) == "1"
    store.update({b: sample(store[b], u) for b, u in {"1": 35, "2": 20, "3": 45}.items()})
    assert select(store, c) == "2"
    # A restarted broker publishes fresh data: its EMA starts from its first sample, so it is best.
    store.update({b: sample(store[b], u) for b, u in {"1": 35, "2": 20}.items()})
    store["3"] = fresh(0)
    assert select(store, c) == "3"


def test_select_ema_values() -> None:
    """The broker-side EMAs behind testSelect (h = 0.5): 0.25/0.30/0.45 after one update from 20/30/50."""
    store = {"1": fresh(20), "2": fresh(30), "3": fresh(50)}
    updated = {b: sample(store[b], u).weighted_max_ema for b, u in {"1": 30, "2": 30, "3": 40}.items()}
    assert updated == pytest.approx({"1": 0.25, "2": 0.30, "3": 0.45}, rel=1e-6)


def test_arithmetic_exception() -> None:
    """LeastResourceUsageWithWeightTest.testArithmeticException: EMAs forced {1: 0.1, 2: 0.3, 4: 0.05}."""
    store = setup_store()
    for b, v in {"1": 0.1, "2": 0.3, "4": 0.05}.items():
        store[b] = dataclasses.replace(store[b], weighted_max_ema=v)
    assert select(store, {"1", "2", "3"}) == "1"


def test_no_load_data_brokers() -> None:
    """LeastResourceUsageWithWeightTest.testNoLoadDataBrokers: brokers without data are never best,
    but the fallback draw is over all candidates, those without data included."""
    store = setup_store()
    store.update({"1": fresh(50), "2": fresh(100)})
    del store["3"], store["4"]
    c = {"1", "2", "5"}
    assert select(store, c) == "1"
    store["1"] = fresh(100)
    assert {select(store, c, seed) for seed in range(40)} == {"1", "2", "5"}
    del store["1"], store["2"]
    assert {select(store, c, seed) for seed in range(40)} == {"1", "2", "5"}


def test_no_candidates() -> None:
    assert select(setup_store(), set()) is None


def test_best_set_threshold_is_inclusive() -> None:
    """``usage + diff ≤ avg``: a broker exactly ``diff`` below the average is best."""
    store = {
        "a": dataclasses.replace(BrokerLoadData(), weighted_max_ema=0.25),
        "b": dataclasses.replace(BrokerLoadData(), weighted_max_ema=0.75),
    }
    strategy = ExtensibleLeastResourceUsageWithWeight(np.random.default_rng(0))
    placement = strategy.select_broker({"a", "b"}, BUNDLE, store, difference_threshold_percentage=25)
    assert (placement.broker, tuple(placement.choices)) == ("a", ("a",))
    placement = strategy.select_broker({"a", "b"}, BUNDLE, store, difference_threshold_percentage=25.0001)
    assert tuple(placement.choices) == ("a", "b")


def test_unsampled_broker_counts_as_full() -> None:
    """Quirk: before its first sample a broker's weightedMaxEMA is 1.0, so it is never best."""
    store = {"new": BrokerLoadData(), "old": fresh(50)}
    strategy = ExtensibleLeastResourceUsageWithWeight(np.random.default_rng(0))
    placement = strategy.select_broker({"new", "old"}, BUNDLE, store, difference_threshold_percentage=10)
    assert placement.broker == "old"


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(st.sampled_from("abcdefg"), st.floats(0, 3), min_size=0, max_size=7),
    st.sets(st.sampled_from("abcdefgh"), min_size=1),
)
def test_choice_is_in_the_best_set(loads: dict[str, float], candidates: set[str]) -> None:
    """The pick is drawn from ``choices``; ``choices`` are the clearly-below-average brokers with data,
    or every candidate when there is none."""
    store = {b: dataclasses.replace(BrokerLoadData(), weighted_max_ema=v) for b, v in loads.items()}
    strategy = ExtensibleLeastResourceUsageWithWeight(np.random.default_rng(1))
    placement = strategy.select_broker(candidates, BUNDLE, store, difference_threshold_percentage=10)
    assert placement.broker in placement.choices
    with_data = [b for b in candidates if b in store]
    if with_data:
        total = 0.0
        for b in sorted(with_data):  # Java's sequential sum (sum() is compensated from Python 3.12)
            total += store[b].weighted_max_ema
        avg = total / len(with_data)
        best = sorted(b for b in with_data if store[b].weighted_max_ema + 0.1 <= avg)
    else:
        best = []
    assert list(placement.choices) == (best or sorted(candidates))


def test_average_is_a_sequential_double_sum_on_every_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Java adds the loads one by one: 0.41 + 0.52 + 0.6 is 1.5299999999999998, so the average is just
    under 0.51 and broker "a" (0.41 + 0.1 = 0.51) is not best. Python 3.12's ``sum`` of floats is
    compensated (1.53): here emulated with ``math.fsum``, it would make "a" best."""
    monkeypatch.setattr(module, "sum", math.fsum, raising=False)
    store = {
        b: dataclasses.replace(BrokerLoadData(), weighted_max_ema=v)
        for b, v in zip("abc", (0.41, 0.52, 0.6), strict=True)
    }
    strategy = ExtensibleLeastResourceUsageWithWeight(np.random.default_rng(0))
    placement = strategy.select_broker({"a", "b", "c"}, BUNDLE, store, difference_threshold_percentage=10)
    assert tuple(placement.choices) == ("a", "b", "c")
