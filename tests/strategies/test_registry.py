"""The strategy registry: Pulsar's names, users' ``module:Class`` strategies, entry points, pairs, labels."""

from __future__ import annotations

import importlib
import itertools
import textwrap
from pathlib import Path

import numpy as np
import pytest

from shedlab.config import STRATEGY_PACKAGE, LoadBalancerConfig
from shedlab.errors import ConfigError
from shedlab.strategies import AvgShedder, guard, make_pair, make_placement, make_shedding, pair_config
from shedlab.strategies import registry as reg
from shedlab.strategies.guard import StrategyError
from shedlab.strategies.least_long_term_message_rate import LeastLongTermMessageRate
from shedlab.strategies.threshold_shedder import ThresholdShedder

PLUGIN_SOURCE = '''
"""Strategies for the registry tests: a shedder, a two-role class, and broken ones."""
from shedlab.strategies.base import Placement, SheddingResult


class QuietShedder:
    name = "Quiet"

    def __init__(self, rng=None):
        self.rng = rng

    def find_bundles_for_unloading(self, snapshot, conf):
        return SheddingResult()

    def on_active_brokers_change(self, active):
        pass


class BothRoles(QuietShedder):
    name = "BothRoles"

    def select_broker(self, candidates, bundle, snapshot, conf):
        return Placement(None, ())


class NoProtocol:
    def __init__(self, rng=None):
        pass


not_a_class = 42
'''

