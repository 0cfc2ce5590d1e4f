"""The ZooKeeper reader against a real ZooKeeper, populated here with kazoo as Pulsar's brokers and leader
write it: the decisions match ``decide`` on the same LoadData, and every failure is one line, exit 2."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss
from kazoo.interfaces import IAsyncResult
from kazoo.security import make_digest_acl

from shedlab.cluster import readers
from shedlab.cluster.access import Retry
from shedlab.cluster.readers import ZooKeeperReader
from shedlab.errors import ClusterError
from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import LoadData, TimeAverageBrokerData

pytestmark = pytest.mark.zookeeper

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "snapshot.json"
SHEDLAB = [sys.executable, "-m", "shedlab"]


def example() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return doc


def publish(hosts: str, doc: dict[str, Any], *, now_ms: int | None = None) -> None:
    """LoadData → the modular load manager's znodes (reports stamped ``now_ms`` as just written)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    zk = KazooClient(hosts=hosts, timeout=5.0)
    zk.start(timeout=10)
    try:
        for broker, data in doc["brokers"].items():
            local = dict(data["localData"], lastUpdate=now)
            zk.create(f"/loadbalance/brokers/{broker}", json.dumps(local).encode(), makepath=True)
            average = data.get("timeAverageData")
            if average is not None:
                path = f"/loadbalance/broker-time-average/{broker}"
                zk.create(path, json.dumps(average).encode(), makepath=True)
        for bundle, data in doc.get("bundleData", {}).items():
            zk.create(f"/loadbalance/bundle-data/{bundle}", json.dumps(data).encode(), makepath=True)
        leader = next(iter(doc["brokers"]))
        zk.create(
            "/loadbalance/leader", json.dumps({"serviceUrl": f"http://{leader}"}).encode(), makepath=True
        )
    finally:
        zk.stop()
        zk.close()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*SHEDLAB, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_reads_exactly_what_was_published(zk_hosts: str) -> None:
    doc = example()
    publish(zk_hosts, doc)
    reader = ZooKeeperReader(zk_hosts)
    try:
        reading = reader.read()
    finally:
        reader.close()
    assert sorted(reading.reports) == sorted(doc["brokers"])
    assert sorted(reading.bundle_data) == sorted(doc["bundleData"])
    assert reading.leader == next(iter(doc["brokers"]))
    load = reading.load_data()
    expected = LoadData.from_json(JsonReader(doc, "example"))
    assert load.to_json()["bundleData"] == expected.to_json()["bundleData"]
    for broker, data in expected.brokerData.items():  # the leader's aggregation (no time-average znode read)
        assert (
            load.brokerData[broker].timeAverageData.longTermMsgRateIn
            == data.timeAverageData.longTermMsgRateIn
        )


def test_a_broker_znode_whose_name_is_no_broker_id_is_a_missing_report(zk_hosts: str) -> None:
    """A znode under ``/loadbalance/brokers`` whose name is not HOST:PORT was read as a broker, and named
    as the source or destination of unloads; it is a missing report, as from the admin API."""
    doc = example()
    publish(zk_hosts, doc)
    zk = KazooClient(hosts=zk_hosts, timeout=5.0)
    zk.start(timeout=10)
    try:
        local = next(iter(doc["brokers"].values()))["localData"]
        zk.create("/loadbalance/brokers/x y", json.dumps(local).encode())
    finally:
        zk.stop()
        zk.close()
    reader = ZooKeeperReader(zk_hosts)
    try:
        reading = reader.read()
    finally:
        reader.close()
    assert sorted(reading.reports) == sorted(doc["brokers"])
    assert reading.missing == {
        "x y": "not a broker id HOST:PORT, which a broker's web address is made of: not read"
    }


