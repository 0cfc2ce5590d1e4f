"""Conformance cases: drive one strategy instance through ticks and compare with Pulsar's answers.

The case format and the output contract are in ``docs/conformance.md``. A case keeps one
strategy instance across its ticks, exactly as Pulsar's leader keeps one strategy object; for
AvgShedder the same instance sheds and places.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

import numpy as np

from shedlab.config import STRATEGY_KEYS, LoadBalancerConfig
from shedlab.errors import InputError, ShedlabError, did_you_mean
from shedlab.model.json_reader import JsonReader, load_json_file
from shedlab.model.pulsar import LoadData
from shedlab.model.snapshot import ClusterSnapshot
from shedlab.strategies import StrategyInfo, guard, resolve_strategy
from shedlab.strategies.base import PlacementStrategy, SheddingStrategy


@dataclass(frozen=True)
class AssignRequest:
    bundle: str
    candidates: tuple[str, ...]


@dataclass(frozen=True)
class CaseTick:
    snapshot: ClusterSnapshot
    assign: tuple[AssignRequest, ...]


@dataclass
class Case:
    """A parsed conformance case."""

    path: str
    name: str
    info: StrategyInfo
    conf: LoadBalancerConfig
    ticks: list[CaseTick]
    expected: list[dict[str, Any]] | None = field(default=None)

    @property
    def strategy(self) -> str:
        """The strategy's name (Pulsar's short class name for a built-in)."""
        return self.info.name

    @property
    def sheds(self) -> bool:
        return self.info.sheds

    @property
    def places(self) -> bool:
        return self.info.places


_CASE_KEYS = ("name", "strategy", "tags", "config", "ticks", "expected")
_TICK_KEYS = ("loadData", "assign")
_ASSIGN_KEYS = ("bundle", "candidates", "source")
_EXPECTED_KEYS = ("unload", "assign")
"""The keys of a case, a tick, an assign request and an expected entry (docs/conformance.md)."""


def _known_keys(obj: Mapping[str, Any], known: tuple[str, ...], source: str, path: str = "") -> None:
    """Refuse a key the case format does not have: a typo was ignored, and the case ran without its
    assign requests (``asign``) or its config (``confg``), silently; an ``unloads`` in ``expected`` was
    reported as a mismatch."""
    for key in obj:
        if key not in known:
            raise InputError(
                f"unknown key (expected {', '.join(map(repr, known))})",
                source=source,
                field=f"{path}.{key}" if path else key,
                hint=did_you_mean(key, known),
            )


def _case_config(root: JsonReader, info: StrategyInfo, source: str) -> LoadBalancerConfig:
    """The case's configuration; a strategy key naming another class than the case's ``strategy`` for
    its role is refused: the case runs its ``strategy``, and the key was ignored, silently."""
    raw = root.raw_mapping("config", {})
    conf = LoadBalancerConfig().with_overrides(raw, source=f"{source}: config")
    for role in info.roles:
        key = STRATEGY_KEYS[role]
        named = resolve_strategy(conf.get(key), role=role, source=f"{source}: config") if key in raw else info
        if named.cls is not info.cls:
            raise InputError(
                f"names {named.name}, but the case's strategy is {info.name}",
                source=source,
                field=f"config.{key}",
                value=raw[key],
                hint="the case runs its strategy: drop the key, or make it name the same class",
            )
    return conf


def load_case(path: str | Path) -> Case:
    """Parse and validate a case file; every problem is an InputError naming file and field."""
    source = str(path)
    root = JsonReader(load_json_file(path), source)
    _known_keys(root.obj, _CASE_KEYS, source)
    name = root.string("name", Path(path).stem) or Path(path).stem
    raw_strategy = root.string("strategy")
    assert raw_strategy is not None
    info = resolve_strategy(raw_strategy, source=source)
    conf = _case_config(root, info, source)
    raw_ticks = root.obj.get("ticks")
    if not isinstance(raw_ticks, list) or not raw_ticks:
        raise InputError("expected a non-empty list of ticks", source=source, field="ticks", value=raw_ticks)
    ticks = []
    for t, raw in enumerate(raw_ticks):
        tick = JsonReader(raw, source, f"ticks[{t}]")
        _known_keys(tick.obj, _TICK_KEYS, source, tick.path)
        load_reader = tick.child("loadData")
        assert load_reader is not None
        snapshot = ClusterSnapshot.from_load_data(LoadData.from_json(load_reader), source=source)
        requests = []
        raw_assign = tick.obj.get("assign")
        raw_assign = [] if raw_assign is None else raw_assign  # 0, "" or false: refused, not "none"
        if not isinstance(raw_assign, list):
            raise InputError("expected a list", source=source, field=f"ticks[{t}].assign", value=raw_assign)
        for a, item in enumerate(raw_assign):
            req = JsonReader(item, source, f"ticks[{t}].assign[{a}]")
            _known_keys(req.obj, _ASSIGN_KEYS, source, req.path)
            bundle = req.string("bundle")
            assert bundle is not None
            candidates = tuple(req.string_list("candidates"))
            for c in candidates:
                if c not in snapshot.broker_index:
                    raise InputError(
                        "unknown broker in an assign request (not in loadData.brokers)",
                        source=source,
                        field=f"{req.path}.candidates",
                        value=c,
                    )
            requests.append(AssignRequest(bundle, candidates))
        if requests and not info.places:
            raise InputError(
                f"{info.name} is a shedding strategy and cannot answer assign requests",
                source=source,
                field=f"ticks[{t}].assign",
            )
        ticks.append(CaseTick(snapshot, tuple(requests)))
    expected = _expected(root.obj.get("expected"), source)
    if expected is not None:
        _expected_fits(expected, ticks, info, source)
    return Case(source, name, info, conf, ticks, expected)


def _expected(raw: Any, source: str) -> list[dict[str, Any]] | None:
    """Validate the ``expected`` answers' shape, so ``--check`` compares like with like."""
    if raw is None:
        return None

    def bad(field: str, value: Any, what: str) -> InputError:
        return InputError(f"expected {what}", source=source, field=field, value=value)

    def names(field: str, value: Any) -> None:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise bad(field, value, "a list of names")

    if not isinstance(raw, list):
        raise bad("expected", raw, "a list with one object per tick")
    for t, tick in enumerate(raw):
        field = f"expected[{t}]"
        if not isinstance(tick, dict):
            raise bad(field, tick, "an object with 'unload' and/or 'assign'")
        unload = tick.get("unload")
        if unload is not None:
            if not isinstance(unload, dict):
                raise bad(f"{field}.unload", unload, "an object of broker → list of bundles")
            for broker, bundles in unload.items():
                names(f"{field}.unload.{broker}", bundles)
        assign = tick.get("assign", [])
        if not isinstance(assign, list):
            raise bad(f"{field}.assign", assign, "a list")
        for a, item in enumerate(assign):
            if not isinstance(item, dict) or "choices" not in item:
                raise bad(f"{field}.assign[{a}]", item, "an object with 'choices'")
            names(f"{field}.assign[{a}].choices", item["choices"])
    return raw


