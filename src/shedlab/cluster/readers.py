"""Readers of a running Pulsar cluster: ZooKeeper (the leader's own inputs) and the admin REST API.

Both return a :class:`ClusterReading`: every broker's LocalBrokerData as read, the brokers whose report
could not be read (and why), and, from ZooKeeper, the leader's stored bundle histories.
:meth:`ClusterReading.load_data` turns it into Pulsar's ``LoadData`` through the model's one
reader of the formats (:mod:`shedlab.model.pulsar`), so a malformed value is named by its znode path or
URL and its JSON field.

**ZooKeeper** (``--zookeeper HOST:PORT[/chroot]``) — the modular load manager's znodes, as
``ModularLoadManagerImpl`` and ``LoadBalanceResources`` name them:

* ``/loadbalance/brokers/<broker>``: LocalBrokerData, one ephemeral znode per live broker
  (``LoadManager.LOADBALANCE_BROKERS_ROOT``);
* ``/loadbalance/bundle-data/<tenant>/<namespace>/<range>``: BundleData, written by the leader
  (``LoadBalanceResources.BUNDLE_DATA_BASE_PATH``);
* ``/loadbalance/leader``: the elected leader, ``{"serviceUrl": …}``
  (``LeaderElectionService.ELECTION_ROOT``);
* ``/namespace/<tenant>/<namespace>/<range>``: the bundle's owner now, ephemeral, its data
  ``NamespaceEphemeralData`` (``ServiceUnitUtils.path``, the lock ``OwnershipCache`` takes), read only
  just before an unload (:meth:`ZooKeeperReader.bundle_owner`).

**Admin API** (``--admin-url URL``): ``GET /admin/v2/brokers/{cluster}`` lists the live brokers, then each
broker's own ``GET /admin/v2/broker-stats/load-report`` (a per-broker endpoint: it answers for the broker
it is asked on) gives its LocalBrokerData with ``lastStats`` per bundle. What this source lacks, and how it
is made up for: the leader's **bundle histories** (BundleData: 10- and 1000-sample averages) are not served
by any endpoint; each bundle is seeded from its one ``lastStats`` sample, as the leader seeds a bundle it
has never seen (defaults, then one update, so both averages equal the sample); ``--watch`` and ``collect``
then add one sample per cycle, which rebuilds the short-term average after 10 cycles and approaches the
long-term one only slowly. Just before an unload, ``GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces``
on the decision's source says whether it still owns the bundle (:meth:`AdminReader.bundle_owner`).

From either source, the **broker time averages** are aggregated from the bundle averages as the leader does
on every update (``ModularLoadManagerImpl.updateBundleData``: ``TimeAverageBrokerData.reset`` over the
report's bundles). The leader writes them to ``/loadbalance/broker-time-average/<broker>`` but never reads
that znode back, and it lags: written every ``loadBalancerResourceQuotaUpdateIntervalMinutes``, and all
zeros from a broker's start until then; so it is not read. Preallocations and the leader's recently
unloaded bundles are not visible from either source.

Both readers refuse the **extensible load manager** (``ExtensibleLoadManagerImpl``, PIP-192): its brokers
register ``BrokerLookupData`` under ``/loadbalance/brokers`` and elect under
``/loadbalance/extension/leader``; their load data lives in system topics, not in ZooKeeper.
"""

from __future__ import annotations

import json
import logging
import re
import ssl
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import ParseResult, quote, urlparse

import httpx
from kazoo.client import KazooClient
from kazoo.exceptions import (
    ConnectionLoss,
    NoAuthError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.hosts import collect_hosts
from kazoo.interfaces import IAsyncResult

from shedlab.cluster.access import (
    PermanentError,
    Retry,
    RetryableAnswerError,
    Token,
    concurrently,
    retry_after_s,
    scrub,
    with_retries,
)
from shedlab.cluster.exchange import MAX_BODY_BYTES, exchange
from shedlab.cluster.tls import NOT_TLS, UNTRUSTED, client_context, verification_failure
from shedlab.core.partitions import cluster_problem
from shedlab.errors import ClusterError, InputError, redact
from shedlab.model.bundles import parse_range
from shedlab.model.formats import EXTENSIBLE_LOAD_FIELDS, extensible_kind, legacy_load_report
from shedlab.model.json_reader import JsonReader, json_kind
from shedlab.model.pulsar import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    TimeAverageBrokerData,
)

__all__ = [
    "BROKERS_PATH",
    "BUNDLE_DATA_PATH",
    "EXTENSIBLE_LEADER_PATH",
    "LEADER_PATH",
    "LOADBALANCE",
    "OWNERSHIP_PATH",
    "TIME_AVERAGE_PATH",
    "AdminReader",
    "ClusterReading",
    "Ownership",
    "ZooKeeperReader",
    "extensible_marker",
    "zookeeper_hosts",
]

LOADBALANCE = "/loadbalance"
BROKERS_PATH = "/loadbalance/brokers"
BUNDLE_DATA_PATH = "/loadbalance/bundle-data"
TIME_AVERAGE_PATH = "/loadbalance/broker-time-average"
LEADER_PATH = "/loadbalance/leader"
OWNERSHIP_PATH = "/namespace"
"""``ServiceUnitUtils.OWNER_INFO_ROOT``: ``/namespace/<full bundle name>`` is the owner's ephemeral lock."""
EXTENSIBLE_LEADER_PATH = "/loadbalance/extension/leader"
"""``ExtensibleLoadManagerImpl.ELECTION_ROOT``: present only on clusters running the extensible manager."""

_EXTENSIBLE_CLASS = "ExtensibleLoadManager"
_EXTENSIBLE_HINT = (
    "the extensible load manager keeps its load data in system topics, not here; shedlab reads the modular "
    "load manager (ModularLoadManagerImpl) only"
)


def wall_clock_ms() -> int:
    """The time of a read, epoch ms. Readers take another clock (``clock=``) for a simulated cluster whose
    time is not the wall clock's (the sandbox stepped by hand in tests)."""
    return int(time.time() * 1000)


def extensible_marker(obj: Mapping[str, Any]) -> str | None:
    """What in a broker's document says "extensible load manager", or None: ``loadManagerClassName``
    naming ``ExtensibleLoadManagerImpl`` (its lookup data and, on the modular side, a report carry it), or
    the shape of one of its documents (:func:`shedlab.model.formats.extensible_kind`, the one definition)."""
    name = obj.get("loadManagerClassName")
    if isinstance(name, str) and _EXTENSIBLE_CLASS in name:
        return f"loadManagerClassName is {name}"
    kind = extensible_kind(obj)
    if kind is None:
        return None
    evidence = next(
        (k for k in (*EXTENSIBLE_LOAD_FIELDS, "brokerVersion", "topBundlesLoadData") if k in obj), ""
    )
    it_has = f": it has {evidence!r}" if evidence else ""
    return f"a {kind} of the extensible load manager (ExtensibleLoadManagerImpl){it_has}"


