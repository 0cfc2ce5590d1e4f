"""The leader's candidate filters read from the brokers' reports (spec §4.5 steps 2 and 6): the topic-type
check, BrokerLoadManagerClassFilter and BrokerVersionFilter."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import pytest
from builders import broker_data, snapshot

from shedlab.config import LoadBalancerConfig
from shedlab.manager import LoadManager
from shedlab.manager.filters import parse_semver
from shedlab.model.pulsar import BrokerData
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import pair_config

T0 = 1_700_000_000_000
BUNDLE = "t/ns/0x00000000_0x10000000"


def conf(**overrides: object) -> LoadBalancerConfig:
    base = pair_config("OverloadShedder+LeastLongTermMessageRate")
    return base.with_overrides({"loadBalancerDistributeBundlesEvenlyEnabled": False, **overrides})


def broker(rate: float, **report: Any) -> BrokerData:
    """An idle broker whose long-term message rate is ``rate`` (LeastLongTermMessageRate's score) and whose
    report has ``report``'s fields (the rest as :func:`broker_data` has them: the modular manager's class)."""
    data = broker_data(cpu=(10.0, 100.0), long_rate_in=rate)
    return dataclasses.replace(data, localData=dataclasses.replace(data.localData, **report))


def three(**reports: Mapping[str, Any]) -> ClusterSnapshot:
    """Brokers a (least loaded), b and c, ``reports`` naming the report fields of each."""
    rates = {"a": 100.0, "b": 200.0, "c": 300.0}
    return snapshot({b: broker(rate, **reports.get(b, {})) for b, rate in rates.items()})


def placed(snap: ClusterSnapshot, **overrides: object) -> str | None:
    return LoadManager(conf(**overrides), seed=0).lookup(BUNDLE, snap, T0).broker


class TestTopicTypeCheck:
    """A broker whose report says persistent topics are disabled is never an available broker (step 2)."""

    def test_is_not_chosen(self) -> None:
        assert placed(three()) == "a"
        assert placed(three(a={"persistentTopicsEnabled": False})) == "b"

    def test_nor_by_the_overload_recheck(self) -> None:
        # b and c overloaded: LeastLongTermMessageRate draws one of them (both +∞), which is overloaded, so
        # the leader asks again over step 2's set, which leaves a out as well
        hot = {"cpu": broker_data(cpu=(90, 100)).localData.cpu}
        snap = three(a={"persistentTopicsEnabled": False}, b=hot, c=hot)
        answers = {LoadManager(conf(), seed=seed).lookup(BUNDLE, snap, T0).broker for seed in range(8)}
        assert answers == {"b", "c"}

    def test_no_broker_serving_them_leaves_no_destination(self) -> None:
        off = {"persistentTopicsEnabled": False}
        assert placed(three(a=off, b=off, c=off)) is None


class TestLoadManagerClassFilter:
    """Brokers reporting another load manager (or none) are filtered out; none left → all candidates."""

    def test_another_manager_or_none_is_filtered_out(self) -> None:
        extensible = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
        assert placed(three(a={"loadManagerClassName": extensible})) == "b"
        assert placed(three(a={"loadManagerClassName": None})) == "b"

    def test_every_broker_filtered_out_gives_them_all_back(self) -> None:
        none = {"loadManagerClassName": None}
        assert placed(three(a=none, b=none, c=none)) == "a"


class TestVersionFilter:
    """With preferLaterVersions only the newest version's brokers are kept; a bad version restores all."""

    def test_off_by_default(self) -> None:
        assert placed(three(a={"brokerVersionString": "4.0.0"}, b={"brokerVersionString": "4.1.0"})) == "a"

    def test_keeps_the_newest_ignoring_build_metadata(self) -> None:
        snap = three(
            a={"brokerVersionString": "4.1.0-SNAPSHOT"},
            b={"brokerVersionString": "4.1.0+b7"},
            c={"brokerVersionString": "4.1.0"},
        )
        manager = LoadManager(conf(preferLaterVersions=True), seed=0)
        answer = manager.lookup(BUNDLE, snap, T0)
        assert answer.broker == "b"
        assert answer.placement is not None and tuple(answer.placement.choices) == ("b",)

    @pytest.mark.parametrize("bad", [None, "", "4.1", "2.10.4.1", "04.1.0"])
    def test_a_candidate_without_a_semantic_version_restores_every_candidate(self, bad: str | None) -> None:
        snap = three(
            a={"brokerVersionString": "4.0.0"},
            b={"brokerVersionString": "4.1.0"},
            c={"brokerVersionString": bad},
        )
        assert placed(snap, preferLaterVersions=True) == "a"

    def test_restoring_undoes_the_class_filter(self) -> None:
        # Java re-adds the isolation-policy set to the candidates: the brokers every filter before removed too
        snap = three(a={"loadManagerClassName": None, "brokerVersionString": "1.0.0"})
        assert placed(snap, preferLaterVersions=True) == "a"


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("1.1.0-SNAPSHOT", "1.2.0-SNAPSHOT"),
        ("1.2.0-SNAPSHOT", "1.2.0"),
        ("1.0.0-alpha.1", "1.0.0-alpha.beta"),
        ("1.0.0-alpha.2", "1.0.0-alpha.10"),  # both Java ints: by value
        ("1.0.0-rc.10", "1.0.0-rc.9a"),  # not both ints: as strings ("1" < "9")
        ("1.0.0-rc.-x", "1.0.0-rc.1"),  # likewise ("-" < "1")
        ("1.0.0-alpha", "1.0.0-alpha.1"),
        ("1.0.0+b2", "1.0.0"),  # BUILD_AWARE_ORDER: no build above any build
        ("2.9.9", "2.10.0"),
    ],
)
def test_semantic_versions_order_as_jsemver(older: str, newer: str) -> None:
    old, new = parse_semver(older), parse_semver(newer)
    assert old is not None and new is not None
    assert old.compare(new, builds=True) < 0 < new.compare(old, builds=True)


def test_build_metadata_is_ignored_by_equality_only() -> None:
    one, other = parse_semver("4.0.1+a"), parse_semver("4.0.1+b")
    assert one is not None and other is not None
    assert one.compare(other) == 0 and one.compare(other, builds=True) < 0


@pytest.mark.parametrize(
    "text", ["", "1", "1.2", "1.2.3.4", "01.2.3", "1.2.3-01", "1.2.3-", "1.2.3+", "v1.2.3"]
)
def test_what_jsemver_refuses_is_no_version(text: str) -> None:
    assert parse_semver(text) is None
