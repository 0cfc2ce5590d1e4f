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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shedlab.core.sim.spec import Node, check_number, number_hint
from shedlab.errors import InputError
from shedlab.kernels import normal_affine
from shedlab.model.bundles import bundle_index, bundle_name, even_boundaries, even_ranges, topic_hash
from shedlab.model.pulsar import is_named_entity

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


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
    """A distribution of per-bundle values; ``clip`` bounds the samples (None = unbounded).

    ``source`` and ``where`` say where the scenario wrote it (file, field), for the one error a draw can
    raise: parameters that are each finite but whose samples overflow (a lognormal's ``sigma`` of a few
    hundred, a Pareto ``alpha`` near 0). Without it such a run went on with infinite rates and NaN
    usage and reported a table of dashes, as if nothing were wrong.
    """

    kind: str
    params: tuple[tuple[str, Any], ...]
    clip_low: float | None = None
    clip_high: float | None = None
    source: str | None = field(default=None, compare=False)
    where: str | None = field(default=None, compare=False)

    @classmethod
    def constant(cls, value: float) -> Distribution:
        return cls("constant", (("value", float(value)),))

    def param(self, name: str) -> Any:
        return dict(self.params)[name]

    def sample(self, rng: np.random.Generator, n: int) -> FloatArray:
        """``n`` samples, clipped; refused (:class:`InputError`) where one is not a finite number."""
        with np.errstate(over="ignore", invalid="ignore"):
            result = self._draw(rng, n)
        if not np.isfinite(result).all():
            raise InputError(
                f"the {self.kind} distribution's samples overflow to infinity",
                source=self.source,
                field=self.where,
                hint="use smaller parameters, or bound the samples with clip: [low, high]",
            )
        return result

    def _draw(self, rng: np.random.Generator, n: int) -> FloatArray:
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
    if not isinstance(raw, Mapping):  # a list or a text: Node's "expected a mapping" hides the number form
        raise InputError(
            "expected a number or a distribution {dist: KIND, ...}",
            source=source,
            field=where,
            value=raw,
            hint=number_hint(raw),
        )
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
    clip_low, clip_high = _parse_clip(node, minimum)
    if clip_low is None and minimum is not None and kind in ("normal",):
        clip_low = minimum
    node.finish(("dist", *DISTRIBUTIONS[kind], "clip"))
    return Distribution(kind, tuple(params), clip_low, clip_high, source, where)


def _parse_clip(node: Node, minimum: float) -> tuple[float | None, float | None]:
    """``clip: [low, high]`` (null for an open side), each bound at least the quantity's ``minimum`` and
    ``low`` not above ``high``: a bound below it drew negative rates, clients or message sizes of 0,
    and an inverted pair set every sample to ``high``, all silently (until 29 Nov 2026)."""
    clip = node.raw("clip", None)
    if clip is None:
        return None, None
    if not isinstance(clip, list) or len(clip) != 2:
        raise node.error("clip", "expected [low, high] (null for no bound)", clip)
    low, high = (
        None
        if c is None
        else check_number(c, source=node.source, field=f"{node.where('clip')}[{i}]", minimum=minimum)
        for i, c in enumerate(clip)
    )
    if low is not None and high is not None and high < low:
        raise node.error("clip", "expected [low, high] with low not above high", clip)
    return low, high


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

    @property
    def peak(self) -> float:
        """The highest value the signal takes before its noise."""
        p = dict(self.params)
        levels = {
            "constant": ("value",),
            "onoff": ("low", "high"),
            "ramp": ("from", "to"),
            "step": ("before", "after"),
        }
        if self.kind == "diurnal":
            return p["mean"] + abs(p["amplitude"])
        return max(p[name] for name in levels[self.kind])

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, **dict(self.params)}
        if self.noise:
            out["noise"] = self.noise
        return out


