"""The one place a SparkSession is made.

``get_spark()`` gives a session that works the same on a laptop and on a cluster:

* master: ``local[*]`` unless one is given (``--master spark://…``, ``yarn``, ``k8s://…``), or the
  one ``spark-submit`` already set (then nothing is overridden);
* worker Python = the interpreter running shedlab (``spark.pyspark.python`` and ``PYSPARK_PYTHON``),
  so the workers see the same numpy/pandas/pyarrow and shedlab;
* shedlab importable on the workers: locally through ``PYTHONPATH``; on a cluster the package is
  zipped and shipped with ``addPyFile`` unless ``shedlab.shipPackage=false`` (use that when shedlab
  is installed in the executors' environment);
* users' strategies (``package.module:ClassName``) importable on the workers:
  :func:`ship_strategy_modules` ships their modules with ``addPyFile``;
* quiet logs (the console at ERROR, the root included: :func:`_quiet_root`; a local master's failed
  tasks to :data:`SPARK_TASKS_LOG`), no console progress bar, the web UI off unless asked for;
* local files (``file:``) read and written without Hadoop's ``.crc`` checksum sidecars
  (:data:`RAW_LOCAL_FILES`), so an output a user edited stays readable;
* adaptive query execution allowed to coalesce the shuffle partitions of a persisted plan
  (:data:`CACHED_PLAN_PARTITIONING`), so a cluster's 200 default shuffle partitions cost no 200 tasks;
* small-machine defaults for local masters (shuffle partitions = 2 × cores, UTC session time zone,
  Arrow for pandas conversion, one BLAS thread per task); every default can be overridden with
  ``--conf k=v`` or a config file, but for the two shedlab relies on (:data:`_RELIED_ON`).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shedlab.config import parse_key_values, parse_yaml_text, refuse_json_text
from shedlab.errors import ConfigError, closest, read_user_text, refuse_special_file
from shedlab.spark.jvm_stderr import filtered_jvm_stderr
from shedlab.strategies.registry import strategy_modules

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "ACCEPTED_MASTERS",
    "CACHED_PLAN_PARTITIONING",
    "DEFAULT_MASTER",
    "RAW_LOCAL_FILES",
    "SPARK_TASKS_LOG",
    "UNUSED_SHIPPED_S",
    "check_master",
    "check_spark_values",
    "get_spark",
    "has_active_session",
    "is_local_master",
    "local_cores",
    "package_zip",
    "parse_conf_pairs",
    "read_conf_file",
    "ship_strategy_modules",
    "short_input_conf",
    "spark_settings",
    "stop_spark",
    "validate_master",
]

DEFAULT_MASTER = "local[*]"

_LOG4J2 = """\
rootLogger.level = {root}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = ERROR
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = ERROR
logger.parquet.name = org.apache.parquet
logger.parquet.level = ERROR
logger.spark_util.name = org.apache.spark.util.Utils
logger.spark_util.level = ERROR
logger.arrow.name = org.apache.arrow
logger.arrow.level = ERROR
logger.sparkenv.name = org.apache.spark.SparkEnv
logger.sparkenv.level = ERROR
logger.blockmgr.name = org.apache.spark.storage
logger.blockmgr.level = ERROR
appender.tasks.type = RollingFile
appender.tasks.name = tasks
appender.tasks.fileName = {tasks_log}
appender.tasks.filePattern = {tasks_log}.%i
appender.tasks.layout.type = PatternLayout
appender.tasks.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
appender.tasks.policies.type = Policies
appender.tasks.policies.size.type = SizeBasedTriggeringPolicy
appender.tasks.policies.size.size = {tasks_log_size}
appender.tasks.strategy.type = DefaultRolloverStrategy
appender.tasks.strategy.max = 1
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = ERROR
logger.executor.additivity = false
logger.executor.appenderRef.tasks.ref = tasks
logger.taskset.name = org.apache.spark.scheduler.TaskSetManager
logger.taskset.level = ERROR
logger.taskset.additivity = false
logger.taskset.appenderRef.tasks.ref = tasks
logger.transport.name = org.apache.spark.network
logger.transport.level = ERROR
logger.transport.additivity = false
logger.transport.appenderRef.tasks.ref = tasks
logger.py.name = org.apache.spark.api.python
logger.py.level = ERROR
"""

SPARK_TASKS_LOG = Path(tempfile.gettempdir()) / "shedlab-spark-tasks.log"
"""Where a local master's failed tasks are logged (``Executor``, ``TaskSetManager``), not the console.

