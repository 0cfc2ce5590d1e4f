"""The driver JVM's stderr reaches the terminal line for line, without Spark 4's incubator warning."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from shedlab.spark.jvm_stderr import _copy, filtered_jvm_stderr


def _join_copiers(before: set[threading.Thread]) -> None:
    """Wait for the copiers started since ``before`` (not a Spark session's, which lives with its JVM)."""
    for thread in set(threading.enumerate()) - before:
        if thread.name == "jvm-stderr":
            thread.join(timeout=30)


def test_children_lose_only_the_warning(capfd: pytest.CaptureFixture[str]) -> None:
    script = (
        "echo 'WARNING: Using incubator modules: jdk.incubator.vector' >&2; "
        "echo 'a Java stack line' >&2; printf 'no newline at the end' >&2; echo 'stdout as it was'"
    )
    before = set(threading.enumerate())
    with filtered_jvm_stderr():
        child = subprocess.Popen(["sh", "-c", script])
    print("this process's stdout", flush=True)
    child.wait(timeout=30)
    _join_copiers(before)
    out, err = capfd.readouterr()
    assert err == "a Java stack line\nno newline at the end"
    assert "stdout as it was\n" in out and "this process's stdout\n" in out


def test_this_process_writes_to_its_own_stderr_again_after_the_block(
    capfd: pytest.CaptureFixture[str],
) -> None:
    before = set(threading.enumerate())
    with filtered_jvm_stderr():
        pass
    _join_copiers(before)  # no child holds the pipe: the copier has ended
    warning = "WARNING: Using incubator modules: jdk.incubator.vector"
    subprocess.run(["sh", "-c", f"echo '{warning}' >&2"], check=True)
    assert capfd.readouterr().err == warning + "\n"


def test_a_closed_stderr_ends_the_copy_quietly() -> None:
    """``2>&1 | head -1``: once the reader is gone, the copier stops without a thread traceback."""
    source_read, source_write = os.pipe()
    sink_read, sink_write = os.pipe()
    os.close(sink_read)  # nobody reads the terminal side any more
    os.write(source_write, b"a line for a closed terminal\n")
    os.close(source_write)
    _copy(source_read, sink_write)  # returns: no BrokenPipeError escapes
