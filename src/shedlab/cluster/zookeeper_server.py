"""A private ZooKeeper server on loopback, from Debian's ``zookeeper`` package.

Why this exists: the sandbox publishes the modular load manager's znodes to a *real* ZooKeeper, and the
cluster tests read them back with kazoo exactly as ``shedlab collect --zookeeper`` reads a production
ensemble. A real server catches what a fake would not: ephemeral nodes vanishing with their session,
watches, ``NoNodeError`` on a missing ``/loadbalance``, chroots.

The server is standalone (``ZooKeeperServerMain``), binds 127.0.0.1 only, keeps its data in a temporary
directory that is removed on stop, and has the admin HTTP server and four-letter words off. Readiness is
"a kazoo client can connect", not a sleep.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

__all__ = ["ZOOKEEPER_JAR", "LocalZooKeeper", "ZooKeeperUnavailableError", "zookeeper_installed"]

# Debian's package puts the server and its dependencies' jars here (zookeeper.jar's manifest names them).
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
_CONF_DIR = Path("/etc/zookeeper/conf")
_MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"

_PROBE_LOG = logging.getLogger("shedlab.zookeeper_server.probe")
"""The readiness probe's kazoo logger: silent. Until the JVM listens, every probe's attempts fail with
"Connection refused", which kazoo logs as warnings; with no handler configured (the Python API, the
benches) Python printed each one on stderr although the start then succeeded."""
_PROBE_LOG.addHandler(logging.NullHandler())
_PROBE_LOG.propagate = False


class ZooKeeperUnavailableError(RuntimeError):
    """ZooKeeper (or Java) is not installed, or the server did not come up in time."""


def zookeeper_installed() -> bool:
    return ZOOKEEPER_JAR.is_file() and shutil.which("java") is not None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class LocalZooKeeper:
    """Start with ``with LocalZooKeeper() as zk: zk.hosts`` (``127.0.0.1:<port>``)."""

    def __init__(self, port: int | None = None, startup_timeout_s: float = 30.0) -> None:
        self.port = port or _free_port()
        self.hosts = f"127.0.0.1:{self.port}"
        self._startup_timeout_s = startup_timeout_s
        self._dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> LocalZooKeeper:
        if not zookeeper_installed():
            raise ZooKeeperUnavailableError(
                "ZooKeeper is not installed: run 'sudo apt-get install zookeeper' (Debian's package) "
                "or give a running ensemble with --zookeeper HOST:PORT"
            )
        self._dir = Path(tempfile.mkdtemp(prefix="shedlab-zk-"))
        config = self._dir / "zoo.cfg"
        config.write_text(
            "tickTime=2000\n"
            f"dataDir={self._dir / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=\n",
            encoding="utf-8",
        )
        classpath = os.pathsep.join(p for p in (str(_CONF_DIR), str(ZOOKEEPER_JAR)) if Path(p).exists())
        log = (self._dir / "zookeeper.log").open("wb")
        self._process = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", classpath, _MAIN_CLASS, str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self._startup_timeout_s
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise ZooKeeperUnavailableError(
                    f"ZooKeeper exited at start-up; see {self._dir}/zookeeper.log"
                )
            client = KazooClient(hosts=self.hosts, timeout=2.0, logger=_PROBE_LOG)
            try:
                client.start(timeout=2.0)
            except KazooTimeoutError:
                continue
            else:
                client.stop()
                client.close()
                return
        self.stop()
        waited = f"{self._startup_timeout_s:g} s"
        raise ZooKeeperUnavailableError(f"ZooKeeper did not answer on {self.hosts} within {waited}")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> LocalZooKeeper:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
