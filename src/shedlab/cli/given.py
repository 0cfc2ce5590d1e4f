"""What the command line gave each option and argument, checked before typer converts any of it.

typer converts a value before a command sees it, and ``Path('')`` is the current directory: ``--config
''`` (an unset shell variable, ``--config "$CONF"``) read ``.``, ``decide ''`` the load reports of
wherever the command ran, ``simulate --out ''`` and ``report --out ''`` wrote there. Other commands read
an empty value as no value (``--spark-conf ''``, ``--admin-url ''``, ``--title ''``, ``tune --twin ''``),
and ``sandbox --host ''`` listened on every interface instead of the loopback. No option or argument of
shedlab means anything by an empty or blank value, so :func:`check_given` refuses one for every command,
in one place, from the values the command's own parser collected (the option or argument is named as the
parser found it, ``--out`` for ``-o``, with the value as typed).

It refuses an option given twice too (``--strategy AvgShedder --strategy ThresholdShedder``, ``--ui
--no-ui``): typer kept the last, silently, and ran the second pair, as an option repeated by a script's
defaults and its caller's would be. A repeatable option (``--set``, ``--conf``) says so in its help.
And it refuses a number spelt other than in plain digits (``--seed 1_0``, ``' 7'``, ``7.0``), which
typer read as Python's ``int()`` does (:data:`_PLAIN_NUMBERS`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from typer._click.core import Command, Context, Parameter
from typer._click.exceptions import UsageError
from typer.core import TyperGroup, TyperOption

from shedlab.errors import InputError
from shedlab.units import PLAIN_DECIMAL, PLAIN_INTEGER

__all__ = ["check_given", "option_values"]

_PLAIN_NUMBERS: Final[dict[type, tuple[re.Pattern[str], str]]] = {
    int: (PLAIN_INTEGER, "a whole number in plain digits (such as 10)"),
    float: (
        re.compile(rf"{PLAIN_DECIMAL.pattern}|-?(?:inf|infinity|nan)", re.I),
        "a number in plain digits (such as 2.5 or 1e-3)",
    ),
}
"""Per type of a numeric option, the spelling it takes and what to say of another. typer's parsing took
Python's: ``--seed 1_0`` ran seed 10, and ``' 7'``, ``+7`` and ``7.0`` seed 7, silently. The words
``inf`` and ``nan`` pass to the option's own check, which says why it refuses them."""


def check_given(command: Command, name: str, args: Sequence[str], parent: Context) -> None:
    """Refuse an empty or blank value of any option or argument of ``command`` (run as ``name`` with
    ``args``), or of its subcommand's. A line the parser cannot read, or one asking for ``--help``, is
    left to the command's own parsing, which says what is wrong or prints the help."""
    ctx = Context(command, info_name=name, parent=parent, resilient_parsing=True)
    opts, rest, order = command.make_parser(ctx).parse_args(list(args))
    if opts.get("help"):
        return
    for param in command.get_params(ctx):
        _refuse_blank(param, opts.get(param.name or ""))
        _refuse_loose_number(param, opts.get(param.name or ""))
    for param, times in Counter(order).items():
        if times > 1 and isinstance(param, TyperOption) and not (param.multiple or param.count):
            raise InputError(
                "given more than once (only the last would be taken)",
                field=_shown_name(param),
                value=option_values(param, args),
                hint="give it once",
            )
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


def _refuse_loose_number(param: Parameter, value: Any) -> None:
    """Refuse a numeric option's value spelt other than :data:`_PLAIN_NUMBERS` says, before typer reads it
    as Python would."""
    annotation: Any = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    plain = _PLAIN_NUMBERS.get(annotation)
    values = value if isinstance(value, (list, tuple)) else [value]
    for item in values:
        if plain is not None and isinstance(item, str) and not plain[0].fullmatch(item):
            raise InputError(f"expected {plain[1]}", field=_shown_name(param), value=item)


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


def option_values(param: Parameter, args: Sequence[str]) -> list[str]:
    """What the command line ``args`` gave option ``param``, in order: its values, or for a flag the
    spellings given (``['--ui', '--no-ui']``); nothing for an argument."""
    if not isinstance(param, TyperOption):
        return []
    names = [*param.opts, *param.secondary_opts]
    found: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            break
        for option in names:
            if arg == option and param.is_flag:
                found.append(arg)
            elif arg == option and i + 1 < len(args):
                found.append(args[i + 1])
            elif option.startswith("--") and arg.startswith(option + "="):
                found.append(arg[len(option) + 1 :])
    return found
