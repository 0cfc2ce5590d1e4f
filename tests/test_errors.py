"""The one reader of a user's files (``shedlab.errors``): encodings, binary data, duplicate keys, sizes."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from shedlab.cluster.access import Token
from shedlab.errors import (
    MAX_SHOWN_VALUE,
    ConfigError,
    InputError,
    decode_user_bytes,
    one_line,
    parse_json_text,
    read_user_text,
    redact,
)

TEXT = "name: café\n"


@pytest.mark.parametrize(
    "data",
    [
        TEXT.encode(),
        codecs.BOM_UTF8 + TEXT.encode(),
        TEXT.encode("utf-16"),
        codecs.BOM_UTF16_BE + TEXT.encode("utf-16-be"),
        TEXT.encode("utf-32"),
        codecs.BOM_UTF32_BE + TEXT.encode("utf-32-be"),
    ],
)
def test_utf8_and_text_with_a_byte_order_mark_are_decoded(data: bytes) -> None:
    assert decode_user_bytes(data, "f") == TEXT


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x1f\x8b\x08\x00", "f: this is a gzip file, not text"),
        (b"PK\x03\x04", "f: this is a zip file, not text"),
        (b"PAR1\x00", "f: this is a Parquet file, not text"),
        (b"BZh91AY", "f: this is a bzip2 file, not text"),
        (TEXT.encode("utf-16-le"), r"f: binary data, not text \(NUL byte at offset 1\)"),
        (TEXT.encode("latin-1"), r"f: not UTF-8 text \(invalid byte 0xe9"),
        (codecs.BOM_UTF16_LE + b"\x00\xd8", "not valid UTF-16 text"),
    ],
)
def test_binary_and_undecodable_data_is_refused_for_what_it_is(data: bytes, message: str) -> None:
    with pytest.raises(InputError, match=message):
        decode_user_bytes(data, "f")


def test_latin1_is_the_fallback_only_when_asked() -> None:
    assert decode_user_bytes(TEXT.encode("latin-1"), "broker.conf", latin1=True) == TEXT


def test_the_error_class_is_the_callers(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="gzip"):
        decode_user_bytes(b"\x1f\x8b", "broker.conf", error=ConfigError)
    with pytest.raises(ConfigError, match="expected a config file, found a directory"):
        read_user_text(tmp_path, what="config file", error=ConfigError)
    with pytest.raises(InputError, match=r"nope\.json: file not found"):
        read_user_text(tmp_path / "nope.json")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1,\n "a": 2}', r"a: key 'a' appears twice in one object \(again at line 2\)"),
        ('{"x": {"b": 1, "b": 2}}', "key 'b' appears twice"),
        ('{"a": 1' + "0" * 30 + "}", "integer out of range"),
        ('{"a": 1' + "0" * 5000 + "}", "integer out of range"),
        ("[" * 100_000, "nested too deeply"),
        ('{"a": }', "malformed JSON at line 1, column 7"),
    ],
)
def test_json_refusals(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as info:
        parse_json_text(text, "f.json")
    assert str(info.value).startswith("f.json")
    assert "\n" not in str(info.value)


def test_64_bit_integers_and_floats_are_kept() -> None:
    assert parse_json_text('{"a": 9223372036854775807, "b": -9223372036854775808, "c": 1e400}', "f") == {
        "a": 2**63 - 1,
        "b": -(2**63),
        "c": float("inf"),
    }


@pytest.mark.parametrize(
    ("field", "shown"),
    [
        ("a\nb", "a\\nb"),
        ("a\r\nb", "a\\r\\nb"),
        ("tab\there", "tab\\there"),
        ("esc\x1b[31m", "esc\\x1b[31m"),
        ("sep\u2028x", "sep\\u2028x"),
        ("naïve → ×", "naïve → ×"),
    ],
)
def test_an_error_naming_what_the_user_wrote_stays_one_line(field: str, shown: str) -> None:
    # the grid fuzz test found a YAML key "\n" giving a two-line "unknown grid field" error
    error = ConfigError("unknown grid field", source="grid.yaml", field=field, hint=f"not {field}")
    assert str(error) == f"grid.yaml: {shown}: unknown grid field; not {shown}"
    assert str(error).splitlines() == [str(error)]


def test_one_line_leaves_printable_text_alone() -> None:
    assert one_line("broker-1: 85 % → 70 %, ✓") == "broker-1: 85 % → 70 %, ✓"


def test_a_registered_secret_never_appears_in_an_error() -> None:
    """A server could put the token into a field it sends back; the message that echoes the field's value
    (``got '…'``) must not show it, whichever module raises."""
    secret = "eyJhbGciOiJIUzI1NiJ9.test-registry.c2lnbmF0dXJl"
    echoed = f"x{secret}y"
    Token(secret)
    message = str(InputError("bad value", source=f"http://h/{secret}", field="cpu.usage", value=echoed))
    assert secret not in message and message == "http://h/***: cpu.usage: bad value (got 'x***y')"
    assert redact(f"a {secret} b {secret}") == "a *** b ***"


def test_a_long_value_is_cut_and_its_length_named() -> None:
    # the fuzz of scenario fields: a 100 kB string given for a number was echoed whole, a 100 kB line
    error = InputError("expected a number", source="s.yaml", field="brokers", value="x" * 100_000)
    shown = repr("x" * 100_000)[:MAX_SHOWN_VALUE]
    assert str(error) == f"s.yaml: brokers: expected a number (got {shown}… (100002 characters))"
    short = InputError("expected a number", source="s.yaml", field="brokers", value="abc")
    assert str(short) == "s.yaml: brokers: expected a number (got 'abc')"


def test_a_secret_across_the_cut_is_redacted_before_the_cut() -> None:
    secret = "eyJhbGciOiJIUzI1NiJ9.cut-across.c2lnbmF0dXJl"
    Token(secret)
    value = "y" * (MAX_SHOWN_VALUE - 10) + secret
    message = str(InputError("bad value", source="f", value=value))
    assert secret[:9] not in message and "***" in message
