"""shedlab.jsonout: every document shedlab writes is strict JSON, whatever numbers it holds."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shedlab.jsonout import dumps, json_ready


def _strict(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_are_null_and_numpy_scalars_python() -> None:
    doc = {
        "nan": math.nan,
        "inf": [math.inf, -math.inf],
        "np": (np.float64("nan"), np.float64(1.5), np.int64(3), np.bool_(True)),
        "set": frozenset({"b", "a"}),
        "plain": [1, "x", None, False],
    }
    ready = json_ready(doc)
    assert ready == {
        "nan": None,
        "inf": [None, None],
        "np": [None, 1.5, 3, True],
        "set": ["a", "b"],
        "plain": [1, "x", None, False],
    }
    assert isinstance(ready, dict)
    assert [type(v) for v in ready["np"]] == [type(None), float, int, bool]
    assert _strict(dumps(doc)) == ready


def test_layout_is_the_json_modules() -> None:
    """Callers switched to ``dumps`` keep their bytes: summary.json is pinned by the reference outputs."""
    doc = {"b": [1, 2.5], "a": {"x": "y"}}
    assert dumps(doc) == json.dumps(doc)
    assert dumps(doc, indent=2) == json.dumps(doc, indent=2)
    assert dumps(doc, sort_keys=True, compact=True) == json.dumps(doc, sort_keys=True, separators=(",", ":"))


def test_unknown_objects_need_a_default() -> None:
    with pytest.raises(TypeError):
        dumps({"x": object()})
    assert dumps({"x": complex(1, 2)}, default=str) == '{"x": "(1+2j)"}'


_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=20,
)


@given(_VALUES)
def test_any_document_is_strict_json_and_keeps_its_finite_values(doc: object) -> None:
    assert _strict(dumps(doc)) == json_ready(doc)
    if "NaN" not in json.dumps(doc) and "Infinity" not in json.dumps(doc):
        assert json_ready(doc) == doc  # a document that is JSON already is left as it is
