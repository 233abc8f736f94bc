"""A structured-parameters allocator for one node, like the scheduler's.

Follows ``k8s.io/dynamic-resource-allocation/structured`` in the variant the scheduler runs for
the feature gates (``internal/incubating`` with the 1.36 and 1.37 defaults,
``internal/experimental`` where ``DRAListTypeAttributes`` is on, ``internal/stable`` with 1.34's
and 1.35's) and the release (v0.36 for 1.36, v0.37 for 1.37, where they differ): pools are
gathered as ``GatherPools`` does (only the newest generation of a pool counts; completeness is
judged against every slice of that generation, on any node; pools are sorted by driver and name,
slices by name), every claim and request is handled in order, and each needed device is picked by
depth-first search over the pools' devices in that order. Within one request the search tries
sets, not orderings (``allocateOne``'s start location), and the first full solution wins.
``ExactCount``/``All``, ``firstAvailable``, ``matchAttribute``, ``distinctAttribute``, device
taints (results carry the request's tolerations), partitionable devices (``sharedCounters`` of the
pool's counter slices, ``consumesCounters``, per-device node selection), consumable capacity
(``allowMultipleAllocations``, ``requestPolicy``, ``capacity.requests``; results carry ``shareID``
and ``consumedCapacity``), binding conditions (copied into results; ``bindsToNode``) and the
32-devices-per-claim limit behave as upstream, each behind its feature gate; CEL errors abort with
the scheduler's messages. A branch is cut as soon as fewer candidates are left than devices still
needed, which does not change which solution is found (see :meth:`_Search.walk_start`). When
there is no solution the error names the first request or constraint that cannot be met, and what
rules devices out (selectors, taints, counters, capacity), which the scheduler does not.

``shareID``: upstream draws a random UUID per share; ours is a version-5 UUID of the claim, the
request and the device, so the same input gives the same output.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from typing import Any, NamedTuple

from ..errors import KubedeviceError
from . import capacity as cap
from . import cel
from .explain import device_input
from .gates import Features
from .models import (
    Device,
    DeviceAttribute,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    NodeSelector,
    ResourceClaim,
    ResourceSlice,
)
from .taints import stored_tolerations, taint_blocks

MAX_RESULTS = 32  # resource.AllocationResultsMaxSize
_SHARE_NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # RFC 4122's URL namespace


class AllocationError(KubedeviceError):
    """Allocation cannot proceed at all (missing class, CEL error, bad request): as upstream."""


class Unallocatable(KubedeviceError):
    """No solution exists on this node; the message says which request or constraint fails."""


class DeviceID(NamedTuple):
    """A device by driver, pool and name.

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
    """One share of an ``allowMultipleAllocations`` device held by an allocated claim."""

    id: DeviceID
    share_id: str
    consumed: Mapping[str, str] = field(default_factory=dict)  # quantities as in ``consumedCapacity``


@dataclass(frozen=True)
class DeviceResult:
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
    """``status.allocation`` of one claim.

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


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)


def claim_ref(claim: ResourceClaim) -> str:
    """``klog.KObj``: ``namespace/name``, or just ``name`` without a namespace."""
    meta = claim.metadata
    return f"{meta.namespace}/{meta.name}" if meta.namespace else meta.name


# --- node selection and pools -------------------------------------------------------------


def _requirement_matches(values: Mapping[str, str], key: str, operator: str, wanted: Sequence[str]) -> bool:
    present = key in values
    if operator == "In":
        return present and values[key] in wanted
    if operator == "NotIn":
        return not present or values[key] not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, limit = int(values[key]), int(wanted[0])
        except ValueError:
            return False
        return have > limit if operator == "Gt" else have < limit
    return False


def node_selector_matches(selector: NodeSelector, node: Node) -> bool:
    """Terms are ORed, requirements within a term ANDed; an empty term matches nothing."""
    fields = {"metadata.name": node.name}
    for term in selector.node_selector_terms:
        requirements = [(node.labels, r) for r in term.match_expressions] + [(fields, r) for r in term.match_fields]
        if requirements and all(_requirement_matches(v, r.key, r.operator, r.values) for v, r in requirements):
            return True
    return False


def _targets(node: Node, name: str | None, all_nodes: bool | None, selector: NodeSelector | None) -> bool:
    if name:
        return name == node.name
    if all_nodes:
        return True
    return selector is not None and node_selector_matches(selector, node)


def device_targets(device: Device, node: Node) -> bool:
    """A ``perDeviceNodeSelection`` device's own node fields (``NodeMatches`` on the device)."""
    return _targets(node, device.node_name, device.all_nodes, device.node_selector)


def _slice_relevant(slice_: ResourceSlice, node: Node, features: Features) -> bool:
    """Whether ``GatherPools`` adds the slice for ``node`` (``pools_incubating.go``).

    Counter-set slices are nodes' slices like any other: one that does not target the node
    leaves the pool short, and the completeness check then fetches it from all slices. A
    ``perDeviceNodeSelection`` slice counts when any one device targets the node, and each
    device is then checked again on its own when it is a candidate (``isSelectable``).
    Without ``DRAPartitionableDevices`` both kinds are ignored. The stable variant
    (``pools_stable.go``) and 1.36's incubating one (v0.36.3) add every counter-set slice,
    whatever node it targets.
    """
    spec = slice_.spec
    if not features.partitionable_devices and (spec.per_device_node_selection is not None or spec.shared_counters):
        return False
    if (features.stable or features.before_137) and spec.shared_counters:
        return True
    if spec.node_name or spec.all_nodes or spec.node_selector is not None:
        return _targets(node, spec.node_name, spec.all_nodes, spec.node_selector)
    if spec.per_device_node_selection:
        return any(device_targets(d, node) for d in spec.devices)
    return False


Exact = int | Fraction
"""An exact quantity: an ``int`` where it is whole, which the counter checks compare many
times faster than a ``Fraction`` (benchmarks/allocate_vs_go.py, partitionable workloads)."""

CounterTotals = dict[tuple[str, str], Exact]  # (counter set, counter) -> value


@dataclass
class Pool:
    """A pool as ``buildPool`` makes it: its device slices targeting the node in search order.

    ``elsewhere`` are its device slices for other nodes (their allocated devices consume the
    pool's counters too); ``counters`` the values of its counter sets.
    """

    driver: str
    name: str
    slices: list[ResourceSlice]
    incomplete: bool = False
    invalid: str = ""
    elsewhere: list[ResourceSlice] = field(default_factory=list)
    counters: CounterTotals = field(default_factory=dict)

    @property
    def has_binding_conditions(self) -> bool:
        """``poolHasBindingConditions``: such pools are tried after all others."""
        return any(d.binding_conditions is not None for s in self.slices for d in s.spec.devices)


def _add_slice(pools: dict[tuple[str, str], list[ResourceSlice]], slice_: ResourceSlice) -> None:
    """``addSlice``: a newer generation replaces the pool's slices, an older one is dropped."""
    key = (slice_.spec.driver, slice_.spec.pool.name)
    known = pools.get(key)
    generation = slice_.spec.pool.generation
    if known is None or generation > known[0].spec.pool.generation:
        pools[key] = [slice_]
    elif generation == known[0].spec.pool.generation:
        known.append(slice_)


def _slices_in_pool(
    slices: Sequence[ResourceSlice], key: tuple[str, str], generation: int
) -> list[ResourceSlice] | None:
    """``checkSlicesInPool``: the pool's slices of ``generation`` on every node, or None when obsolete.

    A newer generation anywhere means the driver is replacing the one this node sees, so the
    scheduler ignores the pool rather than calling it incomplete.
    """
    found = []
    for slice_ in slices:
        if (slice_.spec.driver, slice_.spec.pool.name) != key:
            continue
        if slice_.spec.pool.generation > generation:
            return None
        if slice_.spec.pool.generation == generation:
            found.append(slice_)
    return found


def _counter_value(counter: Any, where: str) -> Exact:
    value = counter.get("value") if isinstance(counter, Mapping) else None
    try:
        exact = cap.amount(value, where).value
    except cap.CapacityError as error:
        raise AllocationError(str(error)) from None
    return exact.numerator if exact.denominator == 1 else exact


