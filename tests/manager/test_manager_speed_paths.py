"""The leader's incremental bookkeeping equals its plain recomputation (the caches are invisible)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shedlab.manager.loop import _RecentMask
from shedlab.model.pulsar import NameIndex

NAMES = tuple(f"t/ns{j % 4}/0x{j:08x}_0x{j + 1:08x}" for j in range(40))
OTHERS = ("t/gone/0x0_0x1", "u/elsewhere/0x0_0x1")  # recently unloaded, but not bundles of the names


def plain_mask(names: tuple[str, ...], recent: dict[str, int]) -> np.ndarray:
    """The mask as the leader built it every cycle: every recently unloaded bundle looked up again."""
    index = {n: i for i, n in enumerate(names)}
    mask = np.zeros(len(names), dtype=np.bool_)
    mask[[index[b] for b in recent if b in index]] = True
    return mask


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["add", "drop", "expire", "clear", "replace"]), st.integers(0, 2**16)),
        max_size=25,
    )
)
def test_recent_mask_follows_every_change_of_the_map(steps: list[tuple[str, int]]) -> None:
    """Additions, removals, expiries, a cleared or replaced map: each cycle's mask is the plain one."""
    rng = np.random.default_rng(len(steps))
    pool = NAMES + OTHERS
    recent: dict[str, int] = {}
    tracker = _RecentMask(NameIndex(NAMES))
    for t, (op, k) in enumerate(steps):
        if op == "add":
            recent[pool[k % len(pool)]] = t
        elif op == "drop" and recent:
            del recent[list(recent)[k % len(recent)]]
        elif op == "expire":
            recent = {b: at for b, at in recent.items() if at >= t - k % 5}
        elif op == "clear":
            recent.clear()
        else:
            recent = {pool[j]: t for j in rng.choice(len(pool), size=k % 6, replace=False).tolist()}
        mask = tracker.of(recent)
        assert mask.tolist() == plain_mask(NAMES, recent).tolist()
        mask[:] = True  # the caller's copy: the tracker's own mask is not changed through it
        assert tracker.of(recent).tolist() == plain_mask(NAMES, recent).tolist()
