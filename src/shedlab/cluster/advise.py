"""``shedlab advise``: what the strategy would unload from a real cluster now, and, only when asked, doing it.

The decision is :class:`~shedlab.core.decide.Decider`'s (one home for the leader's cycle and its reasons);
this module adds what a real cluster needs around it:

* :func:`read_snapshot_path`: a snapshot from files, without hand assembly: a LoadData document (as
  ``decide`` reads), one load report, or a directory of per-broker load reports (bare LocalBrokerData as
  ``GET /admin/v2/broker-stats/load-report`` returns it, or the recording wrapper ``collect`` writes, plus
  BundleData dumps). The latest report per broker is taken.
* :class:`Guard`: when executing is allowed. It refuses a whole cycle when the snapshot is older than
  ``loadBalancerReportUpdateMaxIntervalMinutes`` (a broker writes its report at least that often, so an
  older one means it stopped reporting or the snapshot is old) and a grace (:attr:`Guard.grace_ms`),
  when a listed broker's report is missing, or when the snapshot has no read time; and it caps the
  unloads per cycle (``--max-unloads``), like Cruise Control's movement caps, and the cycles under
  ``--watch`` to one per ``loadBalancerSheddingIntervalMinutes``, as the leader's. Dry-run is the
  default: nothing is called without ``--execute``.
* the **owner check** (:func:`execute`): just before each unload, the bundle's owner is read again (its
  ownership znode, or the source broker's ``ownedNamespaces``); a bundle its source no longer owns is
  ``skipped`` (it moved since the reports were written: unloading it would move it again, from its new
  owner), and so is one its source is unloading already (``disabled``, ``is_active`` false: it is leaving,
  and Pulsar refuses a second unload); one whose owner cannot be read is ``unverified``; none is sent.
* :class:`AuditLog`: every action and refusal as one JSON line, appended and fsynced (never the token).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

from shedlab import jsonout
from shedlab.cluster.access import Token, scrub
from shedlab.cluster.collect import append_line
from shedlab.cluster.readers import (
    AdminReader,
    ClusterReading,
    Ownership,
    ZooKeeperReader,
    extensible_marker,
)
from shedlab.core.decide import Decision, Outcome, load_snapshot_file
from shedlab.core.locations import walk
from shedlab.core.partitions import cluster_problem
from shedlab.errors import (
    ClusterError,
    InputError,
    ShedlabError,
    parse_json_text,
    read_user_text,
    refuse_special_file,
)
from shedlab.model.formats import FormatError, epoch_ms
from shedlab.model.pulsar import LoadData
from shedlab.model.snapshot import ClusterSnapshot

__all__ = [
    "CLOCK_SLACK_MS",
    "NO_ADMIN_URL",
    "ActionResult",
    "AuditLog",
    "Guard",
    "OwnerLookup",
    "SnapshotInput",
    "execute",
    "owner_lookup",
    "read_snapshot_path",
    "snapshot_of",
    "unloaded_bundles",
]

NO_ADMIN_URL = "no --admin-url to send the unloads to"
"""The refusal of every ``--execute`` cycle without an admin URL (a ``--snapshot`` rehearsal)."""

_SUFFIXES = (".json", ".jsonl", ".ndjson")


@dataclass
class SnapshotInput:
    """A snapshot to advise on: a reading (from a cluster or files), or a LoadData document as is."""

    reading: ClusterReading | None = None
    load_data_file: Path | None = None


def _broker_of(record: dict[str, Any], report: dict[str, Any], where: str) -> str:
    from shedlab.core.ingest import broker_id_from_url  # pandas: only when files are read

    # A recording's own field: a bad one is refused, not replaced (28 Nov 2026); null is absent, as ingest
    # reads it (and as a null timestamp or cluster is here).
    if record.get("broker") is not None:
        broker = record["broker"]
        if not isinstance(broker, str) or not broker.strip():
            raise InputError("expected the broker's id as text", source=where, field="broker", value=broker)
        return broker
    for key in ("webServiceUrl", "webServiceUrlTls"):
        value = report.get(key)
        found = broker_id_from_url(value if isinstance(value, str) else None)
        if found:
            return found
    raise InputError(
        "cannot tell which broker this report is from (no broker, no webServiceUrl)", source=where
    )


def _suffix(path: Path) -> str:
    """The suffix of a recording's text: ``.jsonl`` for ``a.jsonl`` and ``a.jsonl.gz`` alike."""
    return Path(path.name.removesuffix(".gz")).suffix


