"""The results directory: layout, run writer, execute_spec and the readers (no Spark)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]  # no stubs (as in src/)
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # no stubs (as in src/)
import pytest

from shedlab.cluster.collect import EVENTS_FILE
from shedlab.core.grid import expand_grid, load_grid
from shedlab.core.partitions import escape_partition_value
from shedlab.core.results import (
    MANIFEST,
    OUTPUT_KINDS,
    REPORT_GENERATOR,
    RUN_SUMMARY_ARROW,
    TWIN_HEADER,
    RunWriter,
    check_apart,
    check_output_dir,
    check_output_file,
    check_output_kind,
    execute_spec,
    finished_run_files,
    output_kind,
    quarantine_corrupt_runs,
    read_manifest,
    read_partitioned,
    read_run_table,
    read_sweep_runs,
    remove_stale_temporaries,
    run_id_of_file,
    run_path,
    write_manifest,
)
from shedlab.errors import InputError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GRID = FIXTURES / "grid_tiny.yaml"


def test_partition_values_are_escaped_like_spark() -> None:
    assert escape_partition_value("ThresholdShedder+LeastLongTermMessageRate") == (
        "ThresholdShedder+LeastLongTermMessageRate"
    )
    assert escape_partition_value("a/b:c=d") == "a%2Fb%3Ac%3Dd"


def test_run_file_layout() -> None:
    assert (
        run_path("/out", "ticks", "a/b", "P", "x1") == "/out/ticks/scenario=a%2Fb/strategy=P/run-x1.parquet"
    )
    assert run_id_of_file("run-x1.parquet") == "x1"
    assert run_id_of_file(".run-x1.123.tmp") is None
    assert run_id_of_file("part-0000.parquet") is None


def test_writer_replaces_and_removes_a_runs_rows(tmp_path: Path) -> None:
    writer = RunWriter(str(tmp_path))
    frame = pd.DataFrame({"run_id": ["r"], "tick": [1], "x": [0.5], "s": ["a"], "scenario": ["S"]})
    writer.write("ticks", frame, "S", "P", "r")
    path = Path(writer.path("ticks", "S", "P", "r"))
    table = pq.read_table(path)
    assert table.column_names == ["run_id", "tick", "x", "s"]  # partition values live in the directory
    writer.write("ticks", frame.iloc[0:0], "S", "P", "r")  # a re-run without rows keeps no old rows
    assert not path.exists()
    assert not list(tmp_path.rglob("*.tmp"))


def _one_spec(brokers_every: int = 5) -> dict[str, Any]:
    """A run spec as the sweep hands it to ``execute_spec`` (a grid row: str, int and float values)."""
    spec = cast("dict[str, Any]", expand_grid(load_grid(GRID)).iloc[-1].to_dict())
    return {**spec, "brokers_every": brokers_every}


def test_execute_spec_writes_every_table_and_the_summary(tmp_path: Path) -> None:
    spec = _one_spec()
    row = execute_spec(spec, RunWriter(str(tmp_path)))
    assert row["status"] == "ok" and row["n_ticks"] > 0
    runs = read_sweep_runs(tmp_path)
    assert list(runs["run_id"]) == [spec["run_id"]]
    assert runs.iloc[0]["scenario"] == spec["scenario"] and runs.iloc[0]["strategy"] == spec["strategy"]
    assert runs.iloc[0]["unloads"] == row["metrics"]["unloads"]  # metrics spread into columns
    ticks = read_run_table(tmp_path, "ticks", spec["scenario"], spec["strategy"], spec["run_id"])
    assert len(ticks) == row["n_ticks"] and set(ticks["run_id"]) == {spec["run_id"]}
    brokers = read_run_table(tmp_path, "brokers", spec["scenario"], spec["strategy"], spec["run_id"])
    assert (brokers["tick"] % 5 == 0).all()
    summary = pq.read_table(tmp_path / "runs").schema
    assert summary.field("metrics").type == RUN_SUMMARY_ARROW.field("metrics").type
    assert list(finished_run_files(str(tmp_path))) == [spec["run_id"]]
    missing = read_run_table(tmp_path, "ticks", "S", "P", "nope", ["tick"])
    assert missing.empty and list(missing.columns) == ["tick"]


def test_a_failing_spec_is_recorded(tmp_path: Path) -> None:
    spec = {**_one_spec(0), "scenario_spec": "name: x\nduration: [not, a, time]\n"}
    row = execute_spec(spec, RunWriter(str(tmp_path)))
    assert row["status"] == "error" and row["error"] and row["traceback"]
    runs = read_partitioned(tmp_path / "runs")
    assert runs is not None and list(runs["status"]) == ["error"]
    assert not (tmp_path / "ticks").exists()


def test_manifest_keeps_one_entry_per_grid(tmp_path: Path) -> None:
    assert read_manifest(str(tmp_path)) == {}
    grid = load_grid(GRID)
    write_manifest(str(tmp_path), grid)
    write_manifest(str(tmp_path), grid)
    write_manifest(str(tmp_path), dataclasses.replace(grid, name="other"))
    manifest = read_manifest(str(tmp_path))
    assert [g["name"] for g in manifest["grids"]] == ["tiny", "other"]
    assert json.loads((tmp_path / MANIFEST).read_text())["grids"][0]["seeds"] == [1, 2]


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('{"grids": 5}', "grids"),
        ('{"grids": [5]}', "grids[0]"),
        ('{"grids": [{"name": "g", "scenarios": 7}]}', "grids[0].scenarios"),
        ('{"grids": [{"name": "g", "scenarios": {"s": 1}}]}', "grids[0].scenarios"),
        ("[1]", None),
    ],
)
def test_a_malformed_manifest_is_named_not_a_traceback(tmp_path: Path, text: str, field: str | None) -> None:
    """A sweep.json of the wrong shape (hand-edited, another tool's) raised TypeError/AttributeError in
    the sweep writing it and in report reading it; now a one-line InputError naming the file and field."""
    from shedlab.report import build_report

    (tmp_path / MANIFEST).write_text(text)
    with pytest.raises(InputError, match=r"sweep\.json") as info:
        write_manifest(str(tmp_path), load_grid(GRID))
    assert field is None or info.value.field == field
    (tmp_path / "runs").mkdir()
    with pytest.raises(InputError, match=r"sweep\.json"):
        build_report(tmp_path, tmp_path / "r.html")


# ------------------------------------------------------------------ faults: files a user or a crash left


def test_an_output_location_that_is_a_file_is_refused(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    for out in (str(afile), f"file://{afile}", str(afile / "below")):
        with pytest.raises(InputError, match="--out") as info:
            check_output_dir(out)
        assert "\n" not in str(info.value)
    check_output_dir(str(tmp_path / "new" / "dir"))  # absent: the writer creates it
    check_output_dir(str(tmp_path))  # an existing directory
    check_output_dir("s3a://bucket/out")  # remote: left to the writer


def test_an_output_location_that_cannot_be_created_is_refused(tmp_path: Path) -> None:
    """sweep --out /proc/o passed the checks and was a traceback once Spark had started (until 29 Nov
    2026); a creatable one is left as it was found, nothing created."""
    for out in ("/proc/shedlab-out", "/proc/shedlab-out/deeper"):
        with pytest.raises(InputError, match=f"^{re.escape(out)}: --out: cannot be created: "):
            check_output_dir(out)
    check_output_dir(str(tmp_path / "new" / "deeper"))
    assert not (tmp_path / "new").exists()


def test_an_output_directory_that_cannot_be_written_into_is_refused(tmp_path: Path) -> None:
    """simulate --out /sys/kernel ran the simulation, then was a PermissionError traceback (until 29 Nov
    2026); a writable one is left as it was found."""
    with pytest.raises(InputError, match=r"^/sys/kernel: --out: cannot be written into: Permission denied$"):
        check_output_dir("/sys/kernel")
    check_output_dir(str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_a_blank_output_location_is_refused(tmp_path: Path) -> None:
    """Path('') is the current directory: sweep --out '' (an unset $OUT) wrote its tables where it ran."""
    for out in ("", " "):
        with pytest.raises(InputError, match=r"^--out: names no location \(got '\s?'\)"):
            check_output_dir(out)
        with pytest.raises(InputError, match="names no location"):
            check_output_kind(out, "sweep")
        with pytest.raises(InputError, match="names no location"):
            check_output_file(out, "report")


def test_an_output_that_overlaps_an_input_is_refused(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    (snap / "broker_samples").mkdir(parents=True)
    (tmp_path / "link").symlink_to(snap)
    refused = {
        str(snap): (str(snap), "is the input itself"),
        f"file://{snap}": (str(snap / "broker_samples"), "holds the input"),
        str(tmp_path / "link" / ".." / "snap" / "broker_samples" / "out"): (
            str(snap / "broker_samples"),
            "lies inside the input",
        ),
        str(tmp_path / "link"): (str(snap / "broker_samples"), "holds the input"),  # resolved
    }
    for out, (source, problem) in refused.items():
        with pytest.raises(InputError, match=f"^--out: {problem}"):
            check_apart(out, ["s3a://b/in", source])
    check_apart(str(tmp_path / "snap2"), [str(snap)])  # a sibling sharing a prefix
    check_apart(str(tmp_path / "out"), [str(snap), str(snap / "broker_samples")])
    check_apart("s3a://bucket/snap", [str(snap)])  # remote: not compared
    check_apart(str(snap), ["hdfs:///data/snap"])


def test_a_loop_of_symbolic_links_is_refused_naming_it(tmp_path: Path) -> None:
    """Path.resolve raised a RuntimeError on a loop: simulate, sweep, ingest and collect --out LOOP showed
    its traceback (until 29 Nov 2026)."""
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    expected = f"^{re.escape(str(loop))}: cannot resolve: a loop of symbolic links$"
    with pytest.raises(InputError, match=expected):
        output_kind(str(loop))
    with pytest.raises(InputError, match=expected):
        check_output_kind(str(loop), "simulate")
    with pytest.raises(InputError, match=expected):
        check_apart(str(loop), [str(tmp_path / "in")])
    with pytest.raises(InputError, match=expected):
        check_apart(str(tmp_path / "out"), [str(loop)])


def _layout(root: Path, *entries: str) -> str:
    """A directory holding ``entries`` (a trailing ``/``: a directory)."""
    root.mkdir(parents=True)
    for entry in entries:
        (root / entry).mkdir() if entry.endswith("/") else (root / entry).write_text("{}")
    return str(root)


def test_each_command_writes_only_into_its_own_kind_of_output(tmp_path: Path) -> None:
    kinds = {
        "ingest": _layout(tmp_path / "snap", "broker_samples/", "bundle_samples/", "quarantine/"),
        "sweep": _layout(tmp_path / "sweep", "runs/", "ticks/", MANIFEST, "evaluation/", "report.html"),
        "evaluate": _layout(tmp_path / "ev", "pip364/", "metric_stats/", "runs.csv"),
        "replay": _layout(tmp_path / "replay", "comparison/", "decisions/", "replay.json"),
        "tune": _layout(tmp_path / "tune", "runs/", MANIFEST, "tune.json", "fit-report.json"),
        "twin": _layout(tmp_path / "fit", "fit-report.json", "validation/"),
        "simulate": _layout(tmp_path / "sim", "summary.json", "ticks.parquet"),
        "compare": _layout(tmp_path / "cmp", "compare.json", "AvgShedder/"),
        "collect": _layout(tmp_path / "rec", EVENTS_FILE, "load-reports-20250102T000000-000001.jsonl"),
        "report": _layout(tmp_path / "demo", "sweep/", "evaluation/", "report.html"),
    }
    for kind, out in kinds.items():
        assert (output_kind(out) or ("",))[0] == kind, out
    for command in ("sweep", "evaluate", "replay", "ingest", "tune", "twin", "simulate", "compare"):
        for kind, out in kinds.items():
            welcome = kind == command or {kind, command} == {"tune", "twin"}
            if welcome:
                check_output_kind(out, command)
            else:
                with pytest.raises(InputError, match=r"^--out: is .* not "):
                    check_output_kind(out, command)
        check_output_kind(str(tmp_path / "new"), command)  # absent, empty, or of no kind: written into
        check_output_kind(_layout(tmp_path / f"mine-{command}", "notes.txt", "data/"), command)
        check_output_kind("s3a://bucket/anything", command)
    # a sweep with its evaluation written into it (evaluate --out SWEEP_DIR) still resumes
    (tmp_path / "sweep" / "pip364.csv").write_text("strategy\n")
    check_output_kind(str(tmp_path / "sweep"), "sweep")


def test_collect_writes_into_a_new_or_empty_directory_or_an_earlier_recording_only(tmp_path: Path) -> None:
    """``collect --out`` added a file per read to any directory (a sweep's, a home folder), and ``ingest``
    of it then read everything there as the recording. Hidden entries (which ingest skips) do not count."""
    assert ("collect", "a collect recording", (EVENTS_FILE,)) in OUTPUT_KINDS  # what collect writes first
    check_output_kind(str(tmp_path / "new"), "collect")
    check_output_kind(_layout(tmp_path / "empty", ".DS_Store", ".load-reports-x.jsonl.tmp"), "collect")
    check_output_kind(_layout(tmp_path / "rec", EVENTS_FILE, "load-reports-x.jsonl"), "collect")
    refused = {
        _layout(tmp_path / "home", "notes.txt", "Documents/"): "a directory of other files (Documents/)",
        _layout(tmp_path / "sweep", "runs/", MANIFEST): "a sweep directory (sweep.json)",
    }
    for out, found in refused.items():
        with pytest.raises(InputError, match=rf"^--out: is {re.escape(found)}, not a collect recording"):
            check_output_kind(out, "collect")
    with pytest.raises(InputError, match="is a collect recording"):  # and a recording is no sweep's
        check_output_kind(str(tmp_path / "rec"), "sweep")


def _files(root: Path, files: dict[str, str]) -> str:
    """``root`` holding ``files`` (path → text; a trailing ``/``: an empty directory)."""
    for name, text in files.items():
        path = root / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return str(root)


DEMO_OUTPUT = {
    "sweep/runs/": "",
    f"sweep/{MANIFEST}": '{"grids": []}',
    "evaluation/pip364.csv": "strategy\n",
    "report.html": f"<!DOCTYPE html>\n{REPORT_GENERATOR}\n",
    "recommendation/snapshots/broker_samples/": "",
    "recommendation/twin.yaml": f"{TWIN_HEADER}: …\nname: twin\n",
    "recommendation/tune/tune.json": "{}",
    "recommendation/tune/fit-report.json": "{}",
    "recommendation/report.html": f"<!DOCTYPE html>\n{REPORT_GENERATOR}\n",
}
"""What ``shedlab demo`` leaves in its ``--out`` (README: run it again into the same directory)."""


def test_a_demo_runs_again_into_its_own_output_and_into_no_other(tmp_path: Path) -> None:
    """``demo --out`` wrote its sweep, evaluation, report and recommendation into any directory (an ingest
    output, a sweep); each of its parts is checked as the output of the command that writes it."""
    out = _files(tmp_path / "demo", DEMO_OUTPUT)
    check_output_kind(out, "demo")
    check_output_kind(_files(tmp_path / "interrupted", {"sweep/runs/": ""}), "demo")
    check_output_kind(str(tmp_path / "demo" / "recommendation"), "tune --demo")
    refused = {
        f"{MANIFEST}": ("demo", "--out: is a sweep directory (sweep.json), not a demo output"),
        "sweep/broker_samples/": ("demo/sweep", "--out: is an ingest output (broker_samples/), not a sweep"),
        "report.html": ("demo/report.html", "--out: exists and is not a shedlab report"),
        "recommendation/twin.yaml": ("demo/recommendation/twin.yaml", "--out: exists and is not a twin"),
        "evaluation/replay.json": (
            "demo/evaluation",
            "--out: is a replay output (replay.json), not an evaluate",
        ),
    }
    for entry, (named, problem) in refused.items():
        root = tmp_path / f"case-{len(list(tmp_path.iterdir()))}"
        _files(root / "demo", {**DEMO_OUTPUT, entry: "{}"})  # not of its kind
        with pytest.raises(InputError, match=re.escape(problem)) as info:
            check_output_kind(str(root / "demo"), "demo")
        assert f"(got '{root / named}')" in str(info.value)


def test_a_file_output_replaces_only_an_earlier_file_of_its_kind(tmp_path: Path) -> None:
    """``twin --out README.md`` replaced the README, ``report --out index.html`` the user's own page."""
    files = {
        "twin.yaml": f"{TWIN_HEADER}: an ordinary scenario file\nname: t\n",
        "report.html": f"<!DOCTYPE html>\n<html><head>{REPORT_GENERATOR}</head></html>\n",
        "empty.yaml": "",
        "README.md": "# my project\n",
        "index.html": "<!DOCTYPE html><html><body>mine</body></html>\n",
        "scenario.yaml": "name: mine\nduration: 10m\n",
    }
    _files(tmp_path, files)
    for kind, own in (("twin", "twin.yaml"), ("report", "report.html")):
        for ok in (own, "empty.yaml", "new/dir/file"):  # an earlier one, an empty file, a new path
            check_output_file(str(tmp_path / ok), kind)
    refused = {
        ("twin", "README.md"): "exists and is not a twin: writing there would replace it",
        ("twin", "scenario.yaml"): "exists and is not a twin",
        ("twin", "report.html"): "is a shedlab report, not a twin",
        ("report", "index.html"): "exists and is not a shedlab report",
        ("report", "twin.yaml"): "is a twin, not a shedlab report",
        ("report", "."): "is a directory, not a shedlab report",
        ("report", "README.md/r.html"): "README.md: --out: exists and is not a directory",
    }
    for (kind, name), problem in refused.items():
        with pytest.raises(InputError, match=re.escape(problem)):
            check_output_file(str(tmp_path / name), kind)
    assert [(p.name, p.read_text()) for p in sorted(tmp_path.iterdir())] == sorted(files.items())


def test_a_tune_interrupted_before_tune_json_is_a_tune_not_a_sweep(tmp_path: Path) -> None:
    out = _layout(tmp_path / "tune", "runs/")
    (tmp_path / "tune" / MANIFEST).write_text(json.dumps({"grids": [{"name": "tune", "scenarios": {}}]}))
    assert (output_kind(out) or ("",))[0] == "tune"
    check_output_kind(out, "tune")
    with pytest.raises(InputError, match="is a tune output"):
        check_output_kind(out, "sweep")


def _summary_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"run_id": ["x"], "status": ["ok"], "params_id": ["p"], "params_json": ["{}"], "seed": [1]}
    metrics = pa.array([[("unloads", 1.0)]], type=pa.map_(pa.string(), pa.float64()))
    pq.write_table(pa.table({**row, "metrics": metrics}), path)


def test_unreadable_run_summaries_are_moved_to_quarantine(tmp_path: Path) -> None:
    part = tmp_path / "runs" / "scenario=s" / "strategy=a%3Ab"
    for name in ("run-good.parquet", "run-torn.parquet", "run-junk.parquet", "run-empty.parquet"):
        _summary_file(part / name)
    torn = (part / "run-torn.parquet").read_bytes()
    (part / "run-torn.parquet").write_bytes(torn[: len(torn) // 2])  # a killed writer
    (part / "run-junk.parquet").write_bytes(b"\x1f\x8b" + b"\x00" * 200)  # not Parquet at all
    (part / "run-empty.parquet").write_bytes(b"")
    pq.write_table(pa.table({"run_id": ["x"], "score": [1.0]}), part / "run-other.parquet")  # a ticks file
    # a summary without the metrics its readers spread into columns (an older or a foreign writer)
    pq.write_table(pq.read_table(part / "run-good.parquet").drop(["metrics"]), part / "run-short.parquet")
    # a summary rewritten by another program with the seed as text (Spark failed the whole read on it)
    good = pq.read_table(part / "run-good.parquet")
    seed = good.schema.get_field_index("seed")
    pq.write_table(good.set_column(seed, "seed", pa.array(["1"])), part / "run-typed.parquet")
    moved = quarantine_corrupt_runs(str(tmp_path))
    names = sorted(path for path, _ in moved)
    kinds = ("empty", "junk", "other", "short", "torn", "typed")
    assert names == [f"runs/scenario=s/strategy=a%3Ab/run-{n}.parquet" for n in kinds]
    assert all(reason and "\n" not in reason for _, reason in moved)
    assert dict(moved)["runs/scenario=s/strategy=a%3Ab/run-other.parquet"] == (
        "not a run summary: no column 'status', 'params_id', 'params_json', 'seed', 'metrics'"
    )
    assert dict(moved)["runs/scenario=s/strategy=a%3Ab/run-short.parquet"] == (
        "not a run summary: no column 'metrics'"
    )
    assert dict(moved)["runs/scenario=s/strategy=a%3Ab/run-typed.parquet"] == (
        "not a run summary: column 'seed' is string, not int64"
    )
    assert sorted(p.name for p in part.iterdir()) == ["run-good.parquet"]
    assert (tmp_path / "quarantine" / "runs" / "scenario=s" / "strategy=a%3Ab" / "run-torn.parquet").exists()
    assert quarantine_corrupt_runs(str(tmp_path)) == []  # nothing left to move
    assert quarantine_corrupt_runs(str(tmp_path / "absent")) == []


def test_stale_temporaries_are_removed_and_live_ones_kept(tmp_path: Path) -> None:
    part = tmp_path / "ticks" / "scenario=s" / "strategy=p"
    part.mkdir(parents=True)
    stale = [part / ".run-abc.123.tmp", tmp_path / "sweep.json.77.tmp"]
    spark_dirs = [tmp_path / "broker_samples" / "_temporary", tmp_path / "quarantine" / ".spark-staging-1a"]
    for f in stale:
        f.write_bytes(b"partial")
    for d in spark_dirs:
        (d / "0").mkdir(parents=True)
        (d / "0" / "part-0.parquet").write_bytes(b"partial")
    kept = [part / "run-abc.parquet", part / ".hidden-note", tmp_path / "data.tmp"]
    for f in kept:
        f.write_bytes(b"data")
    old = time.time() - 3600
    for p in [*stale, *spark_dirs, *kept]:
        os.utime(p, (old, old))
    live = part / ".run-def.456.tmp"  # a writer alive now
    live.write_bytes(b"being written")
    removed = remove_stale_temporaries(str(tmp_path), time.time() - 60)
    assert sorted(removed) == sorted(str(p) for p in [*stale, *spark_dirs])
    assert all(p.exists() for p in [*kept, live])
    assert not any(p.exists() for p in [*stale, *spark_dirs])
    assert remove_stale_temporaries(str(tmp_path / "absent"), time.time()) == []
