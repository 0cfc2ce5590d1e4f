"""Tuning: which strategy pair and which settings, for this cluster (``shedlab tune``; pandas only).

A *candidate* is a strategy pair with a parameter set (Pulsar keys applied on top of the scenario's
own ``config``, i.e. on top of the recorded configuration for a twin). The candidates are the recorded
configuration, every pair with the recorded settings, and a deterministic sample of the search space
(``data/spaces/default.yaml`` or ``--space``). They are run with **successive halving**: every
candidate on one seed, the best third on ``eta`` seeds, … until the survivors have all the seeds;
the recorded configuration always survives, so the improvement is measured on the same seeds.

Scores (per run, from the simulator's summary, ``docs/metrics.md``; lower is better):

* ``imbalance`` = ``score_spread_mean + broker_minutes_overloaded · 3600 / duration_s`` (score points
  of max−min spread, plus minutes per hour some broker is above the overload line: the PIP-364
  heterogeneous figure);
* ``unloads_per_day`` = ``unloads · 86400 / duration_s``; ``traffic_moved_per_day`` = MiB/s of
  throughput unloaded per day;
* the objective: a preset of :data:`OBJECTIVES` or any expression over these and the summary metrics.

The spark layer (:mod:`shedlab.spark.tune`) runs the rungs through the sweep; this module plans them,
scores them and writes the recommendation, its Pareto front and its ``broker.conf`` fragment.
"""

from __future__ import annotations

import importlib.resources
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from shedlab.config import STRATEGY_KEYS, LoadBalancerConfig, key_spec, parse_yaml_text
from shedlab.core.evaluation import evaluate_expression, expression_names, mean_interval
from shedlab.core.grid import (
    ScenarioRef,
    canonical_json,
    check_pair_values,
    pair_sections,
    refuse_pair_key,
    value_axis,
)
from shedlab.errors import ConfigError, InputError, read_user_text
from shedlab.strategies.registry import pair_config
from shedlab.units import conf_value, significant

__all__ = [
    "DERIVED",
    "MIN_GAIN",
    "OBJECTIVES",
    "RECORDED",
    "Candidate",
    "Recommendation",
    "Recorded",
    "Space",
    "broker_conf_fragment",
    "candidate_table",
    "changes_of",
    "full_grid_size",
    "halving_schedule",
    "label_of",
    "load_space",
    "make_candidates",
    "objective_expression",
    "pareto_front",
    "recommend",
    "recorded_configuration",
    "recorded_value",
    "score_runs",
    "survivors",
    "tune_markdown",
]

DERIVED: dict[str, str] = {
    "imbalance": "score_spread_mean + broker_minutes_overloaded * 3600 / duration_s",
    "unloads_per_day": "unloads * 86400 / duration_s",
    "traffic_moved_per_day": "throughput_moved / 1048576 * 86400 / duration_s",
}
"""The figures tune reports, as expressions over a run's summary metrics."""

OBJECTIVES: dict[str, str] = {
    "balanced": "imbalance + 0.2 * unloads_per_day",
    "imbalance": "imbalance",
    "churn": "unloads_per_day",
}
"""Objective presets (lower is better). ``balanced`` prices five unloads a day like one score point of
spread held all day: both cost the operator about the same (a bundle's clients reconnect; a hot broker
serves slower)."""

FIGURES = ("objective", "imbalance", "unloads_per_day", "traffic_moved_per_day")
NON_NEGATIVE = frozenset(("imbalance", "unloads_per_day", "traffic_moved_per_day"))

RECORDED = "recorded configuration"


