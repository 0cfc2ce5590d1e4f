"""The ``shedlab`` entry point: light commands start without pandas, plotly or PySpark; the command
index matches the commands; ``--version``; shell completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from shedlab import __version__
from shedlab.cli import COMMANDS, _LazyGroup, app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "snapshot.json"
HEAVY = ("pandas", "plotly", "pyspark", "numba")  # numba: loaded by a simulation's first kernel call

_PROBE = f"""
import sys
from shedlab.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
heavy = sorted({{name.split(".")[0] for name in sys.modules}} & {set(HEAVY)!r})
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
"""


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "100", **(env or {})},
    )


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("--version",),
        ("decide", str(EXAMPLE)),
        ("decide", str(EXAMPLE), "--json"),
        ("config", "show"),
    ],
)
def test_light_commands_import_no_pandas_plotly_pyspark_or_numba(args: tuple[str, ...]) -> None:
    run = _run(*args)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
    assert run.stderr.strip().splitlines()[-1] == "HEAVY:", f"{args} imported {run.stderr.splitlines()[-1]}"


def test_importing_shedlab_cli_loads_no_command_module() -> None:
    code = "import sys, shedlab.cli; print(sorted(m for m in sys.modules if m.endswith('_cmd')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.fixture(scope="module")
def every_command() -> _LazyGroup:
    """The click group behind ``app`` with every command module loaded."""
    group = typer.main.get_command(app)
    assert isinstance(group, _LazyGroup)
    for name in COMMANDS:
        group.load(name)
    return group


def test_command_index_matches_the_commands(every_command: _LazyGroup) -> None:
    """``shedlab --help`` shows COMMANDS' one-line help: it must be the start of each command's own."""
    assert set(every_command.commands) == set(COMMANDS)
    for name, (_, summary) in COMMANDS.items():
        own = " ".join((every_command.commands[name].help or "").split())
        assert own.startswith(summary), name


def test_help_lists_every_command_and_the_version_option() -> None:
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0
    for name in COMMANDS:
        assert f" {name} " in result.stdout
    assert "--version" in result.stdout and "--install-completion" in result.stdout


def test_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"shedlab {__version__}\n"


def test_a_misspelt_command_gets_a_suggestion() -> None:
    result = CliRunner().invoke(app, ["decid"])
    assert result.exit_code == 2 and "Did you mean 'decide'?" in result.output


def test_show_completion_prints_a_script() -> None:
    run = _run("--show-completion", "bash")
    assert "_SHEDLAB_COMPLETE=complete_bash" in run.stdout


@pytest.mark.parametrize(
    ("words", "cword", "expected"),
    [("shedlab de", "1", {"decide", "demo"}), ("shedlab decide --st", "2", {"--strategy"})],
)
def test_completion_of_commands_and_options(words: str, cword: str, expected: set[str]) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "shedlab"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "_SHEDLAB_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": cword},
    )
    assert run.returncode == 0, run.stderr
    assert set(run.stdout.split()) == expected


@pytest.mark.parametrize("name", [*COMMANDS, "config show"])
def test_every_command_prints_its_help(name: str) -> None:
    """``--help`` renders each option's help as rich markup: ``HOST:PORT[/chroot]`` unescaped was a
    closing tag without an opening one, and ``shedlab sandbox --help`` died with a MarkupError."""
    result = CliRunner().invoke(app, [*name.split(), "--help"], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.stdout and "--help" in result.stdout


@pytest.mark.parametrize("port", ["99999", "0", "-1"])
def test_ingest_refuses_a_web_port_that_is_no_port(
    port: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--web-port`` outside 1–65535 is one line naming the option, exit 2, before Spark starts (it was
    taken and written into every Prometheus broker id without a port: ``b1:99999``)."""
    from shedlab.cli import main

    rec = tmp_path / "r.jsonl"
    rec.write_text("{}\n")
    with pytest.raises(SystemExit) as exc:
        main(["ingest", str(rec), "--out", str(tmp_path / "out"), "--web-port", port])
    assert exc.value.code == 2
    assert not (tmp_path / "out").exists()
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --web-port:") and "\n" not in err, err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--twin", "missing.yaml"], "error: --twin: scenario file not found (got 'missing.yaml')"),
        (["--twin", "tests/"], "error: --twin: is a directory, not a scenario file (got 'tests/')"),
        (["nosuch-scenario"], "error: scenarios: no such built-in scenario (got 'nosuch-scenario')"),
    ],
)
def test_tune_names_a_missing_scenario_once_by_its_option(
    args: list[str], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --twin that is not there is named as --twin (it said ``scenarios: scenarios: …``)."""
    from shedlab.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["tune", *args, "--out", str(tmp_path / "out")])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().startswith(expected)


def test_sweep_outcome_prints_names_and_errors_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """Scenario names and run errors are data, not rich markup: ``[bold]`` and ``[luck]`` in them were
    taken for tags and vanished from the table and the failure lines ('no  here')."""
    import io

    import pandas as pd
    from rich.console import Console

    import shedlab.cli.spark_cmd as spark_cmd
    from shedlab.core.grid import parse_grid
    from shedlab.spark.sweep import SweepResult

    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(spark_cmd, "console", Console(file=out, width=200))
    monkeypatch.setattr(spark_cmd, "err_console", Console(file=err, width=200))
    summaries = pd.DataFrame(
        {
            "scenario": ["s[bold]x", "s[bold]x"],
            "strategy": ["AvgShedder", "AvgShedder"],
            "status": ["error", "ok"],
            "seed": [1, 2],
            "error": ["no [luck] here [/]", None],
            "metrics": [None, {"unloads": 1.0, "score_spread_mean": 2.0}],
            "elapsed_s": [0.1, 0.2],
        }
    )
    grid = parse_grid({"scenarios": ["scale-out"]})
    result = SweepResult("o", grid, total=2, skipped=0, ran=2, failed=1, elapsed_s=1.0, summaries=summaries)
    spark_cmd._print_sweep_outcome(result, "o")
    assert "│ s[bold]x" in out.getvalue()
    assert "failed s[bold]x / AvgShedder / seed 1: no [luck] here [/]" in err.getvalue()


def test_sweep_outcome_counts_the_failures_of_earlier_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A re-run printed '6 runs: 6 already complete, 0 ran now (0 failed)' over 2 failed runs."""
    import io

    import pandas as pd
    from rich.console import Console

    import shedlab.cli.spark_cmd as spark_cmd
    from shedlab.core.grid import parse_grid
    from shedlab.spark.sweep import SweepResult

    grid = parse_grid({"scenarios": ["scale-out"]})
    none = pd.DataFrame()
    kept = SweepResult("o", grid, 6, 6, 0, 0, 1.0, none, skipped_failed=2)
    ok = pd.DataFrame(
        {
            "scenario": ["s", "s"],
            "strategy": ["AvgShedder", "AvgShedder"],
            "status": ["ok", "ok"],
            "seed": [1, 2],
            "error": [None, None],
            "metrics": [{"unloads": 1.0}, {"unloads": 2.0}],
            "elapsed_s": [0.1, 0.1],
        }
    )
    retried = SweepResult("o", grid, 6, 4, 2, 0, 1.0, ok, retried=2)
    lines = []
    for result in (kept, retried):
        out = io.StringIO()
        monkeypatch.setattr(spark_cmd, "console", Console(file=out, width=200))
        spark_cmd._print_sweep_outcome(result, "o")
        lines.append(out.getvalue().splitlines()[-1])
    assert lines[0].startswith(
        "6 runs: 6 already complete (2 of them failed: drop --skip-failed to run them again), 0 ran now"
    )
    assert lines[1].startswith("6 runs: 4 already complete, 2 ran now (2 failed before and were run again; 0")


def test_a_sweep_without_a_successful_run_ends_with_one_line_and_a_failing_exit() -> None:
    """Every run failing exited 0; 2 when the failures are the user's input, 1 otherwise; some failing, 0."""
    import pandas as pd

    import shedlab.cli.spark_cmd as spark_cmd
    from shedlab.core.grid import parse_grid
    from shedlab.errors import ShedlabError
    from shedlab.spark.sweep import SweepResult

    grid = parse_grid({"scenarios": ["scale-out"]})

    def runs(*failures: tuple[str, str] | None) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "scenario": "s",
                "strategy": "AvgShedder",
                "seed": range(len(failures)),
                "status": ["ok" if f is None else "error" for f in failures],
                "error_type": [None if f is None else f[0] for f in failures],
                "error": [None if f is None else f[1] for f in failures],
            }
        )

    timeout = ("_Timeout", "run exceeded its time limit of 0.001 s")
    plugin = ("StrategyError", "strategy m:Boom: find_bundles_for_unloading raised ValueError")
    refused = {
        1: SweepResult("o", grid, 2, 0, 2, 2, 1.0, runs(timeout, timeout)),
        2: SweepResult("o", grid, 2, 0, 2, 2, 1.0, runs(plugin, plugin)),
    }
    for code, result in refused.items():
        with pytest.raises(ShedlabError) as info:
            spark_cmd._refuse_a_sweep_without_success(result, "o/")
        assert info.value.exit_code == code
        assert str(info.value) == (
            f"all 2 runs failed; the first: s / AvgShedder / seed 0: {result.summaries['error'][0]!r}; "
            "every reason is in o/runs (status, error)"
        )
    mixed = SweepResult("o", grid, 2, 0, 2, 2, 1.0, runs(plugin, timeout))
    kept = SweepResult("o", grid, 2, 2, 0, 0, 1.0, runs(), skipped_failed=2)  # --skip-failed, none ran
    for result in (mixed, kept):
        with pytest.raises(ShedlabError, match=r"^all 2 runs failed") as info:
            spark_cmd._refuse_a_sweep_without_success(result, "o")
        assert info.value.exit_code == 1
    # one run succeeded, now or before: the sweep did its work (exit 0); runs/ names the failures
    for result in (
        SweepResult("o", grid, 2, 0, 2, 1, 1.0, runs(timeout, None)),
        SweepResult("o", grid, 4, 2, 2, 2, 1.0, runs(plugin, plugin), skipped_failed=1),
        SweepResult("o", grid, 2, 2, 0, 0, 1.0, runs()),
    ):
        spark_cmd._refuse_a_sweep_without_success(result, "o")