_counter = itertools.count()


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh module, importable only through ``sys.path`` (a new name per test: imports are cached)."""
    name = f"registry_test_plugin_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PLUGIN_SOURCE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return name


# ------------------------------------------------------------------------------------------ Pulsar's own


@pytest.mark.parametrize("cls", [ThresholdShedder, LeastLongTermMessageRate, AvgShedder])
def test_builtins_by_short_and_full_name(cls: type) -> None:
    for name in (cls.__name__, f"{STRATEGY_PACKAGE}.{cls.__name__}", f"  {cls.__name__} "):
        info = reg.resolve_strategy(name)
        assert info.cls is cls and info.builtin
        assert info.name == cls.__name__
        assert info.config_value == f"{STRATEGY_PACKAGE}.{cls.__name__}"


def test_builtin_roles_come_from_the_protocols() -> None:
    assert set(reg.SHEDDING_STRATEGIES) == {
        "ThresholdShedder",
        "OverloadShedder",
        "UniformLoadShedder",
        "AvgShedder",
    }
    assert set(reg.PLACEMENT_STRATEGIES) == {
        "LeastLongTermMessageRate",
        "LeastResourceUsageWithWeight",
        "AvgShedder",
    }
    assert [n for n, i in reg.builtin_strategies().items() if i.both_roles] == ["AvgShedder"]


def test_make_by_any_name() -> None:
    assert isinstance(make_shedding(f"{STRATEGY_PACKAGE}.ThresholdShedder", 1), ThresholdShedder)
    assert isinstance(make_placement("LeastLongTermMessageRate", 1), LeastLongTermMessageRate)


def test_unknown_name_suggests_the_closest_and_lists_plugins() -> None:
    with pytest.raises(ConfigError) as err:
        reg.resolve_strategy("ThreshholdShedder", role="shedding", source="b.conf:3")
    text = str(err.value)
    assert text.startswith("b.conf:3: loadBalancerLoadSheddingStrategy: unknown shedding strategy")
    assert "did you mean 'ThresholdShedder'?" in text
    assert "installed plugins: CapacityAwareShedder, HottestBroker" in text
    assert "package.module:ClassName" in text


def test_class_outside_pulsars_package_suggests_the_full_name() -> None:
    with pytest.raises(ConfigError) as err:
        reg.resolve_strategy("org.apache.pulsar.broker.loadbalance.OverloadShedder", role="shedding")
    assert f"did you mean '{STRATEGY_PACKAGE}.OverloadShedder'?" in str(err.value)


def test_strategy_in_the_wrong_role_is_explained() -> None:
    with pytest.raises(ConfigError, match="LeastLongTermMessageRate is a placement strategy"):
        reg.resolve_strategy("LeastLongTermMessageRate", role="shedding")


# ---------------------------------------------------------------------------------------- module:Class


def test_module_class_from_sys_path(plugin_module: str) -> None:
    info = reg.resolve_strategy(f"{plugin_module}:QuietShedder", role="shedding")
    assert info.name == info.config_value == f"{plugin_module}:QuietShedder"
    assert info.roles == {"shedding"} and not info.builtin
    shedder = make_shedding(f"{plugin_module}:QuietShedder", 7)
    assert type(shedder).__name__ == "QuietShedder"
    # the plugin class keeps the seeded generator; the SheddingStrategy protocol does not declare one
    assert isinstance(shedder.rng, np.random.Generator)  # type: ignore[attr-defined]


def test_import_error_is_one_line_naming_the_name_and_the_cause() -> None:
    with pytest.raises(ConfigError) as err:
        reg.resolve_strategy("no_such_package_xyz.mod:Mine", role="shedding", source="grid.yaml")
    text = str(err.value)
    assert "\n" not in text
    assert "cannot import module 'no_such_package_xyz.mod': ModuleNotFoundError" in text
    assert "'no_such_package_xyz.mod:Mine'" in text and text.startswith("grid.yaml: ")


@pytest.mark.parametrize("layout", ["mystrat_q7.py", "mystrat_q7/__init__.py"])
def test_a_module_in_the_current_directory_but_not_on_the_path_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """The ``shedlab`` command does not put the current directory on the Python path (no console script
    does): a plugin beside the user's files got only "No module named"; the error now says how."""
    (tmp_path / layout).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / layout).write_text("class Mine:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        reg.resolve_strategy("mystrat_q7:Mine", role="shedding")
    hint = "is in the current directory, which is not on the Python path: run with PYTHONPATH=."
    assert str(err.value).endswith(f"; {Path(layout)} {hint}")
    with pytest.raises(ConfigError) as elsewhere:  # no such file here: no hint
        reg.resolve_strategy("no_such_package_xyz.mod:Mine", role="shedding")
    assert "current directory" not in str(elsewhere.value)


def test_construct_checks_the_signature_before_calling_a_plugin() -> None:
    """``guard.construct`` is the last line for a class that did not come through the registry; a
    signature it cannot read (a class built in C) is left to the call itself."""

    class NoInit:
        pass

    with pytest.raises(StrategyError, match=r"NoInit\(rng=generator\): got an unexpected keyword") as err:
        guard.construct(NoInit, np.random.default_rng(1))
    assert err.value.hint is not None and "def __init__(self, rng" in err.value.hint
    assert guard.constructor_problem(dict) is None  # no signature to read


def test_missing_class_suggests_the_module_classes(plugin_module: str) -> None:
    with pytest.raises(ConfigError, match="did you mean 'QuietShedder'"):
        reg.resolve_strategy(f"{plugin_module}:QuietShedr")


def test_class_without_the_protocol_methods_is_rejected(plugin_module: str) -> None:
    with pytest.raises(ConfigError, match="implements neither strategy protocol"):
        reg.resolve_strategy(f"{plugin_module}:NoProtocol")
    with pytest.raises(ConfigError, match="not a class"):
        reg.resolve_strategy(f"{plugin_module}:not_a_class")


def test_shedding_only_plugin_is_refused_as_placement(plugin_module: str) -> None:
    with pytest.raises(ConfigError, match="QuietShedder is a shedding strategy, not a placement one"):
        reg.resolve_strategy(f"{plugin_module}:QuietShedder", role="placement")


# ---------------------------------------------------------------------------------------- entry points


def test_entry_point_of_the_installed_example() -> None:
    assert "HottestBroker" in reg.installed_plugins()
    info = reg.resolve_strategy("HottestBroker", role="shedding")
    assert info.cls.__module__ == "shedlab_example_strategy.hottest"
    assert info.name == info.config_value == "HottestBroker" and info.roles == {"shedding"}


def test_misspelt_entry_point_gets_did_you_mean() -> None:
    with pytest.raises(ConfigError, match="did you mean 'HottestBroker'"):
        reg.resolve_strategy("HotestBroker", role="shedding")


# ------------------------------------------------------------------------------------------------ pairs


def test_pair_names() -> None:
    assert reg.resolve_pair_name("avgshedder") == "AvgShedder"
    assert reg.resolve_pair_name("AvgShedder+AvgShedder") == "AvgShedder"
    assert reg.resolve_pair_name(f"{STRATEGY_PACKAGE}.ThresholdShedder + LeastLongTermMessageRate") == (
        "ThresholdShedder+LeastLongTermMessageRate"
    )
    assert reg.resolve_pair_name("HottestBroker+LeastResourceUsageWithWeight") == (
        "HottestBroker+LeastResourceUsageWithWeight"
    )


def test_two_role_plugin_named_alone_is_one_instance(plugin_module: str) -> None:
    both = f"{plugin_module}:BothRoles"
    assert reg.resolve_pair_name(both) == both
    assert reg.resolve_pair_name(f"{both}+{both}") == both
    shedder, placer = make_pair(pair_config(both), seed=1)
    assert shedder is placer  # type: ignore[comparison-overlap]  # one plugin object may play both roles
    assert reg.pair_name_of(pair_config(both)) == both


def test_one_role_name_alone_is_not_a_pair(plugin_module: str) -> None:
    with pytest.raises(ConfigError, match="only a shedding strategy; a pair names both roles"):
        reg.resolve_pair_name("HottestBroker")
    with pytest.raises(ConfigError, match=r"unknown strategy pair.*did you mean 'AvgShedder'"):
        reg.resolve_pair_name("AvgShederr")


@pytest.mark.parametrize(
    "pair",
    ["AvgShedder+LeastLongTermMessageRate", "ThresholdShedder+AvgShedder", "HottestBroker+AvgShedder"],
)
def test_avgshedder_must_be_both(pair: str) -> None:
    with pytest.raises(ConfigError, match="AvgShedder must be configured for both"):
        reg.resolve_pair_name(pair)


def test_two_role_plugin_must_be_both(plugin_module: str) -> None:
    with pytest.raises(ConfigError, match="BothRoles must be configured for both"):
        reg.resolve_pair_name(f"{plugin_module}:BothRoles+LeastLongTermMessageRate")


# ------------------------------------------------------------------------------------------ whole configs


def test_resolve_config_stores_pulsars_full_names_and_keeps_the_source(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(
        "loadBalancerLoadSheddingStrategy=AvgShedder\nloadBalancerLoadPlacementStrategy=AvgShedder\n"
    )
    conf = reg.resolve_config(LoadBalancerConfig.from_file(path))
    assert conf.load_balancer_load_shedding_strategy == f"{STRATEGY_PACKAGE}.AvgShedder"
    assert conf.value_sources()["loadBalancerLoadPlacementStrategy"] == f"{path}:2"
    assert conf == pair_config("AvgShedder")


def test_resolve_config_errors_name_the_file_line(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("\nloadBalancerLoadPlacementStrategy=AvgShedder\n")
    with pytest.raises(ConfigError) as err:
        reg.resolve_config(LoadBalancerConfig.from_file(path))
    assert str(err.value).startswith(
        f"{path}:2: loadBalancerLoadPlacementStrategy: placement is AvgShedder but shedding is "
        "ThresholdShedder; AvgShedder must be configured for both"
    )
    path.write_text("loadBalancerLoadSheddingStrategy=ThreshholdShedder\n")
    with pytest.raises(ConfigError, match=rf"{path}:1: loadBalancerLoadSheddingStrategy: unknown shedding"):
        reg.resolve_config(LoadBalancerConfig.from_file(path))


def test_avgshedder_shedding_only_passes_when_pulsar_exact() -> None:
    conf = LoadBalancerConfig().with_overrides({"loadBalancerLoadSheddingStrategy": "AvgShedder"})
    with pytest.raises(ConfigError, match="shedding is AvgShedder but placement is LeastLongTermMessageRate"):
        reg.resolve_config(conf)
    reg.resolve_config(conf, pulsar_exact=True)  # Pulsar itself starts with this combination
    reg.resolve_config(conf, pair=False)  # names only: a pair may be set one key at a time


# ------------------------------------------------------------------------------ labels, colours, modules


def test_abbreviations() -> None:
    assert reg.short_pair_name("ThresholdShedder+LeastResourceUsageWithWeight") == "Threshold+LRUWW"
    assert reg.short_pair_name("UniformLoadShedder+LeastLongTermMessageRate", " + ") == "Uniform + LLTMR"
    assert reg.short_pair_name("AvgShedder") == "AvgShedder"
    assert reg.short_pair_name("pkg.mod:Mine+LeastLongTermMessageRate") == "Mine+LLTMR"
    assert reg.short_pair_name("HottestBroker+LeastLongTermMessageRate") == "HottestBroker+LLTMR"


def test_abbreviation_legend() -> None:
    assert (
        reg.abbreviation_legend() == "LLTMR = LeastLongTermMessageRate, LRUWW = LeastResourceUsageWithWeight"
    )
    assert (
        reg.abbreviation_legend(["HottestBroker+LeastLongTermMessageRate"])
        == "LLTMR = LeastLongTermMessageRate"
    )
    assert reg.abbreviation_legend(["AvgShedder"]) == ""


def test_colours_fixed_for_pulsars_pairs_and_assigned_for_others() -> None:
    assert reg.pair_colour("AvgShedder") == "#009E73"
    known = ["AvgShedder", "b:X+LeastLongTermMessageRate", "a:Y+LeastLongTermMessageRate"]
    first, second = reg.pair_colour(known[2], known), reg.pair_colour(known[1], known)
    assert first != second and not {first, second} & set(reg.PAIR_COLOURS.values())
    assert reg.pair_colour(known[2], known) == reg.pair_colour(known[2], list(reversed(known)))
    assert reg.pair_colour("c:Z") == reg.pair_colour("c:Z")  # outside ``known``: a stable hash
    assert reg.pair_colour("c:Z") not in reg.PAIR_COLOURS.values()


def test_strategy_modules_lists_module_references_only() -> None:
    names = ["AvgShedder", "HottestBroker+LeastLongTermMessageRate", "b.mod:X+a:Y", "b.mod:Z"]
    assert reg.strategy_modules(names) == ("a", "b.mod")


def test_a_strategy_list_is_read_one_way() -> None:
    """compare, replay and tune's ``--strategies``: ``all``, names resolved in order, slips refused."""
    assert reg.pair_list("all") == list(reg.STRATEGY_PAIRS)
    assert reg.pair_list(" avgshedder , OverloadShedder+LeastLongTermMessageRate ") == [
        "AvgShedder",
        "OverloadShedder+LeastLongTermMessageRate",
    ]
    with pytest.raises(ConfigError, match="twice"):
        reg.pair_list("AvgShedder,avgshedder")
    with pytest.raises(ConfigError, match="an empty name"):
        reg.pair_list("AvgShedder,")
    with pytest.raises(ConfigError, match="at least one strategy pair, or 'all'"):
        reg.pair_list(" , ")
    with pytest.raises(ConfigError, match="unknown strategy pair"):
        reg.pair_list("all", every=False)  # replay: only pairs it can replay, named
