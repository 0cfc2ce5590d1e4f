"""The results directory of a sweep: its layout, the run writer and the readers.

This module is the one home of the layout (``docs/spark.md``)::

    DIR/<table>/scenario=S/strategy=P/run-<id>.parquet   runs, ticks, decisions, brokers, events, skips
    DIR/sweep.json                                        the grid(s) swept into DIR

Partition values are escaped exactly as Spark escapes them (so ``spark.read.parquet(DIR/runs)``
and the pyarrow readers here see the same ``scenario``/``strategy`` values). A run's files are
written under names derived from its id (a temporary name, then a rename), its summary last: a
re-run after an interruption skips every run that has a summary and overwrites the partial files
of the others.

:func:`execute_spec` lives here too: running one run specification is *producing its files and its
summary row*, whose shape (:data:`RUN_SUMMARY_ARROW`) is part of this layout; the Spark layer only
decides where and when specs run (``shedlab.spark.sweep``). Nothing here imports PySpark.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import signal
import socket
import tempfile
import time
import traceback
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import pandas as pd
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.dataset as pads  # type: ignore[import-untyped]
import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

import shedlab
from shedlab.core.grid import Grid
from shedlab.core.local_parquet import read_local_parquet
from shedlab.core.locations import check_uri, is_remote, local_path, without_file_scheme
from shedlab.core.partitions import escape_partition_value
from shedlab.core.sim import run_simulation
from shedlab.core.sim.scenario import Scenario, parse_scenario_text
from shedlab.errors import InputError, decode_user_bytes, parse_json_text

__all__ = [
    "LAYOUTS",
    "MANIFEST",
    "OTHER_FILES",
    "OUTPUT_FILES",
    "OUTPUT_KINDS",
    "OUTPUT_TABLES",
    "PARTITION_KEYS",
    "QUARANTINE_DIR",
    "REFUSES_OTHER_FILES",
    "REPORT_GENERATOR",
    "RUN_COLUMNS_READ",
    "RUN_SUMMARY_ARROW",
    "TUNE_FILE",
    "TUNE_GRID",
    "TWIN_HEADER",
    "WRITES_INTO",
    "RunWriter",
    "absolute_location",
    "check_apart",
    "check_output_dir",
    "check_output_file",
    "check_output_kind",
    "execute_spec",
    "exists",
    "filesystem",
    "finished_run_files",
    "manifest_grids",
    "missing_columns",
    "output_kind",
    "quarantine_corrupt_runs",
    "read_checked_parquet",
    "read_manifest",
    "read_partitioned",
    "read_run_table",
    "read_sweep_runs",
    "refuse_other_versions",
    "remove_stale_temporaries",
    "resolved_local_path",
    "run_file_name",
    "run_id_of_file",
    "run_path",
    "table_path",
    "write_manifest",
]

OUTPUT_TABLES = ("runs", "ticks", "decisions", "brokers", "events", "skips")
"""The tables of a sweep directory, one file per run each (``runs`` holds the summary row)."""
PARTITION_KEYS = ("scenario", "strategy")
"""The partition columns of every table (directories ``scenario=S/strategy=P``)."""
MANIFEST = "sweep.json"
"""The manifest of a sweep directory: the grids swept into it, with their scenario texts."""
QUARANTINE_DIR = "quarantine"
"""Where unreadable run files are moved (``DIR/quarantine/runs/scenario=S/strategy=P/run-<id>.parquet``),
out of the tables' way: a resumed sweep then runs those runs again, and readers see only whole files."""

RUN_SUMMARY_ARROW = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("grid", pa.string()),
        pa.field("scenario", pa.string(), nullable=False),
        pa.field("strategy", pa.string(), nullable=False),
        pa.field("params_json", pa.string()),
        pa.field("params_id", pa.string()),
        pa.field("seed", pa.int64()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("error_type", pa.string()),
        pa.field("traceback", pa.string()),
        pa.field("elapsed_s", pa.float64()),
        pa.field("started_ms", pa.int64()),
        pa.field("finished_ms", pa.int64()),
        pa.field("host", pa.string()),
        pa.field("shedlab_version", pa.string()),
        pa.field("scenario_digest", pa.string()),
        pa.field("n_ticks", pa.int64()),
        pa.field("n_decisions", pa.int64()),
        pa.field("metrics", pa.map_(pa.string(), pa.float64())),
        pa.field("summary_json", pa.string()),
    ]
)
"""One row per run (the Spark schema ``RUN_SUMMARY`` is derived from it). ``metrics`` holds every
numeric summary metric of the simulator (null where undefined for the run); ``summary_json`` the
full summary including non-numeric values. In the files, ``scenario``/``strategy`` are partition
directories, not columns."""
RUN_COLUMNS_READ = ("run_id", "status", "params_id", "params_json", "seed", "metrics")
"""The columns of a run summary file its readers index (:func:`read_sweep_runs`)."""

# ---------------------------------------------------------------------------------------------
# Layout
# ---------------------------------------------------------------------------------------------


def run_file_name(run_id: str) -> str:
    """The file name of one run's rows in any table."""
    return f"run-{run_id}.parquet"


