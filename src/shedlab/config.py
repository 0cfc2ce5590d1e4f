"""Pulsar load-balancer configuration: every key, Pulsar's defaults, and Pulsar's parsing rules.

shedlab reimplements the broker load balancer, so its settings *are* Pulsar's settings: the same
camelCase keys (spec §5), the same defaults and the same types. Keeping one table here, instead of
constants scattered over the strategies, is what lets a real ``broker.conf`` be replayed unchanged and
lets ``shedlab config show`` explain where every effective value came from.

Three things this module is careful about, because each one silently changes simulation results:

* **Types.** A Java ``int`` key given ``2.5`` is a mistake, not 2; a ``double`` key given ``NaN`` would
  poison every comparison downstream. Values are coerced once, at the boundary, and rejected with the
  source, key and value.
* **Typos.** Pulsar ignores unknown keys, so ``loadBalancerAvgShedderLowThreshhold=5`` silently keeps the
  default. Here an unknown key that *looks* like a load-balancer key is an error with a "did you mean"
  hint, while the hundreds of unrelated keys in a real ``broker.conf`` are still skipped.
* **Provenance.** Every value remembers the file and line (or override) that set it, so a surprising
  decision can be traced back to the setting that caused it. Provenance is not part of equality: two
  configs with the same values behave the same, wherever the values came from.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, NoneType, UnionType
from typing import Any, Final, Literal

import yaml

from shedlab.errors import (
    INTEGER_OUT_OF_RANGE,
    ConfigError,
    InputError,
    ShedlabError,
    decode_user_bytes,
    did_you_mean,
    int_in_range,
    parse_json_text,
    shown,
)
from shedlab.units import JAVA_DECIMAL, JAVA_INTEGER

__all__ = [
    "KEY_SPECS",
    "SHEDLAB_KEYS",
    "SPLIT_ALGORITHMS",
    "STRATEGY_KEYS",
    "STRATEGY_PACKAGE",
    "ConfigLayer",
    "KeySpec",
    "LoadBalancerConfig",
    "StrategyRole",
    "UniqueKeyLoader",
    "ValueType",
    "from_runtime_configuration",
    "key_spec",
    "layered_config",
    "normalise_strategy_name",
    "parse_key_values",
    "parse_yaml_text",
    "refuse_json_text",
    "runtime_configuration",
    "to_snake_case",
]

STRATEGY_PACKAGE: Final = "org.apache.pulsar.broker.loadbalance.impl"
"""Java package of the modular manager's strategy classes (Pulsar's strategy keys hold full class names).

