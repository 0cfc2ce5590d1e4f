"""Bundles and their traffic: names, sizes, distributions, and shapes over time, as arrays.

A scenario's *workloads* generate the bundles (Pulsar names ``tenant/namespace/0xLLLLLLLL_0xUUUUUUUU``,
ranges splitting the hash space evenly as Pulsar's default bundles do), each with topics, producers,
consumers and a base traffic drawn from configurable distributions. *Shapes* then modulate the
traffic over time: diurnal cycles, ramps, steps, periodic stop/resume of consumers or producers
(with backlog catch-up), random short spikes and noise. Everything is a NumPy array over bundles;
one call of :meth:`TrafficModel.at` costs a few array operations per shape, whatever the cluster size.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shedlab.core.sim.spec import Node, check_number
from shedlab.errors import InputError
from shedlab.model.bundles import bundle_name, even_ranges

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


# ---------------------------------------------------------------------------------------------- distributions

DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "constant": ("value",),
    "uniform": ("low", "high"),
    "normal": ("mean", "std"),
    "lognormal": ("median", "sigma"),
    "pareto": ("min", "alpha"),
    "zipf": ("max", "exponent"),
    "choice": ("values", "weights"),
    "sequence": ("values",),
}
"""Distribution kinds and their parameters (see docs/scenarios.md)."""


@dataclass(frozen=True)
class Distribution:
    """A distribution of per-bundle values; ``clip`` bounds the samples (None = unbounded)."""

    kind: str
    params: tuple[tuple[str, Any], ...]
    clip_low: float | None = None
    clip_high: float | None = None

    @classmethod
    def constant(cls, value: float) -> Distribution:
        return cls("constant", (("value", float(value)),))

    def param(self, name: str) -> Any:
        return dict(self.params)[name]

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        p = dict(self.params)
        kind = self.kind
        if kind == "constant":
            out = np.full(n, float(p["value"]))
        elif kind == "uniform":
            out = rng.uniform(p["low"], p["high"], n)
        elif kind == "normal":
            out = rng.normal(p["mean"], p["std"], n)
        elif kind == "lognormal":
            out = p["median"] * np.exp(p["sigma"] * rng.standard_normal(n))
        elif kind == "pareto":
            out = p["min"] * (1.0 + rng.pareto(p["alpha"], n))
        elif kind == "zipf":
            ranks = rng.permutation(n).astype(np.float64) + 1.0
            out = p["max"] * ranks ** (-p["exponent"])
        elif kind == "choice":
            values = np.asarray(p["values"], dtype=np.float64)
            weights = p.get("weights")
            probs = (
                None if weights is None else np.asarray(weights, dtype=np.float64) / float(np.sum(weights))
            )
            out = rng.choice(values, size=n, p=probs)
        elif kind == "sequence":  # in order, repeated: a fitted twin's exact per-bundle values; no draw
            out = np.resize(np.asarray(p["values"], dtype=np.float64), n)
        else:  # pragma: no cover - parse() refuses unknown kinds
            raise ValueError(kind)
        lo = -np.inf if self.clip_low is None else self.clip_low
        hi = np.inf if self.clip_high is None else self.clip_high
        result: FloatArray = np.clip(out, lo, hi)
        return result

    def sample_counts(self, rng: np.random.Generator, n: int, minimum: int = 0) -> IntArray:
        """Whole numbers (rounded), at least ``minimum``."""
        result: IntArray = np.maximum(np.rint(self.sample(rng, n)), minimum).astype(np.int64)
        return result

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"dist": self.kind}
        for k, v in self.params:
            if v is not None:
                out[k] = list(v) if isinstance(v, tuple) else v
        if self.clip_low is not None or self.clip_high is not None:
            out["clip"] = [self.clip_low, self.clip_high]
        return out


def parse_distribution(
    node_parent: Node, key: str, default: Distribution, *, minimum: float = 0.0
) -> Distribution:
    """A number (constant) or ``{dist: KIND, ...params, clip: [low, high]}``; samples ≥ ``minimum``."""
    if not node_parent.has(key):
        node_parent.raw(key, None)
        return default
    raw = node_parent.raw(key)
    where = node_parent.where(key)
    source = node_parent.source
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        value = check_number(raw, source=source, field=where, minimum=minimum)
        return Distribution.constant(value)
    node = Node(raw, source, where)
    kind = node.string("dist", choices=tuple(DISTRIBUTIONS))
    params: list[tuple[str, Any]] = []
    if kind in ("choice", "sequence"):
        values = node.list("values")
        if not values:
            raise node.error("values", "expected a non-empty list of numbers")
        nums = tuple(
            check_number(v, source=source, field=f"{node.where('values')}[{i}]", minimum=minimum)
            for i, v in enumerate(values)
        )
        weights_raw = node.raw("weights", None) if kind == "choice" else None
        weights: tuple[float, ...] | None = None
        if weights_raw is not None:
            if not isinstance(weights_raw, list) or len(weights_raw) != len(nums):
                raise node.error("weights", "expected one weight per value", weights_raw)
            weights = tuple(
                check_number(w, source=source, field=f"{node.where('weights')}[{i}]", minimum=0.0)
                for i, w in enumerate(weights_raw)
            )
            if sum(weights) <= 0:
                raise node.error("weights", "weights must not all be zero", weights_raw)
        params = [("values", nums), ("weights", weights)] if kind == "choice" else [("values", nums)]
    else:
        for name in DISTRIBUTIONS[kind]:
            lower: float | None = None
            strict = False
            if name in ("std", "sigma"):
                lower = 0.0
            elif name in ("alpha", "exponent"):
                lower, strict = 0.0, True
            elif name in ("value", "low", "high", "median", "min", "max", "mean"):
                lower = minimum if name != "mean" else None
            params.append((name, node.number(name, minimum=lower, exclusive_minimum=strict)))
        p = dict(params)
        if kind == "uniform" and p["high"] < p["low"]:
            raise node.error("high", "must not be below low", p["high"])
    clip_low: float | None = None
    clip_high: float | None = None
    clip = node.raw("clip", None)
    if clip is not None:
        if not isinstance(clip, list) or len(clip) != 2:
            raise node.error("clip", "expected [low, high] (null for no bound)", clip)
        bounds = [
            None if c is None else check_number(c, source=source, field=f"{node.where('clip')}[{i}]")
            for i, c in enumerate(clip)
        ]
        clip_low, clip_high = bounds
    if clip_low is None and minimum is not None and kind in ("normal",):
        clip_low = minimum
    node.finish(("dist", *DISTRIBUTIONS[kind], "clip"))
    return Distribution(kind, tuple(params), clip_low, clip_high)


# --------------------------------------------------------------------------------------------------- signals


def ramp_fraction(t: float, start: float, end: float) -> float:
    """How far a ramp from ``start`` to ``end`` has gone at ``t``: 0 before ``start``, 1 from ``end`` on.

    A zero-length ramp (``start == end``) is a step at ``start``: it keeps its ``from`` value before
    ``start`` (it once jumped to its target at time 0, so "traffic starts at minute T" was impossible).
    """
    if t < start:
        return 0.0
    if t >= end:
        return 1.0
    return (t - start) / (end - start)


SIGNAL_KINDS: dict[str, tuple[str, ...]] = {
    "constant": ("value",),
    "diurnal": ("mean", "amplitude", "period", "peak"),
    "onoff": ("low", "high", "period", "on", "offset"),
    "ramp": ("from", "to", "start", "end"),
    "step": ("before", "after", "at"),
}
"""Kinds of time-varying scalars (background load), see docs/scenarios.md."""


@dataclass(frozen=True)
class Signal:
    """A scalar over time (seconds since the scenario start), plus optional Gaussian noise per tick."""

    kind: str
    params: tuple[tuple[str, float], ...]
    noise: float = 0.0

    @classmethod
    def constant(cls, value: float) -> Signal:
        return cls("constant", (("value", float(value)),))

    @property
    def is_constant(self) -> bool:
        return self.kind == "constant" and self.noise == 0.0

    def value(self, t: float, rng: np.random.Generator | None = None) -> float:
        p = dict(self.params)
        if self.kind == "constant":
            v = p["value"]
        elif self.kind == "diurnal":
            v = p["mean"] + p["amplitude"] * math.cos(2 * math.pi * (t - p["peak"]) / p["period"])
        elif self.kind == "onoff":
            phase = (t - p["offset"]) % p["period"]
            v = p["high"] if phase < p["on"] else p["low"]
        elif self.kind == "ramp":
            v = p["from"] + (p["to"] - p["from"]) * ramp_fraction(t, p["start"], p["end"])
        elif self.kind == "step":
            v = p["after"] if t >= p["at"] else p["before"]
        else:  # pragma: no cover
            raise ValueError(self.kind)
        if self.noise and rng is not None:
            v += self.noise * float(rng.standard_normal())
        return max(v, 0.0)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, **dict(self.params)}
        if self.noise:
            out["noise"] = self.noise
        return out


_SIGNAL_DURATIONS = {"period", "peak", "on", "offset", "start", "end", "at"}
_SIGNAL_DEFAULTS: dict[str, Any] = {"period": 86400.0, "peak": 14 * 3600.0, "offset": 0.0, "from": 0.0}


def parse_signal(parent: Node, key: str, default: Signal | None = None) -> Signal:
    """A number (constant fraction) or ``{kind: KIND, ...params, noise: σ}``."""
    if not parent.has(key):
        parent.raw(key, None)
        return default if default is not None else Signal.constant(0.0)
    raw = parent.raw(key)
    where = parent.where(key)
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return Signal.constant(check_number(raw, source=parent.source, field=where, minimum=0.0))
    node = Node(raw, parent.source, where)
    kind = node.string("kind", choices=tuple(SIGNAL_KINDS))
    params: list[tuple[str, float]] = []
    for name in SIGNAL_KINDS[kind]:
        if name in _SIGNAL_DURATIONS:
            value = node.duration(name, *(() if name not in _SIGNAL_DEFAULTS else (_SIGNAL_DEFAULTS[name],)))
        else:
            value = node.number(name, *(() if name not in _SIGNAL_DEFAULTS else (_SIGNAL_DEFAULTS[name],)))
        params.append((name, value))
    p = dict(params)
    if kind in ("diurnal", "onoff") and p["period"] <= 0:
        raise node.error("period", "must be greater than 0", p["period"])
    noise = node.number("noise", 0.0, minimum=0.0)
    node.finish(("kind", *SIGNAL_KINDS[kind], "noise"))
    return Signal(kind, tuple(params), noise)


# -------------------------------------------------------------------------------------------------- selectors


@dataclass(frozen=True)
class Selector:
    """Which bundles a shape or event applies to: all filters must match; ``fraction`` samples the rest."""

    workloads: tuple[str, ...] = ()
    tenants: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()
    bundles: tuple[str, ...] = ()
    fraction: float | None = None

    @property
    def is_all(self) -> bool:
        return (
            not (self.workloads or self.tenants or self.namespaces or self.bundles) and self.fraction is None
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in ("workloads", "tenants", "namespaces", "bundles"):
            if getattr(self, name):
                out[name] = list(getattr(self, name))
        if self.fraction is not None:
            out["fraction"] = self.fraction
        return out


def parse_selector(parent: Node, key: str = "select") -> Selector:
    if not parent.has(key):
        parent.raw(key, None)
        return Selector()
    node = parent.child(key)
    fraction = node.raw("fraction", None)
    if fraction is not None:
        fraction = check_number(
            fraction, source=node.source, field=node.where("fraction"), minimum=0.0, maximum=1.0
        )
    sel = Selector(
        workloads=node.string_list("workloads", ()),
        tenants=node.string_list("tenants", ()),
        namespaces=node.string_list("namespaces", ()),
        bundles=node.string_list("bundles", ()),
        fraction=fraction,
    )
    node.finish(("workloads", "tenants", "namespaces", "bundles", "fraction"))
    return sel


# ----------------------------------------------------------------------------------------------------- shapes

SHAPE_KINDS: dict[str, tuple[str, ...]] = {
    "diurnal": ("amplitude", "period", "peak"),
    "ramp": ("start", "end", "from", "to"),
    "step": ("at", "factor", "until", "before"),
    "onoff": ("period", "on", "stops", "phase", "catchup"),
    "spikes": ("rate_per_hour", "duration", "amplitude"),
    "noise": ("sigma",),
}
"""Traffic shape kinds and their parameters (see docs/scenarios.md)."""


@dataclass(frozen=True)
class Shape:
    """A modulation of the selected bundles' traffic over time."""

    kind: str
    params: tuple[tuple[str, Any], ...]
    select: Selector = field(default_factory=Selector)

    def param(self, name: str) -> Any:
        return dict(self.params)[name]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, **dict(self.params)}
        out = {k: v for k, v in out.items() if v is not None}
        if not self.select.is_all:
            out["select"] = self.select.to_dict()
        return out


