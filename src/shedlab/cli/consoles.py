"""The command line's rich consoles: the one place that says how text reaches the terminal.

Why a home: rich replaces ``:name:`` codes with emoji by default, so a user's plugin ``mystrat:Boom``
named in ``strategy mystrat:Boom: find_bundles_for_unloading raised …`` printed as ``mystrat💥 …``, in
the error line and in the tables. A class name, a bundle name or a path must print as it is:
:func:`rich.markup.escape` guards markup, and every console here is made with ``emoji=False``.
"""

from __future__ import annotations

from rich.console import Console

__all__ = ["make_console"]


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that prints emoji codes as the text they are."""
    return Console(stderr=stderr, emoji=False)
