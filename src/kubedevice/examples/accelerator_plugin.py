"""A complete device plugin in Python: discovery, hotplug, health, NUMA, Allocate, PreStart.

The "hardware" is a directory (``ACCEL_ROOT``, default ``/sys/class/accel``) holding one
sub-directory per accelerator with ``numa_node`` and ``state`` files, as a driver might
expose in sysfs. Run it with ``python accelerator_plugin.py``; point
``KUBEDEVICE_PLUGIN_DIR`` at a kubelet simulator's directory to try it without a cluster.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

from kubedevice import ContainerAllocation, Device, DeviceSpec, Health, Plugin
from kubedevice.allocation.policies import NumaPacking
from kubedevice.plugin.manager import serve
from kubedevice.plugin.watcher import DirectoryWatcher


class Accelerator(NumaPacking, Plugin):
    """NumaPacking offers GetPreferredAllocation; defining pre_start_container asks for PreStart."""

    resource_name = "example.com/accel"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.resets: list[str] = []
        super().__init__(devices=self.scan())

    def scan(self) -> list[Device]:
        """One device per sub-directory; health comes from its ``state`` file."""
        devices = []
        for node in sorted(p for p in self.root.iterdir() if p.is_dir()):
            numa = int((node / "numa_node").read_text())
            state = (node / "state").read_text().strip()
            devices.append(
                Device(
                    node.name,
                    health=Health.HEALTHY if state == "ok" else Health.UNHEALTHY,
                    numa_nodes=(numa,) if numa >= 0 else (),
                    grant=ContainerAllocation(devices=[DeviceSpec(f"/dev/{node.name}", permissions="rw")]),
                )
            )
        return devices

    async def run(self) -> None:
        """Rescan whenever an accelerator appears, vanishes or changes state (inotify, no polling)."""
        changed = asyncio.Event()
        watchers = [DirectoryWatcher(self.root, lambda name, created: changed.set())]
        for node in self.root.iterdir():
            watchers.append(DirectoryWatcher(node, lambda name, created: changed.set(), writes=True))
        for watcher in watchers:
            watcher.start()
        try:
            while True:
                await changed.wait()
                changed.clear()
                self.publish(self.scan())
        finally:
            for watcher in watchers:
                watcher.stop()

    def allocate(self, devices: Sequence[Device]) -> ContainerAllocation:
        """The device nodes, plus an env var naming them, as GPU plugins do."""
        grants = ContainerAllocation.merge(d.grant for d in devices)
        env = {"ACCEL_VISIBLE_DEVICES": ",".join(d.id for d in devices)}
        return ContainerAllocation(envs=env, devices=grants.devices)

    def pre_start_container(self, devices: Sequence[Device]) -> None:
        """Reset each device before the container starts (runs in a thread, 30 s deadline)."""
        for device in devices:
            (self.root / device.id / "state").write_text("ok\n")
            self.resets.append(device.id)


if __name__ == "__main__":
    raise SystemExit(serve(Accelerator(Path(os.environ.get("ACCEL_ROOT", "/sys/class/accel")))))
