"""A digital twin of a recorded cluster: the fitting math behind ``shedlab twin`` (pandas/NumPy only).

``shedlab.spark.twin`` aggregates ingest's output on Spark (per broker, per bundle, per namespace and
tick) into the small tables of :class:`TwinInputs`; this module turns them into an ordinary scenario
file (``docs/twin.md``) and compares runs of that scenario with the recording (:func:`compare`).

What is fitted, from what (every quantity is one the scenario format can express):

* **brokers and hardware classes**: a broker is a ``broker`` id seen in the samples; its class is its
  reported limits (``cpu.limit`` = 100 × cores, NIC limit in Kbit/s, direct memory and heap in MiB).
  The cost coefficients of a class come from a least-squares fit of usage against the broker's own
  traffic, pooled over the class's brokers with one intercept per broker (``cpu/100 = c_b +
  µs_per_msg·1e-6·msgs + ms_per_MiB·1e-3·MiB``, NIC out against bytes in for ``bookkeeper_copies``,
  NIC in against bytes out for ``bookkeeper_read_fraction``, direct memory against MiB/s, heap
  against topics); a small ridge pulls a coefficient the data cannot identify (collinear message rate
  and bytes) towards the simulator's default.
* **background load**: each broker's intercept beyond the class's idle share (the smallest intercept
  of the class: idle and a background shared by every broker of a class cannot be told apart and act
  the same), as a fraction of the machine, with the residuals' standard deviation as its noise.
* **bundles**: one workload per recorded namespace, with each bundle's own mean message rate, message
  size, fanout, topics and clients (``dist: sequence``) and its first owner (``brokers:``);
  a diurnal shape per namespace (least squares of the namespace's total rate on cos/sin of the day),
  jitter as ``noise`` (the standard deviation of the log of a bundle's share of its namespace's
  rate), on/off consumers or producers (ticks with nothing dispatched / produced: period from the
  number of off-phases, on-time from the off fraction).
* **events**: brokers that appear after the first tick (``add_brokers``), disappear for good
  (``remove_brokers``) or for a while (a restart: ``rolling_restart`` of that broker).

What the format cannot express is listed in :data:`LIMITATIONS` and written into the twin's header.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from shedlab.config import LoadBalancerConfig
from shedlab.core.evaluation import t_critical
from shedlab.core.results import TWIN_HEADER
from shedlab.core.sim.hardware import KILO, HardwareClass
from shedlab.core.sim.scenario import last_tick_ms
from shedlab.core.sim.traffic import MAX_NOISE_SIGMA
from shedlab.errors import InputError
from shedlab.model.bundles import bundle_name, even_ranges
from shedlab.units import significant

__all__ = [
    "BROKER_PRODUCTS",
    "BROKER_TERMS",
    "LIMITATIONS",
    "TOLERANCES",
    "FitCheck",
    "RecordingGaps",
    "TwinFit",
    "TwinInputs",
    "compare",
    "fit_report_markdown",
    "fit_twin",
    "recorded_figures",
    "recording_gaps",
    "score_expression",
    "twin_figures",
    "window_error",
]

MIB = 1024.0 * 1024.0

BROKER_TERMS: dict[str, str] = {
    "y_cpu": "cpu_usage / 100.0",
    "x_msg": "(msg_rate_in + msg_rate_out) * 1e-6",
    "x_mib": "(msg_throughput_in + msg_throughput_out) / 1048576.0 * 1e-3",
    "y_nout": f"bandwidth_out_usage - msg_throughput_out * 8.0 / {KILO!r}",
    "x_nout": f"msg_throughput_in * 8.0 / {KILO!r}",
    "y_nin": f"bandwidth_in_usage - msg_throughput_in * 8.0 / {KILO!r}",
    "x_nin": f"msg_throughput_out * 8.0 / {KILO!r}",
    "y_dm": "direct_memory_usage",
    "x_dm": "(msg_throughput_in + msg_throughput_out) / 1048576.0",
    "y_heap": "memory_usage",
    "x_heap": "cast(num_topics as double)",
}
"""Per broker sample: the regression terms (Spark SQL expressions over ``broker_samples`` columns)."""

BROKER_PRODUCTS: tuple[tuple[str, str], ...] = (
    ("x_msg", "x_msg"),
    ("x_mib", "x_mib"),
    ("x_msg", "x_mib"),
    ("x_msg", "y_cpu"),
    ("x_mib", "y_cpu"),
    ("y_cpu", "y_cpu"),
    ("x_nout", "x_nout"),
    ("x_nout", "y_nout"),
    ("y_nout", "y_nout"),
    ("x_nin", "x_nin"),
    ("x_nin", "y_nin"),
    ("y_nin", "y_nin"),
    ("x_dm", "x_dm"),
    ("x_dm", "y_dm"),
    ("y_dm", "y_dm"),
    ("x_heap", "x_heap"),
    ("x_heap", "y_heap"),
    ("y_heap", "y_heap"),
)
"""The sums of products the Spark side computes per broker (columns ``p_<a>_<b>``; sums ``s_<a>``)."""

OFF_FRACTION = 0.02
"""A bundle is *off* at a tick when it dispatches (or produces) less than this share of its mean."""

LIMITATIONS: tuple[str, ...] = (
    "jitter is independent from tick to tick (the simulator's noise): the recorded lag-1 "
    "autocorrelation of each namespace is written as a comment, not reproduced",
    "spikes and one-off traffic changes are not detected: they are part of the noise",
    "a broker's background load is a constant plus noise (no diurnal background)",
    "CPU cost is one cost per message and per MiB for a whole hardware class (no per-connection "
    "cost, no per-broker cost)",
    "bundle ranges are even within a namespace (splits are not simulated); bundles that appear later "
    "start with the others",
    "memory (heap) is not part of the score; it is fitted but only shown",
)


@dataclass(frozen=True)
class TwinInputs:
    """What the Spark aggregations hand to :func:`fit_twin` (all small: per broker, per bundle, per
    namespace × tick)."""

    cluster: str
    ticks_ms: np.ndarray[Any, np.dtype[np.int64]]  # distinct sample times, sorted
    brokers: pd.DataFrame  # broker, n, first_ms, last_ms, *_limit, s_<term>, p_<a>_<b>
    gaps: pd.DataFrame  # broker, from_ms, to_ms: absences between two samples of a broker
    bundles: pd.DataFrame  # bundle, n, first_ms, first_owner, rate_in, rate_out, tp_in, tp_out, ...
    namespace_series: pd.DataFrame  # namespace, tick_ms, rate_in


@dataclass(frozen=True)
class RecordingGaps:
    """The recording's gaps: times no broker reported (the collector was down), which the twin runs
    through. The fit report compares the two sides over the same times, so it needs them to leave the
    twin's ticks in a gap out (the recording has nothing there to compare them with).

    ``spans`` are ``(from_s, to_s)``: the two sample times around a gap, in seconds since the
    recording's first sample (the twin's time 0); ``tick_s`` is the twin's tick. No spans (the default,
    and every twin fitted before gaps were carried): every tick counts, as it always did.

    A tick's *state* (score spread, broker scores) is at a recorded time unless it lies inside a span,
    more than half a tick from either sample (the twin's ticks are a regular grid, sample times
    jitter). A tick's *unloads* are seen by the recording only between two consecutive samples: those
    from a tick past ``from_s`` up to the first sample after the gap are not (the recording drops an
    ownership change across a gap, see :func:`recorded_figures`).
    """

    spans: tuple[tuple[float, float], ...] = ()
    tick_s: float = 0.0

    def __bool__(self) -> bool:
        return bool(self.spans)

    def observed_s(self, duration_s: float) -> float:
        """The time the recording saw moves in: ``duration_s`` less its gaps (``duration_s`` itself
        when it has none)."""
        if not self.spans:
            return duration_s
        return duration_s - sum(to - frm for frm, to in self.spans)

    def _outside(self, time_s: Any, after_to: float) -> np.ndarray[Any, np.dtype[np.bool_]]:
        t = np.asarray(time_s, dtype=np.float64)
        keep = np.ones(t.shape, dtype=bool)
        half = self.tick_s / 2.0
        for frm, to in self.spans:
            keep &= ~((t > frm + half) & (t < to + after_to))
        return keep

    def at_recorded_times(self, time_s: Any) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """Which of the twin's tick times (seconds since its start) have a recorded counterpart."""
        return self._outside(time_s, -self.tick_s / 2.0)

    def moves_seen(self, time_s: Any) -> np.ndarray[Any, np.dtype[np.bool_]]:
        """Which of the twin's ticks would show their unloads in the recording (not in or just after a
        gap: the recording sees those at most as an ownership change across it, and drops them)."""
        return self._outside(time_s, self.tick_s / 2.0)