@dataclass(frozen=True)
class Space:
    """Per strategy pair, the Pulsar keys to vary and their values (``common`` axes for every pair)."""

    axes: Mapping[str, tuple[tuple[str, tuple[Any, ...]], ...]]
    common: tuple[tuple[str, tuple[Any, ...]], ...]
    source: str

    def pair_axes(self, pair: str) -> list[tuple[str, tuple[Any, ...]]]:
        own = dict(self.axes.get(pair, ()))
        return [(k, v) for k, v in self.common if k not in own] + list(self.axes.get(pair, ()))

    def check_pairs(self, pairs: Sequence[str], recorded: Recorded | None = None, where: str = "") -> None:
        """Refuse a value one of the tuned ``pairs`` refuses (:func:`~shedlab.core.grid.check_pair_values`),
        on the settings it runs with in the scenarios (``recorded``, read from ``where``), before Spark
        starts: its candidates would fail in every task."""
        for pair in pairs:
            base = LoadBalancerConfig()
            if recorded is not None:  # the layers of Recorded.settings, each named where it is written
                base = base.with_overrides(dict(recorded.common), source=f"{where}: config")
                own = dict(recorded.per_pair.get(pair, {}))
                base = base.with_overrides(own, source=f"{where}: strategy_config.{pair}")
            axes = [("common", self.common), (pair, self.axes.get(pair, ()))]
            check_pair_values(pair, axes, base, self.source)


_SPACE_PAIR_KEY = (
    "a space cannot change the strategy pair: the pair is chosen by the section name",
    "give that pair a section of its own (e.g. ThresholdShedder+LeastResourceUsageWithWeight:); "
    "--strategies chooses the pairs tuned",
)


def _axes(data: Any, source: str, where: str) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(data, Mapping):
        raise ConfigError("expected a mapping of Pulsar keys to lists of values", source=source, field=where)
    out = []
    for key, raw in data.items():
        refuse_pair_key(str(key), raw, source, where, problem=_SPACE_PAIR_KEY[0], hint=_SPACE_PAIR_KEY[1])
        out.append((str(key), value_axis(str(key), raw, source, where)))
    return tuple(out)


def load_space(path: str | Path | None = None) -> Space:
    """The search space: a YAML file, or the shipped default (``data/spaces/default.yaml``)."""
    if path is None:
        source = "builtin:spaces/default.yaml"
        text = (
            importlib.resources.files("shedlab").joinpath("data", "spaces", "default.yaml").read_text("utf-8")
        )
    else:
        source = str(path)
        text = read_user_text(Path(path), what="space file")
    data = parse_yaml_text(text, source)
    if not isinstance(data, Mapping):
        raise ConfigError("a space is a mapping of strategy pairs (and `common`) to keys", source=source)
    common: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    axes: dict[str, tuple[tuple[str, tuple[Any, ...]], ...]] = {}
    if "common" in data:
        common = _axes({} if data["common"] is None else data["common"], source, "common")
    pairs = pair_sections({k: v for k, v in data.items() if k != "common"}, source)
    for pair, (name, value) in pairs.items():
        axes[pair] = _axes({} if value is None else value, source, name)
    return Space(axes, common, source)


@dataclass(frozen=True)
class Candidate:
    """A strategy pair with a parameter set, applied on ``base``: the settings the pair runs with in the
    scenarios (their ``config`` ← ``strategy_config[pair]``, :meth:`Recorded.settings`)."""

    strategy: str
    params: Mapping[str, Any]
    origin: str  # "recorded configuration", "recorded settings", "space"
    base: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def settings(self) -> dict[str, Any]:
        """The keys the candidate's runs set: its base, then its parameters."""
        return {**self.base, **self.params}

    @property
    def key(self) -> str:
        return f"{self.strategy}|{canonical_json(dict(self.params))}"


