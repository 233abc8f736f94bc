"""The only place plain device data meets protobuf messages (both directions).

The device plugin API's messages and the kubelet's PodResources API (:mod:`kubedevice.podresources`).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..device import ContainerAllocation, Device, DeviceSpec, Health, Mount
from ..podresources.model import (
    Allocatable,
    ClaimDevice,
    ClaimResources,
    ContainerResources,
    DeviceIds,
    Memory,
    PodResources,
)
from . import api_pb2 as pb
from . import podresources_v1_pb2 as prpb


def device_to_pb(device: Device, health: Health | None = None) -> pb.Device:
    """A ``Device`` message; ``health`` overrides the device's own (used for the final list)."""
    message = pb.Device(ID=device.id, health=(health or device.health).value)
    if device.numa_nodes:
        message.topology.nodes.extend(pb.NUMANode(ID=n) for n in device.numa_nodes)
    return message


def list_response(devices: Iterable[Device], health: Health | None = None) -> pb.ListAndWatchResponse:
    return pb.ListAndWatchResponse(devices=[device_to_pb(d, health) for d in devices])


def device_from_pb(message: pb.Device) -> Device:
    """Read a device as the kubelet does: any health but ``Healthy`` counts as unhealthy."""
    health = Health.HEALTHY if message.health == Health.HEALTHY.value else Health.UNHEALTHY
    nodes = tuple(n.ID for n in message.topology.nodes) if message.HasField("topology") else ()
    return Device(message.ID, health, nodes)


def allocation_to_pb(allocation: ContainerAllocation) -> pb.ContainerAllocateResponse:
    return pb.ContainerAllocateResponse(
        envs=dict(allocation.envs),
        mounts=[
            pb.Mount(container_path=m.container_path, host_path=m.host_path, read_only=m.read_only)
            for m in allocation.mounts
        ],
        devices=[
            pb.DeviceSpec(container_path=d.container_path, host_path=d.host_path, permissions=d.permissions)
            for d in allocation.devices
        ],
        annotations=dict(allocation.annotations),
        cdi_devices=[pb.CDIDevice(name=n) for n in allocation.cdi_devices],
    )


def allocation_from_pb(message: pb.ContainerAllocateResponse) -> ContainerAllocation:
    """Plain form of a container response; raises ``DeviceError`` on what the kubelet would reject."""
    return ContainerAllocation(
        envs=dict(message.envs),
        mounts=tuple(Mount(m.host_path, m.container_path, m.read_only) for m in message.mounts),
        devices=tuple(DeviceSpec(d.host_path, d.container_path, d.permissions) for d in message.devices),
        annotations=dict(message.annotations),
        cdi_devices=tuple(c.name for c in message.cdi_devices),
    )


def options_to_pb(pre_start_required: bool, preferred_available: bool) -> pb.DevicePluginOptions:
    return pb.DevicePluginOptions(
        pre_start_required=pre_start_required, get_preferred_allocation_available=preferred_available
    )


_SHOWN_IDS = 10
_SHOWN_CHARS = 32


def ids(values: Iterable[str]) -> str:
    """Device IDs for an error message: sorted so messages are stable, and bounded.

    The message travels as a gRPC trailer, percent-encoded, and a client refuses trailers over
    8 KiB with RESOURCE_EXHAUSTED instead of our status: at most 10 IDs of 32 characters show.
    """
    ordered = sorted(values)
    shown = ", ".join(_id_text(v) for v in ordered[:_SHOWN_IDS])
    hidden = len(ordered) - _SHOWN_IDS
    return f"{shown} and {hidden:,} more" if hidden > 0 else shown


def _id_text(value: str) -> str:
    """An ID as a reader can see it: empty or unprintable ones quoted, long ones cut."""
    if len(value) > _SHOWN_CHARS:
        value = f"{value[:_SHOWN_CHARS]}...({len(value):,} chars)"
    return value if value and value.isprintable() else repr(value)


# -- PodResources v1 -------------------------------------------------------------------------


