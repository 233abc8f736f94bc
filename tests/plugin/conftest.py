"""Shared pieces for runtime tests: library plugins and a gRPC client to a plugin socket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from grpc import aio

from kubedevice import ContainerAllocation, Device, DeviceSpec, Plugin
from kubedevice.allocation.policies import NumaPacking
from kubedevice.api import pb, pb_grpc
from kubedevice.kubelet import KubeletSimulator
from kubedevice.names import endpoint_for
from kubedevice.plugin.manager import Manager

TIMEOUT = 5.0


def null_devices(count: int = 4, numa: int = 1) -> list[Device]:
    grant = ContainerAllocation(devices=[DeviceSpec("/dev/null")], envs={"NULL": "1"})
    return [Device(f"null-{i}", numa_nodes=(i % numa,), grant=grant) for i in range(count)]


class NullPlugin(NumaPacking, Plugin):
    """A plain library plugin, written the way the docs tell users to."""

    resource_name = "example.com/null"


@asynccontextmanager
async def running(plugins: Sequence[Plugin], plugin_dir: Path) -> AsyncIterator[Manager]:
    manager = Manager(plugins, plugin_dir)
    await manager.start()
    try:
        yield manager
    finally:
        await manager.stop()


@asynccontextmanager
async def kubelet(plugin_dir: Path, dial_timeout: float = 10.0) -> AsyncIterator[KubeletSimulator]:
    sim = KubeletSimulator(plugin_dir, grace_period=1.0, dial_timeout=dial_timeout)
    await sim.start()
    try:
        yield sim
    finally:
        await sim.stop()


@asynccontextmanager
async def client(plugin_dir: Path, resource: str = "example.com/null") -> AsyncIterator[pb_grpc.DevicePluginStub]:
    """A direct client of one plugin socket, standing where the kubelet's endpoint stands."""
    async with aio.insecure_channel(f"unix://{plugin_dir / endpoint_for(resource)}") as channel:
        yield pb_grpc.DevicePluginStub(channel)


async def registered(sim: KubeletSimulator, resource: str = "example.com/null", count: int = 4) -> None:
    await sim.wait_until(lambda: sim.allocatable().get(resource) == count, TIMEOUT)


def allocate_request(*containers: Sequence[str]) -> pb.AllocateRequest:
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=c) for c in containers])


def preferred_request(available: Sequence[str], must: Sequence[str], size: int) -> pb.PreferredAllocationRequest:
    return pb.PreferredAllocationRequest(
        container_requests=[
            pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=available, must_include_deviceIDs=must, allocation_size=size
            )
        ]
    )


async def next_message(stream: aio.UnaryStreamCall[pb.Empty, pb.ListAndWatchResponse]) -> pb.ListAndWatchResponse:
    message = await asyncio.wait_for(stream.read(), TIMEOUT)
    assert isinstance(message, pb.ListAndWatchResponse), f"stream ended: {message!r}"
    return message
