"""Read a results directory into a :class:`~shedlab.report.model.ReportData`.

What is recognised, at the given directory or up to two levels below it (the demo writes ``sweep/``
with ``evaluation/`` next to it, ``shedlab evaluate`` defaults to ``SWEEP_DIR/evaluation``):

* **simulate** output (``SimulationResult.write``): ``summary.json`` next to ``ticks.parquet``,
  ``brokers.parquet``, ``decisions.parquet`` and ``events.parquet``;
* **compare** output: several simulate outputs below one directory (``DIR/<pair>/``);
* **sweep** output (``shedlab sweep``: ``runs/``, ``ticks/``, ``brokers/``, ``decisions/``, ``events/``
  partitioned by scenario and strategy, and ``sweep.json``) and its **evaluation** (``pip364``,
  ``metric_stats``, ``pip364_definitions.json``);
* **replay** output (``shedlab replay``: ``comparison/``, ``load/``, ``decisions/``,
  ``ownership_changes/`` and ``replay.json``).

Optional parts may be missing (a sweep without an evaluation, a sweep without broker rows, a replay
without per-broker load); the report then leaves their sections out. Nothing is invented: what is not
in the files is not shown. Everything is read with pyarrow; no Spark session is needed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from shedlab.core.evaluation import DEFINITIONS_FILE
from shedlab.core.goal import GOAL_COLUMNS, GOAL_TABLE
from shedlab.core.grid import params_label
from shedlab.core.results import (
    MANIFEST,
    TUNE_FILE,
    manifest_grids,
    missing_columns,
    read_checked_parquet,
    read_partitioned,
    read_run_table,
    read_sweep_runs,
    run_id_of_file,
)
from shedlab.errors import InputError, parse_json_text, read_user_text
from shedlab.report.model import SKIP_REPORT_COLUMNS, ReplayData, ReportData, RunSeries, ScenarioInfo
from shedlab.report.pip364 import pair_order

__all__ = [
    "EvaluationTables",
    "find_simulation_dirs",
    "load_results",
    "read_simulation_dir",
]

SIM_FILES = ("ticks.parquet", "brokers.parquet", "decisions.parquet", "events.parquet")
HIDDEN_EVENTS = frozenset({"start"})
"""Event kinds not drawn as scenario events (the start of a run is not a disturbance)."""
DECISION_COLUMNS = ["time_s", "source", "destination", "bundle"]
EVENT_COLUMNS = ["time_s", "kind", "detail"]
TICK_COLUMNS = ["time_s", "score_spread"]
BROKER_COLUMNS = ["time_s", "broker", "score"]
PIP_COLUMNS_READ = ("strategy", "problem", "metric", "n_runs", "value", "ci_low", "ci_high", "rating")
"""The columns of ``evaluate``'s tables the report indexes (the PIP-364 table, the metric statistics)."""
STATS_COLUMNS_READ = ("scenario", "strategy", "params_id", "metric", "mean")
REPLAY_COLUMNS_READ = {
    "comparison": (
        "tick_ms",
        "actual_moves",
        "strategy_unloads",
        "both",
        "max_usage",
        "est_max_usage",
        "usage_spread",
        "est_usage_spread",
        "left_alone",
        "reasons",
    ),
    "load": ("tick_ms", "broker", "usage", "est_usage"),
    "decisions": ("tick_ms", "source", "bundle", "destination"),
    "ownership_changes": ("tick_ms", "bundle", "from_broker", "to_broker"),
}
"""The columns of each table of a replay the report indexes (besides the partition keys)."""
IMBALANCE_LABEL = "max − min broker score"


# -------------------------------------------------------------------------------------------- files


def _read_json(path: Path) -> Any:
    """A JSON file of a results directory, read as every user file is (:mod:`shedlab.errors`): text that is
    not UTF-8, binary data, deep nesting or a huge integer was a traceback (UnicodeDecodeError, ...)."""
    return parse_json_text(read_user_text(path), str(path))


