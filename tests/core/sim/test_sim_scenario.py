"""Scenario files: the built-ins load, and mistakes are reported with the file and the field."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest
from builders import FULL

from shedlab.core.sim import Scenario, builtin_scenarios, load_scenario, run_simulation
from shedlab.core.sim.scenario import (
    EVENT_KINDS,
    AddBrokers,
    RemoveBrokers,
    RollingRestart,
    TrafficChange,
    parse_scenario_text,
)
from shedlab.core.sim.spec import parse_duration
from shedlab.core.sim.traffic import DISTRIBUTIONS, SHAPE_KINDS, SIGNAL_KINDS
from shedlab.errors import ConfigError, InputError, ShedlabError

EXPECTED_BUILTINS = {
    "over-unloading-90-10",
    "over-placement-lruww",
    "over-placement-avgshedder",
    "heterogeneous-cpu-eater",
    "heterogeneous-strong-machine",
    "load-jitter",
    "slow-balancing",
    "homogeneous-gap",
    "broker-loss",
    "scale-out",
    "rolling-restart",
}


def write(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_builtins_are_listed_and_load() -> None:
    names = builtin_scenarios()
    assert set(names) >= EXPECTED_BUILTINS
    for name in names:
        scenario = load_scenario(name)
        assert scenario.name == name
        assert scenario.description
        assert scenario.source == f"builtin:{name}"


def test_every_feature_parses(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, FULL))
    assert scenario.duration == 3600 and scenario.simulation.tick == 30
    assert scenario.simulation.start_time_ms == 1_740_830_400_000
    assert scenario.strategy == "ThresholdShedder+LeastResourceUsageWithWeight"
    assert scenario.strategy_config == {"AvgShedder": {"maxUnloadPercentage": 0.5}}
    assert scenario.hardware["big"].cores == 64 and scenario.initial_brokers == 3
    assert [type(e) for e in scenario.events][:4] == [
        AddBrokers,
        RemoveBrokers,
        RollingRestart,
        TrafficChange,
    ]
    workload = scenario.workloads[0]
    assert [s.kind for s in workload.shapes] == ["onoff", "spikes"]
    assert workload.shapes[0].param("on") == 60.0  # YAML 1.1 would have read "on" as true
    assert scenario.metrics.balance_threshold == 12
    assert pickle.loads(pickle.dumps(scenario)) == scenario  # Spark ships scenarios to executors


@pytest.mark.parametrize(
    ("text", "field", "hint"),
    [
        ("name: x\nduraton: 5m\n", "duraton", "did you mean 'duration'?"),
        ("name: x\nworkloads:\n  - {bundels: 4}\n", "workloads[0].bundels", "did you mean 'bundles'?"),
        ("name: x\nworkloads:\n  - {msg_rate_in: {dist: lognormal, median: 5, sigmaa: 1}}\n",
         "workloads[0].msg_rate_in.sigma", None),
        ("name: x\nsimulation: {initial_assignment: placment}\n", "simulation.initial_assignment",
         "did you mean 'placement'?"),
        ("name: x\nevents:\n  - {at: 5m, kind: add_broker}\n", "events[0].kind",
         "did you mean 'add_brokers'?"),
        ("name: x\nduration: soon\n", "duration", None),
        ("name: x\nbrokers: [{count: 2, hardware: huge}]\n", "brokers[0].hardware", None),
        ("name: x\nworkloads:\n  - {brokers: [7]}\n", "workloads[0].brokers", None),
    ],
)  # fmt: skip
def test_errors_name_the_file_and_the_field(tmp_path: Path, text: str, field: str, hint: str | None) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_scenario(path)
    message = str(info.value)
    assert str(path) in message
    assert field in message
    if hint:
        assert hint in message


def test_unknown_pulsar_key_in_config_is_a_config_error(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nconfig: {loadBalancerAvgShedderLowThreshhold: 5}\n")
    with pytest.raises(ConfigError) as info:
        load_scenario(path)
    assert "loadBalancerAvgShedderLowThreshold" in str(info.value)


def test_a_pair_given_two_sections_of_strategy_config_is_refused() -> None:
    """``AvgShedder`` and ``avgshedder`` are one pair: the second section replaced the first, silently."""
    text = "strategy_config:\n  AvgShedder: {maxUnloadPercentage: 0.5}\n  avgshedder: {minUnloadMessage: 5}\n"
    with pytest.raises(ConfigError, match=r"strategy_config\.avgshedder: AvgShedder has a section already"):
        parse_scenario_text(_SMALL + text, "s.yaml")


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("config:\n  {key}: AvgShedder\n", "config.{key}"),
        ("strategy_config:\n  AvgShedder: {{{key}: ThresholdShedder}}\n", "strategy_config.AvgShedder.{key}"),
    ],
)
@pytest.mark.parametrize("key", ["loadBalancerLoadSheddingStrategy", "loadBalancerLoadPlacementStrategy"])
def test_a_strategy_key_in_config_is_refused(section: str, field: str, key: str) -> None:
    """The pair sets both keys after ``config`` (its value was lost) and before ``strategy_config`` (which
    ran another pair under the section's name); ``strategy:`` chooses the pair."""
    with pytest.raises(InputError, match=re.escape(field.format(key=key)) + ": the strategy pair is chosen"):
        parse_scenario_text(_SMALL + section.format(key=key), "s.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("seed: 010\n", r"010 is octal in YAML 1\.1; write it without the leading 0 \(at line 2, column 7\)"),
        ("workloads: [{bundles: 016}]\n", "016 is octal"),
        (
            "workloads: [{shapes: [{kind: diurnal, amplitude: 0.5, peak: 14:00}]}]\n",
            "14:00 is a number in base 60",
        ),
    ],
)
def test_yaml11_octal_and_base_60_numbers_are_refused(text: str, message: str) -> None:
    """Read as 8 (a seed of 8), 14 bundles and a peak at 14 minutes (840 s), silently."""
    with pytest.raises(InputError, match=message):
        parse_scenario_text("name: x\n" + text, "s.yaml")