def leader_id(info: Mapping[str, Any], where: str) -> str:
    """The leader's broker id from ``/loadbalance/leader`` (``LeaderBroker``) or ``GET
    /admin/v2/brokers/leaderBroker`` (``BrokerInfo``): ``brokerId`` since Pulsar 3.0; before, only
    ``serviceUrl``, the leader's web address ``http(s)://<advertisedAddress>:<port>``, whose host and port
    are its broker id (``lookupServiceAddress``, the name of its ``/loadbalance/brokers`` node).

    A document naming no leader as text (``{"serviceUrl": 5}``, ``{}``) is refused naming ``where``: it
    was read as "no leader", silently, as no election had happened (28 Nov 2026)."""
    for key in ("brokerId", "serviceUrl"):
        value = info.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or not value.strip():
            raise ClusterError(
                f"{key}: expected the leader's {_LEADER_FIELDS[key]} as text (got {value!r})", source=where
            )
        return value if key == "brokerId" else _netloc(value) or value  # not a URL: named as written
    raise ClusterError("neither brokerId nor serviceUrl: no leader named", source=where)


_LEADER_FIELDS = {"brokerId": "broker id", "serviceUrl": "web address"}


def _netloc(url: str) -> str:
    """The host and port of ``url`` as written; "" where it is no URL (``urlparse`` raises ValueError on an
    unclosed IPv6 bracket, ``http://[x``: a cluster's document is data, not a traceback)."""
    try:
        return urlparse(url).netloc
    except ValueError:
        return ""


@dataclass(frozen=True)
class Ownership:
    """Who owns a bundle now, as read just before unloading it: ``owner`` is a broker id (None: nobody,
    or nobody found); ``active`` is False while the owner is unloading it
    (``NamespaceEphemeralData.disabled``, ``NamespaceOwnershipStatus.is_active`` false); ``where`` is what
    was read (a znode or a URL)."""

    owner: str | None
    active: bool
    where: str
    unknown: str = ""  # why the owner could not be told (brokers that did not answer); "": it was


def owner_of_ephemeral_data(obj: Mapping[str, Any], where: str) -> Ownership:
    """The owner named by an ownership znode's ``NamespaceEphemeralData`` (``nativeUrl``, ``nativeUrlTls``,
    ``httpUrl``, ``httpUrlTls``, ``disabled``, ``advertisedListeners``). Its broker id is the host and port
    of ``httpUrl`` (``OwnershipCache`` writes ``getSafeWebServiceAddress()``: the http:// address, else the
    https:// one), else of ``httpUrlTls``, as a broker's id is ``advertisedAddress:webServicePort``; the
    ``nativeUrl`` (the binary protocol's port) cannot name it."""
    disabled = obj.get("disabled", False)
    if not isinstance(disabled, bool):  # "true" was read as enabled: unloaded again while it was leaving
        raise ClusterError("disabled: expected true or false", source=where, value=disabled)
    for key in ("httpUrl", "httpUrlTls"):
        url = obj.get(key)
        broker = _netloc(url) if isinstance(url, str) else ""
        if broker:
            return Ownership(broker, not disabled, where)
    raise ClusterError(
        "NamespaceEphemeralData without a URL in httpUrl or httpUrlTls: no broker id", source=where
    )


@dataclass
class ClusterReading:
    """One read of a cluster: raw documents as served, keyed by broker id or bundle name."""

    source: str
    cluster: str
    time_ms: int
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)  # broker → znode path or URL of its report
    missing: dict[str, str] = field(default_factory=dict)  # broker → why no report was read
    bundle_data: dict[str, dict[str, Any]] = field(default_factory=dict)
    bundle_origin: dict[str, str] = field(default_factory=dict)  # bundle → file:line of its BundleData
    leader: str | None = None

    def local_data(self) -> dict[str, LocalBrokerData]:
        """Every report through the model's reader; errors name the znode/URL and the JSON field."""
        return {
            broker: LocalBrokerData.from_json(JsonReader(raw, self.origin.get(broker, broker)))
            for broker, raw in sorted(self.reports.items())
        }

    def load_data(self, history: dict[str, BundleData] | None = None) -> LoadData:
        """Pulsar's LoadData as the leader would hold it after this read (see the module docstring).

        A bundle with a stored history (``/loadbalance/bundle-data``) takes it as the leader wrote it; any
        other bundle takes its averages from ``history`` (bundle → BundleData, updated in place with this
        read's sample, as the leader's ``updateBundleData`` does), which a caller keeps across reads.
        Broker time averages are aggregated from the bundles', as the leader's ``updateBundleData`` does.
        """
        local = self.local_data()
        # where each stored history came from: its znode (with the ensemble and chroot, as a broker's
        # report is named), or the file and line of a snapshot; not a znode path for a file's line
        bundles = {
            name: BundleData.from_json(
                JsonReader(raw, self.bundle_origin.get(name, f"{self.source}{BUNDLE_DATA_PATH}/{name}"))
            )
            for name, raw in sorted(self.bundle_data.items())
        }
        kept = history if history is not None else {}
        for report in local.values():
            for name, stats in report.lastStats.items():
                if name not in bundles:
                    bundles[name] = update_bundle(kept, name, stats)
        brokers: dict[str, BrokerData] = {}
        for broker, report in local.items():
            # reset over the report's bundles: lastStats' keys in Pulsar, the same set in every report
            # LocalBrokerData.update writes
            average = TimeAverageBrokerData()
            average.reset(report.bundles, bundles)
            brokers[broker] = BrokerData(localData=report, timeAverageData=average)
        return LoadData(brokerData=brokers, bundleData=bundles)

    def records(self) -> list[dict[str, Any]]:
        """The recording format ``shedlab ingest`` reads (docs/spark.md, "Accepted inputs"): one wrapped
        load report per broker, then one BundleData dump per stored bundle history."""
        out: list[dict[str, Any]] = [
            {"timestamp": self.time_ms, "broker": b, "cluster": self.cluster, "report": r}
            for b, r in sorted(self.reports.items())
        ]
        out += [
            {"timestamp": self.time_ms, "cluster": self.cluster, "bundle": name, "data": data}
            for name, data in sorted(self.bundle_data.items())
        ]
        return out


def update_bundle(bundles: dict[str, BundleData], name: str, stats: NamespaceBundleStats) -> BundleData:
    """One sample into a bundle's averages; an unknown bundle starts from Pulsar's defaults, so that the
    first sample replaces them (``numSamples`` 0 → 1), as in the leader's ``updateBundleData``."""
    data = bundles.get(name)
    if data is None:
        data = bundles[name] = BundleData()
    data.update(stats)
    return data


_NOT_JSON = (ValueError, RecursionError)
"""What ``json`` raises for a text that is not JSON (``JSONDecodeError`` and ``UnicodeDecodeError``
are ``ValueError``), or JSON nested deeper than Python's recursion limit (``[[[[…``): a traceback before."""


def _cluster_json(text: str) -> Any:
    """A document the cluster sent, parsed, with the token in none of its strings (:func:`redact`): a
    broker that echoed it back in a 200 answer (as a broker id, a field of its report) had it printed in
    advise's tables and JSON and written into collect's recording and events, where only errors were
    redacted. Raises ``json``'s errors (:data:`_NOT_JSON`)."""
    return json.loads(redact(text))


def _parse(raw: bytes, where: str) -> dict[str, Any]:
    try:
        obj = _cluster_json(raw.decode("utf-8"))
    except _NOT_JSON as exc:
        raise ClusterError(f"not valid JSON ({exc})", source=where) from None
    if not isinstance(obj, dict):
        raise ClusterError(f"expected a JSON object, found {json_kind(obj)}", source=where)
    return obj


