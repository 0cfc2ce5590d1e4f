"""A stand-alone model of a Pulsar broker's sampling timers on the book's §5.2 run (docs/published.md).

Not shedlab code and not imported by it: it asks how many report writes, and so how many samples of the
leader's short-term bundle averages, an instant step in traffic causes when the brokers sample the way
Pulsar's code does, and what AvgShedder then selects at its 8th hit. Inputs are those of
``examples/published/ch5-homogeneous-pressure.yaml`` (bundles, rates, 8 % noise a minute, the CPU line).

Per broker, as in Pulsar (one-second steps):

* bundle stats every 60 s (``BrokerService``'s stats updater, fixed rate): the window's average rates;
* host usage every 60 s on its own timer (``LinuxBrokerHostUsageImpl.calculateBrokerHostUsage``,
  ``scheduleWithFixedDelay``): the window's average CPU;
* a report check every 5 s (``writeBrokerDataOnZooKeeper`` → ``needBrokerDataUpdate``: rate change or
  CPU change over 10 against the last written report);
* every write runs the leader's ``updateAll`` → ``updateBundleData``: one ``TimeAverageMessageData``
  sample (10 short-term samples) of every listed bundle, from the published reports;
* the leader's AvgShedder every 60 s on the published reports (pairs, per-broker hit counters, the
  msg-rate amount, first-fit decreasing on the short-term in+out rates).

``--timers`` chooses the phases: ``random`` (stats, host usage, report check and shedding each at an
independent random phase), ``host-first``/``stats-first`` (the two timers 2 s apart), or ``tick`` (what
shedlab's 60-s tick does: both sampled at the instant of the tick, right after the step).

    python scripts/pulsar-timers-ch5.py --timers random --runs 200
"""

from __future__ import annotations

import argparse

import numpy as np

BUNDLES = [7, 6, 5, 3, 3]  # brokers 1-5 = XXX.83, .206, .87, .32, .161
RATE_IN = [15360, 15275, 16855, 17818, 15497]  # msg/s in per bundle (1 KiB messages, fanout 1)


def cpu_percent(owner: np.ndarray, rate_in: np.ndarray) -> np.ndarray:
    """The scenario's cost model: idle 2.5 %, 0.1665 % per MiB/s in or out, co-located bookies."""
    mib = np.bincount(owner, rate_in, 5) / 1024
    result: np.ndarray = 2.5 + 0.1665 * 2 * mib + 22.7 * mib.sum() / 374.0
    return result