_SIGNAL_DURATIONS = {"period", "peak", "on", "offset", "start", "end", "at"}
_SIGNAL_SIGNED = {"amplitude"}
"""The one level a signal takes below 0 (a diurnal's sign is its phase); every other level is a fraction of
the machine, at least 0, as a plain number is: ``{kind: constant, value: -0.5}`` was taken and read as 0."""
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
    if not isinstance(raw, Mapping):  # "0.5" or a list: Node's "expected a mapping" hid the number form
        raise InputError(
            "expected a number or a signal {kind: KIND, ...}",
            source=parent.source,
            field=where,
            value=raw,
            hint=number_hint(raw),
        )
    node = Node(raw, parent.source, where)
    kind = node.string("kind", choices=tuple(SIGNAL_KINDS))
    params: list[tuple[str, float]] = []
    for name in SIGNAL_KINDS[kind]:
        given = () if name not in _SIGNAL_DEFAULTS else (_SIGNAL_DEFAULTS[name],)
        if name in _SIGNAL_DURATIONS:
            value = node.duration(name, *given)
        else:
            value = node.number(name, *given, minimum=None if name in _SIGNAL_SIGNED else 0.0)
        params.append((name, value))
    p = dict(params)
    if kind in ("diurnal", "onoff") and p["period"] <= 0:
        raise node.error("period", "must be greater than 0", p["period"])
    if kind == "onoff":
        _check_on(node, p["period"], p["on"])
    if kind == "ramp" and p["end"] < p["start"]:  # it jumped to `to` at `start`: the shape's ramp refuses it
        raise node.error("end", "must not be before start", node.raw("end"))
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
    if fraction is not None:  # 0 selected no bundle: the shape or event did nothing, silently (28 Nov 2026)
        fraction = check_number(
            fraction,
            source=node.source,
            field=node.where("fraction"),
            minimum=0.0,
            maximum=1.0,
            exclusive_minimum=True,
        )
    sel = Selector(
        workloads=node.string_list("workloads", ()),
        tenants=node.string_list("tenants", ()),
        namespaces=node.string_list("namespaces", ()),
        bundles=node.string_list("bundles", ()),
        fraction=fraction,
    )
    for name in ("workloads", "tenants", "namespaces", "bundles"):
        if node.has(name) and not getattr(sel, name):  # no filter: every bundle, where it names none
            raise node.error(
                name,
                "an empty list selects every bundle: leave the filter out, or name what to select",
                node.raw(name),
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


def _spike_duration(node: Node) -> float:
    """A spike lasts more than 0: one of no duration raised nothing, silently (accepted until 28 Nov 2026)."""
    duration = node.duration("duration")
    if duration <= 0:
        raise node.error("duration", "must be more than 0", node.raw("duration"))
    return duration


def _check_on(node: Node, period: float, on: float) -> None:
    """An on/off cycle's ``on`` is within (0, period]. ``on: 0`` (never on: until 28 Nov 2026 accepted,
    though this message already said so) or beyond the period (always on) is no cycle: a constant,
    or a ``step``, says that."""
    if not 0 < on <= period:
        raise node.error("on", "must be within (0, period]", node.raw("on"))


def _onoff_phase(node: Node) -> str | float:
    """``random``, ``aligned`` or a duration: every selected bundle's cycle shifted by that much."""
    raw = node.raw("phase", "random")
    if raw in ("random", "aligned"):
        return str(raw)
    return node.duration("phase")


MAX_FACTOR = 1e6
"""The largest multiplier a traffic shape (ramp, step, catch-up, spikes) or a traffic event may apply.

With :data:`MAX_BUNDLE_MSG_RATE` and :data:`MAX_BUNDLE_THROUGHPUT` it keeps every rate, usage and
squared score the simulator computes finite: a factor of 1e300 was accepted and ran on with infinite
rates and NaN scores, reporting a table of dashes. A million is far beyond any load change a scenario
models (Pulsar's published surges are a few times the usual rate)."""

MAX_NOISE_SIGMA = 3.0
"""The largest ``sigma`` of a ``noise`` shape. Its factor is ``exp(sigma·z − sigma²/2)``: mean 1, but a
median of ``exp(−sigma²/2)``, 1.1 % of the traffic at 3. Larger, the mean rests on ticks too rare to
come in any run, and every tick carries next to nothing (``sigma: 1000``: the traffic was 0 at every
tick, silently)."""

MAX_BUNDLE_MSG_RATE = 1e12
"""msg/s a bundle may carry in or out before the shapes: a million times what Pulsar's largest
published brokers carry (about 10^6 msg/s each), so only a typing slip or an overflowing distribution
reaches it."""

MAX_BUNDLE_THROUGHPUT = 1e15
"""Bytes/s a bundle may carry out before the shapes (a petabyte per second; the same margin)."""


def _noise_sigma(node: Node) -> float:
    """A ``noise`` shape's ``sigma``, at most :data:`MAX_NOISE_SIGMA`."""
    sigma = node.number("sigma", minimum=0.0)
    if sigma > MAX_NOISE_SIGMA:
        median = math.exp(-sigma * sigma / 2)
        raise node.error(
            "sigma",
            f"must be at most {MAX_NOISE_SIGMA:g}",
            node.raw("sigma"),
            hint=f"the median tick would carry {100 * median:.2g} % of the mean traffic (exp(-sigma²/2)),"
            " almost every tick next to none",
        )
    return sigma


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
            ("from", node.number("from", 1.0, minimum=0.0, maximum=MAX_FACTOR)),
            ("to", node.number("to", minimum=0.0, maximum=MAX_FACTOR)),
        ]
    elif kind == "step":
        until = node.raw("until", None)
        before = node.raw("before", None)
        params = [
            ("at", node.duration("at")),
            ("factor", node.number("factor", minimum=0.0, maximum=MAX_FACTOR)),
            ("until", None if until is None else node.duration("until")),
            ("before", None if before is None else node.number("before", minimum=0.0, maximum=MAX_FACTOR)),
        ]
        at, end = params[0][1], params[2][1]
        if end is not None and end <= at:  # a step that ends before it starts would never act
            raise node.error("until", "must be after at", until)
    elif kind == "onoff":
        period = node.duration("period")
        on = node.duration("on")
        if period <= 0:
            raise node.error("period", "must be greater than 0", node.raw("period"))
        _check_on(node, period, on)
        params = [
            ("period", period),
            ("on", on),
            ("stops", node.string("stops", "consumers", choices=("consumers", "producers"))),
            ("phase", _onoff_phase(node)),
            ("catchup", node.number("catchup", 2.0, minimum=1.0, maximum=MAX_FACTOR)),
        ]
    elif kind == "spikes":
        params = [
            # a rate of 0 raised no spike, as a duration of 0 did: the shape did nothing, silently
            ("rate_per_hour", node.number("rate_per_hour", minimum=0.0, exclusive_minimum=True)),
            ("duration", _spike_duration(node)),
            ("amplitude", node.number("amplitude", minimum=0.0, maximum=MAX_FACTOR)),
        ]
    elif kind == "noise":
        params = [("sigma", _noise_sigma(node))]
    select = parse_selector(node)
    node.finish(("kind", *SHAPE_KINDS[kind], "select"))
    return Shape(kind, tuple(params), select)


