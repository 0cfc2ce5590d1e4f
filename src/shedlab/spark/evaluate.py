"""Evaluation of a sweep with Spark SQL (``shedlab evaluate SWEEP_DIR``).

Two tables, each written as Parquet and CSV and printed:

* ``metric_stats``: for every scenario × strategy pair × parameter set × summary metric, the
  number of runs (seeds) with a value, mean, sample standard deviation, min, max and the 95 %
  confidence interval of the mean from Student's t distribution (``mean ± t(0.975, n−1)·sd/√n``;
  no interval for n < 2).
* ``pip364``: the PIP-364 comparison as numbers — for each strategy pair (and parameter set) one
  figure per problem, computed from the simulator's run summary on the scenarios that exhibit the
  problem (definitions in :data:`PIP364_DEFINITIONS` and ``docs/spark.md``), its 95 % interval
  over those runs, and the rating the thresholds give: *good* below ``good_below``, *bad* above
  ``bad_above``, *normal* in between (every figure is lower-is-better).

A grid may override any part of a definition in its ``pip364:`` section; the definitions actually
used are written to ``pip364_definitions.json`` next to the tables.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from shedlab.errors import ConfigError, InputError

__all__ = [
    "PIP364_DEFINITIONS",
    "PIP364_PROBLEMS",
    "EvaluationResult",
    "evaluate",
    "rate",
    "resolve_definitions",
    "t_critical",
]

PIP364_PROBLEMS: tuple[str, ...] = (
    "heterogeneous environment",
    "load jitter",
    "over placement",
    "over unloading",
    "slow load balancing",
)
"""The five problems of PIP-364's summary table, in its column order."""

PIP364_DEFINITIONS: dict[str, dict[str, Any]] = {
    "heterogeneous environment": {
        "scenarios": ["heterogeneous*"],
        "metric": "score spread + overload min/h",
        "expr": "score_spread_mean + broker_minutes_overloaded * 3600 / duration_s",
        "unit": "score points + minutes/hour",
        "good_below": 40.0,
        "bad_above": 60.0,
        "description": (
            "On scenarios whose brokers differ in capacity or share their machine with another process: the "
            "run's mean max−min broker score (U·100, true usage) plus the minutes per hour that some broker "
            "spends above the overload threshold. A strategy that misjudges which broker is loaded either "
            "leaves the spread high or moves load onto the weak machine and overloads it."
        ),
    },
    "load jitter": {
        "scenarios": ["*jitter*"],
        "metric": "unloads per hour",
        "expr": "unloads * 3600 / duration_s",
        "unit": "unloads/hour",
        "good_below": 20.0,
        "bad_above": 40.0,
        "description": (
            "On scenarios whose traffic swings briefly around a balanced average: bundle unloads per "
            "simulated hour. Every unload disconnects clients; reacting to swings that are already over "
            "is churn without benefit."
        ),
    },
    "over placement": {
        "scenarios": ["over-placement*"],
        "metric": "over-placements per run",
        "expr": "over_placement_events + hot_placements",
        "unit": "events",
        "good_below": 1.0,
        "bad_above": 3.0,
        "description": (
            "On scenarios where several bundles are unloaded in one cycle: destinations pushed above the "
            "overload threshold or the cluster mean + margin by what one cycle placed on them "
            "(over_placement_events), plus unloads sent to a broker that was already on the hot side "
            "(hot_placements)."
        ),
    },
    "over unloading": {
        "scenarios": ["over-unloading*"],
        "metric": "over-unloading flips per run",
        "expr": "over_unloading_flips",
        "unit": "flips",
        "good_below": 0.25,
        "bad_above": 0.75,
        "description": (
            "On scenarios where one hot broker meets an empty one: how often a broker that shed load became "
            "the coldest broker, margin points below the mean, at the next tick (good: almost never; bad: in "
            "most runs)."
        ),
    },
    "slow load balancing": {
        "scenarios": ["slow-balancing*", "scale-out*"],
        "metric": "mean score spread",
        "expr": "score_spread_mean",
        "unit": "score points",
        "good_below": 25.0,
        "bad_above": 50.0,
        "description": (
            "On scenarios where many empty brokers join a loaded cluster: the run's mean max−min broker "
            "score, i.e. the area under the imbalance curve divided by the duration. A strategy that needs "
            "many cycles to use the new brokers keeps the spread high for longer."
        ),
    },
}
"""Default PIP-364 figure definitions (overridable per grid). ``scenarios`` are name patterns."""

_DEF_FIELDS = ("scenarios", "metric", "expr", "unit", "good_below", "bad_above", "description")


