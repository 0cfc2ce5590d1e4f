"""The SparkSession factory: settings (no JVM) and the real local session."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import shedlab
from shedlab.core.ingest import classify_sources, local_bytes
from shedlab.errors import ConfigError
from shedlab.spark.session import (
    C1_ONLY,
    CACHED_PLAN_PARTITIONING,
    RAW_LOCAL_FILES,
    SHORT_INPUT_BYTES,
    check_master,
    check_spark_values,
    local_cores,
    package_zip,
    parse_conf_pairs,
    read_conf_file,
    short_input_conf,
    spark_settings,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_parse_conf_pairs() -> None:
    assert parse_conf_pairs(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError, match="key=value"):
        parse_conf_pairs(["novalue"])
    with pytest.raises(ConfigError):
        parse_conf_pairs(["=1"])
    # the last was taken, silently (until 29 Nov 2026)
    with pytest.raises(
        ConfigError, match=r"^--conf: spark\.executor\.memory: given twice .*'spark\.executor\.memory=8g'"
    ):
        parse_conf_pairs(["spark.executor.memory=4g", "spark.executor.memory=8g"])


def test_a_spark_conf_that_is_no_file_is_refused() -> None:
    """It is read twice, checked before Spark starts and then applied: --spark-conf <(…) had its second
    read empty, and every setting was dropped, silently (until 29 Nov 2026)."""
    with pytest.raises(ConfigError, match=r"^/dev/null: --spark-conf: not a file or a directory \(a pipe"):
        read_conf_file("/dev/null")


def test_read_conf_file(tmp_path: Path) -> None:
    props = tmp_path / "spark-defaults.conf"
    props.write_text(
        "# comment\nspark.executor.memory 4g\nspark.sql.shuffle.partitions=8\n", encoding="utf-8"
    )
    assert read_conf_file(props) == {"spark.executor.memory": "4g", "spark.sql.shuffle.partitions": "8"}
    yml = tmp_path / "spark.yaml"
    yml.write_text("spark:\n  executor:\n    cores: 2\n  ui:\n    enabled: true\n", encoding="utf-8")
    assert read_conf_file(yml) == {"spark.executor.cores": "2", "spark.ui.enabled": "true"}
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing set yet\n", encoding="utf-8")
    assert read_conf_file(empty) == {}
    for falsy in ("0", "''", "[]", "false"):  # read as no settings (``or {}``) until 28 Nov 2026
        empty.write_text(falsy + "\n", encoding="utf-8")
        with pytest.raises(ConfigError, match="expected a mapping of Spark settings"):
            read_conf_file(empty)
    with pytest.raises(ConfigError, match="Spark config file not found"):
        read_conf_file(tmp_path / "missing.conf")
    (tmp_path / "utf16.conf").write_bytes("spark.executor.cores 2\n".encode("utf-16"))
    assert read_conf_file(tmp_path / "utf16.conf") == {"spark.executor.cores": "2"}
    (tmp_path / "gz.yaml").write_bytes(b"\x1f\x8b\x08\x00binary")
    with pytest.raises(ConfigError, match="gzip"):
        read_conf_file(tmp_path / "gz.yaml")
    (tmp_path / "twice.yaml").write_text("spark.a: 1\nspark.a: 2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"spark\.a"):
        read_conf_file(tmp_path / "twice.yaml")


def test_json_in_a_spark_defaults_file_is_refused(tmp_path: Path) -> None:
    """Read as ``key value`` lines by its name, its one key was ``{"spark.executor.memory":``, which Spark
    ignores: every setting of the file was dropped, silently (until 29 Nov 2026)."""
    conf = tmp_path / "spark.conf"
    conf.write_text('{"spark.executor.memory": "4g"}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"spark\.conf: JSON in a file read as spark-defaults\.conf"):
        read_conf_file(conf)


def test_local_cores() -> None:
    assert local_cores("local") == 1
    assert local_cores("local[3]") == 3
    assert local_cores("local[4,2]") == 4
    assert local_cores("local[*]") >= 1


def test_settings_defaults_and_overrides() -> None:
    s = spark_settings("local[2]", {"spark.sql.shuffle.partitions": "7"})
    assert s["spark.pyspark.python"] == sys.executable
    assert s["spark.ui.enabled"] == "false"
    assert s["spark.sql.execution.arrow.pyspark.enabled"] == "true"
    assert s["spark.sql.session.timeZone"] == "UTC"
    assert s["spark.sql.shuffle.partitions"] == "7"
    # PySpark's call-site capture off: four extra Py4J round trips per Column call otherwise
    assert s["spark.python.sql.dataFrameDebugging.enabled"] == "false"
    assert (
        spark_settings("local[2]", {"spark.python.sql.dataFrameDebugging.enabled": "true"})[
            "spark.python.sql.dataFrameDebugging.enabled"
        ]
        == "true"
    )  # a user who wants Spark's Python call sites in its errors can have them
    assert spark_settings("local[2]", ui=True)["spark.ui.enabled"] == "true"
    cluster = spark_settings("spark://master:7077")
    assert "spark.driver.memory" not in cluster  # small-machine defaults only for local masters
    # A cluster keeps Spark's shuffle partitions, which AQE coalesces under a persist too (ingest)
    assert "spark.sql.shuffle.partitions" not in cluster
    assert cluster[CACHED_PLAN_PARTITIONING] == s[CACHED_PLAN_PARTITIONING] == "true"
    assert (
        spark_settings("spark://master:7077", {CACHED_PLAN_PARTITIONING: "false"})[CACHED_PLAN_PARTITIONING]
        == "false"
    )
    with pytest.raises(ConfigError, match="log level"):
        spark_settings(None, log_level="LOUD")


def test_local_files_are_read_and_written_without_checksum_sidecars() -> None:
    """``file:`` goes through Hadoop's raw local filesystem on every master (an output a user edited stays
    readable), uncached; a user can set Hadoop's checksummed one back."""
    for master in ("local[2]", "spark://master:7077", None):
        settings = spark_settings(master)
        assert settings["spark.hadoop.fs.file.impl"] == "org.apache.hadoop.fs.RawLocalFileSystem"
        assert settings["spark.hadoop.fs.file.impl.disable.cache"] == "true"
    checksummed = spark_settings(
        "local[2]", {"spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem"}
    )
    assert checksummed["spark.hadoop.fs.file.impl"] == "org.apache.hadoop.fs.LocalFileSystem"
    assert set(RAW_LOCAL_FILES) <= set(checksummed)