def test_unknown_strategy_pair(tmp_path: Path) -> None:
    with pytest.raises(ShedlabError) as info:
        load_scenario(write(tmp_path, "name: x\nstrategy: AvgShedderr\n"))
    assert "strategy" in str(info.value)


def test_malformed_yaml_names_line(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_scenario(write(tmp_path, "name: x\nworkloads: [\n"))
    assert "line" in str(info.value)


def test_missing_file_and_unknown_builtin() -> None:
    with pytest.raises(InputError, match="not found"):
        load_scenario("does/not/exist.yaml")
    with pytest.raises(InputError) as info:
        load_scenario("over-unloading-90-11")
    assert "over-unloading-90-10" in str(info.value)


def test_from_mapping_defaults() -> None:
    scenario = Scenario.from_mapping({"name": "tiny"})
    assert scenario.initial_brokers == 3 and scenario.num_bundles == 4
    assert scenario.strategy == "ThresholdShedder+LeastLongTermMessageRate"


@pytest.mark.parametrize(
    ("text", "seconds"),
    [(90, 90.0), ("90s", 90.0), ("5m", 300.0), ("1h30m", 5400.0), ("1.5d", 129600.0), ("250ms", 0.25)],
)
def test_durations(text: object, seconds: float) -> None:
    assert parse_duration(text, source=None, field="x") == seconds


def test_the_documented_example_loads_and_runs() -> None:
    """docs/scenarios.md's complete example is a valid scenario (the docs cannot drift from the code)."""
    doc = Path(__file__).resolve().parents[3] / "docs" / "scenarios.md"
    text = doc.read_text(encoding="utf-8")
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    scenario = parse_scenario_text(block, str(doc))
    assert scenario.name == "my-cluster" and len(scenario.events) == 6
    assert scenario.workloads[1].shapes[0].param("on") == 60.0
    result = run_simulation(scenario)
    assert len(result.ticks) == 121


_DOC = Path(__file__).resolve().parents[3] / "docs" / "scenarios.md"
_DOC_BLOCKS = re.findall(r"```yaml\n(.*?)```", _DOC.read_text(encoding="utf-8"), re.S)
_MINIMAL = {  # what a fragment of the docs leaves out: a small cluster with one workload
    "name": "doc-fragment",
    "duration": "10m",  # long enough for the examples' steps (at 5m) to act
    "brokers": "brokers:\n  - count: 3\n",
    "workloads": "workloads:\n  - {name: w, tenants: 1, namespaces: 1, bundles: 4, msg_rate_in: 100}\n",
}


@pytest.mark.parametrize("block", _DOC_BLOCKS, ids=[f"block-{i}" for i in range(len(_DOC_BLOCKS))])
def test_every_yaml_example_of_the_scenario_docs_loads_and_runs(block: str) -> None:
    """A scenario written from any example of docs/scenarios.md is accepted: each block, completed with a
    minimal cluster where it is a fragment (top-level keys it does not set), loads and runs."""
    present = set(re.findall(r"^([a-z_]+):", block, re.M))
    missing = [v if v.endswith("\n") else f"{k}: {v}\n" for k, v in _MINIMAL.items() if k not in present]
    scenario = parse_scenario_text(block + "\n" + "".join(missing), str(_DOC))
    assert len(run_simulation(scenario).ticks) >= 2


def _doc_table(header: str) -> dict[str, tuple[str, ...]]:
    """The rows of the docs table under ``header``: each row's name and the names in its second column."""
    text = _DOC.read_text(encoding="utf-8")
    rows: dict[str, tuple[str, ...]] = {}
    for line in text[text.index(header) :].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0].strip("`")] = tuple(re.findall(r"`([a-z_]+)`", cells[1]))
    return rows


@pytest.mark.parametrize(
    ("header", "kinds"),
    [
        ("| `dist` | parameters |", DISTRIBUTIONS),
        ("| `kind` | parameters | effect", SHAPE_KINDS),
        ("| `kind` | parameters |\n", SIGNAL_KINDS),
        ("| `kind` | fields |", dict.fromkeys(EVENT_KINDS, None)),
    ],
    ids=["distributions", "shapes", "signals", "events"],
)
def test_the_scenario_docs_tables_list_what_the_parser_accepts(
    header: str, kinds: dict[str, tuple[str, ...] | None]
) -> None:
    """docs/scenarios.md's tables of distributions, shapes, signals and events name exactly the kinds
    (and, where the code keeps them in a table, the parameters) that the parser accepts."""
    documented = _doc_table(header)
    assert set(documented) == set(kinds)
    for kind, params in kinds.items():
        if params is not None:
            assert set(documented[kind]) == set(params), kind


# ------------------------------------------------------------------------------- limits and names (hardening)

