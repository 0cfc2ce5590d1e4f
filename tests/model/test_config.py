"""Behaviour of the Pulsar load-balancer configuration: defaults, parsing, validation and provenance."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from shedlab.cli.config_cmd import register
from shedlab.config import (
    KEY_SPECS,
    STRATEGY_KEYS,
    STRATEGY_PACKAGE,
    KeySpec,
    LoadBalancerConfig,
    from_runtime_configuration,
    key_spec,
    normalise_strategy_name,
    runtime_configuration,
    to_snake_case,
)
from shedlab.errors import ConfigError

SPEC_PATH = Path(__file__).resolve().parents[2] / "docs" / "spec.md"  # tracked: never skip, fail if moved


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ defaults


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        # AvgShedder (spec §2.4)
        ("loadBalancerAvgShedderLowThreshold", 15),
        ("loadBalancerAvgShedderHighThreshold", 40),
        ("loadBalancerAvgShedderHitCountLowThreshold", 8),
        ("loadBalancerAvgShedderHitCountHighThreshold", 2),
        ("minUnloadMessage", 1000),
        ("minUnloadMessageThroughput", 1048576),
        ("maxUnloadPercentage", 0.2),
        # weights (§1.5): memory is deprecated and 0, direct memory 0
        ("loadBalancerCPUResourceWeight", 1.0),
        ("loadBalancerBandwidthInResourceWeight", 1.0),
        ("loadBalancerBandwidthOutResourceWeight", 1.0),
        ("loadBalancerBandwithInResourceWeight", 1.0),
        ("loadBalancerBandwithOutResourceWeight", 1.0),
        ("loadBalancerMemoryResourceWeight", 0.0),
        ("loadBalancerDirectMemoryResourceWeight", 0.0),
        # thresholds
        ("loadBalancerBrokerOverloadedThresholdPercentage", 85),
        ("loadBalancerBrokerThresholdShedderPercentage", 10),
        ("loadBalancerHistoryResourcePercentage", 0.9),
        ("loadBalancerBundleUnloadMinThroughputThreshold", 10.0),
        ("loadBalancerMsgRateDifferenceShedderThreshold", 50.0),
        ("loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold", 4.0),
        ("loadBalancerAverageResourceUsageDifferenceThresholdPercentage", 10),
        ("loadBalancerBrokerLoadTargetStd", 0.25),
        ("loadBalancerReportUpdateThresholdPercentage", 10),
        ("maxUnloadBundleNumPerShedding", -1),
        ("lowerBoundarySheddingEnabled", False),
        ("loadBalancerSheddingGracePeriodMinutes", 30),
        ("loadBalanceSheddingDelayInSeconds", 180),
        ("loadBalancerOverrideBrokerNicSpeedGbps", None),
        ("loadBalancerSheddingExcludedNamespaces", frozenset()),
        ("loadBalancerPlacementStrategy", "leastLoadedServer"),
        ("loadBalancerBrokerUnderloadedThresholdPercentage", 50),
        ("loadBalancerLoadSheddingStrategy", "org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder"),
        (
            "loadBalancerLoadPlacementStrategy",
            "org.apache.pulsar.broker.loadbalance.impl.LeastLongTermMessageRate",
        ),
    ],
)
def test_defaults_match_pulsar(key: str, expected: Any) -> None:
    value = LoadBalancerConfig().get(key)
    assert value == expected
    assert type(value) is type(expected)


def test_default_strategies_and_weights() -> None:
    conf = LoadBalancerConfig()
    assert conf.shedding_strategy_name == "ThresholdShedder"
    assert conf.placement_strategy_name == "LeastLongTermMessageRate"
    assert conf.resource_weights() == (1.0, 0.0, 1.0, 1.0)


def _spec_table() -> list[list[str]]:
    text = SPEC_PATH.read_text(encoding="utf-8")
    section = text[text.index("## 5. Configuration keys") : text.index("Hard-coded constants")]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) >= 6 and re.fullmatch(r"[a-zA-Z]+", cells[0]) and cells[0] != "key":
            rows.append(cells)
    return rows


def _spec_default(kind: str, text: str) -> Any:
    text = text.split(" (")[0].strip()
    if kind == "bool":
        return text == "true"
    if kind in ("int", "long"):
        return int(text)
    if kind == "double":
        return float(text)
    if kind == "Optional<double>":
        assert text == "empty"
        return None
    if kind == "list":
        return () if text == "[]" else tuple(item.strip() for item in text.split(","))
    if kind == "set":
        assert text == "{}"
        return frozenset()
    return text


def test_every_spec_table_key_has_the_spec_default_and_type() -> None:
    rows = _spec_table()
    pulsar_keys = [key for key, spec in KEY_SPECS.items() if spec.pulsar]  # shedlab's own keys are not in §5
    assert [row[0] for row in rows] == pulsar_keys, "keys must match spec §5 exactly, in order"
    python_type = {
        "bool": "bool",
        "int": "int",
        "long": "int",
        "double": "float",
        "string": "str",
        "enum": "str",
        "list": "list[str]",
        "set": "set[str]",
        "Optional<double>": "float | None",
    }
    for key, kind, default, dyn, *_ in rows:
        spec = KEY_SPECS[key]
        assert spec.type == python_type[kind], key
        assert spec.deprecated == ("deprecated" in dyn), key
        if default.startswith("…"):  # abbreviated class name in the spec
            assert spec.default.endswith(default[1:]), key
        else:
            assert spec.default == _spec_default(kind, default), key
        if kind == "long":
            assert spec.java_type == "long", key


def test_field_names_are_the_mechanical_snake_case_of_the_pulsar_key() -> None:
    assert to_snake_case("loadBalancerCPUResourceWeight") == "load_balancer_cpu_resource_weight"
    assert to_snake_case("minUnloadMessageThroughput") == "min_unload_message_throughput"
    assert to_snake_case("lowerBoundarySheddingEnabled") == "lower_boundary_shedding_enabled"
    assert to_snake_case("loadBalanceSheddingDelayInSeconds") == "load_balance_shedding_delay_in_seconds"
    fields = {f.name for f in dataclasses.fields(LoadBalancerConfig)}
    for key, spec in KEY_SPECS.items():
        assert spec.field_name == to_snake_case(key)
        assert spec.field_name in fields
    assert LoadBalancerConfig().load_balancer_broker_load_data_ttl_in_seconds == 1800


def test_key_specs_carry_docs_and_users() -> None:
    for spec in KEY_SPECS.values():
        assert isinstance(spec, KeySpec)
        assert spec.doc and spec.used_by
    assert KEY_SPECS["loadBalancerBandwithInResourceWeight"].deprecated
    assert not KEY_SPECS["loadBalancerBandwidthInResourceWeight"].deprecated
    assert "AvgShedder" in KEY_SPECS["loadBalancerAvgShedderLowThreshold"].used_by
    assert key_spec("minUnloadMessage").java_type == "int"


def test_config_is_immutable_and_hashable() -> None:
    conf = LoadBalancerConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        conf.max_unload_percentage = 0.5  # type: ignore[misc]  # the write mypy refuses is the point
    assert {conf: 1}[LoadBalancerConfig()] == 1


# --------------------------------------------------------------------------------------------- get / keys


def test_get_unknown_key_suggests_the_closest_key() -> None:
    with pytest.raises(ConfigError) as err:
        LoadBalancerConfig().get("loadBalancerAvgShedderLowThreshhold")
    assert "did you mean 'loadBalancerAvgShedderLowThreshold'?" in str(err.value)


def test_snake_case_name_given_as_key_points_to_the_pulsar_key() -> None:
    with pytest.raises(ConfigError, match="use the Pulsar key 'loadBalancerCPUResourceWeight'"):
        LoadBalancerConfig().with_overrides({"load_balancer_cpu_resource_weight": 2.0})


# ------------------------------------------------------------------------------------- value coercion


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("minUnloadMessage", "10", 10),
        ("minUnloadMessage", " 3 ", 3),
        ("minUnloadMessage", 10.0, 10),
        ("loadBalancerSheddingGracePeriodMinutes", 2**40, 2**40),  # a Java long
        ("maxUnloadPercentage", 0, 0.0),
        ("maxUnloadPercentage", "0.5", 0.5),
        ("maxUnloadPercentage", "1e-3", 0.001),
        ("loadBalancerEnabled", "false", False),
        ("loadBalancerEnabled", "TRUE", True),
        ("loadBalancerEnabled", False, False),
        ("loadBalancerOverrideBrokerNicSpeedGbps", "2.5", 2.5),
        ("loadBalancerOverrideBrokerNicSpeedGbps", "", None),
        ("loadBalancerOverrideBrokerNicSpeedGbps", None, None),
        ("loadBalancerOverrideBrokerNics", "eth0, eth1", ("eth0", "eth1")),
        ("loadBalancerOverrideBrokerNics", ["eth0"], ("eth0",)),
        ("loadBalancerSheddingExcludedNamespaces", "a/b,c/d,a/b", frozenset({"a/b", "c/d"})),
        ("loadBalancerSheddingExcludedNamespaces", ["a/b"], frozenset({"a/b"})),
        ("supportedNamespaceBundleSplitAlgorithms", "range_equally_divide", ("range_equally_divide",)),
        (
            "loadBalancerServiceUnitTableViewSyncer",
            "SystemTopicToMetadataStoreSyncer",
            "SystemTopicToMetadataStoreSyncer",
        ),
    ],
)
def test_values_are_coerced_to_the_key_type(key: str, raw: Any, expected: Any) -> None:
    value = LoadBalancerConfig().with_overrides({key: raw}).get(key)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("key", "raw", "expected_text"),
    [
        ("minUnloadMessage", 2.5, "expected an integer"),
        ("minUnloadMessage", "2.5", "expected an integer"),
        ("minUnloadMessage", "1_000", "expected an integer"),
        ("minUnloadMessage", True, "expected an integer"),
        ("minUnloadMessage", 2**31, "expected an integer in [-2147483648, 2147483647]"),
        ("loadBalancerSheddingGracePeriodMinutes", 2**63, "expected an integer in"),
        ("maxUnloadPercentage", float("nan"), "expected a finite number"),
        ("maxUnloadPercentage", math.inf, "expected a finite number"),
        ("maxUnloadPercentage", "NaN", "expected a finite number"),
        ("maxUnloadPercentage", "1e400", "expected a finite number"),
        ("maxUnloadPercentage", "lots", "expected a finite number"),
        ("maxUnloadPercentage", 80, "expected a number in [0, 1]"),  # a fraction, not a percent
        ("maxUnloadPercentage", None, "got null"),
        ("loadBalancerEnabled", "yes", "expected true or false"),
        ("loadBalancerEnabled", 1, "expected true or false"),
        ("loadBalancerOverrideBrokerNicSpeedGbps", "fast", "expected a finite number or empty"),
        ("loadBalancerOverrideBrokerNics", 5, "expected a list of strings"),
        ("loadBalancerOverrideBrokerNics", ["eth0", 1], "expected a list of strings"),
        ("loadManagerClassName", "", "expected a non-empty string"),
        (
            "defaultNamespaceBundleSplitAlgorithm",
            "range_equaly_divide",
            "did you mean 'range_equally_divide'?",
        ),
        ("supportedNamespaceBundleSplitAlgorithms", "range_equally_divide,bogus", "unknown item 'bogus'"),
        ("loadBalancerServiceUnitTableViewSyncer", "none", "expected one of None,"),
    ],
)
def test_bad_values_name_source_key_value_and_expected_type(key: str, raw: Any, expected_text: str) -> None:
    with pytest.raises(ConfigError) as err:
        LoadBalancerConfig().with_overrides({key: raw}, source="sweep.yaml:7")
    text = str(err.value)
    assert text.startswith(f"sweep.yaml:7: {key}: ")
    assert expected_text in text
    if raw is not None:
        assert repr(raw) in text
    assert err.value.field == key and err.value.source == "sweep.yaml:7"


def test_inline_comment_in_a_value_gets_a_hint() -> None:
    with pytest.raises(ConfigError, match="no end-of-line comments"):
        LoadBalancerConfig().with_overrides({"minUnloadMessage": "10 # ten"})


def test_direct_construction_is_validated_and_normalised() -> None:
    conf = LoadBalancerConfig(max_unload_percentage=1, load_balancer_load_shedding_strategy=" AvgShedder ")
    assert conf.max_unload_percentage == 1.0 and isinstance(conf.max_unload_percentage, float)
    assert conf.load_balancer_load_shedding_strategy == "AvgShedder"
    with pytest.raises(ConfigError, match="min_unload_message: expected an integer"):
        LoadBalancerConfig(min_unload_message=2.5)  # type: ignore[arg-type]  # a wrong type, on purpose


# ----------------------------------------------------------------------------------- bandwidth weights


@pytest.mark.parametrize(
    ("new_in", "old_in", "new_out", "old_out", "expected_in", "expected_out"),
    [
        (1.0, 1.0, 1.0, 1.0, 1.0, 1.0),
        (1.0, 3.0, 1.0, 0.0, 3.0, 0.0),  # new key at 1.0: the misspelt key wins
        (2.0, 3.0, 0.5, 0.0, 2.0, 0.5),  # new key set: it wins over the misspelt key
        (0.0, 1.0, 1.0, 1.0, 0.0, 1.0),
    ],
)
def test_bandwidth_weights_follow_pulsars_deprecated_key_getter(
    new_in: float, old_in: float, new_out: float, old_out: float, expected_in: float, expected_out: float
) -> None:
    conf = LoadBalancerConfig().with_overrides(
        {
            "loadBalancerCPUResourceWeight": 0.7,
            "loadBalancerDirectMemoryResourceWeight": 0.1,
            "loadBalancerBandwidthInResourceWeight": new_in,
            "loadBalancerBandwithInResourceWeight": old_in,
            "loadBalancerBandwidthOutResourceWeight": new_out,
            "loadBalancerBandwithOutResourceWeight": old_out,
        }
    )
    assert conf.resource_weights() == (0.7, 0.1, expected_in, expected_out)
    # The raw keys are untouched: only the getter applies the fallback.
    assert conf.get("loadBalancerBandwithInResourceWeight") == old_in


# ----------------------------------------------------------------------------------------- strategies


# Resolving names (module:Class, entry points), roles and the pair rule: tests/strategies/test_registry.py


@pytest.mark.parametrize(
    "name",
    [
        "AvgShedder",
        f"{STRATEGY_PACKAGE}.ThresholdShedder",
        "my_package.strategies:HottestBroker",
        "hottest-broker",
    ],
)
def test_strategy_keys_store_any_name_stripped(name: str) -> None:
    for role, key in STRATEGY_KEYS.items():
        conf = LoadBalancerConfig().with_overrides({key: f"  {name} "})
        assert conf.get(key) == name
        assert normalise_strategy_name(name, role=role) == name


def test_strategy_names_drop_only_pulsars_package() -> None:
    conf = LoadBalancerConfig().with_overrides(
        {
            "loadBalancerLoadSheddingStrategy": "pkg.mod:Mine",
            "loadBalancerLoadPlacementStrategy": "AvgShedder",
        }
    )
    assert conf.shedding_strategy_name == "pkg.mod:Mine"
    assert conf.placement_strategy_name == "AvgShedder"
    assert LoadBalancerConfig().shedding_strategy_name == "ThresholdShedder"
    assert STRATEGY_PACKAGE == "org.apache.pulsar.broker.loadbalance.impl"


@pytest.mark.parametrize("value", ["", "   ", 3, None])
def test_strategy_key_needs_a_name(value: Any) -> None:
    with pytest.raises(ConfigError, match="loadBalancerLoadSheddingStrategy: expected"):
        LoadBalancerConfig().with_overrides({"loadBalancerLoadSheddingStrategy": value}, source="b.conf:3")


# -------------------------------------------------------------------------------------------- broker.conf

BROKER_CONF = """\
#
# Licensed to the Apache Software Foundation (ASF)
#
### --- General broker settings --- ###
zookeeperServers=
brokerServicePort=6650
webServicePort=8080
clusterName=
someSettingFromAFutureRelease=whatever

