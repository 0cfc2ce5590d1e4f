"""A user's strategy that breaks: one line naming the plugin and what is wrong, exit 2, no traceback;
in a sweep, the run's error row names it and the sweep goes on (``strategies/guard.py``)."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from cli_support import plugin_module

from shedlab.cli import main
from shedlab.core.grid import expand_grid, load_grid
from shedlab.core.results import RunWriter, execute_spec
from shedlab.errors import ConfigError

BROKEN = '''
import time

import numpy as np

from shedlab.strategies.base import Placement, SheddingResult, Unload, candidate_indices


class _Base:
    def __init__(self, rng=None):
        self.rng = rng

    def on_active_brokers_change(self, active):
        pass


class ShedOne(_Base):
    """Unloads the first bundle of the busiest broker every cycle (so that placement is called)."""

    def find_bundles_for_unloading(self, snapshot, conf):
        result = SheddingResult()
        b = int(np.argmax(snapshot.total_msg_throughput()))
        bundles = snapshot.shedding_candidates(b)
        if bundles.size > 1:
            result.unloads.append(Unload(snapshot.broker_ids[b], snapshot.bundle_names[int(bundles[0])], {}))
        return result


class WrongSignature(_Base):
    def find_bundles_for_unloading(self, snapshot):
        return SheddingResult()


class NoRng:
    def __init__(self):
        pass

    def on_active_brokers_change(self, active):
        pass

    def find_bundles_for_unloading(self, snapshot, conf):
        return SheddingResult()


class NoInit:
    def on_active_brokers_change(self, active):
        pass

    def find_bundles_for_unloading(self, snapshot, conf):
        return SheddingResult()


class Boom(_Base):
    """Named like rich's emoji code :boom: (the error line used to print ``broken_plugin💥``)."""

    def find_bundles_for_unloading(self, snapshot, conf):
        raise ValueError("kaboom")


class RaisesInShedding(_Base):
    def find_bundles_for_unloading(self, snapshot, conf):
        raise ValueError("boom in shedding")


class RaisesOnBrokerChange(ShedOne):
    def on_active_brokers_change(self, active):
        raise RuntimeError("boom on change")


class GhostBundle(_Base):
    def find_bundles_for_unloading(self, snapshot, conf):
        result = SheddingResult()
        result.unloads.append(Unload(snapshot.broker_ids[0], "no/such/0x00000000_0xffffffff", {}))
        return result


class NotTheOwner(_Base):
    def find_bundles_for_unloading(self, snapshot, conf):
        result = SheddingResult()
        bundles = snapshot.bundles_of(0)
        result.unloads.append(Unload(snapshot.broker_ids[1], snapshot.bundle_names[int(bundles[0])], {}))
        return result


class ReturnsNone(_Base):
    def find_bundles_for_unloading(self, snapshot, conf):
        return None


class IntBundle(_Base):
    def find_bundles_for_unloading(self, snapshot, conf):
        result = SheddingResult()
        result.unloads.append(Unload(snapshot.broker_ids[0], int(snapshot.bundles_of(0)[0]), {}))
        return result


class RaisesInPlacement(_Base):
    def select_broker(self, candidates, bundle, snapshot, conf):
        raise KeyError("boom in placement")


class OutsideCandidates(_Base):
    def select_broker(self, candidates, bundle, snapshot, conf):
        inside = set(candidate_indices(snapshot, candidates).tolist())
        outside = [snapshot.broker_ids[i] for i in range(snapshot.num_brokers) if i not in inside]
        broker = outside[0] if outside else "not-a-broker:8080"
        return Placement(broker, (broker,), {})


class PlacementNone(_Base):
    def select_broker(self, candidates, bundle, snapshot, conf):
        return None


class IntBroker(_Base):
    def select_broker(self, candidates, bundle, snapshot, conf):
        return Placement(0, (0,), {})


class ExitsInShedding(_Base):
    def find_bundles_for_unloading(self, snapshot, conf):
        raise SystemExit(0)


class ExitsInInit(ShedOne):
    def __init__(self, rng=None):
        raise SystemExit("needs a license file")


class Slow(ShedOne):
    def find_bundles_for_unloading(self, snapshot, conf):
        time.sleep(30)
        return SheddingResult()
