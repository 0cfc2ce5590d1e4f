"""The outcome of one simulation run: per-tick metrics, per-broker rows, decisions, events and a summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from shedlab import jsonout
from shedlab.config import LoadBalancerConfig
from shedlab.core.local_parquet import write_local_parquet
from shedlab.core.locations import names_a_scheme
from shedlab.core.sim.metrics import (
    NOT_DISTURBANCES,
    SKIP_COLUMNS,
    Collector,
    RunCounts,
    event_time_to_balance,
    summarize,
)
from shedlab.core.sim.recording import Recording
from shedlab.core.sim.scenario import Scenario
from shedlab.errors import InputError

__all__ = ["SimulationResult", "check_local_out"]


def check_local_out(out_dir: str | Path, *, field: str = "--out") -> None:
    """Refuse a URI where a run's files go: :meth:`SimulationResult.write` writes with the local filesystem
    (``sweep`` writes to remote locations). Checked before a run too, so that nothing runs for nothing."""
    if names_a_scheme(str(out_dir)):
        message = "a local directory is expected, not a URI (sweep writes to remote locations)"
        raise InputError(message, field=field, value=str(out_dir))


@dataclass
class SimulationResult:
    """Everything a run produced. DataFrames are documented column by column in ``docs/metrics.md``.

    * ``ticks``: one row per tick (cluster metrics);
    * ``brokers``: one row per tick × alive broker (usage, score, traffic, bundles);
    * ``decisions``: one row per unload (``reason`` is a JSON string);
    * ``events``: the start and every scenario event, with the time to balance after it;
    * ``skips``: decisions not taken (strategies' skips, random placement fallbacks), counted per tick,
      kind and broker;
    * ``summary``: flat, JSON-serialisable run metrics;
    * ``config``: the Pulsar keys that differ from Pulsar's defaults in this run;
    * ``reports``: the recorded load reports (only with ``record=True``), for
      :mod:`shedlab.core.sim.recording`.
    """

    scenario_name: str
    strategy: str
    seed: int
    config: dict[str, Any]
    ticks: pd.DataFrame
    brokers: pd.DataFrame
    decisions: pd.DataFrame
    events: pd.DataFrame
    summary: dict[str, Any]
    reports: Recording | None = field(default=None, repr=False)
    skips: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(SKIP_COLUMNS)))

    @classmethod
    def from_run(
        cls,
        *,
        scenario: Scenario,
        strategy: str,
        seed: int,
        conf: LoadBalancerConfig,
        collector: Collector,
        broker_ids: list[str],
        counts: RunCounts,
        recording: Recording | None,
        skips: pd.DataFrame | None = None,
    ) -> SimulationResult:
        """The tables and summary of a finished run, from what the kernel collected."""
        ticks, brokers, decisions, events = collector.frames(broker_ids)
        rows = collector.event_rows
        end = float(ticks["time_s"].iloc[-1]) if len(ticks) else 0.0
        event_time_to_balance(
            rows, ticks, scenario.metrics.balance_threshold, scenario.metrics.balance_hold, end
        )
        events = pd.DataFrame(rows, columns=["time_s", "kind", "detail", "time_to_balance_s"])
        events["time_to_balance_s"] = events["time_to_balance_s"].astype(float)
        disturbances = events[~events["kind"].isin(NOT_DISTURBANCES)]
        warmup = float(scenario.metrics.warmup)
        measured_ticks, measured_brokers, measured_decisions = ticks, brokers, decisions
        if warmup > 0:  # the summary leaves the warm-up out; the tables keep every row
            measured_ticks = ticks[ticks["time_s"] >= warmup].reset_index(drop=True)
            measured_brokers = brokers[brokers["time_s"] >= warmup].reset_index(drop=True)
            # by tick, as the counters (simulation.resolution: a tick's decisions at its earlier steps)
            first_tick = int(measured_ticks["tick"].iloc[0]) if len(measured_ticks) else len(ticks)
            measured_decisions = decisions[decisions["tick"] >= first_tick].reset_index(drop=True)
            disturbances = disturbances[disturbances["time_s"] >= warmup]
        extra: dict[str, Any] = {
            "scenario": scenario.name,
            "strategy": strategy,
            "seed": seed,
            "duration_s": float(scenario.duration),
            "tick_s": float(scenario.simulation.tick),
            "brokers_initial": counts.brokers_initial,
            "brokers_final": counts.brokers_final,
            "bundles": counts.bundles,
            "lookups": counts.lookups,
            "unload_bundle_total": counts.unload_bundle_total,
            "unload_broker_total": counts.unload_broker_total,
            "moved_again_within_grace": counts.moved_again_within_grace,
            "moved_again_within_window": counts.moved_again_within_window,
            "repeat_move_window_s": counts.repeat_move_window_s,
        }
        if warmup > 0:
            extra["warmup_s"] = warmup
        if scenario.simulation.resolution is not None:  # like warmup_s: present only when asked for
            extra["resolution_s"] = float(scenario.simulation.resolution)
        summary = summarize(
            measured_ticks,
            measured_brokers,
            measured_decisions,
            disturbances,
            tick_s=float(scenario.simulation.tick),
            overload=float(conf.load_balancer_broker_overloaded_threshold_percentage),
            extra=extra,
        )
        return cls(
            scenario_name=scenario.name,
            strategy=strategy,
            seed=seed,
            config=conf.non_default_values(),
            ticks=ticks,
            brokers=brokers,
            decisions=decisions,
            events=events,
            summary=summary,
            reports=recording,
            skips=skips if skips is not None else pd.DataFrame(columns=list(SKIP_COLUMNS)),
        )

    def document(self) -> dict[str, Any]:
        """The run summary with its ``config``: ``summary.json``, and what ``simulate --json`` and
        ``compare --json`` print."""
        return {**self.summary, "config": self.config}

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write ticks/brokers/decisions/events/skips Parquet files and summary.json into the local
        directory ``out_dir``; returns the paths. A URI is refused: this writes with the local filesystem
        (``sweep`` writes to remote locations), where ``s3://b/run`` would become a folder ``s3:`` (a
        :class:`~pathlib.Path` has made it ``s3:/b/run`` already)."""
        check_local_out(out_dir)
        out = Path(out_dir)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(f"cannot create output directory: {exc.strerror}", source=str(out)) from None
        paths = []
        for name, frame in (
            ("ticks", self.ticks),
            ("brokers", self.brokers),
            ("decisions", self.decisions),
            ("events", self.events),
            ("skips", self.skips),
        ):
            path = out / f"{name}.parquet"
            write_local_parquet(frame, path)
            paths.append(path)
        summary_path = out / "summary.json"
        summary_path.write_text(jsonout.dumps(self.document(), indent=2) + "\n", encoding="utf-8")
        paths.append(summary_path)
        return paths
