"""User-facing errors, and the one home for reading a user's text files.

Every problem caused by what a user handed us (a file, a flag, a config key) is raised as a
:class:`ShedlabError`. The CLI prints it as one line naming the source, the field and the value,
and exits non-zero without a traceback. Anything else is a bug and keeps its traceback.

Every file a user hands shedlab (snapshot, case, scenario, grid, broker.conf) is read by
:func:`read_user_text` (JSON then goes through :func:`parse_json_text`, YAML through
``shedlab.config.parse_yaml_text``), so every reader refuses the same things the same way, naming the file:
text that is not UTF-8 (with or without a byte-order mark) or UTF-16/UTF-32 with a byte-order mark;
binary data (gzip, zip, Parquet, NUL bytes), said for what it is; a key given twice in one object (parsers
silently keep the last one); an integer a Java long cannot hold (no Pulsar field holds one).
"""

from __future__ import annotations

import codecs
import difflib
import errno
import gzip
import html
import json
import re
import unicodedata
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

__all__ = [
    "INTEGER_OUT_OF_RANGE",
    "MAX_INTEGER_BITS",
    "MAX_SEED",
    "MAX_SHOWN_VALUE",
    "ClusterError",
    "ConfigError",
    "DuplicateKeyError",
    "InputError",
    "ShedlabError",
    "WorkFailedError",
    "closest",
    "decode_user_bytes",
    "did_you_mean",
    "int_in_range",
    "name_too_long",
    "one_line",
    "parse_json_text",
    "read_user_text",
    "redact",
    "refuse_special_file",
    "register_secret",
    "secret_forms",
    "shown",
    "unique_object",
    "user_error_names",
]


class ShedlabError(Exception):
    """An error in user input, reported without a traceback."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        field: str | None = None,
        value: Any = None,
        hint: str | None = None,
        show_value: bool = True,
    ) -> None:
        self.message = message
        self.source = source
        self.field = field
        self.value = value
        self.hint = hint
        self.show_value = show_value
        super().__init__(str(self))

    def __str__(self) -> str:
        # a field is named as the user wrote it: an unknown 10,000-character key was a 10 kB line
        field = _short(redact(self.field), MAX_SHOWN_VALUE) if self.field else None
        where = ": ".join(part for part in (self.source, field) if part)
        text = f"{where}: {self.message}" if where else self.message
        if self.show_value and self.value is not None:
            text += f" (got {shown(self.value)})"
        if self.hint:
            text += f"; {self.hint}"
        return one_line(redact(text))


MAX_SHOWN_VALUE: Final = 200
"""Characters of a refused value an error shows: a 100 kB string in a scenario field was a 100 kB line."""


def shown(value: Any) -> str:
    """``value`` as an error shows it: its ``repr``, secrets redacted, cut to :data:`MAX_SHOWN_VALUE`
    characters (for a value quoted inside a message, as an item of a refused list is)."""
    # redacted before repr() escapes it again (a value holding an escaped form stays covered), and
    # again before it is cut, so that no cut can leave part of a secret behind
    value = redact(value) if isinstance(value, str) else value
    return _short(redact(repr(value)), MAX_SHOWN_VALUE)


_SECRETS: set[str] = set()
_SECRET_PATTERNS: dict[str, re.Pattern[str]] = {}


def register_secret(value: str) -> None:
    """Keep ``value`` (a token) out of every error message from now on: :func:`redact` replaces it, in
    every form of :func:`secret_forms`.

    Messages echo what they read (``got '…'``), and a server could put anything into a field it sends
    back; one registry consulted by every :class:`ShedlabError` covers the cases no caller thought of."""
    if value:
        _SECRETS.update(secret_forms(value))
        _SECRET_PATTERNS[value] = _partly_encoded(value)


def _partly_encoded(value: str) -> re.Pattern[str]:
    """``value`` with any of its characters percent-encoded (either case of hex; ``+`` for a space),
    the others as they are. A URL library encodes only the characters its rule says: httpx printed a
    redirect's ``Location`` holding the token as ``tok+en==%22x``, a mix no list of whole forms has."""
    parts = []
    for char in value:
        hexes = "".join(f"%{_hex(b >> 4)}{_hex(b & 15)}" for b in char.encode("utf-8"))
        plus = r"|\+" if char == " " else ""
        parts.append(f"(?:{re.escape(char)}|{hexes}{plus})")
    return re.compile("".join(parts))


def _hex(digit: int) -> str:
    """A hex digit as a pattern matching it in either case."""
    return f"[{digit:X}{digit:x}]" if digit > 9 else str(digit)


