"""The fit report over a recording with a gap (no Spark): the twin runs through a time no broker
reported, but its figures are taken only at the times the recording covers, per day of that time.

The recording: samples every minute for 30 minutes, nothing for 3 hours (the collector was down),
30 more minutes (span 4 h, 1 h recorded). The twin's tables hold different values inside the gap, so a
figure that reads them shows it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from shedlab.core.twin import (
    QUANTILES,
    RecordingGaps,
    TwinFit,
    compare,
    fit_report_markdown,
    recorded_figures,
    recording_gaps,
    twin_figures,
)

MIN = 60_000
TICKS_MS = np.array([*range(0, 31 * MIN, MIN), *range(210 * MIN, 241 * MIN, MIN)], dtype=np.int64)
SPAN_S = 240 * 60.0
GAP = (30 * 60.0, 210 * 60.0)


def _twin_run(run_id: str) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """One twin run of 241 one-minute ticks: calm at recorded times (spread 10, scores 20 and 30, one
    unload every 10 minutes), wild in the gap (spread 90, scores 80, 5 unloads a tick) and 3 unloads at
    the first sample after it (which the recording cannot tell from a move across the gap)."""
    time_s = np.arange(241) * 60.0
    in_gap = (time_s > GAP[0]) & (time_s < GAP[1])
    unloads = np.where(in_gap, 5, np.where(time_s % 600 == 0, 1, 0))
    unloads[time_s == GAP[1]] = 3
    ticks = pd.DataFrame(
        {
            "run_id": run_id,
            "time_s": time_s,
            "score_spread": np.where(in_gap, 90.0, 10.0),
            "unloads": unloads,
            "throughput_moved": unloads * 10.0,
            "throughput_total": 1000.0,
        }
    )
    brokers = pd.DataFrame(
        {
            "run_id": run_id,
            "time_s": np.repeat(time_s, 2),
            "broker": np.tile(["broker-0001:8080", "broker-0002:8080"], time_s.size),
            "score": np.where(np.repeat(in_gap, 2), 80.0, np.tile([20.0, 30.0], time_s.size)),
        }
    )
    summary = {
        "run_id": run_id,
        "duration_s": SPAN_S,
        "score_spread_mean": float(ticks["score_spread"].mean()),
        "unloads": int(unloads.sum()),
    }
    return summary, brokers, ticks


def _runs() -> tuple[list[dict[str, Any]], pd.DataFrame, pd.DataFrame]:
    parts = [_twin_run(r) for r in ("s1", "s2")]
    return (
        [p[0] for p in parts],
        pd.concat([p[1] for p in parts], ignore_index=True),
        pd.concat([p[2] for p in parts], ignore_index=True),
    )


def test_the_gaps_of_a_recording_on_the_twins_time_axis() -> None:
    gaps = recording_gaps(TICKS_MS, 60.0, 60.0)
    assert gaps == RecordingGaps((GAP,), 60.0)
    assert gaps.observed_s(SPAN_S) == 3600.0
    assert not recording_gaps(np.arange(0, 31 * MIN, MIN, dtype=np.int64), 60.0, 60.0)
    t = np.array([GAP[0], GAP[0] + 60, GAP[1] - 60, GAP[1], GAP[1] + 60])
    assert gaps.at_recorded_times(t).tolist() == [True, False, False, True, True]
    assert gaps.moves_seen(t).tolist() == [True, False, False, False, True]
    # sample times jitter: a twin tick within half a tick of a sample is at that sample
    assert gaps.at_recorded_times(np.array([GAP[0] + 29, GAP[1] - 29])).tolist() == [True, True]


def test_twin_figures_leave_out_the_ticks_in_the_recordings_gap() -> None:
    summaries, brokers, ticks = _runs()
    gaps = RecordingGaps((GAP,), 60.0)
    for fig in twin_figures(summaries, brokers, ticks, gaps):
        assert fig["score spread, mean"] == 10.0
        # one unload every 10 minutes over the ticks whose unloads the recording sees (minutes 0-30 and
        # 211-240): 4 + 3 = 7 in one recorded hour; the gap's 5 a tick and the 3 at its end do not count
        assert fig["unloads per day"] == pytest.approx(7 * 24)
        assert fig["moves per day"] == fig["unloads per day"]
        assert fig["traffic moved per day"] == pytest.approx(7 * 0.01 * 24)
        assert fig["broker quantiles"] == {
            "broker-0001:8080": [20.0] * len(QUANTILES),
            "broker-0002:8080": [30.0] * len(QUANTILES),
        }


def test_the_recording_and_its_twin_compare_over_the_same_times() -> None:
    """A recording that matches the twin at the recorded times fits it, on every figure; with the whole
    runs (the gap's ticks counted) the spread and the usage distribution were far off."""
    gaps = RecordingGaps((GAP,), 60.0)
    spread = pd.DataFrame({"spread": [10.0] * TICKS_MS.size})
    quantiles = pd.DataFrame(
        {"broker": ["a:8080", "b:8080"], **{f"q{int(q * 100)}": [20.0, 30.0] for q in QUANTILES}}
    )
    moves = pd.DataFrame({"throughput": [10.0] * 7, "total_throughput": [1000.0] * 7})
    recorded = recorded_figures(spread, quantiles, moves, SPAN_S, gaps)
    assert recorded["unloads per day"] == pytest.approx(7 * 24)  # per recorded day, not per span
    summaries, brokers, ticks = _runs()
    numbers = {"a:8080": 1, "b:8080": 2}
    checks = compare(recorded, twin_figures(summaries, brokers, ticks, gaps), numbers)
    assert all(c.ok for c in checks), [c.to_dict() for c in checks if not c.ok]
    assert all(c.distance == pytest.approx(0.0) for c in checks)
    whole = compare(recorded_figures(spread, quantiles, moves, SPAN_S), twin_figures(*_runs()), numbers)
    assert {c.figure for c in whole if not c.ok} >= {"score spread, mean", "broker usage distribution"}
    markdown = fit_report_markdown(checks, title="t", seeds=2, gaps=gaps)
    assert "1 gap(s) (no broker reported: +30m..+210m)" in markdown


def test_without_gaps_the_figures_are_the_whole_runs_as_before() -> None:
    """No gaps (a recording without any, or a TwinFit made before gaps were carried): the whole runs,
    whose spread and unloads are the summary's (no warm-up), every broker row, per day of the span."""
    summaries, brokers, ticks = _runs()
    old = TwinFit({}, "", {}, {})
    assert not old.gaps
    for gaps in (None, old.gaps):
        figs = twin_figures(summaries, brokers, ticks, gaps)
        assert figs[0]["score spread, mean"] == summaries[0]["score_spread_mean"]
        assert figs[0]["unloads per day"] == summaries[0]["unloads"] / (SPAN_S / 86400.0)
        assert figs[0]["broker quantiles"]["broker-0001:8080"][-1] == 80.0
    spread = pd.DataFrame({"spread": [10.0]})
    quantiles = pd.DataFrame({"broker": ["a:8080"], **{f"q{int(q * 100)}": [20.0] for q in QUANTILES}})
    moves = pd.DataFrame({"throughput": [10.0], "total_throughput": [1000.0]})
    assert recorded_figures(spread, quantiles, moves, SPAN_S, old.gaps) == recorded_figures(
        spread, quantiles, moves, SPAN_S
    )
    checks = compare(recorded_figures(spread, quantiles, moves, SPAN_S), figs, {"a:8080": 1})
    assert fit_report_markdown(checks, title="t", seeds=2, gaps=old.gaps) == fit_report_markdown(
        checks, title="t", seeds=2
    )


def test_a_twins_warm_up_counts_like_the_recordings_time_it_covers() -> None:
    """A twin edited to have a ``metrics.warmup``: its summary leaves the first minutes out, but the
    recording covers them, so the figures still come from every tick (with or without gaps), and a
    summary whose spread is None (no finite tick) is not read at all."""
    summaries, brokers, ticks = _runs()
    warm = [{**s, "score_spread_mean": None, "unloads": 0, "warmup_s": 1800.0} for s in summaries]
    for gaps in (None, RecordingGaps((GAP,), 60.0)):
        assert twin_figures(warm, brokers, ticks, gaps) == twin_figures(summaries, brokers, ticks, gaps)
    fig = twin_figures(warm, brokers, ticks)[0]
    assert fig["unloads per day"] == float(ticks[ticks["run_id"] == "s1"]["unloads"].sum()) / (
        SPAN_S / 86400.0
    )
