"""A stub Pulsar broker's web server for the cluster tests: the shapes and statuses a real broker
answers that the sandbox does not (older versions' documents, refusals, errors)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = tuple[int, Any]
NOT_FOUND: Answer = (404, {"reason": "HTTP 404 Not Found"})
UNAUTHORIZED: Answer = (401, "Authentication required")


@contextmanager
def stub_broker(
    answers: Callable[[str, int], dict[str, Answer]], default: Answer = NOT_FOUND
) -> Iterator[str]:
    """A web server answering GET paths (and ``"PUT <path>"``) from ``answers(path, port)`` (raw JSON text
    when a ``str``, the body as it is when ``bytes``); anything else ``default``: Jersey's 404, as for a
    path no resource matches."""

    class Broker(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.answer("GET")

        def do_PUT(self) -> None:
            self.answer("PUT")

        def answer(self, method: str) -> None:
            table = answers(self.path, server.server_address[1])
            key = self.path if method == "GET" else f"{method} {self.path}"
            status, body = table.get(key, default)
            data = _encoded(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Broker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _encoded(body: Any) -> bytes:
    """An answer's body: bytes as they are (a body that is not UTF-8), a ``str`` as raw text, else JSON."""
    if isinstance(body, bytes):
        return body
    return b"" if body is None else (body if isinstance(body, str) else json.dumps(body)).encode()


def refusing(path: str, port: int) -> dict[str, Answer]:
    """No path answers but with the ``default`` (e.g. ``(401, "Authentication required")``)."""
    return {}
