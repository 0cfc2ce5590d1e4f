"""A Spark standalone master and one worker on loopback, from PySpark's own distribution.

``bin/spark-class`` of the installed ``pyspark`` starts ``org.apache.spark.deploy.master.Master`` and
``org.apache.spark.deploy.worker.Worker`` in the foreground (the ``sbin/start-*.sh`` scripts are not in
PyPI's pyspark); each runs in a process group of its own, so stopping kills the JVM that
``spark-class`` execs and the executors and Python workers the worker started. Both bind 127.0.0.1, on
free ports; their logs, the worker's work directory (the executors' files) and the executors' caches
(``XDG_CACHE_HOME``: Numba's cache of a zipped package) are in a temporary directory removed on stop.

Readiness is "the master's JSON (``/json/``) lists one ALIVE worker", not a sleep. A start that fails
or does not finish in time raises :class:`StandaloneUnavailableError` with the tail of both logs.

The master and the worker get no ``PYTHONPATH``: the executors' Python finds shedlab only as
:func:`shedlab.spark.session.get_spark` ships it (``addPyFile``), as on a cluster whose nodes do not have
it; a ``PYTHONPATH`` naming ``src`` would hide a shipping bug.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

__all__ = ["StandaloneCluster", "StandaloneUnavailableError", "spark_home"]

_MASTER = "org.apache.spark.deploy.master.Master"
_WORKER = "org.apache.spark.deploy.worker.Worker"
_LOG_TAIL_LINES = 30


class StandaloneUnavailableError(RuntimeError):
    """The master or the worker exited at start-up, or the worker did not register in time."""


def spark_home() -> Path:
    """PySpark's own distribution (``bin/spark-class``, ``jars/``)."""
    from pyspark.find_spark_home import _find_spark_home

    home: str = _find_spark_home()  # type: ignore[no-untyped-call]  # untyped in PySpark
    return Path(home)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"({path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


class StandaloneCluster:
    """``with StandaloneCluster() as cluster: cluster.url`` (``spark://127.0.0.1:<port>``)."""

    def __init__(self, *, cores: int = 1, memory: str = "1g", startup_timeout_s: float = 90.0) -> None:
        self.port = _free_port()
        self.webui_port = _free_port()
        self.worker_webui_port = _free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.cores = cores
        self.memory = memory
        self._startup_timeout_s = startup_timeout_s
        self.dir = Path(tempfile.mkdtemp(prefix="shedlab-standalone-"))
        self.work_dir = self.dir / "work"
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def master_log(self) -> Path:
        return self.dir / "master.log"

    @property
    def worker_log(self) -> Path:
        return self.dir / "worker.log"

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
        env.update(
            {
                "SPARK_HOME": str(spark_home()),
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_NO_DAEMONIZE": "1",
                "XDG_CACHE_HOME": str(self.dir / "cache"),
            }
        )
        return env

    def _start(self, args: list[str], log: Path) -> None:
        with log.open("wb") as sink:
            self._processes.append(
                subprocess.Popen(
                    [str(spark_home() / "bin" / "spark-class"), *args],
                    env=self._env(),
                    cwd=self.dir,
                    stdout=sink,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own group: stop() kills the JVM and what it started
                )
            )

    def start(self) -> StandaloneCluster:
        self.work_dir.mkdir()
        try:
            master = [_MASTER, "--host", "127.0.0.1", "--port", str(self.port)]
            self._start([*master, "--webui-port", str(self.webui_port)], self.master_log)
            self._start(
                [
                    _WORKER,
                    self.url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    str(self.worker_webui_port),
                    "--work-dir",
                    str(self.work_dir),
                ],
                self.worker_log,
            )
            self._wait_for_worker()
        except BaseException:
            self.stop(keep_dir=True)
            raise
        return self

    def state(self) -> dict[str, object]:
        """The master's status as its web UI serves it (``/json/``)."""
        url = f"http://127.0.0.1:{self.webui_port}/json/"
        with urllib.request.urlopen(url, timeout=2.0) as response:
            state: dict[str, object] = json.loads(response.read().decode("utf-8"))
            return state

    def _wait_for_worker(self) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        while time.monotonic() < deadline:
            for process, name in zip(self._processes, ("master", "worker"), strict=True):
                if process.poll() is not None:
                    self._fail(f"the Spark standalone {name} exited at start-up (code {process.returncode})")
            try:
                if self.state().get("aliveworkers") == 1:
                    return
            except (OSError, urllib.error.URLError, ValueError):
                pass  # the master's web UI is not up yet
            time.sleep(0.25)
        self._fail(f"no worker registered with {self.url} within {self._startup_timeout_s:g} s")

    def _fail(self, why: str) -> None:
        raise StandaloneUnavailableError(
            f"{why}; logs in {self.dir}\n"
            f"--- master.log (last lines)\n{_tail(self.master_log)}\n"
            f"--- worker.log (last lines)\n{_tail(self.worker_log)}"
        )

    def stop(self, *, keep_dir: bool = False) -> None:
        """Kill both process groups (worker first: its executors go with it) and wait until they are gone."""
        for process in reversed(self._processes):
            _kill_group(process)
        self._processes.clear()
        if not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _kill_group(process: subprocess.Popen[bytes], limit_s: float = 20.0) -> None:
    """SIGTERM the process's group, SIGKILL what is left after ``limit_s``; return once it is empty."""
    for sig, wait_s in ((signal.SIGTERM, limit_s), (signal.SIGKILL, limit_s)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            process.poll()  # reap the leader, or the group is never empty
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
    process.wait(timeout=limit_s)
