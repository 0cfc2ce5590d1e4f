"""Local Parquet files, read and written through Arrow's own local filesystem, never through pandas' path
handling.

Why one home: pandas treats a path as a URL when its text looks like one (``http:/x``, ``s3:x``,
``file:/…``: it opened ``urllib`` or S3 for ``simulate --out 'http://[x'`` and failed with a traceback,
28 Nov 2026), and opens a local file as a Python file object, which Arrow reads on threads of its own (a
process that exits after such a read aborts now and then in Arrow's teardown, below). Both readers and
the writer here pass Arrow's ``LocalFileSystem`` an absolute path (a relative ``s3:x/t.parquet`` it takes
for a URI): a local path is a local path, whatever its text.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow.fs as pafs  # type: ignore[import-untyped]

__all__ = ["read_local_parquet", "write_local_parquet"]

_LOCAL = pafs.LocalFileSystem()


def read_local_parquet(path: Path, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """``pd.read_parquet`` of a local Parquet file or directory, read by Arrow's own file reader.

    Why not ``pd.read_parquet(path)``: pandas opens a local file as a Python file object, which Arrow
    reads on threads of its own, and a process that exits after such a read aborts now and then in
    Arrow's teardown ("terminate called without an active exception", exit 134): with pyarrow 26.0.1,
    4 in 100 runs of ``shedlab report`` on a bad input, 4 at a time (a CI run failed on one), and 19 in
    160 of two ``pd.read_parquet`` calls in a fresh interpreter; through Arrow's ``LocalFileSystem``
    none in 160 (27 Nov 2026, loops of 4 parallel processes; apache/arrow#34314 reports the symptom).
    The same frame either way: pandas reads the same table with the same options."""
    columns_read = None if columns is None else list(columns)
    return pd.read_parquet(os.path.abspath(path), columns=columns_read, filesystem=_LOCAL)


def write_local_parquet(frame: pd.DataFrame, path: Path) -> None:
    """``frame.to_parquet(path, index=False)`` into a local file, whatever its path's text looks like; the
    same bytes as pandas writes (the same Arrow writer and options)."""
    frame.to_parquet(os.path.abspath(path), index=False, filesystem=_LOCAL)
