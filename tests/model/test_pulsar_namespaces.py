"""The system namespaces getBundleDataForLoadShedding() leaves out (spec §1.6), form by form.

Pulsar's patterns (``NamespaceService``): ``HEARTBEAT_NAMESPACE_PATTERN = pulsar/[^/]+/([^:]+:\\d+)``,
``HEARTBEAT_NAMESPACE_PATTERN_V2 = pulsar/([^:]+:\\d+)`` and ``SLA_NAMESPACE_PATTERN =
sla-monitor/[^/]+/([^:]+:\\d+)``, each applied with Java's ``Pattern.matcher(ns).matches()``: the WHOLE
namespace must match. Consequences pinned here: ``[^:]+`` crosses slashes, so deeper forms match too;
the SLA pattern needs its cluster segment, so the two-segment ``sla-monitor/<host>:<port>`` does not
match (Pulsar has no V2 SLA pattern: ``SLA_NAMESPACE_FMT`` is ``sla-monitor/%s/%s``).
"""

from __future__ import annotations

import re

import pytest

from shedlab.model.pulsar import NameIndex, is_system_heartbeat_bundle, namespace_of

RANGE = "0x00000000_0xffffffff"

# Pulsar's own regular expressions, copied verbatim, as the oracle for Java's matches() (= fullmatch);
# re.ASCII as Java's \d is (no UNICODE_CHARACTER_CLASS)
PULSAR_PATTERNS = (
    re.compile(r"pulsar/[^/]+/([^:]+:\d+)", re.ASCII),
    re.compile(r"pulsar/([^:]+:\d+)", re.ASCII),
    re.compile(r"sla-monitor/[^/]+/([^:]+:\d+)", re.ASCII),
)

CASES = [
    # heartbeat v1: pulsar/<cluster>/<host>:<port>
    ("pulsar/standalone/broker-1:8080", True),
    ("pulsar/us-west/10.0.0.7:6650", True),
    # heartbeat v2: pulsar/<host>:<port> (also what v1 names match, [^:]+ crossing the slash)
    ("pulsar/broker-1:8080", True),
    ("pulsar/broker-1.example.com:443", True),
    # SLA monitor: sla-monitor/<cluster>/<host>:<port>
    ("sla-monitor/standalone/broker-1:8080", True),
    ("sla-monitor/us-west/10.0.0.7:6650", True),
    # [^:]+ crosses slashes: deeper names match as a whole
    ("pulsar/a/b/broker-1:8080", True),
    ("sla-monitor/a/b/broker-1:8080", True),
    # the two-segment SLA form has no cluster: no Pulsar pattern matches it
    ("sla-monitor/broker-1:8080", False),
    # matches() is whole-string: nothing before, nothing after, a port of digits
    ("xpulsar/broker-1:8080", False),
    ("my-sla-monitor/c/broker-1:8080", False),
    ("pulsar/broker-1:8080x", False),
    ("pulsar/broker-1:8080:9090", False),
    ("sla-monitor/c/broker-1:80a", False),
    # a port in other digits than 0-9 is no port to Java's \d (Python's took it until 29 Nov 2026)
    ("pulsar/broker-1:٨٠٨٠", False),
    ("pulsar/standalone/broker-1:８０８０", False),
    ("sla-monitor/c/broker-1:٨", False),
    ("pulsar/broker-1:", False),
    ("pulsar/:8080", False),
    ("sla-monitor/c/:8080", False),
    ("sla-monitor//broker-1:8080", False),
    ("Pulsar/broker-1:8080", False),  # case-sensitive
    # no port: ordinary namespaces
    ("pulsar/standalone/broker-1", False),
    ("sla-monitor/standalone/broker-1", False),
    # pulsar/system is kept by getBundleDataForLoadShedding (only isSystemServiceNamespace names it)
    ("pulsar/system", False),
    ("public/default", False),
    ("tenant/ns", False),
]


@pytest.mark.parametrize(("namespace", "excluded"), CASES)
def test_system_namespace_forms(namespace: str, excluded: bool) -> None:
    bundle = f"{namespace}/{RANGE}"
    assert namespace_of(bundle) == namespace
    assert is_system_heartbeat_bundle(bundle) is excluded


@pytest.mark.parametrize(("namespace", "excluded"), CASES)
def test_the_cases_agree_with_pulsars_patterns_under_whole_string_matching(
    namespace: str, excluded: bool
) -> None:
    assert any(p.fullmatch(namespace) for p in PULSAR_PATTERNS) is excluded
    # Java's find() semantics would differ for some of these: whole-string matching is the point.
    if namespace in ("xpulsar/broker-1:8080", "pulsar/broker-1:8080x"):
        assert any(p.search(namespace) for p in PULSAR_PATTERNS)


def test_name_index_groups_bundles_by_namespace_and_is_reused_for_the_same_names() -> None:
    names = ("t/a/0x00000000_0x80000000", "t/b/0x00000000_0xffffffff", "t/a/0x80000000_0xffffffff")
    index = NameIndex(names)
    assert index.index == {n: i for i, n in enumerate(names)}
    assert {ns: m.tolist() for ns, m in index.members.items()} == {"t/a": [0, 2], "t/b": [1]}
    assert NameIndex.reuse(index, names) is index
    assert NameIndex.reuse(index, tuple(list(names))) is index  # an equal tuple, not the same object
    other = NameIndex.reuse(index, names[:2])
    assert other is not index and other.names == names[:2]
    assert NameIndex.reuse(None, names).names == names
