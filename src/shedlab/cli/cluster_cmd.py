"""``shedlab collect`` and ``shedlab advise``: a running Pulsar cluster, read, recorded, advised on
(docs/operators.md). Dry-run by default; the token never appears in any output."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from shedlab import jsonout
from shedlab.cli.consoles import make_console
from shedlab.cli.decide_cmd import print_outcome
from shedlab.cli.settings import (
    SetOption,
    check_cluster,
    check_count,
    check_seed,
    cli_config,
    snapshot_settings,
)
from shedlab.cluster.access import Retry, Token, load_token
from shedlab.cluster.advise import (
    NO_ADMIN_URL,
    ActionResult,
    AuditLog,
    Guard,
    SnapshotInput,
    execute,
    owner_lookup,
    read_snapshot_path,
    snapshot_of,
    unloaded_bundles,
)
from shedlab.cluster.collect import CollectSummary, RecordWriter, collect
from shedlab.cluster.readers import AdminReader, ClusterReading, ZooKeeperReader
from shedlab.config import LoadBalancerConfig, from_runtime_configuration
from shedlab.core.decide import Decider, Outcome
from shedlab.core.locations import names_a_scheme
from shedlab.errors import InputError, ShedlabError
from shedlab.model.pulsar import BundleData
from shedlab.units import counted, parse_duration

console = make_console(stderr=True)
out = make_console()

MAX_CYCLES = 10_000_000
ADVISE_EVERY = "60s"
"""``advise --watch``'s interval by default: Pulsar's ``loadBalancerSheddingIntervalMinutes``, 1."""
MAX_TIMEOUT = ("1h", 3600.0)
"""The longest ``--timeout``: a call that takes longer has not answered."""
MAX_EVERY = ("1d", 86400.0)
"""The longest ``--every``; far beyond it (``200000d``) a wait overflowed the clock, a traceback."""
MIN_EVERY = ("1s", 1.0)
"""The shortest ``--every``: each read calls ZooKeeper, or the admin API of every broker, and a broker
writes a new load report at most every ``loadBalancerReportUpdateMinIntervalMillis`` (5 s); ``1ms`` read
a cluster a thousand times a second. One second still paces a sandbox run 60 times faster than time."""

ZooKeeperOption = Annotated[
    str | None,
    typer.Option(
        "--zookeeper",
        help="HOST:PORT\\[,HOST:PORT…]\\[/chroot] of Pulsar's metadata store (broker.conf's "
        "metadataStoreUrl, zk: included, is taken as it is).",
    ),
]
AdminUrlOption = Annotated[
    str | None, typer.Option("--admin-url", help="A broker's web address, http(s)://host:port.")
]
ClusterOption = Annotated[
    str | None,
    typer.Option(
        help="Cluster name, labelling recordings (default: admin API, the only one listed; ZooKeeper, "
        "whose load-balancer znodes do not name it, 'pulsar')."
    ),
]
TokenFileOption = Annotated[Path | None, typer.Option("--token-file", help="File holding a JWT (Bearer).")]
TokenEnvOption = Annotated[
    str | None, typer.Option("--token-env", help="Environment variable holding a JWT.")
]
TlsCaOption = Annotated[
    Path | None, typer.Option("--tls-ca", help="CA certificate to verify https:// brokers.")
]
TimeoutOption = Annotated[
    str | None,
    typer.Option(
        help="Timeout of each call, for the whole of it (the whole answer, an admin call's redirects), "
        "and of connecting to ZooKeeper (default 10s); each retry has its own."
    ),
]
RetriesOption = Annotated[
    int | None, typer.Option(help="Attempts per call, with exponential back-off (default 3).")
]


class _Source:
    """The one source chosen by --zookeeper / --admin-url, opened and closed once."""

    def __init__(
        self,
        zookeeper: str | None,
        admin_url: str | None,
        cluster: str | None,
        token: Token | None,
        tls_ca: Path | None,
        retry: Retry,
    ) -> None:
        self.zk = ZooKeeperReader(zookeeper, cluster=cluster, retry=retry) if zookeeper else None
        self.admin = (
            AdminReader(admin_url, cluster=cluster, token=token, tls_ca=tls_ca, retry=retry)
            if admin_url
            else None
        )

    def read(self) -> ClusterReading:
        if self.zk is not None:
            return self.zk.read()
        assert self.admin is not None
        return self.admin.read()

    def close(self) -> None:
        for reader in (self.zk, self.admin):
            if reader is not None:
                reader.close()


def _retry(timeout: str | None, retries: int | None, snapshot: Path | None = None) -> Retry:
    """The calls' rhythm: ``--timeout`` (default 10 s) and ``--retries`` (default 3), checked; either beside
    a ``--snapshot`` is refused once checked: a file is read without a call, so they were ignored, silently,
    as a token or a CA would be (:func:`_admin_only`)."""
    attempts = 3 if retries is None else retries
    check_count(attempts, "--retries", minimum=1, maximum=20)
    retry = Retry(attempts=attempts, timeout_s=_seconds(timeout or "10s", "--timeout", MAX_TIMEOUT))
    for name, value in (("timeout", timeout), ("retries", retries)):
        if value is not None and snapshot is not None:
            raise InputError(
                "is used only with --zookeeper or --admin-url: a --snapshot is read without a call",
                field=f"--{name}",
                value=value,
            )
    return retry


def _seconds(
    text: str, option: str, most: tuple[str, float], least: tuple[str, float] | None = None
) -> float:
    """The duration ``text`` in seconds, refused unless more than 0 (a loop without a pause, a call with
    no time), or at least ``least``, and at most ``most`` (each as written, in seconds): a timeout of
    ``200000d`` overflowed the platform's clock in the first call's socket and was a traceback."""
    seconds = parse_duration(text, field=option)
    if seconds <= 0 or seconds < (least[1] if least else 0) or seconds > most[1]:
        low = f"at least {least[0]}" if least else "more than 0"
        raise InputError(f"must be {low} and at most {most[0]}", field=option, value=text)
    return seconds


def _every(text: str) -> float:
    """``--every`` in seconds, from :data:`MIN_EVERY` to :data:`MAX_EVERY`."""
    return _seconds(text, "--every", MAX_EVERY, MIN_EVERY)


def _admin_only(admin_url: str | None, **given: object) -> None:
    """Refuse a token or a CA given without ``--admin-url``: ZooKeeper is read without either (no SASL,
    no TLS) and a snapshot is a file, so they were ignored, silently (``--tls-ca`` not even read), and an
    operator who meant ZooKeeper to be authenticated or verified was not told. So is advise's
    ``--cluster-config``/``--no-cluster-config``: only an admin URL serves a runtime configuration."""
    for name, value in given.items():
        if value is not None and not admin_url:
            option = ("--no-" if value is False else "--") + name.replace("_", "-")  # a flag's off form
            raise InputError(
                "is used only with --admin-url: ZooKeeper and a --snapshot are read without it", field=option
            )


def _one_source(zookeeper: str | None, admin_url: str | None, snapshot: Path | None = None) -> None:
    given = [
        name
        for name, v in (("--zookeeper", zookeeper), ("--admin-url", admin_url), ("--snapshot", snapshot))
        if v
    ]
    if not given:
        raise InputError(
            "give a source: --zookeeper HOST:PORT, --admin-url URL"
            + (" or --snapshot PATH" if snapshot is None else "")
        )
    if len(given) > 1 and not (given == ["--zookeeper", "--admin-url"]):
        raise InputError(f"give one source, not {' and '.join(given)}")


def collect_cmd(
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for the recording (created if needed).")],
    zookeeper: ZooKeeperOption = None,
    admin_url: AdminUrlOption = None,
    cluster: ClusterOption = None,
    every: Annotated[
        str, typer.Option(help="Interval between reads, 1s to 1d (Pulsar's brokers report every minute).")
    ] = "60s",
    duration: Annotated[str | None, typer.Option(help="Stop after this long (e.g. 1h).")] = None,
    count: Annotated[int | None, typer.Option(help="Stop after this many reads.")] = None,
    token_file: TokenFileOption = None,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
    timeout: TimeoutOption = None,
    retries: RetriesOption = None,
) -> None:
    """Record a running cluster's load reports every --every into --out, in the format `ingest` reads."""
    from shedlab.core.results import check_output_kind  # pandas and pyarrow: not at advise's start-up

    _one_source(zookeeper, admin_url)
    if zookeeper and admin_url:
        raise InputError("give one source, not --zookeeper and --admin-url")
    check_cluster(cluster)
    _admin_only(admin_url, token_file=token_file, token_env=token_env, tls_ca=tls_ca)
    check_count(count, "--count", minimum=1, maximum=MAX_CYCLES)
    every_s = _every(every)
    duration_s = parse_duration(duration, field="--duration") if duration is not None else None
    if duration_s == 0:  # one read, as if --count 1: a recording of no time is no recording
        raise InputError("must be more than 0", field="--duration", value=duration)
    if names_a_scheme(str(out_dir)):  # s3://b/x, collapsed by Path to s3:/b/x, was a local directory
        raise InputError(
            "a local directory is expected, not a URI (collect writes its files with the local filesystem)",
            field="--out",
            value=str(out_dir),
        )
    check_output_kind(str(out_dir), "collect")  # a new or empty directory, or an earlier recording
    token = load_token(token_file, token_env)
    source = _Source(zookeeper, admin_url, cluster, token, tls_ca, _retry(timeout, retries))
    writer = RecordWriter(out_dir)
    total = (
        count if count is not None else (int(duration_s // every_s) + 1 if duration_s is not None else None)
    )
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        # not drawn when stderr is not a terminal, where rich's stop() printed an empty line before the
        # summary, or before a user error's one line
        disable=not console.is_terminal,
    )
    task = progress.add_task("collecting", total=total)

    def on_cycle(cycle: int, reading: ClusterReading | None, summary: CollectSummary) -> None:
        if reading is None:
            text = f"cycle {cycle}: failed (see {out_dir}/_collect-events.jsonl)"
        else:
            missing = f", [red]{len(reading.missing)} not answering[/red]" if reading.missing else ""
            text = f"cycle {cycle}: {len(reading.reports)} brokers{missing}"
        progress.update(task, advance=1, description=text)

    try:
        with progress, _terminate_as_interrupt() as terminated:
            summary = collect(
                source, writer, every_s=every_s, count=count, duration_s=duration_s, on_cycle=on_cycle
            )
    finally:
        source.close()
        writer.close()
    console.print(
        f"{'interrupted: ' if summary.interrupted else ''}{counted(summary.cycles, 'read')}, "
        f"{counted(summary.reports, 'load report')}, {counted(summary.bundles, 'bundle sample')}, "
        f"{counted(summary.missing, 'missing report')}, {counted(summary.failed_cycles, 'failed read')}"
        f" → {out_dir}"
    )
    if summary.interrupted:
        raise typer.Exit(143 if terminated else 130)  # 128 + the signal, as a shell reports it


@contextmanager
def _terminate_as_interrupt() -> Iterator[list[bool]]:
    """SIGTERM (a service manager's stop, ``kill PID``) ends a collect as Ctrl-C does: the cycle under way
    is abandoned, everything written stays, and the events file gets its ``end`` line. The yielded list
    becomes true when SIGTERM was the cause."""
    terminated: list[bool] = []

    def on_term(_signum: int, _frame: FrameType | None) -> None:
        terminated.append(True)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield terminated
    finally:
        signal.signal(signal.SIGTERM, previous)


def _print_cycle(
    result: dict[str, Any],
    outcome: Outcome,
    title: str,
    as_json: bool,
    refusals: list[str],
    missing: dict[str, str],
) -> None:
    if as_json:
        print(jsonout.dumps(result), flush=True)
        return
    print_outcome(outcome, title)
    for broker, why in sorted(missing.items()):
        out.print(f"[red]no report from {broker}[/red]: {why}")
    for action in result["actions"]:
        out.print(
            f"{action['action']}: {action['bundle']} {action['broker']} → {action['destination']}"
            + (f" ({action['detail']})" if action["detail"] else "")
        )
    for refusal in refusals:
        out.print(f"[yellow]guard[/yellow]: {refusal}")


def _watch_rhythm(watch: bool, every: str | None, count: int | None) -> float:
    """``--every`` in seconds (default 60 s), with ``--count`` and ``--every`` checked against ``--watch``."""
    check_count(count, "--count", minimum=1, maximum=MAX_CYCLES)
    # one cycle runs without --watch: the count or the interval would be ignored
    if count is not None and not watch:
        raise InputError("counts --watch cycles: give --watch too", field="--count", value=count)
    if every is not None and not watch:
        raise InputError("paces --watch cycles: give --watch too", field="--every", value=every)
    # 0 or 1ms: --watch would read the cluster (and with --execute, unload) in a tight loop
    return _every(every or ADVISE_EVERY)


def advise(
    zookeeper: ZooKeeperOption = None,
    admin_url: AdminUrlOption = None,
    snapshot: Annotated[
        Path | None, typer.Option(help="LoadData JSON, a load report, or a DIR of per-broker load reports.")
    ] = None,
    cluster: ClusterOption = None,
    strategy: Annotated[
        str | None, typer.Option(help="Strategy pair or shedder (default: the configured pair).")
    ] = None,
    config: Annotated[Path | None, typer.Option(help="broker.conf, YAML or JSON with Pulsar keys.")] = None,
    set_: SetOption = None,
    seed: Annotated[int, typer.Option(help="Seed for the strategies' random choices.")] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help="One JSON object per cycle instead of tables.")
    ] = False,
    watch: Annotated[
        bool, typer.Option(help="Repeat every --every, keeping strategy state (hit counts).")
    ] = False,
    every: Annotated[
        str | None,
        typer.Option(
            help=f"Interval of --watch cycles, 1s to 1d (default {ADVISE_EVERY}, Pulsar's shedding interval)."
        ),
    ] = None,
    count: Annotated[int | None, typer.Option(help="With --watch: stop after this many cycles.")] = None,
    execute_: Annotated[
        bool,
        typer.Option(
            "--execute",
            help="Really unload, through --admin-url (PUT …/unload?destinationBroker=), under the guard.",
        ),
    ] = False,
    max_unloads: Annotated[
        int,
        typer.Option(
            help="At most this many unloads per cycle with --execute (1 to 1000); a dry run marks the "
            "rest 'capped'."
        ),
    ] = 1,
    audit: Annotated[Path, typer.Option(help="Audit log (JSON lines) of every action and refusal.")] = Path(
        "advise-audit.jsonl"
    ),
    token_file: TokenFileOption = None,
    token_env: TokenEnvOption = None,
    tls_ca: TlsCaOption = None,
    timeout: TimeoutOption = None,
    retries: RetriesOption = None,
    cluster_config: Annotated[
        bool | None,
        typer.Option(
            "--cluster-config/--no-cluster-config",
            help="With --admin-url: start from the cluster's runtime configuration (under --config, --set).",
        ),
    ] = None,
) -> None:
    """What the strategy would unload from this cluster now, to where, and why; every broker left alone
    and why. Dry-run unless --execute."""
    _check_advise_source(zookeeper, admin_url, snapshot, cluster, execute_)
    check_seed(seed)
    _admin_only(
        admin_url, token_file=token_file, token_env=token_env, tls_ca=tls_ca, cluster_config=cluster_config
    )
    check_count(max_unloads, "--max-unloads", minimum=1, maximum=1000)  # 0: an --execute that never unloads
    every_s = _watch_rhythm(watch, every, count)
    conf, strategy = snapshot_settings(snapshot, config, set_, strategy) if snapshot else (None, strategy)
    rhythm = (strategy, seed, max_unloads, every_s if execute_ and watch else None, every or ADVISE_EVERY)
    decider, guard = _decider(conf or cli_config(config, set_), *rhythm)  # every local check before any call
    token = load_token(token_file, token_env)
    retry = _retry(timeout, retries, snapshot)
    source = (
        _Source(zookeeper, admin_url, cluster, token, tls_ca, retry) if (zookeeper or admin_url) else None
    )
    if cluster_config is not False and source is not None and source.admin is not None:
        decider, guard = _decider(_cluster_config(source.admin, config, set_, as_json), *rhythm)
    audit_log = AuditLog(audit, token) if execute_ else None
    advisor = _Advisor(decider, guard, source, snapshot, audit_log, execute_, watch, as_json)
    if _run_advisor(advisor, source, execute_, (watch, every_s, count)):
        raise typer.Exit(1)  # --execute did not do all it was asked: scripts must notice