_SMALL = "name: s\nduration: 10m\nbrokers:\n  - count: 3\n"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("seed: -1\n", "seed: must be at least 0"),
        (
            "events:\n  - {at: 1m, kind: remove_brokers, brokers: [4]}\n",
            r"events\[0\]\.brokers: .*broker 4.*1-3",
        ),
        ("events:\n  - {at: 1m, kind: rolling_restart, interval: 1m, brokers: [9]}\n", "broker 9"),
        # an empty list restarted every broker up, silently (until 29 Nov 2026)
        (
            "events:\n  - {at: 1m, kind: rolling_restart, interval: 1m, brokers: []}\n",
            r"events\[0\]\.brokers: give the broker numbers to restart, or leave brokers out .* \(got \[\]\)",
        ),
        ("events:\n  - {at: 1m, kind: add_brokers, count: 20000}\n", r"events\[0\]\.count: more than 10000"),
        # the clock counts whole milliseconds: these ran as 1-ms and 2-ms ticks (until 29 Nov 2026)
        ("simulation:\n  tick: 0.0001\n", r"simulation\.tick: must be a whole number of milliseconds"),
        ("simulation:\n  tick: 1.5ms\n", r"simulation\.tick: must be a whole number of milliseconds"),
        (
            "workloads:\n  - {name: w, tenants: 100, namespaces: 100, bundles: 1000}\n",
            "more than 1000000 bundles",
        ),
    ],
)
def test_scenarios_beyond_the_limits_or_naming_missing_brokers_are_refused(extra: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_scenario_text(_SMALL + extra, "s.yaml")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            "events:\n  - {at: 1m, kind: remove_brokers, count: 4}\n",
            r"events\[0\]\.count: remove_brokers at 60 s removes 4 brokers, but the scenario has 3 by then",
        ),
        (
            "events:\n  - {at: 11m, kind: add_brokers}\n",
            r"events\[0\]\.at: add_brokers at 660 s is after the run's end \(600 s\) \(got '11m'\)",
        ),
        (
            "workloads:\n  - {name: w, bundles: 2}\n  - {name: v}\n  - {name: w}\n",
            r"workloads\[2\]\.name: workloads\[0\] has this name already.*\(got 'w'\)",
        ),
        ("simulation:\n  cluster: us west\n", r"simulation\.cluster: not a Pulsar cluster name.*'us west'"),
        ("simulation:\n  cluster: ''\n", r"simulation\.cluster: not a Pulsar cluster name"),
        # a recording of these times had every row quarantined by ingest as invalid_timestamp
        (
            "simulation: {start_time: '1960-01-01T00:00:00Z'}\n",
            r"simulation\.start_time: .*after 1970.*\(got '1960-01-01T00:00:00Z'\)",
        ),
        ("simulation: {start_time: '1971-06-01T00:00:00Z'}\n", r"simulation\.start_time: .*epoch seconds"),
        (
            "simulation: {start_time: '9999-12-31T23:55:00Z'}\n",
            r"simulation\.start_time: .*the run's last tick",
        ),
        (
            "events:\n  - {at: 1m, kind: background, brokers: [1], background: {cpu: 1.5}}\n",
            r"events\[0\]\.background\.cpu: reaches 1\.5, more than the whole machine",
        ),
        (
            "brokers:\n  - {count: 3, background: {nic_out: {kind: diurnal, mean: 0.7, amplitude: -0.4}}}\n",
            r"brokers\[0\]\.background\.nic_out: reaches 1\.1",
        ),
        (
            "brokers:\n  - count: 3\n    background:\n"
            "      cpu: {kind: onoff, low: 0, high: 2, period: 2m, on: 1m}\n",
            r"background\.cpu: reaches 2",
        ),
        # a level below 0 was taken and read as 0 (a plain number below 0 was refused)
        (
            "brokers:\n  - {count: 3, background: {cpu: {kind: constant, value: -0.5}}}\n",
            r"brokers\[0\]\.background\.cpu\.value: must be at least 0 \(got -0\.5\)",
        ),
        (
            "brokers:\n  - {count: 3, background: {cpu: {kind: step, before: -0.5, after: 0.2, at: 1m}}}\n",
            r"background\.cpu\.before: must be at least 0",
        ),
        (
            "brokers:\n  - count: 3\n    background:\n"
            "      nic_in: {kind: onoff, low: -1, high: 0.2, period: 2m, on: 1m}\n",
            r"background\.nic_in\.low: must be at least 0",
        ),
        # read on the 60-s ticks only, a background's on/off cycle was always high (or low), silently
        (
            "brokers:\n  - count: 3\n    background:\n"
            "      cpu: {kind: onoff, low: 0.1, high: 0.5, period: 30s, on: 10s}\n",
            r"brokers\[0\]\.background\.cpu\.period: .*on at every step of the run",
        ),
        (
            "events:\n  - {at: 1m, kind: background, brokers: [1],\n"
            "     background: {nic_out: {kind: onoff, low: 0, high: 0.4,\n"
            "                            period: 2m, on: 30s, offset: 90s}}}\n",
            r"events\[0\]\.background\.nic_out\.period: .*off at every step of the run",
        ),
        (
            "events:\n  - {at: 1m, kind: background, brokers: [1],\n"
            "     background: {cpu: {kind: ramp, to: -0.3, start: 1m, end: 2m}}}\n",
            r"events\[0\]\.background\.cpu\.to: must be at least 0",
        ),
    ],
)
def test_events_that_cannot_happen_and_impossible_backgrounds_are_refused(extra: str, message: str) -> None:
    """A removal of more brokers than exist, an event after the end, two workloads of one name (which a
    selector could not tell apart) and a background above the whole machine were once run silently."""
    text = _SMALL.replace("brokers:\n  - count: 3\n", "") if extra.startswith("brokers") else _SMALL
    with pytest.raises(InputError, match=message):
        parse_scenario_text(text + extra, "s.yaml")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("{kind: spikes, rate_per_hour: 2, duration: 0, amplitude: 3}", r"duration: must be more than 0"),
        ("{kind: spikes, rate_per_hour: 0, duration: 1m, amplitude: 3}", r"rate_per_hour: must be greater"),
        ("{kind: onoff, period: 2m, on: 0}", r"shapes\[0\]\.on: must be within \(0, period\] \(got 0\)"),
        ("{kind: onoff, period: 2m, on: 3m}", r"shapes\[0\]\.on: must be within \(0, period\] \(got '3m'\)"),
        ("{kind: onoff, period: 0, on: 0}", r"shapes\[0\]\.period: must be greater than 0"),
        # read on the 60-s ticks only, these cycles were always on (or off), silently (until 29 Nov 2026)
        ("{kind: onoff, period: 30s, on: 10s}", r"shapes\[0\]\.period: .*on at every step of the run"),
        ("{kind: onoff, period: 2m, on: 61s, phase: aligned}", r"\.period: .*on at every step"),
        ("{kind: onoff, period: 2m, on: 30s, phase: 30s}", r"shapes\[0\]\.period: .*off at every step"),
        ("{kind: onoff, period: 2m, on: 2m}", r"shapes\[0\]\.period: .*on at every step"),
    ],
)  # fmt: skip
def test_shapes_that_never_act_are_refused(extra: str, message: str) -> None:
    """A spike of no duration raised nothing and an on/off cycle never on stopped its clients for the
    whole run, both silently (28 Nov 2026); the on/off error already said (0, period]."""
    workload = f"workloads:\n  - bundles: 4\n    shapes:\n      - {extra}\n"
    with pytest.raises(InputError, match=message):
        parse_scenario_text(_SMALL + workload, "s.yaml")


