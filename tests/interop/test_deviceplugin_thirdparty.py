"""Our kubelet simulator driving real third-party Go plugins.

The Kubernetes sample device plugin (k8s.io/kubernetes/test/images/sample-device-plugin,
built from the pinned module) must register, be admitted for a pod, and come back after a
simulated kubelet restart exactly as it does with the real device manager
(test_deviceplugin_devicemanager.py runs it against that).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kubedevice.device import Mount
from kubedevice.kubelet.model import Container, Pod
from kubedevice.kubelet.simulator import KubeletSimulator
from tests.interop.deviceplugin.gobuild import GoPlugin

pytestmark = pytest.mark.interop
RESOURCE = "example.com/resource"


def test_simulator_drives_sample_plugin(sample_device_plugin: GoPlugin, plugin_dir: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(plugin_dir)
        await sim.start()
        try:
            async with sample_device_plugin(plugin_dir) as process:
                await sim.wait_until(lambda: sim.allocatable().get(RESOURCE) == 2, timeout=20)
                (registration,) = sim.registrations
                assert registration.error is None
                assert registration.endpoint.startswith("dp.")
                assert sorted(sim.resources[RESOURCE].devices) == ["Dev-1", "Dev-2"]

                admitted = await sim.admit(Pod("uid-sample", "sample", [Container("c", {RESOURCE: 1})]))
                (dev,) = admitted["c"].device_ids[RESOURCE]
                assert admitted["c"].allocation.mounts == (Mount(f"/tmp/{dev}", f"/tmp/{dev}"),)

                # The sample plugin re-serves and registers ~10 s after kubelet.sock reappears.
                await sim.restart()
                await sim.wait_until(
                    lambda: len(sim.registrations) == 2 and sim.allocatable().get(RESOURCE) == 2, timeout=40
                )
                assert sim.registrations[1].error is None
                assert sim.assignments() == {"uid-sample": {"c": {RESOURCE: [dev]}}}
                assert process.returncode is None
        finally:
            await sim.stop()

    asyncio.run(main())