Which names exist, and what they resolve to, is :mod:`shedlab.strategies.registry`'s business: this layer
only normalises the strings (a user's strategy is ``package.module:ClassName`` or an entry-point name).
"""

SPLIT_ALGORITHMS: Final[tuple[str, ...]] = (
    "range_equally_divide",
    "topic_count_equally_divide",
    "specified_positions_divide",
    "flow_or_qps_equally_divide",
)
"""Bundle split algorithm names Pulsar knows (NamespaceBundleSplitAlgorithm)."""

StrategyRole = Literal["shedding", "placement"]

ValueType = Literal["bool", "int", "float", "str", "list[str]", "set[str]", "float | None"]
"""How a key's value is represented in Python (the Java type is kept separately in ``KeySpec.java_type``)."""

STRATEGY_KEYS: Final[Mapping[StrategyRole, str]] = MappingProxyType(
    {"shedding": "loadBalancerLoadSheddingStrategy", "placement": "loadBalancerLoadPlacementStrategy"}
)
"""The Pulsar key naming the strategy of each role."""
_STRATEGY_ROLE_BY_KEY: Final[Mapping[str, StrategyRole]] = MappingProxyType(
    {key: role for role, key in STRATEGY_KEYS.items()}
)
_PULSAR_CLASS_PREFIX: Final = f"{STRATEGY_PACKAGE}."

# Java integer ranges: Pulsar fails to start on an out-of-range value, so we do too.
_JAVA_INT_RANGE: Final = (-(2**31), 2**31 - 1)
_JAVA_LONG_RANGE: Final = (-(2**63), 2**63 - 1)

_META: Final = "shedlab.pulsar_key"


def to_snake_case(pulsar_key: str) -> str:
    """The Python field name for a Pulsar key, derived mechanically so nobody has to remember a mapping.

    Acronyms stay together: ``loadBalancerCPUResourceWeight`` -> ``load_balancer_cpu_resource_weight``,
    ``loadBalancerBrokerLoadDataTTLInSeconds`` -> ``load_balancer_broker_load_data_ttl_in_seconds``.
    """
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", pulsar_key)
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    return text.lower()


@dataclass(frozen=True)
class KeySpec:
    """Everything known about one Pulsar key: its Java declaration, its default, and who reads it.

    ``used_by`` uses the spec's vocabulary: ``MLM`` = modular load manager (ModularLoadManagerImpl and
    its strategies), ``ELM`` = extensible load manager (PIP-192), ``Simple`` = legacy
    SimpleLoadManagerImpl, or the name of the one strategy/component that reads the key. ``dynamic`` is
    Pulsar's "can be changed at runtime". ``choices``, when set, is the closed set of accepted strings
    (for a list key: of accepted items).
    """

    pulsar_key: str
    field_name: str
    type: ValueType
    java_type: str
    default: Any
    doc: str
    deprecated: bool
    used_by: tuple[str, ...]
    dynamic: bool
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None

    @property
    def pulsar(self) -> bool:
        """Pulsar's key (spec §5), or one of shedlab's own (its strategies' keys, in ``SHEDLAB_KEYS``)."""
        return self.pulsar_key not in SHEDLAB_KEYS


@dataclass(frozen=True)
class _KeyMeta:
    pulsar_key: str
    java_type: str
    doc: str
    used_by: tuple[str, ...]
    dynamic: bool
    deprecated: bool
    choices: tuple[str, ...] | None


def _key(
    pulsar_key: str,
    default: Any,
    *,
    java: str,
    used_by: tuple[str, ...],
    doc: str,
    dynamic: bool = True,
    deprecated: bool = False,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A dataclass field carrying its Pulsar key table entry, so the field list *is* the key table."""
    meta = _KeyMeta(pulsar_key, java, doc, used_by, dynamic, deprecated, choices)
    return field(default=default, metadata={_META: meta})


_MLM_ELM: Final = ("MLM", "ELM")

SHEDLAB_KEYS: Final = frozenset(
    {
        "capacityAwareBrokerCapacities",
        "capacityAwareMinBenefit",
        "capacityAwareBalancedSpread",
        "capacityAwareBalancedMinBenefit",
        "capacityAwareAvgShedderOnIdenticalMachines",
        "capacityAwareGroupMoves",
    }
)
"""shedlab's own keys: read by shedlab's strategies, unknown to Pulsar (a broker would ignore them)."""


@dataclass(frozen=True)
class LoadBalancerConfig:
    """Every Pulsar load-balancer setting (spec §5), with Pulsar's defaults.

    ``LoadBalancerConfig()`` is exactly a broker with nothing configured. Build variations with
    :meth:`with_overrides` (Pulsar keys) or load them with :meth:`from_file`; direct construction with
    snake_case field names is also validated. Instances are immutable and hashable, so a sweep can use
    them as keys.

    Fields hold Python values: Java ``int``/``long`` -> ``int``, ``double`` -> ``float``, ``List<String>`` ->
    ``tuple[str, ...]``, ``Set<String>`` -> ``frozenset[str]``, ``Optional<Double>`` -> ``float | None``.
    Strategy keys hold the name as given, stripped; :func:`shedlab.strategies.registry.resolve_config`
    resolves and checks them and stores Pulsar's classes in Pulsar's full form
    (``org.apache.pulsar.broker.loadbalance.impl.X``), which commands call after loading a config.
    """

    load_balancer_enabled: bool = _key(
        "loadBalancerEnabled",
        True,
        java="boolean",
        dynamic=False,
        used_by=("all",),
        doc="Master switch: without it no load reports are written and nothing is shed or split.",
    )
    load_manager_class_name: str = _key(
        "loadManagerClassName",
        "org.apache.pulsar.broker.loadbalance.impl.ModularLoadManagerImpl",
        java="String",
        used_by=("all",),
        doc="Load manager implementation; placement also drops brokers reporting a different class "
        "name. The extensible manager is "
        "org.apache.pulsar.broker.loadbalance.extensions.ExtensibleLoadManagerImpl.",
    )
    load_balancer_load_shedding_strategy: str = _key(
        "loadBalancerLoadSheddingStrategy",
        f"{STRATEGY_PACKAGE}.ThresholdShedder",
        java="String",
        used_by=_MLM_ELM,
        doc="Shedding strategy class (ThresholdShedder by default since 2.10). Dynamic, but a change only "
        "takes effect after a broker restart. Short names are accepted and stored in full; shedlab also "
        "takes a user's strategy (package.module:ClassName or an entry-point name).",
    )
    load_balancer_load_placement_strategy: str = _key(
        "loadBalancerLoadPlacementStrategy",
        f"{STRATEGY_PACKAGE}.LeastLongTermMessageRate",
        java="String",
        dynamic=False,
        used_by=("MLM",),
        doc="Placement strategy class choosing a new owner for a bundle. When it is AvgShedder the shedding "
        "strategy must be AvgShedder too.",
    )
    load_balancer_placement_strategy: str = _key(
        "loadBalancerPlacementStrategy",
        "leastLoadedServer",
        java="String",
        dynamic=False,
        deprecated=True,
        used_by=("Simple",),
        choices=("weightedRandomSelection", "leastLoadedServer"),
        doc="Placement rule of the legacy SimpleLoadManagerImpl.",
    )
    lower_boundary_shedding_enabled: bool = _key(
        "lowerBoundarySheddingEnabled",
        False,
        java="boolean",
        dynamic=False,
        used_by=("ThresholdShedder",),
        doc="When nothing is above the upper bound but some broker is below average minus the threshold, "
        "ThresholdShedder also sheds from the busiest broker (lower-boundary pass).",
    )
    load_balancer_report_update_threshold_percentage: int = _key(
        "loadBalancerReportUpdateThresholdPercentage",
        10,
        java="int",
        used_by=_MLM_ELM,
        doc="A load report is rewritten when message rate, throughput, bundle count or weighted usage (x100) "
        "changed by more than this percentage since the last written report.",
    )
    load_balancer_report_update_min_interval_millis: int = _key(
        "loadBalancerReportUpdateMinIntervalMillis",
        5000,
        java="int",
        used_by=_MLM_ELM,
        doc="Period of the report-check task (Pulsar's own doc string wrongly calls it a maximum interval).",
    )
    load_balancer_report_update_max_interval_minutes: int = _key(
        "loadBalancerReportUpdateMaxIntervalMinutes",
        15,
        java="int",
        used_by=_MLM_ELM,
        doc="A report older than this is always rewritten (Pulsar's own doc string wrongly calls it a "
        "minimum delay).",
    )
    load_balancer_host_usage_check_interval_minutes: int = _key(
        "loadBalancerHostUsageCheckIntervalMinutes",
        1,
        java="int",
        used_by=_MLM_ELM,
        doc="Period of host CPU/NIC sampling; only read at start-up although marked dynamic.",
    )
    load_balancer_shedding_enabled: bool = _key(
        "loadBalancerSheddingEnabled",
        True,
        java="boolean",
        used_by=_MLM_ELM,
        doc="Enables automatic bundle unloading (load shedding).",
    )
    load_balancer_shedding_interval_minutes: int = _key(
        "loadBalancerSheddingIntervalMinutes",
        1,
        java="int",
        used_by=_MLM_ELM,
        doc="Shedding period: a fixed delay after each run in the modular manager, a fixed rate in the "
        "extensible one.",
    )
    load_balancer_distribute_bundles_evenly_enabled: bool = _key(
        "loadBalancerDistributeBundlesEvenlyEnabled",
        True,
        java="boolean",
        used_by=("MLM",),
        doc="Placement keeps only candidates owning the fewest bundles of the bundle's namespace.",
    )
    load_balancer_shedding_grace_period_minutes: int = _key(
        "loadBalancerSheddingGracePeriodMinutes",
        30,
        java="long",
        used_by=_MLM_ELM,
        doc="A bundle unloaded less than this long ago is not shed again.",
    )
    load_balancer_broker_underloaded_threshold_percentage: int = _key(
        "loadBalancerBrokerUnderloadedThresholdPercentage",
        50,
        java="int",
        dynamic=False,
        deprecated=True,
        used_by=("Simple",),
        doc="Under-load threshold of the legacy SimpleLoadManagerImpl.",
    )
    load_balancer_broker_comfort_load_level_percentage: int = _key(
        "loadBalancerBrokerComfortLoadLevelPercentage",
        65,
        java="int",
        dynamic=False,
        deprecated=True,
        used_by=("Simple",),
        doc="'Just right' load level of the legacy SimpleLoadManagerImpl.",
    )
    load_balancer_broker_max_topics: int = _key(
        "loadBalancerBrokerMaxTopics",
        50000,
        java="int",
        used_by=("MLM",),
        doc="Placement drops brokers whose topic count (preallocations included) exceeds this, unless that "
        "would drop every candidate.",
    )
    load_balancer_broker_overloaded_threshold_percentage: int = _key(
        "loadBalancerBrokerOverloadedThresholdPercentage",
        85,
        java="int",
        used_by=_MLM_ELM,
        doc="Overload threshold in percent: triggers OverloadShedder, gives an infinite score in "
        "LeastLongTermMessageRate, forces a placement re-selection, and feeds TransferShedder's "
        "overload test.",
    )
    load_balancer_broker_threshold_shedder_percentage: int = _key(
        "loadBalancerBrokerThresholdShedderPercentage",
        10,
        java="int",
        used_by=("ThresholdShedder",),
        doc="Percentage points above the cluster average usage a broker may reach before ThresholdShedder "
        "sheds from it.",
    )
    load_balancer_average_resource_usage_difference_threshold_percentage: int = _key(
        "loadBalancerAverageResourceUsageDifferenceThresholdPercentage",
        10,
        java="int",
        used_by=("LeastResourceUsageWithWeight",),
        doc="LeastResourceUsageWithWeight (both flavours) counts a broker as best when its usage plus this "
        "many points is at most the average usage.",
    )
    flow_or_qps_difference_threshold_percentage: int = _key(
        "flowOrQpsDifferenceThresholdPercentage",
        10,
        java="int",
        used_by=("split",),
        doc="flow_or_qps_equally_divide splits when rate or throughput reaches max x (100 + this) / 100.",
    )
    load_balancer_avg_shedder_low_threshold: int = _key(
        "loadBalancerAvgShedderLowThreshold",
        15,
        java="int",
        used_by=("AvgShedder",),
        doc="AvgShedder pairs two brokers only if their score difference (0-100 points) is at least this; "
        "such a pair counts a low-threshold hit.",
    )
    load_balancer_avg_shedder_high_threshold: int = _key(
        "loadBalancerAvgShedderHighThreshold",
        40,
        java="int",
        used_by=("AvgShedder",),
        doc="A pair whose score difference is at least this also counts a high-threshold hit.",
    )
    load_balancer_avg_shedder_hit_count_low_threshold: int = _key(
        "loadBalancerAvgShedderHitCountLowThreshold",
        8,
        java="int",
        used_by=("AvgShedder",),
        doc="Consecutive low-threshold hits after which AvgShedder sheds from a pair.",
    )
    load_balancer_avg_shedder_hit_count_high_threshold: int = _key(
        "loadBalancerAvgShedderHitCountHighThreshold",
        2,
        java="int",
        used_by=("AvgShedder",),
        doc="Consecutive high-threshold hits after which AvgShedder sheds from a pair.",
    )
    min_unload_message: int = _key(
        "minUnloadMessage",
        1000,
        java="int",
        used_by=("UniformLoadShedder", "AvgShedder"),
        doc="Smallest message rate (msg/s) worth moving: UniformLoadShedder needs at least this, AvgShedder "
        "more than this.",
    )
    min_unload_message_throughput: int = _key(
        "minUnloadMessageThroughput",
        1048576,
        java="int",
        used_by=("UniformLoadShedder", "AvgShedder"),
        doc="Smallest throughput (bytes/s) worth moving: UniformLoadShedder needs at least this, AvgShedder "
        "more than this.",
    )
    max_unload_percentage: float = _key(
        "maxUnloadPercentage",
        0.2,
        java="double",
        used_by=("UniformLoadShedder", "AvgShedder"),
        doc="Fraction of the max-min traffic difference to move (0.5 is recommended for AvgShedder).",
    )
    load_balancer_msg_rate_difference_shedder_threshold: float = _key(
        "loadBalancerMsgRateDifferenceShedderThreshold",
        50.0,
        java="double",
        used_by=("UniformLoadShedder",),
        doc="UniformLoadShedder triggers when (maxRate - minRate) x 100 / minRate exceeds this; 0 disables "
        "this criterion.",
    )
    load_balancer_msg_throughput_multiplier_difference_shedder_threshold: float = _key(
        "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold",
        4.0,
        java="double",
        used_by=("UniformLoadShedder",),
        doc="UniformLoadShedder triggers when maxThroughput / minThroughput exceeds this; 0 disables this "
        "criterion.",
    )
    max_unload_bundle_num_per_shedding: int = _key(
        "maxUnloadBundleNumPerShedding",
        -1,
        java="int",
        used_by=("UniformLoadShedder",),
        doc="Cap on bundles UniformLoadShedder selects per cycle; -1 means no cap, any other value <= 0 "
        "selects nothing.",
    )
    load_balancer_history_resource_percentage: float = _key(
        "loadBalancerHistoryResourcePercentage",
        0.9,
        java="double",
        used_by=("ThresholdShedder", "LeastResourceUsageWithWeight", "ELM"),
        doc="Weight of history in the usage moving average (new = old x this + sample x (1 - this)).",
    )
    load_balancer_cpu_resource_weight: float = _key(
        "loadBalancerCPUResourceWeight",
        1.0,
        java="double",
        used_by=("all",),
        doc="Weight of CPU usage in the weighted broker usage.",
    )
    load_balancer_bandwidth_in_resource_weight: float = _key(
        "loadBalancerBandwidthInResourceWeight",
        1.0,
        java="double",
        used_by=("all",),
        doc="Weight of inbound NIC usage. Effective value: this if != 1.0, else the deprecated misspelt "
        "'Bandwith' key if != 1.0, else 1.0.",
    )
    load_balancer_bandwidth_out_resource_weight: float = _key(
        "loadBalancerBandwidthOutResourceWeight",
        1.0,
        java="double",
        used_by=("all",),
        doc="Weight of outbound NIC usage, with the same fallback to the misspelt 'Bandwith' key.",
    )
    load_balancer_bandwith_in_resource_weight: float = _key(
        "loadBalancerBandwithInResourceWeight",
        1.0,
        java="double",
        deprecated=True,
        used_by=("all",),
        doc="Misspelt legacy name of loadBalancerBandwidthInResourceWeight; only used while the new key "
        "is 1.0.",
    )
    load_balancer_bandwith_out_resource_weight: float = _key(
        "loadBalancerBandwithOutResourceWeight",
        1.0,
        java="double",
        deprecated=True,
        used_by=("all",),
        doc="Misspelt legacy name of loadBalancerBandwidthOutResourceWeight; only used while the new key is "
        "1.0.",
    )
    load_balancer_memory_resource_weight: float = _key(
        "loadBalancerMemoryResourceWeight",
        0.0,
        java="double",
        deprecated=True,
        used_by=("ELM",),
        doc="Heap-memory weight. Ignored by the modular manager since 3.0; the extensible manager's broker "
        "load data still multiplies it.",
    )
    load_balancer_direct_memory_resource_weight: float = _key(
        "loadBalancerDirectMemoryResourceWeight",
        0.0,
        java="double",
        used_by=("all",),
        doc="Weight of JVM direct-memory usage (Pulsar advises against using it).",
    )
    load_balancer_bundle_unload_min_throughput_threshold: float = _key(
        "loadBalancerBundleUnloadMinThroughputThreshold",
        10.0,
        java="double",
        used_by=("ThresholdShedder",),
        doc="ThresholdShedder skips a broker when the throughput to shed is below this many MiB/s.",
    )
    load_balancer_resource_quota_update_interval_minutes: int = _key(
        "loadBalancerResourceQuotaUpdateIntervalMinutes",
        15,
        java="int",
        dynamic=False,
        used_by=("MLM",),
        doc="Period at which the leader persists bundle data and time-averaged broker data.",
    )
    load_balancer_auto_bundle_split_enabled: bool = _key(
        "loadBalancerAutoBundleSplitEnabled",
        True,
        java="boolean",
        used_by=_MLM_ELM,
        doc="Enables automatic bundle splitting.",
    )
    load_balancer_auto_unload_split_bundles_enabled: bool = _key(
        "loadBalancerAutoUnloadSplitBundlesEnabled",
        True,
        java="boolean",
        used_by=_MLM_ELM,
        doc="Unloads the children of an automatically split bundle.",
    )
    load_balancer_namespace_bundle_max_topics: int = _key(
        "loadBalancerNamespaceBundleMaxTopics",
        1000,
        java="int",
        used_by=("split",),
        doc="A bundle with more topics than this is a split candidate.",
    )
    load_balancer_namespace_bundle_max_sessions: int = _key(
        "loadBalancerNamespaceBundleMaxSessions",
        1000,
        java="int",
        used_by=("split",),
        doc="A bundle with more producers plus consumers than this is a split candidate; <= 0 disables it.",
    )
    load_balancer_namespace_bundle_max_msg_rate: int = _key(
        "loadBalancerNamespaceBundleMaxMsgRate",
        30000,
        java="int",
        used_by=("split",),
        doc="A bundle whose long-term message rate exceeds this is a split candidate.",
    )
    load_balancer_namespace_bundle_max_bandwidth_mbytes: int = _key(
        "loadBalancerNamespaceBundleMaxBandwidthMbytes",
        100,
        java="int",
        used_by=("split",),
        doc="A bundle whose long-term throughput exceeds this many MiB/s is a split candidate.",
    )
    load_balancer_namespace_maximum_bundles: int = _key(
        "loadBalancerNamespaceMaximumBundles",
        128,
        java="int",
        used_by=("split",),
        doc="Automatic splitting stops once a namespace has this many bundles.",
    )
    supported_namespace_bundle_split_algorithms: tuple[str, ...] = _key(
        "supportedNamespaceBundleSplitAlgorithms",
        SPLIT_ALGORITHMS,
        java="List<String>",
        used_by=("split",),
        choices=SPLIT_ALGORITHMS,
        doc="Split algorithms the broker accepts.",
    )
    default_namespace_bundle_split_algorithm: str = _key(
        "defaultNamespaceBundleSplitAlgorithm",
        "range_equally_divide",
        java="String",
        used_by=("split",),
        choices=SPLIT_ALGORITHMS,
        doc="Algorithm used by automatic splits.",
    )
    topic_bundle_assignment_strategy: str = _key(
        "topicBundleAssignmentStrategy",
        "org.apache.pulsar.common.naming.ConsistentHashingTopicBundleAssigner",
        java="String",
        dynamic=False,
        used_by=("naming",),
        doc="How topic names are hashed onto bundles.",
    )
    load_balancer_override_broker_nic_speed_gbps: float | None = _key(
        "loadBalancerOverrideBrokerNicSpeedGbps",
        None,
        java="Optional<Double>",
        dynamic=False,
        used_by=("host usage",),
        doc="Overrides the detected NIC speed (Gbit/s per NIC); empty means auto-detect.",
    )
    load_balancer_override_broker_nics: tuple[str, ...] = _key(
        "loadBalancerOverrideBrokerNics",
        (),
        java="List<String>",
        dynamic=False,
        used_by=("host usage",),
        doc="Overrides the list of NICs whose traffic is counted; empty means auto-detect.",
    )
    namespace_bundle_unloading_timeout_ms: int = _key(
        "namespaceBundleUnloadingTimeoutMs",
        60000,
        java="long",
        used_by=("unload", "ELM"),
        doc="Timeout for unloading one bundle.",
    )
    load_balancer_shedding_excluded_namespaces: frozenset[str] = _key(
        "loadBalancerSheddingExcludedNamespaces",
        frozenset(),
        java="Set<String>",
        used_by=_MLM_ELM,
        doc="Namespaces never shed; their bundles are placed round-robin (modular manager from 4.1).",
    )
    load_balancer_max_number_of_bundles_in_bundle_load_report: int = _key(
        "loadBalancerMaxNumberOfBundlesInBundleLoadReport",
        10,
        java="int",
        used_by=_MLM_ELM,
        doc="Top-k bundles per broker: persisted bundle data in the modular manager (<= 0 = all bundles), "
        "reported top bundles in the extensible manager (at least 1 there: with <= 0 its brokers report "
        "none and TransferShedder never unloads, so shedlab refuses it).",
    )
    load_balancer_shedding_bundles_with_policies_enabled: bool = _key(
        "loadBalancerSheddingBundlesWithPoliciesEnabled",
        False,
        java="boolean",
        used_by=("ELM",),
        doc="Allows shedding bundles whose namespace has isolation or anti-affinity policies.",
    )
    load_balancer_debug_mode_enabled: bool = _key(
        "loadBalancerDebugModeEnabled",
        False,
        java="boolean",
        used_by=("ELM",),
        doc="Verbose decision logging; TransferShedder's swap accounting also depends on it (a quirk).",
    )
    load_balancer_broker_load_target_std: float = _key(
        "loadBalancerBrokerLoadTargetStd",
        0.25,
        java="double",
        used_by=("TransferShedder",),
        doc="Target standard deviation of broker load (1.0 = 100 % usage).",
    )
    load_balancer_shedding_condition_hit_count_threshold: int = _key(
        "loadBalancerSheddingConditionHitCountThreshold",
        3,
        java="int",
        used_by=("TransferShedder",),
        doc="TransferShedder acts only once the shedding condition held on more consecutive runs than this.",
    )
    load_balancer_transfer_enabled: bool = _key(
        "loadBalancerTransferEnabled",
        True,
        java="boolean",
        used_by=("TransferShedder",),
        doc="TransferShedder pre-assigns the destination (transfer) instead of a plain unload.",
    )
    load_balancer_max_number_of_broker_shedding_per_cycle: int = _key(
        "loadBalancerMaxNumberOfBrokerSheddingPerCycle",
        3,
        java="int",
        used_by=("TransferShedder",),
        doc="Maximum number of source brokers per TransferShedder cycle.",
    )
    load_balance_shedding_delay_in_seconds: int = _key(
        "loadBalanceSheddingDelayInSeconds",
        180,
        java="long",
        used_by=("TransferShedder",),
        doc="Cool-down after a broker was unloaded from (note the 'loadBalance' spelling of the key).",
    )
    load_balancer_broker_load_data_ttl_in_seconds: int = _key(
        "loadBalancerBrokerLoadDataTTLInSeconds",
        1800,
        java="long",
        used_by=("TransferShedder",),
        doc="Broker load data older than this is ignored.",
    )
    load_balancer_split_interval_minutes: int = _key(
        "loadBalancerSplitIntervalMinutes",
        1,
        java="int",
        dynamic=False,
        used_by=("ELM",),
        doc="Period of the split scheduler.",
    )
    load_balancer_max_number_of_bundles_to_split_per_cycle: int = _key(
        "loadBalancerMaxNumberOfBundlesToSplitPerCycle",
        10,
        java="int",
        used_by=("ELM",),
        doc="Maximum number of bundle splits per cycle.",
    )
    load_balancer_namespace_bundle_split_condition_hit_count_threshold: int = _key(
        "loadBalancerNamespaceBundleSplitConditionHitCountThreshold",
        3,
        java="int",
        used_by=("ELM",),
        doc="Consecutive split-condition hits required before a bundle is split.",
    )
    load_balancer_service_unit_state_tombstone_delay_time_in_seconds: int = _key(
        "loadBalancerServiceUnitStateTombstoneDelayTimeInSeconds",
        3600,
        java="long",
        dynamic=False,
        used_by=("ELM",),
        doc="Delay before bundles in semi-terminal states are tombstoned in the state channel.",
    )
    load_balancer_in_flight_service_unit_state_waiting_time_in_millis: int = _key(
        "loadBalancerInFlightServiceUnitStateWaitingTimeInMillis",
        30000,
        java="long",
        dynamic=False,
        used_by=("ELM",),
        doc="In-flight bundle states stuck longer than this are fixed by the leader.",
    )
    load_balancer_service_unit_state_monitor_interval_in_seconds: int = _key(
        "loadBalancerServiceUnitStateMonitorIntervalInSeconds",
        60,
        java="long",
        dynamic=False,
        used_by=("ELM",),
        doc="Period of the leader's service-unit state channel monitor.",
    )
    load_balancer_multi_phase_bundle_unload: bool = _key(
        "loadBalancerMultiPhaseBundleUnload",
        True,
        java="boolean",
        dynamic=False,
        used_by=("ELM",),
        doc="Sends the destination broker to clients during an unload so they reconnect without a lookup.",
    )
    load_manager_service_unit_state_table_view_class_name: str = _key(
        "loadManagerServiceUnitStateTableViewClassName",
        "org.apache.pulsar.broker.loadbalance.extensions.channel.ServiceUnitStateTableViewImpl",
        java="String",
        dynamic=False,
        used_by=("ELM",),
        doc="Implementation of the service-unit state table view.",
    )
    load_balancer_service_unit_table_view_syncer: str = _key(
        "loadBalancerServiceUnitTableViewSyncer",
        "None",
        java="enum ServiceUnitTableViewSyncerType",
        used_by=("ELM",),
        choices=("None", "MetadataStoreToSystemTopicSyncer", "SystemTopicToMetadataStoreSyncer"),
        doc="Syncs bundle states between the metadata-store and system-topic table views during a "
        "migration; None disables it.",
    )
    load_balancer_service_unit_state_max_concurrent_overrides: int = _key(
        "loadBalancerServiceUnitStateMaxConcurrentOverrides",
        64,
        java="int",
        used_by=("ELM",),
        doc="Maximum number of concurrent orphan-ownership overrides.",
    )
    prefer_later_versions: bool = _key(
        "preferLaterVersions",
        False,
        java="boolean",
        used_by=_MLM_ELM,
        doc="Placement keeps only brokers running the newest version (BrokerVersionFilter).",
    )
    failure_domains_enabled: bool = _key(
        "failureDomainsEnabled",
        False,
        java="boolean",
        used_by=("anti-affinity",),
        doc="Anti-affinity placement first spreads a group across failure domains.",
    )
    expose_bundles_metrics_in_prometheus: bool = _key(
        "exposeBundlesMetricsInPrometheus",
        False,
        java="boolean",
        used_by=("MLM",),
        doc="Exports per-bundle brk_bundle_* gauges.",
    )
    stats_update_frequency_in_secs: int = _key(
        "statsUpdateFrequencyInSecs",
        60,
        java="int",
        dynamic=False,
        used_by=("stats",),
        doc="Period at which bundle statistics, the raw input of every load report, are recomputed.",
    )
    metadata_store_operation_timeout_seconds: int = _key(
        "metadataStoreOperationTimeoutSeconds",
        30,
        java="int",
        dynamic=False,
        used_by=("MLM",),
        doc="Timeout for listing available brokers; on error the manager falls back to the brokers it knows.",
    )
    # shedlab's own keys (not Pulsar's): read by shedlab's CapacityAwareShedder (docs/capacity-aware.md).
    capacity_aware_broker_capacities: tuple[str, ...] = _key(
        "capacityAwareBrokerCapacities",
        (),
        java="List<String>",
        used_by=("CapacityAwareShedder",),
        doc="shedlab's own key. Declared capacity per broker class: items 'pattern=capacity', the pattern a "
        "glob over broker ids (first match wins), the capacity a positive number relative to the other "
        "classes (e.g. cores). Brokers no pattern matches have their capacity inferred.",
    )
    capacity_aware_min_benefit: float = _key(
        "capacityAwareMinBenefit",
        4.0,
        java="double",
        used_by=("CapacityAwareShedder",),
        doc="shedlab's own key. A move must lower the predicted imbalance (max-min spread plus the total "
        "absolute deviation of the scores from their capacity-balanced targets, in score points) by at "
        "least this much, or the cycle stops; a stopped plan resumes once the imbalance grew by as much.",
    )
    capacity_aware_balanced_spread: float = _key(
        "capacityAwareBalancedSpread",
        25.0,
        java="double",
        used_by=("CapacityAwareShedder",),
        doc="shedlab's own key. 'Balanced enough': once the predicted spread (max-min) of the scores is at "
        "or below this many score points and no broker's predicted score is more than half of it above its "
        "capacity-balanced target, a move must pay capacityAwareBalancedMinBenefit instead of "
        "capacityAwareMinBenefit, so fewer unloads buy the last stretch of balance. 0 disables it.",
    )
    capacity_aware_balanced_min_benefit: float = _key(
        "capacityAwareBalancedMinBenefit",
        6.5,
        java="double",
        used_by=("CapacityAwareShedder",),
        doc="shedlab's own key. The minimum benefit (score points, as capacityAwareMinBenefit) of a move "
        "planned while the predicted spread is within capacityAwareBalancedSpread.",
    )
    capacity_aware_avg_shedder_on_identical_machines: bool = _key(
        "capacityAwareAvgShedderOnIdenticalMachines",
        True,
        java="boolean",
        used_by=("CapacityAwareShedder",),
        doc="shedlab's own key. On identical machines (slopes within a quarter, no broker's background "
        "standing out for as long as AvgShedder waits on a low hit), a cycle whose own trigger fired and "
        "whose plan made no move takes AvgShedder's pairs (at maxUnloadPercentage 0.5), which PIP-364 "
        "measured on such clusters.",
    )
    capacity_aware_group_moves: bool = _key(
        "capacityAwareGroupMoves",
        True,
        java="boolean",
        used_by=("CapacityAwareShedder",),
        doc="shedlab's own key. On machines whose capacities differ, when no single move pays "
        "capacityAwareMinBenefit, move together the fewest bundles that pay it off a hot broker more than "
        "half of capacityAwareBalancedSpread above its target, to one of the two coldest brokers: clusters "
        "of fine bundles balance (docs/capacity-aware.md, rule 3). Never on identical machines, where a "
        "group paid on every pulse of jitter.",
    )

    # Where each explicitly set value came from (Pulsar key -> "file:line" or an override label). Kept out of
    # equality and hashing on purpose: provenance must never change behaviour.
    _sources: Mapping[str, str] = field(
        default_factory=lambda: MappingProxyType({}), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        # Direct construction (LoadBalancerConfig(max_unload_percentage=1)) gets the same validation and
        # normalisation as file input, so no code path can produce a config the strategies cannot trust.
        for spec in KEY_SPECS.values():
            raw = getattr(self, spec.field_name)
            value = _coerce(spec, raw, source="LoadBalancerConfig", label=spec.field_name)
            if value is not raw:
                object.__setattr__(self, spec.field_name, value)

    # ----------------------------------------------------------------------------------------------- access

    def get(self, pulsar_key: str) -> Any:
        """The stored value of a Pulsar key (raw: use :meth:`resource_weights` for the effective weights)."""
        return getattr(self, key_spec(pulsar_key).field_name)

    def to_pulsar_dict(self) -> dict[str, Any]:
        """All keys under their Pulsar names, JSON/YAML-ready (lists, not tuples or sets).

        Feeding the result back through :meth:`with_overrides` reproduces this config exactly.
        """
        return {key: _plain(getattr(self, spec.field_name)) for key, spec in KEY_SPECS.items()}

    def value_sources(self) -> dict[str, str]:
        """Where every key's value came from: ``"default"``, a ``file:line``, or an override label.

        A value changed without a recorded source (direct construction, :func:`dataclasses.replace`) reports
        ``"code"``, so a non-default value is never mistaken for Pulsar's default.
        """
        result: dict[str, str] = {}
        for key, spec in KEY_SPECS.items():
            recorded = self._sources.get(key)
            if recorded is not None:
                result[key] = recorded
            else:
                result[key] = "default" if getattr(self, spec.field_name) == spec.default else "code"
        return result

    def non_default_values(self) -> dict[str, Any]:
        """Only the keys whose value differs from Pulsar's default, in table order."""
        return {
            key: _plain(getattr(self, spec.field_name))
            for key, spec in KEY_SPECS.items()
            if getattr(self, spec.field_name) != spec.default
        }

    # --------------------------------------------------------------------------------------- derived values

    def resource_weights(self) -> tuple[float, float, float, float]:
        """Effective (cpu, directMemory, bandwidthIn, bandwidthOut) weights of the weighted usage ``U(b)``.

        Mirrors ServiceConfiguration's getters: a bandwidth weight is the new key's value if it is not 1.0,
        else the deprecated misspelt ``loadBalancerBandwith*`` value if *that* is not 1.0, else 1.0. Memory is
        not a weight any more in the modular manager (spec §1.5).
        """
        return (
            self.load_balancer_cpu_resource_weight,
            self.load_balancer_direct_memory_resource_weight,
            _bandwidth_weight(
                self.load_balancer_bandwidth_in_resource_weight,
                self.load_balancer_bandwith_in_resource_weight,
            ),
            _bandwidth_weight(
                self.load_balancer_bandwidth_out_resource_weight,
                self.load_balancer_bandwith_out_resource_weight,
            ),
        )

    @property
    def shedding_strategy_name(self) -> str:
        """The shedding strategy without Pulsar's package: ``"ThresholdShedder"``, ``"pkg.mod:Mine"``."""
        return self.load_balancer_load_shedding_strategy.removeprefix(_PULSAR_CLASS_PREFIX)

    @property
    def placement_strategy_name(self) -> str:
        """The placement strategy without Pulsar's package: ``"LeastLongTermMessageRate"``, ..."""
        return self.load_balancer_load_placement_strategy.removeprefix(_PULSAR_CLASS_PREFIX)

    # ------------------------------------------------------------------------------------------- building
    def with_overrides(self, mapping: Mapping[str, Any], source: str = "override") -> LoadBalancerConfig:
        """A copy with some keys (Pulsar camelCase names) changed; ``source`` is recorded for each of them.

        Values are coerced to the key's type with the same rules as file input. Strategy names are only
        normalised here: resolving them (and checking the pair) is the registry's
        (:func:`shedlab.strategies.registry.resolve_config`), which loaders call once at the end.
        """
        return self._apply((key, value, source) for key, value in mapping.items())

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], source: str = "mapping") -> LoadBalancerConfig:
        """Defaults overridden by a parsed YAML/JSON document (Pulsar keys, optionally under ``config:``)."""
        items = _mapping_items(mapping, source, key_lines={})
        return cls()._apply(items)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> LoadBalancerConfig:
        """Load a config file; the format follows the extension.

        ``.yaml``/``.yml``/``.json``: a mapping of Pulsar keys (optionally nested under ``config:``);
        every key must be known. Anything else (``broker.conf``, ``.properties``) is read as a Java
        properties file the way Pulsar reads ``broker.conf``: unrelated broker keys are skipped, blank
        values keep the default (but empty a list/set key and clear an optional one), and misspelt
        load-balancer keys are errors.
        """
        name = os.fspath(path)
        text = _read_text(name)
        suffix = Path(name).suffix.lower()
        if suffix in (".yaml", ".yml"):
            data, lines = _parse_yaml(text, name)
            items = _mapping_items(data, name, key_lines=lines)
        elif suffix == ".json":
            data = _parse_json(text, name)
            items = _mapping_items(data, name, key_lines=_json_key_lines(text, data))
        else:
            items = _properties_items(text, name)
        return cls()._apply(items)

    def _apply(self, items: Iterable[tuple[str, Any, str]]) -> LoadBalancerConfig:
        """Apply (pulsar_key, raw value, source) triples, each with its own source."""
        changes: dict[str, Any] = {}
        sources = dict(self._sources)
        for key, raw, source in items:
            spec = _spec_or_error(key, source)
            changes[spec.field_name] = _coerce(spec, raw, source=source, label=key)
            sources[key] = source
        new = dataclasses.replace(self, **changes)
        object.__setattr__(new, "_sources", MappingProxyType(sources))
        return new