! a Java properties comment
   loadBalancerEnabled = true
loadBalancerSheddingIntervalMinutes: 5
loadBalancerLoadSheddingStrategy=org.apache.pulsar.broker.loadbalance.impl.UniformLoadShedder
maxUnloadPercentage=0.5
minUnloadMessageThroughput=   2097152
lowerBoundarySheddingEnabled=true
loadBalancerBrokerOverloadedThresholdPercentage=90
loadBalancerBrokerOverloadedThresholdPercentage=95
loadBalancerOverrideBrokerNicSpeedGbps=
loadBalancerCPUResourceWeight=
supportedNamespaceBundleSplitAlgorithms=
loadBalancerSheddingExcludedNamespaces=public/default,\\
    pulsar/system
loadBalancerOverrideBrokerNics eth0,eth1
"""


def test_broker_conf_is_read_like_pulsar_reads_it(tmp_path: Path) -> None:
    path = write(tmp_path, "broker.conf", BROKER_CONF)
    conf = LoadBalancerConfig.from_file(path)
    assert conf.load_balancer_shedding_interval_minutes == 5
    assert conf.shedding_strategy_name == "UniformLoadShedder"
    assert conf.max_unload_percentage == 0.5
    assert conf.min_unload_message_throughput == 2097152
    assert conf.lower_boundary_shedding_enabled is True
    assert conf.load_balancer_broker_overloaded_threshold_percentage == 95  # last occurrence wins
    assert conf.load_balancer_override_broker_nic_speed_gbps is None
    assert conf.load_balancer_cpu_resource_weight == 1.0  # blank scalar keeps the default
    assert conf.supported_namespace_bundle_split_algorithms == ()  # blank list becomes empty, as in Pulsar
    assert conf.load_balancer_shedding_excluded_namespaces == {"public/default", "pulsar/system"}
    assert conf.load_balancer_override_broker_nics == ("eth0", "eth1")

    sources = conf.value_sources()
    assert sources["loadBalancerEnabled"] == f"{path}:12"
    assert sources["loadBalancerSheddingIntervalMinutes"] == f"{path}:13"
    assert sources["loadBalancerBrokerOverloadedThresholdPercentage"] == f"{path}:19"
    assert sources["loadBalancerSheddingExcludedNamespaces"] == f"{path}:23"
    assert sources["loadBalancerCPUResourceWeight"] == "default"
    assert sources["supportedNamespaceBundleSplitAlgorithms"] == f"{path}:22"
    assert sources["loadBalancerSheddingGracePeriodMinutes"] == "default"


def test_properties_extension_and_unknown_extension_use_broker_conf_format(tmp_path: Path) -> None:
    for name in ("lb.properties", "broker.conf.orig"):
        conf = LoadBalancerConfig.from_file(write(tmp_path, name, "minUnloadMessage=5\n"))
        assert conf.min_unload_message == 5


@pytest.mark.parametrize(
    ("line", "suggestion"),
    [
        ("loadBalancerAvgShedderLowThreshhold=5", "loadBalancerAvgShedderLowThreshold"),
        ("loadBalancerSheddingIntervalMinute=5", "loadBalancerSheddingIntervalMinutes"),
        ("loadBalanceSheddingDelayInSecond=5", "loadBalanceSheddingDelayInSeconds"),
        ("minUnloadMesage=5", "minUnloadMessage"),
        ("maxUnloadPercent=0.5", "maxUnloadPercentage"),
        ("lowerBoundarySheddingEnable=true", "lowerBoundarySheddingEnabled"),
        ("LoadBalancerEnabled=false", "loadBalancerEnabled"),
    ],
)
def test_broker_conf_rejects_misspelt_load_balancer_keys(tmp_path: Path, line: str, suggestion: str) -> None:
    path = write(tmp_path, "broker.conf", f"brokerServicePort=6650\n\n{line}\n")
    with pytest.raises(ConfigError) as err:
        LoadBalancerConfig.from_file(path)
    text = str(err.value)
    assert text.startswith(f"{path}:3: {line.split('=')[0]}: unknown load balancer configuration key")
    assert f"did you mean {suggestion!r}?" in text


def test_broker_conf_bad_value_names_file_line_key_value_and_type(tmp_path: Path) -> None:
    path = write(tmp_path, "broker.conf", "# lb\nloadBalancerBrokerThresholdShedderPercentage=10.5\n")
    with pytest.raises(ConfigError) as err:
        LoadBalancerConfig.from_file(path)
    assert str(err.value) == (
        f"{path}:2: loadBalancerBrokerThresholdShedderPercentage: expected an integer (Java int) (got '10.5')"
    )


def test_broker_conf_only_validates_the_last_duplicate(tmp_path: Path) -> None:
    path = write(tmp_path, "broker.conf", "minUnloadMessage=oops\nminUnloadMessage=7\n")
    assert LoadBalancerConfig.from_file(path).min_unload_message == 7


# -------------------------------------------------------------------------------------------- YAML / JSON


def test_yaml_mapping_of_pulsar_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "lb.yaml",
        "# AvgShedder setup\n"
        "loadBalancerLoadSheddingStrategy: AvgShedder\n"
        "loadBalancerLoadPlacementStrategy: AvgShedder\n"
        "maxUnloadPercentage: 0.5\n"
        "loadBalancerAvgShedderHitCountLowThreshold: 6\n"
        "loadBalancerSheddingExcludedNamespaces: [public/a]\n"
        "loadBalancerBandwidthInResourceWeight: 0\n",
    )
    conf = LoadBalancerConfig.from_file(path)
    assert conf.shedding_strategy_name == conf.placement_strategy_name == "AvgShedder"
    assert conf.max_unload_percentage == 0.5
    assert conf.load_balancer_avg_shedder_hit_count_low_threshold == 6
    assert conf.load_balancer_shedding_excluded_namespaces == {"public/a"}
    assert conf.resource_weights()[2] == 0.0
    assert conf.value_sources()["maxUnloadPercentage"] == f"{path}:4"


def test_yaml_nested_under_config_with_other_sections(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "scenario.yml",
        "brokers: [b1, b2]\nconfig:\n  minUnloadMessage: 10\n  loadBalancerEnabled: false\n",
    )
    conf = LoadBalancerConfig.from_file(path)
    assert conf.min_unload_message == 10 and conf.load_balancer_enabled is False
    assert conf.value_sources()["loadBalancerEnabled"] == f"{path}:4"


@pytest.mark.parametrize(
    "section", ["strategy: AvgShedder", "strategy_config: {AvgShedder: {maxUnloadPercentage: 0.5}}"]
)
def test_a_scenarios_strategy_beside_its_config_section_is_an_error(tmp_path: Path, section: str) -> None:
    """Only ``config:`` was read: the file's pair and per-pair keys were dropped, silently."""
    path = write(tmp_path, "s.yaml", f"name: s\nconfig:\n  minUnloadMessage: 10\n{section}\n")
    key = section.split(":")[0]
    with pytest.raises(ConfigError, match=rf"s.yaml:4: {key}: a config file gives its config: section only"):
        LoadBalancerConfig.from_file(path)