@dataclass
class TwinFit:
    """A fitted twin: the scenario as a mapping, its commented YAML text, and the fitted figures;
    ``gaps`` are the recording's (for the fit report: :func:`recorded_figures`, :func:`twin_figures`)."""

    scenario: dict[str, Any]
    text: str
    broker_numbers: dict[str, int]  # recorded broker id → twin broker number (1 = broker-0001)
    bundle_map: dict[str, str]  # recorded bundle → twin bundle name
    notes: list[str] = field(default_factory=list)
    gaps: RecordingGaps = field(default_factory=RecordingGaps)


# -------------------------------------------------------------------------------------------------- hardware


def _centered(rows: pd.DataFrame, a: str, b: str) -> pd.Series:
    """Per broker Σ(a − ā)(b − b̄), from its sums (the product is stored under either order)."""
    key = f"p_{a}_{b}" if f"p_{a}_{b}" in rows.columns else f"p_{b}_{a}"
    n = rows["n"].astype(float).clip(lower=1.0)
    out: pd.Series = (rows[key] - rows[f"s_{a}"] * rows[f"s_{b}"] / n).astype(float)
    return out


def _pooled(rows: pd.DataFrame, a: str, b: str) -> float:
    """Σ over the class's brokers of the within-broker centred cross products (one intercept each)."""
    return float(_centered(rows, a, b).sum())


def _ridge(xx: np.ndarray[Any, Any], xy: np.ndarray[Any, Any], prior: np.ndarray[Any, Any]) -> Any:
    """Least squares with a small ridge towards ``prior`` (keeps collinear terms at sane values)."""
    lam = 1e-4 * float(np.trace(xx)) + 1e-12
    beta = np.linalg.solve(xx + lam * np.eye(len(prior)), xy + lam * prior)
    return beta


def _simple_slope(rows: pd.DataFrame, x: str, y: str, prior: float) -> float:
    xx, xy = _pooled(rows, x, x), _pooled(rows, x, y)
    return float(_ridge(np.array([[xx]]), np.array([xy]), np.array([prior]))[0])


def _intercepts(rows: pd.DataFrame, terms: Sequence[tuple[str, float]], y: str) -> pd.Series:
    """Per broker: mean(y) − Σ slope·mean(x)."""
    out = rows[f"s_{y}"] / rows["n"]
    for x, slope in terms:
        out = out - slope * rows[f"s_{x}"] / rows["n"]
    return out.astype(float)


def _residual_std(rows: pd.DataFrame, terms: Sequence[tuple[str, float]], y: str) -> pd.Series:
    """Per broker: the standard deviation of y − Σ slope·x (from the centred sums)."""
    var = _centered(rows, y, y)
    for x, slope in terms:
        var = var - 2 * slope * _centered(rows, x, y)
        for x2, slope2 in terms:
            var = var + slope * slope2 * _centered(rows, x, x2)
    out = pd.Series(np.sqrt(var.clip(lower=0.0) / rows["n"].clip(lower=1)), index=rows.index, dtype=float)
    return out