ConfigLayer = LoadBalancerConfig | tuple[str, Mapping[str, Any] | None] | None
"""One layer of :func:`layered_config`: ``(source, {pulsarKey: value})``, a config, or None (skipped)."""


def parse_key_values(
    items: Iterable[str] | None,
    *,
    expected: str = "expected key=value",
    field: str | None = None,
    source: str | None = None,
) -> dict[str, str]:
    """``["key=value", …]`` → ``{key: value}``, keys and values stripped, the first ``=`` splitting: the
    command line's settings, Pulsar's (``--set``) and Spark's (``--conf``) alike. A pair without ``=`` or
    with an empty key is a :class:`ConfigError` saying ``expected``; so is a key given twice (the last
    was taken, silently: ``--set maxUnloadPercentage=0.5 … --set maxUnloadPercentage=0.6``)."""
    out: dict[str, str] = {}
    given: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(expected, field=field, source=source, value=item)
        key = key.strip()
        if key in out:
            raise ConfigError(
                f"{key}: given twice (only the last would be taken)",
                field=field,
                source=source,
                value=[given[key], item],
                hint="give each key once",
            )
        out[key], given[key] = value.strip(), item
    return out


def _java_string(value: Any, java_type: str) -> str:
    """``String.valueOf`` of a field holding ``value`` (an ``Optional`` prints as ``Optional[…]``)."""
    if java_type.startswith("Optional<"):
        return "Optional.empty" if value is None else f"Optional[{_java_string(value, 'double')}]"
    if value is None:
        return ""  # BrokerService.getRuntimeConfigurationMap puts "" for a null field
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if not value.is_integer() else f"{value:.1f}"
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value) if isinstance(value, set | frozenset) else list(value)
        return "[" + ", ".join(_java_string(v, "String") for v in items) + "]"
    return str(value)


