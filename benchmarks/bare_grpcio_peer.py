"""The floor for a Python device plugin: grpc.aio and the generated stubs, no kubedevice code.

Run as ``python benchmarks/bare_grpcio_peer.py PLUGIN_DIR COUNT``: serves COUNT devices of
``example.com/null`` on ``bare.sock`` with one fixed Allocate answer, registers once, and
serves until killed. benchmarks/contention.py times it next to kubedevice and a Go plugin, so
what kubedevice adds on top of grpcio is measured, not guessed.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from grpc import aio

from kubedevice.api import pb, pb_grpc


class Bare(pb_grpc.DevicePluginServicer):  # type: ignore[misc]
    def __init__(self, count: int) -> None:
        self.devices = [pb.Device(ID=f"dev-{i}", health="Healthy") for i in range(count)]
        self.answer = pb.ContainerAllocateResponse(
            devices=[pb.DeviceSpec(host_path="/dev/null", container_path="/dev/null", permissions="rw")]
        )

    async def GetDevicePluginOptions(self, request: pb.Empty, context: Any) -> pb.DevicePluginOptions:
        return pb.DevicePluginOptions()

    async def ListAndWatch(self, request: pb.Empty, context: Any) -> AsyncIterator[pb.ListAndWatchResponse]:
        yield pb.ListAndWatchResponse(devices=self.devices)
        await asyncio.Event().wait()

    async def Allocate(self, request: pb.AllocateRequest, context: Any) -> pb.AllocateResponse:
        return pb.AllocateResponse(container_responses=[self.answer for _ in request.container_requests])


async def main(plugin_dir: Path, count: int) -> None:
    server = aio.server()
    pb_grpc.add_DevicePluginServicer_to_server(Bare(count), server)
    server.add_insecure_port(f"unix://{plugin_dir / 'bare.sock'}")
    await server.start()
    async with aio.insecure_channel(f"unix://{plugin_dir / 'kubelet.sock'}") as channel:
        request = pb.RegisterRequest(version="v1beta1", endpoint="bare.sock", resource_name="example.com/null")
        await pb_grpc.RegistrationStub(channel).Register(request, timeout=30, wait_for_ready=True)
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), int(sys.argv[2])))
