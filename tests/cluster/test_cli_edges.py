"""Edges of ``collect`` and ``advise`` found by hand against the sandbox and a real ZooKeeper: each user
error is one line, exit 2, no traceback, and never shows the token."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from cli_support import error_line
from stub_broker import UNAUTHORIZED, Answer, refusing, stub_broker

from shedlab.cli import cluster_cmd, main
from shedlab.cluster.advise import read_snapshot_path
from shedlab.cluster.readers import AdminReader
from shedlab.errors import InputError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snapshot.json"


@pytest.mark.parametrize("secret", ["tök€n-abc", "abc\x01def", "«eyJhbGciOiJIUzI1NiJ9.e30.sig»"])
def test_a_token_no_http_header_can_carry_is_one_line(
    secret: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was a ``UnicodeEncodeError`` traceback from httpx on the first call (non-ASCII)."""
    token_file = tmp_path / "token"
    token_file.write_text(secret + "\n", encoding="utf-8")
    line = error_line(
        ["advise", "--admin-url", "http://127.0.0.1:9", "--token-file", str(token_file)], capsys
    )
    assert "HTTP header cannot carry" in line and secret not in line
    monkeypatch.setenv("SHEDLAB_TEST_TOKEN", secret)
    line = error_line(
        ["advise", "--admin-url", "http://127.0.0.1:9", "--token-env", "SHEDLAB_TEST_TOKEN"], capsys
    )
    assert "--token-env" in line and "HTTP header cannot carry" in line and secret not in line


def test_a_token_file_too_long_for_a_token_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file of megabytes (a wrong file) was taken as a token: minutes to register it for redaction, far
    past ``--timeout``, then HTTP 431 from the broker."""
    token_file = tmp_path / "token"
    token_file.write_text("a" * 20_000 + "\n", encoding="utf-8")
    line = error_line(
        ["advise", "--admin-url", "http://127.0.0.1:9", "--token-file", str(token_file)], capsys
    )
    assert line == f"error: {token_file}: the token is 20,000 characters long, more than 16,384: not a token"


@pytest.mark.parametrize("text", ["Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig", "bearer  eyJ.e30.sig"])
def test_a_token_with_its_bearer_prefix_is_one_line(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token copied with its header's ``Bearer `` was sent as ``Bearer Bearer …``, and the broker's 401
    said the token was refused."""
    token_file = tmp_path / "token"
    token_file.write_text(text + "\n", encoding="utf-8")
    line = error_line(
        ["advise", "--admin-url", "http://127.0.0.1:9", "--token-file", str(token_file)], capsys
    )
    assert line == (
        f"error: {token_file}: the token starts with 'Bearer ': give the token alone (shedlab sends "
        "'Bearer ' itself)"
    )


