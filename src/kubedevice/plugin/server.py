"""Serve one :class:`Plugin` as the ``v1beta1.DevicePlugin`` gRPC service on a unix socket.

One asyncio event loop carries every stream and call: ListAndWatch streams wait on an
event that each device change replaces, so a change reaches all streams in one loop turn.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import grpc
from grpc import aio

from ..allocation.policies import AllocationRequestError, check_answer, check_request
from ..api import PRE_START_TIMEOUT_SECONDS, pb, pb_grpc
from ..api.convert import allocation_to_pb, ids, list_response, options_to_pb
from ..api.malformed import add_refusing_malformed
from ..device import MAX_MESSAGE_BYTES, ContainerAllocation, Device, Health
from ..unixsocket import clear_stale, listen
from .base import Plugin, PreferredAllocator, PreStarter, options_of

log = logging.getLogger(__name__)
T = TypeVar("T")
Ctx = aio.ServicerContext[Any, Any]
SOCKET_MODE = 0o600  # only the kubelet (root, or our own user) may connect
_PLAIN_RESULTS = (ContainerAllocation, list, tuple)  # what hooks return when not async: skip the awaitable test


def _device_ids(answer: object) -> list[str]:
    """``preferred_allocation``'s answer as the IDs it must be: the hook gets ``Device`` objects and
    returns their IDs, and a plugin written the other way round learns so in one INTERNAL line
    (which ``kubedevice check`` shows as its failure), not in a TypeError from deeper down."""
    if isinstance(answer, Iterable) and not isinstance(answer, str | bytes):
        items = list(answer)
        wrong = [type(item).__name__ for item in items if not isinstance(item, str)]
        if not wrong:
            return items
        got = f"{wrong[0]} objects"
    else:
        got = type(answer).__name__
    raise RpcFailure(
        grpc.StatusCode.INTERNAL,
        f"preferred_allocation returned {got}, not device IDs: it gets Device objects and returns "
        "their IDs (return [device.id for device in chosen])",
    )


RpcObserver = Callable[[str, str, float, str], None]
"""Called after every unary RPC with (resource, method, seconds, result)."""


class RpcFailure(Exception):
    """An RPC answer that is a gRPC error status (raised inside handlers, aborted at the edge)."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class PluginServer(pb_grpc.DevicePluginServicer):  # type: ignore[misc]
    """The gRPC face of one plugin, on ``socket_path``. Restartable: :meth:`serve` again after a stop."""

    def __init__(
        self,
        plugin: Plugin,
        socket_path: Path,
        observe: RpcObserver | None = None,
        on_client_gone: Callable[[], None] | None = None,
    ) -> None:
        self.plugin = plugin
        self.socket_path = socket_path
        self.options = options_of(plugin)
        self._observe = observe
        self._on_client_gone = on_client_gone
        self._generation = 0  # one per serve(): a stream ended by our own restart is not the client leaving
        self._server: aio.Server | None = None
        self._inode: tuple[int, int] | None = None
        self._version = 0
        self._changed = asyncio.Event()
        self._final = False
        self._streams = 0
        self._loop = asyncio.get_running_loop()
        self._unsubscribe = plugin.subscribe(self._on_change)

    # -- lifecycle ------------------------------------------------------------------
    async def serve(self) -> None:
        """Bind the socket (clearing only a stale one of ours) and start serving."""
        clear_stale(self.socket_path)
        self._final = False
        self._generation += 1
        server = aio.server(options=[("grpc.so_reuseport", 0)])
        add_refusing_malformed(pb_grpc.add_DevicePluginServicer_to_server, self, server)
        listen(server, self.socket_path)
        await server.start()
        self._server = server
        try:
            os.chmod(self.socket_path, SOCKET_MODE)
            st = self.socket_path.stat()
        except FileNotFoundError:  # a starting kubelet wiped it already: not ours, so serve() again
            return
        self._inode = (st.st_dev, st.st_ino)
        log.debug("serving %s on %s", self.plugin.resource_name, self.socket_path)

    async def stop(self, grace: float = 1.0) -> None:
        """Send every stream a final all-Unhealthy list, stop serving, remove our socket."""
        self._final = True
        self._bump()
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace)
        self.remove_socket()

    def close(self) -> None:
        self._unsubscribe()

    def owns_socket(self) -> bool:
        """Whether the socket file on disk is still the one we bound (not deleted or replaced)."""
        try:
            st = self.socket_path.stat()
        except FileNotFoundError:
            return False
        return self._inode == (st.st_dev, st.st_ino)

    def remove_socket(self) -> None:
        """Unlink our socket, and never a file someone else put at that path."""
        if self.owns_socket():
            self.socket_path.unlink(missing_ok=True)
        self._inode = None

    @property
    def serving(self) -> bool:
        return self._server is not None

    @property
    def open_streams(self) -> int:
        return self._streams

    # -- change propagation ---------------------------------------------------------
    def _on_change(self) -> None:
        """Plugin listener: may run on any thread, so hop onto the loop."""
        try:
            if asyncio.get_running_loop() is self._loop:
                self._bump()
                return
        except RuntimeError:
            pass
        self._loop.call_soon_threadsafe(self._bump)

    def _bump(self) -> None:
        self._version += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    # -- RPCs -----------------------------------------------------------------------
    async def GetDevicePluginOptions(self, request: pb.Empty, context: Ctx) -> pb.DevicePluginOptions:
        return options_to_pb(*self.options)

    async def ListAndWatch(self, request: pb.Empty, context: Ctx) -> Any:
        """The full list at once, then again after every change, until the client or we stop.

        A stream the client closes (the kubelet exited or dropped us) is reported to
        ``on_client_gone`` once no stream is left; one we end ourselves is not.
        """
        self._streams += 1
        generation = self._generation
        try:
            sent = -1
            while True:
                if self._final:
                    yield list_response(self.plugin.devices(), Health.UNHEALTHY)
                    return
                if sent != self._version:
                    sent = self._version
                    yield list_response(self.plugin.devices())
                    continue
                await self._changed.wait()
        finally:
            self._streams -= 1
            ours = self._final or generation != self._generation
            if not ours and self._streams == 0 and self._on_client_gone is not None:
                self._on_client_gone()

    async def Allocate(self, request: pb.AllocateRequest, context: Ctx) -> pb.AllocateResponse:
        return await self._unary("Allocate", context, self._allocate(request))

    async def GetPreferredAllocation(
        self, request: pb.PreferredAllocationRequest, context: Ctx
    ) -> pb.PreferredAllocationResponse:
        return await self._unary("GetPreferredAllocation", context, self._preferred(request))

    async def PreStartContainer(
        self, request: pb.PreStartContainerRequest, context: Ctx
    ) -> pb.PreStartContainerResponse:
        return await self._unary("PreStartContainer", context, self._pre_start(request, context))

    # -- RPC bodies (raise RpcFailure for error statuses) ---------------------------
    async def _allocate(self, request: pb.AllocateRequest) -> pb.AllocateResponse:
        containers = request.container_requests
        if len(containers) == 1:  # what the kubelet sends: one container per call
            return _single_response(await self._grant(containers[0], 0))
        response = pb.AllocateResponse()
        for number, container in enumerate(containers):
            response.container_responses.append(_allocation_pb(await self._grant(container, number)))  # copies
        return _within_limit(response)

    async def _grant(self, container: pb.ContainerAllocateRequest, number: int) -> ContainerAllocation:
        devices = self._resolve(list(container.devices_ids), f"container request {number}")
        unhealthy = [d.id for d in devices if not d.healthy]
        if unhealthy:
            raise RpcFailure(grpc.StatusCode.FAILED_PRECONDITION, f"unhealthy devices: {ids(unhealthy)}")
        allocation = await self._hook("allocate", self.plugin.allocate, devices)
        if not isinstance(allocation, ContainerAllocation):
            raise RpcFailure(grpc.StatusCode.INTERNAL, f"allocate hook returned {type(allocation).__name__}")
        return allocation

    async def _preferred(self, request: pb.PreferredAllocationRequest) -> pb.PreferredAllocationResponse:
        plugin = self.plugin
        if not isinstance(plugin, PreferredAllocator):
            raise RpcFailure(grpc.StatusCode.UNIMPLEMENTED, f"{plugin.resource_name} offers no preferred allocation")
        response = pb.PreferredAllocationResponse()
        for number, container in enumerate(request.container_requests):
            where = f"container request {number}"
            # Iterating a protobuf repeated field is several times slower than a list: copy once.
            available_ids, must_ids = list(container.available_deviceIDs), list(container.must_include_deviceIDs)
            pool, size = set(available_ids), container.allocation_size
            try:
                check_request(pool, must_ids, size)
            except AllocationRequestError as err:
                raise RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, f"{where}: {err}") from err
            available = self._resolve(available_ids, where, allow_empty=True, distinct=len(pool))
            must = self._resolve(must_ids, where, allow_empty=True)
            chosen = await self._hook("preferred_allocation", plugin.preferred_allocation, available, must, size)
            answer = _device_ids(chosen)
            try:
                check_answer(answer, pool, must_ids, size)
            except ValueError as err:
                raise RpcFailure(grpc.StatusCode.INTERNAL, str(err)) from err
            response.container_responses.add(deviceIDs=answer)
        return response

    async def _pre_start(self, request: pb.PreStartContainerRequest, context: Ctx) -> pb.PreStartContainerResponse:
        devices = self._resolve(list(request.devices_ids), "PreStartContainer")
        plugin = self.plugin
        if isinstance(plugin, PreStarter):
            remaining = context.time_remaining()
            budget = min(remaining, PRE_START_TIMEOUT_SECONDS) if remaining else PRE_START_TIMEOUT_SECONDS
            try:
                async with asyncio.timeout(budget):
                    await self._hook("pre_start_container", plugin.pre_start_container, devices, offload=True)
            except TimeoutError as err:
                message = f"pre_start_container exceeded {budget:.0f} s for {ids([d.id for d in devices])}"
                raise RpcFailure(grpc.StatusCode.DEADLINE_EXCEEDED, message) from err
        return pb.PreStartContainerResponse()

    # -- helpers --------------------------------------------------------------------
    def _resolve(
        self, device_ids: Sequence[str], where: str, allow_empty: bool = False, distinct: int | None = None
    ) -> list[Device]:
        """Our devices for ``device_ids``; unknown or repeated IDs are the caller's error.

        ``distinct`` is the number of distinct IDs when the caller already knows it.
        """
        if not device_ids and not allow_empty:
            raise RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, f"{where} names no devices")
        found = self.plugin.lookup(device_ids)
        if None in found:
            unknown = [i for i, d in zip(device_ids, found, strict=True) if d is None]
            raise RpcFailure(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{where}: unknown devices for {self.plugin.resource_name}: {ids(unknown)}",
            )
        if (len(set(device_ids)) if distinct is None else distinct) != len(device_ids):
            repeated = [i for i, n in Counter(device_ids).items() if n > 1]
            raise RpcFailure(grpc.StatusCode.INVALID_ARGUMENT, f"{where}: repeated devices: {ids(repeated)}")
        return found  # type: ignore[return-value]  # no None left

    async def _hook(self, name: str, hook: Callable[..., T | Awaitable[T]], *args: Any, offload: bool = False) -> T:
        """Run a plugin hook; a crash becomes INTERNAL and never reaches the server loop."""
        try:
            if offload and not inspect.iscoroutinefunction(hook):
                result = await asyncio.to_thread(hook, *args)
            else:
                result = hook(*args)
            if not isinstance(result, _PLAIN_RESULTS) and inspect.isawaitable(result):
                result = await result
        except RpcFailure:
            raise
        except Exception as err:
            log.exception("%s hook of %s failed", name, self.plugin.resource_name)
            raise RpcFailure(grpc.StatusCode.INTERNAL, f"{name} hook failed: {type(err).__name__}: {err}") from err
        return result

    async def _unary(self, method: str, context: Ctx, body: Awaitable[T]) -> T:
        start = time.perf_counter()
        try:
            answer = await body
        except RpcFailure as failure:
            # Counted before the status leaves: a client that reads /metrics right after its
            # error must find it there.
            self._observed(method, start, failure.code.name.lower())
            # The reason goes in the message: a library user without logging set up sees only that.
            log.warning("%s refused for %s: %s", method, self.plugin.resource_name, failure)
            await _abort(context, failure)
        self._observed(method, start, "ok")
        return answer

    def _observed(self, method: str, start: float, result: str) -> None:
        if self._observe is not None:
            self._observe(self.plugin.resource_name, method, time.perf_counter() - start, result)


