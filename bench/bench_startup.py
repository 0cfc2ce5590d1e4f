"""Benchmark: start-up of the light ``shedlab`` commands: wall time and the heavy modules each imports.

    .venv/bin/python bench/bench_startup.py            # median of 7 runs per command
    .venv/bin/python bench/bench_startup.py --runs 15

Each command runs as a fresh subprocess (``python -m shedlab ...``), as a user would start it; the
wall time is the median over the runs. The heavy modules are read from ``python -X importtime`` in
one more run: a command that prints help, a decision or the configuration should load none of
pandas, plotly or PySpark (``tests/cli/test_startup.py`` asserts it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("decide", str(ROOT / "examples" / "snapshot.json")),
    ("config", "show"),
)
HEAVY = ("pandas", "plotly", "pyspark", "pyarrow", "numpy", "scipy", "yaml")
"""Top-level packages reported; the first three are the ones the light commands must not import."""


def _run(args: tuple[str, ...], *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "100"}
    return subprocess.run(
        [sys.executable, *extra, "-m", "shedlab", *args], capture_output=True, text=True, env=env, check=True
    )


def wall_time(args: tuple[str, ...], runs: int) -> float:
    """Median wall time in seconds of ``runs`` fresh processes."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        _run(args)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def heavy_modules(args: tuple[str, ...]) -> list[str]:
    """The packages of :data:`HEAVY` that the command imports, from ``-X importtime``'s report."""
    found = set()
    for line in _run(args, "-X", "importtime").stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            top = line.rsplit("|", 1)[1].strip().split(".", 1)[0]
            if top in HEAVY:
                found.add(top)
    return sorted(found, key=HEAVY.index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per command (median)")
    options = parser.parse_args()
    print(f"{'command':<30} {'median s':>9}  heavy modules imported")
    for args in COMMANDS:
        label = "shedlab " + " ".join(Path(a).name if "/" in a else a for a in args)
        seconds = wall_time(args, options.runs)
        print(f"{label:<30} {seconds:>9.3f}  {', '.join(heavy_modules(args)) or '-'}")


if __name__ == "__main__":
    main()
