"""One admin call (cluster/exchange.py), against a real local server.

The timeout bounds a whole call, not each read: a server that answers a few bytes at a time, in its
headers or its body, or that stalls after a late start, is cut off at ``--timeout`` and retried;
redirects share the call's deadline. The answer's size is capped: a huge or endless answer, as sent or
as decoded, is stopped at the cap, in one line. Answers that arrive whole (compressed or chunked) read
as before."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from cli_support import error_line

from shedlab.cluster.access import MAX_RETRY_AFTER_S, Retry, RetryableAnswerError, retry_after_s, with_retries
from shedlab.cluster.exchange import _Cutoff
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


def failed_get(url: str, path: str, retry: Retry, **options: Any) -> ClusterError:
    """The one-line error of a GET of ``path`` through a fresh :class:`AdminReader` of ``url`` (closed
    after), which must fail."""
    reader = AdminReader(url, retry=retry, **options)
    try:
        with pytest.raises(ClusterError) as caught:
            reader.request("GET", f"{url}{path}")
    finally:
        reader.close()
    return caught.value


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


def trickled_headers(out: BaseHTTPRequestHandler) -> None:
    """The status line, then one header line every 0.2 s for 12 s, then a valid answer."""
    try:
        out.wfile.write(b"HTTP/1.1 200 OK\r\n")
        for _ in range(60):
            out.wfile.write(b"X-Slow: 1\r\n")
            out.wfile.flush()
            time.sleep(0.2)
        out.wfile.write(b"Content-Length: 2\r\n\r\n[]")
    except (BrokenPipeError, ConnectionResetError):
        pass


def late_then_stalled(out: BaseHTTPRequestHandler) -> None:
    """The headers and the body's first byte at 0.9 s, then nothing for 30 s."""
    time.sleep(0.9)
    _headers(out, 12)
    out.wfile.write(b"[")
    out.wfile.flush()
    time.sleep(30)


def redirected_slowly(out: BaseHTTPRequestHandler) -> None:
    """A redirect after 0.6 s to the same server, whose answer takes 0.6 s more: 1.2 s for the call."""
    time.sleep(0.6)
    if out.path.endswith("/clusters"):
        out.send_response(307)
        out.send_header("Location", "/admin/v2/clusters/again")
        out.send_header("Content-Length", "0")
        out.end_headers()
        return
    _headers(out, 2)
    out.wfile.write(b"[]")


@pytest.mark.parametrize("handler", [trickled_headers, late_then_stalled, redirected_slowly])
def test_a_call_is_whole_within_the_timeout(handler: Handler) -> None:
    """httpx's timeout bounds each read, not the call: headers a line at a time held a call for ever
    (12 s here, and then it succeeded), an answer started just before the timeout and then stalled held
    it for nearly twice the timeout (1.9 s), and each redirect had a timeout of its own (1.2 s)."""
    with serving(handler) as (url, _):
        started = time.monotonic()
        error = failed_get(url, "/admin/v2/clusters", Retry(attempts=1, timeout_s=1.0))
    took = time.monotonic() - started
    assert took < 1.7, f"{took:.2f} s"  # 1.9-2.0 s and more before; room for a loaded machine
    assert "unreachable after 1 attempt: no whole answer within 1 s" in str(error)


@pytest.mark.parametrize("sent", [False, True], ids=["before-the-request", "after"])
def test_a_call_cut_off_says_whether_its_request_went_out(sent: bool) -> None:
    """Cut off before the request started going out, a call cannot have reached a broker: a connect
    timeout, so that an unload is still retried (``once_sent``); after, a read timeout (not retried)."""
    with _Cutoff(0.05) as cutoff:
        if sent:
            cutoff.trace("http11.send_request_headers.started", {})
        time.sleep(0.2)
        if not sent:  # the connection came after the deadline: its socket is shut, nothing goes out
            cutoff.trace("http11.send_request_headers.started", {})
    assert cutoff.expired
    kind = httpx.ReadTimeout if sent else httpx.ConnectTimeout
    assert isinstance(cutoff.timeout(1.0), kind)


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