def run_id_of_file(name: str) -> str | None:
    """The run id a file name (``run-<id>.parquet``) stands for; None for any other file."""
    if name.startswith("run-") and name.endswith(".parquet"):
        return name[len("run-") : -len(".parquet")]
    return None


def table_path(root: str, table: str) -> str:
    """The directory of ``table`` under a results directory (a local path or a URI)."""
    return f"{root.rstrip('/')}/{table}"


def run_path(base: str, table: str, scenario: str, strategy: str, run_id: str) -> str:
    """Where one run's rows of ``table`` live under ``base`` (a filesystem path, see :func:`filesystem`)."""
    return (
        f"{table_path(base, table)}/scenario={escape_partition_value(scenario)}"
        f"/strategy={escape_partition_value(strategy)}/{run_file_name(run_id)}"
    )


def filesystem(root: str) -> tuple[Any, str]:
    """A pyarrow filesystem and base path for a local path or URI (``s3a://`` is read as ``s3://``)."""
    if "://" not in root or root.startswith("file://"):
        return pafs.LocalFileSystem(), os.path.abspath(without_file_scheme(root))
    uri = "s3://" + root[len("s3a://") :] if root.startswith("s3a://") else root
    check_uri(root)
    try:
        fs, path = pafs.FileSystem.from_uri(uri)
    except (OSError, ValueError) as exc:  # ArrowInvalid is a ValueError: a URI Arrow cannot open or reach
        raise InputError(f"cannot open: {str(exc).splitlines()[0]}", source=root) from None
    return fs, path


def absolute_location(root: str) -> str:
    """``root`` as the driver resolves it, for a process that does not share its working directory: a
    local path (or ``file://`` URI) made absolute against this process's, a remote URI unchanged.

    A sweep's tasks write the run files themselves (:class:`RunWriter`), and a cluster's executors run in
    their worker's directory (``work/app-…/0`` on Spark standalone): a relative ``--out`` was resolved
    there, so every run's files went into the executor's own directory and the driver found none (``twin
    --out twin.yaml``, whose validation sweep writes under ``twin-fit/``, failed with "every run of the
    twin failed"). The driver resolves it once and the tasks get the absolute path."""
    local = local_path(root)
    return root if local is None else os.path.abspath(local)


def exists(fs: Any, path: str) -> bool:
    """Whether ``path`` exists on ``fs``."""
    return bool(fs.get_file_info(path).type != pafs.FileType.NotFound)


def _check_named(out: str, field: str) -> None:
    """Refuse an empty (or blank) output location: ``Path('')`` is the current directory, so ``--out ''``
    (an unset shell variable, ``--out "$OUT"``) wrote a sweep's tables into wherever the command ran."""
    if not out.strip():
        raise InputError("names no location", field=field, value=out, hint="name a new directory or file")