A task that fails logs its Java stack at ERROR from the executor, which a local master runs in the
driver's JVM: 40 lines on the console before the driver's own error. The driver's exception carries the
same failure (the command line turns a file Spark could not read into one line,
:mod:`shedlab.spark.failures`, and keeps the traceback of any other), so the console loses nothing a user
reads and the file keeps the executor's stacks. A cluster's executors log where their cluster puts logs.

On a cluster the driver's transport layer (``org.apache.spark.network``, client and server) logs here
too. When the application stops, an executor that exits before answering the driver's last request made
the client print ``ERROR TransportResponseHandler: Still have 1 requests outstanding when connection from
/… is closed`` after a sweep that succeeded (one of two sweeps on a standalone cluster,
tests/spark/test_standalone_cluster.py); an executor that closes its connection before the driver's
answer reaches it makes the server print ``ERROR TransportRequestHandler: Error sending result
RpcResponse[…] to /…; closing connection`` (one CI run in about fifteen, 28 Nov 2026). A connection lost
while a job runs fails its tasks, which the driver's exception reports.

The file rolls over at :data:`SPARK_TASKS_LOG_SIZE` into one previous file (``….log.1``), so a machine
that sweeps every day keeps the last failures, not all of them."""

SPARK_TASKS_LOG_SIZE = "10MB"
"""log4j2's size at which the tasks log rolls over (a failed task's stack is about 4 KB)."""

_LEVELS = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")  # chattiest first


def is_local_master(master: str | None) -> bool:
    """True for ``local``, ``local[4]``, ``local[*]``, ``local[2,3]`` (and None = the default)."""
    return master is None or master == "local" or master.startswith("local[")


_MASTER_FORMS = tuple(
    re.compile(form, re.ASCII)  # Java's \d and \s, in Spark's own patterns, are ASCII
    for form in (
        r"local",
        r"local\[(\*|[1-9]\d*)\]",
        r"local\[(\*|[1-9]\d*),\s*[1-9]\d*\]",
        r"local-cluster\[[1-9]\d*,\s*[1-9]\d*,\s*[1-9]\d*\]",
        r"yarn",
        r"k8s://\S+",
    )
)
_LABEL = r"[A-Za-z0-9](?:[-A-Za-z0-9]*[A-Za-z0-9])?"
_HOST = rf"(?:\[[0-9A-Fa-f:.]+\]|{_LABEL}(?:\.{_LABEL})*\.?)"
_STANDALONE_MASTER = re.compile(rf"({_HOST}):([0-9]{{1,5}})", re.ASCII)
"""One master of ``spark://HOST:PORT[,HOST:PORT…]``, as ``java.net.URI`` reads a host and a port."""
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|[01]?[0-9]?[0-9])"
_IPV4 = re.compile(rf"{_OCTET}(?:\.{_OCTET}){{3}}", re.ASCII)
ACCEPTED_MASTERS = "local, local[N], local[*], local[N,F], spark://host:port, yarn, k8s://https://host:port"
"""The master URLs Spark 4 accepts (Mesos was removed in Spark 4), as the one line an error lists."""


def validate_master(master: str, *, field: str = "--master", source: str | None = None) -> str:
    """``master`` if it is a form Spark 4 accepts, else a :class:`ConfigError` naming ``field`` (and
    ``source``: where it was given) and listing the forms.

    Checked before a JVM starts: Spark itself reports a bad master as a Java stack trace, and only after
    the JVM has started."""
    if not (any(form.fullmatch(master.strip()) for form in _MASTER_FORMS) or _is_standalone(master.strip())):
        why = "Spark 4 no longer supports Mesos" if master.startswith("mesos://") else "unknown Spark master"
        raise ConfigError(why, source=source, field=field, value=master, hint=f"use {ACCEPTED_MASTERS}")
    return master.strip()


def _is_standalone(master: str) -> bool:
    """Whether ``master`` is ``spark://`` and masters Spark's standalone client can address: each a host
    and a port from 1 to 65535 (``Utils.extractHostPortFromSparkUrl``). ``spark://h`` (no port),
    ``spark://h_x:7077`` (no host to ``java.net.URI``) and a port in other digits than 0-9 were a Java
    stack trace once the JVM had started, 'Invalid master URL'."""
    if not master.startswith("spark://"):
        return False
    found = [_STANDALONE_MASTER.fullmatch(one) for one in master.removeprefix("spark://").split(",")]
    return all(m is not None and _java_host(m.group(1)) and 0 < int(m.group(2)) <= 65535 for m in found)


def _java_host(host: str) -> bool:
    """``java.net.URI``'s last test of a host (``Parser.parseHostname``): past an IPv4 address, a name of
    several labels must end with a label that starts with a letter (``spark://host.123:7077`` has no host
    to Java, so Spark's standalone client fails on it, 'Invalid master URL'); one label may be digits."""
    if host.startswith("[") or _IPV4.fullmatch(host):
        return True
    labels = host.removesuffix(".").split(".")
    return len(labels) == 1 or labels[-1][:1].isalpha()


