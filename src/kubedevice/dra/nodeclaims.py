"""Plain data of the DRA node protocol, independent of gRPC and of the API client.

The gRPC servicers in :mod:`.server` convert to and from these; everything else (state,
checkpoint, CDI, claims) works on them only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
"""``resourceapi.PodResourceClaimAnnotation``."""


class ClaimRef(NamedTuple):
    """A claim as the kubelet names it in NodePrepareResources / NodeUnprepareResources.

    A named tuple, not a frozen dataclass: one is made per claim of every call, and a frozen
    dataclass's ``__init__`` took twice as long (its ``object.__setattr__`` per field)."""

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
    admin_access: bool = False
    """``adminAccess: true``: the device is shared with its other users, never reserved (KEP-5018)."""

    @property
    def base_request(self) -> str:
        """The request without a subrequest (``gpu/large`` → ``gpu``), as the kubelet wants it."""
        return self.request.partition("/")[0]


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """One entry of ``status.allocation.devices.config``: a class's or the claim's configuration.

    ``driver`` is None for a configuration that is not ``opaque`` (an API extension this driver
    does not know); ``parameters`` is the decoded JSON of ``opaque.parameters``.
    """

    source: str
    requests: tuple[str, ...]
    driver: str | None
    parameters: Any = None

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> DeviceConfig:
        opaque = obj.get("opaque")
        driver = str(opaque.get("driver", "")) if isinstance(opaque, dict) else None
        parameters = opaque.get("parameters") if isinstance(opaque, dict) else None
        requests = obj.get("requests")
        names = tuple(str(r) for r in requests) if isinstance(requests, list) else ()
        return cls(str(obj.get("source", "")), names, driver, parameters)


@dataclass(frozen=True, slots=True)
class Claim:
    """The parts of a fetched ResourceClaim that preparing needs."""

    namespace: str
    name: str
    uid: str
    allocated: bool
    results: tuple[AllocatedDevice, ...] = ()
    config: tuple[DeviceConfig, ...] = ()
    pod_claim_name: str | None = None
    """The ``resource.kubernetes.io/pod-claim-name`` annotation the resourceclaim controller puts on a
    claim it makes from a template: the pod's own name for the claim (None: not from a template)."""

    @classmethod
    def from_object(cls, obj: dict[str, Any]) -> Claim:
        """From a ResourceClaim as the API server returns it (``resource.k8s.io/v1`` JSON)."""
        meta = obj.get("metadata") or {}
        allocation = (obj.get("status") or {}).get("allocation")
        devices = (allocation or {}).get("devices") or {}
        results = tuple(
            AllocatedDevice(
                r["request"], r["driver"], r["pool"], r["device"], r.get("shareID"), r.get("adminAccess") is True
            )
            for r in devices.get("results") or []
        )
        config = tuple(DeviceConfig.from_object(c) for c in devices.get("config") or [] if isinstance(c, dict))
        namespace, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
        pod_claim_name = (meta.get("annotations") or {}).get(POD_CLAIM_ANNOTATION)
        return cls(namespace, name, uid, allocation is not None, results, config, pod_claim_name)


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
