"""Parameter sweeps on Spark (``shedlab sweep GRID.yaml --out DIR``).

A grid (YAML, format in ``docs/spark.md``) names scenarios, strategy pairs, Pulsar parameter
values and seeds; its cross product is a DataFrame of run specifications. Each run is executed by
:func:`shedlab.core.sim.run_simulation` inside a ``mapInPandas`` task (one run per partition while
there are fewer than a few thousand, longest runs first) and writes its outputs straight to
Parquet under ``DIR``::

    runs/scenario=S/strategy=P/run-<id>.parquet        one summary row per run (status ok/error)
    ticks/scenario=S/strategy=P/run-<id>.parquet       per-tick cluster metrics
    decisions/scenario=S/strategy=P/run-<id>.parquet   one row per unload, reason as JSON
    brokers/scenario=S/strategy=P/run-<id>.parquet     per tick × broker (every ``brokers_every``-th tick)
    events/scenario=S/strategy=P/run-<id>.parquet      scenario events with time to balance
    sweep.json                                         the grid(s) this directory was swept with

The run id is a stable hash of (scenario, strategy pair, parameters, seed). A run's files are
written under names derived from its id (temporary name, then rename), its summary last, so a
re-run after an interruption skips every run that has a summary and overwrites the partial files
of the others: nothing is lost and nothing is duplicated. A run that raises records the error in
its summary row and the sweep goes on.
"""

from __future__ import annotations

import fnmatch
import hashlib
import itertools
import json
import math
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from shedlab.errors import ConfigError, InputError, did_you_mean

__all__ = [
    "Grid",
    "SweepResult",
    "completed_runs",
    "expand_grid",
    "load_grid",
    "parse_grid",
    "run_id_of",
    "sweep",
]

_GRID_FIELDS = (
    "name",
    "description",
    "scenarios",
    "strategies",
    "seeds",
    "parameters",
    "strategy_parameters",
    "overrides",
    "brokers_every",
    "pip364",
)
OUTPUT_TABLES = ("runs", "ticks", "decisions", "brokers", "events")


# ---------------------------------------------------------------------------------------------
# Grids
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScenarioRef:
    """A scenario of a grid: its name, YAML text (shipped to the executors) and digest."""

    name: str
    text: str
    source: str
    digest: str
    cost: float