'''

SCENARIO = """
name: plugin-failures
duration: 6m
seed: 2
brokers: [{count: 3}]
workloads:
  - {namespaces: 2, bundles: 6, msg_rate_in: {dist: lognormal, median: 20000, sigma: 0.8}}
events:
  - {at: 3m, kind: add_brokers, count: 1}
"""


@pytest.fixture
def broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The module name of BROKEN, only on ``sys.path`` (a new name per test)."""
    return plugin_module(tmp_path, monkeypatch, "broken_plugin", BROKEN)


CASES = [
    ("WrongSignature+LeastLongTermMessageRate", "find_bundles_for_unloading raised TypeError"),
    ("RaisesInShedding+LeastLongTermMessageRate", "raised ValueError: boom in shedding"),
    ("Boom+LeastLongTermMessageRate", ":Boom: find_bundles_for_unloading raised ValueError: kaboom"),
    ("RaisesOnBrokerChange+LeastLongTermMessageRate", "on_active_brokers_change raised RuntimeError"),
    ("GhostBundle+LeastLongTermMessageRate", "which is not a bundle of the snapshot"),
    ("NotTheOwner+LeastLongTermMessageRate", "but it is owned by"),
    ("ReturnsNone+LeastLongTermMessageRate", "returned None, expected a SheddingResult"),
    ("IntBundle+LeastLongTermMessageRate", "(int), expected two strings"),
    ("ShedOne+{m}:RaisesInPlacement", "select_broker raised KeyError: 'boom in placement'"),
    ("ShedOne+{m}:OutsideCandidates", "which is not among the"),
    ("ShedOne+{m}:PlacementNone", "select_broker returned None, expected a Placement"),
    ("ShedOne+{m}:IntBroker", "select_broker returned broker 0 (int)"),
    # sys.exit in a plugin ended shedlab with the plugin's status, 0 here, and no word (until 29 Nov 2026)
    ("ExitsInShedding+LeastLongTermMessageRate", "find_bundles_for_unloading raised SystemExit: 0"),
    ("ExitsInInit+LeastLongTermMessageRate", "__init__ raised SystemExit: needs a license file"),
]  # fmt: skip


def _simulate_error(tmp_path: Path, strategy: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``shedlab simulate SCENARIO --strategy STRATEGY``'s error: one line, exit 2, no traceback."""
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["simulate", str(scenario), "--strategy", strategy])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2, err
    assert "\n" not in err and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(("pair", "needle"), CASES)
def test_a_broken_plugin_is_one_line_naming_it_and_exit_2(
    pair: str, needle: str, broken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _simulate_error(tmp_path, f"{broken}:{pair.format(m=broken)}", capsys)
    assert err.startswith(f"error: strategy {broken}:") and needle in err, err


@pytest.mark.parametrize("cls", ["NoRng", "NoInit"])
def test_a_constructor_without_rng_is_refused_where_the_strategy_is_named(
    cls: str, broken: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Judged from the signature when the name resolves: before any run of a simulation or a sweep. A
    class without ``__init__`` failed each run of a sweep, without the hint (28 Nov 2026)."""
    strategy = f"{broken}:{cls}+LeastLongTermMessageRate"
    err = _simulate_error(tmp_path, strategy, capsys)
    assert err.startswith(f"error: --strategy: cannot be constructed as {cls}(rng=generator): "), err
    assert err.endswith("def __init__(self, rng: np.random.Generator | None = None) (docs/strategies.md)")
    with pytest.raises(ConfigError, match=rf"grid.yaml: strategies\[0\]: cannot be constructed as {cls}"):
        _spec(tmp_path, strategy)


def test_a_plugin_module_exiting_as_it_is_imported_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script made a plugin (argparse, or sys.exit at its top) ended shedlab with its own status and
    output, where an import raising anything else is one line naming the module."""
    script = plugin_module(tmp_path, monkeypatch, "script_plugin", "import sys\nsys.exit(3)\n")
    err = _simulate_error(tmp_path, f"{script}:Shed", capsys)
    assert err == f"error: --strategy: cannot import module {script!r}: SystemExit: 3 (got '{script}:Shed')"


def _spec(tmp_path: Path, strategy: str) -> dict[str, Any]:
    (tmp_path / "scenario.yaml").write_text(SCENARIO, encoding="utf-8")
    grid = tmp_path / "grid.yaml"
    grid.write_text(
        f"name: g\nscenarios: [{tmp_path / 'scenario.yaml'}]\nstrategies: ['{strategy}']\nseeds: [1]\n",
        encoding="utf-8",
    )
    return cast("dict[str, Any]", expand_grid(load_grid(grid)).iloc[0].to_dict())


def test_a_plugin_failing_in_a_sweep_run_is_that_runs_error(broken: str, tmp_path: Path) -> None:
    spec = _spec(tmp_path, f"{broken}:RaisesInShedding+LeastLongTermMessageRate")
    row = execute_spec(spec, RunWriter(str(tmp_path / "out")))
    assert row["status"] == "error" and row["error_type"] == "StrategyError"
    assert row["error"] == (
        f"strategy {broken}:RaisesInShedding: find_bundles_for_unloading raised ValueError: boom in shedding"
    )


def test_a_slow_plugin_hit_by_the_time_limit_is_named(broken: str, tmp_path: Path) -> None:
    spec = _spec(tmp_path, f"{broken}:Slow+LeastLongTermMessageRate")
    row = execute_spec(spec, RunWriter(str(tmp_path / "out")), timeout_s=1.0)
    assert row["status"] == "error" and row["error_type"] == "StrategyError"
    assert row["error"] == (
        f"strategy {broken}:Slow: find_bundles_for_unloading was still running: "
        "run exceeded its time limit of 1 s"
    )


@pytest.fixture
def clashing(broken: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An installed distribution whose entry point is named ``ThresholdShedder`` (Pulsar's name)."""
    from shedlab.strategies import registry

    dist = tmp_path / "plugins" / f"{broken}_dist-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {broken}-dist\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        f"[shedlab.strategies]\nThresholdShedder = {broken}:ShedOne\n", encoding="utf-8"
    )
    importlib.invalidate_caches()
    registry._entry_points.cache_clear()
    yield broken
    monkeypatch.undo()
    importlib.invalidate_caches()
    registry._entry_points.cache_clear()


def test_a_plugin_named_like_pulsars_strategy_is_refused_by_that_name(
    clashing: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shedlab.strategies import resolve_strategy

    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    with pytest.raises(SystemExit) as exc:
        main(["simulate", str(scenario), "--strategy", "ThresholdShedder+LeastLongTermMessageRate"])
    err = capsys.readouterr().err.strip()
    assert exc.value.code == 2 and "\n" not in err, err
    assert "ThresholdShedder is Pulsar's strategy and also the name of an installed plugin" in err
    assert f"entry point ThresholdShedder = {clashing}:ShedOne" in err
    # either spelled out is unambiguous
    assert resolve_strategy("org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder").builtin
    assert not resolve_strategy(f"{clashing}:ShedOne").builtin
