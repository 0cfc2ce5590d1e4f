"""``shedlab sandbox``: a simulated cluster that speaks Pulsar's protocols (admin REST API, znodes).

See ``docs/sandbox.md``. :class:`Sandbox` is the Python entry point (a context manager); the modules:
``sandbox`` (the driver), ``http`` (the admin API), ``zk`` (the znodes), ``views`` (Pulsar's objects
built from the simulation).
"""

from shedlab.cluster.sandbox.sandbox import Sandbox

__all__ = ["Sandbox"]
