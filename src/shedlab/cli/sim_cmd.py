"""``shedlab simulate`` and ``shedlab compare``: run scenarios and print their metrics."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from shedlab import jsonout, units
from shedlab.cli.consoles import make_console, print_table
from shedlab.cli.settings import SetOption, check_seed, run_overrides
from shedlab.core.sim import Scenario, SimulationResult, builtin_scenarios, load_scenario, run_simulation
from shedlab.core.sim.result import check_local_out
from shedlab.errors import InputError
from shedlab.strategies import pair_list, resolve_pair_name, short_pair_name
from shedlab.strategies.registry import caption_legend

console = make_console()
err_console = make_console(stderr=True)

_PROGRESS_MIN_TICKS = 200  # shorter runs finish before a bar is worth drawing

# (label, summary key, format) rows of the tables
SUMMARY_ROWS: tuple[tuple[str, str, str], ...] = (
    ("unloads", "unloads", "int"),
    ("bundles moved", "bundles_moved", "int"),
    ("msg rate moved (msg/s)", "msg_rate_moved", "big"),
    ("throughput moved (MB/s)", "throughput_moved", "mb"),
    ("topics disconnected", "topics_disconnected", "int"),
    ("clients disconnected", "clients_disconnected", "int"),
    ("cycles with unloads", "shedding_cycles_with_unloads", "int"),
    ("score spread, mean", "score_spread_mean", "f1"),
    ("score spread, final", "score_spread_final", "f1"),
    ("score std, mean", "score_std_mean", "f1"),
    ("score cv, mean", "score_cv_mean", "f2"),
    ("max/mean score, mean", "score_max_over_mean_mean", "f2"),
    ("msg-rate max/min, final", "msg_rate_ratio_final", "f2"),
    ("time to balance (s)", "time_to_balance_s_last_event", "time"),
    ("events never balanced", "events_never_balanced", "int"),
    ("over-placement events", "over_placement_events", "int"),
    ("placements onto hot brokers", "hot_placements", "int"),
    ("over-unloading flips", "over_unloading_flips", "int"),
    ("moved again within grace", "moved_again_within_grace", "int"),
    ("moved again within window", "moved_again_within_window", "int"),
    ("broker-minutes overloaded", "broker_minutes_overloaded", "f1"),
)


_FORMATS: dict[str, Callable[[Any], str]] = {
    "int": units.integer,
    "big": lambda v: units.fixed(v, 0, grouping=True),
    "mb": units.megabytes,
    "f1": lambda v: units.fixed(v, 1),
    "f2": lambda v: units.fixed(v, 2),
    "time": lambda v: units.fixed(v, 0, grouping=True, missing="never"),
}
"""How each kind of ``SUMMARY_ROWS`` cell is printed (a missing time to balance is ``never``)."""


def _load(scenario: str) -> Scenario:
    return load_scenario(scenario)


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int], Callable[[int, int], None]] | None]:
    """A rich progress bar on stderr; yields a factory of per-run callbacks (None when disabled)."""
    if not enabled:
        yield None
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("ticks"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    with bar:

        def factory(label: str, total: int) -> Callable[[int, int], None]:
            task = bar.add_task(label, total=total)

            def update(done: int, total_ticks: int) -> None:
                if done == total_ticks or done % 10 == 0:
                    bar.update(task, completed=done)

            return update

        yield factory


def _run(
    scenario: Scenario,
    strategy: str | None,
    overrides: dict[str, Any],
    seed: int | None,
    record: bool,
    factory: Callable[[str, int], Callable[[int, int], None]] | None,
) -> SimulationResult:
    label = f"{scenario.name} · {strategy or scenario.strategy}"
    progress = factory(label, scenario.num_ticks) if factory is not None else None
    return run_simulation(
        scenario,
        strategy=strategy,
        config_overrides=overrides or None,
        seed=seed,
        progress=progress,
        record=record,
    )


def _summary_table(title: str, columns: list[tuple[str, dict[str, Any]]]) -> Table:
    table = Table(title=title, show_lines=False)
    table.add_column("metric")
    for name, _ in columns:
        table.add_column(name, justify="right", overflow="fold")
    for label, key, kind in SUMMARY_ROWS:
        table.add_row(label, *(_FORMATS[kind](summary.get(key)) for _, summary in columns))
    return table


def _print_header(scenario: Scenario, seed: int, config: dict[str, Any]) -> None:
    n = scenario.initial_brokers
    console.print(
        f"[bold]{scenario.name}[/]: {units.counted(n, 'broker')} at the start, "
        f"{scenario.num_bundles} bundles, "
        f"{scenario.duration / 60:g} min in {scenario.simulation.tick:g}-s ticks, seed {seed}"
    )
    if scenario.description:
        console.print(scenario.description.strip(), style="dim", highlight=False)
    if config:
        console.print(
            "config: " + ", ".join(f"{k}={v}" for k, v in config.items()), style="dim", highlight=False
        )


def _safe_dir_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name)


def simulate(
    scenario: Annotated[
        str,
        typer.Argument(
            help="A scenario YAML file or the name of a built-in scenario (see `shedlab compare --help`)."
        ),
    ],
    strategy: Annotated[
        str | None,
        typer.Option(help="Strategy pair, e.g. AvgShedder or ThresholdShedder+LeastResourceUsageWithWeight."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="Pulsar configuration (broker.conf, YAML or JSON) applied on top.")
    ] = None,
    set_: SetOption = None,
    seed: Annotated[int | None, typer.Option(help="Seed (default: the scenario's).")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="Write ticks/brokers/decisions/events/skips Parquet and summary.json into this directory."
        ),
    ] = None,
    record: Annotated[
        bool,
        typer.Option(help="Also write the load reports (JSON lines) and Prometheus exports (needs --out)."),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print the run summary as JSON.")] = False,
) -> None:
    """Simulate a scenario and print its run summary."""
    if record and out is None:
        raise InputError("--record writes files: give --out DIR too", field="--record")
    check_seed(seed)
    if out is not None:  # not into another command's output
        from shedlab.core.results import check_output_dir, check_output_kind

        check_local_out(out)
        check_output_kind(str(out), "simulate")
        check_output_dir(str(out))  # before the run: one that cannot be written was a traceback after it
    scen = _load(scenario)
    settings = run_overrides(config, set_)
    overrides = settings.values
    pair = resolve_pair_name(strategy, field="--strategy") if strategy is not None else settings.pair
    settings.check_pair(pair or resolve_pair_name(scen.strategy))
    show_bar = not json_output and sys.stderr.isatty() and scen.num_ticks >= _PROGRESS_MIN_TICKS
    with _progress(show_bar) as factory:
        result = _run(scen, pair, overrides, seed, record, factory)
    if out is not None:
        result.write(out)
        if record:
            from shedlab.core.sim.recording import write_recording

            write_recording(result, out)
    if json_output:
        typer.echo(jsonout.dumps(result.document(), indent=2))
        return
    _print_header(scen, result.seed, result.config)
    print_table(console, _summary_table(f"{result.strategy}", [(result.strategy, result.summary)]))
    if out is not None:
        console.print(f"wrote {out}/", style="dim")


def compare(
    scenario: Annotated[str, typer.Argument(help="A scenario YAML file or a built-in scenario name.")],
    strategies: Annotated[
        str,
        typer.Option(help="Comma-separated strategy pairs, or 'all' for the five pairs of PIP-364."),
    ] = "all",
    config: Annotated[Path | None, typer.Option(help="Pulsar configuration applied to every run.")] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override one Pulsar key for every run.")
    ] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for every run (default: the scenario's).")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Write every run's files into DIR/<strategy>/ and compare.json into DIR."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the summaries as JSON.")] = False,
) -> None:
    """Run several strategy pairs on the same scenario and seed and print them side by side."""
    check_seed(seed)
    if out is not None:  # not into another command's output
        from shedlab.core.results import check_output_dir, check_output_kind

        check_local_out(out)
        check_output_kind(str(out), "compare")
        check_output_dir(str(out))
    scen = _load(scenario)
    names = pair_list(strategies)
    settings = run_overrides(config, set_)
    for name in names:
        settings.check_pair(name)
    overrides = settings.values
    results: list[SimulationResult] = []
    show_bar = not json_output and sys.stderr.isatty() and scen.num_ticks * len(names) >= _PROGRESS_MIN_TICKS
    with _progress(show_bar) as factory:
        for name in names:
            results.append(_run(scen, name, overrides, seed, False, factory))
    if out is not None:
        for result in results:
            result.write(out / _safe_dir_name(result.strategy))
    document = jsonout.dumps([r.document() for r in results], indent=2)  # compare.json and --json
    if out is not None:
        (out / "compare.json").write_text(document + "\n", encoding="utf-8")
    if json_output:
        typer.echo(document)
        return
    _print_header(scen, results[0].seed, overrides)
    columns = [(short_pair_name(r.strategy), r.summary) for r in results]
    print_table(console, _summary_table(f"{scen.name}: strategy pairs side by side", columns))
    console.print(
        f"{caption_legend([r.strategy for r in results])}; metrics: docs/metrics.md",
        style="dim",
    )


def register(app: typer.Typer) -> None:
    """Add ``simulate`` and ``compare`` to the ``shedlab`` application."""
    names = ", ".join(builtin_scenarios())
    app.command(help=f"Simulate a scenario and print its run summary. Built-in scenarios: {names}.")(simulate)
    app.command(
        help=f"Run strategy pairs side by side on one scenario and seed. Built-in scenarios: {names}."
    )(compare)
