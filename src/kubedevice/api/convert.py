"""The only place plain device data meets protobuf messages (both directions)."""

from __future__ import annotations

from collections.abc import Iterable

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