def _expected_fits(
    expected: list[dict[str, Any]], ticks: list[CaseTick], info: StrategyInfo, source: str
) -> None:
    """Refuse expected answers that cannot describe this case's ticks: one entry per tick, one ``assign``
    answer per request, ``unload`` exactly where the strategy sheds, no other key. A wrong count or an
    ``unloads`` typo was run and reported as a mismatch (exit 1), or passed unchecked."""
    if len(expected) != len(ticks):
        raise InputError(
            f"expected one entry per tick: {len(ticks)} ticks, {len(expected)} entries",
            source=source,
            field="expected",
        )
    for t, (want, tick) in enumerate(zip(expected, ticks, strict=True)):
        field = f"expected[{t}]"
        _known_keys(want, _EXPECTED_KEYS, source, field)
        if ("unload" in want) != info.sheds:
            what = (
                "a shedding strategy's entry needs 'unload' ({} if none)"
                if info.sheds
                else (f"{info.name} does not shed: no 'unload'")
            )
            raise InputError(what, source=source, field=field)
        if len(want.get("assign", [])) != len(tick.assign):
            raise InputError(
                f"expected one answer per assign request: {len(tick.assign)} requests, "
                f"{len(want.get('assign', []))} answers",
                source=source,
                field=f"{field}.assign",
            )


def _instances(case: Case, seed: int) -> tuple[SheddingStrategy | None, PlacementStrategy | None]:
    rng = np.random.default_rng(seed)
    info = case.info
    if info.both_roles:  # one instance in both roles, as the leader keeps it
        both = info.shedder(rng)
        return both, cast(PlacementStrategy, both)
    return (info.shedder(rng), None) if info.sheds else (None, info.placer(rng))


def run_case(case: Case, seed: int = 0) -> dict[str, Any]:
    """Run a case and return the output object of the conformance contract."""
    shedder, placer = _instances(case, seed)
    ticks_out = []
    for tick in case.ticks:
        out: dict[str, Any] = {}
        if shedder is not None:
            out["unload"] = guard.shed(shedder, tick.snapshot, case.conf).by_broker()
        assigns = []
        for req in tick.assign:
            assert placer is not None
            placement = guard.select_broker(
                placer, list(req.candidates), req.bundle, tick.snapshot, case.conf
            )
            assigns.append(
                {"bundle": req.bundle, "broker": placement.broker, "choices": sorted(placement.choices)}
            )
        out["assign"] = assigns
        ticks_out.append(out)
    return {"name": case.name, "strategy": case.strategy, "ticks": ticks_out}