def test_ingest_outcome_tells_sources_apart_and_says_why_rows_were_merged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every file of a collect's recording showed as the same '…k/rec/load-reports-2…' (the path's tail,
    then cut at the column's end, even at 120 columns); and 12 reads of a sandbox at --speed 20 kept
    3 broker rows with no word that the others were merged for falling in one 60-s tick."""
    import io

    import pandas as pd
    from rich.console import Console

    import shedlab.cli.spark_cmd as spark_cmd
    from shedlab.spark.ingest import IngestResult

    names = [f"load-reports-20261127T0026{57 + k}-00000{k + 1}.jsonl" for k in range(3)]
    stats = pd.DataFrame(
        {
            "source": [f"/tmp/walk/rec/{name}" for name in names],
            "source_kind": "load_reports",
            "records_read": 1,
            "rows_read": 65,
            "broker_rows_kept": [1, 0, 1],
            "bundle_rows_kept": [64, 0, 64],
            "bundle_data_rows_kept": 0,
            "rows_merged": [0, 65, 0],
            "rows_quarantined": 0,
            "rows_relabelled": 0,
        }
    )
    reasons = pd.DataFrame({"source": [], "reason": [], "count": []})
    result = IngestResult("out/snap", stats, reasons, 2, 128, 0, 0, ["demo"])
    for width in (80, 120):
        out = io.StringIO()
        monkeypatch.setattr(spark_cmd, "console", Console(file=out, width=width))
        spark_cmd._print_ingest_outcome(result, "out/snap", has_boundaries=False)
        text = out.getvalue()
        cells = "".join(line.split("│")[1].strip() for line in text.splitlines() if line.count("│") > 2)
        assert all(name in cells for name in names), text
        assert "/tmp/walk/rec/" in text and "…" not in cells
        assert "65 row(s) merged" in text and "shorter --interval" in text


def test_ingest_outcome_counts_the_rows_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """'kept 2,928 broker and 62,464 bundle rows' for tables of 976 and 15,616: the last line summed the
    kept Prometheus points (a row read each) as rows written, with no word how points become rows."""
    import io

    import pandas as pd
    from rich.console import Console

    import shedlab.cli.spark_cmd as spark_cmd
    from shedlab.spark.ingest import IngestResult

    stats = pd.DataFrame(
        {
            "source": ["/r/load-reports.jsonl", "/r/prometheus/cpu.json", "/r/prometheus/rate.json"],
            "source_kind": ["load_report", "prometheus", "prometheus"],
            "records_read": [488, 488, 7808],
            "rows_read": [8296, 488, 7808],
            "broker_rows_kept": [488, 488, 0],
            "bundle_rows_kept": [7808, 0, 7808],
            "bundle_data_rows_kept": 0,
            "rows_merged": 0,
            "rows_quarantined": 0,
            "rows_relabelled": 0,
        }
    )
    reasons = pd.DataFrame({"source": [], "reason": [], "count": []})
    result = IngestResult("o", stats, reasons, 976, 15616, 3, 0, ["c"], prometheus_rows=(488, 7808))
    out = io.StringIO()
    monkeypatch.setattr(spark_cmd, "console", Console(file=out, width=300))
    spark_cmd._print_ingest_outcome(result, "o", has_boundaries=False)
    lines = out.getvalue().splitlines()
    assert lines[-1] == "wrote 976 broker, 15,616 bundle and 3 BundleData rows (c); quarantined 0 → o"
    assert lines[-2].startswith("the 8,296 Prometheus point(s) kept make 488 broker and 7,808 bundle row(s)")
    assert "also in the load reports has a row from each per tick (source_kind)" in lines[-2]


def test_result_tables_fold_names_rather_than_cut_them() -> None:
    """At 80 columns replay's table showed its strategies as 'AvgShe…' and 'Thresh…'."""
    import io

    from rich.console import Console

    from shedlab.cli.spark_cmd import _table

    table = _table("replay", ("cluster", "strategy", "ticks", "would unload", "actual moves", "same bundle"))
    table.add_row("demo", "AvgShedder", "12", "3", "36", "0")
    table.add_row("demo", "CapacityAwareShedder", "12", "38", "36", "36")
    out = io.StringIO()
    Console(file=out, width=44).print(table)
    strategies = "".join(line.split("│")[2].strip() for line in out.getvalue().splitlines() if "│" in line)
    assert "AvgShedder" in strategies and "CapacityAwareShedder" in strategies, out.getvalue()


