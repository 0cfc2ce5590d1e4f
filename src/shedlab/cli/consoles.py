"""The command line's rich consoles: the one place that says how text reaches the terminal.

Why a home: rich replaces ``:name:`` codes with emoji by default, so a user's plugin ``mystrat:Boom``
named in ``strategy mystrat:Boom: find_bundles_for_unloading raised …`` printed as ``mystrat💥 …``, in
the error line and in the tables. A class name, a bundle name or a path must print as it is:
:func:`rich.markup.escape` guards markup, and every console here is made with ``emoji=False``.
"""

from __future__ import annotations

import os
from typing import IO, Final

from rich.console import Console, RenderableType

__all__ = ["PIPED_MAX_WIDTH", "make_console", "print_table"]

PIPED_MAX_WIDTH: Final = 240
"""The widest a table is printed into a file or a pipe (wider tables are still wrapped)."""


def make_console(*, stderr: bool = False, file: IO[str] | None = None, width: int | None = None) -> Console:
    """A console on stdout (or stderr, or ``file``) that prints emoji codes as the text they are;
    ``width`` None measures the terminal (:func:`print_table` gives a file's)."""
    return Console(stderr=stderr, file=file, width=width, emoji=False)


def print_table(console: Console, table: RenderableType) -> None:
    """``table`` on ``console``; into a file or a pipe as wide as it needs (up to
    :data:`PIPED_MAX_WIDTH`) unless ``COLUMNS`` says otherwise.

    Why: with no terminal to measure, rich wraps at 80 columns, and a table of seven pairs printed
    ``281,072,39`` on one line and ``2`` on the next, or cut its names to ``scenar…``; a file has room.
    A terminal keeps its own width: there the table wraps as the user's window allows."""
    if console.is_terminal or "COLUMNS" in os.environ:
        console.print(table)
        return
    wide = console.options.update_width(PIPED_MAX_WIDTH)
    width = max(console.width, console.measure(table, options=wide).maximum)
    make_console(file=console.file, width=width).print(table)
