"""``shedlab collect``: read a running cluster at a fixed interval, record it in the format ``ingest`` reads.

Layout of ``--out DIR``:

* ``load-reports-<UTC time>-<cycle>.jsonl``: one file per cycle, the recording format of docs/spark.md
  ("Accepted inputs"): one ``{"timestamp", "broker", "cluster", "report": <LocalBrokerData>}`` line per
  broker that answered, then (ZooKeeper source) one ``{"timestamp", "cluster", "bundle", "data":
  <BundleData>}`` line per stored bundle history. ``shedlab ingest DIR`` reads the directory as it is.
* ``_collect-events.jsonl``: what did not go as planned, one JSON line per event (a broker that did not
  answer, a cycle that failed, the run's start and end). Its name starts with ``_``, so ingest skips it.

**No torn records.** Each cycle's file is written under a hidden temporary name (``.load-reports-….tmp``),
fsynced, then renamed into place (atomic on POSIX) and the directory fsynced: a file either exists whole
or not at all, whatever kills the process (Ctrl-C, SIGKILL, power loss after the rename). A temporary left
by a kill is hidden (ingest skips hidden files) and removed by the next ``collect`` into the directory.
Events are appended as whole lines (one ``write`` on an ``O_APPEND`` descriptor) and fsynced. Chosen over
appending reports to one growing file because a killed append can leave half a line, which ingest would
then quarantine.

**A broker that stops answering** is left out of that cycle's file and recorded as an event; the run goes
on. A cycle that fails as a whole (ZooKeeper lost, the cluster list unreachable) after the first is
recorded as an event too; a failure on the first cycle (wrong address, wrong token, not Pulsar's
modular load manager) stops the run with one line, because nothing would ever be recorded.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from shedlab.cluster.readers import ClusterReading
from shedlab.errors import ClusterError, InputError, ShedlabError, refuse_special_file

__all__ = ["CollectSummary", "Reader", "RecordWriter", "append_line", "collect"]

EVENTS_FILE = "_collect-events.jsonl"


class Reader(Protocol):
    """Either reader of :mod:`shedlab.cluster.readers`."""

    def read(self) -> ClusterReading: ...


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class RecordWriter:
    """Writes one cycle per file, atomically, and appends events (see the module docstring)."""

    def __init__(self, out: Path) -> None:
        self.out = out
        # a pipe there held the run for ever (opening it waits for a reader), before its first read
        refuse_special_file(
            out / EVENTS_FILE,
            "collect appends its events there, each fsynced",
            hint="remove it, or give another --out",
        )
        try:
            out.mkdir(parents=True, exist_ok=True)
            self._events = os.open(out / EVENTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except FileExistsError:  # mkdir's word for "a file is in the way", which read as nonsense here
            what = (  # a dangling link was said to be a file
                f"a symbolic link to {os.readlink(out)}, which does not exist"
                if out.is_symlink() and not out.exists()
                else "a file, not a directory"
            )
            raise InputError(f"cannot write here: {what}", source=str(out)) from None
        except OSError as exc:
            raise InputError(f"cannot write here: {exc.strerror or exc}", source=str(out)) from None
        try:
            # One collect per directory: a second one removed the first's temporary file of the cycle it
            # was writing (its clean-up below), and the first then stopped, that cycle lost. The lock goes
            # with the process, however it ends.
            fcntl.flock(self._events, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._events)
            raise InputError(
                "another collect is recording into this directory", source=str(out), hint="give another --out"
            ) from None
        try:
            for stale in out.glob(".load-reports-*.tmp"):
                stale.unlink()  # a kill mid-write: never renamed, never visible
        except OSError as exc:
            os.close(self._events)
            raise InputError(f"cannot write here: {exc.strerror or exc}", source=str(out)) from None

    def write_cycle(self, reading: ClusterReading, cycle: int) -> Path:
        """The cycle's file, made visible whole by a hard link that never replaces an existing record: a
        rerun into the same directory within the same second numbers its cycles from 1 again, and an
        ``os.replace`` there silently overwrote the earlier run's record."""
        stamp = datetime.fromtimestamp(reading.time_ms / 1000, UTC).strftime("%Y%m%dT%H%M%S")
        name = f"load-reports-{stamp}-{cycle:06d}"
        temp = self.out / f".{name}.jsonl.tmp"
        lines = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in reading.records())
        try:
            with open(temp, "w", encoding="utf-8") as handle:
                handle.write(lines)
                handle.flush()
                os.fsync(handle.fileno())
            final = self._link_new(temp, name)
            _fsync_dir(self.out)
        except OSError as exc:  # the disk full, the directory removed or made read-only under the run
            raise InputError(
                f"cannot write the record of cycle {cycle}: {exc.strerror or exc}", source=str(self.out)
            ) from None
        finally:
            with contextlib.suppress(OSError):
                temp.unlink()
        return final

    def _link_new(self, temp: Path, name: str) -> Path:
        """Link ``temp`` under ``name.jsonl``, or ``name-2.jsonl``, … the first name no record has."""
        for attempt in range(1, 10_000):
            final = self.out / (f"{name}.jsonl" if attempt == 1 else f"{name}-{attempt}.jsonl")
            try:
                os.link(temp, final)
            except FileExistsError:
                continue
            return final
        raise InputError("too many records with the same name", source=str(self.out / name))

    def event(self, entry: dict[str, Any]) -> None:
        now = datetime.now(UTC).isoformat(timespec="milliseconds")
        line = json.dumps({"time": now, **entry}) + "\n"
        append_line(self._events, line, self.out / EVENTS_FILE, f"the {entry.get('event')} event")

    def close(self) -> None:
        os.close(self._events)