def test_spark_commands_status_adds_no_empty_line_on_a_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a pipe, the status line's stop() printed an empty line: an error after Spark had started
    (``twin --window`` with no samples in it) was two lines on stderr, an empty one and the error."""
    import io

    from rich.console import Console

    import shedlab.cli.spark_cmd as spark_cmd

    err = io.StringIO()
    monkeypatch.setattr(spark_cmd, "err_console", Console(file=err, width=80))
    with pytest.raises(RuntimeError), spark_cmd._status(False) as say:
        say("reading")
        say("fitting")
        raise RuntimeError
    import re

    assert re.fullmatch(r"reading \(\d+\.\d s\)\n", err.getvalue()), repr(err.getvalue())


def test_spark_commands_status_prints_the_last_step_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step was printed when the next began, so the last never was: ``tune`` showed ``rung 1/3`` and
    ``rung 2/3`` but not the third rung it ran (``tune --demo`` did: its report step came after)."""
    import io
    import re

    from rich.console import Console

    import shedlab.cli.spark_cmd as spark_cmd

    err = io.StringIO()
    monkeypatch.setattr(spark_cmd, "err_console", Console(file=err, width=80))
    with spark_cmd._status(False) as say:
        for rung in (1, 2, 3):
            say(f"rung {rung}/3")
    assert re.fullmatch(r"(rung \d/3 \(\d+\.\d s\)\n){3}", err.getvalue()), repr(err.getvalue())
    steps = [line.split(" (")[0] for line in err.getvalue().splitlines()]
    assert steps == ["rung 1/3", "rung 2/3", "rung 3/3"]


