"""Spark overhead and scaling of sweeps, and the ingest rate.

    .venv/bin/python bench/bench_spark.py [--runs 16] [--minutes 2400] [--ingest-minutes 180] [--ingest-only]

1. The same simulation runs (``slow-balancing``, 200 brokers, its duration stretched so a run takes a
   few seconds) are executed three ways, each writing the same Parquet outputs:
   a plain Python loop over :func:`shedlab.core.results.execute_spec`; ``shedlab.spark.sweep.sweep`` on
   ``local[1]``; and on ``local[2]``. Each Spark measurement runs in a fresh process (a JVM's master
   cannot change) and times the sweep with the session already started; session start-up is printed
   separately.
   Overhead = time(local[1]) / time(loop) − 1 (goal < 15 %); speed-up = time(local[1]) / time(local[2])
   (goal ≥ 1.8).
2. Ingest rate: a simulator recording of ``slow-balancing`` (load-report JSON lines) is ingested on
   ``local[2]``; rows read per second (broker rows + bundle rows) with the session already started.
   It is ingested by both paths, in one sitting: every line through the Python reader (``fast=False``,
   the path before the JVM reader existed) and with the JVM path (``fast=True``, the default); both
   figures are printed with their ratio (goal ≥ 10×) and the two outputs are checked to be equal.
   Each path runs in a fresh process and ingests the file twice: the first time is the figure (a cold
   JVM, as a ``shedlab ingest`` command runs), with the CPU seconds of the whole process tree; the
   second, in the warmed JVM, is the rate of a long ingest (the JVM's just-in-time compilation, a fixed
   ~30 CPU s, spread over hours).

3. Ingest at scale (``--ingest-scale N``): the recording given N times (symlinks in one directory) is
   ingested once by a fresh process, timed from before ``get_spark`` to the end of ``ingest`` (a cold
   ``shedlab ingest`` command: session start included), with the CPU seconds of the process tree.
   ``--recording FILE`` reuses a recording (to compare checkouts on the same input: run the bench with
   ``PYTHONPATH=<other checkout>/src``; only ``get_spark`` and ``ingest(spark, sources, out)`` are
   called); ``--java-options`` adds driver JVM flags (e.g. ``-XX:TieredStopAtLevel=1``).

4. Warm rounds and the floor (``--ingest-warm N --recording FILE [--floor]``): one fresh process ingests
   the recording once to warm the JVM, then N more times, printing each round's wall and CPU seconds
   (process tree: the driver, the JVM, Python workers). With ``--floor`` each round also times the least
   any ingest built on Spark's JSON reader must do: read the text, ``from_json`` with the formats'
   schema, explode ``lastStats``, write the rows as Parquet (no checks, no de-duplication, no counts).
   Run it with ``PYTHONPATH=<issue-time checkout>/src`` without ``--floor`` for that commit's rounds.

Numbers depend on what else runs on the machine: on a shared 2-core box, run it when idle.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

SCENARIO = "slow-balancing"
PAIRS = ["AvgShedder", "UniformLoadShedder+LeastLongTermMessageRate"]


def make_grid(workdir: Path, runs: int, minutes: int) -> Path:
    """A grid of ``runs`` runs of the stretched scenario (two pairs × seeds)."""
    import importlib.resources

    text = importlib.resources.files("shedlab").joinpath("data", "scenarios", f"{SCENARIO}.yaml").read_text()
    data = yaml.safe_load(text)
    data["name"] = f"{SCENARIO}-bench"
    data["duration"] = f"{minutes}m"
    (workdir / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    seeds = max(1, runs // len(PAIRS))
    grid = {
        "name": "bench",
        "scenarios": ["scenario.yaml"],
        "strategies": PAIRS,
        "seeds": list(range(1, seeds + 1)),
        "brokers_every": 10,
    }
    path = workdir / "grid.yaml"
    path.write_text(yaml.safe_dump(grid, sort_keys=False), encoding="utf-8")
    return path


def direct(grid_path: Path, out: Path) -> dict[str, Any]:
    from shedlab.core.grid import expand_grid, load_grid
    from shedlab.core.results import RunWriter, execute_spec

    specs = expand_grid(load_grid(grid_path)).to_dict("records")
    writer = RunWriter(str(out))
    started = time.perf_counter()
    rows = [execute_spec({str(k): v for k, v in spec.items()}, writer) for spec in specs]
    elapsed = time.perf_counter() - started
    return {"runs": len(rows), "failed": sum(r["status"] != "ok" for r in rows), "seconds": elapsed,
            "run_seconds": [r["elapsed_s"] for r in rows]}  # fmt: skip


def spark_sweep(master: str, grid_path: Path, out: Path) -> dict[str, Any]:
    from shedlab.core.grid import load_grid
    from shedlab.spark.session import get_spark
    from shedlab.spark.sweep import sweep

    t0 = time.perf_counter()
    spark = get_spark(master, log_level="ERROR")
    spark.range(1).count()  # the JVM is up
    startup = time.perf_counter() - t0
    grid = load_grid(grid_path)
    started = time.perf_counter()
    result = sweep(spark, grid, str(out))
    elapsed = time.perf_counter() - started
    spark.stop()
    inside = float(result.summaries["elapsed_s"].sum())
    return {
        "runs": result.ran,
        "failed": result.failed,
        "seconds": elapsed,
        "startup": startup,
        "inside": inside,
    }


def spark_ingest(master: str, source: Path, out: Path, path: str) -> dict[str, Any]:
    """Ingest ``source`` twice in one JVM: the first time cold (as a ``shedlab ingest`` command does), the
    second warm (the JVM's just-in-time compilation done: the rate of a long ingest, whose fixed costs
    are spread over hours). Also the CPU seconds the whole process tree spent during the first."""
    from shedlab.spark.ingest import ingest
    from shedlab.spark.session import get_spark

    spark = get_spark(master, log_level="ERROR")
    spark.range(1).count()
    times = []
    cpu = 0.0
    for i in range(2):
        cpu_before = _tree_cpu()
        started = time.perf_counter()
        result = ingest(spark, [str(source)], str(out) + ("" if i == 0 else "-warm"), fast=path == "jvm")
        times.append(time.perf_counter() - started)
        if i == 0:
            cpu = _tree_cpu() - cpu_before
    spark.stop()
    return {
        "rows": result.rows_read,
        "seconds": times[0],
        "warm_seconds": times[1],
        "cpu": cpu,
        "quarantined": result.quarantined_rows,
    }


def _tree_cpu() -> float:
    """CPU seconds used so far by this process and its live descendants (the JVM, Python workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        used[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += used.get(pid, 0.0)
        todo += [child for child, parent in parents.items() if parent == pid]
    return total


def in_subprocess(kind: str, *args: str) -> dict[str, Any]:
    env = dict(os.environ)
    proc = subprocess.run(
        [sys.executable, __file__, "--child", kind, *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"benchmark child {kind} failed")
    line = [x for x in proc.stdout.splitlines() if x.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)
    return result


def record(workdir: Path, minutes: int) -> Path:
    import importlib.resources

    from shedlab.core.sim import run_simulation
    from shedlab.core.sim.recording import write_recording
    from shedlab.core.sim.scenario import parse_scenario_text

    text = importlib.resources.files("shedlab").joinpath("data", "scenarios", f"{SCENARIO}.yaml").read_text()
    data = yaml.safe_load(text)
    data["duration"] = f"{minutes}m"
    scenario = parse_scenario_text(yaml.safe_dump(data), "bench")
    result = run_simulation(scenario, strategy="AvgShedder", seed=1, record=True)
    write_recording(result, workdir / "recording")
    return workdir / "recording" / "load-reports.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=16, help="simulation runs (two pairs × runs/2 seeds)")
    parser.add_argument("--minutes", type=int, default=2400, help="simulated minutes per run")
    parser.add_argument(
        "--ingest-minutes", type=int, default=180, help="simulated minutes of the ingest recording"
    )
    parser.add_argument("--ingest-only", action="store_true", help="measure the ingest rate only")
    parser.add_argument(
        "--ingest-scale", type=int, default=0, help="instead: one cold ingest of the recording given N times"
    )
    parser.add_argument("--recording", type=Path, help="with --ingest-scale: this recording, not a new one")
    parser.add_argument("--java-options", default="", help="with --ingest-scale: extra driver JVM flags")
    parser.add_argument("--ingest-warm", type=int, default=0, help="instead: N warm ingests of --recording")
    parser.add_argument("--floor", action="store_true", help="with --ingest-warm: time the bare JSON reader")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "sweep":
            print(json.dumps(spark_sweep(rest[0], Path(rest[1]), Path(rest[2]))))
        elif kind == "ingest":
            print(json.dumps(spark_ingest(rest[0], Path(rest[1]), Path(rest[2]), rest[3])))
        elif kind == "cold":
            print(json.dumps(cold_ingest(Path(rest[0]), Path(rest[1]), rest[2].removeprefix("jvm:"))))
        return

    workdir = Path(tempfile.mkdtemp(prefix="shedlab-bench-"))
    try:
        if args.ingest_warm > 0:
            warm_rounds(workdir, args)
            return
        if args.ingest_scale > 0:
            ingest_at_scale(workdir, args)
            return
        if not args.ingest_only:
            sweeps(workdir, args)
        ingest_rates(workdir, args.ingest_minutes)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def sweeps(workdir: Path, args: argparse.Namespace) -> None:
    grid = make_grid(workdir, args.runs, args.minutes)
    print(f"{args.runs} runs of {SCENARIO} ({args.minutes} simulated minutes each), pairs {', '.join(PAIRS)}")
    loop = direct(grid, workdir / "direct")
    per_run = sorted(loop["run_seconds"])
    print(f"python loop : {loop['seconds']:7.2f} s   (runs {per_run[0]:.1f}–{per_run[-1]:.1f} s each)")
    one = in_subprocess("sweep", "local[1]", str(grid), str(workdir / "spark1"))
    print(f"local[1]    : {one['seconds']:7.2f} s   (+ {one['startup']:.1f} s session start-up)")
    two = in_subprocess("sweep", "local[2]", str(grid), str(workdir / "spark2"))
    print(f"local[2]    : {two['seconds']:7.2f} s   (+ {two['startup']:.1f} s session start-up)")
    for name, res in (("local[1]", one), ("local[2]", two)):
        if res["failed"] or res["runs"] != loop["runs"]:
            raise SystemExit(f"{name}: {res['runs']} runs, {res['failed']} failed")
    overhead = one["seconds"] / loop["seconds"] - 1.0
    speedup = one["seconds"] / two["seconds"]
    print(f"Spark overhead (local[1] vs loop): {overhead * 100:+.1f} %   goal < 15 %")
    print(f"speed-up local[1] → local[2]     : {speedup:.2f}×      goal ≥ 1.8×")
    # Robust to other load on the machine: the runs' own time inside the Spark tasks vs the wall time.
    own = one["seconds"] - one["inside"]
    print(
        f"  inside the tasks: local[1] Σ runs {one['inside']:.1f} s"
        f" (loop: {sum(loop['run_seconds']):.1f} s),"
        f" so Spark's own cost is {own:.1f} s = {own / one['inside'] * 100:.1f} % of the work;"
        f" local[2] Σ runs {two['inside']:.1f} s in {two['seconds']:.1f} s"
        f" = {two['inside'] / two['seconds']:.2f} cores busy"
    )


def ingest_rates(workdir: Path, minutes: int) -> None:
    source = record(workdir, minutes)
    size = source.stat().st_size / 1e6
    rates, warm = {}, {}
    for path in ("python", "jvm"):
        ing = in_subprocess("ingest", "local[2]", str(source), str(workdir / f"snap-{path}"), path)
        rates[path] = ing["rows"] / ing["seconds"]
        warm[path] = ing["rows"] / ing["warm_seconds"]
        print(
            f"ingest (local[2], {path:6s} path): {ing['rows']:,} rows in {ing['seconds']:.1f} s"
            f" = {rates[path]:,.0f} rows/s ({size:.0f} MB of load-report JSON lines),"
            f" {ing['cpu']:.0f} CPU s; warm JVM: {ing['warm_seconds']:.1f} s = {warm[path]:,.0f} rows/s"
        )
    print(
        f"JVM path vs Python path: {rates['jvm'] / rates['python']:.1f}× (warm JVM:"
        f" {warm['jvm'] / warm['python']:.1f}×)   goal ≥ 10×"
    )
    import pandas as pd

    for table in ("broker_samples", "bundle_samples", "bundle_data", "quarantine", "ingest_stats"):
        python, jvm = (_read_table(workdir / f"snap-{p}" / table) for p in ("python", "jvm"))
        pd.testing.assert_frame_equal(python, jvm, obj=table)
    print("the two outputs are identical (every table, ingest_stats too)")


def ingest_at_scale(workdir: Path, args: argparse.Namespace) -> None:
    source = args.recording or record(workdir, args.ingest_minutes)
    copies = workdir / "copies"
    copies.mkdir()
    for k in range(args.ingest_scale):
        (copies / f"part{k + 1}.jsonl").symlink_to(source.resolve())
    size = source.stat().st_size * args.ingest_scale / 1e6
    # "jvm:" in front: the child's argparse would take a bare "-XX:…" for an option of its own
    cold = in_subprocess("cold", str(copies), str(workdir / "snap"), f"jvm:{args.java_options}")
    print(
        f"cold ingest (local[2]) of {args.ingest_scale} × {source.name} ({size:,.0f} MB)"
        f"{' with ' + args.java_options if args.java_options else ''}: {cold['rows']:,} rows in"
        f" {cold['seconds']:.1f} s = {cold['rows'] / cold['seconds']:,.0f} rows/s,"
        f" {cold['cpu']:.1f} CPU s (process tree, session start included)"
    )


def warm_rounds(workdir: Path, args: argparse.Namespace) -> None:
    """``--ingest-warm``: rounds of ``ingest`` (and the bare reader) in one JVM, after a first ingest."""
    from shedlab.spark.ingest import ingest
    from shedlab.spark.session import get_spark

    source = args.recording or record(workdir, args.ingest_minutes)
    spark = get_spark("local[2]", log_level="ERROR")
    rows = ingest(spark, [str(source)], str(workdir / "warm-up")).rows_read
    print(f"{source} ({source.stat().st_size / 1e6:,.0f} MB, {rows:,} rows); JVM warmed by one ingest")
    steps: list[tuple[str, Any]] = [
        ("ingest", lambda k: ingest(spark, [str(source)], str(workdir / f"i{k}")))
    ]
    if args.floor:
        steps.append(("bare JSON reader", lambda k: bare_reader(spark, source, workdir / f"b{k}")))
    for k in range(args.ingest_warm):
        for name, run in steps:
            cpu_before, started = _tree_cpu(), time.perf_counter()
            run(k)
            seconds, cpu = time.perf_counter() - started, _tree_cpu() - cpu_before
            print(
                f"round {k + 1} {name:<17} {seconds:6.2f} s = {rows / seconds:9,.0f} rows/s, {cpu:6.2f} CPU s"
            )
    spark.stop()


def bare_reader(spark: Any, source: Path, out: Path) -> None:
    """The least an ingest on Spark's JSON reader does: parse every line with the formats' schema, one row
    per ``lastStats`` entry with its broker and time, written as Parquet."""
    from pyspark.sql import functions as sf

    from shedlab.spark.ingest import _json_optimization_off
    from shedlab.spark.ingest_fast import JSON_OPTIONS, LINE_SCHEMA

    with _json_optimization_off(spark):
        parsed = spark.read.text(str(source)).select(
            sf.from_json("value", LINE_SCHEMA, JSON_OPTIONS).alias("j")
        )
        rows = parsed.select(
            "j.broker", "j.timestamp", sf.explode("j.report.lastStats").alias("bundle", "s")
        ).select("broker", "timestamp", "bundle", "s.*")
        rows.write.mode("overwrite").parquet(str(out))


def cold_ingest(source: Path, out: Path, java_options: str) -> dict[str, Any]:
    """One ingest as a ``shedlab ingest`` command runs it: the session started inside the timing."""
    from shedlab.spark.ingest import ingest
    from shedlab.spark.session import get_spark

    cpu_before, started = _tree_cpu(), time.perf_counter()
    conf = {"spark.driver.extraJavaOptions": java_options} if java_options else None
    spark = get_spark("local[2]", conf=conf, log_level="ERROR")
    result = ingest(spark, [str(source)], str(out))
    seconds, cpu = time.perf_counter() - started, _tree_cpu() - cpu_before
    spark.stop()
    return {"rows": result.rows_read, "seconds": seconds, "cpu": cpu}


def _read_table(path: Path) -> Any:
    import pandas as pd

    if not any(path.rglob("*.parquet")):
        return pd.DataFrame()
    frame = pd.read_parquet(path)
    frame = frame.astype({c: str for c in frame.columns if str(frame[c].dtype) == "category"})
    return frame.sort_values(sorted(frame.columns)).reset_index(drop=True)


if __name__ == "__main__":
    main()
