"""``shedlab decide`` and ``shedlab conform``: Pulsar's decisions on a snapshot; the conformance runner."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from shedlab import jsonout
from shedlab.cli.consoles import make_console
from shedlab.cli.settings import SetOption, check_count, check_seed, snapshot_settings
from shedlab.core.decide import Outcome, decide_on_snapshot, load_snapshot_file
from shedlab.errors import InputError
from shedlab.model.json_reader import load_json_file
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.units import general

console = make_console()

MAX_CYCLES = 10_000
"""``decide --cycles``: AvgShedder's hit counts need a handful; more is a typo that would loop for hours."""
MAX_TIMING = 100_000
"""``conform --timing``: repetitions of the first tick."""


def _reason_grid(reason: dict[str, Any]) -> Table:
    """A reason as a key/value grid: one entry per line and numbers never broken across lines (a
    comma-separated reason in a narrow column wrapped inside ``4.5056e+07``)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column()
    for key, value in reason.items():
        if key != "strategy":
            grid.add_row(key, general(value, sep=" / "))  # a pair of brokers may wrap at " / "
    return grid


def _bundle(name: str) -> str:
    """``tenant/namespace`` on one line, the hash range under it: each part fits a narrow column."""
    namespace, slash, bundle_range = name.rpartition("/")
    return f"{namespace}{slash}\n{bundle_range}" if slash else name


def print_outcome(outcome: Outcome, title: str | None = None) -> None:
    """The unloads as a table, then every broker left alone with its reason, then the counts by reason.

    Shared by ``decide`` and ``advise``. Fits 80 columns: source above destination, the bundle's namespace
    above its range, the reason as a grid; none of the columns has to break a name or a number."""
    decisions = outcome.decisions
    if not decisions:
        console.print(f"[bold]{title or outcome.strategy}: no unload decision[/bold]")
    table = Table(title=f"{title or outcome.strategy}: {len(decisions)} unload decision(s)", show_lines=True)
    table.add_column("source\n→ destination", no_wrap=True)
    table.add_column("bundle", overflow="fold")
    table.add_column("reason")
    for d in decisions:
        table.add_row(f"{d.source}\n→ {d.destination or '-'}", _bundle(d.bundle), _reason_grid(d.reason))
    if decisions:
        console.print(table)
    if outcome.left_alone:
        # "why" is the first line of the grid, not a column of its own: two wrapping columns side by side
        # would be narrowed together below the width of a number
        notes = Table(title="brokers left alone", show_lines=False)
        notes.add_column("broker", no_wrap=True)
        notes.add_column("why, and the numbers")
        for a in outcome.left_alone:
            notes.add_row(a.broker, _reason_grid({"why": a.why, **a.detail}))
        console.print(notes)
    general = [s for s in outcome.skipped if "broker" not in s and "pair" not in s]
    for s in [*general, *(s for s in outcome.skipped if "bundle" in s)]:
        console.print(
            _reason_grid({"skipped": s.get("reason", ""), **{k: v for k, v in s.items() if k != "reason"}})
        )
    _print_split(outcome)
    counts = outcome.counts()
    if counts:
        console.print("reasons: " + ", ".join(f"{k} ×{v}" for k, v in counts.items()))


def _print_split(outcome: Outcome) -> None:
    """The leader's split check before the cycle: each bundle split with the thresholds it passed, and
    each candidate the namespace's bundle cap or its range refused."""
    plan = outcome.split
    if plan is None or not (plan.splits or plan.refused):
        return
    table = Table(
        title=f"{len(plan.splits)} bundle(s) split before the cycle (loadBalancerAutoBundleSplitEnabled)"
    )
    table.add_column("broker", no_wrap=True)
    table.add_column("bundle", overflow="fold")
    table.add_column("why")
    for s in plan.splits.values():
        table.add_row(s.broker, _bundle(s.bundle), "\n".join(s.reasons))
    for r in plan.refused:
        table.add_row(r["broker"], _bundle(r["bundle"]), f"not split: {r['reason']}")
    console.print(table)


def _read_snapshot(path: Path) -> ClusterSnapshot:
    """A LoadData document or a case as before; anything else (a bare load report, a recording, a
    directory of per-broker reports) through advise's reader, imported only then (it loads httpx and
    kazoo, which ``decide`` on a LoadData file does not need)."""
    if path.is_file() and path.name.removesuffix(".gz").endswith(".json"):
        doc = load_json_file(path, gunzip=True)
        if isinstance(doc, dict) and any(k in doc for k in ("brokers", "brokerData", "loadData", "ticks")):
            return load_snapshot_file(path)
    from shedlab.cluster.advise import read_snapshot_path, snapshot_of

    return snapshot_of(read_snapshot_path(path))


def decide(
    snapshot: Annotated[
        Path,
        typer.Argument(
            help="LoadData JSON, a case file, a bare load report, or a directory of per-broker load reports."
        ),
    ],
    strategy: Annotated[
        str | None,
        typer.Option(
            help="Strategy pair ('AvgShedder', 'ThresholdShedder+LeastResourceUsageWithWeight') or a shedder."
        ),
    ] = None,
    config: Annotated[Path | None, typer.Option(help="broker.conf, YAML or JSON with Pulsar keys.")] = None,
    set_: SetOption = None,
    seed: Annotated[int, typer.Option(help="Seed for the strategies' random choices.")] = 0,
    cycles: Annotated[
        int,
        typer.Option(help="Repeat the shedding call on this snapshot until it unloads (hit counts)."),
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """What Pulsar's leader would unload from this snapshot, where it would go, and why."""
    check_seed(seed)
    check_count(cycles, "--cycles", minimum=1, maximum=MAX_CYCLES)
    conf, strategy = snapshot_settings(snapshot, config, set_, strategy)
    snap = _read_snapshot(snapshot)
    outcome = decide_on_snapshot(snap, conf, strategy=strategy, seed=seed, cycles=cycles)
    if as_json:
        print(jsonout.dumps(outcome.to_json(), indent=2))
    else:
        title = outcome.strategy if outcome.cycles == 1 else f"{outcome.strategy}, cycle {outcome.cycles}"
        print_outcome(outcome, title)


def conform(
    cases: Annotated[list[Path], typer.Argument(help="Case files or directories (every *.json below).")],
    check: Annotated[bool, typer.Option(help="Compare with each case's expected answers.")] = False,
    timing: Annotated[int, typer.Option(help="Time the first tick N times on fresh instances.")] = 0,
    seed: Annotated[int, typer.Option(help="Seed for random choices.")] = 0,
) -> None:
    """Run conformance cases; one JSON object per case on stdout (docs/conformance.md)."""
    from shedlab.core.conformance import conform_one, iter_case_files

    check_seed(seed)
    check_count(timing, "--timing", maximum=MAX_TIMING)
    files = list(iter_case_files(cases))
    if not files:
        raise InputError("no conformance cases (*.json) in " + ", ".join(map(str, cases)))
    passed = failed = errors = 0
    for path in files:
        output, ok = conform_one(path, check=check, timing=timing, seed=seed)
        print(jsonout.dumps(output), flush=True)
        if "error" in output:  # a case that cannot be run: the user's input, one line as every input error
            errors += 1
            print(f"error: {output['error']}", file=sys.stderr, flush=True)
        elif ok:
            passed += 1
        else:
            failed += 1
    if check:
        print(f"conformance: {passed} passed, {failed} failed, {errors} errors", file=sys.stderr)
    # after every case: 2 where a case could not be run (bad input, as everywhere), else 1 on a mismatch
    if errors:
        raise typer.Exit(2)
    if check and failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(decide)
    app.command()(conform)
