"""``shedlab twin`` and ``shedlab tune``: from a recording to a recommended ``broker.conf``.

``twin`` fits a scenario to ingest's output and checks it against the recording; ``tune`` sweeps
strategy pairs × a parameter space on the twin (or on scenarios) by successive halving and writes the
recommendation. ``tune --demo`` runs the whole path on the shipped demo recording: ingest → twin →
tune → report (docs/tune.md).
"""

from __future__ import annotations

import datetime as dt
import importlib.resources
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from shedlab.cli.settings import check_count, run_overrides
from shedlab.cli.spark_cmd import (
    ConfFileOpt,
    ConfOpt,
    MasterOpt,
    UiOpt,
    _preflight,
    _status,
    console,
    err_console,
    spark_session,
)
from shedlab.config import STRATEGY_KEYS, LoadBalancerConfig
from shedlab.core.results import check_apart, check_output_file, check_output_kind
from shedlab.errors import InputError
from shedlab.units import significant

if TYPE_CHECKING:
    from shedlab.core.grid import ScenarioRef
    from shedlab.core.tune import Recorded, Space

__all__ = ["register", "tune", "tune_demo", "twin"]

DEMO_RECORDING = ("data", "recordings", "demo")
DEMO_CANDIDATES = 8
"""Parameter sets per pair in ``tune --demo``: keeps the whole path within a few minutes on 2 cores."""