def runtime_configuration(conf: LoadBalancerConfig) -> dict[str, str]:
    """Every key of ``conf`` as Pulsar's ``GET /admin/v2/brokers/configuration/runtime`` answers it:
    ``BrokerService.getRuntimeConfiguration``, ``String.valueOf`` of each field (``""`` for null,
    ``[a, b]`` for a list or set, ``Optional.empty``/``Optional[10.0]``, ``1.0`` for a whole double).

    Pulsar's keys only: the answer lists ``ServiceConfiguration``'s fields, and shedlab's own keys (its
    strategies', ``SHEDLAB_KEYS``) are none of them; a plugin's settings live in broker.conf's free-form
    properties, which the endpoint does not list one by one."""
    values = conf.to_pulsar_dict()
    return {key: _java_string(values[key], spec.java_type) for key, spec in KEY_SPECS.items() if spec.pulsar}


def from_runtime_configuration(answer: Mapping[str, Any]) -> dict[str, Any]:
    """The load-balancer keys of a runtime-configuration answer (:func:`runtime_configuration`'s form), as
    values the key table reads: the answer lists every ``ServiceConfiguration`` field, so keys this table
    does not hold are skipped; ``""`` (a null field) is skipped, which keeps the default; ``[a, b]`` is a
    list or set key's items; ``Optional.empty`` and ``Optional[x]`` are an optional key's empty value and
    ``x``. Any other value is kept as it is, to be checked as a broker.conf line's value is."""
    out: dict[str, Any] = {}
    for key, text in answer.items():
        spec = KEY_SPECS.get(key)
        if spec is None or text == "":
            continue
        if isinstance(text, str) and spec.type in ("list[str]", "set[str]") and text[:1] + text[-1:] == "[]":
            out[key] = [item for item in text[1:-1].split(", ") if item]
        elif isinstance(text, str) and spec.java_type.startswith("Optional<"):
            out[key] = None if text == "Optional.empty" else text.removeprefix("Optional[").removesuffix("]")
        else:
            out[key] = text
    return out


