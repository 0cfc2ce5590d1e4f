"""Pulsar settings from the command line: ``--config FILE`` and ``--set KEY=VALUE``.

Every command that takes them builds its configuration with :func:`shedlab.config.layered_config`, so
the layers are applied in one order everywhere (defaults → config file → scenario ``config`` → strategy
pair → ``strategy_config[pair]`` → ``--set``) and ``shedlab config show`` can say which layer set each
key. Runs of a scenario (``simulate``, ``compare``, ``replay``) pass the file and ``--set`` layers on
as *overrides*, because their scenario's own layers come in between (``core.sim.scenario.build_config``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer

from shedlab.config import STRATEGY_KEYS, ConfigLayer, LoadBalancerConfig, layered_config, parse_key_values
from shedlab.core.partitions import cluster_problem
from shedlab.errors import MAX_SEED, InputError
from shedlab.model.json_reader import JsonReader, load_json_file
from shedlab.model.pulsar import is_named_entity
from shedlab.strategies import overrides_and_pair, resolve_config, resolve_strategy
from shedlab.strategies.registry import pair_config

__all__ = [
    "RunOverrides",
    "SetOption",
    "check_cluster",
    "check_count",
    "check_seed",
    "cli_config",
    "parse_sets",
    "run_overrides",
    "snapshot_settings",
]


SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override one Pulsar key (repeatable): --set maxUnloadPercentage=0.5."),
]


def check_count(value: int | None, option: str, *, minimum: int = 0, maximum: int) -> None:
    """Refuse a whole-number option outside ``[minimum, maximum]`` before anything runs (typer only
    checks that it is an integer; a negative count or one of 10^12 would fail or hang later)."""
    if value is not None and not minimum <= value <= maximum:
        raise InputError(f"must be between {minimum} and {maximum}", field=option, value=value)


def check_cluster(value: str | None, option: str = "--cluster") -> None:
    """A cluster name Pulsar's ``createCluster`` takes (:func:`~shedlab.model.pulsar.is_named_entity`), as a
    scenario's ``cluster`` is checked, and one a partition directory holds (``ingest``'s rule,
    :func:`~shedlab.core.partitions.cluster_problem`): ``''`` was read as the default (``pulsar``, the
    scenario's), and a name such as ``a b``, or one of 30,000 characters, labelled a recording every line
    of which ``ingest`` then quarantined."""
    if value is None:
        return
    if not (value and is_named_entity(value)):
        raise InputError(
            "not a Pulsar cluster name (ASCII letters, digits, _ - = : . only)", field=option, value=value
        )
    problem = cluster_problem(value)
    if problem is not None:
        raise InputError(problem, field=option, value=value)


def check_seed(value: int | None, option: str = "--seed") -> None:
    """A seed is an integer in ``[0, MAX_SEED]``."""
    check_count(value, option, maximum=MAX_SEED)


def parse_sets(values: Sequence[str] | None) -> dict[str, str]:
    """``--set`` values → ``{key: value}`` (values as typed: the config coerces them per key)."""
    return parse_key_values(values, expected="expected KEY=VALUE (a Pulsar key)", field="--set")


def cli_config(
    config: str | Path | None,
    sets: Sequence[str] | None = None,
    *between: ConfigLayer,
    under: ConfigLayer = None,
) -> LoadBalancerConfig:
    """Pulsar's defaults ← ``under`` (advise's cluster runtime configuration) ← the ``--config`` file ←
    ``between`` (e.g. ``--strategy``) ← ``--set``."""
    file_layer = LoadBalancerConfig.from_file(config) if config is not None else None
    return resolve_config(layered_config(under, file_layer, *between, ("--set", parse_sets(sets))))


def snapshot_settings(
    path: Path, config: str | Path | None, sets: Sequence[str] | None, strategy: str | None
) -> tuple[LoadBalancerConfig, str | None]:
    """The configuration and strategy ``decide`` and ``advise --snapshot`` run with: for a conformance
    case, its ``config`` under ``--config`` and ``--set``, and its ``strategy`` (one that sheds) unless
    ``--strategy``, ``--config`` or ``--set`` name one. Both were ignored, and the commands ran Pulsar's
    default pair with Pulsar's defaults on the case's first tick, silently."""
    json_file = path.is_file() and path.name.removesuffix(".gz").endswith(".json")
    doc = load_json_file(path, gunzip=True) if json_file else None
    if not (isinstance(doc, dict) and "ticks" in doc and "loadData" not in doc):
        return cli_config(config, sets), strategy
    reader = JsonReader(doc, str(path))
    conf = cli_config(config, sets, under=(f"{path}: config", reader.raw_mapping("config", {})))
    named = reader.string("strategy", None)
    chosen = {key for key, where in cli_config(config, sets).value_sources().items() if where != "default"}
    if strategy is None and named is not None and not chosen & set(STRATEGY_KEYS.values()):
        strategy = named if resolve_strategy(named, source=str(path)).sheds else None
    return conf, strategy


class RunOverrides(NamedTuple):
    """What a run applies on top of its scenario (:func:`run_overrides`), and where each key was set."""

    values: dict[str, Any]
    """The keys, the file's first and ``--set``'s on top (values as given: the config coerces them)."""
    pair: str | None
    """The strategy pair the file names, if it names one."""
    sources: dict[str, str]
    """Per key of :attr:`values`, where it was set: ``broker.conf:12`` or ``--set``."""

    def check_pair(self, pair: str) -> LoadBalancerConfig:
        """``pair`` with these keys on top, as the run layers them (they win over its scenario), so that a
        pair they cannot run (``loadManagerClassName=…`` against an extensible pair) is refused naming the
        file's line or ``--set`` before anything runs; the run itself knows them only as overrides.
        Returns that configuration (its pair is the one a run of ``pair`` with them has)."""
        layers = [(self.sources[key], {key: value}) for key, value in self.values.items()]
        return resolve_config(layered_config(pair_config(pair, source="strategy"), *layers))


def run_overrides(config: str | Path | None, sets: Sequence[str] | None) -> RunOverrides:
    """The overrides a run applies on top of its scenario, and the strategy pair the file names.

    The file's layer is :func:`~shedlab.strategies.overrides_and_pair`'s (its non-default keys, the pair
    apart); every ``--set`` key follows, as typed. Both layers are checked here, so a typo is reported
    against ``--set`` or the file's line before anything runs.
    """
    file_conf = LoadBalancerConfig.from_file(config) if config is not None else None
    set_values = parse_sets(sets)
    resolve_config(layered_config(file_conf, ("--set", set_values)), pair=False)
    sources = dict.fromkeys(set_values, "--set")
    if file_conf is None:
        return RunOverrides(set_values, None, sources)
    overrides, pair = overrides_and_pair(file_conf)
    sources = {**{key: file_conf.value_sources()[key] for key in overrides}, **sources}
    return RunOverrides({**overrides, **set_values}, pair, sources)
