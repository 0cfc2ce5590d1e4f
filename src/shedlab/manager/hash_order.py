"""The order in which Pulsar's leader walks a shedding plan: that of a Java ``HashMap`` of broker ids.

``ModularLoadManagerImpl.doLoadShedding`` (spec §4.4 step 5) iterates ``bundlesToUnload.asMap()``, the
strategy's Guava ``ArrayListMultimap``: its source brokers in the order of the ``java.util.HashMap`` that
holds its keys. That order decides more than the order of output lines: the destinations are chosen one
bundle after the other by a placement strategy that can keep state between calls (the modular
LeastResourceUsageWithWeight advances its usage history on every call, twice when the overload re-check
runs), so which bundle gets which answer, and whether an answer is the bundle's own broker (then it is
not unloaded), depends on the order. ``tests/manager/test_hash_order.py`` shows such a cycle.

The order of a ``HashMap<String, …>`` (OpenJDK 8 and later) follows from the keys alone:

* a key's bucket is ``spread(String.hashCode()) & (table length − 1)``, with ``spread(h) = h ^ (h >>> 16)``
  and ``String.hashCode`` over the UTF-16 code units; iteration walks the buckets in index order and each
  bucket in insertion order (a resize splits a bucket keeping that order);
* the table is created at 16 (``ArrayListMultimap.create()`` asks Guava 33 for a map expecting 12 keys:
  ``HashMap(ceil(12 / 0.75))``), doubles when an insertion takes the size past 0.75 × its length, and
  also when a bucket receives its 9th key while the table is shorter than 64 (``treeifyBin``);
* ``clear()`` empties the table but keeps its length.

Where the map lives differs by strategy (the Java sources at the spec's commit): ThresholdShedder,
OverloadShedder and UniformLoadShedder keep one multimap in a field and clear it at every call, so its
table keeps the largest length it ever grew to; AvgShedder builds a new one per call. A strategy Pulsar
does not have is treated like AvgShedder. The leader's candidate set, ``brokerCandidateCache`` (a
``HashSet`` field refilled by every ``selectBroker``, so sized for the most brokers it ever held), is the
order in which RoundRobinBrokerSelector cycles through the brokers (:mod:`shedlab.manager.loop`).

Not reproduced: within a bucket the keys keep the order in which the strategy named them, which is
shedlab's broker order (Java: the strategy's walk over ``loadData``'s ``ConcurrentHashMap``, see the spec's
tie rule); and a bucket of 9 or more keys in a table of 64 or more becomes a tree bin in Java, whose root
is iterated first — 9 source brokers sharing the low 6 bits of their spread hash in one cycle.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["FRESH_TABLE", "REUSED_MAP_STRATEGIES", "hash_map_order", "java_string_hash"]

FRESH_TABLE = 16
"""The table length of a new ``ArrayListMultimap`` (Guava 33: ``HashMap(Maps.capacity(12))``)."""

REUSED_MAP_STRATEGIES = frozenset({"ThresholdShedder", "OverloadShedder", "UniformLoadShedder"})
"""The strategies whose multimap is a field cleared at every call (its table never shrinks)."""

_TREEIFY_NODES = 9  # a bucket's 9th key: treeifyBin, which resizes instead while the table is below 64
_MIN_TREEIFY_CAPACITY = 64


def java_string_hash(s: str) -> int:
    """``String.hashCode()`` as an unsigned 32-bit value: ``31·h + c`` over the UTF-16 code units."""
    units = s.encode("utf-16-be")
    h = 0
    for k in range(0, len(units), 2):
        h = (31 * h + (units[k] << 8 | units[k + 1])) & 0xFFFFFFFF
    return h


def _spread(h: int) -> int:
    """``HashMap.hash``: the high 16 bits folded into the low ones."""
    return h ^ (h >> 16)


def _grown(table: int, spreads: Sequence[int]) -> int:
    """The table length after inserting keys with these spread hashes, in order, into one of ``table``."""
    counts: dict[int, int] = {}
    for size, s in enumerate(spreads, start=1):
        index = s & (table - 1)
        counts[index] = counts.get(index, 0) + 1
        if counts[index] >= _TREEIFY_NODES and table < _MIN_TREEIFY_CAPACITY:
            table *= 2
            counts = _bucket_counts(spreads[:size], table)
        if size > table * 3 // 4:
            table *= 2
            counts = _bucket_counts(spreads[:size], table)
    return table


def _bucket_counts(spreads: Sequence[int], table: int) -> dict[int, int]:
    counts: dict[int, int] = {}
    for s in spreads:
        counts[s & (table - 1)] = counts.get(s & (table - 1), 0) + 1
    return counts


def hash_map_order(keys: Sequence[str], table: int = FRESH_TABLE) -> tuple[list[str], int]:
    """``keys`` (distinct, in insertion order) as a ``HashMap`` with a table of ``table`` iterates them,
    and the table's length afterwards (what a cleared map starts the next call with)."""
    spreads = [_spread(java_string_hash(k)) for k in keys]
    final = _grown(table, spreads)
    order = sorted(range(len(keys)), key=lambda k: (spreads[k] & (final - 1), k))
    return [keys[k] for k in order], final
