"""Plain records of what the simulated kubelet saw and decided, for tests and the CLI to read."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..device import ContainerAllocation, Device
from ..errors import KubedeviceError

UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"


@dataclass(frozen=True, slots=True)
class Container:
    """A container, its extended-resource requests (requests equal limits for devices) and the
    ResourceClaims it uses (``resources.claims``, by the claim objects' names in the pod's namespace)."""

    name: str
    requests: dict[str, int] = field(default_factory=dict)
    claims: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pod:
    uid: str
    name: str
    containers: list[Container] = field(default_factory=list)
    namespace: str = "default"


@dataclass(frozen=True, slots=True)
class PluginOptions:
    pre_start_required: bool = False
    get_preferred_allocation_available: bool = False


@dataclass(frozen=True, slots=True)
class Registration:
    """One Register call as received; ``error`` is ``None`` when the kubelet accepted it."""

    received_at: float
    version: str
    endpoint: str
    resource_name: str
    options: PluginOptions
    error: str | None = None


@dataclass(slots=True)
class Resource:
    """The kubelet's view of one extended resource.

    ``options`` is what ``GetDevicePluginOptions`` answered (``None`` for a resource only
    restored from the checkpoint); ``stopped_at`` is set when its plugin went away.
    """

    name: str
    devices: dict[str, Device] = field(default_factory=dict)
    options: PluginOptions | None = None
    endpoint: str | None = None
    connected: bool = False
    stopped_at: float | None = None

    @property
    def capacity(self) -> int:
        return len(self.devices)

    @property
    def allocatable(self) -> int:
        return sum(1 for d in self.devices.values() if d.healthy)


@dataclass(frozen=True, slots=True)
class Call:
    """One RPC the kubelet made to a plugin while admitting or starting a container."""

    method: str
    resource: str
    request: dict[str, object]
    response: object
    error: str | None
    started: float
    finished: float


@dataclass(frozen=True, slots=True)
class ContainerAdmission:
    """What one container was given: device IDs per resource and the merged runtime settings."""

    device_ids: dict[str, list[str]]
    allocation: ContainerAllocation
    preferred: dict[str, list[str]] = field(default_factory=dict)


class AdmissionError(KubedeviceError):
    """The pod was rejected; ``reason`` and ``message`` are what the pod status would show."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


class ContainerStartError(KubedeviceError):
    """The kubelet could not prepare a container's devices (e.g. PreStartContainer failed)."""