def parse_shape(node: Node) -> Shape:
    kind = node.string("kind", choices=tuple(SHAPE_KINDS))
    params: list[tuple[str, Any]] = []
    if kind == "diurnal":
        params = [
            ("amplitude", node.number("amplitude", minimum=0.0, maximum=1.0)),
            ("period", node.duration("period", "1d")),
            ("peak", node.duration("peak", "14h")),
        ]
        if dict(params)["period"] <= 0:
            raise node.error("period", "must be greater than 0")
    elif kind == "ramp":
        start, end = node.duration("start"), node.duration("end")
        if end < start:
            raise node.error("end", "must not be before start", node.raw("end"))
        params = [
            ("start", start),
            ("end", end),
            ("from", node.number("from", 1.0, minimum=0.0)),
            ("to", node.number("to", minimum=0.0)),
        ]
    elif kind == "step":
        until = node.raw("until", None)
        before = node.raw("before", None)
        params = [
            ("at", node.duration("at")),
            ("factor", node.number("factor", minimum=0.0)),
            ("until", None if until is None else node.duration("until")),
            ("before", None if before is None else node.number("before", minimum=0.0)),
        ]
    elif kind == "onoff":
        period = node.duration("period")
        on = node.duration("on")
        if period <= 0 or on > period:
            raise node.error("on", "must be within (0, period]", node.raw("on"))
        params = [
            ("period", period),
            ("on", on),
            ("stops", node.string("stops", "consumers", choices=("consumers", "producers"))),
            ("phase", node.string("phase", "random", choices=("random", "aligned"))),
            ("catchup", node.number("catchup", 2.0, minimum=1.0)),
        ]
    elif kind == "spikes":
        params = [
            ("rate_per_hour", node.number("rate_per_hour", minimum=0.0)),
            ("duration", node.duration("duration")),
            ("amplitude", node.number("amplitude", minimum=0.0)),
        ]
    elif kind == "noise":
        params = [("sigma", node.number("sigma", minimum=0.0))]
    select = parse_selector(node)
    node.finish(("kind", *SHAPE_KINDS[kind], "select"))
    return Shape(kind, tuple(params), select)