@pytest.mark.parametrize("on", ["0", "3m"])
def test_a_background_cycle_that_is_no_cycle_is_refused(on: str) -> None:
    background = f"      cpu: {{kind: onoff, low: 0, high: 0.5, period: 2m, on: {on}}}\n"
    text = "name: s\nduration: 10m\nbrokers:\n  - count: 3\n    background:\n" + background
    with pytest.raises(InputError, match=r"background\.cpu\.on: must be within \(0, period\]"):
        parse_scenario_text(text, "s.yaml")


def test_a_background_ramp_that_ends_before_it_starts_is_refused() -> None:
    """A traffic shape's ramp refused it; a background's jumped to its ``to`` at ``start``, silently."""
    ramp = "      cpu: {kind: ramp, to: 0.5, start: 10m, end: 5m}\n"
    text = "name: s\nduration: 10m\nbrokers:\n  - count: 3\n    background:\n" + ramp
    with pytest.raises(InputError, match=r"brokers\[0\]\.background\.cpu\.end: must not be before start"):
        parse_scenario_text(text, "s.yaml")


@pytest.mark.parametrize("value", ['"0.5"', "[0.5]", "true"])
def test_a_background_that_is_no_number_nor_signal_says_both_forms(value: str) -> None:
    text = f"name: s\nduration: 10m\nbrokers:\n  - count: 3\n    background: {{cpu: {value}}}\n"
    with pytest.raises(InputError, match=re.escape("background.cpu: expected a number or a signal {kind: ")):
        parse_scenario_text(text, "s.yaml")


def test_a_shape_selects_within_its_own_workload() -> None:
    """A shape acts on its workload's own bundles only: naming another workload's tenant, namespace or
    name selected nothing, silently (28 Nov 2026); a traffic event may name any of them."""
    workloads = (
        "workloads:\n"
        "  - {name: orders, tenant_prefix: orders, bundles: 4}\n"
        "  - name: logs\n    tenant_prefix: logs\n    bundles: 4\n"
        "    shapes:\n      - {kind: step, at: 2m, factor: 2, select: {SELECT}}\n"
    )
    for select, field in (
        ("{tenants: [orders-000]}", "tenants"),
        ("{namespaces: ['orders-*']}", "namespaces"),
        ("{workloads: [orders]}", "workloads"),
    ):
        with pytest.raises(InputError, match=rf"workloads\[1\]\.shapes\[0\]\.select\.{field}: matches no "):
            parse_scenario_text(_SMALL + workloads.replace("{SELECT}", select), "s.yaml")
    own = parse_scenario_text(_SMALL + workloads.replace("{SELECT}", "{tenants: ['logs-*']}"), "s.yaml")
    assert own.workloads[1].shapes[0].select.tenants == ("logs-*",)
    event = "events:\n  - {at: 1m, kind: traffic, factor: 2, select: {tenants: [orders-000]}}\n"
    across = _SMALL + workloads.replace("{SELECT}", "{tenants: ['logs-*']}") + event
    assert len(parse_scenario_text(across, "s.yaml").events) == 1


