"""shedlab.core.tune without Spark: the space, the candidates, successive halving's budget, the Pareto
front, range-respecting intervals, the recommendation rule and the broker.conf fragment."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shedlab.config import LoadBalancerConfig
from shedlab.core.tune import (
    RECORDED,
    Candidate,
    broker_conf_fragment,
    candidate_table,
    halving_schedule,
    label_of,
    load_space,
    make_candidates,
    pareto_front,
    recommend,
    score_runs,
    tune_markdown,
)
from shedlab.errors import ConfigError
from shedlab.strategies import STRATEGY_PAIRS, resolve_config
from shedlab.strategies.registry import pair_name_of

TS = "ThresholdShedder+LeastLongTermMessageRate"


def _runs_spent(n: int, seeds: int, eta: int) -> int:
    """New runs of a schedule: every rung adds its new seeds for its candidates."""
    spent, done = 0, 0
    for alive, rung_seeds in halving_schedule(n, seeds, eta):
        spent += alive * (rung_seeds - done)
        done = rung_seeds
    return spent


@given(st.integers(3, 400), st.integers(2, 30), st.integers(2, 5))
def test_halving_spends_fewer_runs_than_the_full_grid(n: int, seeds: int, eta: int) -> None:
    rungs = halving_schedule(n, seeds, eta)
    assert rungs[0] == (n, 1)
    assert rungs[-1][1] == seeds
    assert all(a >= b for (a, _), (b, _) in itertools.pairwise(rungs))
    assert _runs_spent(n, seeds, eta) < n * seeds


def test_default_space_is_valid_and_covers_the_issue_keys() -> None:
    space = load_space()
    keys = {k for pair in STRATEGY_PAIRS for k, _ in space.pair_axes(pair)}
    for key in (
        "loadBalancerAvgShedderLowThreshold",
        "loadBalancerAvgShedderHighThreshold",
        "loadBalancerAvgShedderHitCountLowThreshold",
        "loadBalancerAvgShedderHitCountHighThreshold",
        "loadBalancerBrokerThresholdShedderPercentage",
        "loadBalancerHistoryResourcePercentage",
        "loadBalancerMsgRateDifferenceShedderThreshold",
        "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold",
        "maxUnloadPercentage",
        "minUnloadMessage",
        "minUnloadMessageThroughput",
    ):
        assert key in keys


def test_space_values_are_checked_against_the_key_table(tmp_path: Path) -> None:
    path = tmp_path / "space.yaml"
    path.write_text("AvgShedder:\n  maxUnloadPercentage: [0.5, -2]\n")
    with pytest.raises(ConfigError) as err:
        load_space(path)
    assert "maxUnloadPercentage" in str(err.value)
    path.write_text("AvgShedder:\n  loadBalancerAvgShederLowThreshold: [10]\n")
    with pytest.raises(ConfigError):
        load_space(path)


@pytest.mark.parametrize("value", ["0", "''", "[]", "false"])
def test_a_section_that_is_no_mapping_is_refused_and_a_null_one_empty(tmp_path: Path, value: str) -> None:
    """A falsy section was read as no axes (``value or {}``, until 28 Nov 2026)."""
    path = tmp_path / "space.yaml"
    for section in ("common", "AvgShedder"):
        path.write_text(f"{section}: {value}\n")
        with pytest.raises(ConfigError, match=f"{section}: expected a mapping"):
            load_space(path)
    path.write_text("common:\nAvgShedder:\n")
    space = load_space(path)
    assert space.common == () and dict(space.axes) == {"AvgShedder": ()}


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("AvgShedder", "loadBalancerLoadSheddingStrategy", "ThresholdShedder"),
        (TS, "loadBalancerLoadPlacementStrategy", "LeastResourceUsageWithWeight"),
        (TS, "loadBalancerLoadSheddingStrategy", "ThresholdShedder"),  # the section's own: still the pair's
        ("common", "loadBalancerLoadPlacementStrategy", "LeastResourceUsageWithWeight"),
        (
            "common",
            "loadManagerClassName",
            "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
        ),
    ],
)
def test_space_keys_that_choose_the_pair_are_refused(
    tmp_path: Path, section: str, key: str, value: str
) -> None:
    """Under a pair, a strategy or load manager key ran that pair's candidates as another pair (placement
    LeastResourceUsageWithWeight under ThresholdShedder+LeastLongTermMessageRate), still labelled with the
    section's name, or as no pair at all (a Spark task's error): the section name chooses the pair."""
    path = tmp_path / "space.yaml"
    path.write_text(f"{section}:\n  maxUnloadPercentage: [0.2]\n  {key}: [{value}]\n")
    with pytest.raises(ConfigError) as err:
        load_space(path)
    assert err.value.source == str(path) and err.value.field == f"{section}.{key}"
    assert str(err.value).startswith(f"{path}: {section}.{key}: a space cannot change the strategy pair")
    assert "the pair is chosen by the section name" in str(err.value)
    assert repr(value) in str(err.value)


def test_a_pair_given_two_sections_of_a_space_is_refused(tmp_path: Path) -> None:
    """``AvgShedder`` and ``avgshedder`` are one pair: the later section replaced the earlier, silently."""
    path = tmp_path / "space.yaml"
    path.write_text("AvgShedder:\n  maxUnloadPercentage: [0.2]\navgshedder:\n  maxUnloadPercentage: [0.5]\n")
    with pytest.raises(
        ConfigError, match=r"space.yaml: avgshedder: AvgShedder has a section already \(AvgShedder\)"
    ):
        load_space(path)


def test_a_space_may_vary_string_keys_that_do_not_choose_the_pair(tmp_path: Path) -> None:
    """Only the pair's own keys are refused: the split algorithm, say, is a setting like any other."""
    path = tmp_path / "space.yaml"
    path.write_text("AvgShedder:\n  defaultNamespaceBundleSplitAlgorithm: [range_equally_divide]\n")
    assert load_space(path).pair_axes("AvgShedder") == [
        ("defaultNamespaceBundleSplitAlgorithm", ("range_equally_divide",))
    ]


