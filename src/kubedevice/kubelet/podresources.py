"""The kubelet's PodResources API v1, served by the simulators from their own state.

Follows ``pkg/kubelet/apis/podresources/server_v1.go`` and what the container manager hands it
(v1.36): ``List`` gives every active pod, each with its restartable init and regular containers
in spec order, a pod with no devices too (its containers with empty lists); a container's
device-plugin devices come as one ``ContainerDevices`` per device and NUMA node
(``containerDevicesFromResourceDeviceInstances``), without topology for a device that had none;
its DRA claims as the DRA manager's cache has them (``GetDynamicResources``): only claims the
container names, all of them or none (one claim not prepared yet and the kubelet logs an error
and sends none), one ``ClaimResource`` per prepared device. ``Get`` is ``List`` for one pod, and
an unknown pod is a plain error (code Unknown: ``pod NAME in namespace NS not found``).
``GetAllocatableResources`` lists every healthy device of every resource once per NUMA node;
``cpu_ids`` and ``memory`` stay empty, as with the CPU and memory managers' default ``none``
policies (the simulator has no CPU or memory manager). Calls beyond the kubelet's rate limit
(100 per second, bursts of 10) fail with ``ResourceExhausted: rejected by rate limit``.

The kubelet takes these from Go maps, so its order of pods, resources, devices and drivers
varies from call to call; here it is fixed (pods as admitted, resources and devices sorted,
drivers as the claim's allocation lists them) so that answers can be compared byte for byte.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

import grpc

from ..api import podresources_v1_pb2 as prpb
from ..api import podresources_v1_pb2_grpc as prpb_grpc
from ..api.convert import allocatable_to_pb, pod_resources_to_pb
from ..errors import os_reason
from ..podresources.client import socket_in
from ..podresources.model import (
    Allocatable,
    ClaimDevice,
    ClaimResources,
    ContainerResources,
    DeviceIds,
    PodResources,
)
from ..unixsocket import CannotBind, is_live, listen
from .checkpoint import NO_TOPOLOGY
from .model import Container, Pod, Resource

QPS = 100  # podresources.DefaultQPS
BURST = 10  # podresources.DefaultBurstTokens
RATE_LIMITED = "rejected by rate limit"


class DevicesProvider(Protocol):
    """The device manager's side: what :class:`~.simulator.KubeletSimulator` offers."""

    @property
    def resources(self) -> dict[str, Resource]: ...

    def container_devices(self, pod_uid: str, container: str) -> dict[str, dict[int, list[str]]]: ...


