"""The owner check before each unload, end to end against the sandbox: the bundle's owner is read again
(its ``/namespace/<bundle>`` znode, or the source broker's ``ownedNamespaces``) and a bundle that moved
since the load reports is not unloaded a second time; and only bundles whose unload succeeded enter the
leader's bookkeeping (the grace period)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from builders import two_broker_sandbox
from kazoo.client import KazooClient
from typer.testing import CliRunner

from shedlab.cli import app
from shedlab.cluster.access import Retry, Token
from shedlab.cluster.advise import AuditLog, Guard, SnapshotInput, execute, owner_lookup, snapshot_of
from shedlab.cluster.readers import AdminReader, ZooKeeperReader
from shedlab.cluster.sandbox import Sandbox
from shedlab.cluster.sandbox import http as sandbox_http
from shedlab.config import LoadBalancerConfig
from shedlab.core.decide import Decider, Outcome

pytestmark = pytest.mark.zookeeper

TOKEN = "sandbox-super-user-token-owner-9c1e"
EPHEMERAL_DATA_KEYS = {
    "nativeUrl", "nativeUrlTls", "httpUrl", "httpUrlTls", "disabled", "advertisedListeners"
}  # fmt: skip
SHARED = {"broker_assignment": "shared", "is_controlled": False, "is_active": True}


@pytest.fixture
def sandbox(zk_hosts: str) -> Iterator[Sandbox]:
    with two_broker_sandbox(zk_hosts, TOKEN) as sb:
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
    doc, session = _znode(sandbox, bundles[0])
    assert session != 0 and set(doc) == EPHEMERAL_DATA_KEYS
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


@pytest.mark.parametrize("read_from", ["zookeeper", "admin"])
def test_a_bundle_that_moved_since_the_reports_is_not_unloaded_again(
    sandbox: Sandbox, admin: AdminReader, zk_reader: ZooKeeperReader, tmp_path: Path, read_from: str
) -> None:
    """The decision is made on the reports; the bundle then moves (the leader shed it, an operator moved
    it). Pulsar unloads from whichever broker owns it now: sending the decision would move it twice. It
    is ``skipped`` with its owner now, nothing is sent for it; the other decisions go ahead."""
    reading = admin.read()
    source = SnapshotInput(reading=reading)
    outcome = Decider(LoadBalancerConfig(), strategy="ThresholdShedder").cycle(snapshot_of(source))
    assert len(outcome.decisions) >= 2
    moved, kept = outcome.decisions[:2]
    assert moved.destination is not None
    admin.unload(moved.bundle, moved.destination)  # someone else moves it first
    sandbox.advance(5)
    assert sandbox.owner_of(moved.bundle) == moved.destination
    audit = AuditLog(tmp_path / "audit.jsonl", Token(TOKEN))
    owners = owner_lookup(zk_reader if read_from == "zookeeper" else None, admin, source)
    results = execute(
        Outcome(outcome.strategy, [moved, kept]), source, guard=Guard(2), admin=admin, audit=audit,
        cycle=1, dry_run=False, now_ms=reading.time_ms, owners=owners,
    )  # fmt: skip
    audit.close()
    assert [r.action for r in results] == ["skipped", "unloaded"]
    assert results[0].owner == moved.destination and f"owned by {moved.destination} now" in results[0].detail
    log = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(e["action"], e["bundle"]) for e in log] == [
        ("skipped", moved.bundle), ("unloading", kept.bundle), ("unloaded", kept.bundle)
    ]  # fmt: skip
    assert log[0]["owner"] == moved.destination
    sandbox.advance(5)
    assert sandbox.owner_of(moved.bundle) == moved.destination  # moved once, not twice


def test_an_owner_that_cannot_be_read_is_not_unloaded(
    sandbox: Sandbox, admin: AdminReader, tmp_path: Path
) -> None:
    """The source broker stops answering after the read: its ownership cannot be checked, so nothing is
    sent (``unverified``, the reason in the output and the audit) and the bundle stays where it is."""
    reading = admin.read()
    source = SnapshotInput(reading=reading)
    outcome = Decider(LoadBalancerConfig(), strategy="ThresholdShedder").cycle(snapshot_of(source))
    first = outcome.decisions[0]
    sandbox.crash_broker(first.source)
    audit = AuditLog(tmp_path / "audit.jsonl", Token(TOKEN))
    [result] = execute(
        Outcome(outcome.strategy, [first]), source, guard=Guard(1), admin=admin, audit=audit, cycle=1,
        dry_run=False, now_ms=reading.time_ms, owners=owner_lookup(None, admin, source),
    )  # fmt: skip
    audit.close()
    assert result.action == "unverified" and "its owner could not be read, not sent" in result.detail
    assert f"{first.source}/admin/v2/brokers/" in result.detail
    [entry] = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert entry["action"] == "unverified" and TOKEN not in json.dumps(entry)
    assert sandbox.owner_of(first.bundle) == first.source


def test_only_bundles_really_unloaded_enter_the_grace_period(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--watch --execute --max-unloads 1``: the capped decisions of cycle 1 were put in the grace
    period as if unloaded, so cycle 2 never proposed them again (Pulsar's leader records a bundle in
    ``recentlyUnloadedBundles`` only after its unload call returned). Now cycle 2 decides them afresh,
    and only the bundle really unloaded in cycle 1 waits out its grace period."""
    monkeypatch.setattr("shedlab.cli.cluster_cmd.time.sleep", lambda _s: None)
    args = [
        "advise", "--admin-url", sandbox.admin_url, "--token-env", "OWNER_CHECK_TOKEN", "--strategy",
        "ThresholdShedder", "--execute", "--max-unloads", "1", "--watch", "--every", "60s", "--count", "2",
        "--audit", str(tmp_path / "audit.jsonl"), "--json",
    ]  # fmt: skip
    result = CliRunner().invoke(app, args, env={"OWNER_CHECK_TOKEN": TOKEN})
    assert result.exit_code == 0, result.output
    first, second = (json.loads(line) for line in result.stdout.splitlines())
    assert [a["action"] for a in first["actions"]][:2] == ["unloaded", "capped"]
    unloaded = first["actions"][0]["bundle"]
    capped = {a["bundle"] for a in first["actions"] if a["action"] == "capped"}
    again = {u["bundle"] for u in second["unload"]}
    assert unloaded not in again and again & capped
    assert second["actions"][0]["action"] == "unloaded" and second["actions"][0]["bundle"] in capped
    assert TOKEN not in result.output


