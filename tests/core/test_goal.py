"""Issue 15's goal, cell by cell (``core/goal.py``): each test's verdict, the baseline to beat, the
scenario classes read from the scenarios themselves, and the tally."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shedlab.core.goal import (
    AVG,
    GOAL_COLUMNS,
    TS_LRUWW,
    check_challenger,
    goal_cells,
    goal_note,
    goal_tally,
    same_mean,
    same_strategy,
    scenario_class,
    scenario_classes,
    tally_sentence,
    verdict,
)
from shedlab.core.sim.scenario import builtin_scenarios, load_scenario, parse_scenario_text
from shedlab.errors import ConfigError

PROBES = Path(__file__).resolve().parents[2] / "examples" / "capacity-probes"
PLUGIN = "shedlab.strategies.capacity_aware:CapacityAwareShedder"


def _stats(rows: list[tuple[str, str, str, float, float, float]], params_id: str = "default") -> pd.DataFrame:
    """metric_stats rows (scenario, strategy, metric, mean, ci_low, ci_high)."""
    return pd.DataFrame(
        [
            {
                "scenario": sc,
                "strategy": strategy,
                "params_id": params_id,
                "params_json": "{}",
                "metric": metric,
                "n": 10,
                "mean": mean,
                "ci_low": lo,
                "ci_high": hi,
            }
            for sc, strategy, metric, mean, lo, hi in rows
        ]
    )


def _three(
    scenario: str,
    spread: tuple[float, float, float],
    overloaded: tuple[float, float, float],
    unloads: tuple[float, float, float],
) -> list[tuple[str, str, str, float, float, float]]:
    """Challenger, AvgShedder and TS+LRUWW rows of one scenario; each tuple is (challenger, Avg, TS)
    means, every interval ± 1."""
    rows = []
    for metric, means in (
        ("score_spread_mean", spread),
        ("broker_minutes_overloaded", overloaded),
        ("unloads", unloads),
    ):
        for strategy, mean in zip((PLUGIN, AVG, TS_LRUWW), means, strict=True):
            rows.append((scenario, strategy, metric, mean, mean - 1, mean + 1))
    return rows


def test_verdicts_of_each_test() -> None:
    assert verdict("lower", 1.0, 2.0, math.nan) == "won"
    assert verdict("lower", 2.0, 2.0, math.nan) == "tie"
    assert verdict("lower", 3.0, 2.0, math.nan) == "lost"
    assert verdict("not_higher", 2.0, 2.0, math.nan) == "won"
    assert verdict("not_higher", 2.5, 2.0, math.nan) == "lost"
    assert verdict("within_ci", 2.9, 2.0, 3.0) == "won"
    assert verdict("within_ci", 3.0, 2.0, 3.0) == "won"  # at the bound: within
    assert verdict("within_ci", 3.1, 2.0, 3.0) == "lost"
    assert verdict("within_ci", 0.5, 2.0, 3.0) == "won"  # better than AvgShedder is not a failure
    assert verdict("within_ci", 2.1, 2.0, math.nan) == "lost"  # one seed: no interval, the mean
    with pytest.raises(ValueError, match="unknown goal test"):
        verdict("higher", 1.0, 2.0, 3.0)


@given(st.floats(-1e6, 1e6), st.floats(-1e6, 1e6))
def test_lower_is_won_only_below_a_different_mean_and_not_higher_never_ties(
    value: float, baseline: float
) -> None:
    equal = same_mean(value, baseline)
    assert (verdict("lower", value, baseline, math.nan) == "won") == (value < baseline and not equal)
    assert (verdict("lower", value, baseline, math.nan) == "tie") == equal
    assert verdict("not_higher", value, baseline, math.nan) in ("won", "lost")
    assert verdict("lower", baseline, baseline, math.nan) == "tie"


def test_means_of_the_same_runs_summed_in_another_order_tie() -> None:
    """Round 6's figures: no pair moved, the means differ in their last bit (Spark's summing order)."""
    assert verdict("lower", 4.685448237388365, 4.685448237388364, math.nan) == "tie"
    assert verdict("lower", 3.0700045562559555, 3.070004556255956, math.nan) == "tie"
    assert verdict("not_higher", 4.685448237388365, 4.685448237388364, math.nan) == "won"
    assert verdict("within_ci", 3.0000000000001, 2.0, 3.0) == "won"
    assert verdict("lower", 40.28681197627898, 40.271815879883306, math.nan) == "lost"  # a real 0.015


def test_strategies_are_matched_by_class_name() -> None:
    assert same_strategy(PLUGIN, "CapacityAwareShedder")
    assert same_strategy("CapacityAwareShedder", PLUGIN)
    assert same_strategy("ThresholdShedder+LeastResourceUsageWithWeight", TS_LRUWW)
    assert not same_strategy("ThresholdShedder+LeastLongTermMessageRate", TS_LRUWW)
    assert not same_strategy("ThresholdShedder", TS_LRUWW)


def test_heterogeneous_cells_against_the_baseline_to_beat() -> None:
    stats = _stats(
        _three("probe", spread=(12.0, 30.0, 20.0), overloaded=(0.0, 0.0, 0.0), unloads=(9.0, 1.0, 9.0))
    )
    cells = goal_cells(stats, {"probe": "heterogeneous"}, "CapacityAwareShedder")
    assert list(cells.columns) == list(GOAL_COLUMNS)
    by = cells.set_index("criterion")
    assert by.loc["lower spread", "baseline"] == TS_LRUWW  # the lower of the two
    assert by.loc["lower spread", "baseline_value"] == 20.0
    assert by.loc["lower spread", "verdict"] == "won"
    assert not by.loc["lower spread", "by_mean_only"]  # [11, 13] against [19, 21]
    assert by.loc["no more overloaded minutes", "verdict"] == "won"
    assert not by.loc["no more overloaded minutes", "by_mean_only"]  # equal means are not "by the mean"
    assert by.loc["fewer unloads", "baseline"] == TS_LRUWW  # against TS+LRUWW only, not AvgShedder's 1
    assert by.loc["fewer unloads", "verdict"] == "tie"
    assert goal_tally(cells) == {
        "cells": 3,
        "won": 2,
        "tie": 1,
        "lost": 0,
        "won_by_mean_only": 0,
        "lost_by_mean_only": 0,
    }
    assert tally_sentence(cells).startswith("2 of 3 goal cells won")


def test_a_cell_lost_by_the_mean_only() -> None:
    stats = _stats(
        _three("p", spread=(21.0, 30.0, 20.5), overloaded=(1.0, 0.0, 0.5), unloads=(5.0, 1.0, 9.0))
    )
    by = goal_cells(stats, {"p": "heterogeneous"}, "CapacityAwareShedder").set_index("criterion")
    assert by.loc["lower spread", "verdict"] == "lost" and by.loc["lower spread", "by_mean_only"]
    assert by.loc["no more overloaded minutes", "verdict"] == "lost"
    assert by.loc["no more overloaded minutes", "baseline"] == AVG


def test_homogeneous_and_jitter_cells() -> None:
    rows = _three("homogeneous-gap", (20.0, 19.5, 40.0), (0.0, 0.0, 0.0), (3.0, 2.0, 5.0))
    rows += _three("load-jitter", (30.0, 31.0, 35.0), (0.0, 0.0, 0.0), (9.0, 13.0, 15.0))
    classes = {"homogeneous-gap": "homogeneous", "load-jitter": "jitter"}
    cells = goal_cells(_stats(rows), classes, "CapacityAwareShedder")
    got = {(r.scenario, r.criterion): r.verdict for r in cells.itertuples()}
    assert got == {
        ("homogeneous-gap", "spread within AvgShedder's interval"): "won",  # 20 ≤ 19.5 + 1
        ("load-jitter", "spread within AvgShedder's interval"): "won",
        ("load-jitter", "no more unloads than AvgShedder"): "won",
    }


def test_cells_without_their_baseline_or_challenger_are_left_out() -> None:
    rows = [r for r in _three("p", (1.0, 2.0, 3.0), (0.0, 0.0, 0.0), (1.0, 2.0, 3.0)) if r[1] != TS_LRUWW]
    assert goal_cells(_stats(rows), {"p": "heterogeneous"}, "CapacityAwareShedder").empty
    full = _stats(_three("p", (1.0, 2.0, 3.0), (0.0, 0.0, 0.0), (1.0, 2.0, 3.0)))
    assert goal_cells(full, {"p": "heterogeneous"}, "SomeoneElse").empty
    assert goal_cells(full, {"not-swept": "heterogeneous"}, "CapacityAwareShedder").empty


def test_a_baseline_with_several_parameter_sets_is_beaten_by_its_best() -> None:
    rows = _three("p", (15.0, 30.0, 20.0), (0.0, 0.0, 0.0), (1.0, 2.0, 3.0))
    tuned = _stats([("p", TS_LRUWW, "score_spread_mean", 10.0, 9.0, 11.0)], params_id="tuned")
    cells = goal_cells(pd.concat([_stats(rows), tuned]), {"p": "heterogeneous"}, "CapacityAwareShedder")
    spread = cells[cells["criterion"] == "lower spread"].iloc[0]
    assert spread["baseline_value"] == 10.0 and spread["verdict"] == "lost"


def test_scenario_classes_come_from_the_machines() -> None:
    assert scenario_class("load-jitter", False) == "jitter"
    assert scenario_class("homogeneous-gap", False) == "homogeneous"
    assert scenario_class("anything-jitter-like", True) == "heterogeneous"
    for name in builtin_scenarios():
        differ = load_scenario(name).machines_differ
        # over-unloading-90-10's joining broker runs a co-located 8 % process: its machines differ
        assert differ == (name.startswith("heterogeneous") or name == "over-unloading-90-10"), name
    # every probe is a cluster of unequal machines but the eleventh round's, of identical ones (rule 0)
    for probe in sorted(PROBES.glob("probe-*.yaml")):
        identical = probe.stem.startswith("probe-identical-")
        assert load_scenario(probe).machines_differ != identical, probe.name
    jitter = load_scenario(PROBES / "probe-identical-batch-jitter.yaml")
    assert scenario_class(jitter.name, jitter.machines_differ) == "jitter"


_BASE = """
name: s
duration: 10m
hardware:
  a: {cores: 8}
  b: {cores: 8}
