"""shedlab: Apache Pulsar broker load balancing, reimplemented faithfully, simulated and measured.

The Python API, for notebooks and scripts (``README.md``, "Using it from Python")::

    import shedlab

    outcome = shedlab.decide("examples/snapshot.json", strategy="AvgShedder")  # what Pulsar would unload
    result = shedlab.simulate("over-unloading-90-10", strategy="AvgShedder", seed=1)  # .ticks, .summary
    table = shedlab.compare("load-jitter")  # one row of run metrics per strategy pair

``import shedlab`` itself stays cheap (no NumPy, pandas or plotly: the ``shedlab`` command imports this
package before every command); each name below is imported on first use, by :func:`__getattr__`.

Layers (the core never imports Spark):

* :mod:`shedlab.model` — Pulsar's data classes and JSON, and the columnar :class:`ClusterSnapshot`.
* :mod:`shedlab.config` — every load-balancer key with Pulsar's defaults.
* :mod:`shedlab.strategies` — the six strategies behind two protocols (shedding, placement).
* :mod:`shedlab.manager` — the leader's loop (grace period, destinations, preallocation).
* :mod:`shedlab.core.sim` — the cluster simulator and its metrics.
* :mod:`shedlab.spark` — sweeps, ingest, replay and evaluation on Spark.
* :mod:`shedlab.report` — the HTML report.
* :mod:`shedlab.cli` — the ``shedlab`` command; :mod:`shedlab.api` — the same as functions.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # what the lazy names below are, for mypy and IDEs
    from shedlab.api import compare, decide, read_config, read_snapshot, simulate
    from shedlab.config import LoadBalancerConfig, layered_config
    from shedlab.core.decide import Decision, Outcome, load_snapshot_file
    from shedlab.core.sim import Scenario, SimulationResult, builtin_scenarios, load_scenario
    from shedlab.errors import ShedlabError
    from shedlab.model.snapshot import ClusterSnapshot
    from shedlab.strategies import STRATEGY_PAIRS

__version__ = "0.1.0"


def _unzipped(archive: str) -> str | None:
    """The ``shedlab`` folder of ``archive`` (a zip holding the package), extracted once per content into
    ``$XDG_CACHE_HOME/shedlab/package-<digest>`` (``~/.cache`` without it), as Numba keeps its cache.

    A cluster's executors import shedlab from the zip the driver ships (``addPyFile``), which Spark puts
    in a directory of each application: Numba keys its on-disk cache of the compiled kernels
    (:mod:`shedlab.kernels`, ``cache=True``) by the source file's path, so every application compiled them
    again (2.2 s of a Python worker's first simulation, measured) and left another 0.6 MB in Numba's cache
    directory of every worker, and ``zipimport`` writes no bytecode, so every Python worker compiled every
    module it imports as well. From a folder named by the zip's content, both caches are kept across
    applications and the cache grows only when the package changes. Extraction goes to a fresh folder
    renamed into place: a worker that reads the folder finds it whole.
    """
    # imported here, not at the top: every ``import shedlab`` runs this module, and only an executor's
    # import from a zip needs them
    import hashlib
    import os
    import shutil
    import tempfile
    import zipfile

    try:
        with zipfile.ZipFile(archive) as zf:
            members = sorted(
                (i.filename, i.CRC, i.file_size) for i in zf.infolist() if i.filename.startswith("shedlab/")
            )
            digest = hashlib.sha256(repr(members).encode()).hexdigest()[:16]
            cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            target = os.path.join(cache, "shedlab", f"package-{digest}")
            if not os.path.isdir(target):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                fresh = tempfile.mkdtemp(prefix=f".package-{digest}-", dir=os.path.dirname(target))
                zf.extractall(fresh, [name for name, _, _ in members])
                try:
                    os.rename(fresh, target)
                except OSError:  # another worker's extraction is in place already
                    shutil.rmtree(fresh, ignore_errors=True)
    except OSError:  # no writable cache directory on this executor: import from the zip as Spark put it
        return None
    return os.path.join(target, "shedlab")


if type(__spec__.loader).__name__ == "zipimporter":  # imported from a zip: an executor's shipped package
    _folder = _unzipped(__spec__.loader.archive)  # type: ignore[union-attr]
    if _folder is not None:
        __path__[:] = [_folder]

__all__ = [
    "STRATEGY_PAIRS",
    "ClusterSnapshot",
    "Decision",
    "LoadBalancerConfig",
    "Outcome",
    "Scenario",
    "ShedlabError",
    "SimulationResult",
    "__version__",
    "builtin_scenarios",
    "compare",
    "decide",
    "layered_config",
    "load_scenario",
    "load_snapshot_file",
    "read_config",
    "read_snapshot",
    "simulate",
]

_LAZY: Final[dict[str, str]] = {
    "compare": "shedlab.api",
    "decide": "shedlab.api",
    "read_config": "shedlab.api",
    "read_snapshot": "shedlab.api",
    "simulate": "shedlab.api",
    "LoadBalancerConfig": "shedlab.config",
    "layered_config": "shedlab.config",
    "Decision": "shedlab.core.decide",
    "Outcome": "shedlab.core.decide",
    "load_snapshot_file": "shedlab.core.decide",
    "Scenario": "shedlab.core.sim",
    "SimulationResult": "shedlab.core.sim",
    "builtin_scenarios": "shedlab.core.sim",
    "load_scenario": "shedlab.core.sim",
    "ShedlabError": "shedlab.errors",
    "ClusterSnapshot": "shedlab.model.snapshot",
    "STRATEGY_PAIRS": "shedlab.strategies",
}
"""Public name → the module that defines it (imported when the name is first used)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'shedlab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
