"""The Spark layer: session factory, canonical schemas, sweeps, evaluation, ingest and replay.

Only this package imports PySpark; the core never does. Importing
``shedlab.spark`` itself is cheap: the submodules load on first use.

* :func:`get_spark` (``session``) — one factory for the SparkSession, local or cluster.
* :mod:`~shedlab.spark.schemas` — canonical table schemas.
* :func:`sweep` (``sweep``) — grids of simulations (:func:`shedlab.core.grid.load_grid`) as Spark tasks,
  resumable.
* :func:`evaluate` (``evaluate``) — mean/CI per metric and the PIP-364 table, applying
  :mod:`shedlab.core.evaluation` per group.
* :func:`ingest` (``ingest``) — load reports, BundleData dumps, Prometheus exports, Parquet → snapshots.
* :func:`replay` (``replay``) — strategies (:func:`shedlab.core.replay.strategy_configs`) over recorded
  snapshots.

See ``docs/spark.md``.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["evaluate", "get_spark", "ingest", "replay", "sweep"]

_WHERE = {
    "get_spark": "shedlab.spark.session",
    "sweep": "shedlab.spark.sweep",
    "evaluate": "shedlab.spark.evaluate",
    "ingest": "shedlab.spark.ingest",
    "replay": "shedlab.spark.replay",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'shedlab.spark' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
