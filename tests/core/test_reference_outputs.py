"""Behaviour is pinned: ``shedlab simulate`` writes, byte for byte, what it wrote before the restructuring.

The digests in ``tests/reference/<family>/outputs.json`` were recorded from main before the code moved
(``scripts/reference-outputs.py write``); the script's ``check`` compares all of them (10 scenarios × 5
pairs and a Spark sweep + evaluation). Here the quick scenarios run in-process through the CLI, so a
change that moves any simulated number, decision or file byte fails CI with the file it changed.

NumPy's float64 ``exp`` and ``log`` give other last bits on a CPU with AVX-512 (its own kernels) than on
one with AVX2 only (the C library's), so each family has its own set (the script's docstring); on a
family with no set recorded the test skips, saying which.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scripts_support import load_script
from typer.testing import CliRunner

from shedlab.cli import app

ROOT = Path(__file__).resolve().parents[2]


SCRIPT = load_script("reference-outputs.py")
FAMILY: str = SCRIPT.numpy_family()
_SET: Path = SCRIPT.reference_dir(FAMILY) / "outputs.json"
EXPECTED: dict[str, dict[str, str]] = json.loads(_SET.read_text(encoding="utf-8")) if _SET.is_file() else {}


@pytest.mark.parametrize("scenario", SCRIPT.QUICK_SCENARIOS)
@pytest.mark.parametrize("pair", SCRIPT.PAIRS)
def test_simulate_outputs_are_byte_identical_to_the_reference(
    scenario: str, pair: str, tmp_path: Path
) -> None:
    if not EXPECTED:
        pytest.skip(f"no reference outputs recorded for NumPy's {FAMILY} kernels ({_SET} is missing)")
    out = tmp_path / "run"
    args = ["simulate", scenario, "--strategy", pair, "--seed", "1", "--out", str(out), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    expected = EXPECTED[f"simulate {scenario} {pair} 1"]
    found = SCRIPT.digests(out)
    assert sorted(found) == sorted(expected)
    changed = [name for name, digest in expected.items() if found[name] != digest]
    assert changed == [], f"{scenario} under {pair}: these outputs changed: {changed}"
