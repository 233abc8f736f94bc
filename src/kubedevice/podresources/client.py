"""A client of the kubelet's PodResources API (``<kubelet root>/pod-resources/kubelet.sock``).

One channel per :class:`PodResourcesClient`, kept across calls: the daemons ask on every
scrape, and grpc reconnects by itself when the kubelet restarts. Every failure is one
:class:`PodResourcesUnavailable` whose text says why in a line (no socket, nothing answering,
the API refused), so a caller can log it once and go on without the pods.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
from grpc import aio

from ..api import podresources_v1_pb2 as prpb
from ..api import podresources_v1_pb2_grpc as prpb_grpc
from ..api.channel import wait_ready
from ..api.convert import allocatable_from_pb, pod_resources_from_pb
from ..errors import KubedeviceError
from ..paths import socket_problem
from .model import Allocatable, Holder, PodResources, holders

SOCKET_DIR = "pod-resources"
SOCKET_NAME = "kubelet.sock"
DEFAULT_TIMEOUT = 5.0
MAX_MESSAGE = 16 * 1024 * 1024
"""The kubelet's own e2e client reads answers of up to 16 MiB (``defaultPodResourcesMaxSize``);
grpc's default of 4 MiB could cut a List on a node with many pods."""


def socket_in(kubelet_root: Path) -> Path:
    """Where a kubelet whose ``--root-dir`` is ``kubelet_root`` serves the API."""
    return kubelet_root / SOCKET_DIR / SOCKET_NAME


def beside_plugin_dir(plugin_dir: Path) -> Path:
    """The socket of the kubelet whose device plugin directory is ``plugin_dir``: the kubelet keeps
    ``device-plugins/`` and ``pod-resources/`` side by side in its root (the first does not follow
    ``--root-dir``, so a moved root needs the socket configured)."""
    return socket_in(plugin_dir.parent)


class PodResourcesUnavailable(KubedeviceError):
    """The API cannot be read here; ``str()`` is one line naming the socket and the reason."""


class PodResourcesClient:
    """``async with PodResourcesClient(socket) as client: await client.list()``."""

    def __init__(self, socket: Path, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.socket = socket
        self.timeout = timeout
        self._channel: aio.Channel | None = None
        self._stub: Any = None

    async def __aenter__(self) -> PodResourcesClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None:
            await channel.close(None)

    async def list(self) -> list[PodResources]:
        """Every active pod on the node with its containers' devices (``List``)."""
        reply: prpb.ListPodResourcesResponse = await self._call("List", prpb.ListPodResourcesRequest())
        return [pod_resources_from_pb(p) for p in reply.pod_resources]

    async def get(self, namespace: str, name: str) -> PodResources:
        """One pod (``Get``); the kubelet answers an unknown pod with an error, raised here."""
        request = prpb.GetPodResourcesRequest(pod_name=name, pod_namespace=namespace)
        reply: prpb.GetPodResourcesResponse = await self._call("Get", request)
        return pod_resources_from_pb(reply.pod_resources)

    async def allocatable(self) -> Allocatable:
        """Every healthy device-plugin device and the CPUs and memory on offer (``GetAllocatableResources``)."""
        reply: prpb.AllocatableResourcesResponse = await self._call(
            "GetAllocatableResources", prpb.AllocatableResourcesRequest()
        )
        return allocatable_from_pb(reply)

    async def _call(self, method: str, request: Any) -> Any:
        stub = await self._connect()
        try:
            return await getattr(stub, method)(request, timeout=self.timeout)
        except aio.AioRpcError as err:
            if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                await self.close()  # a kubelet that went away: dial afresh next time
                _check_socket(self.socket)  # its socket gone: say that, not grpc's connect error
            raise PodResourcesUnavailable(f"{self.socket}: {method}: {_rpc_reason(err)}") from None

    async def _connect(self) -> Any:
        if self._stub is not None:
            return self._stub
        _check_socket(self.socket)
        channel = aio.insecure_channel(
            f"unix:{self.socket}",  # not unix://: grpc then takes only paths of <= 105 bytes
            options=[("grpc.max_receive_message_length", MAX_MESSAGE)],
        )
        try:
            await wait_ready(channel, self.timeout)
        except TimeoutError:
            await channel.close(None)
            raise PodResourcesUnavailable(
                f"{self.socket}: nothing accepted a connection within {self.timeout:g} s"
            ) from None
        self._channel, self._stub = channel, prpb_grpc.PodResourcesListerStub(channel)
        return self._stub


def _check_socket(path: Path) -> None:
    """A missing socket is the common case (no kubelet, or one without the API): say so plainly
    rather than wait out the connection timeout."""
    problem = socket_problem(path)
    if problem is not None:
        raise PodResourcesUnavailable(problem)


def _rpc_reason(err: aio.AioRpcError) -> str:
    code = err.code()
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return "this kubelet does not serve it"
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return f"refused by the kubelet's rate limit ({err.details()})"
    return f"{code.name.lower()}: {err.details() or 'no details'}"


async def read_holders(socket: Path, timeout: float = DEFAULT_TIMEOUT) -> list[Holder]:
    """Who holds which device on the node now, in one ``List``."""
    async with PodResourcesClient(socket, timeout) as client:
        return holders(await client.list())


def read_holders_sync(socket: Path, timeout: float = DEFAULT_TIMEOUT) -> list[Holder]:
    """:func:`read_holders` for a command line without an event loop (``discover``, ``dra available``)."""
    return asyncio.run(read_holders(socket, timeout))
