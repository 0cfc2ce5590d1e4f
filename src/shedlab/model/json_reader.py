"""Validated access to parsed JSON, with the path of every value for error messages.

Files are read and parsed by :mod:`shedlab.errors`' one reader of a user's files (encodings, binary data,
duplicate keys, integers a Java long cannot hold). Pulsar itself ignores unknown fields and fills missing
ones with defaults. shedlab does the same for fields that Pulsar treats as optional, but refuses values that
cannot be right (negative or NaN rates, wrong types) and names the file and the JSON path of the offending
value.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from shedlab.errors import InputError, parse_json_text, read_user_text
from shedlab.model.formats import Default, Field, FieldError, read_fields

__all__ = ["JsonReader", "json_kind", "load_json_file"]

_MISSING: Any = object()
# ZooKeeper's rule for node names, where Pulsar's broker and bundle names live: no NUL, no control
# characters (\u0001-\u001F, \u007F-\u009F). A file naming one otherwise would print escapes to a terminal.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f]")


def json_kind(value: Any) -> str:
    """JSON's name for a parsed value's kind (``null``, ``an array``; not Python's ``NoneType``, ``list``):
    what a user wrote, in the words of the format they wrote it in."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"


def load_json_file(path: str | Path, *, gunzip: bool = False) -> Any:
    """Parse a user's JSON file (:func:`read_user_text`, :func:`parse_json_text`; ``gunzip``: a ``*.gz``
    one decompressed)."""
    return parse_json_text(read_user_text(path, gunzip=gunzip), str(path))


class JsonReader:
    """A JSON object plus where it came from (file and path), with typed, checked getters."""

    def __init__(self, obj: Any, source: str | None, path: str = "") -> None:
        if not isinstance(obj, Mapping):
            raise InputError(
                f"expected a JSON object, found {json_kind(obj)}",
                source=source,
                field=path or "(top level)",
            )
        self.obj: Mapping[str, Any] = obj
        self.source = source
        self.path = path

    def field_path(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: str) -> bool:
        return key in self.obj and self.obj[key] is not None

    def _raw(self, key: str, default: Any) -> Any:
        if key in self.obj and self.obj[key] is not None:
            return self.obj[key]
        if default is _MISSING:
            raise InputError("required field is missing", source=self.source, field=self.field_path(key))
        return default

    def fields(
        self, specs: tuple[Field, ...], defaults: Mapping[str, Default] | None = None
    ) -> dict[str, Any]:
        """The values of ``specs`` (:mod:`shedlab.model.formats`), by JSON name, checked as every reader
        of Pulsar's formats checks them. ``Any``: each field has its own type, given by its spec."""
        try:
            return read_fields(self.obj, specs, defaults)
        except FieldError as exc:
            raise InputError(
                exc.message, source=self.source, field=self.field_path(exc.field), value=exc.value
            ) from None

    def check(self, rule: Callable[[Mapping[str, Any]], None]) -> None:
        """Apply a rule of :mod:`shedlab.model.formats` to the whole object, naming the field it refuses."""
        try:
            rule(self.obj)
        except FieldError as exc:
            raise InputError(
                exc.message, source=self.source, field=self.field_path(exc.field), value=exc.value
            ) from None

    def number(self, key: str, default: Any = _MISSING, *, non_negative: bool = True) -> float:
        """A finite float; negative values are refused where Pulsar can never produce them."""
        value = self._raw(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError("expected a number", source=self.source, field=self.field_path(key), value=value)
        result = float(value)
        if math.isnan(result) or math.isinf(result):
            raise InputError(
                "expected a finite number", source=self.source, field=self.field_path(key), value=value
            )
        if non_negative and result < 0:
            raise InputError(
                "must not be negative", source=self.source, field=self.field_path(key), value=value
            )
        return result

    def integer(self, key: str, default: Any = _MISSING, *, non_negative: bool = True) -> int:
        value = self._raw(key, default)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(
                "expected an integer", source=self.source, field=self.field_path(key), value=value
            )
        if non_negative and value < 0:
            raise InputError(
                "must not be negative", source=self.source, field=self.field_path(key), value=value
            )
        return value

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        value = self._raw(key, default)
        if not isinstance(value, bool):
            raise InputError(
                "expected true or false", source=self.source, field=self.field_path(key), value=value
            )
        return value

    def string(self, key: str, default: Any = _MISSING) -> str | None:
        value = self._raw(key, default)
        if value is not None and not isinstance(value, str):
            raise InputError("expected a string", source=self.source, field=self.field_path(key), value=value)
        return value  # type: ignore[no-any-return]

    def child(self, key: str, default: Any = _MISSING) -> JsonReader | None:
        value = self._raw(key, default)
        if value is None:
            return None
        return JsonReader(value, self.source, self.field_path(key))

    def string_list(self, key: str, default: Any = _MISSING) -> list[str]:
        value = self._raw(key, default)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InputError(
                "expected a list of strings",
                source=self.source,
                field=self.field_path(key),
                value=value,
            )
        return list(value)

    def items(self, key: str, default: Any = _MISSING) -> Iterator[tuple[str, JsonReader]]:
        """The entries of a JSON object whose values are themselves objects."""
        sub = self.child(key, default)
        if sub is None:
            return
        for name, value in sub.obj.items():
            if not name or _UNPRINTABLE.search(name):
                raise InputError(
                    "not a name Pulsar can have (ZooKeeper refuses empty node names and control characters)",
                    source=self.source,
                    field=sub.path or key,
                    value=name,
                )
            yield name, JsonReader(value, self.source, sub.field_path(name))

    def raw_mapping(self, key: str, default: Any = _MISSING) -> Mapping[str, Any]:
        sub = self.child(key, default)
        return {} if sub is None else sub.obj
