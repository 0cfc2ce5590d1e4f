"""``shedlab twin`` and ``shedlab tune``: user errors are one line and exit 2, before Spark starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

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
        # a constant: every candidate tied, the runs went on and nothing could be recommended, exit 0
        (
            ("tune", "load-jitter", "--out", "x", "--objective", "1"),
            "--objective: names no metric or figure: every candidate would score the same (got '1')",
        ),
        (("tune", "load-jitter", "--out", "x", "--strategies", "AvgShedderr"), "AvgShedder"),
        (("tune", "load-jitter", "--out", "x", "--seeds", "0"), "--seeds"),
        # read as 'all': a typo started a tune of every pair, on Spark, and exited 0
        (("tune", "load-jitter", "--out", "x", "--strategies", ""), "--strategies: an empty value"),
        (("tune", "load-jitter", "--out", "x", "--strategies", " , ,"), "--strategies: name at least one"),
        # the pair's candidates drawn twice, twice --candidates for it (until 29 Nov 2026)
        (
            ("tune", "load-jitter", "--out", "x", "--strategies", "AvgShedder,avgshedder"),
            "--strategies: names a strategy pair twice (got 'AvgShedder')",
        ),
        # the shipped recording was tuned instead, silently (until 29 Nov 2026)
        (("tune", "--demo", "load-jitter"), "--demo: tunes the shipped recording's twin, not scenarios"),
        (("tune", "--demo", "--twin", "t.yaml"), "--demo: tunes the shipped recording's twin, not --twin"),
        (("twin", "/nonexistent/snap", "--out", "t.yaml", "--window", "yesterday"), "--window"),
        (("twin", "/nonexistent/snap", "--out", "t.yaml", "--strategy", "Nope"), "Nope"),
    ],
)
def test_user_errors_are_one_line(args: tuple[str, ...], expected: str) -> None:
    result = _run(*args)
    assert result.returncode == 2, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_a_space_that_changes_the_pair_is_one_line_before_spark(tmp_path: Path) -> None:
    space = tmp_path / "space.yaml"
    space.write_text("AvgShedder:\n  loadBalancerLoadSheddingStrategy: [ThresholdShedder]\n")
    result = _run("tune", "load-jitter", "--out", str(tmp_path / "out"), "--space", str(space))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: {space}: AvgShedder.loadBalancerLoadSheddingStrategy: a space cannot change the strategy "
        "pair: the pair is chosen by the section name (got ['ThresholdShedder']); give that pair a section "
        "of its own (e.g. ThresholdShedder+LeastResourceUsageWithWeight:); --strategies chooses the pairs "
        "tuned"
    ]
    assert not (tmp_path / "out").exists()


def test_demo_refuses_a_bad_strategy_before_spark() -> None:
    # --demo ignored --strategies: a misspelt pair (or a plugin) was silently replaced by the built-ins
    result = _run("tune", "--demo", "--out", "x", "--strategies", "AvgShedderr")
    assert result.returncode == 2, result.stderr
    assert "AvgShedder" in result.stderr and "Traceback" not in result.stderr


def test_demo_tunes_the_pairs_space_objective_and_eta_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from shedlab.cli import main, tune_cmd

    seen: dict[str, object] = {}
    monkeypatch.setattr(tune_cmd, "_preflight", lambda *a, **k: None)
    monkeypatch.setattr(tune_cmd, "tune_demo", lambda *a, **kw: seen.update(kw))
    with pytest.raises(SystemExit) as exc:
        main(["tune", "--demo", "--strategies", "AvgShedder", "--objective", "churn", "--eta", "2"])
    assert exc.value.code == 0
    assert seen["pairs"] == ["AvgShedder"] and seen["objective"] == "churn" and seen["eta"] == 2
    assert seen["space"] is not None


def test_twin_refuses_a_directory_as_its_out_before_spark(tmp_path: Path) -> None:
    """``--out`` is the twin's YAML file. A directory went through to the write after the whole fit and
    raised IsADirectoryError (a traceback, exit 1); it is refused first, in one line."""
    result = _run("twin", "/nonexistent/snap", "--out", str(tmp_path))
    assert result.returncode == 2, result.stderr
    assert "--out" in result.stderr and "is a directory" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    below_a_file = tmp_path / "file"
    below_a_file.write_text("x")
    result = _run("twin", "/nonexistent/snap", "--out", str(below_a_file / "twin.yaml"))
    assert result.returncode == 2 and "not a directory" in result.stderr, result.stderr


def test_the_printed_broker_conf_fragment_is_not_wrapped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fragment was printed wrapped at the terminal's width (80 columns on a pipe):
    ``loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.AvgSh`` and ``edder`` on
    two lines, so the broker.conf an operator copied from the terminal named no class."""
    from types import SimpleNamespace

    from shedlab.cli import tune_cmd

    key = "loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.AvgShedder"
    why = "# why: the shedding half of AvgShedder; over the same 5 seeds the best settings of the pair"
    figures = {"objective": 1.0, "imbalance": 1.0, "unloads_per_day": 1.0}
    rec = SimpleNamespace(
        is_recorded=False,
        candidate={"label": "AvgShedder", **figures},
        recorded=dict(figures),
        objective="balanced",
        objective_expr="imbalance",
        seeds=5,
        improvement={f: {"mean": 0.0, "low": None, "high": None} for f in figures},
        notes=[],
    )
    result = SimpleNamespace(
        recommendation=rec, runs_spent=1, rungs=[1], full_grid=1, fragment=f"{why}\n{key}\n"
    )
    monkeypatch.setattr(tune_cmd, "_iv", lambda *a: "1")
    monkeypatch.setenv("COLUMNS", "80")
    tune_cmd._print_recommendation(result)
    lines = capsys.readouterr().out.splitlines()
    assert key in lines and why in lines


