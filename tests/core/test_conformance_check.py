"""The conformance checker reports wrong answers: a checker that always says "pass" must fail here.

Each test takes a public case that passes, corrupts one expected answer, and asserts that
``shedlab conform --check`` (or :func:`check_case`) fails and names the difference.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import error_line

from shedlab.core.conformance import check_case, load_case, run_case

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "conformance"
AVG_PAIRS = CASES / "AvgShedder" / "avg-3-brokers-pairs.json"
LLTMR = CASES / "LeastLongTermMessageRate" / "lltmr-all-overloaded.json"


def shedlab(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shedlab", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


def corrupted(tmp_path: Path, source: Path, change: Any) -> Path:
    raw = json.loads(source.read_text(encoding="utf-8"))
    change(raw["expected"])
    out = tmp_path / source.name
    out.write_text(json.dumps(raw), encoding="utf-8")
    return out


def test_the_unchanged_case_passes() -> None:
    case = load_case(AVG_PAIRS)
    assert check_case(case, run_case(case)) == []


def test_cli_fails_on_a_wrong_unload_and_names_the_bundle(tmp_path: Path) -> None:
    def drop_last_bundle(expected: list[dict[str, Any]]) -> None:
        expected[1]["unload"]["broker-3:8080"].pop()

    path = corrupted(tmp_path, AVG_PAIRS, drop_last_bundle)
    run = shedlab("conform", "--check", path)
    assert run.returncode == 1, run.stdout + run.stderr
    (line,) = [json.loads(text) for text in run.stdout.splitlines()]
    assert line["check"]["passed"] is False
    (problem,) = line["check"]["mismatches"]
    assert problem.startswith("tick 1: unload ")
    assert "public/default/0x000b0000_0x000c0000" in problem  # the bundle the expected answer lacks
    assert "1 failed" in run.stderr


def test_cli_fails_on_wrong_choices(tmp_path: Path) -> None:
    def drop_a_choice(expected: list[dict[str, Any]]) -> None:
        expected[0]["assign"][0]["choices"] = ["broker-1:8080", "broker-2:8080"]

    path = corrupted(tmp_path, LLTMR, drop_a_choice)
    run = shedlab("conform", "--check", path, LLTMR)
    assert run.returncode == 1
    first, second = (json.loads(text) for text in run.stdout.splitlines())
    assert first["check"]["passed"] is False and second["check"]["passed"] is True
    (problem,) = first["check"]["mismatches"]
    assert problem.startswith("tick 0 assign 0: choices ")
    assert "broker-3:8080" in problem
    assert "1 failed" in run.stderr


def test_every_kind_of_difference_is_named() -> None:
    case = load_case(AVG_PAIRS)
    output = run_case(case)
    assert check_case(case, output) == []

    assert case.expected is not None
    extra_tick = dataclasses.replace(case, expected=[*case.expected, {"unload": {}}])
    assert (
        check_case(extra_tick, output)[0]
        == f"expected {len(output['ticks']) + 1} ticks, ran {len(output['ticks'])}"
    )

    wrong_bundle = copy.deepcopy(output)
    wrong_bundle["ticks"][1]["assign"][0]["bundle"] = "public/default/0xffff0000_0xffffffff"
    problems = check_case(case, wrong_bundle)
    assert any(p.startswith("tick 1 assign 0: bundle public/default/0xffff0000_0xffffffff") for p in problems)

    outside = copy.deepcopy(output)
    outside["ticks"][1]["assign"][0]["broker"] = "broker-9:8080"
    assert check_case(case, outside) == ["tick 1 assign 0: picked broker-9:8080 outside its choices"]

    missing = copy.deepcopy(output)
    missing["ticks"][1]["assign"].pop()
    assert any("assign answers, expected" in p for p in check_case(case, missing))

    no_expected = dataclasses.replace(case, expected=None)
    assert check_case(no_expected, output) == ["case has no 'expected' answers"]


def test_a_case_given_twice_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """It ran twice, and counted twice in the tally (until 29 Nov 2026)."""
    line = error_line(["conform", "--check", str(CASES), str(AVG_PAIRS)], capsys)
    assert line == f"error: {AVG_PAIRS}: given twice (through {CASES} and {AVG_PAIRS}); give each case once"