def _znode(sandbox: Sandbox, bundle: str) -> tuple[dict[str, object], int]:
    """The ownership znode's NamespaceEphemeralData and the session that owns it."""
    client = KazooClient(hosts=str(sandbox.zookeeper))
    client.start(timeout=10)
    try:
        data, stat = client.get(f"/namespace/{bundle}")
    finally:
        client.stop()
        client.close()
    return json.loads(data), int(stat.ephemeralOwner)


def test_the_sandbox_holds_a_bundle_in_the_middle_of_its_unload(
    sandbox: Sandbox, admin: AdminReader, zk_reader: ZooKeeperReader
) -> None:
    """``disable_ownership``: what ``OwnedBundle.handleUnloadRequest`` shows before it closes the topics.
    The owner's session rewrites its own znode with ``disabled: true`` (``disableOwnership``: same node,
    same session, same keys), ``ownedNamespaces`` says ``is_active: false``, a second unload is refused
    (500, as Pulsar's lookup fails with "is being unloaded"); ``release`` finishes the unload. With
    ``znode=False`` (recent brokers: in memory only) the znode is left as it was."""
    bundle, other = sorted(sandbox.simulation.bundle_index)[:2]
    owner = sandbox.owner_of(bundle)
    assert owner is not None
    before, session = _znode(sandbox, bundle)
    sandbox.disable_ownership(bundle)
    doc, still = _znode(sandbox, bundle)
    assert still == session and doc == {**before, "disabled": True} and sandbox.unloading(bundle) == "znode"
    found = zk_reader.bundle_owner(bundle)
    assert (found.owner, found.active) == (owner, False)
    owned, _ = admin.owned_bundles(owner)
    assert owned[bundle] == {**SHARED, "is_active": False}
    assert all(status == SHARED for name, status in owned.items() if name != bundle)
    assert (admin.bundle_owner(bundle, owner).owner, admin.bundle_owner(bundle, owner).active) == (
        owner,
        False,
    )
    for url in (sandbox.admin_url, *(f"http://{b}" for b in sandbox.broker_urls)):  # owner, front door, other
        namespace, _, bundle_range = bundle.rpartition("/")
        second = httpx.put(
            f"{url}/admin/v2/namespaces/{namespace}/{bundle_range}/unload",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert second.status_code == 500, (url, second.status_code)
        assert second.json() == {"reason": f"Namespace bundle {bundle} is being unloaded"}
    sandbox.advance(2)  # held across ticks, until released
    assert _znode(sandbox, bundle)[0]["disabled"] is True and sandbox.owner_of(bundle) == owner
    sandbox.release(bundle)
    assert zk_reader.bundle_owner(bundle).owner is None and sandbox.unloading(bundle) is None
    sandbox.advance(5)
    assert _znode(sandbox, bundle)[0]["disabled"] is False  # its next owner's, enabled

    owner = sandbox.owner_of(other)
    assert owner is not None
    sandbox.disable_ownership(other, znode=False)
    assert _znode(sandbox, other)[0]["disabled"] is False and zk_reader.bundle_owner(other).active
    assert admin.owned_bundles(owner)[0][other]["is_active"] is False
    assert sandbox.unloading(other) == "memory"


@pytest.mark.parametrize("read_from", ["zookeeper", "admin"])
def test_advise_execute_sends_nothing_for_a_bundle_its_owner_is_unloading(
    sandbox: Sandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_from: str
) -> None:
    """``advise --execute`` meets a bundle that its source broker is in the middle of unloading (the
    leader's own shedding, another operator): its ownership znode says ``disabled: true`` (read with
    ``--zookeeper``), or the source's ``ownedNamespaces`` says ``is_active: false`` (``--admin-url``
    alone). It is already leaving: a second unload would be refused by Pulsar, and the destination the
    decision chose is not the one the bundle will get. So it is ``skipped``, as a bundle that moved is:
    its owner in the output and the audit, no unload request sent for it, exit 0; the next decision goes
    ahead (the skipped one keeps its place under ``--max-unloads``)."""
    sent: list[str] = []
    real_unload = sandbox_http.unload

    def unload(sb: Sandbox, slot: int | None, namespace: str, bundle_range: str, *rest: Any) -> Any:
        sent.append(f"{namespace}/{bundle_range}")
        return real_unload(sb, slot, namespace, bundle_range, *rest)

    monkeypatch.setattr(sandbox_http, "unload", unload)
    source = ["--admin-url", sandbox.admin_url, "--token-env", "OWNER_CHECK_TOKEN"]
    if read_from == "zookeeper":
        source = ["--zookeeper", str(sandbox.zookeeper), *source]
    audit = tmp_path / "audit.jsonl"
    args = ["advise", *source, "--strategy", "ThresholdShedder", "--json", "--audit", str(audit)]
    runner = CliRunner()
    dry = runner.invoke(app, args, env={"OWNER_CHECK_TOKEN": TOKEN})
    assert dry.exit_code == 0, dry.output
    planned = json.loads(dry.stdout)["actions"]
    assert len(planned) >= 2
    busy, nxt = planned[0], planned[1]
    sandbox.disable_ownership(busy["bundle"], znode=read_from == "zookeeper")  # its owner is unloading it
    result = runner.invoke(app, [*args, "--execute", "--max-unloads", "2"], env={"OWNER_CHECK_TOKEN": TOKEN})
    assert result.exit_code == 0, result.output  # the check doing its work, not a failure
    actions = json.loads(result.stdout)["actions"]
    assert [(a["action"], a["bundle"]) for a in actions[:2]] == [
        ("skipped", busy["bundle"]), ("unloaded", nxt["bundle"])
    ]  # fmt: skip
    skipped = actions[0]
    assert skipped["owner"] == busy["broker"] and skipped["status"] is None
    assert f"{busy['broker']} is unloading it already; not sent" in skipped["detail"]
    where = (
        f"/namespace/{busy['bundle']}" if read_from == "zookeeper" else f"{busy['broker']}/admin/v2/brokers/"
    )
    assert where in skipped["detail"]
    log = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(e["action"], e["bundle"]) for e in log][:3] == [
        ("skipped", busy["bundle"]), ("unloading", nxt["bundle"]), ("unloaded", nxt["bundle"])
    ]  # fmt: skip
    assert log[0]["owner"] == busy["broker"] and log[0]["detail"] == skipped["detail"]
    assert busy["bundle"] not in sent and nxt["bundle"] in sent  # no unload request for it, anywhere
    assert sandbox.unloading(busy["bundle"]) and sandbox.owner_of(busy["bundle"]) == busy["broker"]
    assert TOKEN not in result.output


