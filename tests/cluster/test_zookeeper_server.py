"""The private ZooKeeper is real: ephemeral nodes die with their session, chroots isolate."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kazoo.client import KazooClient

pytestmark = pytest.mark.zookeeper


def test_ephemeral_node_vanishes_with_its_session(zk_hosts: str) -> None:
    writer = KazooClient(hosts=zk_hosts, timeout=5.0)
    writer.start(timeout=10)
    writer.ensure_path("/loadbalance/brokers")
    writer.create("/loadbalance/brokers/b1:8080", b"{}", ephemeral=True)
    reader = KazooClient(hosts=zk_hosts, timeout=5.0)
    reader.start(timeout=10)
    assert reader.get_children("/loadbalance/brokers") == ["b1:8080"]
    writer.stop()
    writer.close()
    assert reader.get_children("/loadbalance/brokers") == []
    reader.stop()
    reader.close()


def test_starting_one_prints_nothing() -> None:
    """Until the JVM listens, the readiness probe's connection attempts are refused; kazoo logs each as a
    warning, which Python printed on stderr ("Connection dropped: … Connection refused") from the API and
    the benches although the start succeeded."""
    code = (
        "from shedlab.cluster.zookeeper_server import LocalZooKeeper\n"
        "with LocalZooKeeper() as server:\n"
        "    print(server.hosts)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("127.0.0.1:") and done.stderr == ""