# ---------------------------------------------------------------------------------------------
# Student's t quantile (no SciPy needed)
# ---------------------------------------------------------------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(c) > tiny else 1.0 + aa / tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(c) > tiny else 1.0 + aa / tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def _t_cdf(t: float, df: float) -> float:
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def t_critical(df: int, confidence: float = 0.95) -> float:
    """The two-sided critical value t(1 − α/2, df) of Student's t distribution."""
    if df < 1:
        return float("nan")
    p = 1.0 - (1.0 - confidence) / 2.0
    lo, hi = 0.0, 1.0
    while _t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if _t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2.0


def rate(value: float | None, good_below: float | None, bad_above: float | None) -> str:
    """good / normal / bad for a lower-is-better figure (``n/a`` without a value)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if good_below is not None and value < good_below:
        return "good"
    if bad_above is not None and value > bad_above:
        return "bad"
    return "normal"


# ---------------------------------------------------------------------------------------------
# Definitions
# ---------------------------------------------------------------------------------------------


def resolve_definitions(*overrides: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The default definitions with each ``overrides`` mapping (a grid's ``pip364:``) merged on top."""
    out = copy.deepcopy(PIP364_DEFINITIONS)
    lookup = {p.replace(" ", "_").replace("-", "_").lower(): p for p in PIP364_PROBLEMS}
    for override in overrides:
        for raw_name, spec in (override or {}).items():
            key = str(raw_name).replace(" ", "_").replace("-", "_").lower()
            name = lookup.get(key, str(raw_name))
            if not isinstance(spec, Mapping):
                raise ConfigError("expected a mapping", source="pip364", field=str(raw_name))
            unknown = [k for k in spec if k not in _DEF_FIELDS]
            if unknown:
                raise ConfigError(
                    "unknown field of a PIP-364 definition",
                    source="pip364",
                    field=f"{raw_name}.{unknown[0]}",
                    hint=f"known fields: {', '.join(_DEF_FIELDS)}",
                )
            merged = dict(out.get(name, {}))
            merged.update(spec)
            if isinstance(merged.get("scenarios"), str):
                merged["scenarios"] = [merged["scenarios"]]
            if "expr" not in merged:
                raise ConfigError(
                    "a new PIP-364 problem needs an 'expr'", source="pip364", field=str(raw_name)
                )
            out[name] = merged
    return out


def _matching(patterns: Sequence[str], scenarios: Sequence[str]) -> list[str]:
    return sorted({s for s in scenarios for p in patterns if fnmatch.fnmatchcase(s, p)})


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------


@dataclass
class EvaluationResult:
    """The evaluation tables (pandas) and where they were written."""

    out: str
    metric_stats: pd.DataFrame
    pip364: pd.DataFrame
    runs: pd.DataFrame
    definitions: dict[str, dict[str, Any]]
    runs_ok: int
    runs_failed: int
    notes: list[str]


def _read_runs(spark: Any, sweep_dir: str) -> Any:
    import pyarrow.fs as pafs  # type: ignore[import-untyped]

    from shedlab.spark.schemas import RUN_SUMMARY
    from shedlab.spark.sweep import _filesystem

    fs, base = _filesystem(sweep_dir)
    if fs.get_file_info(f"{base}/runs").type == pafs.FileType.NotFound:
        raise InputError(
            "not a sweep directory: runs/ is missing", source=sweep_dir, hint="run shedlab sweep first"
        )
    return spark.read.schema(RUN_SUMMARY).parquet(f"{sweep_dir.rstrip('/')}/runs")


