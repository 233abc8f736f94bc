import asyncio
import os
import sys
import tempfile
from pathlib import Path

from kubedevice.kubelet import Container, KubeletSimulator, Pod

RESOURCE = "example.com/null"


async def main(plugin_file: str) -> None:
    with tempfile.TemporaryDirectory() as plugin_dir:
        sim = KubeletSimulator(Path(plugin_dir))    # serves plugin_dir/kubelet.sock
        await sim.start()
        plugin = await asyncio.create_subprocess_exec(
            sys.executable, plugin_file, env={**os.environ, "KUBEDEVICE_PLUGIN_DIR": plugin_dir}
        )
        try:
            await sim.wait_until(lambda: sim.allocatable().get(RESOURCE) == 4, 10)
            admitted = await sim.admit(Pod("uid", "pod", [Container("c", {RESOURCE: 2})]))
            print("admitted:", admitted["c"].device_ids[RESOURCE])
            await sim.restart()                     # wipes the sockets like a kubelet restart
            await sim.wait_until(lambda: sim.allocatable().get(RESOURCE) == 4, 10)
            print("registered again after the kubelet restart")
        finally:
            plugin.terminate()                      # SIGTERM, as at a node shutdown
            print("plugin exit code:", await plugin.wait())
            await sim.stop()


asyncio.run(main(sys.argv[1]))