SENT: list[int] = []


def stream_forever(
    out: BaseHTTPRequestHandler, status: int, content_type: str, part: bytes, sent: list[int] | None = None
) -> None:
    """A chunked answer of ``status`` that never ends, ``part`` after ``part``, until the reader hangs up;
    each part sent counted in ``sent``."""
    out.protocol_version = "HTTP/1.1"
    out.send_response(status)
    out.send_header("Content-Type", content_type)
    out.send_header("Transfer-Encoding", "chunked")
    out.end_headers()
    with suppress(BrokenPipeError, ConnectionResetError):
        while True:
            out.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            if sent is not None:
                sent.append(len(part))


def endless(out: BaseHTTPRequestHandler) -> None:
    """A chunked answer that never ends (64 KiB chunks of JSON-looking text); counts what it sent."""
    stream_forever(out, 200, "application/json", b"[" + b"0," * 32_767 + b"0", SENT)


def huge_declared(out: BaseHTTPRequestHandler) -> None:
    """Headers declaring 8 GiB, then a few bytes and a stall: what a reader that trusts the length reads."""
    _headers(out, 8 * 2**30)
    out.wfile.write(b"[0,")
    out.wfile.flush()
    time.sleep(30)


def gzip_bomb(out: BaseHTTPRequestHandler) -> None:
    """12 KiB on the wire that decode to 12 MiB: over a 1 MiB cap only once decoded."""
    body = gzip.compress(b" " * 12 * 2**20)
    _headers(out, len(body), Content_Encoding="gzip")
    out.wfile.write(body)


@pytest.mark.parametrize(
    ("handler", "says"),
    [
        (endless, "the answer went past the cap of 1 MiB: stopped reading there"),
        (gzip_bomb, "the answer went past the cap of 1 MiB: stopped reading there"),
        (huge_declared, "the answer is larger than the cap of 1 MiB (Content-Length 8589934592): not read"),
    ],
)
def test_an_answer_past_the_cap_is_stopped_there_in_one_line(handler: Handler, says: str) -> None:
    """A server or a proxy answering with gigabytes, or an endless stream, was read whole into memory
    (for as long as --timeout let it come in, on every attempt). Not retried: the same answer would come."""
    SENT.clear()
    with serving(handler) as (url, requests):
        started = time.monotonic()
        retry = Retry(attempts=3, backoff_s=0.0, timeout_s=20.0)
        error = failed_get(url, "/admin/v2/brokers/standalone", retry, max_body_bytes=2**20)
    assert str(error) == f"GET {url}/admin/v2/brokers/standalone: {says}"
    assert len(requests) == 1 and time.monotonic() - started < 5
    assert sum(SENT) < 16 * 2**20  # the server was stopped: what it sent fits in the socket buffers


def endless_503(out: BaseHTTPRequestHandler) -> None:
    """A 503 whose error page never ends (a proxy's): only its status matters."""
    stream_forever(out, 503, "text/html", b"<p>" + b"busy " * 13_000 + b"</p>")


def huge_declared_503(out: BaseHTTPRequestHandler) -> None:
    """A 503 declaring an 8 GiB body, then a stall."""
    _headers(out, 8 * 2**30, status=503)
    out.wfile.write(b"<html>")
    out.wfile.flush()
    time.sleep(30)


@pytest.mark.parametrize(
    ("handler", "said"), [(endless_503, "HTTP 503: <p>busy busy"), (huge_declared_503, "HTTP 503")]
)
def test_an_error_answer_past_the_cap_is_cut_and_retried_by_its_status(handler: Handler, said: str) -> None:
    """An oversized error page was a final "past the cap" that never said 503; now its body is cut at the
    cap (not read when declared over it) and the 503 is retried as any 503 is."""
    with serving(handler) as (url, requests):
        started = time.monotonic()
        retry = Retry(attempts=3, backoff_s=0.0, timeout_s=20.0)
        error = failed_get(url, "/admin/v2/brokers/standalone", retry, max_body_bytes=2**20)
    prefix = f"GET {url}/admin/v2/brokers/standalone: still failing after 3 attempts: {said}"
    assert str(error).startswith(prefix) and len(str(error)) <= len(prefix) + 160  # the page's start only
    assert "\n" not in str(error) and "cap" not in str(error)
    assert len(requests) == 3 and time.monotonic() - started < 10