def make_candidates(
    space: Space,
    pairs: Sequence[str],
    recorded_pair: str,
    *,
    per_pair: int = 12,
    seed: int = 1,
    recorded_config: Mapping[str, Any] | None = None,
    bases: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Candidate]:
    """The recorded configuration first, then per pair its recorded settings and up to ``per_pair − 1``
    parameter sets of the space (all of them if the cross product is that small, else a sample drawn
    with ``seed``: the same inputs give the same candidates). A pair's parameters apply on its entry of
    ``bases`` (:meth:`Recorded.bases`; ``recorded_config`` for a pair without one): a value equal to the
    base's is no change, dropped."""
    recorded = dict(recorded_config or {})
    base_of = {**dict.fromkeys([recorded_pair, *pairs], recorded), **(bases or {})}
    out = [Candidate(recorded_pair, {}, RECORDED, base_of[recorded_pair])]
    rng = np.random.default_rng(seed)
    for pair in pairs:
        base = base_of[pair]
        if pair != recorded_pair:
            out.append(Candidate(pair, {}, "recorded settings", base))
        axes = space.pair_axes(pair)
        if not axes:
            continue
        sizes = [len(v) for _, v in axes]
        total = math.prod(sizes)
        wanted = max(0, per_pair - 1)
        if total <= wanted:
            indices = list(range(total))
        else:
            indices = sorted(int(i) for i in rng.choice(total, size=wanted, replace=False))
        for index in indices:
            params: dict[str, Any] = {}
            for (key, values), size in zip(reversed(axes), reversed(sizes), strict=True):
                params[key] = values[index % size]
                index //= size
            # a value equal to the one the pair runs with is no change: dropped, so equal candidates coincide
            kept = {k: v for k, v in params.items() if not _same(recorded_value(k, base), v)}
            origin = "space" if kept else "recorded settings"
            out.append(Candidate(pair, dict(sorted(kept.items())), origin, base))
    seen: set[str] = set()
    unique = []
    for c in out:
        if c.key not in seen:
            seen.add(c.key)
            unique.append(c)
    return unique


def halving_schedule(n: int, max_seeds: int, eta: int = 3) -> list[tuple[int, int]]:
    """Rungs of successive halving: ``(candidates, seeds)``; the seeds grow ×``eta`` up to
    ``max_seeds``, the candidates shrink ÷``eta`` (at least 2 survive: the best and the recorded)."""
    rungs = []
    seeds, alive = 1, n
    while True:
        seeds = min(seeds, max_seeds)
        rungs.append((alive, seeds))
        if seeds >= max_seeds:
            return rungs
        alive = max(min(2, alive), math.ceil(alive / eta))
        seeds *= eta


def objective_expression(objective: str) -> str:
    """A preset's expression, or the expression given (checked: known names only, and at least one)."""
    expr = OBJECTIVES.get(objective, objective)
    try:
        names = expression_names(expr)
    except ConfigError as exc:
        raise ConfigError(
            exc.message, field="--objective", value=objective, hint=", ".join(OBJECTIVES)
        ) from None
    unknown = (
        names
        - set(DERIVED)
        - {
            "score_spread_mean",
            "broker_minutes_overloaded",
            "duration_s",
            "unloads",
            "throughput_moved",
            "msg_rate_moved",
            "score_spread_p95",
            "clients_disconnected",
            "topics_disconnected",
            "over_placement_events",
            "over_unloading_flips",
            "hot_placements",
            "score_std_mean",
            "score_cv_mean",
        }
    )
    if not names:  # every candidate scored the same: minutes of runs, and no change could be recommended
        raise ConfigError(
            "names no metric or figure: every candidate would score the same",
            field="--objective",
            value=objective,
            hint=f"presets: {', '.join(OBJECTIVES)}; figures: {', '.join(DERIVED)}",
        )
    if unknown:
        raise ConfigError(
            "unknown name in the objective",
            field="--objective",
            value=sorted(unknown)[0],
            hint=f"presets: {', '.join(OBJECTIVES)}; figures: {', '.join(DERIVED)}",
        )
    return expr


def score_runs(runs: pd.DataFrame, objective: str) -> pd.DataFrame:
    """The runs with the derived figures and ``objective`` as columns, and a ``candidate`` key."""
    out = runs.copy()
    for name, expr in DERIVED.items():
        out[name] = evaluate_expression(expr, out)
    out["objective"] = evaluate_expression(objective_expression(objective), out)
    out["candidate"] = [
        f"{s}|{canonical_json(json.loads(p or '{}'))}"
        for s, p in zip(out["strategy"], out["params_json"], strict=True)
    ]
    return out


