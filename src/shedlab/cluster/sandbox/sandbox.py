"""The sandbox: a simulated Pulsar cluster behind Pulsar's admin API and the load manager's znodes.

``Sandbox`` drives a :class:`~shedlab.core.sim.kernel.Simulation` one tick at a time, either by hand
(:meth:`Sandbox.advance`, for tests: fast and deterministic) or in wall-clock time ``speed`` times
faster (a background thread, for people and tools). After every tick it brings the outside world up to
date, in Pulsar's order: brokers that stopped lose their ZooKeeper session (their ephemeral report
vanishes) and their web server; brokers that started open both; every broker that wrote its report this
tick (the simulator's §4.3 rule) writes it to ``/loadbalance/brokers/<id>``; the leader's election node
follows the simulator's leader; at the leader's periodic bundle-data write (§4.9) the bundle data and
the brokers' time averages are written.

Deterministic rule: given the seed and the same sequence of ``advance`` calls and admin requests, the
simulation's decisions are identical run to run; wall-clock mode only decides *when* ticks happen.
After the scenario's last tick the simulation stops and the sandbox keeps serving its final state.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
from kazoo.exceptions import ConnectionLoss, SessionExpiredError
from kazoo.handlers.threading import KazooTimeoutError

from shedlab.cluster.readers import zookeeper_hosts
from shedlab.cluster.sandbox.http import AdminServer, stop_servers
from shedlab.cluster.sandbox.views import (
    Names,
    bundle_data,
    bundles_data,
    local_broker_data,
    namespace_ephemeral_data,
    namespaces,
    owned_namespaces,
    persisted_bundle_data,
    runtime_configuration,
    time_average_broker_data,
    topic_names,
    topics_stats,
)
from shedlab.cluster.sandbox.zk import ZooKeeperPublisher, dump, ensure_chroot
from shedlab.cluster.tls import server_context
from shedlab.cluster.zookeeper_server import LocalZooKeeper, ZooKeeperUnavailableError
from shedlab.core.sim.kernel import Simulation
from shedlab.core.sim.scenario import Scenario, load_scenario
from shedlab.errors import InputError, did_you_mean

__all__ = ["Sandbox"]


_MAX_PORT = 65535


def _reserve(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (0: a free port), held until its server takes it: no other
    server of the sandbox (or process) can take the port in between."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = f"cannot listen on {host}:{port}: {exc.strerror}"
        if isinstance(exc, socket.gaierror):  # the address, not the port: it named --port (got 0)
            raise InputError(why, field="--host", value=host) from None
        raise InputError(why, field="--port", value=port) from None
    return sock


def _tls_context(cert: str | Path | None, key: str | Path | None) -> ssl.SSLContext | None:
    """The servers' TLS context from a certificate (chain) and its key, or None for plain HTTP."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if cert is not None else ("--tls-key", "--tls-cert")
        raise InputError(f"needs {missing} too (certificate and private key go together)", field=given)
    return server_context(Path(cert), Path(key))


