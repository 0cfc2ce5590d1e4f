"""The sandbox's made-up topic names hash into their bundles, as Pulsar would place them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shedlab.cluster.sandbox.views import bundles_data, topic_names
from shedlab.model.bundles import bundle_of_topic, even_ranges


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=16))
def test_every_topic_hashes_into_its_bundle(counts: list[int]) -> None:
    ranges = [f"0x{lo:08x}_0x{hi:08x}" for lo, hi in even_ranges(len(counts))]
    names = topic_names("t/ns", ranges, counts)
    bounds = [int(b, 16) for b in bundles_data(ranges)["boundaries"]]
    assert [len(names[r]) for r in ranges] == counts
    for k, r in enumerate(ranges):
        assert all(bundle_of_topic(topic, bounds) == k for topic in names[r])
    every = [t for r in ranges for t in names[r]]
    assert len(every) == len(set(every))
