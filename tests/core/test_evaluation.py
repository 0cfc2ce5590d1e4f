"""Metric statistics and the PIP-364 table in pandas, against hand-computed values (no Spark)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from shedlab.core.evaluation import (
    METRIC_STATS_COLUMNS,
    MIN_RUNS_TO_RATE,
    PIP364_COLUMNS,
    PIP364_DEFINITIONS,
    TOO_FEW_RUNS,
    applicable_definitions,
    evaluate_expression,
    evaluate_runs,
    expression_names,
    expression_range,
    mean_interval,
    metric_range,
    metric_stats,
    rate,
    resolve_definitions,
    t_critical,
)
from shedlab.errors import ConfigError

# Student's t, two-sided 95 % (from tables)
T_TABLE = {1: 12.706204736, 2: 4.302652730, 3: 3.182446305, 5: 2.570581836, 10: 2.228138852, 30: 2.042272456}


@pytest.mark.parametrize(("df", "expected"), sorted(T_TABLE.items()))
def test_t_critical(df: int, expected: float) -> None:
    assert t_critical(df) == pytest.approx(expected, abs=1e-8)


def test_rating_and_definitions() -> None:
    assert rate(1.0, 2.0, 5.0) == "good"
    assert rate(3.0, 2.0, 5.0) == "normal"
    assert rate(6.0, 2.0, 5.0) == "bad"
    assert rate(None, 2.0, 5.0) == "n/a"
    defs = resolve_definitions({"load_jitter": {"good_below": 1}})
    assert defs["load jitter"]["good_below"] == 1
    assert defs["load jitter"]["expr"] == PIP364_DEFINITIONS["load jitter"]["expr"]


def test_rating_exactly_on_a_threshold_is_normal() -> None:
    # good strictly below good_below, bad strictly above bad_above
    assert rate(40.0, 40.0, 60.0) == "normal"
    assert rate(60.0, 40.0, 60.0) == "normal"
    assert rate(math.nextafter(40.0, 0.0), 40.0, 60.0) == "good"
    assert rate(math.nextafter(60.0, 100.0), 40.0, 60.0) == "bad"


def test_t_interval_of_three_known_values() -> None:
    s = mean_interval([1.0, 2.0, 3.0, float("nan")])
    assert s["n"] == 3 and s["mean"] == 2.0 and s["min"] == 1.0 and s["max"] == 3.0
    assert s["stddev"] == pytest.approx(1.0, rel=1e-15)  # the sample deviation (n − 1), as Spark's stddev
    half = T_TABLE[2] / math.sqrt(3)
    assert s["ci_half_width"] == pytest.approx(half, rel=1e-9)
    assert (s["ci_low"], s["ci_high"]) == (
        pytest.approx(2 - half, rel=1e-9),
        pytest.approx(2 + half, rel=1e-9),
    )
    one = mean_interval([5.0])
    assert one["n"] == 1 and one["mean"] == 5.0 and one["stddev"] is None and one["ci_low"] is None


def _long(rows: list[tuple[str, str, float | None]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"run_id": f"r{i}", "scenario": sc, "strategy": "P", "params_id": "default", "params_json": "{}",
             "metric": metric, "value": value}
            for i, (sc, metric, value) in enumerate(rows)
        ]
    )  # fmt: skip


def test_metric_stats_groups_and_orders() -> None:
    long = _long([("b", "x", 1.0), ("a", "y", 4.0), ("a", "x", 2.0), ("a", "x", 6.0), ("a", "z", None)])
    stats = metric_stats(long)
    assert tuple(stats.columns) == METRIC_STATS_COLUMNS
    assert list(zip(stats["scenario"], stats["metric"], strict=True)) == [("a", "x"), ("a", "y"), ("b", "x")]
    ax = stats.iloc[0]
    assert ax["n"] == 2 and ax["mean"] == 4.0 and ax["stddev"] == pytest.approx(math.sqrt(8))
    assert ax["t_crit"] == pytest.approx(T_TABLE[1], abs=1e-8)
    assert np.isnan(stats.iloc[1]["stddev"]) and np.isnan(stats.iloc[1]["t_crit"])
    assert stats["n"].dtype == np.int64
    # applied per group (as Spark's applyInPandas does) or at once: the same rows
    per_group = pd.concat([metric_stats(g) for _, g in long.groupby("scenario")], ignore_index=True)
    pd.testing.assert_frame_equal(per_group, stats)


def test_expressions_are_arithmetic_over_metrics() -> None:
    frame = pd.DataFrame({"a": [1.0, 2.0, np.nan], "b": [2.0, 0.0, 1.0]})
    value = evaluate_expression("a * 3600 / b + 1", frame)
    assert value[0] == 1801.0 and np.isnan(value[1]) and np.isnan(value[2])  # x / 0 and null are null
    assert list(evaluate_expression("greatest(a, b)", frame)) == [2.0, 2.0, 1.0]
    assert list(evaluate_expression("coalesce(a, -b)", frame)) == [1.0, 2.0, -1.0]
    assert expression_names(PIP364_DEFINITIONS["heterogeneous environment"]["expr"]) == {
        "score_spread_mean",
        "broker_minutes_overloaded",
        "duration_s",
    }
    for bad in ("__import__('os')", "a if b else 1", "a.b", "'x'", "a <", "1_0 * a", "0x10 * a", "a + 0o17"):
        with pytest.raises(ConfigError):
            expression_names(bad)


def test_definitions_without_scenarios_or_metrics_are_noted() -> None:
    defs = resolve_definitions({"mine": {"scenarios": "s*", "expr": "nope + 1"}})
    usable, notes = applicable_definitions(defs, ["over-unloading-1", "s1"], ["over_unloading_flips"])
    assert list(usable) == ["over unloading"]
    assert defs["over unloading"]["matched_scenarios"] == ["over-unloading-1"]
    assert any("'mine'" in n and "nope" in n for n in notes)
    assert any("load jitter" in n for n in notes)


def _runs() -> pd.DataFrame:
    rows = []
    for strategy, flips in (("A", [0.0, 1.0, 2.0]), ("B", [0.25, 0.25, 0.25])):
        for seed, f in enumerate(flips, start=1):
            rows.append(
                {"run_id": f"{strategy}{seed}", "scenario": "over-unloading-x", "strategy": strategy,
                 "params_id": "default", "params_json": "{}", "seed": seed, "status": "ok",
                 "over_unloading_flips": f, "unloads": 10.0 * seed}
            )  # fmt: skip
    rows.append({**rows[0], "run_id": "bad", "status": "error", "over_unloading_flips": 99.0})
    return pd.DataFrame(rows)


def test_pip364_table_from_runs() -> None:
    result = evaluate_runs(_runs(), ["over_unloading_flips", "unloads", "seed"])
    pip = result.pip364
    assert tuple(pip.columns) == PIP364_COLUMNS
    assert list(pip["strategy"]) == ["A", "B"] and set(pip["problem"]) == {"over unloading"}
    a, b = pip.iloc[0], pip.iloc[1]
    assert a["n_runs"] == 3 and a["value"] == 1.0  # the failed run is left out
    half = T_TABLE[2] * 1.0 / math.sqrt(3)
    # the t-interval [1 - 2.48, 1 + 2.48] is kept inside the figure's range: flips are never negative
    assert a["ci_low"] == 0.0 and a["ci_high"] == pytest.approx(1 + half)
    assert a["rating"] == "bad"  # 1.0 > bad_above 0.75
    assert b["value"] == pytest.approx(0.25) and b["rating"] == "normal"  # exactly good_below: normal
    assert a["scenarios"] == "over-unloading-x" and a["metric"] == "over-unloading flips per run"
    assert set(result.metric_stats["metric"]) == {"over_unloading_flips", "unloads"}  # not the seed
    assert list(result.runs.columns[-2:]) == ["over_unloading_flips", "unloads"]
    assert len(result.notes) == 4  # the four problems without a scenario here


def test_two_runs_get_too_few_runs_instead_of_a_rating() -> None:
    runs = _runs()
    two = runs[runs["seed"] <= 2]
    pip = evaluate_runs(two, ["over_unloading_flips"]).pip364
    assert list(pip["n_runs"]) == [2, 2]
    assert list(pip["rating"]) == [TOO_FEW_RUNS, TOO_FEW_RUNS]  # not "good" from the mean alone
    assert MIN_RUNS_TO_RATE == 3


def test_metric_intervals_respect_the_metric_range() -> None:
    stats = evaluate_runs(_runs(), ["over_unloading_flips", "unloads"]).metric_stats
    row = stats[(stats["strategy"] == "A") & (stats["metric"] == "unloads")].iloc[0]
    half = T_TABLE[2] * 10.0 / math.sqrt(3)
    assert row["mean"] == 20.0 and row["ci_half_width"] == pytest.approx(half)
    assert row["ci_low"] == pytest.approx(max(20.0 - half, 0.0)) and row["ci_high"] == pytest.approx(
        20 + half
    )
    assert row["ci_low"] >= 0.0
    got = mean_interval([0.1, 0.9], bounds=metric_range("balanced_fraction"))
    assert got["ci_low"] == 0.0 and got["ci_high"] == 1.0  # a fraction's interval stops at 0 and 1


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("unloads * 3600 / duration_s", (0.0, math.inf)),
        ("score_spread_mean + broker_minutes_overloaded * 3600 / duration_s", (0.0, math.inf)),
        ("balanced_fraction * 2", (0.0, 2.0)),
        ("1 - balanced_fraction", (0.0, 1.0)),
        ("unloads - bundles_moved", (-math.inf, math.inf)),
        ("-unloads", (-math.inf, 0.0)),
        ("greatest(unloads, 5)", (5.0, math.inf)),
        ("least(balanced_fraction, 0.5)", (0.0, 0.5)),
        ("abs(unloads - lookups)", (0.0, math.inf)),
        ("ln(unloads)", (-math.inf, math.inf)),
        ("unloads % 7", (0.0, 7.0)),
        ("(0 - unloads) / duration_s", (-math.inf, math.inf)),
    ],
)
def test_expression_range_by_interval_arithmetic(expr: str, expected: tuple[float, float]) -> None:
    assert expression_range(expr) == expected
