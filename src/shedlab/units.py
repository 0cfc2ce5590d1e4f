"""Numbers for people and durations from people: the one home of shedlab's formatting and parsing.

The CLI's tables, the terminal PIP-364 table and the HTML report all print metrics; each used to carry
its own formatter, and they drifted (a missing value was ``-`` in one place and ``never`` or ``–``
in another, depending on which copy a table happened to use). Every formatter lives here now, each
with one rule for what it prints, and the callers choose the missing-value marker that suits them.

This module sits at the foundation layer and imports nothing heavy (no pandas, plotly or PySpark):
``shedlab decide`` and ``shedlab config show`` use it and must start fast.

Missing values: ``None``, NaN, and anything that is not a number (``float(value)`` fails, e.g.
``pd.NA``) print as the ``missing`` marker, ``"-"`` unless the caller says otherwise. Infinities print as
``inf``/``-inf`` (the report passes ``∞``/``−∞``).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable
from typing import Final

from shedlab.errors import InputError, did_you_mean

__all__ = [
    "DURATION_UNITS",
    "JAVA_DECIMAL",
    "JAVA_INTEGER",
    "MISSING",
    "PLAIN_DECIMAL",
    "PLAIN_INTEGER",
    "as_number",
    "compact",
    "conf_value",
    "counted",
    "fixed",
    "general",
    "integer",
    "megabytes",
    "parse_duration",
    "significant",
]

MISSING: Final = "-"


def as_number(value: object) -> float | None:
    """``value`` as a float, or None when it is missing (None, NaN) or not a number at all."""
    if value is None:
        return None
    try:
        number = float(value)  # type: ignore[arg-type]  # numbers, numpy scalars, numeric text: what float() takes
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def _infinite(number: float, infinity: tuple[str, str]) -> str | None:
    if math.isinf(number):
        return infinity[0] if number > 0 else infinity[1]
    return None


_INF: Final = ("inf", "-inf")


def integer(value: object, *, missing: str = MISSING) -> str:
    """A count with thousands separators, rounded to a whole number: ``1,234,567``."""
    number = as_number(value)
    if number is None:
        return missing
    return _infinite(number, _INF) or f"{round(number):,}"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and its noun, singular for one: ``1 run``, ``2 runs``, ``0 runs``; ``plural`` where adding an
    ``s`` is wrong (``counted(2, "is", "are")``)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def fixed(value: object, decimals: int, *, grouping: bool = False, missing: str = MISSING) -> str:
    """A fixed number of decimals (``12.3``), with thousands separators if ``grouping`` (``1,234.5``)."""
    number = as_number(value)
    if number is None:
        return missing
    return f"{number:,.{decimals}f}" if grouping else f"{number:.{decimals}f}"


def megabytes(value: object, *, missing: str = MISSING) -> str:
    """Bytes (or bytes per second) as megabytes with one decimal: ``12,345,678`` → ``12.3``."""
    number = as_number(value)
    return missing if number is None else f"{number / 1e6:,.1f}"


def significant(
    value: object,
    digits: int = 3,
    *,
    missing: str = MISSING,
    infinity: tuple[str, str] = _INF,
    sign: bool = False,
) -> str:
    """``digits`` significant digits below 1,000 (``0.123``, ``45.6``), whole numbers with separators
    from 1,000 on (``12,346``): a metric read at a glance, never in exponent notation above 1,000.

    ``sign``: a change, ``+`` before a positive value (``+12.5``, ``-1,030``; 0 stays ``0``), so that a
    change and its interval read as changes, in the same digits as the figures they change."""
    number = as_number(value)
    if number is None:
        return missing
    special = _infinite(number, infinity)
    if special is not None:
        return special
    if number == 0:
        return "0"  # also for -0.0
    plus = "+" if sign else ""
    short = f"{number:{plus}.{digits}g}"
    # 999.6 rounds to 1e+03 with 3 digits: from 1,000 on (before or after rounding), whole numbers
    return f"{number:{plus},.0f}" if abs(float(short)) >= 1000 else short


def compact(value: object, decimals: int = 2, *, missing: str = MISSING) -> str:
    """Whole numbers exactly with separators (``1,234``), other values from 1,000 on rounded to whole
    numbers, smaller ones with ``decimals`` decimals (``0.25``): counts and rates in one column."""
    number = as_number(value)
    if number is None:
        return missing
    if number.is_integer() and abs(number) < 1e12:
        return f"{int(number):,}"
    if abs(number) >= 1000:
        return f"{number:,.0f}"
    return f"{number:.{decimals}f}"


def general(value: object, digits: int = 6, *, sep: str = "/") -> str:
    """A value of a strategy's reason: floats with ``digits`` significant digits, sequences joined
    with ``sep`` (``0.5/0.25``), anything else as ``str``."""
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    if isinstance(value, (list, tuple)):
        return sep.join(general(item, digits, sep=sep) for item in value)
    return str(value)


def conf_value(value: object) -> str:
    """A Pulsar setting spelt the way ``broker.conf`` spells it: ``true``/``false``, comma-separated
    lists (sets sorted), ``(empty)`` for an unset or empty value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(empty)"
    if isinstance(value, (tuple, list, frozenset, set)):
        items: Iterable[object] = sorted(value) if isinstance(value, (frozenset, set)) else value
        text = ",".join(str(item) for item in items)
        return text or "(empty)"
    return str(value)