def check_output_dir(out: str, *, field: str = "--out") -> None:
    """Refuse an output location that is blank (:func:`_check_named`) or exists and is not a directory
    (checked before Spark starts: Spark would fail later, with a Java stack trace). Of a remote location
    only the URI's syntax is checked (:func:`check_uri`); the rest is left to the writer."""
    _check_named(out, field)
    if is_remote(out):
        check_uri(out, field=field)
        return
    path = Path(without_file_scheme(out))
    if path.exists() and not path.is_dir():
        raise InputError("exists and is not a directory", source=out, field=field, hint="name a directory")
    parent = next((p for p in path.absolute().parents if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise InputError(f"{parent} is a file, not a directory", source=out, field=field)
    if path.is_dir():
        _check_writable(path, out, field)
    else:
        _check_creatable(path.absolute(), out, field)


def _check_writable(path: Path, out: str, field: str) -> None:
    """Refuse an existing output directory nothing can be written into, by writing and removing a file:
    ``simulate --out /sys/kernel`` ran the simulation and then was a PermissionError traceback."""
    try:
        handle, probe = tempfile.mkstemp(prefix=".shedlab-probe-", dir=path)
    except OSError as exc:
        raise InputError(f"cannot be written into: {exc.strerror or exc}", source=out, field=field) from None
    os.close(handle)
    with contextlib.suppress(OSError):
        os.unlink(probe)


def _check_creatable(path: Path, out: str, field: str) -> None:
    """Refuse a new output directory that cannot be created (a directory without write permission, a
    read-only file system, ``/proc``), by creating it and removing what was created: checking
    permissions cannot tell (root may write anywhere, but not into ``/proc``), and ``sweep --out
    /proc/o`` was a traceback once Spark had started, from the first write of its manifest."""
    created = [p for p in (path, *path.parents) if not p.exists()]  # the deepest first
    if not created:
        return
    try:
        path.mkdir(parents=True)
    except OSError as exc:
        raise InputError(f"cannot be created: {exc.strerror or exc}", source=out, field=field) from None
    for made in created:
        with contextlib.suppress(OSError):  # another process may have written into it meanwhile
            made.rmdir()


def resolved_local_path(location: str) -> Path | None:
    """A local location as an absolute path with its symbolic links resolved; None for a remote URI.

    A loop of symbolic links (``out -> out2 -> out``) is refused naming the location: ``resolve`` raised
    a RuntimeError, a traceback of ``simulate``, ``sweep``, ``ingest`` or ``collect --out``."""
    local = local_path(location)
    if local is None:
        return None
    try:
        return Path(local).resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: Python before 3.13 on a loop
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "a loop of symbolic links"
        raise InputError(f"cannot resolve: {why}", source=location) from None


def check_apart(
    out: str,
    inputs: Sequence[str],
    *,
    field: str = "--out",
    hint: str = "name a directory apart from the inputs",
) -> None:
    """Refuse an output location that is one of ``inputs``, holds one, or lies inside one (paths compared
    resolved, before Spark starts). Writing over what is being read loses it (``ingest SNAP/broker_samples
    --out SNAP`` replaced SNAP's tables with what it could still read: bundle_samples was left with no
    row), and an output inside an input is read back as input the next time. Remote locations are left
    alone: they cannot be compared cheaply."""
    target = resolved_local_path(out)
    if target is None:
        return
    for given in inputs:
        source = resolved_local_path(given)
        if source is None:
            continue
        if target == source:
            problem = "is the input itself: writing there would replace what is being read"
        elif target in source.parents:
            problem = f"holds the input {given}: writing there would replace what is being read"
        elif source in target.parents:
            problem = f"lies inside the input {given}: it would be read back as input the next time"
        else:
            continue
        raise InputError(problem, field=field, value=out, hint=hint)


TUNE_FILE = "tune.json"
"""What ``shedlab tune`` writes last into its directory (next to the sweep of its runs)."""
TUNE_GRID = "tune"
"""The name of the grid ``shedlab tune`` sweeps (in its directory's ``sweep.json``)."""
TWIN_HEADER = "# A twin fitted by `shedlab twin`"
"""How a twin's YAML starts (its first line, :func:`shedlab.core.twin.fit_twin`)."""
REPORT_GENERATOR = '<meta name="generator" content="shedlab report">'
"""In the head of every HTML report (:func:`shedlab.report.page.render_page`)."""
OTHER_FILES = "other"
"""The kind of an existing directory of no shedlab kind that holds visible entries (a user's folder)."""

OUTPUT_KINDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("tune", "a tune output", (TUNE_FILE,)),
    ("ingest", "an ingest output", ("broker_samples", "bundle_samples")),
    ("replay", "a replay output", ("replay.json", "comparison")),
    ("sweep", "a sweep directory", (MANIFEST, "runs")),
    ("evaluate", "an evaluate output", ("pip364", "pip364.parquet", "pip364.csv", "metric_stats")),
    ("twin", "a twin's fit report directory", ("fit-report.json",)),
    ("compare", "a compare output", ("compare.json",)),
    ("simulate", "a simulate output", ("summary.json",)),
    ("collect", "a collect recording", ("_collect-events.jsonl",)),  # written first (cluster.collect)
    ("report", "a directory of shedlab results with their report", ("report.html",)),
)
"""Each kind of directory shedlab writes, as ``(kind, what it is called, the entries that tell it)``, in
the order they are told apart: a tuning's directory holds a sweep, a sweep directory may hold its
evaluation (``evaluate --out SWEEP_DIR``) and its report. A demo's directory is a ``report`` one."""

WRITES_INTO: dict[str, tuple[frozenset[str], str]] = {
    "sweep": (frozenset({"sweep"}), "name a new directory, or an earlier sweep's to resume it"),
    "evaluate": (frozenset({"evaluate"}), "name a new directory (by default SWEEP_DIR/evaluation)"),
    "replay": (frozenset({"replay"}), "name a new directory, or an earlier replay's to replace it"),
    "ingest": (frozenset({"ingest"}), "name a new directory, or an earlier ingest's to add to it"),
    "tune": (
        frozenset({"tune", "twin"}),
        "name a new directory, an earlier tune's or the twin's --report-dir",
    ),
    "twin": (frozenset({"twin", "tune"}), "name a new directory, an earlier fit report's, or the tune's"),
    "simulate": (frozenset({"simulate"}), "name a new directory, or an earlier simulate's to replace it"),
    "compare": (frozenset({"compare"}), "name a new directory, or an earlier compare's to replace it"),
    "collect": (
        frozenset({"collect"}),
        "name a new or empty directory, or an earlier collect's to add to it",
    ),
    "demo": (frozenset({"report"}), "name a new directory, or an earlier demo's to run it again"),
    "tune --demo": (
        frozenset({"report"}),
        "name a new directory, or an earlier tune --demo's to run it again",
    ),
}
"""Per command writing a directory: the kinds of existing directory it writes into (besides a new or an
empty one, and but for :data:`REFUSES_OTHER_FILES` a directory of no shedlab kind), and the hint when
refused."""

REFUSES_OTHER_FILES: frozenset[str] = frozenset({"collect"})
"""The commands that refuse a directory of other files (:data:`OTHER_FILES`): ``collect`` adds a file per
read beside them, and ``ingest`` reads them all as the recording. The others write named entries of
their own, which leave a user's files alone."""

LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "demo": (
        ("sweep/", "sweep"),
        ("evaluation/", "evaluate"),
        ("report.html", "report"),
        ("recommendation/", "tune --demo"),
    ),
    "tune --demo": (
        ("snapshots/", "ingest"),
        ("twin.yaml", "twin"),
        ("tune/", "tune"),
        ("report.html", "report"),
    ),
}
"""The entries of the directories whose parts other commands write, each checked as that command's
output (a trailing ``/``: a directory, :data:`WRITES_INTO`; else a file, :data:`OUTPUT_FILES`)."""

