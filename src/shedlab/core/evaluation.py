"""The evaluation of a sweep as data and pandas/NumPy code: metric statistics and the PIP-364 table.

* :func:`metric_stats` — for every scenario × strategy pair × parameter set × summary metric, the
  number of runs (seeds) with a value, mean, sample standard deviation, min, max and the 95 %
  confidence interval of the mean from Student's t distribution (``mean ± t(0.975, n−1)·sd/√n``;
  no interval for n < 2), intersected with the range the metric can take (:func:`metric_range`:
  counts, times and spreads are never negative, so ``16 [-123.8, 155.8]`` unloads becomes
  ``16 [0, 155.8]``; the true mean lies in the range, so the intersection loses no coverage).
* the PIP-364 table — for each strategy pair (and parameter set) one figure per problem: a per-run
  value computed from the run's summary metrics by the definition's ``expr``
  (:func:`pip364_values`) on the scenarios that exhibit the problem, averaged over those runs with
  its 95 % interval (:func:`pip364_stats`), and the rating the thresholds give (:func:`pip364_table`):
  *good* below ``good_below``, *bad* above ``bad_above``, *normal* in between (every figure is
  lower-is-better), and *too few runs* instead of a rating below :data:`MIN_RUNS_TO_RATE` runs: with two
  seeds the interval is so wide that a rating read from the mean alone would claim what was not measured.
  The definitions are data (:data:`PIP364_DEFINITIONS`, ``docs/spark.md``); a
  grid may override any part of them in its ``pip364:`` section (:func:`resolve_definitions`).

Every function takes and returns pandas frames and works on any subset of the groups it computes, so
``shedlab.spark.evaluate`` applies them per group at scale (``groupBy(...).applyInPandas``) and a
notebook applies them to a whole sweep at once (:func:`evaluate_runs`, no Spark needed).
"""

from __future__ import annotations

import ast
import copy
import fnmatch
import functools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from shedlab.core.results import RUN_SUMMARY_ARROW
from shedlab.errors import ConfigError
from shedlab.units import PLAIN_DECIMAL

