"""The README's examples work as written: its scenario and grid load, its Python runs, its command
table names every command the CLI has, and its reproducibility promise holds byte for byte."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest
from typer.testing import CliRunner

from shedlab.cli import COMMANDS, app
from shedlab.core.sim import load_scenario

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README, re.S)


def test_readme_scenario_example_loads_and_is_complete(tmp_path: Path) -> None:
    scenario_text = _blocks("yaml")[0]
    path = tmp_path / "my-scenario.yaml"
    path.write_text(scenario_text, encoding="utf-8")
    scenario = load_scenario(path)
    assert scenario.name == "my-cluster"
    assert len(scenario.events) == 2


def test_readme_grid_example_expands(tmp_path: Path) -> None:
    from shedlab.core.grid import load_grid

    (tmp_path / "my-scenario.yaml").write_text(_blocks("yaml")[0], encoding="utf-8")
    grid_path = tmp_path / "grid.yaml"
    grid_path.write_text(_blocks("yaml")[1], encoding="utf-8")
    grid = load_grid(str(grid_path))
    names = {s.name for s in grid.scenarios}
    assert {"load-jitter", "over-unloading-90-10", "my-cluster"} <= names
    assert len(grid.seeds) == 5
    # 2 pairs × 2 values of maxUnloadPercentage × 5 seeds, AvgShedder also × 3 hit counts
    assert grid.size == len(names) * 5 * (2 * 3 + 2)


def test_readme_python_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    example = tmp_path / "example.py"
    example.write_text(_blocks("python")[0], encoding="utf-8")
    monkeypatch.chdir(ROOT)  # the example reads examples/snapshot.json
    runpy.run_path(str(example), run_name="__main__")
    assert capsys.readouterr().out.strip()


def test_readme_lists_every_command() -> None:
    listed = set(re.findall(r"^\| `shedlab ([a-z]+)", README, re.M))
    assert set(COMMANDS) == listed


def test_same_seed_gives_byte_identical_outputs(tmp_path: Path) -> None:
    runner = CliRunner()
    for name in ("a", "b"):
        result = runner.invoke(
            app, ["simulate", "homogeneous-gap", "--seed", "3", "--out", str(tmp_path / name)]
        )
        assert result.exit_code == 0, result.output
    files_a = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert files_a == files_b and files_a
    for rel in files_a:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel


def test_readme_counts_the_keys_config_show_prints() -> None:
    """The README said ``config show`` lists all 79 keys; it lists 83 (four came after it was written)."""
    from shedlab.config import KEY_SPECS

    counted = re.search(r"shedlab config show +# all (\d+) keys", README)
    assert counted is not None
    result = CliRunner().invoke(app, ["config", "show"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    shown = {key for key in KEY_SPECS if re.search(rf"│ {key}( \(deprecated\))? +│", result.output)}
    assert int(counted.group(1)) == len(KEY_SPECS) == len(shown)


def test_readme_counts_the_public_conformance_cases() -> None:
    """The README said every public case passes, 46/46; there are 57."""
    from shedlab.core.conformance import iter_case_files

    counted = re.search(
        r"shedlab conform --check conformance +# every public case passes \((\d+)/(\d+)\)", README
    )
    assert counted is not None and counted.group(1) == counted.group(2)
    assert int(counted.group(1)) == len(list(iter_case_files([ROOT / "conformance"])))
