"""Helpers shared by the CLI tests: the one-line error of the real entry point, and a plugin module put on
``sys.path`` for one test."""

from __future__ import annotations

import importlib
import itertools
import textwrap
from pathlib import Path

import pytest

from shedlab.cli import main

_modules = itertools.count()


def error_line(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the real entry point; the one stderr line of a user error (exit 2)."""
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    captured = capsys.readouterr()
    assert exit_info.value.code == 2, captured
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str, source: str) -> str:
    """The name of a new module holding ``source``, only on ``sys.path`` (a new name per call: a module
    imported by an earlier test is not reused)."""
    module = f"{prefix}_{next(_modules)}"
    directory = tmp_path / "plugins"
    directory.mkdir(exist_ok=True)
    (directory / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    monkeypatch.syspath_prepend(str(directory))
    importlib.invalidate_caches()
    return module