def layered_config(*layers: ConfigLayer) -> LoadBalancerConfig:
    """Pulsar's defaults with each layer applied in turn (a later layer wins), every key recording the
    source of the layer that set it last, for ``shedlab config show`` and for error messages.

    shedlab's layers, in this order: defaults → config file → scenario ``config`` → the strategy pair's
    two keys → the scenario's ``strategy_config[pair]`` → ``--set``/overrides. A layer is either
    ``(source, mapping)`` (every key of the mapping, even one equal to Pulsar's default, labelled
    ``source``), or a :class:`LoadBalancerConfig` such as :meth:`~LoadBalancerConfig.from_file`'s, whose
    explicitly set keys are applied with their own sources (``broker.conf:12``), so a file's provenance
    survives layering. Values are coerced and checked as file input is. Strategy names are only
    normalised here: the caller resolves them once, on the result, with
    :func:`shedlab.strategies.resolve_config` (the registry sits above this layer).
    """
    conf = LoadBalancerConfig()
    for layer in layers:
        if isinstance(layer, LoadBalancerConfig):
            values = layer.to_pulsar_dict()
            sources = layer.value_sources()
            conf = conf._apply((key, values[key], src) for key, src in sources.items() if src != "default")
        elif layer is not None and layer[1]:
            conf = conf.with_overrides(layer[1], source=layer[0])
    return conf


