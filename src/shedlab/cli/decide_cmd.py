"""``shedlab decide`` and ``shedlab conform``: Pulsar's decisions on a snapshot; the conformance runner."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from shedlab.config import LoadBalancerConfig
from shedlab.core.decide import Decision, decide_on_snapshot, load_snapshot_file

console = Console()


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list):
        return "/".join(_fmt(v) for v in value)
    return str(value)


def format_reason(reason: dict[str, Any]) -> str:
    """A reason dict as short ``key=value`` text for tables."""
    return ", ".join(f"{k}={_fmt(v)}" for k, v in reason.items() if k != "strategy")


def _print_table(decisions: list[Decision], strategy: str, skipped: list[dict[str, Any]]) -> None:
    table = Table(title=f"{strategy}: {len(decisions)} unload decision(s)", show_lines=True)
    for col in ("source", "bundle", "destination", "reason"):
        table.add_column(col, overflow="fold")
    for d in decisions:
        table.add_row(d.source, d.bundle, d.destination or "-", format_reason(d.reason))
    console.print(table)
    if skipped:
        notes = Table(title="considered and left alone", show_lines=False)
        notes.add_column("broker")
        notes.add_column("why")
        notes.add_column("numbers", overflow="fold")
        for s in skipped:
            rest = {k: v for k, v in s.items() if k not in ("broker", "reason")}
            notes.add_row(str(s.get("broker", "-")), str(s.get("reason", "")), format_reason(rest))
        console.print(notes)


def decide(
    snapshot: Annotated[
        Path, typer.Argument(help="LoadData JSON (the 'loadData' object of a case), or a case file.")
    ],
    strategy: Annotated[
        str | None,
        typer.Option(
            help="Strategy pair ('AvgShedder', 'ThresholdShedder+LeastResourceUsageWithWeight') or a shedder."
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="broker.conf, YAML or JSON with Pulsar keys.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the strategies' random choices.")] = 0,
    cycles: Annotated[
        int,
        typer.Option(min=1, help="Repeat the shedding call on this snapshot until it unloads (hit counts)."),
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """What Pulsar's leader would unload from this snapshot, where it would go, and why."""
    conf = LoadBalancerConfig.from_file(config) if config else LoadBalancerConfig()
    snap = load_snapshot_file(snapshot)
    outcome = decide_on_snapshot(snap, conf, strategy=strategy, seed=seed, cycles=cycles)
    if as_json:
        print(json.dumps(outcome.to_json(), indent=2))
    else:
        title = outcome.strategy if outcome.cycles == 1 else f"{outcome.strategy}, cycle {outcome.cycles}"
        _print_table(outcome.decisions, title, outcome.skipped)


def conform(
    cases: Annotated[list[Path], typer.Argument(help="Case files or directories (every *.json below).")],
    check: Annotated[bool, typer.Option(help="Compare with each case's expected answers.")] = False,
    timing: Annotated[int, typer.Option(help="Time the first tick N times on fresh instances.")] = 0,
    seed: Annotated[int, typer.Option(help="Seed for random choices.")] = 0,
) -> None:
    """Run conformance cases; one JSON object per case on stdout (docs/conformance.md)."""
    from shedlab.core.conformance import conform_one, iter_case_files

    passed = failed = errors = 0
    for path in iter_case_files(cases):
        output, ok = conform_one(path, check=check, timing=timing, seed=seed)
        print(json.dumps(output), flush=True)
        if "error" in output:
            errors += 1
        elif ok:
            passed += 1
        else:
            failed += 1
    if check:
        print(f"conformance: {passed} passed, {failed} failed, {errors} errors", file=sys.stderr)
    if errors or (check and failed):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(decide)
    app.command()(conform)