def _read_table(base: Path, name: str, required: Sequence[str] = ()) -> pd.DataFrame | None:
    """``name`` as a Parquet file or directory, else as CSV (None if neither exists), with the
    ``required`` columns."""
    for candidate in (base / name, base / f"{name}.parquet"):
        if candidate.exists():
            return read_checked_parquet(candidate, required=required)
    csv = base / f"{name}.csv"
    if csv.is_file():
        try:
            frame = pd.read_csv(csv)
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read CSV: {exc}", source=str(csv)) from None
        missing_columns(list(frame.columns), required, str(csv))
        return frame
    return None


def _yaml_mapping(text: str) -> dict[str, Any] | None:
    import yaml

    try:
        data = yaml.safe_load(text) if text else None
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


def _iter_dirs(root: Path, max_depth: int) -> Iterator[Path]:
    """``root`` and its directories down to ``max_depth``, shallowest first (by name within a level).

    Shallowest first, so that a results directory's own sweep wins over one nested deeper: the demo's
    ``out/demo`` holds ``sweep/`` and, after it, ``recommendation/tune/`` (a tuning sweep), and a
    depth-first walk found the latter first ("recommendation" < "sweep") and paired its runs with
    ``out/demo/evaluation``."""
    level = [root]
    for depth in range(max_depth + 1):
        yield from level
        if depth == max_depth:
            return
        level = [
            child
            for parent in level
            for child in sorted(parent.iterdir())
            if child.is_dir() and not child.name.startswith((".", "_"))
        ]


def _first(root: Path, test: Callable[[Path], bool], max_depth: int = 2) -> Path | None:
    return next((p for p in _iter_dirs(root, max_depth) if test(p)), None)


# ----------------------------------------------------------------------------------- time series


def _series(
    scenario: str,
    strategy: str,
    ticks: pd.DataFrame,
    brokers: pd.DataFrame,
    decisions: pd.DataFrame,
    events: pd.DataFrame,
    label: str = "",
    skips: pd.DataFrame | None = None,
) -> RunSeries:
    """A run's time series in the report's columns (simulator output columns in)."""
    cluster = ticks[["time_s", "score_spread", *(["unloads"] if "unloads" in ticks else [])]]
    if not events.empty:
        events = events[~events["kind"].astype(str).isin(HIDDEN_EVENTS)]
    return RunSeries(
        scenario=scenario,
        strategy=strategy,
        brokers=brokers[["time_s", "broker", "score"]].reset_index(drop=True),
        cluster=cluster.rename(columns={"score_spread": "imbalance"}).reset_index(drop=True),
        decisions=decisions[DECISION_COLUMNS]
        if not decisions.empty
        else pd.DataFrame(columns=DECISION_COLUMNS),
        events=events[EVENT_COLUMNS].reset_index(drop=True)
        if not events.empty
        else pd.DataFrame(columns=EVENT_COLUMNS),
        label=label,
        imbalance_label=IMBALANCE_LABEL,
        skips=_skips(skips),
    )


def _skips(skips: pd.DataFrame | None) -> pd.DataFrame:
    """The simulator's ``skips`` rows in the report's columns (none for outputs that predate the table)."""
    columns = list(SKIP_REPORT_COLUMNS)
    if skips is None or skips.empty or not set(columns) <= set(skips.columns):
        return pd.DataFrame(columns=columns)
    return skips[columns].reset_index(drop=True)


# ------------------------------------------------------------------------------ simulate / compare


def is_simulation_dir(path: Path) -> bool:
    return (path / "summary.json").is_file() and (path / "ticks.parquet").exists()


def find_simulation_dirs(root: Path, max_depth: int = 4) -> list[Path]:
    """Simulate outputs at or below ``root`` (a simulate output's own subdirectories are not searched)."""
    found: list[Path] = []

    def walk(p: Path, depth: int) -> None:
        if is_simulation_dir(p):
            found.append(p)
        elif depth < max_depth:
            for child in sorted(p.iterdir()):
                if child.is_dir() and not child.name.startswith((".", "_")):
                    walk(child, depth + 1)

    walk(root, 0)
    return found


