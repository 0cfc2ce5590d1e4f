"""The leader's bundle split check: which hot bundles Pulsar's modular manager would split (spec §4.8).

Pulsar's leader runs ``checkNamespaceBundleSplit`` at the end of every ``updateAll`` (each time a broker
writes its report), before any shedding cycle sees the data: ``BundleSplitterTask.findBundlesToSplit``
picks the bundles over a threshold, and for each one whose hash range can still be halved the leader
drops its BundleData (so that it is not picked again) and asks the admin API to split it, unloading
the two children when ``loadBalancerAutoUnloadSplitBundlesEnabled``. A bundle being split is therefore
no shedding candidate: its load moves as the children's lookups, not as an unload of the strategy.

Implemented, as ``BundleSplitterTask`` (master) and ``ModularLoadManagerImpl.checkNamespaceBundleSplit``:

* only when ``loadBalancerAutoBundleSplitEnabled`` and the leader knows more than one broker;
* every entry of every broker's ``lastStats``; one with fewer than 2 topics is never split;
* a candidate when its topics exceed ``loadBalancerNamespaceBundleMaxTopics``, its producers plus
  consumers exceed ``loadBalancerNamespaceBundleMaxSessions`` (when that is above 0), or its BundleData's
  long-term message rate (in + out) or throughput (in + out) exceeds ``loadBalancerNamespaceBundleMaxMsgRate``
  or ``loadBalancerNamespaceBundleMaxBandwidthMbytes`` MiB/s; a bundle without BundleData has rates 0;
* accepted while the namespace's bundle count plus the bundles already accepted for it this cycle is
  below ``loadBalancerNamespaceMaximumBundles``;
* ``NamespaceBundleFactory.canSplitBundle``: a range of 1 hash value cannot be halved; it is skipped.

Quirks kept: a bundle that two reports list (its old and new owner's, minutes after a move) is checked
once per report, and each acceptance counts towards the namespace's cap, as Java's per-namespace counter
does; the result keeps one entry per bundle, under the last broker that listed it (Java's map ``put``).

Deterministic rule: Java walks the brokers and each ``lastStats`` in hash-map order, which decides who
is accepted when the cap cuts a namespace's candidates short; shedlab walks brokers by id and bundles by
name (the snapshot's ordering rule, :mod:`shedlab.model.snapshot`).

Left out: the namespace's bundle count is what the snapshot names (:class:`SplitInputs`), a lower bound
of the policies' count Pulsar reads; the split itself (the children's names, their lookups), which
the simulator does not model either (:mod:`shedlab.core.sim.kernel`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shedlab.config import LoadBalancerConfig
from shedlab.model.bundles import parse_range
from shedlab.model.pulsar import namespace_of
from shedlab.model.snapshot import ClusterSnapshot, ReportedBundle, SplitInputs

__all__ = ["MIB", "Split", "SplitPlan", "find_bundles_to_split", "split_check"]

MIB = 1024 * 1024
"""``LoadManagerShared.MIBI``: the bandwidth threshold is in MiB/s, the throughput in bytes/s."""


@dataclass(frozen=True)
class Split:
    """A bundle the leader would split, the broker whose report listed it, and which thresholds it passed."""

    bundle: str
    broker: str
    reasons: tuple[str, ...]
    detail: dict[str, float | int]

    def to_json(self) -> dict[str, Any]:
        return {"bundle": self.bundle, "broker": self.broker, "reasons": list(self.reasons), **self.detail}


@dataclass
class SplitPlan:
    """One split check: the bundles split, and the candidates refused with the reason."""

    splits: dict[str, Split] = field(default_factory=dict)
    refused: list[dict[str, Any]] = field(default_factory=list)

    @property
    def bundles(self) -> frozenset[str]:
        return frozenset(self.splits)

    def to_json(self) -> dict[str, Any]:
        return {"split": [s.to_json() for s in self.splits.values()], "split_refused": self.refused}


def _over(entry: ReportedBundle, rates: tuple[float, float], conf: LoadBalancerConfig) -> tuple[str, ...]:
    """The thresholds ``entry`` passes, each as ``key value > limit`` (empty: not a candidate). The texts
    are written only for a candidate: the check tests every report's every bundle."""
    msg_rate, throughput = rates
    max_topics = conf.load_balancer_namespace_bundle_max_topics
    max_sessions = conf.load_balancer_namespace_bundle_max_sessions
    max_rate = conf.load_balancer_namespace_bundle_max_msg_rate
    max_bandwidth = conf.load_balancer_namespace_bundle_max_bandwidth_mbytes * MIB
    passed = (
        entry.topics > max_topics,
        max_sessions > 0 and entry.sessions > max_sessions,
        msg_rate > max_rate,
        throughput > max_bandwidth,
    )
    if not any(passed):
        return ()
    texts = (
        f"topics {entry.topics} > {max_topics}",
        f"sessions {entry.sessions} > {max_sessions}",
        f"long-term msg rate {msg_rate:.1f} > {max_rate} msg/s",
        f"long-term throughput {throughput / MIB:.2f} > {max_bandwidth // MIB} MiB/s",
    )
    return tuple(text for hit, text in zip(passed, texts, strict=True) if hit)


