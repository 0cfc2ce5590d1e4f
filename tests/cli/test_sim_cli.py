"""``shedlab simulate`` and ``shedlab compare``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from shedlab.cli.sim_cmd import register
from shedlab.strategies import short_pair_name

runner = CliRunner()

SMALL = """
name: cli-small
duration: 10m
seed: 2
strategy: AvgShedder
brokers: [{count: 3}]
workloads:
  - {namespaces: 2, bundles: 4, msg_rate_in: {dist: lognormal, median: 20000, sigma: 0.8}}
events:
  - {at: 3m, kind: add_brokers, count: 1}
"""


@pytest.fixture
def app() -> typer.Typer:
    application = typer.Typer()
    register(application)
    return application


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL, encoding="utf-8")
    return path


def test_simulate_prints_a_summary_table(app: typer.Typer, scenario_file: Path) -> None:
    result = runner.invoke(app, ["simulate", str(scenario_file)])
    assert result.exit_code == 0, result.output
    assert "cli-small" in result.output and "over-unloading flips" in result.output


def test_simulate_json_and_out(app: typer.Typer, scenario_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    argv = ["simulate", str(scenario_file), "--strategy", "ThresholdShedder+LeastResourceUsageWithWeight"]
    argv += [
        "--seed",
        "4",
        "--set",
        "loadBalancerBrokerThresholdShedderPercentage=5",
        "--json",
        "--out",
        str(out),
    ]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["strategy"] == "ThresholdShedder+LeastResourceUsageWithWeight"
    assert summary["seed"] == 4
    assert summary["config"]["loadBalancerBrokerThresholdShedderPercentage"] == 5
    assert (out / "ticks.parquet").exists() and (out / "summary.json").exists()


def test_simulate_with_config_file_and_recording(
    app: typer.Typer, scenario_file: Path, tmp_path: Path
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder\n"
        "loadBalancerLoadPlacementStrategy=org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate\n"
        "maxUnloadPercentage=0.4\n",
        encoding="utf-8",
    )
    out = tmp_path / "rec"
    result = runner.invoke(
        app, ["simulate", str(scenario_file), "--config", str(conf), "--out", str(out), "--record", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["strategy"] == "UniformLoadShedder+LeastLongTermMessageRate"
    assert summary["config"]["maxUnloadPercentage"] == 0.4
    assert (out / "load-reports.jsonl").exists()
    assert (out / "prometheus" / "pulsar_lb_cpu_usage.json").exists()


def test_compare_prints_pairs_side_by_side(app: typer.Typer, scenario_file: Path, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["compare", str(scenario_file), "--out", str(tmp_path / "cmp")], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    for name in ("Threshold+LLTMR", "Threshold+LRUWW", "Uniform+LLTMR", "Overload+LLTMR", "AvgShedder"):
        assert name in result.output
    document = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [d["strategy"] for d in document][-1] == "AvgShedder"
    assert (tmp_path / "cmp" / "AvgShedder" / "decisions.parquet").exists()


def test_compare_json_with_a_subset(app: typer.Typer, scenario_file: Path) -> None:
    result = runner.invoke(
        app,
        [
            "compare",
            str(scenario_file),
            "--strategies",
            "AvgShedder, uniformloadshedder+leastlongtermmessagerate",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    runs = json.loads(result.output)
    assert [r["strategy"] for r in runs] == ["AvgShedder", "UniformLoadShedder+LeastLongTermMessageRate"]
    assert len({r["seed"] for r in runs}) == 1


def test_user_errors_exit_2_without_traceback(
    scenario_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shedlab.cli import main

    for argv in (
        ["simulate", "no-such-scenario"],
        ["simulate", str(scenario_file), "--strategy", "AvgShedderr"],
        ["compare", str(scenario_file), "--strategies", "Nope+Nothing"],
        ["simulate", str(scenario_file), "--set", "loadBalancerAvgShedderLowThreshhold=3"],
        ["simulate", str(scenario_file), "--record"],
    ):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 2, argv
        err = capsys.readouterr().err
        assert "error:" in err and "Traceback" not in err


def test_short_pair_names() -> None:
    assert short_pair_name("ThresholdShedder+LeastResourceUsageWithWeight") == "Threshold+LRUWW"
    assert short_pair_name("AvgShedder") == "AvgShedder"
