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


def run(seed: int, timers: str, idle_samples: int) -> dict[str, float] | None:
    rng = np.random.default_rng(seed)
    owner = np.repeat(np.arange(5), BUNDLES)
    base = np.repeat(RATE_IN, BUNDLES).astype(float)
    m = owner.size
    tick = timers == "tick"
    noise_phase = 0.0 if tick else rng.uniform(0, 60)
    noise: dict[int, np.ndarray] = {}

    def true_rate(t: float) -> np.ndarray:
        if t < 0:
            return np.zeros(m)
        k = int((t - noise_phase) // 60)
        if k not in noise:
            noise[k] = 1 + 0.08 * rng.standard_normal(m)
        result: np.ndarray = base * noise[k]
        return result

    stats = np.full(5, 0.5) if tick else rng.uniform(0, 60, 5)
    if tick:
        host = stats.copy()
    elif timers == "random":
        host = rng.uniform(0, 60, 5)
    else:
        host = (stats + (-2.0 if timers == "host-first" else 2.0)) % 60
    check = rng.uniform(0, 5, 5)
    shed = 0.9 if tick else rng.uniform(0, 60)
    writers_order = rng.permutation(5)  # who reaches the store first when checks coincide
    t = -300.0
    next_stats, next_host, next_check, next_shed = stats + t, host + t, check + t, shed + t
    st_sum, st_start = np.zeros(m), np.full(5, t)
    host_sum, host_start = np.zeros(5), np.full(5, t)
    local_rates, local_cpu = np.zeros(m), np.full(5, 2.5)
    pub_rates, pub_cpu = np.zeros(m), np.full(5, 2.5)
    last_rate, last_cpu = np.zeros(5), np.full(5, 2.5)
    short_n, short_v = np.full(m, idle_samples), np.zeros(m)  # idle bundles: samples of 0
    hits = np.zeros(5, dtype=int)
    writes = 0
    while t < 16 * 60:
        x = true_rate(t)
        cpu_now = cpu_percent(owner, x)
        st_sum += x
        host_sum += cpu_now
        t += 1.0
        for b in range(5):
            if t >= next_stats[b]:
                mine = owner == b
                local_rates[mine] = x[mine] if tick else st_sum[mine] / (t - st_start[b])
                st_sum[mine] = 0
                st_start[b] = t
                next_stats[b] += 60
            if t >= next_host[b]:
                local_cpu[b] = cpu_now[b] if tick else host_sum[b] / (t - host_start[b])
                host_sum[b] = 0
                host_start[b] = t
                next_host[b] += 60
        for b in writers_order:
            if t < next_check[b]:
                continue
            next_check[b] += 5
            rate = 2 * local_rates[owner == b].sum()
            if last_rate[b] == 0:
                change = 0.0 if rate == 0 else np.inf
            else:
                change = 100 * abs(last_rate[b] - rate) / last_rate[b]
            if max(change, abs(last_cpu[b] - local_cpu[b])) > 10:
                writes += t >= 0
                mine = owner == b
                pub_rates[mine] = local_rates[mine]
                pub_cpu[b] = last_cpu[b] = local_cpu[b]
                last_rate[b] = rate
                short_n = np.minimum(short_n + 1, 10)  # the leader's updateBundleData
                short_v = ((short_n - 1) * short_v + 2 * pub_rates) / short_n
        if t < next_shed:
            continue
        next_shed += 60
        order = np.argsort(pub_cpu, kind="stable")
        for under, over in ((order[0], order[4]), (order[1], order[3])):
            if pub_cpu[over] - pub_cpu[under] < 15:
                hits[under] = hits[over] = 0
            else:
                hits[under] += 1
                hits[over] += 1
        hits[order[2]] = 0
        lo, hi = order[0], order[4]
        if max(hits[lo], hits[hi]) < 8:
            continue
        rates = np.bincount(owner, 2 * pub_rates, 5)
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
            "seconds": t,
            "bundles": len(chosen),
            "seen": float(np.mean(short_v[candidates] / (2 * base[candidates]))),
            "writes": writes,
            "reverse": float(gap_after >= 15),
        }
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
