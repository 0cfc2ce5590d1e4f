"""Namespace bundles: hash ranges, and which bundle a topic lands in. The one implementation.

Pulsar assigns a topic to a bundle by hashing the topic's full name (``persistent://t/ns/topic``, and for a
partition ``persistent://t/ns/topic-partition-3``) and finding the range that holds the hash:

- ``ConsistentHashingTopicBundleAssigner.getHashCode`` hashes ``topicName.toString()`` in UTF-8 with the
  namespace bundle factory's hash function and calls ``padToLong()``. The factory's function is Guava's
  ``Hashing.crc32()`` (``NamespaceService``), whose 4-byte code pads to the *unsigned* CRC-32, which is
  exactly ``zlib.crc32``.
- ``NamespaceBundles.getBundle(long hash)`` binary-searches the sorted boundaries: an exact hit selects the
  bundle starting there, otherwise the bundle whose lower bound is the largest one below the hash.

Quirk kept visible: a hash equal to the last boundary (``0xffffffff``) makes Pulsar's ``getBundle`` index
one past its bundle list and throw; shedlab puts it in the last bundle (whose range Pulsar writes as closed
at ``0xffffffff``). The odds are 1 in 2³² per topic name.

Used by the simulator (workloads made of topics) and by ingest (Prometheus topic-level series mapped to
bundles); both must agree with Pulsar, so neither keeps a copy.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "FULL_UPPER_BOUND",
    "HASH_SPACE",
    "bundle_index",
    "bundle_name",
    "bundle_of_topic",
    "even_boundaries",
    "even_ranges",
    "parse_range",
    "ranges_to_boundaries",
    "topic_hash",
]

HASH_SPACE = 1 << 32
FULL_UPPER_BOUND = 0xFFFFFFFF
_RANGE = re.compile(r"0x([0-9a-fA-F]{8})_0x([0-9a-fA-F]{8})")


def topic_hash(topic: str) -> int:
    """Pulsar's bundle hash of a full topic name: the unsigned CRC-32 of its UTF-8 bytes."""
    return zlib.crc32(topic.encode("utf-8"))


def even_boundaries(n: int) -> list[int]:
    """Pulsar's evenly divided boundaries for ``n`` bundles: i·2³²/n, the last one 0xffffffff."""
    if n < 1:
        raise ValueError(f"a namespace has at least one bundle (got {n})")
    return [(i * HASH_SPACE) // n for i in range(n)] + [FULL_UPPER_BOUND]


def even_ranges(n: int) -> list[tuple[int, int]]:
    """The ``(lower, upper)`` pairs of :func:`even_boundaries`."""
    bounds = even_boundaries(n)
    return [(bounds[i], bounds[i + 1]) for i in range(n)]


def bundle_name(namespace: str, lower: int, upper: int) -> str:
    """Pulsar's bundle name ``tenant/namespace/0xLLLLLLLL_0xUUUUUUUU``."""
    return f"{namespace}/0x{lower:08x}_0x{upper:08x}"


def parse_range(text: str) -> tuple[int, int] | None:
    """``0x00000000_0x40000000`` → ``(0, 0x40000000)``; None when it is not a bundle range."""
    match = _RANGE.fullmatch(text)
    if match is None:
        return None
    lower, upper = int(match.group(1), 16), int(match.group(2), 16)
    return (lower, upper) if lower < upper else None


def ranges_to_boundaries(ranges: Sequence[tuple[int, int]]) -> list[int] | None:
    """The boundaries of contiguous sorted ranges covering 0..0xffffffff, or None when they do not."""
    ordered = sorted(ranges)
    if not ordered or ordered[0][0] != 0 or ordered[-1][1] != FULL_UPPER_BOUND:
        return None
    if any(ordered[i][1] != ordered[i + 1][0] for i in range(len(ordered) - 1)):
        return None
    return [lower for lower, _ in ordered] + [FULL_UPPER_BOUND]


def bundle_index(hashes: npt.ArrayLike, boundaries: Sequence[int]) -> npt.NDArray[np.int64]:
    """For each hash, the index of its bundle among ``len(boundaries) - 1`` (Pulsar's ``getBundle``)."""
    bounds = np.asarray(boundaries, dtype=np.int64)
    index = np.searchsorted(bounds, np.asarray(hashes, dtype=np.int64), side="right") - 1
    result: npt.NDArray[np.int64] = np.minimum(index, len(bounds) - 2).astype(np.int64)
    return result


def bundle_of_topic(topic: str, boundaries: Sequence[int]) -> int:
    """The index of the bundle that owns ``topic`` (a full name such as ``persistent://t/ns/x``)."""
    return int(bundle_index([topic_hash(topic)], boundaries)[0])
