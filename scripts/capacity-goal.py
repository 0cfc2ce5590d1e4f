"""Sweep the grids issue 15's goal is judged on and print the goal's tally per grid.

    .venv/bin/python scripts/capacity-goal.py                      # every grid below, into out/capacity-goal
    .venv/bin/python scripts/capacity-goal.py --out out/g9 examples/capacity-probes/holdout-9.yaml

The table of ``docs/capacity-aware.md`` ("Counting the cells") comes from this: for each grid, one
``shedlab sweep`` into ``OUT/<grid name>`` and one ``shedlab evaluate`` (its goal cells in
``OUT/<grid name>/evaluation/goal.csv``, ``src/shedlab/core/goal.py``), all in one local Spark session,
then a row: cells, won, tied, lost, and the cells lost. The default grids are the built-in ``capacity``
grid, ``examples/capacity-probes/grid.yaml``, the held-out rounds in their order (``holdout.yaml`` is
the second round, ``holdout-3.yaml`` onwards the third and later) and the built-in ``pip364-extended``:
2,810 runs with ten rounds, 136 s on the 2-core development machine while another job ran on it (27 Nov
2026); 2,970 with eleven (the eleventh alone: 160 runs, 53 s, 28 Nov 2026); 3,170 with twelve (the
twelfth alone: 200 runs, 22 s; all of them about 4.5 minutes, 28 Nov 2026); 3,370 with thirteen (the
thirteenth alone: 200 runs, 18 s; all of them 2 min 40 s in a quieter sitting, 28 Nov 2026).

A grid's directory must not exist yet: a sweep resumes what its directory holds, and runs made by other
code would be counted as this code's (pass another ``--out``). ``--set KEY=VALUE`` (repeatable) runs
every pair with that configuration value on top of each grid's own (``capacityAwareBalancedSpread=20``:
the scan of rule 3's constants in ``docs/capacity-aware.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shedlab.cli.settings import run_overrides
from shedlab.core.goal import goal_tally
from shedlab.core.grid import Grid, load_grid
from shedlab.errors import InputError, ShedlabError
from shedlab.spark.evaluate import evaluate
from shedlab.spark.session import get_spark
from shedlab.spark.sweep import sweep

ROOT = Path(__file__).resolve().parents[1]
PROBES = ROOT / "examples" / "capacity-probes"


def default_grids() -> list[str]:
    """The grids of the docs' table, held-out rounds in their order."""

    def round_of(path: Path) -> int:
        number = re.fullmatch(r"holdout-(\d+)", path.stem)
        return int(number.group(1)) if number else 2

    rounds = sorted(PROBES.glob("holdout*.yaml"), key=round_of)
    return ["capacity", str(PROBES / "grid.yaml"), *map(str, rounds), "pip364-extended"]


def load_grids(sources: Sequence[str], out: Path, sets: Mapping[str, Any]) -> list[tuple[str, Grid]]:
    """Each grid read, checked and given ``sets`` on top of its own settings, with the directory it is
    swept into (which must not exist), before Spark starts."""
    loaded = []
    for source in sources:
        grid = load_grid(source)
        if sets:
            grid = dataclasses.replace(grid, overrides=(*grid.overrides, *sets.items()))
        target = out / Path(source).stem
        if target.exists():
            why = "exists (a sweep would resume it); remove it or pass another --out"
            raise InputError(why, source=str(target))
        loaded.append((str(target), grid))
    return loaded


def run(spark: Any, grids: Sequence[tuple[str, Grid]], challenger: str) -> list[dict[str, Any]]:
    """Sweep and evaluate each grid into its directory; one row of the tally per grid."""
    rows = []
    for target, grid in grids:
        sweep(spark, grid, target)
        cells = evaluate(spark, target, challenger=challenger).goal
        lost = cells[cells["verdict"] == "lost"]
        rows.append(
            {
                "grid": Path(grid.source.removeprefix("builtin:")).name,
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
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    try:
        sets = run_overrides(None, args.sets).values  # a key checked (did-you-mean) before anything runs
        grids = load_grids(args.grids or default_grids(), args.out, sets)
        rows = run(get_spark(args.master, app_name="capacity-goal"), grids, args.challenger)
    except ShedlabError as exc:  # a bad key, grid or directory: one line, as the CLI says it
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    print("| grid | cells | won | tie | lost | lost cells |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['grid']} | {r['cells']} | {r['won']} | {r['tie']} | {r['lost']} | {r['lost cells']} |")
    total = {k: sum(int(r[k]) for r in rows) for k in ("cells", "won", "tie", "lost")}
    print(f"| all | {total['cells']} | {total['won']} | {total['tie']} | {total['lost']} | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
