"""Write (or check) the reference outputs that pin shedlab's behaviour byte for byte.

``python scripts/reference-outputs.py write`` records SHA-256 digests of the files that
``shedlab simulate`` and ``shedlab sweep`` + ``evaluate`` write for fixed scenarios, pairs and seeds
into ``tests/reference/outputs.json``; ``check`` compares against them and names every file that
differs. ``tests/test_reference_outputs.py`` runs the quick part of the same check in CI.

A deliberate change of behaviour (a more faithful model) regenerates the file in its own commit and
says which outputs moved and why.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "reference" / "outputs.json"
SHEDLAB = str(ROOT / ".venv" / "bin" / "shedlab")

PAIRS = (
    "AvgShedder",
    "ThresholdShedder+LeastLongTermMessageRate",
    "ThresholdShedder+LeastResourceUsageWithWeight",
    "UniformLoadShedder+LeastLongTermMessageRate",
    "OverloadShedder+LeastLongTermMessageRate",
)
QUICK_SCENARIOS = ("homogeneous-gap", "over-unloading-90-10", "load-jitter", "heterogeneous-cpu-eater")
FULL_SCENARIOS = (
    *QUICK_SCENARIOS,
    "over-placement-lruww",
    "over-placement-avgshedder",
    "heterogeneous-strong-machine",
    "broker-loss",
    "rolling-restart",
    "scale-out",
)
EVALUATION_TABLES = ("metric_stats.csv", "pip364.csv", "runs.csv")
WRITING = len(sys.argv) > 1 and sys.argv[1] == "write"
REFERENCE_DIGESTS: dict[str, dict[str, str]] = {}
VOLATILE = ("elapsed_s", "started_ms", "finished_ms", "host")


def digests(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root``, by relative path."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def simulate_digests(scenario: str, pair: str, seed: int, work: Path) -> dict[str, str]:
    out = work / f"{scenario}--{pair}--{seed}"
    subprocess.run(
        [SHEDLAB, "simulate", scenario, "--strategy", pair, "--seed", str(seed), "--out", str(out), "--json"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return digests(out)


def sweep_digests(work: Path) -> dict[str, str]:
    out = work / "sweep"
    subprocess.run(
        [SHEDLAB, "sweep", "tiny", "--out", str(out), "--master", "local[2]", "--json"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        [SHEDLAB, "evaluate", str(out), "--master", "local[2]", "--json"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    found = {
        k: v for k, v in digests(out).items() if k.startswith(("ticks/", "decisions/", "brokers/", "events/"))
    }
    for path in sorted((out / "runs").rglob("*.parquet")):
        found[str(path.relative_to(out))] = content_digest(path)
    for name in EVALUATION_TABLES:
        text = (out / "evaluation" / name).read_text(encoding="utf-8")
        found[f"evaluation/{name}"] = hashlib.sha256(text.encode()).hexdigest()
        if WRITING:
            (REFERENCE.parent / name).write_text(text, encoding="utf-8")
        elif not same_table(REFERENCE.parent / name, out / "evaluation" / name):
            found[f"evaluation/{name}"] = "differs beyond 1e-9 relative"
        else:  # equal within floating-point summation order: Spark SQL and pandas may add in other orders
            found[f"evaluation/{name}"] = REFERENCE_DIGESTS.get("sweep tiny", {}).get(
                f"evaluation/{name}", ""
            )
    return found


def same_table(expected_csv: Path, found_csv: Path) -> bool:
    """Equal tables, numbers within 1e-9 relative (evaluation statistics may be summed in another order)."""
    a, b = pd.read_csv(expected_csv), pd.read_csv(found_csv)
    if list(a.columns) != list(b.columns) or len(a) != len(b):
        return False
    for column in a.columns:
        if pd.api.types.is_numeric_dtype(a[column]) and pd.api.types.is_numeric_dtype(b[column]):
            x, y = a[column].to_numpy(float), b[column].to_numpy(float)
            if not np.allclose(x, y, rtol=1e-9, atol=1e-12, equal_nan=True):
                return False
        elif not a[column].astype(str).equals(b[column].astype(str)):
            return False
    return True


def content_digest(path: Path) -> str:
    """A run-summary file's content without what legitimately varies: wall time and host."""
    frame = pd.read_parquet(path).drop(columns=list(VOLATILE), errors="ignore")
    return hashlib.sha256(frame.to_csv(index=False).encode()).hexdigest()


def collect(scenarios: tuple[str, ...], with_sweep: bool) -> dict[str, dict[str, str]]:
    result: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for scenario in scenarios:
            for pair in PAIRS:
                result[f"simulate {scenario} {pair} 1"] = simulate_digests(scenario, pair, 1, work)
        if with_sweep:
            result["sweep tiny"] = sweep_digests(work)
    return result


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "check"
    if mode != "write":
        REFERENCE_DIGESTS.update(json.loads(REFERENCE.read_text(encoding="utf-8")))
    found = collect(FULL_SCENARIOS, with_sweep=True)
    if mode == "write":
        REFERENCE.parent.mkdir(parents=True, exist_ok=True)
        REFERENCE.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {sum(len(v) for v in found.values())} digests to {REFERENCE}")
        return 0
    expected = REFERENCE_DIGESTS
    bad = [
        f"{case}: {name}"
        for case, files in expected.items()
        for name, digest in files.items()
        if found.get(case, {}).get(name) != digest
    ]
    print(
        "\n".join(bad) if bad else f"all {sum(len(v) for v in expected.values())} reference files identical"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
