"""Plain data of the DRA node protocol, independent of gRPC and of the API client.

The gRPC servicers in :mod:`.server` convert to and from these; everything else (state,
checkpoint, CDI, claims) works on them only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ClaimRef:
    """A claim as the kubelet names it in NodePrepareResources / NodeUnprepareResources."""

    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.uid})"


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One allocation result of a claim (``status.allocation.devices.results[]``)."""

    request: str
    driver: str
    pool: str
    device: str
    share_id: str | None = None

    @property
    def base_request(self) -> str:
        """The request without a subrequest (``gpu/large`` → ``gpu``), as the kubelet wants it."""
        return self.request.partition("/")[0]


@dataclass(frozen=True, slots=True)
class Claim:
    """The parts of a fetched ResourceClaim that preparing needs."""

    namespace: str
    name: str
    uid: str
    allocated: bool
    results: tuple[AllocatedDevice, ...] = ()

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Claim:
        """From a ResourceClaim as the API server returns it (``resource.k8s.io/v1`` JSON)."""
        meta = obj.get("metadata") or {}
        allocation = (obj.get("status") or {}).get("allocation")
        raw = ((allocation or {}).get("devices") or {}).get("results") or []
        results = tuple(
            AllocatedDevice(r["request"], r["driver"], r["pool"], r["device"], r.get("shareID")) for r in raw
        )
        namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
        return cls(namespace, name, uid, allocation is not None, results)


@dataclass(frozen=True, slots=True)
class PreparedDevice:
    """One device of a prepared claim, as the kubelet gets it back."""

    request_names: tuple[str, ...]
    pool: str
    device: str
    cdi_device_ids: tuple[str, ...]
    share_id: str | None = None


@dataclass(frozen=True, slots=True)
class PrepareResult:
    """The answer for one claim: its devices, or an error (then no devices)."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


@dataclass(slots=True)
class PreparedClaim:
    """A claim this driver has prepared (what the checkpoint keeps)."""

    namespace: str
    name: str
    devices: list[PreparedDevice] = field(default_factory=list)
