"""The kubelet's side of DRA, for tests and tools: plugin watcher handshake and DRA calls.

Follows ``pkg/kubelet/cm/dra/plugin`` (v1.36, v1.37): ``GetInfo`` must name type ``DRAPlugin``
and list a service the kubelet supports; the kubelet takes the first listed service it supports
(``v1.DRAPlugin`` or ``v1beta1.DRAPlugin``), answers ``NotifyRegistrationStatus`` and then talks
to the endpoint from ``GetInfo`` (the registration socket when empty). The health stream uses the
first of ``v1.DRAResourceHealth`` and ``v1alpha1.DRAResourceHealth`` that is listed (a 1.36
kubelet always uses ``v1alpha1``). Refusals carry the kubelet's messages.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from grpc import aio

from ...api import dra_health_v1_pb2 as h1
from ...api import dra_health_v1_pb2_grpc as h1_grpc
from ...api import dra_health_v1alpha1_pb2 as h1alpha1
from ...api import dra_health_v1alpha1_pb2_grpc as h1alpha1_grpc
from ...api import dra_v1_pb2 as v1
from ...api import dra_v1_pb2_grpc as v1_grpc
from ...api import dra_v1beta1_pb2 as v1beta1
from ...api import dra_v1beta1_pb2_grpc as v1beta1_grpc
from ...api import pluginregistration_v1_pb2 as regpb
from ...api import pluginregistration_v1_pb2_grpc as regpb_grpc
from ...errors import KubedeviceError
from ...gostrings import quote_list

KUBELET_SERVICES = ("v1.DRAPlugin", "v1beta1.DRAPlugin")  # the kubelet takes the first of these the plugin lists
HEALTH_SERVICES = ("v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth")  # the 1.37 kubelet's preference
CALL_TIMEOUT = 45.0  # the kubelet's default per DRA call


class RegistrationRefused(KubedeviceError):
    """What the kubelet would refuse at registration (the message says why)."""


@dataclass(frozen=True, slots=True)
class Registered:
    driver: str
    endpoint: str
    service: str
    health_service: str = ""
    """The health service a 1.37 kubelet would watch ("" when none is listed)."""

    @property
    def health(self) -> bool:
        """The plugin offers a health stream."""
        return bool(self.health_service)


async def get_info(registration_socket: Path, timeout: float = 1.0) -> regpb.PluginInfo:
    """``GetInfo`` with the plugin watcher's 1 s deadline."""
    async with aio.insecure_channel(f"unix://{registration_socket}") as channel:
        info: regpb.PluginInfo = await regpb_grpc.RegistrationStub(channel).GetInfo(
            regpb.InfoRequest(), timeout=timeout
        )
        return info


async def notify(registration_socket: Path, registered: bool, error: str = "", timeout: float = 10.0) -> None:
    async with aio.insecure_channel(f"unix://{registration_socket}") as channel:
        stub = regpb_grpc.RegistrationStub(channel)
        await stub.NotifyRegistrationStatus(
            regpb.RegistrationStatus(plugin_registered=registered, error=error), timeout=timeout
        )


async def register(registration_socket: Path, accept: bool = True, error: str = "") -> Registered:
    """The plugin watcher's handshake with one registration socket."""
    info = await get_info(registration_socket, timeout=10)
    problem = kubelet_refusal(info, registration_socket)
    if problem or not accept:
        await notify(registration_socket, False, problem or error)
        raise RegistrationRefused(problem or error)
    await notify(registration_socket, True)
    return registered_as(info, registration_socket)


def registered_as(info: regpb.PluginInfo, registration_socket: Path) -> Registered:
    """What the kubelet keeps of an accepted plugin: the first of its services that it supports."""
    service = next(s for s in info.supported_versions if s in KUBELET_SERVICES)
    endpoint = info.endpoint or str(registration_socket)
    health = next((s for s in HEALTH_SERVICES if s in info.supported_versions), "")
    return Registered(info.name, endpoint, service, health)


def kubelet_refusal(info: regpb.PluginInfo, registration_socket: Path) -> str:
    """The kubelet's message refusing ``info`` (``operation_generator.go``, ``dra_plugin_manager.go``), or ""."""
    if info.type != "DRAPlugin":
        where = f"at socket {registration_socket}"
        return f"RegisterPlugin error -- no handler registered for plugin type: {info.type} {where}"
    services = list(info.supported_versions)
    if not services:
        why = "empty list of supported gRPC services (aka supported versions)"
    elif not any(s in KUBELET_SERVICES for s in services):
        why = (
            f"none of services supported by the plugin ({quote_list(services)}) "
            f"are supported by the kubelet ({quote_list(KUBELET_SERVICES)})"
        )
    else:
        return ""
    endpoint = info.endpoint or str(registration_socket)
    return (
        "RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions "
        f"of DRA driver plugin {info.name} at endpoint {endpoint}: {why}"
    )


class DraClient:
    """Calls a registered driver the way the kubelet does (one channel, the chosen service)."""

    def __init__(self, registered: Registered, timeout: float = CALL_TIMEOUT) -> None:
        self.registered = registered
        self.timeout = timeout
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
        return await self._stub.NodePrepareResources(request, timeout=self.timeout)

    async def unprepare(self, claims: Sequence[tuple[str, str, str]]) -> Any:
        api: Any = v1 if self._v1 else v1beta1
        request = api.NodeUnprepareResourcesRequest(claims=self._claims(claims))
        return await self._stub.NodeUnprepareResources(request, timeout=self.timeout)

    async def watch_health(self, service: str = "") -> AsyncGenerator[dict[tuple[str, str], str], None]:
        """Each health message as ``{(pool, device): "HEALTHY" | "UNHEALTHY" | "UNKNOWN"}``, from
        ``service`` (default: the one registration chose, else ``v1alpha1`` like a 1.36 kubelet)."""
        chosen = service or self.registered.health_service or HEALTH_SERVICES[1]
        api: Any = h1 if chosen == HEALTH_SERVICES[0] else h1alpha1
        stub = (h1_grpc if api is h1 else h1alpha1_grpc).DRAResourceHealthStub(self._channel)
        async for message in stub.NodeWatchResources(api.NodeWatchResourcesRequest()):
            yield {(d.device.pool_name, d.device.device_name): api.HealthStatus.Name(d.health) for d in message.devices}
