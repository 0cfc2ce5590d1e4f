"""``scripts/capacity-topic-cost.py``: the two-cost lower envelope docs/capacity-aware.md ("Limits")
measured and rejected. It recovers costs that are there, adds none to a messages-only CPU, and reads a
background on the broker with more topics as a cost per topic: the confusion the docs quote."""

from __future__ import annotations

import numpy as np
import pytest
from scripts_support import load_script

SCRIPT = load_script("capacity-topic-cost.py")


@pytest.mark.parametrize("seed", range(5))
def test_costs_that_are_there_are_recovered(seed: int) -> None:
    rng = np.random.default_rng(seed)
    msgs, topics = rng.uniform(1e3, 1e5, 12), rng.uniform(10, 5000, 12)
    c_m, c_t = SCRIPT.envelope(msgs, topics, 2e-4 * msgs + 3e-3 * topics)
    assert c_m == pytest.approx(2e-4, rel=1e-9) and c_t == pytest.approx(3e-3, rel=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_a_messages_only_cpu_gets_no_topic_cost(seed: int) -> None:
    rng = np.random.default_rng(seed)
    msgs, topics = rng.uniform(1e3, 1e5, 12), rng.uniform(10, 5000, 12)
    c_m, c_t = SCRIPT.envelope(msgs, topics, 2e-4 * msgs)
    assert c_m == pytest.approx(2e-4, rel=1e-12) and c_t == pytest.approx(0.0, abs=1e-15)  # rounding


def test_a_background_beside_more_topics_reads_as_a_topic_cost() -> None:
    # both brokers cost 1 per message; the second has 5 more of background and ten times the topics
    msgs, topics, cpu = np.array([10.0, 10.0]), np.array([1.0, 10.0]), np.array([10.0, 15.0])
    c_m, c_t = SCRIPT.envelope(msgs, topics, cpu)
    assert c_t == pytest.approx(5 / 9) and c_m * 10 + c_t * 10 == pytest.approx(15)
