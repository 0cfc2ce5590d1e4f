"""The one home of strategy names: Pulsar's built-ins, user strategies, pair names, abbreviations, colours.

A strategy is named, wherever shedlab accepts a strategy name, in one of three ways:

* a Pulsar class, short (``ThresholdShedder``) or full
  (``org.apache.pulsar.broker.loadbalance.impl.ThresholdShedder``);
* ``package.module:ClassName``, a class importable from the Python path;
* a name an installed package registers under the entry-point group ``shedlab.strategies``.

A class implements shedding (:class:`~shedlab.strategies.base.SheddingStrategy`), placement
(:class:`~shedlab.strategies.base.PlacementStrategy`) or both; a class implementing both is one instance
serving both roles (like Pulsar's AvgShedder, whose shedding pass plans where each bundle goes), so it
must be configured for both.

Pair names (``shed+place``, or a two-role class alone) are plain strings: runs, tables and plots are
keyed by them. Abbreviations and colours are computed from the string alone, never by importing the
class, so a report can be built where a user's strategy is not installed.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, cast

import numpy as np

from shedlab.config import STRATEGY_KEYS, STRATEGY_PACKAGE, LoadBalancerConfig, StrategyRole
from shedlab.errors import ConfigError, did_you_mean
from shedlab.strategies import guard
from shedlab.strategies.avg_shedder import AvgShedder
from shedlab.strategies.base import PlacementStrategy, SheddingStrategy
from shedlab.strategies.extensible_least_resource_usage_with_weight import (
    ExtensibleLeastResourceUsageWithWeight,
)
from shedlab.strategies.least_long_term_message_rate import LeastLongTermMessageRate
from shedlab.strategies.least_resource_usage_with_weight import LeastResourceUsageWithWeight
from shedlab.strategies.overload_shedder import OverloadShedder
from shedlab.strategies.threshold_shedder import ThresholdShedder
from shedlab.strategies.transfer_shedder import TransferShedder
from shedlab.strategies.uniform_load_shedder import UniformLoadShedder

__all__ = [
    "ENTRY_POINT_GROUP",
    "EXTENSIBLE_LOAD_MANAGER",
    "EXTENSIBLE_PAIRS",
    "MODULAR_LOAD_MANAGER",
    "PAIR_COLOURS",
    "PAIR_KEYS",
    "PLACEMENT_STRATEGIES",
    "SHEDDING_STRATEGIES",
    "STRATEGY_PAIRS",
    "StrategyInfo",
    "abbreviate",
    "abbreviation_legend",
    "builtin_strategies",
    "caption_legend",
    "installed_plugins",
    "is_extensible_pair",
    "overrides_and_pair",
    "pair_colour",
    "pair_config",
    "pair_list",
    "pair_name_of",
    "require_modular",
    "resolve_config",
    "resolve_pair",
    "resolve_pair_name",
    "resolve_strategy",
    "short_pair_name",
    "strategy_modules",
]

ENTRY_POINT_GROUP: Final = "shedlab.strategies"
"""The entry-point group under which installed packages register strategy classes by name."""

_PULSAR_PREFIX: Final = f"{STRATEGY_PACKAGE}."
_SHEDDING_METHODS: Final = ("find_bundles_for_unloading", "on_active_brokers_change")
_PLACEMENT_METHODS: Final = ("select_broker", "on_active_brokers_change")


@dataclass(frozen=True)
class StrategyInfo:
    """A resolved strategy: its class, the roles it implements and the names it goes by.

    ``name`` is the spelling used in pair names and run tables (Pulsar's short class name, the
    ``module:Class`` reference or the entry-point name); ``config_value`` is what the Pulsar key stores
    (Pulsar's full class name for a built-in, ``name`` otherwise).
    """

    name: str
    config_value: str
    cls: type
    roles: frozenset[StrategyRole]
    builtin: bool
    extensible: bool = False
    """One of the extensible load manager's (PIP-192) classes: it reads that manager's data (broker-side
    EMA, top-k reports), so it runs only in the simulator's extensible path (``core/sim/extensible.py``),
    never in :class:`~shedlab.manager.LoadManager`, and pairs only with the other extensible class."""

    @property
    def sheds(self) -> bool:
        return "shedding" in self.roles

    @property
    def places(self) -> bool:
        return "placement" in self.roles

    @property
    def both_roles(self) -> bool:
        """One instance serves both roles, so it must be configured for both."""
        return len(self.roles) == 2

    def shedder(self, rng: np.random.Generator) -> SheddingStrategy:
        """A fresh instance in the shedding role; every strategy takes the injected generator as ``rng``."""
        if self.extensible:
            raise ConfigError(_EXTENSIBLE_ONLY.format(name=self.name), field=STRATEGY_KEYS["shedding"])
        instance: SheddingStrategy = guard.construct(self.cls, rng)
        return instance

    def placer(self, rng: np.random.Generator) -> PlacementStrategy:
        """A fresh instance in the placement role."""
        if self.extensible:
            raise ConfigError(_EXTENSIBLE_ONLY.format(name=self.name), field=STRATEGY_KEYS["placement"])
        instance: PlacementStrategy = guard.construct(self.cls, rng)
        return instance


_EXTENSIBLE_ONLY: Final = (
    "{name} belongs to the extensible load manager (PIP-192): it runs in the simulator (simulate, "
    "compare, sweep), not in the modular manager's decide or replay"
)

MODULAR_LOAD_MANAGER: Final = "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl"
EXTENSIBLE_LOAD_MANAGER: Final = "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl"
"""``loadManagerClassName`` of the extensible manager; the extensible pair sets it (spec §8)."""
PAIR_KEYS: Final = frozenset((*STRATEGY_KEYS.values(), "loadManagerClassName"))
"""The keys a strategy pair decides (:func:`pair_config`): its two strategy classes and the load manager
class that runs them. Setting one of them on top of a pair makes it another pair, or none."""


def _roles_of(cls: type) -> frozenset[StrategyRole]:
    """The protocols ``cls`` implements, judged by its methods (a Protocol with a ClassVar refuses
    ``issubclass``)."""
    roles: set[StrategyRole] = set()
    if all(callable(getattr(cls, m, None)) for m in _SHEDDING_METHODS):
        roles.add("shedding")
    if all(callable(getattr(cls, m, None)) for m in _PLACEMENT_METHODS):
        roles.add("placement")
    return frozenset(roles)


# Pulsar's strategies with their abbreviations (narrow tables, crowded plot titles; captions spell them out).
_BUILTIN_TABLE: Final[tuple[tuple[type, str], ...]] = (
    (ThresholdShedder, "Threshold"),
    (OverloadShedder, "Overload"),
    (UniformLoadShedder, "Uniform"),
    (AvgShedder, "AvgShedder"),
    (LeastLongTermMessageRate, "LLTMR"),
    (LeastResourceUsageWithWeight, "LRUWW"),
)
_MODULAR: Final[Mapping[str, StrategyInfo]] = MappingProxyType(
    {
        cls.__name__: StrategyInfo(cls.__name__, _PULSAR_PREFIX + cls.__name__, cls, _roles_of(cls), True)
        for cls, _ in _BUILTIN_TABLE
    }
)
# The extensible manager's classes (spec §8, §3.5): short name, the class name Pulsar's key would hold
# (its placement is hard-wired in ExtensibleLoadManagerImpl.createBrokerSelectionStrategy, so the placement
# key is shedlab's label of it), abbreviation. The extensible placement shares its Java simple name with
# the modular LeastResourceUsageWithWeight, so shedlab names it ExtensibleLeastResourceUsageWithWeight.
_EXTENSIBLE_TABLE: Final[tuple[tuple[type, str, str], ...]] = (
    (
        TransferShedder,
        "org.apache.pulsar.broker.loadbalance.extensions.scheduler.TransferShedder",
        "Transfer",
    ),
    (
        ExtensibleLeastResourceUsageWithWeight,
        "org.apache.pulsar.broker.loadbalance.extensions.strategy.LeastResourceUsageWithWeight",
        "ExtLRUWW",
    ),
)
_BUILTINS: Final[Mapping[str, StrategyInfo]] = MappingProxyType(
    {
        **_MODULAR,
        **{
            cls.__name__: StrategyInfo(cls.__name__, full, cls, _roles_of(cls), True, extensible=True)
            for cls, full, _ in _EXTENSIBLE_TABLE
        },
    }
)
for _info in _BUILTINS.values():  # Pulsar's classes are called directly; plugins through the guard
    guard.register_builtin(_info.cls)
_FULL_NAMES: Final[Mapping[str, str]] = MappingProxyType(
    {full: cls.__name__ for cls, full, _ in _EXTENSIBLE_TABLE}
)
"""Full class name → short name, for the classes outside Pulsar's modular strategy package."""
_ABBREVIATIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        **{cls.__name__: short for cls, short in _BUILTIN_TABLE},
        **{cls.__name__: short for cls, _, short in _EXTENSIBLE_TABLE},
    }
)

