"""The grid format: validation, expansion into run specs, stable ids, the shipped grids (no Spark)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from shedlab.core.grid import (
    RUN_SPEC_COLUMNS,
    canonical_json,
    expand_grid,
    load_grid,
    params_id_of,
    parse_grid,
    run_id_of,
    scenario_ref,
    shipped_grid,
    shipped_grids,
)
from shedlab.errors import ConfigError, InputError

MAX = "maxUnloadPercentage"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GRID = FIXTURES / "grid_tiny.yaml"


def test_grid_expands_to_the_cross_product() -> None:
    grid = load_grid(GRID)
    specs = expand_grid(grid)
    assert grid.size == len(specs) == 2 * 2 * 2 * 2
    assert specs["run_id"].is_unique
    assert set(specs["params_json"]) == {'{"maxUnloadPercentage":0.2}', '{"maxUnloadPercentage":0.5}'}
    # Run ids are stable: the same (scenario, pair, params, seed) always hashes the same.
    assert run_id_of("a", "AvgShedder", {"x": 1}, 3) == run_id_of("a", "AvgShedder", {"x": 1}, 3)
    assert run_id_of("a", "AvgShedder", {"x": 1}, 3) != run_id_of("a", "AvgShedder", {"x": 1}, 4)


def test_shipped_grid_is_valid() -> None:
    grid = load_grid("pip364")
    assert len(grid.strategies) == 5 and len(grid.seeds) == 3
    assert grid.size == len(grid.scenarios) * 15


def test_grid_errors_name_the_field() -> None:
    with pytest.raises(ConfigError, match="unknown grid field"):
        parse_grid({"scenario": ["x"]})
    with pytest.raises(ConfigError, match="no such built-in scenario"):
        parse_grid({"scenarios": ["no-such-scenario"]})
    with pytest.raises(ConfigError):
        parse_grid({"scenarios": ["over-unloading-90-10"], "parameters": {"loadBalancerNoSuchKey": [1]}})
    with pytest.raises(ConfigError):
        parse_grid({"scenarios": ["over-unloading-90-10"], "strategies": ["NoSuchShedder"]})


TOP_K = "loadBalancerMaxNumberOfBundlesInBundleLoadReport"
TRANSFER = "TransferShedder+ExtensibleLeastResourceUsageWithWeight"


@pytest.mark.parametrize(
    ("section", "where"),
    [
        ({"parameters": {TOP_K: [10, 0]}}, "g.yaml: parameters"),
        ({"strategy_parameters": {TRANSFER: {TOP_K: [-1]}}}, f"g.yaml: strategy_parameters.{TRANSFER}"),
        ({"overrides": {TOP_K: -1}}, "g.yaml: overrides"),
    ],
)
def test_a_value_the_pair_refuses_is_refused_with_the_grid(section: dict[str, object], where: str) -> None:
    """TransferShedder with no top bundles would fail in each of its runs, once Spark had started."""
    with pytest.raises(ConfigError) as info:
        parse_grid(
            {"scenarios": ["scale-out"], "strategies": ["AvgShedder", TRANSFER], **section}, source="g.yaml"
        )
    assert str(info.value).startswith(f"{where}: {TOP_K}: with the extensible load manager")


def test_a_scenario_config_the_pair_refuses_is_refused_with_the_grid(tmp_path: Path) -> None:
    """The scenario's own ``config`` under each pair, as its runs layer it: each run had failed in its
    Spark task, the sweep ending with every run a user error."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(
        f"name: kneg\nduration: 10m\nconfig:\n  {TOP_K}: -1\nbrokers:\n  - count: 3\n"
        "workloads:\n  - name: w\n    bundles: 4\n"
    )
    with pytest.raises(ConfigError) as info:
        parse_grid({"scenarios": [str(scenario)], "strategies": ["AvgShedder", TRANSFER]}, source="g.yaml")
    assert str(info.value).startswith(f"{scenario}: config: {TOP_K}: with the extensible load manager")
    assert len(parse_grid({"scenarios": [str(scenario)], "strategies": ["AvgShedder"]}).scenarios) == 1


