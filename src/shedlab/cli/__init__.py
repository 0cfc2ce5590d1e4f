"""The ``shedlab`` command line: one entry point, one module per group of subcommands.

User errors (:class:`~shedlab.errors.ShedlabError`) are printed as one line on stderr with exit
code 2 and no traceback; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from shedlab.cli import config_cmd, decide_cmd, report_cmd, sim_cmd, spark_cmd
from shedlab.errors import ShedlabError

app = typer.Typer(
    name="shedlab",
    help="Apache Pulsar load balancing: Pulsar's strategies, a cluster simulator, Spark sweeps and reports.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

for _module in (config_cmd, decide_cmd, report_cmd, sim_cmd, spark_cmd):
    _module.register(app)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: typer handles usage errors and exit codes; ShedlabError becomes one line."""
    try:
        app(args=argv, prog_name="shedlab")
    except ShedlabError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":  # pragma: no cover
    main()