SHEDDING_STRATEGIES: Final[tuple[str, ...]] = tuple(n for n, i in _MODULAR.items() if i.sheds)
"""Short names of the modular manager's shedding strategies."""
PLACEMENT_STRATEGIES: Final[tuple[str, ...]] = tuple(n for n, i in _MODULAR.items() if i.places)
"""Short names of the modular manager's placement strategies."""

STRATEGY_PAIRS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "ThresholdShedder+LeastLongTermMessageRate": ("ThresholdShedder", "LeastLongTermMessageRate"),
        "ThresholdShedder+LeastResourceUsageWithWeight": ("ThresholdShedder", "LeastResourceUsageWithWeight"),
        "UniformLoadShedder+LeastLongTermMessageRate": ("UniformLoadShedder", "LeastLongTermMessageRate"),
        "OverloadShedder+LeastLongTermMessageRate": ("OverloadShedder", "LeastLongTermMessageRate"),
        "AvgShedder": ("AvgShedder", "AvgShedder"),
    }
)
"""The strategy pairs PIP-364 compares ("all" in a grid or ``compare``), in its order."""

EXTENSIBLE_PAIRS: Final[Mapping[str, tuple[str, str]]] = MappingProxyType(
    {
        "TransferShedder+ExtensibleLeastResourceUsageWithWeight": (
            "TransferShedder",
            "ExtensibleLeastResourceUsageWithWeight",
        )
    }
)
"""The extensible load manager's one pair (PIP-192): TransferShedder and its LeastResourceUsageWithWeight."""