@dataclass(frozen=True)
class Grid:
    """A validated grid: the cross product of its lists is the sweep."""

    name: str
    description: str
    scenarios: tuple[ScenarioRef, ...]
    strategies: tuple[str, ...]
    seeds: tuple[int, ...]
    parameters: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    strategy_parameters: tuple[tuple[str, tuple[tuple[str, tuple[Any, ...]], ...]], ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()
    brokers_every: int = 1
    pip364: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    text: str = ""

    def parameter_sets(self, strategy: str) -> list[dict[str, Any]]:
        """The parameter sets a strategy pair runs with (fixed overrides included)."""
        axes = list(self.parameters) + list(dict(self.strategy_parameters).get(strategy, ()))
        keys = [k for k, _ in axes]
        combos = itertools.product(*[values for _, values in axes]) if axes else [()]
        out = []
        for combo in combos:
            params = dict(self.overrides)
            params.update(dict(zip(keys, combo, strict=True)))
            out.append(params)
        return out

    @property
    def size(self) -> int:
        return (
            sum(len(self.parameter_sets(s)) for s in self.strategies) * len(self.scenarios) * len(self.seeds)
        )


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def params_id_of(params: Mapping[str, Any]) -> str:
    """A short stable id of a parameter set (``"default"`` for none)."""
    if not params:
        return "default"
    return hashlib.sha256(_canonical_json(dict(params)).encode()).hexdigest()[:10]


def run_id_of(scenario: str, strategy: str, params: Mapping[str, Any], seed: int) -> str:
    """The stable id of one run: a hash of (scenario, strategy pair, parameters, seed)."""
    key = _canonical_json(
        {"scenario": scenario, "strategy": strategy, "params": dict(params), "seed": int(seed)}
    )
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def _scenario_ref(item: Any, base: Path | None, source: str) -> ScenarioRef:
    import importlib.resources

    from shedlab.core.sim.scenario import builtin_scenarios, parse_scenario_text

    if not isinstance(item, str) or not item:
        raise ConfigError("expected a scenario name or file", source=source, field="scenarios", value=item)
    path = Path(item)
    if base is not None and not path.is_absolute():
        path = base / path
    if item.endswith((".yaml", ".yml")) or "/" in item:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            raise InputError(
                "scenario file not found", source=source, field="scenarios", value=item
            ) from None
        origin = str(path)
    else:
        names = builtin_scenarios()
        if item not in names:
            raise ConfigError(
                "no such built-in scenario",
                source=source,
                field="scenarios",
                value=item,
                hint=did_you_mean(item, names) or f"built-in scenarios: {', '.join(names)}",
            )
        resource = importlib.resources.files("shedlab").joinpath("data", "scenarios", f"{item}.yaml")
        text = resource.read_text(encoding="utf-8")
        origin = f"builtin:{item}"
    scenario = parse_scenario_text(text, origin)
    # Rough cost in µs of simulation: a per-tick constant plus bundles and brokers (calibrated on the
    # built-in scenarios; only used to order runs and pack short ones into one task).
    cost = float(scenario.num_ticks) * float(
        200 + max(1, scenario.num_bundles) + 10 * scenario.initial_brokers
    )
    return ScenarioRef(
        name=scenario.name,
        text=text,
        source=origin,
        digest=hashlib.sha256(text.encode()).hexdigest()[:16],
        cost=cost,
    )


def _value_list(value: Any, source: str, field_name: str) -> tuple[Any, ...]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ConfigError("expected at least one value", source=source, field=field_name)
    return tuple(values)


def _check_params(
    axes: Mapping[str, Any], source: str, field_name: str
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    from shedlab.config import LoadBalancerConfig

    if not isinstance(axes, Mapping):
        raise ConfigError("expected a mapping of Pulsar keys to value lists", source=source, field=field_name)
    out = []
    base = LoadBalancerConfig()
    for key, raw in axes.items():
        values = _value_list(raw, source, f"{field_name}.{key}")
        for v in values:
            base.with_overrides({str(key): v}, source=f"{source}: {field_name}.{key}")
        out.append((str(key), values))
    return tuple(out)


def parse_grid(data: Any, *, source: str = "grid", base: Path | None = None, text: str = "") -> Grid:
    """Validate a grid mapping (see ``docs/spark.md``); errors name the field."""
    from shedlab.config import LoadBalancerConfig
    from shedlab.core.sim.scenario import builtin_scenarios
    from shedlab.strategies import STRATEGY_PAIRS, resolve_pair_name

    if not isinstance(data, Mapping):
        raise ConfigError("a grid is a YAML mapping", source=source)
    for key in data:
        if key not in _GRID_FIELDS:
            raise ConfigError(
                "unknown grid field",
                source=source,
                field=str(key),
                hint=did_you_mean(str(key), _GRID_FIELDS) or f"known fields: {', '.join(_GRID_FIELDS)}",
            )
    name = str(data.get("name") or (Path(source).stem if source else "grid"))
    raw_scenarios = data.get("scenarios", "all")
    if raw_scenarios == "all" or raw_scenarios == ["all"]:
        items: list[Any] = list(builtin_scenarios())
    elif isinstance(raw_scenarios, str):
        items = [raw_scenarios]
    elif isinstance(raw_scenarios, list):
        items = []
        for item in raw_scenarios:
            if isinstance(item, str) and any(c in item for c in "*?[") and "/" not in item:
                matched = [n for n in builtin_scenarios() if fnmatch.fnmatch(n, item)]
                if not matched:
                    raise ConfigError(
                        "pattern matches no built-in scenario", source=source, field="scenarios", value=item
                    )
                items.extend(matched)
            else:
                items.append(item)
    else:
        raise ConfigError("expected a list of scenarios or 'all'", source=source, field="scenarios")
    scenarios = tuple(_scenario_ref(item, base, source) for item in items)
    names = [s.name for s in scenarios]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(
            "two scenarios of the grid have the same name", source=source, field="scenarios", value=dupes
        )
    raw_strategies = data.get("strategies", "all")
    if raw_strategies == "all" or raw_strategies == ["all"]:
        strategies = tuple(STRATEGY_PAIRS)
    else:
        values = raw_strategies if isinstance(raw_strategies, list) else [raw_strategies]
        strategies = tuple(resolve_pair_name(str(v)) for v in values)
    if not strategies:
        raise ConfigError("expected at least one strategy pair", source=source, field="strategies")
    raw_seeds = data.get("seeds", [1])
    if isinstance(raw_seeds, Mapping):
        try:
            count = int(raw_seeds.get("count", 1))
            start = int(raw_seeds.get("start", 1))
        except (TypeError, ValueError):
            raise ConfigError(
                "seeds: count and start must be integers", source=source, field="seeds"
            ) from None
        seeds: tuple[int, ...] = tuple(range(start, start + count))
    else:
        seed_values = raw_seeds if isinstance(raw_seeds, list) else [raw_seeds]
        try:
            seeds = tuple(int(s) for s in seed_values)
        except (TypeError, ValueError):
            raise ConfigError(
                "seeds must be integers", source=source, field="seeds", value=raw_seeds
            ) from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError("expected distinct seeds", source=source, field="seeds", value=raw_seeds)
    parameters = _check_params(data.get("parameters") or {}, source, "parameters")
    per_pair = []
    raw_pp = data.get("strategy_parameters") or {}
    if not isinstance(raw_pp, Mapping):
        raise ConfigError(
            "expected a mapping of strategy pair → parameters", source=source, field="strategy_parameters"
        )
    for pair, axes in raw_pp.items():
        resolved = resolve_pair_name(str(pair))
        per_pair.append((resolved, _check_params(axes, source, f"strategy_parameters.{pair}")))
    overrides_raw = data.get("overrides") or {}
    if not isinstance(overrides_raw, Mapping):
        raise ConfigError("expected a mapping of Pulsar keys to values", source=source, field="overrides")
    LoadBalancerConfig().with_overrides(dict(overrides_raw), source=f"{source}: overrides")
    every = data.get("brokers_every", 1)
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ConfigError(
            "expected a non-negative integer (0 = no broker rows)", source=source, field="brokers_every"
        )
    pip = data.get("pip364") or {}
    if not isinstance(pip, Mapping):
        raise ConfigError("expected a mapping of problem → definition", source=source, field="pip364")
    return Grid(
        name=name,
        description=str(data.get("description") or ""),
        scenarios=scenarios,
        strategies=strategies,
        seeds=seeds,
        parameters=parameters,
        strategy_parameters=tuple(per_pair),
        overrides=tuple((str(k), v) for k, v in overrides_raw.items()),
        brokers_every=every,
        pip364=dict(pip),
        source=source,
        text=text,
    )


def load_grid(path: str | Path) -> Grid:
    """Read and validate a grid file (a path, or the name of a shipped grid such as ``pip364``)."""
    import importlib.resources

    import yaml

    p = Path(path)
    if not p.exists() and "/" not in str(path) and not str(path).endswith((".yaml", ".yml")):
        shipped = importlib.resources.files("shedlab").joinpath("data", "grids", f"{path}.yaml")
        if shipped.is_file():
            text = shipped.read_text(encoding="utf-8")
            return parse_grid(yaml.safe_load(text), source=f"builtin:{path}", text=text)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("grid file not found", source=str(path)) from None
    except OSError as exc:
        raise InputError(f"cannot read grid file: {exc.strerror}", source=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML: {exc}", source=str(path)) from None
    return parse_grid(data, source=str(path), base=p.resolve().parent, text=text)


def expand_grid(grid: Grid) -> pd.DataFrame:
    """The run specifications (schema RUN_SPEC), longest runs first."""
    rows = []
    for sc in grid.scenarios:
        for strategy in grid.strategies:
            for params in grid.parameter_sets(strategy):
                pj = _canonical_json(params)
                pid = params_id_of(params)
                for seed in grid.seeds:
                    rows.append(
                        {
                            "run_id": run_id_of(sc.name, strategy, params, seed),
                            "grid": grid.name,
                            "scenario": sc.name,
                            "scenario_spec": sc.text,
                            "scenario_digest": sc.digest,
                            "strategy": strategy,
                            "params_json": pj,
                            "params_id": pid,
                            "seed": int(seed),
                            "cost": sc.cost,
                            "brokers_every": int(grid.brokers_every),
                        }
                    )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.drop_duplicates("run_id")
    return frame.sort_values(["cost", "run_id"], ascending=[False, True], kind="stable").reset_index(
        drop=True
    )


# ---------------------------------------------------------------------------------------------
# Executor side: run one spec, write its files
# ---------------------------------------------------------------------------------------------

_SPARK_ESCAPE = set("\"#%'*/:=?\\{[]^") | {chr(c) for c in range(0x01, 0x20)} | {"\x7f"}


def escape_partition_value(value: str) -> str:
    """Escape a partition directory value exactly as Spark does (and unescapes on read)."""
    return "".join(f"%{ord(c):02X}" if c in _SPARK_ESCAPE else c for c in value)


def _filesystem(root: str) -> tuple[Any, str]:
    """A pyarrow filesystem and base path for a local path or URI (``s3a://`` is read as ``s3://``)."""
    import pyarrow.fs as pafs  # type: ignore[import-untyped]

    if "://" not in root or root.startswith("file://"):
        local = root[len("file://") :] if root.startswith("file://") else root
        return pafs.LocalFileSystem(), os.path.abspath(local)
    uri = "s3://" + root[len("s3a://") :] if root.startswith("s3a://") else root
    fs, path = pafs.FileSystem.from_uri(uri)
    return fs, path


class RunWriter:
    """Writes one run's tables under ``root`` (temporary name, then rename)."""

    def __init__(self, root: str) -> None:
        self.fs, self.base = _filesystem(root)

    def path(self, table: str, scenario: str, strategy: str, run_id: str) -> str:
        return (
            f"{self.base}/{table}/scenario={escape_partition_value(scenario)}"
            f"/strategy={escape_partition_value(strategy)}/run-{run_id}.parquet"
        )

    def write(self, table: str, frame: pd.DataFrame, scenario: str, strategy: str, run_id: str) -> None:
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        final = self.path(table, scenario, strategy, run_id)
        if frame is None or frame.empty:
            if self._exists(final):  # a re-run with no rows must not keep an older run's rows
                self.fs.delete_file(final)
            return
        arrow = _to_arrow(frame, table)
        directory = final.rsplit("/", 1)[0]
        self.fs.create_dir(directory, recursive=True)
        tmp = f"{directory}/.run-{run_id}.{os.getpid()}.tmp"
        with self.fs.open_output_stream(tmp) as sink:
            pq.write_table(arrow, sink, compression="zstd")
        self.fs.move(tmp, final)

    def _exists(self, path: str) -> bool:
        import pyarrow.fs as pafs  # type: ignore[import-untyped]

        info = self.fs.get_file_info(path)
        return bool(info.type != pafs.FileType.NotFound)


def _to_arrow(frame: pd.DataFrame, table: str) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    if table == "runs":
        from pyspark.sql.pandas.types import to_arrow_schema

        from shedlab.spark.schemas import RUN_SUMMARY

        schema = to_arrow_schema(RUN_SUMMARY)
        schema = pa.schema([f for f in schema if f.name not in ("scenario", "strategy")])
        columns = {}
        for f in schema:
            values = frame[f.name].tolist()
            if f.name == "metrics":
                values = [list(v.items()) if isinstance(v, Mapping) else None for v in values]
            columns[f.name] = pa.array(values, type=f.type, from_pandas=True)
        return pa.table(columns, schema=schema)
    out = frame.drop(columns=[c for c in ("scenario", "strategy") if c in frame.columns])
    fields = []
    arrays = []
    for name in out.columns:
        col = out[name]
        if pd.api.types.is_bool_dtype(col):
            arr = pa.array(col.to_numpy(), type=pa.bool_())
        elif pd.api.types.is_integer_dtype(col):
            arr = pa.array(col.to_numpy(dtype="int64"), type=pa.int64())
        elif pd.api.types.is_float_dtype(col):
            arr = pa.array(col.to_numpy(dtype="float64"), type=pa.float64())
        else:
            arr = pa.array(
                [None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in col],
                type=pa.string(),
            )
        fields.append(pa.field(str(name), arr.type))
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


_SCENARIO_CACHE: dict[str, Any] = {}


def _scenario_from_spec(text: str, name: str) -> Any:
    """Parse a shipped scenario once per worker process (keyed by its text, which workers reuse)."""
    from shedlab.core.sim.scenario import parse_scenario_text

    key = hashlib.sha256(text.encode()).hexdigest()
    scenario = _SCENARIO_CACHE.get(key)
    if scenario is None:
        scenario = parse_scenario_text(text, f"grid scenario {name}")
        _SCENARIO_CACHE[key] = scenario
    return scenario


class _Timeout(Exception):  # noqa: N818 - internal signal, never escapes
    pass


def _numeric_metrics(summary: Mapping[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for k, v in summary.items():
        if isinstance(v, bool):
            out[k] = float(v)
        elif isinstance(v, int | float):
            f = float(v)
            out[k] = f if math.isfinite(f) else None
        elif v is None:
            out[k] = None
    return out


def execute_spec(
    spec: Mapping[str, Any], writer: RunWriter, *, timeout_s: float | None = None
) -> dict[str, Any]:
    """Run one spec, write its tables, return its summary row (never raises for a failing run)."""
    import shedlab
    from shedlab.core.sim import run_simulation

    run_id = str(spec["run_id"])
    scenario_name = str(spec["scenario"])
    strategy = str(spec["strategy"])
    params = json.loads(str(spec["params_json"]))
    row: dict[str, Any] = {
        "run_id": run_id,
        "grid": spec.get("grid"),
        "scenario": scenario_name,
        "strategy": strategy,
        "params_json": spec["params_json"],
        "params_id": spec["params_id"],
        "seed": int(spec["seed"]),
        "status": "ok",
        "error": None,
        "error_type": None,
        "traceback": None,
        "host": socket.gethostname(),
        "shedlab_version": getattr(shedlab, "__version__", None),
        "scenario_digest": spec.get("scenario_digest"),
        "n_ticks": None,
        "n_decisions": None,
        "metrics": None,
        "summary_json": None,
    }
    started = time.time()
    row["started_ms"] = int(started * 1000)
    old_handler = None
    use_alarm = timeout_s is not None and timeout_s > 0 and hasattr(__import__("signal"), "SIGALRM")
    try:
        if use_alarm:
            import signal

            def on_alarm(_signum: int, _frame: Any) -> None:
                raise _Timeout(f"run exceeded its time limit of {timeout_s:g} s")

            old_handler = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, float(timeout_s or 0))
        try:
            scenario = _scenario_from_spec(str(spec["scenario_spec"]), scenario_name)
            result = run_simulation(
                scenario, strategy=strategy, config_overrides=params or None, seed=int(spec["seed"])
            )
        finally:
            if use_alarm:
                import signal

                signal.setitimer(signal.ITIMER_REAL, 0)
                if old_handler is not None:
                    signal.signal(signal.SIGALRM, old_handler)
        every = int(spec.get("brokers_every") or 0)
        tables: dict[str, pd.DataFrame] = {
            "ticks": result.ticks,
            "decisions": result.decisions,
            "events": result.events,
        }
        if every > 0:
            brokers = result.brokers
            if every > 1 and "tick" in brokers:
                brokers = brokers[brokers["tick"] % every == 0]
            tables["brokers"] = brokers
        for table, frame in tables.items():
            writer.write(
                table,
                frame.assign(run_id=run_id)[["run_id", *frame.columns]],
                scenario_name,
                strategy,
                run_id,
            )
        summary = dict(result.summary)
        row["metrics"] = _numeric_metrics(summary)
        row["summary_json"] = json.dumps({**summary, "config": result.config}, default=str, allow_nan=False)
        row["n_ticks"] = len(result.ticks)
        row["n_decisions"] = len(result.decisions)
    except Exception as exc:  # a failing run is recorded, not fatal
        row["status"] = "error"
        row["error"] = f"{exc}" or type(exc).__name__
        row["error_type"] = type(exc).__name__
        row["traceback"] = traceback.format_exc(limit=20)[-8000:]
    finished = time.time()
    row["finished_ms"] = int(finished * 1000)
    row["elapsed_s"] = finished - started
    writer.write("runs", pd.DataFrame([row]), scenario_name, strategy, run_id)
    return row


def run_tasks(
    out: str, timeout_s: float | None, plan: Any
) -> Callable[[Iterator[pd.DataFrame]], Iterator[pd.DataFrame]]:
    """The ``mapInPandas`` function over ``spark.range(tasks)``: each row is a task id; run the specs
    planned for it (``plan`` is a broadcast of ``{"tasks": {id: [spec]}, "scenarios": {digest: text}}``)
    and yield their summary rows."""

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        from shedlab.spark.schemas import RUN_SUMMARY, conform

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
    """What a sweep did: how many runs the grid has, skipped (already complete), ran, failed."""

    out: str
    grid: Grid
    total: int
    skipped: int
    ran: int
    failed: int
    elapsed_s: float
    summaries: pd.DataFrame  # the runs executed now (RUN_SUMMARY columns)

    @property
    def complete(self) -> int:
        return self.skipped + self.ran


def completed_runs(spark: Any, out: str) -> pd.DataFrame:
    """``run_id``/``status`` of every run that has a summary under ``out/runs`` (empty if none)."""
    from shedlab.spark.schemas import RUN_SUMMARY

    fs, base = _filesystem(out)
    import pyarrow.fs as pafs  # type: ignore[import-untyped]

    if fs.get_file_info(f"{base}/runs").type == pafs.FileType.NotFound:
        return pd.DataFrame({"run_id": pd.Series(dtype=object), "status": pd.Series(dtype=object)})
    df = spark.read.schema(RUN_SUMMARY).parquet(f"{out.rstrip('/')}/runs").select("run_id", "status")
    result: pd.DataFrame = df.toPandas()
    return result


def _write_manifest(out: str, grid: Grid) -> None:
    fs, base = _filesystem(out)
    fs.create_dir(base, recursive=True)
    path = f"{base}/sweep.json"
    manifest: dict[str, Any] = {"grids": []}
    try:
        with fs.open_input_stream(path) as src:
            manifest = json.loads(src.read().decode("utf-8"))
    except (FileNotFoundError, OSError, ValueError):
        pass
    entry = {
        "name": grid.name,
        "source": grid.source,
        "text": grid.text,
        "pip364": grid.pip364,
        "scenarios": {
            s.name: {"source": s.source, "digest": s.digest, "text": s.text} for s in grid.scenarios
        },
        "strategies": list(grid.strategies),
        "seeds": list(grid.seeds),
        "updated_ms": int(time.time() * 1000),
    }
    grids = [g for g in manifest.get("grids", []) if g.get("name") != grid.name]
    grids.append(entry)
    manifest["grids"] = grids
    tmp = f"{path}.{os.getpid()}.tmp"
    with fs.open_output_stream(tmp) as sink:
        sink.write((json.dumps(manifest, indent=2, default=str) + "\n").encode("utf-8"))
    fs.move(tmp, path)


def read_manifest(out: str) -> dict[str, Any]:
    """The ``sweep.json`` of a sweep directory ({} if absent)."""
    fs, base = _filesystem(out)
    try:
        with fs.open_input_stream(f"{base}/sweep.json") as src:
            data = json.loads(src.read().decode("utf-8"))
    except (FileNotFoundError, OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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
    ``--retry-failed`` a pending run may already have an old summary; only files written since the
    sweep started count then.
    """

    def __init__(self, out: str, pending_ids: set[str], since: float | None) -> None:
        import pyarrow.fs as pafs  # type: ignore[import-untyped]

        self.fs, base = _filesystem(out)
        self.selector = pafs.FileSelector(f"{base}/runs", recursive=True, allow_not_found=True)
        self.pending = pending_ids
        self.since = since
        self.base_interval = 0.5 if isinstance(self.fs, pafs.LocalFileSystem) else 5.0
        self.interval = self.base_interval

    def finished(self) -> int:
        """Finished runs; also stretches the polling interval so that listing a large output
        directory takes at most a tenth of the driver's time (it shares the cores with local tasks)."""
        started = time.monotonic()
        done = 0
        for info in self.fs.get_file_info(self.selector):
            name = info.base_name
            if not (name.startswith("run-") and name.endswith(".parquet")):
                continue
            if name[4:-8] not in self.pending:
                continue
            if self.since is not None and (info.mtime is None or info.mtime.timestamp() < self.since):
                continue
            done += 1
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


def sweep(
    spark: Any,
    grid: Grid,
    out: str,
    *,
    progress: ProgressFn | None = None,
    retry_failed: bool = False,
    max_tasks: int = 4000,
    timeout_s: float | None = None,
    limit: int | None = None,
) -> SweepResult:
    """Run every run of ``grid`` that ``out`` does not hold yet; return what happened.

    ``limit`` runs only the first N pending runs (useful to test, or to split a sweep in parts);
    ``retry_failed`` runs again the runs whose summary says ``error``.
    """
    from shedlab.spark.schemas import RUN_SPEC, RUN_SUMMARY, conform, field_names

    started = time.time()
    specs = expand_grid(grid)
    total = len(specs)
    done = completed_runs(spark, out)
    skip_status = {"ok"} if retry_failed else {"ok", "error"}
    finished_ids = set(done.loc[done["status"].isin(skip_status), "run_id"])
    pending = specs[~specs["run_id"].isin(finished_ids)]
    skipped = total - len(pending)
    if limit is not None:
        pending = pending.head(max(0, limit))
    _write_manifest(out, grid)
    if pending.empty:
        if progress:
            progress(0, 0, 0)
        return SweepResult(
            out, grid, total, skipped, 0, 0, time.time() - started, conform(pd.DataFrame(), RUN_SUMMARY)
        )
    n = len(pending)
    sc = spark.sparkContext
    task_of = plan_tasks(pending["cost"].tolist(), sc.defaultParallelism, max_tasks=max_tasks)
    tasks = max(task_of) + 1
    # Exact placement without a Python stage: spark.range gives partition k exactly the row k (the
    # k-th task, scheduled k-th); the specs travel once per executor as a broadcast, scenario texts
    # once per distinct scenario.
    scenarios: dict[str, str] = {}
    by_task: dict[int, list[dict[str, Any]]] = {}
    spec_columns = [c for c in field_names(RUN_SPEC) if c != "scenario_spec"]
    for task, (_, row) in zip(task_of, pending.iterrows(), strict=True):
        scenarios[str(row["scenario_digest"])] = str(row["scenario_spec"])
        spec = {
            c: (None if isinstance(row[c], float) and math.isnan(row[c]) else row[c]) for c in spec_columns
        }
        by_task.setdefault(int(task), []).append(spec)
    plan = sc.broadcast({"tasks": by_task, "scenarios": scenarios})
    results_df = spark.range(0, tasks, 1, numPartitions=tasks).mapInPandas(
        run_tasks(out, timeout_s, plan), RUN_SUMMARY
    )
    group = f"shedlab-sweep-{os.getpid()}-{int(started * 1000)}"
    collected: list[Any] = []
    failure: list[BaseException] = []

    def action() -> None:
        try:
            sc.setJobGroup(group, f"shedlab sweep {grid.name}: {n} runs", interruptOnCancel=True)
            collected.extend(results_df.collect())
        except BaseException as exc:  # re-raised in the caller
            failure.append(exc)

    worker = threading.Thread(target=action, name="shedlab-sweep", daemon=True)
    stop = threading.Event()
    poller = None
    if progress is not None:
        progress(0, n, 0)
        counter = _RunCounter(out, set(pending["run_id"]), started if retry_failed else None)
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
        plan.unpersist()
    if failure:
        raise failure[0]
    summaries = pd.DataFrame([r.asDict() for r in collected], columns=field_names(RUN_SUMMARY))
    if progress is not None:
        progress(len(summaries), n, 0)
    failed = int((summaries["status"] != "ok").sum()) if len(summaries) else 0
    return SweepResult(out, grid, total, skipped, len(summaries), failed, time.time() - started, summaries)