# -------------------------------------------------------------------------------------------------- workloads


@dataclass(frozen=True)
class HashedTopics:
    """Topics hashed into a namespace's bundles: ``topics`` per namespace, each with ``partitions``.

    Names are ``<domain>://<tenant>/<namespace>/<prefix>-NNNN`` and, for a partitioned topic, every
    ``...-partition-K``; each is placed with :func:`shedlab.model.bundles.topic_hash` and
    :func:`~shedlab.model.bundles.bundle_index`, as Pulsar places them.
    """

    topics: int
    partitions: int = 0
    prefix: str = "topic"
    domain: str = "persistent"

    def topic_names(self, namespace: str) -> list[str]:
        """Every topic (partition) name of ``namespace``, topic by topic, partitions in order."""
        names: list[str] = []
        for i in range(self.topics):
            topic = f"{self.domain}://{namespace}/{self.prefix}-{i:04d}"
            if self.partitions:
                names.extend(f"{topic}-partition-{k}" for k in range(self.partitions))
            else:
                names.append(topic)
        return names


@dataclass(frozen=True)
class Workload:
    """A family of bundles: how many, their names, sizes and base traffic, and their shapes.

    With ``hashed`` the workload is made of topics hashed into its namespaces' bundles, and the
    distributions are per topic instead of per bundle; ``namespace`` names one namespace explicitly
    (``tenant/ns``), which other workloads may share.
    """

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
    namespace: str | None = None
    hashed: HashedTopics | None = None

    def namespace_names(self, first_tenant: int) -> list[tuple[str, str]]:
        """(tenant, namespace) of every namespace, tenants numbered from ``first_tenant``."""
        if self.namespace is not None:
            return [(self.namespace.split("/")[0], self.namespace)]
        out: list[tuple[str, str]] = []
        for t in range(self.tenants):
            tenant = f"{self.tenant_prefix}-{first_tenant + t:03d}"
            out.extend((tenant, f"{tenant}/ns-{k:04d}") for k in range(self.namespaces))
        return out


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
    "namespace",
    "hashed",
)


def _parse_hashed(node: Node) -> HashedTopics | None:
    if not node.has("hashed"):
        node.raw("hashed", None)
        return None
    sub = node.child("hashed")
    prefix = sub.string("prefix", "topic")
    if ":" in prefix or not _is_name(prefix):  # "my topic" was taken: no Pulsar topic has such a name
        raise sub.error("prefix", f"must be a non-empty name, {_NAME_CHARACTERS}", prefix)
    if "-partition-" in f"{prefix}-0000":  # Pulsar reads such a name as a partition of another topic
        raise sub.error("prefix", "must not make names with '-partition-' (a partition's mark)", prefix)
    hashed = HashedTopics(
        topics=sub.integer("topics", minimum=1),
        partitions=sub.integer("partitions", 0, minimum=0),
        prefix=prefix,
        domain=sub.string("domain", "persistent", choices=("persistent", "non-persistent")),
    )
    sub.finish(("topics", "partitions", "prefix", "domain"))
    if node.has("topics"):
        raise node.error("topics", "hashed workloads count topics in hashed.topics (per namespace)")
    return hashed


