"""Benchmark: how long one admin-API read of a cluster takes when some of its brokers hang.

    .venv/bin/python bench/bench_hung_brokers.py                 # 6 of broker-loss's 10 brokers hung
    .venv/bin/python bench/bench_hung_brokers.py --hung 10 --timeout 2 --retries 3

The sandbox (no ZooKeeper) with its first ``--hung`` brokers, in id order, hung (``Sandbox.hang_broker``:
connections taken, never answered), read twice: ``AdminReader.read()`` in this process, then ``shedlab
collect --count 1`` as a subprocess (the ``shedlab`` next to this Python). Each hung broker costs
``--retries`` × ``--timeout`` and the back-off (0.5 s, doubling); asked one after another they add up,
asked at once (``MAX_CONCURRENT_CALLS`` at a time) they do not. Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from shedlab.cluster.access import Retry
from shedlab.cluster.readers import AdminReader
from shedlab.cluster.sandbox import Sandbox


def _read(url: str, retry: Retry) -> str:
    reader = AdminReader(url, retry=retry)
    start = time.monotonic()
    try:
        reading = reader.read()
    finally:
        reader.close()
    took = time.monotonic() - start
    return f"AdminReader.read: {took:.2f} s, {len(reading.reports)} reports, {len(reading.missing)} missing"


def _collect(url: str, timeout: float, retries: int) -> str:
    shedlab = str(Path(sys.executable).with_name("shedlab"))
    with tempfile.TemporaryDirectory() as out:
        args = ["collect", "--admin-url", url, "--count", "1", "--out", out]
        start = time.monotonic()
        proc = subprocess.run(
            [shedlab, *args, "--timeout", f"{timeout:g}s", "--retries", str(retries)],
            capture_output=True,
            text=True,
            check=False,
        )
        took = time.monotonic() - start
    return f"shedlab collect --count 1: {took:.2f} s, exit {proc.returncode}: {' '.join(proc.stderr.split())}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="broker-loss")
    parser.add_argument("--hung", type=int, default=6, help="how many brokers hang (the first, by id)")
    parser.add_argument("--timeout", type=float, default=2.0, help="--timeout, seconds")
    parser.add_argument("--retries", type=int, default=3)
    args = parser.parse_args()
    with Sandbox(args.scenario, seed=3, zookeeper=None) as sb:
        brokers = sorted(sb.broker_urls)
        for broker in brokers[: args.hung]:
            sb.hang_broker(broker)
        print(
            f"{args.scenario}: {len(brokers)} brokers, {min(args.hung, len(brokers))} hung, "
            f"--timeout {args.timeout:g}s --retries {args.retries}"
        )
        print(_read(sb.admin_url, Retry(attempts=args.retries, backoff_s=0.5, timeout_s=args.timeout)))
        print(_collect(sb.admin_url, args.timeout, args.retries))


if __name__ == "__main__":
    main()