@pytest.mark.parametrize("strategy", ["ThresholdShedder", "AvgShedder"])
def test_advise_from_zookeeper_decides_as_decide_does(zk_hosts: str, strategy: str) -> None:
    publish(zk_hosts, example())
    advised = run("advise", "--zookeeper", zk_hosts, "--strategy", strategy, "--json")
    assert advised.returncode == 0, advised.stderr
    decided = run("decide", str(EXAMPLE), "--strategy", strategy, "--json")
    a, d = json.loads(advised.stdout), json.loads(decided.stdout)
    key = [(u["broker"], u["bundle"], u["destination"]) for u in a["unload"]]
    assert key == [(u["broker"], u["bundle"], u["destination"]) for u in d["unload"]]
    actions = [x["action"] for x in a["actions"]]  # beyond --max-unloads (1), what --execute would hold back
    assert a["mode"] == "dry-run" and actions == ["dry-run", *["capped"] * len(actions)][: len(actions)]
    # every broker is either a source of an unload or explained
    sources = {u["broker"] for u in a["unload"]}
    explained = {x["broker"] for x in a["left_alone"]}
    assert sources | explained == set(example()["brokers"]) and not sources & explained
    assert sum(v for k, v in a["counts"].items() if not k.startswith("bundle skipped")) == len(explained)


def test_no_loadbalance_is_one_line(zk_hosts: str) -> None:
    line = one_line_error(run("advise", "--zookeeper", zk_hosts))
    assert "no /loadbalance znode" in line and zk_hosts in line


