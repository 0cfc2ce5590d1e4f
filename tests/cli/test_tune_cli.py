"""``shedlab twin`` and ``shedlab tune``: user errors are one line and exit 2, before Spark starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.run(
        [sys.executable, "-m", "shedlab", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("tune",), "--out"),
        (("tune", "--out", "x", "--objective", "imbalance + bogus"), "bogus"),
        (("tune", "load-jitter", "--out", "x", "--strategies", "AvgShedderr"), "AvgShedder"),
        (("tune", "load-jitter", "--out", "x", "--seeds", "0"), "--seeds"),
        (("twin", "/nonexistent/snap", "--out", "t.yaml", "--window", "yesterday"), "--window"),
        (("twin", "/nonexistent/snap", "--out", "t.yaml", "--strategy", "Nope"), "Nope"),
    ],
)
def test_user_errors_are_one_line(args: tuple[str, ...], expected: str) -> None:
    result = _run(*args)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr
