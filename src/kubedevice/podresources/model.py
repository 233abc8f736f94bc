"""What the kubelet's PodResources API says, as plain data (no gRPC), and who holds which device.

The shapes follow ``k8s.io/kubelet/pkg/apis/podresources/v1`` one for one, so that converting
(:mod:`kubedevice.api.convert`) loses nothing: a message read and written again is the same
bytes. :func:`holders` is the view everything else wants: one row per container and device.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeviceIds:
    """``ContainerDevices``: device-plugin devices of one resource; ``numa_nodes`` None when the
    kubelet sent no topology (the device had none), a tuple when it did."""

    resource: str
    ids: tuple[str, ...]
    numa_nodes: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class Memory:
    """``ContainerMemory``: memory or hugepages the memory manager pinned."""

    kind: str
    size: int
    numa_nodes: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class ClaimDevice:
    """``ClaimResource``: one device of a prepared ResourceClaim (driver, pool and device name it)."""

    driver: str
    pool: str
    device: str
    cdi_devices: tuple[str, ...] = ()
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class ClaimResources:
    """``DynamicResource``: a ResourceClaim a container uses and the devices prepared for it."""

    claim: str
    namespace: str
    devices: tuple[ClaimDevice, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerResources:
    name: str
    devices: tuple[DeviceIds, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[Memory, ...] = ()
    claims: tuple[ClaimResources, ...] = ()


@dataclass(frozen=True, slots=True)
class PodResources:
    name: str
    namespace: str
    containers: tuple[ContainerResources, ...] = ()


@dataclass(frozen=True, slots=True)
class Allocatable:
    """``AllocatableResourcesResponse``: every healthy device-plugin device (allocated or not), and
    the CPUs and memory the CPU and memory managers may hand out (none with their ``none`` policies)."""

    devices: tuple[DeviceIds, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[Memory, ...] = ()


@dataclass(frozen=True, slots=True)
class Holder:
    """One container holding one device: a device plugin's (``resource`` set) or a DRA driver's
    (``driver``, ``pool`` and ``claim`` set)."""

    namespace: str
    pod: str
    container: str
    device: str
    resource: str = ""
    driver: str = ""
    pool: str = ""
    claim: str = ""

    def as_dict(self) -> dict[str, str]:
        """The fields that apply, for JSON output."""
        where = {"namespace": self.namespace, "pod": self.pod, "container": self.container}
        if self.resource:
            return {**where, "resource": self.resource, "device": self.device}
        return {**where, "driver": self.driver, "pool": self.pool, "device": self.device, "claim": self.claim}


def holders(pods: Iterable[PodResources]) -> list[Holder]:
    """Every (container, device) pair, each once.

    The kubelet lists a device-plugin device once per NUMA node it is on, and a claim shared by
    two containers under each; a device counts once per container however often it is listed.
    """
    seen: dict[Holder, None] = {}
    for pod in pods:
        for container in pod.containers:
            where = (pod.namespace, pod.name, container.name)
            for entry in container.devices:
                for device_id in entry.ids:
                    seen.setdefault(Holder(*where, device_id, resource=entry.resource))
            for claim in container.claims:
                for device in claim.devices:
                    held = Holder(*where, device.device, driver=device.driver, pool=device.pool, claim=claim.claim)
                    seen.setdefault(held)
    return list(seen)


def by_dra_device(held: Iterable[Holder]) -> dict[tuple[str, str, str], list[Holder]]:
    """DRA holders by ``(driver, pool, device)``, the key of ``kubedevice dra available``'s usage,
    in the order listed: what a node's kubelet says is prepared for which container."""
    result: dict[tuple[str, str, str], list[Holder]] = {}
    for holder in held:
        if holder.driver:
            result.setdefault((holder.driver, holder.pool, holder.device), []).append(holder)
    return result