def _decider(
    conf: LoadBalancerConfig,
    strategy: str | None,
    seed: int,
    max_unloads: int,
    every_s: float | None,
    every: str,
) -> tuple[Decider, Guard]:
    """advise's decider on ``conf`` and the guard under its configuration (:func:`_guard`)."""
    decider = Decider(conf, strategy=strategy, seed=seed)
    return decider, _guard(decider, max_unloads, every_s, every)


def _run_advisor(
    advisor: _Advisor, source: _Source | None, execute_: bool, rhythm: tuple[bool, float, int | None]
) -> int:
    """The cycles (:func:`_advise_cycles`) and the number of failed actions; Ctrl-C ends them, exit 130."""
    try:
        if execute_ and source is not None and source.zk is not None and source.admin is not None:
            source.admin.check_access()  # the admin URL only unloads: a wrong token, before any decision
        return _advise_cycles(advisor, *rhythm)
    except KeyboardInterrupt:
        console.print("interrupted")
        raise typer.Exit(130) from None
    finally:
        advisor.close()


def _cluster_config(
    admin: AdminReader, config: Path | None, sets: list[str] | None, as_json: bool
) -> LoadBalancerConfig:
    """advise's configuration on a cluster read through its admin API: Pulsar's defaults ← the admin
    URL's broker's runtime configuration (the keys it runs with, dynamic changes included) ← ``--config``
    ← ``--set``, but for :data:`_LEADER_SWITCHES`. Read once, after every local check (a mistyped option
    is said without a call). A broker that does not serve the endpoint leaves Pulsar's defaults, and says
    so (on stderr with ``--json``)."""
    admin.resolve_cluster()  # which cluster first: an unreachable admin URL is said on its first path
    url, answer = admin.runtime_configuration()
    if answer is None:
        message = f"advise: {url} gave no configuration; Pulsar's defaults under --config and --set are used"
        if as_json:  # stdout holds one JSON object per cycle
            print(message, file=sys.stderr)
        else:
            console.print(message)
        return cli_config(config, sets)
    keys = {k: v for k, v in from_runtime_configuration(answer).items() if k not in _LEADER_SWITCHES}
    return cli_config(config, sets, under=(f"GET {url}", keys))


