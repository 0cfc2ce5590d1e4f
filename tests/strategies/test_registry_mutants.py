"""The registry's behaviour that the mutation runs of the ``registry`` group found unpinned
(docs/mutation-registry.md): every one-line error of a bad strategy name as a whole line (file, Pulsar key,
message, value, hint), the strategy lists those hints give for each role, plugins found through a real
entry-point distribution on ``sys.path`` (and an install without any), pair configs and their recorded
source, the labels, captions and colours of reports.

The expected lines are written out from the registry's documented rules (module docstring, spec §2, §8):
Pulsar's strategies in the registry's table order, the role's Pulsar key as the field, ``strategy`` without
a role, the value as given.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from shedlab.config import STRATEGY_KEYS, STRATEGY_PACKAGE, LoadBalancerConfig
from shedlab.errors import ConfigError
from shedlab.strategies import registry as reg

SHED_KEY, PLACE_KEY = STRATEGY_KEYS["shedding"], STRATEGY_KEYS["placement"]
IMPL = STRATEGY_PACKAGE  # org.apache.pulsar.broker.loadbalance.impl
TRANSFER_FULL = "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder"
EXT_LRUWW_FULL = "org.apache.pulsar.broker.loadbalance.extensions.strategy.LeastResourceUsageWithWeight"
EXT_PAIR = "TransferShedder+ExtensibleLeastResourceUsageWithWeight"

ALL = (
    "ThresholdShedder, OverloadShedder, UniformLoadShedder, AvgShedder, LeastLongTermMessageRate, "
    "LeastResourceUsageWithWeight, TransferShedder, ExtensibleLeastResourceUsageWithWeight"
)
SHEDDERS = "ThresholdShedder, OverloadShedder, UniformLoadShedder, AvgShedder, TransferShedder"
PLACERS = (
    "AvgShedder, LeastLongTermMessageRate, LeastResourceUsageWithWeight, "
    "ExtensibleLeastResourceUsageWithWeight"
)

PLUGIN_SOURCE = '''
"""Strategies for the registry's mutation tests."""
from shedlab.strategies.base import SheddingResult


class QuietShedder:
    def __init__(self, rng=None):
        self.rng = rng

    def find_bundles_for_unloading(self, snapshot, conf):
        return SheddingResult()

    def on_active_brokers_change(self, active):
        pass


class NoProtocol:
    pass