_NAME_CHARACTERS = "each part ASCII letters, digits and _ - = . only, not dots alone"


def _is_name(name: str) -> bool:
    """A tenant or namespace name: Pulsar's ``NamedEntity.checkName`` (:func:`is_named_entity`), not empty
    and not ``.`` or ``..``, which the regular expression lets through but which are relative steps in the
    sandbox's admin paths and znodes (ZooKeeper refuses them); ``:`` is refused by the callers."""
    return bool(name) and is_named_entity(name) and name.strip(".") != ""


def _parse_namespace(node: Node) -> str | None:
    namespace = node.optional_string("namespace")
    if namespace is None:
        return None
    parts = namespace.split("/")
    if len(parts) != 2 or ":" in namespace or not all(map(_is_name, parts)):
        raise node.error("namespace", f"expected tenant/namespace, {_NAME_CHARACTERS}", namespace)
    for key in ("tenants", "namespaces", "tenant_prefix"):
        if node.has(key):
            raise node.error(key, "not with an explicit namespace (it names one namespace)")
    return namespace


def parse_workload(node: Node, index: int) -> Workload:
    default = Workload(name=f"workload-{index}")
    prefix = node.string("tenant_prefix", "tenant")
    if ":" in prefix or not _is_name(prefix):
        raise node.error("tenant_prefix", f"must be a non-empty name, {_NAME_CHARACTERS}", prefix)
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
    namespace = _parse_namespace(node)
    hashed = _parse_hashed(node)
    workload = Workload(
        name=node.name("name", default.name),
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
        namespace=namespace,
        hashed=hashed,
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
    units: BundlePopulation | None = None
    """Workloads sharing bundles: one entry per (workload, bundle) share, sorted by bundle name."""
    unit_bundle: IntArray | None = None
    """The bundle of every unit (None: every bundle is one unit)."""
    stored: BoolArray | None = None
    """Per entry, whether its topics are persistent, so that their messages are written to BookKeeper
    (``hashed.domain``); None: every entry's are. Kept where the traffic is computed: on the units when
    workloads share bundles (a bundle may then hold both kinds)."""

    @property
    def size(self) -> int:
        return len(self.names)

    def select(self, selector: Selector, rng: np.random.Generator) -> IntArray | None:
        """Indices of the bundles matching ``selector`` (None = every bundle).

        A bundle that workloads share (:attr:`units`) matches a workload selector if any of them has a
        share in it: ``workload_index`` names only the first, and ``leader_state.recently_unloaded``
        selecting the second workload missed the shared bundles. (Shapes and traffic events select
        units, each workload's own share.)
        """
        if selector.is_all:
            return None
        mask = np.ones(self.size, dtype=np.bool_)
        if selector.workloads:
            wanted = np.array([_match_any(w, selector.workloads) for w in self.workloads], dtype=np.bool_)
            if self.units is None or self.unit_bundle is None:
                mask &= wanted[self.workload_index]
            else:
                shared = np.zeros(self.size, dtype=np.bool_)
                shared[self.unit_bundle[wanted[self.units.workload_index]]] = True
                mask &= shared
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


def namespace_plan(workloads: Sequence[Workload]) -> list[list[tuple[str, str]]]:
    """Each workload's (tenant, namespace) pairs: tenants numbered per ``tenant_prefix`` in workload
    order (``orders-000``, ``orders-001``, then a second ``orders`` workload's ``orders-002``), an
    explicit ``namespace:`` taking no number."""
    next_tenant: dict[str, int] = {}
    plan = []
    for workload in workloads:
        first = next_tenant.get(workload.tenant_prefix, 0)
        if workload.namespace is None:
            next_tenant[workload.tenant_prefix] = first + workload.tenants
        plan.append(workload.namespace_names(first))
    return plan


def namespace_bundles(workloads: Sequence[Workload]) -> int:
    """How many bundles the workloads' namespaces have, a namespace that several workloads share counted
    once (the bundles are the same ones: :func:`build_population` merges them by name). Workloads that
    share one must agree on its count (checked when the scenario loads); until then the largest counts.
    With hashed topics this is at most the population's size: a bundle no topic hashes into stays out."""
    per_namespace: dict[str, int] = {}
    for workload, spaces in zip(workloads, namespace_plan(workloads), strict=True):
        for _, namespace in spaces:
            per_namespace[namespace] = max(per_namespace.get(namespace, 0), workload.bundles)
    return sum(per_namespace.values())


_SELECTABLE = ("workloads", "tenants", "namespaces")
"""The selector fields whose patterns are checked against names (``bundles`` are not: see below)."""


def workload_names(workloads: Sequence[Workload]) -> list[dict[str, list[str]]]:
    """Per workload, the names a selector's ``workloads``, ``tenants`` and ``namespaces`` patterns can
    match among its own (a workload's shape selects within its own bundles only)."""
    return [
        {
            "workloads": [workload.name],
            "tenants": [tenant for tenant, _ in spaces],
            "namespaces": [namespace for _, namespace in spaces],
        }
        for workload, spaces in zip(workloads, namespace_plan(workloads), strict=True)
    ]


def selectable_names(per_workload: Sequence[Mapping[str, Sequence[str]]]) -> dict[str, list[str]]:
    """The scenario's names (what a traffic event's patterns can match): :func:`workload_names`, joined."""
    return {field: [name for names in per_workload for name in names[field]] for field in _SELECTABLE}


def bundles_at_most(
    selector: Selector, workloads: Sequence[Workload], plan: Sequence[Sequence[tuple[str, str]]]
) -> int:
    """How many bundles of ``workloads`` (their :func:`namespace_plan` entries in ``plan``) the
    ``workloads``, ``tenants`` and ``namespaces`` patterns of ``selector`` can match: at most, since
    ``bundles`` patterns are not read and a hashed workload's topics may miss some of its bundles."""
    return sum(
        workload.bundles
        for workload, spaces in zip(workloads, plan, strict=True)
        if not selector.workloads or _match_any(workload.name, selector.workloads)
        for tenant, namespace in spaces
        if (not selector.tenants or _match_any(tenant, selector.tenants))
        and (not selector.namespaces or _match_any(namespace, selector.namespaces))
    )


def unmatched_pattern(selector: Selector, names: Mapping[str, Sequence[str]]) -> tuple[str, str] | None:
    """The first (field, pattern) of ``selector`` that matches none of ``names`` (one entry of
    :func:`workload_names`, or :func:`selectable_names`), or None: such a pattern selects nothing, and a
    shape or event that selects nothing does nothing without a word (a typo in a tenant's name). Bundle
    patterns are not checked: a hashed workload's bundles are known only once its topics are drawn."""
    for field_name, known in names.items():
        for pattern in getattr(selector, field_name):
            if not any(_match_any(name, (pattern,)) for name in known):
                return field_name, pattern
    return None


def build_population(
    workloads: Sequence[Workload], rng: np.random.Generator, source: str | None = None
) -> BundlePopulation:
    """Generate every bundle; names are unique and the arrays are sorted by bundle name.

    ``source`` (the scenario's file) goes into the errors of workloads that cannot be built together.

    Each workload contributes one *unit* per bundle it touches. Workloads sharing a namespace
    (``namespace:``) contribute units with the same bundle names: the bundle is then the sum of its
    units (topics, clients and traffic add up), and :attr:`BundlePopulation.units` keeps the units so
    that every workload's shapes apply to its own share only.
    """
    names: list[str] = []
    ns_index: dict[str, int] = {}
    ns_of: list[int] = []
    tenant_index: dict[str, int] = {}
    tenant_of: list[int] = []
    workload_of: list[int] = []
    stored_of: list[bool] = []
    bundles_of_ns: dict[str, int] = {}
    columns: dict[str, list[FloatArray]] = {
        k: [] for k in ("topics", "producers", "consumers", "rate", "fanout", "size")
    }
    for w, (workload, spaces) in enumerate(zip(workloads, namespace_plan(workloads), strict=True)):
        for tenant, namespace in spaces:
            if bundles_of_ns.setdefault(namespace, workload.bundles) != workload.bundles:
                raise InputError(
                    f"workloads sharing namespace {namespace} give it different bundle counts "
                    f"({bundles_of_ns[namespace]} and {workload.bundles})",
                    source=source,
                    field=f"workloads[{w}].bundles",
                )
            tenant_index.setdefault(tenant, len(tenant_index))
            ns_index.setdefault(namespace, len(ns_index))
        if workload.hashed is None:
            ranges = even_ranges(workload.bundles)
            unit_names = [bundle_name(ns, lo, hi) for _, ns in spaces for lo, hi in ranges]
            values = _bundle_values(workload, rng, len(unit_names))
            per_space = [workload.bundles] * len(spaces)
        else:
            unit_names, values, per_space = _hashed_values(workload, workload.hashed, spaces, rng)
        _check_scale(w, workload, values, source)
        for (tenant, namespace), count in zip(spaces, per_space, strict=True):
            ns_of.extend([ns_index[namespace]] * count)
            tenant_of.extend([tenant_index[tenant]] * count)
        names.extend(unit_names)
        workload_of.extend([w] * len(unit_names))
        stored_of.extend(
            [workload.hashed is None or workload.hashed.domain == "persistent"] * len(unit_names)
        )
        for k, v in values.items():
            columns[k].append(v)
    order = np.argsort(np.array(names, dtype=object), kind="stable")
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in columns.items()}
    units = BundlePopulation(
        names=tuple(names[i] for i in order),
        namespace_index=np.asarray(ns_of, dtype=np.int64)[order],
        namespaces=tuple(ns_index),
        tenant_index=np.asarray(tenant_of, dtype=np.int64)[order],
        tenants=tuple(tenant_index),
        workload_index=np.asarray(workload_of, dtype=np.int64)[order],
        workloads=tuple(w.name for w in workloads),
        topics=cat["topics"][order].astype(np.int64),
        producers=cat["producers"][order].astype(np.int64),
        consumers=cat["consumers"][order].astype(np.int64),
        base_rate_in=cat["rate"][order],
        fanout=cat["fanout"][order],
        msg_size=cat["size"][order],
        pinned_brokers=tuple(w.brokers for w in workloads),
        stored=None if all(stored_of) else np.asarray(stored_of, dtype=np.bool_)[order],
    )
    if len(set(units.names)) == len(units.names):
        return units
    return _merge_units(units)


