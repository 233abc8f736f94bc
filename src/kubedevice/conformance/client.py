"""A direct client of one plugin socket, so the checker sees exactly what the plugin sent.

The simulator converts answers to plain data and drops what it cannot read; the checker must
judge the raw messages instead. Every call has a deadline: a hung plugin is a finding, never
a hung checker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from ..api import PRE_START_TIMEOUT_SECONDS, pb, pb_grpc
from ..api.channel import wait_ready
from .model import RPC_TIMEOUT_S


class PluginClient:
    """One channel to ``socket``; use as ``async with PluginClient(path) as client``."""

    def __init__(self, socket: Path, timeout: float = RPC_TIMEOUT_S) -> None:
        self.socket = socket
        self.timeout = timeout
        self._channel = grpc.aio.insecure_channel(f"unix://{socket}")
        self._stub: Any = pb_grpc.DevicePluginStub(self._channel)

    async def __aenter__(self) -> PluginClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._channel.close(None)

    async def connect(self) -> None:
        """Wait for the socket to accept a connection; ``TimeoutError`` if it does not."""
        await wait_ready(self._channel, self.timeout)

    async def options(self) -> pb.DevicePluginOptions:
        reply: pb.DevicePluginOptions = await self._stub.GetDevicePluginOptions(pb.Empty(), timeout=self.timeout)
        return reply

    async def first_list(self, timeout: float) -> tuple[pb.ListAndWatchResponse, float]:
        """Open ListAndWatch and return its first message and how long it took; the stream is then closed."""
        started = time.monotonic()
        call = self._stub.ListAndWatch(pb.Empty())
        try:
            message = await asyncio.wait_for(call.read(), timeout)
        finally:
            call.cancel()
        if not isinstance(message, pb.ListAndWatchResponse):
            raise EOFError("ListAndWatch ended before its first message")
        return message, time.monotonic() - started

    async def allocate(self, containers: Sequence[Sequence[str]]) -> pb.AllocateResponse:
        request = pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=c) for c in containers]
        )
        reply: pb.AllocateResponse = await self._stub.Allocate(request, timeout=self.timeout)
        return reply

    async def preferred(
        self, requests: Sequence[pb.ContainerPreferredAllocationRequest]
    ) -> pb.PreferredAllocationResponse:
        request = pb.PreferredAllocationRequest(container_requests=requests)
        reply: pb.PreferredAllocationResponse = await self._stub.GetPreferredAllocation(request, timeout=self.timeout)
        return reply

    async def pre_start(self, device_ids: Sequence[str]) -> None:
        """Under the kubelet's own PreStartContainer deadline."""
        request = pb.PreStartContainerRequest(devices_ids=device_ids)
        await self._stub.PreStartContainer(request, timeout=float(PRE_START_TIMEOUT_SECONDS))