def _json_object(doc: Any, what: str, source: str) -> dict[str, Any]:
    """``doc``, an admin answer, if it is a JSON object (``what`` it should be); else refused naming
    ``source`` and what came back, where it was read as an object without any of its fields."""
    if not isinstance(doc, dict):
        kind = json_kind(doc)
        raise ClusterError(f"expected a JSON object ({what}), found {kind}", source=source, value=doc)
    return doc


def _check_report(obj: dict[str, Any], where: str) -> None:
    """Refuse the extensible manager's documents, the simple manager's legacy LoadReport (which has ``cpu``
    and ``lastUpdate`` too, but its bundles in ``bundleStats``: it read as a broker owning nothing) and
    malformed reports at read time (one line each)."""
    marker = extensible_marker(obj)
    if marker is not None:
        raise ClusterError(
            f"this cluster runs the extensible load manager: {marker}", source=where, hint=_EXTENSIBLE_HINT
        )
    if legacy_load_report(obj):
        raise ClusterError(
            "this cluster runs the simple load manager: the report is a legacy LoadReport "
            "(SimpleLoadManagerImpl), not a LocalBrokerData",
            source=where,
            hint="shedlab reads the modular load manager (ModularLoadManagerImpl) only",
        )
    try:
        LocalBrokerData.from_json(JsonReader(obj, where))
    except InputError as exc:
        raise ClusterError(exc.message, source=exc.source, field=exc.field, value=exc.value) from None


# ------------------------------------------------------------------------------------------ ZooKeeper

_ZK_TRANSIENT = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, KazooTimeoutError)

_IN_FLIGHT: Final = 512
"""Requests a reading keeps out on its ZooKeeper session at once (:meth:`ZooKeeperReader._pipelined`):
enough to hide a round trip of a millisecond behind the answers to the window, few enough that a
window's answers (bundle data of up to about 1 KiB each) stay well inside the client's buffers."""

_T = TypeVar("_T")

_NO_AUTH: Final = "ZooKeeper refused access (no auth): a znode whose ACL does not let this session read it"


class _ConnectionFailures(logging.Handler):
    """The last of kazoo's failed connection attempts, which it logs and does not raise."""

    _KINDS = ("Connection dropped: ", "Connection time-out: ", "Cannot resolve ")

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith(self._KINDS):
            self.last = message.removeprefix("Connection dropped: ")


_ZK_HOSTS = "HOST:PORT[,HOST:PORT...][/chroot]"


def zookeeper_hosts(text: str, field: str = "--zookeeper") -> str:
    """A ZooKeeper connection string as kazoo takes it, ``HOST:PORT[,HOST:PORT…][/chroot]``, or
    :class:`InputError`. Pulsar's own form, ``metadataStoreUrl=zk:HOST:PORT…`` (the ``zk:`` scheme selects
    ZKMetadataStore), is taken as an operator copies it from broker.conf. kazoo reads some strings as
    another address, silently: a port 0 as its default 2181, ``http://h:2181`` as the host ``http`` on
    2181 with the chroot ``//h:2181``; and raises a bare ValueError on ``host:port-typo``."""
    hosts = text.removeprefix("zk:")
    if "://" in hosts:
        raise InputError(f"not a URL: a {_ZK_HOSTS} list", field=field, value=text)
    _check_host_part(hosts.partition("/")[0], field, text)  # first: its credentials are never printed
    _check_host_characters(hosts.strip().partition("/")[0], field, text)  # kazoo strips the ends itself
    try:
        host_ports, chroot = collect_hosts(hosts)
    except ValueError as exc:
        raise InputError(f"not a {_ZK_HOSTS} list: {exc}", field=field, value=text) from None
    for host, _ in host_ports:
        _check_host_name(host, field, text)
    if any(re.search(r":0+$", host) for host in hosts.partition("/")[0].split(",")):
        raise InputError(f"port 0 in a {_ZK_HOSTS} list (kazoo reads it as 2181)", field=field, value=text)
    problem = _chroot_problem(chroot or "/")
    if problem:
        raise InputError(f"the chroot {chroot} {problem}", field=field, value=text)
    return hosts


def _check_host_part(host_ports: str, field: str, given: str) -> None:
    """Refuse what kazoo's parser (a URL's, per host) drops from a host list, silently: ``user:pw@``
    (ZooKeeper was read without them, and they were printed in every error and output, as the reading's
    source), a ``?query`` or a ``#fragment``."""
    if "@" in host_ports:
        raise InputError(
            "credentials in a ZooKeeper address are not used (ZooKeeper is read without authentication) "
            "and would be printed in errors",
            field=field,
            value=re.sub(r"[^,]*@", "***@", host_ports),
        )
    if "?" in host_ports or "#" in host_ports:
        raise InputError(f"not a {_ZK_HOSTS} list: no ?query or #fragment", field=field, value=given)


def _check_host_name(host: str, field: str, given: str) -> None:
    """Refuse a host name the resolver cannot take (a label past 63 characters, a name past 253): the
    socket's IDNA encoding raised a UnicodeError, in kazoo's own thread a traceback on stderr before
    the one-line error, and an admin URL's was a line as long as the name. An IP address passes."""
    _check_host_characters(host, field, given)
    try:
        host.encode("idna")
    except UnicodeError:
        raise InputError(
            "not a host name (a label of more than 63 characters, or more than 253 in all)",
            field=field,
            value=given,
        ) from None


def _check_host_characters(hosts: str, field: str, given: str, what: str = "host name") -> None:
    """Refuse a space or a control character in a host, a ZooKeeper list of HOST:PORT or a URL: no host
    name holds one. ``http://broker 1:8080`` was tried ``--retries`` times, then reported unreachable;
    kazoo and ``urlparse`` drop a tab or a newline (``zk\\t1:2181`` connected to ``zk1``,
    ``http://b:80\\n80`` to port 8080) and a space took all of --timeout."""
    if any(c.isspace() or not c.isprintable() for c in hosts):
        raise InputError(f"not a {what} (it holds a space or a control character)", field=field, value=given)


def _chroot_problem(chroot: str) -> str:
    """Why ZooKeeper cannot hold Pulsar's tree under ``chroot`` ("" when it can): ZooKeeper refuses a
    path with an empty, ``.`` or ``..`` node name (``PathUtils.validatePath``), and ``/zookeeper`` is its
    own tree (quotas, the ensemble's config), where the sandbox wrote its brokers, silently (29 Nov 2026)."""
    names = chroot.split("/")[1:]
    if chroot != "/" and any(name in ("", ".", "..") for name in names):
        return "is not a ZooKeeper path (an empty, '.' or '..' node name)"
    if names[0] == "zookeeper":
        return "is ZooKeeper's own tree (/zookeeper holds its quotas and config), not a place for Pulsar's"
    return ""


