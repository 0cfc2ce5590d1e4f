"""JSON for machines: the one home of what shedlab writes as JSON and how a value becomes JSON.

Why a home: Python's ``json`` writes ``NaN`` and ``Infinity`` for non-finite floats, which is not JSON;
strict parsers (JavaScript's ``JSON.parse``, Go's ``encoding/json``, ``jq``) refuse the whole document.
shedlab's statistics have such values for honest reasons (the interval of one seed, a ratio over an
idle broker), and each writer used to convert them its own way: one turned NaN into ``null`` and left
``Infinity``, one converted NumPy scalars, one neither. Every document shedlab prints or writes now goes
through :func:`dumps`, which refuses to emit anything but JSON.

The rule: a number that is not finite is ``null`` (the value is missing as a number: a reader that wants
to know why reads the metric's definition, as with a missing value in a table); NumPy scalars become
Python numbers; tuples and lists are arrays; sets are sorted arrays (the output is byte-for-byte the same
for the same input). Anything else the ``json`` module cannot write is written as its ``str`` where the
caller asks for it (``default=str``, e.g. paths and timestamps), and is a ``TypeError`` otherwise.

Foundation layer: standard library only (``decide`` and ``config show`` start fast).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Final

__all__ = ["dumps", "json_ready"]

_NUMPY_SCALAR: Final = "numpy"


def json_ready(value: object) -> object:
    """``value`` with every non-finite float as None, NumPy scalars as Python numbers, tuples as lists and
    sets as sorted lists, recursively through mappings and sequences; everything else as it is."""
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):  # NumPy's float64 too (a float subclass): a plain float out
        number = float(value)
        return number if math.isfinite(number) else None
    if isinstance(value, Mapping):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(item) for item in value]
    if isinstance(value, set | frozenset):
        return [json_ready(item) for item in sorted(value)]
    if type(value).__module__ == _NUMPY_SCALAR and hasattr(value, "item"):
        return json_ready(value.item())  # NumPy scalars (float64, int64, bool_) without importing NumPy
    return value


def dumps(
    doc: object,
    *,
    indent: int | None = None,
    sort_keys: bool = False,
    compact: bool = False,
    default: Callable[[object], object] | None = None,
) -> str:
    """``doc`` as strict JSON text (see the module's rule); ``compact`` drops the spaces after ``,`` and
    ``:`` (one line per record in JSON Lines files). Never writes ``NaN`` or ``Infinity``."""
    separators = (",", ":") if compact else None
    return json.dumps(
        json_ready(doc),
        indent=indent,
        sort_keys=sort_keys,
        separators=separators,
        default=default,
        allow_nan=False,
    )