def _class_name(cores: float, nic_gbps: float, taken: set[str]) -> str:
    base = f"c{cores:g}-nic{nic_gbps:g}g".replace(".", "_")
    name, k = base, 2
    while name in taken:
        name, k = f"{base}-{k}", k + 1
    return name


def _fit_classes(brokers: pd.DataFrame) -> tuple[dict[str, dict[str, float]], pd.DataFrame]:
    """Hardware classes (by reported limits) with fitted costs; per broker its class and background."""
    b = brokers.copy()
    b["cores"] = (b["cpu_limit"] / 100.0).round(3)
    b["nic_gbps"] = (b["bandwidth_out_limit"] / (KILO * KILO)).round(3)
    b["direct_memory_gb"] = (b["direct_memory_limit"] / 1024.0).round(3)
    b["heap_gb"] = (b["memory_limit"] / 1024.0).round(3)
    keys = ["cores", "nic_gbps", "direct_memory_gb", "heap_gb"]
    defaults = HardwareClass()
    classes: dict[str, dict[str, float]] = {}
    b["hardware"] = ""
    for bg in ("bg_cpu", "bg_cpu_noise", "bg_nic_in", "bg_nic_out"):
        b[bg] = 0.0
    groups = b.groupby(keys, sort=True)
    for values, rows in sorted(groups, key=lambda kv: (-len(kv[1]), kv[0])):
        cores, nic, dm_gb, heap_gb = (float(v) for v in values)  # type: ignore[arg-type, union-attr]
        if cores <= 0 or nic <= 0:
            raise InputError(
                "the recording has no usable CPU or NIC limits (a Prometheus-only recording reports "
                "percentages): shedlab twin needs load reports (GET /admin/v2/broker-stats/load-report)",
                value=f"cpu limit {cores * 100:g}, NIC limit {nic:g} Gbit/s",
            )
        cross = _pooled(rows, "x_msg", "x_mib")
        xx = np.array([[_pooled(rows, "x_msg", "x_msg"), cross], [cross, _pooled(rows, "x_mib", "x_mib")]])
        xy = np.array([_pooled(rows, "x_msg", "y_cpu"), _pooled(rows, "x_mib", "y_cpu")])
        us, ms = (
            max(0.0, float(v))
            for v in _ridge(xx, xy, np.array([defaults.cpu_us_per_msg, defaults.cpu_ms_per_mib]))
        )
        cpu_terms = [("x_msg", us), ("x_mib", ms)]
        icpt = _intercepts(rows, cpu_terms, "y_cpu") / cores  # fraction of the machine
        idle = float(np.clip(icpt.min(), 0.0, 1.0))
        copies = max(0.0, _simple_slope(rows, "x_nout", "y_nout", defaults.bookkeeper_copies))
        read = max(0.0, _simple_slope(rows, "x_nin", "y_nin", defaults.bookkeeper_read_fraction))
        dm_per = max(0.0, _simple_slope(rows, "x_dm", "y_dm", defaults.direct_memory_mb_per_mibps))
        heap_per = max(0.0, _simple_slope(rows, "x_heap", "y_heap", defaults.heap_mb_per_topic))
        dm_base = float(max(0.0, _intercepts(rows, [("x_dm", dm_per)], "y_dm").median()))
        heap_base = float(max(0.0, _intercepts(rows, [("x_heap", heap_per)], "y_heap").median()))
        name = _class_name(cores, nic, set(classes))
        classes[name] = {
            "cores": cores,
            "nic_gbps": nic,
            "direct_memory_gb": dm_gb,
            "heap_gb": heap_gb,
            "cpu_idle": idle,
            "cpu_us_per_msg": us,
            "cpu_ms_per_mib": ms,
            "bookkeeper_copies": copies,
            "bookkeeper_read_fraction": read,
            "direct_memory_base_mb": dm_base,
            "direct_memory_mb_per_mibps": dm_per,
            "heap_base_mb": heap_base,
            "heap_mb_per_topic": heap_per,
        }
        nic_kbps = nic * KILO * KILO
        idx = rows.index
        b.loc[idx, "hardware"] = name
        b.loc[idx, "bg_cpu"] = (icpt - idle).clip(lower=0.0)
        b.loc[idx, "bg_cpu_noise"] = _residual_std(rows, cpu_terms, "y_cpu") / cores
        b.loc[idx, "bg_nic_out"] = (_intercepts(rows, [("x_nout", copies)], "y_nout") / nic_kbps).clip(
            lower=0.0
        )
        b.loc[idx, "bg_nic_in"] = (_intercepts(rows, [("x_nin", read)], "y_nin") / nic_kbps).clip(lower=0.0)
    return classes, b


# --------------------------------------------------------------------------------------------------- traffic


def _diurnal(series: pd.DataFrame, start_ms: int, period_s: float = 86400.0) -> tuple[float, float]:
    """Amplitude (0–1) and peak (s since start, in [0, period)) of ``1 + A·cos(2π(t − peak)/P)``
    fitted by least squares to a namespace's total rate (normalised by its mean)."""
    t = (series["tick_ms"].to_numpy(dtype=np.float64) - start_ms) / 1000.0
    y = series["rate_in"].to_numpy(dtype=np.float64)
    if y.size < 4 or y.mean() <= 0:
        return 0.0, 0.0
    w = 2.0 * math.pi * t / period_s
    design = np.column_stack([np.ones_like(w), np.cos(w), np.sin(w)])
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    level = float(coef[0]) if coef[0] > 0 else float(y.mean())
    b, c = float(coef[1]) / level, float(coef[2]) / level
    amp = min(1.0, math.hypot(b, c))
    peak = (math.atan2(c, b) / (2.0 * math.pi) * period_s) % period_s
    return amp, peak


