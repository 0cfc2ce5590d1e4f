"""One HTTP exchange with a broker, within one deadline and one size: how the admin client reads an answer.

httpx's timeout bounds each phase of an exchange (connecting, each read of the socket), not the
exchange: a server, or a proxy in front of it, that sends its headers or its body a few bytes at a time,
each within the read timeout, held a call for ever, and one that answered just before the timeout and then
stalled held it for twice ``--timeout``. Here a call (:func:`exchange`, and the caller's redirects, which
share its deadline) is bounded by ``--timeout`` as the option says:

* each phase's own timeout is what is left of the deadline when the exchange starts;
* a watchdog (:class:`_Cutoff`) shuts the connection's socket down when the deadline passes, so that a
  read or a write blocked in any phase returns at once; httpx's ``trace`` extension tells it the socket
  when the connection is made, and whether the request has started going out.

A call cut off before its request went out is a :class:`httpx.ConnectTimeout` (it cannot have reached a
broker: an unload is still retried); after, a :class:`httpx.ReadTimeout`. Both are transient: retried.

An answer is read into memory, so its size is capped too (:data:`MAX_BODY_BYTES`): a server or a proxy
answering with gigabytes, or with an endless chunked stream, made shedlab read it all (within the
deadline: as much as the network brought in ``--timeout``, on every retry). A ``Content-Length`` over the
cap is refused before the body is read; otherwise reading stops as soon as the body, as received or as
decoded (``gzip``/``deflate``), passes the cap. Either is one line naming the call and the cap, and is not
retried (the same server would send the same answer). An answer with an error status (4xx, 5xx) is the
exception: its body only words the error, so it is cut at the cap (not read at all when its length is
declared over it) and the call fails or is retried by its status, as any such answer (a 503 from a
proxy with an endless error page was final, and said nothing of the 503).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx

from shedlab.cluster.access import PermanentError

__all__ = ["MAX_BODY_BYTES", "exchange"]

MAX_BODY_BYTES = 128 * 2**20
"""The largest answer read: 128 MiB, received or decoded. The largest answer shedlab reads is a broker's
load report (``GET /admin/v2/broker-stats/load-report``, LocalBrokerData), about 300 bytes a bundle
(its ``lastStats`` entry and its name in ``bundles``; 285 measured on the sandbox's, whose shape is
Pulsar's) and 1 kB besides: a broker with 50,000 bundles (Pulsar's ``loadBalancerBrokerMaxTopics``
default, one topic a bundle: far beyond real brokers) sends about 15 MB, 20 MB with long tenant and
namespace names; an ``ownedNamespaces`` answer is smaller per bundle. The cap is six times that, and
bounds what one call can hold in memory (the brokers read at once hold one answer each). No option:
no real cluster comes near it, and an answer past it is a server or proxy misbehaving."""

_ACCEPT_ENCODING = {"Accept-Encoding": "gzip, deflate"}
"""The encodings asked for, named rather than httpx's default (which grows with installed decoders: a
brotli or zstd bomb decodes to far more per chunk read than deflate's 1,032-fold at most)."""


class _Cutoff:
    """Shuts an exchange's connection down when its deadline passes (a daemon timer: an exit does not
    wait for it). ``sent``: the request had started going out before the deadline."""

    def __init__(self, seconds: float) -> None:
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self.expired = False
        self.sent = False
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Cutoff:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._forget()

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        """httpx's ``trace`` extension (httpcore's events, in the exchange's own thread)."""
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            if isinstance(sock, socket.socket):
                with self._lock:
                    # a descriptor of its own on the same connection: still valid once TLS wraps the
                    # original (which detaches it), and shut down with it
                    self._forget()
                    self._socket = sock.dup()
                    if self.expired:
                        self._cut()
        elif event.endswith(".send_request_headers.started"):
            with self._lock:
                self.sent = self.sent or not self.expired  # expired: the socket is shut, nothing goes out

    def timeout(self, timeout_s: float) -> httpx.TimeoutException:
        """What the cut-off exchange failed with: a timeout, said as such."""
        if self.sent:
            return httpx.ReadTimeout(f"no whole answer within {timeout_s:g} s")
        return httpx.ConnectTimeout(f"no connection within {timeout_s:g} s")

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            self._cut()

    def _forget(self) -> None:
        """Close this watchdog's own descriptor (the connection itself is httpx's to close)."""
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _cut(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):  # already shut by the other side
                self._socket.shutdown(socket.SHUT_RDWR)


