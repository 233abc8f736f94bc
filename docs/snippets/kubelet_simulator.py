import asyncio
import tempfile
from pathlib import Path

from kubedevice import ContainerAllocation, Device, DeviceSpec, Plugin
from kubedevice.kubelet import Container, KubeletSimulator, Pod
from kubedevice.plugin.manager import Manager


async def main(plugin_dir: Path) -> None:
    grant = ContainerAllocation(devices=[DeviceSpec("/dev/null")])
    plugin = Plugin("example.com/null", [Device(f"null-{i}", grant=grant) for i in range(2)])
    manager = Manager([plugin], plugin_dir)  # the plugin under test, served in this process
    sim = KubeletSimulator(plugin_dir, grace_period=300.0, dial_timeout=10.0)
    await sim.start()                       # clean stale sockets, load checkpoint, serve kubelet.sock
    await manager.start()
    await sim.wait_until(lambda: sim.allocatable().get("example.com/null", 0) >= 2, timeout=10)
    result = await sim.admit(Pod("uid-1", "demo", [Container("main", {"example.com/null": 2})]))
    print(result["main"].device_ids, result["main"].allocation.devices, result["main"].preferred)
    await sim.start_container("uid-1", "main")   # PreStartContainer when the plugin asked for it
    await sim.restart()                     # as a kubelet restart: sockets deleted, state from checkpoint
    print(sim.assignments())                # the pod's devices, restored from the checkpoint
    await manager.stop()
    await sim.stop()


with tempfile.TemporaryDirectory() as directory:
    asyncio.run(main(Path(directory)))
