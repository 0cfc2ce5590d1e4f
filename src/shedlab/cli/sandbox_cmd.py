"""``shedlab sandbox SCENARIO``: a simulated cluster behind Pulsar's admin API and znodes (docs/sandbox.md)"""

from __future__ import annotations

import dataclasses
import logging
import math
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from shedlab.cli.consoles import make_console

if TYPE_CHECKING:
    from shedlab.cluster.sandbox import Sandbox

from shedlab.cli.settings import check_cluster, check_seed
from shedlab.core.sim import Scenario, load_scenario
from shedlab.errors import InputError
from shedlab.units import parse_duration

console = make_console()


MIN_SPEED = 0.001
"""The slowest ``--speed``: a 60-s tick every 16 h 40 min. Slower was no sandbox anyone could watch, and
from about 1e-8 its clock thread's wait for the first tick overflowed (a traceback, then exit 0)."""


def _pace(speed: float, duration: str | None) -> float | None:
    """The seconds after which the sandbox stops (None: until stopped), once ``--speed`` is a finite number
    of at least :data:`MIN_SPEED` (nan ran no tick, inf the whole scenario at once: neither is a pace; a
    huge finite one runs the ticks as fast as they can be stepped, as ``--speed 100000`` does) and
    ``--duration`` is more than 0 (a sandbox started and stopped at once, exit 0, is one nothing could
    read)."""
    if not (math.isfinite(speed) and speed >= MIN_SPEED):
        raise InputError(f"must be a finite number of at least {MIN_SPEED:g}", field="--speed", value=speed)
    stop_after = None if duration is None else parse_duration(duration, field="--duration")
    if stop_after == 0:
        raise InputError("must be more than 0", field="--duration", value=duration)
    return stop_after


def sandbox(
    scenario: Annotated[str, typer.Argument(help="A scenario YAML file or the name of a built-in scenario.")],
    seed: Annotated[int | None, typer.Option(help="Seed (default: the scenario's).")] = None,
    strategy: Annotated[str | None, typer.Option(help="Strategy pair (default: the scenario's).")] = None,
    speed: Annotated[
        float,
        typer.Option(help="Simulated seconds per wall-clock second (1: real time; 60: a minute a second)."),
    ] = 1.0,
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option(help="Admin port; broker k listens on port+1+k (0: free ports).", min=0, max=65535)
    ] = 0,
    zookeeper: Annotated[
        str,
        typer.Option(help="'auto' (a private ZooKeeper), 'none', or HOST:PORT\\[/chroot] of a running one."),
    ] = "auto",
    token_file: Annotated[
        Path | None, typer.Option(help="File holding the super-user token; requests must then send it.")
    ] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster name (default: the scenario's).")] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(help="PEM certificate (chain) of the brokers: serve HTTPS only (with --tls-key)."),
    ] = None,
    tls_key: Annotated[Path | None, typer.Option(help="PEM private key of --tls-cert (unencrypted).")] = None,
    duration: Annotated[
        str | None, typer.Option(help="Stop after this wall-clock time (e.g. 10m); default: until Ctrl-C.")
    ] = None,
    start: Annotated[
        str,
        typer.Option(
            help="'now': the simulated clock starts at the wall clock, so reports are fresh to advise's "
            "guard; 'scenario': at the scenario's simulation.start_time."
        ),
    ] = "now",
) -> None:
    """Run a simulated Pulsar cluster that speaks Pulsar's admin REST API and writes its znodes."""
    check_seed(seed)
    check_cluster(cluster)
    stop_after = _pace(speed, duration)
    tokens = _tokens(token_file)
    loaded = _load_starting(scenario, start)
    if strategy is not None:  # named as the user typed it (the simulator's check says 'strategy')
        from shedlab.strategies import resolve_pair_name

        strategy = resolve_pair_name(strategy, field="--strategy")
    zk = None if zookeeper == "none" else zookeeper
    # kazoo logs every refused connection while a ZooKeeper starts; the sandbox reports real failures itself
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    from shedlab.cluster.sandbox import Sandbox

    sandbox_ = Sandbox(
        loaded,
        seed=seed,
        strategy=strategy,
        speed=speed,
        host=host,
        port=port,
        zookeeper=zk,
        tokens=tokens,
        cluster=cluster,
        tls_cert=tls_cert,
        tls_key=tls_key,
    )
    # Ctrl-C and SIGTERM only ask to stop: the sandbox then closes every session, whatever it was doing
    stop = threading.Event()
    handlers = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with sandbox_ as sb:
            _announce(sb, speed, token_file, tls_cert)
            _wait(sb, stop, stop_after)
    finally:
        for sig, previous in handlers.items():
            signal.signal(sig, previous)
    console.print(
        "sandbox stopped: brokers' sessions closed, ephemeral znodes removed."
        if zk is not None
        else "sandbox stopped: the admin API is closed (no ZooKeeper was used)."
    )


def _tokens(token_file: Path | None) -> dict[str, str] | None:
    """The super-user token the brokers require (None: no authentication)."""
    if token_file is None:
        return None
    from shedlab.cluster.access import read_token_file  # the clients' rule (--token-file), not a copy

    return {read_token_file(token_file): "admin"}


def _load_starting(scenario: str, start: str) -> Scenario:
    """The scenario, its simulated clock started at the wall clock for ``--start now``."""
    if start not in ("now", "scenario"):
        raise InputError("must be 'now' or 'scenario'", field="--start", value=start)
    loaded = load_scenario(scenario)
    if start == "now":
        # a cluster whose reports are dated 2024 is stale to every real client (advise refuses it)
        settings = dataclasses.replace(loaded.simulation, start_time_ms=int(time.time() * 1000))
        loaded = dataclasses.replace(loaded, simulation=settings)
    return loaded


def _announce(sb: Sandbox, speed: float, token_file: Path | None, tls_cert: Path | None) -> None:
    console.print(f"[bold]sandbox[/] {sb.scenario.name}: cluster {sb.cluster}, speed ×{speed:g}")
    console.print(f"admin URL   {sb.admin_url}")
    console.print(f"ZooKeeper   {sb.zookeeper or '(none)'}")
    console.print("authentication: " + (f"bearer token from {token_file}" if token_file else "off"))
    console.print("TLS: " + (f"HTTPS only, certificate {tls_cert}" if tls_cert else "off (plain HTTP)"))
    for broker, url in sb.broker_urls.items():
        console.print(f"broker      {broker:<22} {url}")
    console.print("Ctrl-C stops the sandbox.", style="dim")


def _wait(sb: Sandbox, stop: threading.Event, seconds: float | None) -> None:
    """Until ``stop`` is set (Ctrl-C, SIGTERM) or ``seconds`` of wall-clock time have passed; says when
    the scenario ends (the sandbox then serves its final state) and stops if the clock failed."""
    deadline = None if seconds is None else time.monotonic() + seconds
    announced = False
    while not stop.is_set():
        if sb.failure is not None:
            raise InputError(sb.failure, field="sandbox")
        if sb.finished and not announced:
            console.print("the scenario has ended: serving its final state until stopped", style="dim")
            announced = True
        left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
        if left <= 0:
            return
        stop.wait(left)


def register(app: typer.Typer) -> None:
    app.command(help="Run a simulated Pulsar cluster that speaks Pulsar's admin REST API and znodes.")(
        sandbox
    )