def check_master(master: str | None, conf: Sequence[str] | None, conf_file: str | None) -> None:
    """The master a session of these options would use, checked before Spark starts (and before a
    command prints anything): a bad ``spark.master`` of ``--conf`` or ``--spark-conf``, or of
    ``$SHEDLAB_SPARK_MASTER``, was refused only when the session started, after the command's first
    lines, as ``--master``, which was not given."""
    pairs = parse_conf_pairs(conf or ())
    file = read_conf_file(conf_file) if conf_file else {}
    for source, settings in (("--conf", pairs), (conf_file, file)):  # --conf's wins, as in _user_settings
        if master is None and "spark.master" in settings:
            validate_master(settings["spark.master"], field="spark.master", source=source)
            break
    _effective_master(master, {**file, **pairs})


def local_cores(master: str | None) -> int:
    """How many task slots a local master has (``local[*]`` = CPU count)."""
    if master is None or master in ("local[*]", "local[*,1]"):
        return os.cpu_count() or 1
    if master == "local":
        return 1
    m = re.fullmatch(r"local\[(\*|\d+)(?:,\d+)?\]", master, re.ASCII)
    if not m:
        return os.cpu_count() or 1
    if m.group(1) == "*":
        return os.cpu_count() or 1
    return max(1, int(m.group(1)))


def parse_conf_pairs(pairs: Iterable[str], *, source: str = "--conf") -> dict[str, str]:
    """``--conf`` values → dict (:func:`shedlab.config.parse_key_values`, Spark's wording), the values of
    the settings Spark parses at start-up checked (:func:`check_spark_values`)."""
    return check_spark_values(parse_key_values(pairs, source=source), source)


_SIZE_UNITS = frozenset({"b", "k", "kb", "m", "mb", "g", "gb", "t", "tb", "p", "pb"})
_SPARK_VALUES: dict[str, tuple[str, int]] = {
    **{key: ("size", 1) for key in ("spark.driver.memory", "spark.executor.memory")},
    **{
        key: ("size", 0)
        for key in (
            "spark.driver.memoryOverhead",
            "spark.executor.memoryOverhead",
            "spark.executor.pyspark.memory",
            "spark.driver.maxResultSize",
            "spark.memory.offHeap.size",
        )
    },
    **{
        key: ("integer", 1)
        for key in (
            "spark.driver.cores",
            "spark.executor.cores",
            "spark.cores.max",
            "spark.executor.instances",
            "spark.default.parallelism",
            "spark.sql.shuffle.partitions",
            "spark.sql.adaptive.coalescePartitions.initialPartitionNum",
            "spark.task.cpus",
            "spark.task.maxFailures",
        )
    },
    **{key: ("port", 0) for key in ("spark.ui.port", "spark.driver.port", "spark.blockManager.port")},
    **{
        key: ("boolean", 0)
        for key in (
            "spark.ui.enabled",
            "spark.sql.adaptive.enabled",
            "spark.dynamicAllocation.enabled",
            "spark.eventLog.enabled",
            "spark.python.worker.reuse",
        )
    },
}
"""Settings Spark parses when the driver starts, by kind and minimum. A value it cannot parse made
spark-submit exit (``JAVA_GATEWAY_EXITED``, after a Java stack on stderr: the memory and core counts) or
the session fail to start (an ``IllegalArgumentException`` and a Java stack: the others)."""


_RELIED_ON: dict[str, tuple[str, frozenset[str], str]] = {
    "spark.sql.sources.partitionOverwriteMode": (
        "dynamic",
        frozenset({"dynamic"}),
        "shedlab writes into an earlier output by replacing the partitions it writes (dynamic); any other"
        " mode deletes the others: an ingest of a second cluster or day, or a replay with --cluster,"
        " erased the rest of the output",
    ),
    "spark.sql.session.timeZone": (
        "UTC",
        frozenset({"utc", "etc/utc", "z", "+00:00"}),
        "shedlab dates ticks in UTC (ingest's day partitions); another zone filed a tick under another day",
    ),
    "spark.sql.variant.allowDuplicateKeys": (
        "false",
        frozenset({"false"}),
        "ingest's JVM path leaves a line with a key given twice in one object to its Python reader, which"
        " quarantines it (duplicate_key); with true such a line was kept with the key's last value",
    ),
}
"""Settings whose value shedlab relies on (it sets them, and sets them again under spark-submit): another
value was taken, silently, and changed what the commands wrote."""


