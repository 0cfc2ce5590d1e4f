"""Shipped scenarios with values pushed to their edges: refused in one line, or run to sane numbers.

A scenario a user edits keeps its types and moves its values: zero, one, a million, a hundred times
or a thousandth of what was there, a duration of 0 s, 1 ms or 100 days, a list emptied or doubled, a
key dropped. Each such edit either is refused with a :class:`~shedlab.errors.ShedlabError` (one line,
exit 2 through the CLI) or runs: its first ticks with no other exception, and, on every tick with a broker
up, finite scores and traffic. A hunt of 3,000 such edits found one class that ran on nonsense: values
each finite whose draws or products overflow (a lognormal ``sigma`` of a million; a message rate and a
message size of 10^300), which ran on infinite rates and reported NaN scores. Those are now refused
(``test_sim_scenario.py``: ``test_traffic_that_overflows_is_refused_before_the_first_tick``).

``SHEDLAB_FUZZ_EXAMPLES`` raises the number of examples for a local hunt (``derandomize`` is then off).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shedlab.core.sim.kernel import Simulation
from shedlab.core.sim.scenario import parse_scenario_text
from shedlab.errors import ShedlabError

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted(
    [
        *(ROOT / "src" / "shedlab" / "data" / "scenarios").glob("*.yaml"),
        *(ROOT / "examples" / "published").glob("*.yaml"),
        *(ROOT / "examples" / "capacity-probes").glob("probe-*.yaml"),
    ]
)
DOCUMENTS = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in SHIPPED]
EXAMPLES = int(os.environ.get("SHEDLAB_FUZZ_EXAMPLES", "40"))
HUNT = "SHEDLAB_FUZZ_EXAMPLES" in os.environ
TICKS = 6
DURATION = re.compile(r"^\d+(\.\d+)?(ms|s|m|h|d)$")


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    items = doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    for key, value in items:
        out += [(*prefix, key), *_paths(value, (*prefix, key))]
    return out


@st.composite
def _edge(draw: st.DrawFn, value: Any) -> Any:
    """``value`` moved to an edge of its own type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return draw(st.sampled_from([0, 1, -1, 2, 10**6, value * 100, value // 3]))
    if isinstance(value, float):
        return draw(st.sampled_from([0.0, 1e-9, 1.0, -0.5, 1e6, value * 100, value / 1000, 0.9999]))
    if isinstance(value, str) and DURATION.match(value):
        return draw(st.sampled_from(["0s", "1ms", "1s", "7s", "59s", "61s", "90s", "1d", "100d"]))
    if isinstance(value, list) and value:
        return draw(st.sampled_from([[], value + value, value[:1]]))
    if isinstance(value, dict) and value:
        dropped = draw(st.sampled_from(sorted(value, key=str)))
        return {k: v for k, v in value.items() if k != dropped}
    return value


@st.composite
def _edited(draw: st.DrawFn) -> str:
    doc = json.loads(json.dumps(draw(st.sampled_from(DOCUMENTS))))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = draw(_edge(parent[path[-1]]))
    return yaml.safe_dump(doc, sort_keys=False)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not HUNT,
    suppress_health_check=list(HealthCheck),
    database=None,
)
@given(_edited())
def test_an_edited_shipped_scenario_is_refused_or_runs_to_finite_numbers(text: str) -> None:
    try:
        scenario = parse_scenario_text(text, "edited.yaml")
    except ShedlabError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    try:
        sim = Simulation(scenario)
        for _ in range(TICKS):  # the first ticks, through the driver hook the sandbox uses
            if not sim.step():
                break
        frame = sim.result().ticks
    except ShedlabError as exc:  # refused when the run starts (a configuration, the drawn traffic)
        assert str(exc) and "\n" not in str(exc)
        return
    up = frame[frame["brokers"] > 0]
    for column in ("score_mean", "score_max", "msg_rate_total", "throughput_total"):
        assert np.isfinite(up[column].to_numpy(dtype=float)).all(), column