def test_all_bundles_stays_a_modular_pairs_value() -> None:
    grid = parse_grid(
        {"scenarios": ["scale-out"], "strategies": ["AvgShedder"], "parameters": {TOP_K: [10, -1]}}
    )
    assert len(grid.parameter_sets("AvgShedder")) == 2


def test_specs_have_the_run_spec_columns_longest_first() -> None:
    specs = expand_grid(load_grid(GRID))
    assert tuple(specs.columns) == RUN_SPEC_COLUMNS
    assert specs["cost"].is_monotonic_decreasing
    assert set(specs["brokers_every"]) == {5}


def test_parameter_sets_combine_axes_per_pair_and_overrides() -> None:
    grid = parse_grid(
        {
            "scenarios": ["over-unloading-90-10"],
            "strategies": ["AvgShedder", "ThresholdShedder+LeastResourceUsageWithWeight"],
            "seeds": {"count": 3, "start": 7},
            "parameters": {"maxUnloadPercentage": [0.2, 0.5]},
            "strategy_parameters": {"AvgShedder": {"loadBalancerAvgShedderHitCountLowThreshold": [2, 4]}},
            "overrides": {"loadBalancerSheddingGracePeriodMinutes": 0},
        }
    )
    assert grid.seeds == (7, 8, 9)
    avg = grid.parameter_sets("AvgShedder")
    assert len(avg) == 4 and all(p["loadBalancerSheddingGracePeriodMinutes"] == 0 for p in avg)
    assert len(grid.parameter_sets("ThresholdShedder+LeastResourceUsageWithWeight")) == 2
    assert grid.size == (4 + 2) * 1 * 3 == len(expand_grid(grid))


def test_ids_are_hashes_of_canonical_json() -> None:
    assert params_id_of({}) == "default"
    assert params_id_of({"b": 1, "a": 2}) == params_id_of({"a": 2, "b": 1})
    assert canonical_json({"b": 1, "a": [1, 2]}) == '{"a":[1,2],"b":1}'
    assert len(run_id_of("s", "AvgShedder", {}, 1)) == 20
    spec = expand_grid(load_grid(GRID)).iloc[0]
    params = json.loads(spec["params_json"])
    assert spec["params_id"] == params_id_of(params)
    assert spec["run_id"] == run_id_of(spec["scenario"], spec["strategy"], params, spec["seed"])


def test_the_size_is_told_as_the_product_of_every_axis() -> None:
    """The sweep's first line said '2 scenario(s) × 2 strategy pair(s) × 2 seed(s) = 16 runs' for the
    tiny grid: its two parameter sets were left out of the product."""
    assert (
        load_grid("tiny").factors() == "2 scenario(s) × 2 strategy pair(s) × 2 parameter set(s) × 2 seed(s)"
    )
    assert load_grid("pip364").factors() == "11 scenario(s) × 5 strategy pair(s) × 3 seed(s)"  # one set
    uneven = parse_grid(
        {
            "scenarios": ["scale-out"],
            "strategies": ["AvgShedder", "ThresholdShedder+LeastResourceUsageWithWeight"],
            "seeds": [1, 2],
            "parameters": {"maxUnloadPercentage": [0.2, 0.5]},
            "strategy_parameters": {"AvgShedder": {"loadBalancerAvgShedderHitCountHighThreshold": [1, 2, 4]}},
        }
    )
    assert uneven.factors() == "1 scenario(s) × (6 + 2) parameter set(s) over 2 strategy pair(s) × 2 seed(s)"
    assert uneven.size == 1 * (6 + 2) * 2 == len(expand_grid(uneven))


def test_shipped_grids_lookup(tmp_path: Path) -> None:
    assert {"pip364", "tiny"} <= set(shipped_grids())
    assert shipped_grid("no-such-grid") is None
    assert load_grid("tiny").source == "builtin:tiny"
    with pytest.raises(InputError, match="grid file not found"):
        load_grid(tmp_path / "missing.yaml")