def read_simulation_dir(path: Path) -> tuple[dict[str, Any], RunSeries]:
    """One simulate output: its summary and its time series."""
    summary = _read_json(path / "summary.json")
    if not isinstance(summary, dict):
        raise InputError("expected a JSON object", source=str(path / "summary.json"))
    _check_summary(summary, str(path / "summary.json"))
    missing = [f for f in SIM_FILES if not (path / f).exists()]
    if missing:
        raise InputError(f"incomplete simulation output: missing {', '.join(missing)}", source=str(path))
    seed = summary.get("seed")
    series = _series(
        summary["scenario"],
        summary["strategy"],
        read_checked_parquet(path / "ticks.parquet", required=TICK_COLUMNS),
        read_checked_parquet(path / "brokers.parquet", BROKER_COLUMNS),
        read_checked_parquet(path / "decisions.parquet", required=DECISION_COLUMNS),
        read_checked_parquet(path / "events.parquet", required=EVENT_COLUMNS),
        label=f"seed {seed}" if seed is not None else "",
        skips=read_checked_parquet(path / "skips.parquet") if (path / "skips.parquet").exists() else None,
    )
    return summary, series


def _check_summary(summary: dict[str, Any], source: str) -> None:
    """The fields of a run summary the report reads, as the simulator writes them: the scenario's and
    the strategy pair's names (strings), the seed (an integer, or absent)."""
    for key in ("scenario", "strategy"):
        value = summary.get(key)
        if not isinstance(value, str) or not value:
            raise InputError(
                "expected a name (a non-empty string)" if key in summary else "missing",
                source=source,
                field=key,
                value=value if key in summary else None,
            )
    seed = summary.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise InputError("expected an integer seed", source=source, field="seed", value=seed)


def _builtin_scenario_info(name: str) -> ScenarioInfo | None:
    """The built-in scenario of that name, clearly labelled as assumed (simulate/compare outputs record
    only the scenario's name)."""
    from shedlab.core.sim.scenario import builtin_scenarios

    if name not in builtin_scenarios():
        return None
    import importlib.resources

    text = (
        importlib.resources.files("shedlab").joinpath("data", "scenarios", f"{name}.yaml").read_text("utf-8")
    )
    spec = _yaml_mapping(text) or {}
    return ScenarioInfo(
        name=name,
        description=str(spec.get("description") or "").strip(),
        source=f"builtin:{name} (assumed from the name: the results record no scenario file)",
        spec=spec,
        text=text,
    )


def _load_simulations(root: Path, dirs: list[Path]) -> ReportData:
    summaries: list[dict[str, Any]] = []
    by_scenario: dict[str, list[RunSeries]] = {}
    configs: dict[str, Any] = {}
    for d in dirs:
        summary, series = read_simulation_dir(d)
        summaries.append(summary)
        by_scenario.setdefault(series.scenario, []).append(series)
        configs[f"{series.scenario} / {series.strategy} / seed {summary.get('seed')}"] = summary.get(
            "config", {}
        )
    for runs in by_scenario.values():
        runs.sort(key=lambda r: (pair_order(r.strategy), r.label))
        if len({r.strategy for r in runs}) == len(runs) and len({r.label for r in runs}) == 1:
            for r in runs:  # one run per pair, all with the same seed: the metadata names the seed
                r.label = ""
    scenarios = {n: sc for n in by_scenario if (sc := _builtin_scenario_info(n)) is not None}
    runs_frame = pd.DataFrame(
        [{k: v for k, v in s.items() if not isinstance(v, dict | list)} for s in summaries]
    )
    runs_frame["churn"] = runs_frame.get("unloads")
    runs_frame["imbalance"] = runs_frame.get("score_spread_mean")
    names = sorted(by_scenario)
    seeds = sorted({s["seed"] for s in summaries if s.get("seed") is not None})
    info: dict[str, Any] = {
        "scenarios": ", ".join(names),
        "strategy pairs": ", ".join(sorted({str(s.get("strategy")) for s in summaries}, key=pair_order)),
        "seeds": ", ".join(str(s) for s in seeds),
        "runs": str(len(summaries)),
        "configs": configs,
    }
    return ReportData(
        kind="simulate" if len(dirs) == 1 else "compare",
        source=root,
        title=f"shedlab report: {names[0]}" if len(names) == 1 else f"shedlab report: {len(names)} scenarios",
        runs=runs_frame,
        churn_label="unloads",
        imbalance_label=f"mean {IMBALANCE_LABEL}",
        series=dict(sorted(by_scenario.items())),
        scenarios=scenarios,
        run_info=info,
    )


