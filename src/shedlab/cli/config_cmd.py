"""``shedlab config``: the effective load-balancer configuration and where each value came from.

When a simulated broker sheds (or refuses to), the first question is "which setting made it do that?".
``shedlab config show`` answers it by listing every Pulsar key with its effective value, Pulsar's default
when they differ, and the source (``default``, ``file:line`` or an override) that set it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from shedlab.cli.consoles import make_console
from shedlab.cli.settings import SetOption, cli_config
from shedlab.config import KEY_SPECS, KeySpec, LoadBalancerConfig
from shedlab.errors import ShedlabError
from shedlab.units import conf_value

__all__ = ["register", "show"]

_LEGEND = (
    "MLM = modular load manager, ELM = extensible load manager, Simple = legacy SimpleLoadManagerImpl. "
    "Highlighted values differ from Pulsar's default; under a value: where it was set."
)


def register(app: typer.Typer) -> None:
    """Attach the ``config`` command group to the main shedlab CLI."""
    config_app = typer.Typer(
        help="Inspect the Pulsar load balancer configuration shedlab runs with.",
        no_args_is_help=True,
    )
    config_app.command("show")(show)
    app.add_typer(config_app, name="config")


def show(
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="broker.conf / .properties, or a .yaml/.yml/.json mapping of Pulsar keys. "
            "Without it, Pulsar's defaults are shown.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    changed_only: Annotated[
        bool, typer.Option("--changed", help="Only keys whose value differs from Pulsar's default.")
    ] = False,
    strategy: Annotated[
        str | None,
        typer.Option(
            help="Strategy pair over the file: AvgShedder, ThresholdShedder+LeastLongTermMessageRate, …"
        ),
    ] = None,
    set_: SetOption = None,
) -> None:
    """Print every load balancer key with its effective value and where that value came from.

    Layers, later ones winning: Pulsar's defaults, --config, --strategy, --set.
    """
    try:
        conf = cli_config(config, set_, _pair_layer(strategy))
    except ShedlabError as err:
        # One line naming file, key and value is more useful than a traceback for a user's typo.
        make_console(stderr=True).print(f"error: {err}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(code=err.exit_code) from err
    if as_json:
        typer.echo(json.dumps(_json_payload(conf, config, changed_only=changed_only), indent=2))
    elif changed_only and conf.to_pulsar_dict() == LoadBalancerConfig().to_pulsar_dict():
        # An empty table under a caption squeezed into a column of 15 characters said nothing
        make_console().print(_nothing_changed(conf), markup=False, highlight=False, soft_wrap=True)
    else:
        make_console().print(_table(conf, config, changed_only=changed_only))


def _nothing_changed(conf: LoadBalancerConfig) -> str:
    """``--changed`` with every key at Pulsar's default: one line, naming the keys set to their default."""
    line = "no key differs from Pulsar's defaults"
    set_here = [f"{key} ({source})" for key, source in conf.value_sources().items() if source != "default"]
    if set_here:
        line += f"; set to its default value: {', '.join(set_here)}"
    return line + f". Without --changed: all {len(KEY_SPECS)} keys."


def _pair_layer(strategy: str | None) -> LoadBalancerConfig | None:
    """The ``--strategy`` layer: the pair's two strategy keys."""
    if strategy is None:
        return None
    # Imported here: shedlab.strategies brings NumPy, 0.18 s of the 0.41 s it takes to import this module
    # (python -X importtime -c "import shedlab.cli.config_cmd"), and only --strategy needs it.
    from shedlab.strategies import pair_config, resolve_pair_name

    return pair_config(resolve_pair_name(strategy, field="--strategy"), source="--strategy")


def _json_payload(conf: LoadBalancerConfig, path: Path | None, *, changed_only: bool) -> dict[str, Any]:
    values = conf.to_pulsar_dict()
    defaults = LoadBalancerConfig().to_pulsar_dict()
    sources = conf.value_sources()
    keys: dict[str, Any] = {}
    for key, spec in KEY_SPECS.items():
        changed = values[key] != defaults[key]
        if changed_only and not changed:
            continue
        keys[key] = {
            "value": values[key],
            "default": defaults[key],
            "changed": changed,
            "source": sources[key],
            "usedBy": list(spec.used_by),
            "deprecated": spec.deprecated,
            "dynamic": spec.dynamic,
            "type": spec.type,
            "javaType": spec.java_type,
        }
    cpu, direct_memory, bandwidth_in, bandwidth_out = conf.resource_weights()
    return {
        "config": str(path) if path is not None else None,
        "sheddingStrategy": conf.shedding_strategy_name,
        "placementStrategy": conf.placement_strategy_name,
        "effectiveResourceWeights": {
            "cpu": cpu,
            "directMemory": direct_memory,
            "bandwidthIn": bandwidth_in,
            "bandwidthOut": bandwidth_out,
        },
        "keys": keys,
    }


def _table(conf: LoadBalancerConfig, path: Path | None, *, changed_only: bool) -> Table:
    sources = conf.value_sources()
    weights = ", ".join(conf_value(w) for w in conf.resource_weights())
    table = Table(
        title=f"Load balancer configuration ({path if path is not None else 'Pulsar defaults'})",
        caption=f"Effective resource weights (cpu, directMemory, bandwidthIn, bandwidthOut): {weights}.\n"
        + _LEGEND,
    )
    # Keys are long (up to 61 characters) and are what a user copies into broker.conf, so they never wrap:
    # the key column is as wide as the longest key shown and the value column takes what is left (about 12
    # characters at 80 columns). Under a value go its source (unless it is Pulsar's default) and, when it
    # differs, Pulsar's default; each group of keys gets a heading row ("used by MLM, ELM").
    table.add_column("key", no_wrap=True)
    table.add_column("value", overflow="fold")
    for group, specs in _groups(KEY_SPECS.values()).items():
        rows = [s for s in specs if not changed_only or getattr(conf, s.field_name) != s.default]
        if not rows:
            continue
        table.add_row(Text(f"used by {group}", style="bold cyan"), Text(""))
        for index, spec in enumerate(rows):
            cells = _row(spec, getattr(conf, spec.field_name), sources[spec.pulsar_key])
            table.add_row(*cells, end_section=index == len(rows) - 1)
    return table


def _row(spec: KeySpec, value: Any, source: str) -> tuple[Text, Text]:
    key = Text(spec.pulsar_key)
    if spec.deprecated:
        key.append(" (deprecated)", style="dim italic")
    shown = Text(conf_value(value), style="bold yellow" if value != spec.default else "")
    if source != "default":  # an unhighlighted value without a source is Pulsar's default
        shown.append(f"\n{source}", style="dim")
    if value != spec.default:
        shown.append(f"\ndefault {conf_value(spec.default)}", style="dim")
    return key, shown


def _groups(specs: Iterable[KeySpec]) -> dict[str, list[KeySpec]]:
    """Keys grouped by who reads them, groups in order of first appearance in the spec table."""
    groups: dict[str, list[KeySpec]] = {}
    for spec in specs:
        groups.setdefault(", ".join(spec.used_by), []).append(spec)
    return groups
