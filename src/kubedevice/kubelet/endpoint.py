"""The kubelet's client side of one registered plugin (``plugin/v1beta1/client.go``, ``endpoint.go``)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from ..api import pb, pb_grpc
from ..api.channel import wait_ready
from ..errors import KubedeviceError
from .model import PluginOptions

FAILED_TO_DIAL = "failed to dial device plugin:"


class DialError(KubedeviceError):
    """The plugin's socket did not accept a gRPC connection within the dial timeout."""


def go_error(err: grpc.aio.AioRpcError) -> str:
    """An RPC error spelled as grpc-go prints it, since the kubelet embeds that text in its messages."""
    code = "".join(part.capitalize() for part in err.code().name.split("_"))
    return f"rpc error: code = {code} desc = {err.details() or ''}"


def endpoint_path(plugin_dir: Path, endpoint: str) -> Path:
    """``filepath.Join(dir, endpoint)``: unlike ``Path /``, an absolute endpoint stays inside ``dir``."""
    return Path(os.path.normpath(f"{plugin_dir}/{endpoint}"))


class Endpoint:
    """A dialled plugin: its channel and stub. Closing the channel ends its ListAndWatch stream."""

    def __init__(self, resource: str, endpoint: str, channel: grpc.aio.Channel) -> None:
        self.resource = resource
        self.endpoint = endpoint
        self._channel = channel
        self._stub: Any = pb_grpc.DevicePluginStub(channel)
        self.closed = False

    @classmethod
    async def dial(cls, resource: str, endpoint: str, socket: Path, timeout: float) -> Endpoint:
        """Block until connected, as the kubelet's ``grpc.WithBlock`` dial does, or fail after ``timeout``."""
        channel = grpc.aio.insecure_channel(f"unix://{socket}")
        try:
            await wait_ready(channel, timeout)
        except TimeoutError:
            await channel.close(None)
            raise DialError(f"{FAILED_TO_DIAL} context deadline exceeded") from None
        return cls(resource, endpoint, channel)

    async def options(self) -> PluginOptions:
        reply: pb.DevicePluginOptions = await self._stub.GetDevicePluginOptions(pb.Empty())
        return PluginOptions(reply.pre_start_required, reply.get_preferred_allocation_available)

    async def list_and_watch(self) -> AsyncIterator[pb.ListAndWatchResponse]:
        async for reply in self._stub.ListAndWatch(pb.Empty()):
            yield reply

    async def preferred(self, request: pb.PreferredAllocationRequest) -> pb.PreferredAllocationResponse:
        reply: pb.PreferredAllocationResponse = await self._stub.GetPreferredAllocation(request)
        return reply

    async def allocate(self, request: pb.AllocateRequest) -> pb.AllocateResponse:
        """No deadline: the kubelet calls Allocate with ``context.Background()``."""
        reply: pb.AllocateResponse = await self._stub.Allocate(request)
        return reply

    async def pre_start(self, request: pb.PreStartContainerRequest, timeout: float) -> None:
        await self._stub.PreStartContainer(request, timeout=timeout)

    async def close(self) -> None:
        """Close the channel; calls still running on it end with ``CancelledError``."""
        self.closed = True
        await self._channel.close(None)
