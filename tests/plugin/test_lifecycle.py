"""Process lifecycle: SIGTERM, socket ownership, stale sockets, a few-line library plugin."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kubedevice.api import pb
from kubedevice.names import endpoint_for
from kubedevice.unixsocket import SocketInUse

from .conftest import TIMEOUT, NullPlugin, client, kubelet, next_message, null_devices, registered, running

USER_PLUGIN = textwrap.dedent(
    """
    from kubedevice import ContainerAllocation, Device, DeviceSpec, Plugin
    from kubedevice.plugin.manager import serve

    grant = ContainerAllocation(devices=[DeviceSpec("/dev/null")])
    plugin = Plugin("example.com/null", [Device(f"null-{i}", grant=grant) for i in range(4)])
    raise SystemExit(serve(plugin))
    """
)


def start_user_plugin(tmp_path: Path, plugin_dir: Path) -> subprocess.Popen[bytes]:
    script = tmp_path / "my_plugin.py"
    script.write_text(USER_PLUGIN)
    env = {**os.environ, "KUBEDEVICE_PLUGIN_DIR": str(plugin_dir)}
    return subprocess.Popen([sys.executable, str(script)], env=env, stderr=subprocess.PIPE)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_sends_final_unhealthy_list_removes_only_our_socket_and_exits_0(tmp_path: Path, sig: int) -> None:
    plugin_dir = tmp_path / "plugins"
    plugin_dir.mkdir()
    foreign = plugin_dir / "someone-else.sock"
    foreign.write_text("not ours")

    async def main() -> None:
        async with kubelet(plugin_dir) as sim:
            proc = start_user_plugin(tmp_path, plugin_dir)
            try:
                await registered(sim)
                async with client(plugin_dir) as stub:
                    stream = stub.ListAndWatch(pb.Empty())
                    assert {d.health for d in (await next_message(stream)).devices} == {"Healthy"}
                    proc.send_signal(sig)
                    final = await next_message(stream)
                    assert [d.health for d in final.devices] == ["Unhealthy"] * 4
                code = await asyncio.to_thread(proc.wait, TIMEOUT)
                assert code == 0, proc.stderr.read() if proc.stderr else ""
            finally:
                proc.kill()
            assert not (plugin_dir / endpoint_for("example.com/null")).exists()
            assert (plugin_dir / "kubelet.sock").exists() and foreign.read_text() == "not ours"

    asyncio.run(main())


def test_a_stale_socket_of_ours_is_replaced(tmp_path: Path) -> None:
    stale = tmp_path / endpoint_for("example.com/null")
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(stale))  # bound, never listening: what a crashed run leaves behind

    async def main() -> None:
        async with kubelet(tmp_path) as sim, running([NullPlugin(devices=null_devices())], tmp_path):
            await registered(sim)

    asyncio.run(main())


def test_a_live_socket_or_a_plain_file_at_our_path_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / endpoint_for("example.com/null")

    async def main() -> None:
        with socket.socket(socket.AF_UNIX) as live:
            live.bind(str(path))
            live.listen()
            with pytest.raises(SocketInUse, match="another live process"):
                async with running([NullPlugin(devices=null_devices())], tmp_path):
                    pass
            assert path.exists()
        path.unlink()
        path.write_text("precious")
        with pytest.raises(SocketInUse, match="not a socket"):
            async with running([NullPlugin(devices=null_devices())], tmp_path):
                pass
        assert path.read_text() == "precious"

    asyncio.run(main())


def test_a_replaced_socket_file_is_not_deleted_on_stop(tmp_path: Path) -> None:
    async def main() -> None:
        async with running([NullPlugin(devices=null_devices())], tmp_path) as manager:
            path = manager.servers[0].socket_path
            manager._watcher.stop()  # freeze the daemon's view: someone swaps the file under it
            path.unlink()
            path.write_text("someone else's now")
        assert path.read_text() == "someone else's now"

    asyncio.run(main())
