"""Partition directories (``key=value``) as Spark writes and reads them: the escaping and the one limit.

Results tables are partitioned by scenario and strategy pair, ingest's tables by cluster and day; a
value becomes part of a directory name, so each writer checks it here before any run or write starts.
"""

from __future__ import annotations

from shedlab.model.pulsar import is_named_entity

__all__ = ["MAX_NAME_BYTES", "cluster_problem", "escape_partition_value", "partition_name_bytes"]

MAX_NAME_BYTES = 255
"""The longest file or directory name most filesystems take (NAME_MAX on Linux, HDFS's default too)."""

_SPARK_ESCAPE = set("\"#%'*/:=?\\{[]^") | {chr(c) for c in range(0x01, 0x20)} | {"\x7f"}


def escape_partition_value(value: str) -> str:
    """Escape a partition directory value exactly as Spark does (and unescapes on read)."""
    return "".join(f"%{ord(c):02X}" if c in _SPARK_ESCAPE else c for c in value)


def partition_name_bytes(key: str, value: str) -> int:
    """The bytes of the directory ``key=<value>`` once Spark has escaped the value."""
    return len(f"{key}={escape_partition_value(value)}".encode())


def cluster_problem(name: str) -> str | None:
    """Why no output can hold records of cluster ``name`` (None: it can). A name Pulsar's
    ``createCluster`` would refuse is not a cluster's; one that makes a partition directory name longer
    than a file system allows would abort the whole write, so it is quarantined instead."""
    if not is_named_entity(name):
        shown = name if len(name) <= 40 else name[:40] + "…"
        return f"cluster {shown!r} is not a Pulsar cluster name (ASCII letters, digits, _ - = : . only)"
    if partition_name_bytes("cluster", name) > MAX_NAME_BYTES:
        return f"a cluster name of {len(name)} characters is too long for a partition directory"
    return None
