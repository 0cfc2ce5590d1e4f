"""The ``shedlab`` command line: one entry point, one module per group of subcommands.

User errors (:class:`~shedlab.errors.ShedlabError`) are printed as one line on stderr with exit
code 2 and no traceback, and so is a Spark job that failed on a file it could not read (the user's
data: :mod:`shedlab.spark.failures`); anything else is a bug and keeps its traceback. So are the
usage errors typer finds itself (``--seed abc``, an unknown option, a missing argument), naming the
option and the value, instead of typer's boxed message of several lines.

Start-up: a command's module is imported only when that command runs. Importing every command module
up front loaded pandas, plotly and PyArrow (through the simulator, the report and the Spark commands)
before anything could print: ``shedlab --help`` took 1.07 s, ``decide`` 1.17 s and ``config show``
1.16 s; loaded on demand, 0.16 s, 0.59 s and 0.32 s (medians of 7 runs, ``bench/bench_startup.py``).
:data:`COMMANDS` indexes the commands with their one-line help, which is all ``shedlab --help`` and
shell completion of command names need; ``tests/cli/test_cli.py`` checks it against the commands.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from typing import Annotated, Final

import typer
from rich.markup import escape

# typer vendors click; these names are not re-exported by typer itself
from typer._click.core import Command, Context
from typer._click.exceptions import (
    BadParameter,
    ClickException,
    MissingParameter,
    NoArgsIsHelpError,
    UsageError,
)
from typer.core import TyperCommand, TyperGroup, TyperOption
from typer.exceptions import Abort

from shedlab import __version__
from shedlab.cli.consoles import make_console
from shedlab.cli.given import check_given, option_values
from shedlab.errors import ShedlabError, name_too_long, one_line, shown
from shedlab.spark.failures import read_failure

__all__ = ["COMMANDS", "app", "main"]

COMMANDS: Final[dict[str, tuple[str, str]]] = {
    "config": ("config_cmd", "Inspect the Pulsar load balancer configuration shedlab runs with."),
    "decide": (
        "decide_cmd",
        "What Pulsar's leader would unload from this snapshot, where it would go, and why.",
    ),
    "conform": (
        "decide_cmd",
        "Run conformance cases; one JSON object per case on stdout (docs/conformance.md).",
    ),
    "simulate": ("sim_cmd", "Simulate a scenario and print its run summary."),
    "compare": ("sim_cmd", "Run strategy pairs side by side on one scenario and seed."),
    "report": (
        "report_cmd",
        "Write one self-contained HTML report (tables and interactive plots; opens from disk, no network).",
    ),
    "demo": (
        "report_cmd",
        "The main job: every built-in PIP-364 scenario × the five strategy pairs × 10 seeds, swept on "
        "Spark, evaluated, and turned into an HTML report; prints the PIP-364 table and the report's path.",
    ),
    "sweep": (
        "spark_cmd",
        "Run a grid of simulations (scenarios × strategy pairs × parameters × seeds) as Spark tasks.",
    ),
    "evaluate": (
        "spark_cmd",
        "Mean and 95 % confidence interval over seeds of every run metric, the PIP-364 table, and a "
        "challenger's goal cells.",
    ),
    "ingest": (
        "spark_cmd",
        "Ingest recorded load data into per-tick cluster snapshots (canonical Parquet, by cluster and day).",
    ),
    "sandbox": (
        "sandbox_cmd",
        "Run a simulated Pulsar cluster that speaks Pulsar's admin REST API and znodes.",
    ),
    "replay": (
        "spark_cmd",
        "What each strategy would have decided on recorded snapshots, and why, next to what really happened.",
    ),
    "twin": (
        "tune_cmd",
        "Fit a scenario (a twin of the recorded cluster) to ingest's output; check it against the recording.",
    ),
    "tune": (
        "tune_cmd",
        "Which strategy pair and settings for this cluster: a Spark sweep by successive halving, a Pareto "
        "front, and the recommendation as a broker.conf fragment.",
    ),
    "collect": (
        "cluster_cmd",
        "Record a running cluster's load reports every --every into --out, in the format `ingest` reads.",
    ),
    "advise": (
        "cluster_cmd",
        "What the strategy would unload from this cluster now, to where, and why; every broker left alone "
        "and why.",
    ),
}
"""Command name → (module under ``shedlab.cli``, one-line help shown by ``shedlab --help``)."""


class _LazyGroup(TyperGroup):
    """The top-level group: lists every command from :data:`COMMANDS`, loads one when it is resolved.

    Listing (``--help``, completion of command names) gets a stand-in carrying the one-line help;
    running a command, or completing its options, goes through :meth:`resolve_command`, which imports
    the command's module and registers its real commands.
    """

    def list_commands(self, ctx: Context) -> list[str]:
        return list(dict.fromkeys([*COMMANDS, *self.commands]))

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        loaded = self.commands.get(cmd_name)
        if loaded is not None or cmd_name not in COMMANDS:
            return loaded
        return TyperCommand(cmd_name, help=COMMANDS[cmd_name][1])

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        if args and args[0] in COMMANDS:
            self.load(args[0])
        try:
            name, command, rest = super().resolve_command(ctx, args)
        except UsageError as err:
            matches = difflib.get_close_matches(args[0], list(COMMANDS)) if args else []
            if matches and "Did you mean" not in err.message:
                err.message = f"{err.message.rstrip('.')}. Did you mean {', '.join(map(repr, matches))}?"
            raise
        if command is not None and name is not None and not ctx.resilient_parsing:
            check_given(command, name, rest, ctx)  # before typer converts '' to Path('.')
        return name, command, rest

    def load(self, name: str) -> None:
        """Import the module of command ``name`` and add the commands it registers."""
        if name in self.commands:
            return
        module = importlib.import_module(f"shedlab.cli.{COMMANDS[name][0]}")
        commands = typer.Typer()
        module.register(commands)
        for command_name, command in typer.main.get_group(commands).commands.items():
            self.commands.setdefault(command_name, command)


app = typer.Typer(
    name="shedlab",
    cls=_LazyGroup,
    help="Apache Pulsar load balancing: Pulsar's strategies, a cluster simulator, Spark sweeps and reports.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"shedlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print shedlab's version and exit."
        ),
    ] = False,
) -> None:
    """Apache Pulsar load balancing: Pulsar's strategies, a cluster simulator, Spark sweeps and reports."""


