"""The one definition of Pulsar's formats: single values, whole columns, and the readers built on them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from shedlab.errors import InputError
from shedlab.model.formats import (
    BUNDLE_STATS,
    LOCAL_BROKER_DATA,
    NIC_USAGE,
    PROMETHEUS_SAMPLE,
    RESOURCE_USAGE,
    RESOURCES,
    TIME_AVERAGE,
    Field,
    FieldError,
    FormatError,
    check,
    coerce,
    column_problems,
    columns,
    epoch_ms,
    read_fields,
    resource_columns,
)
from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import LocalBrokerData, NamespaceBundleStats

RATE = LOCAL_BROKER_DATA[0]  # msgRateIn
COUNT = next(f for f in LOCAL_BROKER_DATA if f.json == "numTopics")
USAGE, LIMIT = RESOURCE_USAGE


@pytest.mark.parametrize(
    ("value", "expected"), [(1, 1.0), (2.5, 2.5), ("3.5", 3.5), (" 7 ", 7.0), (None, None)]
)
def test_numbers_are_read_as_jackson_reads_them(value: object, expected: float | None) -> None:
    assert coerce(RATE, value) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [("-2.5e3", -2500.0), (".5", 0.5), ("5.", 5.0), ("+1E2", 100.0), ("NaN", None)]
)
def test_quoted_numbers_in_javas_plain_forms_are_read(value: str, expected: float | None) -> None:
    number = coerce(RATE, value)
    assert number == expected if expected is not None else number != number


# Python's float reads these, Java's Double.parseDouble (Jackson's coercion of a quoted number) none: a
# msgRateIn of "2_80" or "٢٨٠" was read as 280, where Pulsar refuses the report (until 29 Nov 2026)
@pytest.mark.parametrize("value", ["2_80", "٢٨٠", "２８０", "nan", "inf", "-infinity", "1_0e1"])
def test_a_quoted_number_java_does_not_read_is_an_invalid_value(value: str) -> None:
    with pytest.raises(FormatError, match="expected a number") as err:
        coerce(RATE, value)
    assert err.value.reason == "invalid_value"


@pytest.mark.parametrize("value", [True, "fast", [1], {"a": 1}])
def test_a_number_of_the_wrong_type_is_an_invalid_value(value: object) -> None:
    with pytest.raises(FormatError) as err:
        coerce(RATE, value)
    assert err.value.reason == "invalid_value"


def test_integers_accept_integral_numbers_only() -> None:
    assert coerce(COUNT, 2.0) == 2 and coerce(COUNT, "4") == 4
    with pytest.raises(FormatError, match="expected an integer"):
        coerce(COUNT, 1.5)


@pytest.mark.parametrize(
    ("spec", "value", "siblings", "reason"),
    [
        (RATE, math.nan, {}, "nan_value"),
        (RATE, math.inf, {}, "nan_value"),
        (RATE, -1.0, {}, "negative_value"),
        (COUNT, -1, {}, "negative_value"),
        (USAGE, -1.0, {"limit": 100.0}, "negative_value"),
        (USAGE, None, {"limit": 100.0}, "missing_field"),
    ],
)
def test_check_refuses(spec: Field, value: float | None, siblings: dict[str, float], reason: str) -> None:
    with pytest.raises(FormatError) as err:
        check(spec, value, siblings)
    assert err.value.reason == reason


def test_any_usage_is_accepted_where_the_limit_is_not_positive() -> None:
    """Spec §1.1: percentUsage is 0 when limit ≤ 0 (not measured: -1/-1; NIC speed unknown: limit 0)."""
    check(USAGE, -1.0, {"limit": -1.0})
    check(USAGE, 48211.7, {"limit": 0.0})
    check(LIMIT, -1.0, {})


def test_a_nics_usage_may_be_negative_where_its_limit_is_positive() -> None:
    """LinuxBrokerHostUsageImpl's NIC rate is a counter difference, unclamped: negative after a reset."""
    nic = {r.json: r.fields for r in RESOURCES}
    check(nic["bandwidthIn"][0], -812.5, {"limit": 1e7})
    check(nic["bandwidthOut"][0], -812.5, {"limit": 1e7})
    with pytest.raises(FormatError):
        check(nic["cpu"][0], -812.5, {"limit": 100.0})
    frame = pd.DataFrame({"bandwidth_in_usage": [-812.5], "bandwidth_in_limit": [1e7]})
    assert not any(mask.any() for mask, _, _ in column_problems(frame, NIC_USAGE, "bandwidth_in_"))
    # and so may its Prometheus gauge, by the same rule in both forms
    gauge = PROMETHEUS_SAMPLE[0]
    check(gauge, -3.5, {"metric": "pulsar_lb_bandwidth_in_usage"})
    with pytest.raises(FormatError):
        check(gauge, -3.5, {"metric": "pulsar_lb_cpu_usage"})
    points = pd.DataFrame(
        {"value": [-3.5, -3.5], "metric": ["pulsar_lb_bandwidth_out_usage", "pulsar_lb_cpu_usage"]}
    )
    negative = [
        m for m, reason, _ in column_problems(points, PROMETHEUS_SAMPLE) if reason == "negative_value"
    ]
    assert negative[0].tolist() == [False, True]


