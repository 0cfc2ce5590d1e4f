"""Registry checks the mutation run of the ``extra`` group left unpinned: ``resolve_config``'s check that
``loadManagerClassName`` matches the pair (extensible TransferShedder only in the extensible manager, the
modular strategies only in the modular one), and the remaining error lines of ``resolve_pair``."""

from __future__ import annotations

import pytest

from shedlab.config import STRATEGY_KEYS, LoadBalancerConfig
from shedlab.errors import ConfigError
from shedlab.strategies.registry import (
    EXTENSIBLE_LOAD_MANAGER,
    MODULAR_LOAD_MANAGER,
    installed_plugins,
    resolve_config,
    resolve_pair,
)

SHED, PLACE = STRATEGY_KEYS["shedding"], STRATEGY_KEYS["placement"]
EXTENSIBLE = {SHED: "TransferShedder", PLACE: "ExtensibleLeastResourceUsageWithWeight"}
MODULAR = {SHED: "ThresholdShedder", PLACE: "LeastLongTermMessageRate"}


def config_error(conf: LoadBalancerConfig) -> str:
    with pytest.raises(ConfigError) as info:
        resolve_config(conf)
    return str(info.value)


def test_transfer_shedder_under_the_default_modular_manager_is_refused_without_a_file_name() -> None:
    """The manager key is at Pulsar's default (not from a file): the line names the key, the value and the
    fix, and no source."""
    conf = LoadBalancerConfig().with_overrides(EXTENSIBLE, source="pair.yaml")
    assert config_error(conf) == (
        f"loadManagerClassName: TransferShedder runs in the extensible load manager (got "
        f"'{MODULAR_LOAD_MANAGER}'); set loadManagerClassName={EXTENSIBLE_LOAD_MANAGER}"
    )


def test_transfer_shedder_under_a_modular_manager_set_in_a_file_names_that_file() -> None:
    conf = LoadBalancerConfig().with_overrides(EXTENSIBLE, source="pair.yaml")
    conf = conf.with_overrides({"loadManagerClassName": MODULAR_LOAD_MANAGER}, source="broker.conf")
    assert config_error(conf).startswith(
        "broker.conf: loadManagerClassName: TransferShedder runs in the extensible load manager"
    )


def test_a_modular_shedder_under_the_extensible_manager_is_refused_naming_the_file_and_the_fix() -> None:
    conf = LoadBalancerConfig().with_overrides(MODULAR, source="pair.yaml")
    conf = conf.with_overrides({"loadManagerClassName": EXTENSIBLE_LOAD_MANAGER}, source="broker.conf")
    assert config_error(conf) == (
        "broker.conf: loadManagerClassName: the extensible load manager runs TransferShedder, not "
        f"ThresholdShedder (got '{EXTENSIBLE_LOAD_MANAGER}'); use the pair "
        f"TransferShedder+ExtensibleLeastResourceUsageWithWeight, or {MODULAR_LOAD_MANAGER}"
    )


def test_matching_managers_are_accepted() -> None:
    extensible = LoadBalancerConfig().with_overrides(
        {**EXTENSIBLE, "loadManagerClassName": EXTENSIBLE_LOAD_MANAGER}, source="pair.yaml"
    )
    assert resolve_config(extensible).load_manager_class_name == EXTENSIBLE_LOAD_MANAGER
    modular = resolve_config(LoadBalancerConfig().with_overrides(MODULAR, source="pair.yaml"))
    assert modular.load_manager_class_name == MODULAR_LOAD_MANAGER


TOP_K = "loadBalancerMaxNumberOfBundlesInBundleLoadReport"


@pytest.mark.parametrize("value", [0, -1, -(2**31)])
def test_no_top_bundles_with_transfer_shedder_is_refused_saying_what_pulsar_would_do(value: int) -> None:
    """``TopKBundles.update`` keeps ``min(k, n)`` bundles: none (or it throws from its quick select and
    the broker publishes nothing), so TransferShedder would never unload; the modular manager's "all"."""
    conf = LoadBalancerConfig().with_overrides(
        {**EXTENSIBLE, "loadManagerClassName": EXTENSIBLE_LOAD_MANAGER}, source="pair.yaml"
    )
    conf = conf.with_overrides({TOP_K: value}, source="broker.conf")
    assert config_error(conf) == (
        f"broker.conf: {TOP_K}: with the extensible load manager every broker's top-bundles report would "
        "be empty (Pulsar's TopKBundles keeps min(k, bundles) of them, or fails and publishes nothing), so "
        "TransferShedder would never unload (NoLoadData); <= 0 means all bundles only to the modular manager "
        f"(got {value}); give 1 or more (Pulsar's default is 10)"
    )


def test_top_bundles_of_one_or_all_are_accepted_where_they_mean_something() -> None:
    """1 with TransferShedder; -1 (all bundles' data persisted) with the modular manager."""
    extensible = LoadBalancerConfig().with_overrides(
        {**EXTENSIBLE, "loadManagerClassName": EXTENSIBLE_LOAD_MANAGER, TOP_K: 1}, source="pair.yaml"
    )
    assert resolve_config(extensible).get(TOP_K) == 1
    modular = LoadBalancerConfig().with_overrides({**MODULAR, TOP_K: -1}, source="pair.yaml")
    assert resolve_config(modular).get(TOP_K) == -1


