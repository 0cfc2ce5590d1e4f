"""``scripts/capacity-goal.py``: the docs' goal table is made by sweeping and evaluating each grid; its
rows are the tallies of the cells ``evaluate`` wrote, and it refuses to resume a directory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
import pytest
from scripts_support import load_script

from shedlab.core.goal import goal_tally
from shedlab.errors import InputError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "fixtures" / "grid_tiny.yaml"


def test_the_default_grids_are_every_round_in_order() -> None:
    grids = load_script("capacity-goal.py").default_grids()
    assert grids[0] == "capacity" and grids[-1] == "pip364-extended"
    rounds = [Path(g).name for g in grids[2:-1]]
    assert rounds[:3] == ["holdout.yaml", "holdout-3.yaml", "holdout-4.yaml"]
    assert rounds[-1] == f"holdout-{len(rounds) + 1}.yaml"  # holdout.yaml is the second round


@pytest.mark.spark
def test_a_row_per_grid_from_the_cells_evaluate_wrote(spark: SparkSession, tmp_path: Path) -> None:
    script = load_script("capacity-goal.py")
    rows = script.run(spark, script.load_grids([str(TINY)], tmp_path, {}), "AvgShedder")
    cells = pd.read_csv(tmp_path / "grid_tiny" / "evaluation" / "goal.csv")
    assert len(rows) == 1 and rows[0]["grid"] == "grid_tiny.yaml"
    assert {k: rows[0][k] for k in ("cells", "won", "tie", "lost")} == {
        k: goal_tally(cells)[k] for k in ("cells", "won", "tie", "lost")
    }
    assert rows[0]["cells"] == 12
    with pytest.raises(InputError, match="exists"):
        script.load_grids([str(TINY)], tmp_path, {})


def test_settings_go_on_top_of_each_grid_and_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = load_script("capacity-goal.py")
    ((_, grid),) = script.load_grids([str(TINY)], tmp_path, {"capacityAwareMinBenefit": "3"})
    assert dict(grid.overrides)["capacityAwareMinBenefit"] == "3"
    assert script.main(["--set", "capacityAwareMinBenefitt=3", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'capacityAwareMinBenefit'?" in err
    assert script.main(["no-such-grid", "--out", str(tmp_path)]) == 2
    assert "no-such-grid" in capsys.readouterr().err
