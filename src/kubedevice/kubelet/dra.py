"""The kubelet's side of DRA, for tests and tools: plugin watcher handshake and DRA calls.

Follows ``pkg/kubelet/cm/dra/plugin`` (v1.37): ``GetInfo`` must name type ``DRAPlugin`` and
list a service the kubelet supports; the kubelet prefers ``v1.DRAPlugin`` over
``v1beta1.DRAPlugin``, answers ``NotifyRegistrationStatus`` and then talks to the endpoint
from ``GetInfo``; the health stream uses the first of ``v1.DRAResourceHealth`` and
``v1alpha1.DRAResourceHealth`` that is listed (a 1.36 kubelet always uses ``v1alpha1``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from grpc import aio

from ..api import dra_health_v1_pb2 as h1
from ..api import dra_health_v1_pb2_grpc as h1_grpc
from ..api import dra_health_v1alpha1_pb2 as h1alpha1
from ..api import dra_health_v1alpha1_pb2_grpc as h1alpha1_grpc
from ..api import dra_v1_pb2 as v1
from ..api import dra_v1_pb2_grpc as v1_grpc
from ..api import dra_v1beta1_pb2 as v1beta1
from ..api import dra_v1beta1_pb2_grpc as v1beta1_grpc
from ..api import pluginregistration_v1_pb2 as regpb
from ..api import pluginregistration_v1_pb2_grpc as regpb_grpc

KUBELET_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # in the kubelet's order of preference
HEALTH_SERVICES = ("v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")  # the 1.37 kubelet's preference
CALL_TIMEOUT = 45.0  # the kubelet's default per DRA call


class RegistrationRefused(Exception):
    """What the kubelet would refuse at registration (the message says why)."""


@dataclass(frozen=True, slots=True)
class Registered:
    driver: str
    endpoint: str
    service: str
    health: bool
    health_service: str = ""
    """The health service a 1.37 kubelet would watch ("" when none is listed)."""


async def register(registration_socket: Path, accept: bool = True, error: str = "") -> Registered:
    """The plugin watcher's handshake with one registration socket."""
    async with aio.insecure_channel(f"unix://{registration_socket}") as channel:
        stub = regpb_grpc.RegistrationStub(channel)
        info = await stub.GetInfo(regpb.InfoRequest(), timeout=10)
        problem = _validate(info)
        if problem or not accept:
            await stub.NotifyRegistrationStatus(
                regpb.RegistrationStatus(plugin_registered=False, error=problem or error), timeout=10
            )
            raise RegistrationRefused(problem or error)
        await stub.NotifyRegistrationStatus(regpb.RegistrationStatus(plugin_registered=True), timeout=10)
    service = next(s for s in KUBELET_SERVICES if s in info.supported_versions)
    health = next((s for s in HEALTH_SERVICES if s in info.supported_versions), "")
    return Registered(info.name, info.endpoint, service, bool(health), health)


def _validate(info: regpb.PluginInfo) -> str:
    if info.type != "DRAPlugin":
        return f"plugin type {info.type!r} is not DRAPlugin"
    if not info.name:
        return "empty driver name"
    if not any(s in info.supported_versions for s in KUBELET_SERVICES):
        offered = list(info.supported_versions)
        return f"none of services supported by the plugin ({offered}) are supported by the kubelet"
    if not Path(info.endpoint).is_absolute():
        return f"endpoint {info.endpoint!r} is not an absolute path"
    return ""


class DraClient:
    """Calls a registered driver the way the kubelet does (one channel, the chosen service)."""

    def __init__(self, registered: Registered) -> None:
        self.registered = registered
        self._channel = aio.insecure_channel(f"unix://{registered.endpoint}")
        self._v1 = registered.service == "v1.DRAPlugin"
        self._stub: Any = (v1_grpc if self._v1 else v1beta1_grpc).DRAPluginStub(self._channel)

    async def __aenter__(self) -> DraClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._channel.close(None)

    def _claims(self, claims: Sequence[tuple[str, str, str]]) -> list[Any]:
        api: Any = v1 if self._v1 else v1beta1
        return [api.Claim(namespace=ns, name=name, uid=uid) for ns, name, uid in claims]

    async def prepare(self, claims: Sequence[tuple[str, str, str]]) -> Any:
        """NodePrepareResources for ``(namespace, name, uid)`` claims; the response message."""
        api: Any = v1 if self._v1 else v1beta1
        request = api.NodePrepareResourcesRequest(claims=self._claims(claims))
        return await self._stub.NodePrepareResources(request, timeout=CALL_TIMEOUT)

    async def unprepare(self, claims: Sequence[tuple[str, str, str]]) -> Any:
        api: Any = v1 if self._v1 else v1beta1
        request = api.NodeUnprepareResourcesRequest(claims=self._claims(claims))
        return await self._stub.NodeUnprepareResources(request, timeout=CALL_TIMEOUT)

    async def watch_health(self, service: str = "") -> AsyncIterator[dict[tuple[str, str], str]]:
        """Each health message as ``{(pool, device): "HEALTHY" | "UNHEALTHY" | "UNKNOWN"}``, from
        ``service`` (default: the one registration chose, else ``v1alpha1`` like a 1.36 kubelet)."""
        chosen = service or self.registered.health_service or HEALTH_SERVICES[1]
        api: Any = h1 if chosen == HEALTH_SERVICES[0] else h1alpha1
        stub = (h1_grpc if api is h1 else h1alpha1_grpc).DRAResourceHealthStub(self._channel)
        async for message in stub.NodeWatchResources(api.NodeWatchResourcesRequest()):
            yield {(d.device.pool_name, d.device.device_name): api.HealthStatus.Name(d.health) for d in message.devices}
