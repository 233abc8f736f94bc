"""The only place plain device data meets protobuf messages (both directions)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..device import ContainerAllocation, Device, DeviceSpec, Health, Mount
from . import api_pb2 as pb


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


def ids(values: Sequence[str]) -> str:
    """Device IDs for an error message, sorted so messages are stable."""
    return ", ".join(sorted(values))