def test_candidates_are_deterministic_and_start_with_the_recorded_configuration() -> None:
    space = load_space()
    a = make_candidates(space, list(STRATEGY_PAIRS), TS, per_pair=6, seed=3)
    b = make_candidates(space, list(STRATEGY_PAIRS), TS, per_pair=6, seed=3)
    assert [c.key for c in a] == [c.key for c in b]
    assert a[0] == Candidate(TS, {}, RECORDED)
    assert len({c.key for c in a}) == len(a)
    # a value equal to the recorded one is not a change
    c = make_candidates(
        space, [TS], TS, per_pair=100, recorded_config={"loadBalancerSheddingGracePeriodMinutes": 10}
    )
    assert all(c_.params.get("loadBalancerSheddingGracePeriodMinutes") != 10 for c_ in c)


def test_labels_are_key_value_differences_never_hashes() -> None:
    cand = Candidate("AvgShedder", {"maxUnloadPercentage": 0.5, "minUnloadMessage": 1000}, "space")
    label = label_of(cand, {})
    assert label == "AvgShedder: maxUnloadPercentage=0.5"  # minUnloadMessage=1000 is Pulsar's default


def test_survivors_keep_the_recorded_configuration_within_the_budget() -> None:
    from shedlab.core.tune import survivors

    table = pd.DataFrame(
        {
            "candidate": ["a", "b", "c", "rec"],
            "objective": [1.0, 2.0, 3.0, 4.0],
            "origin": ["space"] * 3 + [RECORDED],
        }
    )
    assert survivors(table, 2) == ["a", "rec"]
    assert survivors(table, 1) == ["a", "rec"]


def test_pareto_front() -> None:
    table = pd.DataFrame({"imbalance": [1.0, 2.0, 3.0, 2.0], "unloads_per_day": [5.0, 2.0, 1.0, 3.0]})
    assert pareto_front(table) == [True, True, True, False]


def test_pareto_front_compares_only_the_last_rungs_candidates() -> None:
    """A candidate dropped after one seed neither joins the front nor pushes a five-seed finalist off
    it, however good its one-seed mean looks."""
    table = pd.DataFrame(
        {
            "imbalance": [0.5, 2.0, 3.0, 2.5],
            "unloads_per_day": [0.5, 2.0, 1.0, 3.0],
            "seeds": [1, 5, 5, 5],
        }
    )
    assert pareto_front(table) == [False, True, True, False]
    assert pareto_front(table.assign(seeds=[5, 5, 5, 5])) == [True, False, False, False]


