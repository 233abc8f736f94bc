"""The DRA gRPC services on ``dra.sock``: ``v1`` and ``v1beta1`` DRAPlugin and the health stream
(``v1`` and ``v1alpha1`` DRAResourceHealth, which have the same messages).

Only conversion lives here: requests become :class:`ClaimRef` lists, :class:`ClaimState`
answers with plain results, and those become the version's response. ``v1beta1`` has the
same messages as ``v1`` without ``share_id``. Every claim gets an answer; a request naming a
claim without a UID is refused as a whole with INVALID_ARGUMENT, as it cannot be answered.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import grpc
from grpc import aio

from ...api import dra_health_v1_pb2 as h1
from ...api import dra_health_v1_pb2_grpc as h1_grpc
from ...api import dra_health_v1alpha1_pb2 as h1alpha1
from ...api import dra_health_v1alpha1_pb2_grpc as h1alpha1_grpc
from ...api import dra_v1_pb2 as v1
from ...api import dra_v1_pb2_grpc as v1_grpc
from ...api import dra_v1beta1_pb2 as v1beta1
from ...api import dra_v1beta1_pb2_grpc as v1beta1_grpc
from ...api.malformed import add_refusing_malformed
from ..nodeclaims import ClaimRef, PreparedDevice, PrepareResult
from .health import HealthFeed
from .state import ClaimSource, ClaimState

log = logging.getLogger("kubedevice.dra.server")
Ctx = aio.ServicerContext[Any, Any]
RpcObserver = Callable[[str, float, int, int], None]
"""Called after every prepare/unprepare with (method, seconds, claims, failed claims)."""
Reporter = Callable[[Sequence[ClaimRef], dict[str, PrepareResult]], Awaitable[None]]
"""Called after every prepare with the claims not prepared before it and the answers
(``status.devices``); never raises."""


class _Claims(Protocol):
    @property
    def claims(self) -> Sequence[Any]: ...


def _device_fields(device: PreparedDevice) -> dict[str, Any]:
    return {
        "request_names": device.request_names,
        "pool_name": device.pool,
        "device_name": device.device,
        "cdi_device_ids": device.cdi_device_ids,
    }


def _few(names: Sequence[str], shown: int = 3, width: int = 64) -> str:
    """Some names, each cut short: the message travels in a trailer, which the kubelet's gRPC
    client caps at 8 KiB, so a longer one would reach it as RESOURCE_EXHAUSTED instead."""
    listed = ", ".join(repr(n[:width]) + ("..." if len(n) > width else "") for n in names[:shown])
    return listed + (f" (and {len(names) - shown:,} more)" if len(names) > shown else "")


def _refs(request: _Claims) -> list[ClaimRef]:
    return [ClaimRef(c.namespace, c.name, c.uid) for c in request.claims]


class _Core:
    """What both API versions share: validation, the state calls, observation."""

    def __init__(
        self, state: ClaimState, claims: ClaimSource, observe: RpcObserver | None, report: Reporter | None
    ) -> None:
        self.state = state
        self.claims = claims
        self.observe = observe
        self.report = report

    async def prepare(self, request: _Claims, context: Ctx) -> dict[str, PrepareResult]:
        refs = await self._checked(request, context)
        start = time.perf_counter()
        fresh = [r for r in refs if not self.state.is_prepared(r.uid)] if self.report is not None else []
        results = await self.state.prepare(refs, self.claims)
        if self.report is not None:  # outside the state's lock: API calls must not hold up other requests
            await self.report(fresh, results)  # a repeated prepare changes nothing, not even the time
        self._observed("NodePrepareResources", start, len(refs), sum(bool(r.error) for r in results.values()))
        return results

    async def unprepare(self, request: _Claims, context: Ctx) -> dict[str, str]:
        refs = await self._checked(request, context)
        start = time.perf_counter()
        errors = await self.state.unprepare(refs)
        if self.observe is not None:  # without an observer, no pass over the answers to count failures
            self._observed("NodeUnprepareResources", start, len(refs), len(errors) - [*errors.values()].count(""))
        return errors

    async def _checked(self, request: _Claims, context: Ctx) -> list[ClaimRef]:
        refs = _refs(request)
        bad = [f"{r.namespace}/{r.name}" for r in refs if not r.uid or not r.name or not r.namespace]
        if bad:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"claims without namespace, name or UID: {_few(bad)}")
        return refs

    def _observed(self, method: str, start: float, claims: int, failed: int) -> None:
        if self.observe is not None:
            self.observe(method, time.perf_counter() - start, claims, failed)


class DRAPluginV1(v1_grpc.DRAPluginServicer):  # type: ignore[misc]
    def __init__(self, core: _Core) -> None:
        self._core = core

    async def NodePrepareResources(
        self, request: v1.NodePrepareResourcesRequest, context: Ctx
    ) -> v1.NodePrepareResourcesResponse:
        results = await self._core.prepare(request, context)
        response = v1.NodePrepareResourcesResponse()
        for uid, result in results.items():
            answer = response.claims[uid]
            answer.error = result.error
            for d in result.devices:
                device = answer.devices.add(**_device_fields(d))
                if d.share_id is not None:
                    device.share_id = d.share_id
        return response

    async def NodeUnprepareResources(
        self, request: v1.NodeUnprepareResourcesRequest, context: Ctx
    ) -> v1.NodeUnprepareResourcesResponse:
        errors = await self._core.unprepare(request, context)
        response = v1.NodeUnprepareResourcesResponse()
        for uid, error in errors.items():
            response.claims[uid].error = error
        return response


class DRAPluginV1beta1(v1beta1_grpc.DRAPluginServicer):  # type: ignore[misc]
    def __init__(self, core: _Core) -> None:
        self._core = core

    async def NodePrepareResources(
        self, request: v1beta1.NodePrepareResourcesRequest, context: Ctx
    ) -> v1beta1.NodePrepareResourcesResponse:
        results = await self._core.prepare(request, context)
        response = v1beta1.NodePrepareResourcesResponse()
        for uid, result in results.items():
            answer = response.claims[uid]
            answer.error = result.error
            for d in result.devices:
                answer.devices.add(**_device_fields(d))
        return response

    async def NodeUnprepareResources(
        self, request: v1beta1.NodeUnprepareResourcesRequest, context: Ctx
    ) -> v1beta1.NodeUnprepareResourcesResponse:
        errors = await self._core.unprepare(request, context)
        response = v1beta1.NodeUnprepareResourcesResponse()
        for uid, error in errors.items():
            response.claims[uid].error = error
        return response


async def _health_stream(api: Any, feed: HealthFeed) -> Any:
    """The full device list now and after each change, in the messages of ``api`` (``v1`` or ``v1alpha1``)."""
    async for now, devices in feed.watch():
        yield api.NodeWatchResourcesResponse(
            devices=[
                api.DeviceHealth(
                    device=api.DeviceIdentifier(pool_name=d.pool, device_name=d.device),
                    health=api.HEALTHY if d.healthy else api.UNHEALTHY,
                    last_updated_time=now,
                    message=d.message[:1024],
                )
                for d in devices
            ]
        )


class ResourceHealthV1(h1_grpc.DRAResourceHealthServicer):  # type: ignore[misc]
    """What a 1.37+ kubelet watches (it prefers ``v1`` when both are listed in GetInfo)."""

    def __init__(self, feed: HealthFeed) -> None:
        self._feed = feed

    async def NodeWatchResources(self, request: h1.NodeWatchResourcesRequest, context: Ctx) -> Any:
        async for message in _health_stream(h1, self._feed):
            yield message


class ResourceHealthV1alpha1(h1alpha1_grpc.DRAResourceHealthServicer):  # type: ignore[misc]
    """What a 1.36 kubelet watches (it knows no other version; 1.37-1.39 still accept it)."""

    def __init__(self, feed: HealthFeed) -> None:
        self._feed = feed

    async def NodeWatchResources(self, request: h1alpha1.NodeWatchResourcesRequest, context: Ctx) -> Any:
        async for message in _health_stream(h1alpha1, self._feed):
            yield message


def add_services(
    server: aio.Server,
    state: ClaimState,
    claims: ClaimSource,
    feed: HealthFeed,
    observe: RpcObserver | None = None,
    *,
    report: Reporter | None = None,
) -> None:
    core = _Core(state, claims, observe, report)
    add_refusing_malformed(v1_grpc.add_DRAPluginServicer_to_server, DRAPluginV1(core), server)
    add_refusing_malformed(v1beta1_grpc.add_DRAPluginServicer_to_server, DRAPluginV1beta1(core), server)
    add_refusing_malformed(h1_grpc.add_DRAResourceHealthServicer_to_server, ResourceHealthV1(feed), server)
    add_refusing_malformed(h1alpha1_grpc.add_DRAResourceHealthServicer_to_server, ResourceHealthV1alpha1(feed), server)
