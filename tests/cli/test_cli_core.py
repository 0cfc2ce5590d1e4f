"""End to end through the CLI: decide, conform, and clear errors (no traceback) for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "conformance"  # the public cases ship with the repository
EXAMPLE = ROOT / "examples" / "snapshot.json"


def shedlab(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "shedlab", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )


def test_decide_json_names_destinations_and_reasons() -> None:
    run = shedlab("decide", EXAMPLE, "--strategy", "AvgShedder", "--cycles", "2", "--json", "--seed", "3")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["strategy"] == "AvgShedder" and out["cycles"] == 2
    first = out["unload"][0]
    assert first["broker"] == "broker-1:8080" and first["destination"] == "broker-4:8080"
    assert first["reason"]["mode"] == "msgRate" and first["reason"]["gap"] == pytest.approx(70, abs=1e-3)


def test_decide_table() -> None:
    run = shedlab("decide", EXAMPLE, "--strategy", "ThresholdShedder+LeastResourceUsageWithWeight")
    assert run.returncode == 0, run.stderr
    assert "unload decision(s)" in run.stdout and "broker-1:8080" in run.stdout


def test_decide_on_a_case_runs_its_strategy_and_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A case's strategy and config were ignored: decide ran Pulsar's default pair with Pulsar's defaults on
    its first tick, silently (until 29 Nov 2026). They are its defaults now; --strategy and --set win."""
    from shedlab.cli import main

    case = json.loads((CASES / "AvgShedder" / "avg-3-brokers-pairs.json").read_text("utf-8"))
    case["config"] = {"maxUnloadPercentage": 0.25}
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case), encoding="utf-8")

    def decided(*extra: str) -> dict[str, object]:
        with pytest.raises(SystemExit) as done:
            main(["decide", str(path), "--json", *extra])
        out, err = capsys.readouterr()
        assert done.value.code in (0, None), err
        return dict(json.loads(out))

    assert decided()["strategy"] == "AvgShedder"
    assert (
        decided("--strategy", "ThresholdShedder")["strategy"] == "ThresholdShedder+LeastLongTermMessageRate"
    )
    with pytest.raises(SystemExit):
        main(["decide", str(path), "--json", "--set", "maxUnloadPercentage=7"])
    assert "maxUnloadPercentage" in capsys.readouterr().err  # --set is read on top of the case's config


def test_conform_check_passes_every_public_case() -> None:
    run = shedlab("conform", "--check", CASES)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == len(list(CASES.rglob("*.json")))
    assert all(line["check"]["passed"] for line in lines)
    assert "0 failed" in run.stderr


def test_conform_timing_and_error_case(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x", "strategy": "AvgShedderr", "ticks": []}')
    good = sorted((CASES / "AvgShedder").glob("*.json"))[0]
    run = shedlab("conform", "--timing", "3", bad, good)
    assert run.returncode == 2  # a case that cannot be run is bad input; the others still ran
    assert run.stderr.count("\n") == 1 and run.stderr.startswith(f"error: {bad}: ")
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert "error" in lines[0] and "AvgShedder" in lines[0]["error"]  # did-you-mean
    assert set(lines[1]["timing_ms"]) >= {"shed"} and lines[1]["timing_ms"]["shed"]["min"] > 0


def broker(**local: object) -> dict[str, object]:
    base = {"cpu": {"usage": 10.0, "limit": 100.0}, "msgRateIn": 1.0, "bundles": []}
    return {"localData": {**base, **local}}


BUNDLE = "t/n/0x00000000_0x10000000"
BAD_INPUTS = {
    "malformed": ('{"brokers": {', ["malformed JSON", "line 1"]),
    "missing": (
        json.dumps({"brokers": {"b1": {"timeAverageData": {}}}}),
        ["brokers.b1.localData", "missing"],
    ),
    "negative": (
        json.dumps({"brokers": {"b1": broker(msgRateIn=-5.0)}}),
        ["brokers.b1.localData.msgRateIn", "-5.0"],
    ),
    "nan": ('{"brokers": {"b1": {"localData": {"msgRateOut": NaN}}}}', ["msgRateOut", "finite"]),
    "two-owners": (
        json.dumps({"brokers": {"b1": broker(bundles=[BUNDLE]), "b2": broker(bundles=[BUNDLE])}}),
        ["listed by two brokers", "equally recent", BUNDLE],
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
def test_bad_snapshot_gives_one_clear_line(tmp_path: Path, kind: str) -> None:
    text, needles = BAD_INPUTS[kind]
    path = tmp_path / f"{kind}.json"
    path.write_text(text)
    run = shedlab("decide", path)
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert str(path) in run.stderr
    for needle in needles:
        assert needle in run.stderr


def test_unknown_broker_in_assign_request(tmp_path: Path) -> None:
    case = {
        "name": "c",
        "strategy": "LeastLongTermMessageRate",
        "ticks": [
            {
                "loadData": {"brokers": {"b1": broker()}},
                "assign": [{"bundle": "t/n/0x00000000_0x10000000", "candidates": ["b9"]}],
            }
        ],
    }
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case))
    run = shedlab("conform", path)
    assert run.returncode == 2
    error = json.loads(run.stdout)["error"]
    assert "unknown broker" in error and "'b9'" in error and "ticks[0].assign[0].candidates" in error


def test_unknown_strategy_and_config_key(tmp_path: Path) -> None:
    run = shedlab("decide", EXAMPLE, "--strategy", "AvgShedr")
    assert run.returncode == 2 and "Traceback" not in run.stderr and "AvgShedder" in run.stderr
    conf = tmp_path / "broker.conf"
    conf.write_text("# tuned\nloadBalancerAvgShedderLowThreshhold=20\n")
    run = shedlab("decide", EXAMPLE, "--config", conf)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "loadBalancerAvgShedderLowThreshold" in run.stderr and str(conf) in run.stderr