def _interval(values: pd.Series, name: str) -> dict[str, Any]:
    stats = mean_interval(values.to_numpy(dtype=float))
    low, high = stats["ci_low"], stats["ci_high"]
    if name in NON_NEGATIVE and low is not None:
        low = max(0.0, low)  # a count or a spread cannot go below 0: the interval stops there
    return {"mean": stats["mean"], "low": low, "high": high, "n": stats["n"]}


def candidate_table(
    scored: pd.DataFrame, candidates: Sequence[Candidate], recorded_config: Mapping[str, Any]
) -> pd.DataFrame:
    """One row per candidate that ran: seeds, each figure's mean and 95 % interval, its label."""
    rows = []
    by_key = {c.key: c for c in candidates}
    for key, runs in scored.groupby("candidate", sort=False):
        cand = by_key.get(str(key))
        if cand is None:
            continue
        row: dict[str, Any] = {
            "candidate": key,
            "strategy": cand.strategy,
            "origin": cand.origin,
            "params_json": canonical_json(dict(cand.params)),
            "base_json": canonical_json(dict(cand.base)),
            "label": label_of(cand, recorded_config),
            "seeds": int(runs["seed"].nunique()),
        }
        for fig in FIGURES:
            iv = _interval(runs[fig], fig)
            row[fig] = iv["mean"]
            row[f"{fig}_low"], row[f"{fig}_high"] = iv["low"], iv["high"]
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty:
        return table
    return table.sort_values(["seeds", "objective", "candidate"], ascending=[False, True, True]).reset_index(
        drop=True
    )


def changes_of(cand: Candidate, recorded_config: Mapping[str, Any]) -> dict[str, Any]:
    """The keys whose value in the candidate's runs differs from the recorded configuration (Pulsar's
    default where neither set the key), in its runs' values: its parameters, and its pair's
    ``strategy_config`` in the scenarios (an AvgShedder candidate of a PIP-364 scenario runs
    ``maxUnloadPercentage=0.5`` with no parameter saying so)."""
    return _differences(cand.settings(), recorded_config)


def _differences(mine: Mapping[str, Any], recorded_config: Mapping[str, Any]) -> dict[str, Any]:
    keys = sorted({*mine, *recorded_config})
    return {
        k: recorded_value(k, mine)
        for k in keys
        if not _same(recorded_value(k, recorded_config), recorded_value(k, mine))
    }


def label_of(cand: Candidate, recorded_config: Mapping[str, Any]) -> str:
    """``Pair: key=value, …`` with only the keys whose value differs from the recorded configuration
    (:func:`changes_of`): never a hash."""
    if cand.origin == RECORDED:
        return f"{cand.strategy} ({RECORDED})"
    diffs = [f"{k}={conf_value(v)}" for k, v in changes_of(cand, recorded_config).items()]
    return f"{cand.strategy}: {', '.join(diffs)}" if diffs else f"{cand.strategy} (recorded settings)"


@dataclass(frozen=True)
class Recorded:
    """The configuration a tune starts from, shared by its scenarios: the recorded ``pair``, the
    scenarios' ``config`` (every pair) and ``strategy_config`` (per pair)."""

    pair: str
    common: Mapping[str, Any]
    per_pair: Mapping[str, Mapping[str, Any]]

    def settings(self, pair: str | None = None) -> dict[str, Any]:
        """The keys ``pair`` (the recorded one by default) runs with: ``config`` ← ``strategy_config[pair]``,
        as :func:`shedlab.core.sim.scenario.build_config` layers them."""
        return {**self.common, **self.per_pair.get(pair or self.pair, {})}

    @property
    def config(self) -> dict[str, Any]:
        """The recorded configuration: the recorded pair's settings."""
        return self.settings()

    def bases(self, pairs: Sequence[str]) -> dict[str, dict[str, Any]]:
        """Per pair (and the recorded one) the settings its candidates' parameters apply on."""
        return {pair: self.settings(pair) for pair in dict.fromkeys([self.pair, *pairs])}


