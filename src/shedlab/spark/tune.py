"""``shedlab tune``: successive halving of strategy pairs × a parameter space, as Spark sweeps.

Each rung is one :func:`shedlab.spark.sweep.sweep` over the rung's run specifications
(:func:`shedlab.core.grid.candidate_specs`) into the same directory: run ids depend only on
(scenario, pair, parameters, seed), so a rung that gives a survivor more seeds runs only the new
seeds, and an interrupted tune resumes. Planning, scoring and the recommendation are
:mod:`shedlab.core.tune`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from shedlab import jsonout
from shedlab.core.grid import Grid, ScenarioRef, candidate_specs
from shedlab.core.results import TUNE_FILE, TUNE_GRID, read_sweep_runs, refuse_other_versions
from shedlab.core.tune import (
    Candidate,
    Recommendation,
    Recorded,
    Space,
    broker_conf_fragment,
    candidate_table,
    halving_schedule,
    make_candidates,
    pareto_front,
    recommend,
    recorded_configuration,
    score_runs,
    survivors,
    tune_markdown,
)
from shedlab.errors import InputError
from shedlab.spark.sweep import sweep

__all__ = ["TuneResult", "tune"]

FRAGMENT_FILE = "recommendation.conf"


@dataclass
class TuneResult:
    out: str
    table: pd.DataFrame
    recommendation: Recommendation
    fragment: str
    markdown: str
    rungs: list[dict[str, Any]]
    full_grid: int

    @property
    def runs_spent(self) -> int:
        return sum(int(r["new_runs"]) for r in self.rungs)


def _rung(
    spark: Any,
    refs: Sequence[ScenarioRef],
    alive: Sequence[Candidate],
    seeds: int,
    out: str,
    progress: Callable[[int, int, int], None] | None,
) -> int:
    seed_list = tuple(range(1, seeds + 1))
    specs = candidate_specs(
        TUNE_GRID, refs, [(c.strategy, c.params) for c in alive], seed_list, brokers_every=0
    )
    grid = Grid(
        name=TUNE_GRID,
        description="shedlab tune: successive halving over strategy pairs × a parameter space",
        scenarios=tuple(refs),
        strategies=tuple(sorted({c.strategy for c in alive})),
        seeds=seed_list,
        brokers_every=0,
    )
    result = sweep(spark, grid, out, specs=specs, progress=progress)
    return int(result.ran)


def _ok_runs(out: str, refs: Sequence[ScenarioRef]) -> pd.DataFrame:
    """The successful runs in ``out`` of the scenarios ``refs``; when every one failed, refused with the
    first failure's error (scoring no run asked for metrics no run has: "unknown metric
    'score_spread_mean'" told a user nothing of why)."""
    runs = read_sweep_runs(Path(out))  # its columns are there even when it holds no run
    runs = runs[runs["scenario"].isin([r.name for r in refs])]
    ok = runs[runs["status"] == "ok"]
    if ok.empty:
        failed = runs[runs["status"] == "error"]
        first = str(failed["error"].iloc[0]) if not failed.empty and "error" in failed else None
        raise InputError("every tuning run failed", source=out, hint=f"the first: {first}" if first else None)
    return ok


