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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from shedlab.errors import InputError, parse_json_text, read_user_text

__all__ = [
    "BUNDLE_NAME_SHAPE",
    "FULL_UPPER_BOUND",
    "HASH_SPACE",
    "MAX_BUNDLES",
    "bundle_for_topic",
    "bundle_index",
    "bundle_name",
    "bundle_name_problem",
    "bundle_of_topic",
    "bundles_data_boundaries",
    "even_boundaries",
    "even_ranges",
    "namespace_of_topic",
    "parse_range",
    "ranges_to_boundaries",
    "read_bundle_boundaries",
    "topic_hash",
]

HASH_SPACE = 1 << 32
FULL_UPPER_BOUND = 0xFFFFFFFF
_RANGE = re.compile(r"0x([0-9a-fA-F]{8})_0x([0-9a-fA-F]{8})")
BUNDLE_NAME_SHAPE = r"[^/]+/[^/]+(?:/[^/]+)?/" + _RANGE.pattern
"""What :func:`bundle_name_problem` accepts but for LOWER below UPPER, as a regular expression that Java's
(Spark's ``rlike``) reads as Python's does: ingest's JVM path passes a bundle name to the Python reader's
rules unless it has this shape (:mod:`shedlab.spark.ingest_fast`)."""


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


def bundle_name_problem(name: str) -> str | None:
    """Why ``name`` is no Pulsar bundle name (``tenant/namespace/0xLOWER_0xUPPER``, a v1 namespace's
    ``tenant/cluster/namespace/…`` too, LOWER below UPPER), or None. A LoadData naming ``notabundle`` had it
    chosen for an unload, the unload ``advise --execute`` would send."""
    namespace, _, bundle_range = name.rpartition("/")
    if not 2 <= len(namespace.split("/")) <= 3 or not all(namespace.split("/")):
        return "not a bundle name (tenant/namespace/0xLOWER_0xUPPER)"
    if parse_range(bundle_range) is None:
        return "not a bundle range (0xLOWER_0xUPPER, eight hex digits each, LOWER below UPPER)"
    return None


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


def namespace_of_topic(topic: str) -> str | None:
    """The namespace of a full topic name, as Pulsar's ``TopicName`` splits it: ``domain://t/ns/local``
    (``t/ns``) or the old ``domain://property/cluster/ns/local`` (``property/cluster/ns``); None when
    ``topic`` is not a full name (no ``domain://``, or too few parts)."""
    domain, sep, rest = topic.partition("://")
    if not sep or domain not in ("persistent", "non-persistent"):
        return None
    parts = rest.split("/", 3)
    if len(parts) < 3 or not all(parts):
        return None
    return "/".join(parts[:2]) if len(parts) == 3 else "/".join(parts[:3])


def bundle_for_topic(topic: str, boundaries: Mapping[str, Sequence[int]]) -> str | None:
    """The bundle name (``ns/0xLLLLLLLL_0xUUUUUUUU``) that owns ``topic`` under its namespace's
    ``boundaries``; None when the topic is not a full name or its namespace has no boundaries."""
    namespace = namespace_of_topic(topic)
    bounds = boundaries.get(namespace) if namespace is not None else None
    if namespace is None or not bounds:
        return None
    i = bundle_of_topic(topic, bounds)
    return bundle_name(namespace, bounds[i], bounds[i + 1])


MAX_BUNDLES = 1 << 20
"""More bundles than this in one namespace is not a namespace Pulsar runs (its own cap,
``loadBalancerNamespaceMaximumBundles``, defaults to 128): refused before anything is allocated."""

_BOUNDARY = re.compile(r"0x[0-9a-fA-F]{8}")


