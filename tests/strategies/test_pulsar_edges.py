"""Edge cases where Pulsar's exact arithmetic or parsing decides the answer (found by auditing the
strategies line by line against the spec and Pulsar's sources)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import cast

import numpy as np
import pytest
from builders import broker_data, bundle_data, snapshot
from typer.testing import CliRunner

from shedlab.cli import app
from shedlab.config import LoadBalancerConfig
from shedlab.errors import InputError
from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import LocalBrokerData, ResourceUsage, is_system_heartbeat_bundle
from shedlab.strategies import LeastLongTermMessageRate
from shedlab.strategies.extensible_data import BrokerLoadData

RANGE = "0x00000000_0x40000000"


@pytest.mark.parametrize(
    ("namespace", "excluded"),
    [
        ("pulsar/standalone/broker-1:8080", True),  # heartbeat v1: pulsar/<cluster>/<host>:<port>
        ("pulsar/broker-1:8080", True),  # heartbeat v2: pulsar/<host>:<port>
        ("sla-monitor/standalone/broker-1:8080", True),  # SLA monitor: sla-monitor/<cluster>/<host>:<port>
        ("sla-monitor/broker-1:8080", False),  # no cluster segment: an ordinary namespace for Pulsar
        ("pulsar/system", False),  # getBundleDataForLoadShedding keeps pulsar/system
        ("public/default", False),
        ("pulsar/standalone/broker-1", False),  # no port
    ],
)
def test_system_namespaces_follow_pulsars_three_patterns(namespace: str, excluded: bool) -> None:
    assert is_system_heartbeat_bundle(f"{namespace}/{RANGE}") is excluded


def test_unmeasured_resource_minus_one_is_accepted_as_zero_percent() -> None:
    usage = ResourceUsage.from_json(JsonReader({"usage": -1.0, "limit": -1.0}, "r.json"))
    assert usage.percent_usage() == 0.0


def test_negative_usage_of_a_measured_resource_is_refused() -> None:
    with pytest.raises(InputError, match="must not be negative"):
        ResourceUsage.from_json(JsonReader({"usage": -5.0, "limit": 100.0}, "r.json"))


def test_negative_nic_usage_is_read_and_counts_as_pulsar_computes_it() -> None:
    """A NIC counter that went back gives a negative rate (LinuxBrokerHostUsageImpl does not clamp);
    the leader's percentage is negative and the maximum usage is the other resources'."""
    report = {"cpu": {"usage": 30.0, "limit": 100.0}, "bandwidthIn": {"usage": -500.0, "limit": 1000.0}}
    data = LocalBrokerData.from_json(JsonReader(report, "r.json"))
    assert data.bandwidthIn.percent_usage() == -50.0
    assert data.max_resource_usage() == pytest.approx(0.3)
    with pytest.raises(InputError, match="must not be negative"):  # a JVM's memory cannot go back
        LocalBrokerData.from_json(JsonReader({"memory": {"usage": -5.0, "limit": 100.0}}, "r.json"))
    # the extensible manager's BrokerLoadData carries the same host usage, read by the same rules
    extensible = BrokerLoadData.from_json(JsonReader(report, "r.json"))
    assert extensible.bandwidth_in.percent_usage() == -50.0
    with pytest.raises(InputError, match="must not be negative"):
        BrokerLoadData.from_json(JsonReader({"cpu": {"usage": -5.0, "limit": 100.0}}, "r.json"))


def test_lltmr_adds_preallocation_to_the_broker_rate_sum_as_java_groups_it() -> None:
    """Java: ``prealloc + (ltIn + ltOut)``. Here 0.1 + (0.1 + 0.4) == 0.6 == 0 + (0.6 + 0.0): a tie,
    where ``(0.1 + 0.1) + 0.4`` would be 0.6000000000000001 and exclude broker a."""
    pre = bundle_data(rate_in=0.05, rate_out=0.05)
    brokers = {
        "a:8080": broker_data(
            cpu=(20, 100), long_rate_in=0.1, long_rate_out=0.4, preallocated={"p/q/" + RANGE: pre}
        ),
        "b:8080": broker_data(cpu=(30, 100), long_rate_in=0.6, long_rate_out=0.0),
    }
    placement = LeastLongTermMessageRate(np.random.default_rng(0)).select_broker(
        ["a:8080", "b:8080"], "t/n/" + RANGE, snapshot(brokers), LoadBalancerConfig()
    )
    assert set(placement.choices) == {"a:8080", "b:8080"}


def test_conform_reports_a_missing_file_and_goes_on(tmp_path: Path) -> None:
    case = tmp_path / "ok.json"
    case.write_text(json.dumps(_tiny_case()), encoding="utf-8")
    result = CliRunner().invoke(app, ["conform", str(tmp_path / "missing.json"), str(case)])
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert result.exit_code == 2
    assert lines[0]["name"] == "missing" and "not found" in lines[0]["error"]
    assert lines[1]["name"] == "tiny" and "ticks" in lines[1]


@pytest.mark.parametrize(
    ("expected", "field"),
    [(["oops"], "expected[0]"), ([{"unload": {}, "assign": [{"bundle": "x"}]}], "expected[0].assign[0]")],
)
def test_conform_refuses_malformed_expected_answers(tmp_path: Path, expected: object, field: str) -> None:
    case = tmp_path / "bad.json"
    case.write_text(json.dumps({**_tiny_case(), "expected": expected}), encoding="utf-8")
    result = CliRunner().invoke(app, ["conform", "--check", str(case)])
    out = json.loads(result.stdout.splitlines()[0])
    assert result.exit_code == 2 and field in out["error"]


@pytest.mark.parametrize(
    ("expected", "said"),
    [
        ([{"unload": {}}, {"unload": {}}], "expected: expected one entry per tick: 1 ticks, 2 entries"),
        ([], "expected: expected one entry per tick: 1 ticks, 0 entries"),
        ([{"unload": {}, "assign": [{"choices": ["b1:8080"]}]}], "expected[0].assign: expected one answer"),
        ([{"unloads": {}}], "expected[0].unloads: unknown key"),
        ([{}], "expected[0]: a shedding strategy's entry needs 'unload'"),
    ],
)
def test_conform_refuses_expected_answers_that_do_not_fit_the_ticks(
    tmp_path: Path, expected: object, said: str
) -> None:
    """A wrong count of entries or answers was run and reported as a mismatch (exit 1); an entry without
    ``unload`` (or with a typo for it) passed unchecked."""
    case = tmp_path / "bad.json"
    case.write_text(json.dumps({**_tiny_case(), "expected": expected}), encoding="utf-8")
    result = CliRunner().invoke(app, ["conform", "--check", str(case)])
    out = json.loads(result.stdout.splitlines()[0])
    assert result.exit_code == 2 and said in out["error"], out


@pytest.mark.parametrize("assign", [0, "", False, {}])
def test_conform_refuses_an_assign_that_is_not_a_list(tmp_path: Path, assign: object) -> None:
    """A falsy ``assign`` was read as no requests (``or []``), so the case ran and compared as empty."""
    case = _tiny_case()
    ticks = cast("list[dict[str, object]]", case["ticks"])
    ticks[0]["assign"] = assign
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case), encoding="utf-8")
    result = CliRunner().invoke(app, ["conform", str(path)])
    out = json.loads(result.stdout.splitlines()[0])
    assert result.exit_code == 2 and "ticks[0].assign: expected a list" in out["error"], out


def _tiny_case() -> dict[str, object]:
    local = {
        "cpu": {"usage": 90.0, "limit": 100.0},
        "bundles": [],
        "msgRateIn": 0.0,
        "msgRateOut": 0.0,
        "msgThroughputIn": 0.0,
        "msgThroughputOut": 0.0,
    }
    return {
        "name": "tiny",
        "strategy": "OverloadShedder",
        "ticks": [{"loadData": {"brokers": {"b1:8080": {"localData": local}}, "bundleData": {}}}],
    }
