"""``extensible_data._java_max`` keeps the *first* of equal maxima, as Java's ``LocalBrokerData.max`` does
(``if (d > max) max = d``, spec §8.1): the one visible trace is the sign of a zero, which a report can carry
(``"usage": -0.0`` passes the reader: it is not below 0) and Jackson writes back as ``-0.0``. A ``>=`` would
keep the last zero instead (docs/mutation-registry.md)."""

from __future__ import annotations

import json
import math

from shedlab.model.json_reader import JsonReader
from shedlab.model.pulsar import RESOURCE_NAMES, ResourceUsage
from shedlab.strategies.extensible_data import BrokerLoadData, ResourceWeights


def sampled(cpu_usage: float) -> BrokerLoadData:
    usage = {name: ResourceUsage(0.0, 100.0) for name in RESOURCE_NAMES}
    usage["cpu"] = ResourceUsage.from_json(
        JsonReader(json.loads(f'{{"usage": {cpu_usage}, "limit": 100}}'), "l")
    )
    return BrokerLoadData().updated(
        usage,
        msg_throughput_in=0.0,
        msg_throughput_out=0.0,
        msg_rate_in=0.0,
        msg_rate_out=0.0,
        bundle_count=0,
        topics=0,
        weights=ResourceWeights(1.0, 1.0, 1.0, 1.0, 1.0),
        history=0.9,
        now_ms=1,
    )


def test_the_max_of_equal_zeros_is_the_first_one_as_in_java() -> None:
    """cpu comes first among (cpu, direct memory, bandwidth in, bandwidth out): its -0.0 % stays the max
    against the later +0.0 %, so ``maxResourceUsage`` is -0.0 and is written as such."""
    data = sampled(-0.0)
    assert data.cpu.percent_usage() == 0.0 and math.copysign(1.0, data.cpu.percent_usage()) == -1.0
    assert math.copysign(1.0, data.max_resource_usage) == -1.0
    assert json.dumps(data.to_json()["maxResourceUsage"]) == "-0.0"
    assert math.copysign(1.0, sampled(0.0).max_resource_usage) == 1.0


def test_a_strictly_larger_later_value_still_wins() -> None:
    assert sampled(50.0).max_resource_usage == 0.5