def _check_scale(w: int, workload: Workload, values: dict[str, FloatArray], source: str | None) -> None:
    """Refuse a workload whose bundles exceed :data:`MAX_BUNDLE_MSG_RATE` or
    :data:`MAX_BUNDLE_THROUGHPUT`, naming the field that takes them there (each value finite, the
    products need not be: ``msg_rate_in: 1e300`` with ``msg_size: 1e300``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        rate_in = values["rate"]
        rate_out = rate_in * values["fanout"]
        peak = np.maximum(rate_in, rate_out) * values["size"]
    checks = (
        ("msg_rate_in", rate_in, MAX_BUNDLE_MSG_RATE, "msg/s in"),
        ("fanout", rate_out, MAX_BUNDLE_MSG_RATE, "msg/s out"),
        ("msg_size", peak, MAX_BUNDLE_THROUGHPUT, "bytes/s"),
    )
    for key, column, bound, unit in checks:
        top = float(column.max()) if column.size else 0.0
        if not top <= bound:
            raise InputError(
                f"a bundle of workload {workload.name!r} would carry {top:.3g} {unit}, above the "
                f"{bound:.0e} a bundle may carry",
                source=source,
                field=f"workloads[{w}].{key}",
            )


def _bundle_values(workload: Workload, rng: np.random.Generator, n: int) -> dict[str, FloatArray]:
    """Per-bundle values drawn from the workload's distributions (the draw order is part of the format)."""
    topics = workload.topics.sample_counts(rng, n, minimum=1)
    return {
        "topics": topics.astype(np.float64),
        "producers": (topics * workload.producers.sample_counts(rng, n)).astype(np.float64),
        "consumers": (topics * workload.consumers.sample_counts(rng, n)).astype(np.float64),
        "rate": np.maximum(workload.msg_rate_in.sample(rng, n), 0.0),
        "fanout": np.maximum(workload.fanout.sample(rng, n), 0.0),
        "size": np.maximum(workload.msg_size.sample(rng, n), 1.0),
    }