PAIR_COLOURS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "AvgShedder": "#009E73",
        "ThresholdShedder+LeastResourceUsageWithWeight": "#D55E00",
        "ThresholdShedder+LeastLongTermMessageRate": "#E69F00",
        "UniformLoadShedder+LeastLongTermMessageRate": "#0072B2",
        "OverloadShedder+LeastLongTermMessageRate": "#CC79A7",
        "TransferShedder+ExtensibleLeastResourceUsageWithWeight": "#56B4E9",
    }
)
"""The fixed colours of PIP-364's pairs (Okabe-Ito, distinguishable with colour-blindness)."""
_EXTRA_COLOURS: Final = ("#8C6D31", "#7F7F7F", "#17BECF", "#BCBD22", "#393B79")


def builtin_strategies() -> Mapping[str, StrategyInfo]:
    """Pulsar's strategies by short class name."""
    return _BUILTINS


@functools.cache
def _entry_points() -> Mapping[str, importlib.metadata.EntryPoint]:
    # Cached: scanning installed distributions costs milliseconds, and names are resolved per run.
    return MappingProxyType({ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)})


def installed_plugins() -> tuple[str, ...]:
    """Names registered under the ``shedlab.strategies`` entry-point group by installed packages."""
    return tuple(sorted(_entry_points()))


def _error(
    message: str, text: object, *, role: StrategyRole | None, source: str | None, hint: str | None = None
) -> ConfigError:
    field = STRATEGY_KEYS[role] if role else "strategy"
    return ConfigError(message, source=source, field=field, value=text, hint=hint)


def _unknown_hint(text: str, role: StrategyRole | None) -> str:
    known = [n for n, i in _BUILTINS.items() if role is None or role in i.roles]
    plugins = installed_plugins()
    suggestion = did_you_mean(text, [*known, *plugins])
    listing = f"known {role + ' ' if role else ''}strategies: {', '.join(known)}"
    listing += f"; installed plugins: {', '.join(plugins) if plugins else 'none'}"
    listing += "; or give package.module:ClassName"
    return f"{suggestion} ({listing})" if suggestion else listing


