"""A Go kubelet client (official v1beta1 stubs + grpc-go) against a kubedevice plugin.

What Go decodes from every RPC must equal the plain data the Python plugin meant to send:
IDs, health, NUMA topology, options, envs, mounts, device specs, annotations and CDI names.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from kubedevice.device import ContainerAllocation, Device, DeviceSpec, Health, Mount
from kubedevice.names import endpoint_for
from kubedevice.plugin.base import Plugin
from kubedevice.plugin.manager import Manager
from tests.interop.deviceplugin.gobuild import StartHarness

pytestmark = pytest.mark.interop
RESOURCE = "example.com/interop"


def grant(n: int) -> ContainerAllocation:
    """A distinct grant per device that uses every field of a container response."""
    return ContainerAllocation(
        envs={f"ACCEL_{n}": f"dev{n}", "ACCEL_VISIBLE": "shared"},
        mounts=[Mount(f"/opt/accel/{n}", f"/accel/{n}", read_only=n % 2 == 0)],
        devices=[DeviceSpec(f"/dev/accel{n}", f"/dev/accel{n}", "rwm" if n % 2 else "r")],
        annotations={f"accel.example.com/{n}": "yes"},
        cdi_devices=[f"example.com/accel=dev{n}"],
    )


DEVICES = [
    Device("dev0", numa_nodes=(0,), grant=grant(0)),
    Device("dev1", numa_nodes=(1,), grant=grant(1)),
    Device("dev2", numa_nodes=(0, 1), grant=grant(2)),
    Device("dev3", health=Health.UNHEALTHY, grant=grant(3)),
]


class Accelerators(Plugin):
    """Prefers the highest IDs (so Go can tell the plugin chose) and records PreStart calls."""

    resource_name = RESOURCE

    def __init__(self) -> None:
        super().__init__(devices=DEVICES)
        self.pre_started: list[list[str]] = []

    def preferred_allocation(
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> Sequence[str]:
        rest = sorted((d.id for d in available if d not in must_include), reverse=True)
        return [d.id for d in must_include] + rest[: size - len(must_include)]

    def pre_start_container(self, devices: Sequence[Device]) -> None:
        self.pre_started.append(sorted(d.id for d in devices))


def device_json(device: Device, health: Health | None = None) -> dict[str, Any]:
    return {"id": device.id, "health": (health or device.health).value, "numa_nodes": list(device.numa_nodes) or None}


def allocation_json(allocation: ContainerAllocation) -> dict[str, Any]:
    return {
        "envs": dict(allocation.envs),
        "annotations": dict(allocation.annotations),
        "mounts": [
            {"container_path": m.container_path, "host_path": m.host_path, "read_only": m.read_only}
            for m in allocation.mounts
        ],
        "devices": [
            {"container_path": d.container_path, "host_path": d.host_path, "permissions": d.permissions}
            for d in allocation.devices
        ],
        "cdi_devices": list(allocation.cdi_devices),
    }


def merged(*ids: str) -> dict[str, Any]:
    by_id = {d.id: d for d in DEVICES}
    return allocation_json(ContainerAllocation.merge(by_id[i].grant for i in ids))


SCRIPT = {
    "preferred": [{"available": ["dev0", "dev1", "dev2"], "must_include": ["dev0"], "size": 2}],
    "allocate": [[["dev0", "dev2"]], [["dev1"], ["dev2"]], [["nosuch"]], [["dev3"]]],
    "prestart": [["dev1", "dev0"]],
}


def test_go_client_decodes_every_rpc(start_harness: StartHarness, plugin_dir: Path) -> None:
    plugin = Accelerators()

    async def main() -> None:
        manager = Manager([plugin], plugin_dir)
        async with start_harness("client", "-dir", str(plugin_dir), "-script", json.dumps(SCRIPT)) as go:
            await go.next("serving")
            await manager.start()
            try:
                register = await go.next("register")
                assert register == {
                    "event": "register",
                    "version": "v1beta1",
                    "endpoint": endpoint_for(RESOURCE),
                    "resource_name": RESOURCE,
                    "options": {"pre_start_required": True, "get_preferred_allocation_available": True},
                }
                assert (await go.next("options"))["get_preferred_allocation_available"] is True
                assert (await go.next("list"))["devices"] == [device_json(d) for d in DEVICES]

                preferred = await go.next("preferred")
                assert preferred["container_responses"] == [["dev0", "dev2"]]

                one_container = await go.next("allocate")
                assert one_container["container_responses"] == [merged("dev0", "dev2")]
                two_containers = await go.next("allocate")
                assert two_containers["container_responses"] == [merged("dev1"), merged("dev2")]
                unknown = await go.next("allocate")
                assert unknown["error"]["code"] == "InvalidArgument"
                assert "nosuch" in unknown["error"]["message"]
                unhealthy = await go.next("allocate")
                assert unhealthy["error"]["code"] == "FailedPrecondition"
                assert "dev3" in unhealthy["error"]["message"]

                assert "error" not in await go.next("prestart")
                await go.next("script_done")
                assert plugin.pre_started == [["dev0", "dev1"]]

                plugin.set_health("dev1", Health.UNHEALTHY)
                changed = await go.next("list")
                assert changed["devices"][1] == device_json(DEVICES[1], Health.UNHEALTHY)
            finally:
                await manager.stop()
            final = await go.next("list")
            assert final["devices"] == [device_json(d, Health.UNHEALTHY) for d in DEVICES]
            assert (await go.next("stream_end"))["code"] == "OK"

    asyncio.run(main())


def test_go_client_sees_registration_only_once_serving(start_harness: StartHarness, plugin_dir: Path) -> None:
    """The kubelet dials the endpoint inside Register: a plugin started before the kubelet still works."""

    async def main() -> None:
        manager = Manager([Accelerators()], plugin_dir)
        await manager.start()
        try:
            async with start_harness("client", "-dir", str(plugin_dir)) as go:
                await go.next("register")
                assert (await go.next("list"))["devices"] == [device_json(d) for d in DEVICES]
                assert not any(e["event"] == "register_dial_failed" for e in go.events)
        finally:
            await manager.stop()

    asyncio.run(main())