def _parse_window(text: str | None) -> tuple[int, int] | None:
    """``FROM..TO``: ISO 8601 times (``2024-03-04T06:00Z..2024-03-04T12:00Z``), either side may be empty."""
    if text is None:
        return None
    start, sep, end = text.partition("..")
    if not sep:
        raise InputError(
            "expected FROM..TO (ISO 8601 times; either side may be empty)", field="--window", value=text
        )

    def ms(part: str, default: int) -> int:
        if not part.strip():
            return default
        try:
            moment = dt.datetime.fromisoformat(part.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError("expected an ISO 8601 time", field="--window", value=part) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return int(moment.timestamp() * 1000)

    window = (ms(start, 0), ms(end, 2**62))
    if window[0] > window[1]:
        raise InputError("the window ends before it starts", field="--window", value=text)
    return window


def _check_twin_out(out: str, inputs: Sequence[str]) -> None:
    """``--out`` names the twin's YAML file: refuse, before Spark starts, a directory, a path below a file
    (the write after the fit raised IsADirectoryError / NotADirectoryError, a traceback), a path in the
    recording or the config read, and any existing file but an earlier twin (``--out README.md``
    replaced it)."""
    path = Path(out)
    if path.is_dir():
        raise InputError(
            "is a directory; the twin is one YAML file",
            field="--out",
            value=out,
            hint=f"e.g. {path / 'twin.yaml'}",
        )
    check_apart(out, inputs, hint="name a file apart from the recording and the config")
    check_output_file(out, "twin")


def _check_recording(path: str, cluster: str | None, window: tuple[int, int] | None) -> None:
    """Before Spark starts, from the ingest output's directories and Parquet footers: a ``--cluster`` it
    holds (or its only one), and a ``--window`` that meets the cluster's recorded span (a window in
    another day or year took the fit's first Spark job to find)."""
    from shedlab.core.ingest import choose_cluster, recorded_clusters, recorded_span
    from shedlab.core.twin import window_error

    present = recorded_clusters(path)
    if present is None:
        return
    chosen = choose_cluster(present, cluster, source=path)
    span = recorded_span(path, chosen) if window is not None else None
    if window is not None and span is not None and (window[1] < span[0] or window[0] > span[1]):
        raise window_error(chosen, span, window)


def _recorded_config(
    config: str | None, sets: list[str] | None, strategy: str | None
) -> tuple[str, dict[str, Any]]:
    from shedlab.strategies import resolve_pair_name
    from shedlab.strategies.registry import pair_name_of

    settings = run_overrides(config, sets)
    pair = resolve_pair_name(strategy, field="--strategy") if strategy is not None else settings.pair
    pair = pair or pair_name_of(LoadBalancerConfig())
    # a --set strategy key chooses the pair as in a run (over --strategy): it becomes the twin's
    # strategy, where it stayed in its config, which the twin's pair overrode (and a scenario refuses)
    pair = pair_name_of(settings.check_pair(pair))
    return pair, {k: v for k, v in settings.values.items() if k not in STRATEGY_KEYS.values()}


def _run_twin(
    spark: Any,
    snapshots: str,
    out: str,
    *,
    cluster: str | None,
    window: tuple[int, int] | None,
    pair: str,
    overrides: dict[str, Any],
    seeds: int,
    validate: bool,
    report_dir: str,
    say: Any,
) -> Any:
    from shedlab.spark.twin import fit
    from shedlab.spark.twin import validate as run_validation

    result = fit(
        spark, snapshots, cluster=cluster, window=window, strategy=pair, config=overrides, progress=say
    )
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(result.fit.text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write the twin: {exc.strerror or exc}", source=out, field="--out") from None
    validation = None
    if validate:
        validation = run_validation(spark, result, out, report_dir, seeds=seeds, progress=say)
    return result, validation


def _validation_seeds(validate: bool, seeds: int | None, report_dir: str | None) -> int:
    """``--seeds`` checked (default 5); with ``--no-validate`` it and ``--report-dir`` are refused: both
    are the validation's, and were ignored, silently (no run, no fit report)."""
    if not validate:
        for name, value in (("--seeds", seeds), ("--report-dir", report_dir)):
            if value is not None:
                raise InputError(
                    "is the validation's: give it without --no-validate", field=name, value=value
                )
    check_count(seeds, "--seeds", minimum=1, maximum=1000)
    return 5 if seeds is None else seeds


def _print_fit(validation: Any, report_dir: str) -> None:
    """The fit checks, each figure with its unit as fit-report.md gives it: without it, 'traffic moved
    per day: recorded 2.16' (a share of the cluster's traffic) read like tune's traffic_moved_per_day
    (MiB/s), another figure under the same words."""
    if validation is None:
        return
    for c in validation.checks:
        mark = "[green]fits[/]" if c.ok else "[red bold]DOES NOT FIT[/]"
        rec = "" if c.figure == "broker usage distribution" else f"recorded {significant(c.recorded)}, "
        console.print(
            f"  {c.figure} ({c.unit}): {rec}twin {significant(c.twin)} "
            f"(distance {significant(c.distance)} ≤ {significant(c.tolerance)}?) {mark}"
        )
    if not validation.fits:
        console.print(
            "[red bold]WARNING: the twin does not fit the recording[/] — a recommendation made on it may "
            f"not hold for the cluster (details: {report_dir}/fit-report.md)"
        )
    else:
        console.print(f"the twin fits the recording (fit report: {report_dir}/fit-report.md)")


def twin(
    recording_dir: Annotated[
        str, typer.Argument(help="An ingest output directory (shedlab ingest … --out DIR).")
    ],
    out: Annotated[str, typer.Option("--out", "-o", help="The twin scenario to write (YAML).")],
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="The cluster to fit (needed if several).")
    ] = None,
    window: Annotated[
        str | None, typer.Option("--window", help="FROM..TO: only the samples in this time range (ISO 8601).")
    ] = None,
    strategy: Annotated[
        str | None,
        typer.Option(
            "--strategy", help="The strategy pair the cluster ran (default: --config's or Pulsar's)."
        ),
    ] = None,
    config: Annotated[
        str | None, typer.Option("--config", help="The cluster's broker.conf (or YAML/JSON).")
    ] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="A setting key=value of the cluster (repeatable).")
    ] = None,
    seeds: Annotated[
        int | None, typer.Option("--seeds", help="Seeds of the validation runs (default 5).")
    ] = None,
    validate: Annotated[
        bool, typer.Option("--validate/--no-validate", help="Run the twin and compare.")
    ] = True,
    report_dir: Annotated[
        str | None, typer.Option("--report-dir", help="Where the fit report goes (default: next to --out).")
    ] = None,
    master: MasterOpt = None,
    conf: ConfOpt = None,
    spark_conf: ConfFileOpt = None,
    ui: UiOpt = False,
) -> None:
    """Fit a scenario (a twin of the recorded cluster) to ingest's output; check it against the recording."""
    from shedlab.core.ingest import check_ingest_output

    seeds = _validation_seeds(validate, seeds, report_dir)
    pair, overrides = _recorded_config(config, set_, strategy)
    parsed_window = _parse_window(window)
    inputs = [recording_dir, *([config] if config else [])]
    _check_twin_out(out, inputs)
    check_ingest_output(recording_dir)
    _check_recording(recording_dir, cluster, parsed_window)
    reports = report_dir or str(Path(out).with_suffix("")) + "-fit"
    check_apart(reports, inputs, field="--report-dir")
    check_output_kind(reports, "twin", field="--report-dir")
    _preflight(master, reports, conf, spark_conf, out_field="--report-dir")
    with spark_session(master, conf, spark_conf, ui, "twin") as spark, _status(False) as say:
        result, validation = _run_twin(
            spark,
            recording_dir,
            out,
            cluster=cluster,
            window=parsed_window,
            pair=pair,
            overrides=overrides,
            seeds=seeds,
            validate=validate,
            report_dir=reports,
            say=say,
        )
    scenario = result.fit.scenario
    console.print(
        f"twin of {result.cluster}: {len(result.fit.broker_numbers)} brokers in "
        f"{len(scenario['hardware'])} hardware class(es), {sum(w['bundles'] for w in scenario['workloads'])} "
        f"bundles in {len(scenario['workloads'])} "
        f"namespace(s), {len(scenario['events'])} event(s), {scenario['duration']} → {out}"
    )
    _print_fit(validation, reports)


