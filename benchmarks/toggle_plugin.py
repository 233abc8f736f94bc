"""A library plugin for benchmarks: N devices; SIGUSR1 flips the health of device 0.

Run as ``python benchmarks/toggle_plugin.py PLUGIN_DIR COUNT``. The signal is the
cross-process trigger for measuring ListAndWatch propagation end to end.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

from kubedevice import ContainerAllocation, Device, DeviceSpec, Health, Plugin
from kubedevice.allocation.policies import NumaPacking
from kubedevice.plugin.manager import Manager, run


class Toggle(NumaPacking, Plugin):
    resource_name = "example.com/toggle"

    def flip(self) -> None:
        first = self.devices()[0]
        self.set_health(first.id, Health.UNHEALTHY if first.healthy else Health.HEALTHY)


async def main(plugin_dir: Path, count: int) -> int:
    grant = ContainerAllocation(devices=[DeviceSpec("/dev/null")], envs={"TOGGLE": "1"})
    plugin = Toggle(devices=[Device(f"dev-{i:05d}", numa_nodes=(i % 4,), grant=grant) for i in range(count)])
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, plugin.flip)
    return await run(Manager([plugin], plugin_dir))


if __name__ == "__main__":
    sys.exit(asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2]))))