def test_yaml_load_balancer_key_beside_config_section_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "config:\n  minUnloadMessage: 10\nmaxUnloadPercentage: 0.5\n")
    with pytest.raises(ConfigError, match="outside the 'config:' section"):
        LoadBalancerConfig.from_file(path)


def test_yaml_unknown_key_is_an_error_with_suggestion(tmp_path: Path) -> None:
    path = write(tmp_path, "lb.yaml", "minUnloadMessage: 10\nloadBalancerAvgShedderLowThreshhold: 5\n")
    with pytest.raises(ConfigError) as err:
        LoadBalancerConfig.from_file(path)
    assert str(err.value) == (
        f"{path}:2: loadBalancerAvgShedderLowThreshhold: unknown load balancer configuration key; "
        "did you mean 'loadBalancerAvgShedderLowThreshold'?"
    )


def test_yaml_even_unrelated_unknown_keys_are_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "lb.yaml", "brokerServicePort: 6650\n")
    with pytest.raises(ConfigError, match="brokerServicePort: unknown load balancer configuration key"):
        LoadBalancerConfig.from_file(path)


def test_unparsable_yaml_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "lb.yaml", "minUnloadMessage: [1,\n")
    with pytest.raises(ConfigError, match=re.escape(str(path)) + r": malformed YAML at line 2"):
        LoadBalancerConfig.from_file(path)