def test_user_jvm_options_keep_the_quiet_log_configuration() -> None:
    key = "spark.driver.extraJavaOptions"
    ours = spark_settings("local[2]", log_level="ERROR")[key]
    assert ours.startswith("-Dlog4j2.configurationFile=file:") and ours.endswith("error.properties")
    both = spark_settings("local[2]", {key: "-XX:TieredStopAtLevel=1"}, log_level="ERROR")[key]
    assert both == f"{ours} -XX:TieredStopAtLevel=1"
    own = "-Dlog4j2.configurationFile=file:/etc/mine.properties -Xss4m"
    assert spark_settings("local[2]", {key: own})[key] == own  # their log file alone


def test_the_log_configuration_starts_spark_without_its_log_level_banner(tmp_path: Path) -> None:
    """Spark prints "Setting default log level to ..." and a hint before every command's output when the
    first logging class's level differs from the root's (Logging.initializeLogging, PySpark being an
    interpreter), and then filters the console at ERROR: the root is at ERROR instead. A fresh driver
    process shows only the JVM's own module warning on stderr."""
    key = "spark.driver.extraJavaOptions"
    path = spark_settings("local[1]")[key].split("file:", 1)[1].split()[0]
    text = Path(path).read_text(encoding="utf-8")
    assert "rootLogger.level = ERROR" in text
    assert "rootLogger.level = OFF" in Path(
        spark_settings("local[1]", log_level="OFF")[key].split("file:", 1)[1].split()[0]
    ).read_text(encoding="utf-8")
    code = "from shedlab.spark.session import get_spark; get_spark('local[1]').stop()"
    env = {**os.environ, "SPARK_LOCAL_DIRS": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Setting default log level" not in done.stderr
    assert done.stderr == ""  # not even the JVM's incubator warning (spark/jvm_stderr.py)


def test_short_local_inputs_get_c1_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHEDLAB_SPARK_MASTER", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    c1 = f"spark.driver.extraJavaOptions={C1_ONLY}"
    small, large = 10_000, SHORT_INPUT_BYTES
    assert short_input_conf(None, ["a=1"], None, small) == ["a=1", c1]
    assert short_input_conf("local[2]", [], None, small) == [c1]
    assert short_input_conf("local[2]", [], None, large) == []  # long: C2 pays for itself
    assert short_input_conf("local[2]", [], None, None) == []  # a remote source: size unknown
    assert short_input_conf("spark://127.0.0.1:7077", [], None, small) == []  # the driver runs no task
    own = ["spark.driver.extraJavaOptions=-Xss4m"]
    assert short_input_conf("local[2]", own, None, small) == own  # the user's flags alone
    conf_file = tmp_path / "spark.conf"
    conf_file.write_text("spark.driver.extraJavaOptions -Xss4m\n", encoding="utf-8")
    assert short_input_conf("local[2]", [], str(conf_file), small) == []
    monkeypatch.setenv("SHEDLAB_SPARK_MASTER", "spark://127.0.0.1:7077")
    assert short_input_conf(None, [], None, small) == []
    monkeypatch.setenv("SHEDLAB_SPARK_MASTER", "local[1]")
    assert short_input_conf(None, [], None, small) == [c1]


def test_local_bytes_counts_files_and_parquet_directories(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"x": 1}\n', encoding="utf-8")
    table = tmp_path / "snap" / "broker_samples"
    table.mkdir(parents=True)
    (table / "part-0.parquet").write_bytes(b"PAR1" + b"\0" * 96 + b"PAR1")
    sources = classify_sources([str(tmp_path / "a.jsonl")])
    assert local_bytes(sources) == 9
    sources.parquet.append(str(tmp_path / "snap"))
    assert local_bytes(sources) == 9 + 104
    sources.parquet.append("s3a://bucket/snap")
    assert local_bytes(sources) is None


def _import_from_zip(code: str, target: Path, cache: Path) -> list[str]:
    """The words ``code`` prints, run as an executor runs it: no site-packages (``-S``), the zip at
    ``target`` as its first argument, ``cache`` as its cache directory; it must exit 0."""
    run = subprocess.run(
        [sys.executable, "-S", "-c", code, str(target)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=target.parent,
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.split()


def test_the_shipped_package_imports_its_namespace_packages_and_data_from_the_zip(tmp_path: Path) -> None:
    """What a cluster's executors do with the zip ``addPyFile`` gave them: import from it alone (``-S``: no
    site-packages, no installed shedlab). ``shedlab.core`` and ``shedlab.data`` have no ``__init__.py``;
    without the zip's folder entries every sweep task failed with ``No module named 'shedlab.core'``.

    The modules below ``shedlab`` come from the zip's content extracted once into the cache directory,
    the same folder for the same zip wherever Spark put it (each application has its own directory), so
    Numba's cache of the compiled kernels, keyed by the source file's path, serves every application."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import importlib.resources, importlib.util, shedlab, shedlab.core\n"
        "assert shedlab.__file__.startswith(sys.path[0]), shedlab.__file__\n"
        "data = importlib.resources.files('shedlab').joinpath('data', 'grids', 'tiny.yaml')\n"
        "kernels = importlib.util.find_spec('shedlab.kernels').origin  # not run: -S has no NumPy\n"
        "print(data.read_text('utf-8').count('name: tiny'), kernels)\n"
    )
    cache = tmp_path / "cache"
    printed = []
    for application in ("app-1", "app-2"):
        (tmp_path / application).mkdir()
        target = package_zip(tmp_path / application / "shedlab.zip")
        printed.append(_import_from_zip(code, target, cache))
    assert printed[0] == printed[1]
    count, kernels = printed[0]
    assert count == "1"
    assert Path(kernels).parent.parent.parent == cache / "shedlab"
    assert Path(kernels).read_bytes() == (Path(shedlab.__file__).parent / "kernels.py").read_bytes()


def test_sessions_that_ship_the_package_share_one_zip_per_version(tmp_path: Path) -> None:
    """Two applications (two processes, each its own JVM) that ship the package add the same file,
    ``<tmp>/shedlab-package/<digest>/shedlab.zip``. A fresh temporary folder per session left a 1.9 MB
    zip in /tmp each time (48 after a day's test runs, 28 Nov 2026)."""
    code = (
        "from shedlab.spark.session import get_spark\n"
        "spark = get_spark('local[1]', {'shedlab.shipPackage': 'true'})\n"
        "print(spark.sparkContext.parallelize([1, 2], 1).sum())\n"
        "spark.stop()\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    command = [sys.executable, "-c", code]
    for _ in range(2):
        run = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
        assert run.returncode == 0 and run.stdout.split()[-1] == "3", run.stderr[-2000:]
    (shipped,) = (tmp_path / "shedlab-package").glob("*/shedlab.zip")
    assert shipped.read_bytes() == package_zip(tmp_path / "fresh.zip").read_bytes()
    assert not list(tmp_path.glob("shedlab-pyfiles-*"))


def test_a_shipped_zip_without_a_writable_cache_is_imported_from_the_zip(tmp_path: Path) -> None:
    """An executor whose cache directory cannot be written (here: a file stands where it would be) still
    imports shedlab, from the zip itself; the extraction is an optimisation, never a failure."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "import shedlab, shedlab.core\n"
        "print(shedlab.__path__[0].startswith(sys.argv[1]))\n"
    )
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("x", encoding="utf-8")
    target = package_zip(tmp_path / "shedlab.zip")
    assert _import_from_zip(code, target, blocked) == ["True"]


def test_unknown_master_is_a_config_error() -> None:
    from shedlab.spark.session import get_spark

    with pytest.raises(ConfigError, match="unknown Spark master"):
        get_spark("mesos-ish://nowhere")


@pytest.mark.spark
def test_session_is_configured(spark: SparkSession) -> None:
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.master == "local[2]"
    assert conf.get("spark.pyspark.python") == sys.executable
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    # Workers run this interpreter and can import shedlab.
    import shedlab

    def probe(_: Any) -> Any:
        import sys as worker_sys

        import shedlab as worker_shedlab

        yield (worker_sys.executable, worker_shedlab.__version__)

    assert spark.sparkContext.parallelize([1], 1).mapPartitions(probe).collect() == [
        (sys.executable, shedlab.__version__)
    ]


@pytest.mark.spark
def test_writes_without_checksum_sidecars_keep_their_semantics(spark: SparkSession, tmp_path: Path) -> None:
    """The raw local filesystem writes no ``.crc`` files and changes nothing else a write does: ``_SUCCESS``,
    overwrite, append, and dynamic partition overwrite (only the partitions written are replaced)."""
    from pyspark.sql import functions

    jvm = spark.sparkContext._jvm
    assert jvm is not None
    fs = jvm.org.apache.hadoop.fs.Path(tmp_path.as_uri()).getFileSystem(
        spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    )
    assert fs.getClass().getName() == "org.apache.hadoop.fs.RawLocalFileSystem"
    rows = spark.createDataFrame([(i, f"p{i % 3}") for i in range(30)], "x int, p string")
    plain, parts = str(tmp_path / "plain"), str(tmp_path / "parts")
    rows.write.mode("overwrite").parquet(plain)
    rows.write.mode("append").parquet(plain)
    assert spark.read.parquet(plain).count() == 60
    rows.limit(5).write.mode("overwrite").parquet(plain)
    assert spark.read.parquet(plain).count() == 5
    assert (tmp_path / "plain" / "_SUCCESS").is_file()
    rows.write.mode("overwrite").partitionBy("p").parquet(parts)
    rows.filter("p = 'p0'").selectExpr("x + 100 AS x", "p").write.mode("overwrite").partitionBy("p").parquet(
        parts
    )
    summary = spark.read.parquet(parts).groupBy("p").agg(functions.count("*"), functions.min("x")).collect()
    counts = {str(p): (int(n), int(low)) for p, n, low in summary}
    assert counts == {"p0": (10, 100), "p1": (10, 1), "p2": (10, 2)}
    assert list(tmp_path.rglob("*.crc")) == []


@given(
    st.integers(0, 10**6),
    st.sampled_from(["", "b", "k", "kb", "m", "mb", "g", "gb", "t", "tb", "p", "pb", "G", "MB"]),
)
def test_spark_sizes_are_read_as_spark_reads_them(amount: int, unit: str) -> None:
    """Digits and one of JavaUtils' units: accepted (more than 0 for the memory settings); a fraction,
    a sign or another unit: refused in one line naming the setting, before spark-submit could exit."""
    size = f"{amount}{unit}"
    assert check_spark_values({"spark.driver.maxResultSize": size}, "--conf")
    if amount > 0:
        assert check_spark_values({"spark.executor.memory": size}, "--conf")
    else:
        with pytest.raises(ConfigError, match=r"spark\.executor\.memory: expected a size"):
            check_spark_values({"spark.executor.memory": size}, "--conf")
    for bad in (f"{amount}.5{unit}", f"-{size}", f"{amount}x", f"{amount} g", ""):
        with pytest.raises(ConfigError, match=r"--conf: spark\.driver\.memory: expected a size"):
            check_spark_values({"spark.driver.memory": bad}, "--conf")


@pytest.mark.parametrize("key", ["sprak.executor.memory", "Spark.executor.memory", "spakr.executor.memory"])
def test_a_misspelt_spark_key_is_refused(key: str) -> None:
    """Spark took it as a setting of no meaning, and the executors ran with their default memory,
    silently (until 29 Nov 2026); keys of another namespace still pass (they reach Hadoop's)."""
    with pytest.raises(ConfigError, match=rf"--conf: {key}: not a Spark setting.*'spark\.executor\.memory'"):
        parse_conf_pairs([f"{key}=4g"])
    assert parse_conf_pairs(["fs.s3a.endpoint=http://x", "parquet.block.size=1"]) == {
        "fs.s3a.endpoint": "http://x",
        "parquet.block.size": "1",
    }


def test_settings_spark_does_not_parse_at_start_up_pass_unchecked() -> None:
    assert check_spark_values({"spark.x.y": "anything", "spark.ui.enabled": "FALSE"}, "f") == {
        "spark.x.y": "anything",
        "spark.ui.enabled": "FALSE",
    }
    with pytest.raises(ConfigError, match=r"spark\.ui\.port: expected an integer from 0 to 65535"):
        check_spark_values({"spark.ui.port": "70000"}, "f")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("spark.sql.sources.partitionOverwriteMode", "static"),  # a second ingest erased the first cluster
        ("spark.sql.session.timeZone", "Europe/Paris"),  # ingest's days in another zone
        ("spark.sql.session.timeZone", ""),
        # ingest's JVM path would keep a line with a key given twice (its last value)
        ("spark.sql.variant.allowDuplicateKeys", "true"),
    ],
)
def test_settings_shedlab_relies_on_are_refused_with_another_value(
    key: str, value: str, tmp_path: Path
) -> None:
    """Another value was taken, silently: with ``static``, ``shedlab ingest A --cluster a`` then
    ``ingest B --cluster b`` into one --out left cluster b alone (28 Nov 2026)."""
    with pytest.raises(ConfigError, match=rf"^--conf: {key}: shedlab needs \w+ \(got '{value}'\); "):
        parse_conf_pairs([f"{key}={value}"])
    (tmp_path / "spark.yaml").write_text(f"{key}: '{value}'\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"spark\.yaml: {key}: shedlab needs"):
        read_conf_file(tmp_path / "spark.yaml")
    same = ["spark.sql.session.timeZone=utc", "spark.sql.sources.partitionOverwriteMode=DYNAMIC"]
    assert parse_conf_pairs(same) == dict(pair.split("=") for pair in same)  # shedlab's own values pass


def test_a_master_not_given_as_master_is_checked_before_spark_naming_where_it_was_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad spark.master of --spark-conf or --conf, or $SHEDLAB_SPARK_MASTER, was refused only when the
    session started (after sweep's 'grid tiny: …' line), as '--master', which was not given."""
    monkeypatch.delenv("SHEDLAB_SPARK_MASTER", raising=False)
    (tmp_path / "m.conf").write_text("spark.master local[0]\n", encoding="utf-8")
    with pytest.raises(
        ConfigError, match=r"^.*m\.conf: spark\.master: unknown Spark master \(got 'local\[0\]'\)"
    ):
        check_master(None, [], str(tmp_path / "m.conf"))
    with pytest.raises(ConfigError, match=r"^--conf: spark\.master: unknown Spark master \(got 'yarnn'\)"):
        check_master(None, ["spark.master=yarnn"], str(tmp_path / "m.conf"))  # --conf wins over the file
    check_master("local[1]", [], str(tmp_path / "m.conf"))  # --master wins: the file's is not used
    check_master(None, ["spark.master=local[1]"], str(tmp_path / "m.conf"))
    monkeypatch.setenv("SHEDLAB_SPARK_MASTER", "local[-1]")
    with pytest.raises(ConfigError, match=r"^\$SHEDLAB_SPARK_MASTER: unknown Spark master"):
        check_master(None, None, None)


def test_a_shipped_version_unused_for_a_week_is_removed_when_another_is_shipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every version of the package (every edit, in development) left its 1.9 MB folder in
    ``<tmp>/shedlab-package`` for ever, and every version of a strategy module its zip (until 29 Nov
    2026); one that no session shipped for UNUSED_SHIPPED_S is removed when a session ships its own. One
    shipped since stays (a running application serves it to executors that start later), and so does the
    version shipped again, whose time is renewed."""
    from types import SimpleNamespace

    from shedlab.spark import session

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old = time.time() - session.UNUSED_SHIPPED_S - 60
    folder = tmp_path / "shedlab-package"
    for name, when in (("stale", old), ("recent", time.time() - 3600)):
        (folder / name).mkdir(parents=True)
        (folder / name / "shedlab.zip").write_bytes(b"zip")
        for path in (folder / name / "shedlab.zip", folder / name):
            os.utime(path, (when, when))
    added: list[str] = []
    spark = SimpleNamespace(sparkContext=SimpleNamespace(addPyFile=added.append))
    session._ship_package(spark)  # type: ignore[arg-type]
    shipped = Path(added[0])
    assert sorted(p.name for p in folder.iterdir()) == sorted(["recent", shipped.parent.name])
    os.utime(shipped, (old, old))
    session._ship_package(spark)  # type: ignore[arg-type]
    assert shipped.is_file() and time.time() - shipped.stat().st_mtime < 60

    (tmp_path / "mine.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    strategies = tmp_path / "shedlab-strategies"
    strategies.mkdir()
    (strategies / "mine-0123456789abcdef.zip").write_bytes(b"zip")
    os.utime(strategies / "mine-0123456789abcdef.zip", (old, old))
    kept = session._zip_module("mine")
    assert [p.name for p in strategies.iterdir()] == [kept.name]