def test_extensible_load_manager_is_recognised(zk_hosts: str, tmp_path: Path) -> None:
    zk = KazooClient(hosts=zk_hosts, timeout=5.0)
    zk.start(timeout=10)
    try:
        lookup = {
            "webServiceUrl": "http://b1:8080",
            "pulsarServiceUrl": "pulsar://b1:6650",
            "persistentTopicsEnabled": True,
            "nonPersistentTopicsEnabled": True,
            "loadManagerClassName": "org.apache.pulsar.broker.loadbalance.extensions."
            "ExtensibleLoadManagerImpl",
            "startTimestamp": 1,
            "brokerVersion": "3.3.0",
        }
        zk.create("/loadbalance/brokers/b1:8080", json.dumps(lookup).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()
    line = one_line_error(run("advise", "--zookeeper", zk_hosts))
    assert "extensible load manager" in line and "/loadbalance/brokers/b1:8080" in line
    # and by its election node, before any broker is read
    zk = KazooClient(hosts=zk_hosts, timeout=5.0)
    zk.start(timeout=10)
    zk.create("/loadbalance/extension/leader", b"{}", makepath=True)
    zk.stop()
    zk.close()
    line = one_line_error(
        run("collect", "--zookeeper", zk_hosts, "--out", str(tmp_path / "x"), "--count", "1")
    )
    assert "/loadbalance/extension/leader" in line


def test_malformed_znode_names_path_and_field(zk_hosts: str) -> None:
    doc = example()
    broker = sorted(doc["brokers"])[1]
    doc["brokers"][broker]["localData"]["cpu"] = {"usage": "lots", "limit": 800.0}
    publish(zk_hosts, doc)
    line = one_line_error(run("advise", "--zookeeper", zk_hosts))
    assert f"/loadbalance/brokers/{broker}" in line and "cpu.usage" in line and "lots" in line


@pytest.mark.parametrize("raw", [b"{not json", b"[" * 100_000 + b"]" * 100_000], ids=["broken", "nested"])
def test_znode_that_is_not_json(zk_hosts: str, raw: bytes) -> None:
    """JSON nested deeper than Python's recursion limit (a RecursionError) was a traceback."""
    publish(zk_hosts, example())
    zk = KazooClient(hosts=zk_hosts, timeout=5.0)
    zk.start(timeout=10)
    zk.set("/loadbalance/brokers/broker-2:8080", raw)
    zk.stop()
    zk.close()
    line = one_line_error(run("advise", "--zookeeper", zk_hosts))
    assert "/loadbalance/brokers/broker-2:8080" in line and "not valid JSON" in line


def test_a_report_znode_the_session_may_not_read_is_one_line(zk_hosts: str) -> None:
    """A broker's znode under an ACL that lets only another identity read it (ZooKeeper's NoAuth, read in a
    pipelined window, outside the retries that make it one line) was a ``PermanentError`` traceback."""
    publish(zk_hosts, example())
    zk = KazooClient(hosts=zk_hosts, timeout=5.0)
    zk.start(timeout=10)
    path = "/loadbalance/brokers/broker-2:8080"
    zk.set_acls(path, [make_digest_acl("someone", "else", all=True)])
    zk.stop()
    zk.close()
    line = one_line_error(run("advise", "--zookeeper", zk_hosts))
    assert line == (
        f"error: zookeeper {zk_hosts}{path}: ZooKeeper refused access (no auth): a znode whose ACL does not "
        "let this session read it"
    )


def test_unreachable_zookeeper() -> None:
    """One wait of --timeout, in which kazoo tries again and again, and kazoo's last failure named. The
    connection was retried --retries times, each a whole --timeout of kazoo's own retries: 32 s with the
    defaults before a ZooKeeper that was not running was said to be unreachable, as 'Connection time-out'."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    line = one_line_error(
        run("advise", "--zookeeper", f"127.0.0.1:{port}", "--timeout", "1s", "--retries", "2")
    )
    assert line == (
        f"error: zookeeper 127.0.0.1:{port}: no connection within 1 s, kazoo retrying all along (last "
        "attempt: socket connection error: Connection refused); is ZooKeeper running at that address? "
        "--timeout gives a slow network longer"
    )
    started = time.monotonic()
    with pytest.raises(ClusterError, match="no connection within 1 s"):
        ZooKeeperReader(f"127.0.0.1:{port}", retry=Retry(attempts=3, backoff_s=0.5, timeout_s=1.0)).read()
    assert time.monotonic() - started < 2.5  # one --timeout, not 3 of them and the back-off (4.5 s)


class Requests:
    """Every ``get`` a reading sends, in order: ``("ask", path)`` when it is sent and ``("await", path)`` when
    its answer is waited for (an order of events, not a duration). ``fail_once`` makes the first request
    for that path fail on the connection, as a dropped TCP connection does."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_once: str | None = None) -> None:
        self.events: list[tuple[str, str]] = []
        self.fail_once = fail_once
        original = KazooClient.get_async

        def get_async(client: KazooClient, path: str, watch: Any = None) -> IAsyncResult:
            self.events.append(("ask", path))
            if path == self.fail_once:
                self.fail_once = None
                result = client.handler.async_result()
                result.set_exception(ConnectionLoss())
            else:
                result = original(client, path, watch)
            get = result.get

            def awaited(block: bool = True, timeout: float | None = None) -> Any:
                self.events.append(("await", path))
                return get(block, timeout)

            result.get = awaited  # type: ignore[method-assign]
            return result

        monkeypatch.setattr(KazooClient, "get_async", get_async)

    def of_bundle_data(self) -> list[tuple[str, str]]:
        return [(kind, path) for kind, path in self.events if path.startswith("/loadbalance/bundle-data/")]


def read_once(hosts: str, retry: Retry | None = None) -> Any:
    reader = ZooKeeperReader(hosts, retry=retry)
    try:
        return reader.read()
    finally:
        reader.close()


@pytest.mark.parametrize("in_flight", [512, 5])
def test_a_reading_sends_a_window_of_requests_before_it_awaits_their_answers(
    zk_hosts: str, monkeypatch: pytest.MonkeyPatch, in_flight: int
) -> None:
    """Pipelined on the session: a reading waits for one round trip per window of ``_IN_FLIGHT`` znodes,
    not one per znode (``bench/bench_zookeeper_read.py``: 4.8 s → 0.3 s for 1,800 znodes 1 ms away)."""
    doc = example()
    publish(zk_hosts, doc)
    monkeypatch.setattr(readers, "_IN_FLIGHT", in_flight)
    requests = Requests(monkeypatch)
    reading = read_once(zk_hosts)
    assert list(reading.bundle_data) == sorted(doc["bundleData"])  # answers kept in the order asked
    paths = [f"/loadbalance/bundle-data/{name}" for name in sorted(doc["bundleData"])]
    expected = []
    for start in range(0, len(paths), in_flight):
        window = paths[start : start + in_flight]
        expected += [("ask", path) for path in window] + [("await", path) for path in window]
    assert requests.of_bundle_data() == expected


def test_a_request_lost_with_its_connection_is_asked_again_alone(
    zk_hosts: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc = example()
    publish(zk_hosts, doc)
    name = sorted(doc["bundleData"])[3]
    lost = f"/loadbalance/bundle-data/{name}"
    requests = Requests(monkeypatch, fail_once=lost)
    reading = read_once(zk_hosts, Retry(attempts=2, backoff_s=0.0, timeout_s=5.0))
    assert sorted(reading.bundle_data) == sorted(doc["bundleData"])
    assert reading.bundle_data[name] == doc["bundleData"][name]
    asked = [path for kind, path in requests.of_bundle_data() if kind == "ask"]
    assert asked.count(lost) == 2 and len(asked) == len(doc["bundleData"]) + 1


def test_bundle_data_of_v1_namespaces_is_read(zk_hosts: str) -> None:
    """``LoadBalanceResources.BundleDataResources.getBundleDataPath`` is ``/loadbalance/bundle-data/`` + the
    bundle's full name, so a v1 namespace (``tenant/cluster/namespace``) and the v1 heartbeat namespace
    (``pulsar/<cluster>/<host>:<port>``, which every broker owns) are four levels deep, not three."""
    doc = example()
    stored = next(iter(doc["bundleData"].values()))
    v1 = {
        "prop/us-west/ns1/0x00000000_0x40000000": stored,
        "pulsar/us-west/broker-1:8080/0x00000000_0xffffffff": stored,
    }
    doc["bundleData"] = {**doc["bundleData"], **v1}
    publish(zk_hosts, doc)
    reader = ZooKeeperReader(zk_hosts)
    try:
        reading = reader.read()
    finally:
        reader.close()
    assert sorted(reading.bundle_data) == sorted(doc["bundleData"])
    assert reading.bundle_data["prop/us-west/ns1/0x00000000_0x40000000"] == stored


def test_leader_of_a_pulsar_2_cluster_is_its_broker_id(zk_hosts: str) -> None:
    """Before 3.0, ``LeaderBroker`` (the leader znode) holds only ``serviceUrl``, the leader's web address
    ``http://<advertisedAddress>:<webServicePort>``; its broker id is that address without the scheme."""
    doc = example()
    publish(zk_hosts, doc)  # {"serviceUrl": "http://<first broker>"}
    reader = ZooKeeperReader(zk_hosts)
    try:
        reading = reader.read()
    finally:
        reader.close()
    assert reading.leader == next(iter(doc["brokers"]))


def test_broker_time_averages_are_the_leaders_not_the_stale_znode(zk_hosts: str) -> None:
    """The leader never reads ``/loadbalance/broker-time-average``:
    ``ModularLoadManagerImpl.updateBundleData`` recomputes every broker's TimeAverageBrokerData from its
    report's bundles and the bundle histories on each update, and only writes the znode (at start, all
    zeros; then every ``loadBalancerResourceQuotaUpdateIntervalMinutes``). A broker started since the
    last write still has the zeros of its start: read as its averages, it looked empty to
    LeastLongTermMessageRate."""
    doc = example()
    broker = sorted(doc["brokers"])[0]
    doc["brokers"][broker]["timeAverageData"] = TimeAverageBrokerData().to_json()  # as start() writes it
    publish(zk_hosts, doc)
    reader = ZooKeeperReader(zk_hosts)
    try:
        load = reader.read().load_data()
    finally:
        reader.close()
    expected = TimeAverageBrokerData()
    expected.reset(load.brokerData[broker].localData.bundles, load.bundleData)
    assert expected.longTermMsgRateIn > 0
    assert load.brokerData[broker].timeAverageData == expected


def test_a_metadata_store_url_as_broker_conf_writes_it_is_taken(zk_hosts: str) -> None:
    """Pulsar names its ZooKeeper in ``metadataStoreUrl`` as ``zk:HOST:PORT[,…][/chroot]`` (the ``zk:``
    scheme selects ZKMetadataStore; broker.conf's own examples carry it): the value an operator copies."""
    publish(zk_hosts, example())
    reader = ZooKeeperReader(f"zk:{zk_hosts}")
    try:
        reading = reader.read()
    finally:
        reader.close()
    assert sorted(reading.reports) == sorted(example()["brokers"])
    assert "zk:" not in reading.source


def test_a_zookeeper_that_goes_away_after_the_first_read_ends_the_next_read_in_bounded_time() -> None:
    """kazoo's blocking calls wait with no limit, and a request made while the client reconnects is queued
    until a connection comes back: once the ZooKeeper of a running ``collect`` or ``advise --watch`` went
    away, its next read hung for ever instead of failing that cycle."""
    from shedlab.cluster.zookeeper_server import LocalZooKeeper

    server = LocalZooKeeper().start()
    try:
        publish(server.hosts, example())
        reader = ZooKeeperReader(server.hosts, retry=Retry(attempts=2, backoff_s=0.0, timeout_s=1.0))
        assert reader.read().reports
    finally:
        server.stop()
    outcome: list[BaseException] = []

    def read() -> None:
        try:
            reader.read()
        except BaseException as exc:
            outcome.append(exc)

    started = time.monotonic()
    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(30)
    try:
        assert not thread.is_alive(), "the read after ZooKeeper went away never ended"
        assert time.monotonic() - started < 10
        [error] = outcome
        assert isinstance(error, ClusterError)
        assert str(error).endswith("/loadbalance: unreachable after 2 attempts: no answer within 1 s"), error
    finally:
        reader.close()


def test_a_leader_znode_naming_no_leader_is_refused(zk_hosts: str) -> None:
    """``{"serviceUrl": 5}`` was read as "no leader" (advise's JSON said leader: null), silently."""
    publish(zk_hosts, example())
    zk = KazooClient(hosts=zk_hosts, timeout=5.0)
    zk.start(timeout=10)
    zk.set("/loadbalance/leader", b'{"serviceUrl": 5}')
    zk.stop()
    zk.close()
    line = one_line_error(run("advise", "--zookeeper", zk_hosts))
    assert "/loadbalance/leader" in line and "serviceUrl: expected the leader's web address as text" in line


@pytest.mark.parametrize("stray", ["t/ns/zzz", "t/c/ns/zzz"])
def test_a_bundle_data_node_that_is_no_bundle_is_refused(zk_hosts: str, stray: str) -> None:
    """``t/ns/zzz`` holding data was read as a v1 namespace without bundles, and ``t/c/ns/zzz`` as a
    bundle of that name, silently; a v1 namespace whose bundles were all deleted (an empty node without
    children, as the store leaves it) is still passed over."""
    publish(zk_hosts, example())
    zk = KazooClient(hosts=zk_hosts, timeout=5.0)
    zk.start(timeout=10)
    zk.create("/loadbalance/bundle-data/old/us-west/emptied", b"", makepath=True)
    zk.create(f"/loadbalance/bundle-data/{stray}", json.dumps({"topics": 1}).encode(), makepath=True)
    zk.stop()
    zk.close()
    line = one_line_error(run("advise", "--zookeeper", zk_hosts))
    assert f"/loadbalance/bundle-data/{stray} is not a bundle's node" in line, line