def error_of(name: str) -> str:
    with pytest.raises(ConfigError) as info:
        resolve_pair(name, source="s.yaml", field="pair")
    return str(info.value)


def test_a_module_class_name_that_fails_to_import_keeps_its_cause() -> None:
    """A ``module:Class`` name alone is a plugin: its import error is the message, not 'unknown pair'."""
    assert error_of("no_such_module_xyz:Cls") == (
        "s.yaml: pair: cannot import module 'no_such_module_xyz': ModuleNotFoundError: "
        "No module named 'no_such_module_xyz' (got 'no_such_module_xyz:Cls')"
    )


def test_unknown_pair_hint_lists_the_pip_364_pairs_and_the_installed_plugins() -> None:
    plugins = installed_plugins()
    assert "CapacityAwareShedder" in plugins  # declared by shedlab's own pyproject
    assert error_of("Qzxqzxqzx") == (
        "s.yaml: pair: unknown strategy pair (got 'Qzxqzxqzx'); known pairs: "
        "ThresholdShedder+LeastLongTermMessageRate, ThresholdShedder+LeastResourceUsageWithWeight, "
        "UniformLoadShedder+LeastLongTermMessageRate, OverloadShedder+LeastLongTermMessageRate, AvgShedder, "
        "TransferShedder+ExtensibleLeastResourceUsageWithWeight; "
        f"installed plugins: {', '.join(plugins)}; or name shed+place"
    )


def test_a_placement_strategy_alone_is_not_a_pair_and_the_hint_pairs_it_with_a_shedder() -> None:
    assert error_of("LeastLongTermMessageRate") == (
        "s.yaml: pair: LeastLongTermMessageRate is only a placement strategy; a pair names both roles "
        "(got 'LeastLongTermMessageRate'); e.g. ThresholdShedder+LeastLongTermMessageRate"
    )


@pytest.mark.parametrize("alone", ["TransferShedder", "ExtensibleLeastResourceUsageWithWeight"])
def test_an_extensible_class_alone_is_given_the_pair_it_runs_in(alone: str) -> None:
    """Not TransferShedder+LeastLongTermMessageRate: that pair is refused (the classes of the two managers
    do not mix)."""
    assert error_of(alone).endswith(
        f"(got '{alone}'); e.g. TransferShedder+ExtensibleLeastResourceUsageWithWeight"
    )


def test_a_manager_set_in_code_is_not_reported_as_a_file() -> None:
    """A value set by direct construction has the source "code", which is no file: the line names only the
    key (as for Pulsar's default)."""
    conf = LoadBalancerConfig(load_manager_class_name=EXTENSIBLE_LOAD_MANAGER).with_overrides(
        MODULAR, source="pair.yaml"
    )
    assert config_error(conf).startswith(
        "loadManagerClassName: the extensible load manager runs TransferShedder, not ThresholdShedder"
    )


def test_a_misspelt_plugin_class_keeps_the_loaders_did_you_mean_hint() -> None:
    assert error_of("shedlab.strategies.capacity_aware:CapacityAwareShedde") == (
        "s.yaml: pair: no such strategy class (got 'shedlab.strategies.capacity_aware:CapacityAwareShedde'); "
        "did you mean 'CapacityAwareShedder'?"
    )


def test_a_pair_problem_names_the_shedding_key_and_its_file() -> None:
    """AvgShedder set from a file with the placement key at its default: the shedding key is the one to
    fix (the placement strategy is not two-role), and the line names the file that set it."""
    conf = LoadBalancerConfig().with_overrides({SHED: "AvgShedder"}, source="s.yaml")
    assert config_error(conf) == (
        "s.yaml: loadBalancerLoadSheddingStrategy: shedding is AvgShedder but placement is "
        "LeastLongTermMessageRate; AvgShedder must be configured for both"
    )


def test_a_pair_problem_on_a_key_at_its_default_or_set_in_code_names_no_file() -> None:
    """The extensible placement set from a file against the modular shedder: the shedding key is blamed;
    at Pulsar's default or set by construction it has no file, so the line starts with the key."""
    place = {PLACE: "ExtensibleLeastResourceUsageWithWeight"}
    line = (
        "loadBalancerLoadSheddingStrategy: ExtensibleLeastResourceUsageWithWeight belongs to the extensible "
        "load manager and pairs only with its own class, not with {shed} "
        "(the pair is TransferShedder+ExtensibleLeastResourceUsageWithWeight)"
    )
    at_default = LoadBalancerConfig().with_overrides(place, source="s.yaml")
    assert config_error(at_default) == line.format(shed="ThresholdShedder")
    in_code = LoadBalancerConfig(load_balancer_load_shedding_strategy="UniformLoadShedder")
    assert config_error(in_code.with_overrides(place, source="s.yaml")) == line.format(
        shed="UniformLoadShedder"
    )


def test_an_unknown_strategy_set_in_code_names_no_file() -> None:
    conf = LoadBalancerConfig(load_balancer_load_shedding_strategy="Nope")
    assert config_error(conf).startswith(
        "loadBalancerLoadSheddingStrategy: unknown shedding strategy (got 'Nope')"
    )
