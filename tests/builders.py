"""Small builders for Pulsar load data in tests, named after the Java tests' set-up helpers."""

from __future__ import annotations

from shedlab.model.pulsar import (
    BrokerData,
    BundleData,
    LoadData,
    LocalBrokerData,
    ResourceUsage,
    TimeAverageBrokerData,
    TimeAverageMessageData,
)
from shedlab.model.snapshot import ClusterSnapshot

MB = 1024 * 1024


def bundle_data(
    *,
    tp_in: float = 0.0,
    tp_out: float = 0.0,
    rate_in: float = 0.0,
    rate_out: float = 0.0,
    num_samples: int = 10,
    topics: int = 1,
) -> BundleData:
    short = TimeAverageMessageData(10, num_samples, tp_in, tp_out, rate_in, rate_out)
    long = TimeAverageMessageData(1000, num_samples, tp_in, tp_out, rate_in, rate_out)
    return BundleData(short, long, topics)


def broker_data(
    *,
    cpu: tuple[float, float] = (0.0, 0.0),
    memory: tuple[float, float] = (0.0, 0.0),
    direct: tuple[float, float] = (0.0, 0.0),
    bw: tuple[float, float] | None = None,
    bw_in: tuple[float, float] = (0.0, 0.0),
    bw_out: tuple[float, float] = (0.0, 0.0),
    rate_in: float = 0.0,
    rate_out: float = 0.0,
    tp_in: float = 0.0,
    tp_out: float = 0.0,
    bundles: list[str] | None = None,
    long_rate_in: float = 0.0,
    long_rate_out: float = 0.0,
    preallocated: dict[str, BundleData] | None = None,
) -> BrokerData:
    if bw is not None:
        bw_in = bw_out = bw
    local = LocalBrokerData(
        cpu=ResourceUsage(*cpu),
        memory=ResourceUsage(*memory),
        directMemory=ResourceUsage(*direct),
        bandwidthIn=ResourceUsage(*bw_in),
        bandwidthOut=ResourceUsage(*bw_out),
        msgRateIn=rate_in,
        msgRateOut=rate_out,
        msgThroughputIn=tp_in,
        msgThroughputOut=tp_out,
        bundles=list(bundles or []),
    )
    ta = TimeAverageBrokerData(longTermMsgRateIn=long_rate_in, longTermMsgRateOut=long_rate_out)
    return BrokerData(local, ta, dict(preallocated or {}))


def snapshot(
    brokers: dict[str, BrokerData],
    bundles: dict[str, BundleData] | None = None,
    recently_unloaded: dict[str, int] | None = None,
) -> ClusterSnapshot:
    return ClusterSnapshot.from_load_data(
        LoadData(brokers, dict(bundles or {}), dict(recently_unloaded or {}))
    )


def cpu_broker(percent: float, **kwargs: object) -> BrokerData:
    """A broker whose only non-zero resource is cpu at ``percent`` % (the AvgShedder tests' set-up)."""
    return broker_data(cpu=(percent, 100.0), **kwargs)  # type: ignore[arg-type]