def _print_recommendation(result: Any) -> None:
    rec = result.recommendation
    if rec.is_recorded:
        console.print("[bold]No candidate beat the recorded configuration on the objective: keep it.[/]")
    else:
        console.print(f"[bold]Recommended:[/] {rec.candidate['label']}")
    console.print(f"objective {rec.objective} = {rec.objective_expr} (lower is better), {rec.seeds} seeds")
    for fig in ("objective", "imbalance", "unloads_per_day"):
        imp = rec.improvement[fig]
        change = significant(imp["mean"], sign=True) + (
            f" [{significant(imp['low'], sign=True)}, {significant(imp['high'], sign=True)}]"
            if imp["low"] is not None
            else ""
        )
        console.print(
            f"  {fig}: recorded {_iv(rec.recorded, fig)} → recommended {_iv(rec.candidate, fig)}"
            f"  (change {change})"
        )
    for note in rec.notes:
        console.print(f"[yellow]{note}[/]")
    console.print(
        f"{result.runs_spent} runs by successive halving ({len(result.rungs)} rungs) instead of "
        f"{result.full_grid}"
    )
    console.print("\n[bold]broker.conf[/]")
    # soft_wrap: the fragment is copied into broker.conf as it is printed; wrapped at the terminal's width,
    # a long line (a strategy's class name) became two lines, neither of them a valid key=value
    console.print(result.fragment, markup=False, highlight=False, soft_wrap=True)


def _iv(row: dict[str, Any], fig: str) -> str:
    """A figure and its interval in :func:`shedlab.units.significant`'s digits (``1,030``, never
    ``1e+03``: ``.3g`` wrote a thousand unloads a day in exponent notation)."""
    low, high = row.get(f"{fig}_low"), row.get(f"{fig}_high")
    if low is None or high is None or low != low:
        return significant(row[fig])
    return f"{significant(row[fig])} [{significant(low)}, {significant(high)}]"


