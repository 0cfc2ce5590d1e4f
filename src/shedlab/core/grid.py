"""The grid format of a parameter sweep (``docs/spark.md``) and its expansion into run specifications.

A grid (YAML) names scenarios, strategy pairs, Pulsar parameter values and seeds; its cross product is
the sweep: one run specification per (scenario, strategy pair, parameter set, seed), each with a stable
run id. Pure Python/pandas: the Spark layer only schedules the specs :func:`expand_grid` returns, so a
grid can be checked, expanded and its run ids computed without a SparkSession.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib.resources
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from shedlab.config import LoadBalancerConfig, parse_yaml_text
from shedlab.core.partitions import MAX_NAME_BYTES, partition_name_bytes
from shedlab.core.sim.scenario import Scenario, build_config, builtin_scenarios, parse_scenario_text
from shedlab.errors import MAX_SEED, ConfigError, InputError, did_you_mean, one_line, read_user_text
from shedlab.strategies import STRATEGY_PAIRS, resolve_config, resolve_pair_name
from shedlab.strategies.registry import PAIR_KEYS, pair_config

__all__ = [
    "RUN_SPEC_COLUMNS",
    "Grid",
    "ScenarioRef",
    "candidate_specs",
    "canonical_json",
    "check_pair_values",
    "check_scenario_names",
    "expand_grid",
    "load_grid",
    "pair_sections",
    "params_id_of",
    "params_label",
    "parse_grid",
    "refuse_pair_key",
    "run_id_of",
    "scenario_ref",
    "shipped_grid",
    "shipped_grids",
    "value_axis",
]

_GRID_FIELDS = (
    "name",
    "description",
    "scenarios",
    "strategies",
    "seeds",
    "parameters",
    "strategy_parameters",
    "overrides",
    "brokers_every",
    "pip364",
)
RUN_SPEC_COLUMNS = (
    "run_id",
    "grid",
    "scenario",
    "scenario_spec",
    "scenario_digest",
    "strategy",
    "params_json",
    "params_id",
    "seed",
    "cost",
    "brokers_every",
)
"""The columns of a run specification, in the order of the Spark schema ``RUN_SPEC``."""


# ---------------------------------------------------------------------------------------------
# Grids
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScenarioRef:
    """A scenario of a grid: its name, YAML text (shipped to the executors) and digest, and the scenario
    parsed from that text on the driver, once: the grid's checks and tune's recorded configuration read it
    (each parsed the text again)."""

    name: str
    text: str
    source: str
    digest: str
    cost: float
    scenario: Scenario = field(compare=False, repr=False)


@dataclass(frozen=True)
class Grid:
    """A validated grid: the cross product of its lists is the sweep."""

    name: str
    description: str
    scenarios: tuple[ScenarioRef, ...]
    strategies: tuple[str, ...]
    seeds: tuple[int, ...]
    parameters: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    strategy_parameters: tuple[tuple[str, tuple[tuple[str, tuple[Any, ...]], ...]], ...] = ()
    overrides: tuple[tuple[str, Any], ...] = ()
    brokers_every: int = 1
    pip364: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    text: str = ""

    def parameter_sets(self, strategy: str) -> list[dict[str, Any]]:
        """The parameter sets a strategy pair runs with (fixed overrides included)."""
        axes = list(self.parameters) + list(dict(self.strategy_parameters).get(strategy, ()))
        keys = [k for k, _ in axes]
        combos = itertools.product(*[values for _, values in axes]) if axes else [()]
        out = []
        for combo in combos:
            params = dict(self.overrides)
            params.update(dict(zip(keys, combo, strict=True)))
            out.append(params)
        return out

    @property
    def size(self) -> int:
        return (
            sum(len(self.parameter_sets(s)) for s in self.strategies) * len(self.scenarios) * len(self.seeds)
        )

    def factors(self) -> str:
        """:attr:`size` as the product of its axes, for the line a sweep starts with: ``2 scenario(s) ×
        2 strategy pair(s) × 2 parameter set(s) × 2 seed(s)``, so that the user can check the count (it
        left the parameter sets out: 2 × 2 × 2 = 16 runs). The parameter sets appear when there is more
        than one; when ``strategy_parameters`` gives the pairs different numbers of them, the pairs and
        their sets are one factor, the sum ``(6 + 1) parameter set(s) over 2 strategy pair(s)``."""
        counts = [len(self.parameter_sets(s)) for s in self.strategies]
        pairs = f"{len(self.strategies)} strategy pair(s)"
        if len(set(counts)) > 1:
            pairs = f"({' + '.join(map(str, counts))}) parameter set(s) over {pairs}"
        elif counts and counts[0] > 1:
            pairs += f" × {counts[0]} parameter set(s)"
        return f"{len(self.scenarios)} scenario(s) × {pairs} × {len(self.seeds)} seed(s)"


def canonical_json(value: Any) -> str:
    """The JSON run ids and parameter sets are hashed and stored as (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def params_label(params_json: Any) -> str:
    """A parameter set as people read it: its ``key=value`` differences from Pulsar's defaults, with the
    ``loadBalancer`` prefix every key shares dropped (``{"loadBalancerAvgShedderHitCountLowThreshold":
    4}`` → ``AvgShedderHitCountLowThreshold=4``). Reports and tables show this, never the id: a hash
    tells a reader nothing. Accepts the stored JSON text or the mapping itself."""
    if isinstance(params_json, Mapping):
        params: Any = dict(params_json)
    else:
        try:
            params = json.loads(str(params_json)) if params_json else {}
        except json.JSONDecodeError:
            return str(params_json)
    if not isinstance(params, dict) or not params:
        return "default parameters" if not params else str(params_json)
    return ", ".join(f"{re.sub(r'^loadBalancer', '', str(k))}={v}" for k, v in sorted(params.items()))


def params_id_of(params: Mapping[str, Any]) -> str:
    """A short stable id of a parameter set (``"default"`` for none)."""
    if not params:
        return "default"
    return hashlib.sha256(canonical_json(dict(params)).encode()).hexdigest()[:10]


def run_id_of(scenario: str, strategy: str, params: Mapping[str, Any], seed: int) -> str:
    """The stable id of one run: a hash of (scenario, strategy pair, parameters, seed)."""
    key = canonical_json(
        {"scenario": scenario, "strategy": strategy, "params": dict(params), "seed": int(seed)}
    )
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def scenario_ref(
    item: Any, base: Path | None = None, source: str | None = None, field: str = "scenarios"
) -> ScenarioRef:
    """A scenario of a sweep from a built-in name or a YAML file (checked, with its cost estimate); an
    error names ``source`` (the grid file, if any) and ``field`` (``scenarios``, or an option)."""
    return _scenario_ref(item, base, source, field)


def _scenario_ref(item: Any, base: Path | None, source: str | None, field: str = "scenarios") -> ScenarioRef:
    if not isinstance(item, str) or not item:
        raise ConfigError("expected a scenario name or file", source=source, field=field, value=item)
    path = Path(item)
    if base is not None and not path.is_absolute():
        path = base / path
    if item.endswith((".yaml", ".yml")) or "/" in item:
        # a pipe (tune <(cat twin.yaml)) is read once, here, as simulate reads one: it was "not found"
        if path.is_dir() or not path.exists():
            what = "is a directory, not a scenario file" if path.is_dir() else "scenario file not found"
            raise InputError(what, source=source, field=field, value=item)
        text = read_user_text(path, what="scenario file")
        origin = str(path)
    else:
        names = builtin_scenarios()
        if item not in names:
            raise ConfigError(
                "no such built-in scenario",
                source=source,
                field=field,
                value=item,
                hint=did_you_mean(item, names) or f"built-in scenarios: {', '.join(names)}",
            )
        resource = importlib.resources.files("shedlab").joinpath("data", "scenarios", f"{item}.yaml")
        text = resource.read_text(encoding="utf-8")
        origin = f"builtin:{item}"
    scenario = parse_scenario_text(text, origin)
    # Rough cost in µs of simulation: a per-tick constant plus bundles and brokers (calibrated on the
    # built-in scenarios; only used to order runs and pack short ones into one task).
    cost = float(scenario.num_ticks) * float(
        200 + max(1, scenario.num_bundles) + 10 * scenario.initial_brokers
    )
    return ScenarioRef(
        name=scenario.name,
        text=text,
        source=origin,
        digest=hashlib.sha256(text.encode()).hexdigest()[:16],
        cost=cost,
        scenario=scenario,
    )


def value_axis(key: str, raw: Any, source: str, where: str) -> tuple[Any, ...]:
    """One axis of a grid's ``parameters`` or a tune space (``where``: the mapping it is under): its
    values (a list, or one value), each checked against config.py's key table, none twice.

    Twice means the same effective value (``15`` and ``15.0``, a strategy by its short and its class
    name): both would be one run, whose id is the configuration's, while the sweep's count of runs
    counted two."""
    values = tuple(raw) if isinstance(raw, list) else (raw,)
    if not values:
        raise ConfigError("expected at least one value", source=source, field=f"{where}.{key}")
    base = LoadBalancerConfig()
    effective: list[Any] = []
    for v in values:
        conf = resolve_config(base.with_overrides({key: v}, source=f"{source}: {where}"), pair=False)
        if conf.get(key) in effective:
            raise ConfigError(
                "a value given twice would run once", source=source, field=f"{where}.{key}", value=v
            )
        effective.append(conf.get(key))
    return values


def refuse_pair_key(key: str, raw: Any, source: str, where: str, *, problem: str, hint: str) -> None:
    """A grid or a tune space varies a pair's settings, never the pair: a strategy or load manager class
    key under ``where`` ran every run it is in as another pair (or failed in a Spark task when the classes
    do not go together), still labelled with the pair the grid or the space's section names."""
    if key in PAIR_KEYS:
        raise ConfigError(problem, source=source, field=f"{where}.{key}", value=raw, hint=hint)


_GRID_PAIR_KEY = (
    "a grid cannot change the strategy pair: the pair is chosen by its strategies",
    "list the pair under strategies: (e.g. ThresholdShedder+LeastResourceUsageWithWeight)",
)


def _check_params(
    axes: Mapping[str, Any], source: str, field_name: str
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(axes, Mapping):
        raise ConfigError("expected a mapping of Pulsar keys to value lists", source=source, field=field_name)
    for key, raw in axes.items():
        refuse_pair_key(str(key), raw, source, field_name, problem=_GRID_PAIR_KEY[0], hint=_GRID_PAIR_KEY[1])
    return tuple((str(key), value_axis(str(key), raw, source, field_name)) for key, raw in axes.items())


def _optional_mapping(data: Mapping[str, Any], key: str) -> Any:
    """``data[key]``, or an empty mapping where it is absent or null (YAML's ``parameters:`` alone).
    Only null: ``parameters: 0`` (or ``""``, ``[]``, ``false``) was read as no parameters, silently
    (``or {}``, until 28 Nov 2026); now it reaches the check of a mapping and is refused there."""
    value = data.get(key)
    return {} if value is None else value


MAX_GRID_NAME = 200
"""Characters of a grid's ``name``: the first line of a sweep and the report's title print it (a
10,000-character name was a banner of dozens of lines)."""


def _text(data: Mapping[str, Any], key: str, source: str) -> str:
    """A grid's ``name`` or ``description`` as text (a number is taken as its text), or "". A name is
    also one line of at most :data:`MAX_GRID_NAME` characters; a description may be a YAML block."""
    value = data.get(key)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ConfigError("expected text", source=source, field=key, value=value)
    text = str(value)
    if key == "name" and (len(text) > MAX_GRID_NAME or one_line(text) != text):
        raise ConfigError(
            f"expected text on one line of at most {MAX_GRID_NAME} characters",
            source=source,
            field=key,
            value=text,
        )
    return text


MAX_SEEDS = 100_000
"""Seeds per grid (``seeds: {count: N}``): each is a run per scenario × pair × parameter set."""


def _whole(value: Any, source: str, field_name: str) -> int:
    """A whole number as written (``3``, ``"3"`` or ``3.0``); anything else is refused with the value."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and len(value.strip()) <= 20:
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError("expected an integer", source=source, field=field_name, value=value)
    return value


def _parse_seeds(raw: Any, source: str) -> tuple[int, ...]:
    """``[1, 2, 3]``, one seed, or ``{count: N, start: S}``: distinct integers in ``[0, MAX_SEED]``."""
    if isinstance(raw, Mapping):
        unknown = [k for k in raw if k not in ("count", "start")]
        if unknown:
            raise ConfigError(
                "unknown field", source=source, field=f"seeds.{unknown[0]}", hint="count, start"
            )
        count = _whole(raw.get("count", 1), source, "seeds.count")
        start = _whole(raw.get("start", 1), source, "seeds.start")
        if not 1 <= count <= MAX_SEEDS:
            raise ConfigError(
                f"must be between 1 and {MAX_SEEDS}", source=source, field="seeds.count", value=count
            )
        seeds = [start, start + count - 1]
        values: tuple[int, ...] = tuple(range(start, start + count)) if 0 <= start <= MAX_SEED - count else ()
    else:
        listed = raw if isinstance(raw, list) else [raw]
        if len(listed) > MAX_SEEDS:
            raise ConfigError(f"more than {MAX_SEEDS} seeds", source=source, field="seeds")
        values = tuple(_whole(s, source, "seeds") for s in listed)
        seeds = list(values)
    bad = [s for s in seeds if not 0 <= s <= MAX_SEED]
    if bad:
        raise ConfigError(
            f"a seed is an integer in [0, {MAX_SEED}]", source=source, field="seeds", value=bad[0]
        )
    if not values or len(set(values)) != len(values):
        raise ConfigError("expected distinct seeds", source=source, field="seeds", value=raw)
    return values


def parse_grid(data: Any, *, source: str = "grid", base: Path | None = None, text: str = "") -> Grid:
    """Validate a grid mapping (see ``docs/spark.md``); errors name the field."""
    if not isinstance(data, Mapping):
        raise ConfigError("a grid is a YAML mapping", source=source)
    for key in data:
        if key not in _GRID_FIELDS:
            raise ConfigError(
                "unknown grid field",
                source=source,
                field=str(key),
                hint=did_you_mean(str(key), _GRID_FIELDS) or f"known fields: {', '.join(_GRID_FIELDS)}",
            )
    scenarios = _grid_scenarios(data.get("scenarios", "all"), base, source)
    strategies = _grid_strategies(data.get("strategies", "all"), source)
    seeds = _parse_seeds(data.get("seeds", [1]), source)
    parameters = _check_params(_optional_mapping(data, "parameters"), source, "parameters")
    per_pair = _strategy_parameters(_optional_mapping(data, "strategy_parameters"), source, strategies)
    overrides_raw = _optional_mapping(data, "overrides")
    if not isinstance(overrides_raw, Mapping):
        raise ConfigError("expected a mapping of Pulsar keys to values", source=source, field="overrides")
    for key, raw in overrides_raw.items():
        refuse_pair_key(str(key), raw, source, "overrides", problem=_GRID_PAIR_KEY[0], hint=_GRID_PAIR_KEY[1])
    overridden = LoadBalancerConfig().with_overrides(dict(overrides_raw), source=f"{source}: overrides")
    _check_keys_once(parameters, per_pair, overrides_raw, source)
    every = data.get("brokers_every", 1)
    if isinstance(every, bool) or not isinstance(every, int) or every < 0:
        raise ConfigError(
            "expected a non-negative integer (0 = no broker rows)",
            source=source,
            field="brokers_every",
            value=every,
        )
    pip = _optional_mapping(data, "pip364")
    if not isinstance(pip, Mapping):
        raise ConfigError("expected a mapping of problem → definition", source=source, field="pip364")
    from shedlab.core.evaluation import resolve_definitions  # here: evaluation → results → grid

    resolve_definitions(pip, source=source or "grid", prefix="pip364.")
    for pair in strategies:
        own = dict(per_pair).get(pair, ())
        axes = [("parameters", parameters), (f"strategy_parameters.{pair}", own)]
        check_pair_values(pair, axes, overridden, source)
    check_run_configs(scenarios, strategies, dict(overrides_raw))
    return Grid(
        name=_text(data, "name", source) or (Path(source).stem if source else "grid"),
        description=_text(data, "description", source),
        scenarios=scenarios,
        strategies=strategies,
        seeds=seeds,
        parameters=parameters,
        strategy_parameters=per_pair,
        overrides=tuple((str(k), v) for k, v in overrides_raw.items()),
        brokers_every=every,
        pip364=dict(pip),
        source=source,
        text=text,
    )


def check_pair_values(
    pair: str,
    axes: Sequence[tuple[str, Sequence[tuple[str, Sequence[Any]]]]],
    base: LoadBalancerConfig,
    source: str,
) -> None:
    """A pair with each of its values (``axes``: per place a key is varied, its axes), one key at a time:
    a value a pair refuses (``loadBalancerMaxNumberOfBundlesInBundleLoadReport <= 0`` with TransferShedder)
    is refused before Spark starts, where each of its runs would fail in a task."""
    resolve_config(pair_config(pair, base))
    for where, pair_axes in axes:
        for key, values in pair_axes:
            for v in values:
                resolve_config(pair_config(pair, base.with_overrides({key: v}, source=f"{source}: {where}")))


def check_run_configs(
    scenarios: Sequence[ScenarioRef], pairs: Sequence[str], overrides: Mapping[str, Any]
) -> None:
    """Each scenario's own configuration under each pair, as a run layers them (:func:`build_config`): a
    scenario whose ``config`` a pair refuses (``loadBalancerMaxNumberOfBundlesInBundleLoadReport: -1``
    with TransferShedder) is refused before Spark starts, naming the scenario's file, where each of its
    runs failed in a task."""
    for ref in scenarios:
        for pair in pairs:
            build_config(ref.scenario, pair, overrides)


def _check_keys_once(
    parameters: Sequence[tuple[str, Any]],
    per_pair: Sequence[tuple[str, Sequence[tuple[str, Any]]]],
    overrides: Mapping[Any, Any],
    source: str,
) -> None:
    """A key in one place only: ``overrides`` under an axis was replaced by it in every run, and a key of
    ``parameters`` again under a pair of ``strategy_parameters`` made its sets repeat (one run, counted
    as several by the sweep's first line, of the pair's values only)."""
    axes = {key: "parameters" for key, _ in parameters}
    for pair, pair_axes in per_pair:
        for key, _ in pair_axes:
            if axes.get(key) == "parameters":
                raise ConfigError(
                    "parameters has this key already: a key is varied in one place",
                    source=source,
                    field=f"strategy_parameters.{pair}.{key}",
                )
            axes.setdefault(key, f"strategy_parameters.{pair}")
    for key in overrides:
        if str(key) in axes:
            raise ConfigError(
                f"{axes[str(key)]} varies this key: an override of it would be replaced in every run",
                source=source,
                field=f"overrides.{key}",
                value=overrides[key],
            )


def _grid_scenarios(raw: Any, base: Path | None, source: str) -> tuple[ScenarioRef, ...]:
    """``scenarios:``: ``all``, names, files or glob patterns over the built-in names; distinct names."""
    if raw == "all" or raw == ["all"]:
        items: list[Any] = list(builtin_scenarios())
    elif isinstance(raw, str):
        items = [raw]
    elif isinstance(raw, list):
        items = []
        for item in raw:
            if isinstance(item, str) and any(c in item for c in "*?[") and "/" not in item:
                matched = [n for n in builtin_scenarios() if fnmatch.fnmatch(n, item)]
                if not matched:
                    raise ConfigError(
                        "pattern matches no built-in scenario", source=source, field="scenarios", value=item
                    )
                items.extend(matched)
            else:
                items.append(item)
    else:
        raise ConfigError("expected a list of scenarios or 'all'", source=source, field="scenarios")
    if not items:
        raise ConfigError("expected at least one scenario", source=source, field="scenarios", value=raw)
    scenarios = tuple(_scenario_ref(item, base, source) for item in items)
    check_scenario_names(scenarios, "two scenarios of the grid have the same name", source, "scenarios")
    for i, scenario in enumerate(scenarios):
        _check_partition_name("scenario", scenario.name, source, f"scenarios[{i}]")
    return scenarios


def check_scenario_names(
    scenarios: Sequence[ScenarioRef], problem: str, source: str | None = None, field: str = "scenarios"
) -> None:
    """Scenarios swept together have distinct names: a run's id is its scenario's name (with the pair,
    parameters and seed), so the runs of a second scenario of the same name took the first one's ids and
    were dropped as duplicates, never run, the first one's results standing for both."""
    names = [s.name for s in scenarios]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        origins = ", ".join(s.source for s in scenarios if s.name == dupes[0])
        raise ConfigError(problem, source=source, field=field, value=dupes, hint=f"{dupes[0]!r}: {origins}")


def _grid_strategies(raw: Any, source: str) -> tuple[str, ...]:
    """``strategies:``: ``all`` (every Pulsar pair) or pair names, resolved (abbreviations, plugins)."""
    if raw == "all" or raw == ["all"]:
        strategies = tuple(STRATEGY_PAIRS)
    else:
        values = raw if isinstance(raw, list) else [raw]
        fields = [f"strategies[{i}]" for i in range(len(values))] if isinstance(raw, list) else ["strategies"]
        strategies = tuple(
            resolve_pair_name(str(v), source=source, field=f) for v, f in zip(values, fields, strict=True)
        )
    if not strategies:
        raise ConfigError("expected at least one strategy pair", source=source, field="strategies")
    twice = sorted({name for name in strategies if strategies.count(name) > 1})
    if twice:  # e.g. a pair by its abbreviation and by its name: one set of runs, counted twice
        raise ConfigError(
            "the grid names a strategy pair twice", source=source, field="strategies", value=twice[0]
        )
    for i, name in enumerate(strategies):
        _check_partition_name("strategy", name, source, f"strategies[{i}]")
    return strategies


def _check_partition_name(key: str, value: str, source: str | None, field: str) -> None:
    """A scenario's or pair's name becomes a directory of every results table (``scenario=<name>``,
    escaped as Spark escapes it): one too long for a directory name failed every run of it (Errno 36
    in the tasks, a Java stack trace, the sweep's job aborted)."""
    size = partition_name_bytes(key, value)
    if size > MAX_NAME_BYTES:
        raise ConfigError(
            f"the {key} name is too long for a results directory: {key}=<name> takes {size} bytes "
            f"(escaped), a directory name at most {MAX_NAME_BYTES}",
            source=source,
            field=field,
            value=value if len(value) <= 60 else value[:60] + "…",
            hint=f"shorten its name{' in the scenario file' if key == 'scenario' else ''}",
        )


def _strategy_parameters(
    raw: Any, source: str, strategies: Sequence[str]
) -> tuple[tuple[str, tuple[tuple[str, tuple[Any, ...]], ...]], ...]:
    """``strategy_parameters:``: per pair, parameter axes of its own. A section of a pair that is not in
    ``strategies`` is refused: its axes never ran, and nothing said so."""
    if not isinstance(raw, Mapping):
        raise ConfigError(
            "expected a mapping of strategy pair → parameters", source=source, field="strategy_parameters"
        )
    sections = pair_sections(raw, source, "strategy_parameters")
    for pair, (name, _axes) in sections.items():
        if pair not in strategies:
            raise ConfigError(
                "the grid does not run this pair: its axes would never run",
                source=source,
                field=f"strategy_parameters.{name}",
                value=list(strategies),
                hint="list the pair under strategies, or drop its section",
            )
    return tuple(
        (pair, _check_params(axes, source, f"strategy_parameters.{name}"))
        for pair, (name, axes) in sections.items()
    )


def pair_sections(sections: Mapping[Any, Any], source: str, where: str = "") -> dict[str, tuple[str, Any]]:
    """Sections keyed by strategy pair (a grid's ``strategy_parameters``, a tune space's): per pair, resolved
    (abbreviations, plugins), its name as written and its value. A pair is given once: ``AvgShedder`` and
    ``avgshedder`` are one, and the later section replaced the earlier without a word."""
    out: dict[str, tuple[str, Any]] = {}
    for name, value in sections.items():
        field = f"{where}.{name}" if where else str(name)
        pair = resolve_pair_name(str(name), source=source, field=field)
        if pair in out:
            raise ConfigError(
                f"{pair} has a section already ({out[pair][0]}): a pair's keys go in one section",
                source=source,
                field=field,
            )
        out[pair] = (str(name), value)
    return out


def shipped_grids() -> list[str]:
    """The names of the grids shipped with shedlab (``shedlab/data/grids/<name>.yaml``)."""
    folder = importlib.resources.files("shedlab").joinpath("data", "grids")
    return sorted(f.name[: -len(".yaml")] for f in folder.iterdir() if f.name.endswith(".yaml"))


def shipped_grid(name: str) -> str | None:
    """The YAML text of the shipped grid ``name`` (None if there is none of that name)."""
    resource = importlib.resources.files("shedlab").joinpath("data", "grids", f"{name}.yaml")
    return resource.read_text(encoding="utf-8") if resource.is_file() else None


def load_grid(path: str | Path) -> Grid:
    """Read and validate a grid: the name of a shipped grid such as ``pip364``, or a grid file.

    A bare name (no ``/``, no ``.yaml``/``.yml``) of a shipped grid is that grid whatever the current
    directory holds, as a bare scenario name is a built-in: ``sweep tiny --out tiny`` once read its own
    output directory ``./tiny`` as the grid on the re-run meant to resume it. ``./tiny`` names a file.
    """
    name = str(path)
    p = Path(path)
    if "/" not in name and not name.endswith((".yaml", ".yml")):
        text = shipped_grid(name)
        if text is not None:
            return parse_grid(parse_yaml_text(text, f"builtin:{name}"), source=f"builtin:{name}", text=text)
    if "/" not in name and not p.exists():
        raise _no_such_grid(name)
    text = read_user_text(p, what="grid file")
    data = parse_yaml_text(text, str(path))
    return parse_grid(data, source=str(path), base=p.resolve().parent, text=text)


def _no_such_grid(name: str) -> InputError:
    """A name without ``/`` that is no file: most often a shipped grid's name mistyped (``tnyy``), so the
    error suggests the closest one, as a mistyped scenario's does (the names when none is close)."""
    names = shipped_grids()
    if name.endswith((".yaml", ".yml")):
        return InputError("grid file not found", source=name, hint=did_you_mean(Path(name).stem, names))
    hint = did_you_mean(name, names) or f"shipped grids: {', '.join(names)}"
    return InputError("no shipped grid or grid file of this name", source=name, hint=hint)


def expand_grid(grid: Grid) -> pd.DataFrame:
    """The run specifications (:data:`RUN_SPEC_COLUMNS`), longest runs first (so that a scheduler
    which starts them in order finishes with short ones)."""
    candidates = [
        (strategy, params) for strategy in grid.strategies for params in grid.parameter_sets(strategy)
    ]
    return candidate_specs(grid.name, grid.scenarios, candidates, grid.seeds, grid.brokers_every)


def candidate_specs(
    grid_name: str,
    scenarios: Sequence[ScenarioRef],
    candidates: Sequence[tuple[str, Mapping[str, Any]]],
    seeds: Sequence[int],
    brokers_every: int = 1,
) -> pd.DataFrame:
    """Run specifications for any list of (strategy pair, parameter set) candidates × scenarios ×
    seeds — the cross product of a grid, or the survivors of one rung of ``shedlab tune``'s successive
    halving (same run ids, so a rung that adds seeds reuses the runs it already has)."""
    rows = []
    for sc in scenarios:
        for strategy, params in candidates:
            pj = canonical_json(dict(params))
            pid = params_id_of(params)
            for seed in seeds:
                rows.append(
                    {
                        "run_id": run_id_of(sc.name, strategy, params, seed),
                        "grid": grid_name,
                        "scenario": sc.name,
                        "scenario_spec": sc.text,
                        "scenario_digest": sc.digest,
                        "strategy": strategy,
                        "params_json": pj,
                        "params_id": pid,
                        "seed": int(seed),
                        "cost": sc.cost,
                        "brokers_every": int(brokers_every),
                    }
                )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame.drop_duplicates("run_id")
    return frame.sort_values(["cost", "run_id"], ascending=[False, True], kind="stable").reset_index(
        drop=True
    )