def _bandwidth_weight(current: float, deprecated: float) -> float:
    if current != 1.0:
        return current
    if deprecated != 1.0:
        return deprecated
    return 1.0


# ------------------------------------------------------------------------------------------------ key table


def _value_type(hint: Any) -> ValueType:
    if hint is bool:
        return "bool"
    if hint is int:
        return "int"
    if hint is float:
        return "float"
    if hint is str:
        return "str"
    if hint == tuple[str, ...]:
        return "list[str]"
    if hint == frozenset[str]:
        return "set[str]"
    is_union = typing.get_origin(hint) in (typing.Union, UnionType)
    if is_union and set(typing.get_args(hint)) == {float, NoneType}:
        return "float | None"
    raise TypeError(f"unsupported config field type {hint!r}")


_PERIOD: Final = (1, None)  # a Java ScheduledExecutorService refuses a period <= 0: Pulsar fails to start
_NON_NEGATIVE: Final = (0, None)
_RANGES: Final[Mapping[str, tuple[float | None, float | None]]] = MappingProxyType(
    {
        # Periods of Pulsar's scheduled tasks (spec §5): must be positive.
        "loadBalancerReportUpdateMinIntervalMillis": _PERIOD,
        "loadBalancerHostUsageCheckIntervalMinutes": _PERIOD,
        "loadBalancerSheddingIntervalMinutes": _PERIOD,
        "loadBalancerResourceQuotaUpdateIntervalMinutes": _PERIOD,
        "loadBalancerSplitIntervalMinutes": _PERIOD,
        "statsUpdateFrequencyInSecs": _PERIOD,
        # Durations, amounts, percentages and counts: a negative value has no meaning in Pulsar (it would
        # make a comparison always true, e.g. "moved more than -5 % of the difference").
        "loadBalancerReportUpdateThresholdPercentage": _NON_NEGATIVE,
        "loadBalancerReportUpdateMaxIntervalMinutes": _NON_NEGATIVE,
        "loadBalancerSheddingGracePeriodMinutes": _NON_NEGATIVE,
        "loadBalancerBrokerOverloadedThresholdPercentage": _NON_NEGATIVE,
        "loadBalancerBrokerThresholdShedderPercentage": _NON_NEGATIVE,
        "loadBalancerAverageResourceUsageDifferenceThresholdPercentage": _NON_NEGATIVE,
        "loadBalancerAvgShedderLowThreshold": _NON_NEGATIVE,
        "loadBalancerAvgShedderHighThreshold": _NON_NEGATIVE,
        "loadBalancerAvgShedderHitCountLowThreshold": _NON_NEGATIVE,
        "loadBalancerAvgShedderHitCountHighThreshold": _NON_NEGATIVE,
        "minUnloadMessage": _NON_NEGATIVE,
        "minUnloadMessageThroughput": _NON_NEGATIVE,
        # a fraction of the max-min difference: 80 (meant as 80 %) moved 80 times it, every cycle
        "maxUnloadPercentage": (0, 1),
        "loadBalancerMsgRateDifferenceShedderThreshold": _NON_NEGATIVE,  # 0 disables the criterion
        "loadBalancerMsgThroughputMultiplierDifferenceShedderThreshold": _NON_NEGATIVE,
        "loadBalancerHistoryResourcePercentage": (0, 1),  # the weight of history in a moving average
        "loadBalancerCPUResourceWeight": _NON_NEGATIVE,
        "loadBalancerBandwidthInResourceWeight": _NON_NEGATIVE,
        "loadBalancerBandwidthOutResourceWeight": _NON_NEGATIVE,
        "loadBalancerBandwithInResourceWeight": _NON_NEGATIVE,
        "loadBalancerBandwithOutResourceWeight": _NON_NEGATIVE,
        "loadBalancerMemoryResourceWeight": _NON_NEGATIVE,
        "loadBalancerDirectMemoryResourceWeight": _NON_NEGATIVE,
        "loadBalancerBundleUnloadMinThroughputThreshold": _NON_NEGATIVE,
        "loadBalancerBrokerLoadTargetStd": _NON_NEGATIVE,
        "loadBalanceSheddingDelayInSeconds": _NON_NEGATIVE,
        "loadBalancerBrokerLoadDataTTLInSeconds": _NON_NEGATIVE,
        "capacityAwareMinBenefit": _NON_NEGATIVE,  # score points, summed over brokers
        "capacityAwareBalancedSpread": _NON_NEGATIVE,  # score points (max - min)
        "capacityAwareBalancedMinBenefit": _NON_NEGATIVE,  # score points, summed over brokers
    }
)
"""Accepted ranges ``(minimum, maximum)`` of numeric keys; keys not listed take their Java type's range.

Keys where Pulsar gives a negative or zero value a meaning (``maxUnloadBundleNumPerShedding = -1``: no cap;
``<= 0`` disables a split criterion or means "all bundles") are deliberately absent.
"""


def _build_key_specs() -> dict[str, KeySpec]:
    hints = typing.get_type_hints(LoadBalancerConfig)
    specs: dict[str, KeySpec] = {}
    for f in dataclasses.fields(LoadBalancerConfig):
        meta = f.metadata.get(_META)
        if meta is None:
            continue
        # The naming rule is an API promise (callers derive field names from keys): enforce it at import.
        if to_snake_case(meta.pulsar_key) != f.name:
            raise TypeError(f"field {f.name} should be named {to_snake_case(meta.pulsar_key)}")
        specs[meta.pulsar_key] = KeySpec(
            pulsar_key=meta.pulsar_key,
            field_name=f.name,
            type=_value_type(hints[f.name]),
            java_type=meta.java_type,
            default=f.default,
            doc=meta.doc,
            deprecated=meta.deprecated,
            used_by=meta.used_by,
            dynamic=meta.dynamic,
            choices=meta.choices,
            minimum=_RANGES.get(meta.pulsar_key, (None, None))[0],
            maximum=_RANGES.get(meta.pulsar_key, (None, None))[1],
        )
    return specs


KEY_SPECS: Final[Mapping[str, KeySpec]] = MappingProxyType(_build_key_specs())
"""Every Pulsar key shedlab knows, in spec §5 order, keyed by its Pulsar name."""