def secret_forms(value: str) -> list[str]:
    """``value`` as text may carry it, longest first: as it is; escaped in a JSON string (``\\"``, ``\\\\``,
    and ``\\/`` as some encoders write ``/``) or a Python ``repr`` (``got '…'``); HTML-escaped (``&quot;``, an
    error page). A token with ``+``, ``/``, ``=``, a quote or a backslash, echoed by a server in any of
    these, was printed in clear: only the raw form was replaced. Its percent-encoded forms, whole or in
    part, are a pattern (:func:`_partly_encoded`), not a list."""
    as_json = json.dumps(value)[1:-1]
    forms = {
        value,
        as_json,
        as_json.replace("/", "\\/"),
        repr(value)[1:-1],
        html.escape(value),
        html.escape(value, quote=False),
    }
    return sorted(forms, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every registered secret, in every form of :func:`secret_forms` and percent-encoded
    whole or in part, replaced by ``***``."""
    for secret in sorted(_SECRETS, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, "***")
    for pattern in _SECRET_PATTERNS.values():
        text = pattern.sub("***", text)
    return text


def one_line(text: str) -> str:
    """``text`` with its control and line-separator characters escaped (``\\n``, ``\\x1b``, ``\\u2028``).

    An error is one line, and names what the user wrote: a field name or a file name can hold a newline
    (a YAML key ``"a\\nb"``, found by the grid fuzz test), which would break the line in two.
    """
    if text.isprintable():
        return text
    return "".join(repr(c)[1:-1] if unicodedata.category(c) in _BREAKING else c for c in text)


_BREAKING = ("Cc", "Zl", "Zp")  # control characters (\n, \r, \t, ESC, ...), line and paragraph separators


class InputError(ShedlabError):
    """Malformed or inconsistent input data (JSON, snapshots, recordings)."""


class ClusterError(ShedlabError):
    """A running cluster that cannot be read or acted on: unreachable, refused credentials, not the
    modular load manager, a malformed znode or report (``source`` names the host, path or znode)."""


class ConfigError(ShedlabError):
    """An unknown configuration key, a bad value, or an impossible combination."""


class WorkFailedError(ShedlabError):
    """Work that ran and failed for another reason than the user's input (every run of a sweep stopped by
    its ``--timeout``, or by a bug): one line as every error, with exit code 1, so that a script tells it
    from a refused input (2)."""

    exit_code = 1


def user_error_names() -> frozenset[str]:
    """The names of :class:`ShedlabError` and of every subclass loaded but :class:`WorkFailedError`: how a
    failure recorded by its class name (a sweep run's ``error_type``, in Parquet) is told to be the
    user's input (a plugin strategy that raised, a scenario or setting a run refused)."""
    names = set()
    todo: list[type[ShedlabError]] = [ShedlabError]
    while todo:
        cls = todo.pop()
        if cls is not WorkFailedError:
            names.add(cls.__name__)
            todo.extend(cls.__subclasses__())
    return frozenset(names)


def closest(word: str, choices: Iterable[str], *, cutoff: float = 0.5) -> str | None:
    """The closest known spelling of ``word``, for 'did you mean' hints (``cutoff``: difflib's ratio)."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=cutoff)
    return lowered[match[0]] if match else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A hint sentence suggesting the closest known spelling, or None."""
    best = closest(word, choices)
    return f"did you mean {best!r}?" if best else None


# ------------------------------------------------------------------------------ reading a user's files

MAX_INTEGER_BITS: Final = 64
"""Integers in a user's document must fit a Java long (Pulsar's widest integer type)."""
_INT_LIMIT: Final = 2 ** (MAX_INTEGER_BITS - 1)
MAX_SEED: Final = _INT_LIMIT - 1
"""Seeds are integers in ``[0, MAX_SEED]`` (NumPy refuses a negative seed with a traceback)."""
INTEGER_OUT_OF_RANGE: Final = "integer out of range (a Java long holds -2^63 to 2^63 - 1)"
"""The readers' words for an integer a Java long cannot hold: its range, as 2^63 fits 64 bits unsigned
and 'more than 64 bits' was wrong of it."""

# Byte-order marks, longest first (the UTF-32 LE mark starts with the UTF-16 LE one).
_BOMS: Final = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "UTF-32"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "UTF-32"),
    (codecs.BOM_UTF8, "utf-8", "UTF-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "UTF-16"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "UTF-16"),
)
# Magic numbers of the binary files users most often hand over by mistake.
_MAGIC: Final = (
    (b"\x1f\x8b", "a gzip file"),
    (b"PK\x03\x04", "a zip file"),
    (b"PAR1", "a Parquet file"),
    *((b"BZh" + str(level).encode(), "a bzip2 file") for level in range(1, 10)),
    (b"\xfd7zXZ\x00", "an xz file"),
    (b"\x28\xb5\x2f\xfd", "a zstd file"),
    (b"\x89PNG", "a PNG image"),
    (b"%PDF", "a PDF document"),
)