def recorded_configuration(refs: Sequence[ScenarioRef], pairs: Sequence[str] = ()) -> Recorded:
    """The configuration every candidate is compared with: the scenarios' own, which they must share.
    Tune measures the change from one cluster's recorded configuration; it took the first scenario's
    silently, so the next one's 'recorded configuration' ran a pair or settings that scenario never had
    (AvgShedder's scenario compared with UniformLoadShedder). Scenarios that disagree on the pair, or
    on the settings the recorded pair or one of ``pairs`` runs with (``config`` ← its
    ``strategy_config``), are refused, naming both and the first difference; a key one of them leaves
    unset is Pulsar's default, so stating the default is no difference."""
    recorded = [
        (r.source, Recorded(r.scenario.strategy, dict(r.scenario.config), r.scenario.strategy_config))
        for r in refs
    ]
    first_source, first = recorded[0]
    for source, other in recorded[1:]:
        if first.pair != other.pair:
            _disagree("strategy", f"the {RECORDED}", (first_source, first.pair), (source, other.pair))
        for pair in dict.fromkeys([first.pair, *pairs]):
            _check_same_settings(pair, (first_source, first), (source, other))
    return first


def _check_same_settings(pair: str, a: tuple[str, Recorded], b: tuple[str, Recorded]) -> None:
    mine, theirs = a[1].settings(pair), b[1].settings(pair)
    for key in sorted({*mine, *theirs}):
        if _same(recorded_value(key, mine), recorded_value(key, theirs)):
            continue
        per_pair = key in a[1].per_pair.get(pair, {}) or key in b[1].per_pair.get(pair, {})
        field = f"strategy_config.{pair}.{key}" if per_pair else f"config.{key}"
        what = f"the {RECORDED}" if pair == a[1].pair else f"the settings {pair} runs with"
        values = (conf_value(recorded_value(key, mine)), conf_value(recorded_value(key, theirs)))
        _disagree(field, what, (a[0], values[0]), (b[0], values[1]))


def _disagree(field: str, what: str, a: tuple[str, Any], b: tuple[str, Any]) -> NoReturn:
    raise InputError(
        f"the scenarios disagree on {what}: {a[0]} has {a[1]}, {b[0]} has {b[1]}",
        field=field,
        hint="tune compares every candidate with one recorded configuration; tune them one at a time, "
        "or give them the same strategy, config and strategy_config",
    )


def recorded_value(key: str, recorded_config: Mapping[str, Any]) -> Any:
    if key in recorded_config:
        return LoadBalancerConfig().with_overrides({key: recorded_config[key]}, source="recorded").get(key)
    return LoadBalancerConfig().get(key)


def _same(a: Any, b: Any) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return str(a) == str(b)


def survivors(table: pd.DataFrame, keep: int) -> list[str]:
    """The ``keep`` best candidates by objective mean, the recorded configuration among them (it takes
    the last place if it did not earn one, so the rung stays within :func:`halving_schedule`'s budget,
    except for ``keep == 1``, where the best and the recorded both go on)."""
    ranked = table.sort_values(["objective", "candidate"])["candidate"].tolist()
    recorded = table.loc[table["origin"] == RECORDED, "candidate"].tolist()
    chosen = ranked[:keep]
    for r in recorded:
        if r not in chosen:
            chosen = [*chosen[: max(1, keep - 1)], r]
    return chosen