def append_line(fd: int, line: str, path: Path, what: str) -> None:
    """``line`` appended whole (one ``write`` on an ``O_APPEND`` descriptor) and fsynced: collect's events
    and advise's audit. A failure (the disk full, an I/O error) is one line naming the file and ``what`` was
    not written (an audit entry that says an unload was sent): it was an ``OSError`` traceback."""
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    except OSError as exc:
        raise InputError(f"cannot write {what}: {exc.strerror or exc}", source=str(path)) from None


@dataclass
class CollectSummary:
    cycles: int = 0
    reports: int = 0
    bundles: int = 0
    missing: int = 0
    failed_cycles: int = 0
    files: list[Path] = field(default_factory=list)
    interrupted: bool = False


def collect(
    reader: Reader,
    writer: RecordWriter,
    *,
    every_s: float,
    count: int | None = None,
    duration_s: float | None = None,
    on_cycle: Callable[[int, ClusterReading | None, CollectSummary], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> CollectSummary:
    """Read every ``every_s`` seconds until ``count`` cycles or ``duration_s`` seconds have passed (or
    forever); a KeyboardInterrupt ends the run cleanly (``interrupted``), everything written kept."""
    summary = CollectSummary()
    start = clock()
    writer.event({"event": "start", "every_s": every_s, "count": count, "duration_s": duration_s})
    try:
        cycle = 0
        due = start
        while count is None or cycle < count:
            if duration_s is not None and cycle > 0 and clock() - start >= duration_s:
                break
            cycle += 1
            reading = _one_cycle(reader, writer, cycle, summary)
            if on_cycle is not None:
                on_cycle(cycle, reading, summary)
            if count is not None and cycle >= count:
                break
            # A read that overran its slot (brokers timing out) is followed at once by the next, and the
            # schedule starts again from there: the slots missed meanwhile are not made up for, which
            # would run that many reads back to back, all recording the same second.
            due = max(due + every_s, clock())
            wait = due - clock()
            if duration_s is not None:
                wait = min(wait, start + duration_s - clock())
            if wait > 0:
                sleep(wait)
    except KeyboardInterrupt:
        summary.interrupted = True
    except BaseException as exc:
        _end_event(writer, summary, exc)
        raise
    _end_event(writer, summary)
    return summary


def _end_event(writer: RecordWriter, summary: CollectSummary, failure: BaseException | None = None) -> None:
    """The events file's last line, ``end``, however the run ends: a run stopped by an error (the first
    read failing, a record that cannot be written) left the file without one, as if still recording. It
    names the error (a :class:`ShedlabError`'s line, another's type only); an ``end`` that cannot be written
    then is left out, the error that stopped the run being the one to show."""
    entry: dict[str, Any] = {"event": "end", "cycles": summary.cycles, "interrupted": summary.interrupted}
    if failure is None:
        writer.event(entry)
        return
    entry["error"] = str(failure) if isinstance(failure, ShedlabError) else type(failure).__name__
    with contextlib.suppress(ShedlabError):
        writer.event(entry)


def _one_cycle(
    reader: Reader, writer: RecordWriter, cycle: int, summary: CollectSummary
) -> ClusterReading | None:
    try:
        reading = reader.read()
    except ShedlabError as exc:
        if cycle == 1 or not isinstance(exc, ClusterError):
            raise
        summary.failed_cycles += 1
        writer.event({"event": "cycle_failed", "cycle": cycle, "error": str(exc)})
        return None
    summary.files.append(writer.write_cycle(reading, cycle))
    summary.cycles += 1
    summary.reports += len(reading.reports)
    summary.bundles += sum(len(r.get("lastStats") or {}) for r in reading.reports.values())
    for broker, why in sorted(reading.missing.items()):
        summary.missing += 1
        writer.event(
            {
                "event": "broker_missing",
                "cycle": cycle,
                "broker": broker,
                "error": why,
                "timestamp": reading.time_ms,
            }
        )
    return reading
