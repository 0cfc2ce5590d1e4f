"""What a second core could buy the leader's averages: one tick's two saturated runs, alone or split by rows.

    .venv/bin/python bench/bench_second_core.py [--bundles 100000] [--calls 300]
    taskset -c 1 sh -c 'while :; do :; done' &   # then run it again with the other core busy

Issue 12's 4× on ``bench/bench_simulator.py`` is out of reach one core at a time
(``src/shedlab/kernels.py``, "Where a tick goes now"). This bounds the other road. A tick of the
1,000-broker day makes two :func:`~shedlab.kernels.saturated_run` calls over (4, m) blocks (short and
long term). Here they run once as the simulator makes them, and once split by rows: rows 2-3 on a
pool thread and rows 0-1 on the caller's. The kernel releases the GIL, and rows are independent, so
the bits are the same. Printed: the median and 90th percentile of ``--calls`` pairs of calls, each
way, alternated twice. Measured 28 Nov 2026 on the 2-core development machine: 0.60 → 0.36 ms with
the other core idle, and 0.61 → 0.65 ms (a worse p90) with it busy, as it is while a sweep runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numpy.typing import NDArray

from shedlab.kernels import saturated_run

FloatArray = NDArray[np.float64]
NO_COLUMNS = np.zeros(0, dtype=np.bool_)


def both_runs(rows: slice, arrays: tuple[FloatArray, ...], counts: tuple[NDArray[np.int64], ...]) -> None:
    """The tick's two saturated runs (short and long term) over ``rows`` of each block."""
    out, values, x_old, x_new, table = arrays
    old, new = counts
    for _ in range(2):
        saturated_run(
            out[rows], values[rows], table, x_old[rows], old, True, x_new[rows], new, True, NO_COLUMNS
        )


def timed(fn: Callable[[], None], calls: int) -> tuple[float, float]:
    """Median and 90th percentile of ``calls`` calls of ``fn``, in ms."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times), float(np.percentile(times, 90))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bundles", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    shape = (4, args.bundles)
    arrays = (np.empty(shape), rng.random(shape), rng.random(shape), rng.random(shape), rng.random(20))
    counts = (rng.integers(0, 19, args.bundles), rng.integers(0, 19, args.bundles))
    pool = ThreadPoolExecutor(1)

    def alone() -> None:
        both_runs(slice(None), arrays, counts)

    def split() -> None:
        other = pool.submit(both_runs, slice(2, None), arrays, counts)
        both_runs(slice(0, 2), arrays, counts)
        other.result()

    alone()  # compiles (or loads) the kernel
    split()
    for _ in range(2):
        for name, fn in (("one thread", alone), ("rows split", split)):
            median, p90 = timed(fn, args.calls)
            print(f"{name:<12} median {median:.3f} ms   p90 {p90:.3f} ms")
    pool.shutdown()


if __name__ == "__main__":
    main()
