"""The private ZooKeeper is real: ephemeral nodes die with their session, chroots isolate."""

from __future__ import annotations

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
