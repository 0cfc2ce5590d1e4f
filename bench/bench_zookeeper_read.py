"""Benchmark: how long one live reading of a cluster's load-balancer znodes takes from ZooKeeper.

    .venv/bin/python bench/bench_zookeeper_read.py                       # slow-balancing: 200 brokers
    .venv/bin/python bench/bench_zookeeper_read.py --scenario broker-loss --reads 5
    .venv/bin/python bench/bench_zookeeper_read.py --rtt-ms 1     # as if ZooKeeper were 1 ms away

The sandbox runs the scenario with a private ZooKeeper (Debian's ``zookeeper``, on loopback) long enough
for the leader to write its bundle data, then ``ZooKeeperReader.read()`` (what ``shedlab collect`` and
``shedlab advise`` do for each reading) is timed. Prints the znodes read and the median time of a
reading. Figures only: nothing is asserted. Loopback answers in tens of microseconds; a ZooKeeper in
another rack or zone answers in a millisecond or more, so a reading that waits for each answer before
asking the next costs that round trip once per znode there. ``--rtt-ms`` puts a relay in front of the
ZooKeeper that holds every chunk of bytes for half the round trip in each direction (order kept), so
that cost can be measured here.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from shedlab.cluster.readers import ClusterReading, ZooKeeperReader
from shedlab.cluster.sandbox import Sandbox


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk written ``delay_s`` after it arrived, in order."""
    loop = asyncio.get_running_loop()
    try:
        while chunk := await reader.read(65536):
            loop.call_later(delay_s, writer.write, chunk)
    finally:
        loop.call_later(delay_s, writer.close)


@contextmanager
def delayed(hosts: str, rtt_s: float) -> Iterator[str]:
    """``hosts`` (``127.0.0.1:PORT/chroot``) behind a relay adding ``rtt_s`` to every round trip."""
    address, slash, chroot = hosts.partition("/")
    host, _, port = address.rpartition(":")
    loop = asyncio.new_event_loop()

    async def relay(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(host, int(port))
        with contextlib.suppress(asyncio.CancelledError):  # cancelled at the end: _shut
            await asyncio.gather(_pipe(client_r, server_w, rtt_s / 2), _pipe(server_r, client_w, rtt_s / 2))

    server = loop.run_until_complete(asyncio.start_server(relay, "127.0.0.1", 0))
    relay_port = server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{relay_port}{slash}{chroot}"
    finally:
        asyncio.run_coroutine_threadsafe(_shut(server), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


async def _shut(server: asyncio.Server) -> None:
    """The relay's listener closed and its connections' copies cancelled, so that nothing is left pending."""
    server.close()
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
    await server.wait_closed()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="slow-balancing")
    parser.add_argument("--ticks", type=int, default=16, help="simulated minutes before reading")
    parser.add_argument("--reads", type=int, default=7)
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="round trip added by a relay")
    args = parser.parse_args()
    with Sandbox(args.scenario, zookeeper="auto") as sb:
        sb.advance(args.ticks)
        assert sb.zookeeper is not None
        relay: AbstractContextManager[str] = (
            delayed(sb.zookeeper, args.rtt_ms / 1000) if args.rtt_ms > 0 else nullcontext(sb.zookeeper)
        )
        with relay as hosts:
            reading, times = _time_reads(hosts, args.reads)
    znodes = len(reading.reports) + len(reading.bundle_data)
    median = statistics.median(times)
    print(
        f"{args.scenario}: {len(reading.reports)} load reports + {len(reading.bundle_data)} bundle-data "
        f"znodes, {args.rtt_ms:g} ms added per round trip; one reading: median {median * 1000:.0f} ms "
        f"over {args.reads} ({znodes / median:,.0f} znodes/s)"
    )


def _time_reads(hosts: str, reads: int) -> tuple[ClusterReading, list[float]]:
    """The last reading and the time of each, the session opened before the first timed one."""
    reader = ZooKeeperReader(hosts)
    try:
        reading = reader.read()  # opens the session: not timed
        times = []
        for _ in range(reads):
            start = time.perf_counter()
            reading = reader.read()
            times.append(time.perf_counter() - start)
    finally:
        reader.close()
    return reading, times


if __name__ == "__main__":
    main()