def _can_split(bundle: str) -> bool:
    """``canSplitBundle``: the range holds more than one hash value (a name without a range: not ours to
    refuse, so it passes, as a Pulsar bundle always has one)."""
    bounds = parse_range(bundle.rpartition("/")[2])
    return bounds is None or bounds[1] - bounds[0] > 1


def find_bundles_to_split(inputs: SplitInputs, conf: LoadBalancerConfig) -> SplitPlan:
    """``BundleSplitterTask.findBundlesToSplit`` then the leader's ``canSplitBundle`` test."""
    plan = SplitPlan()
    accepted: dict[str, int] = {}
    cap = conf.load_balancer_namespace_maximum_bundles
    for entry in inputs.entries():
        if entry.topics < 2:
            continue
        rates = inputs.long_term(entry.bundle)
        reasons = _over(entry, rates, conf)
        if not reasons:
            continue
        namespace = namespace_of(entry.bundle)
        count = inputs.namespace_bundles.get(namespace, 0)
        if count + accepted.get(namespace, 0) >= cap:
            plan.refused.append(
                _refusal(entry, "namespace at loadBalancerNamespaceMaximumBundles", count, cap)
            )
            continue
        accepted[namespace] = accepted.get(namespace, 0) + 1
        detail = {
            "topics": entry.topics,
            "sessions": entry.sessions,
            "msg_rate": rates[0],
            "throughput": rates[1],
        }
        plan.splits[entry.bundle] = Split(entry.bundle, entry.broker, reasons, detail)
    for bundle in [b for b in plan.splits if not _can_split(b)]:
        split = plan.splits.pop(bundle)
        plan.refused.append({"bundle": bundle, "broker": split.broker, "reason": "hash range of one value"})
    return plan


def _refusal(entry: ReportedBundle, reason: str, count: int, cap: int) -> dict[str, Any]:
    return {
        "bundle": entry.bundle,
        "broker": entry.broker,
        "reason": reason,
        "bundles": count,
        "maximum": cap,
    }


def split_check(snapshot: ClusterSnapshot, conf: LoadBalancerConfig) -> SplitPlan | None:
    """The split check the leader runs before shedding on ``snapshot``, or None where it does not run:
    splitting disabled, one broker at most, or a source that does not carry what the check reads (the
    simulator's and replay's snapshots)."""
    inputs = snapshot.split_inputs
    if inputs is None or not conf.load_balancer_auto_bundle_split_enabled or snapshot.num_brokers <= 1:
        return None
    return find_bundles_to_split(inputs, conf)
