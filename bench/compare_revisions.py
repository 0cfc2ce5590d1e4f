"""Compare the simulator benchmark of two git revisions on this machine, in one sitting, alternating.

    .venv/bin/python bench/compare_revisions.py 9c4f585            # issue 12's base against the work tree
    .venv/bin/python bench/compare_revisions.py 9c4f585 HEAD --rounds 5 -- --ticks 600

Machines of the same kind differ by up to 2.5× in speed, and one machine drifts within an hour, so a
speed-up is only a figure when both sides ran on the same machine in the same sitting. Each revision is
exported (``git archive``) into a temporary directory and run with its own ``bench/bench_simulator.py``
and its own ``src`` (the current virtual environment's libraries); the runs alternate, base first, for
``--rounds`` rounds. Printed: every run's wall time, CPU time, unloads and peak memory, the medians per
revision and the ratio of the medians. A 60-tick run of each tree first compiles its Numba
kernels (cached beside an exported tree's modules; some are first called a few ticks in), so that no
round pays for compilation. The unloads must agree for the comparison to mean anything: a
revision that changes the simulation's decisions changes the work. Arguments after ``--`` go to both
benchmarks (``--ticks 600``, ``--strategy …``; the base's script must know them).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK_TREE = "work-tree"
FIELDS = {
    "wall_s": re.compile(r"^wall time\s+([\d.]+) s", re.M),
    "cpu_s": re.compile(r"^cpu time\s+([\d.]+) s", re.M),
    "unloads": re.compile(r"^unloads\s+(\d+)", re.M),
    "peak_mb": re.compile(r"^peak memory\s+(\d+) MB", re.M),
}
"""What each run's output is read for (a base whose script did not print CPU time has none)."""


def export(revision: str, into: Path) -> Path:
    """``revision``'s tree under ``into`` (the repository itself for :data:`WORK_TREE`)."""
    if revision == WORK_TREE:
        return ROOT
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", revision, "src", "bench"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        sys.exit(f"error: git archive {revision}: {archive.stderr.decode().strip()}")
    target = into / revision.replace("/", "_")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    return target


def run(tree: Path, bench_args: list[str]) -> dict[str, float]:
    """One benchmark run of the tree at ``tree``; the figures it printed."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run(
        [sys.executable, str(tree / "bench" / "bench_simulator.py"), *bench_args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"error: the benchmark of {tree} failed:\n{done.stderr[-2000:]}")
    return {name: float(m.group(1)) for name, rx in FIELDS.items() if (m := rx.search(done.stdout))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the revision to compare against (a commit, tag or branch)")
    parser.add_argument("head", nargs="?", default=WORK_TREE, help="default: this work tree, as it is")
    parser.add_argument("--rounds", type=int, default=3)
    args, rest = parser.parse_known_args(argv)
    bench_args = [a for a in rest if a != "--"]
    with tempfile.TemporaryDirectory(prefix="shedlab-compare-") as tmp:
        trees = {rev: export(rev, Path(tmp)) for rev in (args.base, args.head)}
        for tree in trees.values():  # an exported tree compiles its Numba kernels on its first run
            run(tree, [*bench_args, "--ticks", "60"])
        figures: dict[str, list[dict[str, float]]] = {rev: [] for rev in trees}
        for round_no in range(1, args.rounds + 1):
            for rev, tree in trees.items():
                got = run(tree, bench_args)
                figures[rev].append(got)
                shown = ", ".join(f"{k} {v:g}" for k, v in got.items())
                print(f"round {round_no}  {rev:<12} {shown}", flush=True)
    medians = {
        rev: {k: statistics.median(r[k] for r in runs) for k in FIELDS if all(k in r for r in runs)}
        for rev, runs in figures.items()
    }
    for rev, med in medians.items():
        print(f"median        {rev:<12} " + ", ".join(f"{k} {v:g}" for k, v in med.items()))
    base, head = medians[args.base], medians[args.head]
    if base.get("unloads") != head.get("unloads"):
        print("note: the unloads differ: the two revisions do not simulate the same decisions")
    print(f"speed-up      {base['wall_s'] / head['wall_s']:.2f}× wall time ({args.base} / {args.head})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
