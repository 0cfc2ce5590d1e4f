"""Shared test fixtures.

``spark``: ONE real local SparkSession for the whole test run (session scope), for the tests
marked ``@pytest.mark.spark``. It is created on first use, so test runs without Spark tests never
start a JVM; without Java the Spark tests are skipped.

``zookeeper``: ONE real ZooKeeper server on loopback for the whole run (Debian's package, installed by
``scripts/ensure-zookeeper.sh``), for the tests marked ``@pytest.mark.zookeeper``. Each test gets a fresh
chroot via ``zk_hosts`` so tests cannot see each other's znodes.

``spark_standalone``: ONE Spark standalone master and one worker (1 core, 1 GB) on loopback for the whole
run, started from PySpark's own ``bin/spark-class`` (``tests/spark_standalone.py``), for the tests marked
``@pytest.mark.standalone``; its value is the cluster (``.url``: ``spark://127.0.0.1:<port>``; ``.state()``:
the master's JSON; ``.work_dir``: the worker's). Without Java those
tests are skipped, as the Spark tests are; with Java, a cluster that does not start fails them with the
tail of its logs.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from spark_standalone import StandaloneCluster


@pytest.fixture(scope="session")
def zookeeper() -> Iterator[str]:
    from shedlab.cluster.zookeeper_server import LocalZooKeeper, zookeeper_installed

    if not zookeeper_installed():
        pytest.skip("ZooKeeper is not installed: run scripts/ensure-zookeeper.sh")
    with LocalZooKeeper() as server:
        yield server.hosts


@pytest.fixture
def zk_hosts(zookeeper: str, request: pytest.FixtureRequest) -> str:
    """``127.0.0.1:<port>/<chroot>`` unique to this test; the chroot exists, and is empty."""
    from kazoo.client import KazooClient

    chroot = "/t-" + "".join(c if c.isalnum() else "-" for c in request.node.nodeid)[-100:]
    admin = KazooClient(hosts=zookeeper, timeout=5.0)
    admin.start(timeout=10)
    try:
        if admin.exists(chroot):
            admin.delete(chroot, recursive=True)
        admin.ensure_path(chroot)
    finally:
        admin.stop()
        admin.close()
    return zookeeper + chroot


@pytest.fixture(scope="session")
def spark_standalone() -> Iterator[StandaloneCluster]:
    if shutil.which("java") is None:
        pytest.skip("Java is not installed: Spark tests need a JDK 17")
    from spark_standalone import StandaloneCluster, StandaloneUnavailableError

    cluster = StandaloneCluster()
    try:
        cluster.start()
    except StandaloneUnavailableError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    if shutil.which("java") is None:
        pytest.skip("Java is not installed: Spark tests need a JDK 17")
    from shedlab.spark.session import get_spark

    session = get_spark(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
            "spark.default.parallelism": "2",
        },
        app_name="shedlab-tests",
        log_level="ERROR",
    )
    yield session
    session.stop()
