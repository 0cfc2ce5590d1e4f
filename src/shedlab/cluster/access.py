"""Credentials and patient calls: how every network call to a real cluster is made.

Three rules, in one place so that no reader or command can forget one:

* **The token never leaves this module in clear.** :class:`Token` holds it; its ``repr``/``str`` say
  ``Token(***)``; :func:`scrub` removes it, and its JSON-escaped, percent-encoded and HTML forms, from
  any text that goes to a log, an error, an output or the audit (a server may echo a header back in an
  error body).
* **Every call has a timeout and is retried with exponential back-off** (:func:`with_retries`), except
  for answers that will not change on retry (401/403/404: :class:`PermanentError`). A 429 or 503 that
  says when to come back (``Retry-After`` in seconds) is retried no sooner, up to
  :data:`MAX_RETRY_AFTER_S`.
* **Failures become one line** (:class:`~shedlab.errors.ClusterError`), naming the host or path and
  what went wrong, never a traceback.
* **Brokers are asked at once** (:func:`concurrently`, at most :data:`MAX_CONCURRENT_CALLS`), so that
  brokers that do not answer cost one timeout with its retries, not one each.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from shedlab.errors import ClusterError, InputError, read_user_text, redact, register_secret
from shedlab.units import counted

__all__ = [
    "MAX_CONCURRENT_CALLS",
    "MAX_RETRY_AFTER_S",
    "MAX_TOKEN_CHARS",
    "PermanentError",
    "Retry",
    "RetryableAnswerError",
    "Token",
    "concurrently",
    "load_token",
    "read_token_file",
    "retry_after_s",
    "scrub",
    "with_retries",
]

T = TypeVar("T")

MAX_CONCURRENT_CALLS = 8
"""At most this many calls at once (brokers' load reports, their owned bundles): N brokers that do not
answer cost ⌈N / 8⌉ rounds of ``--timeout`` × ``--retries`` and the back-off, not N. Small: each call
may hold an answer of up to :data:`~shedlab.cluster.exchange.MAX_BODY_BYTES`, and the brokers are a
production cluster's, not to be stormed."""


class Token:
    """A bearer token that does not print itself."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value
        register_secret(value)  # no error message shows it, whatever echoes it

    def header(self) -> dict[str, str]:
        """The ``Authorization`` header Pulsar's token authentication reads."""
        return {"Authorization": f"Bearer {self._value}"}

    def scrub(self, text: str) -> str:
        """``text`` without the token, in every form a server or an encoder may give it (JSON-escaped,
        percent-encoded, …: :func:`~shedlab.errors.secret_forms`): the registry's one rule."""
        return redact(text)

    def __repr__(self) -> str:
        return "Token(***)"

    __str__ = __repr__


def load_token(token_file: Path | None, token_env: str | None) -> Token | None:
    """The token from ``--token-file`` (first line, stripped) or ``--token-env`` (a variable's name)."""
    if token_file is not None and token_env is not None:
        raise InputError("give one of --token-file and --token-env", field="--token-file")
    if token_file is not None:
        return Token(read_token_file(token_file))
    if token_env is not None:
        value = os.environ.get(token_env, "").strip()
        if not value:
            raise InputError("environment variable is not set or empty", field="--token-env", value=token_env)
        return Token(_checked(value, field="--token-env"))
    return None


def read_token_file(token_file: Path) -> str:
    """The token in a token file: its first non-blank line, stripped (a trailing newline or ``\\r\\n`` is
    not part of it). The one rule for the clients (``--token-file``) and the sandbox's server, which read the
    whole file before: a second line made every request of a client given the same file a 401."""
    text = read_user_text(token_file, what="token file").strip()
    if not text:
        raise InputError("token file is empty", source=str(token_file))
    return _checked(text.splitlines()[0].strip(), source=str(token_file))


MAX_TOKEN_CHARS = 16 * 1024
"""The longest token taken: twice the largest request header a Pulsar broker accepts by default
(``httpMaxRequestHeaderSize``, 8 KiB; a JWT is one or two). A file of megabytes read as a token (a wrong
file) took minutes to register for redaction, far past ``--timeout``, and was then refused with 431."""


def _checked(value: str, *, source: str | None = None, field: str | None = None) -> str:
    """``value`` if an HTTP header can carry it: printable ASCII only (a JWT is base64url and dots), and
    at most :data:`MAX_TOKEN_CHARS`. A character outside it (a typographic quote pasted with the token, a
    control character) made httpx fail with a ``UnicodeEncodeError`` traceback on the first call; the
    token itself is never shown."""
    if len(value) > MAX_TOKEN_CHARS:
        raise InputError(
            f"the token is {len(value):,} characters long, more than {MAX_TOKEN_CHARS:,}: not a token",
            source=source,
            field=field,
        )
    if value[:7].lower() == "bearer ":  # sent as 'Bearer Bearer …': a 401 that said the token was refused
        raise InputError(
            "the token starts with 'Bearer ': give the token alone (shedlab sends 'Bearer ' itself)",
            source=source,
            field=field,
        )
    for position, char in enumerate(value, 1):
        if not " " <= char <= "~":
            raise InputError(
                f"the token has a character an HTTP header cannot carry (U+{ord(char):04X} at position "
                f"{position}; only printable ASCII is allowed)",
                source=source,
                field=field,
            )
    return value


def scrub(text: str, token: Token | None) -> str:
    """``text`` with the token replaced by ``***`` (a no-op without a token)."""
    return token.scrub(text) if token is not None else text


class PermanentError(Exception):
    """A failure that retrying cannot fix (wrong token, no such path); carries its one-line message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


MAX_RETRY_AFTER_S = 30.0
"""The longest wait a ``Retry-After`` gets: a server's ``Retry-After: 86400`` (or a misconfigured proxy's)
would have held ``advise`` or ``collect`` for a day between two tries; a longer one waits this long."""


def retry_after_s(value: str | None) -> float | None:
    """A ``Retry-After`` header's wait in seconds (its delay-seconds form: digits only), at most
    :data:`MAX_RETRY_AFTER_S`; None for none, or for its HTTP-date form (a clock of the server's, which may
    not agree with this one: the back-off applies)."""
    text = (value or "").strip()
    if not (text.isascii() and text.isdigit()):
        return None
    return MAX_RETRY_AFTER_S if len(text) > 6 else min(float(text), MAX_RETRY_AFTER_S)


class RetryableAnswerError(Exception):
    """The server answered, with an error a retry may fix (HTTP 5xx, 408, 429); carries its one-line
    message (the status and the server's reason), and the wait its ``Retry-After`` asks for
    (:func:`retry_after_s`). Retried; if it is still the answer at the end, the error says so, not that the
    server could not be reached."""

    def __init__(self, message: str, wait_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.wait_s = wait_s


@dataclass(frozen=True)
class Retry:
    """``attempts`` tries, waiting ``backoff_s × 2^k`` between them (longer when the answer's
    ``Retry-After`` asks for longer); ``timeout_s`` per call."""

    attempts: int = 3
    backoff_s: float = 0.5
    timeout_s: float = 10.0


def with_retries(
    call: Callable[[], T],
    *,
    what: str,
    retry: Retry,
    transient: tuple[type[BaseException], ...],
    token: Token | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """``call()``, retried on ``transient`` exceptions; raises :class:`ClusterError` naming ``what``.

    A :class:`PermanentError` is not retried. The last failure's message is scrubbed of the token.
    """
    last, outcome = "", "unreachable"
    for attempt in range(retry.attempts):
        try:
            return call()
        except PermanentError as exc:
            raise ClusterError(scrub(exc.message, token), source=what) from None
        except RetryableAnswerError as exc:  # the back-off, or the server's Retry-After if longer
            last, outcome = scrub(exc.message, token), "still failing"
            if attempt + 1 < retry.attempts:
                sleep(max(retry.backoff_s * 2**attempt, exc.wait_s or 0.0))
        except transient as exc:
            last, outcome = scrub(str(exc) or type(exc).__name__, token), "unreachable"
            if attempt + 1 < retry.attempts:
                sleep(retry.backoff_s * 2**attempt)
    tries = counted(retry.attempts, "attempt")
    raise ClusterError(f"{outcome} after {tries}: {last}", source=what)


def concurrently(
    calls: Sequence[Callable[[], T]], *, workers: int = MAX_CONCURRENT_CALLS
) -> list[T | ClusterError]:
    """Each call's result, or the :class:`ClusterError` it raised, in the order of ``calls``, made on at
    most ``workers`` threads at once (one call: made here). Any other exception is a bug: the first one,
    in the order of ``calls``, is raised once all have ended.

    The threads are daemons: Ctrl-C interrupts the wait at once, and the exit does not wait for calls
    still out (each ends within its timeout anyway)."""
    outcomes: dict[int, T | Exception] = {}
    todo: queue.SimpleQueue[int] = queue.SimpleQueue()
    for index in range(len(calls)):
        todo.put(index)

    def work() -> None:
        while True:
            try:
                index = todo.get_nowait()
            except queue.Empty:
                return
            try:
                outcomes[index] = calls[index]()
            except Exception as exc:  # kept for the caller, raised or reported in order
                outcomes[index] = exc

    if len(calls) <= 1 or workers <= 1:
        work()
    else:
        _on_threads(work, min(workers, len(calls)))
    return [_kept(outcomes[index]) for index in range(len(calls))]


def _on_threads(work: Callable[[], None], count: int) -> None:
    """``work`` on ``count`` daemon threads at once, until all have returned."""
    threads = [threading.Thread(target=work, name=f"shedlab-call-{k}", daemon=True) for k in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _kept(outcome: T | Exception) -> T | ClusterError:
    """A result or a :class:`ClusterError` as it is; any other exception is raised (a bug: its traceback)."""
    if isinstance(outcome, Exception) and not isinstance(outcome, ClusterError):
        raise outcome
    return outcome