_KEY_BY_FIELD: Final[Mapping[str, str]] = MappingProxyType({s.field_name: k for k, s in KEY_SPECS.items()})
_KEY_BY_LOWER: Final[Mapping[str, str]] = MappingProxyType({k.lower(): k for k in KEY_SPECS})

# Unknown broker.conf keys starting like these are load-balancer typos, not other broker settings.
_LB_KEY_PREFIXES: Final = ("loadbalance", "minunload", "maxunload", "lowerboundary", "floworqps")


def key_spec(pulsar_key: str, *, source: str | None = None) -> KeySpec:
    """The table entry of a Pulsar key; unknown keys raise :class:`ConfigError` with a suggestion."""
    return _spec_or_error(pulsar_key, source)


def _spec_or_error(key: Any, source: str | None) -> KeySpec:
    if not isinstance(key, str):
        raise ConfigError("configuration keys must be strings", source=source, value=key)
    spec = KEY_SPECS.get(key)
    if spec is not None:
        return spec
    raise ConfigError(
        "unknown load balancer configuration key", source=source, field=key, hint=_key_hint(key)
    )


def _key_hint(key: str) -> str | None:
    if key in _KEY_BY_FIELD:
        return f"use the Pulsar key {_KEY_BY_FIELD[key]!r} (snake_case names are the Python field names)"
    if key.lower() in _KEY_BY_LOWER:
        return f"did you mean {_KEY_BY_LOWER[key.lower()]!r}? (keys are case-sensitive)"
    return did_you_mean(key, KEY_SPECS)


def _looks_like_load_balancer_key(key: str) -> bool:
    lowered = key.lower()
    return lowered in _KEY_BY_LOWER or lowered.startswith(_LB_KEY_PREFIXES)


# ----------------------------------------------------------------------------------------------- coercion


def normalise_strategy_name(value: object, *, role: StrategyRole, source: str | None = None) -> str:
    """A strategy key's value as stored: the name without surrounding blanks.

    Only the string is checked here (this layer sits below the strategies): Pulsar's full class names,
    Pulsar's short names, ``package.module:ClassName`` and entry-point names all pass, and
    :func:`shedlab.strategies.registry.resolve_config` resolves them (and stores Pulsar's built-ins under
    their full class names, as Pulsar requires).
    """
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(
            f"expected a {role} strategy name", source=source, field=STRATEGY_KEYS[role], value=value
        )
    return value.strip()


_INT_RE: Final = JAVA_INTEGER
_FLOAT_RE: Final = JAVA_DECIMAL
_EXPECTED: Final[Mapping[ValueType, str]] = MappingProxyType(
    {
        "bool": "true or false",
        "int": "an integer",
        "float": "a finite number",
        "str": "a non-empty string",
        "list[str]": "a list of strings or a comma-separated string",
        "set[str]": "a list of strings or a comma-separated string",
        "float | None": "a finite number or empty",
    }
)


def _coerce(spec: KeySpec, raw: Any, *, source: str, label: str) -> Any:
    """Convert a raw value (Python object or broker.conf text) to the key's canonical Python value."""

    def bad(hint: str | None = None, expected: str | None = None) -> ConfigError:
        what = expected or _EXPECTED[spec.type]
        message = f"expected {what} (Java {spec.java_type})"
        if raw is None:
            message += ", got null"
        return ConfigError(message, source=source, field=label, value=raw, hint=hint)

    role = _STRATEGY_ROLE_BY_KEY.get(spec.pulsar_key)
    if role is not None:
        if not isinstance(raw, str):
            raise bad()
        return normalise_strategy_name(raw, role=role, source=source)

    kind = spec.type
    if kind == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
            return raw.strip().lower() == "true"
        hint = "Pulsar would silently read anything but 'true' as false" if isinstance(raw, str) else None
        raise bad(hint)

    if kind == "int":
        lo, hi = _JAVA_LONG_RANGE if spec.java_type == "long" else _JAVA_INT_RANGE
        number = _to_int(raw)
        if number is None:
            raise bad(_text_hint(raw) or ("booleans are not integers" if isinstance(raw, bool) else None))
        if not lo <= number <= hi:
            raise bad(expected=f"an integer in [{lo}, {hi}]")
        _check_range(spec, number, bad)
        return number

    if kind in ("float", "float | None"):
        if kind == "float | None" and (raw is None or (isinstance(raw, str) and not raw.strip())):
            return None
        real = _to_float(raw)
        if real is None:
            raise bad(_text_hint(raw) or ("booleans are not numbers" if isinstance(raw, bool) else None))
        _check_range(spec, real, bad)
        return real

    if kind == "str":
        if not isinstance(raw, str) or not raw.strip():
            raise bad()
        text = raw.strip()
        if spec.choices is not None and text not in spec.choices:
            raise bad(did_you_mean(text, spec.choices), expected=f"one of {', '.join(spec.choices)}")
        return text

    # list[str] / set[str]
    items = _to_str_items(raw)
    if items is None:
        raise bad()
    item_rule = _ITEM_RULES.get(spec.pulsar_key)
    if item_rule is not None:
        pattern, expected = item_rule
        for item in items:
            if not pattern.fullmatch(item):
                raise bad(expected=f"{expected} (bad item {shown(item)})")
    if spec.choices is not None:
        for item in items:
            if item not in spec.choices:
                hint = did_you_mean(item, spec.choices)
                raise bad(hint, expected=f"items from {', '.join(spec.choices)} (unknown item {shown(item)})")
    return frozenset(items) if kind == "set[str]" else items


_ITEM_RULES: Final[Mapping[str, tuple[re.Pattern[str], str]]] = MappingProxyType(
    {
        "capacityAwareBrokerCapacities": (
            re.compile(r"[^=\s]+=(?=[0-9.eE+-]*[1-9])(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"),
            "items pattern=capacity with a positive capacity",
        )
    }
)
"""Per-item formats of list keys whose items are structured (shedlab's own keys)."""


def _check_range(spec: KeySpec, number: float, bad: Callable[..., ConfigError]) -> None:
    """Refuse a value outside the key's accepted range (:data:`_RANGES`)."""
    lo, hi = spec.minimum, spec.maximum
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        shown = f">= {lo:g}" if hi is None else f"<= {hi:g}" if lo is None else f"in [{lo:g}, {hi:g}]"
        raise bad(expected=f"a number {shown}")


def _to_int(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, numbers.Integral):
        return int(raw)
    if isinstance(raw, numbers.Real):
        # YAML/JSON writers sometimes emit 10.0 for an integer; 2.5 is a real mistake.
        value = float(raw)
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(raw, str) and _INT_RE.fullmatch(raw.strip()):
        return int(raw.strip())
    return None


def _to_float(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return None
    value: float
    if isinstance(raw, numbers.Real):
        try:
            value = float(raw)
        except OverflowError:
            return None
    elif isinstance(raw, str) and _FLOAT_RE.fullmatch(raw.strip()):
        value = float(raw.strip())
    else:
        return None
    # NaN/inf would make every threshold comparison false (or true) without any error.
    return value if math.isfinite(value) else None


def _to_str_items(raw: Any) -> tuple[str, ...] | None:
    if isinstance(raw, str):
        parts: Iterable[Any] = raw.split(",")
    elif isinstance(raw, (set, frozenset)):
        parts = sorted(raw, key=str)
    elif isinstance(raw, (list, tuple)):
        parts = raw
    else:
        return None
    if not all(isinstance(part, str) for part in parts):
        return None
    return tuple(part.strip() for part in parts if part.strip())


def _text_hint(raw: Any) -> str | None:
    if isinstance(raw, str) and "#" in raw:
        return "broker.conf has no end-of-line comments; put the comment on its own line"
    return None


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, frozenset):
        return sorted(value)
    return value


# ------------------------------------------------------------------------------------------------ loaders


# One YAML loader for every user's YAML (config, scenario, grid); its text is read by shedlab.errors.


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing duplicate mapping keys and integers a Java long cannot hold.

    PyYAML keeps the last of two equal keys without a word; a scenario with two ``duration:`` lines would
    run with whichever came last.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:  # an unhashable key: PyYAML's own check reports it
                break
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        text = str(node.value)
        _refuse_yaml11_number(text, node)
        plain = text.replace("_", "").lstrip("+-")
        if (plain.isdigit() and len(plain) > 20) or (not plain.isdigit() and len(plain) > 80):
            raise yaml.constructor.ConstructorError(None, None, INTEGER_OUT_OF_RANGE, node.start_mark)
        value = int(super().construct_yaml_int(node))
        if not int_in_range(str(value)):
            raise yaml.constructor.ConstructorError(None, None, INTEGER_OUT_OF_RANGE, node.start_mark)
        return value

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        _refuse_yaml11_number(str(node.value), node)
        return float(super().construct_yaml_float(node))