class Sandbox:
    """``with Sandbox("broker-loss", seed=1) as sb: sb.advance(3); httpx.get(sb.admin_url + …)``.

    ``zookeeper``: ``"auto"`` starts a private ZooKeeper (Debian's package) for the sandbox's lifetime;
    ``"HOST:PORT[/chroot]"`` uses a running one; None publishes no znodes. ``tokens`` maps accepted
    bearer tokens to their role (None: no authentication); ``superuser_roles`` are Pulsar's
    ``superUserRoles``. ``speed``: None or 0 for manual stepping; otherwise simulated seconds per
    wall-clock second. ``port`` 0 picks free ports; a fixed ``port`` P puts the front door on P and
    broker slot k on P + 1 + k. ``tls_cert``/``tls_key`` (PEM files, both or neither): every web server
    speaks HTTPS only, and every address the sandbox gives out (admin URL, brokers, leader, load
    reports' ``webServiceUrl``/``webServiceUrlTls``, redirects) is https://.
    """

    def __init__(
        self,
        scenario: Scenario | str | Path,
        *,
        seed: int | None = None,
        strategy: str | None = None,
        config_overrides: Mapping[str, Any] | None = None,
        speed: float | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        zookeeper: str | None = "auto",
        tokens: Mapping[str, str] | None = None,
        superuser_roles: tuple[str, ...] = ("admin",),
        cluster: str | None = None,
        tls_cert: str | Path | None = None,
        tls_key: str | Path | None = None,
    ) -> None:
        self.tls = _tls_context(tls_cert, tls_key)
        self.scenario = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
        self.simulation = Simulation(
            self.scenario, strategy=strategy, config_overrides=config_overrides, seed=seed
        )
        # the bundle-data znodes carry long-term throughputs, which the simulator alone does not keep
        self.simulation.publishing.leader_data.track_long_throughputs()
        self.cluster = cluster or self.scenario.simulation.cluster
        self.speed = speed or None
        self.host = host
        self.tokens = dict(tokens) if tokens is not None else None
        self.superuser_roles = frozenset(superuser_roles)
        self.lock = threading.RLock()
        self._zookeeper_arg = zookeeper
        self._local_zk: LocalZooKeeper | None = None
        self.zookeeper: str | None = None
        self._zk: ZooKeeperPublisher | None = None
        n_slots = self.simulation.cluster.num_slots
        if port and port + n_slots > _MAX_PORT:  # bind() raised OverflowError, a traceback
            raise InputError(
                f"its {n_slots} broker(s) listen on the ports after it: at most {_MAX_PORT - n_slots}",
                field="--port",
                value=port,
            )
        self._reserved: dict[int | None, socket.socket] = {}
        try:
            self._reserved[None] = _reserve(host, port)
            for s in range(n_slots):
                self._reserved[s] = _reserve(host, port + 1 + s if port else 0)
        except BaseException:
            self._release()
            raise
        self._ports = [int(self._reserved[s].getsockname()[1]) for s in range(n_slots)]
        self._front_port = int(self._reserved[None].getsockname()[1])
        self.scheme = "https" if self.tls is not None else "http"
        self.names = Names(self.simulation.cluster.ids, [f"{host}:{p}" for p in self._ports], self.scheme)
        self._servers: dict[int, AdminServer] = {}
        self._hung: dict[int, socket.socket] = {}  # hung brokers' ports: listening, never accepting
        self._front: AdminServer | None = None
        self._written: dict[int, list[str]] = {}  # bundles of each broker's last written report
        self._started: dict[int, int] = {}  # start time of each running broker (a restart changes it)
        self._namespaces = namespaces(self.simulation)
        self._topics: dict[str, dict[str, list[str]]] | None = None
        self._unloading: dict[str, tuple[int, bool]] = {}  # bundle → its owner unloading it, znode disabled
        self._stop = threading.Event()
        self._runner: threading.Thread | None = None
        self.finished = False  # the scenario's last tick has run
        self.failure: str | None = None  # why the clock stopped early (wall-clock mode), e.g. ZooKeeper lost

    # ------------------------------------------------------------------------------------ life cycle
    def start(self) -> Sandbox:
        try:
            self._start_zookeeper()
            self._front = self._listen(self._front_port, None)
            with self.lock:
                self._step()  # tick 0: the initial brokers start, write their first reports, elect
            if self.speed:
                self._runner = threading.Thread(target=self._run, name="sandbox-clock", daemon=True)
                self._runner.start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_zookeeper(self) -> None:
        arg = self._zookeeper_arg
        if arg is None:
            return
        try:
            if arg == "auto":
                self._local_zk = LocalZooKeeper().start()
                arg = self._local_zk.hosts
            else:  # h:0 was h:2181 to kazoo: the sandbox's brokers written into another ZooKeeper
                arg = zookeeper_hosts(arg)
            self.zookeeper = arg
            ensure_chroot(arg)
            self._zk = ZooKeeperPublisher(arg)
        except ZooKeeperUnavailableError as exc:
            raise InputError(str(exc), field="--zookeeper", value=arg) from None
        except (KazooTimeoutError, ValueError) as exc:
            why = "no ZooKeeper answered" if isinstance(exc, KazooTimeoutError) else str(exc)
            raise InputError(why, field="--zookeeper", value=arg) from None

    def stop(self) -> None:
        """Clock stopped, every broker's web server and session closed (ephemeral znodes gone)."""
        self._stop.set()
        if self._runner is not None:
            self._runner.join(timeout=30)
            self._runner = None
        with self.lock:
            servers = list(self._servers.values()) + ([self._front] if self._front is not None else [])
            stop_servers(servers)
            self._servers.clear()
            self._front = None
            for slot in list(self._hung):
                self._unhang(slot)
            if self._zk is not None:
                self._zk.close()
                self._zk = None
        if self._local_zk is not None:
            self._local_zk.stop()
            self._local_zk = None
        self._release()

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------- stepping
    def advance(self, ticks: int = 1) -> int:
        """Run up to ``ticks`` ticks now; returns how many ran (fewer once the scenario has ended)."""
        done = 0
        for _ in range(ticks):
            with self.lock:
                if not self._step():
                    break
            done += 1
        return done

    def _run(self) -> None:
        """Wall-clock mode: one tick every ``tick / speed`` seconds until stopped or the scenario ends."""
        assert self.speed is not None
        interval = self.simulation.tick_ms / 1000.0 / self.speed
        due = time.monotonic() + interval
        while not self._stop.wait(max(due - time.monotonic(), 0.0)):
            try:
                with self.lock:
                    if not self._step():
                        return
            except Exception as exc:  # the clock thread has no caller: keep the reason for the owner
                why = (
                    f"ZooKeeper {self.zookeeper} stopped answering"
                    if isinstance(exc, KazooTimeoutError | ConnectionLoss | SessionExpiredError)
                    else f"{type(exc).__name__}: {exc}".rstrip(": ")  # kazoo's errors have no message
                )
                self.failure = f"the simulation stopped at {self.now_ms} ms: {why}"
                return
            due += interval

    def _step(self) -> bool:
        sim = self.simulation
        quota_before = sim.publishing.quota_writes
        if not sim.step():
            self.finished = True
            return False
        self._sync(quota_written=sim.publishing.quota_writes != quota_before)
        return True

    def _sync(self, *, quota_written: bool) -> None:
        sim = self.simulation
        cluster = sim.cluster
        alive = {int(s) for s in np.flatnonzero(cluster.alive)}
        restarted = {s for s in alive if s in self._started and self._started[s] != int(cluster.start_ts[s])}
        for slot in sorted((set(self._started) - alive) | restarted):
            self._broker_down(slot)
        for slot in sorted(alive - set(self._started)):
            self._broker_up(slot)
        zk = self._zk
        reports = {}
        for slot in np.flatnonzero(sim.publishing.written).tolist():
            written = self._written.get(slot, [])
            report = local_broker_data(sim, self.names, slot, last_written=written)  # lastUpdate: this write
            self._written[slot] = list(report.bundles)
            reports[self.names.address(slot)] = report.to_json()
        if zk is not None and reports:
            zk.write_reports(reports)
        leader = cluster.leader
        if zk is None:
            return
        self._publish_owners()
        if leader is None:
            zk.elect(None, None)
        else:
            zk.elect(self.names.address(leader), self.names.url(leader))
        if quota_written:
            data = bundle_data(sim)
            persisted = persisted_bundle_data(sim, data)
            zk.write_bundle_data({name: bd.to_json() for name, bd in persisted.items()}, active=data)
            zk.write_time_averages(
                {
                    self.names.address(s): time_average_broker_data(sim, s, data).to_json()
                    for s in sorted(alive)
                    if sim.publishing.has_report[s]
                }
            )
        else:
            has = sim.publishing.leader_data.has
            # a node of a bundle the scenario does not have is an earlier run's, left in this chroot
            gone = {b for b in zk.bundle_nodes if b not in sim.bundle_index or not has[sim.bundle_index[b]]}
            if gone:
                zk.drop_bundles(gone)

    def _publish_owners(self) -> None:
        """Every bundle's ownership znode, from its owner's session (``ZooKeeperPublisher.write_owners``);
        a bundle whose owner is unloading it (:meth:`disable_ownership`) with ``disabled: true``."""
        cluster, names = self.simulation.cluster, self.names
        # a bundle that left its owner otherwise (the leader's own shedding, the owner's loss) is unloaded
        self._unloading = {b: u for b, u in self._unloading.items() if self.owner_slot(b) == u[0]}
        if self._zk is None:
            return
        alive = {int(s) for s in np.flatnonzero(cluster.alive)}
        data = {s: dump(namespace_ephemeral_data(names, s)) for s in alive}
        owners: dict[str, tuple[str, bytes] | None] = {}
        for name, j in self.simulation.bundle_index.items():
            slot = int(cluster.owner[j])
            if slot not in alive:
                owners[name] = None
                continue
            disabled = self._unloading.get(name, (slot, False))[1]
            body = dump(namespace_ephemeral_data(names, slot, disabled=True)) if disabled else data[slot]
            owners[name] = (names.address(slot), body)
        self._zk.write_owners(owners)

    def disable_ownership(self, bundle: str, *, znode: bool = True) -> None:
        """The owner of ``bundle`` starts unloading it and stays in the middle of it until :meth:`release`
        (for tests of clients that meet a bundle being unloaded, e.g. by the leader's shedding or another
        operator). As ``OwnedBundle.handleUnloadRequest`` does before it closes the bundle's topics: the
        bundle is inactive (``ownedNamespaces``: ``is_active: false``), and a second unload is refused
        (500, ``Namespace bundle … is being unloaded``); with ``znode`` its ownership znode's data is
        rewritten with ``disabled: true`` by the owner's session (``OwnershipCache.disableOwnership``, which
        Pulsar's older brokers call there; recent ones disable the bundle in memory only: ``znode=False``).
        The bundle stays with its owner (its load, its reports) meanwhile. Raises :class:`InputError` for an
        unowned bundle."""
        with self.lock:
            slot = self.owner_slot(bundle)
            if slot is None:
                raise InputError("the bundle is unowned: nobody can unload it", field="bundle", value=bundle)
            self._unloading[bundle] = (slot, znode)
            self._publish_owners()

    def unloading(self, bundle: str) -> str | None:
        """Whether ``bundle``'s owner is in the middle of unloading it (:meth:`disable_ownership`): None
        (it is not), ``"znode"`` (its ownership znode says ``disabled``) or ``"memory"`` (only its owner
        knows)."""
        with self.lock:
            self.owner_slot(bundle)  # an unknown bundle is named
            held = self._unloading.get(bundle)
            return None if held is None else "znode" if held[1] else "memory"

    def release(self, bundle: str) -> None:
        """The owner unloads ``bundle`` (``NamespaceService.unloadNamespaceBundle``), or finishes unloading
        it (:meth:`disable_ownership`): the simulation closes it, and its ownership znode goes before the
        unload call returns, as the owner releases its lock."""
        with self.lock:
            self.simulation.request_unload(bundle, None)
            self._publish_owners()

    def _broker_up(self, slot: int) -> None:
        self._unhang(slot)  # a broker restarted by the scenario answers again
        self._started[slot] = int(self.simulation.cluster.start_ts[slot])
        self._written.pop(slot, None)
        if self._zk is not None:
            self._zk.broker_up(self.names.address(slot))
        self._servers[slot] = self._listen(self._ports[slot], slot)

    def _release(self) -> None:
        for sock in self._reserved.values():
            sock.close()
        self._reserved.clear()

    def _listen(self, port: int, slot: int | None) -> AdminServer:
        try:
            return AdminServer(
                (self.host, port), self, slot, self._reserved.pop(slot, None), self.tls
            ).start()
        except OSError as exc:
            what = "the admin port" if slot is None else f"broker {self.simulation.cluster.ids[slot]}'s port"
            raise InputError(f"cannot listen on {what}: {exc.strerror}", field="--port", value=port) from None

    def _broker_down(self, slot: int) -> None:
        self._unhang(slot)
        self._started.pop(slot, None)
        self._written.pop(slot, None)
        server = self._servers.pop(slot, None)
        if server is not None:
            server.stop()
        if self._zk is not None:
            self._zk.broker_down(self.names.address(slot))

    def crash_broker(self, broker: str) -> None:
        """Broker ``broker``'s web server stops (connections refused) while it stays in the cluster.

        What a crashed broker process looks like until its ZooKeeper session expires
        (``zooKeeperSessionTimeoutMillis``, 30 s by default): still listed by ``/brokers``, its znode and
        bundles still there, its admin endpoints unreachable. For tests of clients that must carry on.
        """
        with self.lock:
            self._stop_server(broker)

    def hang_broker(self, broker: str) -> None:
        """Broker ``broker`` stops answering while its port still takes connections; it stays in the
        cluster, as :meth:`crash_broker` leaves it.

        What a broker in a long garbage-collection pause, or with every web thread blocked, looks like: the
        kernel completes each connection (the listening socket's backlog) and takes the request, and no
        answer ever comes. A client waits for its own timeout. For tests of clients' timeouts (a crashed
        broker refuses connections at once, which tests no timeout)."""
        with self.lock:
            slot = self._stop_server(broker)
            hung = _reserve(self.host, self._ports[slot])
            hung.listen(128)  # never accepted: connections wait in the backlog until the client gives up
            self._hung[slot] = hung

    def _stop_server(self, broker: str) -> int:
        """Stop a running broker's web server; its slot."""
        slot = self.names.slot(broker)
        server = None if slot is None else self._servers.pop(slot, None)
        if slot is None or server is None:
            raise InputError("no running broker with this id", field="broker", value=broker)
        server.stop()
        return slot

    def _unhang(self, slot: int) -> None:
        hung = self._hung.pop(slot, None)
        if hung is not None:
            hung.close()

    # -------------------------------------------------------------------------------------- views
    @property
    def admin_url(self) -> str:
        if self._front is None:
            raise InputError("the sandbox is not running: call start() or use it in a with block")
        return f"{self.scheme}://{self.host}:{self._front.port}"

    @property
    def broker_urls(self) -> dict[str, str]:
        """Broker id → web service URL, for the running brokers, in slot order."""
        return {self.names.address(s): self.names.url(s) for s in sorted(self._servers)}

    @property
    def now_ms(self) -> int:
        return self.simulation.now_ms

    def is_alive(self, slot: int) -> bool:
        return bool(self.simulation.cluster.alive[slot])

    def leader_slot(self) -> int | None:
        return self.simulation.cluster.leader

    def active_brokers(self) -> list[str]:
        """``getAvailableBrokers``: the ids of the brokers with a report in ``/loadbalance/brokers``."""
        with self.lock:
            listed = self.simulation.cluster.alive & self.simulation.publishing.has_report
            return [self.names.address(s) for s in np.flatnonzero(listed).tolist()]

    def owner_slot(self, bundle: str) -> int | None:
        j = self.simulation.bundle_index.get(bundle)
        if j is None:
            hint = did_you_mean(bundle, self.simulation.bundle_index)
            raise InputError("no such bundle in the scenario", field="bundle", value=bundle, hint=hint)
        owner = int(self.simulation.cluster.owner[j])
        return None if owner < 0 else owner

    def owner_of(self, bundle: str) -> str | None:
        """The broker id that serves ``bundle`` now (None while its clients reconnect)."""
        with self.lock:
            slot = self.owner_slot(bundle)
            return None if slot is None else self.names.address(slot)

    def namespace_ranges(self, namespace: str) -> list[str] | None:
        return self._namespaces.get(namespace)

    def bundles_data(self, namespace: str) -> dict[str, Any] | None:
        ranges = self._namespaces.get(namespace)
        return None if ranges is None else bundles_data(ranges)

    def load_report(self, slot: int) -> dict[str, Any]:
        report = local_broker_data(
            self.simulation, self.names, slot, last_written=self._written.get(slot, [])
        )
        return report.to_json()

    def topics_stats(self, slot: int) -> dict[str, Any]:
        if self._topics is None:
            counts = self.simulation.pop.topics
            index = self.simulation.bundle_index
            self._topics = {
                ns: topic_names(ns, ranges, [int(counts[index[f"{ns}/{r}"]]) for r in ranges])
                for ns, ranges in self._namespaces.items()
            }
        return topics_stats(self.simulation, slot, self._topics)

    def owned_namespaces(self, slot: int) -> dict[str, dict[str, Any]]:
        return owned_namespaces(self.simulation, slot, self._unloading)

    def runtime_configuration(self) -> dict[str, str]:
        return runtime_configuration(self.simulation, self.cluster)
