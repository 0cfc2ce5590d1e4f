"""End to end against the sandbox (Pulsar's admin API on loopback, znodes in a real ZooKeeper):
``advise`` dry-run and ``--execute`` under the guard, ``collect`` through broker loss and a kill, wrong
tokens and unreachable hosts as one line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import fresh_scenario, two_broker_sandbox

from shedlab.cluster.access import Retry, Token
from shedlab.cluster.collect import EVENTS_FILE, CollectSummary, RecordWriter, collect
from shedlab.cluster.readers import AdminReader, ClusterReading, ZooKeeperReader
from shedlab.cluster.sandbox import Sandbox

pytestmark = pytest.mark.zookeeper

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "sandbox-super-user-token-7f3a"
SHEDLAB = [sys.executable, "-m", "shedlab"]


@pytest.fixture
def sandbox(zk_hosts: str) -> Iterator[Sandbox]:
    with two_broker_sandbox(zk_hosts, TOKEN) as sb:
        yield sb


def run(*args: str, token: str | None = TOKEN, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="100")
    if token is not None:
        env["PULSAR_TOKEN"] = token
    return subprocess.run(
        [*SHEDLAB, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
    )


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def owners(sb: Sandbox) -> dict[str, str | None]:
    return {b: sb.owner_of(b) for b in sb.simulation.bundle_index}


def test_advise_dry_run_changes_nothing(sandbox: Sandbox, tmp_path: Path) -> None:
    before = owners(sandbox)
    audit = tmp_path / "audit.jsonl"
    for source in (
        ["--admin-url", sandbox.admin_url, "--token-env", "PULSAR_TOKEN"],
        ["--zookeeper", str(sandbox.zookeeper)],
    ):
        result = run("advise", *source, "--strategy", "ThresholdShedder", "--json", "--audit", str(audit))
        assert result.returncode == 0, result.stderr
        doc = json.loads(result.stdout)
        # the first --max-unloads (1) would be sent, the rest held back: said, in a dry run too
        actions = [a["action"] for a in doc["actions"]]
        assert doc["unload"] and actions == ["dry-run"] + ["capped"] * (len(actions) - 1)
        assert TOKEN not in result.stdout + result.stderr
    sandbox.advance(3)
    assert owners(sandbox) == before and not audit.exists()


def test_execute_moves_exactly_two_bundles(sandbox: Sandbox, tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    before = owners(sandbox)
    result = run(
        "advise", "--admin-url", sandbox.admin_url, "--token-env", "PULSAR_TOKEN",
        "--strategy", "ThresholdShedder", "--execute", "--max-unloads", "2", "--audit", str(audit), "--json",
    )  # fmt: skip
    doc = json.loads(result.stdout)
    assert len(doc["unload"]) > 2
    unloaded = [a for a in doc["actions"] if a["action"] == "unloaded"]
    assert len(unloaded) == 2 and all(a["status"] == 204 for a in unloaded)
    capped = [a for a in doc["actions"] if a["action"] == "capped"]
    assert len(capped) == len(doc["unload"]) - 2 and all("--max-unloads=2" in a["detail"] for a in capped)
    assert result.returncode == 0, result.stderr  # the cap is the plan, not a failure
    log = [json.loads(line) for line in audit.read_text().splitlines()]
    actions = [e["action"] for e in log]
    assert actions.count("unloaded") == 2 and len(log) == len(doc["unload"]) + 2
    assert actions[:4] == ["unloading", "unloaded", "unloading", "unloaded"]  # each unload, before it is sent
    assert TOKEN not in audit.read_text() + result.stdout + result.stderr
    sandbox.advance(5)  # reconnection delay, then the new owners report
    after = owners(sandbox)
    for action in unloaded:
        assert after[action["bundle"]] == action["destination"] != before[action["bundle"]]
    moved = {b for b in before if before[b] != after[b]}
    assert moved == {a["bundle"] for a in unloaded}
    reader = ZooKeeperReader(str(sandbox.zookeeper))
    try:
        reading = reader.read()
    finally:
        reader.close()
    for action in unloaded:  # the destination wrote its report (a big change); the source may not have yet
        assert action["bundle"] in reading.reports[action["destination"]]["bundles"]
    stale = [a["bundle"] for a in unloaded if a["bundle"] in reading.reports[a["broker"]]["bundles"]]
    assert stale  # the state this checks: the sources have not rewritten their reports yet
    # a bundle its old owner's report still lists belongs to the newer report: advise reads the cluster
    # (it refused the snapshot, "owned by two brokers", until the source rewrote its report)
    again = run("advise", "--zookeeper", str(sandbox.zookeeper), "--strategy", "ThresholdShedder", "--json")
    assert again.returncode == 0, again.stderr
    admin = AdminReader(sandbox.admin_url, token=Token(TOKEN))
    try:
        local = admin.read()  # each broker's local report: both sides are current
    finally:
        admin.close()
    for action in unloaded:
        assert action["bundle"] in local.reports[action["destination"]]["lastStats"]
        assert action["bundle"] not in local.reports[action["broker"]]["lastStats"]


def test_wrong_token_and_unreachable_host_are_one_line(sandbox: Sandbox, tmp_path: Path) -> None:
    line = one_line_error(
        run("advise", "--admin-url", sandbox.admin_url, "--token-env", "PULSAR_TOKEN", token="wrong")
    )
    assert "HTTP 401" in line and sandbox.admin_url in line and "wrong" not in line.replace("wrong token", "")
    line = one_line_error(
        run(
            "collect",
            "--admin-url",
            sandbox.admin_url,
            "--out",
            str(tmp_path / "x"),
            "--count",
            "1",
            token=None,
        )
    )
    assert "HTTP 401" in line
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    line = one_line_error(
        run("advise", "--admin-url", f"http://127.0.0.1:{port}", "--retries", "2", "--timeout", "1s")
    )
    assert f"127.0.0.1:{port}" in line and "unreachable after 2 attempts" in line


def test_broker_that_dies_mid_collect_is_recorded(sandbox: Sandbox, tmp_path: Path) -> None:
    reader = AdminReader(
        sandbox.admin_url, token=Token(TOKEN), retry=Retry(attempts=2, backoff_s=0.05, timeout_s=2)
    )
    writer = RecordWriter(tmp_path)
    victim = sorted(sandbox.broker_urls)[0]

    def on_cycle(cycle: int, reading: ClusterReading | None, summary: CollectSummary) -> None:
        sandbox.advance(1)
        if cycle == 1:  # its process dies: still listed until its ZooKeeper session expires
            sandbox.crash_broker(victim)

    try:
        summary = collect(reader, writer, every_s=0.01, count=3, on_cycle=on_cycle)
    finally:
        reader.close()
        writer.close()
    assert summary.cycles == 3 and summary.missing == 2
    files = sorted(tmp_path.glob("load-reports-*.jsonl"))
    per_file = [{json.loads(line)["broker"] for line in f.read_text().splitlines()} for f in files]
    assert victim in per_file[0] and victim not in per_file[1] and victim not in per_file[2]
    events = [json.loads(line) for line in (tmp_path / EVENTS_FILE).read_text().splitlines()]
    missing = [e for e in events if e.get("event") == "broker_missing"]
    assert [e["cycle"] for e in missing] == [2, 3] and all(e["broker"] == victim for e in missing)


def test_killing_collect_loses_nothing_written(sandbox: Sandbox, tmp_path: Path) -> None:
    out = tmp_path / "rec"
    env = dict(os.environ, PULSAR_TOKEN=TOKEN)
    args = [
        "collect",
        "--admin-url",
        sandbox.admin_url,
        "--token-env",
        "PULSAR_TOKEN",
        "--every",
        "1s",
        "--out",
        str(out),
    ]
    proc = subprocess.Popen(
        [*SHEDLAB, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(out.glob("load-reports-*.jsonl"))) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    files = sorted(out.glob("load-reports-*.jsonl"))
    assert len(files) >= 5
    brokers = len(sandbox.broker_urls)
    for f in files:  # every visible file is whole: every line parses, every broker is there
        lines = f.read_text().splitlines()
        assert len(lines) == brokers and all(
            json.loads(line)["report"]["lastStats"] is not None for line in lines
        )
    # a rerun removes a temporary a kill may have left, and appends to the same recording
    (out / ".load-reports-19700101T000000-000001.jsonl.tmp").write_text('{"torn"')
    again = run(
        "collect",
        "--admin-url",
        sandbox.admin_url,
        "--token-env",
        "PULSAR_TOKEN",
        "--count",
        "1",
        "--out",
        str(out),
    )
    assert again.returncode == 0, again.stderr
    assert not list(out.glob(".*.tmp")) and len(list(out.glob("load-reports-*.jsonl"))) == len(files) + 1


@pytest.mark.parametrize(("stop", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_ends_collect_cleanly(
    sandbox: Sandbox, tmp_path: Path, stop: signal.Signals, status: int
) -> None:
    """Ctrl-C, or SIGTERM as a service manager stops it: the summary, 128 + the signal, the ``end`` event."""
    out = tmp_path / "rec"
    env = dict(os.environ, PULSAR_TOKEN=TOKEN)
    args = [
        "collect",
        "--admin-url",
        sandbox.admin_url,
        "--token-env",
        "PULSAR_TOKEN",
        "--every",
        "1s",
        "--out",
        str(out),
    ]
    # A shell starts background jobs with SIGINT ignored, and a child inherits that (Python then installs
    # no KeyboardInterrupt handler): the collect process gets Ctrl-C's default back, as in a terminal.
    proc = subprocess.Popen(
        [*SHEDLAB, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while len(list(out.glob("load-reports-*.jsonl"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(stop)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a collect that ignored the signal must not outlive the test
            proc.kill()
            proc.communicate()
    assert proc.returncode == status and "interrupted:" in err and "Traceback" not in err
    events = [json.loads(line) for line in (out / EVENTS_FILE).read_text().splitlines()]
    assert events[-1]["event"] == "end" and events[-1]["interrupted"] is True


@pytest.mark.spark
def test_collect_ingest_replay(zk_hosts: str, tmp_path: Path, spark: object) -> None:
    """A recording made by ``collect --zookeeper`` while the sandbox's own leader balances (ThresholdShedder)
    goes through Spark's ``ingest`` untouched (nothing quarantined) and ``replay`` sees the moves."""
    del spark  # the session fixture: Java is installed; the commands start their own Spark
    rec, snaps, replayed = tmp_path / "rec", tmp_path / "snap", tmp_path / "replay"
    with Sandbox(fresh_scenario("over-unloading-90-10"), seed=1, zookeeper=zk_hosts) as sb:
        # the sandbox is stepped by hand here, one minute per read: its clock is the read time
        reader = ZooKeeperReader(str(sb.zookeeper), cluster="sandbox", clock=lambda: sb.now_ms)
        writer = RecordWriter(rec)

        def advance(*_: object) -> None:
            sb.advance(1)

        try:
            summary = collect(reader, writer, every_s=0.001, count=20, on_cycle=advance)
        finally:
            reader.close()
            writer.close()
    assert summary.cycles == 20 and summary.missing == 0
    ingested = run("ingest", str(rec), "--out", str(snaps), "--master", "local[1]", "--json", token=None)
    assert ingested.returncode == 0, ingested.stderr
    doc = json.loads(ingested.stdout)
    assert doc["clusters"] == ["sandbox"] and doc["reasons"] == []
    assert sum(s["broker_rows_kept"] for s in doc["sources"]) == summary.reports
    replay = run(
        "replay", str(snaps), "-s", "ThresholdShedder+LeastLongTermMessageRate,AvgShedder", "--out",
        str(replayed), "--master", "local[1]", "--json", token=None,
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    rows = {r["strategy"]: r for r in json.loads(replay.stdout)["summary"]}
    threshold = rows["ThresholdShedder+LeastLongTermMessageRate"]
    assert threshold["ticks"] >= 15 and threshold["actual_moves"] > 0 and threshold["strategy_unloads"] > 0
    avg = next(r for name, r in rows.items() if name.startswith("AvgShedder"))
    reasons = json.loads(avg["reasons"])  # every tick's brokers left alone, with AvgShedder's reasons
    assert sum(reasons.values()) >= avg["ticks"] and "hit count not reached" in reasons


def test_execute_refuses_when_a_report_is_missing(sandbox: Sandbox, tmp_path: Path) -> None:
    """A listed broker that does not answer: the guard refuses the whole cycle, audits it, moves nothing
    (here the strategy, seeing one broker, has nothing to do either: the refusal is still audited)."""
    victim = sorted(sandbox.broker_urls)[-1]
    sandbox.crash_broker(victim)
    before = owners(sandbox)
    audit = tmp_path / "audit.jsonl"
    result = run(
        "advise", "--admin-url", sandbox.admin_url, "--token-env", "PULSAR_TOKEN", "--retries", "1",
        "--strategy", "ThresholdShedder", "--execute", "--max-unloads", "5", "--audit", str(audit), "--json",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert victim in doc["snapshot"]["missing"] and doc["guard"]["refusals"]
    assert {a["action"] for a in doc["actions"]} <= {"refused"}
    entries = [json.loads(line) for line in audit.read_text().splitlines()]
    assert entries and all(
        e["action"] == "refused" and f"report of {victim} is missing" in e["detail"] for e in entries
    )
    sandbox.advance(3)
    assert owners(sandbox) == before


def test_advise_starts_from_the_clusters_runtime_configuration(zk_hosts: str) -> None:
    """With --admin-url advise takes the cluster's runtime configuration (its pair here), but not the switch
    that stops its leader's own shedding; --no-cluster-config starts from Pulsar's defaults."""
    with Sandbox(
        fresh_scenario("over-unloading-90-10"),
        seed=1,
        zookeeper=zk_hosts,
        tokens={TOKEN: "admin"},
        strategy="AvgShedder",
        config_overrides={"loadBalancerSheddingEnabled": False},
    ) as sb:
        sb.advance(8)
        admin = ["advise", "--admin-url", sb.admin_url, "--token-env", "PULSAR_TOKEN", "--json"]
        taken = run(*admin)
        assert taken.returncode == 0, taken.stderr
        doc = json.loads(taken.stdout)
        assert doc["strategy"] == "AvgShedder"
        assert "disabled" not in json.dumps(doc["skipped"])
        default = run(*admin, "--no-cluster-config")
        assert json.loads(default.stdout)["strategy"] == "ThresholdShedder+LeastLongTermMessageRate"
        assert "--no-cluster-config" in one_line_error(
            run("advise", "--snapshot", "x.json", "--no-cluster-config")
        )