def tune_demo(
    out: str,
    seeds: int,
    candidates: int,
    master: str | None,
    conf: list[str] | None,
    spark_conf: str | None,
    ui: bool,
    *,
    pairs: Sequence[str] | None = None,
    space: Space | None = None,
    objective: str = "balanced",
    eta: int = 3,
) -> None:
    """The README's path on the shipped recording: ingest → twin (+ fit report) → tune → report.

    ``pairs``, ``space``, ``objective`` and ``eta`` are tune's (``--strategies``, ``--space``, ...): the
    demo tunes what the user asked for (it ignored them before: a plugin named with ``--strategies`` was
    silently left out), every built-in pair and the shipped space by default."""
    from shedlab.core.grid import scenario_ref
    from shedlab.core.tune import load_space
    from shedlab.report import build_report
    from shedlab.spark.ingest import ingest as run_ingest
    from shedlab.spark.tune import tune as run_tune
    from shedlab.strategies import STRATEGY_PAIRS

    recording = str(importlib.resources.files("shedlab").joinpath(*DEMO_RECORDING, "load-reports.jsonl.gz"))
    root = Path(out)
    started = time.time()
    with spark_session(master, conf, spark_conf, ui, "tune demo") as spark, _status(False) as say:
        say("ingest: the shipped recording (prod-eu, 6 h, ThresholdShedder+LeastLongTermMessageRate)")
        run_ingest(
            spark,
            [recording],
            str(root / "snapshots"),
            interval_ms=60_000,
            default_cluster="prod-eu",
            web_port=8080,
            progress=say,
        )
        twin_path = str(root / "twin.yaml")
        _, validation = _run_twin(
            spark,
            str(root / "snapshots"),
            twin_path,
            cluster=None,
            window=None,
            pair="ThresholdShedder+LeastLongTermMessageRate",
            overrides={},
            seeds=5,
            validate=True,
            report_dir=str(root / "tune"),
            say=say,
        )
        result = run_tune(
            spark,
            [scenario_ref(twin_path)],
            str(root / "tune"),
            pairs=list(pairs) if pairs is not None else list(STRATEGY_PAIRS),
            space=space if space is not None else load_space(),
            seeds=seeds,
            objective=objective,
            per_pair=candidates,
            eta=eta,
            say=say,
        )
        say("report")
        report = build_report(root / "tune", root / "report.html")
    console.print(f"twin: {twin_path}")
    _print_fit(validation, str(root / "tune"))
    _print_recommendation(result)
    console.print(f"report: {report} · whole path {time.time() - started:.0f} s")


def _tune_targets(
    twin_file: str | None, scenarios: list[str] | None, pairs: Sequence[str]
) -> tuple[list[ScenarioRef], Recorded]:
    """What to tune on: the twin first (if given), then the scenarios; one of them is required, and
    they share one recorded configuration and the settings of ``pairs`` (refused before Spark starts
    if they do not; handed to the tune, which would otherwise parse them again)."""
    from shedlab.core.grid import check_scenario_names, scenario_ref
    from shedlab.core.tune import recorded_configuration

    if not twin_file and not scenarios:
        raise InputError("give --twin TWIN.yaml or scenarios to tune on", field="--twin")
    refs = [scenario_ref(twin_file, field="--twin")] if twin_file else []
    refs += [scenario_ref(item) for item in scenarios or []]
    check_scenario_names(refs, "two scenarios to tune on have the same name (give each once)")
    return refs, recorded_configuration(refs, pairs)


def _demo_alone(twin_file: str | None, scenarios: list[str] | None) -> None:
    """``--demo`` tunes the shipped recording's twin: a ``--twin`` or scenarios beside it were ignored,
    silently, and the recommendation was for another cluster than the one named."""
    if twin_file is not None or scenarios:
        given = "--twin" if twin_file is not None else "scenarios"
        raise InputError(
            f"tunes the shipped recording's twin, not {given}: give --demo alone, or {given} without it",
            field="--demo",
            value=twin_file if twin_file is not None else scenarios,
        )


def _checked_counts(seeds: int, candidates: int | None, eta: int, *, demo: bool) -> int:
    """``--seeds``, ``--candidates`` and ``--eta`` checked; the parameter sets per pair (default 12, the
    demo's :data:`DEMO_CANDIDATES`)."""
    check_count(seeds, "--seeds", minimum=1, maximum=1000)
    per_pair = candidates if candidates is not None else DEMO_CANDIDATES if demo else 12
    check_count(per_pair, "--candidates", minimum=1, maximum=10_000)
    check_count(eta, "--eta", minimum=2, maximum=100)
    return per_pair