def evaluate(
    spark: Any,
    sweep_dir: str,
    out: str | None = None,
    *,
    definitions: Mapping[str, Mapping[str, Any]] | None = None,
    confidence: float = 0.95,
) -> EvaluationResult:
    """Compute ``metric_stats`` and the PIP-364 table of a sweep and write them under ``out``
    (default ``SWEEP_DIR/evaluation``)."""
    from pyspark.sql import functions as sf

    from shedlab.spark.schemas import METRIC_STATS, PIP364_TABLE, field_names, struct
    from shedlab.spark.sweep import read_manifest

    target = (out or f"{sweep_dir.rstrip('/')}/evaluation").rstrip("/")
    notes: list[str] = []
    runs_raw = _read_runs(spark, sweep_dir)
    runs_raw.createOrReplaceTempView("shedlab_runs_raw")
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
    runs_ok = int(status_counts.get("ok", 0))
    runs_failed = int(sum(v for k, v in status_counts.items() if k != "ok"))
    if runs_ok == 0:
        raise InputError("the sweep has no successful runs to evaluate", source=sweep_dir)
    if runs_failed:
        notes.append(f"{runs_failed} run(s) failed and are left out (see runs/ status and error)")
    spark.sql(
        """
        CREATE OR REPLACE TEMP VIEW shedlab_runs_long AS
        SELECT r.run_id, r.scenario, r.strategy, r.params_id, r.params_json, r.seed,
               m.key AS metric, m.value AS value
        FROM shedlab_runs r LATERAL VIEW explode(r.metrics) m AS key, value
        WHERE r.status = 'ok' AND m.key <> 'seed'
        """
    )
    spark.table("shedlab_runs_long").localCheckpoint(eager=True).createOrReplaceTempView("shedlab_runs_long")
    digests = spark.sql(
        "SELECT scenario, count(DISTINCT scenario_digest) AS d FROM shedlab_runs "
        "WHERE status = 'ok' GROUP BY scenario"
    ).collect()
    for row in digests:
        if row["d"] > 1:
            notes.append(f"scenario {row['scenario']!r} was run with {row['d']} different specifications")

    max_n = spark.sql(
        "SELECT max(n) AS n FROM (SELECT count(*) AS n FROM shedlab_runs WHERE status = 'ok' "
        "GROUP BY scenario, strategy, params_id)"
    ).collect()[0]["n"]
    t_rows = [(df, t_critical(df, confidence)) for df in range(1, max(2, int(max_n or 1) + 1))]
    spark.createDataFrame(t_rows, struct(("df", "long"), ("t", "double"))).createOrReplaceTempView(
        "shedlab_t_stats"
    )

    stats = spark.sql(
        """
        WITH agg AS (
          SELECT scenario, strategy, params_id, first(params_json) AS params_json, metric,
                 count(value) AS n, avg(value) AS mean, stddev_samp(value) AS stddev,
                 min(value) AS min, max(value) AS max
          FROM shedlab_runs_long
          WHERE value IS NOT NULL AND NOT isnan(value)
          GROUP BY scenario, strategy, params_id, metric
        )
        SELECT a.scenario, a.strategy, a.params_id, a.params_json, a.metric, a.n, a.mean,
               CASE WHEN a.n > 1 THEN a.stddev END AS stddev,
               t.t AS t_crit,
               CASE WHEN a.n > 1 THEN t.t * a.stddev / sqrt(a.n) END AS ci_half_width,
               CASE WHEN a.n > 1 THEN a.mean - t.t * a.stddev / sqrt(a.n) END AS ci_low,
               CASE WHEN a.n > 1 THEN a.mean + t.t * a.stddev / sqrt(a.n) END AS ci_high,
               a.min, a.max
        FROM agg a LEFT JOIN shedlab_t_stats t ON t.df = a.n - 1
        ORDER BY a.scenario, a.strategy, a.params_id, a.metric
        """
    )
    stats = stats.select(*[sf.col(n).cast(METRIC_STATS[n].dataType) for n in field_names(METRIC_STATS)])
    stats_pd = stats.toPandas()

    # Wide per-run table: one column per metric (for the PIP expressions, and written for users).
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
    wide.createOrReplaceTempView("shedlab_runs_wide")
    runs_pd = wide.orderBy("scenario", "strategy", "params_id", "seed").toPandas()

    # PIP-364 table.
    manifest = read_manifest(sweep_dir)
    grid_overrides = [g.get("pip364") or {} for g in manifest.get("grids", [])]
    defs = resolve_definitions(*grid_overrides, *([definitions] if definitions else []))
    scenario_names = sorted(set(runs_pd["scenario"]))
    per_problem = []
    for problem, spec in defs.items():
        matched = _matching(list(spec.get("scenarios", [])), scenario_names)
        spec["matched_scenarios"] = matched
        if not matched:
            notes.append(f"PIP-364 '{problem}': no scenario of the sweep matches {spec.get('scenarios')}")
            continue
        try:
            values = wide.where(sf.col("scenario").isin(matched)).select(
                "strategy", "params_id", sf.expr(str(spec["expr"])).cast("double").alias("value")
            )
            values.schema  # noqa: B018 - analyse now, to report a bad expression by name
        except Exception as exc:  # an unknown metric or a syntax error: say so, keep the other problems
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            notes.append(f"PIP-364 '{problem}': cannot evaluate {spec['expr']!r}: {first[:200]}")
            continue
        per_problem.append(
            values.where(sf.col("value").isNotNull() & ~sf.isnan("value")).select(
                sf.lit(problem).alias("problem"), "strategy", "params_id", "value"
            )
        )
    if per_problem:
        union = per_problem[0]
        for other in per_problem[1:]:
            union = union.unionByName(other)
        union.createOrReplaceTempView("shedlab_pip_values")
        counts = spark.sql(
            "SELECT max(n) AS n FROM (SELECT count(*) AS n FROM shedlab_pip_values "
            "GROUP BY problem, strategy, params_id)"
        ).collect()[0]["n"]
        t_rows = [(df, t_critical(df, confidence)) for df in range(1, max(2, int(counts or 1) + 1))]
        spark.createDataFrame(t_rows, struct(("df", "long"), ("t", "double"))).createOrReplaceTempView(
            "shedlab_t_pip"
        )
        pip = spark.sql(
            """
            WITH agg AS (
              SELECT problem, strategy, params_id, count(*) AS n_runs, avg(value) AS value,
                     stddev_samp(value) AS sd
              FROM shedlab_pip_values GROUP BY problem, strategy, params_id
            )
            SELECT a.strategy, a.params_id, a.problem, a.n_runs, a.value,
                   CASE WHEN a.n_runs > 1 THEN a.value - t.t * a.sd / sqrt(a.n_runs) END AS ci_low,
                   CASE WHEN a.n_runs > 1 THEN a.value + t.t * a.sd / sqrt(a.n_runs) END AS ci_high
            FROM agg a LEFT JOIN shedlab_t_pip t ON t.df = a.n_runs - 1
            """
        ).toPandas()
    else:
        pip = pd.DataFrame(
            columns=["strategy", "params_id", "problem", "n_runs", "value", "ci_low", "ci_high"]
        )
    if len(pip):
        pip["metric"] = pip["problem"].map(lambda p: defs[p].get("metric") or defs[p]["expr"])
        pip["scenarios"] = pip["problem"].map(lambda p: ",".join(defs[p]["matched_scenarios"]))
        pip["good_below"] = pip["problem"].map(lambda p: _float_or_none(defs[p].get("good_below")))
        pip["bad_above"] = pip["problem"].map(lambda p: _float_or_none(defs[p].get("bad_above")))
        pip["rating"] = [
            rate(v, g, b) for v, g, b in zip(pip["value"], pip["good_below"], pip["bad_above"], strict=True)
        ]
        order = {p: i for i, p in enumerate([*PIP364_PROBLEMS, *sorted(set(defs) - set(PIP364_PROBLEMS))])}
        pip = (
            pip.assign(_o=pip["problem"].map(order))
            .sort_values(["strategy", "params_id", "_o"])
            .drop(columns="_o")
        )
    pip = pip.reindex(columns=field_names(PIP364_TABLE)).reset_index(drop=True)

    _write_outputs(spark, target, stats, stats_pd, pip, runs_pd, defs)
    return EvaluationResult(
        out=target,
        metric_stats=stats_pd,
        pip364=pip,
        runs=runs_pd,
        definitions=defs,
        runs_ok=runs_ok,
        runs_failed=runs_failed,
        notes=notes,
    )