def test_yaml_that_is_not_a_mapping_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="expected a mapping"):
        LoadBalancerConfig.from_file(write(tmp_path, "lb.yaml", "- minUnloadMessage\n"))


def test_empty_yaml_gives_defaults(tmp_path: Path) -> None:
    assert LoadBalancerConfig.from_file(write(tmp_path, "lb.yaml", "# nothing\n")) == LoadBalancerConfig()


def test_json_mapping(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "lb.json",
        '{\n  "loadBalancerSheddingEnabled": false,\n  "loadBalancerOverrideBrokerNicSpeedGbps": 25\n}\n',
    )
    conf = LoadBalancerConfig.from_file(path)
    assert conf.load_balancer_shedding_enabled is False
    assert conf.load_balancer_override_broker_nic_speed_gbps == 25.0
    assert conf.value_sources()["loadBalancerOverrideBrokerNicSpeedGbps"] == f"{path}:3"


def test_json_nested_under_config(tmp_path: Path) -> None:
    path = write(tmp_path, "lb.json", json.dumps({"config": {"minUnloadMessage": "12"}}))
    assert LoadBalancerConfig.from_file(path).min_unload_message == 12


def test_unparsable_json_names_the_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "lb.json", '{\n  "minUnloadMessage": 1,\n}\n')
    with pytest.raises(ConfigError, match=re.escape(f"{path}: malformed JSON at line 3")):
        LoadBalancerConfig.from_file(path)


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.conf"
    with pytest.raises(ConfigError, match=re.escape(str(path)) + ": cannot read config file"):
        LoadBalancerConfig.from_file(path)


