"""Bundle ownership as Pulsar exposes it, read from the sandbox: the ``/namespace/<bundle>`` znodes and each
broker's ``ownedNamespaces``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from builders import fresh_scenario
from kazoo.client import KazooClient

from shedlab.cluster.access import Retry, Token
from shedlab.cluster.readers import AdminReader, ZooKeeperReader
from shedlab.cluster.sandbox import Sandbox

pytestmark = pytest.mark.zookeeper

TOKEN = "sandbox-super-user-token-owner-9c1e"
EPHEMERAL_DATA_KEYS = {
    "nativeUrl", "nativeUrlTls", "httpUrl", "httpUrlTls", "disabled", "advertisedListeners"
}  # fmt: skip
SHARED = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}


@pytest.fixture
def sandbox(zk_hosts: str) -> Iterator[Sandbox]:
    """over-unloading-90-10 with its second broker joined; the sandbox's leader does not shed."""
    with Sandbox(
        fresh_scenario("over-unloading-90-10"),
        seed=1,
        zookeeper=zk_hosts,
        tokens={TOKEN: "admin"},
        config_overrides={"loadBalancerSheddingEnabled": False},
    ) as sb:
        sb.advance(8)
        yield sb


@pytest.fixture
def admin(sandbox: Sandbox) -> Iterator[AdminReader]:
    reader = AdminReader(sandbox.admin_url, token=Token(TOKEN), retry=Retry(attempts=1, timeout_s=5))
    yield reader
    reader.close()


@pytest.fixture
def zk_reader(sandbox: Sandbox) -> Iterator[ZooKeeperReader]:
    reader = ZooKeeperReader(str(sandbox.zookeeper))
    yield reader
    reader.close()


def test_the_sandbox_serves_ownership_as_pulsar_does(
    sandbox: Sandbox, admin: AdminReader, zk_reader: ZooKeeperReader
) -> None:
    """``/namespace/<bundle>``: ephemeral, NamespaceEphemeralData naming the owner by its web address;
    ``ownedNamespaces``: bundle → NamespaceOwnershipStatus on the broker itself (the front door redirects).
    An unload releases the znode before it returns; the new owner takes one on its lookup."""
    bundles = sorted(sandbox.simulation.bundle_index)
    for bundle in bundles:
        assert zk_reader.bundle_owner(bundle).owner == sandbox.owner_of(bundle) is not None
    client = KazooClient(hosts=str(sandbox.zookeeper))
    client.start(timeout=10)
    try:
        data, stat = client.get(f"/namespace/{bundles[0]}")
    finally:
        client.stop()
        client.close()
    doc = json.loads(data)
    assert stat.ephemeralOwner != 0 and set(doc) == EPHEMERAL_DATA_KEYS
    assert doc["httpUrl"] == f"http://{sandbox.owner_of(bundles[0])}" and doc["disabled"] is False
    for each in sandbox.broker_urls:
        owned, _ = admin.owned_bundles(each)
        assert sorted(owned) == [b for b in bundles if sandbox.owner_of(b) == each]
        assert all(status == SHARED for status in owned.values())
    owner = sandbox.owner_of(bundles[0])
    assert owner is not None
    broker: str = owner
    front = httpx.get(
        f"{sandbox.admin_url}/admin/v2/brokers/{sandbox.cluster}/{broker}/ownedNamespaces",
        headers={"Authorization": f"Bearer {TOKEN}"},
    )
    assert front.status_code == 307 and front.headers["location"].startswith(f"http://{broker}/admin/v2/")
    other = next(b for b in sandbox.broker_urls if b != broker)
    admin.unload(bundles[0], other)
    assert zk_reader.bundle_owner(bundles[0]).owner is None  # released before the call returned
    assert admin.bundle_owner(bundles[0], broker, sandbox.broker_urls).owner is None
    sandbox.advance(5)
    assert zk_reader.bundle_owner(bundles[0]).owner == other == sandbox.owner_of(bundles[0])
    assert admin.bundle_owner(bundles[0], broker, sandbox.broker_urls).owner == other
