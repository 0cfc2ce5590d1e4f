"""User-facing errors.

Every problem caused by what a user handed us (a file, a flag, a config key) is raised as a
:class:`ShedlabError`. The CLI prints it as one line naming the source, the field and the value,
and exits non-zero without a traceback. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any


class ShedlabError(Exception):
    """An error in user input, reported without a traceback."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        field: str | None = None,
        value: Any = None,
        hint: str | None = None,
        show_value: bool = True,
    ) -> None:
        self.message = message
        self.source = source
        self.field = field
        self.value = value
        self.hint = hint
        self.show_value = show_value
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ": ".join(part for part in (self.source, self.field) if part)
        text = f"{where}: {self.message}" if where else self.message
        if self.show_value and self.value is not None:
            text += f" (got {self.value!r})"
        if self.hint:
            text += f"; {self.hint}"
        return text


class InputError(ShedlabError):
    """Malformed or inconsistent input data (JSON, snapshots, recordings)."""


class ConfigError(ShedlabError):
    """An unknown configuration key, a bad value, or an impossible combination."""


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The closest known spelling of ``word``, for 'did you mean' hints."""
    options = list(choices)
    lowered = {c.lower(): c for c in options}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.5)
    return lowered[match[0]] if match else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A hint sentence suggesting the closest known spelling, or None."""
    best = closest(word, choices)
    return f"did you mean {best!r}?" if best else None
