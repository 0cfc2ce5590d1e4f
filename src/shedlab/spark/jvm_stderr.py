"""The driver JVM's stderr, forwarded line by line without the one line every start prints.

Spark 4's launcher starts the driver JVM with ``--add-modules=jdk.incubator.vector``
(``org.apache.spark.launcher.JavaModuleOptions``), and the JVM answers that with ``WARNING: Using
incubator modules: jdk.incubator.vector`` on its stderr, which is the terminal's: a second line before
every error a Spark command prints, where shedlab's rule is one line. No JVM flag silences the warning
(it is printed by the module system at start-up, outside unified logging), and the module is not
shedlab's to remove.

So while PySpark launches the JVM, which inherits file descriptor 2, that descriptor is a pipe; a
daemon thread copies every line from it to the real stderr except :data:`JVM_NOISE`, for as long as the
JVM (and the Python workers it starts, which inherit its stderr) write to it. Nothing else is dropped:
a Java stack, log4j's console errors and a worker's traceback all reach the terminal as before.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from typing import Final

__all__ = ["JVM_NOISE", "filtered_jvm_stderr"]

JVM_NOISE: Final = frozenset({b"WARNING: Using incubator modules: jdk.incubator.vector"})
"""Lines the JVM prints at every start that say nothing about the user's command."""


@contextlib.contextmanager
def filtered_jvm_stderr() -> Iterator[None]:
    """Within the block, processes started by this one get a stderr that drops :data:`JVM_NOISE`.

    This process's own stderr is descriptor 2 again when the block ends (the pipe's write end then lives
    only in the children, so the copying thread ends when the last of them exits)."""
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    terminal = os.dup(2)  # kept open for the thread: the real stderr, whatever descriptor 2 becomes
    threading.Thread(target=_copy, args=(read_end, terminal), name="jvm-stderr", daemon=True).start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(terminal, 2)


def _copy(read_end: int, terminal: int) -> None:
    """Each line as it arrives (a buffered reader returns a line as soon as its newline is read; a last
    line without one at the end), written through unless it is noise. A stderr that is gone (the reader
    of ``2>&1 | head`` has exited) ends the copy quietly: a thread's traceback would have no one to
    reach, and the JVM's later writes fail as they would have on the closed stderr itself."""
    with open(read_end, "rb") as pipe, open(terminal, "wb", buffering=0) as out:
        try:
            for line in pipe:
                if line.rstrip(b"\r\n") not in JVM_NOISE:
                    out.write(line)
        except OSError:  # BrokenPipeError and its kind: the terminal side is closed
            return
