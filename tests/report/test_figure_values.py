"""The report's plotted values read back from the figures and compared with hand-computed numbers.

No browser and no Spark: the figures are plotly objects whose trace data we can read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest
from plotly.basedatatypes import BaseTraceType

from shedlab.report.figures import broker_load_figure, imbalance_figure, time_axis
from shedlab.report.model import RunSeries


def run(
    strategy: str, *, unloads: list[int] | None = None, decisions: list[float] | None = None
) -> RunSeries:
    times = [0.0, 60.0, 120.0, 180.0]
    cluster = pd.DataFrame({"time_s": times, "imbalance": [40.0, 30.123, 20.0, 10.0]})
    if unloads is not None:
        cluster["unloads"] = unloads
    brokers = pd.DataFrame(
        {
            "time_s": times * 2,
            "broker": ["b1"] * 4 + ["b2"] * 4,
            "score": [80.0, 70.0, 60.0, 50.0, 10.0, 20.0, 30.0, 40.0],
        }
    )
    dec_times = decisions if decisions is not None else [60.0]
    decisions_frame = pd.DataFrame(
        {
            "time_s": dec_times,
            "source": ["b1"] * len(dec_times),
            "destination": ["b2"] * len(dec_times),
            "bundle": [f"t/ns/{k}" for k in range(len(dec_times))],
        }
    )
    events = pd.DataFrame({"time_s": [120.0], "kind": ["add_brokers"], "detail": ["1"]})
    return RunSeries("s", strategy, brokers, cluster, decisions_frame, events)


def traces(fig: go.Figure, name_part: str) -> list[BaseTraceType]:
    return [t for t in fig.data if name_part in (t.name or "")]


class TestImbalanceFigure:
    def test_imbalance_line_values_in_minutes(self) -> None:
        fig = imbalance_figure([run("ThresholdShedder+LeastLongTermMessageRate", unloads=[0, 2, 0, 3])])
        (line,) = [t for t in fig.data if t.name == "ThresholdShedder+LeastLongTermMessageRate"]
        assert np.asarray(line.x).tolist() == [0.0, 1.0, 2.0, 3.0]  # seconds / 60
        assert np.asarray(line.y).tolist() == pytest.approx([40.0, 30.12, 20.0, 10.0], abs=1e-5)

    def test_cumulative_unloads_are_cumulative(self) -> None:
        # per-tick unloads 0, 2, 0, 3 → running total 0, 2, 2, 5; the step line ("hv") keeps only its
        # change points: (0, 0), (1, 2), (3, 5).
        fig = imbalance_figure([run("ThresholdShedder+LeastLongTermMessageRate", unloads=[0, 2, 0, 3])])
        (cum,) = traces(fig, "cumulative unloads")
        assert np.asarray(cum.y).tolist() == [0.0, 2.0, 5.0]
        assert np.asarray(cum.x).tolist() == [0.0, 1.0, 3.0]
        assert cum.line.shape == "hv"

    def test_cumulative_unloads_from_decisions_when_ticks_do_not_count_them(self) -> None:
        # decisions at 60, 60 and 150 s → by tick time 0, 60, 120, 180: 0, 2, 2, 3.
        fig = imbalance_figure([run("AvgShedder", decisions=[60.0, 150.0, 60.0])])
        (cum,) = traces(fig, "cumulative unloads")
        assert np.asarray(cum.y).tolist() == [0.0, 2.0, 3.0]
        assert np.asarray(cum.x).tolist() == [0.0, 1.0, 3.0]


class TestBrokerLoadFigure:
    def test_per_broker_scores_and_unload_markers(self) -> None:
        fig = broker_load_figure([run("AvgShedder", decisions=[90.0])])
        lines = {t.name: t for t in fig.data if t.mode == "lines"}
        assert sorted(lines) == ["b1", "b2"]
        assert np.asarray(lines["b1"].y).tolist() == [80.0, 70.0, 60.0, 50.0]
        assert np.asarray(lines["b2"].y).tolist() == [10.0, 20.0, 30.0, 40.0]
        assert np.asarray(lines["b1"].x).tolist() == [0.0, 1.0, 2.0, 3.0]
        (marker,) = [t for t in fig.data if t.mode == "markers" and t.name.startswith("unload")]
        # at 90 s = 1.5 min the source b1's last sample at or before is the 60 s one: 70.
        assert np.asarray(marker.x).tolist() == [1.5]
        assert np.asarray(marker.y).tolist() == [70.0]
        assert marker.customdata[0].tolist() == ["b1", "b2", "t/ns/0"]
        (event,) = [t for t in fig.data if t.name == "scenario event"]
        assert np.asarray(event.x).tolist() == [2.0]


@pytest.mark.parametrize(
    ("seconds", "expected"), [(6 * 3600.0, (60.0, "minutes")), (6 * 3600.0 + 1, (3600.0, "hours"))]
)
def test_time_axis_switches_to_hours_above_six_hours(seconds: float, expected: tuple[float, str]) -> None:
    assert time_axis(seconds) == expected
