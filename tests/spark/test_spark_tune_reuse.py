"""``shedlab tune`` into a directory that already holds runs: the result is the one a fresh directory
gives (the same inputs, the same candidates, seeds and recommendation), or a one-line refusal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pytest
from builders import twin_sized_scenario

from shedlab.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

SPACE = """
AvgShedder:
  maxUnloadPercentage: [0.2, 0.35, 0.5, 0.65, 0.8]
"""


def _tune(spark: SparkSession, scenario: Path, space: Path, out: Path, objective: str) -> Any:
    from shedlab.core.grid import scenario_ref
    from shedlab.core.tune import load_space
    from shedlab.spark.tune import tune

    return tune(
        spark,
        [scenario_ref(str(scenario))],
        str(out),
        pairs=["AvgShedder"],
        space=load_space(space),
        seeds=3,
        objective=objective,
        per_pair=6,
        eta=3,
    )


def _outcome(out: Path) -> dict[str, Any]:
    doc = json.loads((out / "tune.json").read_text(encoding="utf-8"))
    return {
        "candidates": sorted((c["candidate"], c["seeds"], c["objective"]) for c in doc["candidates"]),
        "recommended": doc["recommended"]["candidate"],
        "improvement": doc["improvement"],
        "fragment": doc["fragment"],
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("tune-reuse")
    (root / "scenario.yaml").write_text(twin_sized_scenario("tune-reuse", 9000), encoding="utf-8")
    (root / "space.yaml").write_text(SPACE, encoding="utf-8")
    return {"root": root, "scenario": root / "scenario.yaml", "space": root / "space.yaml"}


def test_a_directory_holding_an_earlier_tune_gives_the_fresh_result(
    spark: SparkSession, files: dict[str, Path]
) -> None:
    """An earlier tune with another objective gave other candidates all the seeds; they used to be ranked
    on them in this tune's first rung, against rivals with one seed, and listed with seeds they were
    never given here."""
    root, scenario, space = files["root"], files["scenario"], files["space"]
    _tune(spark, scenario, space, root / "fresh", "imbalance")
    _tune(spark, scenario, space, root / "reused", "churn")
    _tune(spark, scenario, space, root / "reused", "imbalance")
    assert _outcome(root / "reused") == _outcome(root / "fresh")


def test_a_directory_holding_runs_of_another_version_of_the_scenario_is_refused(
    spark: SparkSession, files: dict[str, Path]
) -> None:
    """Run ids depend on the scenario's name, not its text: a refitted twin (same name, new recording)
    tuned into the same --out silently got the old twin's runs and recommendation."""
    root, scenario, space = files["root"], files["scenario"], files["space"]
    _tune(spark, scenario, space, root / "versions", "imbalance")
    changed = root / "changed.yaml"
    changed.write_text(twin_sized_scenario("tune-reuse", 30000), encoding="utf-8")
    with pytest.raises(InputError, match="another version of scenario 'tune-reuse'"):
        _tune(spark, changed, space, root / "versions", "imbalance")
    _tune(spark, scenario, space, root / "versions", "imbalance")  # the same scenario resumes as before


def test_a_tune_whose_runs_all_failed_says_so_with_the_first_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scoring no run asked for metrics no run has: the user read "unknown metric 'score_spread_mean'"."""
    from shedlab.core.grid import ScenarioRef
    from shedlab.core.sim import Scenario
    from shedlab.spark import tune as spark_tune

    failed = pd.DataFrame(
        {"scenario": ["tune-reuse"] * 2, "status": ["error"] * 2, "error": ["boom: no broker", "later"]}
    )
    monkeypatch.setattr(spark_tune, "read_sweep_runs", lambda _root: failed)
    scenario = Scenario.from_mapping({"name": "tune-reuse", "duration": "5m"})
    ref = ScenarioRef(name="tune-reuse", text="", source="builtin", digest="0", cost=1.0, scenario=scenario)
    with pytest.raises(InputError) as refused:
        spark_tune._ok_runs(str(tmp_path), [ref])
    assert str(refused.value) == f"{tmp_path}: every tuning run failed; the first: boom: no broker"
    empty = failed.iloc[0:0]
    monkeypatch.setattr(spark_tune, "read_sweep_runs", lambda _root: empty)
    with pytest.raises(InputError, match=r"every tuning run failed$"):
        spark_tune._ok_runs(str(tmp_path), [ref])