_LEADER_SWITCHES = frozenset({"loadBalancerEnabled", "loadBalancerSheddingEnabled"})
"""Keys of the cluster's runtime configuration advise does not take: they switch the leader's own shedding,
and a cluster whose leader does not shed is the one an operator drives by hand with ``advise --execute``;
advise's question, what the strategy would unload now, stands either way (``--set`` still sets them)."""


def _check_advise_source(
    zookeeper: str | None, admin_url: str | None, snapshot: Path | None, cluster: str | None, execute_: bool
) -> None:
    """Refuse, before anything is read, a source ``advise`` cannot use as given: none or several, an
    ``--execute`` with only ZooKeeper (every cycle's unloads would be refused), a ``--cluster`` that is no
    Pulsar cluster name, or one beside a ``--snapshot`` (it names what a cluster source reads: ignored)."""
    _one_source(zookeeper, admin_url, snapshot)
    if execute_ and zookeeper and not admin_url:
        raise InputError(
            "--zookeeper is only read; the unloads go through a broker's admin API: give --admin-url too",
            field="--execute",
        )
    check_cluster(cluster)
    if snapshot is not None and cluster is not None:
        raise InputError(
            "names the cluster --zookeeper or --admin-url reads, not a --snapshot", field="--cluster"
        )


def _guard(decider: Decider, max_unloads: int, every_s: float | None, every: str) -> Guard:
    """The guard of ``--execute`` under the decider's configuration; ``every_s`` (an executing
    ``--watch``'s interval, as given in ``every``) is refused when faster than the leader sheds."""
    conf = decider.conf
    guard = Guard(
        max_unloads,
        conf.load_balancer_report_update_max_interval_minutes,
        conf.load_balancer_shedding_interval_minutes,
        int(conf.load_balancer_report_update_min_interval_millis),
    )
    if every_s is not None:
        guard.check_every(every_s, every)
    return guard


