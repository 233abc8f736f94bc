"""A minimal device plugin written straight on the generated gRPC code, scripted by each test.

Deliberately independent of ``kubedevice.plugin``: the simulator is tested against the wire
protocol alone, the way a Go plugin would talk to it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import grpc

from kubedevice.api import pb, pb_grpc

TIMEOUT = 20.0
T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
    """Run one test's coroutine with a hard bound so that a hang fails instead of stalling CI."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def device(device_id: str, health: str = "Healthy", numa: list[int] | None = None) -> pb.Device:
    message = pb.Device(ID=device_id, health=health)
    if numa is not None:
        message.topology.nodes.extend(pb.NUMANode(ID=n) for n in numa)
    return message


class RawPlugin:
    """One DevicePlugin service on ``<plugin_dir>/<endpoint>``; knobs are plain attributes."""

    def __init__(
        self,
        plugin_dir: Path,
        resource: str = "example.com/null",
        devices: list[pb.Device] | None = None,
        *,
        endpoint: str | None = None,
        pre_start_required: bool = False,
        preferred_available: bool = False,
    ) -> None:
        self.plugin_dir = plugin_dir
        self.resource = resource
        self.endpoint = endpoint or resource.replace("/", "_") + ".sock"
        self.devices = devices if devices is not None else [device(f"dev-{i}") for i in range(4)]
        self.options = pb.DevicePluginOptions(
            pre_start_required=pre_start_required, get_preferred_allocation_available=preferred_available
        )
        self.preferred_answer: Callable[[pb.ContainerPreferredAllocationRequest], list[str]] | None = None
        self.fail: dict[str, grpc.StatusCode] = {}  # method name -> status to abort with
        self.pre_start_delay = 0.0
        self.empty_allocate = False
        self.grant_env: dict[str, str] = {}
        self.grant_mount: tuple[str, str] | None = None
        self.requests: dict[str, list[Any]] = {"Allocate": [], "GetPreferredAllocation": [], "PreStartContainer": []}
        self.options_called_at: list[float] = []
        self._streams: list[asyncio.Queue[list[pb.Device] | None]] = []
        self._server: grpc.aio.Server | None = None

    @property
    def socket(self) -> Path:
        return self.plugin_dir / self.endpoint

    async def serve(self) -> None:
        self._server = grpc.aio.server()
        pb_grpc.add_DevicePluginServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix://{self.socket}")
        await self._server.start()

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(None)
            self._server = None

    async def register(self, version: str = "v1beta1", resource: str | None = None, **options: bool) -> None:
        """Call Register on ``kubelet.sock``; raises ``grpc.aio.AioRpcError`` when refused."""
        async with grpc.aio.insecure_channel(f"unix://{self.plugin_dir / 'kubelet.sock'}") as channel:
            stub = pb_grpc.RegistrationStub(channel)
            request = pb.RegisterRequest(
                version=version,
                endpoint=self.endpoint,
                resource_name=resource or self.resource,
                options=pb.DevicePluginOptions(**options),
            )
            await stub.Register(request, timeout=TIMEOUT)

    def push(self, devices: list[pb.Device]) -> None:
        """Send a new device list on every open ListAndWatch stream."""
        self.devices = devices
        for queue in self._streams:
            queue.put_nowait(devices)

    def end_streams(self) -> None:
        for queue in self._streams:
            queue.put_nowait(None)

    # ---- the DevicePlugin service ----

    async def _maybe_fail(self, method: str, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        if method in self.fail:
            await context.abort(self.fail[method], f"{method} refused by test")

    async def GetDevicePluginOptions(self, request: pb.Empty, context: Any) -> pb.DevicePluginOptions:
        self.options_called_at.append(time.monotonic())
        await self._maybe_fail("GetDevicePluginOptions", context)
        return self.options

    async def ListAndWatch(self, request: pb.Empty, context: Any) -> AsyncIterator[pb.ListAndWatchResponse]:
        queue: asyncio.Queue[list[pb.Device] | None] = asyncio.Queue()
        self._streams.append(queue)
        queue.put_nowait(self.devices)
        try:
            while (devices := await queue.get()) is not None:
                yield pb.ListAndWatchResponse(devices=devices)
        finally:
            self._streams.remove(queue)

    async def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: Any
    ) -> pb.PreferredAllocationResponse:
        self.requests["GetPreferredAllocation"].append(request)
        await self._maybe_fail("GetPreferredAllocation", context)
        answers = [
            pb.ContainerPreferredAllocationResponse(deviceIDs=self.preferred_answer(r) if self.preferred_answer else [])
            for r in request.container_requests
        ]
        return pb.PreferredAllocationResponse(container_responses=answers)

    async def Allocate(self, request: pb.AllocateRequest, context: Any) -> pb.AllocateResponse:
        self.requests["Allocate"].append(request)
        await self._maybe_fail("Allocate", context)
        if self.empty_allocate:
            return pb.AllocateResponse()
        responses = []
        for r in request.container_requests:
            response = pb.ContainerAllocateResponse(
                envs={"DEVICES": ",".join(r.devices_ids), **self.grant_env},
                devices=[
                    pb.DeviceSpec(host_path=f"/dev/{i}", container_path=f"/dev/{i}", permissions="rw")
                    for i in r.devices_ids
                ],
            )
            if self.grant_mount:
                response.mounts.append(pb.Mount(host_path=self.grant_mount[0], container_path=self.grant_mount[1]))
            responses.append(response)
        return pb.AllocateResponse(container_responses=responses)

    async def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: Any
    ) -> pb.PreStartContainerResponse:
        self.requests["PreStartContainer"].append(request)
        await self._maybe_fail("PreStartContainer", context)
        await asyncio.sleep(self.pre_start_delay)
        return pb.PreStartContainerResponse()
