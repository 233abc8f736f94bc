"""``ConfiguredPlugin`` served by the real runtime: hotplug and health reach a live
ListAndWatch stream over a unix socket; Allocate and GetPreferredAllocation answer from config."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
import pytest
from grpc import aio

from kubedevice.api import pb, pb_grpc
from kubedevice.names import endpoint_for
from kubedevice.plugin.manager import Manager
from kubedevice.sources.configured import ConfiguredPlugin
from kubedevice.testing import FakeHost

from .conftest import populate, resource

TIMEOUT = 5.0
Stream = aio.UnaryStreamCall[pb.Empty, pb.ListAndWatchResponse]


@asynccontextmanager
async def served(plugin: ConfiguredPlugin, plugin_dir: Path) -> AsyncIterator[pb_grpc.DevicePluginStub]:
    """The plugin behind the runtime's Manager (no kubelet needed), and a client on its socket."""
    plugin_dir.mkdir(exist_ok=True)  # the kubelet's directory: the runtime never creates it
    manager = Manager([plugin], plugin_dir)
    await manager.start()
    try:
        socket = plugin_dir / endpoint_for(plugin.resource_name)
        async with aio.insecure_channel(f"unix://{socket}") as channel:
            yield pb_grpc.DevicePluginStub(channel)
    finally:
        await manager.stop()


async def listed(stream: Stream) -> dict[str, str]:
    message = await asyncio.wait_for(stream.read(), TIMEOUT)
    assert isinstance(message, pb.ListAndWatchResponse), f"stream ended: {message!r}"
    return {d.ID: d.health for d in message.devices}


async def until(stream: Stream, expected: dict[str, str]) -> None:
    """Read lists until one equals ``expected`` (intermediate lists are allowed, staleness is not)."""
    seen = await listed(stream)
    while seen != expected:
        seen = await listed(stream)


def test_glob_hotplug_add_and_remove_reach_the_stream(host: FakeHost, tmp_path: Path) -> None:
    host.device_node("/dev/ttyUSB0")
    plugin = ConfiguredPlugin(resource('name: example.com/serial\nglob: {paths: ["/dev/ttyUSB*"]}'), host.root)

    async def main() -> None:
        async with served(plugin, tmp_path / "plugins") as stub:
            stream = stub.ListAndWatch(pb.Empty())
            assert await listed(stream) == {"ttyUSB0": "Healthy"}
            host.device_node("/dev/ttyUSB1")
            await until(stream, {"ttyUSB0": "Healthy", "ttyUSB1": "Healthy"})
            host.remove("/dev/ttyUSB0")
            await until(stream, {"ttyUSB1": "Healthy"})

    asyncio.run(main())


def test_usb_plug_on_a_new_bus_and_unplug_reach_the_stream(host: FakeHost, tmp_path: Path) -> None:
    populate(host)
    plugin = ConfiguredPlugin(resource('name: example.com/coral\nusb: {vendor: "1a6e", product: "089a"}'), host.root)

    async def main() -> None:
        async with served(plugin, tmp_path / "plugins") as stub:
            stream = stub.ListAndWatch(pb.Empty())
            assert await listed(stream) == {"usb-1-2": "Healthy"}
            host.usb_device(4, 2, "1a6e", "089a", port="4-1")  # /dev/bus/usb/004 did not exist
            await until(stream, {"usb-1-2": "Healthy", "usb-4-1": "Healthy"})
            host.unplug_usb("1-2")
            await until(stream, {"usb-4-1": "Healthy"})

    asyncio.run(main())


def test_static_device_recovers_after_its_node_returns(host: FakeHost, tmp_path: Path) -> None:
    host.device_node("/dev/null")
    config = resource(
        "name: example.com/null\nstatic: {count: 2, paths: [/dev/null]}",
        health={"interval_seconds": 0.05, "failure_threshold": 2},
    )
    plugin = ConfiguredPlugin(config, host.root)

    async def main() -> None:
        async with served(plugin, tmp_path / "plugins") as stub:
            stream = stub.ListAndWatch(pb.Empty())
            assert await listed(stream) == {"null-0": "Healthy", "null-1": "Healthy"}
            host.remove("/dev/null")
            await until(stream, {"null-0": "Unhealthy", "null-1": "Unhealthy"})
            host.device_node("/dev/null")
            await until(stream, {"null-0": "Healthy", "null-1": "Healthy"})

    asyncio.run(main())