# The loaders below raise ConfigError without source or field; resolve_strategy adds the caller's.


def _not_on_path_hint(module_name: str, exc: BaseException) -> str | None:
    """Where the module is a file or package of the current directory that the import did not find: the
    ``shedlab`` command, like every console script, does not put the current directory on the Python
    path, and a user who wrote ``mystrat.py`` beside their scenario was told only "No module named"."""
    top = module_name.split(".")[0]
    if not isinstance(exc, ModuleNotFoundError) or exc.name != top:
        return None
    here = Path.cwd()
    found = next((p for p in (here / f"{top}.py", here / top / "__init__.py") if p.is_file()), None)
    if found is None:
        return None
    where = found.relative_to(here)
    return f"{where} is in the current directory, which is not on the Python path: run with PYTHONPATH=."


def _load_class(text: str) -> type:
    """Import ``module:Class``; any failure is one line naming the reference and the cause."""
    module_name, _, attr = text.partition(":")
    if not module_name or not attr:
        raise ConfigError("expected package.module:ClassName")
    try:
        module = importlib.import_module(module_name)
    except guard.PLUGIN_FAILURES as exc:  # a plugin's import may fail in any way: the cause, not a trace
        hint = _not_on_path_hint(module_name, exc)
        raise ConfigError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}", hint=hint
        ) from None
    obj = getattr(module, attr, None)
    if obj is None:
        classes = [n for n, v in vars(module).items() if isinstance(v, type)]
        hint = did_you_mean(attr, classes) or f"module {module_name!r} has no attribute {attr!r}"
        raise ConfigError("no such strategy class", hint=hint)
    return _checked_class(obj)


def _load_entry_point(ep: importlib.metadata.EntryPoint) -> type:
    try:
        obj = ep.load()
    except guard.PLUGIN_FAILURES as exc:  # as in _load_class: one line with the cause
        raise ConfigError(
            f"cannot load the entry point {ep.name} = {ep.value}: {type(exc).__name__}: {exc}"
        ) from None
    return _checked_class(obj)


def _checked_class(obj: object) -> type:
    if not isinstance(obj, type):
        raise ConfigError(f"not a class but a {type(obj).__name__}")
    if not _roles_of(obj):
        raise ConfigError(
            "the class implements neither strategy protocol",
            hint="a shedding strategy defines find_bundles_for_unloading and on_active_brokers_change, "
            "a placement strategy select_broker and on_active_brokers_change (docs/strategies.md)",
        )
    problem = guard.constructor_problem(obj)
    if problem is not None:
        raise ConfigError(problem.message, hint=problem.hint)
    return obj


@functools.cache
def _resolve_plugin(text: str) -> StrategyInfo:
    """``module:Class`` or an entry-point name (cached: a run resolves its pair many times; failures,
    being exceptions, are not cached)."""
    cls = _load_class(text) if ":" in text else _load_entry_point(_entry_points()[text])
    return StrategyInfo(text, text, cls, _roles_of(cls), False)


def _refuse_clash(short: str, *, role: StrategyRole | None, source: str | None) -> None:
    """Pulsar's short name that an installed plugin's entry point also takes is ambiguous: refused (it
    used to run Pulsar's class without a word, so the plugin's author measured Pulsar's strategy)."""
    ep = _entry_points().get(short)
    if ep is None:
        return
    raise _error(
        f"{short} is Pulsar's strategy and also the name of an installed plugin (entry point {ep.name} = "
        f"{ep.value})",
        short,
        role=role,
        source=source,
        hint=f"write Pulsar's as {_BUILTINS[short].config_value} or the plugin as {ep.value}, and rename "
        "the plugin's entry point",
    )