# -------------------------------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class Workload:
    """A family of bundles: how many, their names, sizes and base traffic, and their shapes."""

    name: str
    tenant_prefix: str = "tenant"
    tenants: int = 1
    namespaces: int = 1
    bundles: int = 4
    topics: Distribution = field(default_factory=lambda: Distribution.constant(10))
    producers: Distribution = field(default_factory=lambda: Distribution.constant(1))
    consumers: Distribution = field(default_factory=lambda: Distribution.constant(1))
    msg_rate_in: Distribution = field(default_factory=lambda: Distribution.constant(100))
    msg_size: Distribution = field(default_factory=lambda: Distribution.constant(1024))
    fanout: Distribution = field(default_factory=lambda: Distribution.constant(1))
    shapes: tuple[Shape, ...] = ()
    brokers: tuple[int, ...] = ()

    @property
    def num_bundles(self) -> int:
        return self.tenants * self.namespaces * self.bundles


_WORKLOAD_FIELDS = (
    "name",
    "tenant_prefix",
    "tenants",
    "namespaces",
    "bundles",
    "topics",
    "producers",
    "consumers",
    "msg_rate_in",
    "msg_size",
    "fanout",
    "shapes",
    "brokers",
)


def parse_workload(node: Node, index: int) -> Workload:
    default = Workload(name=f"workload-{index}")
    prefix = node.string("tenant_prefix", "tenant")
    if not prefix or "/" in prefix or ":" in prefix:
        raise node.error("tenant_prefix", "must be a non-empty name without '/' or ':'", prefix)
    brokers_raw = node.list("brokers", [])
    brokers = []
    for i, b in enumerate(brokers_raw):
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise InputError(
                "expected broker numbers (1 = broker-0001)",
                source=node.source,
                field=f"{node.where('brokers')}[{i}]",
                value=b,
            )
        brokers.append(int(b))
    workload = Workload(
        name=node.string("name", default.name),
        tenant_prefix=prefix,
        tenants=node.integer("tenants", 1, minimum=1),
        namespaces=node.integer("namespaces", 1, minimum=1),
        bundles=node.integer("bundles", 4, minimum=1),
        topics=parse_distribution(node, "topics", default.topics, minimum=1),
        producers=parse_distribution(node, "producers", default.producers),
        consumers=parse_distribution(node, "consumers", default.consumers),
        msg_rate_in=parse_distribution(node, "msg_rate_in", default.msg_rate_in),
        msg_size=parse_distribution(node, "msg_size", default.msg_size, minimum=1),
        fanout=parse_distribution(node, "fanout", default.fanout),
        shapes=tuple(parse_shape(s) for s in node.nodes("shapes")),
        brokers=tuple(brokers),
    )
    node.finish(_WORKLOAD_FIELDS)
    return workload