def test_recommendation_prints_large_figures_as_plain_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    """``.3g`` printed ``unloads_per_day: recorded 692 [380, 1e+03]`` and ``change -692 [-1e+03, -380]``:
    figures and changes use the project's ``significant`` (``1,030``, ``-1,030``)."""
    from types import SimpleNamespace

    from shedlab.cli import tune_cmd

    row = {"objective": 692.0, "objective_low": 380.0, "objective_high": 1030.4}
    figures = {f"{fig}{end}": v for fig in ("imbalance", "unloads_per_day") for end, v in
               (("", 692.0), ("_low", 380.0), ("_high", 1030.4))}  # fmt: skip
    change = {"mean": -692.0, "low": -1030.4, "high": -380.0}
    rec = SimpleNamespace(
        is_recorded=False,
        candidate={"label": "AvgShedder", **row, **figures},
        recorded={**row, **figures},
        objective="balanced",
        objective_expr="imbalance",
        seeds=5,
        improvement={f: change for f in ("objective", "imbalance", "unloads_per_day")},
        notes=[],
    )
    result = SimpleNamespace(recommendation=rec, runs_spent=1, rungs=[1], full_grid=1, fragment="")
    tune_cmd._print_recommendation(result)
    out = capsys.readouterr().out
    assert "e+0" not in out, out
    assert "unloads_per_day: recorded 692 [380, 1,030]" in out, out
    assert "(change -692 [-1,030, -380])" in out, out


def test_scenarios_that_disagree_on_the_recorded_configuration_are_one_line_before_spark(
    tmp_path: Path,
) -> None:
    """The first scenario's pair was taken as every scenario's recorded configuration, silently: an
    AvgShedder scenario's 'recorded configuration' ran UniformLoadShedder, and tune.json had no note."""
    import importlib.resources

    builtin = importlib.resources.files("shedlab").joinpath(
        "data", "scenarios", "heterogeneous-colocated.yaml"
    )
    mine = tmp_path / "my-cluster.yaml"
    mine.write_text(builtin.read_text("utf-8").replace("name: heterogeneous-colocated", "name: my-cluster"))
    result = _run("tune", "heterogeneous-cpu-eater", str(mine), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: strategy: the scenarios disagree on the recorded configuration: "
        f"builtin:heterogeneous-cpu-eater has UniformLoadShedder+LeastLongTermMessageRate, {mine} has "
        "AvgShedder; tune compares every candidate with one recorded configuration; tune them one at a "
        "time, or give them the same strategy, config and strategy_config"
    ]
    assert not (tmp_path / "out").exists()


def test_twin_fit_lines_print_each_figure_with_its_unit(capsys: pytest.CaptureFixture[str]) -> None:
    """'traffic moved per day: recorded 2.16' (a share of the cluster's traffic) read like tune's
    traffic_moved_per_day (MiB/s of unloaded throughput, 2599.8 on the demo): the unit is printed."""
    from types import SimpleNamespace

    from shedlab.cli import tune_cmd
    from shedlab.core.twin import FitCheck

    check = FitCheck("traffic moved per day", 2.16, 2.11, 1.64, 2.53, 0.0574, 1.3, "share of the traffic", "")
    tune_cmd._print_fit(SimpleNamespace(checks=[check], fits=True), "fit")
    assert "traffic moved per day (share of the traffic): recorded 2.16, twin 2.11" in capsys.readouterr().out