# --------------------------------------------------------------------------------------------- durations

DURATION_UNITS: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}
"""Seconds per unit of a duration string."""

_DECIMAL_DIGITS: Final = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?"

PLAIN_INTEGER: Final = re.compile(r"-?[0-9]+")
"""A whole number as shedlab's inputs spell one: ASCII digits and an optional minus. Python's ``int()``
also takes ``1_0`` (10), ``+7`` and ``' 7'``; Java's ``Integer.parseInt`` and Spark SQL do not."""

PLAIN_DECIMAL: Final = re.compile(rf"-?{_DECIMAL_DIGITS}")
"""A decimal number: ASCII digits, an optional fraction and exponent, an optional minus. Python also reads
``1_0`` (10), ``0x10`` (16) and ``0o17`` (15) as numbers; these are refused wherever a number is typed."""

JAVA_INTEGER: Final = re.compile(r"[+-]?[0-9]+")
"""A whole number as Java's ``Integer.parseInt``/``Long.parseLong`` read it in ASCII digits (a plus sign
too): what a broker.conf value or a quoted JSON number may be."""

JAVA_DECIMAL: Final = re.compile(rf"[+-]?{_DECIMAL_DIGITS}")
"""A number as Java's ``Double.parseDouble`` reads it in ASCII digits (hex floats and ``d``/``f``
suffixes aside, which no Pulsar writes): Python's ``float`` also reads ``2_80``, any script's digits and
``inf``, which Pulsar refuses."""

_DURATION_PART: Final = re.compile(r"([0-9]+(?:\.[0-9]+)?)\s*(ms|min|s|m|h|d)")
_NUMBER: Final = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_EXPECTED: Final = "expected a duration like 90s, 5m, 2h, 1d or 500ms"


def parse_duration(value: object, *, source: str | None = None, field: str | None = None) -> float:
    """Seconds from a number of seconds or a string: ``90s``, ``5m``, ``5min``, ``1h30m``, ``1.5d``,
    ``500ms``, ``"120"`` (spaces are ignored).

    A duration is finite and not negative; errors name ``source``, ``field`` and the value. Digits are
    ASCII and units lower case (see :func:`_refuse_unusual_text`).
    """
    if isinstance(value, bool):
        raise InputError(_EXPECTED, source=source, field=field, value=value)
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond a float's range
            raise InputError("a duration must be finite", source=source, field=field, value=value) from None
    elif isinstance(value, str):
        seconds = _parse_duration_text(value, source=source, field=field)
    else:
        raise InputError(_EXPECTED, source=source, field=field, value=value)
    if not math.isfinite(seconds) or seconds < 0:
        raise InputError(
            "a duration must be finite and not negative", source=source, field=field, value=value
        )
    return seconds


def _parse_duration_text(value: str, *, source: str | None, field: str | None) -> float:
    text = value.strip().replace(" ", "")
    _refuse_unusual_text(value, text, source=source, field=field)
    seconds = _sum_of_parts(text)
    if seconds is not None:
        return seconds
    try:
        return float(text)
    except ValueError:
        raise InputError(_EXPECTED, source=source, field=field, value=value) from None


def _sum_of_parts(text: str) -> float | None:
    """The seconds of ``text`` read as parts such as ``1h30m``, or None if it is not only such parts."""
    pos, seconds = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        seconds += float(match.group(1)) * DURATION_UNITS[match.group(2)]
        pos = match.end()
    return seconds if pos == len(text) and text else None


def _refuse_unusual_text(value: str, text: str, *, source: str | None, field: str | None) -> None:
    """Refuse digits other than 0-9, ``_`` between digits and units in upper case, each read as something
    else elsewhere (``--every 1_0`` was 10 s, float()'s reading).

    Python's ``float()`` and ``\\d`` take any script's digits (``٥m``, fullwidth ``５m`` were 5 minutes);
    Java, where Pulsar reads its settings, and every other tool a duration is copied to, do not. ``5M`` was
    5 minutes too, where systemd reads months, SI mega and ISO 8601's ``P5M`` months, and ``5MS`` 5 ms;
    Go and Prometheus, whose spellings these are, refuse both. Each error suggests the plain spelling."""
    if not text.isascii():
        message = "write a duration with the digits 0-9 and the units ms, s, m, min, h, d"
    elif "_" in text:  # float() takes 1_0 for 10; Java, Go and Prometheus refuse it
        message = "write a duration's digits without _ between them"
    elif _sum_of_parts(text) is None and _sum_of_parts(text.lower()) is not None:
        message = "units are lower case (M is months to systemd and ISO 8601, mega in SI)"
    else:
        return
    raise InputError(message, source=source, field=field, value=value, hint=_plain_spelling(text))


def _plain_spelling(text: str) -> str | None:
    """'did you mean' the duration ``text`` in ASCII digits and lower-case units (fullwidth forms made
    plain, any script's decimal digits written 0-9, no ``_``), if that reads as one; for a hint only."""
    plain = unicodedata.normalize("NFKC", text).lower().replace(" ", "").replace("_", "")
    plain = "".join(str(unicodedata.decimal(c)) if c.isdecimal() else c for c in plain)
    if not plain.isascii() or (_sum_of_parts(plain) is None and not _NUMBER.fullmatch(plain)):
        return None
    return did_you_mean(plain, [plain])