def _scored(values: dict[str, list[tuple[float, float]]]) -> tuple[pd.DataFrame, list[Candidate]]:
    """Runs of candidates keyed by a maxUnloadPercentage value ('' = recorded): (spread, unloads) per seed."""
    rows: list[dict[str, Any]] = []
    cands = []
    for value, runs in values.items():
        params = {} if value == "" else {"maxUnloadPercentage": float(value)}
        cands.append(Candidate("AvgShedder", params, RECORDED if value == "" else "space"))
        for seed, (spread, unloads) in enumerate(runs, start=1):
            rows.append({"scenario": "s", "strategy": "AvgShedder", "params_json": json.dumps(params),
                         "seed": seed, "score_spread_mean": spread, "broker_minutes_overloaded": 0.0,
                         "duration_s": 86400.0, "unloads": unloads, "throughput_moved": 0.0})  # fmt: skip
    return score_runs(pd.DataFrame(rows), "balanced"), cands


def test_intervals_respect_the_metric_range() -> None:
    scored, cands = _scored({"": [(0.1, 0.0), (0.2, 1.0), (4.0, 0.0)]})
    table = candidate_table(scored, cands, {})
    assert table.loc[0, "unloads_per_day_low"] == 0.0  # mean ± t·s/√n would go below 0
    assert table.loc[0, "imbalance_low"] == 0.0


def test_a_gain_inside_the_noise_keeps_the_recorded_configuration() -> None:
    scored, cands = _scored({"": [(20, 10), (21, 10), (19, 10)], "0.5": [(19.9, 10), (21.2, 10), (18.7, 10)]})
    table = candidate_table(scored, cands, {})
    rec = recommend(table, scored, "balanced")
    assert rec.is_recorded and rec.notes
    scored, cands = _scored({"": [(20, 10), (21, 10), (19, 10)], "0.5": [(12, 10), (13.1, 10), (11, 10)]})
    rec = recommend(candidate_table(scored, cands, {}), scored, "balanced")
    assert not rec.is_recorded
    assert rec.improvement["objective"]["high"] < 0


def test_fragment_parses_with_shedlabs_config_reader(tmp_path: Path) -> None:
    scored, cands = _scored({"": [(20, 10), (21, 10), (19, 10)], "0.5": [(12, 10), (13.1, 10), (11, 10)]})
    table = candidate_table(scored, cands, {})
    rec = recommend(table, scored, "balanced")
    text = broker_conf_fragment(rec, scored, table, {}, "AvgShedder", "test")
    lines = text.splitlines()
    settings = [i for i, line in enumerate(lines) if line and not line.startswith("#")]
    assert settings and all(lines[i - 1].startswith("# why:") for i in settings)  # a reason per line
    path = tmp_path / "broker.conf"
    path.write_text(text)
    conf = resolve_config(LoadBalancerConfig.from_file(path))
    assert pair_name_of(conf) == "AvgShedder"
    assert conf.get("maxUnloadPercentage") == pytest.approx(0.5)
    assert np.isfinite(rec.candidate["objective"])


def test_a_tie_at_zero_is_no_gain() -> None:
    """The recorded configuration scores 0 (no spread, no unloads): 3 % of 0 is 0, and a candidate that
    also scores 0 'lowered' it by 0 ≥ 0. With one seed (no interval) tune recommended that candidate, a
    rollout for nothing, just because its key sorted before the recorded one."""
    scored, cands = _scored({"": [(0.0, 0.0)], "0.5": [(0.0, 0.0)]})
    table = candidate_table(scored, cands, {})
    rec = recommend(table, scored, "balanced")
    assert rec.is_recorded
    assert rec.improvement["objective"]["mean"] == 0.0


def test_reports_print_large_figures_as_plain_numbers() -> None:
    """A thousand unloads a day came out of ``.3g`` as ``1e+03`` in tune.md and the fragment."""
    scored, cands = _scored(
        {"": [(20, 1000), (21, 1030), (19, 1060)], "0.5": [(12, 100), (13.1, 110), (11, 90)]}
    )
    table = candidate_table(scored, cands, {})
    table["pareto"] = pareto_front(table)
    rec = recommend(table, scored, "balanced")
    fragment = broker_conf_fragment(rec, scored, table, {}, "AvgShedder", "test")
    text = tune_markdown(table, rec, [{"candidates": 2, "seeds": 3, "new_runs": 6}], fragment, full_grid=6)
    assert "e+0" not in text, text
    assert "(recorded 1,030 [" in fragment, fragment