def _hashed_values(
    workload: Workload, hashed: HashedTopics, spaces: list[tuple[str, str]], rng: np.random.Generator
) -> tuple[list[str], dict[str, FloatArray], list[int]]:
    """Topics drawn per topic, partitions hashed into the bundles; bundles no topic lands in stay out.

    A partitioned topic's message rate is split evenly over its partitions; its message size and
    fanout hold for every partition, and its producers and consumers connect to every partition.
    """
    boundaries = even_boundaries(workload.bundles)
    ranges = even_ranges(workload.bundles)
    parts = max(hashed.partitions, 1)
    n = hashed.topics * len(spaces)
    producers = workload.producers.sample_counts(rng, n).astype(np.float64)
    consumers = workload.consumers.sample_counts(rng, n).astype(np.float64)
    rate = np.maximum(workload.msg_rate_in.sample(rng, n), 0.0) / parts
    fanout = np.maximum(workload.fanout.sample(rng, n), 0.0)
    size = np.maximum(workload.msg_size.sample(rng, n), 1.0)
    names: list[str] = []
    per_space: list[int] = []
    out: dict[str, list[NDArray[Any]]] = {
        k: [] for k in ("topics", "producers", "consumers", "rate", "fanout", "size")
    }
    for s, (_, namespace) in enumerate(spaces):
        topic_names = hashed.topic_names(namespace)
        where = bundle_index(np.fromiter(map(topic_hash, topic_names), dtype=np.int64), boundaries)
        of_topic = s * hashed.topics + np.arange(len(topic_names)) // parts  # each partition's topic
        m = workload.bundles
        r = rate[of_topic]
        total = np.bincount(where, weights=r, minlength=m)
        count = np.bincount(where, minlength=m)
        weight = np.where(total > 0, total, 1.0)
        mean_of = count.astype(np.float64)
        mean_of[count == 0] = 1.0
        # rate-weighted size and fanout (plain means for a bundle whose topics carry nothing)
        size_b = np.where(
            total > 0,
            np.bincount(where, weights=r * size[of_topic], minlength=m) / weight,
            np.bincount(where, weights=size[of_topic], minlength=m) / mean_of,
        )
        fanout_b = np.where(
            total > 0,
            np.bincount(where, weights=r * fanout[of_topic], minlength=m) / weight,
            np.bincount(where, weights=fanout[of_topic], minlength=m) / mean_of,
        )
        used = np.flatnonzero(count)
        names.extend(bundle_name(namespace, *ranges[b]) for b in used.tolist())
        per_space.append(int(used.size))
        out["topics"].append(count[used].astype(np.float64))
        out["producers"].append(np.bincount(where, weights=producers[of_topic], minlength=m)[used])
        out["consumers"].append(np.bincount(where, weights=consumers[of_topic], minlength=m)[used])
        out["rate"].append(total[used])
        out["fanout"].append(fanout_b[used])
        out["size"].append(np.maximum(size_b[used], 1.0))
    return names, {k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()}, per_space