@dataclass
class BundlePopulation:
    """Every bundle of a scenario, sorted by name (the snapshot order), with its static properties."""

    names: tuple[str, ...]
    namespace_index: IntArray
    namespaces: tuple[str, ...]
    tenant_index: IntArray
    tenants: tuple[str, ...]
    workload_index: IntArray
    workloads: tuple[str, ...]
    topics: IntArray
    producers: IntArray
    consumers: IntArray
    base_rate_in: FloatArray
    fanout: FloatArray
    msg_size: FloatArray
    pinned_brokers: tuple[tuple[int, ...], ...]  # per workload: broker numbers (1-based), () = free

    @property
    def size(self) -> int:
        return len(self.names)

    def select(self, selector: Selector, rng: np.random.Generator) -> IntArray | None:
        """Indices of the bundles matching ``selector`` (None = every bundle)."""
        if selector.is_all:
            return None
        mask = np.ones(self.size, dtype=np.bool_)
        if selector.workloads:
            wanted = np.array([_match_any(w, selector.workloads) for w in self.workloads], dtype=np.bool_)
            mask &= wanted[self.workload_index]
        if selector.tenants:
            wanted = np.array([_match_any(t, selector.tenants) for t in self.tenants], dtype=np.bool_)
            mask &= wanted[self.tenant_index]
        if selector.namespaces:
            wanted = np.array([_match_any(ns, selector.namespaces) for ns in self.namespaces], dtype=np.bool_)
            mask &= wanted[self.namespace_index]
        if selector.bundles:
            mask &= np.array([_match_any(b, selector.bundles) for b in self.names], dtype=np.bool_)
        idx = np.flatnonzero(mask).astype(np.int64)
        if selector.fraction is not None:
            k = round(selector.fraction * idx.size)
            idx = np.sort(rng.choice(idx, size=k, replace=False)) if k < idx.size else idx
        return idx