def resolve_strategy(
    name: object, *, role: StrategyRole | None = None, source: str | None = None
) -> StrategyInfo:
    """The strategy a name denotes (short or full Pulsar name, ``module:Class``, entry-point name).

    With ``role``, the strategy must implement that role. Errors name ``source`` and the Pulsar key of the
    role (``strategy`` without one), suggest the closest known name and list Pulsar's and installed ones.
    """
    if not isinstance(name, str) or not name.strip():
        raise _error("expected a strategy name", name, role=role, source=source)
    text = name.strip()
    short = _FULL_NAMES.get(text, text.removeprefix(_PULSAR_PREFIX))
    if short in _BUILTINS:
        if short == text:
            _refuse_clash(text, role=role, source=source)
        info = _BUILTINS[short]
    elif short == text and (":" in text or text in _entry_points()):
        try:
            info = _resolve_plugin(text)
        except ConfigError as exc:
            raise _error(exc.message, text, role=role, source=source, hint=exc.hint) from None
    elif "." in text:  # a Java class name, but not one of Pulsar's strategies
        full = [_PULSAR_PREFIX + n for n in _BUILTINS if role is None or role in _BUILTINS[n].roles]
        hint = did_you_mean(text, full) or f"Pulsar's strategy classes live in {STRATEGY_PACKAGE}"
        raise _error(
            f"unknown {role + ' ' if role else ''}strategy class", text, role=role, source=source, hint=hint
        )
    else:
        raise _error(
            f"unknown {role + ' ' if role else ''}strategy",
            text,
            role=role,
            source=source,
            hint=_unknown_hint(text, role),
        )
    if role is not None and role not in info.roles:
        other = "placement" if role == "shedding" else "shedding"
        known = ", ".join(n for n, i in _BUILTINS.items() if role in i.roles)
        raise _error(
            f"{info.name} is a {other} strategy, not a {role} one",
            text,
            role=role,
            source=source,
            hint=f"Pulsar's {role} strategies are {known}",
        )
    return info


def _check_pair(shed: StrategyInfo, place: StrategyInfo, *, pulsar_exact: bool) -> str | None:
    """Why the pair cannot run, or None. A two-role class is one instance in both roles (spec §2).

    Pulsar refuses to start when the *placement* strategy is AvgShedder but shedding is not. shedlab is
    stricter by default and also rejects a two-role shedder with another placement strategy, because the
    destinations it plans would be silently ignored; ``pulsar_exact`` applies only Pulsar's own check.
    """
    if shed.extensible != place.extensible:
        ext, other = (shed, place) if shed.extensible else (place, shed)
        return (
            f"{ext.name} belongs to the extensible load manager and pairs only with its own class, "
            f"not with {other.name} (the pair is {next(iter(EXTENSIBLE_PAIRS))})"
        )
    if shed == place and shed.both_roles:
        return None
    if place.both_roles:
        return (
            f"placement is {place.name} but shedding is {shed.name}; {place.name} must be configured for both"
        )
    if shed.both_roles and not pulsar_exact:
        return (
            f"shedding is {shed.name} but placement is {place.name}; {shed.name} must be configured for both"
        )
    return None


def resolve_pair(
    name: object, *, source: str | None = None, field: str = "strategy"
) -> tuple[StrategyInfo, StrategyInfo]:
    """The (shedding, placement) strategies of a pair name: ``shed+place``, or a two-role strategy alone.

    PIP-364's pair names are also accepted in any letter case and spacing.
    """
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("expected a strategy pair name", source=source, field=field, value=name)
    compact = name.replace(" ", "")
    for known, (s, p) in {**STRATEGY_PAIRS, **EXTENSIBLE_PAIRS}.items():
        if compact.lower() == known.lower():
            for short, role in ((s, "shedding"), (p, "placement")):
                _refuse_clash(short, role=cast(StrategyRole, role), source=source)
            return _BUILTINS[s], _BUILTINS[p]
    if "+" in name:
        shed_text, place_text = (part.strip() for part in name.split("+", 1))
        try:
            shed = resolve_strategy(shed_text, role="shedding")
            place = resolve_strategy(place_text, role="placement")
        except ConfigError as exc:
            raise ConfigError(exc.message, source=source, field=field, value=name, hint=exc.hint) from None
        problem = _check_pair(shed, place, pulsar_exact=False)
        if problem:
            raise ConfigError(problem, source=source, field=field, value=name)
        return shed, place
    text = name.strip()
    try:
        info = resolve_strategy(text)
    except ConfigError as exc:
        if ":" in text or text in _entry_points():  # a plugin that failed to load: keep its cause
            raise ConfigError(exc.message, source=source, field=field, value=name, hint=exc.hint) from None
        plugins = installed_plugins()
        pairs = [*STRATEGY_PAIRS, *EXTENSIBLE_PAIRS]
        hint = did_you_mean(text, [*pairs, *plugins]) or (
            f"known pairs: {', '.join(pairs)}; installed plugins: {', '.join(plugins) or 'none'}; "
            "or name shed+place"
        )
        raise ConfigError(
            "unknown strategy pair", source=source, field=field, value=name, hint=hint
        ) from None
    if not info.both_roles:
        role = "shedding" if info.sheds else "placement"
        raise ConfigError(
            f"{info.name} is only a {role} strategy; a pair names both roles",
            source=source,
            field=field,
            value=name,
            hint=_pair_example(info),
        )
    return info, info