def _counter_sets(slices: Sequence[ResourceSlice]) -> tuple[CounterTotals, set[str], str]:
    """``getAndValidateCounterSets``: every counter's value, the set names, the first error."""
    totals: CounterTotals = {}
    names: set[str] = set()
    for slice_ in slices:
        for counter_set in slice_.spec.shared_counters or []:
            name = str(counter_set.get("name", ""))
            if name in names:
                return {}, names, f"duplicate counter set name {name}"
            names.add(name)
            for counter, spec in (counter_set.get("counters") or {}).items():
                where = f"ResourceSlice {slice_.metadata.name}: sharedCounters {name}: counter {counter}"
                totals[(name, counter)] = _counter_value(spec, where)
    return totals, names, ""


def consumption(device: Device, where: str = "") -> list[tuple[str, str, Exact]]:
    """(counter set, counter, amount) for each counter a device consumes."""
    return [
        (str(entry.get("counterSet", "")), counter, _counter_value(spec, f"{where}device {device.name}: {counter}"))
        for entry in device.consumes_counters or []
        for counter, spec in (entry.get("counters") or {}).items()
    ]


def _missing_counter(totals: CounterTotals, sets: set[str], slices: Iterable[ResourceSlice]) -> str:
    """``validateDeviceCounterConsumption``'s first error, word for word."""
    for slice_ in slices:
        for device in slice_.spec.devices:
            for entry in device.consumes_counters or []:
                counter_set = str(entry.get("counterSet", ""))
                if counter_set not in sets:
                    return f"counter set {counter_set} not found"
                for counter in entry.get("counters") or {}:
                    if (counter_set, counter) not in totals:
                        return f"counter {counter} not found in counter set {counter_set}"
    return ""


def _build_pool(
    key: tuple[str, str], slices: list[ResourceSlice], everywhere: Sequence[ResourceSlice], features: Features
) -> Pool:
    """``buildPool``: slices sorted by name (the search order), counter sets gathered and checked.

    A repeated device name among the node's slices, a repeated counter set, or a device that
    consumes a counter the pool does not have makes the pool invalid.
    """
    ordered = sorted(slices, key=lambda s: s.metadata.name)
    here = {s.metadata.name for s in ordered}
    rest = [s for s in everywhere if s.metadata.name not in here]
    if features.partitionable_devices:
        counter_slices = [s for s in ordered + rest if s.spec.shared_counters]
        device_slices = [s for s in ordered if not s.spec.shared_counters]
        elsewhere = [s for s in rest if not s.spec.shared_counters]
    else:
        counter_slices, device_slices, elsewhere = [], ordered, rest
    seen: set[str] = set()
    for device in (d for s in device_slices for d in s.spec.devices):
        if device.name in seen:
            return Pool(key[0], key[1], [], invalid=f"duplicate device name {device.name}")
        seen.add(device.name)
    if not features.partitionable_devices:
        return Pool(key[0], key[1], device_slices)
    totals, sets, invalid = _counter_sets(counter_slices)
    invalid = invalid or _missing_counter(totals, sets, device_slices) or _missing_counter(totals, sets, elsewhere)
    if invalid:
        return Pool(key[0], key[1], [], invalid=invalid)
    return Pool(key[0], key[1], device_slices, elsewhere=elsewhere, counters=totals)


def gather_pools(slices: Sequence[ResourceSlice], node: Node, features: Features | None = None) -> list[Pool]:
    """The pools that serve ``node``, in the scheduler's search order (``GatherPools``).

    Only slices relevant to the node are kept, and of each pool only its newest generation
    among them. A pool is complete when that generation has ``resourceSliceCount`` slices,
    counted on the node first and then, if short, over all slices of every node; a newer
    generation elsewhere makes the pool obsolete and it is ignored. Pools are sorted by driver
    and pool name, those with binding conditions last (not in the stable variant).
    """
    features = features or Features()
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for slice_ in slices:
        if _slice_relevant(slice_, node, features):
            _add_slice(by_pool, slice_)
    ready: list[Pool] = []
    binding: list[Pool] = []
    for key, pool_slices in by_pool.items():
        pool_meta = pool_slices[0].spec.pool
        everywhere: Sequence[ResourceSlice] = ()
        if len(pool_slices) != pool_meta.resource_slice_count:
            found = _slices_in_pool(slices, key, pool_meta.generation)
            if found is None:
                continue
            if len(found) != pool_meta.resource_slice_count:
                ready.append(Pool(key[0], key[1], [], incomplete=True))
                continue
            everywhere = found
        pool = _build_pool(key, pool_slices, everywhere, features)
        (binding if pool.has_binding_conditions and not features.stable else ready).append(pool)
    return sorted(ready, key=lambda p: (p.driver, p.name)) + sorted(binding, key=lambda p: (p.driver, p.name))


