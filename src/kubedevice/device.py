"""Plain device data, independent of gRPC.

A :class:`Device` is what a source discovers and a plugin advertises; a
:class:`ContainerAllocation` is what a container receives. Only ``plugin/`` and
``kubelet/`` turn these into protobuf messages.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from .apimachinery.validation import C_IDENTIFIER
from .errors import KubedeviceError

MAX_ID_LENGTH = 63  # api.proto: "Max length of this field is 63 characters"
#: The largest message the kubelet takes from a device plugin: its gRPC client keeps grpc's default
#: receive limit (a bigger Allocate answer fails as "ResourceExhausted ... larger than max").
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
PERMISSIONS = frozenset("rwm")


class Health(enum.StrEnum):
    """Device health as the kubelet spells it (``deviceplugin/v1beta1/constants.go``)."""

    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"


class DeviceError(KubedeviceError, ValueError):
    """Device data the kubelet would reject or misread."""


@dataclass(frozen=True, slots=True)
class DeviceSpec:
    """A host device node granted to a container, with cgroup permissions from ``rwm``."""

    host_path: str
    container_path: str = ""
    permissions: str = "rw"

    def __post_init__(self) -> None:
        if not self.host_path.startswith("/"):
            raise DeviceError(f"device host path {self.host_path!r} is not absolute")
        if not self.container_path:
            object.__setattr__(self, "container_path", self.host_path)
        elif not self.container_path.startswith("/"):
            raise DeviceError(f"device container path {self.container_path!r} is not absolute")
        # Empty means the runtime's default ("rwm"); the kubelet passes it through, so must we.
        if not set(self.permissions) <= PERMISSIONS:
            raise DeviceError(f"permissions {self.permissions!r} must be letters from 'rwm'")


@dataclass(frozen=True, slots=True)
class Mount:
    """A host path mounted into a container."""

    host_path: str
    container_path: str = ""
    read_only: bool = False

    def __post_init__(self) -> None:
        if not self.host_path.startswith("/"):
            raise DeviceError(f"mount host path {self.host_path!r} is not absolute")
        if not self.container_path:
            object.__setattr__(self, "container_path", self.host_path)
        elif not self.container_path.startswith("/"):
            raise DeviceError(f"mount container path {self.container_path!r} is not absolute")


def _frozen_map(items: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(items))


@dataclass(frozen=True, slots=True)
class ContainerAllocation:
    """What one container gets for its devices: the plain form of ``ContainerAllocateResponse``."""

    envs: Mapping[str, str] = field(default_factory=dict)
    mounts: Sequence[Mount] = ()
    devices: Sequence[DeviceSpec] = ()
    annotations: Mapping[str, str] = field(default_factory=dict)
    cdi_devices: Sequence[str] = ()

    def __post_init__(self) -> None:
        bad = [name for name in self.envs if not C_IDENTIFIER.match(name)]
        if bad:
            raise DeviceError(f"invalid environment variable names: {', '.join(sorted(bad))}")
        object.__setattr__(self, "envs", _frozen_map(self.envs))
        object.__setattr__(self, "annotations", _frozen_map(self.annotations))
        object.__setattr__(self, "mounts", tuple(self.mounts))
        object.__setattr__(self, "devices", tuple(self.devices))
        object.__setattr__(self, "cdi_devices", tuple(self.cdi_devices))

    def __hash__(self) -> int:  # the mappings are read-only views; hash their items
        return hash(
            (tuple(self.envs.items()), self.mounts, self.devices, tuple(self.annotations.items()), self.cdi_devices)
        )

    @classmethod
    def merge(cls, parts: Iterable[ContainerAllocation]) -> ContainerAllocation:
        """Combine several grants; the first occurrence of a path, key or name wins."""
        envs: dict[str, str] = {}
        annotations: dict[str, str] = {}
        mounts: dict[str, Mount] = {}
        devices: dict[str, DeviceSpec] = {}
        cdi: dict[str, None] = {}
        for part in parts:
            for k, v in part.envs.items():
                envs.setdefault(k, v)
            for k, v in part.annotations.items():
                annotations.setdefault(k, v)
            for m in part.mounts:
                mounts.setdefault(m.container_path, m)
            for d in part.devices:
                devices.setdefault(d.container_path, d)
            cdi.update(dict.fromkeys(part.cdi_devices))
        return cls(envs, tuple(mounts.values()), tuple(devices.values()), annotations, tuple(cdi))


EMPTY_ALLOCATION = ContainerAllocation()


@dataclass(frozen=True, slots=True)
class Device:
    """One schedulable unit of a resource.

    ``grant`` is what a container receives when this device is allocated to it; the
    default :meth:`kubedevice.plugin.Plugin.allocate` merges the grants of the requested
    devices. ``group`` names the physical device behind a shared replica (``None`` for an
    unshared device) so that allocation policies can spread or pack replicas.
    """

    id: str
    health: Health = Health.HEALTHY
    numa_nodes: tuple[int, ...] = ()
    grant: ContainerAllocation = EMPTY_ALLOCATION
    group: str | None = None

    def __post_init__(self) -> None:
        if not self.id:
            raise DeviceError("device ID is empty")
        if len(self.id) > MAX_ID_LENGTH:
            raise DeviceError(f"device ID {self.id!r} is longer than {MAX_ID_LENGTH} characters")
        if not isinstance(self.health, Health):
            object.__setattr__(self, "health", Health(self.health))
        object.__setattr__(self, "numa_nodes", tuple(sorted(set(self.numa_nodes))))

    @property
    def healthy(self) -> bool:
        return self.health is Health.HEALTHY


def check_unique(devices: Iterable[Device]) -> dict[str, Device]:
    """Index devices by ID, refusing duplicates (the kubelet would silently merge them)."""
    index: dict[str, Device] = {}
    dupes: list[str] = []
    for device in devices:
        if device.id in index:
            dupes.append(device.id)
        index[device.id] = device
    if dupes:
        raise DeviceError(f"duplicate device IDs: {', '.join(sorted(set(dupes)))}")
    return index
