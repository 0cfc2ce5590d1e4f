"""``scripts/capacity-view-lag.py``: each planned cycle's view of every broker, beside the truth and the
published report, as docs/capacity-aware.md quotes it for a growing cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scripts_support import load_script

SCRIPT = load_script("capacity-view-lag.py")
PROBE = str(
    Path(__file__).resolve().parents[2] / "examples" / "capacity-probes" / "probe-subscriptions-multiply.yaml"
)


def test_the_view_is_the_report_but_where_rule_7_corrects_it_and_lags_the_truth() -> None:
    joined = SCRIPT.views_and_truth(PROBE, 1)
    brokers, cycles = joined["broker"].nunique(), joined["time_s"].nunique()
    assert len(joined) == brokers * cycles and cycles > 20
    corrected = ~np.isclose(joined["view"], joined["reported"], rtol=0, atol=1e-6)
    assert 0 < int(corrected.sum()) < len(joined) // 2  # only brokers that have not reported since a move
    late = joined[joined["time_s"].between(20 * 60, 32 * 60)]
    lag = (late["true"] - late["view"]).groupby(late["broker"]).min()
    assert int((lag > 1.0).sum()) >= 4  # four brokers seen more than a point low for 13 minutes