def allocated_devices(claims: Iterable[ResourceClaim]) -> list[DeviceID | SharedDevice]:
    """The devices that allocated claims hold, for ``allocate``'s ``in_use``.

    Admin-access results are skipped: they do not make a device unavailable to others. A
    result with a ``shareID`` is one share of a device that allows multiple allocations, with
    the capacity it consumes (``foreachAllocatedDevice`` in the scheduler's
    ``dynamicresources/allocateddevices.go``).
    """
    found: list[DeviceID | SharedDevice] = []
    for claim in claims:
        allocation = (claim.status or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("adminAccess") is True:
                continue
            device = DeviceID(result.get("driver", ""), result.get("pool", ""), result.get("device", ""))
            share = result.get("shareID")
            if share is None:
                found.append(device)
                continue
            consumed = {str(name): str(value) for name, value in (result.get("consumedCapacity") or {}).items()}
            found.append(SharedDevice(device, str(share), consumed))
    return found


# --- constraints --------------------------------------------------------------------------


def lookup_attribute(device: Device, driver: str, name: str) -> DeviceAttribute | None:
    """A fully qualified attribute; a bare key in the device counts for the driver's own domain."""
    if name in device.attributes:
        return device.attributes[name]
    domain, slash, ident = name.partition("/")
    if not slash or domain != driver:
        return None
    return device.attributes.get(ident)


_SCALAR_KINDS = ("string", "int", "bool", "version")
_LIST_KINDS = {"strings": "string", "ints": "int", "bools": "bool", "versions": "version"}


def attribute_set(value: Mapping[str, Any]) -> tuple[str, frozenset[Any]] | None:
    """``attributeAsSet`` (``internal/experimental``): a scalar or non-empty list as (kind, set).

    None for an empty list, which matches nothing.
    """
    kind, item = next(iter(value.items()), ("", None))
    if kind in _SCALAR_KINDS:
        return kind, frozenset([item])
    if kind in _LIST_KINDS and item:
        return _LIST_KINDS[kind], frozenset(item)
    return None


def _intersection(a: tuple[str, frozenset[Any]], b: tuple[str, frozenset[Any]]) -> tuple[str, frozenset[Any]] | None:
    """Common values of one kind; None when the kinds differ or nothing is common."""
    common = a[1] & b[1] if a[0] == b[0] else frozenset()
    return (a[0], common) if common else None


class _AttributeConstraint:
    """What ``matchAttribute`` and ``distinctAttribute`` share: which requests they govern."""

    def __init__(self, attribute: str, requests: Sequence[str], list_types: bool) -> None:
        self.attribute = attribute
        self.requests = set(requests)
        self.list_types = list_types

    def applies(self, base: str, full: str) -> bool:
        return not self.requests or base in self.requests or full in self.requests


class MatchAttribute(_AttributeConstraint):
    """All devices of the constrained requests share one value of the attribute.

    Scalars compare by equality and a list value matches nothing after the first device
    (``internal/incubating``). With ``DRAListTypeAttributes`` (``internal/experimental``) every
    value is a set and the devices must have a value in common: a stack of intersections,
    narrowed by each device added and popped when it is removed.
    """

    def __init__(self, attribute: str, requests: Sequence[str], list_types: bool = False) -> None:
        super().__init__(attribute, requests, list_types)
        self.value: dict[str, Any] | None = None
        self.stack: list[tuple[str, frozenset[Any]]] = []
        self.count = 0

    def _next(self, value: dict[str, Any]) -> tuple[str, frozenset[Any]] | bool:
        """What adding ``value`` pushes (list types), or whether it is accepted (False: refused)."""
        if self.list_types:
            as_set = attribute_set(value)
            narrowed = as_set if as_set is None or not self.count else _intersection(self.stack[-1], as_set)
            return False if narrowed is None else narrowed
        if not self.count:
            return True
        return next(iter(value), "") in _SCALAR_KINDS and value == self.value

    def add(self, base: str, full: str, candidate: _Candidate) -> bool:
        if not self.applies(base, full):
            return True
        value = candidate.attribute(self.attribute)
        if value is None:
            return False
        pushed = self._next(value)
        if pushed is False:
            return False
        if isinstance(pushed, tuple):
            self.stack.append(pushed)
        elif not self.count:
            self.value = value
        self.count += 1
        return True

    def admits(self, base: str, full: str, candidate: _Candidate) -> bool:
        """Whether ``add`` could accept the device now; it stays false deeper in the search."""
        if not self.applies(base, full):
            return True
        value = candidate.attribute(self.attribute)
        return value is not None and self._next(value) is not False

    def remove(self, base: str, full: str) -> None:
        if self.applies(base, full):
            self.count -= 1
            if self.list_types:
                self.stack.pop()


class DistinctAttribute(_AttributeConstraint):
    """Every device of the constrained requests has its own value of the attribute.

    As ``distinctAttributeConstraint`` in ``internal/incubating/constraint.go`` of
    ``k8s.io/dynamic-resource-allocation`` v0.37: the values are a stack (the search adds and
    removes devices in LIFO order). Only a value of the same scalar type can be a duplicate; a
    list-typed value is refused once any value is held. (v0.36.3 kept one value per request
    name, so a request's own devices were barely compared; v0.37 compares them all:
    :class:`DistinctAttributeV036` is the older one.) With ``DRAListTypeAttributes``
    (``internal/experimental``) values are sets that must be pairwise disjoint.
    """

    def __init__(self, attribute: str, requests: Sequence[str], list_types: bool = False) -> None:
        super().__init__(attribute, requests, list_types)
        self.values: list[dict[str, Any]] = []

    def add(self, base: str, full: str, candidate: _Candidate) -> bool:
        if not self.applies(base, full):
            return True
        value = candidate.attribute(self.attribute)
        if value is None or not self._distinct(value):
            return False
        self.values.append(value)
        return True

    def _distinct(self, value: dict[str, Any]) -> bool:
        if self.list_types:
            as_set = attribute_set(value)
            held = (attribute_set(v) for v in self.values)
            return as_set is not None and all(h is None or _intersection(as_set, h) is None for h in held)
        kind = next(iter(value), "")
        if kind not in _SCALAR_KINDS:
            return not self.values
        return value not in self.values

    def admits(self, base: str, full: str, candidate: _Candidate) -> bool:
        """Whether ``add`` could accept the device now; once a value is held it stays held deeper."""
        if not self.applies(base, full):
            return True
        value = candidate.attribute(self.attribute)
        return value is not None and self._distinct(value)

    def remove(self, base: str, full: str) -> None:
        if self.applies(base, full):
            self.values.pop()


class DistinctAttributeV036(_AttributeConstraint):
    """``distinctAttributeConstraint`` as 1.36's scheduler has it (v0.36.3, ``internal/incubating``
    and ``internal/experimental`` ``constraint.go``), kept because allocation is exact per release.

    Its values are a map keyed by the base request name, so each device of a request replaces
    the one before it and a request's devices are only compared with the last one; ``remove``
    deletes the request's entry however many devices it still holds. The first device of the
    constraint (a count, not the map) is taken without a look at its value.
    """

    def __init__(self, attribute: str, requests: Sequence[str], list_types: bool = False) -> None:
        super().__init__(attribute, requests, list_types)
        self.by_request: dict[str, dict[str, Any]] = {}
        self.count = 0

    def add(self, base: str, full: str, candidate: _Candidate) -> bool:
        if not self.applies(base, full):
            return True
        value = candidate.attribute(self.attribute)
        if value is None or (self.count and not self._distinct(value, self.by_request.values())):
            return False
        self.by_request[base] = value
        self.count += 1
        return True

    def _distinct(self, value: dict[str, Any], held: Iterable[dict[str, Any]]) -> bool:
        """``matchesAttribute``: no held value of the same kind equal (sets: overlapping) to ``value``."""
        if self.list_types:
            as_set = attribute_set(value)
            sets = (attribute_set(v) for v in held)
            return as_set is not None and all(h is None or _intersection(as_set, h) is None for h in sets)
        kind = next(iter(value), "")
        return all(kind in _SCALAR_KINDS and value != h for h in held)

    def admits(self, base: str, full: str, candidate: _Candidate) -> bool:
        """Whether ``add`` could accept the device deeper in the search.

        The request's own entry is left out: a later device of the same request replaces it, so
        a value it refuses now may be taken then. The other entries stay while the branch lasts.
        """
        if not self.applies(base, full):
            return True
        value = candidate.attribute(self.attribute)
        others = [v for name, v in self.by_request.items() if name != base]
        return value is not None and (not self.count or self._distinct(value, others))

    def remove(self, base: str, full: str) -> None:
        if self.applies(base, full):
            self.by_request.pop(base, None)
            self.count -= 1


Constraint = MatchAttribute | DistinctAttribute | DistinctAttributeV036


# --- the search ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Candidate:
    """One device of a usable pool, with what the search needs of its slice and pool."""

    id: DeviceID
    device: Device
    slice_: ResourceSlice
    pool: Pool

    @property
    def per_device_node(self) -> bool:
        return bool(self.slice_.spec.per_device_node_selection)

    @cached_property
    def view(self) -> cel.DeviceInput:
        """The device as CEL sees it, built once: every claim's selectors read the same view."""
        return device_input(self.id.driver, self.device)

    def attribute(self, name: str) -> dict[str, Any] | None:
        """The attribute's one-key value (``{"int": 5}``), None when the device lacks it.

        Kept per name: constraints ask it of the same device at every step of the walk, and
        each answer is a pydantic dump. Callers must not change the dict.
        """
        values = self._attributes
        if name not in values:
            attribute = lookup_attribute(self.device, self.id.driver, name)
            values[name] = None if attribute is None else attribute.as_value()
        return values[name]

    @cached_property
    def _attributes(self) -> dict[str, dict[str, Any] | None]:
        return {}

    @cached_property
    def counter_totals(self) -> CounterTotals:
        """What the device consumes of each counter, summed over its ``consumesCounters`` entries."""
        totals: CounterTotals = {}
        for counter_set, counter, value in consumption(self.device, f"ResourceSlice {self.slice_.metadata.name}: "):
            totals[(counter_set, counter)] = totals.get((counter_set, counter), 0) + value
        return totals

    @cached_property
    def capacity_key(self) -> Hashable:
        """What decides whether a request's share fits the device while none of it is held: the
        capacities' values when none has a request policy (a pool's devices mostly repeat them,
        so the check runs once for all of them), else the device itself."""
        capacity = self.device.capacity
        if any(c.request_policy is not None for c in capacity.values()):
            return self.id
        return tuple((name, c.value) for name, c in capacity.items())

    @cached_property
    def capacities(self) -> dict[str, cap.Capacity]:
        where = f"ResourceSlice {self.slice_.metadata.name}: device {self.device.name}: capacity"
        try:
            return cap.capacities_of(self.device.capacity, where)
        except cap.CapacityError as error:
            raise AllocationError(str(error)) from None


@dataclass
class _Request:
    """A request, or one subrequest of a ``firstAvailable`` list."""

    base: str
    sub: str
    spec: ExactDeviceRequest
    device_class: DeviceClass
    count: int = 0
    all_devices: list[_Candidate] | None = None
    capacity: dict[str, cap.Amount] = field(default_factory=dict)
    verdicts: dict[DeviceID, bool] = field(default_factory=dict)  # shared by requests of one selector_key
    fits: dict[Hashable, bool] = field(default_factory=dict)  # per _Candidate.capacity_key; as verdicts

    @cached_property
    def name(self) -> str:
        return f"{self.base}/{self.sub}" if self.sub else self.base

    @cached_property
    def selector_key(self) -> tuple[str, tuple[str, ...]]:
        """What decides the selectors' verdict on a device: the class and the request's expressions."""
        return self.device_class.metadata.name, tuple(s.cel.expression if s.cel else "" for s in self.spec.selectors)

    @cached_property
    def capacity_key(self) -> tuple[tuple[str, Fraction], ...]:
        """What decides whether the request's share fits a device of which nothing is held."""
        return tuple(sorted((name, amount.value) for name, amount in self.capacity.items()))


class _Pick(NamedTuple):
    """A device the search took for a request, with its share (if it allows several allocations)."""

    request: _Request
    candidate: _Candidate
    share_id: str | None
    consumed: tuple[tuple[str, str], ...]


class _TooMany(Exception):
    """The claim would exceed the result limit: backtrack further (``errAllocationResultMaxSizeExceeded``)."""


@dataclass
class _Undo:
    """What one ``try_add`` changed, for ``rollbackDevice``."""

    claim_index: int
    request: _Request
    candidate: _Candidate
    counters: bool = False
    constraints: int = 0
    marked: bool = False
    share: bool = False
    result: bool = False


class _Ledger:
    """What is held of each device: by allocated claims, and by the claims being allocated.

    Exclusive devices, shares of ``allowMultipleAllocations`` devices with the capacity they
    consume, and the counters of each pool (``AllocatedState`` plus the allocator's
    ``allocatingDevices``, ``allocatingCapacity`` and ``consumedCounters``).
    """

    def __init__(
        self, in_use: Iterable[DeviceID | SharedDevice], *, shares: bool = True, by_pool_name: bool = False
    ) -> None:
        """``shares``: whether shares count (the stable variant gets only the exclusive devices);
        ``by_pool_name``: counters keyed by pool name alone, as v0.36.3 keys them, so two drivers'
        pools of one name share them (fixed in v0.37: keyed by driver and pool)."""
        self.by_pool_name = by_pool_name
        self.exclusive: set[DeviceID] = set()
        self.shared: set[DeviceID] = set()
        self.held_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        for item in in_use:
            if isinstance(item, SharedDevice):
                if not shares:
                    continue
                self.shared.add(item.id)
                if item.consumed:
                    totals = self.held_capacity.setdefault(item.id, {})
                    for name, value in item.consumed.items():
                        amount = _counter_value({"value": value}, f"consumedCapacity of {item.id}: {name}")
                        totals[name] = totals.get(name, Fraction(0)) + amount
            else:
                self.exclusive.add(item)
        self.allocating: dict[DeviceID, set[int]] = {}
        self.busy: set[DeviceID] = set()  # allocating to some claim
        self.allocating_capacity: dict[DeviceID, list[dict[str, Fraction]]] = {}
        # Per pool: its counters' values less all that consumes them, and those left below zero.
        self.left: dict[tuple[str, str], tuple[CounterTotals, set[tuple[str, str]]]] = {}

    def allocated(self, device: DeviceID) -> bool:
        """``IsDeviceAllocated``: held by an allocated claim, exclusively or as a share."""
        return device in self.exclusive or device in self.shared or device in self.held_capacity

    def in_use(self, device: DeviceID) -> bool:
        """``deviceInUse``: exclusively held, or being allocated to a claim."""
        return device in self.exclusive or device in self.busy

    def mark(self, device: DeviceID, claim_index: int, on: bool) -> None:
        """Allocating the device to the claim, or no longer; ``busy`` follows."""
        owners = self.allocating.setdefault(device, set())
        if on:
            owners.add(claim_index)
            self.busy.add(device)
        else:
            owners.discard(claim_index)
            if not owners:
                self.busy.discard(device)

    def capacity_in_use(self, device: DeviceID) -> bool:
        """``deviceCapacityInUse``: some share of the device is held or being allocated."""
        return device in self.held_capacity or device in self.shared or bool(self.allocating_capacity.get(device))

    def capacity_held(self, device: DeviceID) -> dict[str, Fraction]:
        """Capacity taken by allocated claims' shares and by those being allocated."""
        if device not in self.held_capacity and not self.allocating_capacity.get(device):
            return {}  # every exclusive device: the walk asks this of each device it meets
        held = dict(self.held_capacity.get(device, {}))
        for share in self.allocating_capacity.get(device, []):
            for name, value in share.items():
                held[name] = held.get(name, Fraction(0)) + value
        return held

    def _key(self, pool: Pool) -> tuple[str, str]:
        return ("", pool.name) if self.by_pool_name else (pool.driver, pool.name)

    def _left(self, pool: Pool) -> tuple[CounterTotals, set[tuple[str, str]]]:
        """What is left of the pool's counters, and which are overdrawn.

        Starts as the counters less what allocated devices, on any node, consume
        (``checkAvailableCounters``); :meth:`reserve_counters` then takes and gives back what
        the devices being allocated consume. Kept up to date instead of summed on every check:
        the walk checks the counters of every device it meets, for every claim.
        """
        key = self._key(pool)
        known = self.left.get(key)
        if known is not None:
            return known
        left = dict(pool.counters)
        for slice_ in pool.slices + pool.elsewhere:
            for device in slice_.spec.devices:
                if not self.allocated(DeviceID(pool.driver, pool.name, device.name)):
                    continue
                for counter_set, counter, value in consumption(device):
                    if (counter_set, counter) in left:
                        left[(counter_set, counter)] -= value
        self.left[key] = left, {name for name, value in left.items() if value < 0}
        return self.left[key]

    def counters_fit(self, candidate: _Candidate) -> bool:
        """Whether the pool's counters, every one of them, stay covered with the device added.

        Upstream compares every counter of the pool, not only those the device consumes, so a
        counter already overdrawn (by allocated devices) blocks every device of the pool. A
        counter the pool lacks is not compared, as upstream ranges over the pool's counters.
        """
        takes = candidate.counter_totals
        left, overdrawn = self._left(candidate.pool)
        if overdrawn and not overdrawn <= takes.keys():
            return False
        for name, value in takes.items():
            have = left.get(name)
            if have is not None and have < value:
                return False
        return True

    def reserve_counters(self, candidate: _Candidate, sign: int) -> None:
        """Take (``sign`` 1) or give back (-1) what the device consumes of the pool's counters."""
        left, overdrawn = self._left(candidate.pool)
        for name, value in candidate.counter_totals.items():
            if name not in left:
                continue
            left[name] -= sign * value
            if left[name] < 0:
                overdrawn.add(name)
            else:
                overdrawn.discard(name)


_GATE_REFUSAL = "consume counters (DRAPartitionableDevices is off)"
_REFUSALS = (
    "in use",
    "by selectors",
    "by a selector error",
    "on other nodes",
    "have binding conditions (DRADeviceBindingConditions is off)",
    _GATE_REFUSAL,
    "by capacity",
    "by a capacity error",
    "by counters",
    "by taints",
)  # what rules a device out for a request on its own, in the order explanations list them


class _Search:
    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        classes: Mapping[str, DeviceClass],
        pools: Sequence[Pool],
        ledger: _Ledger,
        *,
        node: Node,
        features: Features,
    ) -> None:
        self.claims = claims
        self.classes = classes
        self.pools = pools
        self.node = node
        self.features = features
        self.ledger = ledger
        self.verdicts: dict[tuple[str, tuple[str, ...]], dict[DeviceID, bool]] = {}  # per _Request.selector_key
        self.static_fits: dict[tuple[tuple[str, Fraction], ...], dict[Hashable, bool]] = {}  # per capacity_key
        # Every device of the usable pools in the order the scheduler tries them.
        self.order = [c for pool in self.usable_pools() for c in self._pool_devices(pool)]
        self.any_shared = any(self.shared(c) for c in self.order)
        self.by_id = {c.id: c for c in self.order}
        self.least_takes: dict[tuple[int, str, str], Fraction | None] = {}
        self.position = {c.id: i for i, c in enumerate(self.order)}
        # 1 where the device at that position of ``order`` is not in use: the walk and its count
        # cut look for the next free device with ``bytearray.find`` instead of asking each
        # device in turn (with 100 claims the devices earlier claims hold were most of the walk).
        self.free = bytearray(0 if ledger.in_use(c.id) else 1 for c in self.order)
        self.plan: list[list[list[_Request]]] = []
        self.constraints: list[list[Constraint]] = []
        for index, claim in enumerate(claims):  # per claim, as upstream reports the first error
            self.plan.append(self._plan_claim(index, claim))
            self.constraints.append(self._constraints(claim))
        self.need_after = self._need_after()
        self.must_add_after = self._must_add_after()
        self.results: list[list[_Pick]] = [[] for _ in claims]
        self.chosen: dict[tuple[int, int], int] = {}

    # planning (validateDeviceRequest)

    def _need_after(self) -> dict[tuple[int, int], int]:
        """Per (claim, request): the fewest exclusive devices all later requests need together.

        Admin access shares devices, so such alternatives count as needing none.
        """
        need_after: dict[tuple[int, int], int] = {}
        total = 0
        for ci in reversed(range(len(self.plan))):
            for ri in reversed(range(len(self.plan[ci]))):
                need_after[(ci, ri)] = total
                total += min(0 if alt.spec.admin_access else alt.count for alt in self.plan[ci][ri])
        return need_after

    def _must_add_after(self) -> set[tuple[int, int]]:
        """The (claim, request) positions after which an ``All`` request of a claim with constraints waits.

        ``allocateDevice`` with ``must`` aborts the whole allocation when a constraint refuses one
        of the devices an ``All`` request needs (allocator_stable.go and the others), and it does
        so as soon as it meets that device, before it reaches a device in use that would have
        failed the branch quietly. A count alone cannot tell which comes first, so the counting
        cuts (``_contended``, ``_capacity_short``) are not taken at these positions.
        """
        after: set[tuple[int, int]] = set()
        pending = False
        for ci in reversed(range(len(self.plan))):
            constrained = bool(self.constraints[ci])
            for ri in reversed(range(len(self.plan[ci]))):
                if pending:
                    after.add((ci, ri))
                pending = pending or (constrained and any(a.all_devices for a in self.plan[ci][ri]))
        return after

    def _plan_claim(self, index: int, claim: ResourceClaim) -> list[list[_Request]]:
        plan = []
        for request in claim.spec.devices.requests:
            self._check_gates(claim, request)
            plan.append(self._plan_request(index, claim, request))
        minimum = sum(min(alt.count for alt in alts) for alts in plan)
        if minimum > MAX_RESULTS:
            raise AllocationError(
                f"claim {claim_ref(claim)}: number of requested devices {minimum} "
                f"exceeds the claim limit of {MAX_RESULTS}"
            )
        return plan

    def _check_gates(self, claim: ResourceClaim, request: DeviceRequest) -> None:
        """Requests that need a feature that is off abort, as ``Allocate`` refuses them."""
        where = f"claim {claim_ref(claim)}, request {request.name}"
        if request.first_available and not self.features.prioritized_list:
            raise AllocationError(f"{where}: has subrequests, but the DRAPrioritizedList feature is disabled")
        if self.features.consumable_capacity or self.features.stable:
            return  # the stable variant knows no capacity requests: it ignores them
        if request.exactly is not None and request.exactly.capacity is not None:
            raise AllocationError(f"{where}: has capacity requests, but the DRAConsumableCapacity feature is disabled")
        for sub in request.first_available:
            if sub.capacity is not None:
                raise AllocationError(
                    f"claim {claim_ref(claim)}, subrequest {sub.name}: has capacity requests, "
                    "but the DRAConsumableCapacity feature is disabled"
                )

    def _plan_request(self, index: int, claim: ResourceClaim, request: DeviceRequest) -> list[_Request]:
        if request.exactly is not None:
            alternatives = [(request.name, "", request.exactly)]
        else:
            alternatives = [(request.name, sub.name, sub) for sub in request.first_available]
        if not alternatives:
            raise AllocationError(
                f"claim {claim_ref(claim)}, request {request.name}: "
                "missing device class name (unsupported request type?)"
            )
        return [self._plan_one(index, claim, base, sub, spec) for base, sub, spec in alternatives]

    def _plan_one(self, index: int, claim: ResourceClaim, base: str, sub: str, spec: ExactDeviceRequest) -> _Request:
        name = f"{base}/{sub}" if sub else base
        where = f"claim {claim_ref(claim)}, request {name}"
        if any(s.cel is None for s in spec.selectors):
            raise AllocationError(f"{where}, selector: CEL expression empty (unsupported selector type?)")
        if spec.admin_access is not None and not self.features.admin_access:
            raise AllocationError(f"{where}: admin access is requested, but the feature is disabled")
        if not spec.device_class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        device_class = self.classes.get(spec.device_class_name)
        if device_class is None:
            raise AllocationError(
                f"{where}: could not retrieve device class {spec.device_class_name}: "
                f'deviceclass.resource.k8s.io "{spec.device_class_name}" not found'
            )
        capacity = self._capacity_requests(where, spec) if self.features.consumable_capacity else {}
        request = _Request(base, sub, spec, device_class, capacity=capacity)
        request.verdicts = self.verdicts.setdefault(request.selector_key, {})
        request.fits = self.static_fits.setdefault(request.capacity_key, {})
        if spec.allocation_mode == "ExactCount":
            request.count = spec.count
        elif spec.allocation_mode == "All":
            request.all_devices = self._all_devices(index, request, where)
            request.count = len(request.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {spec.allocation_mode}")
        return request

    @staticmethod
    def _capacity_requests(where: str, spec: ExactDeviceRequest) -> dict[str, cap.Amount]:
        try:
            return cap.requested(spec.capacity.requests if spec.capacity is not None else {}, where)
        except cap.CapacityError as error:
            raise AllocationError(str(error)) from None

    def _all_devices(self, index: int, request: _Request, where: str) -> list[_Candidate]:
        """Every selectable device whose static capacity could serve the request (``allDevices``)."""
        found = []
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool.driver}/{pool.name} "
                    "is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"{where}: asks for all devices, but resource pool {pool.driver}/{pool.name} is currently invalid"
                )
            for candidate in self._pool_devices(pool):
                if not self.selectable(index, request, candidate):
                    continue
                if self.features.consumable_capacity and not self._capacity_fits(
                    where, request, candidate, {}, candidate.device.name
                ):
                    continue
                found.append(candidate)
        return found

    def _constraints(self, claim: ResourceClaim) -> list[Constraint]:
        constraints: list[Constraint] = []
        list_types = self.features.list_type_attributes
        for i, constraint in enumerate(claim.spec.devices.constraints):
            if constraint.match_attribute is not None:
                constraints.append(MatchAttribute(constraint.match_attribute, constraint.requests, list_types))
            elif constraint.distinct_attribute is not None and not self.features.stable:
                distinct = DistinctAttributeV036 if self.features.before_137 else DistinctAttribute
                constraints.append(distinct(constraint.distinct_attribute, constraint.requests, list_types))
            else:
                raise AllocationError(
                    f"claim {claim_ref(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )
        return constraints

    # device checks

    @staticmethod
    def _pool_devices(pool: Pool) -> list[_Candidate]:
        return [
            _Candidate(DeviceID(pool.driver, pool.name, d.name), d, s, pool)
            for s in pool.slices
            for d in s.spec.devices
        ]

    def usable_pools(self) -> list[Pool]:
        return [p for p in self.pools if not p.incomplete and not p.invalid]

    def shared(self, candidate: _Candidate) -> bool:
        """The device takes several allocations (``allowMultipleAllocations`` with the gate on)."""
        return self.features.consumable_capacity and bool(candidate.device.allow_multiple_allocations)

    def selectable(self, claim_index: int, request: _Request, candidate: _Candidate) -> bool:
        """``isSelectable``: the device's binding conditions and node, and the selectors.

        All of it is pure, so the verdict is kept per device, class and request expressions
        (``request.verdicts``): the many claims that repeat them get it worked out once (the
        scheduler evaluates CEL per claim; with 100 claims it was the largest cost in
        benchmarks/allocate_vs_go.py). Errors are not kept: each claim raises its own, naming
        itself.
        """
        verdict = request.verdicts.get(candidate.id)
        if verdict is None:
            verdict = request.verdicts[candidate.id] = self._selectors_match(claim_index, request, candidate)
        return verdict

    def _selectors_match(self, claim_index: int, request: _Request, candidate: _Candidate) -> bool:
        if candidate.device.binding_conditions and not self.features.binding_conditions:
            return False
        verdict = self._all_selectors(claim_index, request, candidate)
        # After the selectors, as in isSelectable: a CEL error on another node's device still counts.
        return verdict and (not candidate.per_device_node or device_targets(candidate.device, self.node))

    def _all_selectors(self, claim_index: int, request: _Request, candidate: _Candidate) -> bool:
        """The class's selectors, then the request's, on the device."""
        class_name = request.device_class.metadata.name
        owners = (f"class {class_name}", f"claim {claim_ref(self.claims[claim_index])}")
        for owner, selectors in zip(owners, (request.device_class.spec.selectors, request.spec.selectors), strict=True):
            for i, selector in enumerate(selectors):
                if not self._one_selector(owner, i, selector.cel.expression if selector.cel else "", candidate):
                    return False
        return True

    def selectable_or_error(self, claim_index: int, request: _Request, candidate: _Candidate) -> bool | None:
        """``selectable``, with None for a device whose selectors fail instead of raising.

        For pruning and explaining: the error is the search's to raise, when and if upstream's
        order reaches that device.
        """
        try:
            return self.selectable(claim_index, request, candidate)
        except AllocationError:
            return None

    @staticmethod
    def _one_selector(owner: str, i: int, expression: str, candidate: _Candidate) -> bool:
        try:
            compiled = cel.compile_selector(expression, env="StoredExpressions")
        except cel.CompileError as error:
            raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {error.message}") from None
        try:
            return compiled.matches(candidate.view)
        except cel.EvalError as error:
            raise AllocationError(
                f"{owner}: selector #{i} on device {candidate.id}: CEL runtime error: {error.message}"
            ) from None

    def _capacity_fits(
        self, where: str, request: _Request, candidate: _Candidate, held: Mapping[str, Fraction], name: str
    ) -> bool:
        """``CmpRequestOverCapacity``; a request that cannot be represented aborts as upstream."""
        try:
            return cap.fits(request.capacity, candidate.capacities, held)
        except cap.CapacityError as error:
            raise AllocationError(f"{where}: checking capacity for device {name}: {error}") from None

    def _capacity_left(self, ci: int, request: _Request, candidate: _Candidate) -> bool:
        """Whether the request's share fits beside what is held of the device now.

        With nothing held (every exclusive device: only shares are held) the answer depends on
        the device's capacities and the amounts requested alone, so it is kept for every claim
        that asks the same and every device with the same capacities: the walk asks it of every
        device it meets, for every claim. Errors are not kept.
        """
        held = self.ledger.capacity_held(candidate.id)
        if not held:
            known = request.fits.get(candidate.capacity_key)
            if known is not None:
                return known
        where = f"claim {claim_ref(self.claims[ci])}, request {request.name}"
        fits = self._capacity_fits(where, request, candidate, held, str(candidate.id))
        if not held:
            request.fits[candidate.capacity_key] = fits
        return fits

    def _mark(self, device: DeviceID, claim_index: int, on: bool) -> None:
        """``Ledger.mark``, with the free map kept in step."""
        self.ledger.mark(device, claim_index, on)
        position = self.position.get(device)
        if position is not None:
            self.free[position] = 0 if self.ledger.in_use(device) else 1

    def _positions(self, ci: int, request: _Request, start: int) -> Iterator[int]:
        """Positions in ``order`` from ``start`` on of the devices not busy for the request: the
        free ones, or for admin access (which takes devices in use) those :meth:`_busy` allows."""
        if request.spec.admin_access:
            order = self.order
            yield from (p for p in range(start, len(order)) if not self._busy(order[p], ci, request))
            return
        free = self.free
        position = free.find(1, start)
        while position >= 0:
            yield position
            position = free.find(1, position + 1)

    def _busy(self, candidate: _Candidate, claim_index: int, request: _Request) -> bool:
        if request.spec.admin_access:
            return claim_index in self.ledger.allocating.get(candidate.id, set())
        return self.ledger.in_use(candidate.id)

    def try_add(self, claim_index: int, request: _Request, candidate: _Candidate, must: bool) -> _Undo | None:
        """``allocateDevice``: tentatively allocate; the caller must ``undo`` the record when backtracking."""
        ledger, device = self.ledger, candidate.device
        shared = self.shared(candidate)
        admin = bool(request.spec.admin_access)
        if not shared and admin and claim_index in ledger.allocating.get(candidate.id, set()):
            return None
        if (not admin and ledger.in_use(candidate.id)) or (
            not self.features.partitionable_devices and device.consumes_counters
        ):
            return None
        undo = _Undo(claim_index, request, candidate)
        if device.consumes_counters and not (shared and ledger.capacity_in_use(candidate.id)):
            if not ledger.counters_fit(candidate):
                return None
            ledger.reserve_counters(candidate, 1)
            undo.counters = True
        if self._tainted(request, candidate):
            self.undo(undo)
            return None
        for constraint in self.constraints[claim_index]:
            if not constraint.add(request.base, request.name, candidate):
                self.undo(undo)
                if must:
                    raise AllocationError(
                        f"claim {claim_ref(self.claims[claim_index])}, request {request.name}: cannot add device "
                        f"{candidate.id} because a claim constraint would not be satisfied"
                    )
                return None
            undo.constraints += 1
        if not shared:
            self._mark(candidate.id, claim_index, True)
            undo.marked = True
        result = self._result(claim_index, request, candidate, undo)
        if result is None:
            self.undo(undo)
            return None
        self.results[claim_index].append(result)
        undo.result = True
        return undo

    def _result(self, ci: int, request: _Request, candidate: _Candidate, undo: _Undo) -> _Pick | None:
        """The device's result, taking a share of its capacity; None when the capacity is not there."""
        share_id: str | None = None
        consumed: dict[str, cap.Amount] = {}
        if self.features.consumable_capacity:
            held = self.ledger.capacity_held(candidate.id)
            known = None if held else request.fits.get(candidate.capacity_key)
            if known is None:
                where = f"claim {claim_ref(self.claims[ci])}, request {request.name}"
                known = self._capacity_fits(where, request, candidate, held, f"{candidate.id} (recheck)")
            if not known:
                return None
            if self.shared(candidate):
                consumed = cap.consumed_by(request.capacity, candidate.capacities) or {}
                claim = self.claims[ci]
                key = (claim.metadata.model_extra or {}).get("uid") or claim_ref(claim)
                share_id = str(uuid.uuid5(_SHARE_NAMESPACE, f"{key}/{request.name}/{candidate.id}"))
                self.ledger.allocating_capacity.setdefault(candidate.id, []).append(
                    {name: a.value for name, a in consumed.items()}
                )
                undo.share = True
        return _Pick(request, candidate, share_id, tuple((name, a.text) for name, a in consumed.items()))

    def _device_result(self, pick: _Pick) -> DeviceResult:
        """The result of a device the search picked, built once the search is done: the many
        picks it takes back cost nothing then (a frozen dataclass is slow to make)."""
        request, device, binding = pick.request, pick.candidate.device, self.features.binding_conditions
        return DeviceResult(
            request.name,
            pick.candidate.id,
            True if request.spec.admin_access else None,
            stored_tolerations(request.spec),
            tuple(device.binding_conditions or []) if binding else (),
            tuple(device.binding_failure_conditions or []) if binding else (),
            pick.share_id,
            pick.consumed,
        )

    def undo(self, undo: _Undo) -> None:
        """``rollbackDevice``: reverse what ``try_add`` recorded, last change first."""
        ledger, candidate = self.ledger, undo.candidate
        if undo.result:
            self.results[undo.claim_index].pop()
        if undo.share:
            ledger.allocating_capacity[candidate.id].pop()
        if undo.marked:
            self._mark(candidate.id, undo.claim_index, False)
        for constraint in reversed(self.constraints[undo.claim_index][: undo.constraints]):
            constraint.remove(undo.request.base, undo.request.name)
        if undo.counters:
            ledger.reserve_counters(candidate, -1)

    # depth-first search (allocateOne)

    def run(self) -> bool:
        try:
            return self.step(0, 0, 0, None)
        except _TooMany:
            return False

    def step(self, ci: int, ri: int, di: int, alt: int | None, start: int = 0) -> bool:
        """Device ``di`` of request ``ri`` of claim ``ci``; ``start`` is where in ``order`` to look.

        Devices of one request are picked in ``order`` (each after the one before), so a set
        is tried once, never in each of its orderings (``allocateOne``'s ``startLocation``).
        """
        if ci >= len(self.claims):
            return True
        if ri >= len(self.plan[ci]):
            try:
                return self.step(ci + 1, 0, 0, None)
            except _TooMany:
                return False
        if alt is None:
            return self._alternatives(ci, ri)
        request = self.plan[ci][ri][alt]
        if request.all_devices is not None and not request.all_devices:
            return False
        if di >= request.count:
            return self.step(ci, ri + 1, 0, None)
        if len(self.results[ci]) + request.count - di > MAX_RESULTS:
            raise _TooMany
        if request.all_devices is not None:
            return self._take((ci, ri, di, alt), request, request.all_devices[di], must=True, start=0)
        begin = self.walk_start(ci, request, request.count - di, start)
        if begin is None or self._contended(ci, ri, alt, di) or self._capacity_short(ci, ri, alt, di):
            return False
        for position in self._positions(ci, request, begin):
            candidate = self.order[position]
            if not self.selectable(ci, request, candidate):
                continue
            if self.features.consumable_capacity and not self._capacity_left(ci, request, candidate):
                continue
            if self._take((ci, ri, di, alt), request, candidate, must=False, start=position + 1):
                return True
        return False

    def walk_start(self, ci: int, request: _Request, needed: int, start: int) -> int | None:
        """None when fewer devices from ``start`` on could still be taken than the request needs,
        else where the walk may begin: the first device that could be taken now.

        The cut saves a branch the scheduler would walk to the end in vain, so the first
        solution found is the same. Every test here only gets stricter deeper in the branch
        (devices get busy, counters and capacity get used, a ``matchAttribute`` value is fixed).
        Upstream's walk would evaluate the selectors and capacity of every device left that is
        not in use, so when one of them fails there is no cut: the walk goes on from ``start``
        and raises that error where the scheduler does.

        The devices before the first that could be taken are ones the walk would pass over
        without a side effect or an error, so it need not visit them again. All but one:
        a device refused because DRAPartitionableDevices is off, which the walk meets only
        after its capacity check (that may fail), so the walk begins there at the latest.
        """
        found = 0
        begin: int | None = None
        for position in self._positions(ci, request, start):
            candidate = self.order[position]
            selectable = self.selectable_or_error(ci, request, candidate)
            if selectable is None:
                return start
            if not selectable:
                continue
            try:
                refusal = self._refusal(ci, request, candidate)
            except AllocationError:
                return start
            if refusal == _GATE_REFUSAL and begin is None:
                begin = position
            if refusal:
                continue
            found += 1
            begin = position if begin is None else begin
            if found >= needed:
                return begin
        return None

    def _contended(self, ci: int, ri: int, alt: int, di: int) -> bool:
        """All requests still to serve need more exclusive devices than are free: none can succeed.

        This cut skips CEL on devices upstream's walk would still try, so it is only taken when
        no selector of a request still to serve fails on a device it could reach; otherwise the
        walk goes on and raises that error where the scheduler does. A device that takes several
        allocations can serve any number of requests, so with one in the pools there is no cut.
        """
        if self.any_shared or (ci, ri) in self.must_add_after:
            return False
        request = self.plan[ci][ri][alt]
        need = self.need_after[(ci, ri)] + (0 if request.spec.admin_access else request.count - di)
        if need <= self.free.count(1):
            return False
        free = [c for c in self.order if not self.ledger.in_use(c.id)]
        pending = [(ci, request)] + [
            (cj, later)
            for cj in range(ci, len(self.plan))
            for rj, alternatives in enumerate(self.plan[cj])
            if cj > ci or rj > ri
            for later in alternatives
            if later.all_devices is None
        ]
        return all(
            self.selectable_or_error(cj, later, c) is not None
            for cj, later in pending
            for c in (self.order if later.spec.admin_access else free)
        )

    def _capacity_short(self, ci: int, ri: int, alt: int, di: int) -> bool:
        """The requests still to serve need more of some capacity than all devices have left.

        The cut for devices shared by many allocations, where counting devices cannot see that
        "21 units on 10 devices of 2" fails. Each allocation of a request takes at least the
        least any selectable device would give it (its request rounded by that device's policy,
        or the default, or the whole capacity), every device has at most its value less what is
        held of it, so when the sum of the least takes passes the sum of what is left, no branch
        succeeds. Only taken when every device has the capacity, no request still to serve has
        admin access (it reuses exclusive devices), and neither a selector nor the capacity
        arithmetic fails on a device upstream's walk would try, so the scheduler's errors stay.
        """
        if not self.any_shared or (ci, ri) in self.must_add_after:
            return False
        request = self.plan[ci][ri][alt]
        groups = [[(ci, request, request.count - di)]] + [
            [(cj, later, later.count) for later in alternatives]
            for cj in range(ci, len(self.plan))
            for rj, alternatives in enumerate(self.plan[cj])
            if cj > ci or rj > ri
        ]
        if any(r.spec.admin_access for group in groups for _, r, _ in group):
            return False
        names = set.intersection(*(set(c.capacities) for c in self.order)) if self.order else set()
        for name in sorted(names):
            left = sum(
                c.capacities[name].value.value - self.ledger.capacity_held(c.id).get(name, 0) for c in self.order
            )
            need = Fraction(0)
            for group in groups:
                takes = [self._least_take(cj, r, name) for cj, r, _ in group]
                if any(t is None for t in takes):
                    return False
                need += min(count * (t or 0) for (_, _, count), t in zip(group, takes, strict=True))
            if need > left:
                return True
        return False

    def _least_take(self, ci: int, request: _Request, name: str) -> Fraction | None:
        """The least of capacity ``name`` one allocation of the request takes; None when a selector
        or the capacity arithmetic fails on some device (then the walk must go on and meet it).

        Depends on nothing the search changes, so it is worked out once."""
        key = (ci, request.name, name)
        if key not in self.least_takes:
            self.least_takes[key] = self._least_take_of(ci, request, name)
        return self.least_takes[key]

    def _least_take_of(self, ci: int, request: _Request, name: str) -> Fraction | None:
        least: Fraction | None = None
        for candidate in self.order:
            selectable = self.selectable_or_error(ci, request, candidate)
            if selectable is None:
                return None
            if not selectable:
                continue
            try:
                consumed = cap.consumed_by(request.capacity, candidate.capacities)
            except (cap.CapacityError, AllocationError):
                return None
            if consumed is not None and (least is None or consumed[name].value < least):
                least = consumed[name].value
        return least if least is not None else Fraction(0)

    def _refusal(self, ci: int, request: _Request, candidate: _Candidate) -> str:
        """What ``allocateDevice`` refuses a selectable device for, now; "" when it would take it."""
        device, features = candidate.device, self.features
        if device.consumes_counters and not features.partitionable_devices:
            return _GATE_REFUSAL
        if features.consumable_capacity and not self._capacity_left(ci, request, candidate):
            return "by capacity"
        if (
            device.consumes_counters
            and not (self.shared(candidate) and self.ledger.capacity_in_use(candidate.id))
            and not self.ledger.counters_fit(candidate)
        ):
            return "by counters"
        if self._tainted(request, candidate):
            return "by taints"
        for constraint in self.constraints[ci]:
            if not constraint.admits(request.base, request.name, candidate):
                return "by constraints"
        return ""

    def _tainted(self, request: _Request, candidate: _Candidate) -> bool:
        """``taintPreventsAllocation`` where the gate is on (most devices have no taints: asked first)."""
        device = candidate.device
        return bool(device.taints) and self.features.device_taints and taint_blocks(device, request.spec)

    def _alternatives(self, ci: int, ri: int) -> bool:
        all_too_many = True
        for alt in range(len(self.plan[ci][ri])):
            try:
                success = self.step(ci, ri, 0, alt)
            except _TooMany:
                continue
            all_too_many = False
            if success:
                self.chosen[(ci, ri)] = alt
                return True
        if all_too_many:
            raise _TooMany
        return False

    def _take(
        self, at: tuple[int, int, int, int], request: _Request, candidate: _Candidate, must: bool, start: int
    ) -> bool:
        """Allocate ``candidate`` for device ``at`` (claim, request, device, alternative) and go on."""
        ci, ri, di, alt = at
        undo = self.try_add(ci, request, candidate, must)
        if undo is None:
            return False
        try:
            done = self.step(ci, ri, di + 1, alt, start)
        except BaseException:
            self.undo(undo)
            raise
        if not done:
            self.undo(undo)
        return done

    # explaining a failure

    def reason(self, node: Node) -> str:
        """The first request that cannot be met on its own, else the constraints, else contention."""
        if not self.pools:
            return f"no ResourceSlice targets node {node.name}"
        for ci, claim in enumerate(self.claims):
            for alternatives in self.plan[ci]:
                problem = self._request_problem(ci, claim, alternatives, node)
                if problem:
                    return problem
            if claim.spec.devices.constraints:
                names = ", ".join(
                    f"matchAttribute {c.match_attribute}"
                    if c.match_attribute is not None
                    else f"distinctAttribute {c.distinct_attribute}"
                    for c in claim.spec.devices.constraints
                )
                return (
                    f"claim {claim_ref(claim)}: enough devices match each request, but no combination of them "
                    f"satisfies the constraints ({names})"
                )
        return (
            "enough devices match each request on its own, but not all requests together: devices, "
            "their shared counters or their capacity are contended"
        )

    def _request_problem(self, ci: int, claim: ResourceClaim, alternatives: list[_Request], node: Node) -> str:
        problems = []
        for request in alternatives:
            free, ruled_out = self._tally(ci, request)
            note = f" (ruled out: {'; '.join(ruled_out)})" if ruled_out else ""
            where = f"claim {claim_ref(claim)}, request {request.name}"
            class_name = request.device_class.metadata.name
            if request.all_devices is not None and not request.all_devices:
                problems.append(
                    f"{where}: asks for all devices of class {class_name}, but none on node {node.name} match{note}"
                )
            elif free < request.count:
                problems.append(
                    f"{where}: needs {request.count} device(s) of class {class_name}, but only {free} "
                    f"on node {node.name} match its selectors and are free{note}"
                )
            else:
                return ""
        return "; ".join(problems)

    def _tally(self, ci: int, request: _Request) -> tuple[int, list[str]]:
        """Devices free for the request on their own, and which check rules out how many (the first that does).

        Unusable pools are named too: their devices are never candidates.
        """
        counts = dict.fromkeys(_REFUSALS, 0)
        free = 0
        for candidate in self.order:
            check = self._first_refusal(ci, request, candidate)
            if check:
                counts[check] += 1
            else:
                free += 1
        ruled_out = [f"{n} {check}" for check, n in counts.items() if n]
        ruled_out += [
            f"pool {p.driver}/{p.name} {'is being updated' if p.incomplete else 'is invalid: ' + p.invalid}"
            for p in self.pools
            if p.incomplete or p.invalid
        ]
        return free, ruled_out

    def _first_refusal(self, ci: int, request: _Request, candidate: _Candidate) -> str:
        """The first check, in the scheduler's order, that keeps the device from the request on its own."""
        if self.ledger.in_use(candidate.id) and not request.spec.admin_access:
            return "in use"
        if self.selectable_or_error(ci, request, candidate) is None:
            return "by a selector error"
        if not self.selectable(ci, request, candidate):
            if candidate.device.binding_conditions and not self.features.binding_conditions:
                return "have binding conditions (DRADeviceBindingConditions is off)"
            if candidate.per_device_node and not device_targets(candidate.device, self.node):
                return "on other nodes"
            return "by selectors"
        try:
            refusal = self._refusal(ci, request, candidate)
        except AllocationError:
            return "by a capacity error"
        return "" if refusal == "by constraints" else refusal

    def allocations(self) -> list[ClaimAllocation]:
        found = []
        for ci, claim in enumerate(self.claims):
            results = tuple(self._device_result(pick) for pick in self.results[ci])
            local, requirements = self._node_selection(claim, results)
            found.append(ClaimAllocation(claim, results, tuple(self._config(ci, claim)), local, requirements))
        return found

    def _node_selection(
        self, claim: ResourceClaim, results: Sequence[DeviceResult]
    ) -> tuple[bool, dict[str, Any] | None]:
        """``createNodeSelector``: this node only, or the devices' node selector requirements, or none.

        A device local to one node (``nodeName``) or one that ``bindsToNode`` (not in the stable
        variant) pins the claim to the node; the one term of each device's ``nodeSelector`` adds
        its requirements that are not already there; ``allNodes`` adds nothing.
        """
        where = self.by_id
        term: dict[str, list[dict[str, Any]]] = {"matchExpressions": [], "matchFields": []}
        for result in results:
            candidate = where[result.id]
            spec, device = candidate.slice_.spec, candidate.device
            node_name, selector = (
                (device.node_name, device.node_selector)
                if candidate.per_device_node
                else (spec.node_name, spec.node_selector)
            )
            if node_name is not None or (device.binds_to_node and not self.features.stable):
                return True, None
            if selector is None or not selector.node_selector_terms:
                continue
            if len(selector.node_selector_terms) > 1:
                raise AllocationError(
                    f"create NodeSelector for claim {claim.metadata.name}: unsupported ResourceSlice.NodeSelector "
                    f"with {len(selector.node_selector_terms)} terms"
                )
            first = selector.node_selector_terms[0]
            _add_requirements(first.match_fields, term["matchFields"])
            _add_requirements(first.match_expressions, term["matchExpressions"])
        kept = {k: v for k, v in term.items() if v}
        return False, kept or None

    def _config(self, ci: int, claim: ResourceClaim) -> list[dict[str, Any]]:
        """Class configs once per class, then the claim's configs (as ``Allocate`` builds them)."""
        config: list[dict[str, Any]] = []
        by_class: dict[str, list[dict[str, Any]]] = {}
        chosen = [self.plan[ci][ri][self.chosen.get((ci, ri), 0)] for ri in range(len(self.plan[ci]))]
        for request in chosen:
            name = request.device_class.metadata.name
            if name in by_class:
                for entry in by_class[name]:
                    entry["requests"].append(request.name)
                continue
            entries = [
                {"source": "FromClass", "requests": [request.name], "opaque": c.opaque.model_dump(by_alias=True)}
                for c in request.device_class.spec.config
                if c.opaque is not None
            ]
            by_class[name] = entries
            config += entries
        chosen_names = {r.name for r in chosen} | {r.base for r in chosen}
        for claim_config in claim.spec.devices.config:
            if claim_config.opaque is None or (
                claim_config.requests and not chosen_names.intersection(claim_config.requests)
            ):
                continue
            config.append(
                {
                    "source": "FromClaim",
                    "requests": list(claim_config.requests),
                    "opaque": claim_config.opaque.model_dump(by_alias=True),
                }
            )
        for entry in config:
            if len(entry["requests"]) == len(claim.spec.devices.requests):
                entry["requests"] = []
        return [{k: v for k, v in e.items() if v != []} for e in config]


def _add_requirements(source: Sequence[Any], into: list[dict[str, Any]]) -> None:
    """``addNewNodeSelectorRequirements``: a requirement is new unless key, operator and value set match."""
    for requirement in source:
        known = any(
            r["key"] == requirement.key
            and r["operator"] == requirement.operator
            and set(r.get("values", [])) == set(requirement.values)
            for r in into
        )
        if not known:
            entry: dict[str, Any] = {"key": requirement.key, "operator": requirement.operator}
            if requirement.values:
                entry["values"] = list(requirement.values)
            into.append(entry)


def allocate(
    claims: Sequence[ResourceClaim],
    classes: Iterable[DeviceClass],
    slices: Iterable[ResourceSlice],
    node: Node,
    in_use: Iterable[DeviceID | SharedDevice] = (),
    *,
    features: Mapping[str, bool] | None = None,
    release: str | None = None,
) -> list[ClaimAllocation]:
    """Allocate all ``claims`` together on ``node`` or raise :class:`Unallocatable` with a reason.

    ``in_use`` lists devices, and shares of devices, already allocated to other claims. Claims
    that already carry ``status.allocation`` are the caller's business: pass
    :func:`allocated_devices` of them as ``in_use``. ``features`` are Kubernetes feature gates
    by name (``DRAPartitionableDevices``, ``DRAConsumableCapacity``, ...) over
    :data:`~kubedevice.dra.gates.FEATURE_DEFAULTS`, the 1.37 defaults; ``release`` ("1.34".."1.37")
    where the allocator itself changed between releases (else guessed from the gates:
    :func:`~kubedevice.dra.gates.release_of`).
    """
    enabled = Features.of(features, release)
    pools = gather_pools(list(slices), node, enabled)
    search = _Search(
        claims,
        {c.metadata.name: c for c in classes},
        pools,
        _Ledger(in_use, shares=not enabled.stable, by_pool_name=enabled.before_137),
        node=node,
        features=enabled,
    )
    if search.run():
        return search.allocations()
    invalid = [p for p in pools if p.invalid]
    if invalid:
        raise Unallocatable(
            f"invalid resource pools were encountered: {invalid[0].driver}/{invalid[0].name}: {invalid[0].invalid}"
        )
    raise Unallocatable(search.reason(node))