def bundles_data_boundaries(obj: Any, source: str, where: str = "") -> list[int]:
    """The boundaries of Pulsar's ``BundlesData`` (``GET /admin/v2/namespaces/{t}/{ns}/bundles``:
    ``{"boundaries": ["0x00000000", …, "0xffffffff"], "numBundles": N}``), checked as Pulsar keeps them:
    hex strings of 8 digits, strictly ascending from 0x00000000 to 0xffffffff, ``numBundles`` (when
    given) one less than their count. Raises :class:`InputError` naming ``source`` and the field."""
    prefix = f"{where}." if where else ""
    if not isinstance(obj, Mapping):
        raise InputError(
            "expected a JSON object {boundaries, numBundles}", source=source, field=where or None
        )
    raw = obj.get("boundaries")
    if not isinstance(raw, list) or len(raw) < 2:
        raise InputError(
            "expected a list of at least two boundaries",
            source=source,
            field=f"{prefix}boundaries",
            value=raw,
        )
    if len(raw) > MAX_BUNDLES + 1:
        raise InputError(
            f"more than {MAX_BUNDLES} bundles", source=source, field=f"{prefix}boundaries", value=len(raw)
        )
    bounds: list[int] = []
    for i, text in enumerate(raw):
        if not isinstance(text, str) or not _BOUNDARY.fullmatch(text):
            raise InputError(
                "expected a boundary like 0x40000000",
                source=source,
                field=f"{prefix}boundaries[{i}]",
                value=text,
            )
        bounds.append(int(text, 16))
    if bounds[0] != 0 or bounds[-1] != FULL_UPPER_BOUND:
        raise InputError(
            "boundaries must run from 0x00000000 to 0xffffffff",
            source=source,
            field=f"{prefix}boundaries",
            value=[raw[0], raw[-1]],
        )
    for i in range(1, len(bounds)):
        if bounds[i] <= bounds[i - 1]:
            raise InputError(
                "boundaries must be strictly ascending",
                source=source,
                field=f"{prefix}boundaries[{i}]",
                value=raw[i],
            )
    num = obj.get("numBundles")
    if num is not None and (isinstance(num, bool) or not isinstance(num, int) or num != len(bounds) - 1):
        raise InputError(
            f"numBundles does not match the {len(bounds) - 1} bundles of the boundaries",
            source=source,
            field=f"{prefix}numBundles",
            value=num,
        )
    return bounds


def _is_namespace(name: str) -> bool:
    parts = name.split("/")
    return len(parts) in (2, 3) and all(p and not p.startswith(".") for p in parts)


def _boundaries_document(doc: Any, source: str, namespace: str | None) -> dict[str, list[int]]:
    if isinstance(doc, Mapping) and "boundaries" in doc:
        if namespace is None:
            raise InputError(
                "a single BundlesData: name the file <tenant>/<namespace>.json inside a "
                "directory, or map namespaces to BundlesData",
                source=source,
            )
        return {namespace: bundles_data_boundaries(doc, source)}
    if not isinstance(doc, Mapping) or not doc:
        raise InputError(
            "expected {namespace: {boundaries, numBundles}, …} or one BundlesData", source=source
        )
    out: dict[str, list[int]] = {}
    for name, data in doc.items():
        if not _is_namespace(name):
            raise InputError("expected a namespace tenant/namespace", source=source, field=name)
        out[name] = bundles_data_boundaries(data, source, name)
    return out


def read_bundle_boundaries(paths: Sequence[str | Path]) -> dict[str, list[int]]:
    """Every namespace's bundle boundaries from users' files (``ingest --bundles``), through the one reader
    of users' files. A file holds ``{"tenant/ns": <BundlesData>, …}``; a directory holds one
    ``<tenant>/<namespace>.json`` per namespace, each the admin endpoint's answer as is (``curl …/bundles >
    public/default.json``). A namespace given twice is refused."""
    out: dict[str, list[int]] = {}

    def add(found: Mapping[str, list[int]], source: str) -> None:
        for name, bounds in found.items():
            if name in out:
                raise InputError("bundle boundaries given twice for a namespace", source=source, field=name)
            out[name] = bounds

    for given in paths:
        path = Path(given)
        if path.is_dir():
            files = sorted(f for f in path.rglob("*.json") if f.is_file())
            if not files:
                raise InputError("no <tenant>/<namespace>.json files in directory", source=str(path))
            for f in files:
                namespace = f.relative_to(path).with_suffix("").as_posix()
                doc = parse_json_text(read_user_text(f), str(f))
                add(
                    _boundaries_document(doc, str(f), namespace if _is_namespace(namespace) else None), str(f)
                )
        elif path.exists():  # a file, or a pipe (--bundles <(curl …)): read once, here (it was "not found")
            add(
                _boundaries_document(parse_json_text(read_user_text(path), str(path)), str(path), None),
                str(path),
            )
        else:
            raise InputError("not found", source=str(path), field="--bundles")
    return out