def _match_any(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def build_population(workloads: Sequence[Workload], rng: np.random.Generator) -> BundlePopulation:
    """Generate every bundle; names are unique and the arrays are sorted by bundle name."""
    names: list[str] = []
    ns_names: list[str] = []
    ns_of: list[int] = []
    tenant_names: list[str] = []
    tenant_of: list[int] = []
    workload_of: list[int] = []
    columns: dict[str, list[FloatArray]] = {
        k: [] for k in ("topics", "producers", "consumers", "rate", "fanout", "size")
    }
    next_tenant: dict[str, int] = {}
    for w, workload in enumerate(workloads):
        first = next_tenant.get(workload.tenant_prefix, 0)
        next_tenant[workload.tenant_prefix] = first + workload.tenants
        ranges = even_ranges(workload.bundles)
        for t in range(workload.tenants):
            tenant = f"{workload.tenant_prefix}-{first + t:03d}"
            tenant_names.append(tenant)
            for k in range(workload.namespaces):
                namespace = f"{tenant}/ns-{k:04d}"
                ns_names.append(namespace)
                for lo, hi in ranges:
                    names.append(bundle_name(namespace, lo, hi))
                    ns_of.append(len(ns_names) - 1)
                    tenant_of.append(len(tenant_names) - 1)
                    workload_of.append(w)
        n = workload.num_bundles
        topics = workload.topics.sample_counts(rng, n, minimum=1)
        columns["topics"].append(topics.astype(np.float64))
        columns["producers"].append((topics * workload.producers.sample_counts(rng, n)).astype(np.float64))
        columns["consumers"].append((topics * workload.consumers.sample_counts(rng, n)).astype(np.float64))
        columns["rate"].append(np.maximum(workload.msg_rate_in.sample(rng, n), 0.0))
        columns["fanout"].append(np.maximum(workload.fanout.sample(rng, n), 0.0))
        columns["size"].append(np.maximum(workload.msg_size.sample(rng, n), 1.0))
    if len(set(names)) != len(names):
        raise InputError(
            "two workloads generate the same bundle names; give them different tenant_prefix values",
            field="workloads",
        )
    order = np.argsort(np.array(names, dtype=object), kind="stable")
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in columns.items()}
    return BundlePopulation(
        names=tuple(names[i] for i in order),
        namespace_index=np.asarray(ns_of, dtype=np.int64)[order],
        namespaces=tuple(ns_names),
        tenant_index=np.asarray(tenant_of, dtype=np.int64)[order],
        tenants=tuple(tenant_names),
        workload_index=np.asarray(workload_of, dtype=np.int64)[order],
        workloads=tuple(w.name for w in workloads),
        topics=cat["topics"][order].astype(np.int64),
        producers=cat["producers"][order].astype(np.int64),
        consumers=cat["consumers"][order].astype(np.int64),
        base_rate_in=cat["rate"][order],
        fanout=cat["fanout"][order],
        msg_size=cat["size"][order],
        pinned_brokers=tuple(w.brokers for w in workloads),
    )


