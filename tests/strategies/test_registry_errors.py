"""The one-line errors of a bad strategy pair name (docs/mutation-testing.md survivors): each names the
file and field, the problem and the value given, and a hint where one helps; and the spellings accepted."""

from __future__ import annotations

import pytest

from shedlab.errors import ConfigError
from shedlab.strategies.registry import resolve_pair


def error_of(name: object, **where: str) -> str:
    with pytest.raises(ConfigError) as info:
        resolve_pair(name, **where)
    return str(info.value)


@pytest.mark.parametrize(
    ("name", "line"),
    [
        ("", "s.yaml: pair: expected a strategy pair name (got '')"),
        (5, "s.yaml: pair: expected a strategy pair name (got 5)"),
        (
            "AvgShedder+LeastLongTermMessageRate",
            "s.yaml: pair: shedding is AvgShedder but placement is LeastLongTermMessageRate; "
            "AvgShedder must be "
            "configured for both (got 'AvgShedder+LeastLongTermMessageRate')",
        ),
        (
            "ThresholdShedder",
            "s.yaml: pair: ThresholdShedder is only a shedding strategy; a pair names both roles "
            "(got 'ThresholdShedder'); e.g. ThresholdShedder+LeastLongTermMessageRate",
        ),
    ],
)
def test_whole_error_lines(name: object, line: str) -> None:
    assert error_of(name, source="s.yaml", field="pair") == line


def test_the_default_field_is_strategy() -> None:
    assert error_of("   ") == "strategy: expected a strategy pair name (got '   ')"


@pytest.mark.parametrize(
    ("name", "start"),
    [
        (
            "Nope+LeastLongTermMessageRate",
            "s.yaml: pair: unknown shedding strategy (got 'Nope+LeastLongTermMessageRate'); "
            "known shedding strategies: ThresholdShedder,",
        ),
        (
            "ThresholdShedder+Nope",
            "s.yaml: pair: unknown placement strategy (got 'ThresholdShedder+Nope'); "
            "known placement strategies: AvgShedder,",
        ),
        # the first '+' splits the pair: the rest is one (unknown) placement name
        (
            "ThresholdShedder+LeastLongTermMessageRate+X",
            "s.yaml: pair: unknown placement strategy (got 'ThresholdShedder+LeastLongTermMessageRate+X'); "
            "did you mean 'LeastLongTermMessageRate'?",
        ),
        # each side is checked for its role
        (
            "LeastLongTermMessageRate+LeastLongTermMessageRate",
            "s.yaml: pair: LeastLongTermMessageRate is a placement strategy, not a shedding one",
        ),
        (
            "ThresholdShedder+ThresholdShedder",
            "s.yaml: pair: ThresholdShedder is a shedding strategy, not a placement one",
        ),
        ("Treshold", "s.yaml: pair: unknown strategy pair (got 'Treshold'); known pairs: ThresholdShedder+"),
    ],
)
def test_error_lines_with_their_hints(name: str, start: str) -> None:
    assert error_of(name, source="s.yaml", field="pair").startswith(start)


def test_pip_364_pair_names_in_any_case_and_spacing() -> None:
    shed, place = resolve_pair(" threshold shedder + least long term message rate ")
    assert (shed.name, place.name) == ("ThresholdShedder", "LeastLongTermMessageRate")
