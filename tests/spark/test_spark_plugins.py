"""Users' strategies on Spark executors: a ``module:Class`` the driver imports from a directory on its
``sys.path`` only, shipped with ``ship_strategy_modules``, and the installed entry-point example."""

from __future__ import annotations

import importlib
import importlib.util
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from builders import ONE_BUNDLE_SHEDDER

from shedlab.core.grid import parse_grid
from shedlab.core.local_parquet import read_local_parquet
from shedlab.core.replay import strategy_configs
from shedlab.core.sim import run_simulation
from shedlab.core.sim.recording import write_recording
from shedlab.core.sim.scenario import parse_scenario_text
from shedlab.spark.ingest import ingest
from shedlab.spark.replay import replay
from shedlab.spark.session import ship_strategy_modules
from shedlab.spark.sweep import sweep

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PACKAGE = "sweep_plugin_pkg"  # a package directory, so shipping zips it
STRATEGY = f"{PACKAGE}.shedders:OneBundle"
SCENARIO = """
name: plugin-sweep
duration: 5m
strategy: AvgShedder
brokers: [{count: 3}]
workloads:
  - {namespaces: 1, bundles: 6, msg_rate_in: {dist: lognormal, median: 20000, sigma: 0.8}}
"""


def _importable_on_executor(spark: SparkSession, module: str) -> bool:
    def probe(_: Any) -> list[bool]:
        import importlib.util as util

        return [util.find_spec(module) is not None]

    return bool(spark.sparkContext.parallelize([0], 1).mapPartitions(probe).collect()[0])


def _driver_only_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plugin package in a directory only the driver's ``sys.path`` holds."""
    plugins = tmp_path / "driver-only"
    (plugins / PACKAGE).mkdir(parents=True)
    (plugins / PACKAGE / "__init__.py").write_text('"""Test plugins."""\n', encoding="utf-8")
    (plugins / PACKAGE / "shedders.py").write_text(textwrap.dedent(ONE_BUNDLE_SHEDDER), encoding="utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    importlib.invalidate_caches()


@pytest.mark.spark
def test_sweep_runs_plugins_on_executors(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _driver_only_package(tmp_path, monkeypatch)
    (tmp_path / "scenario.yaml").write_text(SCENARIO, encoding="utf-8")
    pairs = [f"{STRATEGY}+LeastLongTermMessageRate", "HottestBroker+LeastLongTermMessageRate"]
    grid = parse_grid(
        {"name": "plugins", "scenarios": ["scenario.yaml"], "strategies": pairs, "seeds": [1, 2]},
        source="grid",
        base=tmp_path,
    )
    assert importlib.util.find_spec(PACKAGE) is not None  # the driver sees it...
    assert not _importable_on_executor(spark, PACKAGE)  # ...local executors do not

    assert ship_strategy_modules(spark, grid.strategies) == (PACKAGE,)
    assert ship_strategy_modules(spark, grid.strategies) == ()  # once per application
    assert _importable_on_executor(spark, PACKAGE)

    result = sweep(spark, grid, str(tmp_path / "out"))
    assert (result.total, result.failed) == (4, 0)
    runs = read_local_parquet(tmp_path / "out" / "runs")
    assert set(runs["strategy"]) == set(pairs) and set(runs["status"]) == {"ok"}
    decisions = read_local_parquet(tmp_path / "out" / "decisions")
    assert (decisions["strategy"].astype(str) == pairs[0]).any()  # OneBundle unloaded on the executors


@pytest.mark.spark
def test_replay_runs_plugins_on_executors(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded data → ingest → replay under a ``module:Class`` pair and the entry-point plugin: replay
    ships the driver-only module itself, and each plugin's decisions come back from the executors."""
    _driver_only_package(tmp_path, monkeypatch)
    scenario = parse_scenario_text(SCENARIO.replace("duration: 5m", "duration: 30m"), source="plugin.yaml")
    recording = run_simulation(scenario, seed=1, record=True)
    write_recording(recording, tmp_path / "rec")
    ingest(spark, [str(tmp_path / "rec" / "load-reports.jsonl")], str(tmp_path / "snap"))
    pairs = [f"{STRATEGY}+LeastLongTermMessageRate", "HottestBroker+LeastLongTermMessageRate"]
    replay(spark, str(tmp_path / "snap"), str(tmp_path / "out"), strategy_configs(pairs), seed=1)
    decisions = read_local_parquet(tmp_path / "out" / "decisions")
    assert set(decisions["strategy"].astype(str)) <= set(pairs)
    assert (decisions["strategy"].astype(str) == pairs[0]).any()  # OneBundle unloads every cycle


RAISES = """
class Raises:
    name = "Raises"

    def __init__(self, rng=None):
        pass

    def on_active_brokers_change(self, active):
        pass

    def find_bundles_for_unloading(self, snapshot, conf):
        raise RuntimeError("no [luck] here")
"""


@pytest.mark.spark
def test_replay_keeps_the_other_groups_when_a_plugin_raises(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A strategy that raises fails its own cluster × configuration, named with its error; the other
    strategies' tables are written. It failed the whole replay (a Java and a Python stack trace, exit 1,
    nothing written); a replay in which every group fails is one line."""
    from shedlab.errors import InputError

    plugins = tmp_path / "plugins"
    (plugins / "replay_raise_pkg").mkdir(parents=True)
    (plugins / "replay_raise_pkg" / "__init__.py").write_text(RAISES, encoding="utf-8")
    monkeypatch.syspath_prepend(str(plugins))
    importlib.invalidate_caches()
    scenario = parse_scenario_text(SCENARIO.replace("duration: 5m", "duration: 15m"), source="plugin.yaml")
    write_recording(run_simulation(scenario, seed=1, record=True), tmp_path / "rec")
    ingest(spark, [str(tmp_path / "rec" / "load-reports.jsonl")], str(tmp_path / "snap"))
    raising = "replay_raise_pkg:Raises+LeastLongTermMessageRate"

    result = replay(
        spark, str(tmp_path / "snap"), str(tmp_path / "out"), strategy_configs([raising, "AvgShedder"])
    )
    assert [(f["strategy"], f["reason"]) for f in result.failures] == [
        (
            raising,
            "strategy replay_raise_pkg:Raises: find_bundles_for_unloading raised RuntimeError: "
            "no [luck] here",
        )
    ]
    assert list(result.summary["strategy"]) == ["AvgShedder"]
    comparison = read_local_parquet(tmp_path / "out" / "comparison")
    assert set(comparison["strategy"].astype(str)) == {"AvgShedder"} and len(comparison) > 0

    with pytest.raises(InputError, match=r"every replay failed; .*RuntimeError: no \[luck\] here"):
        replay(spark, str(tmp_path / "snap"), str(tmp_path / "out2"), strategy_configs([raising]))
