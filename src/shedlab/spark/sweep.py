"""Parameter sweeps on Spark (``shedlab sweep GRID.yaml --out DIR``): scheduling only.

The grid format and its expansion into run specifications are :mod:`shedlab.core.grid`; running one
spec and the results-directory layout (``runs/``, ``ticks/``, ``decisions/``, ``brokers/``,
``events/`` partitioned by scenario and strategy, ``sweep.json``) are :mod:`shedlab.core.results`.
This module places the pending specs into Spark tasks (longest-processing-time packing), runs
:func:`~shedlab.core.results.execute_spec` for each inside a ``mapInPandas`` task, skips the runs a
directory already holds (resume) and reports progress.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow.fs as pafs  # type: ignore[import-untyped]

from shedlab.core.grid import Grid, expand_grid
from shedlab.core.results import (
    RunWriter,
    absolute_location,
    execute_spec,
    filesystem,
    finished_run_files,
    quarantine_corrupt_runs,
    refuse_other_versions,
    remove_stale_temporaries,
    table_path,
    write_manifest,
)
from shedlab.spark.schemas import RUN_SPEC, RUN_SUMMARY, conform, field_names
from shedlab.spark.session import ship_strategy_modules

__all__ = [
    "SweepResult",
    "completed_runs",
    "plan_tasks",
    "run_tasks",
    "sweep",
]


def run_tasks(
    out: str, timeout_s: float | None, plan: Any
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The ``mapInPandas`` function over ``spark.range(tasks)``: each row is a task id; run the specs
    planned for it (``plan`` is a broadcast of ``{"tasks": {id: [spec]}, "scenarios": {digest: text}}``)
    and yield their summary rows."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        writer = RunWriter(out)
        value = plan.value
        texts: Mapping[str, str] = value["scenarios"]
        for batch in batches:
            rows = []
            for task_id in batch["id"].tolist():
                for spec in value["tasks"].get(int(task_id), []):
                    full = {**spec, "scenario_spec": texts[spec["scenario_digest"]]}
                    rows.append(execute_spec(full, writer, timeout_s=timeout_s))
            frame = conform(pd.DataFrame(rows), RUN_SUMMARY)
            frame["metrics"] = [r["metrics"] for r in rows]
            yield frame

    return run


# ---------------------------------------------------------------------------------------------
# Driver side
# ---------------------------------------------------------------------------------------------


@dataclass
class SweepResult:
    """What a sweep did: how many runs the grid has, skipped (already complete), ran, failed; of the runs
    ran, how many had failed before (``retried``); of the runs skipped, how many are failures kept as
    they were (``skipped_failed``, with ``retry_failed=False``), so that a summary never hides them."""

    out: str
    grid: Grid
    total: int
    skipped: int
    ran: int
    failed: int
    elapsed_s: float
    summaries: pd.DataFrame  # the runs executed now (RUN_SUMMARY columns)
    quarantined: list[tuple[str, str]] = field(default_factory=list)  # unreadable summaries moved aside
    temporaries_removed: int = 0  # files an interrupted earlier sweep left behind
    retried: int = 0  # runs ran now whose earlier summary said error
    skipped_failed: int = 0  # runs skipped whose summary says error (retry_failed=False)

    @property
    def complete(self) -> int:
        return self.skipped + self.ran


_DONE_COLUMNS = ("run_id", "status", "scenario", "scenario_digest")


def completed_runs(spark: Any, out: str) -> pd.DataFrame:
    """``run_id``/``status``/``scenario``/``scenario_digest`` of every run that has a summary under
    ``out/runs`` (empty if none)."""
    fs, base = filesystem(out)
    if fs.get_file_info(table_path(base, "runs")).type == pafs.FileType.NotFound:
        return pd.DataFrame(
            {c: pd.Series(dtype=object) for c in ("run_id", "status", "scenario", "scenario_digest")}
        )
    df = spark.read.schema(RUN_SUMMARY).parquet(table_path(out, "runs"))
    df = df.select("run_id", "status", "scenario", "scenario_digest")
    result: pd.DataFrame = df.toPandas()
    return result


TARGET_TASK_COST = 1.0e6
"""Pack runs into Spark tasks of about this much estimated work (≈ 1 s of simulation): enough to
hide a task's fixed overhead, small enough to keep every core busy until the end."""


