"""ListAndWatch: device sets, health, the end of a stream and the grace period."""

from __future__ import annotations

import contextlib
from pathlib import Path

from kubedevice.device import Health
from kubedevice.kubelet import KubeletSimulator

from .rawplugin import RawPlugin, device, run

NULL = "example.com/null"


def test_each_message_replaces_the_device_set(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        plugin = RawPlugin(tmp_path, devices=[device("a"), device("b", numa=[1])])
        await plugin.serve()
        try:
            await plugin.register()
            await sim.wait_until(lambda: sim.capacity().get(NULL) == 2, 5)
            assert sim.resources[NULL].devices["b"].numa_nodes == (1,)
            plugin.push([device("c"), device("d", "Unhealthy"), device("e", "Sick")])
            await sim.wait_until(lambda: set(sim.resources[NULL].devices) == {"c", "d", "e"}, 5)
            assert sim.capacity() == {NULL: 3}
            assert sim.allocatable() == {NULL: 1}  # any health but "Healthy" counts as unhealthy
            assert sim.resources[NULL].devices["e"].health is Health.UNHEALTHY
            plugin.push([])
            await sim.wait_until(lambda: sim.capacity() == {NULL: 0}, 5)
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


def test_stream_end_marks_devices_unhealthy_then_removes_after_grace(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path, grace_period=0.6)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        await plugin.serve()
        try:
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            plugin.end_streams()
            await sim.wait_until(lambda: not sim.resources[NULL].connected, 5)
            resource = sim.resources[NULL]
            assert resource.stopped_at is not None
            assert sim.capacity() == {NULL: 4}
            assert sim.allocatable() == {NULL: 0}
            await sim.wait_until(lambda: NULL not in sim.resources, 5)
            assert sim.capacity() == {}
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


def test_reregistration_within_grace_keeps_the_resource(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path, grace_period=0.5)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        await plugin.serve()
        try:
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            await plugin.stop()
            await sim.wait_until(lambda: not sim.resources[NULL].connected, 5)
            await plugin.serve()
            await plugin.register()
            await sim.wait_until(lambda: sim.allocatable().get(NULL) == 4, 5)
            stopped_grace = sim.resources[NULL].stopped_at
            assert stopped_grace is None
            with contextlib.suppress(TimeoutError):
                await sim.wait_until(lambda: NULL not in sim.resources, 1.0)
            assert NULL in sim.resources
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())
