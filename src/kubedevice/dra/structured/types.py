"""What goes in and out of the allocator: ``schedulerapi/types.go``, ``internal/types.go`` and the
``AllocationResult`` that ``Allocate`` returns, with kubedevice's two errors (upstream returns a
fatal error, or nil for "not on this node"; :class:`Unallocatable` carries why); and the search's
own records, which ``allocator_incubating.go`` declares beside its code (``requestData``,
``internalDeviceResult``, ``deviceRollbackState``)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ...errors import KubedeviceError
from ..models import DeviceClass, DeviceSelector, ExactDeviceRequest, ResourceClaim
from .consumable_capacity import Amount, Exact
from .taints import stored_tolerations

if TYPE_CHECKING:
    from .pools import DeviceWithID

MAX_RESULTS = 32  # resource.AllocationResultsMaxSize


class AllocationError(KubedeviceError):
    """Allocation cannot proceed at all (missing class, CEL error, bad request): as upstream."""


class Unallocatable(KubedeviceError):
    """No solution exists on this node; the message says which request or constraint fails."""


class DeviceID(NamedTuple):
    """A device by driver, pool and name (``schedulerapi.DeviceID``).

    A tuple so that hashing it is C's: the search looks IDs up in sets and dicts hundreds of
    thousands of times a run (benchmarks/allocate_vs_go.py), and a Python-level ``__hash__``
    was the largest single cost left there. Ordered field by field, as the dataclass was.
    """

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True)
class SharedDevice:
    """One share of an ``allowMultipleAllocations`` device held by an allocated claim
    (``SharedDeviceID`` with its ``ConsumedCapacity``)."""

    id: DeviceID
    share_id: str
    consumed: Mapping[str, str] = field(default_factory=dict)  # quantities as in ``consumedCapacity``


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DeviceResult:
    """``DeviceRequestAllocationResult``."""

    request: str
    id: DeviceID
    admin_access: bool | None = None
    tolerations: tuple[dict[str, Any], ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str | None = None
    consumed_capacity: tuple[tuple[str, str], ...] = ()

    def as_status(self) -> dict[str, Any]:
        """``DeviceRequestAllocationResult`` in field order, empty fields omitted as ``omitempty`` does."""
        entry: dict[str, Any] = {"request": self.request, "driver": self.id.driver, "pool": self.id.pool}
        entry["device"] = self.id.device
        if self.admin_access is not None:
            entry["adminAccess"] = self.admin_access
        optional = {
            "tolerations": list(self.tolerations),
            "bindingConditions": list(self.binding_conditions),
            "bindingFailureConditions": list(self.binding_failure_conditions),
            "shareID": self.share_id,
            "consumedCapacity": dict(self.consumed_capacity),
        }
        entry.update({k: v for k, v in optional.items() if v})
        return entry


@dataclass(frozen=True)
class ClaimAllocation:
    """``status.allocation`` of one claim (``AllocationResult``).

    ``node_local``: a device is local to the node (``nodeName``) or binds to it, so the
    allocation is for this node only; otherwise ``node_requirements`` are the node selector
    requirements gathered from the devices' ``nodeSelector`` (None: available everywhere).
    """

    claim: ResourceClaim
    results: tuple[DeviceResult, ...]
    config: tuple[dict[str, Any], ...]
    node_local: bool
    node_requirements: dict[str, Any] | None = None

    def as_status(self, node: str) -> dict[str, Any]:
        devices: dict[str, Any] = {"results": [r.as_status() for r in self.results]}
        if self.config:
            devices["config"] = list(self.config)
        allocation: dict[str, Any] = {"devices": devices}
        if self.node_local:
            term: dict[str, Any] = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            allocation["nodeSelector"] = {"nodeSelectorTerms": [term]}
        elif self.node_requirements:
            allocation["nodeSelector"] = {"nodeSelectorTerms": [self.node_requirements]}
        return allocation


def claim_ref(claim: ResourceClaim) -> str:
    """``klog.KObj``: ``namespace/name``, or just ``name`` without a namespace."""
    meta = claim.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


# --- the search's records -----------------------------------------------------------------


@dataclass
class RequestData:
    """``requestData``: a request, or one subrequest of a ``firstAvailable`` list."""

    base: str
    sub: str
    spec: ExactDeviceRequest
    device_class: DeviceClass
    count: int = 0  # numDevices
    all_devices: list[DeviceWithID] | None = None
    capacity: dict[str, Amount] = field(default_factory=dict)
    verdicts: dict[int, bool] = field(default_factory=dict)  # Shared.verdicts of its expressions
    fits: dict[Hashable, bool] = field(default_factory=dict)  # per DeviceWithID.capacity_key; as verdicts
    # What the search reads of it again and again, made once: ``functools.cached_property``
    # takes a lock at each first read in Python 3.11, 5% of benchmarks/allocate_vs_go.py's
    # matchAttribute row (100 requests, each read its first time).
    name: str = field(init=False, repr=False, compare=False)
    expressions: tuple[tuple[str, ...], tuple[str, ...]] = field(init=False, repr=False, compare=False)
    """What decides whether the selectors hold for a device: the class's expressions and the request's."""
    selector_key: tuple[str, tuple[str, ...]] = field(init=False, repr=False, compare=False)
    """What decides the selectors' verdict on a device: the class and the request's expressions."""
    capacity_key: tuple[tuple[str, Exact], ...] = field(init=False, repr=False, compare=False)
    """What decides whether the request's share fits a device of which nothing is held."""
    tolerations: tuple[dict[str, Any], ...] = field(init=False, repr=False, compare=False)
    """The request's tolerations as its results carry them."""
    static_key: Hashable = field(init=False, repr=False, compare=False)
    """What decides whether a device could serve the request whatever the search holds: the
    selectors, the amounts asked of each capacity and the tolerations."""

    def __post_init__(self) -> None:
        self.name = f"{self.base}/{self.sub}" if self.sub else self.base
        self.expressions = _expressions(self.device_class.spec.selectors), _expressions(self.spec.selectors)
        self.selector_key = self.device_class.metadata.name, self.expressions[1]
        self.capacity_key = tuple(sorted((name, amount.value) for name, amount in self.capacity.items()))
        self.tolerations = stored_tolerations(self.spec)
        tolerations = tuple(tuple(sorted(t.items())) for t in self.spec.tolerations or [])
        self.static_key = self.selector_key, self.capacity_key, tolerations


def _expressions(selectors: Sequence[DeviceSelector]) -> tuple[str, ...]:
    return tuple(s.cel.expression if s.cel else "" for s in selectors)


class Pick(NamedTuple):
    """``internalDeviceResult``: a device the search took for a request, with its share (if it
    allows several allocations)."""

    request: RequestData
    candidate: DeviceWithID
    share_id: str | None
    consumed: tuple[tuple[str, str], ...]


class TooMany(Exception):
    """The claim would exceed the result limit: backtrack further (``errAllocationResultMaxSizeExceeded``)."""


@dataclass(slots=True)
class DeviceRollbackState:
    """``deviceRollbackState``: what one ``allocate_device`` changed, for ``rollback_device``."""

    claim_index: int
    request: RequestData
    candidate: DeviceWithID
    counters: bool = False
    constraints: int = 0
    marked: bool = False
    share: bool = False
    result: bool = False
