"""Chapter 4 of the AvgShedder author's book, reproduced on ``examples/published/ch4-*.yaml``.

Each test asserts a published fact (docs/published.md lists the book's numbers next to shedlab's)
over a few seeds. What does not reproduce is documented there, not asserted here.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd
import pytest

from shedlab.config import LoadBalancerConfig
from shedlab.core.sim import SimulationResult, load_scenario, run_simulation
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies.base import SheddingResult
from shedlab.strategies.uniform_load_shedder import UniformLoadShedder

PUBLISHED = Path(__file__).resolve().parents[3] / "examples" / "published"
TS_LRUWW = "ThresholdShedder+LeastResourceUsageWithWeight"
ULS_LLTMR = "UniformLoadShedder+LeastLongTermMessageRate"
SEEDS = (1, 2, 3)


@cache
def _run(name: str, strategy: str, seed: int) -> SimulationResult:
    return run_simulation(load_scenario(str(PUBLISHED / f"{name}.yaml")), strategy=strategy, seed=seed)


def _cpu(result: SimulationResult) -> pd.DataFrame:
    return result.brokers.pivot(index="tick", columns="broker", values="cpu_pct")


def _ratio(result: SimulationResult) -> pd.Series:
    by_tick = result.brokers.groupby("tick")["msg_rate"]
    return by_tick.max() / by_tick.min()


# ---------------------------------------------------------------- ch. 4 §1.2: heterogeneous cluster


@pytest.mark.parametrize("seed", SEEDS)
def test_uls_heterogeneous_start_matches_the_cpu_panel_and_nothing_fits(seed: int) -> None:
    """Fig. 5-7: .34 at ~20 % CPU carrying the most messages, the others 50-70 %; at a max/min ratio of
    2.2-2.5 the book shows 15 minutes without an unload: no bundle of the busiest broker fits in ULS's
    20 % of the gap."""
    result = _run("ch4-1-uls-heterogeneous", ULS_LLTMR, seed)
    cpu = _cpu(result).loc[0]
    strong, weak = cpu.iloc[0], cpu.iloc[1:]
    assert 15 <= strong <= 25
    assert (weak >= 45).all() and (weak <= 72).all()
    ratio = _ratio(result)
    assert 2.0 <= ratio.loc[:6].median() <= 2.7
    assert result.decisions.empty or result.decisions["tick"].min() >= 7  # nothing before the dip
    rates = result.brokers.pivot(index="tick", columns="broker", values="msg_rate_in").loc[0]
    assert rates.iloc[0] == rates.max()  # the strong machine carries the most messages ...
    assert _cpu(result).iloc[:, 0].max() < 0.5 * _cpu(result).iloc[:, 1:].min().min()  # ... at far less CPU


# ---------------------------------------------------------------- ch. 4 §1.3: load fluctuation


def _leader_ratios(monkeypatch: pytest.MonkeyPatch, seed: int) -> tuple[list[float], SimulationResult]:
    """The max/min message rate UniformLoadShedder reads at each shedding (the published reports'
    rates: what the leader sees, not the instantaneous traffic), and the run."""
    seen: list[float] = []
    shed = UniformLoadShedder.find_bundles_for_unloading

    def spy(self: UniformLoadShedder, snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> SheddingResult:
        rates = snapshot.total_msg_rate()
        seen.append(float(rates.max() / rates.min()))
        return shed(self, snapshot, conf)

    monkeypatch.setattr(UniformLoadShedder, "find_bundles_for_unloading", spy)
    result = run_simulation(load_scenario(str(PUBLISHED / "ch4-2-uls-fluctuation.yaml")), seed=seed)
    return seen, result


def test_uls_fluctuation_the_leader_sees_the_catch_up_through_its_stats_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fig. 9-11: consumers off for a minute, then on with a catch-up burst. Pulsar's rates are each
    broker's 60-s stats windows, so what the leader sees depends on where the owner's window falls in
    the on/off cycle: with the minutes split unevenly (seed 4) its max/min ratio swings across ULS's 1.5
    as the book's does (1.1-2.1); split evenly (seed 1) every window holds the same burst and the ratio
    barely moves (an instantaneous reading would swing 1.4-3.1 there). Either way no bundle of the
    busiest broker fits in 20 % of the gap, so ULS does not unload after the warm-up: the book's ~43
    unloads an hour do not reproduce (docs/published.md says why)."""
    swinging, result = _leader_ratios(monkeypatch, 4)
    after_warmup = swinging[10:]
    assert min(after_warmup) < 1.5 < max(after_warmup)
    assert max(after_warmup) - min(after_warmup) > 1.0
    assert result.summary["unloads"] == 0
    even, result = _leader_ratios(monkeypatch, 1)
    assert max(even[10:]) - min(even[10:]) < 0.2
    assert result.summary["unloads"] == 0