def main(argv: list[str] | None = None) -> None:
    """Console entry point: a user's mistake, whether typer finds it (an option's type, an unknown option,
    a missing argument) or shedlab does (:class:`ShedlabError`), is one line on stderr with exit code 2."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = app(args=args, prog_name="shedlab", standalone_mode=False)
    except ShedlabError as exc:
        _fail(str(exc), exc.exit_code)
    except NoArgsIsHelpError as exc:  # `shedlab`, `shedlab config`: the help is printed already
        sys.exit(exc.exit_code)
    except ClickException as exc:
        _fail(_usage_line(exc, args), exc.exit_code)
    except Abort:  # end of input at a prompt
        typer.echo("Aborted!", err=True)
        sys.exit(1)
    except Exception as exc:
        # a Spark job that failed on a file it could not read, or a path no file system holds: user data
        failure = read_failure(exc) or name_too_long(exc)
        if failure is None:
            raise  # a bug: its traceback
        _fail(str(failure), failure.exit_code)
    # as in typer's standalone mode, always SystemExit: typer.Exit(code), Ctrl-C (130), or 0
    sys.exit(code if isinstance(code, int) else 0)


def _fail(line: str, exit_code: int) -> None:
    make_console(stderr=True).print(f"[bold red]error:[/] {escape(line)}", highlight=False, soft_wrap=True)
    sys.exit(exit_code)


def _usage_line(exc: ClickException, args: list[str]) -> str:
    """One line for typer's usage error: typer would draw a box of several lines around it, after the
    usage line, and without the value that was refused (``--seed abc``: 'unable to parse string as an
    integer'). The option and the value come first, the way a :class:`ShedlabError` names them."""
    text = exc.format_message()
    param = getattr(exc, "param", None)
    if isinstance(exc, BadParameter) and not isinstance(exc, MissingParameter) and param is not None:
        given = option_values(param, args)[-1:]  # the last occurrence: the one typer read
        name = param.opts[0] if isinstance(param, TyperOption) and param.opts else param.human_readable_name
        text = f"{name}: {exc.message}" + "".join(f" (got {shown(value)})" for value in given)
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, UsageError) and ctx is not None:
        text = f"{text.rstrip().removesuffix('.')}; see '{ctx.command_path} --help'"
    return one_line(text)


if __name__ == "__main__":  # pragma: no cover
    main()