brokers:
  - {count: 2, hardware: a}
"""


def test_machines_differ_by_figures_not_by_class_names() -> None:
    same = parse_scenario_text(_BASE + "  - {count: 1, hardware: b}\n", "same")
    assert not same.machines_differ  # two names, one machine
    other = parse_scenario_text(
        _BASE.replace("b: {cores: 8}", "b: {cores: 16}") + "  - {count: 1, hardware: b}\n", "x"
    )
    assert other.machines_differ
    background = parse_scenario_text(_BASE + "  - {count: 1, hardware: a, background: {cpu: 0.2}}\n", "bg")
    assert background.machines_differ
    added = parse_scenario_text(
        _BASE.replace("b: {cores: 8}", "b: {cores: 32}")
        + "events:\n  - {at: 5m, kind: add_brokers, count: 1, hardware: b}\n",
        "added",
    )
    assert added.machines_differ
    changed = parse_scenario_text(
        _BASE + "events:\n  - {at: 5m, kind: background, brokers: [1], background: {cpu: 0.3}}\n", "changed"
    )
    assert changed.machines_differ


def test_scenario_classes_leave_out_texts_this_version_cannot_read() -> None:
    texts = {
        "ok": _BASE,
        "foreign": "name: foreign\nnot_a_field: 1\n",
        "other-keys": "name: k\nstrategy_config:\n  AvgShedder:\n    noSuchKey: 1\n",  # a ConfigError
        "jitter-like": _BASE.replace("name: s", "name: j"),
    }
    assert scenario_classes(texts) == {"ok": "homogeneous", "jitter-like": "jitter"}  # named as swept


def test_a_within_interval_cell_is_never_by_the_mean_only() -> None:
    rows = _three("homogeneous-gap", (19.0, 19.5, 40.0), (0.0, 0.0, 0.0), (3.0, 2.0, 5.0))
    cells = goal_cells(_stats(rows), {"homogeneous-gap": "homogeneous"}, "CapacityAwareShedder")
    assert cells["verdict"].tolist() == ["won"] and not bool(cells["by_mean_only"].iloc[0])


def test_why_there_are_no_cells() -> None:
    both = [AVG, TS_LRUWW]
    assert goal_note([PLUGIN, *both], "CapacityAwareShedder") is None
    assert goal_note(both, "CapacityAwareShedder") is None  # the default challenger, simply not swept
    assert goal_note([PLUGIN, AVG], "CapacityAwareShedder") == (
        f"no goal cells for CapacityAwareShedder: the sweep has no runs of {TS_LRUWW}"
    )
    mine = "HottestBroker+LeastLongTermMessageRate"
    assert goal_note(both, mine) is None  # check_challenger refuses a named one first


def test_a_named_challenger_the_sweep_never_ran_is_refused() -> None:
    both = [AVG, TS_LRUWW]
    mine = "HottestBroker+LeastLongTermMessageRate"
    where = "out/s/sweep.json"
    check_challenger("CapacityAwareShedder", both, where)  # the default may be absent
    check_challenger(mine, [*both, f"my_module:{mine}"], where)  # compared by class name
    with pytest.raises(ConfigError) as typo:
        check_challenger(mine.replace("Hottest", "Hotest"), [*both, mine], where)
    assert str(typo.value) == (
        "out/s/sweep.json: --challenger: the sweep has no runs of this strategy (got"
        " 'HotestBroker+LeastLongTermMessageRate'); did you mean 'HottestBroker+LeastLongTermMessageRate'?"
    )
    with pytest.raises(ConfigError, match=r"\(got 'Foo'\); it ran AvgShedder, ThresholdShedder"):
        check_challenger("Foo", both, where)
