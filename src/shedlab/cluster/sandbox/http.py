"""Pulsar's admin REST API on loopback: one web server per broker, plus the cluster's front door.

Each simulated broker listens on its own ``127.0.0.1:<port>`` (its broker id, as Pulsar's
``advertisedAddress:webServicePort``), so per-broker endpoints (``broker-stats/load-report``,
``broker-stats/topics``) answer for that broker. The front door (the *admin URL*) stands for a load
balancer in front of the brokers: it answers cluster-wide endpoints and, deterministically, acts as the
current leader (its ``broker-stats`` are the leader's, and it performs an unload in one request where a
broker would redirect; see :func:`unload`).

With a TLS context (``shedlab sandbox --tls-cert/--tls-key``) every server speaks HTTPS only, as a
broker with ``webServicePortTls`` and no ``webServicePort``: each accepted connection does its TLS
handshake in its own request thread (with a deadline), so a client that never completes one holds up
nobody; a handshake the client refuses (it does not trust the certificate) just closes the connection.

Status codes and error bodies follow Pulsar (``{"reason": "..."}``, ``RestException``); each handler
names the Pulsar method it reproduces. Authentication: ``Authorization: Bearer <token>``. A missing or
unknown token gets 401 (``AuthenticationFilter``); a known token whose role is not a super-user also
gets **401**, not 403: ``validateSuperUserAccessAsync`` and ``validateBothSuperuserAndBrokerOperation``
throw ``Status.UNAUTHORIZED`` although the endpoints' ``@ApiResponses`` list 403. Tokens are never
logged (the server logs nothing).
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

if TYPE_CHECKING:
    from shedlab.cluster.sandbox.sandbox import Sandbox

__all__ = ["AdminServer", "Reply", "handle", "stop_servers"]

PREFIX = "/admin/v2"
HANDSHAKE_TIMEOUT_S = 10.0


@dataclass
class Reply:
    status: int
    body: Any = None  # JSON-able; None: no body
    location: str | None = None
    text: str | None = None  # a plain-text body (the authentication filter's)


def _error(status: int, reason: str) -> Reply:
    return Reply(status, {"reason": reason})


class AdminServer(ThreadingHTTPServer):
    """A web server for one broker slot (``slot``) or the front door (``slot is None``)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        sandbox: Sandbox,
        slot: int | None,
        bound: socket.socket | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """``bound``: a socket already bound to ``address`` (a port reserved earlier), used as is;
        ``tls``: a server context (``PROTOCOL_TLS_SERVER``) to speak HTTPS with."""
        super().__init__(address, _Handler, bind_and_activate=bound is None)
        self.tls = tls
        if bound is not None:
            self.socket.close()
            self.socket = bound
            self.server_address = bound.getsockname()
            self.server_activate()
        self.sandbox = sandbox
        self.slot = slot
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> AdminServer:
        name = "sandbox-admin" if self.slot is None else f"sandbox-broker-{self.slot}"
        self._thread = threading.Thread(target=self.serve_forever, name=name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        stop_servers([self])

    def finish_request(self, request: Any, client_address: Any) -> None:
        """In the connection's own thread: the TLS handshake first, when the server speaks TLS."""
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        try:
            secure = self.tls.wrap_socket(request, server_side=True)
        except OSError:  # the client refused our certificate, spoke plain HTTP, or hung up: nothing to serve
            return
        try:
            secure.settimeout(None)
            super().finish_request(secure, client_address)
        finally:
            self.shutdown_request(secure)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that breaks (reset, TLS alert) is the client's business: nothing is printed.
        Anything else is a bug and keeps its traceback."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


def stop_servers(servers: list[AdminServer]) -> None:
    """Stop servers together: each ``shutdown`` waits up to a poll interval (0.5 s), so not one by one."""
    stoppers = [threading.Thread(target=s.shutdown, daemon=True) for s in servers]
    for thread in stoppers:
        thread.start()
    for thread in stoppers:
        thread.join(timeout=10)
    for server in servers:
        server.server_close()
        if server._thread is not None:
            server._thread.join(timeout=10)


class _Handler(BaseHTTPRequestHandler):
    server: AdminServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as two writes: no 40-ms delayed-ACK stall

    def log_message(self, format: str, *args: Any) -> None:
        """Nothing is logged: a request line could carry a token in a query string."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        try:
            reply = handle(
                self.server.sandbox, self.server.slot, method, self.path, self.headers.get("Authorization")
            )
        except Exception as exc:  # a bug in the sandbox must not kill the connection silently
            reply = _error(500, f"{type(exc).__name__}: {exc}")
        self._send(reply)

    def _send(self, reply: Reply) -> None:
        if reply.text is not None:
            payload, kind = reply.text.encode("utf-8"), "text/plain; charset=utf-8"
        elif reply.body is not None:
            payload, kind = json.dumps(reply.body).encode("utf-8"), "application/json"
        else:
            payload, kind = b"", ""
        self.send_response(reply.status)
        if kind:
            self.send_header("Content-Type", kind)
        if reply.location is not None:
            self.send_header("Location", reply.location)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if payload:
            self.wfile.write(payload)


# ------------------------------------------------------------------------------------------------ routing

Route = Callable[["Sandbox", "int | None", list[str], dict[str, str], str], Reply]


def handle(
    sandbox: Sandbox, slot: int | None, method: str, raw_path: str, authorization: str | None
) -> Reply:
    """One request: authentication, then the route; ``slot`` is the receiving broker (None: front door).

    A request target that does not parse as a URI (``http://[x/…``, a request line in absolute form) is
    a 400, as Pulsar's web server (Jetty) refuses a request line it cannot parse before any servlet,
    authentication included, sees it (Jetty's body is an HTML page; here it is ``Bad Request``).
    """
    try:
        split = urlsplit(raw_path)
    except ValueError:
        return Reply(400, text="Bad Request")
    path = split.path.rstrip("/")
    # ClustersBase.getClusters checks no role: any authenticated client may list the clusters
    denied = _authenticate(
        sandbox, authorization, superuser=not (method == "GET" and path == PREFIX + "/clusters")
    )
    if denied is not None:
        return denied
    query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
    if not path.startswith(PREFIX + "/"):
        return _error(404, "HTTP 404 Not Found")
    parts = [unquote(p) for p in path[len(PREFIX) + 1 :].split("/")]
    with sandbox.lock:
        return _route(sandbox, slot, method, parts, query, raw_path)


def _route(
    sandbox: Sandbox, slot: int | None, method: str, parts: list[str], query: dict[str, str], raw_path: str
) -> Reply:
    if method == "GET":
        if parts == ["brokers", "leaderBroker"]:
            return _leader_broker(sandbox)
        if parts == ["brokers", "configuration", "runtime"]:
            return Reply(200, sandbox.runtime_configuration())
        if parts == ["brokers"]:
            return Reply(200, sandbox.active_brokers())
        if parts == ["clusters"]:  # ClustersBase.getClusters: the names of the clusters ("global" left out)
            return Reply(200, [sandbox.cluster])
        if len(parts) == 2 and parts[0] == "brokers":
            return _active_brokers(sandbox, parts[1])
        if len(parts) == 4 and parts[0] == "brokers" and parts[3] == "ownedNamespaces":
            return _owned_namespaces(sandbox, slot, parts[1], parts[2], raw_path)
        if parts == ["broker-stats", "load-report"]:
            return _per_broker(sandbox, slot, sandbox.load_report)
        if parts == ["broker-stats", "topics"]:
            return _per_broker(sandbox, slot, sandbox.topics_stats)
        if len(parts) == 4 and parts[0] == "namespaces" and parts[3] == "bundles":
            return _bundles(sandbox, f"{parts[1]}/{parts[2]}")
    if method == "PUT" and len(parts) == 5 and parts[0] == "namespaces" and parts[4] == "unload":
        return unload(sandbox, slot, f"{parts[1]}/{parts[2]}", parts[3], query, raw_path)
    return _error(404, "HTTP 404 Not Found")


def _authenticate(sandbox: Sandbox, authorization: str | None, *, superuser: bool = True) -> Reply | None:
    """``AuthenticationFilter`` (401 "Authentication required") then, where the endpoint makes it
    (``superuser``), the super-user check (also 401)."""
    tokens = sandbox.tokens
    if tokens is None:
        return None
    token = None
    if authorization is not None and authorization.startswith("Bearer "):
        token = authorization[len("Bearer ") :].strip()
    role = tokens.get(token) if token else None
    if role is None:
        return Reply(401, text="Authentication required")
    if superuser and role not in sandbox.superuser_roles:
        return _error(401, "This operation requires super-user access")
    return None


# ---------------------------------------------------------------------------------------------- endpoints


def _leader_broker(sandbox: Sandbox) -> Reply:
    """``BrokersBase.getLeaderBroker``: BrokerInfo ``{serviceUrl, brokerId}``; 404 without a leader."""
    leader = sandbox.leader_slot()
    if leader is None:
        return _error(404, "Couldn't find leader broker")
    names = sandbox.names
    return Reply(200, {"serviceUrl": names.url(leader), "brokerId": names.address(leader)})


def _active_brokers(sandbox: Sandbox, cluster: str) -> Reply:
    """``BrokersBase.getActiveBrokers``: the broker ids. Without authorization any cluster name is valid
    (Pulsar's own words); with it, another cluster's name is not this cluster's (404)."""
    if sandbox.tokens is not None and cluster != sandbox.cluster:
        return _error(404, f"Cluster does not exist: cluster={cluster}")
    return Reply(200, sandbox.active_brokers())


def _owned_namespaces(sandbox: Sandbox, slot: int | None, cluster: str, broker: str, raw_path: str) -> Reply:
    """``BrokersBase.getOwnedNamespaces``: the cluster checked as for the broker list; then
    ``validateBrokerName``: a request that is not on ``broker`` itself is redirected there (307, same
    path), a name that is not ``host:port`` is refused; on ``broker``, its bundles (``owned_namespaces``)."""
    if sandbox.tokens is not None and cluster != sandbox.cluster:
        return _error(404, f"Cluster does not exist: cluster={cluster}")
    names = sandbox.names
    if slot is None or names.address(slot) != broker:
        host, _, port = broker.rpartition(":")
        if not host or not port.isdigit():
            return _error(412, f"Invalid broker url {broker}")
        return Reply(307, location=f"{names.scheme}://{broker}{urlsplit(raw_path).path}")
    return Reply(200, sandbox.owned_namespaces(slot))


def _per_broker(sandbox: Sandbox, slot: int | None, view: Callable[[int], Any]) -> Reply:
    """``BrokerStatsBase``: the receiving broker's own data (the front door answers as the leader)."""
    target = sandbox.leader_slot() if slot is None else slot
    if target is None:
        return _error(503, "no broker is running")
    return Reply(200, view(target))


def _bundles(sandbox: Sandbox, namespace: str) -> Reply:
    """``NamespacesBase.internalGetBundlesData`` → ``BundlesData``; 404 "Namespace does not exist"."""
    data = sandbox.bundles_data(namespace)
    if data is None:
        return _error(404, "Namespace does not exist")
    return Reply(200, data)


def unload(
    sandbox: Sandbox,
    slot: int | None,
    namespace: str,
    bundle_range: str,
    query: dict[str, str],
    raw_path: str,
) -> Reply:
    """``NamespacesBase.internalUnloadNamespaceBundleAsync`` (v2 ``Namespaces.unloadNamespaceBundle``).

    In Pulsar's order: the destination must be an active broker (else ``NotAllowedException`` → 409); a
    broker that is not the leader redirects (307) to the leader (``validateLeaderBrokerAsync``), which
    sets the one-shot affinity; the namespace must exist (404) and the range be one of its bundles (412);
    an unowned bundle is left alone (204, nothing to unload); a bundle its owner is unloading already
    (``Sandbox.disable_ownership``) is refused (500 ``Namespace bundle … is being unloaded``) by its owner
    and the front door, and by another broker when its znode says ``disabled`` (else that broker redirects
    to the owner, which refuses); a broker that does not own the bundle
    redirects (307) to its owner with ``destinationBroker`` dropped and ``authoritative`` set to whether it
    is the leader; the owner unloads (204). The front door does all of this in one request, as the leader
    owning every bundle.
    """
    names = sandbox.names
    raw_dest = query.get("destinationBroker") or None
    dest_slot: int | None = None
    if raw_dest is not None:
        dest_slot = names.slot(raw_dest)
        if dest_slot is None or not sandbox.is_alive(dest_slot):
            return _error(409, "Not allowed unload namespace bundle to inactive destination broker")
        leader = sandbox.leader_slot()
        if slot is not None and leader is not None and slot != leader:
            return Reply(307, location=_redirect(names.url(leader), raw_path, {"authoritative": "false"}))
    ranges = sandbox.namespace_ranges(namespace)
    if ranges is None:
        return _error(404, "Namespace does not exist")
    if bundle_range not in ranges:
        return _error(412, f"Invalid bundle range: {bundle_range}")
    bundle = f"{namespace}/{bundle_range}"
    if dest_slot is not None:
        sandbox.simulation.set_bundle_affinity(bundle, names.sim_ids[dest_slot])
    owner = sandbox.owner_slot(bundle)
    if owner is None:
        return Reply(204)
    disabled = sandbox.unloading(bundle)
    if disabled and (slot is None or slot == owner or disabled == "znode"):
        # isBundleOwnedByAnyBroker's lookup: the owner answers for itself with selfOwnerInfoDisabled
        # (OwnershipCache.getOwnerAsync), others read the znode; findBrokerServiceUrl's
        # IllegalStateException becomes RestException(e), a 500
        return _error(500, f"Namespace bundle {bundle} is being unloaded")
    if slot is not None and slot != owner:
        authoritative = "true" if slot == sandbox.leader_slot() else "false"  # isLeaderBroker()
        moved = _redirect(
            names.url(owner), raw_path, {"authoritative": authoritative}, drop=("destinationBroker",)
        )
        return Reply(307, location=moved)
    sandbox.release(bundle)
    return Reply(204)


def _redirect(base: str, raw_path: str, replace: dict[str, str], drop: tuple[str, ...] = ()) -> str:
    split = urlsplit(raw_path)
    query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items() if k not in drop}
    query.update(replace)
    return f"{base}{split.path}?{urlencode(query)}"