def test_the_default_cap_refuses_a_huge_answer_before_reading_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """From the command line, with the default cap (128 MiB): one line naming the call and the cap,
    exit 2, the token nowhere."""
    monkeypatch.setenv("SHEDLAB_TEST_TOKEN", "tok-secret-123")
    with serving(huge_declared) as (url, _):
        line = error_line(["advise", "--admin-url", url, "--token-env", "SHEDLAB_TEST_TOKEN"], capsys)
    assert line == (
        f"error: GET {url}/admin/v2/clusters: the answer is larger than the cap of 128 MiB "
        "(Content-Length 8589934592): not read"
    )
    assert "tok-secret" not in line


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("http://[::1", "a broker redirected to an invalid location (Invalid URL in location header"),
        ("//:80/", "a broker redirected to '//:80/', which names no host"),
        ("http://b:abc/x", "a broker redirected to an invalid location"),  # httpx.InvalidURL: a traceback
    ],
)
def test_a_redirect_to_no_url_is_said_once_not_retried_as_unreachable(location: str, message: str) -> None:
    """A broker's ``Location`` that is not a URL: the same broker redirects the same way again, so it is
    not retried, and not called unreachable (which sent the operator to check ``--admin-url``)."""

    def redirect(out: BaseHTTPRequestHandler) -> None:
        _headers(out, 0, status=307, Location=location)

    with serving(redirect) as (url, requests):
        error = failed_get(url, "/admin/v2/clusters", Retry(attempts=3, timeout_s=2.0))
    assert message in str(error) and "unreachable" not in str(error)
    assert len(requests) == 1


@pytest.mark.parametrize(
    "broker", ["b:abc", "x/y:1", "a@127.0.0.1:9", "h:1#", "not a host:1", "b:0", "b:65536", "b"]
)
def test_a_broker_id_that_makes_no_url_is_said_once(broker: str) -> None:
    """A broker id from the cluster's own data (``/admin/v2/brokers``, a znode's name) that is not
    HOST:PORT: ``b:abc`` was a traceback (httpx's InvalidURL, 28 Nov 2026), then a call; ``x/y:1`` sent the
    call and the token to the host ``x``, ``a@127.0.0.1:9`` to 127.0.0.1. Refused before any call."""
    reader = AdminReader("http://127.0.0.1:9", retry=Retry(attempts=3, timeout_s=2.0))
    try:
        with pytest.raises(ClusterError) as caught:
            reader.broker_url(broker)
    finally:
        reader.close()
    assert str(caught.value) == (
        f"broker {broker!r}: not a broker id HOST:PORT, which a broker's web address is made of: not read"
    )


@pytest.mark.parametrize("broker", ["b1:8080", "10.0.0.1:8443", "[::1]:8080", "pulsar-broker-0.pulsar:8080"])
def test_a_broker_id_makes_its_url(broker: str) -> None:
    reader = AdminReader("https://127.0.0.1:9")
    try:
        assert reader.broker_url(broker) == f"https://{broker}"
    finally:
        reader.close()


def test_a_redirected_hop_that_fails_is_named() -> None:
    def redirect(out: BaseHTTPRequestHandler) -> None:
        _headers(out, 0, status=307, Location="http://127.0.0.1:9/admin/v2/clusters")  # discard: refused

    with serving(redirect) as (url, _):
        error = failed_get(url, "/admin/v2/clusters", Retry(attempts=1, timeout_s=2.0))
    assert "(redirected to http://127.0.0.1:9/admin/v2/clusters)" in str(error)