def pareto_front(table: pd.DataFrame, x: str = "imbalance", y: str = "unloads_per_day") -> list[bool]:
    """Per row: no other candidate is at least as good on both ``x`` and ``y`` and better on one.

    Only the candidates run on the most seeds (the last rung's) take part, when the table says how many
    seeds each had: successive halving drops most candidates after one seed, and a one-seed mean that
    happened to land low would otherwise push a finalist, averaged over every seed, off the front (or
    sit on it itself) on luck alone. The others are never on the front and dominate nothing.
    """
    xs, ys = table[x].to_numpy(dtype=float), table[y].to_numpy(dtype=float)
    if "seeds" in table:
        seeds = table["seeds"].to_numpy(dtype=int)
        eligible = seeds == seeds.max() if seeds.size else np.zeros(0, dtype=bool)
    else:
        eligible = np.ones(len(table), dtype=bool)
    front = []
    for i in range(len(table)):
        beats = (xs <= xs[i]) & (ys <= ys[i]) & ((xs < xs[i]) | (ys < ys[i])) & eligible
        front.append(bool(eligible[i]) and not bool(np.any(beats)))
    return front


@dataclass
class Recommendation:
    """The recommended candidate, its predicted figures, and its improvement over the recorded one."""

    candidate: dict[str, Any]
    recorded: dict[str, Any]
    improvement: dict[str, dict[str, Any]]  # figure → paired difference (recommended − recorded) stats
    seeds: int
    objective: str
    objective_expr: str
    notes: list[str] = field(default_factory=list)

    @property
    def is_recorded(self) -> bool:
        return bool(self.candidate["origin"] == RECORDED)


MIN_GAIN = 0.03
"""A change is recommended only if it lowers the objective by at least this share of the recorded
configuration's value, and (with two seeds or more) the paired 95 % interval of the change is below 0:
a gain inside the noise is not worth a rollout."""


def _paired(scored: pd.DataFrame, key: str, recorded_key: str) -> dict[str, dict[str, Any]]:
    a = scored[scored["candidate"] == key].set_index(["scenario", "seed"])
    b = scored[scored["candidate"] == recorded_key].set_index(["scenario", "seed"])
    common = a.index.intersection(b.index)
    out: dict[str, dict[str, Any]] = {}
    for fig in FIGURES:
        stats = mean_interval((a.loc[common, fig] - b.loc[common, fig]).to_numpy(dtype=float))
        out[fig] = {"mean": stats["mean"], "low": stats["ci_low"], "high": stats["ci_high"], "n": stats["n"]}
    return out


def recommend(table: pd.DataFrame, scored: pd.DataFrame, objective: str) -> Recommendation:
    """The best candidate among those with the most seeds if it clearly beats the recorded configuration
    (:data:`MIN_GAIN`, paired interval below 0), else the recorded configuration; with the paired
    change on the same scenarios and seeds."""
    most = int(table["seeds"].max())
    final = table[table["seeds"] == most].sort_values(["objective", "candidate"])
    best = {str(k): v for k, v in final.iloc[0].to_dict().items()}
    recorded = {str(k): v for k, v in table[table["origin"] == RECORDED].iloc[0].to_dict().items()}
    improvement = _paired(scored, str(best["candidate"]), str(recorded["candidate"]))
    notes = []
    gain = improvement["objective"]
    needed = MIN_GAIN * abs(float(recorded["objective"]))
    # a gain is a strict decrease: with a recorded objective of 0, 3 % of it is 0 and a tie is no gain
    clear = gain["mean"] is not None and -float(gain["mean"]) >= needed and float(gain["mean"]) < 0
    if gain["high"] is not None:
        clear = clear and float(gain["high"]) < 0
    if best["origin"] != RECORDED and not clear:
        notes.append(
            f"the best candidate ({best['label']}) changed the objective by {_fmt(gain['mean'])}"
            + (f" [{_fmt(gain['low'])}, {_fmt(gain['high'])}]" if gain["high"] is not None else "")
            + f": not a clear gain (at least {MIN_GAIN:.0%} and an interval below 0); keep the recorded "
            "configuration, or run more seeds"
        )
        best = recorded
        improvement = _paired(scored, str(recorded["candidate"]), str(recorded["candidate"]))
    if most < 3:
        notes.append(
            f"only {most} seed(s) per candidate: intervals are wide or missing; use --seeds 5 or more"
        )
    return Recommendation(
        best, recorded, improvement, most, objective, objective_expression(objective), notes
    )


