"""Sweep the grids issue 15's goal is judged on and print the goal's tally per grid.

    .venv/bin/python scripts/capacity-goal.py                      # every grid below, into out/capacity-goal
    .venv/bin/python scripts/capacity-goal.py --out out/g9 examples/capacity-probes/holdout-9.yaml

The table of ``docs/capacity-aware.md`` ("Counting the cells") comes from this: for each grid, one
``shedlab sweep`` into ``OUT/<grid name>`` and one ``shedlab evaluate`` (its goal cells in
``OUT/<grid name>/evaluation/goal.csv``, ``src/shedlab/core/goal.py``), all in one local Spark session,
then a row: cells, won, tied, lost, and the cells lost. The default grids are the built-in ``capacity``
grid, ``examples/capacity-probes/grid.yaml``, the held-out rounds in their order (``holdout.yaml`` is
the second round, ``holdout-3.yaml`` onwards the third and later) and the built-in ``pip364-extended``:
2,650 runs with nine rounds, 108 s on the 2-core development machine (27 Nov 2026).

A grid's directory must not exist yet: a sweep resumes what its directory holds, and runs made by other
code would be counted as this code's (pass another ``--out``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PROBES = ROOT / "examples" / "capacity-probes"


def default_grids() -> list[str]:
    """The grids of the docs' table, held-out rounds in their order."""

    def round_of(path: Path) -> int:
        number = re.fullmatch(r"holdout-(\d+)", path.stem)
        return int(number.group(1)) if number else 2

    rounds = sorted(PROBES.glob("holdout*.yaml"), key=round_of)
    return ["capacity", str(PROBES / "grid.yaml"), *map(str, rounds), "pip364-extended"]


def run(spark: Any, grids: Sequence[str], out: Path, challenger: str) -> list[dict[str, Any]]:
    """Sweep and evaluate each grid into ``out/<grid name>``; one row of the tally per grid."""
    from shedlab.core.goal import goal_tally
    from shedlab.core.grid import load_grid
    from shedlab.spark.evaluate import evaluate
    from shedlab.spark.sweep import sweep

    rows = []
    for source in grids:
        grid = load_grid(source)
        target = out / Path(source).stem
        if target.exists():
            sys.exit(f"error: {target} exists (a sweep would resume it); remove it or pass another --out")
        sweep(spark, grid, str(target))
        cells = evaluate(spark, str(target), challenger=challenger).goal
        lost = cells[cells["verdict"] == "lost"]
        rows.append(
            {
                "grid": Path(source).name,
                **goal_tally(cells),
                "lost cells": "; ".join(f"{r.scenario}: {r.criterion}" for r in lost.itertuples()),
            }
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grids", nargs="*", help="grid files or built-in grid names (default: all, above)")
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "capacity-goal")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--challenger", default="CapacityAwareShedder")
    args = parser.parse_args(argv)
    from shedlab.spark.session import get_spark

    spark = get_spark(args.master, app_name="capacity-goal")
    rows = run(spark, args.grids or default_grids(), args.out, args.challenger)
    print("| grid | cells | won | tie | lost | lost cells |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['grid']} | {r['cells']} | {r['won']} | {r['tie']} | {r['lost']} | {r['lost cells']} |")
    total = {k: sum(int(r[k]) for r in rows) for k in ("cells", "won", "tie", "lost")}
    print(f"| all | {total['cells']} | {total['won']} | {total['tie']} | {total['lost']} | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