class ZooKeeperReader:
    """Reads the modular load manager's znodes with kazoo; one session, kept across reads."""

    def __init__(
        self,
        hosts: str,
        *,
        cluster: str | None = None,
        retry: Retry | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.hosts = zookeeper_hosts(hosts)
        self.clock = clock
        self.cluster = cluster or "pulsar"
        # kazoo logs every failed connection attempt; the outcome is reported as one line instead
        logging.getLogger("kazoo").setLevel(logging.CRITICAL)
        self.retry = retry or Retry()
        self._client: KazooClient | None = None

    @property
    def what(self) -> str:
        return f"zookeeper {self.hosts}"

    def _connect(self) -> KazooClient:
        """A session, within ``timeout_s``: one ``start``, in which kazoo itself tries every host of the list
        again and again (its connection retry policy: unlimited, 0.1 s doubling). It is not retried
        ``--retries`` times: that only repeated the same wait, 3 × 10 s and the back-off, 32 s before a
        ZooKeeper that was not running was said to be so. The error names kazoo's last failure (a refused
        connection, a server that does not answer, a host that does not resolve), which kazoo only logs."""
        if self._client is not None:
            return self._client
        failures = _ConnectionFailures()
        # a logger of its own (not the "kazoo" tree: nothing is printed), only for the last failure
        logger = logging.Logger(f"shedlab.zookeeper.{self.hosts}", logging.WARNING)
        logger.addHandler(failures)
        client = KazooClient(hosts=self.hosts, timeout=self.retry.timeout_s, logger=logger)  # hosts checked
        try:
            with warnings.catch_warnings():
                # kazoo warns (two lines on stderr) when the chroot does not exist; read() says so
                warnings.simplefilter("ignore")
                client.start(timeout=self.retry.timeout_s)
        except (ValueError, KazooTimeoutError) as exc:
            client.stop()
            client.close()
            if isinstance(exc, ValueError):  # kazoo refuses a malformed hosts string this way
                raise ClusterError(f"not a HOST:PORT[/chroot] list ({exc})", source=self.what) from None
            last = f" (last attempt: {failures.last})" if failures.last else ""
            raise ClusterError(
                f"no connection within {self.retry.timeout_s:g} s, kazoo retrying all along{last}",
                source=self.what,
                hint="is ZooKeeper running at that address? --timeout gives a slow network longer",
            ) from None
        self._client = client
        return client

    def close(self) -> None:
        if self._client is not None:
            self._client.stop()
            self._client.close()
            self._client = None

    def _call(self, start: Callable[[], IAsyncResult], path: str) -> Any:
        """The answer of one of kazoo's asynchronous requests (``start``), awaited ``timeout_s`` at most.

        kazoo's blocking calls (``client.get``) wait with no limit, and a request made while the client is
        reconnecting (ZooKeeper gone after the first read) is queued until a connection comes back: a
        ``collect`` or an ``advise --watch`` whose ZooKeeper went away hung for ever on its next read."""

        def call() -> Any:
            try:
                return start().get(timeout=self.retry.timeout_s)
            except NoAuthError:
                raise PermanentError(_NO_AUTH) from None
            except KazooTimeoutError:
                raise KazooTimeoutError(f"no answer within {self.retry.timeout_s:g} s") from None

        return with_retries(call, what=f"{self.what}{path}", retry=self.retry, transient=_ZK_TRANSIENT)

    def _get(self, client: KazooClient, path: str) -> bytes | None:
        try:
            data, _stat = self._call(lambda: client.get_async(path), path)
        except NoNodeError:
            return None
        return bytes(data or b"")

    def _children(self, client: KazooClient, path: str) -> list[str]:
        try:
            return sorted(self._call(lambda: client.get_children_async(path), path))
        except NoNodeError:
            return []

    def _get_many(self, client: KazooClient, paths: Sequence[str]) -> list[bytes | None]:
        """:meth:`_get` of every path, in their order, asked ``_IN_FLIGHT`` at a time (:meth:`_pipelined`)."""
        return self._pipelined(
            paths, client.get_async, lambda answer: bytes(answer[0] or b""), partial(self._get, client), None
        )

    def _children_many(self, client: KazooClient, paths: Sequence[str]) -> list[list[str]]:
        """:meth:`_children` of every path, in their order, asked ``_IN_FLIGHT`` at a time."""
        return self._pipelined(paths, client.get_children_async, sorted, partial(self._children, client), [])

    def _pipelined(
        self,
        paths: Sequence[str],
        ask: Callable[[str], IAsyncResult],
        answer: Callable[[Any], _T],
        alone: Callable[[str], _T],
        missing: _T,
    ) -> list[_T]:
        """Each path's answer, its requests pipelined on the session: ``_IN_FLIGHT`` asked before the first
        answer is awaited, so a reading costs about one round trip per window, not one per znode (a
        cluster of 100,000 bundles has as many bundle-data znodes; ``bench/bench_zookeeper_read.py``).

        ZooKeeper answers a session's requests in the order they were sent, so waiting for them in that
        order loses nothing. A request that fails on the connection (lost, timed out) is asked again
        alone, with :meth:`_call`'s timeout and retries; that call raises when ZooKeeper is gone, so a
        reading ends within one request's retries, not one per znode still in flight."""
        out: list[_T] = []
        for start in range(0, len(paths), _IN_FLIGHT):
            window = paths[start : start + _IN_FLIGHT]
            for path, pending in [(path, ask(path)) for path in window]:
                try:
                    out.append(answer(pending.get(timeout=self.retry.timeout_s)))
                except NoNodeError:
                    out.append(missing)
                except NoAuthError:  # outside _call's retries: a PermanentError here was a traceback
                    raise ClusterError(_NO_AUTH, source=f"{self.what}{path}") from None
                except _ZK_TRANSIENT:
                    out.append(alone(path))
        return out

    def bundle_owner(self, bundle: str) -> Ownership:
        """The owner of ``bundle`` now, from its ownership znode ``/namespace/<bundle>``
        (:func:`owner_of_ephemeral_data`); no znode: unowned. Raises :class:`ClusterError` when it cannot be
        read (the caller does not unload then)."""
        client = self._connect()
        path = f"{OWNERSHIP_PATH}/{bundle}"
        where = f"{self.what}{path}"
        raw = self._get(client, path)
        if raw is None:
            return Ownership(None, False, where)
        return owner_of_ephemeral_data(_parse(raw, where), where)

    def read(self) -> ClusterReading:
        client = self._connect()
        now = self.clock()
        where = self.what
        if self._call(lambda: client.exists_async(LOADBALANCE), LOADBALANCE) is None:
            if client.chroot and self._call(lambda: client.exists_async("/"), "/") is None:
                raise ClusterError(
                    f"the chroot {client.chroot} does not exist: no Pulsar cluster keeps its metadata there",
                    source=where,
                    hint="check the path after HOST:PORT",
                )
            raise ClusterError(
                "no /loadbalance znode: not a Pulsar metadata store, or the wrong chroot", source=where
            )
        extensible = self._call(lambda: client.exists_async(EXTENSIBLE_LEADER_PATH), EXTENSIBLE_LEADER_PATH)
        if extensible is not None:
            raise ClusterError(
                f"this cluster runs the extensible load manager: {EXTENSIBLE_LEADER_PATH} exists",
                source=where,
                hint=_EXTENSIBLE_HINT,
            )
        if self._call(lambda: client.exists_async(BROKERS_PATH), BROKERS_PATH) is None:
            raise ClusterError(
                f"no {BROKERS_PATH} znode: no broker has registered a load report", source=where
            )
        reading = ClusterReading(source=where, cluster=self.cluster, time_ms=now)
        brokers = []
        for broker in self._children(client, BROKERS_PATH):  # as the admin reader: ids the unloads name
            problem = _broker_id_problem(broker)
            if problem is None:
                brokers.append(broker)
            else:
                reading.missing[broker] = problem
        paths = [f"{BROKERS_PATH}/{broker}" for broker in brokers]
        for broker, path, raw in zip(brokers, paths, self._get_many(client, paths), strict=True):
            if raw is None:  # the ephemeral node vanished between the listing and the read
                reading.missing[broker] = "its znode vanished (broker session ended)"
                continue
            if not raw.strip():
                reading.missing[broker] = "its znode is empty (no report written yet)"
                continue
            obj = _parse(raw, f"{where}{path}")
            _check_report(obj, f"{where}{path}")
            reading.reports[broker] = obj
            reading.origin[broker] = f"{where}{path}"
        names = self._bundle_names(client)
        for name, raw in zip(
            names, self._get_many(client, [f"{BUNDLE_DATA_PATH}/{n}" for n in names]), strict=True
        ):
            if raw:
                reading.bundle_data[name] = _parse(raw, f"{where}{BUNDLE_DATA_PATH}/{name}")
        leader = self._get(client, LEADER_PATH)
        if leader:
            reading.leader = leader_id(_parse(leader, f"{where}{LEADER_PATH}"), f"{where}{LEADER_PATH}")
        return reading

    def _bundle_names(self, client: KazooClient) -> list[str]:
        """The full names of the bundles under ``/loadbalance/bundle-data``: the node of a bundle is its full
        name under that root (``BundleDataResources.getBundleDataPath``), so a v2 namespace's bundles
        (``tenant/namespace``) are three levels down and a v1 namespace's (``tenant/cluster/namespace``,
        among them every broker's heartbeat namespace ``pulsar/<cluster>/<host>:<port>``) four. A node at
        the third level whose name is not a bundle range (``0x%08x_0x%08x``) is a v1 namespace.

        A v1 namespace's node holds no data (the store creates parents empty) and one whose bundles were
        all deleted has no children, so it is passed over; a node that is neither (``t/ns/zzz`` holding
        data, ``t/c/ns/zzz`` under a namespace) is refused naming it, where the first was read as a
        namespace without bundles and the second as a bundle, silently (29 Nov 2026)."""
        level = self._children(client, BUNDLE_DATA_PATH)  # tenants
        for _ in range(2):  # then tenant/namespace (v2) or tenant/cluster (v1), then one level further
            below = self._children_many(client, [f"{BUNDLE_DATA_PATH}/{name}" for name in level])
            level = [
                f"{name}/{child}" for name, children in zip(level, below, strict=True) for child in children
            ]
        v1 = [name for name in level if parse_range(name.rpartition("/")[2]) is None]
        ranges = dict(
            zip(v1, self._children_many(client, [f"{BUNDLE_DATA_PATH}/{n}" for n in v1]), strict=True)
        )
        childless = [name for name in v1 if not ranges[name]]
        held = self._get_many(client, [f"{BUNDLE_DATA_PATH}/{n}" for n in childless])
        strays = [name for name, raw in zip(childless, held, strict=True) if raw and raw.strip()]
        strays += [f"{n}/{r}" for n in v1 for r in ranges[n] if parse_range(r) is None]
        if strays:
            raise ClusterError(
                f"{BUNDLE_DATA_PATH}/{strays[0]} is not a bundle's node: its name is no bundle range "
                "(0x%08x_0x%08x) under tenant/namespace or tenant/cluster/namespace",
                source=self.what,
                hint="Pulsar never reads it; remove the node, or give the chroot of a Pulsar cluster",
            )
        names: list[str] = []
        for name in level:
            names += [f"{name}/{r}" for r in ranges[name]] if name in ranges else [name]
        return names


# ------------------------------------------------------------------------------------------ admin API

_HTTP_TRANSIENT = (httpx.TransportError,)


_TLS_HINT = "give the CA certificate that signed the brokers' certificates with --tls-ca"


_BROKER_ID = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[^\s/?#@\[\]:]+):([0-9]{1,5})")
"""A broker id, ``advertisedAddress:webServicePort``: a host name or address (an IPv6 one in brackets)
and a port, nothing that a URL reads as a path, a query, a fragment or credentials."""


def _broker_id_problem(broker: str) -> str | None:
    """Why ``broker`` (a broker id the cluster listed) cannot name a broker's web address, or None. The
    address is ``scheme://<id>``: an id ``x/y:1`` sent the call, and the token, to the host ``x``, one
    ``a@b:1`` to ``b``, and ``not a host`` was retried as a host that did not resolve."""
    match = _BROKER_ID.fullmatch(broker)
    if match is None or not 0 < int(match.group(1)) <= 65535:
        return "not a broker id HOST:PORT, which a broker's web address is made of: not read"
    return None


def _admin_url(url: str) -> ParseResult:
    """``--admin-url`` parsed, or refused in one line: a broker's web address, http:// or https://, with a
    host and a port that are one (``urlparse`` raises ValueError on ``http://[x``, ``.port`` on
    ``http://b:abc``; httpx would raise its own on the first request), no credentials (they would be
    printed in every error: refused before anything else prints the URL, wherever an ``@`` is) and no
    query."""
    scheme, has_scheme, _ = url.partition("://")
    if "@" in url:  # user:password@, scheme or not; a password may hold a / (a web address has no @)
        host = re.split(r"[/?#]", url.rpartition("@")[2], maxsplit=1)[0]
        raise InputError(
            "credentials in the URL are refused (they would be printed in errors); give a token with"
            " --token-file or --token-env",
            field="--admin-url",
            value=f"{scheme}://***@{host}" if has_scheme else f"***@{host}",
        )
    try:
        parsed = urlparse(url)
        parsed.port  # noqa: B018 (its check is the point: ValueError on a port that is none)
    except ValueError as exc:
        raise InputError(f"not a URL ({exc})", field="--admin-url", value=url) from None
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise InputError("expected an http:// or https:// URL naming a host", field="--admin-url", value=url)
    _check_host_name(parsed.hostname, "--admin-url", url)
    if parsed.port == 0:  # no broker listens there: every call failed as 'unreachable', retried
        raise InputError("port 0 is no broker's port", field="--admin-url", value=url)
    if parsed.query or parsed.fragment or parsed.params or url.rstrip().endswith(("?", "#", ";")):
        # a query was glued to every path: http://b:8080/?token=…/admin/v2/clusters, printed as it is
        # (and ;parameters the same way: http://b:8080/;token=…/admin/v2/clusters)
        raise InputError(
            "a broker's web address has no ?query, #fragment or ;parameters (a token goes in --token-file)",
            field="--admin-url",
            value=f"{parsed.scheme}://{parsed.netloc}{parsed.path}?…",
        )
    _check_host_characters(url.strip(), "--admin-url", url, "URL")  # shown: no credentials, no query
    return parsed


def _refused(exc: ClusterError) -> bool:
    """The token or the TLS trust was refused: every other path would answer the same, so stop here."""
    return any(mark in exc.message for mark in ("HTTP 401", "HTTP 403", UNTRUSTED, NOT_TLS))


_NOT_JSON_ANSWER: Final = "the answer is not JSON"
_SHOWN_BODY: Final = 160
"""Characters of an answer's body an error shows (as :func:`_reason` shows an error page's)."""


def _answered(exc: ClusterError) -> bool:
    """The broker answered, with an error (a 4xx such as 404 on a broker without the endpoint) or with
    something that is not JSON, and did not refuse us; not a host that could not be reached. Such an
    answer lets a caller fall back to another endpoint; anything else is the caller's error."""
    return exc.message.startswith(("HTTP ", _NOT_JSON_ANSWER)) and not _refused(exc)


_NOT_RETRIED = "not retried: the broker may have done it (check the bundle's owner)"
_REDIRECTS = (301, 302, 303, 307, 308)
_MAX_REDIRECTS = 5


def _reason(response: httpx.Response, token: Token | None) -> str:
    """Pulsar's ``ErrorData`` reason (``{"reason": …}``, what ``RestException`` sends), else the start of
    the body (an HTML error page of Jetty's), on one line and without the token. The token goes before
    the body is cut: cut first, a token echoed across the cut lost its end, and the start of it was
    printed (no longer the whole token, so not replaced)."""
    try:
        body = response.json()
        reason = body.get("reason") if isinstance(body, dict) else None
    except _NOT_JSON:
        reason = None
    text = " ".join(scrub(str(reason) if reason else response.text, token).split())
    return text if reason else text[:_SHOWN_BODY]


def _start(response: httpx.Response) -> str:
    """The start of an answer's body, on one line and without the token, for an error that shows it."""
    return " ".join(redact(response.text).split())[:_SHOWN_BODY]


def _check_unload_answer(response: httpx.Response, where: str) -> None:
    """Refuse a successful answer to an unload that is no broker's: Pulsar answers 204 with no body
    (``ErrorData`` JSON only with an error status), and a page (a proxy's sign-in page, after a redirect
    there) was taken as the unload's success: audited ``unloaded``, the bundle kept in the grace period."""
    if not response.content.strip():
        return
    try:
        _cluster_json(response.content.decode("utf-8"))
    except _NOT_JSON:
        raise ClusterError(
            f"HTTP {response.status_code} with a body that is not JSON, not Pulsar's answer (a proxy's "
            "page?): the unload is not known to have reached a broker",
            source=where,
            value=_start(response),
        ) from None


def _is_active(status: Any, bundle: str, where: str) -> bool:
    """``NamespaceOwnershipStatus.is_active`` of ``bundle``: false while the owner is unloading it. A status
    that is no object with a boolean ``is_active`` is refused naming ``where`` (the ownedNamespaces URL):
    it was read as an owner unloading the bundle, and the unload skipped for that reason, silently."""
    active = status.get("is_active") if isinstance(status, dict) else None
    if not isinstance(active, bool):
        raise ClusterError(
            "expected its NamespaceOwnershipStatus, an object with is_active true or false",
            source=where,
            field=bundle,
            value=status,
        )
    return active


def _raise_for(response: httpx.Response, token: Token | None) -> None:
    status = response.status_code
    if status in (401, 403) and token is None:  # "the token was refused" sent a first try hunting a bad token
        raise PermanentError(
            f"HTTP {status} {'Unauthorized' if status == 401 else 'Forbidden'}: the cluster needs a token;"
            " give one with --token-file or --token-env"
        )
    if status in (401, 403):
        meaning = "Unauthorized: the token was refused" if status == 401 else "Forbidden: no permission"
        raise PermanentError(f"HTTP {status} {meaning} (check --token-file/--token-env)")
    if 300 <= status < 400:  # not followed (no Location; 300, 304): an unload so answered was "unloaded"
        raise PermanentError(f"{_status_line(response, token)} (a redirect with no Location to follow)")
    if 400 <= status < 500 and status not in (408, 429):
        raise PermanentError(_status_line(response, token))
    if status >= 400:  # 5xx, 408, 429: retried; the broker answered, with its reason
        wait = retry_after_s(response.headers.get("Retry-After")) if status in (429, 503) else None
        raise RetryableAnswerError(_status_line(response, token), wait)


def _status_line(response: httpx.Response, token: Token | None) -> str:
    """``HTTP <status>: <reason>``, or ``HTTP <status>`` alone when the answer gives none (an empty body,
    or one not read: over the size cap, :mod:`shedlab.cluster.exchange`)."""
    reason = _reason(response, token)
    return f"HTTP {response.status_code}: {reason}" if reason else f"HTTP {response.status_code}"


class AdminReader:
    """Reads every broker's load report through Pulsar's admin REST API (httpx)."""

    def __init__(
        self,
        url: str,
        *,
        cluster: str | None = None,
        token: Token | None = None,
        tls_ca: Path | None = None,
        retry: Retry | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self.clock = clock
        self.max_body_bytes = max_body_bytes  # the largest answer read (tests make it small)
        parsed = _admin_url(url)
        # the broker's web address, as Pulsar's admin client takes it: a URL copied with the REST prefix
        # (http://broker:8080/admin/v2) would double it on every path
        self.url = re.sub(r"/admin(/v2)?$", "", url.rstrip("/"))
        self.scheme = parsed.scheme
        self.cluster = cluster
        self.token = token
        self.retry = retry or Retry()
        headers = token.header() if token is not None else {}
        if tls_ca is not None and parsed.scheme != "https":  # ignored, silently: nothing is verified
            raise InputError(
                "is used only with an https:// admin URL: this one is plain http://, nothing is verified",
                field="--tls-ca",
                value=str(tls_ca),
            )
        self.tls_ca = tls_ca
        self._runtime_doc: dict[str, Any] | None = None
        self._manager_checked = False
        verify: ssl.SSLContext | bool = True if tls_ca is None else client_context(tls_ca)
        # No keep-alive: a read every minute gains nothing from pooled connections, and a pooled one can
        # outlive its broker's listener (a stopped or restarted broker would still seem to answer).
        self._client = httpx.Client(
            headers=headers,
            timeout=self.retry.timeout_s,
            verify=verify,
            limits=httpx.Limits(max_keepalive_connections=0),
        )

    def close(self) -> None:
        self._client.close()

    def request(
        self, method: str, url: str, *, params: dict[str, str] | None = None, once_sent: bool = False
    ) -> httpx.Response:
        """One call with the token, timeout and retries; raises :class:`ClusterError` naming the URL.

        Each attempt, its redirects included, is whole within ``timeout_s`` (``--timeout``), however slowly
        the server answers (:mod:`shedlab.cluster.exchange`).

        Redirects are followed here, keeping the token, as Pulsar's admin client does: a broker redirects
        an unload to the leader and then to the bundle's owner (httpx would drop the ``Authorization``
        header on a redirect to another host:port). Only to the same scheme, at most 5 hops.

        ``once_sent``: an action, retried only while it cannot have reached a broker (no connection);
        once sent, a failure (no answer in time, the connection cut, a 5xx) is final, because the broker
        may have acted: a second unload would move the bundle again, from its new owner.
        """

        def call() -> httpx.Response:
            target, query = url, params
            deadline = time.monotonic() + self.retry.timeout_s  # the redirects' too: one call
            for _hop in range(_MAX_REDIRECTS + 1):
                response = self._hop(method, target, query, deadline, redirected=target != url)
                if response.status_code not in _REDIRECTS or "location" not in response.headers:
                    _raise_for(response, self.token)
                    return response
                target, query = self._redirect_target(response), None
            raise PermanentError(f"more than {_MAX_REDIRECTS} redirects")

        def call_once_sent() -> httpx.Response:
            try:
                return call()
            except (httpx.ConnectError, httpx.ConnectTimeout):
                raise  # not sent: retried
            except RetryableAnswerError as exc:
                raise PermanentError(f"{exc.message}; {_NOT_RETRIED}") from None
            except httpx.TransportError as exc:
                raise PermanentError(f"{str(exc) or type(exc).__name__}; {_NOT_RETRIED}") from None

        return with_retries(
            call_once_sent if once_sent else call,
            what=f"{method} {url}",
            retry=self.retry,
            transient=_HTTP_TRANSIENT,
            token=self.token,
        )

    def _hop(
        self, method: str, url: str, params: dict[str, str] | None, deadline: float, *, redirected: bool
    ) -> httpx.Response:
        """One exchange of a call. A broker's ``Location`` that is not a URL is permanent (the same broker
        redirects the same way again; it was retried and reported as unreachable); a failure on a
        redirected hop names the hop, or the message sent the operator to check ``--admin-url``."""
        try:
            return self._send(method, url, params, deadline)
        except httpx.RemoteProtocolError as exc:
            if "location header" in str(exc):  # httpx builds the next request of every redirect
                raise PermanentError(f"a broker redirected to an invalid location ({exc})") from None
            raise
        except httpx.TransportError as exc:
            if redirected:
                raise type(exc)(f"{str(exc) or type(exc).__name__} (redirected to {url})") from None
            raise

    def _redirect_target(self, response: httpx.Response) -> str:
        """Where a redirect goes: same scheme only, a URL naming a host, and none with credentials: a
        ``Location`` of ``http://user:password@b2:8080/…`` was printed as it is in the hop's errors, the
        advise output and collect's events, and httpx sent its ``user:password`` (Basic) to that host in
        place of the token."""
        location = response.headers["location"]
        target = response.url.join(location)
        if target.userinfo:
            shown = str(target.copy_with(username=None, password=None)).replace("://", "://***@", 1)
            raise PermanentError(
                f"a broker redirected to a URL with credentials in it ({shown}): not followed"
            )
        if target.scheme != self.scheme:
            raise PermanentError(f"refused a redirect to another scheme: {target}")
        if not target.host:
            raise PermanentError(f"a broker redirected to {location!r}, which names no host")
        return str(target)

    def _send(self, method: str, url: str, params: dict[str, str] | None, deadline: float) -> httpx.Response:
        """One HTTP exchange, whole by ``deadline`` (:func:`~shedlab.cluster.exchange.exchange`); a TLS
        failure no retry can fix (an untrusted certificate) is permanent."""
        try:
            return exchange(
                self._client,
                method,
                url,
                params,
                deadline=deadline,
                timeout_s=self.retry.timeout_s,
                max_bytes=self.max_body_bytes,
            )
        except httpx.InvalidURL as exc:  # a broker id from the cluster's data that makes no URL (b:abc)
            raise PermanentError(f"not a valid URL ({exc})") from None
        except httpx.TransportError as exc:
            failure = verification_failure(exc)
            if failure is None:
                raise
            if failure.startswith(UNTRUSTED):
                failure += "; " + (
                    _TLS_HINT if self.tls_ca is None else f"is it signed by the CA in {self.tls_ca}?"
                )
            raise PermanentError(failure) from None

    def _json(self, url: str) -> Any:
        """The JSON answer of ``GET url``; an answer that is not JSON is refused with its start (a proxy's
        or a load balancer's HTML page says whose it is). Its bytes are decoded strictly (UTF-8, JSON's
        encoding, unless its ``Content-Type`` names a charset), as a znode's are: httpx's ``text`` replaced
        a byte that is none with U+FFFD, and a bundle named ``t\\xff/ns/…`` was advised on and recorded as
        ``t\\ufffd/ns/…``, a bundle no broker has, silently."""
        response = self.request("GET", url)
        try:
            text = response.content.decode(response.encoding or "utf-8")
        except UnicodeDecodeError as exc:
            why = f"{_NOT_JSON_ANSWER} (not {exc.encoding} text: invalid byte at offset {exc.start})"
            raise ClusterError(why, source=f"GET {url}", value=_start(response)) from None
        try:
            return _cluster_json(text)
        except _NOT_JSON:
            raise ClusterError(_NOT_JSON_ANSWER, source=f"GET {url}", value=_start(response)) from None

    def broker_url(self, broker: str) -> str:
        """A broker's own web address from its id ``host:port`` (same scheme as ``--admin-url``); an id
        that is not one is :class:`ClusterError`, nothing asked (:func:`_broker_id_problem`)."""
        problem = _broker_id_problem(broker)
        if problem is not None:
            raise ClusterError(problem, source=f"broker {broker!r}")
        return f"{self.scheme}://{broker}"

    def resolve_cluster(self) -> str:
        """``--cluster``, else the only name ``GET /admin/v2/clusters`` lists, else the answering broker's
        ``clusterName`` (``GET /admin/v2/brokers/configuration/runtime``)."""
        if self.cluster is not None:
            return self.cluster
        url = f"{self.url}/admin/v2/clusters"
        clusters: Any = []
        try:
            clusters = self._json(url)
        except ClusterError as exc:
            # Only an answer (a 4xx such as 404 on a broker without the endpoint, or a body that is not
            # JSON) falls back to the runtime configuration: an unreachable host would be tried again in
            # full there, doubling the wait, and the error would name the second path.
            if not _answered(exc):
                raise
        # a JSON answer of another shape is refused: ["a", 5] was read as ["a"], the cluster a
        if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
            raise ClusterError("expected a list of cluster names", source=f"GET {url}", value=clusters)
        names: list[str] = clusters
        if len(names) != 1:
            runtime = self._runtime()
            name = runtime.get("clusterName")
            if not isinstance(name, str) or not name:
                raise ClusterError(
                    f"cannot tell which cluster to read ({', '.join(names) or 'none listed'})",
                    source=f"GET {url}",
                    hint="name it with --cluster",
                )
            names, url = [name], self._runtime_url
        # as --cluster is checked: a name Pulsar refuses ('', 'a b') labelled every line of collect's
        # recording, which ingest then quarantined and advise --snapshot refused
        problem = cluster_problem(names[0]) if names[0] else "an empty cluster name"
        if problem is not None:
            raise ClusterError(problem, source=f"GET {url}", hint="name the cluster with --cluster")
        self.cluster = names[0]
        return self.cluster

    def check_access(self) -> None:
        """One call that needs what an unload needs, a super-user (``GET
        /admin/v2/brokers/configuration/runtime``, ``validateSuperUserAccess``): an unreachable admin URL, a
        refused token or a role that may not unload is said now, in one line. ``advise --execute`` reading
        from ZooKeeper calls nothing else on the admin URL before its first unload, which then failed with
        401, cycle after cycle under ``--watch``. Not ``/admin/v2/clusters``: ``ClustersBase.getClusters``
        checks no role, so any authenticated token passes it."""
        try:
            self._runtime()
        except ClusterError as exc:
            if not _answered(exc):
                raise

    def runtime_configuration(self) -> tuple[str, dict[str, Any] | None]:
        """Where the admin URL's broker serves its runtime configuration, and the answer (every
        ``ServiceConfiguration`` field as Java prints it); None where the broker answered with an error
        or something not JSON (a broker without the endpoint), so that advise can go on from Pulsar's
        defaults. A host that cannot be reached, or that refuses the token, is the caller's error, as
        for any reading."""
        try:
            return self._runtime_url, self._runtime()
        except ClusterError as exc:
            if not _answered(exc):
                raise
            return self._runtime_url, None

    @property
    def _runtime_url(self) -> str:
        return f"{self.url}/admin/v2/brokers/configuration/runtime"

    def _runtime(self) -> dict[str, Any]:
        """``GET /admin/v2/brokers/configuration/runtime`` of the admin URL's broker, read once. An answer
        that is no JSON object is refused naming it: read as one without ``loadManagerClassName``, it let a
        cluster of the extensible load manager through, silently."""
        if self._runtime_doc is None:
            runtime = self._json(self._runtime_url)
            self._runtime_doc = _json_object(runtime, "the runtime configuration", f"GET {self._runtime_url}")
        return self._runtime_doc

    def _check_load_manager(self) -> None:
        """Refuse a cluster whose brokers run the extensible load manager, by their runtime configuration's
        ``loadManagerClassName``: those brokers serve no load report (``generateLoadReport`` returns null,
        HTTP 204, or throws, 500, by version), so each would only seem not to answer. Once per reader."""
        if self._manager_checked:
            return
        try:
            runtime = self._runtime()
        except ClusterError as exc:
            if not _answered(exc):
                raise
            return  # a broker that does not serve it: the reports' own loadManagerClassName still tells
        self._manager_checked = True
        name = runtime.get("loadManagerClassName")
        if isinstance(name, str) and _EXTENSIBLE_CLASS in name:
            raise ClusterError(
                f"this cluster runs the extensible load manager: loadManagerClassName is {name}",
                source=f"GET {self._runtime_url}",
                hint=_EXTENSIBLE_HINT,
            )

    def read(self) -> ClusterReading:
        cluster = self.resolve_cluster()
        self._check_load_manager()
        now = self.clock()
        list_url = f"{self.url}/admin/v2/brokers/{quote(cluster, safe='')}"
        brokers = self._json(list_url)
        if not isinstance(brokers, list) or not all(isinstance(b, str) for b in brokers):
            raise ClusterError("expected a list of broker ids", source=f"GET {list_url}")
        reading = ClusterReading(source=self.url, cluster=cluster, time_ms=now)
        # every broker asked at once (a few at a time): brokers that hang cost one timeout, not one each;
        # the answers are then taken in the brokers' order, as when they were asked one after another
        urls: dict[str, str] = {}
        for broker in sorted(brokers):
            try:
                urls[broker] = f"{self.broker_url(broker)}/admin/v2/broker-stats/load-report"
            except ClusterError as exc:
                reading.missing[broker] = exc.message
        answers = concurrently([partial(self._json, url) for url in urls.values()])
        for (broker, url), obj in zip(urls.items(), answers, strict=True):
            if isinstance(obj, ClusterError):
                if _refused(obj):
                    raise obj
                reading.missing[broker] = obj.message
                continue
            if not isinstance(obj, dict):
                raise ClusterError("expected a JSON object (LocalBrokerData)", source=f"GET {url}")
            _check_report(obj, f"GET {url}")
            reading.reports[broker] = obj
            reading.origin[broker] = f"GET {url}"
        reading.leader = self._leader()
        return reading

    def _leader(self) -> str | None:
        """``GET /admin/v2/brokers/leaderBroker``'s leader; None when the broker answers with an HTTP error
        (older brokers have no such endpoint; 404 while no leader is elected) or cannot be reached: the
        leader is informative only. An answer that is no JSON object (a proxy's HTML page, ``null``, a
        bare id, a list) is refused naming the URL and what came back: it was read as no leader, silently,
        as if no election had happened."""
        url = f"{self.url}/admin/v2/brokers/leaderBroker"
        try:
            leader = self._json(url)
        except ClusterError as exc:
            if exc.message.startswith(_NOT_JSON_ANSWER):
                raise
            return None
        return leader_id(_json_object(leader, "BrokerInfo", f"GET {url}"), f"GET {url}")

    def owned_bundles(self, broker: str) -> tuple[dict[str, Any], str]:
        """``GET /admin/v2/brokers/{cluster}/{broker}/ownedNamespaces`` on ``broker`` itself
        (``BrokersBase.getOwnedNamespaces``: another broker would redirect there, ``validateBrokerName``):
        its bundles, full name → ``NamespaceOwnershipStatus`` (``broker_assignment``, ``is_controlled``,
        ``is_active``), and the URL read."""
        cluster = quote(self.resolve_cluster(), safe="")
        path = f"/admin/v2/brokers/{cluster}/{quote(broker, safe=':')}/ownedNamespaces"
        url = f"{self.broker_url(broker)}{path}"
        owned = self._json(url)
        if not isinstance(owned, dict):
            raise ClusterError("expected a JSON object (bundle → ownership status)", source=f"GET {url}")
        return owned, f"GET {url}"

    def bundle_owner(self, bundle: str, source: str, others: Iterable[str] = ()) -> Ownership:
        """The owner of ``bundle`` now: ``source`` if its owned bundles list it (``active`` from
        ``is_active``), else the first of ``others`` that lists it, else nobody. No admin endpoint names a
        bundle's owner (a topic lookup would assign an unowned one), so ``others`` are asked only when
        ``source`` no longer owns it, all at once (:func:`~shedlab.cluster.access.concurrently`: brokers
        that hang cost one timeout); those that cannot be read are named in ``unknown`` when no one else
        lists it. A failure to read ``source`` raises :class:`ClusterError` (the caller does not unload)."""
        owned, where = self.owned_bundles(source)
        if bundle in owned:
            return Ownership(source, _is_active(owned[bundle], bundle, where), where)
        asked = [broker for broker in others if broker != source]
        unread: list[str] = []
        for broker, answer in zip(
            asked, concurrently([partial(self.owned_bundles, b) for b in asked]), strict=True
        ):
            if isinstance(answer, ClusterError):
                unread.append(str(answer))
                continue
            theirs, there = answer
            if bundle in theirs:
                return Ownership(broker, _is_active(theirs[bundle], bundle, there), there)
        return Ownership(None, False, where, "; ".join(unread))

    def unload(self, bundle: str, destination: str | None) -> int:
        """``PUT /admin/v2/namespaces/{tenant}/{namespace}/{bundle}/unload?destinationBroker=…``;
        the HTTP status (204 on success). A v1 namespace (``tenant/cluster/namespace``) has no v2 resource:
        its bundles go to ``/admin/namespaces/{property}/{cluster}/{namespace}/{bundle}/unload``
        (``v1.Namespaces.unloadNamespaceBundle``), as Pulsar's admin client sends them
        (``NamespacesImpl.namespacePath`` by ``NamespaceName.isV2``)."""
        namespace, _, bundle_range = bundle.rpartition("/")
        api = "admin/namespaces" if namespace.count("/") == 2 else "admin/v2/namespaces"
        url = f"{self.url}/{api}/{namespace}/{quote(bundle_range, safe='')}/unload"
        params = {"destinationBroker": destination} if destination else None
        response = self.request("PUT", url, params=params, once_sent=True)
        _check_unload_answer(response, f"PUT {url}")
        return response.status_code