def plan_tasks(costs: Sequence[float], parallelism: int, *, max_tasks: int = 4000) -> list[int]:
    """The task index of every run (runs given longest first), by longest-processing-time packing.

    The number of tasks is what the total estimated work needs at :data:`TARGET_TASK_COST` per task,
    but at least two per core (and one per run at most); task 0 holds the most work, so Spark, which
    schedules partitions in order, starts the longest tasks first.
    """
    n = len(costs)
    if n == 0:
        return []
    total = float(sum(max(0.0, c) for c in costs))
    wanted = math.ceil(total / TARGET_TASK_COST) if total > 0 else n
    tasks = max(1, min(n, max_tasks, max(wanted, 2 * max(1, parallelism))))
    loads = [0.0] * tasks
    assignment = [0] * n
    order = sorted(range(n), key=lambda i: -float(costs[i]))
    for i in order:
        k = min(range(tasks), key=lambda j: (loads[j], j))
        assignment[i] = k
        loads[k] += max(0.0, float(costs[i]))
    rank = {k: r for r, k in enumerate(sorted(range(tasks), key=lambda j: (-loads[j], j)))}
    used = sorted({rank[a] for a in assignment})
    compact = {old: new for new, old in enumerate(used)}
    return [compact[rank[a]] for a in assignment]


ProgressFn = Callable[[int, int, int], None]
"""``progress(done, total, failed_tasks)`` — runs finished so far in this sweep."""


class _RunCounter:
    """Counts the runs of this sweep that have finished, by the summaries they wrote.

    A run writes its summary (``runs/…/run-<id>.parquet``) last, so the count moves with the
    simulations themselves, one run at a time, however many runs a Spark task holds. With
    failed runs retried a pending run may already have an old summary; only files written since the
    sweep started count then.
    """

    def __init__(self, out: str, pending_ids: set[str], since: float | None) -> None:
        self.out = out
        self.pending = pending_ids
        self.since = since
        self.base_interval = 0.5 if isinstance(filesystem(out)[0], pafs.LocalFileSystem) else 5.0
        self.interval = self.base_interval

    def finished(self) -> int:
        """Finished runs; also stretches the polling interval so that listing a large output
        directory takes at most a tenth of the driver's time (it shares the cores with local tasks)."""
        started = time.monotonic()
        done = sum(1 for run_id in finished_run_files(self.out, self.since) if run_id in self.pending)
        self.interval = max(self.base_interval, 10 * (time.monotonic() - started))
        return done


def _failed_tasks(spark: Any, group: str) -> int:
    tracker = spark.sparkContext.statusTracker()
    failed = 0
    for job_id in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            failed += stage.numFailedTasks if stage is not None else 0
    return failed


def _poll_progress(
    spark: Any, group: str, counter: _RunCounter, total_runs: int, progress: ProgressFn, stop: threading.Event
) -> None:
    last = (-1, -1)
    while not stop.wait(counter.interval):
        now = (min(total_runs, counter.finished()), _failed_tasks(spark, group))
        if now != last:
            progress(now[0], total_runs, now[1])
            last = now


def _task_plan(pending: pd.DataFrame, task_of: list[int]) -> dict[str, Any]:
    """What the tasks read from the broadcast: each task's run specs (without scenario texts) and each
    distinct scenario text once, by digest."""
    scenarios: dict[str, str] = {}
    by_task: dict[int, list[dict[str, Any]]] = {}
    spec_columns = [c for c in field_names(RUN_SPEC) if c != "scenario_spec"]
    for task, (_, row) in zip(task_of, pending.iterrows(), strict=True):
        scenarios[str(row["scenario_digest"])] = str(row["scenario_spec"])
        spec = {
            c: (None if isinstance(row[c], float) and math.isnan(row[c]) else row[c]) for c in spec_columns
        }
        by_task.setdefault(int(task), []).append(spec)
    return {"tasks": by_task, "scenarios": scenarios}


def _collect_watched(
    spark: Any,
    results_df: Any,
    group: str,
    description: str,
    counter: _RunCounter,
    n: int,
    progress: ProgressFn | None,
) -> list[Any]:
    """``results_df.collect()`` in a thread of its own, so that the caller can report progress (a
    poller counts finished run files) and Ctrl-C cancels the Spark job group instead of leaving it
    running."""
    sc = spark.sparkContext
    collected: list[Any] = []
    failure: list[BaseException] = []

    def action() -> None:
        try:
            sc.setJobGroup(group, description, interruptOnCancel=True)
            collected.extend(results_df.collect())
        except BaseException as exc:  # re-raised in the caller
            failure.append(exc)

    worker = threading.Thread(target=action, name="shedlab-sweep", daemon=True)
    stop = threading.Event()
    poller = None
    if progress is not None:
        progress(0, n, 0)
        poller = threading.Thread(
            target=_poll_progress,
            args=(spark, group, counter, n, progress, stop),
            name="shedlab-progress",
            daemon=True,
        )
        poller.start()
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        sc.cancelJobGroup(group)
        worker.join(30)
        raise
    finally:
        stop.set()
        if poller is not None:
            poller.join(2)
    if failure:
        raise failure[0]
    return collected


