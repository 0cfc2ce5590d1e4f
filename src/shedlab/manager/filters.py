"""The leader's broker filter pipeline (``selectBroker``, spec §4.5 step 6), read from the brokers' reports.

Pulsar runs two filters on the candidates left by the max-topics and even-distribution steps:

* ``BrokerLoadManagerClassFilter`` drops every broker whose report names another ``loadManagerClassName``
  than the leader's configuration (a report without one counts as another: brokers of a release before
  the field, or of a cluster half-way through a move to the extensible manager, are never chosen);
* ``BrokerVersionFilter``, only with ``preferLaterVersions``, keeps the brokers whose ``brokerVersionString``
  equals the newest one among the candidates. It throws when a candidate has no version, one that is not
  semantic versioning (jsemver's strict grammar: ``2.10.4.1`` is not), or when no candidate is left; the
  leader then adds its isolation-policy set back (§4.5 step 2), which undoes every filter before it.

Both read fields a snapshot carries only when it was built from Pulsar's LoadData
(:meth:`~shedlab.model.snapshot.ClusterSnapshot.from_load_data`); the simulator's snapshots leave them out,
since every simulated broker runs the configured manager at one version, and the filters keep everyone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from shedlab.config import LoadBalancerConfig
from shedlab.model.snapshot import ClusterSnapshot, IntArray

__all__ = ["SemVer", "filter_pipeline", "parse_semver"]

_IDENT = r"[0-9A-Za-z-]+"
_NUMBER = r"0|[1-9][0-9]*"
_SEMVER = re.compile(
    rf"({_NUMBER})\.({_NUMBER})\.({_NUMBER})(?:-({_IDENT}(?:\.{_IDENT})*))?(?:\+({_IDENT}(?:\.{_IDENT})*))?",
    re.ASCII,
)
_INT_MAX = 2147483647
_JAVA_INT = re.compile(r"[+-]?[0-9]+", re.ASCII)


class SemVer(NamedTuple):
    """A parsed version (``com.github.zafarkhaja.semver.Version`` 0.9, which Pulsar uses): its core and its
    pre-release and build identifiers (None: absent)."""

    core: tuple[int, int, int]
    pre: tuple[str, ...] | None
    build: tuple[str, ...] | None

    def compare(self, other: SemVer, *, builds: bool = False) -> int:
        """``Version.compareTo`` (what ``equals`` compares), or with ``builds`` ``Version.BUILD_AWARE_ORDER``:
        the core, then the pre-release (none above any), then the build (likewise)."""
        result = (self.core > other.core) - (self.core < other.core)
        if result == 0:
            result = _compare_metadata(self.pre, other.pre)
        if result == 0 and builds:
            result = _compare_metadata(self.build, other.build)
        return result


def _java_int(text: str) -> int | None:
    """``Integer.parseInt``, None where it throws."""
    if _JAVA_INT.fullmatch(text) is None:
        return None
    value = int(text)
    return value if -_INT_MAX - 1 <= value <= _INT_MAX else None


def _compare_metadata(mine: tuple[str, ...] | None, theirs: tuple[str, ...] | None) -> int:
    """``MetadataVersion.compareTo``: absent is above present; identifiers that both parse as a Java int
    compare by their (int-wrapped) difference, any others as strings; then the shorter list is lower."""
    if mine is None or theirs is None:
        return (mine is None) - (theirs is None)
    for a, b in zip(mine, theirs, strict=False):
        x, y = _java_int(a), _java_int(b)
        if x is not None and y is not None:
            result = (x - y + 2**31) % 2**32 - 2**31
        else:
            result = (a > b) - (a < b)
        if result:
            return result
    return len(mine) - len(theirs)


def parse_semver(text: str | None) -> SemVer | None:
    """jsemver's ``Version.valueOf``, or None where it throws (no version, not
    MAJOR.MINOR.PATCH[-pre][+build], a leading zero in a number, a number past Java's int)."""
    match = _SEMVER.fullmatch(text) if text else None
    if match is None:
        return None
    core = (int(match[1]), int(match[2]), int(match[3]))
    pre = None if match[4] is None else tuple(match[4].split("."))
    build = None if match[5] is None else tuple(match[5].split("."))
    if max(core) > _INT_MAX or any(i.isdigit() and len(i) > 1 and i[0] == "0" for i in pre or ()):
        return None  # a numeric pre-release identifier has no leading zero; a build's may
    return SemVer(core, pre, build)


def _newest(candidates: IntArray, versions: Sequence[SemVer | None]) -> IntArray | None:
    """BrokerVersionFilter: the candidates equal to the newest version, None where the filter throws."""
    if candidates.size == 0:
        return None
    parsed = [versions[i] for i in candidates.tolist()]
    known = [v for v in parsed if v is not None]
    if len(known) < len(parsed):
        return None
    latest = known[0]
    for version in known[1:]:  # strictly newer replaces, as Java's loop does
        if latest.compare(version, builds=True) < 0:
            latest = version
    keep = [v.compare(latest) == 0 for v in known]
    result: IntArray = candidates[np.array(keep, dtype=np.bool_)]
    return result


def filter_pipeline(
    snapshot: ClusterSnapshot,
    candidates: IntArray,
    policy_set: IntArray,
    conf: LoadBalancerConfig,
    versions: Sequence[SemVer | None] | None,
) -> IntArray:
    """§4.5 step 6 over ``candidates``; ``policy_set`` (step 2) is what a throwing filter restores.

    ``versions``: every snapshot broker's parsed ``brokerVersionString`` (None: the snapshot has none)."""
    classes = snapshot.broker_load_manager_class
    if classes is not None and candidates.size:
        mine = conf.load_manager_class_name
        same = np.fromiter((classes[i] == mine for i in candidates.tolist()), np.bool_, candidates.size)
        candidates = candidates[same]
    if conf.prefer_later_versions and versions is not None:
        newest = _newest(candidates, versions)
        return policy_set if newest is None else newest
    return candidates