def test_the_edges_of_those_checks_are_accepted() -> None:
    """All the brokers removed, an event at the last tick, a background of the whole machine."""
    events = (
        "events:\n  - {at: 1m, kind: add_brokers}\n  - {at: 2m, kind: remove_brokers, count: 4}\n"
        "  - {at: 10m, kind: background, brokers: [1],\n"
        "     background: {cpu: {kind: ramp, to: 1, start: 0, end: 1m}}}\n"
    )
    assert len(parse_scenario_text(_SMALL + events, "s.yaml").events) == 3


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (
            "  - {at: 1m, kind: remove_brokers, brokers: [2]}\n"
            "  - {at: 2m, kind: remove_brokers, brokers: [2]}\n",
            r"events\[1\]\.brokers: remove_brokers at 120 s names broker 2, which events\[0\] removed before",
        ),
        (
            "  - {at: 2m, kind: background, brokers: [3], background: {cpu: 0.5}}\n"
            "  - {at: 1m, kind: remove_brokers, brokers: [3]}\n",
            r"events\[0\]\.brokers: background at 120 s names broker 3, which events\[1\] removed before",
        ),
        (
            "  - {at: 1m, kind: remove_brokers, count: 2}\n  - {at: 2m, kind: remove_brokers, count: 2}\n",
            r"events\[1\]\.count: remove_brokers at 120 s removes 2 brokers, but the scenario has 1 by then",
        ),
        (
            "  - {at: 1m, kind: remove_brokers, brokers: [1, 2]}\n"
            "  - {at: 2m, kind: remove_brokers, count: 2}\n",
            r"events\[1\]\.count: .* removes 2 brokers, but the scenario has 1 by then",
        ),
    ],
)
def test_an_event_on_brokers_removed_before_is_refused(events: str, message: str) -> None:
    """Each did nothing to the brokers it named or removed fewer than it said, silently: the removal
    of a removed broker, a background of one, a count beyond those left by then (a rolling restart skips
    a broker that is not up at its turn, as documented)."""
    with pytest.raises(InputError, match=message):
        parse_scenario_text(_SMALL + "events:\n" + events, "s.yaml")
    again = "  - {at: 1m, kind: remove_brokers, count: 1}\n  - {at: 2m, kind: remove_brokers, count: 2}\n"
    assert len(parse_scenario_text(_SMALL + "events:\n" + again, "s.yaml").events) == 2


@pytest.mark.parametrize("extra", ["count: 2", "pick: random"])
def test_a_removal_by_numbers_takes_no_count_or_pick(extra: str) -> None:
    """The listed brokers were removed and a count or pick beside them ignored, silently."""
    event = f"events:\n  - {{at: 1m, kind: remove_brokers, brokers: [1], {extra}}}\n"
    with pytest.raises(InputError, match=rf"events\[0\]\.{extra.split(':')[0]}: not with brokers"):
        parse_scenario_text(_SMALL + event, "s.yaml")


@pytest.mark.parametrize(
    ("event", "simulation"),
    [
        ("at: 1m, duration: 0", ""),
        ("at: 65s, duration: 10s", ""),
        ("at: 61s, duration: 4s", "{resolution: 5s}"),
    ],
)
def test_a_traffic_event_that_holds_no_step_is_refused(event: str, simulation: str) -> None:
    """Traffic is read at the steps only: such an event never acted, silently."""
    text = _SMALL + f"simulation: {simulation or '{}'}\nevents:\n  - {{kind: traffic, factor: 3, {event}}}\n"
    with pytest.raises(InputError, match=r"events\[0\]\.duration: traffic changed from .* holds no step of"):
        parse_scenario_text(text, "s.yaml")
    ok = text.replace("duration: 0", "duration: 1m").replace("10s", "56s").replace("4s", "5s")
    assert len(parse_scenario_text(ok, "s.yaml").events) == 1


def test_a_step_shape_that_holds_no_tick_is_refused() -> None:
    shape = "workloads:\n  - shapes: [{kind: step, at: 65s, until: 75s, factor: 3}]\n"
    with pytest.raises(
        InputError, match=r"workloads\[0\]\.shapes\[0\]\.until: traffic changed from 65 s to 75 s"
    ):
        parse_scenario_text(_SMALL + shape, "s.yaml")
    assert parse_scenario_text(_SMALL + shape.replace("75s", "3m"), "s.yaml").workloads[0].shapes


@pytest.mark.parametrize(
    "extra",
    [
        "workloads:\n  - shapes: [{kind: step, at: 1m, factor: 2, select: {fraction: 0}}]\n",
        "events:\n  - {at: 1m, kind: traffic, factor: 2, select: {fraction: 0.0}}\n",
    ],
)
def test_a_selection_of_no_fraction_is_refused(extra: str) -> None:
    """``fraction: 0`` selected no bundle: the shape or event did nothing, silently."""
    with pytest.raises(InputError, match=r"select\.fraction: must be greater than 0"):
        parse_scenario_text(_SMALL + extra, "s.yaml")


def test_an_idle_cpu_above_the_whole_machine_is_refused() -> None:
    """``cpu_idle`` is a fraction: 2 (meant as 2 %) ran every broker at 200 % from the start."""
    with pytest.raises(InputError, match=r"hardware\.standard\.cpu_idle: must be at most 1 \(got 2\)"):
        parse_scenario_text(_SMALL + "hardware: {standard: {cpu_idle: 2}}\n", "s.yaml")


@pytest.mark.parametrize(("value", "shown"), [("0.5", "0.5"), ("1.5", "1.5"), ("true", "True")])
def test_a_count_of_bookies_that_is_no_whole_number_is_refused(value: str, shown: str) -> None:
    """``bookies`` counts the bookies on a machine: 0.5 was half a bookie, and its machine's share of the
    cluster's bookie load halved, silently."""
    with pytest.raises(
        InputError,
        match=rf"hardware\.standard\.bookies: expected a whole number \(got {shown}\)",
    ):
        parse_scenario_text(_SMALL + f"hardware: {{standard: {{bookies: {value}}}}}\n", "s.yaml")


