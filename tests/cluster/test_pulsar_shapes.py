"""The admin reader against what real Pulsar brokers send, version by version, from a stub broker.

The sandbox speaks the current shapes; these tests hold the others a real cluster sends (older versions'
documents, Jackson's number forms), each with the Pulsar class that produces it.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest
from stub_broker import NOT_FOUND, Answer, stub_broker

from shedlab.cluster.access import Retry
from shedlab.cluster.readers import AdminReader, leader_id, owner_of_ephemeral_data
from shedlab.errors import ClusterError


def report(port: int) -> dict[str, Any]:
    """A Pulsar 2.x LocalBrokerData: no ``loadManagerClassName``/``startTimestamp``, ``bundleStats`` (its
    ``getBundleStats()`` getter, serialised before 3.0) beside ``lastStats``."""
    stats = {
        "msgRateIn": 10.0,
        "msgThroughputIn": 1.0e7,
        "msgRateOut": 20.0,
        "msgThroughputOut": 2.0e7,
        "consumerCount": 1,
        "producerCount": 1,
        "topics": 1,
        "cacheSize": 0,
    }
    bundle = "public/default/0x00000000_0xffffffff"
    return {
        "webServiceUrl": f"http://127.0.0.1:{port}",
        "pulsarServiceUrl": "pulsar://127.0.0.1:6650",
        "persistentTopicsEnabled": True,
        "nonPersistentTopicsEnabled": True,
        "cpu": {"usage": 50.0, "limit": 400.0},
        "memory": {"usage": 100.0, "limit": 1024.0},
        "directMemory": {"usage": 0.0, "limit": 1024.0},
        "bandwidthIn": {"usage": 1.0, "limit": 1.0e7},
        "bandwidthOut": {"usage": 1.0, "limit": 1.0e7},
        "msgThroughputIn": 1.0e7,
        "msgThroughputOut": 2.0e7,
        "msgRateIn": 10.0,
        "msgRateOut": 20.0,
        "lastUpdate": 1_700_000_000_000,
        "lastStats": {bundle: stats},
        "bundleStats": {bundle: stats},
        "numTopics": 1,
        "numBundles": 1,
        "numConsumers": 1,
        "numProducers": 1,
        "bundles": [bundle],
        "lastBundleGains": [],
        "lastBundleLosses": [],
        "brokerVersionString": "2.10.4",
        "protocols": {},
        "advertisedListeners": {},
        "maxResourceUsage": 0.125,
        "loadReportType": "LocalBrokerData",
    }


def pulsar_2(path: str, port: int) -> dict[str, Answer]:
    broker = f"127.0.0.1:{port}"
    return {
        "/admin/v2/clusters": (200, ["standalone"]),
        "/admin/v2/brokers/standalone": (200, [broker]),
        "/admin/v2/broker-stats/load-report": (200, report(port)),
        # BrokersBase.getLeaderBroker before 3.0: BrokerInfo(serviceUrl) only
        "/admin/v2/brokers/leaderBroker": (200, {"serviceUrl": f"http://{broker}"}),
    }


def read(url: str) -> Any:
    reader = AdminReader(url, retry=Retry(attempts=1, timeout_s=5.0))
    try:
        return reader.read()
    finally:
        reader.close()


def test_leader_of_a_pulsar_2_broker_is_its_broker_id() -> None:
    """``BrokerInfo`` before 3.0 has only ``serviceUrl``; the leader is named by its broker id, as the
    broker list names it, not by its URL."""
    with stub_broker(pulsar_2) as url:
        reading = read(url)
    broker = url.removeprefix("http://")
    assert sorted(reading.reports) == [broker]
    assert reading.leader == broker


@pytest.mark.parametrize(
    ("info", "shown"),
    [
        ({"serviceUrl": 5}, "serviceUrl: expected the leader's web address as text (got 5)"),
        ({"serviceUrl": ""}, "serviceUrl: expected the leader's web address as text (got '')"),
        (
            {"brokerId": ["b1:8080"], "serviceUrl": "http://b1:8080"},
            "brokerId: expected the leader's broker id",
        ),
        ({}, "neither brokerId nor serviceUrl"),
        ({"url": "http://b1:8080"}, "neither brokerId nor serviceUrl"),
    ],
)
def test_a_leader_document_naming_no_leader_as_text_is_refused(info: dict[str, object], shown: str) -> None:
    """``{"serviceUrl": 5}`` was read as "no leader", silently, as if no election had happened."""
    with pytest.raises(ClusterError) as caught:
        leader_id(info, "zk:2181/loadbalance/leader")
    assert shown in caught.value.message and caught.value.source == "zk:2181/loadbalance/leader"


@pytest.mark.parametrize(
    ("answer", "shown"),
    [
        ((200, None), "the answer is not JSON (got '')"),  # an empty body
        ((200, "null"), "expected a JSON object (BrokerInfo), found null"),
        ((200, ["b1:8080"]), "expected a JSON object (BrokerInfo), found an array (got ['b1:8080'])"),
        ((200, "b1:8080"), "the answer is not JSON (got 'b1:8080')"),  # a bare id, not a JSON string
        (
            (200, "<html><body>Proxy  error</body></html>"),
            "the answer is not JSON (got '<html><body>Proxy error</body></html>')",
        ),
    ],
)
def test_a_leader_answer_that_is_no_json_object_is_refused_naming_it(answer: Answer, shown: str) -> None:
    """It was read as no leader (advise's leader: null), silently, as if no election had happened."""

    def answers(path: str, port: int) -> dict[str, Answer]:
        return {**pulsar_2(path, port), "/admin/v2/brokers/leaderBroker": answer}

    with stub_broker(answers) as url, pytest.raises(ClusterError) as caught:
        read(url)
    assert str(caught.value) == f"GET {url}/admin/v2/brokers/leaderBroker: {shown}"


def test_a_leader_endpoint_that_answers_with_an_http_error_is_no_leader() -> None:
    """404: an older broker without the endpoint, or no leader elected; the leader is informative only."""
    with stub_broker(
        lambda path, port: {**pulsar_2(path, port), "/admin/v2/brokers/leaderBroker": NOT_FOUND}
    ) as url:
        reading = read(url)
    assert reading.leader is None and reading.reports


def test_a_cluster_list_with_a_name_that_is_no_text_is_refused_naming_it() -> None:
    """``["standalone", 5]`` was read as ``["standalone"]``: that cluster was read, silently."""

    def answers(path: str, port: int) -> dict[str, Answer]:
        return {**pulsar_2(path, port), "/admin/v2/clusters": (200, ["standalone", 5])}

    with stub_broker(answers) as url, pytest.raises(ClusterError) as caught:
        read(url)
    assert (
        str(caught.value)
        == f"GET {url}/admin/v2/clusters: expected a list of cluster names (got ['standalone', 5])"
    )


@pytest.mark.parametrize(
    ("listed", "shown"),
    [
        ([""], "an empty cluster name"),
        (["a b"], "cluster 'a b' is not a Pulsar cluster name (ASCII letters, digits, _ - = : . only)"),
    ],
)
def test_a_listed_cluster_name_pulsar_refuses_is_refused_naming_it(listed: list[str], shown: str) -> None:
    """``[""]`` or ``["a b"]`` was the cluster read: collect labelled every line of its recording with it,
    which ingest then quarantined and advise --snapshot refused; ``--cluster`` itself is checked so."""

    def answers(path: str, port: int) -> dict[str, Answer]:
        return {**pulsar_2(path, port), "/admin/v2/clusters": (200, listed)}

    with stub_broker(answers) as url, pytest.raises(ClusterError) as caught:
        read(url)
    assert str(caught.value) == f"GET {url}/admin/v2/clusters: {shown}; name the cluster with --cluster"


@pytest.mark.parametrize("status", [{"is_active": "true"}, {"broker_assignment": "shared"}, True])
def test_an_ownership_status_without_a_boolean_is_active_is_refused_naming_it(status: object) -> None:
    """It was read as the owner unloading the bundle: advise --execute skipped the unload for that reason."""
    bundle = "public/default/0x00000000_0xffffffff"

    def answers(path: str, port: int) -> dict[str, Answer]:
        owned = f"/admin/v2/brokers/standalone/127.0.0.1:{port}/ownedNamespaces"
        return {**pulsar_2(path, port), owned: (200, {bundle: status})}

    with stub_broker(answers) as url:
        reader = AdminReader(url, retry=Retry(attempts=1, timeout_s=5.0))
        try:
            with pytest.raises(ClusterError) as caught:
                reader.bundle_owner(bundle, url.removeprefix("http://"))
        finally:
            reader.close()
    owned = f"GET {url}/admin/v2/brokers/standalone/{url.removeprefix('http://')}/ownedNamespaces"
    assert str(caught.value).startswith(
        f"{owned}: {bundle}: expected its NamespaceOwnershipStatus, an object"
    )
    assert str(caught.value).endswith(f"(got {status!r})")


def test_a_runtime_configuration_that_is_no_json_object_is_refused_naming_it() -> None:
    """Read as one without loadManagerClassName, it let an extensible load manager's cluster through."""
    runtime = [
        "loadManagerClassName",
        "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl",
    ]

    def answers(path: str, port: int) -> dict[str, Answer]:
        return {**pulsar_2(path, port), "/admin/v2/brokers/configuration/runtime": (200, runtime)}

    with stub_broker(answers) as url, pytest.raises(ClusterError) as caught:
        read(url)
    assert str(caught.value).startswith(
        f"GET {url}/admin/v2/brokers/configuration/runtime: expected a JSON object (the runtime "
        "configuration), found an array (got ['loadManagerClassName', "
    )


def test_an_ownership_znode_whose_disabled_is_no_boolean_is_refused() -> None:
    """``"disabled": "true"`` was read as enabled: a bundle its owner was unloading was unloaded again."""
    where = "/namespace/t/ns/0x00000000_0x80000000"
    with pytest.raises(ClusterError) as caught:
        owner_of_ephemeral_data({"httpUrl": "http://b1:8080", "disabled": "true"}, where)
    assert str(caught.value) == f"{where}: disabled: expected true or false (got 'true')"
    assert owner_of_ephemeral_data(
        {"httpUrl": "http://b1:8080"}, where
    ).active  # Pulsar writes it; absent: on


def test_cluster_documents_whose_urls_are_no_urls_are_data_not_tracebacks() -> None:
    """``urlparse`` raises ValueError on an unclosed IPv6 bracket: a leader's ``serviceUrl`` or an
    ownership znode's ``httpUrl`` of ``http://[x`` was a traceback (28 Nov 2026). The leader is named as
    written; an owner needs a URL, so the znode is refused in one line naming it."""
    assert leader_id({"serviceUrl": "http://[x"}, "/loadbalance/leader") == "http://[x"
    assert leader_id({"serviceUrl": "http://b1:8080"}, "/loadbalance/leader") == "b1:8080"
    where = "/namespace/t/ns/0x00000000_0x80000000"
    owner = owner_of_ephemeral_data({"httpUrl": "http://[x", "httpUrlTls": "https://b1:8443"}, where)
    assert owner.owner == "b1:8443" and owner.active
    with pytest.raises(ClusterError) as caught:
        owner_of_ephemeral_data({"httpUrl": "http://[x", "nativeUrl": "pulsar://b1:6650"}, where)
    assert str(caught.value) == (
        f"{where}: NamespaceEphemeralData without a URL in httpUrl or httpUrlTls: no broker id"
    )


def test_brokers_listed_with_ids_that_are_not_host_port_are_missing_not_asked() -> None:
    """``/admin/v2/brokers/{cluster}`` names each broker by its id, of which its web address is made: an
    id ``x/y:1`` was asked as the host ``x`` (with the token), ``not a host`` was retried as a host that
    did not resolve. Each is a missing report saying why; the others are read."""
    odd = ["x/y:1", "not a host", "evil@127.0.0.1:9"]

    def listing(path: str, port: int) -> dict[str, Answer]:
        return {**pulsar_2(path, port), "/admin/v2/brokers/standalone": (200, [f"127.0.0.1:{port}", *odd])}

    with stub_broker(listing) as url:
        reading = read(url)
    assert sorted(reading.reports) == [url.removeprefix("http://")]
    assert sorted(reading.missing) == sorted(odd)
    assert all(why.startswith("not a broker id HOST:PORT") for why in reading.missing.values())


def legacy_report(port: int) -> dict[str, Any]:
    """``LoadReport`` as a broker running ``SimpleLoadManagerImpl`` writes it to
    ``/loadbalance/brokers/<broker>`` and serves it from ``broker-stats/load-report``: its getters put
    ``cpu``…``bandwidthOut`` and ``lastUpdate`` beside ``systemResourceUsage``, its bundles are in
    ``bundleStats``."""
    usage = {"usage": 350.0, "limit": 400.0}
    stats = report(port)["lastStats"]
    return {
        "name": f"127.0.0.1:{port}",
        "brokerVersionString": "2.10.4",
        "webServiceUrl": f"http://127.0.0.1:{port}",
        "pulsarServiceUrl": "pulsar://127.0.0.1:6650",
        "persistentTopicsEnabled": True,
        "nonPersistentTopicsEnabled": True,
        "timestamp": 1_700_000_000_000,
        "msgRateIn": 10.0,
        "msgRateOut": 20.0,
        "numTopics": 1,
        "numConsumers": 1,
        "numProducers": 1,
        "numBundles": 1,
        "protocols": {},
        "systemResourceUsage": {"cpu": usage, "memory": usage, "directMemory": usage},
        "bundleStats": stats,
        "bundleGains": [],
        "bundleLosses": [],
        "allocatedCPU": 0.0,
        "preAllocatedCPU": 0.0,
        "underLoaded": False,
        "overLoaded": True,
        "loadReportType": "LoadReport",
        "cpu": usage,
        "memory": usage,
        "directMemory": usage,
        "lastUpdate": 1_700_000_000_000,
        "msgThroughputIn": 10.0,
        "msgThroughputOut": 20.0,
    }


def test_a_simple_load_manager_report_is_refused_in_one_line() -> None:
    """Read as a LocalBrokerData, the legacy report was a broker at 87.5 % CPU owning no bundle: advise
    decided on a cluster that does not exist. Pulsar's ``LoadReportDeserializer`` tells them apart by
    ``loadReportType``/``underLoaded``; so do the readers now, and say which load manager it is."""

    def simple(path: str, port: int) -> dict[str, Answer]:
        return dict(
            pulsar_2(path, port), **{"/admin/v2/broker-stats/load-report": (200, legacy_report(port))}
        )

    with stub_broker(simple) as url, pytest.raises(ClusterError) as caught:
        read(url)
    text = str(caught.value)
    assert "SimpleLoadManagerImpl" in text and "/admin/v2/broker-stats/load-report" in text
    assert "\n" not in text


def test_an_unload_in_a_v1_namespace_goes_to_the_v1_resource() -> None:
    """A v1 namespace (``tenant/cluster/namespace``) has no v2 resource: ``/admin/v2/namespaces/{tenant}/
    {namespace}/{bundle}/unload`` takes two name segments, and Pulsar answers a five-segment path with 404.
    Pulsar's admin client (``NamespacesImpl.namespacePath``) sends a v1 name to ``/admin/namespaces/
    {property}/{cluster}/{namespace}/{bundle}/unload`` (``v1.Namespaces.unloadNamespaceBundle``, which
    takes ``destinationBroker`` too)."""
    v1 = "/admin/namespaces/prop/us-west/ns1/0x00000000_0x40000000/unload?destinationBroker=b2%3A8080"
    v2 = "/admin/v2/namespaces/public/default/0x00000000_0x40000000/unload?destinationBroker=b2%3A8080"

    def answers(path: str, port: int) -> dict[str, Answer]:
        return {f"PUT {v1}": (204, None), f"PUT {v2}": (204, None)}

    with stub_broker(answers) as url:
        reader = AdminReader(url, retry=Retry(attempts=1, timeout_s=5.0))
        try:
            assert reader.unload("prop/us-west/ns1/0x00000000_0x40000000", "b2:8080") == 204
            assert reader.unload("public/default/0x00000000_0x40000000", "b2:8080") == 204
        finally:
            reader.close()


_UNLOAD = "PUT /admin/v2/namespaces/public/default/0x00000000_0x40000000/unload?destinationBroker=b2%3A8080"


def _refused_unload(status: int, body: str | None) -> tuple[str, str]:
    """The stub broker's URL and the error of an unload it answers with ``status`` and ``body``."""
    with stub_broker(lambda request, port: {_UNLOAD: (status, body)}) as url:
        reader = AdminReader(url, retry=Retry(attempts=1, timeout_s=5.0))
        try:
            with pytest.raises(ClusterError) as caught:
                reader.unload("public/default/0x00000000_0x40000000", "b2:8080")
        finally:
            reader.close()
    return url, str(caught.value)


@pytest.mark.parametrize("status", [302, 300, 304])
def test_an_unload_answered_with_a_redirect_to_nowhere_is_no_unload(status: int) -> None:
    """A 3xx with no ``Location`` (a proxy's ``302``, a ``300``) was taken as the unload's success: the
    bundle was audited ``unloaded`` (status 302), exit 0, and kept in the grace period, though no broker
    had the call."""
    url, error = _refused_unload(status, None)
    assert error == (
        f"{_UNLOAD.replace('PUT /', f'PUT {url}/').partition('?')[0]}: HTTP {status} (a redirect with no "
        "Location to follow)"
    )


def test_an_unload_answered_with_a_page_is_no_unload() -> None:
    """A proxy's sign-in page (HTTP 200, HTML) was taken as the unload's success: audited ``unloaded``, exit
    0, the bundle kept in the grace period; Pulsar answers an unload with 204 and no body."""
    url, error = _refused_unload(200, "<html><body>Sign  in</body></html>")
    assert error == (
        f"PUT {url}/admin/v2/namespaces/public/default/0x00000000_0x40000000/unload: HTTP 200 with a body "
        "that is not JSON, not Pulsar's answer (a proxy's page?): the unload is not known to have reached a "
        "broker (got '<html><body>Sign in</body></html>')"
    )


@pytest.mark.parametrize("late", [False, True], ids=["500", "answer-after-the-timeout"])
def test_an_unload_that_reached_a_broker_is_not_sent_again(late: bool) -> None:
    """An unload whose answer is a 5xx or does not come in time may have been done; it was retried like a
    read, and a second unload moves the bundle again, from its new owner (the destination). It is now one
    try, said as such; an unload that could not be sent at all (no connection) is still retried."""
    path = "PUT /admin/v2/namespaces/public/default/0x00000000_0x40000000/unload?destinationBroker=b2%3A8080"
    sent: list[str] = []

    def answers(request: str, port: int) -> dict[str, Answer]:
        if "/unload" in request:
            sent.append(request)
            if late:
                time.sleep(1.0)
        return {path: (204, None) if late else (500, {"reason": "Failed to unload"})}

    with stub_broker(answers) as url:
        reader = AdminReader(url, retry=Retry(attempts=3, backoff_s=0.0, timeout_s=0.5))
        try:
            with pytest.raises(ClusterError) as caught:
                reader.unload("public/default/0x00000000_0x40000000", "b2:8080")
        finally:
            reader.close()
    assert len(sent) == 1, sent
    text = str(caught.value)
    assert "not retried: the broker may have done it" in text and "after 3 attempts" not in text
    assert ("no whole answer within 0.5 s" if late else "HTTP 500: Failed to unload") in text


def test_an_unload_that_could_not_be_sent_is_retried() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reader = AdminReader(f"http://127.0.0.1:{port}", retry=Retry(attempts=2, backoff_s=0.0, timeout_s=1.0))
    try:
        with pytest.raises(ClusterError, match="unreachable after 2 attempts"):
            reader.unload("public/default/0x00000000_0x40000000", "b2:8080")
    finally:
        reader.close()


def test_a_server_error_is_said_with_pulsars_reason() -> None:
    """Pulsar answers an internal failure with 500 and its ``ErrorData`` body ``{"reason": …}``
    (``RestException``). After the retries the error said ``unreachable`` (the broker had answered) and
    carried httpx's two-line boilerplate instead of the reason."""
    reason = "org.apache.pulsar.metadata.api.MetadataStoreException: session expired"

    def failing(path: str, port: int) -> dict[str, Answer]:
        return dict(pulsar_2(path, port), **{"/admin/v2/brokers/standalone": (500, {"reason": reason})})

    with stub_broker(failing) as url, pytest.raises(ClusterError) as caught:
        reader = AdminReader(url, retry=Retry(attempts=2, backoff_s=0.0, timeout_s=5.0))
        try:
            reader.read()
        finally:
            reader.close()
    text = str(caught.value)
    assert f"HTTP 500: {reason}" in text and "after 2 attempts" in text
    assert "unreachable" not in text and "\n" not in text


def test_the_access_check_needs_the_permission_an_unload_needs() -> None:
    """``ClustersBase.getClusters`` checks no role (any authenticated client gets the list), while an unload
    needs a super-user (``internalUnloadNamespaceBundleAsync`` → ``validateSuperUserAccessAsync``, 401).
    ``check_access`` asked ``/admin/v2/clusters``, so a valid token of an ordinary role passed it and then
    every unload failed; it now asks a super-user endpoint (``BrokersBase.getRuntimeConfiguration``)."""

    def ordinary_role(path: str, port: int) -> dict[str, Answer]:
        refused = (401, {"reason": "This operation requires super-user access"})
        return {
            "/admin/v2/clusters": (200, ["standalone"]),
            "/admin/v2/brokers/configuration/runtime": refused,
            "/admin/v2/brokers/standalone": refused,
        }

    with stub_broker(ordinary_role) as url, pytest.raises(ClusterError, match="HTTP 401"):
        reader = AdminReader(url, retry=Retry(attempts=1, timeout_s=5.0))
        try:
            reader.check_access()
        finally:
            reader.close()


def test_a_report_that_is_not_utf8_is_no_report_not_one_with_replaced_names() -> None:
    """httpx's ``text`` replaced the byte 0xff with U+FFFD: the bundle ``t\\xff/…`` was read (and recorded
    by collect) as ``t\\ufffd/…``, a bundle no broker has, silently; a znode's bytes were refused."""

    def answers(path: str, port: int) -> dict[str, Answer]:
        body = json.dumps(report(port)).encode().replace(b"public/default", b"publ\xffc/default")
        return {**pulsar_2(path, port), "/admin/v2/broker-stats/load-report": (200, body)}

    with stub_broker(answers) as url:
        reading = read(url)
    broker = url.removeprefix("http://")
    assert reading.reports == {}
    assert reading.missing[broker].startswith("the answer is not JSON (not utf-8 text: invalid byte at")