def tune(
    spark: Any,
    refs: Sequence[ScenarioRef],
    out: str,
    *,
    pairs: Sequence[str],
    space: Space,
    seeds: int = 5,
    objective: str = "balanced",
    per_pair: int = 12,
    eta: int = 3,
    sample_seed: int = 1,
    say: Callable[[str], None] | None = None,
    progress: Callable[[int, int, int], None] | None = None,
    recorded: Recorded | None = None,
) -> TuneResult:
    """Tune on ``refs`` (a twin, or scenarios): the recorded configuration is the strategy pair and the
    settings it runs with that they share (:func:`~shedlab.core.tune.recorded_configuration` refuses
    them otherwise), each pair's candidates starting from the settings it runs with in them;
    write ``tune.json``, ``tune.md``, ``candidates.csv`` and ``recommendation.conf`` into ``out``.
    ``recorded`` is that configuration when the caller has checked it already (the CLI, before Spark)."""
    note = say or (lambda _m: None)
    refuse_other_versions(
        out,
        read_sweep_runs(Path(out)),
        {r.name: r.digest for r in refs},
        hint="tune into a new --out directory",
    )
    recorded = recorded if recorded is not None else recorded_configuration(refs, pairs)
    recorded_pair, recorded_config = recorded.pair, recorded.config
    candidates = make_candidates(
        space,
        pairs,
        recorded_pair,
        per_pair=per_pair,
        seed=sample_seed,
        recorded_config=recorded_config,
        bases=recorded.bases(pairs),
    )
    schedule = halving_schedule(len(candidates), seeds, eta)
    alive = list(candidates)
    rungs: list[dict[str, Any]] = []
    by_key = {c.key: c for c in candidates}
    given: dict[str, int] = {}  # candidate → the seeds this tune gave it (its last rung's)
    table = pd.DataFrame()
    scored = pd.DataFrame()
    for index, (keep, rung_seeds) in enumerate(schedule):
        if index > 0:
            alive = [
                by_key[k] for k in survivors(table[table["candidate"].isin([c.key for c in alive])], keep)
            ]
        note(f"rung {index + 1}/{len(schedule)}: {len(alive)} candidates × {rung_seeds} seed(s)")
        ran = _rung(spark, refs, alive, rung_seeds, out, progress)
        rungs.append({"candidates": len(alive), "seeds": rung_seeds, "new_runs": ran})
        given.update((c.key, rung_seeds) for c in alive)
        scored = score_runs(_ok_runs(out, refs), objective)
        # Only the seeds this tune gave each candidate: --out may hold more (an earlier tune with another
        # objective or more seeds, or an interrupted one's later rungs), and a candidate ranked on them
        # would be compared on other seeds than its rivals; the same inputs give the same result.
        scored = scored[scored["seed"] <= scored["candidate"].map(given).fillna(0)]
        if scored.empty:
            raise InputError("every tuning run failed", source=out)
        table = candidate_table(scored, candidates, recorded_config)
    table["pareto"] = pareto_front(table)
    rec = recommend(table, scored, objective)
    source = ", ".join(r.name for r in refs)
    fragment = broker_conf_fragment(rec, scored, table, recorded_config, recorded_pair, source)
    full_grid = len(candidates) * seeds * len(refs)
    markdown = tune_markdown(table, rec, rungs, fragment, full_grid=full_grid)
    _write(out, table, rec, fragment, markdown, rungs, full_grid, space, refs)
    return TuneResult(out, table, rec, fragment, markdown, rungs, full_grid)


def _write(
    out: str,
    table: pd.DataFrame,
    rec: Recommendation,
    fragment: str,
    markdown: str,
    rungs: list[dict[str, Any]],
    full_grid: int,
    space: Space,
    refs: Sequence[ScenarioRef],
) -> None:
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    rows = table.to_dict("records")
    doc = {
        "scenarios": [r.name for r in refs],
        "objective": rec.objective,
        "objective_expr": rec.objective_expr,
        "space": space.source,
        "seeds": rec.seeds,
        "rungs": rungs,
        "runs_spent": sum(int(r["new_runs"]) for r in rungs),
        "full_grid_runs": full_grid,
        "recommended": dict(rec.candidate),
        "recorded": dict(rec.recorded),
        "improvement": rec.improvement,
        "keep_recorded": rec.is_recorded,
        "notes": rec.notes,
        "fragment": fragment,
        "candidates": rows,
    }
    (root / TUNE_FILE).write_text(jsonout.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
    (root / "tune.md").write_text(markdown, encoding="utf-8")
    (root / FRAGMENT_FILE).write_text(fragment, encoding="utf-8")
    table.to_csv(root / "candidates.csv", index=False)
