"""Brokers are asked at once: brokers that hang (the sandbox's ``hang_broker``: connected, never answered)
cost one timeout with its retries, not one each; the reading is the same, in the same order, with the
same one-line reason per broker, as when they were asked one after another."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from shedlab.cluster.access import Retry, concurrently
from shedlab.cluster.readers import AdminReader
from shedlab.cluster.sandbox import Sandbox
from shedlab.errors import ClusterError

HUNG = 4
RETRY = Retry(attempts=1, timeout_s=3.0)  # a hung broker: 3 s
# (3 s, not 1: the sandbox answers in this process, slowly on a loaded machine, and must not seem hung)


class InFlight:
    """The most calls of ``AdminReader._send`` out at once: an order of events, not a duration (one after
    another, at most one hung call is ever out; asked at once, all of them)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.out = self.most = 0
        self._lock = threading.Lock()
        send = AdminReader._send

        def counted(reader: AdminReader, *args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.out += 1
                self.most = max(self.most, self.out)
            try:
                return send(reader, *args, **kwargs)
            finally:
                with self._lock:
                    self.out -= 1

        monkeypatch.setattr(AdminReader, "_send", counted)


@pytest.fixture
def hung() -> Iterator[tuple[Sandbox, list[str]]]:
    """broker-loss (10 brokers, no ZooKeeper) with its first four brokers, in id order, hung."""
    with Sandbox("broker-loss", seed=3, zookeeper=None) as sb:
        victims = sorted(sb.broker_urls)[:HUNG]
        for broker in victims:
            sb.hang_broker(broker)
        yield sb, victims


def test_hung_brokers_cost_one_timeout_not_one_each(
    hung: tuple[Sandbox, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sb, victims = hung
    calls = InFlight(monkeypatch)
    reader = AdminReader(sb.admin_url, retry=RETRY)
    try:
        reading = reader.read()
    finally:
        reader.close()
    assert calls.most >= HUNG  # the hung brokers were waited for together (bench/bench_hung_brokers.py)
    assert list(reading.missing) == victims
    for broker, why in reading.missing.items():
        assert why == "unreachable after 1 attempt: no whole answer within 3 s", broker
    assert list(reading.reports) == sorted(reading.reports) and len(reading.reports) == 10 - HUNG
    assert set(reading.origin) == set(reading.reports)


def test_the_owner_among_hung_brokers_is_found_in_one_timeout(
    hung: tuple[Sandbox, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Just before an unload, a bundle that left its source is looked for on every other broker."""
    sb, victims = hung
    answering = sorted(set(sb.broker_urls) - set(victims))
    owner, source = answering[0], answering[1]
    bundle = next(b for b in sb.simulation.bundle_index if sb.owner_of(b) == owner)
    calls = InFlight(monkeypatch)
    reader = AdminReader(sb.admin_url, retry=RETRY)
    try:
        found = reader.bundle_owner(bundle, source, [*victims, owner])
    finally:
        reader.close()
    assert calls.most >= HUNG
    assert found.owner == owner and found.where.endswith(f"{owner}/ownedNamespaces")


def test_results_come_in_order_and_errors_stay_with_their_call() -> None:
    def call(k: int) -> Callable[[], int]:
        def answer() -> int:
            time.sleep(0.05 * (5 - k))  # the last ends first
            if k == 2:
                raise ClusterError("no answer", source=f"broker-{k}")
            return k

        return answer

    results = concurrently([call(k) for k in range(5)])
    assert [r if isinstance(r, int) else str(r) for r in results] == [0, 1, "broker-2: no answer", 3, 4]


def test_no_more_than_workers_calls_are_out_at_once() -> None:
    out, most = 0, 0
    lock = threading.Lock()

    def call() -> None:
        nonlocal out, most
        with lock:
            out += 1
            most = max(most, out)
        time.sleep(0.02)
        with lock:
            out -= 1

    concurrently([call] * 20, workers=3)
    assert most == 3


def test_a_bug_in_a_call_is_raised_not_kept() -> None:
    def bug() -> int:
        raise KeyError("a bug")

    with pytest.raises(KeyError, match="a bug"):
        concurrently([lambda: 1, bug, lambda: 3])