def _records(path: Path) -> Iterator[tuple[str, Any]]:
    text = read_user_text(path, what="snapshot file", gunzip=True)
    if _suffix(path) == ".json":
        doc = parse_json_text(text, str(path))
        if isinstance(doc, list):
            yield from ((f"{path}[{i}]", item) for i, item in enumerate(doc))
        else:
            yield str(path), doc
        return
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield f"{path}:{number}", parse_json_text(line, f"{path}:{number}")


def _is_load_data(doc: Any) -> bool:
    return isinstance(doc, dict) and any(k in doc for k in ("brokers", "brokerData", "loadData", "ticks"))


def _is_number(value: object) -> TypeGuard[int | float]:
    """A JSON number (``True`` is an int to Python, not a number to JSON)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _record_time(record: dict[str, Any], report: dict[str, Any], where: str) -> int:
    """The record's ``timestamp`` (else its report's ``lastUpdate``; neither: 0) in ms, read by ingest's
    rule (:func:`~shedlab.model.formats.epoch_ms`). One that is not a time is refused: read as 0, as it
    was until 28 Nov 2026, the line lost silently to every other report of its broker."""
    field = "timestamp" if record.get("timestamp") is not None else "lastUpdate"
    try:
        stamp = epoch_ms(record["timestamp"] if field == "timestamp" else report.get("lastUpdate"))
    except FormatError as exc:
        raise InputError(exc.message, source=where, field=field) from None
    return 0 if stamp is None else stamp


def _add(reading: ClusterReading, times: dict[str, int], where: str, record: Any) -> None:
    if not isinstance(record, dict):
        raise InputError("expected a JSON object (a load report)", source=where)
    report = record.get("report", record)
    if isinstance(record.get("data"), dict) and isinstance(record.get("bundle"), str):
        reading.bundle_data[record["bundle"]] = record["data"]
        reading.bundle_origin[record["bundle"]] = where
        return
    if isinstance(record.get("bundleData"), dict):
        reading.bundle_data.update(record["bundleData"])
        reading.bundle_origin.update((name, f"{where}: bundleData") for name in record["bundleData"])
        return
    if not isinstance(report, dict):
        raise InputError("report: expected a JSON object", source=where)
    marker = extensible_marker(report)
    if marker is not None:
        raise ClusterError(f"the extensible load manager's data: {marker}", source=where)
    if record.get("error") is not None and "report" not in record:
        return  # collect's record of a broker that did not answer
    broker = _broker_of(record, report, where)
    when = _record_time(record, report, where)
    cluster = _cluster_of(record, where)
    if broker not in times or when >= times[broker]:
        times[broker] = when
        reading.reports[broker] = report
        reading.origin[broker] = where
        if cluster:
            reading.cluster = cluster


def _cluster_of(record: dict[str, Any], where: str) -> str | None:
    """A recording's ``cluster``, or None; one that is not text, or a name Pulsar refuses, is refused as
    ingest quarantines it (it was passed over, or taken, the reading labelled with another cluster)."""
    cluster = record.get("cluster")
    if cluster is not None and not isinstance(cluster, str):
        raise InputError("expected the cluster's name as text", source=where, field="cluster", value=cluster)
    problem = cluster_problem(cluster) if cluster else None
    if problem is not None:
        raise InputError(problem, source=where, field="cluster")
    return cluster


def _is_report_file(p: Path) -> bool:
    """A file of a snapshot directory: ``*.json``/``*.jsonl`` (or gzipped), not hidden, not ``_``
    (Spark's markers). A broken symbolic link of that name is one too, so that reading it refuses it,
    naming it: it was passed over, silently, and its broker was left out of the decision."""
    broken_link = p.is_symlink() and not p.exists()
    return (p.is_file() or broken_link) and _suffix(p) in _SUFFIXES and not p.name.startswith((".", "_"))


def read_snapshot_path(path: Path) -> SnapshotInput:
    """A file or a directory of files (``*.json``, ``*.jsonl``, gzipped or not; hidden and ``_`` files
    skipped) as a snapshot; the latest report per broker (by ``timestamp``, else ``lastUpdate``) is kept."""
    if path.is_dir():
        files = sorted(walk(path, "*", _is_report_file))
        if not files:
            raise InputError("no *.json or *.jsonl load reports in this directory", source=str(path))
    elif path.is_file():
        text = read_user_text(path, what="snapshot file", gunzip=True)
        if _suffix(path) == ".json" and _is_load_data(parse_json_text(text, str(path))):
            return SnapshotInput(load_data_file=path)
        files = [path]
    else:  # a pipe, a device: it was "not found"
        refuse_special_file(
            path, "a snapshot is read more than once (its kind, then its reports; every cycle)"
        )
        raise InputError("snapshot not found", source=str(path))
    reading = ClusterReading(source=str(path), cluster="pulsar", time_ms=0)
    times: dict[str, int] = {}
    for file in files:
        for where, record in _records(file):
            if _is_load_data(record):
                raise InputError("a LoadData document among load reports: give it on its own", source=where)
            _add(reading, times, where, record)
    if not reading.reports:
        raise InputError("no load report found", source=str(path))
    reading.time_ms = max(times.values())
    return SnapshotInput(reading=reading)


def snapshot_of(source: SnapshotInput, history: dict[str, Any] | None = None) -> ClusterSnapshot:
    """The leader's columnar view of a reading (bundle histories reconstructed, see ``readers``)."""
    if source.load_data_file is not None:
        return load_snapshot_file(source.load_data_file)
    reading = source.reading
    assert reading is not None
    load_data: LoadData = reading.load_data(history)
    return ClusterSnapshot.from_load_data(load_data, now_ms=reading.time_ms, source=reading.source)


# ------------------------------------------------------------------------------------------ guard

CLOCK_SLACK_MS = 60_000
"""What the staleness guard allows beyond a rewrite's check interval: the write and the read, clocks that
differ between the brokers stamping ``lastUpdate`` and the machine running advise, and the sandbox, whose
brokers rewrite at its one-minute steps (at the first step after the maximum)."""


@dataclass(frozen=True)
class Guard:
    """When ``--execute`` may act, and how much (see the module docstring)."""

    max_unloads: int = 1
    max_age_minutes: int = 15
    min_every_minutes: int = 1
    report_check_ms: int = 5_000
    """``loadBalancerReportUpdateMinIntervalMillis``: how often a broker checks whether to rewrite its
    report (:attr:`grace_ms`)."""

    @property
    def grace_ms(self) -> int:
        """How much older than ``max_age_minutes`` a healthy broker's report may be: a broker rewrites it
        at its first report check after the maximum, so an idle broker's report reaches the maximum plus
        :attr:`report_check_ms`, and a cluster of many idle brokers nearly always has one in that window;
        plus :data:`CLOCK_SLACK_MS`."""
        return self.report_check_ms + CLOCK_SLACK_MS

    def check_every(self, every_s: float, given: str) -> None:
        """``--watch --execute`` cycles no more often than the leader sheds
        (``loadBalancerSheddingIntervalMinutes``): the cap is per cycle, so ``--every 1s`` typed for
        ``1m`` unloaded up to ``--max-unloads`` bundles every second."""
        if every_s < self.min_every_minutes * 60:
            raise InputError(
                f"with --execute, cycles at most as often as the leader sheds, every "
                f"loadBalancerSheddingIntervalMinutes={self.min_every_minutes} min",
                field="--every",
                value=given,
                hint="each cycle unloads up to --max-unloads: raise that to move more bundles a cycle",
            )

    def refusals(self, source: SnapshotInput, now_ms: int) -> list[str]:
        """Why this cycle must not act (empty: it may)."""
        reading = source.reading
        if reading is None:
            return [
                "a LoadData file has no read time: its age cannot be checked (use --zookeeper or --admin-url)"
            ]
        out: list[str] = []
        limit_ms = self.max_age_minutes * 60_000
        stale_ms = limit_ms + self.grace_ms
        age = now_ms - reading.time_ms
        if age > stale_ms:
            out.append(
                f"snapshot is stale: read {age / 60_000:.1f} min ago, more than "
                f"loadBalancerReportUpdateMaxIntervalMinutes={self.max_age_minutes}{self._grace}"
            )
        elif -age > limit_ms:
            out.append(f"snapshot is dated {-age / 60_000:.1f} min in the future: {self._ageless}")
        for broker, why in sorted(reading.missing.items()):
            out.append(f"report of {broker} is missing: {why}")
        for broker, report in sorted(reading.reports.items()):
            last = report.get("lastUpdate")
            if not _is_number(last) or not last > 0:
                # Pulsar always writes it (the time of the report): without it the age is unknown
                out.append(f"report of {broker} has no usable lastUpdate ({last!r}): its age is unknown")
            elif now_ms - last > stale_ms:
                out.append(
                    f"report of {broker} is stale: lastUpdate {(now_ms - last) / 60_000:.1f} min ago, more "
                    f"than loadBalancerReportUpdateMaxIntervalMinutes={self.max_age_minutes}{self._grace}"
                )
            elif last - now_ms > limit_ms:
                out.append(
                    f"report of {broker} has a lastUpdate {(last - now_ms) / 60_000:.1f} min in the future: "
                    f"{self._ageless}"
                )
        return out

    @property
    def _grace(self) -> str:
        return f" and {self.grace_ms / 1000:g} s of grace (a rewrite's check interval and clocks)"

    @property
    def _ageless(self) -> str:
        """Why a time further ahead than the limit is refused: a negative age passed the staleness check,
        so a report dated in the year 287,000 (a garbage ``lastUpdate``) was fresh for ever, and a broker
        whose clock runs an hour ahead stayed fresh an hour after it stopped reporting."""
        return (
            f"its age is unknown (a clock ahead by more than "
            f"loadBalancerReportUpdateMaxIntervalMinutes={self.max_age_minutes}?)"
        )


class AuditLog:
    """JSON lines, one per action or refusal; each line is written whole (one ``write`` on an
    ``O_APPEND`` descriptor) and fsynced before the next action, so a crash loses at most the line being
    written. An unload has a line before it is sent (``unloading``) and one with its outcome: the outcome
    line alone, written after the call, left an unload a kill interrupted (Ctrl-C, SIGKILL, the machine)
    unrecorded although the broker may have done it."""

    def __init__(self, path: Path, token: Token | None = None) -> None:
        self.path = path
        self.token = token
        # a pipe held the run for ever (opening it waits for a reader), a device failed its first fsync
        # with a traceback (/dev/null: EINVAL), after the decisions: neither keeps a record
        refuse_special_file(
            path,
            "the audit log is a record kept on disk, each line fsynced",
            field="--audit",
            hint=_NEW_AUDIT,
        )
        _check_appendable(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except FileExistsError:  # mkdir's word for "a file is in the way of the parent directory"
            raise InputError(
                f"cannot write the audit log: {path.parent} is a file, not a directory", source=str(path)
            ) from None
        except OSError as exc:
            raise InputError(f"cannot write the audit log: {exc.strerror or exc}", source=str(path)) from None

    def write(self, entry: dict[str, Any]) -> None:
        now = datetime.now(UTC)
        line = jsonout.dumps({"time": now.isoformat(timespec="milliseconds"), **entry})
        what = f"the audit entry {entry.get('action')} {entry.get('bundle') or ''}".rstrip()
        if entry.get("action") == "unloading":
            what += " (its unload was not sent)"
        append_line(self._fd, scrub(line, self.token) + "\n", self.path, what)

    def close(self) -> None:
        os.close(self._fd)


_NEW_AUDIT = "give --audit a new file, or an earlier audit log"


def _check_appendable(path: Path) -> None:
    """Refuse an existing file that is not an audit log: a new one, an empty one or an earlier audit log
    (its first line an entry, with ``time`` and ``action``) is appended to. ``--audit broker.conf`` (or
    the ``--snapshot`` file) had JSON lines appended to it."""
    try:
        with path.open("rb") as existing:
            first = existing.readline(1 << 16)
    except OSError:  # none there (the usual case), or not readable: opening it for append says why
        return
    if not first.strip():
        return
    try:
        entry = json.loads(first)
    except ValueError:
        entry = None
    if not (isinstance(entry, dict) and "time" in entry and "action" in entry):
        raise InputError(
            "exists and is not an advise audit log (its first line is no audit entry): the audit would be "
            "appended to it",
            source=str(path),
            hint=_NEW_AUDIT,
        )


OwnerLookup = Callable[[Decision], Ownership]
"""Who owns a decision's bundle now (raises :class:`ShedlabError` when that cannot be read)."""


def owner_lookup(
    zookeeper: ZooKeeperReader | None, admin: AdminReader | None, source: SnapshotInput
) -> OwnerLookup | None:
    """How to read a bundle's owner just before unloading it: its ownership znode when the cluster is read
    from ZooKeeper, else the source broker's ``ownedNamespaces`` (then the other brokers of the reading, to
    name the new owner); None without either (nothing is sent then).

    A znode naming the source as the active owner is confirmed by the source's own ``ownedNamespaces``
    when the admin API is given (``--execute`` needs it): recent Pulsar brokers mark a bundle they are
    unloading in memory only (``is_active: false``), not in the znode (``disabled`` stays false, as the
    znode is deleted at the end), so the znode alone sent an unload the owner then refused (HTTP 500 ``is
    being unloaded``)."""
    if zookeeper is not None:
        return lambda decision: _confirmed(zookeeper.bundle_owner(decision.bundle), decision, admin)
    if admin is not None:
        reading = source.reading
        brokers = sorted({*reading.reports, *reading.missing}) if reading is not None else []
        return lambda decision: admin.bundle_owner(decision.bundle, decision.source, brokers)
    return None


def _confirmed(found: Ownership, decision: Decision, admin: AdminReader | None) -> Ownership:
    """``found`` (from the znode), or the source's own answer when it says the source is unloading it."""
    if admin is None or found.owner != decision.source or not found.active:
        return found
    listed = admin.bundle_owner(decision.bundle, decision.source)
    return listed if listed.owner == decision.source and not listed.active else found


@dataclass
class ActionResult:
    """What ``execute`` did with one decision."""

    decision: Decision
    action: str  # "unloaded"; "capped" (over --max-unloads, in a dry run too); "refused" (the guard);
    # "failed"; "dry-run"; "skipped" (the bundle is no longer the source's); "unverified" (its owner
    # could not be read); "unloading" (the audit's line before the call)
    detail: str = ""
    status: int | None = None
    owner: str | None = None  # the bundle's owner as read just before the unload (None: not read, nobody)

    def to_json(self) -> dict[str, Any]:
        d = self.decision
        return {
            "action": self.action,
            "broker": d.source,
            "bundle": d.bundle,
            "destination": d.destination,
            "status": self.status,
            "owner": self.owner,
            "detail": self.detail,
        }


UNLOADED = "unloaded"


def unloaded_bundles(results: list[ActionResult]) -> set[str]:
    """The bundles whose unload succeeded: the only ones the leader's bookkeeping takes as moved."""
    return {r.decision.bundle for r in results if r.action == UNLOADED}


def execute(
    outcome: Outcome,
    source: SnapshotInput,
    *,
    guard: Guard,
    admin: AdminReader | None,
    audit: AuditLog | None,
    cycle: int,
    dry_run: bool,
    now_ms: int | None = None,
    owners: OwnerLookup | None = None,
) -> list[ActionResult]:
    """Act on ``outcome``'s decisions under ``guard`` (or only record them, in dry-run), auditing each.
    Each unload is sent only if ``owners`` says its source still owns the bundle (:func:`_owner_check`)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    results: list[ActionResult] = []
    refusals = [] if dry_run else guard.refusals(source, now)
    if not dry_run and admin is None:
        refusals.append(NO_ADMIN_URL)

    def record(result: ActionResult) -> None:
        if audit is not None:
            entry = {"cycle": cycle, "strategy": outcome.strategy, **result.to_json()}
            audit.write({**entry, "reason": _reason_line(result.decision)})

    for k, decision in enumerate(outcome.decisions):
        if dry_run:
            result = _rehearsed(decision, k >= guard.max_unloads, guard)
        elif refusals:
            result = ActionResult(decision, "refused", "; ".join(refusals))
        elif k >= guard.max_unloads:
            result = ActionResult(decision, "capped", _over_the_cap(guard))
        elif decision.destination is None:
            result = ActionResult(decision, "refused", "no destination broker")
        else:
            assert admin is not None
            result = _owner_check(decision, owners) or _unload(decision, admin, record)
        results.append(result)
        record(result)
    if refusals and not outcome.decisions and audit is not None and not dry_run:
        audit.write({"cycle": cycle, "action": "refused", "detail": "; ".join(refusals)})
    return results


def _over_the_cap(guard: Guard) -> str:
    return f"over --max-unloads={guard.max_unloads} for this cycle"


def _rehearsed(decision: Decision, capped: bool, guard: Guard) -> ActionResult:
    """A dry run's action: ``capped`` beyond ``--max-unloads`` (by the same place in the strategy's order
    as ``--execute`` counts), as ``--execute`` would hold it back, else ``dry-run``. Every decision was
    ``dry-run``: the operator could not tell which ones an ``--execute`` of this cycle would send."""
    if capped:
        why = f"{_over_the_cap(guard)}: --execute would hold it back; nothing was called (dry-run)"
        return ActionResult(decision, "capped", why)
    return ActionResult(decision, "dry-run", "nothing was called (dry-run is the default)")


def _owner_check(decision: Decision, owners: OwnerLookup | None) -> ActionResult | None:
    """None when ``decision.source`` still owns the bundle (and is not unloading it): send. Otherwise why
    not: the decision was made from load reports that can be minutes old, and Pulsar's unload acts on
    whichever broker owns the bundle *now*: a bundle that moved since would move a second time, from its
    new owner. An owner that cannot be read is no licence to send (``unverified``)."""
    if owners is None:
        return ActionResult(decision, "unverified", "no way to read the bundle's owner: not sent")
    try:
        found = owners(decision)
    except ShedlabError as exc:
        return ActionResult(decision, "unverified", f"its owner could not be read, not sent: {exc}")
    if found.owner == decision.source and found.active:
        return None
    if found.owner == decision.source:
        why = f"{found.owner} is unloading it already"
    elif found.owner is not None:
        why = f"owned by {found.owner} now, not {decision.source}"
    elif found.unknown:
        why = f"no longer owned by {decision.source}; its owner now could not be read ({found.unknown})"
    else:
        why = f"unowned now (no longer owned by {decision.source})"
    return ActionResult(decision, "skipped", f"{why}; not sent (read {found.where})", owner=found.owner)


def _unload(decision: Decision, admin: AdminReader, record: Callable[[ActionResult], None]) -> ActionResult:
    """The unload call, with the audit's ``unloading`` line written (and fsynced) before it: killed while
    the broker has it, the audit still says that this unload was sent, with no outcome line after it."""
    record(ActionResult(decision, "unloading", "sending; its outcome is the next line for it"))
    try:
        status = admin.unload(decision.bundle, decision.destination)
    except ShedlabError as exc:
        return ActionResult(decision, "failed", str(exc))
    return ActionResult(decision, UNLOADED, "", status, owner=decision.source)


def _reason_line(decision: Decision) -> dict[str, Any]:
    """The decision's reason, numbers included, for the audit (JSON-safe values only)."""
    return {k: v for k, v in decision.reason.items() if isinstance(v, str | int | float | bool | list)}