def check_case(case: Case, output: dict[str, Any]) -> list[str]:
    """Differences between a run and the case's expected answers (empty = pass)."""
    if case.expected is None:
        return ["case has no 'expected' answers"]
    problems = []
    if len(case.expected) != len(output["ticks"]):
        problems.append(f"expected {len(case.expected)} ticks, ran {len(output['ticks'])}")
    for t, (want, got) in enumerate(zip(case.expected, output["ticks"], strict=False)):
        if "unload" in want and want["unload"] != got.get("unload"):
            problems.append(f"tick {t}: unload {got.get('unload')} != expected {want['unload']}")
        want_assign = want.get("assign") or []
        got_assign = got.get("assign") or []
        if len(want_assign) != len(got_assign):
            problems.append(f"tick {t}: {len(got_assign)} assign answers, expected {len(want_assign)}")
        for a, (w, g) in enumerate(zip(want_assign, got_assign, strict=False)):
            if "bundle" in w and w["bundle"] != g["bundle"]:
                problems.append(f"tick {t} assign {a}: bundle {g['bundle']} != expected {w['bundle']}")
            if set(w.get("choices", [])) != set(g["choices"]):
                problems.append(
                    f"tick {t} assign {a}: choices {g['choices']} != expected {sorted(w['choices'])}"
                )
            if g["broker"] not in g["choices"]:
                problems.append(f"tick {t} assign {a}: picked {g['broker']} outside its choices")
    return problems


def _stats(samples_ns: list[int]) -> dict[str, float]:
    return {"median": statistics.median(samples_ns) / 1e6, "min": min(samples_ns) / 1e6}


def _time(fn: Callable[[], object]) -> int:
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def time_case(case: Case, repeats: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """Time the first tick's shedding call and first assign request on fresh instances.

    One untimed warm-up call first; then each of the ``repeats`` timed calls runs on a fresh
    strategy instance (so stateful strategies always make their first-call decision). Parsing
    and snapshot construction are outside the timed region.
    """
    tick = case.ticks[0]
    timing: dict[str, dict[str, float]] = {}
    if case.sheds:
        warm, _ = _instances(case, seed)
        assert warm is not None
        warm.find_bundles_for_unloading(tick.snapshot, case.conf)
        samples = []
        for _ in range(repeats):
            shedder, _ = _instances(case, seed)
            assert shedder is not None
            samples.append(_time(partial(shedder.find_bundles_for_unloading, tick.snapshot, case.conf)))
        timing["shed"] = _stats(samples)
    if tick.assign:
        req = tick.assign[0]
        samples = []
        for r in range(repeats + 1):
            shedder, placer = _instances(case, seed)
            assert placer is not None
            if shedder is not None:
                shedder.find_bundles_for_unloading(tick.snapshot, case.conf)
            call = partial(placer.select_broker, list(req.candidates), req.bundle, tick.snapshot, case.conf)
            elapsed = _time(call)
            if r:  # the first round is the warm-up
                samples.append(elapsed)
        timing["assign"] = _stats(samples)
    return timing


def iter_case_files(paths: list[Path]) -> Iterator[Path]:
    """Case files named directly, or every ``*.json`` below a directory (sorted), each once: a case found
    twice (``conform DIR DIR/case.json``) is refused, naming both ways to it; it ran twice and counted
    twice in ``--check``'s tally."""
    found: dict[str, Path] = {}
    for given in paths:
        for path in sorted(given.rglob("*.json")) if given.is_dir() else [given]:
            key = os.path.realpath(path)  # a loop of links stays a path: reading it names the loop
            if key in found:
                twice = f"as {given}" if found[key] == given else f"through {found[key]} and {given}"
                raise InputError(f"given twice ({twice})", source=str(path), hint="give each case once")
            found[key] = given
            yield path


def conform_one(path: Path, *, check: bool, timing: int, seed: int) -> tuple[dict[str, Any], bool]:
    """Run one case file; returns its output object and whether it passed (or ran, without --check)."""
    name = path.stem
    try:
        case = load_case(path)
        name = case.name
        output = run_case(case, seed)
    except ShedlabError as exc:
        return {"name": name, "error": str(exc)}, False
    ok = True
    if check:
        problems = check_case(case, output)
        ok = not problems
        output["check"] = {"passed": ok, "mismatches": problems}
    if timing > 0:
        output["timing_ms"] = time_case(case, timing, seed)
    return output, ok


__all__ = [
    "Case",
    "check_case",
    "conform_one",
    "iter_case_files",
    "load_case",
    "run_case",
    "time_case",
]
