"""``shedlab report`` (one self-contained HTML file from any results directory) and ``shedlab demo``
(the shipped PIP-364 grid through sweep → evaluate → report on local Spark)."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from shedlab.errors import InputError

if TYPE_CHECKING:
    import pandas as pd

console = Console()
err_console = Console(stderr=True)

DEMO_GRID = "pip364"
_RATING_STYLE = {"good": "green", "normal": "yellow", "bad": "red"}


def report(
    results_dir: Annotated[
        Path,
        typer.Argument(help="Output of shedlab sweep (+ evaluate), simulate, compare or replay."),
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
    size = path.stat().st_size / 1e6
    console.print(f"report: [bold]{path}[/] ({size:.1f} MB)", highlight=False)


def _fmt(value: Any) -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "-"
    if math.isnan(v):
        return "-"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def pip_table(table: pd.DataFrame) -> Table:
    """The PIP-364 table for the terminal: one row per strategy pair (and parameter set), one column per
    problem, each cell ``figure [CI]`` and the rating in its colour."""
    from shedlab.report.pip364 import pair_order, problem_order

    problems = problem_order(table["problem"].astype(str).unique())
    keys = table[["strategy", "params_id"]].astype(str).drop_duplicates()
    rows = sorted(keys.itertuples(index=False, name=None), key=lambda sp: (pair_order(sp[0]), sp[1]))
    show_params = keys["params_id"].nunique() > 1
    out = Table(title="PIP-364, measured (mean [95 % CI], rating; lower is better)", show_lines=True)
    out.add_column("strategy pair", overflow="fold")
    for problem in problems:
        out.add_column(problem, justify="center", overflow="fold")
    for strategy, params_id in rows:
        cells = []
        for problem in problems:
            hit = table[
                (table["strategy"].astype(str) == strategy)
                & (table["params_id"].astype(str) == params_id)
                & (table["problem"].astype(str) == problem)
            ]
            if hit.empty:
                cells.append("[dim]not measured[/]")
                continue
            r = hit.iloc[0]
            rating = str(r["rating"])
            ci = (
                f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]"
                if not math.isnan(float(r["ci_low"] or math.nan))
                else ""
            )
            style = _RATING_STYLE.get(rating, "dim")
            cells.append(f"{_fmt(r['value'])} {ci}\n[{style}]{rating}[/]")
        label = strategy.replace("+", "+\n") + (f"\n[dim]{params_id}[/]" if show_params else "")
        out.add_row(label, *cells)
    return out


class _DemoProgress:
    """One rich progress display for the demo's stages, on stderr."""

    def __init__(self) -> None:
        self.bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=False,
        )
        self.runs: TaskID | None = None

    def __enter__(self) -> _DemoProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def stage(self, description: str) -> TaskID:
        return self.bar.add_task(description, total=1)

    def done(self, task: TaskID, description: str | None = None) -> None:
        if description:
            self.bar.update(task, description=description)
        self.bar.update(task, completed=1)

    def sweep_progress(self, done: int, total: int, failed: int) -> None:
        if self.runs is None:
            self.runs = self.bar.add_task("sweep: simulated runs", total=max(total, 1))
        desc = "sweep: simulated runs" + (f" ({failed} task failures)" if failed else "")
        self.bar.update(self.runs, completed=done, total=max(total, 1), description=desc)


def demo(
    out: Annotated[Path, typer.Option(help="Directory for the sweep, its evaluation and the report.")] = Path(
        "out/demo"
    ),
    seeds: Annotated[
        int | None, typer.Option(min=1, help="Seeds per scenario × strategy pair (default: the grid's).")
    ] = None,
    master: Annotated[
        str | None, typer.Option(help="Spark master (default local[*]; e.g. local[2], spark://host:7077).")
    ] = None,
    grid: Annotated[str, typer.Option(help="Grid file, or the name of a shipped grid.")] = DEMO_GRID,
) -> None:
    """The main job: every built-in PIP-364 scenario × the five strategy pairs × a few seeds, swept on
    Spark, evaluated, and turned into an HTML report; prints the PIP-364 table and the report's path."""
    from shedlab.report import build_report
    from shedlab.spark.evaluate import evaluate
    from shedlab.spark.session import get_spark
    from shedlab.spark.sweep import load_grid, sweep

    started = time.monotonic()
    the_grid = load_grid(grid)
    if seeds is not None:
        first = the_grid.seeds[0] if the_grid.seeds else 1
        the_grid = dataclasses.replace(the_grid, seeds=tuple(range(first, first + seeds)))
    out = out.resolve()
    sweep_dir = out / "sweep"
    eval_dir = out / "evaluation"
    report_path = out / "report.html"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the output directory: {exc.strerror}", source=str(out)) from None
    err_console.print(
        f"[bold]shedlab demo[/]: grid [bold]{the_grid.name}[/] = {len(the_grid.scenarios)} scenarios × "
        f"{len(the_grid.strategies)} strategy pairs × {len(the_grid.seeds)} seeds "
        f"(+ parameter sets) = {the_grid.size} runs → {out}",
        highlight=False,
    )
    with _DemoProgress() as progress:
        task = progress.stage("starting Spark")
        spark = get_spark(master, app_name="shedlab demo")
        progress.done(task, f"Spark {spark.version} on {spark.sparkContext.master}")
        result = sweep(spark, the_grid, str(sweep_dir), progress=progress.sweep_progress)
        if progress.runs is None:
            progress.sweep_progress(result.complete, result.total, 0)
        task = progress.stage("evaluate (Spark SQL)")
        evaluation = evaluate(spark, str(sweep_dir), str(eval_dir))
        progress.done(task)
        task = progress.stage("report (HTML)")
        path = build_report(out, report_path)
        progress.done(task)
    if result.skipped:
        err_console.print(f"{result.skipped} runs were already in {sweep_dir} and were not run again.")
    if result.failed or evaluation.runs_failed:
        err_console.print(
            f"[yellow]{evaluation.runs_failed} runs failed; see {sweep_dir}/runs (status, error).[/]"
        )
    for note in evaluation.notes:
        err_console.print(f"note: {note}", style="dim", highlight=False)
    console.print(pip_table(evaluation.pip364))
    elapsed = time.monotonic() - started
    console.print(
        f"{evaluation.runs_ok} runs in {elapsed:.0f} s. Report: [bold]{path}[/] "
        f"({path.stat().st_size / 1e6:.1f} MB; open it in a browser, no network needed).",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.command()(report)
    app.command()(demo)