OUTPUT_FILES: dict[str, tuple[str, str, str]] = {
    "twin": ("a twin", TWIN_HEADER, "name a new .yaml file, or an earlier twin's to replace it"),
    "report": (
        "a shedlab report",
        REPORT_GENERATOR,
        "name a new .html file, or an earlier report's to replace it",
    ),
}
"""Per kind of file a command writes: what it is called, the text that tells it (in its first KiB) and
the hint when refused. An existing file is replaced only if it holds that text or nothing: ``twin --out
README.md`` replaced the README, ``report --out index.html`` the user's own page."""


def output_kind(out: str) -> tuple[str, str, str] | None:
    """``(kind, what it is called, the entry that tells it)`` of the shedlab output at the local location
    ``out`` (:data:`OUTPUT_KINDS`; a sweep of the tune grid alone is a tune's, interrupted before its
    ``tune.json``); None for a new or remote location, or a directory of no shedlab kind."""
    path = resolved_local_path(out)
    if path is None or not path.is_dir():
        return None
    for kind, what, markers in OUTPUT_KINDS:
        marker = next((m for m in markers if (path / m).exists()), None)
        if marker is not None:
            if kind == "sweep" and _tune_sweep(out):
                kind, what = "tune", "a tune output"
            return kind, what, marker + ("/" if (path / marker).is_dir() else "")
    return None


def _tune_sweep(out: str) -> bool:
    grids = manifest_grids(read_manifest(out), table_path(out, MANIFEST))
    return bool(grids) and all(g.get("name") == TUNE_GRID for g in grids)


def _other_files(out: str) -> tuple[str, str, str] | None:
    """``(OTHER_FILES, …, its first visible entry)`` of a local directory holding visible entries; None
    for anything else (hidden entries, which ``ingest`` skips, do not count)."""
    path = resolved_local_path(out)
    try:
        entry = min((p for p in path.iterdir() if not p.name.startswith(".")), default=None) if path else None
    except OSError:  # not a directory, or one that cannot be listed: its writer says why
        return None
    if entry is None:
        return None
    return OTHER_FILES, "a directory of other files", entry.name + ("/" if entry.is_dir() else "")


def check_output_kind(out: str, command: str, *, field: str = "--out") -> None:
    """Refuse (before anything runs) an output location that is another command's output: ``sweep --out``
    into an ingest output wrote runs among its tables, ``simulate --out`` into a sweep directory its
    files among the sweep's. What ``command`` writes into is :data:`WRITES_INTO`; the entries of a
    :data:`LAYOUTS` directory are checked too (``demo --out``: its sweep, its report, …)."""
    _check_named(out, field)
    found = output_kind(out) or (_other_files(out) if command in REFUSES_OTHER_FILES else None)
    accepted, hint = WRITES_INTO[command]
    if found is not None and found[0] not in accepted:
        own = next((what for kind, what, _ in OUTPUT_KINDS if kind == command), f"a {command} output")
        raise InputError(f"is {found[1]} ({found[2]}), not {own}", field=field, value=out, hint=hint)
    for entry, part in LAYOUTS.get(command, ()):
        if entry.endswith("/"):
            check_output_kind(table_path(out, entry[:-1]), part, field=field)
        else:
            check_output_file(table_path(out, entry), part, field=field)


def check_output_file(out: str, kind: str, *, field: str = "--out") -> None:
    """Refuse (before anything runs) to write a file of ``kind`` (:data:`OUTPUT_FILES`) over a directory,
    below a file, or over an existing file that holds something else: a new path, an empty file or an
    earlier file of the same kind is written."""
    what, mark, hint = OUTPUT_FILES[kind]
    _check_named(out, field)
    path = Path(out)
    if path.is_dir():
        raise InputError(f"is a directory, not {what}", field=field, value=out, hint=hint)
    check_output_dir(str(path.parent), field=field)
    head = _head(path)
    if not head.strip() or mark.encode() in head:
        return
    other = next((w for w, m, _ in OUTPUT_FILES.values() if m.encode() in head), None)
    problem = (
        f"is {other}, not {what}" if other else f"exists and is not {what}: writing there would replace it"
    )
    raise InputError(problem, field=field, value=out, hint=hint)


def _head(path: Path) -> bytes:
    """The first KiB of the file ``path``; empty if there is none, or it cannot be read (its writer then
    says why it cannot write either)."""
    try:
        with path.open("rb") as src:
            return src.read(1024)
    except OSError:
        return b""


