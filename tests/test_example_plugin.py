"""The plugin from docs/writing-a-plugin.md, run as its own process against the simulator."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from kubedevice.examples import accelerator_plugin
from kubedevice.kubelet import Container, KubeletSimulator, Pod

RESOURCE = "example.com/accel"


def make_tree(root: Path) -> None:
    for index, (numa, state) in enumerate([(0, "ok"), (0, "ok"), (1, "ok"), (1, "error")]):
        node = root / f"accel{index}"
        node.mkdir(parents=True)
        (node / "numa_node").write_text(f"{numa}\n")
        (node / "state").write_text(f"{state}\n")


def test_the_documented_plugin_end_to_end(tmp_path: Path) -> None:
    root, plugin_dir = tmp_path / "sys", tmp_path / "plugins"
    make_tree(root)
    plugin_dir.mkdir()
    env = {**os.environ, "ACCEL_ROOT": str(root), "KUBEDEVICE_PLUGIN_DIR": str(plugin_dir)}

    async def main() -> None:
        sim = KubeletSimulator(plugin_dir)
        await sim.start()
        proc = subprocess.Popen([sys.executable, accelerator_plugin.__file__], env=env)
        try:
            await sim.wait_until(lambda: sim.capacity().get(RESOURCE) == 4, 10)
            assert sim.allocatable()[RESOURCE] == 3
            options = sim.registrations[0].options
            assert options.pre_start_required and options.get_preferred_allocation_available

            admitted = await sim.admit(Pod("uid", "p", [Container("c", {RESOURCE: 2})]))
            ids = admitted["c"].device_ids[RESOURCE]
            assert ids == ["accel0", "accel1"]  # packed on NUMA node 0
            assert admitted["c"].allocation.envs["ACCEL_VISIBLE_DEVICES"] == "accel0,accel1"
            await sim.start_container("uid", "c")

            (root / "accel3" / "state").write_text("ok\n")  # recovers: inotify, not polling
            await sim.wait_until(lambda: sim.allocatable()[RESOURCE] == 4, 10)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(proc.wait, 10)
            await sim.stop()
        assert code == 0

    asyncio.run(main())
