"""The Python API: ``import shedlab`` is cheap, and its functions do what the commands do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import shedlab
from shedlab.config import LoadBalancerConfig
from shedlab.core.decide import decide_on_snapshot, load_snapshot_file
from shedlab.core.sim import SimulationResult, load_scenario, run_simulation

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "snapshot.json"
SCENARIO = "homogeneous-gap"


def test_import_shedlab_loads_nothing_heavy() -> None:
    heavy = "{'numpy', 'pandas', 'plotly', 'pyspark', 'yaml'}"
    code = f"import sys, shedlab; print(sorted({heavy} & {{m.split('.')[0] for m in sys.modules}}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_public_name_resolves() -> None:
    for name in shedlab.__all__:
        assert getattr(shedlab, name) is not None, name
    assert set(shedlab.__all__) <= set(dir(shedlab))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = shedlab.nope  # type: ignore[attr-defined]  # a missing name, on purpose


def test_decide_from_a_path_or_a_snapshot() -> None:
    outcome = shedlab.decide(EXAMPLE, strategy="AvgShedder", seed=3, cycles=2)
    assert outcome.strategy == "AvgShedder" and outcome.decisions
    assert outcome.decisions[0].destination == "broker-4:8080"
    snapshot = shedlab.read_snapshot(EXAMPLE)
    direct = decide_on_snapshot(
        load_snapshot_file(EXAMPLE), LoadBalancerConfig(), strategy="AvgShedder", seed=3, cycles=2
    )
    assert shedlab.decide(snapshot, {}, strategy="AvgShedder", seed=3, cycles=2) == direct == outcome


def test_decide_takes_settings() -> None:
    pair = "ThresholdShedder+LeastResourceUsageWithWeight"
    assert shedlab.decide(EXAMPLE, strategy=pair).decisions
    quiet = {"loadBalancerBrokerThresholdShedderPercentage": 95}
    assert not shedlab.decide(EXAMPLE, quiet, strategy=pair).decisions


def test_read_config_layers_and_sources(tmp_path: Path) -> None:
    conf = shedlab.read_config({"maxUnloadPercentage": 0.3}, maxUnloadPercentage=0.5, minUnloadMessage=7)
    assert conf.get("maxUnloadPercentage") == 0.5 and conf.get("minUnloadMessage") == 7
    assert conf.value_sources()["maxUnloadPercentage"] == "overrides"
    path = tmp_path / "broker.conf"
    path.write_text("maxUnloadPercentage=0.4\n")
    from_file = shedlab.read_config(path)
    assert from_file.value_sources()["maxUnloadPercentage"] == f"{path}:1"
    assert shedlab.read_config(from_file) == from_file and shedlab.read_config() == LoadBalancerConfig()


def test_simulate_is_run_simulation() -> None:
    result = shedlab.simulate(SCENARIO, strategy="AvgShedder", seed=2)
    assert isinstance(result, SimulationResult) and isinstance(result.ticks, pd.DataFrame)
    direct = run_simulation(load_scenario(SCENARIO), strategy="AvgShedder", seed=2)
    assert result.summary == direct.summary


def test_simulate_with_a_config_file_naming_a_pair(tmp_path: Path) -> None:
    path = tmp_path / "lb.yaml"
    path.write_text(
        "loadBalancerLoadSheddingStrategy: AvgShedder\nloadBalancerLoadPlacementStrategy: AvgShedder\n"
        "maxUnloadPercentage: 0.5\n"
    )
    result = shedlab.simulate(SCENARIO, config=path, seed=2)
    assert result.strategy == "AvgShedder" and result.config["maxUnloadPercentage"] == 0.5
    other = shedlab.simulate(
        SCENARIO, config=path, seed=2, strategy="OverloadShedder+LeastLongTermMessageRate"
    )
    assert other.strategy == "OverloadShedder+LeastLongTermMessageRate"


def test_compare_gives_one_row_per_pair() -> None:
    pairs = ["AvgShedder", "ThresholdShedder+LeastResourceUsageWithWeight"]
    table = shedlab.compare(SCENARIO, pairs, seed=2)
    assert list(table.index) == pairs and table.index.name == "pair"
    assert "unloads" in table.columns
    assert (
        table.loc["AvgShedder", "unloads"]
        == shedlab.simulate(SCENARIO, strategy="AvgShedder", seed=2).summary["unloads"]
    )
    with pytest.raises(shedlab.ShedlabError):
        shedlab.compare(SCENARIO, " , ")
