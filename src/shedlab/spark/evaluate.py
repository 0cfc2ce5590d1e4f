"""Evaluation of a sweep on Spark (``shedlab evaluate SWEEP_DIR``).

The statistics and the PIP-364 definitions are :mod:`shedlab.core.evaluation` (pandas/NumPy); this
module reads the run summaries (one row per run id), spreads their metrics, applies the core
functions per group (``groupBy(...).applyInPandas``) and writes the tables, each as Parquet and CSV:

* ``metric_stats``: per scenario × strategy pair × parameter set × metric, n, mean, sample standard
  deviation, min, max and the 95 % t-interval of the mean (:func:`~shedlab.core.evaluation.metric_stats`);
* ``pip364``: the PIP-364 table (:func:`~shedlab.core.evaluation.pip364_table`);
* ``runs``: one row per successful run, one column per metric;
* ``pip364_definitions.json``: the definitions used (a grid's ``pip364:`` section overrides the
  defaults), with the scenarios each one matched;
* ``goal.csv``: a challenger strategy (default CapacityAwareShedder) against issue 15's goal, cell by
  cell (:func:`~shedlab.core.goal.goal_cells`), when the sweep ran it beside the goal's baselines.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import functions as sf

from shedlab import jsonout
from shedlab.core.evaluation import (
    DEFINITIONS_FILE,
    EVALUATION_DIR,
    EXCLUDED_METRICS,
    STATS_KEYS,
    applicable_definitions,
    metric_stats,
    pip364_stats,
    pip364_table,
    pip364_values,
    resolve_definitions,
)
from shedlab.core.goal import (
    DEFAULT_CHALLENGER,
    GOAL_TABLE,
    check_challenger,
    goal_cells,
    goal_note,
    scenario_classes,
)
from shedlab.core.results import (
    exists,
    filesystem,
    manifest_grids,
    quarantine_corrupt_runs,
    read_manifest,
    table_path,
)
from shedlab.errors import ConfigError, InputError
from shedlab.spark.schemas import (
    METRIC_STATS,
    PIP364_STATS,
    PIP364_TABLE,
    PIP364_VALUE,
    RUN_SUMMARY,
    conform,
    field_names,
)

__all__ = ["EvaluationResult", "check_sweep", "evaluate", "require_sweep_dir"]


@dataclass
class EvaluationResult:
    """The evaluation tables (pandas) and where they were written."""

    out: str
    metric_stats: pd.DataFrame
    pip364: pd.DataFrame
    runs: pd.DataFrame
    definitions: dict[str, dict[str, Any]]
    goal: pd.DataFrame  # GOAL_COLUMNS; empty when the sweep did not run the challenger and baselines
    runs_ok: int
    runs_failed: int
    notes: list[str]
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # unreadable run files moved aside


def require_sweep_dir(sweep_dir: str) -> None:
    """Refuse a directory without ``runs/`` (the CLI calls it before Spark starts)."""
    fs, base = filesystem(sweep_dir)
    if not exists(fs, table_path(base, "runs")):
        raise InputError(
            "not a sweep directory: runs/ is missing", source=sweep_dir, hint="run shedlab sweep first"
        )


def check_sweep(sweep_dir: str, challenger: str) -> list[dict[str, Any]]:
    """What the CLI checks before Spark starts, ``sweep.json`` read once: a sweep directory, a named
    challenger its grids list (:func:`evaluate` checks again against the runs themselves), and their
    ``pip364:`` sections; the grids, for :func:`evaluate`."""
    require_sweep_dir(sweep_dir)
    grids = _swept_grids(sweep_dir)
    listed = [s for grid in grids for s in grid.get("strategies") or () if isinstance(s, str)]
    if listed:  # a manifest without strategy lists (another version) leaves the check to the runs
        check_challenger(challenger, listed, table_path(sweep_dir, "sweep.json"))
    _grid_definitions(sweep_dir, grids)
    return grids


def _read_runs(spark: Any, sweep_dir: str) -> Any:
    require_sweep_dir(sweep_dir)
    return spark.read.schema(RUN_SUMMARY).parquet(table_path(sweep_dir, "runs"))


def _register_runs(spark: Any, sweep_dir: str) -> tuple[int, int]:
    """Views ``shedlab_runs`` (one row per run id) and ``shedlab_runs_long`` (one row per successful
    run × metric); returns the numbers of successful and failed runs."""
    _read_runs(spark, sweep_dir).createOrReplaceTempView("shedlab_runs_raw")
    # One row per run id (a run id is written once; keep the latest should a copy ever appear).
    deduped = spark.sql(
        """
        SELECT * FROM (
          SELECT *, row_number() OVER (PARTITION BY run_id ORDER BY finished_ms DESC) AS _copy
          FROM shedlab_runs_raw
        ) WHERE _copy = 1
        """
    ).drop("_copy")
    # One row per run: small; materialise once so the queries below don't re-read every file.
    deduped.localCheckpoint(eager=True).createOrReplaceTempView("shedlab_runs")
    status_counts = {
        r["status"]: r["n"]
        for r in spark.sql("SELECT status, count(*) AS n FROM shedlab_runs GROUP BY status").collect()
    }
    excluded = ", ".join(f"'{m}'" for m in EXCLUDED_METRICS)
    spark.sql(
        f"""
        CREATE OR REPLACE TEMP VIEW shedlab_runs_long AS
        SELECT r.run_id, r.scenario, r.strategy, r.params_id, r.params_json, r.seed,
               m.key AS metric, m.value AS value
        FROM shedlab_runs r LATERAL VIEW explode(r.metrics) m AS key, value
        WHERE r.status = 'ok' AND m.key NOT IN ({excluded})
        """
    )
    spark.table("shedlab_runs_long").localCheckpoint(eager=True).createOrReplaceTempView("shedlab_runs_long")
    ok = int(status_counts.get("ok", 0))
    return ok, int(sum(v for k, v in status_counts.items() if k != "ok"))


def _digest_notes(spark: Any) -> list[str]:
    digests = spark.sql(
        "SELECT scenario, count(DISTINCT scenario_digest) AS d FROM shedlab_runs "
        "WHERE status = 'ok' GROUP BY scenario"
    ).collect()
    return [
        f"scenario {row['scenario']!r} was run with {row['d']} different specifications"
        for row in digests
        if row["d"] > 1
    ]


def _metric_stats(spark: Any, confidence: float) -> Any:
    """:func:`~shedlab.core.evaluation.metric_stats` per scenario × strategy × parameter set."""
    values = spark.table("shedlab_runs_long").where(sf.col("value").isNotNull() & ~sf.isnan("value"))
    stats = (
        values.groupBy(*STATS_KEYS)
        .applyInPandas(functools.partial(metric_stats, confidence=confidence), METRIC_STATS)
        .orderBy("scenario", "strategy", "params_id", "metric")
    )
    return stats.select(*[sf.col(n).cast(METRIC_STATS[n].dataType) for n in field_names(METRIC_STATS)])


def _pip364_stats(wide: Any, definitions: Mapping[str, Mapping[str, Any]], confidence: float) -> pd.DataFrame:
    """Every run's PIP-364 figures (``mapInPandas``), then their statistics per problem × strategy ×
    parameter set (``applyInPandas``), both with the core functions."""

    def values(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for batch in batches:
            yield conform(pip364_values(batch, definitions), PIP364_VALUE)

    stats = (
        wide.mapInPandas(values, PIP364_VALUE)
        .groupBy("problem", "strategy", "params_id")
        .applyInPandas(
            functools.partial(pip364_stats, confidence=confidence, definitions=definitions), PIP364_STATS
        )
    )
    result: pd.DataFrame = stats.toPandas()
    return result


def _swept_grids(sweep_dir: str) -> list[dict[str, Any]]:
    """The grids recorded in ``sweep_dir``'s ``sweep.json``, checked: read once per evaluation (by
    :func:`check_sweep` before Spark starts, or by :func:`evaluate` when not given them), for the
    challenger, the PIP-364 overrides and the goal's scenario texts."""
    return manifest_grids(read_manifest(sweep_dir), table_path(sweep_dir, "sweep.json"))


