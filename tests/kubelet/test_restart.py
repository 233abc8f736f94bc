"""Checkpoint and kubelet restart, including the zero-devices window of kubernetes #109595."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from pathlib import Path

import pytest

from kubedevice.api import pb
from kubedevice.kubelet import AdmissionError, Container, KubeletSimulator, Pod

from .rawplugin import RawPlugin, device, run

NULL = "example.com/null"


def pod(uid: str, count: int) -> Pod:
    return Pod(uid, f"pod-{uid}", [Container("main", {NULL: count})])


def test_checkpoint_has_the_kubelet_shape(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        plugin = RawPlugin(tmp_path, devices=[device("a", numa=[0]), device("b"), device("c", "Unhealthy")])
        await plugin.serve()
        try:
            await plugin.register()
            await sim.wait_until(lambda: sim.capacity().get(NULL) == 3, 5)
            blob = json.loads((tmp_path / "kubelet_internal_checkpoint").read_text())
            assert blob["Data"] == {"PodDeviceEntries": None, "RegisteredDevices": {NULL: ["a", "b"]}}
            await sim.admit(pod("p1", 2))
            blob = json.loads((tmp_path / "kubelet_internal_checkpoint").read_text())
            [entry] = blob["Data"]["PodDeviceEntries"]
            assert {k: entry[k] for k in ("PodUID", "ContainerName", "ResourceName", "DeviceIDs")} == {
                "PodUID": "p1",
                "ContainerName": "main",
                "ResourceName": NULL,
                "DeviceIDs": {"-1": ["b"], "0": ["a"]},
            }
            response = pb.ContainerAllocateResponse.FromString(base64.b64decode(entry["AllocResp"]))
            assert response.envs["DEVICES"] == "a,b"
            assert isinstance(blob["Checksum"], int)
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


def test_restart_restores_assignments_and_opens_the_zero_device_window(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path, grace_period=30)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        await plugin.serve()
        try:
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            kept = (await sim.admit(pod("p1", 3)))["main"].device_ids[NULL]
            first_sock = sim.kubelet_sock_created_at

            await sim.restart()
            assert sim.kubelet_sock_created_at > first_sock
            assert not plugin.socket.exists()  # the kubelet deleted the plugin's socket
            assert (tmp_path / "kubelet.sock").exists()
            resource = sim.resources[NULL]
            assert (resource.connected, resource.devices, resource.options) == (False, {}, None)
            assert resource.stopped_at is not None
            assert sim.capacity() == {NULL: 0}
            assert sim.assignments() == {"p1": {"main": {NULL: kept}}}

            with pytest.raises(AdmissionError) as caught:  # kubernetes #109595
                await sim.admit(pod("p2", 1))
            assert caught.value.reason == "UnexpectedAdmissionError"
            assert caught.value.message == (
                "Allocate failed due to no healthy devices present; cannot allocate unhealthy devices "
                "example.com/null, which is unexpected"
            )

            await plugin.stop()
            await plugin.serve()
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            fresh = (await sim.admit(pod("p3", 1)))["main"].device_ids[NULL]
            assert set(fresh).isdisjoint(kept)  # restored assignments still hold their devices
            with pytest.raises(AdmissionError, match="Requested: 1, Available: 0"):
                await sim.admit(pod("p4", 1))
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


def test_restored_resource_without_plugin_is_removed_after_grace(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path, grace_period=0.5)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        await plugin.serve()
        try:
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            await plugin.stop()
            await sim.restart()
            assert NULL in sim.resources
            await sim.wait_until(lambda: NULL not in sim.resources, 5)
            registered = json.loads((tmp_path / "kubelet_internal_checkpoint").read_text())["Data"]["RegisteredDevices"]
            assert registered == {}
        finally:
            await sim.stop()

    run(main())


def test_corrupted_checkpoint_is_ignored(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        await plugin.serve()
        try:
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            await sim.stop()
            path = tmp_path / "kubelet_internal_checkpoint"
            blob = json.loads(path.read_text())
            blob["Data"]["RegisteredDevices"]["example.com/other"] = []
            path.write_text(json.dumps(blob))
            await sim.start()
            assert sim.resources == {}
            assert any("checksum mismatch" in e for e in sim.events)
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


def test_started_container_after_restart_uses_checkpointed_devices(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        plugin = RawPlugin(tmp_path, pre_start_required=True)
        await plugin.serve()
        try:
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            kept = (await sim.admit(pod("p1", 2)))["main"].device_ids[NULL]
            await sim.restart()
            await plugin.stop()
            await plugin.serve()
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            await sim.start_container("p1", "main")
            assert list(plugin.requests["PreStartContainer"][-1].devices_ids) == kept
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


def test_pod_created_right_after_a_restart_waits_for_the_sync_loop(tmp_path: Path) -> None:
    """The real kubelet admits nothing in the first ~0.3 s after a start: a plugin
    back within that window loses no pod (tests/e2e/test_fidelity.py, right_after_restart)."""

    async def main() -> None:
        sim = KubeletSimulator(tmp_path, admission_delay=0.6)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        await plugin.serve()
        try:
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            await sim.restart()

            async def come_back() -> None:
                await asyncio.sleep(0.2)
                await plugin.stop()
                await plugin.serve()
                await plugin.register()

            back = asyncio.create_task(come_back())
            started = time.monotonic()
            admitted = await sim.admit(pod("p1", 1))
            assert time.monotonic() - started >= 0.5
            assert len(admitted["main"].device_ids[NULL]) == 1
            await back
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())