def read_user_text(
    path: str | Path, *, what: str = "file", error: type[ShedlabError] = InputError, gunzip: bool = False
) -> str:
    """The text of a user's file (see the module docstring); ``what`` names it in messages.

    ``gunzip``: a file named ``*.gz`` is decompressed first (a recording or a LoadData snapshot, as
    ingest reads them); a gzip cut short is one line."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise error(f"{what} not found", source=str(p)) from None
    except IsADirectoryError:
        raise error(f"expected a {what}, found a directory", source=str(p)) from None
    except OSError as exc:
        raise error(f"cannot read {what}: {exc.strerror or exc}", source=str(p)) from None
    if gunzip and p.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise error(f"cannot read it as gzip data: {exc}", source=str(p)) from None
    return decode_user_bytes(data, str(p), error=error)


def refuse_special_file(
    path: str | Path,
    why: str,
    *,
    field: str | None = None,
    error: type[ShedlabError] = InputError,
    hint: str = "save it to a file first",
) -> None:
    """Refuse ``path`` if it exists but is neither a regular file nor a directory: a pipe (bash's
    ``<(ssh host cat snap.json)``), a device such as ``/dev/null``. :func:`read_user_text` reads one once;
    ``why`` says why this one must be a file (read twice: the second read found nothing; read by Spark, in
    another process: the pipe is this one's); ``hint`` what to do instead (an output: which file to give)."""
    p = Path(path)
    if p.exists() and not (p.is_file() or p.is_dir()):
        raise error(
            f"not a file or a directory (a pipe, a device): {why}",
            source=str(p),
            field=field,
            hint=hint,
        )


def name_too_long(exc: BaseException) -> InputError | None:
    """The :class:`InputError` for a path the file system cannot hold (a name past its 255 bytes:
    ``decide "$(cat snap.json)"``, a document pasted where its file's name goes), whichever check met it
    first; None for any other exception. Python's ``Path.exists``, ``is_dir`` and ``is_file`` raise this
    one error where they return False for a missing file, and it was a traceback."""
    if not (isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG):
        return None
    name = exc.filename if exc.filename is None or isinstance(exc.filename, str) else str(exc.filename)
    return InputError("a path too long for the file system (a name of more than 255 bytes?)", value=name)


def decode_user_bytes(
    data: bytes, source: str, *, error: type[ShedlabError] = InputError, latin1: bool = False
) -> str:
    """Decode a user's bytes: UTF-8 (BOM optional), UTF-16/32 with a BOM; refuse binary data.

    ``latin1`` falls back to ISO-8859-1 for text that is not UTF-8 (Java's ``Properties.load`` reads a
    broker.conf that way).
    """
    for bom, codec, name in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(codec)
            except UnicodeDecodeError as exc:
                raise error(
                    f"not valid {name} text although it starts with a {name} byte-order mark "
                    f"(byte {exc.start + len(bom)})",
                    source=source,
                ) from None
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            raise error(f"this is {kind}, not text", source=source, hint="decompress or convert it first")
    if b"\x00" in data:
        hint = "UTF-16 or UTF-32 text needs a byte-order mark; save it as UTF-8"
        raise error(f"binary data, not text (NUL byte at offset {data.index(0)})", source=source, hint=hint)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if latin1:
            return data.decode("latin-1")
        raise error(
            f"not UTF-8 text (invalid byte 0x{data[exc.start]:02x} at offset {exc.start})",
            source=source,
            hint="save the file as UTF-8",
        ) from None


class DuplicateKeyError(ValueError):
    """A key seen twice in one JSON object (raised inside the parser; located by the caller)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook`` that raises :class:`DuplicateKeyError` on a key given twice
    in one object, where a dict keeps the last value, silently."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(key)
        out[key] = value
    return out


def int_in_range(digits: str) -> bool:
    """Whether an integer literal fits :data:`MAX_INTEGER_BITS` (checked on the text first: ``int()``
    refuses more than 4300 digits with a ValueError)."""
    text = digits.replace("_", "").lstrip("+-")
    return len(text) <= 20 and -_INT_LIMIT <= int(digits.replace("_", "")) < _INT_LIMIT


def _bounded_int(text: str) -> int:
    if not int_in_range(text):
        raise OverflowError(text)
    return int(text)


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def parse_json_text(text: str, source: str, *, error: type[ShedlabError] = InputError) -> Any:
    """Parse JSON, refusing duplicate keys and integers a Java long cannot hold, naming the line."""
    try:
        return json.loads(text, object_pairs_hook=unique_object, parse_int=_bounded_int)
    except json.JSONDecodeError as exc:
        raise error(
            f"malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", source=source
        ) from None
    except DuplicateKeyError as exc:
        line = _json_key_line(text, exc.key)
        raise error(
            f"key {exc.key!r} appears twice in one object" + (f" (again at line {line})" if line else ""),
            source=source,
            field=exc.key,
            hint="JSON readers would silently keep the last value",
        ) from None
    except OverflowError as exc:
        raise error(INTEGER_OUT_OF_RANGE, source=source, value=_short(str(exc))) from None
    except RecursionError:
        raise error("JSON nested too deeply", source=source) from None


def _json_key_line(text: str, key: str) -> int | None:
    """The line of the second occurrence of ``"key":`` (the json module keeps no positions)."""
    needle = json.dumps(key)
    first = text.find(needle)
    second = text.find(needle, first + 1) if first >= 0 else -1
    return text.count("\n", 0, second) + 1 if second >= 0 else None
