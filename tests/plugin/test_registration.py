"""Registration with the kubelet simulator: fields, options, waiting, rejection, restarts."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import grpc
import pytest

from kubedevice.api import KUBELET_SOCKET, VERSION, pb, pb_grpc
from kubedevice.names import endpoint_for, extended_resource_name_error
from kubedevice.plugin.manager import Manager
from kubedevice.testing.waiting import eventually

from .conftest import TIMEOUT, NullPlugin, client, kubelet, null_devices, registered, running


def test_registers_once_serving_with_bare_endpoint_and_options(tmp_path: Path) -> None:
    async def main() -> None:
        async with kubelet(tmp_path) as sim, running([NullPlugin(devices=null_devices())], tmp_path):
            await registered(sim)
            (reg,) = sim.registrations
            assert reg.error is None
            assert (reg.version, reg.resource_name) == (VERSION, "example.com/null")
            assert reg.endpoint == endpoint_for("example.com/null") and "/" not in reg.endpoint
            assert reg.options.get_preferred_allocation_available and not reg.options.pre_start_required
            async with client(tmp_path) as stub:
                options = await stub.GetDevicePluginOptions(pb.Empty())
            assert options.get_preferred_allocation_available == reg.options.get_preferred_allocation_available
            assert options.pre_start_required == reg.options.pre_start_required
            assert sim.capacity()["example.com/null"] == 4

    asyncio.run(main())


def test_waits_for_a_late_kubelet_without_polling(tmp_path: Path) -> None:
    async def main() -> None:
        async with running([NullPlugin(devices=null_devices())], tmp_path):
            await asyncio.sleep(0.2)  # no kubelet yet: nothing to do but wait
            assert not (tmp_path / KUBELET_SOCKET).exists()
            async with kubelet(tmp_path) as sim:
                await registered(sim)
                latency = sim.registrations[0].received_at - sim.kubelet_sock_created_at
                assert 0 <= latency < 5.0  # inotify, not a poll; how fast: benchmarks/core.py

    asyncio.run(main())


@pytest.mark.parametrize(
    "name",
    ["null", "kubernetes.io/null", "requests.example.com/null", "example.com/", "Example.com/x", "a/b/c"],
)
def test_bad_resource_names_fail_locally(tmp_path: Path, name: str) -> None:
    assert extended_resource_name_error(name)
    with pytest.raises(ValueError, match="resource name"):
        Manager([NullPlugin(resource_name=name)], tmp_path)
    assert not list(tmp_path.iterdir())


def test_good_resource_names_pass() -> None:
    for name in ("example.com/null", "nvidia.com/gpu", "a.b-c.io/x_y.z", "vendor.io/A1"):
        assert extended_resource_name_error(name) is None, name


def test_rejected_registration_stops_the_resource_and_exits_non_zero(tmp_path: Path) -> None:
    """A plugin serving outside the kubelet's directory: the kubelet cannot dial it back and refuses."""

    async def main() -> None:
        kubelet_dir, elsewhere = tmp_path / "kubelet", tmp_path / "elsewhere"
        kubelet_dir.mkdir()
        elsewhere.mkdir()
        async with kubelet(kubelet_dir, dial_timeout=0.5) as sim:
            manager = Manager([NullPlugin(devices=null_devices())], elsewhere)
            manager.kubelet_socket = kubelet_dir / KUBELET_SOCKET
            await manager.start()
            code = await asyncio.wait_for(manager.wait(), TIMEOUT)
            await manager.stop()
            assert code == 1
            assert sim.registrations[-1].error
            assert "example.com/null" not in sim.allocatable()
            assert not list(elsewhere.iterdir())  # our socket is gone with the resource

    asyncio.run(main())