@pytest.mark.parametrize(
    ("hosts", "why"),
    [("abc:notaport", "could not be cast"), ("127.0.0.1:99999", "out of range"), (":2181", "bad hostname")],
)
def test_a_malformed_zookeeper_address_is_one_line(
    hosts: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """kazoo parses the hosts in ``KazooClient()``: a ValueError traceback there."""
    line = error_line(["advise", "--zookeeper", hosts], capsys)
    assert "--zookeeper" in line and why in line and repr(hosts) in line


@pytest.mark.zookeeper
def test_a_chroot_that_does_not_exist_is_one_line(zk_hosts: str, capsys: pytest.CaptureFixture[str]) -> None:
    """kazoo's ``UserWarning`` about the missing chroot came before the error: three lines on stderr."""
    line = error_line(["advise", "--zookeeper", f"{zk_hosts}/no-such-chroot", "--retries", "1"], capsys)
    assert "the chroot" in line and "/no-such-chroot does not exist" in line


def test_an_unreachable_admin_url_is_tried_once_not_per_endpoint(capsys: pytest.CaptureFixture[str]) -> None:
    """The cluster-name lookup fell back from ``/clusters`` to ``/brokers/configuration/runtime`` on any
    failure: an unreachable host went through the retries twice and the error named the second path."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    line = error_line(["advise", "--admin-url", f"http://127.0.0.1:{port}", "--retries", "1"], capsys)
    assert f"GET http://127.0.0.1:{port}/admin/v2/clusters: unreachable after 1 attempt" in line
    assert "runtime" not in line


def test_collect_does_not_burst_to_catch_up_after_a_slow_read(tmp_path: Path) -> None:
    """``--every 60s``; the second read takes 5 minutes (brokers timing out). The reads after it were due
    at 120, 180, 240 and 300 s and all ran at once, five reads in the same second; they must keep
    ``--every`` apart from the slow read on."""
    from shedlab.cluster.collect import RecordWriter, collect
    from shedlab.cluster.readers import ClusterReading

    now = [0.0]
    starts: list[float] = []

    class SlowOnce:
        def read(self) -> ClusterReading:
            starts.append(now[0])
            now[0] += 300.0 if len(starts) == 2 else 1.0
            return ClusterReading(source="fake", cluster="c", time_ms=int(now[0] * 1000))

    def sleep(seconds: float) -> None:
        now[0] += seconds

    writer = RecordWriter(tmp_path / "rec")
    try:
        collect(SlowOnce(), writer, every_s=60.0, count=5, clock=lambda: now[0], sleep=sleep)
    finally:
        writer.close()
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps[0] == 60.0 and gaps[1] == 300.0  # the slow read, then the next one at once
    assert gaps[2:] == [60.0, 60.0], starts


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        # collect --every 0s was refused, advise --watch --every 0s read (and could unload) in a tight loop
        (["--every", "0s"], "--every: must be at least 1s and at most 1d (got '0s')"),
        # each cycle read the cluster: a thousand times a second (until 29 Nov 2026)
        (["--every", "1ms"], "--every: must be at least 1s and at most 1d (got '1ms')"),
        (["--every", "0.999s"], "--every: must be at least 1s and at most 1d (got '0.999s')"),
        # a wait or a timeout beyond the platform's clock was an OverflowError traceback (time.sleep, the
        # first call's socket)
        (["--every", "200000d"], "--every: must be at least 1s and at most 1d (got '200000d')"),
        (["--timeout", "200000d"], "--timeout: must be more than 0 and at most 1h (got '200000d')"),
    ],
)
def test_advise_watch_intervals_out_of_range_are_refused(
    options: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    line = error_line(["advise", "--snapshot", str(EXAMPLE), "--watch", "--count", "3", *options], capsys)
    assert line == f"error: {expected}"


@pytest.mark.parametrize(("option", "value", "shown"), [("--timeout", "5s", "'5s'"), ("--retries", "5", "5")])
def test_call_options_beside_a_snapshot_are_refused(
    option: str, value: str, shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snapshot is read without a call: they were ignored, silently (until 29 Nov 2026)."""
    line = error_line(["advise", "--snapshot", str(EXAMPLE), option, value], capsys)
    assert line == (
        f"error: {option}: is used only with --zookeeper or --admin-url: a --snapshot is read without a call "
        f"(got {shown})"
    )


def test_advise_every_without_watch_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """One cycle runs without ``--watch``: ``--every 5m`` was ignored, silently (``--count`` was refused)."""
    line = error_line(["advise", "--snapshot", str(EXAMPLE), "--every", "5m"], capsys)
    assert line == "error: --every: paces --watch cycles: give --watch too (got '5m')"


def test_collect_duration_zero_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--duration 0`` recorded one read, as ``--count 1``: read as something else."""
    line = error_line(
        ["collect", "--out", str(tmp_path), "--admin-url", "http://x", "--duration", "0"], capsys
    )
    assert line == "error: --duration: must be more than 0 (got '0')"


def test_a_file_in_the_way_of_out_or_audit_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """mkdir's ``File exists`` was the whole explanation."""
    in_the_way = tmp_path / "afile"
    in_the_way.write_text("")
    for out in (in_the_way, in_the_way / "sub"):
        line = error_line(
            ["collect", "--admin-url", "http://127.0.0.1:9", "--count", "1", "--out", str(out)], capsys
        )
        assert "File exists" not in line and ("a file, not a directory" in line or "Not a directory" in line)
    audit = in_the_way / "audit.jsonl"
    line = error_line(["advise", "--snapshot", str(EXAMPLE), "--execute", "--audit", str(audit)], capsys)
    assert line == f"error: {audit}: cannot write the audit log: {in_the_way} is a file, not a directory"


@pytest.mark.parametrize("special", ["fifo", "/dev/null"])
def test_an_audit_log_that_is_no_file_is_refused_before_any_cycle(
    special: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--audit`` a pipe waited for ever for a reader; a device (``/dev/null``) failed its first fsync
    with a traceback, after the cycle's decisions. Refused in one line before anything is read."""
    audit = Path(special)
    if special == "fifo":
        audit = tmp_path / "audit.jsonl"
        os.mkfifo(audit)
        # a reader and a line in the pipe, so that a run that opens it does not wait for ever
        held = os.open(audit, os.O_RDWR | os.O_NONBLOCK)
        os.write(held, b"\n")
    try:
        line = error_line(["advise", "--snapshot", str(EXAMPLE), "--execute", "--audit", str(audit)], capsys)
    finally:
        if special == "fifo":
            os.close(held)
    assert line == (
        f"error: {audit}: --audit: not a file or a directory (a pipe, a device): the audit log is a record "
        "kept on disk, each line fsynced; give --audit a new file, or an earlier audit log"
    )


@pytest.mark.parametrize("text", ["eyJ.e30.sig\n", "eyJ.e30.sig\r\n", "\n  eyJ.e30.sig  \n# admin token\n"])
def test_sandbox_and_clients_read_a_token_file_alike(text: str, tmp_path: Path) -> None:
    """The sandbox took the whole file (stripped) as its token, the clients its first line: with a second
    line in the file, every request of ``collect``/``advise --token-file`` given the same file was a 401."""
    from shedlab.cli.sandbox_cmd import _tokens
    from shedlab.cluster.access import load_token

    token_file = tmp_path / "token"
    token_file.write_bytes(text.encode())
    client = load_token(token_file, None)
    assert client is not None and _tokens(token_file) == {"eyJ.e30.sig": "admin"}
    assert client.header() == {"Authorization": "Bearer eyJ.e30.sig"}


@pytest.mark.zookeeper
def test_a_sandbox_rerun_on_the_same_zookeeper_chroot(zk_hosts: str) -> None:
    """The leader's bundle-data and time-average znodes are persistent and stay after a sandbox stops (as
    in Pulsar); the next sandbox on the same ``--zookeeper HOST:PORT/chroot`` created them again and its
    simulation stopped with ``NodeExistsError`` at the leader's first write (15 minutes in). A new leader
    overwrites them, and drops those of bundles and brokers that are no more."""
    from kazoo.client import KazooClient

    from shedlab.cluster.sandbox import Sandbox

    ticks = 16  # past loadBalancerResourceQuotaUpdateIntervalMinutes (15): the leader's periodic write
    with Sandbox("broker-loss", seed=3, zookeeper=zk_hosts) as first:
        first.advance(ticks)
        first_brokers = set(first.broker_urls)
    client = KazooClient(hosts=zk_hosts, timeout=10.0)
    client.start(timeout=10)
    try:
        stale = "/loadbalance/bundle-data/gone-tenant/gone-ns/0x00000000_0xffffffff"
        client.create(stale, b"{}", makepath=True)
        # a broker no sandbox has: the first's own may come back, as the OS may hand the second sandbox
        # a port the first one freed (a CI run did: the test asserted no overlap and failed)
        gone_broker = "/loadbalance/broker-time-average/gone-broker.example:8080"
        client.create(gone_broker, b"{}")
        assert set(client.get_children("/loadbalance/broker-time-average")) & first_brokers
        with Sandbox("broker-loss", seed=3, zookeeper=zk_hosts) as second:
            second.advance(ticks)
            assert second.failure is None
            averages = set(client.get_children("/loadbalance/broker-time-average"))
            assert averages and averages <= set(second.broker_urls)
            assert not averages & (first_brokers - set(second.broker_urls))
            assert client.exists(stale) is None and client.exists(gone_broker) is None
            assert client.get_children("/loadbalance/bundle-data")
    finally:
        client.stop()
        client.close()


@pytest.mark.parametrize("load_report_status", [204, 500])
def test_admin_url_of_an_extensible_load_manager_cluster_is_one_line(
    load_report_status: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pulsar's brokers under the extensible manager do not serve a load report
    (``ExtensibleLoadManagerWrapper.generateLoadReport`` returns null, 204, or throws
    UnsupportedOperationException, 500, by version): every broker was recorded as "not answering" and
    advise exited 0 on an empty cluster. Their runtime configuration names the class."""
    elm = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"

    def answers(path: str, port: int) -> dict[str, Answer]:
        return {
            "/admin/v2/clusters": (200, ["c1"]),
            "/admin/v2/brokers/c1": (200, [f"127.0.0.1:{port}"]),
            "/admin/v2/brokers/configuration/runtime": (
                200,
                {"clusterName": "c1", "loadManagerClassName": elm},
            ),
            "/admin/v2/broker-stats/load-report": (load_report_status, None),
        }

    with stub_broker(answers) as url:
        for command in (["advise", "--admin-url", url], ["collect", "--admin-url", url, "--count", "1"]):
            args = [*command, "--retries", "1"]
            if command[0] == "collect":
                args += ["--out", str(tmp_path / "rec")]
            line = error_line(args, capsys)
            assert "extensible load manager" in line and "loadManagerClassName" in line, line


@pytest.mark.zookeeper
def test_execute_from_zookeeper_with_a_refused_token_is_one_line(
    zk_hosts: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--zookeeper`` reads, ``--admin-url`` only unloads: a wrong token came out at the first unload as
    an action ``failed`` (exit 1), and again every cycle under ``--watch``."""
    import time

    from kazoo.client import KazooClient

    doc = json.loads(EXAMPLE.read_text())
    zk = KazooClient(hosts=zk_hosts, timeout=5.0)
    zk.start(timeout=10)
    try:
        now = int(time.time() * 1000)
        for broker, data in doc["brokers"].items():
            report = dict(data["localData"], lastUpdate=now)
            zk.create(f"/loadbalance/brokers/{broker}", json.dumps(report).encode(), makepath=True)
        for bundle, data in doc["bundleData"].items():
            zk.create(f"/loadbalance/bundle-data/{bundle}", json.dumps(data).encode(), makepath=True)
    finally:
        zk.stop()
        zk.close()

    token = tmp_path / "token"
    token.write_text("wrong-token-value\n")
    audit = tmp_path / "audit.jsonl"
    with stub_broker(refusing, default=UNAUTHORIZED) as url:
        args = ["advise", "--zookeeper", zk_hosts, "--admin-url", url, "--token-file", str(token)]
        args += ["--strategy", "ThresholdShedder", "--execute", "--audit", str(audit)]
        line = error_line(args, capsys)
    assert "HTTP 401" in line and "wrong-token-value" not in line


def test_out_removed_under_a_running_collect_is_one_line(tmp_path: Path) -> None:
    """The directory removed (or the disk full) mid-run: a FileNotFoundError/OSError traceback."""
    import shutil

    from shedlab.cluster.collect import RecordWriter
    from shedlab.cluster.readers import ClusterReading
    from shedlab.errors import InputError

    out = tmp_path / "rec"
    writer = RecordWriter(out)
    reading = ClusterReading(source="fake", cluster="c", time_ms=1_795_000_000_000)
    try:
        assert writer.write_cycle(reading, 1).is_file()
        shutil.rmtree(out)
        with pytest.raises(InputError, match="cannot write the record of cycle 2: No such file or directory"):
            writer.write_cycle(reading, 2)
    finally:
        writer.close()


def test_collect_errors_are_one_line_on_a_pipe(tmp_path: Path) -> None:
    """Through a pipe (scripts, CI), rich's progress bar printed an empty line on stop: stderr was two
    lines, an empty one and the error (the in-process tests skip blank lines and did not see it)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    args = ["collect", "--admin-url", f"http://127.0.0.1:{port}", "--retries", "1", "--count", "1"]
    run = subprocess.run(
        [sys.executable, "-m", "shedlab", *args, "--out", str(tmp_path / "rec")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1, repr(run.stderr)


def test_sandbox_lists_its_cluster_as_pulsar_does() -> None:
    """``GET /admin/v2/clusters`` (``pulsar-admin clusters list``, and the first call of ``advise``/
    ``collect`` without ``--cluster``) was a 404 on the sandbox."""
    import httpx

    from shedlab.cluster.sandbox import Sandbox

    with Sandbox("broker-loss", seed=3, zookeeper=None, tokens={"t0k": "admin"}) as sb:
        headers = {"Authorization": "Bearer t0k"}
        answer = httpx.get(f"{sb.admin_url}/admin/v2/clusters", headers=headers, timeout=10.0)
        assert answer.status_code == 200 and answer.json() == [sb.cluster]
        assert httpx.get(f"{sb.admin_url}/admin/v2/clusters", timeout=10.0).status_code == 401


def test_a_malformed_bundle_history_in_snapshot_files_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was named as the znode ``/loadbalance/bundle-data/<bundle>``, which no file of the snapshot is."""
    import json

    doc = json.loads(EXAMPLE.read_text())
    lines = [
        json.dumps({"timestamp": 1, "broker": b, "report": d["localData"]}) for b, d in doc["brokers"].items()
    ]
    bundle = next(iter(doc["bundleData"]))
    lines.append(json.dumps({"timestamp": 1, "bundle": bundle, "data": {"shortTermData": {}}}))
    recording = tmp_path / "rec.jsonl"
    recording.write_text("\n".join(lines) + "\n")
    line = error_line(["advise", "--snapshot", str(tmp_path)], capsys)
    assert line == f"error: {recording}:{len(lines)}: longTermData: required field is missing"


@pytest.mark.parametrize("target", ["gone.json", "loop.json"])
def test_a_broken_link_among_snapshot_files_is_named(
    target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A report file that is a dangling link or a loop was passed over, silently: its broker was left out
    of the decision (until 29 Nov 2026)."""
    doc = json.loads(EXAMPLE.read_text())
    reports = [{"timestamp": 1, "broker": b, "report": d["localData"]} for b, d in doc["brokers"].items()]
    (tmp_path / "reports.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reports))
    (tmp_path / "loop.json").symlink_to(tmp_path / "loop.json")
    if target == "gone.json":
        (tmp_path / "loop.json").unlink()
        (tmp_path / "broker-2.json").symlink_to(tmp_path / "gone.json")
    broken = tmp_path / ("broker-2.json" if target == "gone.json" else "loop.json")
    line = error_line(["decide", str(tmp_path)], capsys)
    assert line.startswith(f"error: {broken}: ") and "snapshot file" in line, line


@pytest.mark.parametrize("command", [["decide"], ["advise", "--snapshot"]])
def test_a_snapshot_that_is_a_pipe_is_named_for_what_it_is(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``decide <(cat snap.json)`` was 'snapshot not found', of a path that exists (until 29 Nov 2026)."""
    pipe = tmp_path / "snap.json"
    os.mkfifo(pipe)
    line = error_line([*command, str(pipe)], capsys)
    assert line.startswith(f"error: {pipe}: not a file or a directory (a pipe, a device): "), line
    assert line.endswith("; save it to a file first"), line


@pytest.mark.parametrize(("raw", "kind"), [(b"null", "null"), (b"[1]", "an array"), (b'"x"', "a string")])
def test_a_znode_that_is_not_an_object_is_named_in_json_words(raw: bytes, kind: str) -> None:
    """``null`` was reported as ``found NoneType``."""
    from shedlab.cluster.readers import _parse
    from shedlab.errors import ClusterError

    with pytest.raises(ClusterError, match=f"expected a JSON object, found {kind}$"):
        _parse(raw, "zookeeper h:1/loadbalance/leader")


def test_a_second_collect_into_the_same_directory_is_refused(tmp_path: Path) -> None:
    """The second removed the first's temporary file of the cycle under way (its clean-up of a kill's
    leftovers), and the first then stopped, that cycle lost."""
    from shedlab.cluster.collect import RecordWriter
    from shedlab.errors import InputError

    first = RecordWriter(tmp_path / "rec")
    in_flight = tmp_path / "rec" / ".load-reports-20261126T000000-000001.jsonl.tmp"
    in_flight.write_text("{}\n")
    try:
        with pytest.raises(InputError, match="another collect is recording into this directory"):
            RecordWriter(tmp_path / "rec")
        assert in_flight.exists()
    finally:
        first.close()
    RecordWriter(tmp_path / "rec").close()  # free again once the first is done
    assert not in_flight.exists()


def test_advise_watch_goes_on_after_a_cycle_it_could_not_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that fails after the first cycle (a ZooKeeper blip) skips that cycle only: AvgShedder's hit
    counts carry over, as the leader's would; ``advise --watch`` used to exit 2 and lose them."""
    calls = itertools.count(1)

    def flaky(path: Path) -> Any:
        if next(calls) == 2:
            raise InputError("connection lost", source="zookeeper 127.0.0.1:2181")
        return read_snapshot_path(path)

    monkeypatch.setattr(cluster_cmd, "read_snapshot_path", flaky)
    args = ["advise", "--snapshot", str(EXAMPLE), "--strategy", "AvgShedder", "--json", "--watch"]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--every", "1s", "--count", "4"])
    assert exit_info.value.code == 0
    cycles = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [c["cycle"] for c in cycles] == [1, 2, 3, 4]
    assert cycles[1] == {"cycle": 2, "mode": "dry-run", "error": "zookeeper 127.0.0.1:2181: connection lost"}
    hits = [c for c in cycles if "unload" in c]
    assert len(hits) == 3 and hits[0]["skipped"] != hits[2]["skipped"]  # the counters moved on across the gap


def test_advise_fails_at_once_when_the_first_read_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path) -> Any:
        raise InputError("connection refused", source="zookeeper 127.0.0.1:2181")

    monkeypatch.setattr(cluster_cmd, "read_snapshot_path", broken)
    line = error_line(["advise", "--snapshot", str(EXAMPLE), "--watch", "--every", "1s"], capsys)
    assert line == "error: zookeeper 127.0.0.1:2181: connection refused"


def test_advise_count_without_watch_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """One cycle runs without ``--watch``: a ``--count`` was silently ignored."""
    line = error_line(["advise", "--snapshot", str(EXAMPLE), "--count", "3"], capsys)
    assert line == "error: --count: counts --watch cycles: give --watch too (got 3)"


@pytest.mark.parametrize("suffix", ["", "/", "/admin/v2", "/admin/v2/", "/admin"])
def test_an_admin_url_copied_with_the_rest_prefix_is_the_broker_address(suffix: str) -> None:
    """``http://broker:8080/admin/v2`` doubled the prefix on every path (a 404 with no hint)."""
    reader = AdminReader(f"http://broker:8080{suffix}")
    try:
        assert reader.url == "http://broker:8080"
    finally:
        reader.close()
    behind_a_gateway = AdminReader("https://gateway/pulsar")
    try:
        assert behind_a_gateway.url == "https://gateway/pulsar"
    finally:
        behind_a_gateway.close()


def test_a_401_without_a_token_asks_for_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A first try without --token-file was told 'the token was refused', and went hunting a bad token."""
    token = tmp_path / "token"
    token.write_text("wrong-token-value\n")
    with stub_broker(refusing, default=UNAUTHORIZED) as url:
        without = error_line(["advise", "--admin-url", url], capsys)
        with_one = error_line(["advise", "--admin-url", url, "--token-file", str(token)], capsys)
    assert without.endswith(
        "HTTP 401 Unauthorized: the cluster needs a token; give one with --token-file or --token-env"
    )
    assert with_one.endswith("HTTP 401 Unauthorized: the token was refused (check --token-file/--token-env)")


def test_collect_adds_to_its_own_recording_and_to_no_other_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``collect --out`` added a file per read to any directory (a sweep's, a home folder: ``ingest`` of it
    then read everything there as the recording). A new or empty directory, or an earlier recording (known
    by its events file), is written into; anything else is refused before the cluster is read."""
    from shedlab.cluster.collect import EVENTS_FILE
    from shedlab.cluster.sandbox import Sandbox

    rec = tmp_path / "rec"
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "notes.txt").write_text("mine\n")
    sweep = tmp_path / "sweep"
    (sweep / "runs").mkdir(parents=True)
    (sweep / "sweep.json").write_text('{"grids": []}')
    with Sandbox("broker-loss", seed=3, zookeeper=None) as sb:
        args = ["collect", "--admin-url", sb.admin_url, "--count", "1", "--out"]
        for _ in range(2):  # a new directory, then the recording the first run made: added to
            with pytest.raises(SystemExit) as exc:
                main([*args, str(rec)])
            assert exc.value.code == 0
            sb.advance(1)
        assert len(list(rec.glob("load-reports-*.jsonl"))) == 2 and (rec / EVENTS_FILE).is_file()
        capsys.readouterr()
        line = error_line([*args, str(home)], capsys)
        assert line.startswith("error: --out: is a directory of other files (Documents/), not a collect")
        line = error_line([*args, str(sweep)], capsys)
        assert line.startswith("error: --out: is a sweep directory (sweep.json), not a collect recording")
    assert sorted(p.name for p in home.iterdir()) == ["Documents", "notes.txt"]
    assert sorted(p.name for p in sweep.iterdir()) == ["runs", "sweep.json"]


def test_a_collect_whose_first_read_fails_ends_its_events_with_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first read refused (HTTP 401, a token the sandbox does not know) stopped the run with one line
    and left the events file with its ``start`` only, as if still recording (until 29 Nov 2026); its last
    line is ``end``, naming the error, and the token is in neither."""
    from shedlab.cluster.collect import EVENTS_FILE
    from shedlab.cluster.sandbox import Sandbox

    token = "a-token-the-sandbox-does-not-know-5d1e"
    monkeypatch.setenv("PULSAR_TOKEN", token)
    rec = tmp_path / "rec"
    with Sandbox("broker-loss", seed=3, zookeeper=None, tokens={"another-token": "admin"}) as sb:
        args = ["collect", "--admin-url", sb.admin_url, "--token-env", "PULSAR_TOKEN", "--count", "1"]
        line = error_line([*args, "--out", str(rec)], capsys)
    assert "HTTP 401" in line
    text = (rec / EVENTS_FILE).read_text()
    events = [json.loads(e) for e in text.splitlines()]
    assert [e["event"] for e in events] == ["start", "end"]
    assert events[-1]["cycles"] == 0 and events[-1]["interrupted"] is False
    assert events[-1]["error"] == line.removeprefix("error: ")
    assert token not in text
