"""``advise`` on files (no network): directories of per-broker load reports, the guard, the audit log."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from cli_support import error_line
from typer.testing import CliRunner

from shedlab.cli import app
from shedlab.cluster.access import Token, load_token
from shedlab.cluster.advise import (
    CLOCK_SLACK_MS,
    AuditLog,
    Guard,
    SnapshotInput,
    execute,
    read_snapshot_path,
    snapshot_of,
    unloaded_bundles,
)
from shedlab.cluster.readers import ClusterReading, Ownership
from shedlab.config import LoadBalancerConfig
from shedlab.core.decide import Decider, Decision, Outcome, decide_on_snapshot
from shedlab.errors import ClusterError, InputError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "snapshot.json"
runner = CliRunner()


def reports(now_ms: int) -> dict[str, dict[str, Any]]:
    """The example's brokers as bare load reports, each bundle's sample in ``lastStats`` (what
    ``GET /admin/v2/broker-stats/load-report`` returns): no LoadData to assemble."""
    doc = json.loads(EXAMPLE.read_text())
    out = {}
    for broker, data in doc["brokers"].items():
        local = dict(data["localData"], lastUpdate=now_ms)
        stats = {}
        for bundle in local["bundles"]:
            short = doc["bundleData"][bundle]["shortTermData"]
            stats[bundle] = {
                k: short[k] for k in ("msgRateIn", "msgRateOut", "msgThroughputIn", "msgThroughputOut")
            }
        local["lastStats"] = stats
        out[broker] = local
    return out


def write_dir(tmp: Path, now_ms: int) -> Path:
    folder = tmp / "reports"
    folder.mkdir()
    for broker, report in reports(now_ms).items():
        (folder / f"{broker.replace(':', '_')}.json").write_text(json.dumps(report))
    return folder


def execute_args(folder: Path, strategy: str, audit: Path) -> list[str]:
    """``advise --snapshot FOLDER --strategy S --execute --audit AUDIT``: a guarded cycle on files."""
    return [
        "advise",
        "--snapshot",
        str(folder),
        "--strategy",
        strategy,
        "--execute",
        "--audit",
        str(audit),
    ]


def test_directory_of_bare_reports_is_a_snapshot(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    source = read_snapshot_path(write_dir(tmp_path, now))
    assert source.reading is not None and len(source.reading.reports) == 4
    snap = snapshot_of(source)
    assert snap.num_brokers == 4 and snap.num_bundles == sum(len(r["bundles"]) for r in reports(now).values())
    outcome = decide_on_snapshot(snap, LoadBalancerConfig(), strategy="ThresholdShedder")
    sources = {d.source for d in outcome.decisions}
    assert outcome.decisions and sources.isdisjoint({a.broker for a in outcome.left_alone})
    assert sources | {a.broker for a in outcome.left_alone} == set(snap.broker_ids)


def test_latest_report_per_broker_wins(tmp_path: Path) -> None:
    now = int(time.time() * 1000)
    lines = []
    for stamp in (now - 120_000, now):
        for broker, report in reports(stamp).items():
            report = dict(report, numTopics=stamp % 1000)
            lines.append(
                json.dumps({"timestamp": stamp, "broker": broker, "cluster": "c1", "report": report})
            )
    path = tmp_path / "load-reports.jsonl"
    path.write_text("\n".join(lines) + "\n")
    source = read_snapshot_path(path)
    assert source.reading is not None
    assert source.reading.time_ms == now and source.reading.cluster == "c1"
    assert {r["numTopics"] for r in source.reading.reports.values()} == {now % 1000}


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("timestamp", "abc", "timestamp: expected epoch milliseconds, got 'abc'"),
        ("timestamp", True, "timestamp: expected epoch milliseconds, got 'True'"),
        ("timestamp", [], "timestamp: expected epoch milliseconds, got '[]'"),
        ("timestamp", 1e300, "timestamp: epoch milliseconds out of range, got 1e+300"),
        ("broker", 5, "broker: expected the broker's id as text (got 5)"),
        ("broker", " ", "broker: expected the broker's id as text (got ' ')"),
        ("cluster", 5, "cluster: expected the cluster's name as text (got 5)"),
        ("timestamp", 1735689605, "timestamp: expected epoch milliseconds, got 1735689605: epoch seconds"),
        ("timestamp", 0, "timestamp: expected epoch milliseconds after 1970, got 0"),
        ("timestamp", -5, "timestamp: expected epoch milliseconds after 1970, got -5"),
    ],
)
def test_a_recordings_bad_timestamp_broker_or_cluster_is_refused_not_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, shown: str
) -> None:
    """Read as 0 (the oldest) or replaced by the report's ``webServiceUrl``, such a line lost silently
    to its broker's other reports, or was counted as another broker's."""
    now = int(time.time() * 1000)
    lines = [
        json.dumps({"timestamp": now, "broker": b, "cluster": "c1", "report": r})
        for b, r in reports(now).items()
    ]
    first = json.loads(lines[0])
    first[field] = value
    lines[0] = json.dumps(first)
    path = tmp_path / "load-reports.jsonl"
    path.write_text("\n".join(lines) + "\n")
    line = error_line(["decide", str(path)], capsys)
    assert line.startswith(f"error: {path}:1: ") and shown in line, line


def test_a_gzipped_recording_is_read_not_passed_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``.jsonl.gz`` is a recording as ingest reads it (the shipped demo recording is one): in a
    directory it was passed over silently (a broker recorded only there was missing), alone it was
    refused as 'a gzip file, not text'."""
    import gzip

    now = int(time.time() * 1000)
    lines = [json.dumps({"timestamp": now, "broker": b, "report": r}) for b, r in reports(now).items()]
    folder = tmp_path / "rec"
    folder.mkdir()
    (folder / "a.jsonl").write_text(lines[0] + "\n")
    (folder / "b.jsonl.gz").write_bytes(gzip.compress("\n".join(lines[1:]).encode() + b"\n"))
    source = read_snapshot_path(folder)
    assert source.reading is not None and set(source.reading.reports) == set(reports(now))
    whole = gzip.compress("\n".join(lines).encode())
    (folder / "b.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    line = error_line(["decide", str(folder / "b.jsonl.gz")], capsys)
    assert line.startswith(f"error: {folder / 'b.jsonl.gz'}: cannot read it as gzip data: "), line


def test_advise_snapshot_dir_cli(tmp_path: Path) -> None:
    folder = write_dir(tmp_path, int(time.time() * 1000))
    result = runner.invoke(app, ["advise", "--snapshot", str(folder), "--strategy", "AvgShedder", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["mode"] == "dry-run" and doc["unload"] == []
    whys = {a["broker"]: a["why"] for a in doc["left_alone"]}
    assert len(whys) == 4 and any("hit count 1 of 8 at the low threshold" in w for w in whys.values())
    text = runner.invoke(
        app, ["advise", "--snapshot", str(folder), "--strategy", "AvgShedder"], env={"COLUMNS": "100"}
    )
    assert "brokers left alone" in text.stdout and "hit count not reached ×4" in text.stdout


def test_advise_on_a_case_runs_its_strategy(tmp_path: Path) -> None:
    """As decide: the case's AvgShedder was ignored, and the default pair ran (until 29 Nov 2026)."""
    case = Path(__file__).resolve().parents[2] / "conformance" / "AvgShedder" / "avg-3-brokers-pairs.json"
    result = runner.invoke(app, ["advise", "--snapshot", str(case), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["strategy"] == "AvgShedder"


def test_extensible_data_in_a_snapshot_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broker_load = {"cpu": {"usage": 1, "limit": 100}, "weightedMaxEMA": 0.3, "updatedAt": 1, "reportedAt": 1}
    (tmp_path / "b1.json").write_text(json.dumps(broker_load))
    line = error_line(["advise", "--snapshot", str(tmp_path)], capsys)
    assert "b1.json" in line and "extensible" in line and "weightedMaxEMA" in line


def test_guard_refuses_stale_and_missing() -> None:
    now = int(time.time() * 1000)
    fresh = ClusterReading("zk", "c", now, reports={"b1:8080": {"lastUpdate": now}})
    guard = Guard(max_unloads=1, max_age_minutes=15)
    assert guard.refusals(SnapshotInput(reading=fresh), now) == []
    old = ClusterReading("zk", "c", now - 17 * 60_000, reports={"b1:8080": {"lastUpdate": now}})
    assert "snapshot is stale" in guard.refusals(SnapshotInput(reading=old), now)[0]
    quiet = ClusterReading("zk", "c", now, reports={"b1:8080": {"lastUpdate": now - 20 * 60_000}})
    assert "report of b1:8080 is stale" in guard.refusals(SnapshotInput(reading=quiet), now)[0]
    missing = ClusterReading("api", "c", now, reports={}, missing={"b2:8080": "HTTP 503"})
    assert guard.refusals(SnapshotInput(reading=missing), now) == ["report of b2:8080 is missing: HTTP 503"]
    assert "no read time" in guard.refusals(SnapshotInput(load_data_file=EXAMPLE), now)[0]
    for unusable in ({}, {"lastUpdate": 0}, {"lastUpdate": "1"}, {"lastUpdate": True}):
        ageless = ClusterReading("zk", "c", now, reports={"b1:8080": unusable})
        assert guard.refusals(SnapshotInput(reading=ageless), now) == [
            f"report of b1:8080 has no usable lastUpdate ({unusable.get('lastUpdate')!r}): its age is unknown"
        ]
    as_float = ClusterReading("zk", "c", now, reports={"b1:8080": {"lastUpdate": float(now)}})
    assert guard.refusals(SnapshotInput(reading=as_float), now) == []


def test_a_healthy_idle_brokers_report_is_not_stale_before_its_rewrite() -> None:
    """Pulsar rewrites an unchanged report at the first check (every 5 s) after it is 15 minutes old, so a
    healthy idle broker's report is up to 15 min 5 s old; the guard refused every cycle that read one in
    that window, and a cluster of many idle brokers nearly always has one. Its grace: the check interval
    and a minute of clocks (the sandbox rewrites at its one-minute steps)."""
    now = int(time.time() * 1000)
    guard = Guard(max_unloads=1, max_age_minutes=15, report_check_ms=5_000)
    assert guard.grace_ms == 5_000 + CLOCK_SLACK_MS

    def refusals(age_ms: int) -> list[str]:
        reading = ClusterReading("zk", "c", now, reports={"b1:8080": {"lastUpdate": now - age_ms}})
        return guard.refusals(SnapshotInput(reading=reading), now)

    assert refusals(15 * 60_000 + 5_000) == []  # at its rewrite
    assert refusals(16 * 60_000 + 5_000) == []  # the sandbox's rewrite, a step after the maximum
    (why,) = refusals(16 * 60_000 + 5_001)
    assert why == (
        "report of b1:8080 is stale: lastUpdate 16.1 min ago, more than "
        "loadBalancerReportUpdateMaxIntervalMinutes=15 and 65 s of grace "
        "(a rewrite's check interval and clocks)"
    )


def test_guard_refuses_times_in_the_future() -> None:
    """A negative age passed the staleness check: a garbage ``lastUpdate`` (year 287,000) was fresh for ever,
    a broker whose clock runs ahead stayed fresh after it stopped reporting. Within the limit it is skew."""
    now = int(time.time() * 1000)
    guard = Guard(max_unloads=1, max_age_minutes=15)
    ahead = ClusterReading("zk", "c", now, reports={"b1:8080": {"lastUpdate": now + 5 * 60_000}})
    assert guard.refusals(SnapshotInput(reading=ahead), now) == []
    garbage = ClusterReading("zk", "c", now, reports={"b1:8080": {"lastUpdate": 9e15}})
    (why,) = guard.refusals(SnapshotInput(reading=garbage), now)
    assert (
        why.startswith("report of b1:8080 has a lastUpdate ")
        and "min in the future: its age is unknown" in why
    )
    future = ClusterReading("zk", "c", now + 16 * 60_000, reports={"b1:8080": {"lastUpdate": now}})
    assert guard.refusals(SnapshotInput(reading=future), now) == [
        "snapshot is dated 16.0 min in the future: its age is unknown (a clock ahead by more than "
        "loadBalancerReportUpdateMaxIntervalMinutes=15?)"
    ]


def test_execute_on_stale_files_is_refused_and_audited(tmp_path: Path) -> None:
    folder = write_dir(tmp_path, int(time.time() * 1000) - 3_600_000)
    audit = tmp_path / "audit.jsonl"
    result = runner.invoke(app, [*execute_args(folder, "ThresholdShedder", audit), "--json"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert doc["unload"] and {a["action"] for a in doc["actions"]} == {"refused"}
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert len(entries) == len(doc["unload"]) and all(e["action"] == "refused" for e in entries)
    assert all("snapshot is stale" in e["detail"] for e in entries)


def test_a_dry_run_shows_which_unloads_the_cap_would_hold_back() -> None:
    """``--max-unloads`` in a dry run: every decision was ``dry-run``, and the operator could not see which
    ones an ``--execute`` of this cycle would send and which it would hold back (until 29 Nov 2026)."""
    args = ["advise", "--snapshot", str(EXAMPLE), "--strategy", "ThresholdShedder"]
    doc = json.loads(runner.invoke(app, [*args, "--max-unloads", "1", "--json"]).stdout)
    assert len(doc["unload"]) == 2 and [a["action"] for a in doc["actions"]] == ["dry-run", "capped"]
    assert doc["actions"][1]["detail"] == (
        "over --max-unloads=1 for this cycle: --execute would hold it back; nothing was called (dry-run)"
    )
    doc = json.loads(runner.invoke(app, [*args, "--max-unloads", "2", "--json"]).stdout)
    assert [a["action"] for a in doc["actions"]] == ["dry-run", "dry-run"]
    text = runner.invoke(app, [*args, "--max-unloads", "1"], env={"COLUMNS": "300"})
    assert text.exit_code == 0 and "\ncapped: public/default/0x08000000_0x09000000 " in text.stdout


def test_token_never_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.sig"
    monkeypatch.setenv("MY_TOKEN", secret)
    token = load_token(None, "MY_TOKEN")
    assert token is not None and secret not in repr(token) and secret not in str(token)
    audit = AuditLog(tmp_path / "a.jsonl", token)
    audit.write({"detail": f"server said Bearer {secret}"})
    audit.close()
    assert (
        secret not in (tmp_path / "a.jsonl").read_text()
        and "Bearer ***" in (tmp_path / "a.jsonl").read_text()
    )
    assert Token(secret).header() == {"Authorization": f"Bearer {secret}"}


def test_bad_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args, expected in (
        (["advise"], "give a source"),
        (["advise", "--snapshot", str(tmp_path / "nope")], "snapshot not found"),
        (["advise", "--snapshot", str(tmp_path)], "no *.json or *.jsonl"),
        (["advise", "--admin-url", "ftp://x", "--snapshot", str(EXAMPLE)], "give one source"),
        (["advise", "--admin-url", "ftp://x"], "expected an http:// or https:// URL"),
        # urlparse's and httpx's own exceptions were tracebacks (28 Nov 2026)
        (["advise", "--admin-url", "http://[x"], "--admin-url: not a URL (Invalid IPv6 URL)"),
        (["advise", "--admin-url", "http://b:abc"], "--admin-url: not a URL (Port could not be cast"),
        (["advise", "--admin-url", "http://b:99999"], "--admin-url: not a URL (Port out of range"),
        (["advise", "--admin-url", "http://:8080"], "URL naming a host (got 'http://:8080')"),
        (
            ["advise", "--admin-url", "http://b:0"],
            "--admin-url: port 0 is no broker's port (got 'http://b:0')",
        ),
        # ;parameters were glued to every path and printed, as a ?query was: http://b:8080/;token=…/admin/v2/…
        (["advise", "--admin-url", "http://b:8080/;token=secret"], "or ;parameters (a token goes in"),
        (["advise", "--admin-url", "http://u:secret@[x"], "refused (they would be printed in errors)"),
        (["advise", "--admin-url", "u:secret@b:8080"], "(got '***@b:8080')"),  # no scheme: it was printed
        (["advise", "--admin-url", "http://u:se/cret@b:8080/"], "(got 'http://***@b:8080')"),
        (
            ["advise", "--admin-url", "http://127.0.0.1:9", "--token-env", "SHEDLAB_UNSET_VAR"],
            "not set or empty",
        ),
        (
            ["advise", "--snapshot", str(EXAMPLE), "--cluster", "c"],
            "--cluster: names the cluster --zookeeper",
        ),
        # ignored, silently: ZooKeeper is read without a token or a CA (--tls-ca was not even read)
        (
            ["advise", "--snapshot", str(EXAMPLE), "--token-env", "T"],
            "--token-env: is used only with --admin-url",
        ),
        (
            ["advise", "--zookeeper", "127.0.0.1:9", "--tls-ca", "x"],
            "--tls-ca: is used only with --admin-url",
        ),
        (
            ["collect", "--out", str(tmp_path / "r"), "--zookeeper", "127.0.0.1:9", "--token-file", "t"],
            "--token-file: is used only with --admin-url",
        ),
        (
            ["collect", "--out", str(tmp_path), "--admin-url", "http://x", "--every", "0s"],
            "must be at least 1s",
        ),
        (
            ["collect", "--out", str(tmp_path), "--admin-url", "http://x", "--every", "1ms"],
            "--every: must be at least 1s and at most 1d (got '1ms')",
        ),
    ):
        line = error_line(args, capsys)
        assert expected in line and "secret" not in line, args


@pytest.mark.parametrize("where", ["rglob", "is_file"])
def test_a_directory_that_cannot_be_listed_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """``advise --snapshot /`` (or ``decide /``) met /proc/1/cwd, which even root may not enter: a
    PermissionError traceback (28 Nov 2026), raised by ``is_file`` on the path the walk listed (or by the
    walk itself). Root can enter a chmod-000 directory, so the walk is made to fail as that one did."""
    (tmp_path / "r.json").write_text("{}")

    def refused(*args: Any) -> Any:
        raise PermissionError(13, "Permission denied", "/proc/1/cwd")

    monkeypatch.setattr(Path, where, refused)
    with pytest.raises(InputError) as caught:
        read_snapshot_path(tmp_path)
    assert (
        str(caught.value)
        == f"{tmp_path}: cannot list this directory: [Errno 13] Permission denied: '/proc/1/cwd'"
    )


def test_load_data_file_is_accepted_as_is() -> None:
    result = runner.invoke(
        app, ["advise", "--snapshot", str(EXAMPLE), "--strategy", "ThresholdShedder", "--json"]
    )
    decided = runner.invoke(app, ["decide", str(EXAMPLE), "--strategy", "ThresholdShedder", "--json"])
    assert json.loads(result.stdout)["unload"] == json.loads(decided.stdout)["unload"]


def test_cluster_errors_are_user_errors() -> None:
    assert ClusterError.exit_code == InputError.exit_code == 2


def test_decide_reads_bare_reports_too(tmp_path: Path) -> None:
    """The issue's first complaint: ``decide`` on a bare load report said ``brokers: required field is
    missing``; it now reads reports and directories of them as ``advise --snapshot`` does."""
    folder = write_dir(tmp_path, int(time.time() * 1000))
    single = next(folder.iterdir())
    for path in (single, folder):
        result = runner.invoke(app, ["decide", str(path), "--json"])
        assert result.exit_code == 0, result.output
        doc = json.loads(result.stdout)
        assert len(doc["left_alone"]) + len({u["broker"] for u in doc["unload"]}) == (
            1 if path == single else 4
        )


def test_execute_without_an_admin_url_is_refused_even_without_decisions(tmp_path: Path) -> None:
    """A cycle with nothing to unload wrote ``refused`` to the audit but said nothing and exited 0, so a
    ``--execute`` that could never unload looked like one that had nothing to do."""
    no_admin_url = "no --admin-url to send the unloads to"
    folder = write_dir(tmp_path, int(time.time() * 1000))
    audit = tmp_path / "audit.jsonl"
    args = execute_args(folder, "AvgShedder", audit)
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert not doc["unload"] and doc["guard"]["refusals"] == [no_admin_url]
    assert [json.loads(line)["action"] for line in audit.read_text().splitlines()] == ["refused"]
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 1 and f"guard: {no_admin_url}" in result.stdout, result.output


class _Interrupted:
    """An admin client whose unload is interrupted while the broker has it (Ctrl-C, a kill)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def unload(self, bundle: str, destination: str | None) -> int:
        self.sent.append(bundle)
        raise KeyboardInterrupt


def test_an_unload_is_in_the_audit_before_it_is_sent(tmp_path: Path) -> None:
    """The audit line was written after the call: an unload the run was killed in (the broker may have
    done it) left no trace. Now ``unloading`` is fsynced first, and the outcome follows."""
    now = int(time.time() * 1000)
    source = SnapshotInput(reading=ClusterReading(source="test", cluster="c", time_ms=now))
    decisions = [
        Decision("b1:8080", f"t/ns/0x0000000{k}_0x0000000{k + 1}", "b2:8080", {"why": "x"}) for k in (0, 1)
    ]
    outcome = Outcome("ThresholdShedder", decisions)
    audit = AuditLog(tmp_path / "audit.jsonl")
    admin = _Interrupted()
    with pytest.raises(KeyboardInterrupt):
        execute(
            outcome, source, guard=Guard(2), admin=admin, audit=audit, cycle=1, dry_run=False, now_ms=now,  # type: ignore[arg-type]
            owners=lambda d: Ownership(d.source, True, "test"),
        )  # fmt: skip
    audit.close()
    [entry] = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert admin.sent == [decisions[0].bundle]
    assert entry["action"] == "unloading" and entry["bundle"] == decisions[0].bundle
    assert entry["destination"] == "b2:8080" and entry["cycle"] == 1


class _Counting:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def unload(self, bundle: str, destination: str | None) -> int:
        self.sent.append(bundle)
        return 204


def test_an_audit_that_cannot_be_written_stops_the_run_before_the_unload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk under ``--audit`` was an ``OSError`` traceback; now one line naming the file and the
    entry, and the unload whose ``unloading`` line could not be written is not sent."""
    now = int(time.time() * 1000)
    source = SnapshotInput(reading=ClusterReading(source="test", cluster="c", time_ms=now))
    outcome = Outcome("ThresholdShedder", [Decision("b1:8080", "t/ns/0x00000000_0x00000001", "b2:8080", {})])
    audit = AuditLog(tmp_path / "audit.jsonl")

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", full)
    admin = _Counting()
    with pytest.raises(InputError) as caught:
        execute(
            outcome, source, guard=Guard(1), admin=admin, audit=audit, cycle=1, dry_run=False, now_ms=now,  # type: ignore[arg-type]
            owners=lambda d: Ownership(d.source, True, "test"),
        )  # fmt: skip
    monkeypatch.undo()
    audit.close()
    assert str(caught.value) == (
        f"{tmp_path / 'audit.jsonl'}: cannot write the audit entry unloading t/ns/0x00000000_0x00000001 (its "
        "unload was not sent): No space left on device"
    )
    assert admin.sent == []


def test_watch_execute_cycles_no_faster_than_the_leader_sheds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cap is per cycle: ``--watch --execute --every 1s`` (``1m`` mistyped) could unload up to
    ``--max-unloads`` bundles every second. Cycles are now at least ``loadBalancerSheddingIntervalMinutes``
    apart with --execute, as the leader's; a dry-run watch keeps any rhythm."""
    line = error_line(
        [
            *execute_args(EXAMPLE, "AvgShedder", tmp_path / "audit.jsonl"),
            "--watch",
            "--every",
            "1s",
            "--count",
            "1",
        ],
        capsys,
    )
    assert line == (
        "error: --every: with --execute, cycles at most as often as the leader sheds, every "
        "loadBalancerSheddingIntervalMinutes=1 min (got '1s'); each cycle unloads up to --max-unloads: raise "
        "that to move more bundles a cycle"
    )
    args = ["advise", "--snapshot", str(EXAMPLE), "--watch", "--every", "1s", "--count", "1", "--json"]
    assert runner.invoke(app, args).exit_code == 0


class _Failing:
    """An admin client whose every unload fails (the broker answered 500)."""

    def unload(self, bundle: str, destination: str | None) -> int:
        raise ClusterError("HTTP 500: boom", source=f"PUT …/{bundle}/unload")


@pytest.mark.parametrize("age_ms", [0, 3_600_000], ids=["failed", "refused"])
def test_only_succeeded_unloads_stay_in_the_grace_period(age_ms: int) -> None:
    """A failed or refused unload was put in the grace period as if done, so the next cycle decided
    around it; Pulsar's leader records a bundle only after its unload call returned. A dry run keeps
    every decision there (docs/operators.md: it follows a leader whose unloads all succeeded)."""
    now = int(time.time() * 1000)
    snap = snapshot_of(SnapshotInput(load_data_file=EXAMPLE))
    source = SnapshotInput(reading=ClusterReading(source="test", cluster="c", time_ms=now - age_ms))
    decider = Decider(LoadBalancerConfig(), strategy="ThresholdShedder")
    first = decider.cycle(snap)
    results = execute(
        first, source, guard=Guard(5), admin=_Failing(), audit=None, cycle=1, dry_run=False, now_ms=now,  # type: ignore[arg-type]
        owners=lambda d: Ownership(d.source, True, "test"),
    )  # fmt: skip
    assert {r.action for r in results} == {"failed" if age_ms == 0 else "refused"}
    decider.keep_unloaded(unloaded_bundles(results))
    assert [d.bundle for d in decider.cycle(snap).decisions] == [d.bundle for d in first.decisions]
    dry = Decider(LoadBalancerConfig(), strategy="ThresholdShedder")
    once = {d.bundle for d in dry.cycle(snap).decisions}
    assert once and once.isdisjoint(d.bundle for d in dry.cycle(snap).decisions)


def test_an_audit_log_is_not_appended_to_another_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--audit broker.conf`` (or the snapshot file itself) had the audit's JSON lines appended to it."""
    conf = tmp_path / "broker.conf"
    conf.write_text("maxUnloadPercentage=0.5\n")
    line = error_line([*execute_args(EXAMPLE, "ThresholdShedder", conf)], capsys)
    assert line == (
        f"error: {conf}: exists and is not an advise audit log (its first line is no audit entry): the audit "
        "would be appended to it; give --audit a new file, or an earlier audit log"
    )
    assert conf.read_text() == "maxUnloadPercentage=0.5\n"
    audit = tmp_path / "audit.jsonl"  # an earlier audit log is appended to
    for _ in range(2):
        runner.invoke(app, execute_args(EXAMPLE, "ThresholdShedder", audit))
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert len(entries) == 4 and {e["action"] for e in entries} == {"refused"}
