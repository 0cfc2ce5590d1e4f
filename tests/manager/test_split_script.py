"""``scripts/split-thresholds.py``: the split check on a scenario's last state (docs/scenarios.md)."""

from __future__ import annotations

import pytest
from scripts_support import load_script

SCRIPT = load_script("split-thresholds.py")


@pytest.mark.parametrize(
    ("scenario", "split"),
    [("heterogeneous-nic-speeds", 0), ("heterogeneous-cpu-eater", 16), ("over-unloading-90-10", 2)],
)
def test_the_bundles_over_the_thresholds_are_counted(scenario: str, split: int) -> None:
    fields = SCRIPT.measure(scenario, None).split()  # each scenario's own seed, as docs/scenarios.md
    assert fields[0] == scenario
    assert int(fields[3]) == split and int(fields[4]) == 0
