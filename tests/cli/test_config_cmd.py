"""``shedlab config show``: layers and their sources; a table that never splits a key at 80 columns."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from shedlab.cli import app
from shedlab.config import KEY_SPECS


def test_every_key_stays_whole_at_80_columns() -> None:
    result = CliRunner().invoke(app, ["config", "show"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    cells = {cell.strip().removesuffix(" (deprecated)") for line in lines for cell in line.split("│")}
    missing = [key for key in KEY_SPECS if key not in cells]
    assert not missing, missing


def test_sources_of_each_layer(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text("maxUnloadPercentage=0.3\nloadBalancerAvgShedderHitCountHighThreshold=4\n")
    args = ["config", "show", "-c", str(conf), "--strategy", "AvgShedder", "--set", "maxUnloadPercentage=0.5"]
    result = CliRunner().invoke(app, [*args, "--json", "--changed"])
    assert result.exit_code == 0, result.output
    keys = json.loads(result.stdout)["keys"]
    assert keys["maxUnloadPercentage"]["value"] == 0.5 and keys["maxUnloadPercentage"]["source"] == "--set"
    assert keys["loadBalancerAvgShedderHitCountHighThreshold"]["source"] == f"{conf}:2"
    assert keys["loadBalancerLoadSheddingStrategy"]["source"] == "--strategy"
    assert keys["loadBalancerLoadPlacementStrategy"]["source"] == "--strategy"


def test_table_shows_where_a_value_came_from() -> None:
    args = ["config", "show", "--changed", "--set", "maxUnloadPercentage=0.5"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert "0.5" in result.stdout and "--set" in result.stdout and "default 0.2" in result.stdout


def test_a_bad_set_is_one_line_exit_2() -> None:
    result = CliRunner().invoke(app, ["config", "show", "--set", "maxUnloadPercentage=lots"])
    assert result.exit_code == 2
    assert "--set: maxUnloadPercentage" in result.stderr and "Traceback" not in result.output


def test_changed_with_nothing_changed_says_so_in_one_line(tmp_path: Path) -> None:
    """A broker.conf setting Pulsar's default strategies printed an empty table under a caption folded into
    a 15-character column, with no word that nothing differed."""
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder\n"
    )
    result = CliRunner().invoke(app, ["config", "show", "-c", str(conf), "--changed"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"no key differs from Pulsar's defaults; set to its default value: loadBalancerLoadSheddingStrategy "
        f"({conf}:1). Without --changed: all {len(KEY_SPECS)} keys."
    ]
    result = CliRunner().invoke(app, ["config", "show", "--changed"], env={"COLUMNS": "80"})
    assert (
        result.stdout
        == f"no key differs from Pulsar's defaults. Without --changed: all {len(KEY_SPECS)} keys.\n"
    )
