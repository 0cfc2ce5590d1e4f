"""The report's Recommendation section, from a tune directory's files (no Spark)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shedlab.errors import InputError
from shedlab.report.builder import Page
from shedlab.report.recommendation import recommendation_section


def _doc(keep: bool) -> dict[str, object]:
    row = {"label": "AvgShedder: maxUnloadPercentage=0.5", "seeds": 5, "pareto": True, "objective": 10.0,
           "imbalance": 8.0, "imbalance_low": 0.0, "imbalance_high": 16.0, "unloads_per_day": 10.0,
           "unloads_per_day_low": 4.0, "unloads_per_day_high": 16.0}  # fmt: skip
    recorded = {**row, "label": "ThresholdShedder+LeastLongTermMessageRate (recorded configuration)",
                "objective": 20.0, "imbalance": 18.0, "pareto": False}  # fmt: skip
    return {
        "objective": "balanced",
        "objective_expr": "imbalance + 0.2 * unloads_per_day",
        "seeds": 5,
        "runs_spent": 40,
        "full_grid_runs": 100,
        "recommended": recorded if keep else row,
        "recorded": recorded,
        "keep_recorded": keep,
        "improvement": {"objective": {"mean": -10.0, "low": -12.0, "high": -8.0}},
        "notes": [],
        "fragment": "# why: test\nmaxUnloadPercentage=0.5\n",
        "candidates": [row, recorded],
    }


def test_section_shows_current_vs_recommended_the_front_and_the_fragment(tmp_path: Path) -> None:
    (tmp_path / "tune.json").write_text(json.dumps(_doc(keep=False)))
    (tmp_path / "fit-report.json").write_text(
        json.dumps(
            {
                "checks": [
                    {
                        "figure": "score spread, mean",
                        "recorded": 15,
                        "twin": 30,
                        "distance": 15,
                        "tolerance": 5,
                        "ok": False,
                    }
                ]
            }
        )
    )
    page = Page(max_points=2000)
    html = recommendation_section(page, tmp_path)
    assert "Recommendation" in html and "maxUnloadPercentage=0.5" in html
    assert "recorded configuration" in html
    assert "40 simulated runs by successive halving instead of" in html
    assert page.figures  # the Pareto plot
    assert "does not fit" in html  # the twin's fit warning is carried into the section
    assert "0b2106a8e5" not in html


def test_keep_recorded_and_no_section_without_tune_json(tmp_path: Path) -> None:
    assert recommendation_section(Page(max_points=2000), tmp_path) == ""
    (tmp_path / "tune.json").write_text(json.dumps(_doc(keep=True)))
    assert "keep it" in recommendation_section(Page(max_points=2000), tmp_path)


def test_fit_table_shows_no_recorded_value_for_the_usage_distribution(tmp_path: Path) -> None:
    """The broker usage distribution is a distance between the recording's and the twin's quantiles: there
    is no recorded figure (fit-report.md and the terminal show '—'); the report showed 'recorded 0'."""
    (tmp_path / "tune.json").write_text(json.dumps(_doc(keep=False)))
    check = {"figure": "broker usage distribution", "recorded": 0.0, "twin": 4.1, "distance": 4.1,
             "tolerance": 8.0, "ok": True}  # fmt: skip
    (tmp_path / "fit-report.json").write_text(json.dumps({"checks": [check]}))
    html = recommendation_section(Page(max_points=2000), tmp_path)
    assert "<tr><td>broker usage distribution</td><td>—</td><td>4.1</td>" in html


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.update(notes=5), "notes"),
        (lambda d: d.update(candidates={"a": 1}), "candidates"),
        (lambda d: d["candidates"].append("x"), "candidates[2]"),
        (lambda d: d["candidates"][0].update(imbalance="8"), "candidates[0].imbalance"),
        (lambda d: d["candidates"][0].pop("unloads_per_day"), "candidates[0].unloads_per_day"),
        (lambda d: d["candidates"][1].update(seeds=2.5), "candidates[1].seeds"),
        (lambda d: d["candidates"][1].pop("label"), "candidates[1].label"),
        (lambda d: d.update(recommended=[1]), "recommended"),
        (lambda d: d["recorded"].update(imbalance_high=True), "recorded.imbalance_high"),
        (lambda d: d.update(improvement={"objective": {"mean": "-10"}}), "improvement.objective.mean"),
        (lambda d: d.update(improvement=[1]), "improvement"),
        (lambda d: d.update(fragment=["x"]), "fragment"),
    ],
)
def test_a_tune_json_of_other_types_is_refused_naming_the_field(
    tmp_path: Path, edit: Callable[[dict[str, Any]], object], field: str
) -> None:
    """A tune.json edited by hand or written by something else: one error naming the file and the field
    (each of these was a TypeError or KeyError traceback from the section's formatting)."""
    doc: dict[str, Any] = json.loads(json.dumps(_doc(keep=False)))
    edit(doc)
    (tmp_path / "tune.json").write_text(json.dumps(doc))
    with pytest.raises(InputError) as info:
        recommendation_section(Page(max_points=2000), tmp_path)
    assert info.value.source == str(tmp_path / "tune.json")
    assert field in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        ("tune.json", "{not json", "malformed JSON"),
        ("tune.json", "[1, 2]", "expected a JSON object"),
        ("fit-report.json", '{"checks": 5}', "checks"),
        ("fit-report.json", '{"checks": [{"twin": "a"}]}', "checks[0].twin"),
        ("fit-report.json", '{"checks": [{"twin": 1.0}]}', "checks[0].figure"),
    ],
)
def test_a_malformed_tune_or_fit_report_is_refused(tmp_path: Path, name: str, text: str, words: str) -> None:
    """Before, malformed JSON made the section vanish without a word, and a list where a number goes was a
    traceback."""
    (tmp_path / "tune.json").write_text(json.dumps(_doc(keep=False)))
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=re.escape(words)) as info:
        recommendation_section(Page(max_points=2000), tmp_path)
    assert info.value.source == str(tmp_path / name)


def test_optional_fields_of_a_candidate_row_may_be_absent(tmp_path: Path) -> None:
    """What the check lets through, the section draws: a candidate without ``seeds`` (one seed) and a
    recorded row without ``unloads_per_day`` (no marker for it) were KeyErrors in the Pareto plot."""
    doc: dict[str, Any] = json.loads(json.dumps(_doc(keep=False)))
    del doc["candidates"][0]["seeds"]
    del doc["recorded"]["unloads_per_day"]
    (tmp_path / "tune.json").write_text(json.dumps(doc))
    page = Page(max_points=2000)
    html = recommendation_section(page, tmp_path)
    assert "Recommendation" in html and page.figures
