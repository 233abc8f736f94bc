"""Prometheus metrics of the DRA driver, on the daemon's registry (served at ``/metrics``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import prometheus_client as prom

from ...metrics import DEVICE_HEALTHY_HELP, RPC_BUCKETS, AttributedDevices, Row, holder_labels
from ...podresources.attribution import Attribution, attributed
from ...podresources.model import Holder
from .driver import DraDriver

PUBLISH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class DraMetrics:
    def __init__(self, registry: prom.CollectorRegistry | None) -> None:
        self._rpc = prom.Histogram(
            "kubedevice_dra_rpc_duration_seconds",
            "Time to answer NodePrepareResources / NodeUnprepareResources.",
            ["method"],
            buckets=RPC_BUCKETS,
            registry=registry,
        )
        self._claims = prom.Counter(
            "kubedevice_dra_claims",
            "Claims prepared or unprepared, by result.",
            ["method", "result"],
            registry=registry,
        )
        self._publish = prom.Histogram(
            "kubedevice_dra_publish_duration_seconds",
            "Time to write a new pool generation of ResourceSlices.",
            buckets=PUBLISH_BUCKETS,
            registry=registry,
        )

    def observe_rpc(self, method: str, seconds: float, claims: int, failed: int) -> None:
        self._rpc.labels(method).observe(seconds)
        if claims - failed:
            self._claims.labels(method, "ok").inc(claims - failed)
        if failed:
            self._claims.labels(method, "error").inc(failed)

    def observe_publish(self, seconds: float) -> None:
        self._publish.observe(seconds)


def held_devices(attribution: Attribution, driver: DraDriver, pool: str) -> AttributedDevices:
    """``kubedevice_dra_device_healthy``: each device the driver publishes in ``pool`` (unhealthy
    ones too), labelled with the claim and container holding it by ``attribution``."""

    def rows(held: Sequence[Holder]) -> Iterator[Row]:
        ours = [((driver.name, pool, name), offered.device.healthy) for name, offered in driver.offered().items()]
        theirs = [((h.driver, h.pool, h.device), h) for h in held if h.driver == driver.name and h.pool == pool]
        for key, holder, value in attributed(sorted(ours), theirs):
            yield (*key, holder.claim if holder else "", *holder_labels(holder)), value

    labels = ["driver", "pool", "device", "claim"]
    return AttributedDevices(attribution, "kubedevice_dra_device_healthy", DEVICE_HEALTHY_HELP, labels, rows)
