"""shedlab.units: every formatter at its edges (0, negatives, NaN, ±inf, None, huge, non-numbers) and the
duration parser with everything the scenario files and ``--interval`` accept."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal

import numpy as np
import pytest

from shedlab import units
from shedlab.errors import InputError

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (7, "7"),
        (1234567, "1,234,567"),
        (-1234, "-1,234"),
        (2.6, "3"),
        (np.int64(5000), "5,000"),
        (10**20, "100,000,000,000,000,000,000"),
        (None, "-"),
        (NAN, "-"),
        (INF, "inf"),
        (-INF, "-inf"),
        ("12", "12"),
        ("abc", "-"),
    ],
)
def test_integer(value: object, text: str) -> None:
    assert units.integer(value) == text


@pytest.mark.parametrize(
    ("value", "decimals", "grouping", "text"),
    [
        (0, 1, False, "0.0"),
        (-0.04, 1, False, "-0.0"),
        (1234.567, 2, False, "1234.57"),
        (1234.567, 1, True, "1,234.6"),
        (-1234.5, 0, True, "-1,234"),
        (1e15, 0, True, "1,000,000,000,000,000"),
        (INF, 1, False, "inf"),
        (-INF, 0, True, "-inf"),
        (None, 2, False, "-"),
        (NAN, 2, True, "-"),
    ],
)
def test_fixed(value: object, decimals: int, grouping: bool, text: str) -> None:
    assert units.fixed(value, decimals, grouping=grouping) == text


def test_missing_marker_is_the_callers() -> None:
    assert units.fixed(None, 0, missing="never") == "never"
    assert units.integer(NAN, missing="") == ""
    assert units.significant(None, missing="–") == "–"
    assert units.megabytes(None, missing="?") == "?"
    assert units.compact(NAN, missing="n/a") == "n/a"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0.0"),
        (12_345_678, "12.3"),
        (-5e6, "-5.0"),
        (2.5e12, "2,500,000.0"),
        (49_999, "0.0"),
        (INF, "inf"),
        (None, "-"),
        (NAN, "-"),
    ],
)
def test_megabytes(value: object, text: str) -> None:
    assert units.megabytes(value) == text


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (0, 3, "0"),
        (-0.0, 3, "0"),
        (0.123456, 3, "0.123"),
        (45.678, 3, "45.7"),
        (999.4, 3, "999"),
        (999.6, 3, "1,000"),  # not 1e+03
        (1000, 3, "1,000"),
        (-12345.6, 3, "-12,346"),
        (1e-7, 3, "1e-07"),
        (0.5, 6, "0.5"),
        (1e30, 3, f"{1e30:,.0f}"),
        (INF, 3, "inf"),
        (-INF, 3, "-inf"),
        (None, 3, "-"),
        (NAN, 3, "-"),
        (Decimal("2.5"), 3, "2.5"),
        ("x", 3, "-"),
    ],
)
def test_significant(value: object, digits: int, text: str) -> None:
    assert units.significant(value, digits) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [(12.5, "+12.5"), (-692, "-692"), (1030.4, "+1,030"), (-1030.4, "-1,030"), (999.6, "+1,000"), (0, "0")],
)
def test_significant_signed_is_a_change_in_the_same_digits(value: float, text: str) -> None:
    # tune printed its paired changes with +.3g: "change -692 [-1e+03, -380]"
    assert units.significant(value, sign=True) == text


def test_significant_with_report_symbols() -> None:
    assert units.significant(INF, infinity=("∞", "−∞")) == "∞"
    assert units.significant(-INF, infinity=("∞", "−∞")) == "−∞"


@pytest.mark.parametrize(
    ("value", "decimals", "text"),
    [
        (0, 2, "0"),
        (3.0, 2, "3"),
        (1234, 2, "1,234"),
        (-1234.0, 2, "-1,234"),
        (0.256, 2, "0.26"),
        (0.2567, 3, "0.257"),
        (-0.5, 2, "-0.50"),
        (1234.56, 2, "1,235"),
        (1e12, 2, "1,000,000,000,000"),
        (1e13 + 0.5, 2, "10,000,000,000,000"),
        (INF, 2, "inf"),
        (-INF, 2, "-inf"),
        (None, 2, "-"),
        (NAN, 2, "-"),
        (np.float32(2.5), 1, "2.5"),
    ],
)
def test_compact(value: object, decimals: int, text: str) -> None:
    assert units.compact(value, decimals) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-1.5, "-1.5"),
        (45056000.0, "4.5056e+07"),
        (1 / 3, "0.333333"),
        (NAN, "nan"),
        (INF, "inf"),
        ([0.5, 0.25], "0.5/0.25"),
        ((1, "a"), "1/a"),
        ([], ""),
        (3, "3"),
        (None, "None"),
        ("msgRate", "msgRate"),
    ],
)
def test_general(value: object, text: str) -> None:
    assert units.general(value) == text


def test_general_separator() -> None:
    assert units.general(["b-1:8080", 0.5], sep=" / ") == "b-1:8080 / 0.5"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (None, "(empty)"),
        ((), "(empty)"),
        (frozenset(), "(empty)"),
        (("b", "a"), "b,a"),
        (frozenset({"b", "a"}), "a,b"),
        (0.0, "0.0"),
        (-1, "-1"),
        ("org.apache.X", "org.apache.X"),
    ],
)
def test_conf_value(value: object, text: str) -> None:
    assert units.conf_value(value) == text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (90, 90.0),
        (1.5, 1.5),
        (0, 0.0),
        ("90s", 90.0),
        ("5m", 300.0),
        ("5min", 300.0),
        ("1h", 3600.0),
        ("1d", 86400.0),
        ("1.5d", 129600.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("120", 120.0),
        (" 2 h ", 7200.0),
        ("1e3", 1000.0),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert units.parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "expected a duration like 90s, 5m, 2h, 1d or 500ms"),
        ("soon", "expected a duration like 90s, 5m, 2h, 1d or 500ms"),
        ("5 parsecs", "expected a duration like"),
        ("5s5", "expected a duration like"),
        (True, "expected a duration like"),
        ([5], "expected a duration like"),
        (None, "expected a duration like"),
        (-1, "a duration must be finite and not negative"),
        ("-5", "a duration must be finite and not negative"),
        (INF, "a duration must be finite and not negative"),
        ("nan", "a duration must be finite and not negative"),
        # read as minutes where systemd reads months, and as digits where Java reads none (until 29 Nov 2026)
        ("5M", r"units are lower case \(M is months .*\(got '5M'\); did you mean '5m'\?"),
        (" 2 H ", r"units are lower case .*; did you mean '2h'\?"),
        ("1H30M", r"did you mean '1h30m'\?"),
        ("5MS", r"did you mean '5ms'\?"),
        ("٥m", r"with the digits 0-9 .*\(got '٥m'\); did you mean '5m'\?"),
        ("５m", r"with the digits 0-9 .*; did you mean '5m'\?"),
        ("١٢٠", r"with the digits 0-9 .*; did you mean '120'\?"),
        ("5\u00a0m", r"with the digits 0-9 .*; did you mean '5m'\?"),
        ("٥ parsecs", r"with the digits 0-9 .*\(got '٥ parsecs'\)$"),
        # float() read them: --every 1_0 was 10 s, and 1_000 (meant as ms?) 1000 s (until 29 Nov 2026)
        ("1_0", r"without _ between them \(got '1_0'\); did you mean '10'\?"),
        ("1_000", r"without _ between them .*; did you mean '1000'\?"),
        ("1_0m", r"without _ between them .*; did you mean '10m'\?"),
    ],
)
def test_parse_duration_errors_name_the_field(text: object, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        units.parse_duration(text, source="s.yaml", field="events[0].at")
    assert str(info.value).startswith("s.yaml: events[0].at: ")


def test_both_duration_entry_points_use_the_parser() -> None:
    from shedlab.cli.spark_cmd import parse_duration_ms
    from shedlab.core.sim.spec import parse_duration
    from shedlab.errors import ConfigError

    assert parse_duration("1h30m", source=None, field="x") == 5400.0
    assert parse_duration_ms("60s") == 60_000 and parse_duration_ms("500ms") == 500
    assert parse_duration_ms("1.5") == 1500 and parse_duration_ms("2min") == 120_000
    with pytest.raises(InputError, match="--interval: expected a duration"):
        parse_duration_ms("often")
    for zero in ("0s", "0.0001s"):
        with pytest.raises(ConfigError, match="must be positive"):
            parse_duration_ms(zero)
    # ticks are whole milliseconds: 1.5ms ran as 2-ms ticks, silently (until 29 Nov 2026)
    for fraction in ("1.5ms", "0.0015s", "60.0005s"):
        with pytest.raises(
            ConfigError, match=rf"--interval: must be a whole number of milliseconds \(got '{fraction}'\)"
        ):
            parse_duration_ms(fraction)


@pytest.mark.parametrize("formatter", [units.integer, units.megabytes, units.significant, units.compact])
def test_formatters_accept_any_object(formatter: Callable[[object], str]) -> None:
    assert formatter(object()) == "-"


def test_units_imports_nothing_heavy() -> None:
    heavy = "{'numpy', 'pandas', 'plotly', 'pyspark', 'yaml'}"
    code = f"import sys, shedlab.units; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    ("n", "noun", "plural", "text"),
    [
        (1, "run", None, "1 run"),
        (0, "run", None, "0 runs"),
        (2, "read", None, "2 reads"),
        (3, "is", "are", "3 are"),
    ],
)
def test_counted_says_one_in_the_singular(n: int, noun: str, plural: str | None, text: str) -> None:
    """A report's "not rated: 1 runs" and collect's "1 reads" (found by a walk through the docs)."""
    assert units.counted(n, noun, plural) == text