def _merge_units(units: BundlePopulation) -> BundlePopulation:
    """Bundles from units sharing a name (workloads sharing a namespace): sums, rate-weighted means."""
    names, first, inverse = np.unique(
        np.array(units.names, dtype=object), return_index=True, return_inverse=True
    )
    n = len(names)
    unit_bundle: IntArray = inverse.astype(np.int64)

    def total(values: NDArray[Any]) -> FloatArray:
        result: FloatArray = np.bincount(unit_bundle, weights=values, minlength=n).astype(np.float64)
        return result

    rate = total(units.base_rate_in)
    weight = np.where(rate > 0, rate, 1.0)
    count = np.bincount(unit_bundle, minlength=n).astype(np.float64)
    size = np.where(
        rate > 0, total(units.base_rate_in * units.msg_size) / weight, total(units.msg_size) / count
    )
    fanout = np.where(
        rate > 0, total(units.base_rate_in * units.fanout) / weight, total(units.fanout) / count
    )
    return BundlePopulation(
        names=tuple(str(x) for x in names),
        namespace_index=units.namespace_index[first],
        namespaces=units.namespaces,
        tenant_index=units.tenant_index[first],
        tenants=units.tenants,
        workload_index=units.workload_index[first],
        workloads=units.workloads,
        topics=total(units.topics).astype(np.int64),
        producers=total(units.producers).astype(np.int64),
        consumers=total(units.consumers).astype(np.int64),
        base_rate_in=rate,
        fanout=fanout,
        msg_size=size,
        pinned_brokers=units.pinned_brokers,
        units=units,
        unit_bundle=unit_bundle,
    )


# ---------------------------------------------------------------------------------------------- traffic model


@dataclass
class Traffic:
    """Per-bundle traffic at one instant: message rates (msg/s) and throughputs (bytes/s)."""

    rate_in: FloatArray
    rate_out: FloatArray
    tp_in: FloatArray
    tp_out: FloatArray
    block: FloatArray | None = field(default=None, repr=False, compare=False)
    """When the four are the rows of one (4, m) array (the model's own traffic), that array: a local
    report takes it as its bundle values without a copy. Nobody writes into a tick's traffic."""
    stored: FloatArray | None = field(default=None, repr=False, compare=False)
    """The four rows again, of persistent topics only (:attr:`BundlePopulation.stored`): what BookKeeper
    writes and reads back. None: every topic is persistent, and the rows above are the stored ones."""


@dataclass
class _CompiledShape:
    shape: Shape
    idx: IntArray | None
    state: FloatArray | None = None  # spikes: active-until; onoff: backlog (msgs)
    phase: FloatArray | None = None  # onoff: per-bundle phase offset


def _into_bundles(
    rows: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    into: IntArray,
    bundles: int,
    stored: BoolArray | None,
) -> Traffic:
    """The units' traffic ``rows`` summed into their bundles (``into``), and its persistent part."""

    def summed(weights: FloatArray) -> FloatArray:
        out: FloatArray = np.bincount(into, weights=weights, minlength=bundles).astype(np.float64)
        return out

    rate_in, rate_out, tp_in, tp_out = (summed(v) for v in rows)
    kept = None if stored is None else np.stack([summed(v * stored) for v in rows])
    return Traffic(rate_in, rate_out, tp_in, tp_out, stored=kept)