def _pair_example(info: StrategyInfo) -> str:
    """A pair that runs with ``info``: an extensible class pairs only with the other extensible one."""
    if info.extensible:
        return f"e.g. {next(iter(EXTENSIBLE_PAIRS))}"
    if info.sheds:
        return f"e.g. {info.name}+LeastLongTermMessageRate"
    return f"e.g. ThresholdShedder+{info.name}"


def resolve_pair_name(name: object, *, source: str | None = None, field: str = "strategy") -> str:
    """The canonical spelling of a pair name (``AvgShedder``, ``ThresholdShedder+LeastLongTermMessageRate``,
    ``pkg.mod:Mine+LeastLongTermMessageRate``, a two-role plugin alone); unknown names raise ConfigError."""
    shed, place = resolve_pair(name, source=source, field=field)
    return shed.name if shed == place else f"{shed.name}+{place.name}"


def pair_list(text: str, *, field: str = "--strategies", every: bool = True) -> list[str]:
    """A comma-separated list of pair names (``--strategies A,B``), each resolved as
    :func:`resolve_pair_name`; ``all`` (where ``every``) is every built-in pair, in :data:`STRATEGY_PAIRS`'
    order.

    The one reader of such a list, so that every command refuses the same slips: a name given twice
    (``AvgShedder,avgshedder``), which ``compare`` and ``replay`` dropped silently while ``tune`` refused
    it, and an empty item (``AvgShedder,``, ``A,,B``: a name lost in an edit), which all three dropped."""
    if every and text.strip().lower() == "all":
        return list(STRATEGY_PAIRS)
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise ConfigError("name at least one strategy pair" + (", or 'all'" if every else ""), field=field)
    if not all(items):
        raise ConfigError("an empty name in the list (a comma too many?)", field=field, value=text)
    pairs = [resolve_pair_name(item, field=field) for item in items]
    twice = next((pair for pair in pairs if pairs.count(pair) > 1), None)
    if twice is not None:
        raise ConfigError("names a strategy pair twice", field=field, value=twice)
    return pairs


def pair_config(
    pair: str, conf: LoadBalancerConfig | None = None, source: str = "strategy pair"
) -> LoadBalancerConfig:
    """``conf`` with both strategy keys set to the pair's classes (in the form the keys store)."""
    shed, place = resolve_pair(pair)
    values = {STRATEGY_KEYS["shedding"]: shed.config_value, STRATEGY_KEYS["placement"]: place.config_value}
    if shed.extensible:  # the modular pairs leave loadManagerClassName as it is (Pulsar's default)
        values["loadManagerClassName"] = EXTENSIBLE_LOAD_MANAGER
    return (conf or LoadBalancerConfig()).with_overrides(values, source=source)


def pair_name_of(conf: LoadBalancerConfig) -> str:
    """The pair name of a config's two strategy keys (string work only: nothing is imported)."""
    shed = _FULL_NAMES.get(conf.shedding_strategy_name, conf.shedding_strategy_name)
    place = _FULL_NAMES.get(conf.placement_strategy_name, conf.placement_strategy_name)
    return shed if shed == place else f"{shed}+{place}"


