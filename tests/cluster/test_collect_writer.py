"""collect's record writer: whole files only, and never one record written over another."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from shedlab.cluster.collect import RecordWriter
from shedlab.cluster.readers import ClusterReading
from shedlab.errors import InputError


def _reading(load: float) -> ClusterReading:
    return ClusterReading("admin", "c", 1_700_000_000_000, reports={"b1:8080": {"cpu": {"usage": load}}})


def test_a_rerun_in_the_same_second_keeps_both_records(tmp_path: Path) -> None:
    first = RecordWriter(tmp_path)
    a = first.write_cycle(_reading(1.0), 1)
    first.close()
    second = RecordWriter(tmp_path)  # a rerun numbers its cycles from 1 again, at the same reading time
    b = second.write_cycle(_reading(2.0), 1)
    c = second.write_cycle(_reading(3.0), 1)
    second.close()
    assert len({a, b, c}) == 3
    assert [p.name for p in (a, b, c)] == [
        "load-reports-20231114T221320-000001.jsonl",
        "load-reports-20231114T221320-000001-2.jsonl",
        "load-reports-20231114T221320-000001-3.jsonl",
    ]
    loads = [json.loads(p.read_text())["report"]["cpu"]["usage"] for p in (a, b, c)]
    assert loads == [1.0, 2.0, 3.0]  # nothing overwritten
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_dangling_link_is_said_as_such(tmp_path: Path) -> None:
    """``--out`` a symbolic link to a directory that does not exist was said to be 'a file'."""
    out = tmp_path / "rec"
    out.symlink_to(tmp_path / "gone")
    with pytest.raises(InputError) as caught:
        RecordWriter(out)
    assert (
        str(caught.value)
        == f"{out}: cannot write here: a symbolic link to {tmp_path / 'gone'}, which does not exist"
    )


def test_an_events_file_that_is_a_pipe_is_refused(tmp_path: Path) -> None:
    """``_collect-events.jsonl`` a pipe: opening it for the events waited for a reader, for ever."""
    events = tmp_path / "_collect-events.jsonl"
    os.mkfifo(events)
    held = os.open(events, os.O_RDWR | os.O_NONBLOCK)  # a reader: a writer that opens it does not wait
    try:
        with pytest.raises(InputError) as caught:
            RecordWriter(tmp_path).close()
    finally:
        os.close(held)
    assert str(caught.value) == (
        f"{events}: not a file or a directory (a pipe, a device): collect appends its events there, each "
        "fsynced; remove it, or give another --out"
    )


def test_an_event_that_cannot_be_written_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk under ``--out`` failed the first event's write with an ``OSError`` traceback."""
    writer = RecordWriter(tmp_path)

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(InputError) as caught:
        writer.event({"event": "start"})
    monkeypatch.undo()
    writer.close()
    assert str(caught.value) == (
        f"{tmp_path / '_collect-events.jsonl'}: cannot write the start event: No space left on device"
    )
