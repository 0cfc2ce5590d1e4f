"""What the command line gave each option and argument, checked before typer converts any of it.

typer converts a value before a command sees it, and ``Path('')`` is the current directory: ``--config
''`` (an unset shell variable, ``--config "$CONF"``) read ``.``, ``decide ''`` the load reports of
wherever the command ran, ``simulate --out ''`` and ``report --out ''`` wrote there. Other commands read
an empty value as no value (``--spark-conf ''``, ``--admin-url ''``, ``--title ''``, ``tune --twin ''``),
and ``sandbox --host ''`` listened on every interface instead of the loopback. No option or argument of
shedlab means anything by an empty or blank value, so :func:`check_given` refuses one for every command,
in one place, from the values the command's own parser collected (the option or argument is named as the
parser found it, ``--out`` for ``-o``, with the value as typed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from typer._click.core import Command, Context, Parameter
from typer._click.exceptions import UsageError
from typer.core import TyperGroup, TyperOption

from shedlab.errors import InputError

__all__ = ["check_given"]


def check_given(command: Command, name: str, args: Sequence[str], parent: Context) -> None:
    """Refuse an empty or blank value of any option or argument of ``command`` (run as ``name`` with
    ``args``), or of its subcommand's. A line the parser cannot read, or one asking for ``--help``, is
    left to the command's own parsing, which says what is wrong or prints the help."""
    ctx = Context(command, info_name=name, parent=parent, resilient_parsing=True)
    opts, rest, _ = command.make_parser(ctx).parse_args(list(args))
    if opts.get("help"):
        return
    for param in command.get_params(ctx):
        _refuse_blank(param, opts.get(param.name or ""))
    if isinstance(command, TyperGroup) and rest:
        try:
            sub_name, sub, sub_args = command.resolve_command(ctx, rest)
        except UsageError:
            return
        if sub is not None and sub_name is not None:
            check_given(sub, sub_name, sub_args, ctx)


def _refuse_blank(param: Parameter, value: Any) -> None:
    values = value if isinstance(value, (list, tuple)) else [value]
    for item in values:
        if isinstance(item, str) and not item.strip():
            raise InputError("an empty value", field=_shown_name(param), value=item, hint=_hint(param))


def _shown_name(param: Parameter) -> str:
    """An option by its long name (``--out`` for ``-o``), an argument by its name (``scenario``), as
    typer's own 'Missing argument' names it."""
    if isinstance(param, TyperOption) and param.opts:
        return max(param.opts, key=len)
    return param.name or "argument"


def _hint(param: Parameter) -> str:
    if not isinstance(param, TyperOption):
        return "give a value"
    return f"give {_shown_name(param)} a value" + ("" if param.required else ", or leave it out")
