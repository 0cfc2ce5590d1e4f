"""Users' strategies through the commands: decide, simulate, compare, scenario files and report.

Two plugins: ``HottestBroker``, the installed example (entry point, ``examples/plugins``), and a
``module:Class`` written to a temporary directory that is only on ``sys.path``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from cli_support import plugin_module
from typer.testing import CliRunner

from shedlab.cli import app, main
from shedlab.core.sim import load_scenario
from shedlab.strategies import registry

runner = CliRunner()
SNAPSHOT = Path(__file__).resolve().parents[2] / "examples" / "snapshot.json"
HOTTEST = "HottestBroker+LeastLongTermMessageRate"

SCENARIO = """
name: plugin-small
duration: 10m
seed: 2
strategy: {strategy}
brokers: [{{count: 3}}]
workloads:
  - {{namespaces: 2, bundles: 6, msg_rate_in: {{dist: lognormal, median: 20000, sigma: 0.8}}}}
events:
  - {{at: 3m, kind: add_brokers, count: 1}}
"""

ONE_BUNDLE = '''
"""Unloads the busiest bundle of the busiest broker, every call: a crude but real strategy."""
import numpy as np

from shedlab.strategies.base import SheddingResult, Unload


class OneBundle:
    name = "OneBundle"

    def __init__(self, rng=None):
        self.rng = rng

    def on_active_brokers_change(self, active):
        pass

    def find_bundles_for_unloading(self, snapshot, conf):
        result = SheddingResult()
        b = int(np.argmax(snapshot.total_msg_throughput()))
        bundles = snapshot.shedding_candidates(b)
        if bundles.size > 1:
            j = int(bundles[np.argmax(snapshot.short_term_throughput()[bundles])])
            unload = Unload(snapshot.broker_ids[b], snapshot.bundle_names[j], {"strategy": self.name})
            result.unloads.append(unload)
        return result
'''


@pytest.fixture
def one_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """``module:OneBundle`` from a module only on ``sys.path`` (a new module name per test)."""
    return f"{plugin_module(tmp_path, monkeypatch, 'cli_plugin', ONE_BUNDLE)}:OneBundle"


def scenario_file(tmp_path: Path, strategy: str, name: str = "scenario") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SCENARIO.format(strategy=strategy), encoding="utf-8")
    return path


def invoke(application: typer.Typer, argv: list[str]) -> str:
    result = runner.invoke(application, argv)
    assert result.exit_code == 0, result.output
    return result.output


def test_decide_with_the_entry_point_plugin() -> None:
    out = json.loads(invoke(app, ["decide", str(SNAPSHOT), "--strategy", "HottestBroker", "--json"]))
    assert out["strategy"] == HOTTEST and out["unload"] == []  # one hit of three
    out = json.loads(
        invoke(app, ["decide", str(SNAPSHOT), "--strategy", "HottestBroker", "--cycles", "3", "--json"])
    )
    assert out["cycles"] == 3 and out["unload"]
    assert {u["broker"] for u in out["unload"]} == {"broker-1:8080"}
    reason = out["unload"][0]["reason"]
    moved = sum(u["reason"]["bundle_throughput"] for u in out["unload"])
    assert reason["strategy"] == "HottestBroker" and moved <= reason["target_throughput"]


def test_decide_with_a_module_class(one_bundle: str) -> None:
    pair = f"{one_bundle}+LeastResourceUsageWithWeight"
    out = json.loads(invoke(app, ["decide", str(SNAPSHOT), "--strategy", pair, "--json"]))
    assert out["strategy"] == pair
    assert [u["reason"]["strategy"] for u in out["unload"]] == ["OneBundle"]


def test_bad_plugin_names_are_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    misspelt = "HotestBroker+LeastLongTermMessageRate"
    cases = [
        (["decide", str(SNAPSHOT), "--strategy", "nosuch_plugin_q.mod:X"], "cannot import module"),
        (["simulate", str(scenario_file(tmp_path, "AvgShedder")), "--strategy", misspelt], "did you mean"),
        (["simulate", str(scenario_file(tmp_path, "nosuch_plugin_q:X+LeastLongTermMessageRate", "bad"))],
         "ModuleNotFoundError"),
    ]  # fmt: skip
    for argv, needle in cases:
        with pytest.raises(SystemExit) as exc:
            main(argv)
        err = capsys.readouterr().err.strip()
        assert exc.value.code == 2 and needle in err, err
        assert "\n" not in err and "Traceback" not in err


def test_scenario_files_name_plugins(tmp_path: Path, one_bundle: str) -> None:
    path = scenario_file(tmp_path, f"{one_bundle} + LeastLongTermMessageRate")
    with path.open("a", encoding="utf-8") as f:
        f.write(f"strategy_config:\n  {HOTTEST}: {{maxUnloadPercentage: 0.5}}\n")
    scenario = load_scenario(str(path))
    assert scenario.strategy == f"{one_bundle}+LeastLongTermMessageRate"
    assert set(scenario.strategy_config) == {HOTTEST}


def test_simulate_compare_and_report_with_plugins(tmp_path: Path, one_bundle: str) -> None:
    scenario = str(scenario_file(tmp_path, HOTTEST))
    summary = json.loads(invoke(app, ["simulate", scenario, "--json"]))
    assert summary["strategy"] == HOTTEST and summary["unloads"] >= 0
    mine = f"{one_bundle}+LeastLongTermMessageRate"
    pairs = [HOTTEST, mine, "AvgShedder"]
    out = tmp_path / "compare"
    compared = json.loads(
        invoke(app, ["compare", scenario, "--strategies", ",".join(pairs), "--out", str(out), "--json"])
    )
    assert [r["strategy"] for r in compared] == pairs
    assert compared[1]["unloads"] > 0  # OneBundle unloads every cycle
    table = invoke(app, ["compare", scenario, "--strategies", ",".join(pairs)])
    assert "OneBundle+LLTMR" in table and "HottestBroker+LLTMR" in table

    html = tmp_path / "report.html"
    invoke(app, ["report", str(out), "--out", str(html)])
    document = html.read_text(encoding="utf-8")
    colours = [registry.pair_colour(p, pairs) for p in pairs]
    assert len(set(colours)) == 3 and colours[2] == registry.PAIR_COLOURS["AvgShedder"]
    for pair, colour in zip(pairs, colours, strict=True):
        assert pair.split("+")[0] in document
        assert colour in document


def test_conformance_case_names_a_plugin(tmp_path: Path) -> None:
    load_data = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    case = {"name": "hottest", "strategy": "HottestBroker", "ticks": [{"loadData": load_data}] * 3}
    path = tmp_path / "hottest.json"
    path.write_text(json.dumps(case), encoding="utf-8")
    out = json.loads(invoke(app, ["conform", str(path)]))
    assert out["strategy"] == "HottestBroker"
    assert [list(t["unload"]) for t in out["ticks"]] == [[], [], ["broker-1:8080"]]  # the third hit sheds