def _misspelt_spark(key: str, source: str) -> None:
    """Refuse a key whose first part is nearly ``spark`` (``sprak.executor.memory``, ``Spark.ui.port``;
    Spark's keys are case-sensitive): Spark took it as a setting of no meaning and ignored it, silently.
    Other keys pass (``fs.s3a.…`` reaches the Hadoop configuration of Spark SQL)."""
    head, dot, rest = key.partition(".")
    if dot and head != "spark" and closest(head, ("spark",), cutoff=0.75):
        raise ConfigError(
            "not a Spark setting: Spark would ignore it",
            source=source,
            field=key,
            hint=f"did you mean 'spark.{rest}'?",
        )


def check_spark_values(settings: Mapping[str, str], source: str) -> dict[str, str]:
    """``settings``, refused when a setting of :data:`_SPARK_VALUES` has a value Spark would not parse
    (sizes as ``JavaUtils.byteStringAsBytes`` reads them: digits and an optional unit, no fraction) or
    one of :data:`_RELIED_ON` another value than shedlab's, and a key whose first part is a misspelt
    ``spark`` (:func:`_misspelt_spark`)."""
    for key, value in settings.items():
        _misspelt_spark(key, source)
        kind, minimum = _SPARK_VALUES.get(key, ("", 0))
        text = value.strip().lower()
        if key in _RELIED_ON and text not in _RELIED_ON[key][1]:
            needed, _, why = _RELIED_ON[key]
            raise ConfigError(f"shedlab needs {needed}", source=source, field=key, value=value, hint=why)
        if kind == "size":
            m = re.fullmatch(r"([0-9]+)([a-z]+)?", text)
            ok = m is not None and (m.group(2) or "b") in _SIZE_UNITS and int(m.group(1)) >= minimum
            what = "a size such as 512m or 4g" + (" (more than 0)" if minimum else "")
        elif kind in ("integer", "port"):
            top = 65535 if kind == "port" else 2**31 - 1
            ok = re.fullmatch(r"[+-]?[0-9]{1,10}", text) is not None and minimum <= int(text) <= top
            what = f"an integer from {minimum} to {top}"
        elif kind == "boolean":
            ok, what = text in ("true", "false"), "true or false"
        else:
            continue
        if not ok:
            raise ConfigError(f"expected {what}", source=source, field=key, value=value)
    return dict(settings)


def read_conf_file(path: str | Path) -> dict[str, str]:
    """Spark settings from a file: ``spark-defaults.conf`` style (``key value`` or ``key=value``, ``#``
    comments) or a YAML/JSON mapping (nested mappings are joined with dots)."""
    p = Path(path)
    # read before Spark starts (its spark.master), then again to start it: a pipe's second read was empty
    # and every setting of --spark-conf <(…) was dropped, silently
    refuse_special_file(
        p, "it is read twice (checked, then applied)", field="--spark-conf", error=ConfigError
    )
    text = read_user_text(p, what="Spark config file", error=ConfigError)
    if p.suffix.lower() in (".yaml", ".yml", ".json"):
        data = parse_yaml_text(text, str(p), error=ConfigError)  # YAML 1.2 reads JSON too
        data = {} if data is None else data  # an empty file; a 0, "" or [] is refused below
        if not isinstance(data, Mapping):
            raise ConfigError("expected a mapping of Spark settings", source=str(p))
        return check_spark_values(_flatten(data), str(p))
    return _spark_defaults(text, p)


def _spark_defaults(text: str, p: Path) -> dict[str, str]:
    """The settings of a ``spark-defaults.conf`` style text (``key value`` or ``key=value`` lines), checked.
    A JSON object in one is refused: its keys read as ``{"spark.…":``, which Spark ignores."""
    refuse_json_text(text, str(p), "spark-defaults.conf (key value lines)", "no setting of it would be taken")
    out: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^([^\s=]+)\s*[=\s]\s*(.*)$", line)
        if not m:
            raise ConfigError("expected 'key value' or 'key=value'", source=f"{p}:{lineno}", value=line)
        out[m.group(1)] = m.group(2).strip()
        check_spark_values({m.group(1): out[m.group(1)]}, f"{p}:{lineno}")
    return out


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(_flatten(value, name))
        elif isinstance(value, bool):
            out[name] = "true" if value else "false"
        else:
            out[name] = str(value)
    return out


CACHED_PLAN_PARTITIONING = "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning"
"""Whether adaptive query execution may change a cached plan's output partitioning, i.e. coalesce the
shuffle partitions under a ``persist``: shedlab sets it to true (Spark 4.0's default is false)."""