def test_read_fields_fills_pulsars_defaults_and_names_the_field() -> None:
    values = read_fields({"msgRateIn": 3}, BUNDLE_STATS)
    assert values["msgRateIn"] == 3.0 and values["msgRateOut"] == 0.0 and values["topics"] == 0
    assert read_fields({**dict.fromkeys(("msgRateIn", "msgRateOut"), 1.0),
                        **dict.fromkeys(("msgThroughputIn", "msgThroughputOut"), 1.0)},
                       TIME_AVERAGE, {"maxSamples": 1000})["maxSamples"] == 1000  # fmt: skip
    with pytest.raises(FieldError) as err:
        read_fields({"topics": -2}, BUNDLE_STATS)
    assert (err.value.field, err.value.value, err.value.reason) == ("topics", -2, "negative_value")


def test_column_problems_apply_the_same_rules_to_whole_columns() -> None:
    frame = pd.DataFrame(
        {
            "cpu_usage": [50.0, -1.0, -1.0, None, None],
            "cpu_limit": [100.0, -1.0, 100.0, 100.0, 100.0],
        }
    )
    nonfinite = pd.Series(["", "", "", "", "cpu_usage=nan"])
    found = {
        (reason, col): list(mask.fillna(False).astype(bool))
        for mask, reason, col in column_problems(frame, RESOURCE_USAGE, "cpu_", nonfinite)
    }
    assert found[("negative_value", "cpu_usage")] == [False, False, True, False, False]
    assert found[("missing_field", "cpu_usage")] == [False, False, False, True, False]
    assert found[("nan_value", "cpu_usage")] == [False, False, False, False, True]


def test_columns_and_spark_types_come_from_the_tables() -> None:
    assert resource_columns()[:2] == [("cpu_usage", "double"), ("cpu_limit", "double")]
    assert ("num_bundles", "int") in columns(LOCAL_BROKER_DATA)
    assert ("num_topics", "long") in columns(LOCAL_BROKER_DATA)
    assert all(name != "start_timestamp" for name, _ in columns(LOCAL_BROKER_DATA))  # model only
    assert columns(TIME_AVERAGE, "short_")[0] == ("short_num_samples", "long")


def test_model_readers_use_the_tables() -> None:
    stats = NamespaceBundleStats.from_json(JsonReader({"msgRateIn": "5"}, "x"))
    assert stats.msgRateIn == 5.0 and stats.cacheSize == 0
    report = LocalBrokerData.from_json(JsonReader({"bandwidthIn": {"usage": 48211.7, "limit": 0.0}}, "x"))
    assert report.bandwidthIn.percent_usage() == 0.0 and report.cpu.limit == 0.0
    with pytest.raises(InputError, match=r"lastBundleGains"):
        LocalBrokerData.from_json(JsonReader({"lastBundleGains": [1]}, "x"))


@pytest.mark.parametrize("value", [1_000_000_000, 1735689605, 1735689605.25, "1735689605", 99_999_999_999])
def test_a_time_in_epoch_seconds_is_refused(value: object) -> None:
    """Read as milliseconds it was a time in January 1970, and a recording's lines a minute apart fell
    into one tick and merged; no Pulsar clock reads 1970-01-12 to 1973-03-03."""
    with pytest.raises(FormatError) as caught:
        epoch_ms(value)
    assert caught.value.reason == "invalid_timestamp" and "epoch seconds" in caught.value.message


@pytest.mark.parametrize("value", [1, 60_000, 999_999_999, 100_000_000_000, 1735689605000])
def test_times_outside_the_seconds_range_are_kept(value: int) -> None:
    assert epoch_ms(value) == value


@pytest.mark.parametrize("value", [0, -1, -60_000, "0", 0.0, -(2**63)])
def test_a_time_at_or_before_1970_is_refused(value: object) -> None:
    """Ingest quarantined such a line (invalid_timestamp) while ``decide`` and ``advise`` read it as the
    oldest report of its broker; one rule now, here."""
    with pytest.raises(FormatError) as caught:
        epoch_ms(value)
    assert caught.value.reason == "invalid_timestamp" and "after 1970" in caught.value.message
