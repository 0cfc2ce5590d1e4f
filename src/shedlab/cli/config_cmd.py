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
from rich.console import Console
from rich.table import Table
from rich.text import Text

from shedlab.config import KEY_SPECS, KeySpec, LoadBalancerConfig
from shedlab.errors import ShedlabError

__all__ = ["register", "show"]

_LEGEND = (
    "MLM = modular load manager, ELM = extensible load manager, Simple = legacy SimpleLoadManagerImpl. "
    "Highlighted values differ from Pulsar's default."
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
) -> None:
    """Print every load balancer key with its effective value and where that value came from."""
    try:
        conf = LoadBalancerConfig.from_file(config) if config is not None else LoadBalancerConfig()
    except ShedlabError as err:
        # One line naming file, key and value is more useful than a traceback for a user's typo.
        Console(stderr=True).print(f"error: {err}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(code=err.exit_code) from err
    if as_json:
        typer.echo(json.dumps(_json_payload(conf, config, changed_only=changed_only), indent=2))
    else:
        Console().print(_table(conf, config, changed_only=changed_only))


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
    weights = ", ".join(_format(w) for w in conf.resource_weights())
    table = Table(
        title=f"Load balancer configuration ({path if path is not None else 'Pulsar defaults'})",
        caption=f"Effective resource weights (cpu, directMemory, bandwidthIn, bandwidthOut): {weights}.\n"
        + _LEGEND,
    )
    # Keys are long (up to 61 characters), so there is no separate "used by" column: each group gets a
    # heading row instead, and the Pulsar default is shown under a value only when it differs.
    table.add_column("key", overflow="fold", min_width=24)
    table.add_column("value", overflow="fold", min_width=12)
    table.add_column("source", style="dim", overflow="fold", min_width=10)
    for group, specs in _groups(KEY_SPECS.values()).items():
        rows = [s for s in specs if not changed_only or getattr(conf, s.field_name) != s.default]
        if not rows:
            continue
        table.add_row(Text(f"used by {group}", style="bold cyan"), Text(""), Text(""))
        for index, spec in enumerate(rows):
            value = getattr(conf, spec.field_name)
            key = Text(spec.pulsar_key)
            if spec.deprecated:
                key.append(" (deprecated)", style="dim italic")
            if value != spec.default:
                shown = Text(_format(value), style="bold yellow")
                shown.append(f"\ndefault {_format(spec.default)}", style="dim")
            else:
                shown = Text(_format(value))
            table.add_row(key, shown, Text(sources[spec.pulsar_key]), end_section=index == len(rows) - 1)
    return table


def _groups(specs: Iterable[KeySpec]) -> dict[str, list[KeySpec]]:
    """Keys grouped by who reads them, groups in order of first appearance in the spec table."""
    groups: dict[str, list[KeySpec]] = {}
    for spec in specs:
        groups.setdefault(", ".join(spec.used_by), []).append(spec)
    return groups


def _format(value: Any) -> str:
    """Values spelt the way broker.conf spells them (true/false, comma-separated lists)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(empty)"
    if isinstance(value, (tuple, list, frozenset, set)):
        items = sorted(value) if isinstance(value, (frozenset, set)) else list(value)
        return ",".join(str(item) for item in items) if items else "(empty)"
    return str(value)
