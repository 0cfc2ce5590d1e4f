"""``scripts/capacity-view-lag.py``: each planned cycle's view of every broker, beside the truth and the
published report, as docs/capacity-aware.md quotes it for a growing cluster."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
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
    # the lag below the report threshold: a broker's report stays as it was for cycle after cycle while
    # its true score is more than 3 points above the view (docs/capacity-aware.md: 8 to 9 points low on
    # one broker from minute 19 to 27, at 1d91fa6; before Pulsar's decimal NIC units, four brokers a
    # point or more low from minute 20 to 32)
    assert max(_stale_and_low(rows) for _, rows in joined.groupby("broker")) >= 8


def _stale_and_low(rows: pd.DataFrame) -> int:
    """The longest run of planned cycles in which a broker's report is unchanged and its true score is
    more than 3 points above the plan's view of it."""
    rows = rows.sort_values("time_s")
    unchanged = pd.Series(np.isclose(rows["reported"].diff(), 0.0), index=rows.index)
    stale = unchanged & (rows["true"] - rows["view"] > 3.0)
    runs = stale.astype(int).groupby((~stale).cumsum()).sum()
    return int(runs.max())