class TrafficModel:
    """Evaluates every bundle's traffic at tick times; stateful shapes (spikes, backlog) advance per call.

    Calls must come in increasing time order, one per tick of ``tick_s`` seconds. With ``into`` (the
    bundle of every entry of ``population``: units of workloads sharing bundles) the traffic is summed
    into ``bundles`` bundles.
    """

    def __init__(
        self,
        population: BundlePopulation,
        shapes: Sequence[tuple[Shape, IntArray | None]],
        rng: np.random.Generator,
        tick_s: float,
        *,
        into: IntArray | None = None,
        bundles: int = 0,
    ) -> None:
        self.pop = population
        self.rng = rng
        self.tick_s = tick_s
        self.into = into
        self.bundles = bundles
        self.shapes: list[_CompiledShape] = []
        for shape, idx in shapes:
            compiled = _CompiledShape(shape, idx)
            n = population.size if idx is None else idx.size
            if shape.kind == "spikes":
                compiled.state = np.full(n, -np.inf)
            elif shape.kind == "onoff":
                compiled.state = np.zeros(n)
                period = float(shape.param("period"))
                phase = shape.param("phase")
                if isinstance(phase, float):  # a fixed shift: the cycle starts ``phase`` seconds early
                    compiled.phase = np.full(n, phase)
                elif phase == "random":
                    # whole ticks, so that the on/off state is the same through a tick
                    steps = max(round(period / tick_s), 1)
                    compiled.phase = rng.integers(0, steps, n).astype(np.float64) * tick_s
                else:
                    compiled.phase = np.zeros(n)
            self.shapes.append(compiled)

    def at(self, t: float) -> Traffic:
        """Every bundle's traffic at ``t`` seconds: the product of the shapes' factors times the base rates.

        The factors multiply in the shapes' order, starting from 1.0. Two shortcuts give the same
        bits: the first whole-population factor *is* the product so far (``1.0·f = f``), and a spike
        multiplies only the bundles it raises (``x·1.0 = x`` elsewhere).
        """
        pop = self.pop
        factor: FloatArray | None = None  # None: all ones so far
        onoff: list[_CompiledShape] = []
        for c in self.shapes:
            kind = c.shape.kind
            if kind == "onoff":
                onoff.append(c)
                continue
            if kind == "spikes":
                raised, amplitude = self._spikes(c, t)
                if raised.size:
                    if factor is None:
                        factor = np.ones(pop.size)
                    factor[raised if c.idx is None else c.idx[raised]] *= amplitude
                continue
            f = self._factor(c, t)
            if f is None:
                continue
            if c.idx is None and factor is None:
                factor = np.full(pop.size, f) if isinstance(f, float) else f  # f: a fresh array
            elif c.idx is None:
                assert factor is not None
                factor *= f
            else:
                if factor is None:
                    factor = np.ones(pop.size)
                factor[c.idx] *= f
        if factor is None:
            factor = np.ones(pop.size)
        if self.into is not None:
            rate_in = np.multiply(pop.base_rate_in, factor, out=factor)
            rate_out = rate_in * pop.fanout
            for c in onoff:
                self._apply_onoff(c, t, rate_in, rate_out)
            rows = (rate_in, rate_out, rate_in * pop.msg_size, rate_out * pop.msg_size)
            return _into_bundles(rows, self.into, self.bundles, pop.stored)
        block = np.empty((4, pop.size))
        rate_in = np.multiply(pop.base_rate_in, factor, out=block[0])
        rate_out = np.multiply(rate_in, pop.fanout, out=block[1])
        for c in onoff:
            self._apply_onoff(c, t, rate_in, rate_out)
        np.multiply(rate_in, pop.msg_size, out=block[2])
        np.multiply(rate_out, pop.msg_size, out=block[3])
        stored: FloatArray | None = None if pop.stored is None else block * pop.stored
        return Traffic(block[0], block[1], block[2], block[3], block=block, stored=stored)

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
            # exp(sigma·z − sigma²/2): the draws and the affine step compiled, exp NumPy's (its bits)
            noise: FloatArray = np.empty(n)
            normal_affine(self.rng, noise, sigma, 0.5 * sigma * sigma)
            return np.exp(noise, out=noise)
        raise ValueError(kind)  # pragma: no cover

    def _spikes(self, c: _CompiledShape, t: float) -> tuple[IntArray, float]:
        """Start this tick's spikes; the positions (in the shape's selection) raised at ``t``, and by what."""
        p = dict(c.shape.params)
        n = self.pop.size if c.idx is None else c.idx.size
        assert c.state is not None
        prob = 1.0 - math.exp(-p["rate_per_hour"] / 3600.0 * self.tick_s)
        starts = int(self.rng.binomial(n, prob)) if n else 0
        if starts:
            chosen = self.rng.integers(0, n, starts)
            idle = c.state[chosen] <= t
            c.state[chosen[idle]] = t + p["duration"]
        return np.flatnonzero(c.state > t), float(p["amplitude"])

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