RAW_LOCAL_FILES = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.file.impl.disable.cache": "true",
}
"""``file:`` paths through Hadoop's raw local filesystem: no ``.crc`` sidecars written, none verified.

Hadoop's default for ``file:`` (``LocalFileSystem``, a ``ChecksumFileSystem``) writes a hidden
``.part-….crc`` beside every data file and verifies it on every read. A user who rewrites a file of an
output (a Parquet file rewritten with pandas) leaves the old checksum behind, and the next command that
read the directory (``ingest`` → ``replay`` or ``twin``) failed with
``org.apache.hadoop.fs.ChecksumException`` under a Java stack. An edited file is the user's data, not
damage: outputs are now written without sidecars, and those of outputs written before (or by another
Spark) are ignored (never opened, and Spark lists no hidden file as data). A truncated or non-Parquet
file is still refused, in one line, by ``check_ingest_output`` (``PAR1`` at both ends).
``RawLocalFileSystem`` is the filesystem ``LocalFileSystem`` wraps, so writes are otherwise unchanged:
``_SUCCESS``, overwrite, append and dynamic partition overwrite behave the same
(tests/spark/test_spark_session.py). The cache is disabled because Hadoop keeps one filesystem per scheme
for the whole JVM, whichever configuration made it first: a ``LocalFileSystem`` made from a default
configuration would otherwise serve these reads too. Only ``file:`` changes (HDFS and object stores keep
their own checksums); ``--conf`` sets either key back."""


def spark_settings(
    master: str | None,
    conf: Mapping[str, str] | None = None,
    *,
    ui: bool = False,
    log_level: str = "WARN",
) -> dict[str, str]:
    """The settings :func:`get_spark` applies (defaults, then ``conf`` on top)."""
    python = sys.executable
    settings: dict[str, str] = {
        "spark.pyspark.python": python,
        "spark.pyspark.driver.python": python,
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.sql.variant.allowDuplicateKeys": "false",
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        "spark.python.worker.reuse": "true",
        "spark.executorEnv.OMP_NUM_THREADS": "1",
        "spark.executorEnv.OPENBLAS_NUM_THREADS": "1",
        "spark.executorEnv.MKL_NUM_THREADS": "1",
        "spark.sql.adaptive.enabled": "true",
        # AQE may coalesce the shuffle partitions of a persisted plan too (ingest persists the rows it
        # has repartitioned by cluster and day, then writes them): Spark 4.0 leaves this false, so on a
        # cluster, with Spark's 200 shuffle partitions, every stage of ingest ran 200 tasks (a 93-line
        # recording: 54 s on a 1-core standalone worker, 19 s with this; docs/spark.md).
        CACHED_PLAN_PARTITIONING: "true",
        # PySpark 4's call-site capture wraps every Column and DataFrame call in four more Py4J round
        # trips (the active session, this setting, the origin set and cleared): building ingest's
        # expressions took seconds of a short ingest. It only adds the Python line to Spark's own error
        # text, which shedlab turns into its one-line errors anyway (docs/spark.md, 26 Nov 2026).
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # No .crc sidecars on local files: a file a user edited in an output stayed readable by pandas
        # but not by the next shedlab command (ChecksumException, a Java stack). Why it is safe: see
        # RAW_LOCAL_FILES.
        **RAW_LOCAL_FILES,
    }
    if is_local_master(master):
        cores = local_cores(master)
        settings.update(
            {
                "spark.sql.shuffle.partitions": str(max(2, 2 * cores)),
                "spark.default.parallelism": str(max(1, cores)),
                "spark.driver.memory": "2g",
                "spark.sql.adaptive.coalescePartitions.initialPartitionNum": str(max(2, 2 * cores)),
                # Local runs read small files; don't spend 4 MB of "open cost" per file.
                "spark.sql.files.openCostInBytes": str(256 * 1024),
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
            }
        )
    level = log_level.upper()
    if level not in _LEVELS:
        raise ConfigError("unknown log level", field="log level", value=log_level, hint=", ".join(_LEVELS))
    settings.update(conf or {})
    settings[_JAVA_OPTIONS] = _java_options(level, settings.get(_JAVA_OPTIONS, ""))
    return settings


_JAVA_OPTIONS = "spark.driver.extraJavaOptions"


SHORT_INPUT_BYTES = 384 * 1024 * 1024
"""Below this much input, a local job's driver JVM runs HotSpot's C1 compiler only (``short_input_conf``)."""
C1_ONLY = "-XX:TieredStopAtLevel=1"