def _run_pending(
    spark: Any,
    grid: Grid,
    out: str,
    pending: pd.DataFrame,
    started: float,
    retrying: bool,
    max_tasks: int,
    timeout_s: float | None,
    progress: ProgressFn | None,
) -> list[Any]:
    """The pending runs as one Spark job of planned tasks; the summaries' rows as they come back."""
    sc = spark.sparkContext
    ship_strategy_modules(spark, grid.strategies)
    task_of = plan_tasks(pending["cost"].tolist(), sc.defaultParallelism, max_tasks=max_tasks)
    tasks = max(task_of) + 1
    # Exact placement without a Python stage: spark.range gives partition k exactly the row k (the
    # k-th task, scheduled k-th); the specs travel once per executor as a broadcast, scenario texts
    # once per distinct scenario.
    plan = sc.broadcast(_task_plan(pending, task_of))
    results_df = spark.range(0, tasks, 1, numPartitions=tasks).mapInPandas(
        run_tasks(absolute_location(out), timeout_s, plan), RUN_SUMMARY
    )
    group = f"shedlab-sweep-{os.getpid()}-{int(started * 1000)}"
    counter = _RunCounter(out, set(pending["run_id"]), started if retrying else None)
    n = len(pending)
    try:
        return _collect_watched(
            spark, results_df, group, f"shedlab sweep {grid.name}: {n} runs", counter, n, progress
        )
    finally:
        plan.unpersist()


def _pending(
    specs: pd.DataFrame, done: pd.DataFrame, retry_failed: bool, limit: int | None
) -> tuple[pd.DataFrame, int, int, int]:
    """The specs to run now (the first ``limit``), and what the summary counts: the runs skipped as
    complete, the pending runs whose summary says ``error`` (retried), and the failures kept as complete
    (``retry_failed`` off)."""
    failed_ids = set(done.loc[done["status"] != "ok", "run_id"]) & set(specs["run_id"])
    finished_ids = set(done.loc[done["status"] == "ok", "run_id"]) | (set() if retry_failed else failed_ids)
    pending = specs[~specs["run_id"].isin(finished_ids)]
    skipped = len(specs) - len(pending)
    if limit is not None:
        pending = pending.head(max(0, limit))
    retried = int(pending["run_id"].isin(failed_ids).sum()) if len(pending) else 0
    return pending, skipped, retried, 0 if retry_failed else len(failed_ids)


def sweep(
    spark: Any,
    grid: Grid,
    out: str,
    *,
    progress: ProgressFn | None = None,
    retry_failed: bool = True,
    max_tasks: int = 4000,
    timeout_s: float | None = None,
    limit: int | None = None,
    specs: pd.DataFrame | None = None,
) -> SweepResult:
    """Run every run of ``grid`` that ``out`` does not hold yet; return what happened.

    ``limit`` runs only the first N pending runs (useful to test, or to split a sweep in parts);
    ``retry_failed`` (the default) runs again the runs whose summary says ``error``: a timeout on a busy
    machine, a write that failed or a plugin fixed since should not stick to the sweep as if the run were
    done (with False they count as complete, and as ``skipped_failed``); ``specs`` replaces the grid's
    cross product by these run specifications (``shedlab tune``'s rungs; the grid then only names the
    sweep, its scenarios and its strategies in ``sweep.json``).
    """
    started = time.time()
    specs = expand_grid(grid) if specs is None else specs
    total = len(specs)
    # The driver is the only writer of ``out``: temporaries older than this start are a killed sweep's;
    # an unreadable summary (a torn write) is moved aside, so that its run counts as pending.
    removed = remove_stale_temporaries(out, started)
    quarantined = quarantine_corrupt_runs(out)
    done = completed_runs(spark, out)
    refuse_other_versions(
        out, done, {s.name: s.digest for s in grid.scenarios}, hint="sweep into a new --out directory"
    )
    pending, skipped, retried, skipped_failed = _pending(specs, done, retry_failed, limit)
    write_manifest(out, grid)
    if pending.empty:
        if progress:
            progress(0, 0, 0)
        return SweepResult(
            out,
            grid,
            total,
            skipped,
            0,
            0,
            time.time() - started,
            conform(pd.DataFrame(), RUN_SUMMARY),
            quarantined,
            len(removed),
            skipped_failed=skipped_failed,
        )
    n = len(pending)
    collected = _run_pending(spark, grid, out, pending, started, retried > 0, max_tasks, timeout_s, progress)
    summaries = pd.DataFrame([r.asDict() for r in collected], columns=field_names(RUN_SUMMARY))
    # Every task of this sweep has renamed its temporaries by now, so any left is a dead writer's: a
    # Python worker of a killed earlier sweep can outlive its JVM by a moment and touch its temporary
    # after this sweep started, which the cleanup at the start then (rightly) could not remove.
    removed += remove_stale_temporaries(out, time.time())
    if progress is not None:
        progress(len(summaries), n, 0)
    failed = int((summaries["status"] != "ok").sum()) if len(summaries) else 0
    return SweepResult(
        out,
        grid,
        total,
        skipped,
        len(summaries),
        failed,
        time.time() - started,
        summaries,
        quarantined,
        len(removed),
        retried,
        skipped_failed,
    )