def test_a_whole_count_of_bookies_written_as_a_float_is_taken() -> None:
    """2.0 is two bookies, as every other count of a scenario reads it."""
    scenario = parse_scenario_text(_SMALL + "hardware: {standard: {bookies: 2.0}}\n", "s.yaml")
    assert scenario.hardware["standard"].bookies == 2


@pytest.mark.parametrize(("sigma", "median"), [("1000", "0 %"), ("4", "0.034 %"), ("3.5", "0.22 %")])
def test_a_noise_whose_median_tick_carries_next_to_nothing_is_refused(sigma: str, median: str) -> None:
    """``noise`` is ``exp(sigma·z − sigma²/2)``: ``sigma: 1000`` was taken, and the traffic was 0 at every
    tick (its mean of 1 rests on ticks that never come), silently."""
    shape = f"workloads:\n  - name: w\n    bundles: 4\n    shapes: [{{kind: noise, sigma: {sigma}}}]\n"
    with pytest.raises(
        InputError,
        match=rf"workloads\[0\]\.shapes\[0\]\.sigma: must be at most 3 \(got {sigma}\); the median tick "
        rf"would carry {median}",
    ):
        parse_scenario_text(_SMALL + shape, "s.yaml")
    parse_scenario_text(_SMALL + shape.replace(sigma, "3"), "s.yaml")


def test_a_rolling_restart_whose_last_turn_is_after_the_last_tick_is_refused() -> None:
    """Broker 3's turn, at 11 min, never came in a 10-min run: it was never restarted, silently."""
    event = "events:\n  - {at: 5m, kind: rolling_restart, interval: 3m, brokers: [1, 2, 3]}\n"
    with pytest.raises(
        InputError, match=r"events\[0\]\.interval: rolling_restart at 300 s restarts 3 brokers"
    ):
        parse_scenario_text(_SMALL + event, "s.yaml")
    assert parse_scenario_text(_SMALL + event.replace("3m", "2m30s"), "s.yaml").events


def test_a_rolling_restart_of_every_broker_whose_last_turn_is_after_the_last_tick_is_refused() -> None:
    """Without ``brokers:`` every broker up restarts: with 3 brokers, one added and one removed before,
    broker 3's turn at 11 min never came in a 10-min run; the event log said 3 brokers restarted."""
    events = (
        "events:\n  - {at: 1m, kind: add_brokers, count: 1}\n  - {at: 2m, kind: remove_brokers, count: 1}\n"
        "  - {at: 5m, kind: rolling_restart, interval: 3m}\n"
    )
    with pytest.raises(
        InputError, match=r"events\[2\]\.interval: rolling_restart at 300 s restarts all 3 brokers up by then"
    ):
        parse_scenario_text(_SMALL + events, "s.yaml")
    assert parse_scenario_text(_SMALL + events.replace("3m}", "2m30s}"), "s.yaml").events


def test_a_background_event_without_its_background_is_refused() -> None:
    """It replaced the brokers' background by none, silently."""
    event = "events:\n  - {at: 1m, kind: background, brokers: [1]}\n"
    with pytest.raises(InputError, match=r"events\[0\]\.background: required field is missing; \{cpu: 0\}"):
        parse_scenario_text(_SMALL + event, "s.yaml")


def test_a_broker_added_before_the_event_may_be_named() -> None:
    events = (
        "events:\n  - {at: 1m, kind: add_brokers, count: 2}\n"
        "  - {at: 2m, kind: remove_brokers, brokers: [5]}\n"
    )
    assert len(parse_scenario_text(_SMALL + events, "s.yaml").events) == 2


@pytest.mark.parametrize(
    "brokers", ["brokers: []\n", "brokers:\n  - count: 0\n", "brokers:\n  - count: 20000\n"]
)
def test_broker_counts_out_of_range_are_refused(brokers: str) -> None:
    with pytest.raises(InputError, match="brokers"):
        parse_scenario_text("name: s\n" + brokers, "s.yaml")


def test_a_scenario_in_utf16_is_read_and_a_gzipped_one_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(_SMALL.encode("utf-16"))
    assert load_scenario(path).initial_brokers == 3
    path.write_bytes(b"\x1f\x8b\x08\x00")
    with pytest.raises(InputError, match=r"s\.yaml: this is a gzip file, not text"):
        load_scenario(path)


@pytest.mark.parametrize("resolution", ["", "  resolution: 10s\n"])
def test_an_event_between_the_last_tick_and_the_end_is_refused(resolution: str) -> None:
    """9.5 min of 60-s ticks: the last tick is at 9 min, so an event at 9.25 min would never happen
    (it was accepted and silently dropped)."""
    text = (
        f"name: s\nduration: 9.5m\nsimulation:\n  tick: 60s\n{resolution}"
        "events:\n  - {at: 555s, kind: add_brokers}\n"
    )
    message = r"events\[0\]\.at: add_brokers at 555 s is after the run's last tick \(540 s; .*\(got '555s'\)"
    with pytest.raises(InputError, match=message):
        parse_scenario_text(text, "s.yaml")
    assert parse_scenario_text(text.replace("555s", "540s"), "s.yaml").events[0].at == 540