_TEMPORARY_FILE = re.compile(r"\.run-.+\.tmp|.+\.json\.\d+\.tmp")
_TEMPORARY_DIR = re.compile(r"_temporary|\.spark-staging-.+")


def remove_stale_temporaries(out: str, before: float) -> list[str]:
    """Delete the temporaries an interrupted writer left under ``out``, last modified before ``before``
    (epoch s): the run writer's ``.run-<id>.<pid>.tmp`` and manifests' ``*.json.<pid>.tmp`` files, and
    Spark's ``_temporary``/``.spark-staging-*`` directories. A writer alive now touches its temporaries
    after ``before`` (the start of this command), so only dead writers' are removed. Returns their paths.
    """
    fs, base = filesystem(out)
    if not exists(fs, base):
        return []
    removed: list[str] = []
    for info in fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
        if any(part in removed for part in _parents(info.path)):
            continue  # inside a directory already removed
        stale = info.mtime is None or info.mtime.timestamp() < before
        is_file = info.type == pafs.FileType.File and _TEMPORARY_FILE.fullmatch(info.base_name)
        is_dir = info.type == pafs.FileType.Directory and _TEMPORARY_DIR.fullmatch(info.base_name)
        if (is_file or is_dir) and stale:
            # gone between the listing and the delete (a killed writer's last act): removed all the same
            with contextlib.suppress(FileNotFoundError):
                fs.delete_file(info.path) if is_file else fs.delete_dir(info.path)
            removed.append(info.path)
    return removed


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:k]) for k in range(1, len(parts))]


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


class RunWriter:
    """Writes one run's tables under ``root`` (temporary name, then rename)."""

    def __init__(self, root: str) -> None:
        self.fs, self.base = filesystem(root)

    def path(self, table: str, scenario: str, strategy: str, run_id: str) -> str:
        return run_path(self.base, table, scenario, strategy, run_id)

    def write(self, table: str, frame: pd.DataFrame, scenario: str, strategy: str, run_id: str) -> None:
        final = self.path(table, scenario, strategy, run_id)
        if frame is None or frame.empty:
            if exists(self.fs, final):  # a re-run with no rows must not keep an older run's rows
                self.fs.delete_file(final)
            return
        arrow = _to_arrow(frame, table)
        directory = final.rsplit("/", 1)[0]
        self.fs.create_dir(directory, recursive=True)
        tmp = f"{directory}/.run-{run_id}.{os.getpid()}.tmp"
        with self.fs.open_output_stream(tmp) as sink:
            pq.write_table(arrow, sink, compression="zstd")
        self.fs.move(tmp, final)


def _to_arrow(frame: pd.DataFrame, table: str) -> Any:
    """A run's rows as Arrow, without the partition columns (the directories hold them)."""
    if table == "runs":
        return _summary_to_arrow(frame)
    out = frame.drop(columns=[c for c in PARTITION_KEYS if c in frame.columns])
    fields = []
    arrays = []
    for name in out.columns:
        col = out[name]
        if pd.api.types.is_bool_dtype(col):
            arr = pa.array(col.to_numpy(), type=pa.bool_())
        elif pd.api.types.is_integer_dtype(col):
            arr = pa.array(col.to_numpy(dtype="int64"), type=pa.int64())
        elif pd.api.types.is_float_dtype(col):
            arr = pa.array(col.to_numpy(dtype="float64"), type=pa.float64())
        else:
            arr = pa.array(
                [None if v is None or (isinstance(v, float) and math.isnan(v)) else str(v) for v in col],
                type=pa.string(),
            )
        fields.append(pa.field(str(name), arr.type))
        arrays.append(arr)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _summary_to_arrow(frame: pd.DataFrame) -> Any:
    schema = pa.schema([f for f in RUN_SUMMARY_ARROW if f.name not in PARTITION_KEYS])
    columns = {}
    for f in schema:
        values = frame[f.name].tolist()
        if f.name == "metrics":
            values = [list(v.items()) if isinstance(v, Mapping) else None for v in values]
        columns[f.name] = pa.array(values, type=f.type, from_pandas=True)
    return pa.table(columns, schema=schema)


def manifest_grids(manifest: Any, source: str) -> list[dict[str, Any]]:
    """The ``grids`` of a ``sweep.json``, checked: a list of objects, each one's ``scenarios`` an object
    of objects by name. A hand-edited or foreign file is named with its field (exit 2), not a traceback."""
    if not isinstance(manifest, dict):
        raise InputError("expected an object with a 'grids' list", source=source)
    grids = manifest.get("grids", [])
    if not isinstance(grids, list):
        raise InputError("expected a list of grids", source=source, field="grids", value=grids)
    for i, grid in enumerate(grids):
        if not isinstance(grid, dict):
            raise InputError("expected a grid (an object)", source=source, field=f"grids[{i}]", value=grid)
        scenarios = grid.get("scenarios") or {}
        if not isinstance(scenarios, dict) or not all(isinstance(v, dict) for v in scenarios.values()):
            raise InputError(
                "expected an object of scenarios by name", source=source, field=f"grids[{i}].scenarios"
            )
        strategies = grid.get("strategies") or []
        if not isinstance(strategies, list) or not all(isinstance(s, str) for s in strategies):
            raise InputError(
                "expected a list of strategy names",
                source=source,
                field=f"grids[{i}].strategies",
                value=strategies,
            )
    return grids


