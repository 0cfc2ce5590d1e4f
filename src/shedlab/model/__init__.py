"""Pulsar's load-balancer data model (objects with Pulsar's JSON) and the columnar snapshot."""

from shedlab.model.pulsar import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    NamespaceBundleStats,
    ResourceUsage,
    TimeAverageBrokerData,
    TimeAverageMessageData,
)
from shedlab.model.snapshot import ClusterSnapshot

__all__ = [
    "BrokerData",
    "BundleData",
    "ClusterSnapshot",
    "LoadData",
    "LocalBrokerData",
    "NamespaceBundleStats",
    "ResourceUsage",
    "TimeAverageBrokerData",
    "TimeAverageMessageData",
]