def short_input_conf(
    master: str | None, conf: Sequence[str], conf_file: str | None, input_bytes: int | None
) -> list[str]:
    """``conf`` (``--conf`` pairs), plus ``C1_ONLY`` in the driver's JVM flags for a short local job.

    Most of the CPU of a short ingest in a fresh JVM is HotSpot's C2 compiler compiling Spark's and the
    generated code, and the job is over before that pays; C1 alone compiles faster and its code is slower
    once hot. Measured on the 2-core development machine (``bench/bench_spark.py --ingest-scale N
    --java-options=-XX:TieredStopAtLevel=1``, docs/spark.md): 122 MB took 31.5–32.7 CPU s instead of
    46.4–46.5, 366 MB 61.7 instead of 67.7, and 974 MB 113.3 instead of 95.9. So only inputs under
    ``SHORT_INPUT_BYTES`` get it, only on a local master (the driver then runs the tasks too), and never
    when the user sets the driver's JVM flags (in ``--conf`` or the conf file) or when the size is
    unknown (``input_bytes`` None: remote sources).
    """
    user = _user_settings(conf, conf_file)
    effective, _ = _effective_master(master, user)
    local = not _under_spark_submit() and is_local_master(effective)  # spark-submit's JVM is up already
    if not local or input_bytes is None or input_bytes >= SHORT_INPUT_BYTES or _JAVA_OPTIONS in user:
        return list(conf)
    return [*conf, f"{_JAVA_OPTIONS}={C1_ONLY}"]


def _user_settings(
    conf: Mapping[str, str] | Sequence[str] | None, conf_file: str | Path | None
) -> dict[str, str]:
    """The user's Spark settings: ``conf_file``'s first, ``conf`` (a mapping or ``k=v`` strings) on top."""
    settings: dict[str, str] = {}
    if conf_file is not None:
        settings.update(read_conf_file(conf_file))
    if conf is not None:
        settings.update(
            parse_conf_pairs(conf) if not isinstance(conf, Mapping) else check_spark_values(conf, "conf")
        )
    return settings


def _effective_master(master: str | None, settings: dict[str, str]) -> tuple[str | None, bool]:
    """The master a session will use, and whether spark-submit chose it (then None): ``master``, else
    ``spark.master`` of ``settings`` (popped: it is not passed on as a setting), else spark-submit's,
    else ``$SHEDLAB_SPARK_MASTER``, else ``DEFAULT_MASTER``."""
    field = "--master"
    if master is None and "spark.master" in settings:
        master, field = settings.pop("spark.master"), "spark.master"
    submitted = master is None and _under_spark_submit()
    if master is None and not submitted:
        master, field = os.environ.get("SHEDLAB_SPARK_MASTER"), "$SHEDLAB_SPARK_MASTER"
        master = master or DEFAULT_MASTER
    return (None if master is None else validate_master(master, field=field)), submitted


def _java_options(level: str, user: str) -> str:
    """The driver JVM's options: shedlab's log4j file first, then the user's own.

    A user who passes JVM flags (``--conf spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1``, which
    saves a short ingest about a third of its CPU: docs/spark.md) keeps the quiet log configuration; one
    who names a log4j file of their own gets theirs alone.
    """
    if "log4j2.configurationFile" in user:
        return user
    ours = f"-Dlog4j2.configurationFile=file:{_log4j_file(level)}"
    return f"{ours} {user}".strip()


def _quiet_root(level: str) -> str:
    """The root logger's level: ``level``, but no chattier than ERROR.

    Spark's ``Logging.initializeLogging`` (a PySpark driver counts as an interpreter) prints "Setting
    default log level to …" and a hint to stderr, two lines before every command's own output, when the
    level of the class that first logs differs from the root's; that class's logger is one this file
    sets to ERROR. It then filtered the console at that level for the whole session (``setLogLevel`` of
    an unchanged root level does not lift the filter), so shedlab's console showed errors only. The
    root at ERROR gives that console without the two lines.
    """
    return level if _LEVELS.index(level) >= _LEVELS.index("ERROR") else "ERROR"


def _log4j_file(level: str) -> str:
    root = _quiet_root(level)  # the file's only variable: one file per root level, not per level asked
    path = Path(tempfile.gettempdir()) / f"shedlab-log4j2-{root.lower()}.properties"
    content = _LOG4J2.format(root=root, tasks_log=SPARK_TASKS_LOG, tasks_log_size=SPARK_TASKS_LOG_SIZE)
    if not path.exists() or path.read_text(encoding="utf-8") != content:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(content, encoding="utf-8")
        tmp.replace(path)
    return str(path)


def _package_root() -> Path:
    import shedlab

    return Path(next(iter(shedlab.__path__))).resolve().parent