def _why(fragment: str, key: str) -> str:
    lines = fragment.splitlines()
    return lines[lines.index(next(line for line in lines if line.startswith(f"{key}="))) - 1]


def test_why_says_when_the_first_rung_went_against_the_value() -> None:
    """Lower is better, yet the line read 'first rung: 1 candidate(s) with 0.5 averaged 22.5 on the
    objective, the others 21.5' under a recommended 0.5 and stopped there: an argument against it. It
    says that the value did not look better on its own, and what decided (the set over every seed)."""
    recorded = [(20.0, 10.0), (21, 10), (19, 10), (20, 10), (21, 10)]  # objective 22, 23, 21, 22, 23
    scored, cands = _scored(
        {"": recorded, "0.5": [(20.5, 10), (12, 10), (11, 10), (12, 10), (11, 10)], "0.8": [(19, 10)]}
    )
    table = candidate_table(scored, cands, {})
    rec = recommend(table, scored, "balanced")
    assert not rec.is_recorded and rec.candidate["params_json"] == '{"maxUnloadPercentage":0.5}'
    why = _why(broker_conf_fragment(rec, scored, table, {}, "AvgShedder", "test"), "maxUnloadPercentage")
    first = (
        "first rung (one seed): 1 candidate(s) with 0.5 averaged 22.5 on the objective, the 2 other(s) 21.5"
    )
    assert f"{first}, so 0.5 alone did not look better there" in why, why
    assert "which scored 15.3 against the recorded configuration's 22.2 over the same 5 seeds" in why


def test_why_counts_the_recorded_value_among_the_others() -> None:
    """A candidate at the recorded value has the key dropped from its parameters; it was left out of
    'the others', so the evidence compared against the other changed values only (or was missing)."""
    scored, cands = _scored({"": [(20, 10), (21, 10), (19, 10)], "0.5": [(12, 10), (13.1, 10), (11, 10)]})
    table = candidate_table(scored, cands, {})
    rec = recommend(table, scored, "balanced")
    why = _why(broker_conf_fragment(rec, scored, table, {}, "AvgShedder", "test"), "maxUnloadPercentage")
    first = "first rung (one seed): 1 candidate(s) with 0.5 averaged 14 on the objective, the 1 other(s) 22"
    assert why.endswith(f"Recorded 0.2 → 0.5; {first}"), why


def _ref(tmp_path: Path, name: str, config: str) -> Any:
    from shedlab.core.grid import scenario_ref

    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"name: {name}\nduration: 30m\nstrategy: AvgShedder\n{config}\n"
        "hardware: {standard: {cores: 8, nic_gbps: 10}}\nbrokers: [{count: 3}]\n"
        "workloads: [{name: m, bundles: 4, msg_rate_in: 100, msg_size: 1024}]\n"
    )
    return scenario_ref(str(path))


def test_scenarios_share_one_recorded_configuration(tmp_path: Path) -> None:
    """Tune compares with one recorded configuration: scenarios that disagree on a setting are refused
    (naming both files and values); a key one leaves unset is Pulsar's default, not a difference."""
    from shedlab.core.tune import recorded_configuration
    from shedlab.errors import InputError

    grace = "loadBalancerSheddingGracePeriodMinutes"
    a = _ref(tmp_path, "a", f"config: {{{grace}: 30}}")  # 30 is Pulsar's default
    unset = _ref(tmp_path, "unset", "config: {}")
    other = _ref(tmp_path, "other", f"config: {{{grace}: 10}}")
    recorded = recorded_configuration([a, unset])
    assert (recorded.pair, recorded.config) == ("AvgShedder", {grace: 30})
    with pytest.raises(InputError) as exc:
        recorded_configuration([a, unset, other])
    assert str(exc.value).startswith(
        f"config.{grace}: the scenarios disagree on the recorded configuration: {a.source} has 30, "
        f"{other.source} has 10;"
    )
    assert exc.value.exit_code == 2