def overrides_and_pair(conf: LoadBalancerConfig) -> tuple[dict[str, Any], str | None]:
    """A config file as a layer of overrides for a scenario run, and the strategy pair it names.

    A run's pair is chosen apart (``--strategy``, or the scenario's) and its keys are a layer of their own,
    so the two strategy keys are taken out of the overrides; the pair they name is returned (None when
    the file leaves both at Pulsar's default) to be used when no pair is given. The other overrides are
    the keys that differ from Pulsar's default.
    """
    overrides = conf.non_default_values()
    pair = pair_name_of(conf) if any(key in overrides for key in STRATEGY_KEYS.values()) else None
    for key in STRATEGY_KEYS.values():
        overrides.pop(key, None)
    return overrides, pair


def resolve_config(
    conf: LoadBalancerConfig, *, pair: bool = True, pulsar_exact: bool = False
) -> LoadBalancerConfig:
    """``conf`` with both strategy keys resolved, checked and stored in canonical form.

    Each key must name a strategy of its role; errors name the file and line that set the key. With
    ``pair`` the two must also work together (a two-role class configured for both). Built-ins given by
    short name are stored under Pulsar's full class name, as Pulsar itself requires, keeping the value's
    recorded source.
    """
    sources = conf.value_sources()
    infos: dict[StrategyRole, StrategyInfo] = {}
    changes: dict[str, tuple[str, str]] = {}
    for role, key in STRATEGY_KEYS.items():
        source = sources[key] if sources[key] not in ("default", "code") else None
        value = conf.get(key)
        infos[role] = resolve_strategy(value, role=role, source=source)
        if infos[role].config_value != value:
            changes[key] = (infos[role].config_value, sources[key])
    if pair:
        problem = _check_pair(infos["shedding"], infos["placement"], pulsar_exact=pulsar_exact)
        if problem:
            key = STRATEGY_KEYS["placement" if infos["placement"].both_roles else "shedding"]
            where = sources[key] if sources[key] not in ("default", "code") else None
            raise ConfigError(problem, source=where, field=key)
        _check_manager(conf, infos["shedding"], sources)
        _check_top_bundles(conf, infos["shedding"], sources)
    for key, (value, source) in changes.items():
        conf = conf.with_overrides({key: value}, source=source)
    return conf


def _check_manager(conf: LoadBalancerConfig, shed: StrategyInfo, sources: Mapping[str, str]) -> None:
    """``loadManagerClassName`` must be the manager whose strategies the pair names: shedlab runs the
    extensible path for TransferShedder and the modular one otherwise, never a mix (Pulsar's extensible
    manager would silently replace a modular shedder by TransferShedder)."""
    key = "loadManagerClassName"
    manager = conf.load_manager_class_name
    where = sources[key] if sources[key] not in ("default", "code") else None
    if shed.extensible and manager != EXTENSIBLE_LOAD_MANAGER:
        raise ConfigError(
            f"{shed.name} runs in the extensible load manager",
            source=where,
            field=key,
            value=manager,
            hint=f"set {key}={EXTENSIBLE_LOAD_MANAGER}",
        )
    if not shed.extensible and manager == EXTENSIBLE_LOAD_MANAGER:
        raise ConfigError(
            f"the extensible load manager runs TransferShedder, not {shed.name}",
            source=where,
            field=key,
            value=manager,
            hint=f"use the pair {next(iter(EXTENSIBLE_PAIRS))}, or {MODULAR_LOAD_MANAGER}",
        )


def _check_top_bundles(conf: LoadBalancerConfig, shed: StrategyInfo, sources: Mapping[str, str]) -> None:
    """Refuse ``loadBalancerMaxNumberOfBundlesInBundleLoadReport <= 0`` with TransferShedder.

    ``<= 0`` means "all bundles" to the modular manager only (``ModularLoadManagerImpl``'s persisted
    bundle data, where Pulsar's docs suggest -1). In the extensible manager every broker's
    ``TopKBundles.update`` cuts its report to ``min(k, n)`` bundles: none, or, when its quick select
    (``partitionSort``) ends on ``subList(0, -1)``, an IllegalArgumentException that the report task logs,
    publishing nothing. Either way the leader holds no top bundles and TransferShedder never unloads
    (NoLoadData). shedlab would reproduce that, a run in which the shedder cannot act, which is not what a
    value carried over from the modular manager's advice asks for; so the value is refused, saying so.
    """
    key = "loadBalancerMaxNumberOfBundlesInBundleLoadReport"
    top_k = conf.load_balancer_max_number_of_bundles_in_bundle_load_report
    if shed.extensible and top_k <= 0:
        where = sources[key] if sources[key] not in ("default", "code") else None
        raise ConfigError(
            "with the extensible load manager every broker's top-bundles report would be empty "
            "(Pulsar's TopKBundles keeps min(k, bundles) of them, or fails and publishes nothing), "
            f"so {shed.name} would never unload (NoLoadData); <= 0 means all bundles only to the "
            "modular manager",
            source=where,
            field=key,
            value=top_k,
            hint="give 1 or more (Pulsar's default is 10)",
        )