def exchange(
    client: httpx.Client,
    method: str,
    url: str,
    params: Mapping[str, str] | None,
    *,
    deadline: float,
    timeout_s: float,
    max_bytes: int = MAX_BODY_BYTES,
) -> httpx.Response:
    """``method url`` answered in full by ``deadline`` (``time.monotonic()``), or a timeout (see the
    module docstring); ``timeout_s`` is the whole call's, for the message. The answer's body is read and
    decoded here: the response returned holds it, with no ``Content-Encoding`` left to apply. A body over
    ``max_bytes``, or that is not what its ``Content-Encoding`` says, is :class:`PermanentError`."""
    left = deadline - time.monotonic()
    if left <= 0:  # a redirect with no time left: this hop was not sent
        raise httpx.ConnectTimeout(f"redirected, with no time left of {timeout_s:g} s")
    with _Cutoff(left) as cutoff:
        try:
            with client.stream(
                method,
                url,
                params=params,
                headers=_ACCEPT_ENCODING,
                timeout=left,
                extensions={"trace": cutoff.trace},
            ) as streamed:
                body = _body(streamed, deadline, timeout_s, max_bytes)
        except (httpx.TransportError, PermanentError):
            if cutoff.expired:
                raise cutoff.timeout(timeout_s) from None
            raise
        if cutoff.expired:  # a body that ends with the connection looks whole when cut
            raise cutoff.timeout(timeout_s)
    return _whole(streamed, body)


def _body(streamed: httpx.Response, deadline: float, timeout_s: float, max_bytes: int) -> bytes:
    """The decoded body, within ``max_bytes`` as received and as decoded. The deadline is checked after
    each chunk too: the watchdog cannot cut a connection whose socket httpx did not tell (a transport of
    another kind)."""
    declared = streamed.headers.get("content-length", "")
    error = streamed.is_error  # its body only words the error: cut at the cap, the status decides
    if declared.isdigit() and int(declared) > max_bytes:
        if error:
            return b""
        raise PermanentError(
            f"the answer is larger than {_cap(max_bytes)} (Content-Length {declared}): not read"
        )
    body = bytearray()
    try:
        for chunk in streamed.iter_bytes():
            body += chunk
            if max(len(body), streamed.num_bytes_downloaded) > max_bytes:
                if error:
                    return bytes(body[:max_bytes])
                raise PermanentError(f"the answer went past {_cap(max_bytes)}: stopped reading there")
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout(f"no whole answer within {timeout_s:g} s", request=streamed.request)
    except httpx.DecodingError as exc:  # not a TransportError: it was a traceback
        encoding = streamed.headers.get("content-encoding", "?")
        raise PermanentError(
            f"the answer is not JSON: HTTP {streamed.status_code} with a body that is not valid "
            f"Content-Encoding {encoding} ({exc})"
        ) from None
    return bytes(body)


def _cap(max_bytes: int) -> str:
    return (
        f"the cap of {max_bytes // 2**20} MiB" if max_bytes % 2**20 == 0 else f"the cap of {max_bytes} bytes"
    )


def _whole(streamed: httpx.Response, body: bytes) -> httpx.Response:
    """A response holding the decoded ``body``, its headers but those of the encoding and framing."""
    headers = httpx.Headers(streamed.headers)
    for name in ("content-encoding", "content-length", "transfer-encoding"):
        headers.pop(name, None)
    return httpx.Response(streamed.status_code, headers=headers, content=body, request=streamed.request)