def _grid_definitions(sweep_dir: str, grids: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The ``pip364:`` sections of ``grids`` (:func:`_swept_grids`), each checked before anything is
    read (a grid swept before sweep checked them may hold a bad one: named by its place in sweep.json)."""
    where = table_path(sweep_dir, "sweep.json")
    overrides: list[Mapping[str, Any]] = []
    for i, grid in enumerate(grids):
        override = grid.get("pip364") or {}
        if not isinstance(override, Mapping):
            raise ConfigError(
                "expected a mapping of problem → definition", source=where, field=f"grids[{i}].pip364"
            )
        resolve_definitions(override, source=where, prefix=f"grids[{i}].pip364.")
        overrides.append(override)
    return overrides


def evaluate(
    spark: Any,
    sweep_dir: str,
    out: str | None = None,
    *,
    definitions: Mapping[str, Mapping[str, Any]] | None = None,
    confidence: float = 0.95,
    challenger: str = DEFAULT_CHALLENGER,
    progress: Callable[[str], None] | None = None,
    grids: Sequence[Mapping[str, Any]] | None = None,
) -> EvaluationResult:
    """Compute ``metric_stats``, the PIP-364 table and ``challenger``'s goal cells of a sweep and write
    them under ``out`` (default ``SWEEP_DIR/evaluation``). ``grids`` are :func:`check_sweep`'s, when the
    caller has them (read from ``sweep.json`` otherwise)."""
    target = (out or table_path(sweep_dir, EVALUATION_DIR)).rstrip("/")
    notes: list[str] = []
    say = progress or (lambda _msg: None)
    if grids is None:
        require_sweep_dir(sweep_dir)  # refuses a directory that is not a sweep's before touching it
        grids = _swept_grids(sweep_dir)
    grid_overrides = _grid_definitions(sweep_dir, grids)
    say("checking the run files")
    quarantined = quarantine_corrupt_runs(sweep_dir)
    if quarantined:
        notes.append(
            f"{len(quarantined)} unreadable run file(s) moved to quarantine/ and left out"
            f" (resume the sweep to run them again): {', '.join(path for path, _ in quarantined[:5])}"
            + (" …" if len(quarantined) > 5 else "")
        )
    say("reading the run summaries")
    runs_ok, runs_failed = _register_runs(spark, sweep_dir)
    if runs_ok == 0:
        raise InputError("the sweep has no successful runs to evaluate", source=sweep_dir)
    if runs_failed:
        notes.append(f"{runs_failed} run(s) failed and are left out (see runs/ status and error)")
    notes.extend(_digest_notes(spark))
    say(f"statistics of {runs_ok} runs")
    stats = _metric_stats(spark, confidence)
    stats_pd = stats.toPandas()

    wide, runs_pd, metric_names = _wide_runs(spark)
    swept = runs_pd["strategy"].astype(str).tolist()
    check_challenger(challenger, swept, table_path(sweep_dir, "runs"))

    defs = resolve_definitions(*grid_overrides, *([definitions] if definitions else []))
    usable, more = applicable_definitions(defs, sorted(set(runs_pd["scenario"])), metric_names)
    notes.extend(more)
    say("the PIP-364 table")
    pip = pip364_table(_pip364_stats(wide, usable, confidence), defs)
    goal = goal_cells(stats_pd, scenario_classes(_scenario_texts(grids)), challenger)
    why_no_goal = goal_note(swept, challenger)
    if goal.empty and why_no_goal:
        notes.append(why_no_goal)

    say(f"writing the tables to {target}")
    _write_outputs(spark, target, stats, stats_pd, pip, runs_pd, defs, goal)
    return EvaluationResult(
        out=target,
        metric_stats=stats_pd,
        pip364=pip,
        runs=runs_pd,
        definitions=defs,
        goal=goal,
        runs_ok=runs_ok,
        runs_failed=runs_failed,
        notes=notes,
        quarantined=quarantined,
    )


def _wide_runs(spark: Any) -> tuple[Any, pd.DataFrame, list[str]]:
    """The successful runs as a wide table, one column per metric (for the PIP expressions, and written
    for users): the Spark frame, its rows in pandas (by scenario, strategy, parameters, seed), and the
    metric names."""
    metric_names = sorted(
        r["metric"] for r in spark.sql("SELECT DISTINCT metric FROM shedlab_runs_long").collect()
    )
    wide = spark.sql("SELECT * FROM shedlab_runs WHERE status = 'ok'").select(
        "run_id",
        "scenario",
        "strategy",
        "params_id",
        "params_json",
        "seed",
        *[sf.col("metrics").getItem(m).alias(m) for m in metric_names],
    )
    runs_pd = wide.orderBy("scenario", "strategy", "params_id", "seed").toPandas()
    return wide, runs_pd, metric_names


def _write_outputs(
    spark: Any,
    target: str,
    stats: Any,
    stats_pd: pd.DataFrame,
    pip: pd.DataFrame,
    runs_pd: pd.DataFrame,
    defs: Mapping[str, Any],
    goal: pd.DataFrame,
) -> None:
    stats.coalesce(1).write.mode("overwrite").parquet(f"{target}/metric_stats")
    spark.createDataFrame(conform(pip, PIP364_TABLE), PIP364_TABLE).coalesce(1).write.mode(
        "overwrite"
    ).parquet(f"{target}/pip364")
    fs, base = filesystem(target)
    fs.create_dir(base, recursive=True)

    def put(name: str, data: bytes) -> None:
        with fs.open_output_stream(f"{base}/{name}") as sink:
            sink.write(data)

    put("metric_stats.csv", stats_pd.to_csv(index=False).encode("utf-8"))
    put("pip364.csv", pip.to_csv(index=False).encode("utf-8"))
    put("runs.csv", runs_pd.to_csv(index=False).encode("utf-8"))
    with fs.open_output_stream(f"{base}/runs.parquet") as sink:
        pq.write_table(pa.Table.from_pandas(runs_pd, preserve_index=False), sink)
    put(DEFINITIONS_FILE, (jsonout.dumps(defs, indent=2, default=str) + "\n").encode("utf-8"))
    put(f"{GOAL_TABLE}.csv", goal.to_csv(index=False).encode("utf-8"))  # header only: no cell


def _scenario_texts(grids: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each swept scenario's YAML text, as the manifest recorded it (a later grid's entry wins)."""
    return {
        name: str(entry.get("text", ""))
        for grid in grids
        for name, entry in (grid.get("scenarios") or {}).items()
        if entry.get("text")
    }