__all__ = [
    "DEFINITIONS_FILE",
    "DEFINITION_FIELDS",
    "EVALUATION_DIR",
    "EXCLUDED_METRICS",
    "METRIC_STATS_COLUMNS",
    "MIN_RUNS_TO_RATE",
    "PIP364_COLUMNS",
    "PIP364_DEFINITIONS",
    "PIP364_PROBLEMS",
    "PIP364_STATS_COLUMNS",
    "PIP364_VALUE_COLUMNS",
    "STATS_KEYS",
    "TOO_FEW_RUNS",
    "Evaluation",
    "applicable_definitions",
    "evaluate_expression",
    "evaluate_runs",
    "expression_names",
    "expression_range",
    "mean_interval",
    "metric_range",
    "metric_stats",
    "pip364_stats",
    "pip364_table",
    "pip364_values",
    "rate",
    "resolve_definitions",
    "runs_long",
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

EVALUATION_DIR = "evaluation"
"""Where ``shedlab evaluate`` writes by default, inside the sweep directory."""
DEFINITIONS_FILE = "pip364_definitions.json"
"""The definitions an evaluation used (with the scenarios each matched), next to its tables."""

DEFINITION_FIELDS = ("scenarios", "metric", "expr", "unit", "good_below", "bad_above", "description")
"""The fields of a PIP-364 definition (a grid's ``pip364:`` section may set any of them)."""

EXCLUDED_METRICS = ("seed",)
"""Numeric summary values that are not metrics of a run (the seed identifies the run)."""

MIN_RUNS_TO_RATE = 3
"""Fewer runs than this get :data:`TOO_FEW_RUNS` instead of good/normal/bad (two seeds give t = 12.7)."""
TOO_FEW_RUNS = "too few runs"

_METRIC_RANGES: dict[str, tuple[float, float]] = {"balanced_fraction": (0.0, 1.0)}
"""Metrics whose range is narrower than the default ``[0, ∞)``."""

STATS_KEYS = ("scenario", "strategy", "params_id")
"""The groups statistics are computed over (each metric of each group separately)."""
METRIC_STATS_COLUMNS = (
    "scenario",
    "strategy",
    "params_id",
    "params_json",
    "metric",
    "n",
    "mean",
    "stddev",
    "t_crit",
    "ci_half_width",
    "ci_low",
    "ci_high",
    "min",
    "max",
)
"""The columns of the metric statistics (the Spark schema ``METRIC_STATS``)."""
PIP364_VALUE_COLUMNS = ("problem", "strategy", "params_id", "params_json", "value")
"""One PIP-364 figure of one run."""
PIP364_STATS_COLUMNS = (
    "problem",
    "strategy",
    "params_id",
    "params_json",
    "n_runs",
    "value",
    "ci_low",
    "ci_high",
)
"""One PIP-364 figure per problem × strategy pair × parameter set, before its rating."""
PIP364_COLUMNS = (
    "strategy",
    "params_id",
    "params_json",
    "problem",
    "metric",
    "scenarios",
    "n_runs",
    "value",
    "ci_low",
    "ci_high",
    "good_below",
    "bad_above",
    "rating",
)
"""The columns of the PIP-364 table (the Spark schema ``PIP364_TABLE``)."""

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


@functools.lru_cache(maxsize=1024)
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


def rate(
    value: float | None, good_below: float | None, bad_above: float | None, n_runs: int | None = None
) -> str:
    """good / normal / bad for a lower-is-better figure (``n/a`` without a value, :data:`TOO_FEW_RUNS`
    when ``n_runs`` is below :data:`MIN_RUNS_TO_RATE`)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if n_runs is not None and n_runs < MIN_RUNS_TO_RATE:
        return TOO_FEW_RUNS
    if good_below is not None and value < good_below:
        return "good"
    if bad_above is not None and value > bad_above:
        return "bad"
    return "normal"


# ---------------------------------------------------------------------------------------------
# Definitions
# ---------------------------------------------------------------------------------------------


def resolve_definitions(
    *overrides: Mapping[str, Any], source: str = "pip364", prefix: str = ""
) -> dict[str, dict[str, Any]]:
    """The default definitions with each ``overrides`` mapping (a grid's ``pip364:``) merged on top.

    Each definition is checked (a mapping of known fields, thresholds that are numbers with
    ``good_below`` ≤ ``bad_above``, scenario patterns that are strings, an ``expr`` for a new problem);
    a ConfigError names ``source`` and the field, ``prefix`` before it (``pip364.`` for a grid file)."""
    out = copy.deepcopy(PIP364_DEFINITIONS)
    lookup = {p.replace(" ", "_").replace("-", "_").lower(): p for p in PIP364_PROBLEMS}
    for override in overrides:
        for raw_name, spec in (override or {}).items():
            key = str(raw_name).replace(" ", "_").replace("-", "_").lower()
            name = lookup.get(key, str(raw_name))
            where = f"{prefix}{raw_name}"
            if not isinstance(spec, Mapping):
                raise ConfigError("expected a mapping", source=source, field=where)
            unknown = [k for k in spec if k not in DEFINITION_FIELDS]
            if unknown:
                raise ConfigError(
                    "unknown field of a PIP-364 definition",
                    source=source,
                    field=f"{where}.{unknown[0]}",
                    hint=f"known fields: {', '.join(DEFINITION_FIELDS)}",
                )
            merged = dict(out.get(name, {}))
            merged.update(spec)
            if isinstance(merged.get("scenarios"), str):
                merged["scenarios"] = [merged["scenarios"]]
            if "expr" not in merged:
                raise ConfigError("a new PIP-364 problem needs an 'expr'", source=source, field=where)
            _check_definition(merged, source=source, where=where)
            out[name] = merged
    return out


def _finite_number(value: Any) -> float | None:
    """A threshold as a float (a number, or a quoted one as YAML may write it), None if it is not one."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _check_definition(definition: Mapping[str, Any], *, source: str, where: str) -> None:
    """A merged definition's thresholds are numbers (or null) in order, its scenarios strings."""
    bounds: dict[str, float] = {}
    for key in ("good_below", "bad_above"):
        value = definition.get(key)
        if value is None:
            continue
        number = _finite_number(value)
        if number is None:
            raise ConfigError(
                "expected a finite number or null", source=source, field=f"{where}.{key}", value=value
            )
        bounds[key] = number
    if len(bounds) == 2 and bounds["good_below"] > bounds["bad_above"]:
        raise ConfigError(
            f"good_below {bounds['good_below']:g} is above bad_above {bounds['bad_above']:g}",
            source=source,
            field=where,
            hint="a figure is good below good_below and bad above bad_above (lower is better)",
        )
    patterns = definition.get("scenarios")
    if patterns is not None and (
        not isinstance(patterns, list | tuple) or not all(isinstance(p, str) for p in patterns)
    ):
        raise ConfigError(
            "expected a scenario name pattern or a list of them",
            source=source,
            field=f"{where}.scenarios",
            value=patterns,
        )
    expr = definition.get("expr")
    if not isinstance(expr, str) or not expr.strip():
        raise ConfigError(
            "expected an arithmetic expression over metric names",
            source=source,
            field=f"{where}.expr",
            value=expr,
        )


def _float_or_none(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError("expected a number", source="pip364", value=value) from None


# ---------------------------------------------------------------------------------------------
# Per-run expressions
# ---------------------------------------------------------------------------------------------

_FloatArray = np.ndarray
_BINARY: dict[type[ast.operator], Callable[[_FloatArray, _FloatArray], _FloatArray]] = {
    ast.Add: np.add,
    ast.Sub: np.subtract,
    ast.Mult: np.multiply,
    ast.Div: lambda a, b: np.where(b == 0, np.nan, np.divide(a, np.where(b == 0, 1.0, b))),
    ast.Mod: lambda a, b: np.where(b == 0, np.nan, np.fmod(a, np.where(b == 0, 1.0, b))),
}
_FUNCTIONS: dict[str, Callable[..., _FloatArray]] = {
    "abs": np.abs,
    "sqrt": lambda a: np.sqrt(np.where(a < 0, np.nan, a)),
    "ln": lambda a: np.log(np.where(a <= 0, np.nan, a)),
    "pow": np.power,
    "greatest": lambda *a: functools.reduce(np.fmax, a),
    "least": lambda *a: functools.reduce(np.fmin, a),
    "coalesce": lambda *a: functools.reduce(lambda x, y: np.where(np.isnan(x), y, x), a),
}
"""Functions an expression may call (Spark SQL's names and null semantics: ``greatest``/``least``
skip nulls, ``coalesce`` takes the first non-null)."""
_ARITY: dict[str, tuple[int, int | None]] = {"abs": (1, 1), "sqrt": (1, 1), "ln": (1, 1), "pow": (2, 2)}
"""How many arguments a function takes (the others: one or more); ``abs()`` passed the check and was a
TypeError when the runs were scored, after the sweep."""
MAX_EXPRESSION_DEPTH = 100
"""Nesting an expression may have: the evaluators recurse once per level (``-`` × 5,000 was a
RecursionError, × 20,000 a MemoryError from Python's parser)."""


def _allowed(node: ast.AST) -> bool:
    """Whether a syntax node belongs to the arithmetic an ``expr`` may use."""
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
            return False
        least, most = _ARITY.get(node.func.id, (1, None))
        return least <= len(node.args) and (most is None or len(node.args) <= most)
    if isinstance(node, ast.BinOp):
        return type(node.op) in _BINARY
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub | ast.UAdd)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    # names, and the operator/context nodes below the nodes checked above
    return isinstance(node, ast.Name | ast.Load | ast.operator | ast.unaryop)


def _depth(tree: ast.AST) -> int:
    """The nesting depth of a syntax tree (without recursion: the tree may be deep)."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _parse(expr: str) -> ast.expr:
    """The syntax tree of a PIP-364 ``expr``; only arithmetic over metric names is allowed (a grid is
    user input: nothing in it is ever executed as Python)."""
    try:
        tree = ast.parse(str(expr).strip(), mode="eval").body
    except SyntaxError as exc:
        raise ConfigError(f"not an arithmetic expression: {exc.msg}", source="pip364", value=expr) from None
    except (RecursionError, MemoryError):
        tree = None
    if tree is None or _depth(tree) > MAX_EXPRESSION_DEPTH:
        raise ConfigError(
            f"expression nested too deeply (more than {MAX_EXPRESSION_DEPTH} levels)",
            source="pip364",
            value=expr,
        )
    text = str(expr).strip()
    for node in ast.walk(tree):
        _check_number_spelling(node, text, expr)
        if not _allowed(node):
            shown = ast.unparse(node) if isinstance(node, ast.expr) else type(node).__name__
            raise ConfigError(
                f"unsupported in an expression: {shown}",
                source="pip364",
                value=expr,
                hint="use metric names, numbers, + - * / %, parentheses and " + ", ".join(sorted(_FUNCTIONS)),
            )
    return tree


def _check_number_spelling(node: ast.AST, text: str, expr: str) -> None:
    """Refuse a number Python reads but the expression language does not write: ``1_0`` (Python's 10),
    ``0x10`` (16), ``0o17`` (15). They were taken as those values, silently (the literals of every other
    input, ``--seed`` included, are plain decimal digits)."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, int | float):
        return
    spelt = ast.get_source_segment(text, node)
    if spelt is not None and not PLAIN_DECIMAL.fullmatch(spelt):
        raise ConfigError(
            "a number is written in plain decimal digits", source="pip364", field=expr, value=spelt
        )


def expression_names(expr: str) -> set[str]:
    """The metric names an expression reads (raises ConfigError for anything but arithmetic)."""
    tree = _parse(expr)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called}


def evaluate_expression(expr: str, frame: pd.DataFrame) -> _FloatArray:
    """An expression's value for every row of ``frame`` (one column per metric; null/NaN propagate,
    x / 0 is null as in Spark SQL)."""
    tree = _parse(expr)
    n = len(frame)

    def value(node: ast.expr) -> _FloatArray:
        if isinstance(node, ast.Constant):
            return np.full(n, float(cast(float, node.value)))  # _parse admits int/float constants only
        if isinstance(node, ast.Name):
            if node.id not in frame.columns:
                raise ConfigError("unknown metric", source="pip364", field=str(expr), value=node.id)
            return pd.to_numeric(frame[node.id], errors="coerce").to_numpy(dtype=float)
        if isinstance(node, ast.UnaryOp):
            inner = value(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](value(node.left), value(node.right))
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        return _FUNCTIONS[node.func.id](*[value(a) for a in node.args])

    with np.errstate(all="ignore"):
        return np.asarray(value(tree), dtype=float)


_Range = tuple[float, float]
_ANY: _Range = (-math.inf, math.inf)


def _product_range(a: _Range, b: _Range) -> _Range:
    with np.errstate(invalid="ignore"):
        products = [x * y for x in a for y in b]
    if any(math.isnan(p) for p in products):  # 0 · ∞: nothing can be said
        return _ANY
    return (min(products), max(products))


def _binary_range(op: ast.operator, a: _Range, b: _Range) -> _Range:
    if isinstance(op, ast.Add):
        return (a[0] + b[0], a[1] + b[1])
    if isinstance(op, ast.Sub):
        return (a[0] - b[1], a[1] - b[0])
    if isinstance(op, ast.Mult):
        return _product_range(a, b)
    if isinstance(op, ast.Div) and a[0] >= 0 and b[0] >= 0:  # x / 0 is null, so never negative
        return (0.0, math.inf)
    if isinstance(op, ast.Mod) and a[0] >= 0 and b[0] >= 0:
        return (0.0, b[1])
    return _ANY


def expression_range(expr: str) -> tuple[float, float]:
    """The values an ``expr`` can take, by interval arithmetic over :func:`metric_range`: the range a
    PIP-364 figure's confidence interval is kept inside. ``unloads * 3600 / duration_s`` → ``[0, ∞)``;
    anything the arithmetic cannot bound (``ln``, ``pow``, a quotient of signed values) → unbounded."""

    def bound(node: ast.expr) -> _Range:
        if isinstance(node, ast.Constant):
            c = float(cast(float, node.value))
            return (c, c)
        if isinstance(node, ast.Name):
            return metric_range(node.id)
        if isinstance(node, ast.UnaryOp):
            inner = bound(node.operand)
            return (-inner[1], -inner[0]) if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.BinOp):
            return _binary_range(node.op, bound(node.left), bound(node.right))
        assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        args = [bound(a) for a in node.args]
        name = node.func.id
        if name in ("greatest", "least", "coalesce") and args:
            pick = max if name == "greatest" else min
            if name == "coalesce":
                return (min(a[0] for a in args), max(a[1] for a in args))
            return (pick(a[0] for a in args), pick(a[1] for a in args))
        if name in ("abs", "sqrt"):
            return (0.0, math.inf)
        return _ANY

    return bound(_parse(expr))


def _matching(patterns: Sequence[str], scenarios: Sequence[str]) -> list[str]:
    return sorted({s for s in scenarios for p in patterns if fnmatch.fnmatchcase(s, p)})


def applicable_definitions(
    definitions: dict[str, dict[str, Any]], scenarios: Sequence[str], metrics: Collection[str]
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The definitions that can be evaluated on a sweep of ``scenarios`` with ``metrics``, and a note
    for every other one. Records ``matched_scenarios`` in every definition (written next to the table)."""
    usable: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for problem, spec in definitions.items():
        matched = _matching(list(spec.get("scenarios", [])), scenarios)
        spec["matched_scenarios"] = matched
        if not matched:
            notes.append(f"PIP-364 '{problem}': no scenario of the sweep matches {spec.get('scenarios')}")
            continue
        try:
            unknown = sorted(expression_names(str(spec["expr"])) - set(metrics))
        except ConfigError as exc:
            notes.append(f"PIP-364 '{problem}': cannot evaluate {spec['expr']!r}: {exc}"[:300])
            continue
        if unknown:
            notes.append(
                f"PIP-364 '{problem}': cannot evaluate {spec['expr']!r}: unknown metric {unknown[0]!r}"
            )
            continue
        usable[problem] = spec
    return usable, notes


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------


def metric_range(metric: str) -> tuple[float, float]:
    """The values a run metric can take. Every figure of the run summary (docs/metrics.md) is a count, a
    duration, a spread, a standard deviation, a max/min or max/mean ratio, or a fraction: none is
    negative, and the fractions stop at 1. ``tests/core/test_evaluation_ranges.py`` checks this against
    real run summaries, so a new metric that can be negative fails there until it is listed here."""
    return _METRIC_RANGES.get(metric, (0.0, math.inf))


def mean_interval(
    values: Sequence[float] | _FloatArray,
    confidence: float = 0.95,
    bounds: tuple[float, float] = (-math.inf, math.inf),
) -> dict[str, Any]:
    """n, mean, sample standard deviation, t critical value, CI half-width/low/high, min and max of
    ``values`` (nulls/NaN left out); the deviation and interval need n ≥ 2 (else None). The interval is
    intersected with ``bounds``, the range of the figure (the half-width stays the t-interval's)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    n = int(x.size)
    out: dict[str, Any] = {"n": n, "mean": None, "stddev": None, "t_crit": None, "ci_half_width": None}
    out.update({"ci_low": None, "ci_high": None, "min": None, "max": None})
    if n == 0:
        return out
    mean = float(x.sum()) / n
    out.update({"mean": mean, "min": float(x.min()), "max": float(x.max())})
    if n > 1:
        sd = math.sqrt(float(np.sum((x - mean) ** 2)) / (n - 1))
        t = t_critical(n - 1, confidence)
        half = t * sd / math.sqrt(n)
        out.update({"stddev": sd, "t_crit": t, "ci_half_width": half})
        out.update({"ci_low": max(mean - half, bounds[0]), "ci_high": min(mean + half, bounds[1])})
    return out


def metric_stats(long: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Statistics per scenario × strategy × parameter set × metric (:data:`METRIC_STATS_COLUMNS`) of a
    long table of run metrics (``scenario``, ``strategy``, ``params_id``, ``params_json``,
    ``metric``, ``value``; :func:`runs_long`), ordered by those keys. A metric without any value in
    a group has no row."""
    values = pd.to_numeric(long["value"], errors="coerce")
    valid = long.assign(value=values)[values.notna()]
    rows = []
    for key, group in valid.groupby([*STATS_KEYS, "metric"], sort=True, dropna=False):
        scenario, strategy, params_id, metric = key
        rows.append(
            {
                "scenario": scenario,
                "strategy": strategy,
                "params_id": params_id,
                "params_json": group["params_json"].iloc[0],
                "metric": metric,
                **mean_interval(group["value"].to_numpy(dtype=float), confidence, metric_range(str(metric))),
            }
        )
    return _typed(pd.DataFrame(rows, columns=list(METRIC_STATS_COLUMNS)), ("n",))


def _typed(frame: pd.DataFrame, counts: tuple[str, ...]) -> pd.DataFrame:
    """Counts as int64, every other number as float64 (None → NaN), as Spark's ``toPandas`` gives them."""
    out = frame.copy()
    for column in out.columns:
        if column in counts:
            out[column] = out[column].astype("int64")
        elif column in _NUMERIC:
            out[column] = pd.to_numeric(out[column], errors="coerce").astype("float64")
    return out


_NUMERIC = frozenset(
    {
        "mean",
        "stddev",
        "t_crit",
        "ci_half_width",
        "ci_low",
        "ci_high",
        "min",
        "max",
        "value",
        "good_below",
        "bad_above",
    }
)


def runs_long(runs: pd.DataFrame, metrics: Sequence[str]) -> pd.DataFrame:
    """The ``metrics`` columns of a wide runs table as a long table (one row per run × metric)."""
    ids = ["run_id", *STATS_KEYS, "params_json"]
    keep = [m for m in metrics if m not in EXCLUDED_METRICS]
    return runs.melt(id_vars=ids, value_vars=keep, var_name="metric", value_name="value")


# ---------------------------------------------------------------------------------------------
# PIP-364
# ---------------------------------------------------------------------------------------------


def pip364_values(wide: pd.DataFrame, definitions: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """Every run's figure for every problem whose scenarios it ran (:data:`PIP364_VALUE_COLUMNS`;
    ``definitions`` from :func:`applicable_definitions`). Runs without a value are left out."""
    parts = []
    for problem, spec in definitions.items():
        sub = wide[wide["scenario"].isin(list(spec.get("matched_scenarios", [])))]
        if sub.empty:
            continue
        value = evaluate_expression(str(spec["expr"]), sub)
        part = pd.DataFrame(
            {
                "problem": problem,
                "strategy": sub["strategy"],
                "params_id": sub["params_id"],
                "params_json": sub["params_json"],
                "value": value,
            }
        )
        parts.append(part[~np.isnan(value)])
    if not parts:
        return pd.DataFrame(
            {c: pd.Series(dtype=float if c == "value" else object) for c in PIP364_VALUE_COLUMNS}
        )
    values: pd.DataFrame = pd.concat(parts, ignore_index=True)[list(PIP364_VALUE_COLUMNS)]
    return values


def pip364_stats(
    values: pd.DataFrame,
    confidence: float = 0.95,
    definitions: Mapping[str, Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Per problem × strategy pair × parameter set: the runs, the mean figure and its t-interval
    (:data:`PIP364_STATS_COLUMNS`), the interval kept inside the range of the problem's ``expr``
    (:func:`expression_range`) when ``definitions`` are given."""
    rows = []
    for (problem, strategy, params_id), group in values.groupby(
        ["problem", "strategy", "params_id"], sort=True, dropna=False
    ):
        spec = (definitions or {}).get(str(problem))
        bounds = expression_range(str(spec["expr"])) if spec and spec.get("expr") else (-math.inf, math.inf)
        s = mean_interval(group["value"].to_numpy(dtype=float), confidence, bounds)
        rows.append(
            {
                "problem": problem,
                "strategy": strategy,
                "params_id": params_id,
                "params_json": group["params_json"].iloc[0] if "params_json" in group else None,
                "n_runs": s["n"],
                "value": s["mean"],
                "ci_low": s["ci_low"],
                "ci_high": s["ci_high"],
            }
        )
    return _typed(pd.DataFrame(rows, columns=list(PIP364_STATS_COLUMNS)), ("n_runs",))


def pip364_table(stats: pd.DataFrame, definitions: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The PIP-364 table (:data:`PIP364_COLUMNS`): the figures of :func:`pip364_stats` with what they
    measure, the scenarios they were computed on, the thresholds and the rating; ordered by strategy
    pair, parameter set and PIP-364's problem order."""
    pip = stats.copy()
    if len(pip):
        defs = definitions
        pip["metric"] = pip["problem"].map(lambda p: defs[p].get("metric") or defs[p]["expr"])
        pip["scenarios"] = pip["problem"].map(lambda p: ",".join(defs[p].get("matched_scenarios", [])))
        pip["good_below"] = pip["problem"].map(lambda p: _float_or_none(defs[p].get("good_below")))
        pip["bad_above"] = pip["problem"].map(lambda p: _float_or_none(defs[p].get("bad_above")))
        pip["rating"] = [
            rate(v, g, b, n)
            for v, g, b, n in zip(
                pip["value"], pip["good_below"], pip["bad_above"], pip["n_runs"], strict=True
            )
        ]
        order = {p: i for i, p in enumerate([*PIP364_PROBLEMS, *sorted(set(defs) - set(PIP364_PROBLEMS))])}
        pip = (
            pip.assign(_o=pip["problem"].map(order))
            .sort_values(["strategy", "params_id", "_o"])
            .drop(columns="_o")
        )
    return pip.reindex(columns=list(PIP364_COLUMNS)).reset_index(drop=True)


# ---------------------------------------------------------------------------------------------
# A whole sweep, without Spark
# ---------------------------------------------------------------------------------------------


@dataclass
class Evaluation:
    """The evaluation tables of a set of runs."""

    metric_stats: pd.DataFrame
    pip364: pd.DataFrame
    runs: pd.DataFrame  # one row per successful run, one column per metric
    definitions: dict[str, dict[str, Any]]
    notes: list[str] = field(default_factory=list)


_IDENTITY = ("run_id", "scenario", "strategy", "params_id", "params_json", "seed")


def evaluate_runs(
    runs: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    *,
    overrides: Sequence[Mapping[str, Any]] = (),
    confidence: float = 0.95,
) -> Evaluation:
    """Evaluate runs in pandas: ``runs`` has one row per run (``run_id``, ``scenario``, ``strategy``,
    ``params_id``, ``params_json``, ``seed``, ``status``) and one column per metric, as
    :func:`shedlab.core.results.read_sweep_runs` reads a sweep directory; ``metrics`` defaults to every
    numeric (or all-null) column that is not a field of the run summary; ``overrides`` are grids' ``pip364:``
    sections. Failed runs are left out."""
    ok = runs[runs["status"] == "ok"] if "status" in runs else runs
    if metrics is None:
        metrics = [
            str(c)
            for c in ok.columns
            if c not in RUN_SUMMARY_ARROW.names
            and (pd.api.types.is_numeric_dtype(ok[c]) or bool(ok[c].isna().all()))
        ]
    names = sorted(m for m in metrics if m not in EXCLUDED_METRICS)
    wide = ok.reindex(columns=[*_IDENTITY, *names]).sort_values(
        ["scenario", "strategy", "params_id", "seed"], kind="stable"
    )
    wide = wide.reset_index(drop=True)
    stats = metric_stats(runs_long(wide, names), confidence)
    defs = resolve_definitions(*overrides)
    usable, notes = applicable_definitions(defs, sorted(set(wide["scenario"])), names)
    pip = pip364_table(pip364_stats(pip364_values(wide, usable), confidence, usable), defs)
    return Evaluation(metric_stats=stats, pip364=pip, runs=wide, definitions=defs, notes=notes)