@pytest.mark.parametrize(
    ("workload", "field", "message"),
    [
        (
            "{msg_rate_in: {dist: lognormal, median: 100, sigma: 1000}}",
            "workloads[0].msg_rate_in",
            "the lognormal distribution's samples overflow to infinity; use smaller parameters",
        ),
        (
            "{msg_rate_in: {dist: pareto, min: 10, alpha: 0.001}}",
            "workloads[0].msg_rate_in",
            "the pareto distribution's samples overflow to infinity",
        ),
        ("{msg_rate_in: 1.0e+300, msg_size: 1.0e+300}", "workloads[0].msg_rate_in", "1e+300 msg/s in"),
        ("{msg_rate_in: 1000, fanout: 1.0e+10}", "workloads[0].fanout", "1e+13 msg/s out, above the 1e+12"),
        ("{msg_rate_in: 1000, msg_size: 1.0e+13}", "workloads[0].msg_size", "1e+16 bytes/s, above the 1e+15"),
    ],
)
def test_traffic_that_overflows_is_refused_before_the_first_tick(
    tmp_path: Path, workload: str, field: str, message: str
) -> None:
    """Each of these was accepted and ran with infinite rates and NaN scores, reporting dashes."""
    path = write(tmp_path, f"name: x\nduration: 5m\nbrokers: [{{count: 3}}]\nworkloads:\n  - {workload}\n")
    with pytest.raises(InputError) as info:
        run_simulation(load_scenario(path))
    assert str(info.value).startswith(f"{path}: {field}: ")
    assert message in str(info.value)


def test_a_clip_keeps_an_overflowing_distribution_finite(tmp_path: Path) -> None:
    text = "{msg_rate_in: {dist: lognormal, median: 100, sigma: 1000, clip: [0, 5000]}}"
    path = write(tmp_path, f"name: x\nduration: 2m\nbrokers: [{{count: 3}}]\nworkloads:\n  - {text}\n")
    result = run_simulation(load_scenario(path))
    assert 0 < result.ticks["msg_rate_total"].max() <= 2 * 5000 * 4 * 10


@pytest.mark.parametrize(
    ("quantity", "message"),
    [
        ("msg_rate_in: {dist: normal, mean: 10, std: 100, clip: [-100, null]}",
         r"msg_rate_in\.clip\[0\]: must be at least 0"),
        ("msg_size: {dist: uniform, low: 1, high: 9, clip: [0, 0]}",
         r"msg_size\.clip\[0\]: must be at least 1"),
        ("producers: {dist: constant, value: 1, clip: [null, -3]}",
         r"producers\.clip\[1\]: must be at least 0"),
        ("msg_rate_in: {dist: uniform, low: 10, high: 100, clip: [100, 10]}",
         r"msg_rate_in\.clip: expected \[low, high\] with low not above high"),
    ],
)  # fmt: skip
def test_a_clip_below_the_quantity_or_inverted_is_refused(quantity: str, message: str) -> None:
    """Each ran silently: negative rates and clients, messages of 0 bytes, every sample at ``high``."""
    with pytest.raises(InputError, match=message):
        parse_scenario_text(_SMALL + f"workloads:\n  - {{{quantity}}}\n", "s.yaml")
    edge = "workloads:\n  - {msg_size: {dist: normal, mean: 9, std: 9, clip: [1, 1]}}\n"
    assert parse_scenario_text(_SMALL + edge, "s.yaml").workloads[0].msg_size.clip_high == 1


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("workloads:\n  - shapes: [{kind: step, at: 1m, factor: 2.0e+6}]\n", r"shapes\[0\]\.factor"),
        ("workloads:\n  - shapes: [{kind: ramp, start: 0s, end: 1m, to: 1.0e+300}]\n", r"shapes\[0\]\.to"),
        ("workloads:\n  - shapes: [{kind: spikes, rate_per_hour: 1, duration: 1m, amplitude: 1.0e+7}]\n",
         r"shapes\[0\]\.amplitude"),
        ("events:\n  - {at: 1m, kind: traffic, factor: 1.0e+9}\n", r"events\[0\]\.factor"),
    ],
)  # fmt: skip
def test_traffic_multipliers_above_a_million_are_refused(extra: str, field: str) -> None:
    with pytest.raises(InputError, match=field + r": must be at most 1e\+06"):
        parse_scenario_text(_SMALL + extra, "s.yaml")


_TWO_WORKLOADS = """\
name: two
duration: 10m
brokers:
  - count: 2
workloads:
  - {name: big, tenant_prefix: big, bundles: 64, shapes: [{kind: step, at: 1m, factor: 2}]}
  - name: small
    tenant_prefix: small
    bundles: 4
    shapes: [{kind: step, at: 1m, factor: 2, select: {fraction: FRACTION}}]
"""


def test_a_fraction_that_rounds_to_no_bundle_of_its_scope_is_refused() -> None:
    """0.1 of a 4-bundle workload among others selected no bundle at all, or by chance one, silently
    (the draw is among every workload's bundles, kept so existing scenarios keep their results)."""
    with pytest.raises(
        InputError,
        match=r"workloads\[1\]\.shapes\[0\]\.select\.fraction: selects no bundle: 0\.1 of the at most 4",
    ):
        parse_scenario_text(_TWO_WORKLOADS.replace("FRACTION", "0.1"), "s.yaml")
    assert parse_scenario_text(_TWO_WORKLOADS.replace("FRACTION", "0.25"), "s.yaml").workloads[1].shapes
    event = (
        "events:\n  - {at: 1m, kind: traffic, factor: 2, select: {namespaces: ['small-*'], fraction: 0.1}}\n"
    )
    with pytest.raises(InputError, match=r"events\[0\]\.select\.fraction: selects no bundle"):
        parse_scenario_text(_TWO_WORKLOADS.replace("FRACTION", "1") + event, "s.yaml")


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        (
            "events:\n  - {at: 1m, kind: traffic, factor: 3, select: {tenants: []}}\n",
            r"events\[0\]\.select\.tenants",
        ),
        (
            "workloads:\n  - {name: w, bundles: 4,\n"
            "     shapes: [{kind: noise, sigma: 0.1, select: {workloads: []}}]}\n",
            r"workloads\[0\]\.shapes\[0\]\.select\.workloads",
        ),
        (
            "leader_state: {recently_unloaded: [{select: {bundles: []}, ago: 1m}]}\n",
            r"leader_state\.recently_unloaded\[0\]\.select\.bundles",
        ),
    ],
)
def test_an_empty_list_in_a_selector_is_refused(extra: str, field: str) -> None:
    """A filter of no pattern was no filter: ``tenants: []`` selected every bundle of the scenario (the
    traffic event tripled them all), silently, where the list names none."""
    with pytest.raises(InputError, match=field + r": an empty list selects every bundle"):
        parse_scenario_text(_SMALL + extra, "s.yaml")