def write_manifest(out: str, grid: Grid) -> None:
    """Record ``grid`` in ``out/sweep.json`` (replacing an earlier entry of the same name)."""
    fs, base = filesystem(out)
    fs.create_dir(base, recursive=True)
    path = f"{base}/{MANIFEST}"
    manifest = read_manifest(out) or {"grids": []}
    entry = {
        "name": grid.name,
        "source": grid.source,
        "text": grid.text,
        "pip364": grid.pip364,
        "scenarios": {
            s.name: {"source": s.source, "digest": s.digest, "text": s.text} for s in grid.scenarios
        },
        "strategies": list(grid.strategies),
        "seeds": list(grid.seeds),
        "updated_ms": int(time.time() * 1000),
    }
    grids = [g for g in manifest_grids(manifest, path) if g.get("name") != grid.name]
    grids.append(entry)
    manifest["grids"] = grids
    tmp = f"{path}.{os.getpid()}.tmp"
    with fs.open_output_stream(tmp) as sink:
        sink.write((json.dumps(manifest, indent=2, default=str) + "\n").encode("utf-8"))
    fs.move(tmp, path)


# ---------------------------------------------------------------------------------------------
# Running one spec
# ---------------------------------------------------------------------------------------------

_SCENARIO_CACHE: dict[str, Scenario] = {}


def _scenario_from_spec(text: str, name: str) -> Scenario:
    """Parse a shipped scenario once per worker process (keyed by its text, which workers reuse)."""
    key = hashlib.sha256(text.encode()).hexdigest()
    scenario = _SCENARIO_CACHE.get(key)
    if scenario is None:
        scenario = parse_scenario_text(text, f"grid scenario {name}")
        _SCENARIO_CACHE[key] = scenario
    return scenario


class _Timeout(TimeoutError):  # noqa: N818 - internal signal; a TimeoutError, so strategies/guard.py names the plugin it interrupted
    pass