# ------------------------------------------------------------------------------------------ sweeps


def is_sweep_dir(path: Path) -> bool:
    return (path / "runs").is_dir() and ((path / MANIFEST).is_file() or (path / "ticks").is_dir())


def _run_table(
    root: Path, table: str, row: pd.Series, columns: list[str] | None = None, required: Sequence[str] = ()
) -> pd.DataFrame:
    return read_run_table(
        root, table, str(row["scenario"]), str(row["strategy"]), str(row["run_id"]), columns, required
    )


def _drawn_runs(runs: pd.DataFrame, chosen: dict[tuple[str, str], str]) -> list[pd.Series]:
    """Per scenario × strategy pair, the run whose time series is drawn: the parameter set of the
    PIP-364 table (else the default one, else the first), and its smallest seed."""
    picked = []
    for (scenario, strategy), sub in runs[runs["status"] == "ok"].groupby(
        ["scenario", "strategy"], sort=True
    ):
        ids = set(sub["params_id"].astype(str))
        want = chosen.get((str(scenario), str(strategy)))
        pid = want if want in ids else ("default" if "default" in ids else sorted(ids)[0])
        picked.append(sub[sub["params_id"].astype(str) == pid].sort_values("seed").iloc[0])
    return picked


def _sweep_configs(ok: pd.DataFrame) -> dict[str, Any]:
    """The non-default Pulsar keys of each strategy pair × parameter set (per scenario where they differ)."""
    out: dict[str, Any] = {}
    if ok.empty or "summary_json" not in ok:
        return out
    for (strategy, pid), sub in ok.groupby(["strategy", "params_id"], sort=True):
        by_config: dict[str, list[str]] = {}
        for scenario, text in zip(sub["scenario"], sub["summary_json"], strict=True):
            try:
                config = json.loads(str(text)).get("config", {})
            except (json.JSONDecodeError, AttributeError):
                continue
            key = json.dumps(config, sort_keys=True)
            if str(scenario) not in by_config.setdefault(key, []):
                by_config[key].append(str(scenario))
        for key, scenarios in by_config.items():
            where = "all scenarios" if len(by_config) == 1 else ", ".join(sorted(scenarios))
            out[f"{strategy} · parameters {pid} · {where}"] = json.loads(key)
    return out


def _load_sweep(root: Path, evaluation: EvaluationTables | None) -> ReportData:
    runs = read_sweep_runs(root)
    grids = _sweep_grids(root)
    scenarios, files = _sweep_scenarios(grids)
    pip = evaluation.pip_table if evaluation is not None else None
    series = _sweep_series(root, runs, _pip_params(pip))
    ok = runs[runs["status"] == "ok"].reset_index(drop=True)
    failed = runs[runs["status"] != "ok"]
    if not ok.empty:
        ok["churn"] = ok.get("unloads")
        ok["imbalance"] = ok.get("score_spread_mean")
        ok["params_label"] = ok["params_json"].map(params_label)
    info: dict[str, Any] = {
        "grids": ", ".join(str(g.get("name")) for g in grids) or "(no sweep.json)",
        "sweep": str(root),
        "scenarios": ", ".join(sorted(runs["scenario"].astype(str).unique())),
        "strategy pairs": ", ".join(sorted(runs["strategy"].astype(str).unique(), key=pair_order)),
        "seeds": ", ".join(str(s) for s in sorted(runs["seed"].dropna().unique())),
        "parameter sets": str(runs["params_id"].nunique()),
        "runs": f"{len(ok)} ok, {len(failed)} failed",
        "files": files,
        "configs": _sweep_configs(ok),
    }
    if "shedlab_version" in runs and runs["shedlab_version"].notna().any():
        info["versions"] = {
            "shedlab (runs)": ", ".join(sorted(runs["shedlab_version"].dropna().astype(str).unique()))
        }
    if evaluation is not None:
        info.update(evaluation.info)
    return ReportData(
        kind="sweep",
        source=root,
        title=f"shedlab report: {', '.join(str(g.get('name')) for g in grids) or root.name}",
        pip_table=pip,
        pip_definitions=evaluation.definitions if evaluation is not None else {},
        metric_stats=evaluation.metric_stats if evaluation is not None else None,
        goal=evaluation.goal if evaluation is not None else None,
        runs=ok,
        churn_label="unloads per run",
        imbalance_label=f"mean {IMBALANCE_LABEL}",
        series=series,
        scenarios=scenarios,
        run_info=info,
        notes=_sweep_notes(runs, failed, evaluation),
    )