async def _abort(context: Ctx, failure: RpcFailure) -> NoReturn:
    await context.abort(failure.code, str(failure))
    raise AssertionError("context.abort returned")  # pragma: no cover - abort always raises


# Grants are immutable and hashable, and a device is usually granted the same way each time.
_allocation_pb = functools.lru_cache(maxsize=1024)(allocation_to_pb)
_CACHED_RESPONSES = 1024
_responses: dict[int, tuple[ContainerAllocation, pb.AllocateResponse]] = {}


def _single_response(allocation: ContainerAllocation) -> pb.AllocateResponse:
    """The whole answer for one container, built once per grant object.

    A plugin usually returns a device's own grant object each time: found by identity, the
    answer costs neither a hash of the grant nor a copy of the message. The entry holds the
    grant, so its ``id`` is not reused while cached; grpc only reads (serializes) the answer.
    """
    entry = _responses.get(id(allocation))
    if entry is not None and entry[0] is allocation:
        return entry[1]
    if len(_responses) >= _CACHED_RESPONSES:
        _responses.clear()
    response = _within_limit(pb.AllocateResponse(container_responses=[_allocation_pb(allocation)]))
    _responses[id(allocation)] = (allocation, response)
    return response


def _within_limit(response: pb.AllocateResponse) -> pb.AllocateResponse:
    """The answer, or RESOURCE_EXHAUSTED naming the limit: past it the kubelet could not read the
    answer, and its own error would not say which plugin or devices (``serve`` refuses such a config
    at start-up; devices hotplug adds later can still get here)."""
    size = response.ByteSize()
    if size > MAX_MESSAGE_BYTES:
        raise RpcFailure(
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            f"the Allocate answer would be {size:,} bytes, over the {MAX_MESSAGE_BYTES:,} bytes (4 MiB) the kubelet "
            "accepts from a device plugin",
        )
    return response