def test_kubelet_restart_reregisters_fast_and_streams_resume(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = NullPlugin(devices=null_devices())
        async with kubelet(tmp_path) as sim, running([plugin], tmp_path):
            await registered(sim)
            for round_ in range(3):
                before = len(sim.registrations)
                await sim.restart()
                await sim.wait_until(lambda: len(sim.registrations) > before, TIMEOUT)  # noqa: B023 - awaited at once
                await registered(sim)
                latency = sim.registrations[-1].received_at - sim.kubelet_sock_created_at
                # a bound on the mechanism (the socket's appearance wakes the plugin; no poll period):
                # how fast is measured in benchmarks/core.py, not asserted where load decides it
                assert latency < 5.0, f"round {round_}: {latency:.3f} s"
            plugin.set_health("null-0", "Unhealthy")
            await sim.wait_until(lambda: sim.allocatable()["example.com/null"] == 3, TIMEOUT)

    asyncio.run(main())


def test_our_socket_deleted_alone_is_served_again(tmp_path: Path) -> None:
    async def main() -> None:
        async with kubelet(tmp_path) as sim, running([NullPlugin(devices=null_devices())], tmp_path) as manager:
            await registered(sim)
            sock = tmp_path / endpoint_for("example.com/null")
            sock.unlink()
            await eventually(
                "our socket served and registered again",
                lambda: sock.exists() and manager.registered("example.com/null"),
                TIMEOUT,
                0.01,
            )
            assert manager.servers[0].owns_socket()
            await sim.wait_until(lambda: len(sim.registrations) >= 2, TIMEOUT)

    asyncio.run(main())


def test_several_resources_in_one_process(tmp_path: Path) -> None:
    async def main() -> None:
        plugins = [NullPlugin(resource_name=f"example.com/r{i}", devices=null_devices(i + 1)) for i in range(3)]
        async with kubelet(tmp_path) as sim, running(plugins, tmp_path):
            expected = {"example.com/r0": 1, "example.com/r1": 2, "example.com/r2": 3}
            await sim.wait_until(lambda: sim.capacity() == expected, TIMEOUT)
            assert {r.endpoint for r in sim.registrations} == {endpoint_for(p.resource_name) for p in plugins}

    asyncio.run(main())


def test_two_plugins_for_one_resource_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="served twice"):
        Manager([NullPlugin(), NullPlugin()], tmp_path)


class _ClosingOnceKubelet:
    """A Registration service that refuses the first Register the way kubelet v1.36.3 does when the
    resource's old stream ends during the new client's connect (handler.go runClient), then accepts."""

    def __init__(self) -> None:
        self.requests: list[pb.RegisterRequest] = []

    async def Register(self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext) -> pb.Empty:  # type: ignore[type-arg]
        self.requests.append(request)
        if len(self.requests) == 1:
            await context.abort(
                grpc.StatusCode.UNKNOWN,
                "failed to get device plugin options: rpc error: "
                "code = Canceled desc = grpc: the client connection is closing",
            )
        return pb.Empty()


def test_registers_again_when_the_kubelet_closed_the_new_connection_with_the_old(tmp_path: Path) -> None:
    async def main() -> None:
        service = _ClosingOnceKubelet()
        server = grpc.aio.server()
        pb_grpc.add_RegistrationServicer_to_server(service, server)
        server.add_insecure_port(f"unix://{tmp_path / KUBELET_SOCKET}")
        await server.start()
        try:
            async with running([NullPlugin(devices=null_devices())], tmp_path) as manager:
                await eventually("a second registration", lambda: len(service.requests) >= 2, TIMEOUT, 0.02)
                assert len(service.requests) == 2
                assert all(r.rejected is None for r in manager._resources.values())
        finally:
            await server.stop(None)

    asyncio.run(main())


def test_a_resource_served_again_registers_only_after_the_kubelet_let_go_of_the_old(tmp_path: Path) -> None:
    """The kubelet answers the end of the old stream by disconnecting whatever client is registered
    under the resource's name; registering the re-served resource at once lost it on kubelet v1.36.3
    (tests/e2e/test_serve.py, SIGHUP reload)."""

    async def main() -> None:
        async with kubelet(tmp_path) as sim, running([NullPlugin(devices=null_devices())], tmp_path) as manager:
            await registered(sim)
            await manager.remove("example.com/null")
            removed = time.monotonic()
            await manager.add(NullPlugin(devices=null_devices()))
            await sim.wait_until(lambda: len(sim.registrations) == 2, TIMEOUT)
            assert sim.registrations[1].received_at - removed >= 0.5
            await registered(sim)

    asyncio.run(main())