def test_a_shipped_grids_name_is_that_grid_whatever_the_directory_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sweep tiny --out tiny`` run a second time read its own output directory ``./tiny`` as the grid
    ('expected a grid file, found a directory') instead of resuming."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny" / "runs").mkdir(parents=True)  # a sweep's output, named after its grid
    assert load_grid("tiny").source == "builtin:tiny"
    (tmp_path / "pip364").write_text("not: a grid\n", encoding="utf-8")
    assert load_grid("pip364").source == "builtin:pip364"  # a bare shipped name is never a file
    mine = GRID.read_text(encoding="utf-8").replace("name: tiny", "name: mine")
    (tmp_path / "capacity").write_text(mine, encoding="utf-8")
    assert load_grid("./capacity").name == "mine"  # a path names the file
    with pytest.raises(InputError, match=r"^tiny: expected a grid file, found a directory"):
        load_grid("tiny/")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("tnyy", "tnyy: no shipped grid or grid file of this name; did you mean 'tiny'?"),
        ("pip-364", "pip-364: no shipped grid or grid file of this name; did you mean 'pip364'?"),
        ("tnyy.yaml", "tnyy.yaml: grid file not found; did you mean 'tiny'?"),
        ("zzzz", "zzzz: no shipped grid or grid file of this name; shipped grids: capacity, pip364, "),
        ("zzzz.yml", "zzzz.yml: grid file not found"),
    ],
)
def test_a_mistyped_shipped_grid_gets_the_closest_name(
    name: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A mistyped scenario got 'did you mean', a mistyped grid only 'grid file not found'."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as info:
        load_grid(name)
    assert str(info.value).startswith(message), str(info.value)


# ------------------------------------------------------------------------------------- bad grids (hardening)


_FALSY_NON_MAPPINGS: tuple[object, ...] = (0, "", [], False)


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ({"scenarios": []}, "scenarios: expected at least one scenario"),
        ({"scenarios": ["scale-out"], "seeds": [-1]}, r"seeds: a seed is an integer in \[0, "),
        ({"scenarios": ["scale-out"], "seeds": {"count": 10**12}}, "seeds.count: must be between 1 and"),
        ({"scenarios": ["scale-out"], "seeds": {"count": 2, "start": -1}}, "seeds: a seed"),
        ({"scenarios": ["scale-out"], "seeds": {"count": 2, "stat": 1}}, "seeds.stat: unknown field"),
        ({"scenarios": ["scale-out"], "seeds": ["x"]}, "seeds: expected an integer"),
        ({"scenarios": ["scale-out"], "seeds": [1, 1]}, "expected distinct seeds"),
        # A pair name the resolver does not know names the grid file and field (it named neither).
        (
            {"scenarios": ["scale-out"], "strategies": ["Nope"]},
            r"^g.yaml: strategies\[0\]: unknown strategy pair",
        ),
        (
            {"scenarios": ["scale-out"], "strategies": "AvgShedder+Nope"},
            "^g.yaml: strategies: unknown placement",
        ),
        (
            {"scenarios": ["scale-out"], "strategy_parameters": {"AvgShedr": {"maxUnloadPercentage": [0.1]}}},
            "^g.yaml: strategy_parameters.AvgShedr: unknown strategy pair .*did you mean 'AvgShedder'",
        ),
        # a section of a pair the grid does not run: its axes never ran, silently (until 29 Nov 2026)
        (
            {
                "scenarios": ["scale-out"],
                "strategies": ["AvgShedder"],
                "strategy_parameters": {
                    "UniformLoadShedder+LeastLongTermMessageRate": {"maxUnloadPercentage": [0.1]}
                },
            },
            r"^g.yaml: strategy_parameters.UniformLoadShedder\+LeastLongTermMessageRate: the grid does not "
            r"run this pair: .*\(got \['AvgShedder'\]\)",
        ),
        # The pip364 section is checked at load, not first by evaluate after the whole sweep ran.
        (
            {"scenarios": ["scale-out"], "pip364": {"load jitter": {"good_below": "x"}}},
            "g.yaml: pip364.load jitter.good_below: expected a finite number or null",
        ),
        (
            {"scenarios": ["scale-out"], "pip364": {"mine": {"expr": "unloads", "bad_above": [3]}}},
            "g.yaml: pip364.mine.bad_above: expected a finite number",
        ),
        (
            {
                "scenarios": ["scale-out"],
                "pip364": {"mine": {"expr": "unloads", "good_below": 5, "bad_above": 3}},
            },
            "g.yaml: pip364.mine: good_below 5 is above bad_above 3",
        ),
        (
            {"scenarios": ["scale-out"], "pip364": {"slow load balancing": {"bad_above": 10}}},
            "pip364.slow load balancing: good_below 25 is above bad_above 10",
        ),
        (
            {"scenarios": ["scale-out"], "pip364": {"mine": {"expr": "unloads", "scenarios": [1]}}},
            "g.yaml: pip364.mine.scenarios: expected a scenario name pattern",
        ),
        (
            {"scenarios": ["scale-out"], "pip364": {"mine": {"good_below": 1}}},
            "g.yaml: pip364.mine: a new PIP-364 problem needs an 'expr'",
        ),
        (
            {"scenarios": ["scale-out"], "pip364": {"mine": {"expr": "unloads", "rating": 1}}},
            "g.yaml: pip364.mine.rating: unknown field of a PIP-364 definition",
        ),
        (
            {
                "scenarios": ["scale-out"],
                "strategy_parameters": {
                    "AvgShedder": {"maxUnloadPercentage": [0.2]},
                    "avgshedder": {"maxUnloadPercentage": [0.5]},
                },
            },
            r"^g.yaml: strategy_parameters.avgshedder: AvgShedder has a section already \(AvgShedder\)",
        ),
        # a key in two places: an override replaced by an axis, an axis whose sets repeat (29 Nov 2026)
        (
            {"scenarios": ["scale-out"], "parameters": {MAX: [0.2, 0.3]}, "overrides": {MAX: 0.9}},
            r"^g.yaml: overrides.maxUnloadPercentage: parameters varies this key: an override of it would "
            r"be replaced in every run \(got 0.9\)",
        ),
        (
            {
                "scenarios": ["scale-out"],
                "strategy_parameters": {"AvgShedder": {MAX: [0.5]}},
                "overrides": {MAX: 0.9},
            },
            r"^g.yaml: overrides.maxUnloadPercentage: strategy_parameters.AvgShedder varies this key",
        ),
        (
            {
                "scenarios": ["scale-out"],
                "parameters": {MAX: [0.2, 0.3]},
                "strategy_parameters": {"AvgShedder": {MAX: [0.5]}},
            },
            r"^g.yaml: strategy_parameters.AvgShedder.maxUnloadPercentage: parameters has this key already",
        ),
        # a strategy key ran another pair under the grid's pair's name (until 29 Nov 2026)
        *(
            (
                {"scenarios": ["scale-out"], "strategies": ["AvgShedder"], **extra},
                rf"^g.yaml: {field}: a grid cannot change the strategy pair",
            )
            for extra, field in (
                (
                    {"parameters": {"loadBalancerLoadPlacementStrategy": ["LeastResourceUsageWithWeight"]}},
                    "parameters.loadBalancerLoadPlacementStrategy",
                ),
                (
                    {"overrides": {"loadBalancerLoadSheddingStrategy": "UniformLoadShedder"}},
                    "overrides.loadBalancerLoadSheddingStrategy",
                ),
                (
                    {"strategy_parameters": {"AvgShedder": {"loadManagerClassName": ["x"]}}},
                    "strategy_parameters.AvgShedder.loadManagerClassName",
                ),
            )
        ),
        # a falsy non-mapping was read as "none" (``or {}``, until 28 Nov 2026)
        *(
            ({"scenarios": ["scale-out"], key: value}, f"^g.yaml: {key}: expected a mapping")
            for key in ("parameters", "strategy_parameters", "overrides", "pip364")
            for value in _FALSY_NON_MAPPINGS
        ),
    ],
)
def test_bad_grids_are_refused_at_load(grid: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_grid(grid, source="g.yaml")


def test_two_pairs_may_vary_one_key_each_their_own_way() -> None:
    axes = {"AvgShedder": {MAX: [0.5]}, "UniformLoadShedder+LeastLongTermMessageRate": {MAX: [0.2, 0.3]}}
    grid = parse_grid({"scenarios": ["scale-out"], "strategies": list(axes), "strategy_parameters": axes})
    assert grid.size == 3


def test_null_sections_are_empty() -> None:
    grid = parse_grid({"scenarios": ["scale-out"], "parameters": None, "overrides": None, "pip364": None})
    assert grid.parameters == () and grid.overrides == () and grid.pip364 == {}


def test_pip364_overrides_as_written_still_work() -> None:
    grid = parse_grid(
        {"scenarios": ["scale-out"], "pip364": {"load jitter": {"good_below": "10", "bad_above": None}}}
    )
    assert grid.pip364 == {"load jitter": {"good_below": "10", "bad_above": None}}


def test_seeds_as_written_still_work() -> None:
    assert parse_grid({"scenarios": ["scale-out"], "seeds": ["3", 4.0]}).seeds == (3, 4)
    assert parse_grid({"scenarios": ["scale-out"], "seeds": {"count": 3, "start": 0}}).seeds == (0, 1, 2)


def test_a_grid_file_with_a_duplicate_key_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text("scenarios: [scale-out]\nseeds: [1]\nseeds: [2]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"'seeds' appears twice in one mapping \(at line 3"):
        load_grid(path)


def test_a_name_too_long_for_a_results_directory_is_refused_at_load(tmp_path: Path) -> None:
    """``scenario=<name>`` is a directory of every results table: a name past 255 bytes (escaped) failed
    every run of it in the Spark tasks (Errno 36, a Java stack trace, the job aborted)."""
    import importlib.resources

    text = (
        importlib.resources.files("shedlab")
        .joinpath("data", "scenarios", "over-unloading-90-10.yaml")
        .read_text(encoding="utf-8")
    )
    long_name = tmp_path / "long.yaml"
    long_name.write_text(text.replace("name: over-unloading-90-10", "name: " + "n" * 250), encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"^g.yaml: scenarios\[1\]: the scenario name is too long .* 259 bytes"
    ):
        parse_grid({"scenarios": ["scale-out", str(long_name)]}, source="g.yaml")
    slashes = tmp_path / "slashes.yaml"  # '/' is written %2F: three bytes each
    slashes.write_text(text.replace("name: over-unloading-90-10", "name: " + "a/" * 90), encoding="utf-8")
    with pytest.raises(ConfigError, match="too long"):
        parse_grid({"scenarios": [str(slashes)]}, source="g.yaml")
    fits = tmp_path / "fits.yaml"
    fits.write_text(text.replace("name: over-unloading-90-10", "name: " + "n" * 246), encoding="utf-8")
    assert parse_grid({"scenarios": [str(fits)]}).scenarios[0].name == "n" * 246


def test_a_scenario_file_that_is_a_pipe_is_read_once(tmp_path: Path) -> None:
    """``tune <(cat twin.yaml)`` was 'scenario file not found' (until 29 Nov 2026): the text is read once,
    here, and shipped to the executors as a file's is."""
    pipe = tmp_path / "s.yaml"
    os.mkfifo(pipe)
    text = "name: piped\nduration: 10m\nbrokers:\n  - count: 2\nworkloads:\n  - name: w\n    bundles: 2\n"

    def write() -> None:
        with pipe.open("w", encoding="utf-8") as out:  # blocks until the reader opens it
            out.write(text)

    threading.Thread(target=write, daemon=True).start()
    ref = scenario_ref(str(pipe))
    assert (ref.name, ref.text, ref.source) == ("piped", text, str(pipe))
