"""Layers of Pulsar settings (``config.layered_config``) and the CLI's ``--config``/``--set`` layers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shedlab.cli.settings import cli_config, parse_sets, run_overrides
from shedlab.config import LoadBalancerConfig, layered_config
from shedlab.errors import ConfigError
from shedlab.strategies import pair_config, resolve_config

MAX = "maxUnloadPercentage"
HITS = "loadBalancerAvgShedderHitCountHighThreshold"


def test_later_layers_win_and_record_their_source() -> None:
    conf = layered_config(("scenario: config", {MAX: 0.3, HITS: 5}), None, ("--set", {MAX: "0.5"}))
    assert conf.get(MAX) == 0.5 and conf.get(HITS) == 5
    sources = conf.value_sources()
    assert sources[MAX] == "--set" and sources[HITS] == "scenario: config"
    assert sources["minUnloadMessage"] == "default"


def test_a_config_layer_keeps_the_sources_of_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(f"# comment\n{HITS}=4\n")
    conf = layered_config(LoadBalancerConfig.from_file(path), pair_config("AvgShedder", source="strategy"))
    sources = conf.value_sources()
    assert sources[HITS] == f"{path}:2" and sources["loadBalancerLoadSheddingStrategy"] == "strategy"
    assert conf == pair_config("AvgShedder", LoadBalancerConfig.from_file(path))


def test_a_layer_equal_to_the_default_still_sets_its_source() -> None:
    conf = layered_config(("a", {MAX: 0.3}), ("b", {MAX: 0.2}))
    assert conf.get(MAX) == 0.2 and conf.value_sources()[MAX] == "b"


def test_the_avgshedder_pairing_is_checked_once_at_the_end() -> None:
    half = ("--set", {"loadBalancerLoadSheddingStrategy": "AvgShedder"})
    with pytest.raises(ConfigError, match="must be configured for both"):
        resolve_config(layered_config(half))
    assert layered_config(half).shedding_strategy_name == "AvgShedder"
    both = ("--set", {"loadBalancerLoadPlacementStrategy": "AvgShedder"})
    assert resolve_config(layered_config(half, both)).placement_strategy_name == "AvgShedder"


def test_bad_values_name_their_layer() -> None:
    with pytest.raises(ConfigError, match="--set: maxUnloadPercentage"):
        layered_config(("--set", {MAX: "lots"}))


def test_parse_sets() -> None:
    assert parse_sets([f"{MAX} = 0.5", "a=b=c"]) == {MAX: "0.5", "a": "b=c"}
    assert parse_sets(None) == {}
    for bad in ("novalue", "=3"):
        with pytest.raises(ConfigError, match="expected KEY=VALUE"):
            parse_sets([bad])


def test_a_key_set_twice_is_refused() -> None:
    """The last was taken, silently: a script's --set and its caller's (until 29 Nov 2026)."""
    expected = (
        f"--set: {MAX}: given twice (only the last would be taken) (got ['{MAX}=0.5', ' {MAX} =0.6']); "
        "give each key once"
    )
    with pytest.raises(ConfigError, match=re.escape(expected) + "$"):
        parse_sets([f"{MAX}=0.5", "a=b", f" {MAX} =0.6"])


def test_cli_config_orders_file_then_between_then_set(tmp_path: Path) -> None:
    path = tmp_path / "lb.yaml"
    path.write_text(f"{MAX}: 0.3\nloadBalancerLoadSheddingStrategy: OverloadShedder\n")
    conf = cli_config(path, [f"{MAX}=0.4"], pair_config("AvgShedder", source="--strategy"))
    assert conf.get(MAX) == 0.4 and conf.shedding_strategy_name == "AvgShedder"
    assert conf.value_sources()["loadBalancerLoadPlacementStrategy"] == "--strategy"
    assert cli_config(None) == LoadBalancerConfig()


def test_run_overrides(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(
        f"{MAX}=0.3\nminUnloadMessage=1000\nloadBalancerLoadSheddingStrategy=AvgShedder\n"
        "loadBalancerLoadPlacementStrategy=AvgShedder\n"
    )
    overrides, pair, sources = run_overrides(path, [f"{HITS}=3"])
    assert overrides == {MAX: 0.3, HITS: "3"}  # minUnloadMessage=1000 is Pulsar's default
    assert pair == "AvgShedder"
    assert sources == {MAX: f"{path}:1", HITS: "--set"}
    assert run_overrides(None, [f"{MAX}=0.5"]) == ({MAX: "0.5"}, None, {MAX: "--set"})
    with pytest.raises(ConfigError, match="--set"):
        run_overrides(None, ["loadBalancerAvgShedderLowThreshhold=3"])


TRANSFER = "TransferShedder+ExtensibleLeastResourceUsageWithWeight"


@pytest.mark.parametrize("where", ["file", "--set"])
def test_a_pair_the_overrides_cannot_run_is_named_against_their_line(tmp_path: Path, where: str) -> None:
    """The run itself knows the overrides only as one layer; the check names the file's line or --set."""
    path = tmp_path / "broker.conf"
    path.write_text(f"{MAX}=0.3\n" + ("loadManagerClassName=abc\n" if where == "file" else ""))
    settings = run_overrides(path, ["loadManagerClassName=abc"] if where == "--set" else [])
    settings.check_pair("AvgShedder")  # the modular manager's pairs leave the class name alone
    expected = f"{path}:2: loadManagerClassName" if where == "file" else "--set: loadManagerClassName"
    with pytest.raises(ConfigError) as refused:
        settings.check_pair(TRANSFER)
    assert str(refused.value).startswith(expected)
