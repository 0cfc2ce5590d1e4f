"""Replay recorded load data under strategies on Spark (``shedlab replay SNAPSHOTS --out OUT``).

The replay itself (the leader's view at every tick, one shedding cycle per tick, the estimated load
after the moves) is :func:`shedlab.core.replay.replay_cluster`. This module runs it for every
cluster × strategy configuration as a Spark ``cogroup(...).applyInPandas`` group over the broker and
bundle samples (and BundleData dumps) of an ingest output, and writes the ``decisions``, ``load``,
``comparison`` and ``ownership_changes`` tables as Parquet partitioned by cluster (and strategy),
with ``replay.json`` recording what was run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from shedlab import jsonout
from shedlab.core.ingest import check_clusters
from shedlab.core.replay import StrategyConfig, ownership_changes, replay_cluster, total_reasons
from shedlab.core.results import filesystem, remove_stale_temporaries
from shedlab.errors import ConfigError, InputError, ShedlabError, one_line
from shedlab.spark.ingest import read_snapshots
from shedlab.spark.schemas import (
    BUNDLE_DATA,
    BUNDLE_SAMPLE,
    OWNERSHIP_CHANGE,
    REPLAY_COMPARISON,
    REPLAY_DECISION,
    REPLAY_LOAD,
    conform,
    field_names,
    struct,
)
from shedlab.spark.session import ship_strategy_modules

__all__ = ["ReplayResult", "replay"]


@dataclass
class ReplayResult:
    """What a replay wrote (``out``), per cluster × configuration summary, and the configurations."""

    out: str
    summary: pd.DataFrame  # per cluster × strategy: ticks, decisions, actual moves, agreement, usage
    configs: list[StrategyConfig]
    failures: list[dict[str, str]] = field(default_factory=list)  # cluster, strategy, config_id, error


def _replay_out_schema() -> Any:
    fields: dict[str, Any] = {}
    for schema in (REPLAY_DECISION, REPLAY_LOAD, REPLAY_COMPARISON):
        for f in schema.fields:
            fields.setdefault(f.name, StructField(f.name, f.dataType, True))
    return StructType([StructField("table", StringType(), False), *fields.values()])


def replay(
    spark: Any,
    snapshots_dir: str,
    out: str,
    configs: Sequence[StrategyConfig],
    *,
    seed: int = 1,
    clusters: Sequence[str] | None = None,
    progress: Any = None,
) -> ReplayResult:
    """Replay every cluster of an ingest output under every configuration; write the tables under ``out``."""
    say = progress or (lambda _m: None)
    if not configs:
        raise ConfigError("name at least one strategy pair", field="--strategies")
    remove_stale_temporaries(out, time.time())  # a killed replay's staging directories
    ship_strategy_modules(spark, [c.strategy for c in configs])
    brokers, bundles, dumps = _read_inputs(spark, snapshots_dir, clusters)
    found = [r["cluster"] for r in brokers.select("cluster").distinct().collect()]
    if not found:
        raise InputError("no broker samples to replay", source=snapshots_dir)
    say(f"replaying {len(found)} cluster(s) × {len(configs)} strategy configuration(s)")
    result = _replay_groups(spark, brokers, _bundle_side(bundles, dumps), configs, seed)
    failures = [
        {k: str(r[k]) for k in ("cluster", "strategy", "config_id", "reason")}
        for r in result.where(sf.col("table") == _ERROR).orderBy(*_GROUP_KEYS).collect()
    ]
    if len(failures) == len(found) * len(configs):
        first = failures[0]
        raise InputError(
            f"every replay failed; {first['cluster']} / {first['strategy']}: {first['reason']}",
            source=snapshots_dir,
        )
    root = out.rstrip("/")
    _write_tables(result, bundles, root, say)
    summary_pd = _summary(result)
    _write_config(root, configs, seed, snapshots_dir)
    return ReplayResult(out=out, summary=summary_pd, configs=list(configs), failures=failures)


_GROUP_KEYS = ["cluster", "strategy", "config_id"]
"""One replay per cluster × strategy configuration."""


def _read_inputs(spark: Any, snapshots_dir: str, clusters: Sequence[str] | None) -> tuple[Any, Any, Any]:
    """The ingest output's broker samples, bundle samples and BundleData dumps (None if it has none),
    limited to ``clusters`` when given."""
    brokers, bundles, dumps = read_snapshots(spark, snapshots_dir)
    if clusters:
        present = sorted(r["cluster"] for r in brokers.select("cluster").distinct().collect())
        check_clusters(clusters, present, source=snapshots_dir)
        brokers = brokers.where(sf.col("cluster").isin(list(clusters)))
        bundles = bundles.where(sf.col("cluster").isin(list(clusters)))
        dumps = dumps.where(sf.col("cluster").isin(list(clusters))) if dumps is not None else None
    return brokers, bundles, dumps


def _bundle_side(bundles: Any, dumps: Any) -> Any:
    """Bundle samples and BundleData dumps as one frame with a ``row_kind`` (cogroup takes two sides)."""
    sample_cols = field_names(BUNDLE_SAMPLE)
    dump_cols = [c for c in field_names(BUNDLE_DATA) if c not in sample_cols]
    right = bundles.select(
        *sample_cols,
        *[sf.lit(None).cast(BUNDLE_DATA[c].dataType).alias(c) for c in dump_cols],
        sf.lit("sample").alias("row_kind"),
    )
    if dumps is None:
        return right
    return right.unionByName(
        dumps.select(
            *[
                (sf.col(c) if c in BUNDLE_DATA.fieldNames() else sf.lit(None))
                .cast(BUNDLE_SAMPLE[c].dataType)
                .alias(c)
                for c in sample_cols
            ],
            *dump_cols,
            sf.lit("dump").alias("row_kind"),
        )
    )


_ERROR = "error"
"""The ``table`` of a group whose replay raised: one row, the error in ``reason``."""


def _replay_groups(spark: Any, brokers: Any, right: Any, configs: Sequence[StrategyConfig], seed: int) -> Any:
    """Every cluster × configuration replayed in a pandas task; the tables stacked with a ``table``
    column, checkpointed (each is written and summarised from it)."""
    by_id = {(c.strategy, c.config_id): c for c in configs}

    def config_frame() -> Any:  # one per side: a shared frame would make the cogroup keys ambiguous
        return spark.createDataFrame(
            [(c.strategy, c.config_id) for c in configs],
            struct(("strategy", "string"), ("config_id", "string")),
        )

    out_schema = _replay_out_schema()
    out_names = field_names(out_schema)

    def run_group(key: tuple[Any, ...], b: pd.DataFrame, u: pd.DataFrame) -> pd.DataFrame:
        cluster, strategy, config_id = (str(k) for k in key)
        config = by_id[(strategy, config_id)]
        samples = u[u["row_kind"] == "sample"]
        dump_rows = u[u["row_kind"] == "dump"]
        try:
            tables = replay_cluster(
                cluster, config, b, samples, dump_rows if len(dump_rows) else None, seed=seed
            )
        except Exception as exc:  # a strategy (a user's plugin) that raises: this group fails, not the job
            error = {"cluster": cluster, "strategy": strategy, "config_id": config_id}
            # a plugin's failure is a StrategyError that names the plugin and the method (strategies/guard.py)
            error["reason"] = (
                str(exc) if isinstance(exc, ShedlabError) else one_line(f"{type(exc).__name__}: {exc}")
            )
            return conform(pd.DataFrame([{**error, "table": _ERROR}]), out_schema)
        frames = [frame.assign(table=name) for name, frame in tables.items() if len(frame)]
        if not frames:
            return conform(pd.DataFrame(columns=out_names), out_schema)
        return conform(pd.concat(frames, ignore_index=True), out_schema)

    left = brokers.crossJoin(sf.broadcast(config_frame()))
    right = right.crossJoin(sf.broadcast(config_frame()))
    return (
        left.groupBy(*_GROUP_KEYS)
        .cogroup(right.groupBy(*_GROUP_KEYS))
        .applyInPandas(run_group, out_schema)
        .localCheckpoint(eager=True)
    )


def _write_tables(result: Any, bundles: Any, root: str, say: Any) -> None:
    """decisions, load and comparison from the replay; ownership_changes from the recorded samples."""
    for name, schema in (
        ("decisions", REPLAY_DECISION),
        ("load", REPLAY_LOAD),
        ("comparison", REPLAY_COMPARISON),
    ):
        say(f"writing {name}")
        part = result.where(sf.col("table") == name).select(
            *[sf.col(c).cast(schema[c].dataType) for c in field_names(schema)]
        )
        _write_partitioned(
            part.repartition("cluster", "strategy").sortWithinPartitions("tick_ms"),
            f"{root}/{name}",
            ("cluster", "strategy"),
        )

    say("writing ownership_changes")

    def changes(key: tuple[Any, ...], u: pd.DataFrame) -> pd.DataFrame:
        return conform(ownership_changes(u, cluster=str(key[0])), OWNERSHIP_CHANGE)

    _write_partitioned(
        bundles.select("cluster", "tick_ms", "bundle", "broker")
        .groupBy("cluster")
        .applyInPandas(changes, OWNERSHIP_CHANGE)
        .repartition("cluster"),
        f"{root}/ownership_changes",
        ("cluster",),
    )


def _summary(result: Any) -> pd.DataFrame:
    """One row per cluster × configuration: ticks, unloads, recorded moves, usage figures, and the
    reasons for leaving brokers alone summed over ticks."""
    comparison = result.where(sf.col("table") == "comparison")
    summary_pd: pd.DataFrame = (
        comparison.groupBy(*_GROUP_KEYS)
        .agg(
            sf.count("*").alias("ticks"),
            sf.sum("strategy_unloads").alias("strategy_unloads"),
            sf.sum("actual_moves").alias("actual_moves"),
            sf.sum("both").alias("both"),
            sf.avg("max_usage").alias("mean_max_usage"),
            sf.avg("est_max_usage").alias("est_mean_max_usage"),
            sf.avg("usage_spread").alias("mean_usage_spread"),
            sf.avg("est_usage_spread").alias("est_mean_usage_spread"),
        )
        .orderBy(*_GROUP_KEYS)
        .toPandas()
    )
    per_tick = comparison.select(*_GROUP_KEYS, "reasons").toPandas()
    totals = {
        k: json.dumps(total_reasons(g["reasons"])) for k, g in per_tick.groupby(_GROUP_KEYS, sort=False)
    }
    summary_pd["reasons"] = [
        totals.get(tuple(r), "{}") for r in summary_pd[_GROUP_KEYS].itertuples(index=False)
    ]
    return summary_pd


def _write_partitioned(df: Any, path: str, keys: tuple[str, ...]) -> None:
    """Write ``df`` partitioned by ``keys``; an empty table (a replay in which nothing moved) is written
    as one empty file with the table's columns: Spark writes no file at all for it, and readers would
    find a table without columns."""
    df.write.mode("overwrite").partitionBy(*keys).parquet(path)
    fs, base = filesystem(path)
    if any(
        info.base_name.endswith(".parquet")
        for info in fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    ):
        return
    schema = to_arrow_schema(StructType([f for f in df.schema.fields if f.name not in keys]))
    fs.create_dir(base, recursive=True)
    with fs.open_output_stream(f"{base}/part-00000-empty.parquet") as sink:
        pq.write_table(schema.empty_table(), sink)


def _write_config(root: str, configs: Sequence[StrategyConfig], seed: int, source: str) -> None:
    fs, base = filesystem(root)
    fs.create_dir(base, recursive=True)
    doc = {
        "snapshots": source,
        "seed": seed,
        "configs": [
            {"strategy": c.strategy, "config_id": c.config_id, "overrides": dict(c.overrides)}
            for c in configs
        ],
    }
    with fs.open_output_stream(f"{base}/replay.json") as sink:
        sink.write((jsonout.dumps(doc, indent=2, default=str) + "\n").encode("utf-8"))
