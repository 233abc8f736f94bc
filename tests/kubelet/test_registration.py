"""Register: the kubelet's checks, messages and order of operations, over real unix sockets."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import grpc
import pytest

from kubedevice.kubelet import KubeletSimulator, PluginOptions

from .rawplugin import RawPlugin, run


async def _refusal(plugin: RawPlugin, **kwargs: str) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await plugin.register(**kwargs)
    return caught.value


def test_start_removes_stale_sockets_only(tmp_path: Path) -> None:
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(tmp_path / "old-plugin.sock"))
    stale.close()
    (tmp_path / "notes.txt").write_text("not a socket")
    (tmp_path / "kubelet_internal_checkpoint").write_text("{}")

    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        before = time.monotonic()
        await sim.start()
        try:
            assert not (tmp_path / "old-plugin.sock").exists()
            assert (tmp_path / "notes.txt").read_text() == "not a socket"
            assert (tmp_path / "kubelet_internal_checkpoint").exists()
            assert sim.kubelet_sock_created_at >= before
            probe = socket.socket(socket.AF_UNIX)
            probe.connect(str(tmp_path / "kubelet.sock"))
            probe.close()
        finally:
            await sim.stop()
        assert not (tmp_path / "kubelet.sock").exists()

    run(main())


def test_accepted_registration_reads_options_and_devices(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        plugin = RawPlugin(tmp_path, pre_start_required=True, preferred_available=True)
        await plugin.serve()
        try:
            await plugin.register(pre_start_required=True, get_preferred_allocation_available=True)
            await sim.wait_until(lambda: sim.capacity().get("example.com/null") == 4, 5)
            reg = sim.registrations[-1]
            assert (reg.version, reg.endpoint, reg.resource_name, reg.error) == (
                "v1beta1",
                plugin.endpoint,
                "example.com/null",
                None,
            )
            resource = sim.resources["example.com/null"]
            assert resource.options == PluginOptions(True, True)
            assert resource.connected and resource.stopped_at is None
            assert resource.endpoint == plugin.endpoint
            assert sim.allocatable() == {"example.com/null": 4}
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"version": "v1alpha"},
            'requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]',
        ),
        ({"resource": "null"}, 'the ResourceName "null" is invalid'),
        ({"resource": "kubernetes.io/null"}, 'the ResourceName "kubernetes.io/null" is invalid'),
        ({"resource": "requests.example.com/null"}, 'the ResourceName "requests.example.com/null" is invalid'),
        ({"resource": "Example.com/null"}, 'the ResourceName "Example.com/null" is invalid'),
        ({"resource": "example.com/bad name"}, 'the ResourceName "example.com/bad name" is invalid'),
        ({"resource": "example.com/a/b"}, 'the ResourceName "example.com/a/b" is invalid'),
    ],
)
def test_refused_registrations(tmp_path: Path, kwargs: dict[str, str], message: str) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        await plugin.serve()
        try:
            err = await _refusal(plugin, **kwargs)
            assert err.code() == grpc.StatusCode.UNKNOWN
            assert err.details() == message
            assert sim.registrations[-1].error == message
            assert plugin.options_called_at == []  # refused before dialling
            assert sim.resources == {}
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


def test_a_second_plugin_for_a_served_resource_replaces_the_first(tmp_path: Path) -> None:
    """As the kubelet's PluginConnected does (api.proto's comment promises a refusal; the code replaces)."""

    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        first = RawPlugin(tmp_path, endpoint="first.sock")
        second = RawPlugin(tmp_path, endpoint="second.sock")
        await first.serve()
        await second.serve()
        try:
            await first.register()
            await second.register()
            assert [r.error for r in sim.registrations] == [None, None]
            assert sim.resources["example.com/null"].endpoint == "second.sock"
            assert any("second.sock replaces first.sock" in e for e in sim.events)
            await second.register()  # the same endpoint again is that plugin reconnecting
            assert sim.registrations[-1].error is None
        finally:
            await sim.stop()
            await first.stop()
            await second.stop()

    run(main())


def test_kubelet_dials_before_answering(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path, dial_timeout=5)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        try:
            register = asyncio.create_task(plugin.register())
            await asyncio.sleep(0.3)
            assert not register.done()  # the kubelet is still dialling a socket that does not exist
            await plugin.serve()
            await register
            answered = time.monotonic()
            assert plugin.options_called_at and plugin.options_called_at[0] < answered
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


def test_plugin_not_serving_gets_dial_error(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path, dial_timeout=0.5)
        await sim.start()
        try:
            err = await _refusal(RawPlugin(tmp_path))
            assert err.details() == "failed to dial device plugin: context deadline exceeded"
            assert sim.resources == {}
        finally:
            await sim.stop()

    run(main())


def test_options_rpc_failure_fails_registration(tmp_path: Path) -> None:
    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        plugin = RawPlugin(tmp_path)
        plugin.fail["GetDevicePluginOptions"] = grpc.StatusCode.UNIMPLEMENTED
        await plugin.serve()
        try:
            err = await _refusal(plugin)
            assert err.details() == (
                "failed to get device plugin options: rpc error: code = Unimplemented "
                "desc = GetDevicePluginOptions refused by test"
            )
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())


def test_options_only_in_register_request_are_not_used(tmp_path: Path) -> None:
    """Current kubelets use the GetDevicePluginOptions answer; the request's copy is only recorded."""

    async def main() -> None:
        sim = KubeletSimulator(tmp_path)
        await sim.start()
        plugin = RawPlugin(tmp_path)  # answers GetDevicePluginOptions with all options off
        await plugin.serve()
        try:
            await plugin.register(pre_start_required=True, get_preferred_allocation_available=True)
            assert sim.registrations[-1].options == PluginOptions(True, True)
            assert sim.resources["example.com/null"].options == PluginOptions(False, False)
        finally:
            await sim.stop()
            await plugin.stop()

    run(main())