def test_allocate_gives_nodes_mounts_env_and_annotations(host: FakeHost, tmp_path: Path) -> None:
    populate(host)
    host.write("/opt/xilinx/lib/libxrt.so")
    config = resource(
        'name: example.com/fpga\npci: {vendor: "10ee", vfio: true}',
        permissions="rw",
        mounts=[{"host_path": "/opt/xilinx", "container_path": "/opt/xilinx", "read_only": True}],
        env={"FPGA_IDS": "{ids}", "FPGA_PATHS": "{paths}", "FPGA_COUNT": "{count}"},
        annotations={"example.com/owner": "kubedevice"},
    )
    plugin = ConfiguredPlugin(config, host.root)

    async def main() -> None:
        async with served(plugin, tmp_path / "plugins") as stub:
            request = pb.AllocateRequest(
                container_requests=[pb.ContainerAllocateRequest(devices_ids=["0000:3b:00.0", "0000:5e:00.0"])]
            )
            response = (await stub.Allocate(request)).container_responses[0]
            assert [(d.host_path, d.container_path, d.permissions) for d in response.devices] == [
                ("/dev/vfio/41", "/dev/vfio/41", "rw"),
                ("/dev/vfio/vfio", "/dev/vfio/vfio", "rw"),
                ("/dev/vfio/42", "/dev/vfio/42", "rw"),
            ]
            assert [(m.host_path, m.read_only) for m in response.mounts] == [("/opt/xilinx", True)]
            assert dict(response.envs) == {
                "FPGA_IDS": "0000:3b:00.0,0000:5e:00.0",
                "FPGA_PATHS": "/dev/vfio/41,/dev/vfio/vfio,/dev/vfio/42",
                "FPGA_COUNT": "2",
            }
            assert dict(response.annotations) == {"example.com/owner": "kubedevice"}

    asyncio.run(main())


def test_one_replica_per_device_refuses_two_replicas_of_one_device(host: FakeHost, tmp_path: Path) -> None:
    populate(host)
    config = resource(
        'name: example.com/fpga\npci: {vendor: "10ee", vfio: true}', replicas=2, one_replica_per_device=True
    )
    plugin = ConfiguredPlugin(config, host.root)

    async def main() -> None:
        async with served(plugin, tmp_path / "plugins") as stub:
            two = ["0000:3b:00.0::0", "0000:3b:00.0::1"]
            with pytest.raises(aio.AioRpcError) as info:
                await stub.Allocate(
                    pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=two)])
                )
            assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert "0000:3b:00.0::0, 0000:3b:00.0::1 share 0000:3b:00.0" in (info.value.details() or "")
            ok = ["0000:3b:00.0::0", "0000:5e:00.0::1"]
            await stub.Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ok)]))

    asyncio.run(main())


def test_preferred_allocation_over_grpc_spreads_replicas_within_a_numa_node(host: FakeHost, tmp_path: Path) -> None:
    populate(host)  # FPGAs 3b (node 1) and 5e (node 0); add a second one on node 1
    host.pci_device("0000:d8:00.0", "10ee", "903f", "120000", numa_node=1, iommu_group=44, driver="vfio-pci")
    config = resource('name: example.com/fpga\npci: {vendor: "10ee", vfio: true}', replicas=4)
    plugin = ConfiguredPlugin(config, host.root)

    async def main() -> None:
        async with served(plugin, tmp_path / "plugins") as stub:
            options = await stub.GetDevicePluginOptions(pb.Empty())
            assert options.get_preferred_allocation_available
            ids = [d.id for d in plugin.devices()]
            request = pb.PreferredAllocationRequest(
                container_requests=[pb.ContainerPreferredAllocationRequest(available_deviceIDs=ids, allocation_size=2)]
            )
            answer = (await stub.GetPreferredAllocation(request)).container_responses[0].deviceIDs
            assert sorted(i.split("::")[0] for i in answer) == ["0000:3b:00.0", "0000:d8:00.0"]

    asyncio.run(main())


def test_preferred_allocation_avoids_a_device_that_turned_unhealthy(host: FakeHost) -> None:
    for n in range(3):
        host.device_node(f"/dev/accel{n}")
    config = resource(
        'name: example.com/accel\nglob: {paths: ["/dev/accel*"]}',
        health={"checks": [{"type": "openable"}], "failure_threshold": 1},
    )
    plugin = ConfiguredPlugin(config, host.root)
    assert sorted(plugin.preferred_allocation(plugin.devices(), [], 2)) == ["accel0", "accel1"]
    host.remove("/dev/accel0")
    host.symlink("/dev/accel0", "/dev/missing")  # a dangling node: present in /dev, cannot be opened
    asyncio.run(plugin.check_health())
    assert [d.health for d in plugin.devices()] == ["Unhealthy", "Healthy", "Healthy"]
    assert sorted(plugin.preferred_allocation(plugin.devices(), [], 2)) == ["accel1", "accel2"]