def _fitted_twin() -> Any:
    """What ``shedlab.spark.twin.fit`` returns, its text rendered by the twin's own renderer."""
    from types import SimpleNamespace

    import pandas as pd

    from shedlab.core.twin import _render

    scenario = {
        "name": "twin-prod-eu",
        "description": "a twin",
        "duration": "1h",
        "seed": 1,
        "strategy": "AvgShedder",
        "config": {},
        "simulation": {"tick": "1m"},
        "hardware": {"c4": {"cores": 4}},
        "brokers": [{"count": 1, "hardware": "c4"}],
        "workloads": [{"name": "w", "bundles": 4}],
        "events": [],
    }
    text = _render(scenario, pd.DataFrame({"number": [1], "broker": ["b1:8080"]}), [])
    return SimpleNamespace(
        cluster="prod-eu", fit=SimpleNamespace(text=text, scenario=scenario, broker_numbers={"b1:8080": 1})
    )


def test_twin_writes_a_new_file_or_its_own_earlier_one_and_no_other_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``twin --out README.md`` replaced the README with the twin (any existing file, after the whole fit).
    Now a file is replaced only if an earlier twin wrote it (its first line says so), and anything else is
    refused before Spark starts."""
    from contextlib import nullcontext

    import pandas as pd
    from cli_support import error_line

    from shedlab.cli import main, tune_cmd
    from shedlab.core.results import TWIN_HEADER

    snap = tmp_path / "snap"
    for table in ("broker_samples", "bundle_samples"):
        part = snap / table / "cluster=prod-eu" / "day=2025-01-02"
        part.mkdir(parents=True)
        pd.DataFrame({"time_ms": [1735776000000], "broker": ["b1:8080"]}).to_parquet(part / "part-0.parquet")
    fits: list[object] = []

    def fit(*args: object, **kwargs: object) -> Any:
        fits.append(args)
        return _fitted_twin()

    monkeypatch.setattr("shedlab.spark.twin.fit", fit)
    monkeypatch.setattr(tune_cmd, "_preflight", lambda *a, **k: None)
    monkeypatch.setattr(tune_cmd, "spark_session", lambda *a: nullcontext())
    out = tmp_path / "twin.yaml"
    for _ in range(2):  # a new path, then the file the first run wrote: replaced
        with pytest.raises(SystemExit) as exc:
            main(["twin", str(snap), "--out", str(out), "--no-validate"])
        assert exc.value.code == 0 and out.read_text().startswith(TWIN_HEADER + ": ")
    assert len(fits) == 2
    capsys.readouterr()
    theirs = {"README.md": "# my project\n", "mine.yaml": "name: mine\nduration: 10m\n"}
    for name, text in theirs.items():
        (tmp_path / name).write_text(text)
        line = error_line(["twin", str(snap), "--out", str(tmp_path / name), "--no-validate"], capsys)
        assert line.startswith("error: --out: exists and is not a twin: writing there would replace it")
        assert (tmp_path / name).read_text() == text
    assert len(fits) == 2  # refused before the fit


def test_a_set_strategy_key_is_the_twins_pair_not_a_config_key() -> None:
    """``twin --set loadBalancerLoadSheddingStrategy=…``: the key stayed in the twin's config, under the
    default pair that overrode it (the twin ran ThresholdShedder); a scenario now refuses such a key."""
    from shedlab.cli.tune_cmd import _recorded_config

    avg = [f"loadBalancer{role}Strategy=AvgShedder" for role in ("LoadShedding", "LoadPlacement")]
    assert _recorded_config(None, [*avg, "maxUnloadPercentage=0.5"], None) == (
        "AvgShedder",
        {"maxUnloadPercentage": "0.5"},
    )
    place = ["loadBalancerLoadPlacementStrategy=LeastResourceUsageWithWeight"]
    assert _recorded_config(None, place, "ThresholdShedder+LeastLongTermMessageRate")[0] == (
        "ThresholdShedder+LeastResourceUsageWithWeight"
    )


def test_two_scenarios_of_one_name_are_one_line_before_spark(tmp_path: Path) -> None:
    """Their runs share ids (the name, not the text): the second's were dropped as duplicates, never run,
    the first one's results scored for both."""
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("name: mine\nduration: 5m\n")
    second.write_text("name: mine\nduration: 10m\n")
    result = _run("tune", str(first), str(second), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "error: scenarios: two scenarios to tune on have the same name (give each once) (got ['mine']); "
        f"'mine': {first}, {second}"
    ]
    assert not (tmp_path / "out").exists()