def _shape_mean(amp: float, peak: float, t_s: np.ndarray[Any, Any], period_s: float = 86400.0) -> float:
    return float(np.mean(1.0 + amp * np.cos(2.0 * math.pi * (t_s - peak) / period_s))) if t_s.size else 1.0


_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def _prefix(tenant: str) -> str:
    return _SAFE.sub("-", tenant).strip("-") or "tenant"


def _fmt(value: float, digits: int = 4) -> float | int:
    """A number rounded to ``digits`` significant digits (whole numbers as ints): short, readable YAML."""
    if value == 0 or not math.isfinite(value):
        return 0
    rounded = float(f"{value:.{digits}g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 1e15 else rounded


def _duration(seconds: float) -> str:
    s = round(seconds)
    if s and s % 3600 == 0:
        return f"{s // 3600}h"
    if s and s % 60 == 0:
        return f"{s // 60}m"
    return f"{s}s"


def _flow(value: Any) -> str:
    return json.dumps(value, separators=(", ", ": "))


def _workloads(
    inputs: TwinInputs, numbers: Mapping[str, int], initial: int, tick_s: float
) -> tuple[list[dict[str, Any]], dict[str, str], list[str]]:
    start = int(inputs.ticks_ms[0])
    t_all = (inputs.ticks_ms.astype(np.float64) - start) / 1000.0
    bundles = inputs.bundles.copy()
    bundles["namespace"] = bundles["bundle"].str.rsplit("/", n=1).str[0]
    out: list[dict[str, Any]] = []
    mapping: dict[str, str] = {}
    comments: list[str] = []
    tenant_count: dict[str, int] = {}
    for namespace, rows in bundles.groupby("namespace", sort=True):
        rows = rows.sort_values("bundle")
        tenant = str(namespace).split("/", 1)[0]
        prefix = _prefix(tenant)
        index = tenant_count.get(prefix, 0)
        tenant_count[prefix] = index + 1
        twin_ns = f"{prefix}-{index:03d}/ns-0000"
        names = [bundle_name(twin_ns, lo, hi) for lo, hi in even_ranges(len(rows))]
        mapping.update(dict(zip(rows["bundle"], names, strict=True)))
        series = inputs.namespace_series[inputs.namespace_series["namespace"] == namespace]
        amp, peak = _diurnal(series, start)
        if amp < 0.02:
            amp = 0.0
        level = rows["rate_in"] / _shape_mean(amp, peak, t_all)
        size = np.where(
            rows["rate_in"] > 0, rows["tp_in"] / rows["rate_in"].where(rows["rate_in"] > 0), 1024.0
        )
        fanout = np.where(
            rows["rate_in"] > 0, rows["rate_out"] / rows["rate_in"].where(rows["rate_in"] > 0), 1.0
        )
        topics = rows["topics"].clip(lower=1)
        workload: dict[str, Any] = {
            "name": str(namespace),
            "tenant_prefix": prefix,
            "bundles": len(rows),
            "topics": {"dist": "sequence", "values": [int(v) for v in topics]},
            "producers": {"dist": "sequence", "values": [_fmt(v, 3) for v in rows["producers"] / topics]},
            "consumers": {"dist": "sequence", "values": [_fmt(v, 3) for v in rows["consumers"] / topics]},
            "msg_rate_in": {"dist": "sequence", "values": [_fmt(v) for v in level]},
            "msg_size": {"dist": "sequence", "values": [_fmt(max(1.0, float(v))) for v in size]},
            "fanout": {"dist": "sequence", "values": [_fmt(float(v), 3) for v in fanout]},
        }
        owners = [numbers.get(str(o), 0) for o in rows["first_owner"]]
        if all(0 < o <= initial for o in owners):
            workload["brokers"] = owners
        shapes: list[dict[str, Any]] = []
        if amp > 0:
            shapes.append(
                {"kind": "diurnal", "amplitude": _fmt(amp, 3), "period": "1d", "peak": _duration(peak)}
            )
        sigma = float(np.nanmedian(rows["log_share_std"])) if rows["log_share_std"].notna().any() else 0.0
        capped = sigma > MAX_NOISE_SIGMA  # more, and the scenario's reader refuses it (traffic.py)
        sigma = min(sigma, MAX_NOISE_SIGMA)
        if sigma > 0.005:
            shapes.append({"kind": "noise", "sigma": _fmt(sigma, 3)})
        ac = (
            float(np.nanmedian(rows["log_share_ac1"]))
            if rows["log_share_ac1"].notna().any()
            else float("nan")
        )
        shapes += _onoff(rows, names, tick_s)
        if shapes:
            workload["shapes"] = shapes
        out.append(workload)
        comments.append(
            f"{namespace}: {len(rows)} bundles, diurnal amplitude {amp:.3g}, jitter σ {sigma:.3g}"
            + (" (capped: the recorded σ is larger)" if capped else "")
            + (f", lag-1 autocorrelation {ac:.2f} (not reproduced)" if math.isfinite(ac) else "")
        )
    return out, mapping, comments


def _onoff(rows: pd.DataFrame, names: Sequence[str], tick_s: float) -> list[dict[str, Any]]:
    """On/off shapes for the bundles whose consumers (or producers) stopped repeatedly."""
    shapes: list[dict[str, Any]] = []
    for stops, frac_col, starts_col in (
        ("consumers", "off_out_fraction", "off_out_starts"),
        ("producers", "off_in_fraction", "off_in_starts"),
    ):
        hit = (rows[frac_col] >= 0.05) & (rows[starts_col] >= 3)
        if not hit.any():
            continue
        sel = rows[hit]
        period = float(np.median(sel["n"] * tick_s / sel[starts_col]))
        period = max(2 * tick_s, round(period / tick_s) * tick_s)
        on = min(  # off a tick at least: on for the whole period is no cycle (the scenario refuses it)
            period - tick_s,
            max(tick_s, round(period * (1.0 - float(np.median(sel[frac_col]))) / tick_s) * tick_s),
        )
        selected = [names[i] for i, h in enumerate(hit.tolist()) if h]
        shape: dict[str, Any] = {
            "kind": "onoff",
            "period": _duration(period),
            "on": _duration(on),
            "stops": stops,
            "phase": "random",
            "select": {"bundles": selected},
        }
        if stops == "consumers":
            shape["catchup"] = 2.0
        shapes.append(shape)
    return shapes


# ---------------------------------------------------------------------------------------------------- events


def _events(
    inputs: TwinInputs, brokers: pd.DataFrame, numbers: Mapping[str, int], tick_s: float
) -> tuple[list[dict[str, Any]], list[str]]:
    start, end = int(inputs.ticks_ms[0]), int(inputs.ticks_ms[-1])
    tick_ms = tick_s * 1000.0
    events: list[dict[str, Any]] = []
    comments: list[str] = []
    for _, b in brokers.sort_values("number").iterrows():
        broker, number = str(b["broker"]), int(b["number"])
        if int(b["first_ms"]) > start:
            at = (int(b["first_ms"]) - start) / 1000.0
            event: dict[str, Any] = {
                "at": _duration(at),
                "kind": "add_brokers",
                "count": 1,
                "hardware": b["hardware"],
            }
            background = _background(b)
            if background:
                event["background"] = background
            events.append(event)
            comments.append(f"broker-{number:04d} = {broker} joined at +{_duration(at)}")
        for _, gap in inputs.gaps[inputs.gaps["broker"] == broker].iterrows():
            if not _recorded_between(inputs.ticks_ms, int(gap["from_ms"]), int(gap["to_ms"])):
                continue  # no broker reported in between: a gap of the recording, not of this broker
            down = (int(gap["from_ms"]) - start) / 1000.0 + tick_s
            downtime = max(tick_s / 2, (int(gap["to_ms"]) - int(gap["from_ms"])) / 1000.0 - tick_s)
            events.append(
                {
                    "at": _duration(down),
                    "kind": "rolling_restart",
                    "interval": _duration(tick_s),
                    "downtime": _duration(downtime),
                    "brokers": [number],
                }
            )
            comments.append(
                f"broker-{number:04d} = {broker} was away {_duration(downtime)} from +{_duration(down)}"
            )
        if int(b["last_ms"]) < end - tick_ms / 2:
            at = (int(b["last_ms"]) - start) / 1000.0 + tick_s
            events.append({"at": _duration(at), "kind": "remove_brokers", "brokers": [number]})
            comments.append(f"broker-{number:04d} = {broker} left at +{_duration(at)}")
    events.sort(key=lambda e: _seconds(str(e["at"])))
    ticks = inputs.ticks_ms
    for i in _gap_starts(ticks, tick_s):
        away = (int(ticks[i + 1]) - int(ticks[i])) / 1000.0 - tick_s
        since = (int(ticks[i]) - start) / 1000.0 + tick_s
        comments.append(
            f"the recording has no sample for {_duration(away)} from +{_duration(since)}"
            " (no broker reported: a gap of the recording, which the twin runs through;"
            " its fit report leaves the gap out of both sides)"
        )
    return events, comments


def _gap_starts(ticks_ms: np.ndarray[Any, Any], tick_s: float) -> np.ndarray[Any, Any]:
    """Indices ``i`` of the sample times followed by a gap: the next one more than 1.5 ticks later."""
    return np.flatnonzero(np.diff(ticks_ms) > 1.5 * (tick_s * 1000.0))


def recording_gaps(ticks_ms: np.ndarray[Any, Any], tick_s: float, twin_tick_s: float) -> RecordingGaps:
    """The recording's gaps (sample times more than 1.5 ticks apart, ``tick_s`` the median interval:
    the criterion of the twin's header notes), on the twin's time axis with the twin's tick."""
    start = int(ticks_ms[0])
    spans = tuple(
        ((int(ticks_ms[i]) - start) / 1000.0, (int(ticks_ms[i + 1]) - start) / 1000.0)
        for i in _gap_starts(ticks_ms, tick_s)
    )
    return RecordingGaps(spans, twin_tick_s)


def _recorded_between(ticks_ms: np.ndarray[Any, Any], from_ms: int, to_ms: int) -> bool:
    """Whether the recording has a sample time strictly between ``from_ms`` and ``to_ms`` (``ticks_ms``
    sorted): a broker missing from such a time was away; with none, the collector was (an outage of the
    recording, which every broker shares, is not a restart of every broker)."""
    return bool(np.searchsorted(ticks_ms, to_ms, "left") > np.searchsorted(ticks_ms, from_ms, "right"))


def _by_last_tick(events: list[dict[str, Any]], duration_s: float, tick_s: float) -> list[dict[str, Any]]:
    """Events moved back to the twin's last tick when they fall after it.

    Sample times jitter, so the span (the twin's duration) is seldom a whole number of median ticks and
    the simulator's last tick, ``duration`` rounded down to whole ticks (:func:`last_tick_ms`), comes up
    to a tick before the last sample; a broker seen first (or last) near that sample gives an event
    after the last tick, which a scenario refuses (it would never happen). The last tick is the
    nearest the twin has.
    """
    last = last_tick_ms(duration_s, tick_s) / 1000.0 if tick_s > 0 else duration_s
    return [{**e, "at": _duration(last)} if _seconds(str(e["at"])) > last else e for e in events]


def _seconds(text: str) -> float:
    unit = {"h": 3600.0, "m": 60.0, "s": 1.0}[text[-1]]
    return float(text[:-1]) * unit


def _background(b: Mapping[str, Any] | pd.Series) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cpu, noise = float(b["bg_cpu"]), float(b["bg_cpu_noise"])
    if cpu > 0.005 or noise > 0.005:
        out["cpu"] = (
            _fmt(cpu, 3)
            if noise <= 0.005
            else {"kind": "constant", "value": _fmt(cpu, 3), "noise": _fmt(noise, 2)}
        )
    for key, col in (("nic_in", "bg_nic_in"), ("nic_out", "bg_nic_out")):
        if float(b[col]) > 0.005:
            out[key] = _fmt(float(b[col]), 3)
    return out


# -------------------------------------------------------------------------------------------------- the twin


def _tick_seconds(ticks_ms: np.ndarray[Any, Any]) -> float:
    if ticks_ms.size < 2:
        raise InputError("the recording has fewer than two sample times: nothing to fit a twin to")
    return float(np.median(np.diff(ticks_ms))) / 1000.0


def fit_twin(
    inputs: TwinInputs,
    *,
    name: str,
    strategy: str,
    config: Mapping[str, Any],
    source: str = "",
) -> TwinFit:
    """Fit a scenario to the aggregated recording; ``strategy``/``config`` are the recorded cluster's
    (a load report does not say which shedding strategy the leader ran: the user tells)."""
    if inputs.brokers.empty or inputs.bundles.empty:
        raise InputError("the recording has no broker or no bundle samples: nothing to fit a twin to")
    tick_s = _tick_seconds(inputs.ticks_ms)
    start, end = int(inputs.ticks_ms[0]), int(inputs.ticks_ms[-1])
    classes, brokers = _fit_classes(inputs.brokers)
    brokers = brokers.sort_values(["first_ms", "broker"]).reset_index(drop=True)
    brokers["number"] = np.arange(1, len(brokers) + 1)
    numbers = {str(b): int(n) for b, n in zip(brokers["broker"], brokers["number"], strict=True)}
    initial = int((brokers["first_ms"] <= start).sum())
    if initial == 0:
        raise InputError("no broker reports at the first sample time")
    groups = []
    for _, b in brokers[brokers["first_ms"] <= start].iterrows():
        group: dict[str, Any] = {"count": 1, "hardware": b["hardware"]}
        background = _background(b)
        if background:
            group["background"] = background
        groups.append(group)
    workloads, bundle_map, traffic_notes = _workloads(inputs, numbers, initial, tick_s)
    duration = _duration((end - start) / 1000.0) if (end - start) else _duration(tick_s)
    events, event_notes = _events(inputs, brokers, numbers, tick_s)
    events = _by_last_tick(events, _seconds(duration), _seconds(_duration(tick_s)))
    origin = source or "a recording"
    scenario: dict[str, Any] = {
        "name": name,
        "description": f"Twin of cluster {inputs.cluster} fitted by shedlab twin to {origin}",
        # the simulator runs duration / tick + 1 ticks: the recording's span, first to last sample
        "duration": duration,
        "seed": 1,
        "strategy": strategy,
        "config": dict(config),
        "simulation": {
            "tick": _duration(tick_s),
            "start_time": pd.Timestamp(start, unit="ms", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ"),
            "cluster": inputs.cluster,
        },
        "hardware": {k: {f: _fmt(v) for f, v in c.items()} for k, c in classes.items()},
        "brokers": groups,
        "workloads": workloads,
        "events": events,
    }
    notes = [*traffic_notes, *event_notes]
    text = _render(scenario, brokers, notes)
    gaps = recording_gaps(inputs.ticks_ms, tick_s, _seconds(scenario["simulation"]["tick"]))
    return TwinFit(scenario, text, numbers, bundle_map, notes, gaps)


def _render(scenario: Mapping[str, Any], brokers: pd.DataFrame, notes: Sequence[str]) -> str:
    """The twin as YAML a person can read: one line per broker, workload field and event."""
    lines = [
        f"{TWIN_HEADER}: an ordinary scenario file (docs/scenarios.md, docs/twin.md).",
        "# Edit it freely. What it does not capture yet:",
        *[f"#   - {lim}" for lim in LIMITATIONS],
        "# Fitted:",
        *[f"#   {n}" for n in notes],
        f"name: {_flow(scenario['name'])}",
        f"description: {_flow(scenario['description'])}",
        f"duration: {scenario['duration']}",
        f"seed: {scenario['seed']}",
        f"strategy: {scenario['strategy']}",
        "config:" + ("" if scenario["config"] else " {}"),
        *[f"  {k}: {_flow(v)}" for k, v in scenario["config"].items()],
        "simulation:",
        *[f"  {k}: {_flow(v) if k != 'tick' else v}" for k, v in scenario["simulation"].items()],
        "hardware:                 # one class per set of reported limits; costs fitted (docs/twin.md)",
    ]
    for cls, fields in scenario["hardware"].items():
        lines.append(f"  {cls}: {_flow(fields)}")
    lines.append("brokers:                  # in the order of broker-0001, broker-0002, ...")
    starting = brokers[brokers["number"] <= len(scenario["brokers"])]
    for group, (_, b) in zip(scenario["brokers"], starting.iterrows(), strict=True):
        lines.append(f"  - {_flow(group)}   # {b['broker']}")
    lines.append("workloads:                # one per recorded namespace; values per bundle in name order")
    for w in scenario["workloads"]:
        lines.append(f"  - name: {_flow(w['name'])}")
        for key in (
            "tenant_prefix",
            "bundles",
            "topics",
            "producers",
            "consumers",
            "msg_rate_in",
            "msg_size",
            "fanout",
            "brokers",
        ):
            if key in w:
                lines.append(f"    {key}: {_flow(w[key])}")
        if "shapes" in w:
            lines.append("    shapes:")
            lines += [f"      - {_flow(s)}" for s in w["shapes"]]
    lines.append("events:" + ("" if scenario["events"] else " []"))
    lines += [f"  - {_flow(e)}" for e in scenario["events"]]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ validation


def score_expression(config: Mapping[str, Any] | None = None) -> str:
    """Pulsar's weighted max usage × 100 of a broker sample with the configuration's resource weights
    (direct memory weighs 0 by default), as a Spark SQL expression (spec §1.5) — the simulator's score."""
    conf = LoadBalancerConfig().with_overrides(dict(config or {}), source="config")
    w = {
        "cpu": conf.load_balancer_cpu_resource_weight,
        "direct_memory": conf.load_balancer_direct_memory_resource_weight,
        "bandwidth_in": conf.load_balancer_bandwidth_in_resource_weight,
        "bandwidth_out": conf.load_balancer_bandwidth_out_resource_weight,
    }
    parts = [
        f"if({r}_limit > 0, {r}_usage / {r}_limit * {w[r]}, 0.0)"
        for r in ("cpu", "direct_memory", "bandwidth_in", "bandwidth_out")
    ]
    return f"100.0 * greatest({', '.join(parts)})"


QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)

TOLERANCES: dict[str, dict[str, Any]] = {
    "unloads per day": {
        "relative": 0.5,
        "absolute": 6.0,
        "unit": "unloads/day",
        "why": "shedding decisions are discrete: a few more or fewer per day is noise",
    },
    "score spread, mean": {
        "relative": 0.25,
        "absolute": 5.0,
        "unit": "score points",
        "why": "AvgShedder's low threshold is 15 points; 5 is a third of it",
    },
    "broker usage distribution": {
        "relative": None,
        "absolute": 8.0,
        "unit": "score points",
        "why": "mean over brokers of the mean |quantile difference| (10-90 %)",
    },
    "moves per day": {
        "relative": 0.5,
        "absolute": 6.0,
        "unit": "bundles/day",
        "why": "ownership changes while both brokers were up, as ingest shows them",
    },
    "traffic moved per day": {
        "relative": 0.6,
        "absolute": None,
        "unit": "share of the traffic",
        "why": "how much of the cluster's throughput changed broker per day",
    },
}
"""Per figure: the distance allowed (the larger of ``relative`` × recorded and ``absolute``)."""


@dataclass(frozen=True)
class FitCheck:
    """One figure of the fit report."""

    figure: str
    recorded: float
    twin: float
    twin_low: float
    twin_high: float
    distance: float
    tolerance: float
    unit: str
    why: str

    @property
    def ok(self) -> bool:
        return bool(self.distance <= self.tolerance)

    def to_dict(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "recorded": self.recorded,
            "twin": self.twin,
            "twin_range": [self.twin_low, self.twin_high],
            "distance": self.distance,
            "tolerance": self.tolerance,
            "unit": self.unit,
            "ok": self.ok,
            "why": self.why,
        }


def recorded_figures(
    spread: pd.DataFrame,
    quantiles: pd.DataFrame,
    moves: pd.DataFrame,
    duration_s: float,
    gaps: RecordingGaps | None = None,
) -> dict[str, Any]:
    """The recording's figures from the Spark aggregates: per-tick score spread (``spread``), per broker
    score quantiles (``broker``, ``q10`` … ``q90``), and its moves (``throughput``, ``total_throughput``).

    Spread and quantiles come from the recorded samples, so never from a gap. The moves are ownership
    changes between two consecutive samples of a bundle: one across a gap is left out (it may be
    several unloads, or one there and back that shows as none, or the fallout of a restart — nothing
    says which). The per-day figures are per day the recording saw moves in, its span less its
    ``gaps`` (:class:`RecordingGaps`): a rate of the cluster, not diluted by the hours nobody watched;
    :func:`twin_figures` counts the twin's unloads over the same times and divides by the same days.
    """
    days = (gaps or RecordingGaps()).observed_s(duration_s) / 86400.0
    n_moves = float(len(moves))
    share = float((moves["throughput"] / moves["total_throughput"]).sum()) if len(moves) else 0.0
    return {
        "score spread, mean": float(spread["spread"].mean()) if len(spread) else 0.0,
        "moves per day": n_moves / days,
        "unloads per day": n_moves / days,
        "traffic moved per day": share / days,
        "broker quantiles": {
            str(r["broker"]): [float(r[f"q{int(q * 100)}"]) for q in QUANTILES]
            for _, r in quantiles.iterrows()
        },
    }


def twin_figures(
    summaries: Sequence[Mapping[Any, Any]],
    brokers: pd.DataFrame,
    ticks: pd.DataFrame,
    gaps: RecordingGaps | None = None,
) -> list[dict[str, Any]]:
    """Per twin run (seed): the same figures from its ``brokers`` and ``ticks`` tables, over the times
    the recording covers.

    Without ``gaps`` (:class:`RecordingGaps`) that is the whole run; with them, spread and broker
    quantiles come from the ticks at recorded times (``time_s``), unloads and traffic moved from the
    ticks whose unloads the recording would have seen, per day of that time: the twin runs through a
    gap, and its ticks there have no recorded counterpart. ``brokers`` needs ``time_s`` and ``score``,
    ``ticks`` needs ``time_s``, ``score_spread``, ``unloads`` and the throughputs; of the summary only
    ``run_id`` and ``duration_s`` are read.

    One path, from the tables, with or without gaps. The summary's own figures leave out a
    ``metrics.warmup`` (a twin edited to have one), while the recording's cover its whole span; the
    tables keep every tick, so both sides are over the same times either way. (Until 27 Nov 2026 the
    run without gaps took the summary's spread and unloads but every broker row, and divided the
    unloads of the time after the warm-up by the whole span.)
    """
    out = []
    every = gaps or RecordingGaps()  # no spans: every tick is at a recorded time and its moves seen
    for s in summaries:
        run = str(s["run_id"])
        days = every.observed_s(float(s["duration_s"])) / 86400.0
        b = brokers[brokers["run_id"] == run]
        t = ticks[ticks["run_id"] == run]
        b = b[every.at_recorded_times(b["time_s"])]
        spread = t["score_spread"].to_numpy(dtype=np.float64)[every.at_recorded_times(t["time_s"])]
        finite = spread[np.isfinite(spread)]
        spread_mean = float(finite.mean()) if finite.size else math.nan
        t = t[every.moves_seen(t["time_s"])]
        unloads = float(t["unloads"].sum())
        q = b.groupby("broker")["score"].quantile(np.array(QUANTILES)).unstack()
        moved_share = float(
            (t["throughput_moved"] / t["throughput_total"].where(t["throughput_total"] > 0)).sum()
        )
        out.append(
            {
                "score spread, mean": spread_mean,
                "unloads per day": unloads / days,
                "moves per day": unloads / days,
                "traffic moved per day": moved_share / days,
                "broker quantiles": {str(k): [float(v) for v in row] for k, row in q.iterrows()},
            }
        )
    return out


def _usage_distance(
    recorded: Mapping[str, list[float]], twin: Mapping[str, list[float]], numbers: Mapping[str, int]
) -> float:
    dists = []
    for broker, qs in recorded.items():
        twin_id = f"broker-{numbers.get(broker, 0):04d}:8080"
        if twin_id in twin:
            dists.append(float(np.mean(np.abs(np.asarray(qs) - np.asarray(twin[twin_id])))))
        else:
            dists.append(float(np.mean(np.abs(qs))))
    return float(np.mean(dists)) if dists else 0.0


def compare(
    recorded: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], numbers: Mapping[str, int]
) -> list[FitCheck]:
    """The fit report: each figure, recorded vs the twin's runs (mean and range over seeds).

    The recording is one draw of its cluster's randomness, the twin's runs are several: a figure fits
    when the recorded value is within its stated tolerance of the twin's mean, or within the 95 %
    prediction interval of one more twin run (``t(0.975, n−1) · sd · √(1 + 1/n)`` over the ``n``
    seeds) — a short recording of a jittery cluster can differ from its own twin by that much.
    """
    checks = []
    for figure, tol in TOLERANCES.items():
        if figure == "broker usage distribution":
            values = [
                _usage_distance(recorded["broker quantiles"], r["broker quantiles"], numbers) for r in runs
            ]
            rec, twin = 0.0, float(np.mean(values))
            distance, noise = twin, 0.0
        else:
            values = [float(r[figure]) for r in runs]
            rec, twin = float(recorded[figure]), float(np.mean(values))
            distance = abs(twin - rec)
            n = len(values)
            noise = (
                t_critical(n - 1) * float(np.std(values, ddof=1)) * math.sqrt(1.0 + 1.0 / n)
                if n >= 2
                else 0.0
            )
        stated = max(
            (tol["relative"] or 0.0) * abs(rec), tol["absolute"] if tol["absolute"] is not None else 0.0
        )
        checks.append(
            FitCheck(
                figure,
                rec,
                twin,
                float(min(values)),
                float(max(values)),
                distance,
                max(stated, noise),
                tol["unit"],
                tol["why"] + (f" (seed-to-seed prediction interval {noise:.3g})" if noise > stated else ""),
            )
        )
    return checks