@pytest.mark.parametrize(
    "location", ["http://admin:hunter2@127.0.0.1:9/x", "https://admin:hunter2@127.0.0.1:9/x"]
)
def test_a_redirect_with_credentials_is_not_followed_nor_printed(location: str) -> None:
    """A ``Location`` with ``user:password@`` was printed whole in the hop's error (advise's output,
    collect's events), and httpx sent the password (Basic) to that host instead of the token."""

    def redirect(out: BaseHTTPRequestHandler) -> None:
        _headers(out, 0, status=307, Location=location)

    with serving(redirect) as (url, requests):
        error = failed_get(url, "/admin/v2/clusters", Retry(attempts=3, timeout_s=2.0))
    scheme = location.partition("://")[0]
    assert str(error) == (
        f"GET {url}/admin/v2/clusters: a broker redirected to a URL with credentials in it "
        f"({scheme}://***@127.0.0.1:9/x): not followed"
    )
    assert len(requests) == 1


def _busy_then_fine(status: int, retry_after: str) -> tuple[Handler, list[float]]:
    """A handler answering ``status`` with ``Retry-After: retry_after`` first, then ``["c1"]``; and the
    times of the requests."""
    times: list[float] = []

    def handler(out: BaseHTTPRequestHandler) -> None:
        times.append(time.monotonic())
        body = b'["c1"]' if len(times) > 1 else b'{"reason": "busy"}'
        _headers(out, len(body), status=200 if len(times) > 1 else status, Retry_After=retry_after)
        out.wfile.write(body)

    return handler, times


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_in_seconds_is_waited_for_before_the_next_try(status: int) -> None:
    """A 429 or 503 saying ``Retry-After: 2`` was tried again after the back-off (0.5 s by default), when
    the server had said it would refuse it; the next try waits the 2 s."""
    handler, times = _busy_then_fine(status, "2")
    with serving(handler) as (url, _):
        reader = AdminReader(url, retry=Retry(attempts=3, backoff_s=0.1, timeout_s=5.0))
        try:
            answer = reader.request("GET", f"{url}/admin/v2/clusters")
        finally:
            reader.close()
    assert answer.json() == ["c1"] and len(times) == 2
    assert times[1] - times[0] >= 1.9


@pytest.mark.parametrize(
    ("header", "wait"),
    [("2", 2.0), (" 7 ", 7.0), ("86400", MAX_RETRY_AFTER_S), ("9" * 5000, MAX_RETRY_AFTER_S), ("0", 0.0)],
)
def test_a_retry_after_waits_its_seconds_up_to_the_cap(header: str, wait: float) -> None:
    """A server's ``Retry-After: 86400`` would have held the command for a day: it waits the cap."""
    assert retry_after_s(header) == wait


@pytest.mark.parametrize("header", [None, "", "Wed, 21 Oct 2026 07:28:00 GMT", "-5", "1.5", "1_0", "٣"])
def test_a_retry_after_that_is_no_count_of_seconds_leaves_the_back_off(header: str | None) -> None:
    """Its HTTP-date form is a clock of the server's; the back-off applies, as to anything unreadable."""
    assert retry_after_s(header) is None


def test_the_wait_is_the_longer_of_the_back_off_and_the_retry_after() -> None:
    """A long ``Retry-After`` (capped) outlasts the back-off; a short one leaves the back-off as it was."""
    for asked, expected in ((MAX_RETRY_AFTER_S, [MAX_RETRY_AFTER_S] * 2), (0.1, [0.5, 1.0])):
        waits: list[float] = []

        def busy(wait_s: float = asked) -> None:
            raise RetryableAnswerError("HTTP 503: busy", wait_s=wait_s)

        retry = Retry(attempts=3, backoff_s=0.5)
        with pytest.raises(ClusterError, match="still failing after 3 attempts: HTTP 503: busy"):
            with_retries(busy, what="GET x", retry=retry, transient=(), sleep=waits.append)
        assert waits == expected