def test_report_help_names_every_output_it_reads() -> None:
    """``report --help`` listed sweep, simulate, compare and replay, not tune, whose output the README and
    docs/tune.md report (with a Recommendation section)."""
    result = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "simulate, compare, replay or tune" in result.output


def test_advise_help_says_where_execute_sends_the_unloads() -> None:
    """``--execute`` said 'Really unload' without naming --admin-url, which reading from --zookeeper
    needs as well."""
    result = CliRunner().invoke(app, ["advise", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "Really unload, through --admin-url" in result.output


def test_report_of_a_directory_without_results_says_what_it_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``report`` of ingest's output (the step before replay) said only 'no shedlab results found here',
    and its list of what it reads left out tune."""
    from shedlab.cli import main

    snap = tmp_path / "snap"
    (snap / "broker_samples").mkdir(parents=True)
    for folder in (snap, tmp_path):
        with pytest.raises(SystemExit) as exc:
            main(["report", str(folder), "--out", str(tmp_path / "r.html")])
        assert exc.value.code == 2
    first, second = capsys.readouterr().err.splitlines()
    assert first == (
        f"error: {snap}: an ingest output holds no results to report; replay it first"
        f" (shedlab replay {snap} --strategies … --out DIR), then report DIR"
    )
    assert second.endswith(
        "expected the output of shedlab simulate, compare, sweep (+ evaluate), replay or tune"
    )


@pytest.mark.parametrize("command", ["collect", "advise"])
def test_cluster_help_says_what_a_zookeeper_recording_is_labelled(command: str) -> None:
    """``--cluster`` gave the admin API's default only; a recording read from ZooKeeper without it was
    labelled 'pulsar', which ingest, replay and twin then named, with no word of where it came from."""
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0
    assert "ZooKeeper, whose load-balancer znodes do not name it, 'pulsar'" in result.output


def test_json_output_is_strict_json(capsys: pytest.CaptureFixture[str]) -> None:
    """The Spark commands' ``--json``: a statistic without a value (one seed's interval, NaN in pandas)
    is null, not the ``NaN`` strict parsers refuse; nested in records and lists alike."""
    import json
    import math

    from shedlab.cli.spark_cmd import _print_json

    _print_json({"goal": [{"ci_low": math.nan, "value": 1.5}], "pip364": ({"ci": [math.inf, 2.0]},)})

    def refuse(constant: str) -> None:
        raise AssertionError(f"not strict JSON: {constant}")

    doc = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert doc == {"goal": [{"ci_low": None, "value": 1.5}], "pip364": [{"ci": [None, 2.0]}]}
