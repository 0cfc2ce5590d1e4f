"""``shedlab sweep``, ``evaluate``, ``ingest`` and ``replay``: the Spark pipeline.

PySpark is imported only when one of these commands runs, so the rest of the CLI starts fast.
Every command takes ``--master`` (default ``local[*]``; ``spark://host:7077``, ``yarn``,
``k8s://https://…``), repeated ``--conf key=value`` Spark settings and ``--spark-conf FILE``
(``spark-defaults.conf`` style or YAML); under ``spark-submit`` the submitted master is used.
"""

from __future__ import annotations

import functools
import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from shedlab import jsonout
from shedlab.cli.consoles import make_console, print_table
from shedlab.cli.settings import check_count, check_seed, run_overrides
from shedlab.core.goal import DEFAULT_CHALLENGER
from shedlab.core.grid import params_label
from shedlab.core.results import check_apart, check_output_dir, check_output_kind, table_path
from shedlab.errors import ConfigError, InputError, WorkFailedError, did_you_mean, shown, user_error_names
from shedlab.report.figures import short_pair
from shedlab.report.terminal import goal_table
from shedlab.spark.session import check_java, check_master, validate_master
from shedlab.units import compact, parse_duration

if TYPE_CHECKING:
    import pandas as pd

    from shedlab.spark.ingest import IngestResult
    from shedlab.spark.replay import ReplayResult
    from shedlab.spark.sweep import SweepResult

console = make_console()
err_console = make_console(stderr=True)

MAX_LIMIT = 1_000_000_000
"""``sweep --limit``: at most this many runs (a grid never has more; a negative limit means nothing)."""

MasterOpt = Annotated[
    str | None,
    typer.Option(
        "--master", help="Spark master: local[*] (default), local[N], spark://host:port, yarn, k8s://…"
    ),
]
ConfOpt = Annotated[
    list[str] | None,
    typer.Option("--conf", help="Extra Spark setting key=value (repeatable), e.g. spark.executor.memory=4g."),
]
ConfFileOpt = Annotated[
    str | None,
    typer.Option("--spark-conf", help="File of Spark settings (spark-defaults.conf style, or YAML/JSON)."),
]
UiOpt = Annotated[bool, typer.Option("--ui/--no-ui", help="Start the Spark web UI (off by default).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print a JSON summary instead of tables.")]


@contextmanager
def spark_session(
    master: str | None, conf: list[str] | None, conf_file: str | None, ui: bool, app: str
) -> Iterator[Any]:
    from shedlab.spark.session import get_spark, has_active_session

    existing = has_active_session()
    with err_console.status(f"starting Spark ({master or 'local[*]'})…", spinner="dots"):
        spark = get_spark(master, conf or [], conf_file=conf_file, ui=ui, app_name=f"shedlab {app}")
    if ui and spark.sparkContext.uiWebUrl:
        err_console.print(f"Spark UI: {spark.sparkContext.uiWebUrl}")
    try:
        yield spark
    finally:
        if not existing:  # leave a session we did not start (tests, notebooks) running
            spark.stop()


@contextmanager
def _status(quiet: bool) -> Iterator[Callable[[str], None]]:
    """A live status line on stderr: the current step and a running clock (these commands run tens of
    seconds between steps); each finished step stays printed with its duration.

    A step was printed when the next one began, so the last one never was: ``tune`` showed ``rung 1/3``
    and ``rung 2/3`` but not the third (``tune --demo`` did, its report step came after). It is printed
    when the block ends normally; after an error, only the error follows the finished steps."""
    if quiet:
        yield lambda _msg: None
        return
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
        # not drawn when stderr is not a terminal, where rich's stop() printed an empty line: an error
        # after Spark had started (twin's --window) came as two lines, an empty one and the error
        disable=not err_console.is_terminal,
    ) as bar:
        task = bar.add_task("working…", total=None)
        step: list[tuple[str, float]] = []

        def finish() -> None:
            if step:
                bar.console.print(f"[dim]{step[0][0]} ({time.time() - step[0][1]:.1f} s)[/]")
                step.clear()

        def update(msg: str) -> None:
            finish()
            step[:] = [(msg, time.time())]
            bar.update(task, description=msg)

        yield update
        finish()


