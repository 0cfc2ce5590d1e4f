"""Recording the brokers' local reports: what one recorded tick holds, and its independence from the run."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from shedlab.core.sim.recording import Recording, iter_load_reports
from shedlab.core.sim.state import Reports
from shedlab.errors import InputError


def recording() -> Recording:
    return Recording(
        cluster="c1",
        broker_ids=["broker-0001:8080", "broker-0002:8080", "broker-0003:8080"],
        bundle_names=("t/ns/0x0_0x8", "t/ns/0x8_0xf"),
        bundle_topics=np.array([3, 4], dtype=np.int64),
        bundle_consumers=np.array([1, 2], dtype=np.int64),
        bundle_producers=np.array([5, 6], dtype=np.int64),
        load_manager_class="org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
        ticks=[],
    )


def local_reports() -> Reports:
    r = Reports.empty(3, 2)
    r.usage[:, 0] = [10.0, 20.0, 30.0]
    r.limit[:, 0] = 1600.0
    r.agg[2] = [1.0, 2.0, 3.0, 4.0]
    r.topics[:] = [0, 0, 7]
    r.consumers[:] = [0, 0, 3]
    r.producers[:] = [0, 0, 11]
    r.bundle_owner[:] = [2, 2]
    r.bundle_values[:, 0] = [0.5, 0.5, 1.5, 1.5]
    r.bundle_values[:, 1] = [0.5, 1.5, 1.5, 2.5]
    return r


@dataclass
class Result:
    reports: Recording | None


def test_add_keeps_a_copy_of_every_alive_brokers_local_report() -> None:
    rec, local = recording(), local_reports()
    alive = np.array([True, False, True])
    rec.add(
        5000, alive, local, np.array([1000, 2000, 5000], dtype=np.int64), np.array([0, 0, 10], dtype=np.int64)
    )
    local.usage[:] = -1.0  # the run goes on: the recording does not change
    local.bundle_owner[:] = -1
    (tick,) = rec.ticks
    assert tick.time_ms == 5000 and tick.slots.tolist() == [0, 2]
    assert tick.usage[:, 0].tolist() == [10.0, 30.0]
    assert tick.num_topics.tolist() == [0, 7] and tick.num_producers.tolist() == [0, 11]
    assert tick.last_update_ms.tolist() == [1000, 5000] and tick.start_ms.tolist() == [0, 10]
    assert tick.bundle_owner.tolist() == [2, 2]


def test_load_reports_from_a_recording() -> None:
    rec, local = recording(), local_reports()
    rec.add(
        5000, np.array([True, False, True]), local, np.array([1000, 0, 5000]), np.zeros(3, dtype=np.int64)
    )
    lines = list(iter_load_reports(Result(rec)))
    assert [line["broker"] for line in lines] == ["broker-0001:8080", "broker-0003:8080"]
    report = lines[1]["report"]
    assert report["numBundles"] == 2 and report["lastUpdate"] == 5000 and report["numTopics"] == 7
    assert report["lastStats"]["t/ns/0x8_0xf"]["msgRateOut"] == 1.5
    assert report["lastBundleGains"] == ["t/ns/0x0_0x8", "t/ns/0x8_0xf"]
    assert lines[0]["report"]["bundles"] == []


def test_a_run_without_recording_is_a_user_error() -> None:
    with pytest.raises(InputError, match="record=True"):
        list(iter_load_reports(Result(None)))