def _advise_cycles(advisor: _Advisor, watch: bool, every_s: float, count: int | None) -> int:
    """One cycle, or with ``--watch`` one every ``every_s`` (``count`` of them, or until Ctrl-C); the
    number of failed actions."""
    failures, cycle = 0, 0
    while True:
        cycle += 1
        started = time.monotonic()
        failures += advisor.cycle(cycle)
        if not watch or (count is not None and cycle >= count):
            return failures
        wait = every_s - (time.monotonic() - started)
        if wait > 0:
            time.sleep(wait)


@dataclass
class _Advisor:
    """One ``advise`` cycle after another: read, decide (keeping the strategy's state, as the leader
    does), check the guard, act or not, print; the BundleData history carries over between cycles."""

    decider: Decider
    guard: Guard
    source: _Source | None
    snapshot: Path | None
    log: AuditLog | None
    execute: bool
    watch: bool
    as_json: bool
    history: dict[str, BundleData] = field(default_factory=dict)

    def cycle(self, cycle: int) -> int:
        """Run one cycle; 1 if ``--execute`` did not do all it was asked (a refusal or failure, or a cycle
        that could not read the cluster), else 0.

        Under ``--watch`` a read that fails after the first cycle (a ZooKeeper or broker blip) skips that
        cycle only, said in one line, and the strategy keeps its state (AvgShedder's hit counts), as
        ``collect`` goes on after a failed cycle; the first cycle's failure is an error (exit 2): a wrong
        address or token shows at once.
        """
        try:
            snap_input = self._read()
        except ShedlabError as exc:
            if not self.watch or cycle == 1:
                raise
            self._unread(cycle, exc)
            return int(self.execute)
        snap = snapshot_of(snap_input, self.history)
        outcome = self.decider.cycle(snap)
        now_ms = int(time.time() * 1000)
        refusals = self.guard.refusals(snap_input, now_ms)
        if self.execute and (self.source is None or self.source.admin is None):
            # said (and counted in the exit code) in a cycle without decisions too, as the audit has it
            refusals.append(NO_ADMIN_URL)
        actions = self._act(outcome, snap_input, cycle, now_ms)
        reading = snap_input.reading
        missing = dict(reading.missing) if reading else {}
        result = {
            **outcome.to_json(),
            "mode": self.mode,
            "cycle": cycle,
            "snapshot": {
                "source": reading.source if reading else str(self.snapshot),
                "cluster": reading.cluster if reading else None,
                "time_ms": reading.time_ms if reading else None,
                "leader": reading.leader if reading else None,
                "brokers": snap.num_brokers,
                "bundles": snap.num_bundles,
                "missing": missing,
            },
            "guard": {"max_unloads": self.guard.max_unloads, "refusals": refusals},
            "actions": [a.to_json() for a in actions],
        }
        title = f"{outcome.strategy}, cycle {cycle}" if self.watch else outcome.strategy
        _print_cycle(result, outcome, title, self.as_json, refusals, missing)
        failed = refusals or any(a.action in ("refused", "failed", "unverified") for a in actions)
        return int(bool(self.execute and failed))

    def _act(
        self, outcome: Outcome, snap_input: SnapshotInput, cycle: int, now_ms: int
    ) -> list[ActionResult]:
        """``execute`` the cycle's decisions; then, executing, only the bundles whose unload succeeded stay
        in the leader's bookkeeping (the grace period), as ``ModularLoadManagerImpl.doLoadShedding`` records
        a bundle in ``recentlyUnloadedBundles`` only after its unload call returned: a capped, refused,
        skipped or failed decision is decided afresh next cycle. A dry run keeps every decision there, as
        docs/operators.md says: it follows a leader whose every unload succeeded, which is also what the
        strategy's own state (AvgShedder's hit counts, reset when it picks a broker) already assumes."""
        zookeeper, admin = (self.source.zk, self.source.admin) if self.source else (None, None)
        actions = execute(
            outcome,
            snap_input,
            guard=self.guard,
            admin=admin,
            audit=self.log,
            cycle=cycle,
            dry_run=not self.execute,
            now_ms=now_ms,
            owners=owner_lookup(zookeeper, admin, snap_input),
        )
        if self.execute:
            self.decider.keep_unloaded(unloaded_bundles(actions))
        return actions

    def _read(self) -> SnapshotInput:
        if self.source is not None:
            return SnapshotInput(reading=self.source.read())
        assert self.snapshot is not None
        return read_snapshot_path(self.snapshot)

    def _unread(self, cycle: int, exc: ShedlabError) -> None:
        """A cycle skipped because the cluster could not be read: one line (JSON on stdout with ``--json``),
        and an audit entry when executing (nothing was done)."""
        reason = str(exc)
        if self.log is not None:
            self.log.write({"cycle": cycle, "action": "skipped", "detail": f"cluster not read: {reason}"})
        if self.as_json:
            print(jsonout.dumps({"cycle": cycle, "mode": self.mode, "error": reason}), flush=True)
        else:
            console.print(f"cycle {cycle}: the cluster could not be read ({reason}); no decision this cycle")

    @property
    def mode(self) -> str:
        return "execute" if self.execute else "dry-run"

    def close(self) -> None:
        if self.source is not None:
            self.source.close()
        if self.log is not None:
            self.log.close()


def register(app: typer.Typer) -> None:
    app.command("collect")(collect_cmd)
    app.command()(advise)
