"""The report tests' shared, expensive input: one real sweep + evaluation on local Spark per session."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SWEEP_GRID = """\
name: report-test
scenarios: [over-unloading-90-10, over-placement-lruww]
strategies: all
seeds: [1, 2]
"""


def tiny_sweep(spark: SparkSession, base: Path) -> Path:
    """A real sweep (2 scenarios × 5 pairs × 2 seeds) and its evaluation under ``base/sweep``, made once
    per test session (both report test modules use it; a marker file says it is complete)."""
    from shedlab.core.grid import load_grid
    from shedlab.spark.evaluate import evaluate
    from shedlab.spark.sweep import sweep

    root = base / "report-sweep"
    done = root / ".complete"
    if done.exists():
        return root
    root.mkdir(parents=True, exist_ok=True)
    (root / "grid.yaml").write_text(SWEEP_GRID, encoding="utf-8")
    result = sweep(spark, load_grid(root / "grid.yaml"), str(root / "sweep"))
    assert result.failed == 0 and result.complete == 20
    evaluate(spark, str(root / "sweep"))  # default: SWEEP_DIR/evaluation
    done.write_text("ok\n", encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def sweep_root(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_sweep(spark, tmp_path_factory.getbasetemp())
