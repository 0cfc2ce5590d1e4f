"""Chapter 5 of the AvgShedder author's book, reproduced on ``examples/published/ch5-*.yaml``.

Each scenario's header cites the book's page and figures and derives its parameters from them;
``docs/published.md`` ("Chapter 5") puts the book's numbers and shedlab's side by side. Only facts the
simulator reproduces are asserted; §5.2's single shedding operation, which reproduces in most seeds
but not all, is asserted over ten seeds and is a strict xfail on seeds 1-3, so a change shows up.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from shedlab.core.sim import SimulationResult, load_scenario, run_simulation

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "published"
MIB = 1024 * 1024


@cache
def _run(name: str, seed: int, strategy: str = "AvgShedder") -> SimulationResult:
    return run_simulation(load_scenario(EXAMPLES / f"{name}.yaml"), strategy=strategy, seed=seed)


def _reason(row: pd.Series) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(row["reason"])
    return value


# ---------------------------------------------------------------- §5.1.1 heterogeneous environment


@pytest.mark.parametrize("seed", [1, 2])
def test_heterogeneous_strong_machine_keeps_lowest_cpu_and_nothing_moves(seed: int) -> None:
    result = _run("ch5-heterogeneous", seed)
    assert result.decisions.empty  # "the current AvgShedder algorithm cannot achieve this"
    cpu = result.brokers.pivot(index="tick", columns="broker", values="cpu_pct")
    strong = cpu["broker-0004:8080"]
    weak = cpu.drop(columns="broker-0004:8080").min(axis=1)
    assert (strong < weak).all()  # XXX.34 "remains the lowest"
    assert strong.median() < 0.5 * weak.median()  # "less than half" (book: 27.3 vs 56.1 at 18:03)
    ratio = result.ticks["throughput_max_min_ratio"]
    assert 8.0 <= ratio.median() <= 12.0 and ratio.max() >= 10.5  # image 49: 8.2 .. 11.3
    # The (XXX.34, XXX.83) pair does reach 8 hits; the traffic gap points from XXX.34 to XXX.83.
    assert (result.skips["kind"] == "amount_below_minimum").any()


# ---------------------------------------------------------------- §5.1.2 stop/resume consumption


@pytest.mark.parametrize("seed", [1, 2])
def test_stop_resume_consumers_trigger_no_unload(seed: int) -> None:
    result = _run("ch5-stop-resume", seed)
    assert result.decisions.empty  # image 53: the unload counter stays flat
    assert int(result.ticks["unload_bundle_total"].iloc[-1]) == 0


# ---------------------------------------------------------------- §5.2 three pressure tasks


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pressure_tasks_unload_at_the_eighth_consecutive_hit(seed: int) -> None:
    result = _run("ch5-homogeneous-pressure", seed)
    first_tick = int(result.decisions["tick"].min())
    first = result.decisions[result.decisions["tick"] == first_tick]
    # The traffic starts at 5m (tick 5, 11:42). The first hit waits for a report that shows the step
    # (a stats or host-usage window after it, then the 5-s check), so the hits run from tick 6 (or 7)
    # and the 8th triggers at tick 13 (or 14): the book's 8 minutes, 11:42 -> 11:50.
    assert first_tick in (13, 14)
    reasons = [_reason(r) for _, r in first.iterrows()]
    # Pulsar triggers a pair when either broker's counter reaches the threshold: in most seeds the hot
    # broker's, in some the cold one's, which a check in between paired with another broker
    assert all(max(r["hit_low_over"], r["hit_low_under"]) == 8 for r in reasons)
    assert all(r["hit_high_over"] == r["hit_high_under"] == 0 for r in reasons)  # gap below 40
    assert set(first["source"]) == {"broker-0001:8080"}  # XXX.83, the hottest
    # the coldest in the leader's view: XXX.161, or XXX.32 when its report still shows a partial window
    assert set(first["destination"]) <= {"broker-0005:8080", "broker-0004:8080"}
    assert 15 <= float(reasons[0]["gap"]) < 40  # book: 63 - 38.5 = 24.5
    assert 3 <= len(first) <= 5  # book: the counter rises by 3 in one operation


def test_pressure_tasks_one_operation_of_three_bundles_in_most_seeds() -> None:
    # The book: one operation, 3 bundles, XXX.83 -> XXX.161, then stability. With each broker's stats
    # and host usage on timers of their own (resolution), the step reaches the leader through several
    # report writes per broker, and its short-term bundle averages are close enough to the real rates
    # for AvgShedder to take the 3 bundles the amount calls for (docs/published.md, Chapter 5).
    book, reverse = 0, 0
    for seed in range(1, 11):
        decisions = _run("ch5-homogeneous-pressure", seed).decisions
        moves = {(s, d) for s, d in zip(decisions["source"], decisions["destination"], strict=True)}
        one = decisions["tick"].nunique() == 1 and len(decisions) == 3
        book += bool(one) and moves == {("broker-0001:8080", "broker-0005:8080")}
        reverse += bool((decisions["destination"] == "broker-0001:8080").any())
    assert book >= 8  # measured: 8 of 10 (seed 1: to XXX.32, seed 6: 5 bundles then back)
    assert reverse <= 1  # measured: 1 of 10 (the tick model without resolution: most seeds)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pressure_ratio_before_and_after(seed: int) -> None:
    ticks = _run("ch5-homogeneous-pressure", seed).ticks.set_index("tick")
    before = ticks.loc[6:12, "throughput_max_min_ratio"]
    assert 2.0 <= before.median() <= 2.7  # images 58/59: ~2.3-2.5 before the unload
    assert ticks["throughput_max_min_ratio"].iloc[-5:].median() <= 2.0  # book: ~1.5-1.7 after


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cpu_spike_without_traffic_change_unloads_nothing(seed: int) -> None:
    result = _run("ch5-homogeneous-pressure", seed)
    # XXX.32 (broker 4) at +35.5 % CPU during tick 18 and +14.5 % during tick 24 (image 60).
    spike = result.brokers[(result.brokers["tick"] == 18) & (result.brokers["broker"] == "broker-0004:8080")]
    assert float(spike["cpu_pct"].iloc[0]) > 75
    near = result.decisions[result.decisions["tick"].between(18, 26)]
    # a decision at tick 26 counts 8 hits from tick 19, after the spike (seed 1: XXX.32, which got
    # XXX.83's bundles at tick 14, hands them on)
    during = near[near["tick"] < 26]
    assert "broker-0004:8080" not in set(during["source"]) | set(during["destination"])
    assert all(_reason(r)["hit_high_over"] < 2 for _, r in near.iterrows())  # never the spike's fast path


@pytest.mark.xfail(
    strict=True,
    reason="seed 1: XXX.32's published report keeps a CPU of 36 % where its true CPU is ~43 % (under "
    "the 10-point threshold, so not rewritten until the 15-min maximum), so the leader sees it as the "
    "coldest and sends it the 3 bundles; 12 checks later it hands 1 on to XXX.161 "
    "(docs/published.md, Chapter 5)",
)
def test_pressure_tasks_need_one_operation_only() -> None:
    for seed in (1, 2, 3):
        assert _run("ch5-homogeneous-pressure", seed).decisions["tick"].nunique() == 1


# ---------------------------------------------------------------- §5.2.1 scale-down


@pytest.mark.parametrize("seed", [4, 6, 9])
def test_scale_down_three_bundles_on_three_brokers_and_no_unload(seed: int) -> None:
    # Seeds whose random draws send XXX.161's three bundles to three different brokers, as in the book's
    # log (probability 4*3*2/4**3 = 3/8 per run).
    result = _run("ch5-scale-down", seed)
    bundles = result.brokers.pivot(index="tick", columns="broker", values="bundles")
    gained = (bundles.loc[6] - bundles.loc[4]).drop("broker-0005:8080")
    assert sorted(int(g) for g in gained.to_numpy(dtype=int)) == [0, 1, 1, 1]  # one broker gets nothing
    assert result.decisions.empty  # the gap does not stay above 15 for 8 checks


def test_scale_down_bundles_placed_at_random() -> None:
    # The planned destination of every bundle is its dead owner: each lookup hashes a random int.
    gains = []
    for seed in range(1, 9):
        bundles = _run("ch5-scale-down", seed).brokers.pivot(index="tick", columns="broker", values="bundles")
        gained = (bundles.loc[6] - bundles.loc[4]).drop("broker-0005:8080")
        gains.append(tuple(int(g) for g in gained.to_numpy(dtype=int)))
    assert all(sum(g) == 3 for g in gains)
    assert len(set(gains)) > 3


# ---------------------------------------------------------------- §5.2.2 scale-up


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_scale_up_unloads_two_checks_after_the_join(seed: int) -> None:
    result = _run("ch5-scale-up", seed)
    first_tick = int(result.decisions["tick"].min())
    assert first_tick == 6  # the broker joins at tick 5: hits at ticks 5 and 6
    first = result.decisions[result.decisions["tick"] == first_tick]
    reasons = [_reason(r) for _, r in first.iterrows()]
    assert all(r["hit_high_over"] == 2 and float(r["gap"]) >= 40 for r in reasons)
    assert set(first["source"]) == {"broker-0001:8080"}  # XXX.161, the hottest
    assert set(first["destination"]) == {"broker-0005:8080"}  # XXX.87, the new one
    after = result.brokers[result.brokers["tick"] == 8].set_index("broker")["throughput_in"] / MIB
    hot, new = float(after["broker-0001:8080"]), float(after["broker-0005:8080"])
    assert abs(hot - new) <= 0.35 * max(hot, new)  # book: ~42 and ~44 MiB/s in
