"""TLS from a user's PEM files: the client's trust (``--tls-ca``), the sandbox's certificate and key.

OpenSSL's own messages for a bad file are cryptic (``[SSL] PEM lib (_ssl.c:3926)``) and, for an
encrypted key, it would prompt on the terminal. So each file is read as a user's text first
(:func:`~shedlab.errors.read_user_text`: missing, a directory, binary data), checked for the PEM block it
must hold, and only then handed to :mod:`ssl`; every failure is one line naming the file and the option.

:func:`verification_failure` finds, under an exception raised by a client call, the TLS failure that no
retry can fix (httpx wraps it twice), so that a server the client does not trust is reported as such,
at once, instead of as an unreachable host after every retry.
"""

from __future__ import annotations

import re
import ssl
from pathlib import Path

from shedlab.errors import InputError, read_user_text

__all__ = ["NOT_TLS", "UNTRUSTED", "client_context", "server_context", "ssl_reason", "verification_failure"]

UNTRUSTED = "certificate verify failed"
"""Starts every :func:`verification_failure` phrase about a certificate the client does not accept."""
NOT_TLS = "the server does not speak TLS"
"""Starts the phrase for an ``https://`` URL on a port that answers plain HTTP."""
_CERT_BLOCK = "-----BEGIN CERTIFICATE-----"
_KEY_BLOCK = re.compile(r"-----BEGIN (?:(RSA|EC|DSA|ENCRYPTED) )?PRIVATE KEY-----")
_SOURCE_POSITION = re.compile(r"\s*\(_ssl\.c:\d+\)")
_PLAIN_REASONS = frozenset(
    {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"}
)
"""OpenSSL's reasons when the other end does not speak TLS (an ``https://`` URL on a plain-HTTP port)."""


def ssl_reason(exc: BaseException) -> str:
    """OpenSSL's reason without the C source position (``… (_ssl.c:1000)``)."""
    if isinstance(exc, ssl.SSLCertVerificationError) and exc.verify_message:
        return f"{UNTRUSTED}: {exc.verify_message}"
    return _SOURCE_POSITION.sub("", str(exc)) or type(exc).__name__


def _check_certificate(path: Path, option: str) -> None:
    try:
        text = read_user_text(path, what="certificate file")
    except InputError as exc:
        if not _is_der(path):
            raise InputError(exc.message, source=exc.source, field=option, hint=exc.hint) from None
        raise InputError(
            "a DER (binary) certificate; PEM is needed",
            source=str(path),
            field=option,
            hint=f"convert it: openssl x509 -inform der -in {path} -out {path}.pem",
        ) from None
    if _CERT_BLOCK not in text:
        what = "a private key, not a certificate" if _KEY_BLOCK.search(text) else "not a PEM certificate"
        raise InputError(f"{what} (no '{_CERT_BLOCK}' line)", source=str(path), field=option)


def _is_der(path: Path) -> bool:
    """Whether the file starts as a DER certificate does (an ASN.1 SEQUENCE with a two-byte length)."""
    try:
        with path.open("rb") as handle:
            return handle.read(2) == b"\x30\x82"
    except OSError:
        return False


def client_context(ca_file: Path, *, option: str = "--tls-ca") -> ssl.SSLContext:
    """Servers verified against the CA certificate(s) in ``ca_file`` (PEM), host names checked."""
    _check_certificate(ca_file, option)
    try:
        return ssl.create_default_context(cafile=str(ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise InputError(
            f"cannot use this CA certificate: {ssl_reason(exc)}", source=str(ca_file), field=option
        ) from None


def _check_key(path: Path) -> None:
    text = read_user_text(path, what="key file")
    block = _KEY_BLOCK.search(text)
    if block is None:
        raise InputError(
            "not a PEM private key (no '-----BEGIN … PRIVATE KEY-----' line)",
            source=str(path),
            field="--tls-key",
        )
    if block.group(1) == "ENCRYPTED" or "Proc-Type: 4,ENCRYPTED" in text:
        raise InputError(
            "the private key is encrypted; the sandbox needs an unencrypted key",
            source=str(path),
            field="--tls-key",
            hint=f"decrypt it: openssl pkey -in {path} -out {path}.plain",
        )


def _never_prompt() -> str:
    """OpenSSL prompts on the terminal for a key's password when none is given; here it is refused."""
    raise ssl.SSLError("the private key is encrypted")


def server_context(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A server's TLS context (``PROTOCOL_TLS_SERVER``): the certificate chain and its private key."""
    _check_certificate(cert_file, "--tls-cert")
    _check_key(key_file)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(str(cert_file), str(key_file), password=_never_prompt)
    except ssl.SSLError as exc:
        if getattr(exc, "reason", None) == "KEY_VALUES_MISMATCH":
            raise InputError(
                f"this key does not belong to the certificate {cert_file}",
                source=str(key_file),
                field="--tls-key",
            ) from None
        raise InputError(
            f"cannot use this certificate and key: {ssl_reason(exc)}",
            source=str(cert_file),
            field="--tls-cert",
        ) from None
    except OSError as exc:
        raise InputError(
            f"cannot read: {exc.strerror or exc}", source=str(cert_file), field="--tls-cert"
        ) from None
    return context


def verification_failure(exc: BaseException) -> str | None:
    """The TLS failure under a client's exception, as one phrase; None if there is none or a retry may help.

    Not retried: a certificate the client does not trust or that does not name the host, and a server
    that does not speak TLS. A handshake cut short (a broker stopping) may pass on retry: None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return ssl_reason(current)
        if isinstance(current, ssl.SSLError) and getattr(current, "reason", None) in _PLAIN_REASONS:
            return f"{NOT_TLS} ({ssl_reason(current)}); is the URL http://?"
        current = current.__cause__ or current.__context__
    return None