class PreparedDeviceView(Protocol):
    @property
    def driver(self) -> str: ...
    @property
    def pool(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def cdi_ids(self) -> tuple[str, ...]: ...
    @property
    def share_id(self) -> str | None: ...


class PreparedClaimView(Protocol):
    @property
    def devices(self) -> Sequence[PreparedDeviceView]: ...


class ClaimsProvider(Protocol):
    """The DRA manager's cache: what :class:`~.dra.simulator.DraKubelet` offers, claims by ``NS/NAME``."""

    @property
    def prepared(self) -> Mapping[str, PreparedClaimView]: ...


def kubelet_root_of(plugin_dir: Path) -> Path | None:
    """The kubelet's root when ``plugin_dir`` is laid out as the kubelet's (``<root>/device-plugins``).

    Any other directory (a test's temporary one) has no kubelet root: serving beside it would
    put a socket in a directory that others share.
    """
    return plugin_dir.parent if plugin_dir.name == "device-plugins" else None


class RateLimiter:
    """``golang.org/x/time/rate``'s token bucket as the kubelet sets it up: ``QPS`` tokens a
    second, at most ``BURST`` kept."""

    def __init__(self, qps: float = QPS, burst: int = BURST) -> None:
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = time.monotonic()

    def allow(self) -> bool:
        now = time.monotonic()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True


class PodResourcesView:
    """The answers, built from the providers' state at the time of the call."""

    def __init__(
        self,
        pods: Callable[[], Iterable[Pod]],
        devices: DevicesProvider | None = None,
        claims: ClaimsProvider | None = None,
    ) -> None:
        self._pods = pods
        self._devices = devices
        self._claims = claims

    def list(self) -> list[PodResources]:
        return [self._pod(p) for p in self._pods()]

    def get(self, namespace: str, name: str) -> PodResources | None:
        for pod in self._pods():
            if pod.namespace == namespace and pod.name == name:
                return self._pod(pod)
        return None

    def allocatable(self) -> Allocatable:
        """``GetAllocatableDevices``: healthy devices of resources a plugin listed, once per NUMA node."""
        resources = self._devices.resources if self._devices is not None else {}
        entries: list[DeviceIds] = []
        for name in sorted(resources):
            for device_id, device in sorted(resources[name].devices.items()):
                if device.healthy:
                    entries += _per_node(name, device_id, device.numa_nodes or (NO_TOPOLOGY,))
        return Allocatable(tuple(entries))

    def _pod(self, pod: Pod) -> PodResources:
        return PodResources(pod.name, pod.namespace, tuple(self._container(pod, c) for c in pod.containers))

    def _container(self, pod: Pod, container: Container) -> ContainerResources:
        return ContainerResources(
            container.name, self._container_devices(pod, container), claims=self._container_claims(pod, container)
        )

    def _container_devices(self, pod: Pod, container: Container) -> tuple[DeviceIds, ...]:
        if self._devices is None:
            return ()
        entries: list[DeviceIds] = []
        assigned = self._devices.container_devices(pod.uid, container.name)
        for resource in sorted(assigned):
            nodes_of: dict[str, list[int]] = {}
            for node, ids in assigned[resource].items():
                for device_id in ids:
                    nodes_of.setdefault(device_id, []).append(node)
            for device_id in sorted(nodes_of):
                entries += _per_node(resource, device_id, tuple(sorted(nodes_of[device_id])))
        return tuple(entries)

    def _container_claims(self, pod: Pod, container: Container) -> tuple[ClaimResources, ...]:
        if self._claims is None:
            return ()
        result = []
        for name in container.claims:
            prepared = self._claims.prepared.get(f"{pod.namespace}/{name}")
            if prepared is None:
                return ()  # "unable to get information for ResourceClaim": the kubelet sends none
            result.append(ClaimResources(name, pod.namespace, _claim_devices(prepared.devices)))
        return tuple(result)


def _per_node(resource: str, device_id: str, nodes: tuple[int, ...]) -> list[DeviceIds]:
    return [DeviceIds(resource, (device_id,), None if n == NO_TOPOLOGY else (n,)) for n in nodes]


def _claim_devices(devices: Sequence[PreparedDeviceView]) -> tuple[ClaimDevice, ...]:
    """One entry per device, grouped by driver; each entry's CDI devices are those of its driver's
    devices up to and including it.

    The kubelet (v1.36.3, v1.37.2 ``GetDynamicResources``) collects a driver's CDI IDs in one
    slice declared outside the loop over its devices and hands each ``ClaimResource`` the slice
    as it stands: the second device of a driver also carries the first one's CDI IDs.
    """
    by_driver: dict[str, list[PreparedDeviceView]] = {}
    for device in devices:
        by_driver.setdefault(device.driver, []).append(device)
    result = []
    for driver, entries in by_driver.items():
        cdi: list[str] = []
        for device in entries:
            cdi += device.cdi_ids
            result.append(ClaimDevice(driver, device.pool, device.device, tuple(cdi), device.share_id))
    return tuple(result)


class _Service:
    """``PodResourcesLister`` over a :class:`PodResourcesView`, behind the kubelet's rate limit."""

    def __init__(self, view: PodResourcesView, limiter: RateLimiter) -> None:
        self._view = view
        self._limiter = limiter
        self.calls: list[str] = []

    async def _admit(self, method: str, context: grpc.aio.ServicerContext[object, object]) -> None:
        self.calls.append(method)
        if not self._limiter.allow():
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, RATE_LIMITED)

    async def List(
        self, request: prpb.ListPodResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> prpb.ListPodResourcesResponse:
        await self._admit("List", context)
        return prpb.ListPodResourcesResponse(pod_resources=[pod_resources_to_pb(p) for p in self._view.list()])

    async def GetAllocatableResources(
        self, request: prpb.AllocatableResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> prpb.AllocatableResourcesResponse:
        await self._admit("GetAllocatableResources", context)
        return allocatable_to_pb(self._view.allocatable())

    async def Get(
        self, request: prpb.GetPodResourcesRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> prpb.GetPodResourcesResponse:
        await self._admit("Get", context)
        pod = self._view.get(request.pod_namespace, request.pod_name)
        if pod is None:
            message = f"pod {request.pod_name} in namespace {request.pod_namespace} not found"
            await context.abort(grpc.StatusCode.UNKNOWN, message)  # a plain Go error: code Unknown
        assert pod is not None
        return prpb.GetPodResourcesResponse(pod_resources=pod_resources_to_pb(pod))


class PodResourcesServer:
    """Serves the API on ``socket``; a socket some live process serves is left alone (an event says so)."""

    def __init__(
        self,
        socket: Path,
        view: PodResourcesView,
        event: Callable[[str], None],
        limiter: RateLimiter | None = None,
    ) -> None:
        self.socket = socket
        self._event = event
        self._service = _Service(view, limiter or RateLimiter())
        self._server: grpc.aio.Server | None = None

    @classmethod
    def in_root(cls, kubelet_root: Path, view: PodResourcesView, event: Callable[[str], None]) -> PodResourcesServer:
        return cls(socket_in(kubelet_root), view, event)

    @property
    def calls(self) -> list[str]:
        """The methods called so far, refused ones too: a record for tests."""
        return self._service.calls

    @property
    def serving(self) -> bool:
        return self._server is not None

    async def start(self) -> None:
        """``ListenAndServePodResources``: make the directory (0750), replace a stale socket, serve."""
        try:
            self.socket.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
            if self.socket.is_socket() and is_live(self.socket):
                self._event(f"not serving PodResources: {self.socket} is served by another process")
                return
            self.socket.unlink(missing_ok=True)
        except OSError as err:
            self._event(f"not serving PodResources: {self.socket}: {os_reason(err)}")
            return
        server = grpc.aio.server()
        prpb_grpc.add_PodResourcesListerServicer_to_server(self._service, server)
        try:
            listen(server, self.socket)
        except CannotBind as err:
            self._event(f"not serving PodResources: {err}")
            return
        await server.start()
        self._server = server
        self._event(f"serving PodResources at {self.socket}")

    async def stop(self) -> None:
        if self._server is None:
            return
        await self._server.stop(None)
        self._server = None
        self.socket.unlink(missing_ok=True)