def _float_or_none(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError("expected a number", source="pip364", value=value) from None


def _write_outputs(
    spark: Any,
    target: str,
    stats: Any,
    stats_pd: pd.DataFrame,
    pip: pd.DataFrame,
    runs_pd: pd.DataFrame,
    defs: Mapping[str, Any],
) -> None:
    from shedlab.spark.schemas import PIP364_TABLE, conform
    from shedlab.spark.sweep import _filesystem

    stats.coalesce(1).write.mode("overwrite").parquet(f"{target}/metric_stats")
    spark.createDataFrame(conform(pip, PIP364_TABLE), PIP364_TABLE).coalesce(1).write.mode(
        "overwrite"
    ).parquet(f"{target}/pip364")
    fs, base = _filesystem(target)
    fs.create_dir(base, recursive=True)

    def put(name: str, data: bytes) -> None:
        with fs.open_output_stream(f"{base}/{name}") as sink:
            sink.write(data)

    put("metric_stats.csv", stats_pd.to_csv(index=False).encode("utf-8"))
    put("pip364.csv", pip.to_csv(index=False).encode("utf-8"))
    put("runs.csv", runs_pd.to_csv(index=False).encode("utf-8"))
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    with fs.open_output_stream(f"{base}/runs.parquet") as sink:
        pq.write_table(pa.Table.from_pandas(runs_pd, preserve_index=False), sink)
    put("pip364_definitions.json", (json.dumps(defs, indent=2, default=str) + "\n").encode("utf-8"))