# ---------------------------------------------------------------------------------------------- sources


def test_sources_track_who_set_each_key() -> None:
    conf = (
        LoadBalancerConfig()
        .with_overrides({"minUnloadMessage": 5, "maxUnloadPercentage": 0.3}, source="base.yaml")
        .with_overrides({"maxUnloadPercentage": 0.4}, source="--set")
    )
    sources = conf.value_sources()
    assert set(sources) == set(KEY_SPECS)
    assert sources["minUnloadMessage"] == "base.yaml"
    assert sources["maxUnloadPercentage"] == "--set"
    assert sources["loadBalancerEnabled"] == "default"
    assert LoadBalancerConfig(min_unload_message=5).value_sources()["minUnloadMessage"] == "code"


def test_sources_do_not_take_part_in_equality() -> None:
    a = LoadBalancerConfig().with_overrides({"minUnloadMessage": 5}, source="a.yaml")
    b = LoadBalancerConfig().with_overrides({"minUnloadMessage": 5}, source="b.conf:9")
    assert a == b and hash(a) == hash(b)
    assert a.value_sources() != b.value_sources()
    assert LoadBalancerConfig().with_overrides({"minUnloadMessage": 1000}) == LoadBalancerConfig()


def test_to_pulsar_dict_and_non_default_values() -> None:
    conf = LoadBalancerConfig().with_overrides({"loadBalancerOverrideBrokerNics": "eth1,eth0"})
    data = conf.to_pulsar_dict()
    assert list(data) == list(KEY_SPECS)
    assert data["loadBalancerOverrideBrokerNics"] == ["eth1", "eth0"]
    assert data["supportedNamespaceBundleSplitAlgorithms"] == [
        "range_equally_divide",
        "topic_count_equally_divide",
        "specified_positions_divide",
        "flow_or_qps_equally_divide",
    ]
    json.dumps(data)  # JSON-ready
    assert conf.non_default_values() == {"loadBalancerOverrideBrokerNics": ["eth1", "eth0"]}