def check_java() -> None:
    """Refuse, in one line, a driver JVM that cannot start: ``JAVA_HOME`` naming a folder without
    ``bin/java`` (a removed JDK, a typo), or no ``JAVA_HOME`` and no ``java`` on ``PATH``. PySpark would
    launch ``spark-submit``, which fails, and raise ``JAVA_GATEWAY_EXITED`` with a traceback. Nothing to
    check under spark-submit, which started the JVM already."""
    if _under_spark_submit():
        return
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home, "bin", "java")
        if not (java.is_file() and os.access(java, os.X_OK)):
            raise ConfigError(
                f"no Java at {java}",
                field="JAVA_HOME",
                value=home,
                hint="point JAVA_HOME at a JDK 17, or unset it to use the java on PATH",
            )
    elif shutil.which("java") is None:
        raise ConfigError("Java was not found: install a JDK 17 or set JAVA_HOME", field="spark")


def _under_spark_submit() -> bool:
    """A Python driver started by spark-submit finds its JVM through these variables."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _write_tree(zf: zipfile.ZipFile, files: Iterable[tuple[Path, str]]) -> None:
    """Write ``files`` (path, name inside the zip) into ``zf``, each folder as an entry of its own first.

    Python's ``zipimport`` finds a namespace package (a folder without ``__init__.py``: ``shedlab.core``,
    ``shedlab.data``) only through its folder's entry, and ``zipfile.write`` of files alone writes none:
    executors on a cluster failed every sweep task with ``No module named 'shedlab.core'``."""
    entries = sorted(files, key=lambda item: item[1])
    folders = sorted({str(parent) for _, name in entries for parent in Path(name).parents if parent.parts})
    for folder in folders:
        zf.writestr(zipfile.ZipInfo(f"{folder}/", date_time=(1980, 1, 1, 0, 0, 0)), b"")
    for path, name in entries:
        info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        zf.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)


def _zip_bytes(files: list[tuple[Path, str]]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        _write_tree(zf, files)
    return buffer.getvalue()


def _package_bytes() -> bytes:
    root = _package_root()
    files = [
        (path, path.relative_to(root).as_posix())
        for path in (root / "shedlab").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    ]
    return _zip_bytes(files)


def package_zip(target: Path) -> Path:
    """``target``: a zip of the shedlab package (its modules and data files, no ``__pycache__``), as
    :func:`get_spark` ships it to a cluster's executors with ``addPyFile``."""
    target.write_bytes(_package_bytes())
    return target


UNUSED_SHIPPED_S = 7 * 86_400
"""A shipped zip of another version (``<tmp>/shedlab-package/<digest>``, ``<tmp>/shedlab-strategies/…``)
that no session has shipped for this long is removed when a session ships its own. Each version of the
package, or of a user's strategy module, left its 1.9 MB folder for ever (every edit of the code, in
development). Not sooner: a running application serves its zip to executors that start later, from this
path, so the zip of a version still in use must stay."""


def _write_once(target: Path, data: bytes) -> Path:
    """``data`` at ``target``, a path named by that content: written only if absent, through a temporary
    file renamed into place, so that a concurrent writer or reader never sees half a file. Its time is
    that of its last use (touched when found), which :func:`_remove_unused` reads."""
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    else:
        with contextlib.suppress(OSError):  # another user's file: its time is theirs to keep
            os.utime(target)
    return target


def _remove_unused(folder: Path, keep: Path) -> None:
    """Remove each entry of ``folder`` but ``keep`` (a version's folder or zip) whose newest file is older
    than :data:`UNUSED_SHIPPED_S`; one that cannot be read or removed (another user's) is left."""
    now = time.time()
    try:
        entries = [entry for entry in folder.iterdir() if entry != keep]
    except OSError:
        return
    for entry in entries:
        tree = entry.is_dir() and not entry.is_symlink()
        with contextlib.suppress(OSError):
            files = [entry, *entry.rglob("*")] if tree else [entry]
            if now - max(f.lstat().st_mtime for f in files) < UNUSED_SHIPPED_S:
                continue
            if tree:
                shutil.rmtree(entry)
            else:
                entry.unlink()


def _ship_package(spark: SparkSession) -> None:
    """Zip the shedlab package and add it to the job (for executors that do not have it installed).

    The zip is kept as ``<tmp>/shedlab-package/<digest>/shedlab.zip``, named by its content, so every
    session of one version of the package ships the same file. A fresh temporary folder per session left
    a 1.9 MB zip behind each time (48 in /tmp after a day's test runs, 28 Nov 2026). The file keeps its
    name, ``shedlab.zip``: a changed package gets a new folder, not a new name."""
    data = _package_bytes()
    digest = hashlib.sha256(data).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "shedlab-package"
    target = _write_once(folder / digest / "shedlab.zip", data)
    _remove_unused(folder, target.parent)
    spark.sparkContext.addPyFile(str(target))


_SHIPPED: dict[tuple[str, str], str] = {}
"""(Spark application id, top-level module) → the file shipped, so a module is added once per application."""


