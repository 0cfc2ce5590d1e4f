"""A Spark job that failed on a file it could not read, as shedlab's one-line user error.

Why: shedlab refuses what it can before Spark starts (whole Parquet, the columns its readers index,
Spark's settings), but some files pass those checks and still fail in an executor: a column whose type a
user changed when rewriting a file of an ingest output (``cpu_usage`` as text), a file that another
program wrote under a table's name with the right columns and other types. Spark then fails the job:
its executor logs a Java stack (to ``SPARK_TASKS_LOG`` now, :mod:`shedlab.spark.session`) and the
driver raises ``Py4JJavaError`` carrying another, which reached the user as a Python traceback of
200 lines. Spark names these failures by the error class ``FAILED_READ_FILE`` with the file, and most
of them with the reason (``PARQUET_COLUMN_DATA_TYPE_MISMATCH``: the column and both types), so the
file, the field and the value a user needs are in the message; :func:`read_failure` takes them out.

Only reading failures, and a location whose scheme this Spark has no filesystem for, are translated:
they are the user's data. Any other failure of a job (a bug of
shedlab's in a task, an executor lost) keeps its traceback, as every other bug does (``shedlab.cli``).

This module reads Spark's messages as text and imports no PySpark: the command line imports it at
start-up and calls it on any exception that is not a shedlab error.
"""

from __future__ import annotations

import re
from typing import Final

from shedlab.errors import InputError

__all__ = ["read_failure"]

_FAILED_READ: Final = re.compile(
    r"\[FAILED_READ_FILE(?:\.[A-Z_]+)?\] Encountered error while reading file (?P<path>\S+)\.(?:\s|$)"
    r"(?P<reason>[^\n]*)"
)
"""Spark's ``FAILED_READ_FILE`` message: the file (a URI; it ends at the period before the reason) and
the rest of its line, the reason (empty for ``NO_HINT``)."""
_SQLSTATE: Final = re.compile(r"\s*SQLSTATE: \w+\s*$")
_CAUSED_BY: Final = re.compile(r"^Caused by: (?:[\w$]+\.)*(?P<cls>[\w$]+): (?P<message>[^\n]*)$", re.M)
"""A Java stack's ``Caused by: a.b.Class: message`` line; the simple class name and the message."""
_MAX_REASON: Final = 300
_NO_FILESYSTEM: Final = re.compile(
    r'UnsupportedFileSystemException: No FileSystem for scheme "(?P<scheme>[^"]+)"'
)
"""Hadoop's refusal of a URI whose scheme has no filesystem on the classpath (``s3://`` without hadoop-aws):
the user's location, not a bug, so one line too (28 Nov 2026: ``twin s3://b/x`` was a Java stack trace)."""


def read_failure(exc: BaseException) -> InputError | None:
    """The :class:`InputError` for a Spark failure to read a file (None for any other exception: one
    not from Spark's Python side or its Java gateway, ``pyspark`` or ``py4j``, or another failure).

    The file comes from Spark's ``FAILED_READ_FILE`` message (``file://`` dropped for a local one), the
    reason from the same line, or, where Spark gives none (``NO_HINT``), from the deepest ``Caused by``
    of the Java stack in the message (``ChecksumException: Checksum error: …``).
    """
    if type(exc).__module__.split(".")[0] not in ("pyspark", "py4j"):
        return None
    text = str(exc)
    scheme = _NO_FILESYSTEM.search(text)
    if scheme is not None:
        return InputError(
            f"this Spark has no filesystem for {scheme['scheme']}:// locations (Hadoop's"
            " UnsupportedFileSystemException)",
            hint="put its connector on Spark's classpath (for S3: hadoop-aws, and s3a:// locations)",
        )
    found = _FAILED_READ.search(text)
    if found is None:
        return None
    path = found["path"]
    path = path[len("file://") :] if path.startswith("file:///") else path
    reason = _SQLSTATE.sub("", found["reason"]).strip().rstrip(".")
    if not reason:
        causes = list(_CAUSED_BY.finditer(text))
        reason = f"{causes[-1]['cls']}: {causes[-1]['message']}" if causes else "Spark could not read it"
    if len(reason) > _MAX_REASON:
        reason = reason[: _MAX_REASON - 1] + "…"
    return InputError(f"Spark could not read this file: {reason}", source=path, hint=_hint(path))


def _hint(path: str) -> str:
    """What to check: a Parquet file's columns (a table rewritten by hand), any other file's end (a
    recording's ``.jsonl.gz`` cut short by a copy was told to check its column types)."""
    if path.endswith(".parquet"):
        return "was it rewritten with other column types? run the command that wrote it again"
    return "is the file whole? a copy or a write cut short leaves it unreadable"