def test_the_recorded_configuration_is_the_recorded_pairs_strategy_config_too(tmp_path: Path) -> None:
    """A scenario's ``strategy_config`` of its own pair is part of what the cluster runs
    (``build_config``); tune compared ``config`` only: two scenarios whose recorded pair ran different
    settings were tuned as one 'recorded configuration', and the settings of a pair's candidates were
    judged against ``config`` alone."""
    from shedlab.core.tune import recorded_configuration
    from shedlab.errors import InputError

    share = "maxUnloadPercentage"
    half = _ref(tmp_path, "half", f"strategy_config: {{AvgShedder: {{{share}: 0.5}}}}")
    plain = _ref(tmp_path, "plain", "config: {}")
    recorded = recorded_configuration([half])
    assert recorded.config == {share: 0.5}
    with pytest.raises(InputError) as exc:
        recorded_configuration([half, plain])
    assert str(exc.value).splitlines() == [
        f"strategy_config.AvgShedder.{share}: the scenarios disagree on the recorded configuration: "
        f"{half.source} has 0.5, {plain.source} has 0.2; tune compares every candidate with one recorded "
        "configuration; tune them one at a time, or give them the same strategy, config and strategy_config"
    ]
    # another pair's strategy_config: its candidates would run other settings on each scenario
    ts = _ref(tmp_path, "ts", f"strategy_config: {{{TS}: {{{share}: 0.5}}}}")
    assert recorded_configuration([plain, ts]).pair == "AvgShedder"  # TS not tuned: no matter
    with pytest.raises(
        InputError, match=rf"disagree on the settings {re.escape(TS)} runs with: .* has 0.2, .* has 0.5"
    ):
        recorded_configuration([plain, ts], [TS])


def test_candidates_start_from_the_settings_their_pair_runs_with() -> None:
    """load-jitter records UniformLoadShedder and runs AvgShedder with ``maxUnloadPercentage: 0.5``
    (strategy_config). AvgShedder's candidates were judged against ``config`` alone: the space's 0.5 was
    a 'change' (it ran what 'recorded settings' ran, twice), its 1.0 was 'no change' and dropped (so never
    tried: the runs had 0.5), and the settings AvgShedder ran with were in no label and no broker.conf."""
    from shedlab.core.grid import scenario_ref
    from shedlab.core.tune import changes_of, recorded_configuration

    recorded = recorded_configuration([scenario_ref("load-jitter")], ["AvgShedder"])
    assert recorded.pair == "UniformLoadShedder+LeastLongTermMessageRate" and recorded.config == {}
    space = load_space()
    cands = make_candidates(
        space, ["AvgShedder"], recorded.pair, per_pair=1000, recorded_config=recorded.config,
        bases=recorded.bases(["AvgShedder"]),
    )  # fmt: skip
    avg = [c for c in cands if c.strategy == "AvgShedder"]
    assert {c.settings()["maxUnloadPercentage"] for c in avg} == {0.2, 0.5}  # the space's two values
    assert not any(c.params.get("maxUnloadPercentage") == 0.5 for c in avg)  # 0.5 is no change for it
    plain = next(c for c in avg if c.origin == "recorded settings" and not c.params)
    assert label_of(plain, recorded.config) == "AvgShedder: maxUnloadPercentage=0.5"
    assert changes_of(plain, recorded.config) == {"maxUnloadPercentage": 0.5}
    scored, _ = _scored({"": [(20, 10), (21, 10), (19, 10)]})
    scored = pd.concat(
        [scored.assign(strategy=recorded.pair), scored.assign(objective=scored["objective"] / 2)]
    )
    scored["candidate"] = [f"{s}|{{}}" for s in scored["strategy"]]
    mine = [Candidate(recorded.pair, {}, RECORDED), plain]
    table = candidate_table(scored, mine, recorded.config)
    rec = recommend(table, scored, "balanced")
    assert rec.candidate["strategy"] == "AvgShedder"
    fragment = broker_conf_fragment(rec, scored, table, recorded.config, recorded.pair, "load-jitter")
    assert _why(fragment, "maxUnloadPercentage").startswith("# why: ")
    assert "maxUnloadPercentage=0.5" in fragment.splitlines()  # what AvgShedder ran with, to deploy
