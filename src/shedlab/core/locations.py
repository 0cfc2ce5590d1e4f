"""Where results and recordings live: a local path, or a remote URI that Arrow and Spark open.

One home for telling the two apart and for the one check shedlab makes of a remote URI before Arrow or
Spark see it: its syntax. ``hdfs://[x/y`` (an unclosed IPv6 bracket) or ``s3a://b:abc/`` (a port that is
none) reached them as a Java ``URISyntaxException`` or an ``ArrowInvalid`` stack trace (28 Nov 2026).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path

from shedlab.errors import InputError

__all__ = ["check_uri", "is_remote", "local_path", "names_a_scheme", "walk", "without_file_scheme"]

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_SCHEME_AND_SLASH = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:/")


def is_remote(path: str) -> bool:
    """Whether ``path`` is a URI with a scheme other than ``file://``."""
    return bool(_SCHEME.match(path)) and not path.startswith("file://")


def without_file_scheme(location: str) -> str:
    """``location`` without a leading ``file://`` (a local path is returned as it is)."""
    return location[len("file://") :] if location.startswith("file://") else location


def local_path(location: str) -> str | None:
    """A local location as a path (without ``file://``); None for a remote URI."""
    return None if is_remote(location) else without_file_scheme(location)


def names_a_scheme(text: str) -> bool:
    """Whether ``text`` starts with a scheme and a slash: ``s3://…``, ``file://…``, or either after a
    :class:`~pathlib.Path` has collapsed its ``//`` (``s3:/…``), where only a local path is expected."""
    return bool(_SCHEME_AND_SLASH.match(text))


def walk(directory: Path, pattern: str, keep: Callable[[Path], bool]) -> Iterator[Path]:
    """The paths of ``directory.rglob(pattern)`` that ``keep`` keeps, lazily. A path it may not list or
    stat (``keep`` runs here, since ``is_file`` stats) is refused in one line naming ``directory``:
    ``decide /``, ``ingest /`` met ``/proc/1/cwd``, which even root may not enter, as a ``PermissionError``
    traceback."""
    try:
        yield from (p for p in directory.rglob(pattern) if keep(p))
    except OSError as exc:
        raise InputError(f"cannot list this directory: {exc}", source=str(directory)) from None


def check_uri(location: str, *, field: str | None = None) -> None:
    """Refuse a remote location whose URI does not parse, before Arrow or Spark read it with a stack trace
    of their own. Only the syntax is checked: reaching it is the reader's or the writer's."""
    try:
        urllib.parse.urlsplit(location).port  # noqa: B018 (the check is the point: ValueError)
    except ValueError as exc:
        raise InputError(f"not a URI ({exc})", field=field, value=location) from None