def _sweep_grids(root: Path) -> list[dict[str, Any]]:
    """The grids of a sweep directory's ``sweep.json`` (none without one); one that cannot be read is
    refused naming it."""
    manifest = _read_json(root / MANIFEST) if (root / MANIFEST).is_file() else {}
    return manifest_grids(manifest, str(root / MANIFEST))


def _sweep_scenarios(grids: list[Any]) -> tuple[dict[str, ScenarioInfo], dict[str, str]]:
    """The scenarios the sweep's grids recorded (with their texts), and the grid files by label."""
    scenarios: dict[str, ScenarioInfo] = {}
    files: dict[str, str] = {}
    for grid in grids:
        if grid.get("text"):
            files[f"grid {grid.get('name')} ({grid.get('source', '')})"] = str(grid["text"])
        for name, sc in (grid.get("scenarios") or {}).items():
            text = str(sc.get("text") or "")
            spec = _yaml_mapping(text)
            scenarios[name] = ScenarioInfo(
                name=name,
                description=str((spec or {}).get("description") or "").strip(),
                source=str(sc.get("source") or ""),
                spec=spec,
                text=text,
                digest=str(sc.get("digest") or ""),
            )
    return scenarios, files


def _pip_params(pip: pd.DataFrame | None) -> dict[tuple[str, str], str]:
    """(scenario, strategy) → the parameter set the PIP-364 table rates, for choosing the drawn run."""
    chosen: dict[tuple[str, str], str] = {}
    if pip is not None and "params_id" in pip:
        for strategy, params_id, names in pip[["strategy", "params_id", "scenarios"]].itertuples(index=False):
            for scenario in str(names or "").split(","):
                if scenario.strip() and isinstance(params_id, str):
                    chosen.setdefault((scenario.strip(), str(strategy)), params_id)
    return chosen


def _sweep_series(
    root: Path, runs: pd.DataFrame, chosen: dict[tuple[str, str], str]
) -> dict[str, list[RunSeries]]:
    """Per scenario, the time series of the drawn run of each strategy pair, in pair order."""
    series: dict[str, list[RunSeries]] = {}
    for row in _drawn_runs(runs, chosen) if not runs.empty else []:
        ticks = _run_table(root, "ticks", row, required=TICK_COLUMNS)
        if ticks.empty:
            continue
        label = f"seed {int(row['seed'])}"
        if str(row["params_id"]) != "default":
            label = f"{params_label(row['params_json'])}; {label}"
        s = _series(
            str(row["scenario"]),
            str(row["strategy"]),
            ticks,
            _run_table(root, "brokers", row, BROKER_COLUMNS),
            _run_table(root, "decisions", row, required=DECISION_COLUMNS),
            _run_table(root, "events", row, required=EVENT_COLUMNS),
            label,
            _run_table(root, "skips", row),
        )
        s.params_id = str(row["params_id"])
        series.setdefault(s.scenario, []).append(s)
    for drawn in series.values():
        drawn.sort(key=lambda r: pair_order(r.strategy))
    return dict(sorted(series.items()))