def test_with_zookeeper_an_unload_disabled_in_memory_only_is_seen_in_the_owners_list(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    """Recent brokers disable a bundle they unload in memory only: its znode keeps ``disabled: false``, and
    the owner check through ``--zookeeper`` saw an active owner and sent the unload, which the owner
    refused (500 ``is being unloaded``: ``failed``, exit 1). The znode's answer is now confirmed by the
    source's ``ownedNamespaces`` (``is_active: false``): ``skipped``, nothing sent, exit 0."""
    audit = tmp_path / "audit.jsonl"
    args = [
        "advise", "--zookeeper", str(sandbox.zookeeper), "--admin-url", sandbox.admin_url, "--token-env",
        "OWNER_CHECK_TOKEN", "--strategy", "ThresholdShedder", "--json", "--audit", str(audit),
    ]  # fmt: skip
    runner = CliRunner()
    busy = json.loads(runner.invoke(app, args, env={"OWNER_CHECK_TOKEN": TOKEN}).stdout)["actions"][0]
    sandbox.disable_ownership(busy["bundle"], znode=False)
    result = runner.invoke(app, [*args, "--execute"], env={"OWNER_CHECK_TOKEN": TOKEN})
    assert result.exit_code == 0, result.output
    [action] = [a for a in json.loads(result.stdout)["actions"] if a["bundle"] == busy["bundle"]]
    assert action["action"] == "skipped" and action["owner"] == busy["broker"]
    assert f"{busy['broker']} is unloading it already; not sent" in action["detail"]
    assert f"{busy['broker']}/admin/v2/brokers/" in action["detail"]  # read from the owner's own list
    assert sandbox.owner_of(busy["bundle"]) == busy["broker"] and sandbox.unloading(busy["bundle"])