def _preflight(
    master: str | None,
    out: str | None,
    conf: list[str] | None = None,
    conf_file: str | None = None,
    *,
    out_field: str = "--out",
) -> None:
    """What can be refused before Spark starts (and before anything is printed): a master Spark does not
    accept, an output location that is a file (named as ``out_field``: twin's is ``--report-dir``), a
    ``--conf`` without ``=``, a ``--spark-conf`` file that is missing or malformed, no Java to start Spark
    with."""
    if master is not None:
        validate_master(master)
    if out is not None:
        check_output_dir(out, field=out_field)
    check_master(master, conf, conf_file)  # reads --conf and --spark-conf, and checks their spark.master
    check_java()


def _print_json(doc: Any) -> None:
    """``doc`` as strict JSON (``shedlab.jsonout``): a statistic that has no value (the interval of one
    seed is NaN in pandas) is ``null``."""
    sys.stdout.write(jsonout.dumps(doc, indent=2, default=str) + "\n")


MAX_INTERVAL_MS = 86_400_000
"""``ingest --interval`` at most a day: brokers report every minute or so, a longer tick holds nothing but
the last sample of a day, and past a Java long of milliseconds Spark failed with a Java stack trace."""


def parse_duration_ms(text: str, *, field: str = "--interval") -> int:
    """``60s``, ``1m``, ``500ms``, ``1h`` or a number of seconds → milliseconds (more than zero, whole, at
    most :data:`MAX_INTERVAL_MS`). Ticks count whole milliseconds: ``1.5ms`` ran as 2-ms ticks, silently."""
    exact = parse_duration(text, field=field) * 1000
    ms = round(exact)
    if ms <= 0:
        raise ConfigError("must be positive", field=field, value=text)
    if ms > MAX_INTERVAL_MS:
        raise ConfigError("must be at most a day (1d)", field=field, value=text)
    if abs(exact - ms) > 1e-6:
        raise ConfigError("must be a whole number of milliseconds", field=field, value=text)
    return ms


# ---------------------------------------------------------------------------------------------
# sweep
# ---------------------------------------------------------------------------------------------