# ---------------------------------------------------------------- ch. 4 §2.2: over placement


@pytest.mark.parametrize("seed", SEEDS)
def test_ts_lruww_first_placements_fall_back_to_random(seed: int) -> None:
    """Log at 15:33:42: "Assign randomly as all 5 brokers are overloaded": on a cluster whose history
    scores start near 0, LRUWW finds no broker 10 points below the average, so placements are random."""
    result = _run("ch4-3-ts-lruww-over-placement", TS_LRUWW, seed)
    skips = result.skips
    fallbacks = skips[(skips["role"] == "placement") & (skips["kind"] == "random_fallback")]
    assert int(fallbacks["count"].sum()) >= 4  # the book: four times in a row (fig. 38)
    assert (fallbacks["tick"] <= 6).any()


def test_ts_lruww_unloaded_bundles_land_on_hot_brokers() -> None:
    """The unloaded bundle goes to a broker already above the average CPU (.83 at 62 % in the log),
    in at least one of the seeds' unloads."""
    hot_landings = 0
    for seed in SEEDS:
        result = _run("ch4-3-ts-lruww-over-placement", TS_LRUWW, seed)
        cpu = _cpu(result)
        decisions = result.decisions
        for tick, destination in zip(
            decisions["tick"].tolist(), decisions["destination"].tolist(), strict=True
        ):
            before = cpu.loc[tick]
            if destination in before.index and before[destination] > before.mean():
                hot_landings += 1
    assert hot_landings >= 1


# ---------------------------------------------------------------- ch. 4 §2.3: over unloading


@pytest.mark.parametrize("seed", SEEDS)
def test_ts_lruww_over_unloading_swings_the_hottest_broker(seed: int) -> None:
    """Fig. 39-42: .206 (broker-0003, 87 %) is shed minute after minute while its history score lags,
    falls to ~40 % and becomes the coldest broker; .83 (broker-0001, 47 %) climbs above 85 %."""
    result = _run("ch4-4-ts-lruww-over-unloading", TS_LRUWW, seed)
    cpu = _cpu(result)
    b83, _b32, b206 = cpu.columns
    start = cpu.loc[0]
    assert start[b206] >= 83 and start[b83] <= 50  # the start of fig. 41
    first = result.decisions[result.decisions["tick"] <= 5]
    assert len(first) >= 3 and (first["source"] == b206).all()  # round 1: three or more from .206
    after = cpu.loc[6]
    assert after[b206] == after.min() and after[b206] <= 45  # over unloading: the coldest, ~40 %
    assert cpu[b83].max() >= 85  # .83 made the hottest by round 1's placements


@pytest.mark.parametrize("seed", SEEDS)
def test_ts_lruww_over_unloading_needs_more_rounds(seed: int) -> None:
    """The book needs three rounds over 30 minutes; the first round's result is never the last."""
    result = _run("ch4-4-ts-lruww-over-unloading", TS_LRUWW, seed)
    ticks = sorted(set(result.decisions["tick"].tolist()))
    assert ticks[-1] >= 12  # a later round, after round 1's over unloading
    assert _ratio(result).loc[6:10].median() >= 2.0  # the imbalance round 1 created