# ------------------------------------------------------------------------------------------- round trip

_WORD = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=","), min_size=1
)


def _value_strategy(spec: KeySpec) -> st.SearchStrategy[Any]:
    if spec.pulsar_key in STRATEGY_KEYS.values():
        names = ["AvgShedder", "LeastLongTermMessageRate", "pkg.mod:Mine", "hottest-broker"]
        return st.sampled_from(names + [f"{STRATEGY_PACKAGE}.{n}" for n in names[:2]])
    lo = None if spec.minimum is None else int(spec.minimum)
    hi = None if spec.maximum is None else int(spec.maximum)
    finite = st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)
    item = st.sampled_from(spec.choices) if spec.choices else _WORD
    if spec.pulsar_key == "capacityAwareBrokerCapacities":  # structured items: pattern=positive number
        item = st.builds(
            lambda w, c: f"{w}*={c}", st.from_regex(r"[a-z0-9.:-]{1,8}", fullmatch=True), st.integers(1, 64)
        )
    by_type: dict[str, st.SearchStrategy[Any]] = {
        "bool": st.booleans(),
        "int": st.integers(-(2**63) if lo is None else lo, 2**63 - 1)
        if spec.java_type == "long"
        else st.integers(-(2**31) if lo is None else lo, 2**31 - 1),
        "float": finite | st.integers(-(10**6) if lo is None else lo, 10**6 if hi is None else hi),
        "float | None": st.none() | finite,
        "str": item,
        "list[str]": st.lists(item, max_size=5),
        "set[str]": st.frozensets(item, max_size=5),
    }
    return by_type[spec.type]