def fit_report_markdown(
    checks: Sequence[FitCheck], *, title: str, seeds: int, gaps: RecordingGaps | None = None
) -> str:
    """The fit report as Markdown: a verdict, then one row per figure (and, for a recording with gaps,
    a line saying the twin was compared outside them: its figures differ from a whole run's)."""
    bad = [c for c in checks if not c.ok]
    lines = [f"# Fit report: {title}", ""]
    if bad:
        lines.append(
            f"**WARNING: the twin does not fit the recording** on {len(bad)} of {len(checks)} figures "
            f"({', '.join(c.figure for c in bad)}). Recommendations made on it may not hold for the cluster."
        )
    else:
        lines.append(f"The twin fits the recording: every figure within its tolerance ({seeds} seeds).")
    lines += [
        "",
        "| figure | recorded | twin (mean, range over seeds) | distance | tolerance | fits |",
        "|---|---|---|---|---|---|",
    ]
    for c in checks:
        rec = "—" if c.figure == "broker usage distribution" else significant(c.recorded)
        lines.append(
            f"| {c.figure} ({c.unit}) | {rec} | {significant(c.twin)} [{significant(c.twin_low)}, "
            f"{significant(c.twin_high)}] | {significant(c.distance)} | ≤ {significant(c.tolerance)} | "
            f"{'yes' if c.ok else '**NO**'} |"
        )
    lines += ["", "Tolerances: " + "; ".join(f"{k}: {v['why']}" for k, v in TOLERANCES.items()), ""]
    if gaps:
        spans = ", ".join(f"+{_duration(frm)}..+{_duration(to)}" for frm, to in gaps.spans)
        lines += [
            f"The recording has {len(gaps.spans)} gap(s) (no broker reported: {spans}). Both sides are "
            "taken outside them: the twin's ticks in a gap (and the unloads up to the first sample after "
            "it) are left out, and the per-day figures are per day of the recording's time outside them.",
            "",
        ]
    return "\n".join(lines)


def _utc(ms: int) -> str:
    return pd.Timestamp(ms, unit="ms", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def window_error(cluster: str, span: tuple[int, int] | None, window: tuple[int, int]) -> InputError:
    """Fewer than two sample times in ``--window``: its value and the span ``(first, last)`` of the
    recording, so a window in the wrong day or year (or time zone) has something to go on."""
    shown = f"{_utc(span[0])}..{_utc(span[1])}" if span is not None else "nothing"
    start, end = ("" if ms <= 0 or ms >= 2**62 else _utc(ms) for ms in window)
    return InputError(
        f"fewer than two sample times in the window; the recording of {cluster} spans {shown}",
        field="--window",
        value=f"{start}..{end}",
    )