def _numeric_metrics(summary: Mapping[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for k, v in summary.items():
        if isinstance(v, bool):
            out[k] = float(v)
        elif isinstance(v, int | float):
            f = float(v)
            out[k] = f if math.isfinite(f) else None
        elif v is None:
            out[k] = None
    return out


def _simulate(spec: Mapping[str, Any], params: Mapping[str, Any], timeout_s: float | None) -> Any:
    """The simulation of ``spec``; with a time limit (SIGALRM, where the platform has it)."""
    use_alarm = timeout_s is not None and timeout_s > 0 and hasattr(signal, "SIGALRM")
    old_handler: Any = None
    if use_alarm:

        def on_alarm(_signum: int, _frame: FrameType | None) -> None:
            raise _Timeout(f"run exceeded its time limit of {timeout_s:g} s")

        old_handler = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, float(timeout_s or 0))
    try:
        scenario = _scenario_from_spec(str(spec["scenario_spec"]), str(spec["scenario"]))
        return run_simulation(
            scenario,
            strategy=str(spec["strategy"]),
            config_overrides=dict(params) or None,
            seed=int(spec["seed"]),
        )
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            if old_handler is not None:
                signal.signal(signal.SIGALRM, old_handler)


def _run_tables(result: Any, brokers_every: int) -> dict[str, pd.DataFrame]:
    """The per-run tables of a simulation (broker rows every ``brokers_every``-th tick, none for 0)."""
    tables: dict[str, pd.DataFrame] = {
        "ticks": result.ticks,
        "decisions": result.decisions,
        "events": result.events,
        "skips": result.skips,
    }
    if brokers_every > 0:
        brokers = result.brokers
        if brokers_every > 1 and "tick" in brokers:
            brokers = brokers[brokers["tick"] % brokers_every == 0]
        tables["brokers"] = brokers
    return tables


def _summary_row(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "run_id": str(spec["run_id"]),
        "grid": spec.get("grid"),
        "scenario": str(spec["scenario"]),
        "strategy": str(spec["strategy"]),
        "params_json": spec["params_json"],
        "params_id": spec["params_id"],
        "seed": int(spec["seed"]),
        "status": "ok",
        "error": None,
        "error_type": None,
        "traceback": None,
        "host": socket.gethostname(),
        "shedlab_version": getattr(shedlab, "__version__", None),
        "scenario_digest": spec.get("scenario_digest"),
        "n_ticks": None,
        "n_decisions": None,
        "metrics": None,
        "summary_json": None,
    }


def execute_spec(
    spec: Mapping[str, Any], writer: RunWriter, *, timeout_s: float | None = None
) -> dict[str, Any]:
    """Run one spec (a row of :func:`~shedlab.core.grid.expand_grid`), write its tables, return its
    summary row (never raises for a failing run: the error is recorded in the row)."""
    run_id = str(spec["run_id"])
    scenario_name = str(spec["scenario"])
    strategy = str(spec["strategy"])
    params = json.loads(str(spec["params_json"]))
    row = _summary_row(spec)
    started = time.time()
    row["started_ms"] = int(started * 1000)
    try:
        result = _simulate(spec, params, timeout_s)
        for table, frame in _run_tables(result, int(spec.get("brokers_every") or 0)).items():
            writer.write(
                table,
                frame.assign(run_id=run_id)[["run_id", *frame.columns]],
                scenario_name,
                strategy,
                run_id,
            )
        summary = dict(result.summary)
        row["metrics"] = _numeric_metrics(summary)
        row["summary_json"] = json.dumps({**summary, "config": result.config}, default=str, allow_nan=False)
        row["n_ticks"] = len(result.ticks)
        row["n_decisions"] = len(result.decisions)
    except Exception as exc:  # a failing run is recorded, not fatal
        row["status"] = "error"
        row["error"] = f"{exc}" or type(exc).__name__
        row["error_type"] = type(exc).__name__
        row["traceback"] = traceback.format_exc(limit=20)[-8000:]
    finished = time.time()
    row["finished_ms"] = int(finished * 1000)
    row["elapsed_s"] = finished - started
    writer.write("runs", pd.DataFrame([row]), scenario_name, strategy, run_id)
    return row


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def read_manifest(out: str) -> dict[str, Any]:
    """The ``sweep.json`` of a sweep directory ({} if absent). One that cannot be read (truncated, not
    JSON, not an object) is refused naming it: taken for none, ``evaluate`` lost the grids' PIP-364
    overrides and the challenger check without a word, and the next ``sweep`` wrote over the record."""
    fs, base = filesystem(out)
    source = table_path(out, MANIFEST)
    try:
        with fs.open_input_stream(f"{base}/{MANIFEST}") as src:
            data = src.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InputError(f"cannot read the sweep's manifest: {exc}", source=source) from None
    manifest = parse_json_text(decode_user_bytes(data, source), source)
    if not isinstance(manifest, dict):
        raise InputError("expected an object with a 'grids' list", source=source)
    return manifest


def _absent(names: Sequence[str], required: Sequence[str]) -> str | None:
    """The phrase ``no column 'a', 'b'`` for the ``required`` columns not in ``names`` (None if none are)."""
    missing = [c for c in required if c not in names]
    return f"no column {', '.join(map(repr, missing))}" if missing else None


def missing_columns(names: Sequence[str], required: Sequence[str], source: str) -> None:
    """Refuse a table (``source`` names its file) without the columns its readers index: another
    table's file, or a file of another program, under a shedlab table's name. Pandas would raise a
    KeyError deep in whoever reads the column first."""
    missing = _absent(names, required)
    if missing:
        raise InputError(
            f"not a table shedlab wrote here: {missing}",
            source=source,
            hint=f"its columns: {', '.join(list(names)[:8])}{', …' if len(names) > 8 else ''}",
        )


def read_partitioned(
    path: Path, keys: tuple[str, ...] = PARTITION_KEYS, required: Sequence[str] = ()
) -> pd.DataFrame | None:
    """A Parquet directory partitioned Spark-style (``key=value/``), partition values as strings
    (unescaped); None if ``path`` is not a directory. Every file must hold the ``required`` columns
    (checked on each file's own schema: the dataset takes its schema from one file and reads the
    others' missing columns as nulls)."""
    if not path.is_dir():
        return None
    partitioning = pads.partitioning(pa.schema([(k, pa.string()) for k in keys]), flavor="hive")
    try:
        # absolute: Arrow takes a relative s3:x/... for a URI (local_parquet's docstring)
        dataset = pads.dataset(os.path.abspath(path), format="parquet", partitioning=partitioning)
        for fragment in dataset.get_fragments() if required else ():
            if fragment.metadata.num_rows:  # an empty table may be written without columns
                missing_columns(fragment.physical_schema.names, required, fragment.path)
        frame: pd.DataFrame = dataset.to_table().to_pandas()
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read Parquet: {exc}", source=str(path)) from None
    for key in keys:
        frame[key] = frame[key].astype(str).map(urllib.parse.unquote)  # Spark's %XX escaping
    return frame


def refuse_other_versions(out: str, runs: pd.DataFrame, digests: Mapping[str, str], *, hint: str) -> None:
    """Refuse ``out`` when ``runs`` (its stored summaries) hold a run of another text of a scenario named
    in ``digests`` (name → digest of the text about to run). Run ids depend on a scenario's name, not its
    text, so a resumed sweep would take those runs for this text's, skip them, and mix two versions in
    one table (an edited scenario, a refitted twin: both keep their names). Refusing loses nothing; the
    old runs stay for the user to move."""
    if runs.empty or "scenario_digest" not in runs:
        return
    for name, digest in digests.items():
        stored = runs["scenario_digest"]
        other = runs[(runs["scenario"] == name) & stored.notna() & (stored != digest)]
        if len(other):
            raise InputError(
                f"holds {len(other)} run(s) of another version of scenario {name!r} (another text under "
                "the same name): they would be taken for this one's",
                source=out,
                hint=hint,
            )


def read_sweep_runs(root: Path) -> pd.DataFrame:
    """One row per run of a sweep directory, its ``metrics`` map spread into columns."""
    frame = read_partitioned(root / "runs", required=RUN_COLUMNS_READ)
    if frame is None or frame.empty:
        return pd.DataFrame(
            columns=["run_id", "scenario", "strategy", "params_id", "params_json", "seed", "status"]
        )
    metrics = pd.DataFrame([dict(m) if m is not None else {} for m in frame["metrics"]], index=frame.index)
    metrics = metrics.drop(columns=[c for c in metrics.columns if c in frame.columns])
    return pd.concat([frame.drop(columns=["metrics"]), metrics], axis=1)


def read_run_table(
    root: Path,
    table: str,
    scenario: str,
    strategy: str,
    run_id: str,
    columns: list[str] | None = None,
    required: Sequence[str] = (),
) -> pd.DataFrame:
    """One run's rows of ``table`` (an empty frame if the run wrote none); the file must hold
    ``columns`` and ``required``."""
    path = Path(run_path(str(root), table, scenario, strategy, run_id))
    if not path.exists():
        return pd.DataFrame(columns=columns or [])
    return read_checked_parquet(path, columns, required)


def read_checked_parquet(
    path: Path, columns: Sequence[str] | None = None, required: Sequence[str] = ()
) -> pd.DataFrame:
    """A local Parquet file or directory (:func:`read_local_parquet`) with ``columns`` (read; all if
    None) and ``required`` (checked), refused in one line when it lacks one (a file's schema is read
    first, so pyarrow's "No match for FieldRef" never shows) or is not Parquet."""
    try:
        if path.is_file():
            schema = pq.read_schema(os.path.abspath(path))  # absolute: see read_partitioned
            missing_columns(schema.names, [*(columns or []), *required], str(path))
        frame = read_local_parquet(path, columns)
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read Parquet: {exc}", source=str(path)) from None
    missing_columns(list(frame.columns), required, str(path))  # a directory's, known once read
    return frame


def _readable(fs: Any, path: str) -> str | None:
    """Why the run summary ``path`` cannot be read whole (None if it can): truncated by a killed
    writer, overwritten with garbage, not Parquet at all, another table's file (no ``status``: Spark
    would read its rows as runs of unknown status, counted failed without a reason), or a column of
    another type than the sweep writes (a file rewritten by another program: Spark, which reads the
    table with ``RUN_SUMMARY``, failed the whole read on it)."""
    try:
        with fs.open_input_file(path) as src:
            schema = pq.ParquetFile(src).read().schema
    except (OSError, ValueError, pa.ArrowException) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    # what the readers index, and each column's type: quarantined here, not a failed read later
    missing = _absent(schema.names, RUN_COLUMNS_READ)
    if missing:
        return f"not a run summary: {missing}"
    for name in schema.names:
        wanted = RUN_SUMMARY_ARROW.field(name).type if name in RUN_SUMMARY_ARROW.names else None
        if wanted is not None and schema.field(name).type != wanted:
            return f"not a run summary: column {name!r} is {schema.field(name).type}, not {wanted}"
    return None


def quarantine_corrupt_runs(out: str) -> list[tuple[str, str]]:
    """Move every run summary under ``out/runs`` that cannot be read whole to
    ``out/quarantine/runs/…`` (same relative path) and return ``(relative path, reason)`` of each.

    Each file is read defensively, one by one, before Spark reads the table: one bad file would
    otherwise fail the whole read. A quarantined run has no summary any more, so a resumed sweep runs
    it again; nothing else of the directory changes."""
    fs, base = filesystem(out)
    runs = table_path(base, "runs")
    moved: list[tuple[str, str]] = []
    for info in fs.get_file_info(pafs.FileSelector(runs, recursive=True, allow_not_found=True)):
        if info.type != pafs.FileType.File or run_id_of_file(info.base_name) is None:
            continue
        reason = _readable(fs, info.path)
        if reason is None:
            continue
        relative = info.path[len(runs) + 1 :]
        target = f"{table_path(base, QUARANTINE_DIR)}/runs/{relative}"
        try:
            fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
            fs.move(info.path, target)
        except OSError as exc:
            raise InputError(
                f"unreadable run file ({reason}) and it cannot be moved aside: {exc}",
                source=info.path,
                hint="move or delete it, then run again",
            ) from None
        moved.append((f"runs/{relative}", reason))
    return moved


def finished_run_files(out: str, since: float | None = None) -> Iterator[str]:
    """The run ids with a summary file under ``out/runs`` (written at or after ``since``, epoch s)."""
    fs, base = filesystem(out)
    selector = pafs.FileSelector(table_path(base, "runs"), recursive=True, allow_not_found=True)
    for info in fs.get_file_info(selector):
        run_id = run_id_of_file(info.base_name)
        if run_id is None:
            continue
        if since is not None and (info.mtime is None or info.mtime.timestamp() < since):
            continue
        yield run_id