not_a_class = 42
'''

_counter = itertools.count()


def error_line(call: object, *args: object, **kwargs: object) -> str:
    assert callable(call)
    with pytest.raises(ConfigError) as info:
        call(*args, **kwargs)
    text = str(info.value)
    assert "\n" not in text
    return text


def plugins_listed() -> str:
    plugins = reg.installed_plugins()
    assert {"CapacityAwareShedder", "HottestBroker"} <= set(plugins)  # shedlab's and its example's
    return ", ".join(plugins)


@pytest.fixture
def plugin_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh module importable from ``sys.path`` (a new name per test: imports are cached)."""
    name = f"registry_mutant_plugin_{next(_counter)}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(PLUGIN_SOURCE), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    return name


def _rescan_entry_points() -> None:
    reg._entry_points.cache_clear()
    reg._resolve_plugin.cache_clear()


@pytest.fixture
def distribution(plugin_module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A real installed distribution (a ``.dist-info`` on ``sys.path``) registering three strategies under
    ``shedlab.strategies``: one that loads, one whose module is missing, one that is not a class. Yields
    the plugin module's name; the registry's entry-point cache is refreshed before and after (once the
    distribution is off ``sys.path`` again), so other tests see the real install."""
    dist = tmp_path / f"{plugin_module}_dist-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {dist.name.split('-')[0]}\nVersion: 1.0\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        "[shedlab.strategies]\n"
        f"MutantQuiet = {plugin_module}:QuietShedder\n"
        "MutantMissing = no_such_module_qq.sub:Cls\n"
        f"MutantNumber = {plugin_module}:not_a_class\n",
        encoding="utf-8",
    )
    importlib.invalidate_caches()
    _rescan_entry_points()
    yield plugin_module
    monkeypatch.undo()  # the distribution leaves sys.path before the cache is refreshed
    importlib.invalidate_caches()
    _rescan_entry_points()


@pytest.fixture
def no_plugins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An install where no package registers a strategy: ``sys.path`` holds no distribution at all (the
    modules shedlab needs are imported already), so the entry-point scan finds none."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(sys, "path", [str(empty)])
    importlib.invalidate_caches()
    _rescan_entry_points()
    yield
    monkeypatch.undo()
    importlib.invalidate_caches()
    _rescan_entry_points()


# ------------------------------------------------------------------------- the extensible classes' roles


def test_the_extensible_classes_refuse_to_be_instantiated_for_the_modular_manager() -> None:
    """TransferShedder and the extensible placement run only in the simulator's extensible path: asking
    for an instance names the role's Pulsar key and the class."""
    rng = np.random.default_rng(1)
    builtins = reg.builtin_strategies()
    tail = (
        " belongs to the extensible load manager (PIP-192): it runs in the simulator (simulate, compare, "
        "sweep), not in the modular manager's decide or replay"
    )
    assert error_line(builtins["TransferShedder"].shedder, rng) == f"{SHED_KEY}: TransferShedder{tail}"
    assert error_line(builtins["ExtensibleLeastResourceUsageWithWeight"].placer, rng) == (
        f"{PLACE_KEY}: ExtensibleLeastResourceUsageWithWeight{tail}"
    )


def test_the_extensible_classes_by_their_java_names() -> None:
    """The key holds the extensible classes' full Java names (outside Pulsar's modular package): they
    resolve to the short names, TransferShedder shedding only, the extensible placement placing only."""
    shed = reg.resolve_strategy(f" {TRANSFER_FULL} ", role="shedding")
    place = reg.resolve_strategy(EXT_LRUWW_FULL, role="placement")
    assert (shed.name, shed.config_value, shed.extensible) == ("TransferShedder", TRANSFER_FULL, True)
    assert (place.name, place.config_value) == ("ExtensibleLeastResourceUsageWithWeight", EXT_LRUWW_FULL)
    assert (shed.roles, place.roles) == (frozenset({"shedding"}), frozenset({"placement"}))


# ---------------------------------------------------------------------------- resolve_strategy's errors


@pytest.mark.parametrize("name", ["", "   ", 5, 0.5])
def test_no_name_at_all_names_the_roles_key_and_the_value(name: object) -> None:
    assert error_line(reg.resolve_strategy, name, role="placement", source="b.conf:7") == (
        f"b.conf:7: {PLACE_KEY}: expected a strategy name (got {name!r})"
    )
    assert error_line(reg.resolve_strategy, name) == f"strategy: expected a strategy name (got {name!r})"


def test_an_unknown_name_without_a_role_lists_every_strategy() -> None:
    assert error_line(reg.resolve_strategy, "Qzxqzxqzx") == (
        f"strategy: unknown strategy (got 'Qzxqzxqzx'); known strategies: {ALL}; "
        f"installed plugins: {plugins_listed()}; or give package.module:ClassName"
    )


def test_an_unknown_name_for_a_role_lists_that_roles_strategies() -> None:
    assert error_line(reg.resolve_strategy, "Qzxqzxqzx", role="placement", source="b.conf:2") == (
        f"b.conf:2: {PLACE_KEY}: unknown placement strategy (got 'Qzxqzxqzx'); known placement strategies: "
        f"{PLACERS}; installed plugins: {plugins_listed()}; or give package.module:ClassName"
    )


def test_a_suggestion_comes_first_and_the_listing_follows_in_brackets() -> None:
    assert error_line(reg.resolve_strategy, "UniformShedder", role="shedding") == (
        f"{SHED_KEY}: unknown shedding strategy (got 'UniformShedder'); did you mean 'UniformLoadShedder'? "
        f"(known shedding strategies: {SHEDDERS}; installed plugins: {plugins_listed()}; "
        "or give package.module:ClassName)"
    )


def test_an_unknown_java_class_name_without_a_role() -> None:
    assert error_line(reg.resolve_strategy, f"{IMPL}.ThreshodShedder") == (
        f"strategy: unknown strategy class (got '{IMPL}.ThreshodShedder'); "
        f"did you mean '{IMPL}.ThresholdShedder'?"
    )


def test_an_unknown_java_class_name_for_a_role_suggests_only_that_roles_classes() -> None:
    """A misspelt shedder given as the placement key: the closest *placement* class is offered, never the
    shedder the text resembles."""
    line = error_line(reg.resolve_strategy, f"{IMPL}.ThresholdShedderX", role="placement", source="b.conf:4")
    assert line == (
        f"b.conf:4: {PLACE_KEY}: unknown placement strategy class (got '{IMPL}.ThresholdShedderX'); "
        f"did you mean '{IMPL}.AvgShedder'?"
    )


def test_a_java_class_name_far_from_any_says_where_pulsars_classes_live() -> None:
    assert error_line(reg.resolve_strategy, "com.example.Qzxqzx", role="shedding", source="b.conf:4") == (
        f"b.conf:4: {SHED_KEY}: unknown shedding strategy class (got 'com.example.Qzxqzx'); "
        f"Pulsar's strategy classes live in {IMPL}"
    )


@pytest.mark.parametrize(
    ("name", "role", "line"),
    [
        (
            "LeastLongTermMessageRate",
            "shedding",
            f"b.conf:4: {SHED_KEY}: LeastLongTermMessageRate is a placement strategy, not a shedding one "
            f"(got 'LeastLongTermMessageRate'); Pulsar's shedding strategies are {SHEDDERS}",
        ),
        (
            f"  {IMPL}.ThresholdShedder ",
            "placement",
            f"b.conf:4: {PLACE_KEY}: ThresholdShedder is a shedding strategy, not a placement one "
            f"(got '{IMPL}.ThresholdShedder'); Pulsar's placement strategies are {PLACERS}",
        ),
    ],
)
def test_a_strategy_in_the_wrong_role_lists_the_roles_strategies(name: str, role: str, line: str) -> None:
    assert error_line(reg.resolve_strategy, name, role=role, source="b.conf:4") == line


# ------------------------------------------------------------------------------- module:Class references


def test_a_reference_without_module_or_class_is_refused(plugin_module: str) -> None:
    for text in (":QuietShedder", f"{plugin_module}:"):
        assert error_line(reg.resolve_strategy, text, role="shedding", source="g.yaml") == (
            f"g.yaml: {SHED_KEY}: expected package.module:ClassName (got {text!r})"
        )


def test_a_reference_is_split_at_its_first_colon(plugin_module: str) -> None:
    """``module:rest``: the module is imported and ``rest`` looked up in it, so a second colon belongs
    to the class part (no class has such a name) and the module's classes are offered."""
    text = f"{plugin_module}:QuietShedder:Inner"
    assert error_line(reg.resolve_strategy, text) == (
        f"strategy: no such strategy class (got {text!r}); did you mean 'QuietShedder'?"
    )
    assert reg.strategy_modules([f"pkg.mod:Outer:Inner+{text}"]) == ("pkg.mod", plugin_module)


def test_a_missing_class_far_from_any_says_the_module_lacks_it(plugin_module: str) -> None:
    text = f"{plugin_module}:Zzzz"
    assert error_line(reg.resolve_strategy, text, role="shedding", source="g.yaml") == (
        f"g.yaml: {SHED_KEY}: no such strategy class (got {text!r}); "
        f"module {plugin_module!r} has no attribute 'Zzzz'"
    )


def test_a_reference_to_something_not_a_class_names_its_type(plugin_module: str) -> None:
    text = f"{plugin_module}:not_a_class"
    assert error_line(reg.resolve_strategy, text, role="shedding") == (
        f"{SHED_KEY}: not a class but a int (got {text!r})"
    )


def test_a_class_without_the_protocols_methods_is_told_what_to_define(plugin_module: str) -> None:
    text = f"{plugin_module}:NoProtocol"
    assert error_line(reg.resolve_strategy, text, role="placement", source="g.yaml") == (
        f"g.yaml: {PLACE_KEY}: the class implements neither strategy protocol (got {text!r}); "
        "a shedding strategy defines find_bundles_for_unloading and on_active_brokers_change, "
        "a placement strategy select_broker and on_active_brokers_change (docs/strategies.md)"
    )


def test_a_failed_import_names_the_roles_key() -> None:
    assert error_line(reg.resolve_strategy, "no_such_mod_qq:X", role="placement", source="g.yaml") == (
        f"g.yaml: {PLACE_KEY}: cannot import module 'no_such_mod_qq': ModuleNotFoundError: "
        "No module named 'no_such_mod_qq' (got 'no_such_mod_qq:X')"
    )


# --------------------------------------------------------------------------------------- entry points


def test_an_entry_point_of_an_installed_distribution_resolves(distribution: str) -> None:
    assert "MutantQuiet" in reg.installed_plugins()
    info = reg.resolve_strategy("MutantQuiet", role="shedding")
    assert info.cls.__module__ == distribution and info.cls.__name__ == "QuietShedder"
    assert (info.name, info.config_value, info.roles, info.builtin) == (
        "MutantQuiet",
        "MutantQuiet",
        frozenset({"shedding"}),
        False,
    )


def test_an_entry_point_that_cannot_load_names_itself_and_the_cause(distribution: str) -> None:
    cause = (
        "cannot load the entry point MutantMissing = no_such_module_qq.sub:Cls: ModuleNotFoundError: "
        "No module named 'no_such_module_qq'"
    )
    assert error_line(reg.resolve_strategy, "MutantMissing", role="shedding", source="g.yaml") == (
        f"g.yaml: {SHED_KEY}: {cause} (got 'MutantMissing')"
    )
    # named alone as a pair, the plugin's own cause is kept (not "unknown strategy pair")
    assert error_line(reg.resolve_pair, "MutantMissing", source="s.yaml", field="pair") == (
        f"s.yaml: pair: {cause} (got 'MutantMissing')"
    )


def test_an_entry_point_to_something_not_a_class(distribution: str) -> None:
    assert error_line(reg.resolve_strategy, "MutantNumber") == (
        "strategy: not a class but a int (got 'MutantNumber')"
    )


def test_without_any_plugin_installed_the_hints_say_none(no_plugins: None) -> None:
    assert reg.installed_plugins() == ()
    assert error_line(reg.resolve_strategy, "Qzxqzxqzx", role="shedding") == (
        f"{SHED_KEY}: unknown shedding strategy (got 'Qzxqzxqzx'); known shedding strategies: {SHEDDERS}; "
        "installed plugins: none; or give package.module:ClassName"
    )
    assert error_line(reg.resolve_pair, "Qzxqzxqzx") == (
        "strategy: unknown strategy pair (got 'Qzxqzxqzx'); known pairs: "
        "ThresholdShedder+LeastLongTermMessageRate, ThresholdShedder+LeastResourceUsageWithWeight, "
        "UniformLoadShedder+LeastLongTermMessageRate, OverloadShedder+LeastLongTermMessageRate, AvgShedder, "
        "TransferShedder+ExtensibleLeastResourceUsageWithWeight; "
        "installed plugins: none; or name shed+place"
    )


# ---------------------------------------------------------------------------------------------- pairs


@pytest.mark.parametrize(
    ("pair", "ext", "other"),
    [
        ("TransferShedder+LeastLongTermMessageRate", "TransferShedder", "LeastLongTermMessageRate"),
        (
            "ThresholdShedder+ExtensibleLeastResourceUsageWithWeight",
            "ExtensibleLeastResourceUsageWithWeight",
            "ThresholdShedder",
        ),
    ],
)
def test_an_extensible_class_pairs_only_with_its_own(pair: str, ext: str, other: str) -> None:
    """Whichever side is extensible is named first, the modular one second (spec §8)."""
    assert error_line(reg.resolve_pair, pair, source="s.yaml", field="pair") == (
        f"s.yaml: pair: {ext} belongs to the extensible load manager and pairs only with its own class, "
        f"not with {other} (the pair is {EXT_PAIR}) (got {pair!r})"
    )


def test_resolve_pair_name_passes_its_source_and_field_on() -> None:
    assert error_line(reg.resolve_pair_name, "Treshold").startswith(
        "strategy: unknown strategy pair (got 'Treshold'); "
    )
    assert error_line(
        reg.resolve_pair_name, "Treshold", source="grid.yaml", field="strategies[2]"
    ).startswith("grid.yaml: strategies[2]: unknown strategy pair (got 'Treshold'); ")


def test_resolve_pair_name_spells_a_pair_canonically() -> None:
    assert reg.resolve_pair_name(f"{TRANSFER_FULL} + {EXT_LRUWW_FULL}") == EXT_PAIR
    assert reg.resolve_pair_name("uniformloadshedder+leastlongtermmessagerate") == (
        "UniformLoadShedder+LeastLongTermMessageRate"
    )


def test_pair_config_records_its_source_and_sets_the_extensible_manager() -> None:
    modular = reg.pair_config("ThresholdShedder+LeastResourceUsageWithWeight")
    sources = modular.value_sources()
    assert sources[SHED_KEY] == sources[PLACE_KEY] == "strategy pair"
    assert modular.load_balancer_load_placement_strategy == f"{IMPL}.LeastResourceUsageWithWeight"
    assert sources["loadManagerClassName"] == "default"
    assert modular.load_manager_class_name == reg.MODULAR_LOAD_MANAGER

    extensible = reg.pair_config(EXT_PAIR, source="grid.yaml")
    sources = extensible.value_sources()
    assert sources[SHED_KEY] == sources["loadManagerClassName"] == "grid.yaml"
    assert extensible.load_manager_class_name == reg.EXTENSIBLE_LOAD_MANAGER
    assert extensible.load_balancer_load_shedding_strategy == TRANSFER_FULL
    assert reg.resolve_config(extensible) == extensible  # a runnable, canonical config


def test_pair_name_of_reads_the_keys_back() -> None:
    assert reg.pair_name_of(reg.pair_config(EXT_PAIR)) == EXT_PAIR
    assert reg.pair_name_of(LoadBalancerConfig()) == "ThresholdShedder+LeastLongTermMessageRate"
    assert reg.pair_name_of(reg.pair_config("AvgShedder")) == "AvgShedder"


# ---------------------------------------------------------------------------- a config file as overrides


def test_overrides_and_pair_takes_the_strategy_keys_out() -> None:
    conf = LoadBalancerConfig().with_overrides(
        {PLACE_KEY: "LeastResourceUsageWithWeight", "loadBalancerBrokerOverloadedThresholdPercentage": 90}
    )
    overrides, pair = reg.overrides_and_pair(conf)
    assert overrides == {"loadBalancerBrokerOverloadedThresholdPercentage": 90}
    assert pair == "ThresholdShedder+LeastResourceUsageWithWeight"

    both = reg.pair_config("AvgShedder", conf)
    assert reg.overrides_and_pair(both) == (
        {"loadBalancerBrokerOverloadedThresholdPercentage": 90},
        "AvgShedder",
    )


def test_overrides_and_pair_names_no_pair_when_the_file_leaves_both_keys_at_pulsars_default() -> None:
    conf = LoadBalancerConfig().with_overrides({"loadBalancerSheddingEnabled": False})
    assert reg.overrides_and_pair(conf) == ({"loadBalancerSheddingEnabled": False}, None)
    assert reg.overrides_and_pair(LoadBalancerConfig()) == ({}, None)


# ------------------------------------------------------------------------------ labels, captions, colours


def test_abbreviations_of_full_class_names() -> None:
    assert reg.abbreviate(f" {IMPL}.LeastLongTermMessageRate ") == "LLTMR"
    assert reg.abbreviate("ExtensibleLeastResourceUsageWithWeight") == "ExtLRUWW"
    assert reg.abbreviate("HottestBroker") == "HottestBroker"
    # a plugin's label is the attribute the loader looks up: ``module:rest`` splits at the first colon
    assert reg.abbreviate("pkg.mod:Outer:Inner") == "Outer:Inner"
    assert reg.abbreviation_legend([f"{IMPL}.ThresholdShedder+{IMPL}.LeastResourceUsageWithWeight"]) == (
        "LRUWW = LeastResourceUsageWithWeight"
    )


def test_caption_legend_adds_only_the_abbreviations_the_modular_ones_lack() -> None:
    modular = "LLTMR = LeastLongTermMessageRate, LRUWW = LeastResourceUsageWithWeight"
    assert reg.caption_legend(["AvgShedder"]) == modular
    assert reg.caption_legend(["ThresholdShedder+LeastResourceUsageWithWeight", "AvgShedder"]) == modular
    assert reg.caption_legend([EXT_PAIR, "ThresholdShedder+LeastLongTermMessageRate"]) == (
        f"{modular}, ExtLRUWW = ExtensibleLeastResourceUsageWithWeight"
    )


def test_other_pairs_take_the_extra_colours_in_name_order() -> None:
    """The docstring's rule: pairs outside PIP-364's get the next free colour in name order among the
    pairs shown together (Pulsar's pairs among them take none of the extra colours)."""
    known = ["AvgShedder", "b:X+LeastLongTermMessageRate", "a:Y+LeastLongTermMessageRate", EXT_PAIR]
    extra = reg._EXTRA_COLOURS
    assert reg.pair_colour("a:Y+LeastLongTermMessageRate", known) == extra[0]
    assert reg.pair_colour("b:X+LeastLongTermMessageRate", known) == extra[1]
    six = [f"m:S{i}" for i in range(6)]
    assert [reg.pair_colour(p, six) for p in six] == [*extra, extra[0]]  # the colours cycle


def test_the_real_install_is_seen_again_after_the_fixtures(distribution: str) -> None:
    assert "MutantQuiet" in reg.installed_plugins()


def test_after_a_distribution_fixture_its_plugins_are_gone() -> None:
    assert not {"MutantQuiet", "MutantMissing", "MutantNumber"} & set(reg.installed_plugins())
    assert {"CapacityAwareShedder", "HottestBroker"} <= set(reg.installed_plugins())
