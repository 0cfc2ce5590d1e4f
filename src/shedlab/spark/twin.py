"""``shedlab twin``: fit a scenario to ingest's output and check it against the recording (orchestration).

Every pass over the recorded ticks is a Spark aggregation (per broker, per bundle, per namespace × tick,
per tick); what reaches the driver is one row per broker, per bundle, per namespace × tick and per
move. The fitting math and the comparison are :mod:`shedlab.core.twin`; the twin's own runs go through
:func:`shedlab.spark.sweep.sweep` like any grid.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812 - Spark's convention

from shedlab import jsonout
from shedlab.core.grid import parse_grid
from shedlab.core.ingest import choose_cluster
from shedlab.core.results import read_run_table, read_sweep_runs
from shedlab.core.twin import (
    BROKER_PRODUCTS,
    BROKER_TERMS,
    OFF_FRACTION,
    QUANTILES,
    FitCheck,
    TwinFit,
    TwinInputs,
    compare,
    fit_report_markdown,
    fit_twin,
    recorded_figures,
    score_expression,
    twin_figures,
    window_error,
)
from shedlab.errors import InputError
from shedlab.spark.ingest import read_snapshots
from shedlab.spark.sweep import sweep

__all__ = ["TwinResult", "ValidationResult", "fit", "recorded", "validate"]

Progress = Callable[[str], None]


_TICK_COLUMNS = ["run_id", "time_s", "score_spread", "unloads", "throughput_moved", "throughput_total"]
"""What the fit report reads of a twin run's ticks (``time_s`` and the rest for a recording's gaps)."""


@dataclass
class TwinResult:
    """A fitted twin and the recording's figures, handed from :func:`fit` to :func:`validate` in memory
    (nothing of it is saved but the twin's YAML). The recording's gaps travel in ``fit.gaps``; a
    ``TwinFit`` built without them (older code) has none, and the report compares whole runs."""

    fit: TwinFit
    cluster: str
    duration_s: float
    recorded: dict[str, Any]


@dataclass
class ValidationResult:
    checks: list[FitCheck]
    markdown: str
    doc: dict[str, Any]

    @property
    def fits(self) -> bool:
        return all(c.ok for c in self.checks)


def _window_error(brokers: DataFrame, cluster: str, window: tuple[int, int] | None) -> InputError:
    """Fewer than two sample times in ``--window`` (:func:`shedlab.core.twin.window_error`)."""
    if window is None:  # the whole recording: core.twin's own check says so
        return InputError("the recording has fewer than two sample times: nothing to fit a twin to")
    row = brokers.agg(F.min("tick_ms"), F.max("tick_ms")).first()
    span = (int(row[0]), int(row[1])) if row is not None and row[0] is not None else None
    return window_error(cluster, span, window)


def _window(df: DataFrame, window: tuple[int, int] | None) -> DataFrame:
    if window is None:
        return df
    return df.where((F.col("tick_ms") >= window[0]) & (F.col("tick_ms") <= window[1]))


def _pick_cluster(brokers: DataFrame, cluster: str | None, source: str) -> str:
    present = sorted(r[0] for r in brokers.select("cluster").distinct().collect())
    return choose_cluster(present, cluster, source=source)


def _broker_stats(b: DataFrame) -> pd.DataFrame:
    for name, expr in BROKER_TERMS.items():
        b = b.withColumn(name, F.expr(expr))
    aggs = [
        F.count(F.lit(1)).alias("n"),
        F.min("tick_ms").alias("first_ms"),
        F.max("tick_ms").alias("last_ms"),
        *[
            F.max(c).alias(c)
            for c in ("cpu_limit", "bandwidth_out_limit", "direct_memory_limit", "memory_limit")
        ],
        *[F.sum(t).alias(f"s_{t}") for t in BROKER_TERMS],
        *[F.sum(F.col(a) * F.col(c)).alias(f"p_{a}_{c}") for a, c in BROKER_PRODUCTS],
    ]
    frame: pd.DataFrame = b.groupBy("broker").agg(*aggs).orderBy("broker").toPandas()
    return frame


def _gaps(b: DataFrame, tick_ms: float) -> pd.DataFrame:
    w = Window.partitionBy("broker").orderBy("tick_ms")
    gaps = (
        b.select("broker", "tick_ms")
        .withColumn("from_ms", F.lag("tick_ms").over(w))
        .where(F.col("tick_ms") - F.col("from_ms") > 1.5 * tick_ms)
        .select("broker", "from_ms", F.col("tick_ms").alias("to_ms"))
    )
    frame: pd.DataFrame = gaps.orderBy("broker", "from_ms").toPandas()
    return frame


def _bundle_stats(u: DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    u = u.withColumn("namespace", F.regexp_extract("bundle", r"^(.*)/[^/]*$", 1))
    ns = u.groupBy("namespace", "tick_ms").agg(F.sum("msg_rate_in").alias("rate_in"))
    by_bundle = Window.partitionBy("bundle")
    ordered = by_bundle.orderBy("tick_ms")
    x = (
        u.join(ns.withColumnRenamed("rate_in", "ns_rate_in"), ["namespace", "tick_ms"])
        .withColumn(
            "log_share",
            F.when(
                (F.col("msg_rate_in") > 0) & (F.col("ns_rate_in") > 0),
                F.log(F.col("msg_rate_in") / F.col("ns_rate_in")),
            ),
        )
        .withColumn("prev_log_share", F.lag("log_share").over(ordered))
        .withColumn("pair_share", F.when(F.col("prev_log_share").isNotNull(), F.col("log_share")))
        .withColumn("pair_prev", F.when(F.col("log_share").isNotNull(), F.col("prev_log_share")))
        .withColumn(
            "off_out",
            (F.col("msg_rate_out") < OFF_FRACTION * F.avg("msg_rate_out").over(by_bundle)).cast("int"),
        )
        .withColumn(
            "off_in", (F.col("msg_rate_in") < OFF_FRACTION * F.avg("msg_rate_in").over(by_bundle)).cast("int")
        )
        .withColumn("prev_off_out", F.coalesce(F.lag("off_out").over(ordered), F.lit(0)))
        .withColumn("prev_off_in", F.coalesce(F.lag("off_in").over(ordered), F.lit(0)))
    )
    stats = x.groupBy("bundle").agg(
        F.count(F.lit(1)).alias("n"),
        F.min("tick_ms").alias("first_ms"),
        F.min_by("broker", "tick_ms").alias("first_owner"),
        F.avg("msg_rate_in").alias("rate_in"),
        F.avg("msg_rate_out").alias("rate_out"),
        F.avg("msg_throughput_in").alias("tp_in"),
        F.avg("msg_throughput_out").alias("tp_out"),
        F.max("topics").alias("topics"),
        F.max("producer_count").alias("producers"),
        F.max("consumer_count").alias("consumers"),
        F.stddev("log_share").alias("log_share_std"),
        # lag-1 autocorrelation; not F.corr: under ANSI SQL (Spark's default) it raises DIVIDE_BY_ZERO for a
        # bundle whose share never changes (constant traffic), where the correlation is simply undefined
        F.try_divide(
            F.covar_samp("pair_share", "pair_prev"), F.stddev_samp("pair_share") * F.stddev_samp("pair_prev")
        ).alias("log_share_ac1"),
        F.avg("off_out").alias("off_out_fraction"),
        F.sum(F.when((F.col("off_out") == 1) & (F.col("prev_off_out") == 0), 1).otherwise(0)).alias(
            "off_out_starts"
        ),
        F.avg("off_in").alias("off_in_fraction"),
        F.sum(F.when((F.col("off_in") == 1) & (F.col("prev_off_in") == 0), 1).otherwise(0)).alias(
            "off_in_starts"
        ),
    )
    bundles: pd.DataFrame = stats.orderBy("bundle").toPandas()
    series: pd.DataFrame = ns.orderBy("namespace", "tick_ms").toPandas()
    return bundles, series


def _recorded(
    b: DataFrame, u: DataFrame, tick_ms: float, config: Mapping[str, Any]
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Per-tick score spread, per-broker score quantiles and the moves of the recording."""
    scored = b.withColumn("score", F.expr(score_expression(config)))
    spread = scored.groupBy("tick_ms").agg((F.max("score") - F.min("score")).alias("spread")).toPandas()
    quantiles = (
        scored.groupBy("broker")
        # exact, interpolated linearly between the two nearest samples: the quantile pandas takes of
        # the twin's runs (twin_figures). percentile_approx returns a sample near the rank instead,
        # which put a broker's quantiles up to a few points off a twin that reproduced it exactly
        .agg(F.percentile("score", list(QUANTILES)).alias("q"))
        .orderBy("broker")
        .toPandas()
    )
    for i, q in enumerate(QUANTILES):
        quantiles[f"q{int(q * 100)}"] = [float(v[i]) for v in quantiles["q"]]
    ordered = Window.partitionBy("bundle").orderBy("tick_ms")
    tp = u.withColumn("throughput", F.col("msg_throughput_in") + F.col("msg_throughput_out"))
    totals = tp.groupBy("tick_ms").agg(F.sum("throughput").alias("total_throughput"))
    present = b.select("tick_ms", F.col("broker").alias("prev_broker"))
    moves = (
        tp.withColumn("prev_broker", F.lag("broker").over(ordered))
        .withColumn("prev_tick", F.lag("tick_ms").over(ordered))
        .where(
            (F.col("prev_broker") != F.col("broker"))
            & (F.col("tick_ms") - F.col("prev_tick") <= 1.5 * tick_ms)
        )
        .join(present, ["tick_ms", "prev_broker"], "left_semi")  # the old owner still up: an unload
        .join(totals, ["tick_ms"])
        .select("tick_ms", "bundle", "prev_broker", "broker", "throughput", "total_throughput")
        .orderBy("tick_ms", "bundle")
        .toPandas()
    )
    return spread, quantiles.drop(columns=["q"]), moves


def fit(
    spark: SparkSession,
    snapshots: str,
    *,
    cluster: str | None = None,
    window: tuple[int, int] | None = None,
    strategy: str,
    config: Mapping[str, Any],
    name: str | None = None,
    progress: Progress | None = None,
) -> TwinResult:
    """Aggregate the recording on Spark and fit the twin (plus the recording's own figures)."""
    say = progress or (lambda _m: None)
    brokers_df, bundles_df, _ = read_snapshots(spark, snapshots)
    chosen = _pick_cluster(brokers_df, cluster, snapshots)
    b = _window(brokers_df.where(F.col("cluster") == chosen), window).cache()
    u = _window(bundles_df.where(F.col("cluster") == chosen), window).cache()
    try:
        say("aggregating per broker")
        ticks = np.array(sorted(r[0] for r in b.select("tick_ms").distinct().collect()), dtype=np.int64)
        if ticks.size < 2:
            raise _window_error(brokers_df.where(F.col("cluster") == chosen), chosen, window)
        tick_ms = float(np.median(np.diff(ticks)))
        broker_stats = _broker_stats(b)
        gaps = _gaps(b, tick_ms)
        say("aggregating per bundle and namespace")
        bundle_stats, series = _bundle_stats(u)
        say("fitting")
        inputs = TwinInputs(chosen, ticks, broker_stats, gaps, bundle_stats, series)
        fitted = fit_twin(
            inputs, name=name or f"twin-{chosen}", strategy=strategy, config=config, source=snapshots
        )
        say("the recording's own figures")
        spread, quantiles, moves = _recorded(b, u, tick_ms, config)
    finally:
        b.unpersist()
        u.unpersist()
    duration_s = float(ticks[-1] - ticks[0]) / 1000.0  # as a run's duration_s: first to last tick
    figures = recorded_figures(spread, quantiles, moves, duration_s, fitted.gaps)
    return TwinResult(fitted, chosen, duration_s, figures)


def validate(
    spark: SparkSession,
    twin: TwinResult,
    twin_path: str,
    out: str,
    *,
    seeds: int = 5,
    progress: Progress | None = None,
) -> ValidationResult:
    """Run the twin with the recording's strategy and configuration (``seeds`` seeds, as a Spark sweep
    into ``out/validation``) and compare the runs with the recording; write ``fit-report.{json,md}``."""
    say = progress or (lambda _m: None)
    strategy = str(twin.fit.scenario["strategy"])
    grid = parse_grid(
        {
            "name": "twin-validation",
            "scenarios": [str(Path(twin_path).resolve())],
            "strategies": [strategy],
            "seeds": {"count": seeds, "start": 1},
        },
        source="twin validation",
    )
    # run ids do not depend on a scenario's text: a refitted twin gets its own directory
    digest = hashlib.sha256(Path(twin_path).read_bytes()).hexdigest()[:12]
    root = Path(out) / "validation" / digest
    say(f"running the twin ({seeds} seeds)")
    sweep(spark, grid, str(root))
    runs = read_sweep_runs(root)
    # only this check's seeds: the directory keeps the runs of earlier checks of the same twin, with more
    runs = runs[(runs["status"] == "ok") & runs["seed"].isin(grid.seeds)]
    if runs.empty:
        raise InputError("every run of the twin failed", source=str(root))
    name = str(twin.fit.scenario["name"])
    brokers = pd.concat(
        [
            read_run_table(root, "brokers", name, strategy, r, ["run_id", "broker", "score", "time_s"])
            for r in runs["run_id"]
        ]
    )
    ticks = pd.concat(
        [read_run_table(root, "ticks", name, strategy, r, _TICK_COLUMNS) for r in runs["run_id"]]
    )
    gaps = twin.fit.gaps  # a TwinFit made without them has none: the whole runs, as before
    figures = twin_figures(runs.to_dict("records"), brokers, ticks, gaps)
    checks = compare(twin.recorded, figures, twin.fit.broker_numbers)
    markdown = fit_report_markdown(checks, title=f"twin of {twin.cluster}", seeds=len(figures), gaps=gaps)
    doc: dict[str, Any] = {
        "cluster": twin.cluster,
        "twin": twin_path,
        "seeds": len(figures),
        "fits": all(c.ok for c in checks),
        "checks": [c.to_dict() for c in checks],
        "recorded": {k: v for k, v in twin.recorded.items() if k != "broker quantiles"},
    }
    if gaps:  # only then: a report of a recording without gaps reads as it always did
        doc["recording_gaps_s"] = [list(span) for span in gaps.spans]
    Path(out).mkdir(parents=True, exist_ok=True)
    Path(out, "fit-report.json").write_text(jsonout.dumps(doc, indent=2) + "\n", encoding="utf-8")
    Path(out, "fit-report.md").write_text(markdown, encoding="utf-8")
    return ValidationResult(checks, markdown, doc)


def recorded(twin: TwinResult) -> dict[str, Any]:
    """The recording's figures (for ``tune``'s comparison with the recorded configuration)."""
    return {k: v for k, v in twin.recorded.items() if k != "broker quantiles"}
