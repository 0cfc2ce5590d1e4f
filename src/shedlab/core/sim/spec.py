"""Validated reading of scenario documents: durations, distributions, signals, and unknown-field hints.

Every error names the file and the dotted path of the offending field (``workloads[1].msg_rate_in.dist``)
and, for an unknown field, suggests the closest known one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from shedlab import units
from shedlab.errors import InputError, did_you_mean, one_line

_MISSING: Any = object()


def parse_duration(value: Any, *, source: str | None, field: str) -> float:
    """Seconds from a number (seconds) or a string such as ``90s``, ``5m``, ``1h30m``, ``1.5d``."""
    return units.parse_duration(value, source=source, field=field)


class Node:
    """A mapping from a scenario document plus its location, with typed getters and unknown-field checks."""

    def __init__(self, data: Any, source: str | None, path: str) -> None:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise InputError(
                f"expected a mapping, found {type(data).__name__}", source=source, field=path or "(top level)"
            )
        for key in data:
            if not isinstance(key, str):
                raise InputError("keys must be strings", source=source, field=self._join(path, str(key)))
        self.data: Mapping[str, Any] = data
        self.source = source
        self.path = path
        self._used: set[str] = set()

    @staticmethod
    def _join(path: str, key: str) -> str:
        return f"{path}.{key}" if path else key

    def where(self, key: str) -> str:
        return self._join(self.path, key)

    def error(self, key: str, message: str, value: Any = None, hint: str | None = None) -> InputError:
        return InputError(message, source=self.source, field=self.where(key), value=value, hint=hint)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        self._used.add(key)
        if key in self.data:
            return self.data[key]
        if default is _MISSING:
            raise self.error(key, "required field is missing")
        return default

    def finish(self, known: Sequence[str] | None = None) -> None:
        """Refuse fields nobody read, suggesting the closest known name."""
        names = list(known) if known is not None else sorted(self._used)
        for key in self.data:
            if key not in self._used and key not in names:
                hint = did_you_mean(key, names) or (f"known fields: {', '.join(names)}" if names else None)
                raise self.error(key, "unknown field", hint=hint)

    # --------------------------------------------------------------------------- typed getters
    def string(self, key: str, default: Any = _MISSING, choices: Sequence[str] | None = None) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise self.error(key, "expected a string", value)
        if choices is not None and value not in choices:
            hint = did_you_mean(value, choices) or f"one of: {', '.join(choices)}"
            raise self.error(key, "unknown value", value, hint=hint)
        return value

    def name(self, key: str, default: Any = _MISSING) -> str:
        """A name (a scenario's, a workload's): a non-empty string on one line. It heads the tables, names
        the results' ``scenario=<name>`` directories and is what selectors match: an empty one named
        nothing there, and a line break split the printed tables."""
        value = self.string(key, default)
        if not value.strip() or one_line(value) != value:
            raise self.error(key, "expected a non-empty name on one line", value)
        return value

    def optional_string(self, key: str) -> str | None:
        value = self.raw(key, None)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.error(key, "expected a string", value)
        return value

    def number(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        exclusive_minimum: bool = False,
    ) -> float:
        value = self.raw(key, default)
        return check_number(
            value,
            source=self.source,
            field=self.where(key),
            minimum=minimum,
            maximum=maximum,
            exclusive_minimum=exclusive_minimum,
        )

    def integer(self, key: str, default: Any = _MISSING, *, minimum: int | None = None) -> int:
        value = self.raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise self.error(key, "expected a whole number", value)
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be at least {minimum}", value)
        return int(value)

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.error(key, "expected true or false", value)
        return value

    def duration(self, key: str, default: Any = _MISSING) -> float:
        value = self.raw(key, default)
        return parse_duration(value, source=self.source, field=self.where(key))

    def child(self, key: str, default: Any = _MISSING) -> Node:
        return Node(self.raw(key, default), self.source, self.where(key))

    def items(self, key: str) -> Iterator[tuple[str, Node]]:
        node = self.child(key, {})
        for name, value in node.data.items():
            yield name, Node(value, self.source, node.where(name))

    def list(self, key: str, default: Any = _MISSING) -> list[Any]:
        value = self.raw(key, default)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.error(key, "expected a list", value)
        return value

    def nodes(self, key: str) -> Iterator[Node]:
        for i, item in enumerate(self.list(key, [])):
            yield Node(item, self.source, f"{self.where(key)}[{i}]")

    def string_list(self, key: str, default: Any = _MISSING) -> tuple[str, ...]:
        value = self.raw(key, default)
        if isinstance(value, tuple):
            return value
        if isinstance(value, str):
            return (value,)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, "expected a string or a list of strings", value)
        return tuple(value)


_EXPONENT_ONLY = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)[eE][-+]?[0-9]+")
"""A number with an exponent that YAML 1.1, which PyYAML reads, takes for text (``1e3``, ``5e-1``, ``1.0e3``:
its floats need a point and a signed exponent), where JSON, YAML 1.2 and a reader of the file take it for
a number. A text reaches a number's check only if YAML did not read it as one."""


def number_hint(value: object) -> str | None:
    """What to write instead, for a text that YAML 1.1 did not read as the number it looks like."""
    if not (isinstance(value, str) and _EXPONENT_ONLY.fullmatch(value.strip())):
        return None
    number = float(value)
    forms = [f"{number:f}".rstrip("0").rstrip(".")] if 1e-6 <= abs(number) < 1e15 else []
    forms.append(f"{number:.1e}")  # with its point: a float to YAML 1.1 too
    return f"YAML 1.1 reads {value.strip()} as text: write {' or '.join(forms)}"


def check_number(
    value: Any,
    *,
    source: str | None,
    field: str,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(
            "expected a number", source=source, field=field, value=value, hint=number_hint(value)
        )
    number = float(value)
    if not math.isfinite(number):
        raise InputError("expected a finite number", source=source, field=field, value=value)
    if minimum is not None:
        if exclusive_minimum and number <= minimum:
            raise InputError(f"must be greater than {minimum:g}", source=source, field=field, value=value)
        if not exclusive_minimum and number < minimum:
            raise InputError(f"must be at least {minimum:g}", source=source, field=field, value=value)
    if maximum is not None and number > maximum:
        raise InputError(f"must be at most {maximum:g}", source=source, field=field, value=value)
    return number
