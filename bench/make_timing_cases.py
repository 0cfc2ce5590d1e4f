"""Write 500-broker / 50,000-bundle placement cases for ``shedlab conform --timing`` (timing only).

    .venv/bin/python bench/make_timing_cases.py /tmp/cases
    .venv/bin/shedlab conform --timing 100 /tmp/cases

One case per placement strategy (LeastLongTermMessageRate, LeastResourceUsageWithWeight), the
leader's call path: 500 candidates given as broker names, a fresh strategy instance per timed call.
The ``expected`` answer lists every broker (these cases time the call; they do not check Pulsar's
answer: use the shipped ``conformance/`` cases for that).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

N_BROKERS, N_BUNDLES = 500, 50_000


def _bundle(rate: float) -> dict[str, Any]:
    window = {"msgRateIn": rate, "msgRateOut": rate, "msgThroughputIn": rate * 1000}
    window["msgThroughputOut"] = rate * 1000
    return {
        "shortTermData": {**window, "numSamples": 10, "maxSamples": 10},
        "longTermData": {**window, "numSamples": 1000, "maxSamples": 1000},
        "topics": 1,
    }


def _broker(cpu: float, total: float, bundles: list[str]) -> dict[str, Any]:
    usage = {
        "cpu": {"usage": cpu, "limit": 100.0},
        "memory": {"usage": 3.0, "limit": 100.0},
        "directMemory": {"usage": 2.0, "limit": 100.0},
        "bandwidthIn": {"usage": cpu / 2, "limit": 100.0},
        "bandwidthOut": {"usage": cpu / 2, "limit": 100.0},
    }
    rates = {"msgRateIn": total, "msgRateOut": total}
    rates |= {"msgThroughputIn": total * 1000, "msgThroughputOut": total * 1000}
    averages = {
        f"{term}Term{key[0].upper()}{key[1:]}": value
        for term in ("short", "long")
        for key, value in rates.items()
    }
    return {"localData": {**usage, **rates, "bundles": bundles}, "timeAverageData": averages}


def main(out: Path) -> None:
    rng = np.random.default_rng(5)
    brokers = [f"broker-{i + 1}:8080" for i in range(N_BROKERS)]
    owner = rng.integers(0, N_BROKERS, N_BUNDLES)
    names = [f"public/default/0x{j:08x}_0x{j + 1:08x}" for j in range(N_BUNDLES)]
    rate = rng.lognormal(5, 1.2, N_BUNDLES).round(4)
    cpu = np.sort(rng.uniform(5, 80, N_BROKERS).round(2))
    bundle_data = {names[j]: _bundle(float(rate[j])) for j in range(N_BUNDLES)}
    load = {
        b: _broker(
            float(cpu[i]), float(rate[owner == i].sum()), [names[j] for j in np.flatnonzero(owner == i)]
        )
        for i, b in enumerate(brokers)
    }
    bundle = "public/new/0x00000000_0x00000001"
    out.mkdir(parents=True, exist_ok=True)
    for strategy in ("LeastLongTermMessageRate", "LeastResourceUsageWithWeight"):
        case: dict[str, Any] = {
            "name": f"timing-{strategy}-{N_BROKERS}x{N_BUNDLES}",
            "strategy": strategy,
            "tags": ["timing"],
            "config": {},
            "ticks": [
                {
                    "loadData": {"brokers": load, "bundleData": bundle_data, "recentlyUnloadedBundles": {}},
                    "assign": [{"bundle": bundle, "candidates": brokers}],
                }
            ],
            "expected": [{"assign": [{"bundle": bundle, "choices": brokers}]}],
        }
        (out / f"{strategy}.json").write_text(json.dumps(case))
        print(out / f"{strategy}.json")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "timing-cases"))
