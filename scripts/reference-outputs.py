"""Write (or check) the reference outputs that pin shedlab's behaviour byte for byte.

``python scripts/reference-outputs.py write`` records SHA-256 digests of the files that
``shedlab simulate`` and ``shedlab sweep`` + ``evaluate`` write for fixed scenarios, pairs and seeds
into ``tests/reference/<family>/outputs.json``; ``check`` compares against them and names every file that
differs. ``tests/core/test_reference_outputs.py`` runs the quick part of the same check in CI.

The bits depend on the CPU through NumPy: with AVX-512 its float64 ``exp`` and ``log`` run kernels of
its own, with AVX2 only the C library's functions, and the two differ in some last bits; a last bit can
tip a decision. So each such family (:func:`numpy_family`) has its own set; the outputs are identical
from run to run on any one machine, and between machines of one family.

An AVX-512 machine also records and checks the ``avx2`` set (:data:`EMULATED`): with
``NPY_DISABLE_CPU_FEATURES`` naming its AVX-512 targets, NumPy dispatches to the very kernels an AVX2
machine runs (``X86_V3``), in the script, in every ``shedlab`` it starts and in Spark's Python workers.
Checked on 27 Nov 2026: at ``81cc787``, whose ``avx2`` set was recorded on an AMD EPYC without AVX-512
(25 Nov 2026), the emulated run reproduced all 375 files, 169 of which differ from the ``avx512`` set;
Numba's kernels give the same bits whatever CPU they are compiled for (``NUMBA_CPU_NAME=haswell``
changed no file), as they perform no library call whose result depends on the instruction set.

A deliberate change of behaviour (a more faithful model) regenerates the sets in its own commit and
says which outputs moved and why: ``write`` records this machine's family and the families it can
emulate and removes the others, which no longer hold, so that they are recorded again on their machines
(until then the test skips there, saying so); ``add`` records this machine's family (and its emulated
ones) beside the others, for a family seen for the first time.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from shedlab.core.local_parquet import read_local_parquet  # not pd.read_parquet: see its docstring

ROOT = Path(__file__).resolve().parents[1]
REFERENCES = ROOT / "tests" / "reference"
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
WRITING = len(sys.argv) > 1 and sys.argv[1] in ("write", "add")
REFERENCE_DIGESTS: dict[str, dict[str, str]] = {}
VOLATILE = ("elapsed_s", "started_ms", "finished_ms", "host")


def numpy_family() -> str:
    """The family of NumPy's SIMD kernels on this CPU whose float results the outputs depend on:
    ``avx512``, ``avx2``, or the machine's architecture (``baseline-<arch>``) otherwise."""
    # NumPy's private module (no stubs): the one place NumPy says which SIMD kernels it dispatches to.
    from numpy._core._multiarray_umath import __cpu_features__ as features  # type: ignore[import-not-found]

    if features.get("AVX512F") and features.get("AVX512_SKX"):
        return "avx512"
    if features.get("AVX2") and features.get("FMA3"):
        return "avx2"
    return f"baseline-{platform.machine()}"


EMULATED: dict[str, dict[str, dict[str, str]]] = {
    "avx512": {"avx2": {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}},
}
"""Per family, the families its machines can emulate, and the environment that does it."""


def reference_dir(family: str | None = None) -> Path:
    """Where the reference outputs of ``family`` (this CPU's by default) are kept."""
    return REFERENCES / (family or numpy_family())


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
            (reference_dir() / name).write_text(text, encoding="utf-8")
        elif not same_table(reference_dir() / name, out / "evaluation" / name):
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
    frame = read_local_parquet(path).drop(columns=list(VOLATILE), errors="ignore")
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
    reference = reference_dir() / "outputs.json"
    emulated = EMULATED.get(numpy_family(), {}) if "--no-emulation" not in argv else {}
    if mode == "write":  # a new behaviour: the other families' sets no longer hold
        for other in REFERENCES.iterdir():
            if other.is_dir() and other != reference.parent and other.name not in emulated:
                shutil.rmtree(other)
    status = run_family(mode, reference)
    for family, env in emulated.items():
        print(f"{family} (emulated: {' '.join(f'{k}={v!r}' for k, v in env.items())}):", flush=True)
        args = [sys.executable, __file__, "add" if mode == "write" else mode, "--no-emulation"]
        status |= subprocess.run(args, env={**os.environ, **env}, check=False).returncode
    return status


def run_family(mode: str, reference: Path) -> int:
    """``mode`` for the family of this process's NumPy, whose set is ``reference``."""
    if mode in ("write", "add"):
        reference.parent.mkdir(parents=True, exist_ok=True)
    elif not reference.is_file():
        print(f"no reference outputs for NumPy's {numpy_family()} kernels: record them with 'add'")
        return 1
    else:
        REFERENCE_DIGESTS.update(json.loads(reference.read_text(encoding="utf-8")))
    found = collect(FULL_SCENARIOS, with_sweep=True)
    if mode in ("write", "add"):
        reference.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {sum(len(v) for v in found.values())} digests to {reference}")
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