def _refuse_yaml11_number(text: str, node: yaml.ScalarNode) -> None:
    """YAML 1.1 reads ``010`` as octal (8) and ``1:30`` in base 60 (90); YAML 1.2, and a reader of the
    file, take them for 10 and a time. Both were read silently (``seed: 010`` ran seed 8, ``bundles: 010``
    8 bundles, ``duration: 1:30`` 90 seconds); refused with the line, and what to write instead."""
    plain = text.replace("_", "").lstrip("+-")
    if ":" in plain:
        problem = f"{text} is a number in base 60 in YAML 1.1; write the number, or a duration such as 1h30m"
    elif len(plain) > 1 and plain[0] == "0" and plain[1].isdigit() and "." not in plain:
        problem = f"{text} is octal in YAML 1.1; write it without the leading 0"
    else:
        return
    raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)


UniqueKeyLoader.add_constructor("tag:yaml.org,2002:int", UniqueKeyLoader.construct_yaml_int)
UniqueKeyLoader.add_constructor("tag:yaml.org,2002:float", UniqueKeyLoader.construct_yaml_float)


def parse_yaml_text(
    text: str,
    source: str,
    *,
    loader: type[UniqueKeyLoader] = UniqueKeyLoader,
    error: type[ShedlabError] = InputError,
) -> Any:
    """Parse one YAML document; errors name the line and column."""
    try:
        return yaml.load(text, Loader=loader)  # a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = " ".join(str(exc.problem or exc).split())
        if isinstance(exc, yaml.constructor.ConstructorError):  # well-formed, but refused by the loader
            raise error(
                f"{problem}{where.replace(' at', ' (at', 1)}{')' if where else ''}", source=source
            ) from None
        raise error(f"malformed YAML{where}: {problem}", source=source) from None
    except yaml.YAMLError as exc:
        raise error(f"malformed YAML: {' '.join(str(exc).split())}", source=source) from None
    except RecursionError:
        raise error("YAML nested too deeply", source=source) from None


def _read_text(path: str) -> str:
    # Java's Properties.load(InputStream) reads ISO-8859-1, so a Latin-1 broker.conf is legitimate.
    try:
        data = Path(path).read_bytes()
    except IsADirectoryError:
        raise ConfigError("expected a config file, found a directory", source=path) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc.strerror or exc}", source=path) from None
    return decode_user_bytes(data, path, error=ConfigError, latin1=True)


def _parse_yaml(text: str, path: str) -> tuple[Any, dict[str, int]]:
    data = parse_yaml_text(text, path, error=ConfigError)
    node = yaml.compose(text, Loader=yaml.SafeLoader)  # parsed above: only for the keys' line numbers
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                lines[key_node.value] = key_node.start_mark.line + 1
                if key_node.value == "config" and isinstance(value_node, yaml.MappingNode):
                    for inner_key, _ in value_node.value:
                        if isinstance(inner_key, yaml.ScalarNode):
                            lines[f"config.{inner_key.value}"] = inner_key.start_mark.line + 1
    return data, lines


def _parse_json(text: str, path: str) -> Any:
    return parse_json_text(text, path, error=ConfigError)


def _json_key_lines(text: str, data: Any) -> dict[str, int]:
    """Best-effort line numbers for JSON keys (the json module keeps no positions)."""
    lines: dict[str, int] = {}
    if not isinstance(data, dict):
        return lines
    nested = data.get("config")
    names = [(k, k) for k in data] + (
        [(f"config.{k}", k) for k in nested] if isinstance(nested, dict) else []
    )
    for label, key in names:
        if not isinstance(key, str):
            continue
        match = re.search(re.escape(json.dumps(key)) + r"\s*:", text)
        if match:
            lines[label] = text.count("\n", 0, match.start()) + 1
    return lines


def _mapping_items(data: Any, path: str, *, key_lines: Mapping[str, int]) -> list[tuple[str, Any, str]]:
    """(key, value, source) triples from a YAML/JSON document; unknown keys are always errors here."""
    if data is None:  # an empty file configures nothing
        return []
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"expected a mapping of Pulsar load balancer keys, got {type(data).__name__}", source=path
        )

    def where(label: str) -> str:
        line = key_lines.get(label)
        return f"{path}:{line}" if line is not None else path

    nested = data.get("config")
    if "config" in data and nested is None:  # `config:` with nothing under it
        nested = {}
    if isinstance(nested, Mapping):
        # A scenario file may carry other top-level sections next to `config:`; only load-balancer-looking
        # siblings are suspicious (they would be silently ignored otherwise).
        for key in data:
            if key in ("strategy", "strategy_config"):
                # a scenario's pair and its per-pair keys: only `config:` is read, so the run or the
                # table had Pulsar's default pair and the keys without them, silently
                raise ConfigError(
                    "a config file gives its config: section only; a scenario's strategy and "
                    "strategy_config are not read from it",
                    source=where(key),
                    field=key,
                    hint="give the pair with --strategy and its keys with --set, or run the scenario itself",
                )
            if key != "config" and isinstance(key, str) and _looks_like_load_balancer_key(key):
                raise ConfigError(
                    "load balancer key outside the 'config:' section",
                    source=where(key),
                    field=key,
                    hint="move it under 'config:'",
                )
        return [(key, value, where(f"config.{key}")) for key, value in nested.items()]
    return [(key, value, where(key)) for key, value in data.items()]


def refuse_json_text(text: str, source: str, read_as: str, lost: str) -> None:
    """Refuse a JSON object in a file read as ``read_as`` (a properties or ``key value`` format) because of
    its name: its keys read as ``{"key":``, which no reader takes, and all were ignored, silently."""
    if text.lstrip().startswith("{"):
        raise ConfigError(
            f"JSON in a file read as {read_as}, by its name: {lost}", source=source, hint="name it .json"
        )


def _properties_items(text: str, path: str) -> list[tuple[str, Any, str]]:
    """Load-balancer entries of a broker.conf, with Pulsar's blank-value rules.

    Java's Properties keeps the last occurrence of a duplicated key, so only that one is validated. A JSON
    document (a file named for broker.conf by mistake) is refused: its keys read as ``{"maxUnload…"``, no
    load balancer key, and were all ignored, silently.
    """
    refuse_json_text(text, path, "a broker.conf (Java properties)", "no key of it would be read")
    entries: dict[str, tuple[str, int]] = {}
    for key, value, line in _iter_properties(text, path):
        if key in KEY_SPECS:
            entries[key] = (value, line)
        elif _looks_like_load_balancer_key(key):
            raise ConfigError(
                "unknown load balancer configuration key",
                source=f"{path}:{line}",
                field=key,
                hint=_key_hint(key),
            )
        # Any other key is a broker setting outside the load balancer: a real broker.conf has hundreds.
    items: list[tuple[str, Any, str]] = []
    for key, (value, line) in entries.items():
        if not value.strip() and KEY_SPECS[key].type in ("bool", "int", "float", "str"):
            # Pulsar's FieldParser leaves scalar fields untouched for a blank value, but sets lists and sets
            # to empty and Optionals to empty; coercing "" below does exactly that for those kinds.
            continue
        items.append((key, value, f"{path}:{line}"))
    return items


def _iter_properties(text: str, path: str) -> Iterator[tuple[str, str, int]]:
    """(key, value, first line number) for each logical line, following java.util.Properties.load."""
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        first_line = index + 1
        logical = lines[index].lstrip(" \t\f")
        index += 1
        if not logical or logical[0] in "#!":
            continue
        while _continues(logical):
            logical = logical[:-1]
            if index >= len(lines):
                break
            logical += lines[index].lstrip(" \t\f")
            index += 1
        key, value = _split_property(logical)
        yield _unescape(key, path, first_line), _unescape(value, path, first_line), first_line


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    escaped = False
    for position, char in enumerate(line):
        if escaped:
            escaped = False
            continue
        if char == "\\":
            escaped = True
        elif char in "=:":
            key_end, value_start, has_separator = position, position + 1, True
            break
        elif char in " \t\f":
            key_end, value_start = position, position + 1
            break
    while value_start < len(line):
        char = line[value_start]
        if char not in " \t\f":
            if has_separator or char not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


_ESCAPES: Final[Mapping[str, str]] = MappingProxyType({"t": "\t", "n": "\n", "r": "\r", "f": "\f"})


def _unescape(text: str, path: str, line: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char != "\\" or position + 1 >= len(text):
            out.append(char)
            position += 1
            continue
        escaped = text[position + 1]
        if escaped == "u":
            digits = text[position + 2 : position + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ConfigError("malformed \\uXXXX escape", source=f"{path}:{line}", value=text)
            out.append(chr(int(digits, 16)))
            position += 6
        else:
            out.append(_ESCAPES.get(escaped, escaped))
            position += 2
    return "".join(out)