_OVERRIDES = st.fixed_dictionaries(
    {}, optional={key: _value_strategy(spec) for key, spec in KEY_SPECS.items()}
)


@settings(max_examples=150, deadline=None)
@given(_OVERRIDES)
def test_with_overrides_of_to_pulsar_dict_round_trips(overrides: dict[str, Any]) -> None:
    conf = LoadBalancerConfig().with_overrides(overrides, source="generated")
    again = LoadBalancerConfig().with_overrides(conf.to_pulsar_dict())
    assert again == conf
    assert again.to_pulsar_dict() == conf.to_pulsar_dict()
    through_json = LoadBalancerConfig().with_overrides(json.loads(json.dumps(conf.to_pulsar_dict())))
    assert through_json == conf
    assert set(conf.non_default_values()) <= set(overrides)


# ------------------------------------------------------------------------------------------------- CLI


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """shedlab (test harness)."""

    register(app)
    return app


def test_cli_show_json_lists_every_key_with_value_and_source(cli: typer.Typer, tmp_path: Path) -> None:
    path = write(tmp_path, "broker.conf", "brokerServicePort=6650\nmaxUnloadPercentage=0.5\n")
    result = CliRunner().invoke(cli, ["config", "show", "--config", str(path), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload["keys"]) == set(KEY_SPECS)
    entry = payload["keys"]["maxUnloadPercentage"]
    assert entry["value"] == 0.5 and entry["default"] == 0.2 and entry["changed"] is True
    assert entry["source"] == f"{path}:2"
    assert payload["keys"]["minUnloadMessage"]["source"] == "default"
    assert payload["effectiveResourceWeights"] == {
        "cpu": 1.0,
        "directMemory": 0.0,
        "bandwidthIn": 1.0,
        "bandwidthOut": 1.0,
    }


def test_cli_show_changed_only(cli: typer.Typer, tmp_path: Path) -> None:
    path = write(tmp_path, "lb.yaml", "minUnloadMessage: 7\n")
    result = CliRunner().invoke(cli, ["config", "show", "-c", str(path), "--json", "--changed"])
    assert result.exit_code == 0, result.output
    assert list(json.loads(result.stdout)["keys"]) == ["minUnloadMessage"]


def test_cli_show_table_groups_keys_and_shows_sources(
    cli: typer.Typer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "broker.conf", "loadBalancerAvgShedderHighThreshold=30\n")
    result = CliRunner().invoke(cli, ["config", "show", "-c", "broker.conf"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "used by AvgShedder" in result.stdout
    assert "loadBalancerAvgShedderHighThreshold" in result.stdout
    assert "broker.conf:1" in result.stdout
    assert "default 40" in result.stdout
    assert "loadBalancerBandwithInResourceWeight (deprecated)" in result.stdout


def test_cli_show_reports_config_errors_without_traceback(cli: typer.Typer, tmp_path: Path) -> None:
    path = write(tmp_path, "broker.conf", "loadBalancerAvgShedderLowThreshhold=5\n")
    result = CliRunner().invoke(cli, ["config", "show", "-c", str(path)])
    assert result.exit_code == 2
    assert "did you mean 'loadBalancerAvgShedderLowThreshold'?" in result.stderr
    assert "Traceback" not in result.output


def test_the_runtime_configuration_prints_values_as_pulsar_does() -> None:
    """``String.valueOf`` of each field (BrokerService.getRuntimeConfiguration): ``""`` for a null field,
    ``Optional.empty``, whole doubles with ``.0``, lists and sets in brackets."""
    conf = LoadBalancerConfig().with_overrides(
        {
            "loadBalancerSheddingExcludedNamespaces": ["t/b", "t/a"],
            "loadBalancerBrokerOverloadedThresholdPercentage": 90,
        },
        source="test",
    )
    answer = runtime_configuration(conf)
    assert set(answer) == {key for key, spec in KEY_SPECS.items() if spec.pulsar}
    assert not any(key.startswith("capacityAware") for key in answer)  # shedlab's own keys: not Pulsar's
    assert answer["loadBalancerOverrideBrokerNicSpeedGbps"] == "Optional.empty"
    assert answer["loadBalancerSheddingExcludedNamespaces"] == "[t/a, t/b]"  # a Set: sorted here
    assert answer["loadBalancerBrokerOverloadedThresholdPercentage"] == "90"
    assert answer["loadBalancerHistoryResourcePercentage"] == "0.9"
    assert answer["loadBalancerCPUResourceWeight"] == "1.0"
    assert answer["loadBalancerAutoBundleSplitEnabled"] == "true"


@given(
    st.fixed_dictionaries(
        {
            "loadBalancerSheddingExcludedNamespaces": st.lists(
                st.sampled_from(["a/b", "c/d", "e/f"]), unique=True
            ),
            "loadBalancerOverrideBrokerNicSpeedGbps": st.none() | st.floats(0.5, 400, allow_nan=False),
            "loadBalancerHistoryResourcePercentage": st.floats(0, 1),
            "loadBalancerAutoBundleSplitEnabled": st.booleans(),
            "loadBalancerNamespaceMaximumBundles": st.integers(1, 1024),
        }
    )
)
def test_a_runtime_answer_reads_back_as_the_configuration_it_printed(keys: dict[str, object]) -> None:
    conf = LoadBalancerConfig().with_overrides(keys, source="test")
    answer = {**runtime_configuration(conf), "clusterName": "c1", "brokerServicePort": "Optional[6650]"}
    read = LoadBalancerConfig().with_overrides(from_runtime_configuration(answer), source="runtime")
    assert read.to_pulsar_dict() == conf.to_pulsar_dict()


def test_a_runtime_answer_skips_other_broker_keys_and_null_fields() -> None:
    read = from_runtime_configuration(
        {"clusterName": "c1", "loadBalancerLoadPlacementStrategy": "", "x": "1"}
    )
    assert read == {}
