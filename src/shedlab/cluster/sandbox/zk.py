"""The modular load manager's znodes, written to a real ZooKeeper as Pulsar's brokers and leader write them.

Paths and contents (Pulsar's classes in brackets; JSON from :mod:`shedlab.model.pulsar`, compact, as
Jackson writes it):

* ``/loadbalance/brokers/<brokerId>``: the broker's LocalBrokerData, **ephemeral**, one ZooKeeper session
  per broker (``ModularLoadManagerImpl.start`` registers it; ``LoadReportUpdaterTask`` →
  ``writeBrokerDataOnZooKeeper`` rewrites it only when ``needBrokerDataUpdate`` says so, spec §4.3). A
  broker that stops closes its session, and ZooKeeper removes the node.
* ``/loadbalance/bundle-data/<tenant>/<namespace>/<range>``: BundleData, written by the leader every
  ``loadBalancerResourceQuotaUpdateIntervalMinutes`` (``LoadResourceQuotaUpdaterTask`` →
  ``writeBundleDataOnZooKeeper``) for its top-k bundles only (``selectTopKBundle``, PIP-354); the leader
  deletes the node of a bundle no report lists any more (``updateBundleData``, spec §4.2).
* ``/loadbalance/broker-time-average/<brokerId>``: TimeAverageBrokerData, empty from the broker itself at
  its start (``ModularLoadManagerImpl.start``), then written by the leader with the bundle data; deleted
  when the broker leaves (``cleanupDeadBrokersData``).
* ``/loadbalance/leader``: LeaderBroker ``{"brokerId", "serviceUrl"}``, ephemeral, created by the leader's
  session (``LeaderElectionService`` with ``ELECTION_ROOT = "/loadbalance/leader"``).
* ``/namespace/<tenant>/<namespace>/<range>``: the bundle's owner, **ephemeral**, created by the owner's
  session (``OwnershipCache`` takes the lock at ``ServiceUnitUtils.path``, data
  ``NamespaceEphemeralData``); its data rewritten with ``disabled: true`` by the same session while the
  owner unloads the bundle (``OwnershipCache.disableOwnership``, held by ``Sandbox.disable_ownership``);
  deleted when the owner releases the bundle (an unload), and gone with the owner's session. An unowned
  bundle (its clients reconnecting) has none.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.interfaces import IAsyncResult

from shedlab.model.pulsar import TimeAverageBrokerData

__all__ = [
    "BROKERS",
    "BUNDLE_DATA",
    "LEADER",
    "OWNERSHIP",
    "TIME_AVERAGE",
    "ZooKeeperPublisher",
    "dump",
    "ensure_chroot",
]

BROKERS = "/loadbalance/brokers"
BUNDLE_DATA = "/loadbalance/bundle-data"
TIME_AVERAGE = "/loadbalance/broker-time-average"
LEADER = "/loadbalance/leader"
OWNERSHIP = "/namespace"

_TIMEOUT_S = 10.0


def dump(obj: Mapping[str, Any]) -> bytes:
    """Compact JSON in UTF-8, as Jackson writes it to the metadata store."""
    return json.dumps(obj, separators=(",", ":")).encode("utf-8")


def ensure_chroot(hosts: str) -> None:
    """Create the chroot of ``HOST:PORT/chroot`` if missing: a chrooted session cannot create its root."""
    at = hosts.find("/")
    if at < 0 or hosts[at:] == "/":
        return
    client = KazooClient(hosts=hosts[:at], timeout=_TIMEOUT_S)
    client.start(timeout=_TIMEOUT_S)
    try:
        client.ensure_path(hosts[at:])
    finally:
        client.stop()
        client.close()


class ZooKeeperPublisher:
    """One session per alive broker (its ephemeral nodes live and die with it) and the leader's writes.

    Every operation is asynchronous with a deadline (``_TIMEOUT_S``): kazoo's blocking calls queue while
    the server is unreachable and would wait for ever; here a lost ZooKeeper raises after the deadline.
    """

    def __init__(self, hosts: str) -> None:
        self.hosts = hosts
        self._sessions: dict[str, KazooClient] = {}
        self._admin = self._connect()
        for path in (BROKERS, BUNDLE_DATA, TIME_AVERAGE):
            _done(self._admin.ensure_path_async(path))
        # ephemeral ownership nodes of an earlier run's sessions not yet expired (a sandbox killed with -9)
        self._delete_tree(OWNERSHIP)
        # What an earlier run left in this chroot (a sandbox stopped, or killed, on the same ZooKeeper):
        # the persistent nodes stay after a stop, as in Pulsar, and creating them again stopped the
        # simulation with NodeExistsError at the leader's first write. A new leader overwrites the bundle
        # data (and deletes, at that write, the nodes of bundles no report lists) and deletes the time
        # averages of brokers that are not alive (cleanupDeadBrokersData): none is, yet.
        self._bundle_nodes: set[str] = set(self._stored_bundles())
        for broker in _children(self._admin, TIME_AVERAGE):
            self._delete(f"{TIME_AVERAGE}/{broker}")
        self._registered: set[str] = set()  # brokers whose ephemeral report node exists
        self._averages: set[str] = set()  # brokers whose time-average node exists
        self._owners: dict[str, tuple[str, bytes]] = {}  # bundle → the broker whose ownership node exists,
        # and the node's data
        self.leader: str | None = None

    def _stored_bundles(self) -> Iterator[str]:
        """``tenant/namespace/range`` of every bundle-data node already in the store."""
        for tenant in _children(self._admin, BUNDLE_DATA):
            for namespace in _children(self._admin, f"{BUNDLE_DATA}/{tenant}"):
                for bundle_range in _children(self._admin, f"{BUNDLE_DATA}/{tenant}/{namespace}"):
                    yield f"{tenant}/{namespace}/{bundle_range}"

    def _connect(self) -> KazooClient:
        client = KazooClient(hosts=self.hosts, timeout=_TIMEOUT_S)
        client.start(timeout=_TIMEOUT_S)
        return client

    def _delete_tree(self, path: str) -> None:
        for child in _children(self._admin, path):
            self._delete_tree(f"{path}/{child}")
        self._delete(path)

    def _delete(self, path: str) -> None:
        with contextlib.suppress(NoNodeError):
            _done(self._admin.delete_async(path))

    # --------------------------------------------------------------------------------- brokers
    def broker_up(self, broker: str) -> None:
        """The broker's session; then, as ``ModularLoadManagerImpl.start`` does after taking its report's
        lock, its own empty TimeAverageBrokerData (all zeros until the leader's next write)."""
        if broker not in self._sessions:
            # a node of the same id from a session not yet expired (an earlier sandbox killed with -9 on the
            # same ports) would make this broker's create fail, and then vanish with its old session
            self._delete(f"{BROKERS}/{broker}")
            self._sessions[broker] = self._connect()
        client = self._sessions[broker]
        path, empty = f"{TIME_AVERAGE}/{broker}", dump(TimeAverageBrokerData().to_json())
        if broker in self._averages:
            _done(client.set_async(path, empty))
        else:
            _done(client.create_async(path, empty))
            self._averages.add(broker)

    def broker_down(self, broker: str) -> None:
        """Close the broker's session: ZooKeeper drops its ephemeral report (and leader node)."""
        client = self._sessions.pop(broker, None)
        self._registered.discard(broker)
        self._owners = {b: od for b, od in self._owners.items() if od[0] != broker}  # gone with its session
        if client is not None:
            _close(client)
        if self.leader == broker:
            self.leader = None
        self._delete(f"{TIME_AVERAGE}/{broker}")  # cleanupDeadBrokersData on the leader
        self._averages.discard(broker)

    def write_reports(self, reports: Mapping[str, Mapping[str, Any]]) -> None:
        """Each broker creates its ephemeral node or replaces its content (writeBrokerDataOnZooKeeper).

        The writes of one tick go out together (one per broker session) and are all waited for before
        the tick ends."""
        pending = []
        for broker, report in reports.items():
            client = self._sessions[broker]
            path = f"{BROKERS}/{broker}"
            if broker in self._registered:
                pending.append(client.set_async(path, dump(report)))
            else:
                pending.append(client.create_async(path, dump(report), ephemeral=True))
                self._registered.add(broker)
        for result in pending:
            _done(result)

    def write_owners(self, owners: Mapping[str, tuple[str, bytes] | None]) -> None:
        """Each bundle's ownership node as ``owners`` says (bundle → its owner's broker id and the node's
        data, NamespaceEphemeralData; None: unowned): a bundle whose owner changed loses its node (the old
        owner releases the lock) and gets one from its new owner's session; a bundle whose owner kept it
        with other data (``disabled`` set or cleared) has its node's data replaced by that same session,
        as ``OwnershipCache.disableOwnership`` updates the lock's value (``ResourceLock.updateValue``)."""
        released = [b for b, (o, _) in self._owners.items() if (now := owners.get(b)) is None or now[0] != o]
        for bundle in released:
            self._delete(f"{OWNERSHIP}/{bundle}")
            del self._owners[bundle]
        taken = {b: od for b, od in owners.items() if od is not None and b not in self._owners}
        rewritten = {b: od for b, od in owners.items() if od is not None and self._owners.get(b, od) != od}
        for parent in sorted({f"{OWNERSHIP}/{b.rsplit('/', 1)[0]}" for b in taken}):
            _done(self._admin.ensure_path_async(parent))
        pending = [
            self._sessions[o].create_async(f"{OWNERSHIP}/{b}", data, ephemeral=True)
            for b, (o, data) in taken.items()
        ] + [self._sessions[o].set_async(f"{OWNERSHIP}/{b}", data) for b, (o, data) in rewritten.items()]
        for result in pending:
            _done(result)
        self._owners.update(taken)
        self._owners.update(rewritten)

    def elect(self, broker: str | None, service_url: str | None) -> None:
        """The leader's ephemeral election node, from the new leader's session."""
        if broker == self.leader:
            return
        self._delete(LEADER)
        self.leader = broker
        if broker is None or service_url is None:
            return
        body = dump({"brokerId": broker, "serviceUrl": service_url})
        _done(self._sessions[broker].create_async(LEADER, body, ephemeral=True))

    # ------------------------------------------------------------------------------------ the leader
    def write_bundle_data(self, data: Mapping[str, Mapping[str, Any]], active: Iterable[str]) -> None:
        """The BundleData the leader persists (writeBundleDataOnZooKeeper: its top-k bundles, ``data``); the
        nodes of bundles no longer ``active`` (in the leader's LoadData) are deleted, those of active bundles
        outside the top k are left as they were, as Pulsar leaves them."""
        if self.leader is None:
            return
        client = self._sessions[self.leader]
        new = [b for b in data if b not in self._bundle_nodes]
        for parent in sorted({f"{BUNDLE_DATA}/{b.rsplit('/', 1)[0]}" for b in new}):
            _done(client.ensure_path_async(parent))
        pending = [
            client.set_async(f"{BUNDLE_DATA}/{bundle}", dump(body))
            if bundle in self._bundle_nodes
            else client.create_async(f"{BUNDLE_DATA}/{bundle}", dump(body))
            for bundle, body in data.items()
        ]
        for result in pending:
            _done(result)
        self._bundle_nodes.update(new)
        self.drop_bundles(self._bundle_nodes - set(active))

    def drop_bundles(self, bundles: Iterable[str]) -> None:
        """The leader deletes the bundle-data of bundles no report lists (updateBundleData)."""
        for bundle in sorted(bundles):
            self._delete(f"{BUNDLE_DATA}/{bundle}")
            self._bundle_nodes.discard(bundle)

    def write_time_averages(self, averages: Mapping[str, Mapping[str, Any]]) -> None:
        """Every broker's TimeAverageBrokerData, written by the leader with the bundle data."""
        if self.leader is None:
            return
        client = self._sessions[self.leader]
        pending = [
            client.set_async(f"{TIME_AVERAGE}/{broker}", dump(body))
            if broker in self._averages
            else client.create_async(f"{TIME_AVERAGE}/{broker}", dump(body))
            for broker, body in averages.items()
        ]
        for result in pending:
            _done(result)
        self._averages.update(averages)

    @property
    def bundle_nodes(self) -> set[str]:
        return set(self._bundle_nodes)

    def close(self) -> None:
        """Every session closed: the ephemeral nodes go; the persistent ones stay, as in Pulsar."""
        for broker in list(self._sessions):
            _close(self._sessions.pop(broker))
        self.leader = None
        _close(self._admin)


def _done(result: IAsyncResult) -> object:
    """The result of an asynchronous kazoo call, or its error; KazooTimeoutError after the deadline."""
    return result.get(timeout=_TIMEOUT_S)


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        children = _done(client.get_children_async(path))
    except NoNodeError:
        return []
    return sorted(str(c) for c in children) if isinstance(children, list) else []


def _close(client: KazooClient) -> None:
    client.stop()
    client.close()