def sweep(
    grid: Annotated[str, typer.Argument(help="Grid YAML file (or the name of a shipped grid, e.g. pip364).")],
    out: Annotated[str, typer.Option("--out", "-o", help="Output directory (local path or URI).")],
    master: MasterOpt = None,
    conf: ConfOpt = None,
    spark_conf: ConfFileOpt = None,
    ui: UiOpt = False,
    retry_failed: Annotated[
        bool,
        typer.Option(
            "--retry-failed/--skip-failed",
            help="Run again the runs whose summary records an error (the default), or keep them as they are.",
        ),
    ] = True,
    limit: Annotated[int | None, typer.Option("--limit", help="Run at most N of the pending runs.")] = None,
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", help="Give up a run after this many seconds (recorded as error)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a grid of simulations (scenarios × strategy pairs × parameters × seeds) as Spark tasks.

    Outputs partitioned Parquet under OUT: runs/ (one summary row per run, status ok/error),
    ticks/, decisions/, brokers/, events/, skips/. Re-running the same command skips the runs already
    complete, so an interrupted sweep resumes without duplicates, and runs the failed ones again.
    """
    from shedlab.core.grid import load_grid
    from shedlab.spark.sweep import sweep as run_sweep

    check_count(limit, "--limit", maximum=MAX_LIMIT)
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise ConfigError("expected a positive number of seconds", field="--timeout", value=timeout)
    g = load_grid(grid)
    check_output_kind(out, "sweep")
    _preflight(master, out, conf, spark_conf)
    if not as_json:
        err_console.print(f"grid [bold]{g.name}[/]: {g.factors()} = {g.size} runs")
    with spark_session(master, conf, spark_conf, ui, "sweep") as spark:
        run = functools.partial(
            run_sweep, spark, g, out, retry_failed=retry_failed, limit=limit, timeout_s=timeout
        )
        if as_json:
            result = run()
        else:
            with _RunsBar() as bar:
                result = run(progress=bar.update)
    if as_json:
        _print_json(
            {
                "out": out,
                "grid": g.name,
                "runs": result.total,
                "skipped": result.skipped,
                "ran": result.ran,
                "failed": result.failed,
                "retried": result.retried,
                "skipped_failed": result.skipped_failed,
                "elapsed_s": round(result.elapsed_s, 2),
                "quarantined": [{"file": path, "reason": why} for path, why in result.quarantined],
                "temporaries_removed": result.temporaries_removed,
            }
        )
    else:
        _print_sweep_outcome(result, out)
    _refuse_a_sweep_without_success(result, out)


class _RunsBar:
    """The sweep's progress bar: finished runs of the total, and task failures when Spark retries."""

    def __init__(self) -> None:
        self.bar = Progress(
            TextColumn("[bold]runs"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[note]}"),
            console=err_console,
            transient=False,
        )
        self.task = self.bar.add_task("runs", total=None, note="")

    def __enter__(self) -> _RunsBar:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def update(self, done: int, total: int, failed_tasks: int) -> None:
        note = f"[red]{failed_tasks} task failure(s)" if failed_tasks else ""
        self.bar.update(self.task, completed=done, total=total, note=note)


def _print_sweep_outcome(result: SweepResult, out: str) -> None:
    """Quarantined files, the per-pair table, the counts, the first failures and what is still pending."""
    _print_quarantined(result.quarantined, "ran again")
    _print_sweep_table(result.summaries)
    kept = f" ({result.skipped_failed} of them failed: drop --skip-failed to run them again)"
    retried = f"{result.retried} failed before and were run again; " if result.retried else ""
    console.print(
        f"{result.total} runs: {result.skipped} already complete{kept if result.skipped_failed else ''},"
        f" {result.ran} ran now ({retried}{result.failed} failed) in {result.elapsed_s:.1f} s → {out}"
    )
    if result.failed:
        errors = result.summaries[result.summaries["status"] != "ok"]
        for row in errors.head(5).itertuples(index=False):
            err_console.print(
                f"[red]failed[/] {escape(f'{row.scenario} / {row.strategy} / seed {row.seed}: {row.error}')}"
            )
    if result.ran + result.skipped < result.total:
        console.print(f"{result.total - result.ran - result.skipped} run(s) still pending (--limit)")


def _refuse_a_sweep_without_success(result: SweepResult, out: str) -> None:
    """A sweep none of whose runs succeeded (those run now and those complete before) ends with one line
    and a non-zero exit: it exited 0, and a CI job or an operator took it for a sweep done. Exit 2 when
    every failure run now is the user's input (:func:`~shedlab.errors.user_error_names`: a plugin
    strategy that raised, a scenario or setting the runs refused), as any input error; else 1 (runs
    stopped by ``--timeout`` outside a plugin, failures kept by ``--skip-failed``). A sweep some of whose
    runs succeeded exits 0: the counts and ``runs/`` name the failures, and the same command runs them
    again."""
    failed = result.failed + result.skipped_failed
    succeeded = result.ran - result.failed + result.skipped - result.skipped_failed
    if succeeded or not failed:
        return
    errors = result.summaries[result.summaries["status"] != "ok"]
    first = next(errors.itertuples(index=False), None)
    message = f"all {failed} runs failed" + (
        f"; the first: {first.scenario} / {first.strategy} / seed {first.seed}: {shown(first.error)}"
        if first
        else ""
    )
    hint = f"every reason is in {table_path(out, 'runs')} (status, error)"
    if result.failed == failed and set(errors["error_type"]) <= user_error_names():
        raise InputError(message, hint=hint)
    raise WorkFailedError(message, hint=hint)


def _print_quarantined(quarantined: list[tuple[str, str]], fate: str) -> None:
    """Name the unreadable run files moved to quarantine/ (at most five, then a count)."""
    if not quarantined:
        return
    err_console.print(
        f"[yellow]{len(quarantined)} unreadable run file(s) moved to quarantine/ ({fate}):[/]",
        highlight=False,
    )
    for path, why in quarantined[:5]:
        err_console.print(f"  {path}: {why}", highlight=False, markup=False)
    if len(quarantined) > 5:
        err_console.print(f"  … and {len(quarantined) - 5} more")


def _table(title: str, columns: tuple[str, ...], text_columns: int = 2) -> Table:
    """A result table: the first ``text_columns`` columns are names (left, folded rather than cut: on a
    narrow terminal replay's strategies were all 'AvgShe…', 'Thresh…'), the rest numbers (right)."""
    table = Table(title=title)
    for k, col in enumerate(columns):
        if k < text_columns:
            table.add_column(col, justify="left", overflow="fold")
        else:
            table.add_column(col, justify="right")
    return table


def _print_sweep_table(summaries: pd.DataFrame) -> None:
    if summaries is None or summaries.empty:
        return
    table = _table(
        "runs of this sweep", ("scenario", "strategy", "runs", "failed", "unloads", "spread (mean)", "s/run")
    )
    for (scenario, strategy), group in summaries.groupby(["scenario", "strategy"], sort=True):
        ok = group[group["status"] == "ok"]
        unloads = [m.get("unloads") for m in ok["metrics"] if isinstance(m, dict)]
        spread = [m.get("score_spread_mean") for m in ok["metrics"] if isinstance(m, dict)]
        table.add_row(
            escape(str(scenario)),
            escape(short_pair(str(strategy))),
            str(len(group)),
            str(int((group["status"] != "ok").sum())),
            compact(_mean(unloads), 1),
            compact(_mean(spread), 1),
            compact(group["elapsed_s"].mean(), 2),
        )
    print_table(console, table)


def _mean(values: list[Any]) -> float | None:
    vals = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else None


# ---------------------------------------------------------------------------------------------
# evaluate
# ---------------------------------------------------------------------------------------------


def evaluate(
    sweep_dir: Annotated[str, typer.Argument(help="A sweep's output directory.")],
    out: Annotated[
        str | None,
        typer.Option("--out", "-o", help="Where to write the tables (default SWEEP_DIR/evaluation)."),
    ] = None,
    master: MasterOpt = None,
    conf: ConfOpt = None,
    spark_conf: ConfFileOpt = None,
    ui: UiOpt = False,
    metrics: Annotated[
        str | None,
        typer.Option("--metrics", help="Comma-separated metrics to print per scenario (default: a few)."),
    ] = None,
    challenger: Annotated[
        str,
        typer.Option(
            "--challenger",
            help="The strategy judged against the heterogeneous-cluster goal (AvgShedder and Threshold + "
            "LRUWW as baselines) where the sweep ran all three; a plugin's module:Class or its class name.",
        ),
    ] = DEFAULT_CHALLENGER,
    as_json: JsonOpt = False,
) -> None:
    """Mean and 95 % confidence interval over seeds of every run metric, the PIP-364 table, and a
    challenger's goal cells.

    The goal: docs/capacity-aware.md, "Against the goal"; docs/spark.md, "Evaluation".

    Writes metric_stats and pip364 as Parquet and CSV (plus runs.csv, goal.csv and
    pip364_definitions.json).
    """
    from shedlab.spark.evaluate import check_sweep
    from shedlab.spark.evaluate import evaluate as run_evaluate

    if metrics is not None and as_json:  # it was ignored, silently: --json has no metric table
        raise ConfigError(
            "chooses the columns of the metric table, which --json does not print"
            " (every metric's statistics are in metric_stats.csv)",
            field="--metrics",
            value=metrics,
        )
    if metrics is not None:
        _metric_names(metrics)
    grids = check_sweep(sweep_dir, challenger)  # before Spark starts
    if out is not None:
        check_output_kind(out, "evaluate")
    _preflight(master, out, conf, spark_conf)
    with spark_session(master, conf, spark_conf, ui, "evaluate") as spark, _status(as_json) as say:
        result = run_evaluate(spark, sweep_dir, out, challenger=challenger, progress=say, grids=grids)
    if as_json:
        _print_json(
            {
                "out": result.out,
                "runs_ok": result.runs_ok,
                "runs_failed": result.runs_failed,
                "quarantined": [{"file": path, "reason": why} for path, why in result.quarantined],
                "pip364": result.pip364.to_dict("records"),
                "goal": result.goal.to_dict("records"),
                "notes": result.notes,
            }
        )
        return
    chosen = _metric_names(metrics) if metrics is not None else list(EVALUATE_METRICS)
    _check_metrics(chosen, result.metric_stats)
    _print_metric_table(result.metric_stats, chosen)
    _print_pip_table(result.pip364, result.definitions)
    if not result.goal.empty:
        print_table(console, goal_table(result.goal))
    for note in result.notes:
        err_console.print(f"[yellow]note:[/] {escape(note)}")  # notes quote a grid's names and patterns
    console.print(f"{result.runs_ok} runs evaluated ({result.runs_failed} failed) → {result.out}")


EVALUATE_METRICS = (
    "unloads",
    "score_spread_mean",
    "over_placement_events",
    "over_unloading_flips",
    "time_to_balance_s_max",
)
"""The metric table's columns when ``evaluate --metrics`` is not given."""


def _metric_names(metrics: str) -> list[str]:
    """``--metrics``' names, none empty and none twice (checked before Spark starts: 'unloads,' or ''
    printed no table, exit 0; 'unloads,unloads' printed its column twice)."""
    names = [m.strip() for m in metrics.split(",")]
    if not all(names):
        raise ConfigError("an empty metric name", field="--metrics", value=metrics)
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:
        raise ConfigError("names a metric twice", field="--metrics", value=twice)
    return names


def _check_metrics(names: list[str], stats: pd.DataFrame) -> None:
    """Each of ``names`` a metric of the evaluated runs (when any run succeeded): a name they do not
    have (a typo, 'unlods') was left out of the table, silently, and a list of such names printed no
    table at all, exit 0."""
    known = sorted(set(stats["metric"].astype(str)))
    for name in names:
        if known and name not in known:
            raise ConfigError(
                "no metric of this name in the sweep's runs",
                field="--metrics",
                value=name,
                hint=did_you_mean(name, known) or f"the runs' metrics: {', '.join(known)}",
            )


def _print_metric_table(stats: pd.DataFrame, metrics: list[str]) -> None:
    if stats.empty:
        return
    present = [m for m in metrics if m in set(stats["metric"])]
    if not present:
        return
    multi_params = stats["params_id"].nunique() > 1
    table = Table(title="mean [95 % CI] over seeds")
    table.add_column("scenario")
    table.add_column("strategy")
    if multi_params:
        table.add_column("params")
    for m in present:
        table.add_column(m, justify="right")
    sub = stats[stats["metric"].isin(present)]
    for (scenario, strategy, _pid), group in sub.groupby(["scenario", "strategy", "params_id"], sort=True):
        by_metric = {r.metric: r for r in group.itertuples(index=False)}
        cells = []
        for m in present:
            r = by_metric.get(m)
            if r is None:
                cells.append("-")
            elif r.ci_low is None or (isinstance(r.ci_low, float) and math.isnan(r.ci_low)):
                cells.append(compact(r.mean))
            else:
                cells.append(f"{compact(r.mean)} [{compact(r.ci_low)}, {compact(r.ci_high)}]")
        row = [escape(str(scenario)), escape(short_pair(str(strategy)))]
        if multi_params:
            row.append(escape(params_label(group["params_json"].iloc[0])))
        table.add_row(*row, *cells)
    print_table(console, table)


def _print_pip_table(pip: pd.DataFrame, definitions: dict[str, dict[str, Any]]) -> None:
    from shedlab.report.terminal import pip364_table

    if pip.empty:
        err_console.print(
            "[yellow]no PIP-364 figure: no scenario of the sweep matches a problem definition[/]"
        )
        return
    print_table(console, pip364_table(pip))
    for problem in sorted(set(pip["problem"].astype(str))):
        d = definitions.get(problem, {})
        scenarios = ", ".join(d.get("matched_scenarios", []))
        line = (
            f"{problem}: {d.get('metric', d.get('expr'))} on {scenarios};"
            f" good < {d.get('good_below')}, bad > {d.get('bad_above')}"
        )
        console.print(f"[dim]{escape(line)}[/]")  # a grid's own names: text, not markup


# ---------------------------------------------------------------------------------------------
# ingest
# ---------------------------------------------------------------------------------------------


def ingest(
    sources: Annotated[
        list[str],
        typer.Argument(
            help="Load-report JSON lines, .json documents, Prometheus exports, Parquet; files or dirs."
        ),
    ],
    out: Annotated[str, typer.Option("--out", "-o", help="Output directory (local path or URI).")],
    cluster: Annotated[
        str, typer.Option("--cluster", help="Cluster name for records that do not carry one.")
    ] = "default",
    interval: Annotated[str, typer.Option("--interval", help="Tick length samples are aligned to.")] = "60s",
    web_port: Annotated[
        int,
        typer.Option(
            "--web-port", help="Port appended to Prometheus broker labels without one.", min=1, max=65535
        ),
    ] = 8080,
    bundles: Annotated[
        list[str] | None,
        typer.Option(
            "--bundles",
            help="Bundle boundaries (the admin bundles endpoint's JSON): a file {namespace: "
            "{boundaries, numBundles}} or a directory of <tenant>/<namespace>.json; places "
            "Prometheus topic series in their bundles.",
        ),
    ] = None,
    master: MasterOpt = None,
    conf: ConfOpt = None,
    spark_conf: ConfFileOpt = None,
    ui: UiOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Ingest recorded load data into per-tick cluster snapshots (canonical Parquet, by cluster and day).

    Rows that fail validation go to OUT/quarantine with a reason; the command prints, per source,
    how many rows were read, kept, merged (superseded within a tick) and quarantined, then the rows
    written (the Prometheus points of a broker or bundle and tick make one row).
    """
    from shedlab.core.ingest import classify_sources, cluster_problem, local_bytes
    from shedlab.model.bundles import read_bundle_boundaries
    from shedlab.spark.ingest import ingest as run_ingest
    from shedlab.spark.session import has_active_session, short_input_conf

    interval_ms = parse_duration_ms(interval)
    problem = cluster_problem(cluster) if cluster else "the default cluster's name is empty"
    if problem is not None:  # every record without a cluster of its own would be quarantined
        raise InputError(problem, field="--cluster", value=cluster)
    classified = classify_sources(sources)  # a missing, unreadable or binary source: an error before Spark
    boundaries = read_bundle_boundaries(bundles or [])  # a bad boundaries file too
    # writing over an input lost it; a glob is compared by what it matched
    expanded = [*classified.json_lines, *classified.json_docs, *classified.parquet]
    check_apart(out, [*sources, *expanded, *(bundles or [])])
    check_output_kind(out, "ingest")
    _preflight(master, out, conf, spark_conf)
    if not has_active_session():  # a running JVM's flags are fixed
        conf = short_input_conf(master, conf or [], spark_conf, local_bytes(classified))
    with spark_session(master, conf, spark_conf, ui, "ingest") as spark, _status(as_json) as say:
        result = run_ingest(
            spark,
            sources,
            out,
            interval_ms=interval_ms,
            default_cluster=cluster,
            web_port=web_port,
            progress=say,
            boundaries=boundaries,
        )
    if as_json:
        _print_json(_ingest_document(result, out))
    else:
        _print_ingest_outcome(result, out, has_boundaries=bool(boundaries), interval=interval)
    _refuse_an_ingest_that_kept_nothing(result, out)


def _refuse_an_ingest_that_kept_nothing(result: IngestResult, out: str) -> None:
    """An ingest every row of which was quarantined ends with one line naming the reasons and where they
    are written, exit 2 (the input is the user's): it exited 0 with 'wrote 0 broker and 0 bundle rows',
    and a script went on to twin or replay an output with nothing in it. Some rows kept: exit 0, as
    before (the counts name what was quarantined and why)."""
    if result.broker_rows or result.bundle_rows or result.bundle_data_rows or not result.quarantined_rows:
        return
    counts = result.reasons.groupby("reason")["count"].sum().sort_values(ascending=False, kind="stable")
    reasons = ", ".join(f"{reason} {count:,}" for reason, count in counts.items())
    raise InputError(
        f"every row was quarantined, none kept ({reasons})",
        hint=f"the reasons are in {table_path(out, 'quarantine')} (reason, detail, raw)",
    )


def _ingest_document(result: IngestResult, out: str) -> dict[str, Any]:
    """``ingest --json``: the rows written per table, and per source the rows read and what became of
    them."""
    return {
        "out": out,
        "clusters": result.clusters,
        "rows_written": {
            "broker_samples": result.broker_rows,
            "bundle_samples": result.bundle_rows,
            "bundle_data": result.bundle_data_rows,
            "quarantine": result.quarantined_rows,
        },
        "sources": result.stats.to_dict("records"),
        "reasons": result.reasons.to_dict("records"),
    }


def _print_ingest_outcome(
    result: IngestResult, out: str, *, has_boundaries: bool, interval: str = "60s"
) -> None:
    """Per source: rows read, kept, merged and quarantined; the quarantine reasons; label renames; what
    to give when topic series had no bundle boundaries; why rows were merged; how the Prometheus points
    kept became rows; the rows written."""
    folder, names = _below_common_folder([str(source) for source in result.stats["source"]])
    kinds = sorted({str(kind) for kind in result.stats["source_kind"]})
    one_kind = len(kinds) == 1  # then named in the title: a column fewer to share a narrow terminal
    title = (
        "ingest, per source" + (f": {kinds[0]}" if one_kind else "") + (f" in {folder}/" if folder else "")
    )
    columns = ("records", "rows read", "brokers", "bundles", "bundle data", "merged", "quarantined")
    table = _table(
        title, ("source", *columns) if one_kind else ("source", "kind", *columns), 1 if one_kind else 2
    )
    # Each source is named below the common folder: its path's tail, cut at the column's end as well,
    # showed every file of a collect's recording as the same '…k/rec/load-reports-2…'
    for name, r in zip(names, result.stats.itertuples(index=False), strict=True):
        table.add_row(
            escape(name),
            *(() if one_kind else (str(r.source_kind),)),
            compact(r.records_read),
            compact(r.rows_read),
            compact(r.broker_rows_kept),
            compact(r.bundle_rows_kept),
            compact(r.bundle_data_rows_kept),
            compact(r.rows_merged),
            f"[red]{compact(r.rows_quarantined)}[/]" if r.rows_quarantined else "0",
        )
    print_table(console, table)
    if len(result.reasons):
        reasons = _table("quarantined rows by reason", ("source", "reason", "rows"))
        below = dict(zip(result.stats["source"].astype(str), names, strict=True))
        for r in result.reasons.itertuples(index=False):
            reasons.add_row(escape(below.get(str(r.source), str(r.source))), str(r.reason), compact(r.count))
        console.print(reasons)
    relabelled = int(result.stats["rows_relabelled"].sum()) if len(result.stats) else 0
    if relabelled:
        console.print(
            f"{relabelled:,} Prometheus point(s) had Pulsar's labels renamed exported_* by the scrape;"
            " Pulsar's values were read from exported_*"
        )
    if not has_boundaries and "no_bundle_boundaries" in set(result.reasons.get("reason", [])):
        console.print("topic-level series need bundle boundaries: give --bundles (docs/spark.md, ingest)")
    merged = int(result.stats["rows_merged"].sum()) if len(result.stats) else 0
    if merged:  # 12 reads of a sandbox at --speed 20 kept 3 broker rows, with no word why
        console.print(
            f"{merged:,} row(s) merged: a later sample of the same broker or bundle fell in the same"
            f" {interval} tick; samples taken more often (collect --every below {interval}, a sandbox at"
            " --speed above 1) are kept with a shorter --interval"
        )
    _print_prometheus_rows(result)
    tables = [f"{result.broker_rows:,} broker", f"{result.bundle_rows:,} bundle"]
    tables += [f"{result.bundle_data_rows:,} BundleData"] if result.bundle_data_rows else []
    console.print(
        f"wrote {', '.join(tables[:-1])} and {tables[-1]} rows"
        f" ({', '.join(result.clusters) or 'no cluster'}); quarantined {result.quarantined_rows:,} → {out}"
    )


def _print_prometheus_rows(result: IngestResult) -> None:
    """The per-source table counts rows read, and every Prometheus point is one: the points of a broker
    (or bundle) and tick make one row written. Said, so that the table's 2,928 broker rows kept and the
    976 written agree (a broker in the load reports as well has a row from each, told by source_kind)."""
    stats = result.stats[result.stats["source_kind"] == "prometheus"]
    points = int(stats["broker_rows_kept"].sum() + stats["bundle_rows_kept"].sum()) if len(stats) else 0
    if not points:
        return
    brokers, bundles = result.prometheus_rows
    both = bool((result.stats["source_kind"] == "load_report").any())
    console.print(
        f"the {points:,} Prometheus point(s) kept make {brokers:,} broker and {bundles:,} bundle row(s),"
        " one per broker or bundle and tick"
        + (
            "; a broker or bundle also in the load reports has a row from each per tick (source_kind)"
            if both
            else ""
        )
    )


def _below_common_folder(sources: list[str]) -> tuple[str, list[str]]:
    """The folder all ``sources`` are in (paths or URLs; "" when none is common) and each one's path below
    it: the part that tells them apart."""
    parts = [source.split("/") for source in sources]
    common: list[str] = []
    for column in zip(*(p[:-1] for p in parts), strict=False):
        if len(set(column)) != 1:
            break
        common.append(column[0])
    if not sources or not any(common):
        return "", sources
    return "/".join(common), ["/".join(p[len(common) :]) for p in parts]


# ---------------------------------------------------------------------------------------------
# replay
# ---------------------------------------------------------------------------------------------


def replay(
    snapshots_dir: Annotated[str, typer.Argument(help="An ingest output directory.")],
    strategies: Annotated[
        str,
        typer.Option(
            "--strategies",
            "-s",
            help="Comma-separated strategy pairs, e.g. AvgShedder,OverloadShedder+LeastLongTermMessageRate.",
        ),
    ],
    out: Annotated[str, typer.Option("--out", "-o", help="Output directory (local path or URI).")],
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Pulsar setting key=value applied to every strategy (repeatable)."),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option("--config", help="broker.conf / YAML / JSON with Pulsar load-balancer settings."),
    ] = None,
    cluster: Annotated[
        list[str] | None, typer.Option("--cluster", help="Replay only this cluster (repeatable).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the strategies' random choices.")] = 1,
    master: MasterOpt = None,
    conf: ConfOpt = None,
    spark_conf: ConfFileOpt = None,
    ui: UiOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """What each strategy would have decided on recorded snapshots, and why, next to what really happened."""
    from shedlab.core.ingest import check_clusters, check_ingest_output, recorded_clusters
    from shedlab.core.replay import strategy_configs
    from shedlab.spark.replay import replay as run_replay
    from shedlab.strategies import pair_list

    check_seed(seed)
    settings = run_overrides(config, set_)
    configs = strategy_configs(pair_list(strategies, every=False), settings.values, settings.sources)
    check_ingest_output(snapshots_dir)  # before Spark starts
    present = recorded_clusters(snapshots_dir)
    if cluster and present is not None:
        check_clusters(cluster, present, source=snapshots_dir)
    check_output_kind(out, "replay")
    _preflight(master, out, conf, spark_conf)
    with spark_session(master, conf, spark_conf, ui, "replay") as spark, _status(as_json) as say:
        result = run_replay(spark, snapshots_dir, out, configs, seed=seed, clusters=cluster, progress=say)
    if as_json:
        _print_json({"out": out, "summary": result.summary.to_dict("records"), "failures": result.failures})
        return
    _print_replay(result, out)


def _print_replay(result: ReplayResult, out: str) -> None:
    """The replay's table, each pair's most frequent reasons for leaving load alone, and its failures."""
    table = _table(
        "replay: what each strategy would have done",
        (
            "cluster",
            "strategy",
            "ticks",
            "would unload",
            "actual moves",
            "same bundle",
            "max U (data → est)",
            "spread U (data → est)",
        ),
    )
    for r in result.summary.itertuples(index=False):
        table.add_row(
            escape(str(r.cluster)),
            escape(short_pair(str(r.strategy))),
            compact(r.ticks),
            compact(r.strategy_unloads),
            compact(r.actual_moves),
            compact(r.both),
            f"{compact(r.mean_max_usage, 3)} → {compact(r.est_mean_max_usage, 3)}",
            f"{compact(r.mean_usage_spread, 3)} → {compact(r.est_mean_usage_spread, 3)}",
        )
    print_table(console, table)
    for r in result.summary.itertuples(index=False):
        counts = json.loads(str(getattr(r, "reasons", "{}") or "{}"))
        if counts:
            top = ", ".join(f"{k} ×{v}" for k, v in list(counts.items())[:6])
            console.print(
                f"{escape(f'{r.cluster} {short_pair(str(r.strategy))}')} left alone / skipped: {top}"
            )
    console.print(f"decisions, load, comparison and ownership_changes → {out}")
    for failed in result.failures:
        err_console.print(
            f"[red]failed[/] {escape(failed['cluster'])} / {escape(failed['strategy'])} "
            f"(left out): {escape(failed['reason'])}"
        )


def register(app: typer.Typer) -> None:
    """Add ``sweep``, ``evaluate``, ``ingest`` and ``replay`` to the ``shedlab`` application."""
    app.command()(sweep)
    app.command()(evaluate)
    app.command()(ingest)
    app.command()(replay)