def _sweep_notes(runs: pd.DataFrame, failed: pd.DataFrame, evaluation: EvaluationTables | None) -> list[str]:
    """What the reader should know about what is missing: failed runs, no evaluation, no runs."""
    notes = []
    if len(failed):
        first = failed.iloc[0]
        notes.append(
            f"{len(failed)} of {len(runs)} runs failed and are left out (first: {first['scenario']} / "
            f"{first['strategy']} / seed {first['seed']}: {first.get('error_type')}: {first.get('error')})."
        )
    if evaluation is None:
        notes.append("This sweep has not been evaluated: run shedlab evaluate on it for the PIP-364 table.")
    if runs.empty:
        notes.append("This sweep directory holds no run summaries yet.")
    return notes


# ------------------------------------------------------------------------------------- evaluations


@dataclass
class EvaluationTables:
    """What ``shedlab evaluate`` wrote: the PIP-364 table, the metric statistics, the definitions."""

    pip_table: pd.DataFrame | None
    metric_stats: pd.DataFrame | None
    definitions: dict[str, dict[str, Any]] = field(default_factory=dict)
    goal: pd.DataFrame | None = None
    info: dict[str, Any] = field(default_factory=dict)
    sweep_dir: Path | None = None


def is_evaluation_dir(path: Path) -> bool:
    return any((path / n).exists() for n in ("pip364", "pip364.parquet", "pip364.csv"))


def read_evaluation(path: Path) -> EvaluationTables:
    """``pip364`` and ``metric_stats`` (Parquet, else CSV), ``pip364_definitions.json`` and the goal's
    cells (``goal.csv``, from ``shedlab evaluate`` since it judges a challenger)."""
    definitions: dict[str, dict[str, Any]] = {}
    defs_path = path / DEFINITIONS_FILE
    if defs_path.is_file():
        raw = _read_json(defs_path)
        if isinstance(raw, dict):
            definitions = {str(k): dict(v) for k, v in raw.items() if isinstance(v, dict)}
    return EvaluationTables(
        pip_table=_read_table(path, "pip364", PIP_COLUMNS_READ),
        metric_stats=_read_table(path, "metric_stats", STATS_COLUMNS_READ),
        definitions=definitions,
        goal=_read_table(path, GOAL_TABLE, GOAL_COLUMNS),
        info={"evaluation": str(path)},
        sweep_dir=path.parent if is_sweep_dir(path.parent) else None,
    )


# ------------------------------------------------------------------------------------------ replays


def is_replay_dir(path: Path) -> bool:
    return (path / "replay.json").is_file() or (path / "comparison").is_dir()


def _replay_table(path: Path, keys: tuple[str, ...]) -> pd.DataFrame | None:
    """A replay table, None when it holds no row: a replay in which nothing moved has empty
    ``decisions``/``ownership_changes`` (older replays wrote them without any column), and the figures
    draw a missing table as "none"."""
    frame = read_partitioned(path, keys, REPLAY_COLUMNS_READ[path.name])
    return None if frame is None or frame.empty else frame


def _check_replay_tables(path: Path, replay: ReplayData) -> None:
    """Refuse a replay output missing a table every replay writes (``comparison/``, ``load/``): the report
    left out its section silently (without both, the whole replay: an empty report of a replay)."""
    manifest = path / "replay.json"
    for name, table in (("comparison", replay.comparison), ("load", replay.load)):
        if table is None:
            raise InputError(
                f"a replay output without its {name}/ table",
                source=str(manifest if manifest.is_file() else path),
                hint="run shedlab replay again",
            )


def read_replay(path: Path) -> tuple[ReplayData, dict[str, Any]]:
    """A replay output and what it was run with (``replay.json``)."""
    manifest = _read_json(path / "replay.json") if (path / "replay.json").is_file() else {}
    configs = manifest.get("configs", []) if isinstance(manifest, dict) else []
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        raise InputError(
            "expected a list of strategy configurations (objects)",
            source=str(path / "replay.json"),
            field="configs",
            value=configs,
        )
    keys = ("cluster", "strategy")
    replay = ReplayData(
        comparison=read_partitioned(path / "comparison", keys, REPLAY_COLUMNS_READ["comparison"]),
        load=read_partitioned(path / "load", keys, REPLAY_COLUMNS_READ["load"]),
        decisions=_replay_table(path / "decisions", ("cluster", "strategy")),
        ownership=_replay_table(path / "ownership_changes", ("cluster",)),
    )
    _check_replay_tables(path, replay)
    info: dict[str, Any] = {"replay": str(path)}
    if isinstance(manifest, dict):
        info["recorded data"] = str(manifest.get("snapshots", ""))
        info["replay seed"] = str(manifest.get("seed", ""))
        info["configs"] = {
            f"{c.get('strategy')} · {c.get('config_id')}": c.get("overrides", {}) for c in configs
        }
    return replay, info