def _marginal(
    scored: pd.DataFrame, pair: str, key: str, value: Any, base: Mapping[str, Any]
) -> tuple[float | None, float | None, int, int]:
    """Mean objective of the pair's first-rung runs with ``key = value`` and with any other value, and
    how many runs each. A run without ``key`` in its parameters ran the value of the pair's ``base``
    (a value equal to it is dropped from a candidate): it is one of the others, not left out."""
    runs = scored[(scored["strategy"] == pair) & (scored["seed"] == scored["seed"].min())]
    if runs.empty:
        return None, None, 0, 0
    before = recorded_value(key, base)
    vals = [json.loads(p or "{}").get(key, before) for p in runs["params_json"]]
    mask = np.array([_same(v, value) for v in vals])
    with_v = float(runs.loc[mask, "objective"].mean()) if mask.any() else None
    without = float(runs.loc[~mask, "objective"].mean()) if (~mask).any() else None
    return with_v, without, int(mask.sum()), int((~mask).sum())


def _evidence(
    rec: Recommendation, scored: pd.DataFrame, key: str, value: Any, base: Mapping[str, Any]
) -> str:
    """The first rung's evidence for ``key = value``, as it is: its runs with the value against the
    pair's others. Lower is better; when the value's average was not lower, the line said nothing more
    and so argued against the value it recommended. It then says so, and what decided: the recommended
    settings as a whole against the recorded configuration on every seed."""
    pair = str(rec.candidate["strategy"])
    with_v, without, n, others = _marginal(scored, pair, key, value, base)
    if with_v is None or without is None:
        return ""
    shown = conf_value(value)
    text = (
        f"; first rung (one seed): {n} candidate(s) with {shown} averaged {_fmt(with_v)} on the "
        f"objective, the {others} other(s) {_fmt(without)}"
    )
    if with_v < without:
        return text
    return (
        f"{text}, so {shown} alone did not look better there; it is recommended as part of these "
        f"settings together, which scored {_fmt(rec.candidate['objective'])} against the recorded "
        f"configuration's {_fmt(rec.recorded['objective'])} over the same {rec.seeds} seeds"
    )


def _fmt(v: Any) -> str:
    """A figure in :func:`shedlab.units.significant`'s digits (``1,030``, not ``.3g``'s ``1e+03``),
    ``—`` when it is missing or not finite."""
    return significant(v, missing="—", infinity=("—", "—"))


def _iv(row: Mapping[str, Any] | pd.Series, fig: str) -> str:
    low, high = row.get(f"{fig}_low"), row.get(f"{fig}_high")
    if low is None or high is None or (isinstance(low, float) and math.isnan(low)):
        return _fmt(row[fig])
    return f"{_fmt(row[fig])} [{_fmt(low)}, {_fmt(high)}]"