class Ch5Run:
    """One run's clocks and state: the brokers' timers, their local and published reports, the leader's."""

    def __init__(self, seed: int, timers: str, idle_samples: int) -> None:
        rng = self.rng = np.random.default_rng(seed)
        self.owner = np.repeat(np.arange(5), BUNDLES)
        self.base = np.repeat(RATE_IN, BUNDLES).astype(float)
        m = self.owner.size
        self.tick = tick = timers == "tick"
        self.noise_phase = 0.0 if tick else rng.uniform(0, 60)
        self.noise: dict[int, np.ndarray] = {}
        stats = np.full(5, 0.5) if tick else rng.uniform(0, 60, 5)
        if tick:
            host = stats.copy()
        elif timers == "random":
            host = rng.uniform(0, 60, 5)
        else:
            host = (stats + (-2.0 if timers == "host-first" else 2.0)) % 60
        check = rng.uniform(0, 5, 5)
        shed = 0.9 if tick else rng.uniform(0, 60)
        self.writers_order = rng.permutation(5)  # who reaches the store first when checks coincide
        self.t = t = -300.0
        self.next_stats, self.next_host = stats + t, host + t
        self.next_check, self.next_shed = check + t, shed + t
        self.st_sum, self.st_start = np.zeros(m), np.full(5, t)
        self.host_sum, self.host_start = np.zeros(5), np.full(5, t)
        self.local_rates, self.local_cpu = np.zeros(m), np.full(5, 2.5)
        self.pub_rates, self.pub_cpu = np.zeros(m), np.full(5, 2.5)
        self.last_rate, self.last_cpu = np.zeros(5), np.full(5, 2.5)
        self.short_n, self.short_v = np.full(m, idle_samples), np.zeros(m)  # idle bundles: samples of 0
        self.hits = np.zeros(5, dtype=int)
        self.lo = self.hi = 0  # the extreme pair at the last shedding
        self.writes = 0

    def true_rate(self, t: float) -> np.ndarray:
        """Every bundle's rate at ``t``: 0 before the step, then its base times this minute's noise."""
        if t < 0:
            return np.zeros(self.owner.size)
        k = int((t - self.noise_phase) // 60)
        if k not in self.noise:
            self.noise[k] = 1 + 0.08 * self.rng.standard_normal(self.owner.size)
        result: np.ndarray = self.base * self.noise[k]
        return result

    def sample(self, b: int, x: np.ndarray, cpu_now: np.ndarray) -> None:
        """Broker ``b``'s two timers: bundle stats and host usage, each its window's average when due."""
        t = self.t
        if t >= self.next_stats[b]:
            mine = self.owner == b
            self.local_rates[mine] = x[mine] if self.tick else self.st_sum[mine] / (t - self.st_start[b])
            self.st_sum[mine] = 0
            self.st_start[b] = t
            self.next_stats[b] += 60
        if t >= self.next_host[b]:
            self.local_cpu[b] = cpu_now[b] if self.tick else self.host_sum[b] / (t - self.host_start[b])
            self.host_sum[b] = 0
            self.host_start[b] = t
            self.next_host[b] += 60

    def check_report(self, b: int) -> None:
        """Broker ``b``'s 5-s report check; a write runs the leader's ``updateBundleData``."""
        t = self.t
        if t < self.next_check[b]:
            return
        self.next_check[b] += 5
        rate = 2 * self.local_rates[self.owner == b].sum()
        if self.last_rate[b] == 0:
            change = 0.0 if rate == 0 else np.inf
        else:
            change = 100 * abs(self.last_rate[b] - rate) / self.last_rate[b]
        if max(change, abs(self.last_cpu[b] - self.local_cpu[b])) <= 10:
            return
        self.writes += t >= 0
        mine = self.owner == b
        self.pub_rates[mine] = self.local_rates[mine]
        self.pub_cpu[b] = self.last_cpu[b] = self.local_cpu[b]
        self.last_rate[b] = rate
        self.short_n = np.minimum(self.short_n + 1, 10)  # the leader's updateBundleData
        self.short_v = ((self.short_n - 1) * self.short_v + 2 * self.pub_rates) / self.short_n

    def count_hits(self) -> bool:
        """AvgShedder's pairs and per-broker hit counters; whether the extreme pair has 8 hits."""
        order = np.argsort(self.pub_cpu, kind="stable")
        hits = self.hits
        for under, over in ((order[0], order[4]), (order[1], order[3])):
            if self.pub_cpu[over] - self.pub_cpu[under] < 15:
                hits[under] = hits[over] = 0
            else:
                hits[under] += 1
                hits[over] += 1
        hits[order[2]] = 0
        self.lo, self.hi = int(order[0]), int(order[4])
        return bool(max(hits[self.lo], hits[self.hi]) >= 8)

    def select(self) -> dict[str, float]:
        """The msg-rate amount, first-fit decreasing on the short-term rates; what the trigger saw."""
        owner, base, short_v, lo, hi = self.owner, self.base, self.short_v, self.lo, self.hi
        rates = np.bincount(owner, 2 * self.pub_rates, 5)
        remaining = (rates[hi] - rates[lo]) * 0.5
        candidates = np.flatnonzero(owner == hi)
        candidates = candidates[np.argsort(-short_v[candidates], kind="stable")]
        chosen = []
        for j in candidates:
            if 0 < short_v[j] <= remaining:
                remaining -= short_v[j]
                chosen.append(j)
        moved = base[chosen].sum()
        gap_after = 0.333 * ((base[owner == lo].sum() + moved) - (base[owner == hi].sum() - moved)) / 1024
        return {
            "seconds": self.t,
            "bundles": len(chosen),
            "seen": float(np.mean(short_v[candidates] / (2 * base[candidates]))),
            "writes": self.writes,
            "reverse": float(gap_after >= 15),
        }


def run(seed: int, timers: str, idle_samples: int) -> dict[str, float] | None:
    """One run, second by second, until AvgShedder triggers (its selection) or 16 minutes pass (None)."""
    state = Ch5Run(seed, timers, idle_samples)
    while state.t < 16 * 60:
        x = state.true_rate(state.t)
        cpu_now = cpu_percent(state.owner, x)
        state.st_sum += x
        state.host_sum += cpu_now
        state.t += 1.0
        for b in range(5):
            state.sample(b, x, cpu_now)
        for b in state.writers_order:
            state.check_report(b)
        if state.t < state.next_shed:
            continue
        state.next_shed += 60
        if state.count_hits():
            return state.select()
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timers", choices=("random", "host-first", "stats-first", "tick"), default="random")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--idle-samples", type=int, default=10, help="idle (0) samples before the step")
    args = parser.parse_args()
    results = [r for r in (run(s, args.timers, args.idle_samples) for s in range(args.runs)) if r]
    bundles, counts = np.unique([r["bundles"] for r in results], return_counts=True)
    pairs = zip(bundles.tolist(), counts.tolist(), strict=True)
    share = ", ".join(f"{b}: {c / len(results):.0%}" for b, c in pairs)
    print(
        f"timers={args.timers}: {len(results)} triggers; bundles moved {share}; "
        f"short-term/true at the trigger {np.median([r['seen'] for r in results]):.2f}; "
        f"writes after the step {np.median([r['writes'] for r in results]):.0f}; "
        f"reverse (gap after >= 15) {np.mean([r['reverse'] for r in results]):.0%}; "
        f"trigger {np.median([r['seconds'] for r in results]):.0f} s after the step (median)"
    )


if __name__ == "__main__":
    main()