# ---------------------------------------------------------------------------------------------- traffic model


@dataclass
class Traffic:
    """Per-bundle traffic at one instant: message rates (msg/s) and throughputs (bytes/s)."""

    rate_in: FloatArray
    rate_out: FloatArray
    tp_in: FloatArray
    tp_out: FloatArray


@dataclass
class _CompiledShape:
    shape: Shape
    idx: IntArray | None
    state: FloatArray | None = None  # spikes: active-until; onoff: backlog (msgs)
    phase: FloatArray | None = None  # onoff: per-bundle phase offset


class TrafficModel:
    """Evaluates every bundle's traffic at tick times; stateful shapes (spikes, backlog) advance per call.

    Calls must come in increasing time order, one per tick of ``tick_s`` seconds.
    """

    def __init__(
        self,
        population: BundlePopulation,
        shapes: Sequence[tuple[Shape, IntArray | None]],
        rng: np.random.Generator,
        tick_s: float,
    ) -> None:
        self.pop = population
        self.rng = rng
        self.tick_s = tick_s
        self.shapes: list[_CompiledShape] = []
        for shape, idx in shapes:
            compiled = _CompiledShape(shape, idx)
            n = population.size if idx is None else idx.size
            if shape.kind == "spikes":
                compiled.state = np.full(n, -np.inf)
            elif shape.kind == "onoff":
                compiled.state = np.zeros(n)
                period = float(shape.param("period"))
                if shape.param("phase") == "random":
                    # whole ticks, so that the on/off state is the same through a tick
                    steps = max(round(period / tick_s), 1)
                    compiled.phase = rng.integers(0, steps, n).astype(np.float64) * tick_s
                else:
                    compiled.phase = np.zeros(n)
            self.shapes.append(compiled)

    def at(self, t: float) -> Traffic:
        pop = self.pop
        factor = np.ones(pop.size)
        onoff: list[_CompiledShape] = []
        for c in self.shapes:
            kind = c.shape.kind
            if kind == "onoff":
                onoff.append(c)
                continue
            f = self._factor(c, t)
            if f is None:
                continue
            if c.idx is None:
                factor *= f
            else:
                factor[c.idx] *= f
        rate_in = pop.base_rate_in * factor
        rate_out = rate_in * pop.fanout
        for c in onoff:
            self._apply_onoff(c, t, rate_in, rate_out)
        return Traffic(rate_in, rate_out, rate_in * pop.msg_size, rate_out * pop.msg_size)

    def _factor(self, c: _CompiledShape, t: float) -> FloatArray | float | None:
        p = dict(c.shape.params)
        kind = c.shape.kind
        n = self.pop.size if c.idx is None else c.idx.size
        if kind == "diurnal":
            return float(1.0 + p["amplitude"] * math.cos(2 * math.pi * (t - p["peak"]) / p["period"]))
        if kind == "ramp":
            return float(p["from"] + (p["to"] - p["from"]) * ramp_fraction(t, p["start"], p["end"]))
        if kind == "step":
            if t < p["at"]:
                return None if p.get("before") is None else float(p["before"])
            active = p["until"] is None or t < p["until"]
            return float(p["factor"]) if active else None
        if kind == "noise":
            sigma = p["sigma"]
            if sigma == 0:
                return None
            noise: FloatArray = np.exp(sigma * self.rng.standard_normal(n) - 0.5 * sigma * sigma)
            return noise
        if kind == "spikes":
            assert c.state is not None
            prob = 1.0 - math.exp(-p["rate_per_hour"] / 3600.0 * self.tick_s)
            starts = int(self.rng.binomial(n, prob)) if n else 0
            if starts:
                chosen = self.rng.integers(0, n, starts)
                idle = c.state[chosen] <= t
                c.state[chosen[idle]] = t + p["duration"]
            spikes: FloatArray = np.where(c.state > t, p["amplitude"], 1.0)
            return spikes
        raise ValueError(kind)  # pragma: no cover

    def _apply_onoff(self, c: _CompiledShape, t: float, rate_in: FloatArray, rate_out: FloatArray) -> None:
        p = dict(c.shape.params)
        assert c.phase is not None and c.state is not None
        idx = c.idx if c.idx is not None else slice(None)
        on = ((t + c.phase) % p["period"]) < p["on"]
        if p["stops"] == "producers":
            rate_in[idx] = np.where(on, rate_in[idx], 0.0)
            rate_out[idx] = np.where(on, rate_out[idx], 0.0)
            return
        normal = rate_out[idx]
        backlog = c.state
        # consumers stopped: nothing dispatched, the backlog grows by what would have been dispatched
        backlog += np.where(on, 0.0, normal * self.tick_s)
        extra = np.where(on, np.minimum(backlog, (p["catchup"] - 1.0) * normal * self.tick_s), 0.0)
        backlog -= extra
        rate_out[idx] = np.where(on, normal + extra / self.tick_s, 0.0)
