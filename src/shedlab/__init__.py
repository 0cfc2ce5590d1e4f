"""shedlab: Apache Pulsar broker load balancing, reimplemented faithfully, simulated and measured.

Layers (the core never imports Spark):

* :mod:`shedlab.model` — Pulsar's data classes and JSON, and the columnar :class:`ClusterSnapshot`.
* :mod:`shedlab.config` — every load-balancer key with Pulsar's defaults.
* :mod:`shedlab.strategies` — the six strategies behind two protocols (shedding, placement).
* :mod:`shedlab.manager` — the leader's loop (grace period, destinations, preallocation).
* :mod:`shedlab.core.sim` — the cluster simulator and its metrics.
* :mod:`shedlab.spark` — sweeps, ingest, replay and evaluation on Spark.
* :mod:`shedlab.report` — the HTML report.
* :mod:`shedlab.cli` — the ``shedlab`` command.
"""

__version__ = "0.1.0"
