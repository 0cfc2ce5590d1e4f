"""Shared test fixtures.

``spark``: ONE real local SparkSession for the whole test run (session scope), for the tests
marked ``@pytest.mark.spark``. It is created on first use, so test runs without Spark tests never
start a JVM; without Java the Spark tests are skipped.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
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