def tune(
    scenarios: Annotated[list[str] | None, typer.Argument(help="Scenario files or built-in names.")] = None,
    twin_file: Annotated[str | None, typer.Option("--twin", help="A twin written by shedlab twin.")] = None,
    out: Annotated[str | None, typer.Option("--out", "-o", help="Output directory.")] = None,
    strategies: Annotated[
        str, typer.Option("--strategies", "-s", help="Comma-separated strategy pairs, or 'all'.")
    ] = "all",
    space: Annotated[
        str | None, typer.Option("--space", help="Search space YAML (default: the shipped one).")
    ] = None,
    seeds: Annotated[int, typer.Option("--seeds", help="Seeds for the finalists (successive halving).")] = 5,
    objective: Annotated[
        str,
        typer.Option("--objective", help="balanced | imbalance | churn, or an expression (docs/tune.md)."),
    ] = "balanced",
    candidates: Annotated[
        int | None,
        typer.Option("--candidates", help="Parameter sets per strategy pair (default 12; demo 8)."),
    ] = None,
    eta: Annotated[int, typer.Option("--eta", help="Successive halving keeps 1/eta per rung.")] = 3,
    demo: Annotated[
        bool,
        typer.Option("--demo", help="The whole path on the shipped recording: ingest, twin, tune, report."),
    ] = False,
    master: MasterOpt = None,
    conf: ConfOpt = None,
    spark_conf: ConfFileOpt = None,
    ui: UiOpt = False,
) -> None:
    """Which strategy pair and settings for this cluster: a Spark sweep by successive halving, a Pareto
    front, and the recommendation as a broker.conf fragment."""
    from shedlab.core.tune import load_space, objective_expression
    from shedlab.spark.tune import tune as run_tune
    from shedlab.strategies import pair_list

    candidates = _checked_counts(seeds, candidates, eta, demo=demo)
    objective_expression(objective)
    pairs = pair_list(strategies)
    search = load_space(space)
    if demo:
        _demo_alone(twin_file, scenarios)
        search.check_pairs(pairs)
        target = _preflight_demo(out, master, conf, spark_conf)
        tune_demo(
            target,
            seeds,
            candidates,
            master,
            conf,
            spark_conf,
            ui,
            pairs=pairs,
            space=search,
            objective=objective,
            eta=eta,
        )
        return
    if out is None:
        raise InputError("give --out DIR", field="--out")
    refs, recorded = _tune_targets(twin_file, scenarios, pairs)
    search.check_pairs(pairs, recorded, refs[0].source)
    check_output_kind(out, "tune")
    _preflight(master, out, conf, spark_conf)
    with spark_session(master, conf, spark_conf, ui, "tune") as spark, _status(False) as say:
        result = run_tune(
            spark,
            refs,
            out,
            pairs=pairs,
            space=search,
            seeds=seeds,
            objective=objective,
            per_pair=candidates,
            eta=eta,
            say=say,
            recorded=recorded,
        )
    _print_recommendation(result)
    console.print(f"tune.json, tune.md, candidates.csv, recommendation.conf → {out}")
    err_console.print(f"[dim]report: shedlab report {out} --out {out}/report.html[/]")


def _preflight_demo(
    out: str | None, master: str | None, conf: list[str] | None, spark_conf: str | None
) -> str:
    """``tune --demo``'s output directory (``out/tune-demo`` unless ``--out``), checked as every output is,
    with the Spark settings (:func:`_preflight`), before anything runs."""
    target = out or "out/tune-demo"
    check_output_kind(target, "tune --demo")
    _preflight(master, target, conf, spark_conf)
    return target


def register(app: typer.Typer) -> None:
    """Add ``twin`` and ``tune`` to the ``shedlab`` application."""
    app.command()(twin)
    app.command()(tune)
