"""The JVM path's list of another shape's keys covers every key the Python reader classifies by.

``formats.OTHER_SHAPE_KEYS`` is what ``spark/ingest_fast.py`` checks to send a line to the Python reader;
the Python reader's classification (``core/ingest.py``'s ``_parse_value`` and the predicates it calls,
``formats.extensible_kind``) names its keys itself. A key added there and not to the list would let the
JVM path keep a line the Python reader reads as another shape. ``tests/spark/test_ingest_fast.py`` checks
the other direction (every listed key sends the line to the Python reader) through Spark.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable

from shedlab.core import ingest
from shedlab.model import formats

CLASSIFIERS: tuple[Callable[..., object], ...] = (
    ingest._parse_value,
    formats.legacy_load_report,
    ingest._looks_like_bundle_data,
    ingest._looks_like_report,
    formats.extensible_kind,
)

# Keys the classification reads that are not another shape's: the report's own fields (a LocalBrokerData
# names them), the wrapper's ``report``, a Prometheus body's ``result`` (under ``data``, listed), a
# BundleData's optional ``bundle`` name (under ``data``/``shortTermData``, listed), and
# ``loadReportType``, whose legacy value the JVM path tests by value (``ingest_fast._REPORT_SHAPE_KEYS``).
NOT_A_SHAPE = {
    "report",
    "result",
    "bundle",
    "loadReportType",
    "lastStats",
    "lastUpdate",
    "webServiceUrl",
    "cpu",
    "bandwidthIn",
    "brokerVersionString",
}


def keys_read(fn: Callable[..., object]) -> set[str]:
    """String constants ``fn`` tests for membership (``"k" in obj``), reads (``obj.get("k")``,
    ``obj["k"]``) or compares a read with, plus the members of tuples it iterates over."""
    tree = ast.parse(inspect.getsource(fn))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
                found.add(node.left.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            first = node.args[0] if node.args else None
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.add(first.value)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if isinstance(node.slice.value, str):
                found.add(node.slice.value)
        elif isinstance(node, ast.comprehension) and isinstance(node.iter, ast.Tuple):
            found |= {
                e.value for e in node.iter.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
            }
    return found


def test_every_key_the_python_reader_classifies_by_is_listed_or_a_reports_own() -> None:
    read = set().union(*(keys_read(fn) for fn in CLASSIFIERS))
    assert read - set(formats.OTHER_SHAPE_KEYS) - NOT_A_SHAPE == set()


def test_the_scan_finds_the_keys_it_must() -> None:
    # the scan itself, on keys each classifier is known to read (a scan that found nothing would pass above)
    assert {"shortTermData", "longTermData"} <= keys_read(ingest._looks_like_bundle_data)
    assert {"underLoaded", "systemResourceUsage", "loadReportType"} <= keys_read(formats.legacy_load_report)
    assert {"topBundlesLoadData", "brokerVersion", "loadManagerClassName"} <= keys_read(
        formats.extensible_kind
    )
    assert {"data", "report", "bundleData", "path"} <= keys_read(ingest._parse_value)
    assert {"lastStats", "cpu"} <= keys_read(ingest._looks_like_report)


def test_the_exemptions_are_not_listed_as_another_shape() -> None:
    assert NOT_A_SHAPE.isdisjoint(formats.OTHER_SHAPE_KEYS)