def test_a_warmup_past_the_last_tick_is_refused() -> None:
    """It left no tick to measure: a summary of 0 ticks (means NaN, counts 0), silently."""
    with pytest.raises(InputError, match=r"metrics\.warmup: leaves no tick to measure: 660 s"):
        parse_scenario_text(_SMALL + "metrics: {warmup: 11m}\n", "s.yaml")
    assert parse_scenario_text(_SMALL + "metrics: {warmup: 10m}\n", "s.yaml").metrics.warmup == 600


@pytest.mark.parametrize(
    ("shape", "field"),
    [
        ("{kind: step, at: 11m, factor: 3}", r"shapes\[0\]\.at: the step begins at 660 s"),
        (
            "{kind: ramp, from: 1, to: 3, start: 10m, end: 20m}",
            r"shapes\[0\]\.start: the ramp begins at 600 s",
        ),
    ],
)
def test_a_step_or_ramp_beginning_after_the_last_tick_is_refused(shape: str, field: str) -> None:
    """It never changed the traffic (a ramp held its ``from`` all run), silently."""
    with pytest.raises(InputError, match=field):
        parse_scenario_text(_SMALL + f"workloads:\n  - shapes: [{shape}]\n", "s.yaml")
    earlier = shape.replace("11m", "10m").replace("start: 10m", "start: 9m")
    assert parse_scenario_text(_SMALL + f"workloads:\n  - shapes: [{earlier}]\n", "s.yaml").workloads


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (
            "brokers:\n  - {count: 3, background: {cpu: {kind: step, before: 0, after: 0.5, at: 11m}}}\n",
            r"brokers\[0\]\.background\.cpu\.at: the step begins at 660 s",
        ),
        (
            "brokers:\n  - count: 3\nevents:\n  - {at: 1m, kind: background, brokers: [1], "
            "background: {nic_in: {kind: ramp, from: 0, to: 0.5, start: 10m, end: 20m}}}\n",
            r"events\[0\]\.background\.nic_in\.start: the ramp begins at 600 s",
        ),
    ],
)
def test_a_background_step_or_ramp_beginning_after_the_last_tick_is_refused(doc: str, field: str) -> None:
    """The co-located load never changed, silently."""
    with pytest.raises(InputError, match=field):
        parse_scenario_text("name: s\nduration: 10m\n" + doc, "s.yaml")


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("1e3", "YAML 1.1 reads 1e3 as text: write 1000 or 1.0e+03"),
        ("5e-1", "write 0.5 or 5.0e-01"),
        ("1.0e3", "write 1000 or 1.0e+03"),  # YAML 1.1's exponent needs its sign
        ("1e-9", "write 1.0e-09"),
    ],
)
def test_a_number_yaml_reads_as_text_says_what_to_write(value: str, hint: str) -> None:
    """PyYAML (YAML 1.1) reads ``1e3`` as text; the error said "expected a number (got '1e3')", which a
    reader of the file, for whom it is a number, could not make sense of."""
    for field in ("msg_rate_in", "msg_size"):
        workload = f"workloads:\n  - {{bundles: 4, {field}: {value}}}\n"
        with pytest.raises(InputError, match=re.escape(hint)):
            parse_scenario_text(_SMALL + workload, "s.yaml")
    background = f"events:\n  - {{at: 1m, kind: background, brokers: [1], background: {{cpu: {value}}}}}\n"
    with pytest.raises(InputError, match=re.escape(hint)):
        parse_scenario_text(_SMALL + background, "s.yaml")
    with pytest.raises(InputError, match=re.escape(hint)):
        parse_scenario_text(
            _SMALL.replace(
                "count: 3", f"count: 3\n    background: {{cpu: {{kind: constant, value: {value}}}}}"
            ),
            "s.yaml",
        )


def test_a_namespace_two_workloads_share_counts_its_bundles_once() -> None:
    # Two workloads naming one namespace share its bundles (the population merges them by name): the
    # scenario has 8 bundles, not 16, as simulate's header said and the run summary did not.
    scenario = Scenario.from_mapping(
        {
            "name": "shared",
            "brokers": [{"count": 2}],
            "duration": "2m",
            "workloads": [
                {"name": "a", "namespace": "t/ns", "bundles": 8},
                {"name": "b", "namespace": "t/ns", "bundles": 8},
                {"name": "c", "bundles": 4},
            ],
        },
        "shared.yaml",
    )
    assert scenario.num_bundles == 12 == run_simulation(scenario).summary["bundles"]