def _module_files(top: str) -> list[tuple[Path, str]]:
    """The files of top-level module ``top`` on the driver, with their paths inside a zip."""
    spec = importlib.util.find_spec(top)
    if spec is None:
        raise ConfigError("strategy module not found on the driver", field="strategy", value=top)
    if spec.submodule_search_locations is None:  # a single-file module
        if spec.origin is None or not spec.origin.endswith(".py"):
            raise ConfigError(
                "only Python source modules and packages can be shipped to executors",
                field="strategy",
                value=top,
                hint=f"install {top} in the executors' environment",
            )
        return [(Path(spec.origin), Path(spec.origin).name)]
    files = []
    for location in spec.submodule_search_locations:  # several for a namespace package
        root = Path(location)
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.append((path, f"{top}/{path.relative_to(root).as_posix()}"))
    return files


def _zip_module(top: str) -> Path:
    """A zip of module ``top`` named after its content: a changed module gets a new name (Spark refuses a
    second, different file under a name it has served), an unchanged one the same file."""
    data = _zip_bytes(_module_files(top))
    digest = hashlib.sha256(data).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / "shedlab-strategies"
    target = _write_once(folder / f"{top}-{digest}.zip", data)
    _remove_unused(folder, target)
    return target


def ship_strategy_modules(spark: SparkSession, strategy_names: Iterable[str]) -> tuple[str, ...]:
    """Make the users' ``module:Class`` strategies among ``strategy_names`` importable on the executors.

    ``strategy_names`` are strategy or pair names (``pkg.mod:Mine+LeastLongTermMessageRate``). For each
    such module, its top-level package (zipped) or single-file module is added with ``addPyFile``, so a
    module the driver imports from a directory on its ``sys.path`` (not installed) runs on executors too,
    local ones included: local Python workers are separate processes and do not see the driver's
    ``sys.path``. Pulsar's strategies, entry-point plugins (installed packages) and shedlab's own modules
    are not shipped. Call it before the first Spark job that resolves the names; each module is shipped
    once per Spark application. Returns the top-level modules shipped by this call.
    """
    tops = dict.fromkeys(module.partition(".")[0] for module in strategy_modules(list(strategy_names)))
    app = str(spark.sparkContext.applicationId)
    shipped = []
    for top in tops:
        if top == "shedlab" or (app, top) in _SHIPPED:
            continue
        target = _zip_module(top)
        spark.sparkContext.addPyFile(str(target))
        _SHIPPED[(app, top)] = str(target)
        shipped.append(top)
    return tuple(shipped)


def get_spark(
    master: str | None = None,
    conf: Mapping[str, str] | Sequence[str] | None = None,
    *,
    conf_file: str | Path | None = None,
    app_name: str = "shedlab",
    ui: bool = False,
    log_level: str = "WARN",
) -> SparkSession:
    """The SparkSession for shedlab (an active one with the same master is reused).

    ``master`` None means: the master spark-submit chose, else ``$SHEDLAB_SPARK_MASTER``, else
    ``local[*]``. ``conf`` is a mapping or ``k=v`` strings; ``conf_file`` settings come first and
    ``conf`` overrides them.
    """
    from pyspark.sql import SparkSession

    settings_in = _user_settings(conf, conf_file)
    master, submitted = _effective_master(master, settings_in)
    ship = settings_in.pop("shedlab.shipPackage", "auto").lower()
    settings = spark_settings(master, settings_in, ui=ui, log_level=log_level)

    python = sys.executable
    os.environ.setdefault("PYSPARK_PYTHON", python)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", python)
    if is_local_master(master) and not submitted:
        # Local workers are children of this process: make shedlab importable and keep BLAS to one thread.
        root = str(_package_root())
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in paths:
            os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")
    if not submitted:
        check_java()

    builder = SparkSession.builder.appName(app_name)
    if master is not None and not submitted:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with filtered_jvm_stderr():  # the JVM starts here, if it is not running yet
        spark = builder.getOrCreate()
    # spark-submit's own log configuration applies when submitted; ours (the quiet root) otherwise
    spark.sparkContext.setLogLevel(log_level.upper() if submitted else _quiet_root(log_level.upper()))
    if submitted:
        # Respect what spark-submit chose; still apply the runtime SQL settings we rely on.
        for key in _RELIED_ON:
            spark.conf.set(key, settings[key])
    actual_master = spark.sparkContext.master
    if ship == "true" or (ship == "auto" and not is_local_master(actual_master)):
        _ship_package(spark)
    return spark


def has_active_session() -> bool:
    """Whether this process already runs a SparkSession (a test run's, a notebook's): a command that finds
    one uses it and leaves it running."""
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


def stop_spark() -> None:
    """Stop the active session, if any."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        active.stop()
