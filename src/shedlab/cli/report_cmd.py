"""``shedlab report`` (one self-contained HTML file from any results directory) and ``shedlab demo``
(the shipped PIP-364 grid through sweep → evaluate → report on local Spark)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from shedlab.cli.consoles import make_console
from shedlab.errors import InputError
from shedlab.units import megabytes

if TYPE_CHECKING:  # the CLI imports Spark and pandas only when a command runs (start-up time)
    from shedlab.core.grid import Grid
    from shedlab.spark.evaluate import EvaluationResult
    from shedlab.spark.sweep import SweepResult

console = make_console()
err_console = make_console(stderr=True)

DEMO_GRID = "pip364"
DEMO_SEEDS = 10
"""Seeds per scenario × pair in the demo: 11 × 5 × 10 = 550 runs, under two minutes on 2 cores."""


def report(
    results_dir: Annotated[
        Path,
        typer.Argument(help="Output of shedlab sweep (+ evaluate), simulate, compare, replay or tune."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path("report.html"),
    max_points: Annotated[
        int, typer.Option(min=10, help="At most this many points per plotted series (min/max decimation).")
    ] = 2000,
    title: Annotated[
        str | None, typer.Option(help="Title of the report (default: from the results).")
    ] = None,
) -> None:
    """Write one self-contained HTML report (tables and interactive plots; opens from disk, no network)."""
    from shedlab.report import build_report

    with err_console.status("building the report…"):
        path = build_report(results_dir, out, max_points=max_points, title=title)
    console.print(f"report: [bold]{path}[/] ({megabytes(path.stat().st_size)} MB)", highlight=False)


class _DemoProgress:
    """The demo's progress display (stderr): a bar of finished runs, then one line per later stage.

    The bar is fed by the sweep's own progress callback (runs counted by the summaries they have
    written); runs that a previous demo already finished count as done from the start.
    """

    def __init__(self, total_runs: int) -> None:
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
        )
        self.total_runs = total_runs
        self._runs: TaskID | None = None

    def __enter__(self) -> _DemoProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def runs(self, done: int, pending: int, failed_tasks: int) -> None:
        """``shedlab.spark.sweep.sweep``'s ``progress(done, total, failed_tasks)`` for this sweep."""
        if self._runs is None:
            self._runs = self.bar.add_task("sweep: simulated runs", total=self.total_runs)
        self.bar.update(self._runs, completed=self.total_runs - pending + done)

    def stage(self, description: str) -> TaskID:
        return self.bar.add_task(description, total=1)

    def done(self, task: TaskID) -> None:
        self.bar.update(task, completed=1)


def demo(
    out: Annotated[Path, typer.Option(help="Directory for the sweep, its evaluation and the report.")] = Path(
        "out/demo"
    ),
    seeds: Annotated[
        int,
        typer.Option(
            min=0, help="Seeds per scenario × strategy pair (seeds 1..N); 0 = the grid's own seeds."
        ),
    ] = DEMO_SEEDS,
    master: Annotated[
        str | None, typer.Option(help="Spark master (default local[*]; e.g. local[2], spark://host:7077).")
    ] = None,
    grid: Annotated[str, typer.Option(help="Grid file, or the name of a shipped grid.")] = DEMO_GRID,
    recommend: Annotated[
        bool,
        typer.Option(
            help="Then the operator's path on the shipped recording: ingest → twin → tune → recommendation "
            "(shedlab tune --demo, into OUT/recommendation)."
        ),
    ] = True,
) -> None:
    """The main job: every built-in PIP-364 scenario × the five strategy pairs × 10 seeds, swept on
    Spark, evaluated, and turned into an HTML report; prints the PIP-364 table and the report's path.
    Then, from a recorded cluster to a recommendation: the shipped recording of a cluster on Pulsar's old
    default strategy is ingested, fitted by a twin, tuned, and the advice printed as a broker.conf."""
    from shedlab.cli.spark_cmd import _preflight, spark_session
    from shedlab.core.results import check_output_kind
    from shedlab.report import build_report
    from shedlab.spark.evaluate import evaluate
    from shedlab.spark.sweep import sweep

    started = time.monotonic()
    the_grid = _demo_grid(grid, seeds)
    check_output_kind(str(out), "demo")  # its sweep, evaluation, report and recommendation too
    out = _output_dir(out)
    sweep_dir = out / "sweep"
    _preflight(master, None)
    _announce(the_grid, out)
    with (
        spark_session(master, None, None, False, "demo") as spark,
        _DemoProgress(the_grid.size) as progress,
    ):
        err_console.print(f"Spark {spark.version} on {spark.sparkContext.master}", style="dim")
        result = sweep(spark, the_grid, str(sweep_dir), progress=progress.runs)
        task = progress.stage("evaluate (Spark SQL)")
        evaluation = evaluate(spark, str(sweep_dir), str(out / "evaluation"))
        progress.done(task)
        task = progress.stage("report (HTML)")
        path = build_report(out, out / "report.html")
        progress.done(task)
    _print_outcome(result, evaluation, sweep_dir, path, time.monotonic() - started)
    if recommend:
        from shedlab.cli.tune_cmd import tune_demo

        err_console.print("[bold]From a recorded cluster to a recommendation[/] (shedlab tune --demo)")
        tune_demo(str(out / "recommendation"), 5, 8, master, None, None, False)


def _demo_grid(grid: str, seeds: int) -> Grid:
    """The grid to sweep: ``grid`` with seeds first..first+N-1 (its own seeds for N = 0), N at most what a
    grid's ``seeds: {count: N}`` takes (10^11 was a MemoryError traceback building the seeds)."""
    from shedlab.cli.settings import check_count
    from shedlab.core.grid import MAX_SEEDS, load_grid

    check_count(seeds, "--seeds", maximum=MAX_SEEDS)
    the_grid = load_grid(grid)
    if seeds > 0:
        first = the_grid.seeds[0] if the_grid.seeds else 1
        the_grid = dataclasses.replace(the_grid, seeds=tuple(range(first, first + seeds)))
    return the_grid


def _output_dir(out: Path) -> Path:
    """``out``, absolute and created (a user error if it cannot be)."""
    out = out.resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the output directory: {exc.strerror}", source=str(out)) from None
    return out


def _announce(the_grid: Grid, out: Path) -> None:
    err_console.print(
        f"[bold]shedlab demo[/]: grid [bold]{the_grid.name}[/]: {the_grid.factors()} = {the_grid.size} runs"
        f"\n→ {out}",
        highlight=False,
    )


def _print_outcome(
    result: SweepResult, evaluation: EvaluationResult, sweep_dir: Path, path: Path, elapsed: float
) -> None:
    """Runs reused and failed, the evaluation's notes, the PIP-364 table and where the report is."""
    from shedlab.report.terminal import pip364_table

    if result.skipped:
        err_console.print(f"{result.skipped} runs were already in {sweep_dir} and were not run again.")
    if result.failed or evaluation.runs_failed:
        err_console.print(
            f"[yellow]{evaluation.runs_failed} runs failed; see {sweep_dir}/runs (status, error).[/]"
        )
    for note in evaluation.notes:
        err_console.print(f"note: {note}", style="dim", highlight=False)
    console.print(pip364_table(evaluation.pip364))
    console.print(
        f"{evaluation.runs_ok} runs in {elapsed:.0f} s. Report: [bold]{path}[/] "
        f"({megabytes(path.stat().st_size)} MB; open it in a browser, no network needed).",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.command()(report)
    app.command()(demo)