# ----------------------------------------------------------------------------------------- entry


def load_results(results_dir: Path) -> ReportData:
    """Detect what ``results_dir`` holds and read it."""
    root = Path(results_dir)
    if not root.exists():
        raise InputError("results directory not found", source=str(root))
    if not root.is_dir():
        raise InputError("expected a directory of results", source=str(root))
    eval_dir = _first(root, is_evaluation_dir)
    evaluation = read_evaluation(eval_dir) if eval_dir is not None else None
    replay_dir = _first(root, is_replay_dir)
    sweep_dir = _first(root, is_sweep_dir) or (evaluation.sweep_dir if evaluation is not None else None)
    if sweep_dir is not None and evaluation is None and replay_dir is None:
        _sweep_grids(sweep_dir)  # a sweep.json that cannot be read is named, runs or not
        if _no_runs(root, sweep_dir):
            sweep_dir = None  # nothing to report from it: simulate outputs below, else refused below
    data = _load_sweep_or_evaluation(root, sweep_dir, evaluation)
    if replay_dir is not None:
        replay, info = read_replay(replay_dir)
        if data is None:
            data = ReportData(kind="replay", source=root, title=f"shedlab replay report: {root.name}")
        data.replay = replay
        data.run_info.update(info)
    if data is not None:
        return data
    sims = find_simulation_dirs(root)
    if sims:
        return _load_simulations(root, sims)
    raise _nothing_to_report(root)


def _no_runs(root: Path, sweep_dir: Path) -> bool:
    """Whether a sweep directory holds no run summary, and ``root`` no tuning recommendation either (a
    report of it would be an empty page: an interrupted sweep, a --limit 0 sweep)."""
    if (root / TUNE_FILE).is_file():
        return False
    return not any(
        run_id_of_file(f.name) is not None for f in (sweep_dir / "runs").rglob("run-*.parquet") if f.is_file()
    )


def _load_sweep_or_evaluation(
    root: Path, sweep_dir: Path | None, evaluation: EvaluationTables | None
) -> ReportData | None:
    """A sweep with its evaluation, an evaluation without its sweep, or None."""
    if sweep_dir is not None:
        data = _load_sweep(sweep_dir, evaluation)
        data.source = root
        return data
    if evaluation is None:
        return None
    return ReportData(
        kind="sweep",
        source=root,
        title=f"shedlab report: {root.name}",
        pip_table=evaluation.pip_table,
        pip_definitions=evaluation.definitions,
        metric_stats=evaluation.metric_stats,
        goal=evaluation.goal,
        run_info=dict(evaluation.info),
        notes=["The sweep this evaluation was made from is not here, so there are no time series."],
    )


def _nothing_to_report(root: Path) -> InputError:
    """Why ``root`` has nothing to report, said for the outputs a newcomer reports too early."""
    if (root / "broker_samples").is_dir():  # the step before: a newcomer's first guess after ingest
        return InputError(
            "an ingest output holds no results to report",
            source=str(root),
            hint=f"replay it first (shedlab replay {root} --strategies … --out DIR), then report DIR",
        )
    sweep = _first(root, lambda p: (p / "runs").is_dir())
    if sweep is not None:  # an empty report written with exit 0 looked like a sweep that had run
        return InputError(
            "no runs to report: the sweep holds no run summaries yet",
            source=str(sweep / "runs"),
            hint="run (or resume) shedlab sweep into it first",
        )
    return InputError(
        "no shedlab results found here",
        source=str(root),
        hint="expected the output of shedlab simulate, compare, sweep (+ evaluate), replay or tune",
    )
