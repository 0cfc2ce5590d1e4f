"""The admin client's timeout bounds a whole exchange, not each read: a server that answers a few bytes
at a time is cut off and retried, and answers that arrive whole (compressed or chunked) read as before."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from shedlab.cluster.access import Retry
from shedlab.cluster.readers import AdminReader
from shedlab.errors import ClusterError

Handler = Callable[[BaseHTTPRequestHandler], None]


@contextmanager
def serving(handler: Handler) -> Iterator[tuple[str, list[int]]]:
    """A web server answering every GET with ``handler``; yields its URL and the count of requests."""
    requests: list[int] = []

    class Answer(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(1)
            handler(self)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()


def _headers(out: BaseHTTPRequestHandler, length: int, status: int = 200, **extra: str) -> None:
    out.send_response(status)
    out.send_header("Content-Type", "application/json")
    out.send_header("Content-Length", str(length))
    for name, value in extra.items():
        out.send_header(name.replace("_", "-"), value)
    out.end_headers()


def trickle(out: BaseHTTPRequestHandler) -> None:
    """A valid JSON answer, one byte every 0.2 s (each read well within the read timeout): 12 s in all."""
    body = json.dumps(["a"] * 12).encode()
    _headers(out, len(body))
    try:
        for i in range(len(body)):
            out.wfile.write(body[i : i + 1])
            out.wfile.flush()
            time.sleep(12 / len(body))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the client gave up: what the test wants


def test_an_answer_that_trickles_in_is_cut_off_at_the_timeout_and_retried() -> None:
    with serving(trickle) as (url, requests):
        reader = AdminReader(url, retry=Retry(attempts=2, backoff_s=0.01, timeout_s=1.0))
        try:
            with pytest.raises(ClusterError) as err:
                reader.request("GET", f"{url}/admin/v2/clusters")
        finally:
            reader.close()
    assert "unreachable after 2 attempts" in err.value.message
    assert "no whole answer within 1 s" in err.value.message
    assert len(requests) == 2


def gzipped(out: BaseHTTPRequestHandler) -> None:
    body = gzip.compress(json.dumps(["standalone"]).encode())
    _headers(out, len(body), Content_Encoding="gzip")
    out.wfile.write(body)


def get_clusters(handler: Handler) -> tuple[str, Any]:
    """``GET /admin/v2/clusters`` through the admin client from a server answering with ``handler``."""
    with serving(handler) as (url, _):
        reader = AdminReader(url, retry=Retry(attempts=1, timeout_s=5.0))
        try:
            return url, reader.request("GET", f"{url}/admin/v2/clusters")
        finally:
            reader.close()


def test_a_compressed_answer_reads_as_json() -> None:
    url, answer = get_clusters(gzipped)
    assert answer.json() == ["standalone"]
    assert str(answer.url) == f"{url}/admin/v2/clusters"


def chunked(out: BaseHTTPRequestHandler) -> None:
    out.protocol_version = "HTTP/1.1"
    out.send_response(200)
    out.send_header("Content-Type", "application/json")
    out.send_header("Transfer-Encoding", "chunked")
    out.send_header("Connection", "close")
    out.end_headers()
    for part in (b'["stand', b'alone"]'):
        out.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
    out.wfile.write(b"0\r\n\r\n")


def test_a_chunked_answer_reads_as_json() -> None:
    _, answer = get_clusters(chunked)
    assert answer.json() == ["standalone"]


def not_gzip(out: BaseHTTPRequestHandler) -> None:
    body = b"not gzip at all"
    _headers(out, len(body), Content_Encoding="gzip")
    out.wfile.write(body)


def nested(out: BaseHTTPRequestHandler, status: int = 200) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    _headers(out, len(body), status=status)
    out.wfile.write(body)


def nested_error(out: BaseHTTPRequestHandler) -> None:
    nested(out, 500)


@pytest.mark.parametrize(
    ("handler", "says"),
    [
        (not_gzip, "the answer is not JSON: HTTP 200 with a body that is not valid Content-Encoding gzip"),
        (nested, "the answer is not JSON"),
        (nested_error, "still failing after 2 attempts: HTTP 500: [[[["),
    ],
)
def test_an_answer_python_cannot_decode_is_one_line(handler: Handler, says: str) -> None:
    """A body that is not what its Content-Encoding says (httpx's DecodingError is not a TransportError)
    and JSON nested deeper than Python's recursion limit (RecursionError, not a ValueError) were
    tracebacks, from the cluster list as from an error answer's reason."""
    with serving(handler) as (url, _):
        reader = AdminReader(url, retry=Retry(attempts=2, backoff_s=0.0, timeout_s=5.0))
        try:
            with pytest.raises(ClusterError) as caught:
                reader.read()
        finally:
            reader.close()
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"GET {url}/admin/v2/")
