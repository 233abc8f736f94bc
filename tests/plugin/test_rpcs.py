"""The DevicePlugin RPCs over a real unix socket: streams, Allocate, preferred allocation, PreStart."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path

import grpc
import pytest
from grpc import aio

from kubedevice import ContainerAllocation, Device, DeviceSpec, Health, Plugin
from kubedevice.api import pb
from kubedevice.testing.waiting import eventually

from .conftest import (
    TIMEOUT,
    NullPlugin,
    allocate_request,
    client,
    next_message,
    null_devices,
    preferred_request,
    running,
)


def test_every_stream_gets_the_full_list_then_every_change(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = NullPlugin(devices=null_devices(numa=2))
        async with running([plugin], tmp_path), client(tmp_path) as stub:
            streams = [stub.ListAndWatch(pb.Empty()) for _ in range(3)]
            for stream in streams:
                first = await next_message(stream)
                assert [d.ID for d in first.devices] == [f"null-{i}" for i in range(4)]
                assert [n.ID for n in first.devices[1].topology.nodes] == [1]
            plugin.set_health("null-2", Health.UNHEALTHY)  # health change
            for stream in streams:
                health = {d.ID: d.health for d in (await next_message(stream)).devices}
                assert health == {"null-0": "Healthy", "null-1": "Healthy", "null-2": "Unhealthy", "null-3": "Healthy"}
            plugin.publish(plugin.devices()[:2])  # removal
            for stream in streams:
                assert [d.ID for d in (await next_message(stream)).devices] == ["null-0", "null-1"]
            plugin.publish([*plugin.devices(), Device("null-9")])  # addition
            for stream in streams:
                assert [d.ID for d in (await next_message(stream)).devices][-1] == "null-9"

    asyncio.run(main())


def test_publish_from_another_thread_reaches_streams(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = NullPlugin(devices=null_devices())
        async with running([plugin], tmp_path), client(tmp_path) as stub:
            stream = stub.ListAndWatch(pb.Empty())
            await next_message(stream)
            worker = threading.Thread(target=plugin.set_health, args=("null-1", Health.UNHEALTHY))
            worker.start()
            message = await next_message(stream)
            worker.join()
            assert [d.health for d in message.devices].count("Unhealthy") == 1

    asyncio.run(main())


def test_stream_ends_cleanly_when_the_client_leaves(tmp_path: Path) -> None:
    async def main() -> None:
        async with running([NullPlugin(devices=null_devices())], tmp_path) as manager:
            server = manager.servers[0]
            async with client(tmp_path) as stub:
                stream = stub.ListAndWatch(pb.Empty())
                await next_message(stream)
                assert server.open_streams == 1
                stream.cancel()
            await eventually("the stream closed", lambda: server.open_streams == 0, TIMEOUT, 0.01)
            async with client(tmp_path) as stub:  # and the server still serves
                assert len((await next_message(stub.ListAndWatch(pb.Empty()))).devices) == 4

    asyncio.run(main())


def test_allocate_answers_one_response_per_container(tmp_path: Path) -> None:
    async def main() -> None:
        async with running([NullPlugin(devices=null_devices())], tmp_path), client(tmp_path) as stub:
            response = await stub.Allocate(allocate_request(["null-0"], ["null-1", "null-2"]))
            assert len(response.container_responses) == 2
            for container in response.container_responses:
                assert [(d.host_path, d.container_path, d.permissions) for d in container.devices] == [
                    ("/dev/null", "/dev/null", "rw")
                ]
                assert dict(container.envs) == {"NULL": "1"}

    asyncio.run(main())


def test_allocate_answers_the_grant_a_device_has_now(tmp_path: Path) -> None:
    """Answers are reused per grant object: a grant replaced by publish() must not answer from before."""

    async def main() -> None:
        plugin = NullPlugin(devices=null_devices())
        async with running([plugin], tmp_path), client(tmp_path) as stub:
            for _ in range(2):
                (first,) = (await stub.Allocate(allocate_request(["null-0"]))).container_responses
                assert [d.host_path for d in first.devices] == ["/dev/null"]
            zero = ContainerAllocation(devices=[DeviceSpec("/dev/zero")], envs={"ZERO": "1"})
            plugin.publish([Device("null-0", grant=zero), *plugin.devices()[1:]])
            (now,) = (await stub.Allocate(allocate_request(["null-0"]))).container_responses
            assert [d.host_path for d in now.devices] == ["/dev/zero"] and dict(now.envs) == {"ZERO": "1"}
            (other,) = (await stub.Allocate(allocate_request(["null-1"]))).container_responses
            assert [d.host_path for d in other.devices] == ["/dev/null"]

    asyncio.run(main())


async def _status(call: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(aio.AioRpcError) as info:
        await call  # type: ignore[misc]
    return info.value.code(), info.value.details() or ""


def test_allocate_refuses_unknown_repeated_and_unhealthy_devices(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = NullPlugin(devices=null_devices())
        plugin.set_health("null-3", Health.UNHEALTHY)
        async with running([plugin], tmp_path), client(tmp_path) as stub:
            code, message = await _status(stub.Allocate(allocate_request(["null-0"], ["gpu-7", "null-1", "gpu-2"])))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert "gpu-2, gpu-7" in message and "container request 1" in message
            code, message = await _status(stub.Allocate(allocate_request(["null-0", "null-0"])))
            assert code == grpc.StatusCode.INVALID_ARGUMENT and "null-0" in message
            code, message = await _status(stub.Allocate(allocate_request([])))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            code, message = await _status(stub.Allocate(allocate_request(["null-3", "null-1"])))
            assert code == grpc.StatusCode.FAILED_PRECONDITION and "null-3" in message

    asyncio.run(main())


class Fragile(NullPlugin):
    def allocate(self, devices: Sequence[Device]) -> ContainerAllocation:
        if devices[0].id == "null-0":
            raise RuntimeError("firmware said no")
        return super().allocate(devices)  # type: ignore[return-value]


def test_allocate_hook_crash_is_internal_and_the_daemon_keeps_serving(tmp_path: Path) -> None:
    async def main() -> None:
        async with running([Fragile(devices=null_devices())], tmp_path), client(tmp_path) as stub:
            code, message = await _status(stub.Allocate(allocate_request(["null-0"])))
            assert code == grpc.StatusCode.INTERNAL and "firmware said no" in message
            response = await stub.Allocate(allocate_request(["null-1"]))
            assert len(response.container_responses) == 1

    asyncio.run(main())


class AsyncGrant(Plugin):
    resource_name = "example.com/async"

    async def allocate(self, devices: Sequence[Device]) -> ContainerAllocation:
        await asyncio.sleep(0)
        return ContainerAllocation(
            envs={"IDS": ",".join(d.id for d in devices)},
            annotations={"example.com/ids": "x"},
            cdi_devices=["example.com/null=" + devices[0].id],
        )


def test_async_allocate_hook_and_all_artefacts(tmp_path: Path) -> None:
    async def main() -> None:
        async with (
            running([AsyncGrant(devices=null_devices())], tmp_path),
            client(tmp_path, "example.com/async") as stub,
        ):
            (container,) = (await stub.Allocate(allocate_request(["null-1", "null-2"]))).container_responses
            assert dict(container.envs) == {"IDS": "null-1,null-2"}
            assert dict(container.annotations) == {"example.com/ids": "x"}
            assert [c.name for c in container.cdi_devices] == ["example.com/null=null-1"]

    asyncio.run(main())


def test_preferred_allocation_contract_and_numa_packing(tmp_path: Path) -> None:
    async def main() -> None:
        devices = [Device(f"d{i}", numa_nodes=(0 if i < 2 else 1,)) for i in range(6)]
        async with running([NullPlugin(devices=devices)], tmp_path), client(tmp_path) as stub:
            ids = [d.id for d in devices]
            answer = await stub.GetPreferredAllocation(preferred_request(ids, ["d0"], 2))
            assert list(answer.container_responses[0].deviceIDs) == ["d0", "d1"]  # stays on node 0
            answer = await stub.GetPreferredAllocation(preferred_request(ids, [], 3))
            assert list(answer.container_responses[0].deviceIDs) == ["d2", "d3", "d4"]  # fullest node
            answer = await stub.GetPreferredAllocation(preferred_request(ids, ["d0"], 4))
            chosen = list(answer.container_responses[0].deviceIDs)
            assert chosen[0] == "d0" and len(set(chosen)) == 4 and set(chosen) <= set(ids)
            for available, must, size, fragment in [
                (ids, ["d0", "d1"], 1, "smaller than"),
                (ids[:2], [], 3, "larger than"),
                (ids[:2], ["d4"], 2, "d4"),
                (["d0", "zz9"], [], 1, "zz9"),
            ]:
                code, message = await _status(stub.GetPreferredAllocation(preferred_request(available, must, size)))
                assert code == grpc.StatusCode.INVALID_ARGUMENT and fragment in message, message

    asyncio.run(main())


class BadPolicy(NullPlugin):
    def preferred_allocation(self, available: Sequence[Device], must_include: Sequence[Device], size: int) -> list[str]:
        return [available[0].id] * size


def test_a_policy_breaking_the_contract_is_internal(tmp_path: Path) -> None:
    async def main() -> None:
        async with running([BadPolicy(devices=null_devices())], tmp_path), client(tmp_path) as stub:
            code, message = await _status(stub.GetPreferredAllocation(preferred_request(["null-0", "null-1"], [], 2)))
            assert code == grpc.StatusCode.INTERNAL and "repeats" in message

    asyncio.run(main())


class DevicesNotIds(NullPlugin):
    """The hook as a reader of an older writing-a-plugin.md wrote it: it returns the Devices it got."""

    def preferred_allocation(  # type: ignore[override]
        self, available: Sequence[Device], must_include: Sequence[Device], size: int
    ) -> list[Device]:
        return [*must_include, *[d for d in available if d not in must_include]][:size]


def test_a_policy_returning_devices_instead_of_ids_is_told_so(tmp_path: Path) -> None:
    async def main() -> None:
        async with running([DevicesNotIds(devices=null_devices())], tmp_path), client(tmp_path) as stub:
            code, message = await _status(stub.GetPreferredAllocation(preferred_request(["null-0", "null-1"], [], 1)))
            assert code == grpc.StatusCode.INTERNAL, (code, message)
            assert message == (
                "preferred_allocation returned Device objects, not device IDs: it gets Device objects and "
                "returns their IDs (return [device.id for device in chosen])"
            )

    asyncio.run(main())


def test_no_preferred_allocation_without_the_hook(tmp_path: Path) -> None:
    async def main() -> None:
        plain = Plugin("example.com/plain", null_devices())
        async with running([plain], tmp_path), client(tmp_path, "example.com/plain") as stub:
            options = await stub.GetDevicePluginOptions(pb.Empty())
            assert not options.get_preferred_allocation_available and not options.pre_start_required
            code, _ = await _status(stub.GetPreferredAllocation(preferred_request(["null-0"], [], 1)))
            assert code == grpc.StatusCode.UNIMPLEMENTED

    asyncio.run(main())


class Resetting(NullPlugin):
    def __init__(self) -> None:
        super().__init__(devices=null_devices())
        self.reset: list[list[str]] = []
        self.delay = 0.0

    def pre_start_container(self, devices: Sequence[Device]) -> None:
        import time

        time.sleep(self.delay)  # blocking device work runs off the event loop
        self.reset.append([d.id for d in devices])


def test_pre_start_hook_sets_the_option_runs_and_honours_the_deadline(tmp_path: Path) -> None:
    async def main() -> None:
        plugin = Resetting()
        async with running([plugin], tmp_path), client(tmp_path) as stub:
            assert (await stub.GetDevicePluginOptions(pb.Empty())).pre_start_required
            await stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["null-1", "null-2"]), timeout=TIMEOUT)
            assert plugin.reset == [["null-1", "null-2"]]
            code, message = await _status(stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["bogus"])))
            assert code == grpc.StatusCode.INVALID_ARGUMENT and "bogus" in message
            plugin.delay = 1.0
            code, _ = await _status(
                stub.PreStartContainer(pb.PreStartContainerRequest(devices_ids=["null-1"]), timeout=0.2)
            )
            assert code == grpc.StatusCode.DEADLINE_EXCEEDED
            stream = stub.ListAndWatch(pb.Empty())  # the loop was never blocked by the slow hook
            assert len((await next_message(stream)).devices) == 4

    asyncio.run(main())


def test_default_grants_merge_the_same_way_whatever_the_request_order(tmp_path: Path) -> None:
    devices = [
        Device(f"d{i}", grant=ContainerAllocation(envs={"WHO": f"d{i}"}, annotations={"k": f"d{i}"})) for i in range(3)
    ]

    async def main() -> None:
        async with running([NullPlugin(devices=devices)], tmp_path), client(tmp_path) as stub:
            answers = set()
            for order in (["d2", "d0", "d1"], ["d1", "d2", "d0"], ["d0", "d1", "d2"]):
                (container,) = (await stub.Allocate(allocate_request(order))).container_responses
                answers.add((container.envs["WHO"], container.annotations["k"]))
            assert answers == {("d0", "d0")}

    asyncio.run(main())


def test_an_allocate_answer_past_the_kubelets_4_mib_is_refused_naming_the_limit(tmp_path: Path) -> None:
    """The kubelet reads a plugin's answer with grpc's 4 MiB limit: past it, its own error names no plugin
    and no device (issue #27). The server answers RESOURCE_EXHAUSTED with the size and the limit."""

    async def main() -> None:
        big = ContainerAllocation(envs={"BIG": "x" * 5_000_000})
        plugin = NullPlugin(devices=[Device("big-0", grant=big), *null_devices(1)])
        async with running([plugin], tmp_path), client(tmp_path) as stub:
            with pytest.raises(aio.AioRpcError) as refused:
                await stub.Allocate(allocate_request(["big-0"]), timeout=TIMEOUT)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "over the 4,194,304 bytes (4 MiB) the kubelet accepts" in str(refused.value.details())
            ok = await stub.Allocate(allocate_request(["null-0"]), timeout=TIMEOUT)  # the rest still served
            assert ok.container_responses[0].envs["NULL"] == "1"

    asyncio.run(main())