def _topology_to_pb(nodes: tuple[int, ...] | None, message: prpb.TopologyInfo) -> None:
    """Set ``message`` (a topology field) unless ``nodes`` is None: absent and empty differ on the wire."""
    if nodes is not None:
        message.SetInParent()
        message.nodes.extend(prpb.NUMANode(ID=n) for n in nodes)


def _topology_from_pb(message: prpb.ContainerDevices | prpb.ContainerMemory) -> tuple[int, ...] | None:
    return tuple(n.ID for n in message.topology.nodes) if message.HasField("topology") else None


def _devices_to_pb(devices: Iterable[DeviceIds]) -> list[prpb.ContainerDevices]:
    messages = []
    for entry in devices:
        message = prpb.ContainerDevices(resource_name=entry.resource, device_ids=entry.ids)
        _topology_to_pb(entry.numa_nodes, message.topology)
        messages.append(message)
    return messages


def _memory_to_pb(memory: Iterable[Memory]) -> list[prpb.ContainerMemory]:
    messages = []
    for block in memory:
        message = prpb.ContainerMemory(memory_type=block.kind, size=block.size)
        _topology_to_pb(block.numa_nodes, message.topology)
        messages.append(message)
    return messages


def _claim_to_pb(claim: ClaimResources) -> prpb.DynamicResource:
    return prpb.DynamicResource(
        claim_name=claim.claim,
        claim_namespace=claim.namespace,
        claim_resources=[
            prpb.ClaimResource(
                cdi_devices=[prpb.CDIDevice(name=n) for n in d.cdi_devices],
                driver_name=d.driver,
                pool_name=d.pool,
                device_name=d.device,
                share_id=d.share_id,
            )
            for d in claim.devices
        ],
    )


def pod_resources_to_pb(pod: PodResources) -> prpb.PodResources:
    return prpb.PodResources(
        name=pod.name,
        namespace=pod.namespace,
        containers=[
            prpb.ContainerResources(
                name=c.name,
                devices=_devices_to_pb(c.devices),
                cpu_ids=c.cpu_ids,
                memory=_memory_to_pb(c.memory),
                dynamic_resources=[_claim_to_pb(claim) for claim in c.claims],
            )
            for c in pod.containers
        ],
    )


def allocatable_to_pb(allocatable: Allocatable) -> prpb.AllocatableResourcesResponse:
    return prpb.AllocatableResourcesResponse(
        devices=_devices_to_pb(allocatable.devices),
        cpu_ids=allocatable.cpu_ids,
        memory=_memory_to_pb(allocatable.memory),
    )


def _devices_from_pb(messages: Iterable[prpb.ContainerDevices]) -> tuple[DeviceIds, ...]:
    return tuple(DeviceIds(m.resource_name, tuple(m.device_ids), _topology_from_pb(m)) for m in messages)


def _memory_from_pb(messages: Iterable[prpb.ContainerMemory]) -> tuple[Memory, ...]:
    return tuple(Memory(m.memory_type, m.size, _topology_from_pb(m)) for m in messages)


def _claim_from_pb(message: prpb.DynamicResource) -> ClaimResources:
    devices = tuple(
        ClaimDevice(
            r.driver_name,
            r.pool_name,
            r.device_name,
            tuple(c.name for c in r.cdi_devices),
            r.share_id if r.HasField("share_id") else None,
        )
        for r in message.claim_resources
    )
    return ClaimResources(message.claim_name, message.claim_namespace, devices)


def pod_resources_from_pb(message: prpb.PodResources) -> PodResources:
    containers = tuple(
        ContainerResources(
            c.name,
            _devices_from_pb(c.devices),
            tuple(c.cpu_ids),
            _memory_from_pb(c.memory),
            tuple(_claim_from_pb(d) for d in c.dynamic_resources),
        )
        for c in message.containers
    )
    return PodResources(message.name, message.namespace, containers)


def allocatable_from_pb(message: prpb.AllocatableResourcesResponse) -> Allocatable:
    return Allocatable(_devices_from_pb(message.devices), tuple(message.cpu_ids), _memory_from_pb(message.memory))
