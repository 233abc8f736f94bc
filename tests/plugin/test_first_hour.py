"""What a new user meets first: bad names, a missing plugin directory, a kubelet that goes away."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc import aio

from kubedevice import Plugin
from kubedevice.api import pb, pb_grpc
from kubedevice.plugin.manager import Manager, ManagerHooks
from kubedevice.plugin.registration import KubeletUnavailable, register
from kubedevice.testing.waiting import eventually

from .conftest import TIMEOUT, NullPlugin, kubelet, null_devices, registered


@pytest.mark.parametrize("name", ["null", "kubernetes.io/null", "Example.com/x"])
def test_a_bad_resource_name_fails_at_construction(name: str) -> None:
    with pytest.raises(ValueError, match="resource name"):
        Plugin(name)
    with pytest.raises(ValueError, match="resource name"):
        NullPlugin(resource_name=name)


LIBRARY_PLUGIN = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from grpc import aio
    from kubedevice import Device, Plugin
    from kubedevice.api import pb, pb_grpc
    from kubedevice.names import endpoint_for
    from kubedevice.plugin.manager import Manager

    async def main():
        manager = Manager([Plugin("example.com/null", [Device("null-0")])], Path(sys.argv[1]))
        await manager.start()
        async with aio.insecure_channel(f"unix://{sys.argv[1]}/{endpoint_for('example.com/null')}") as channel:
            request = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=["ghost-7"])])
            try:
                await pb_grpc.DevicePluginStub(channel).Allocate(request)
            except aio.AioRpcError:
                pass
        await manager.stop()

    asyncio.run(main())
    """
)


def test_library_mode_without_logging_shows_why_allocate_was_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", LIBRARY_PLUGIN, str(tmp_path)], capture_output=True, text=True, timeout=60, check=True
    )
    refused = [line for line in result.stderr.splitlines() if "refused" in line]
    assert len(refused) == 1 and "ghost-7" in refused[0] and "example.com/null" in refused[0], result.stderr


def test_a_missing_plugin_directory_is_waited_for_never_created(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Levels appear one by one (as a kubelet's first start makes them); we follow with inotify."""
    plugin_dir = tmp_path / "v" / "l" / "k" / "dp"  # short: a socket path has at most 107 bytes

    async def main() -> None:
        manager = Manager([NullPlugin(devices=null_devices())], plugin_dir)
        starting = asyncio.create_task(manager.start())
        await asyncio.sleep(0.3)
        assert not starting.done() and not (tmp_path / "v").exists()
        (tmp_path / "v" / "l").mkdir(parents=True)
        await asyncio.sleep(0.1)
        assert not starting.done()
        async with kubelet(plugin_dir) as sim:  # creates the rest, then serves kubelet.sock
            await asyncio.wait_for(starting, TIMEOUT)
            await registered(sim)
            await manager.stop()

    with caplog.at_level(logging.INFO, "kubedevice"):
        asyncio.run(main())
    assert f"plugin directory {plugin_dir} does not exist" in caplog.text
    assert "waiting for it to appear" in caplog.text and f"plugin directory {plugin_dir} appeared" in caplog.text


def test_a_stop_ends_the_wait_for_the_directory(tmp_path: Path) -> None:
    async def main() -> None:
        manager = Manager([NullPlugin(devices=null_devices())], tmp_path / "typo" / "dir")
        starting = asyncio.create_task(manager.start())
        await asyncio.sleep(0.2)
        manager.request_stop()
        await asyncio.wait_for(starting, TIMEOUT)
        assert await manager.wait() == 0
        await manager.stop()

    asyncio.run(main())
    assert list(tmp_path.iterdir()) == []


def test_a_plugin_directory_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")

    async def main() -> None:
        for where in (tmp_path / "file", tmp_path / "file" / "below"):
            with pytest.raises(ValueError, match="is not a directory"):
                await Manager([NullPlugin(devices=null_devices())], where).start()

    asyncio.run(main())


def test_losing_the_kubelet_drops_readiness_and_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ready: list[bool] = []

    async def main() -> None:
        hooks = ManagerHooks(on_ready=lambda resource, value: ready.append(value))
        manager = Manager([NullPlugin(devices=null_devices())], tmp_path, hooks)
        await manager.start()
        try:
            async with kubelet(tmp_path) as sim:
                await registered(sim)
                assert manager.registered("example.com/null")
            # The simulator exited (without the restart wipe of our socket).
            assert (tmp_path / manager.servers[0].socket_path.name).exists()
            await eventually("the registration lost", lambda: not manager.registered("example.com/null"), TIMEOUT, 0.01)
            async with kubelet(tmp_path) as sim:
                await registered(sim)
                await eventually("registered again", lambda: manager.registered("example.com/null"), TIMEOUT, 0.01)
        finally:
            await manager.stop()

    with caplog.at_level(logging.INFO, "kubedevice"):
        asyncio.run(main())
    transitions = [value for i, value in enumerate(ready) if i == 0 or ready[i - 1] != value]
    # each simulator's start wipes our socket (False), registration (True), its exit (False)
    assert transitions[:3] == [False, True, False] and transitions[-2:] == [True, False], transitions
    lost = [r.getMessage() for r in caplog.records if "lost the kubelet" in r.getMessage()]
    assert len(lost) >= 2 and all("example.com/null" in line for line in lost), caplog.text  # one per exit


class _StoppingKubelet(pb_grpc.RegistrationServicer):  # type: ignore[misc]
    """A kubelet whose Register ends in CANCELLED: what the simulator answered when it stopped
    during the call (seen in 1 of ~60 restarts of benchmarks/core.py)."""

    async def Register(self, request: pb.RegisterRequest, context: aio.ServicerContext[Any, Any]) -> pb.Empty:
        await context.abort(grpc.StatusCode.CANCELLED, "")
        return pb.Empty()


def test_a_register_call_cut_by_a_kubelet_stop_is_not_a_rejection(tmp_path: Path) -> None:
    """Taken as a rejection, it stopped the resource for good after a kubelet restart."""

    async def main() -> None:
        kubelet_sock = tmp_path / "kubelet.sock"
        server = aio.server()
        pb_grpc.add_RegistrationServicer_to_server(_StoppingKubelet(), server)
        server.add_insecure_port(f"unix://{kubelet_sock}")
        await server.start()
        try:
            with pytest.raises(KubeletUnavailable, match="the kubelet went away while answering"):
                await register(str(kubelet_sock), "x.sock", "example.com/null", (False, False))
        finally:
            await server.stop(None)

    asyncio.run(main())