def broker_conf_fragment(
    rec: Recommendation,
    scored: pd.DataFrame,
    table: pd.DataFrame,
    recorded_config: Mapping[str, Any],
    recorded_pair: str,
    source: str,
) -> str:
    """The recommendation as ``broker.conf`` lines, each after a comment saying why."""
    cand = rec.candidate
    pair = str(cand["strategy"])
    params = json.loads(str(cand["params_json"]))
    base = json.loads(str(cand["base_json"]))
    conf = pair_config(pair)
    lines = [
        f"# shedlab tune: recommended load-balancer settings for {source}",
        f"# objective ({rec.objective}): {rec.objective_expr}, lower is better; "
        f"{rec.seeds} seeds per candidate",
        f"# predicted: imbalance {_iv(cand, 'imbalance')} score points (recorded configuration "
        f"{_iv(rec.recorded, 'imbalance')}), unloads/day {_iv(cand, 'unloads_per_day')} "
        f"(recorded {_iv(rec.recorded, 'unloads_per_day')})",
    ]
    if rec.is_recorded:
        lines.append("# no candidate beat the recorded configuration: keep it (nothing to change)")
        return "\n".join(lines) + "\n"
    same_seeds = table[(table["strategy"] == recorded_pair) & (table["seeds"] == rec.seeds)]
    best_other = float(same_seeds["objective"].min()) if len(same_seeds) else None
    for role in ("shedding", "placement"):
        key = STRATEGY_KEYS[role]
        lines.append(
            f"# why: the {role} half of {pair}; over the same {rec.seeds} seeds the best settings of the "
            f"recorded pair {recorded_pair} scored {_fmt(best_other)} on the objective, these "
            f"{_fmt(cand['objective'])}"
            if pair != recorded_pair
            else f"# why: unchanged {role} strategy ({pair}); stated so the fragment is complete"
        )
        lines.append(f"{key}={conf.get(key)}")
    for key, value in _differences({**base, **params}, recorded_config).items():
        before = conf_value(recorded_value(key, recorded_config))
        doc = key_spec(key).doc.rstrip(".")
        # a key the parameters leave alone comes from the pair's strategy_config in the scenarios: the
        # candidate ran with it, so the cluster must too
        origin = "" if key in params else f" (what {pair} ran with in the scenarios)"
        evidence = _evidence(rec, scored, key, value, base)
        lines.append(f"# why: {doc}. Recorded {before} → {conf_value(value)}{origin}{evidence}")
        lines.append(f"{key}={conf_value(value)}")
    return "\n".join(lines) + "\n"


def tune_markdown(
    table: pd.DataFrame,
    rec: Recommendation,
    rungs: Sequence[Mapping[str, Any]],
    fragment: str,
    *,
    full_grid: int,
) -> str:
    """The tune report: the recommendation, its improvement, the rungs spent, the Pareto front."""
    cand = rec.candidate
    lines = ["# shedlab tune", ""]
    if rec.is_recorded:
        lines.append("**No candidate beat the recorded configuration on the objective.** Keep it.")
    else:
        lines.append(f"**Recommended: {cand['label']}**")
    lines += [
        "",
        f"Objective `{rec.objective}` = `{rec.objective_expr}` (lower is better), {rec.seeds} seeds.",
        "",
    ]
    lines += [
        "| figure | recommended | recorded configuration | change (paired, 95 % CI) |",
        "|---|---|---|---|",
    ]
    for fig in FIGURES:
        imp = rec.improvement[fig]
        change = _fmt(imp["mean"]) + (
            f" [{_fmt(imp['low'])}, {_fmt(imp['high'])}]" if imp["low"] is not None else ""
        )
        lines.append(f"| {fig} | {_iv(cand, fig)} | {_iv(rec.recorded, fig)} | {change} |")
    lines += [
        *[f"\n> {n}" for n in rec.notes],
        "",
        "## broker.conf",
        "",
        "```properties",
        fragment.rstrip(),
        "```",
        "",
    ]
    spent = sum(int(r["new_runs"]) for r in rungs)
    lines += [
        "## Successive halving",
        "",
        f"{spent} runs instead of {full_grid} for every candidate on every seed.",
        "",
        "| rung | candidates | seeds | new runs |",
        "|---|---|---|---|",
    ]
    lines += [f"| {i} | {r['candidates']} | {r['seeds']} | {r['new_runs']} |" for i, r in enumerate(rungs)]
    front = table[table["pareto"]]
    lines += [
        "",
        "## Pareto front (imbalance vs unloads per day)",
        "",
        "| candidate | seeds | imbalance | unloads/day | objective |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['label']} | {r['seeds']} | {_iv(r, 'imbalance')} | {_iv(r, 'unloads_per_day')} "
        f"| {_fmt(r['objective'])} |"
        for _, r in front.sort_values("imbalance").iterrows()
    ]
    return "\n".join(lines) + "\n"


def full_grid_size(space: Space, pairs: Sequence[str], seeds: int) -> int:
    """Runs a blind full grid of the same space would need (every combination × every seed)."""
    total = 1
    for pair in pairs:
        total += max(1, math.prod(len(v) for _, v in space.pair_axes(pair)))
    return total * seeds