def is_extensible_pair(conf: LoadBalancerConfig) -> bool:
    """Whether a resolved config runs the extensible load manager (string work only)."""
    return conf.load_manager_class_name == EXTENSIBLE_LOAD_MANAGER


def require_modular(pair: str, *, field: str) -> None:
    """Refuse a pair of the extensible manager where only the modular manager runs (``replay``), before
    any work starts: the instance would refuse it too, but only inside a Spark task, 20 s later."""
    shed, _ = resolve_pair(pair, field=field)
    if shed.extensible:
        raise ConfigError(_EXTENSIBLE_ONLY.format(name=shed.name), field=field, value=pair)


def strategy_modules(names: Sequence[str]) -> tuple[str, ...]:
    """The modules of the ``module:Class`` strategies among strategy or pair names (sorted, distinct).

    What a Spark driver must ship to its executors; built-ins and entry points are installed there.
    """
    modules = set()
    for name in names:
        for part in str(name).split("+"):
            text = part.strip()
            if ":" in text:
                modules.add(text.partition(":")[0])
    return tuple(sorted(modules))


def abbreviate(name: str) -> str:
    """A strategy's short label: Pulsar's abbreviation (``LLTMR``), a plugin's class or entry-point name."""
    text = name.strip().removeprefix(_PULSAR_PREFIX)
    if text in _ABBREVIATIONS:
        return _ABBREVIATIONS[text]
    # the attribute the loader looks up: a ``module:Class`` reference splits at its first colon
    return text.partition(":")[2] if ":" in text else text


def short_pair_name(pair: str, separator: str = "+") -> str:
    """``ThresholdShedder+LeastResourceUsageWithWeight`` → ``Threshold+LRUWW``; ``pkg.mod:Mine`` → ``Mine``
    (string work only, so a report can label runs of a strategy that is not installed)."""
    return separator.join(abbreviate(part) for part in pair.split("+"))


def abbreviation_legend(pairs: Sequence[str] | None = None) -> str:
    """The caption spelling out the abbreviations ``pairs`` use (all of Pulsar's that differ from
    the class name, without ``pairs``): ``LLTMR = LeastLongTermMessageRate, LRUWW = ...``. The extensible
    manager's abbreviations appear only when ``pairs`` use them."""
    used = (
        {p.strip().removeprefix(_PULSAR_PREFIX) for pair in pairs for p in pair.split("+")} if pairs else None
    )
    return ", ".join(
        f"{short} = {name}"
        for name, short in _ABBREVIATIONS.items()
        if not name.startswith(short) and (name in used if used is not None else name in _MODULAR)
    )


def caption_legend(pairs: Sequence[str]) -> str:
    """The tables' caption: Pulsar's modular abbreviations always (``LLTMR = …, LRUWW = …``), then any
    other abbreviation ``pairs`` use (the extensible manager's ``ExtLRUWW``)."""
    base = abbreviation_legend()
    extra = [item for item in abbreviation_legend(pairs).split(", ") if item and item not in base]
    return ", ".join([base, *extra])


def pair_colour(pair: str, known: Sequence[str] = ()) -> str:
    """A pair's colour: PIP-364's five are fixed; any other gets the next free colour in name order among
    ``known`` (the pairs shown together), or, outside ``known``, one chosen by a stable hash of its name."""
    if pair in PAIR_COLOURS:
        return PAIR_COLOURS[pair]
    others = sorted({s for s in known if s not in PAIR_COLOURS})
    index = others.index(pair) if pair in others else zlib.crc32(pair.encode("utf-8"))
    return _EXTRA_COLOURS[index % len(_EXTRA_COLOURS)]
