"""A structured-parameters allocator for one node, like the scheduler's.

Follows ``k8s.io/dynamic-resource-allocation/structured`` (``internal/incubating``, the variant
the scheduler runs with the 1.36 default features): pools are gathered as ``GatherPools`` does
(only the newest generation of a pool counts; completeness is judged against every slice of
that generation, on any node; pools are sorted by driver and name, slices by name), every claim
and request is handled in order, and each needed device is picked by depth-first search over the
pools' devices in that order. Within one request the search tries sets, not orderings
(``allocateOne``'s start location), and the first full solution wins. ``ExactCount``/``All``,
``firstAvailable``, ``matchAttribute``, ``distinctAttribute``, device taints, per-device node
selection and the 32-devices-per-claim limit behave as upstream; CEL errors abort with the
scheduler's messages. A branch is cut as soon as fewer candidates are left than devices still
needed, which does not change which solution is found (see :meth:`_Search.cannot_fill`). When
there is no solution the error names the first request or constraint that cannot be met, which
the scheduler does not.

Not modelled: partitionable devices (``consumesCounters``; such devices are skipped),
consumable capacity and binding conditions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import cel
from .explain import device_input
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

MAX_RESULTS = 32  # resource.AllocationResultsMaxSize


class AllocationError(Exception):
    """Allocation cannot proceed at all (missing class, CEL error, bad request): as upstream."""


class Unallocatable(Exception):
    """No solution exists on this node; the message says which request or constraint fails."""


@dataclass(frozen=True, order=True)
class DeviceID:
    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True)
class DeviceResult:
    request: str
    id: DeviceID
    admin_access: bool | None = None


@dataclass(frozen=True)
class ClaimAllocation:
    """``status.allocation`` of one claim."""

    claim: ResourceClaim
    results: tuple[DeviceResult, ...]
    config: tuple[dict[str, Any], ...]
    node_local: bool

    def as_status(self, node: str) -> dict[str, Any]:
        results = []
        for r in self.results:
            entry: dict[str, Any] = {"request": r.request, "driver": r.id.driver, "pool": r.id.pool}
            entry["device"] = r.id.device
            if r.admin_access is not None:
                entry["adminAccess"] = r.admin_access
            results.append(entry)
        devices: dict[str, Any] = {"results": results}
        if self.config:
            devices["config"] = list(self.config)
        allocation: dict[str, Any] = {"devices": devices}
        if self.node_local:
            term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            allocation["nodeSelector"] = {"nodeSelectorTerms": [term]}
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


def _slice_relevant(slice_: ResourceSlice, node: Node) -> bool:
    """Whether ``GatherPools`` adds the slice for ``node`` (``pools_incubating.go``).

    Counter-set slices always count (a pool's counters are needed wherever its devices are);
    a ``perDeviceNodeSelection`` slice counts when any one device targets the node, and each
    device is then checked again on its own when it is a candidate (``isSelectable``).
    """
    spec = slice_.spec
    if spec.shared_counters:
        return True
    if spec.node_name or spec.all_nodes or spec.node_selector is not None:
        return _targets(node, spec.node_name, spec.all_nodes, spec.node_selector)
    if spec.per_device_node_selection:
        return any(device_targets(d, node) for d in spec.devices)
    return False


@dataclass
class Pool:
    driver: str
    name: str
    slices: list[ResourceSlice]
    incomplete: bool = False
    invalid: str = ""

    @property
    def device_slices(self) -> list[ResourceSlice]:
        """Slices with devices; counter-set slices carry none (``buildPool``)."""
        return [s for s in self.slices if not s.spec.shared_counters]

    @property
    def has_binding_conditions(self) -> bool:
        """``poolHasBindingConditions``: such pools are tried after all others."""
        return any(d.binding_conditions is not None for s in self.device_slices for d in s.spec.devices)


def _add_slice(pools: dict[tuple[str, str], list[ResourceSlice]], slice_: ResourceSlice) -> None:
    """``addSlice``: a newer generation replaces the pool's slices, an older one is dropped."""
    key = (slice_.spec.driver, slice_.spec.pool.name)
    known = pools.get(key)
    generation = slice_.spec.pool.generation
    if known is None or generation > known[0].spec.pool.generation:
        pools[key] = [slice_]
    elif generation == known[0].spec.pool.generation:
        known.append(slice_)


def _slices_in_pool(slices: Sequence[ResourceSlice], key: tuple[str, str], generation: int) -> int | None:
    """``checkSlicesInPool``: the pool's slices of ``generation`` on every node, or None when obsolete.

    A newer generation anywhere means the driver is replacing the one this node sees, so the
    scheduler ignores the pool rather than calling it incomplete.
    """
    count = 0
    for slice_ in slices:
        if (slice_.spec.driver, slice_.spec.pool.name) != key:
            continue
        if slice_.spec.pool.generation > generation:
            return None
        count += slice_.spec.pool.generation == generation
    return count


def _build_pool(key: tuple[str, str], slices: list[ResourceSlice]) -> Pool:
    """``buildPool``: slices sorted by name (the search order); a repeated device name makes it invalid."""
    ordered = sorted(slices, key=lambda s: s.metadata.name)
    pool = Pool(key[0], key[1], ordered)
    seen: set[str] = set()
    for device in (d for s in pool.device_slices for d in s.spec.devices):
        if device.name in seen:
            pool.invalid = f"duplicate device name {device.name}"
            break
        seen.add(device.name)
    return pool


def gather_pools(slices: Sequence[ResourceSlice], node: Node) -> list[Pool]:
    """The pools that serve ``node``, in the scheduler's search order (``GatherPools``).

    Only slices relevant to the node are kept, and of each pool only its newest generation
    among them. A pool is complete when that generation has ``resourceSliceCount`` slices,
    counted on the node first and then, if short, over all slices of every node; a newer
    generation elsewhere makes the pool obsolete and it is ignored. Pools are sorted by driver
    and pool name, those with binding conditions last.
    """
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for slice_ in slices:
        if _slice_relevant(slice_, node):
            _add_slice(by_pool, slice_)
    ready: list[Pool] = []
    binding: list[Pool] = []
    for key, pool_slices in by_pool.items():
        pool_meta = pool_slices[0].spec.pool
        if len(pool_slices) != pool_meta.resource_slice_count:
            everywhere = _slices_in_pool(slices, key, pool_meta.generation)
            if everywhere is None:
                continue
            if everywhere != pool_meta.resource_slice_count:
                ready.append(Pool(key[0], key[1], [], incomplete=True))
                continue
        pool = _build_pool(key, pool_slices)
        (binding if pool.has_binding_conditions else ready).append(pool)
    return sorted(ready, key=lambda p: (p.driver, p.name)) + sorted(binding, key=lambda p: (p.driver, p.name))


def allocated_devices(claims: Iterable[ResourceClaim]) -> list[DeviceID]:
    """The devices that allocated claims hold, for ``allocate``'s ``in_use``.

    Admin-access results are skipped: they do not make a device unavailable to others
    (``foreachAllocatedDevice`` in the scheduler's ``dynamicresources/allocateddevices.go``).
    """
    found = []
    for claim in claims:
        allocation = (claim.status or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if result.get("adminAccess") is True:
                continue
            found.append(DeviceID(result.get("driver", ""), result.get("pool", ""), result.get("device", "")))
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


class _AttributeConstraint:
    """What ``matchAttribute`` and ``distinctAttribute`` share: which requests they govern."""

    def __init__(self, attribute: str, requests: Sequence[str]) -> None:
        self.attribute = attribute
        self.requests = set(requests)

    def applies(self, base: str, full: str) -> bool:
        return not self.requests or base in self.requests or full in self.requests


class MatchAttribute(_AttributeConstraint):
    """All devices of the constrained requests share one value of the attribute."""

    def __init__(self, attribute: str, requests: Sequence[str]) -> None:
        super().__init__(attribute, requests)
        self.value: dict[str, Any] | None = None
        self.count = 0

    def add(self, base: str, full: str, device: Device, driver: str) -> bool:
        if not self.applies(base, full):
            return True
        attribute = lookup_attribute(device, driver, self.attribute)
        if attribute is None:
            return False
        value = attribute.as_value()
        if self.count and value != self.value:
            return False
        self.value = value
        self.count += 1
        return True

    def admits(self, base: str, full: str, device: Device, driver: str) -> bool:
        """Whether ``add`` could accept the device now; it stays false deeper in the search."""
        if not self.applies(base, full):
            return True
        attribute = lookup_attribute(device, driver, self.attribute)
        return attribute is not None and (not self.count or attribute.as_value() == self.value)

    def remove(self, base: str, full: str) -> None:
        if self.applies(base, full):
            self.count -= 1


class DistinctAttribute(_AttributeConstraint):
    """Every device of the constrained requests has its own value of the attribute.

    As ``distinctAttributeConstraint`` in ``internal/incubating/constraint.go`` of
    ``k8s.io/dynamic-resource-allocation`` v0.37: the values are a stack (the search adds and
    removes devices in LIFO order). Only a value of the same scalar type can be a duplicate; a
    list-typed value is refused once any value is held. (v0.36.3 kept one value per request
    name, so a request's own devices were barely compared; v0.37 compares them all.)
    """

    def __init__(self, attribute: str, requests: Sequence[str]) -> None:
        super().__init__(attribute, requests)
        self.values: list[dict[str, Any]] = []

    def add(self, base: str, full: str, device: Device, driver: str) -> bool:
        if not self.applies(base, full):
            return True
        attribute = lookup_attribute(device, driver, self.attribute)
        if attribute is None or not self._distinct(attribute.as_value()):
            return False
        self.values.append(attribute.as_value())
        return True

    def _distinct(self, value: dict[str, Any]) -> bool:
        kind = next(iter(value), "")
        if kind not in _SCALAR_KINDS:
            return not self.values
        return value not in self.values

    def admits(self, base: str, full: str, device: Device, driver: str) -> bool:
        """Whether ``add`` could accept the device now; once a value is held it stays held deeper."""
        if not self.applies(base, full):
            return True
        attribute = lookup_attribute(device, driver, self.attribute)
        return attribute is not None and self._distinct(attribute.as_value())

    def remove(self, base: str, full: str) -> None:
        if self.applies(base, full):
            self.values.pop()


Constraint = MatchAttribute | DistinctAttribute


# --- taints -------------------------------------------------------------------------------


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    operator = toleration.get("operator", "Equal")
    key = toleration.get("key", "")
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    return bool(key) and toleration.get("value", "") == taint.get("value", "")


def taint_blocks(device: Device, request: ExactDeviceRequest) -> bool:
    """A ``NoSchedule``/``NoExecute`` taint that no toleration of the request tolerates."""
    tolerations = request.tolerations or []
    return any(
        taint.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(t, taint) for t in tolerations)
        for taint in device.taints or []
    )


# --- the search ---------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Candidate:
    id: DeviceID
    device: Device
    per_device_node: bool = False


@dataclass
class _Request:
    """A request, or one subrequest of a ``firstAvailable`` list."""

    base: str
    sub: str
    spec: ExactDeviceRequest
    device_class: DeviceClass
    count: int = 0
    all_devices: list[_Candidate] | None = None

    @property
    def name(self) -> str:
        return f"{self.base}/{self.sub}" if self.sub else self.base


class _TooMany(Exception):
    """The claim would exceed the result limit: backtrack further (``errAllocationResultMaxSizeExceeded``)."""


class _Search:
    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        classes: Mapping[str, DeviceClass],
        pools: Sequence[Pool],
        in_use: set[DeviceID],
        node: Node,
    ) -> None:
        self.claims = claims
        self.classes = classes
        self.pools = pools
        self.node = node
        self.in_use = set(in_use)
        self.allocating: dict[DeviceID, set[int]] = {}
        self.matches: dict[tuple[DeviceID, int, str], bool] = {}
        # Every device of the usable pools in the order the scheduler tries them.
        self.order = [c for pool in self.usable_pools() for c in self._pool_devices(pool)]
        self.plan: list[list[list[_Request]]] = []
        self.constraints: list[list[Constraint]] = []
        for index, claim in enumerate(claims):  # per claim, as upstream reports the first error
            self.plan.append(self._plan_claim(index, claim))
            self.constraints.append(self._constraints(claim))
        self.need_after = self._need_after()
        self.results: list[list[DeviceResult]] = [[] for _ in claims]
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

    def _plan_claim(self, index: int, claim: ResourceClaim) -> list[list[_Request]]:
        plan = [self._plan_request(index, claim, r) for r in claim.spec.devices.requests]
        minimum = sum(min(alt.count for alt in alts) for alts in plan)
        if minimum > MAX_RESULTS:
            raise AllocationError(
                f"claim {claim_ref(claim)}: number of requested devices {minimum} "
                f"exceeds the claim limit of {MAX_RESULTS}"
            )
        return plan

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
        if not spec.device_class_name:
            raise AllocationError(f"{where}: missing device class name (unsupported request type?)")
        device_class = self.classes.get(spec.device_class_name)
        if device_class is None:
            raise AllocationError(
                f"{where}: could not retrieve device class {spec.device_class_name}: "
                f'deviceclass.resource.k8s.io "{spec.device_class_name}" not found'
            )
        request = _Request(base, sub, spec, device_class)
        if spec.allocation_mode == "ExactCount":
            request.count = spec.count
        elif spec.allocation_mode == "All":
            request.all_devices = self._all_devices(index, request, where)
            request.count = len(request.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {spec.allocation_mode}")
        return request

    def _all_devices(self, index: int, request: _Request, where: str) -> list[_Candidate]:
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
            found += [c for c in self._pool_devices(pool) if self.selectable(index, request, c)]
        return found

    @staticmethod
    def _constraints(claim: ResourceClaim) -> list[Constraint]:
        constraints: list[Constraint] = []
        for i, constraint in enumerate(claim.spec.devices.constraints):
            if constraint.match_attribute is not None:
                constraints.append(MatchAttribute(constraint.match_attribute, constraint.requests))
            elif constraint.distinct_attribute is not None:
                constraints.append(DistinctAttribute(constraint.distinct_attribute, constraint.requests))
            else:
                raise AllocationError(
                    f"claim {claim_ref(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )
        return constraints

    # device checks

    @staticmethod
    def _pool_devices(pool: Pool) -> list[_Candidate]:
        return [
            _Candidate(DeviceID(pool.driver, pool.name, d.name), d, bool(s.spec.per_device_node_selection))
            for s in pool.device_slices
            for d in s.spec.devices
        ]

    def usable_pools(self) -> list[Pool]:
        return [p for p in self.pools if not p.incomplete and not p.invalid]

    def selectable(self, claim_index: int, request: _Request, candidate: _Candidate) -> bool:
        key = (candidate.id, claim_index, request.name)
        if key not in self.matches:
            self.matches[key] = self._selectors_match(claim_index, request, candidate)
        return self.matches[key]

    def _selectors_match(self, claim_index: int, request: _Request, candidate: _Candidate) -> bool:
        if candidate.device.binding_conditions:
            return False
        view = device_input(candidate.id.driver, candidate.device)
        class_name = request.device_class.metadata.name
        owners = (f"class {class_name}", f"claim {claim_ref(self.claims[claim_index])}")
        for owner, selectors in zip(owners, (request.device_class.spec.selectors, request.spec.selectors), strict=True):
            for i, selector in enumerate(selectors):
                if not self._one_selector(owner, i, selector.cel.expression if selector.cel else "", view, candidate):
                    return False
        # After the selectors, as in isSelectable: a CEL error on another node's device still counts.
        return not candidate.per_device_node or device_targets(candidate.device, self.node)

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
    def _one_selector(owner: str, i: int, expression: str, view: cel.DeviceInput, candidate: _Candidate) -> bool:
        try:
            compiled = cel.compile_selector(expression, env="StoredExpressions")
        except cel.CompileError as error:
            raise AllocationError(f"{owner}: selector #{i}: CEL compile error: {error.message}") from None
        try:
            return compiled.matches(view)
        except cel.EvalError as error:
            raise AllocationError(
                f"{owner}: selector #{i} on device {candidate.id}: CEL runtime error: {error.message}"
            ) from None

    def _busy(self, candidate: _Candidate, claim_index: int, request: _Request) -> bool:
        if request.spec.admin_access:
            return claim_index in self.allocating.get(candidate.id, set())
        return candidate.id in self.in_use or bool(self.allocating.get(candidate.id))

    def try_add(self, claim_index: int, request: _Request, candidate: _Candidate, must: bool) -> bool:
        """Tentatively allocate; on success the caller must ``undo`` when backtracking."""
        if self._busy(candidate, claim_index, request) or candidate.device.consumes_counters:
            return False
        if taint_blocks(candidate.device, request.spec):
            return False
        constraints = self.constraints[claim_index]
        for i, constraint in enumerate(constraints):
            if not constraint.add(request.base, request.name, candidate.device, candidate.id.driver):
                if must:
                    raise AllocationError(
                        f"claim {claim_ref(self.claims[claim_index])}, request {request.name}: cannot add device "
                        f"{candidate.id} because a claim constraint would not be satisfied"
                    )
                for done in constraints[:i]:
                    done.remove(request.base, request.name)
                return False
        self.allocating.setdefault(candidate.id, set()).add(claim_index)
        admin = request.spec.admin_access
        self.results[claim_index].append(DeviceResult(request.name, candidate.id, admin))
        return True

    def undo(self, claim_index: int, request: _Request, candidate: _Candidate) -> None:
        for constraint in self.constraints[claim_index]:
            constraint.remove(request.base, request.name)
        self.allocating[candidate.id].discard(claim_index)
        self.results[claim_index].pop()

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
        if self.cannot_fill(ci, request, request.count - di, start) or self._contended(ci, ri, alt, di):
            return False
        for position in range(start, len(self.order)):
            candidate = self.order[position]
            if self._busy(candidate, ci, request) or not self.selectable(ci, request, candidate):
                continue
            if self._take((ci, ri, di, alt), request, candidate, must=False, start=position + 1):
                return True
        return False

    def cannot_fill(self, ci: int, request: _Request, needed: int, start: int) -> bool:
        """Fewer devices from ``start`` on could still be taken than the request needs.

        Cuts a branch the scheduler would walk to the end in vain, so the first solution found
        is the same. Every test here only gets stricter deeper in the branch (devices get busy,
        a ``matchAttribute`` value is fixed). Upstream's walk would evaluate the selectors of
        every device left that is not in use, so when one of them fails there is no cut: the
        walk goes on and raises that error where the scheduler does.
        """
        found = 0
        for position in range(start, len(self.order)):
            candidate = self.order[position]
            if self._busy(candidate, ci, request):
                continue
            selectable = self.selectable_or_error(ci, request, candidate)
            if selectable is None:
                return False
            if not selectable or self._refused(ci, request, candidate):
                continue
            found += 1
            if found >= needed:
                return False
        return True

    def _contended(self, ci: int, ri: int, alt: int, di: int) -> bool:
        """All requests still to serve need more exclusive devices than are free: none can succeed.

        This cut skips CEL on devices upstream's walk would still try, so it is only taken when
        no selector of a request still to serve fails on a device it could reach; otherwise the
        walk goes on and raises that error where the scheduler does.
        """
        request = self.plan[ci][ri][alt]
        need = self.need_after[(ci, ri)] + (0 if request.spec.admin_access else request.count - di)
        free = [c for c in self.order if c.id not in self.in_use and not self.allocating.get(c.id)]
        if need <= len(free):
            return False
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

    def _refused(self, ci: int, request: _Request, candidate: _Candidate) -> bool:
        """What ``try_add`` refuses a selectable device for: counters, a taint, a ``matchAttribute`` value."""
        return (
            bool(candidate.device.consumes_counters)
            or taint_blocks(candidate.device, request.spec)
            or not all(
                c.admits(request.base, request.name, candidate.device, candidate.id.driver)
                for c in self.constraints[ci]
            )
        )

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
        if not self.try_add(ci, request, candidate, must):
            return False
        try:
            done = self.step(ci, ri, di + 1, alt, start)
        except BaseException:
            self.undo(ci, request, candidate)
            raise
        if not done:
            self.undo(ci, request, candidate)
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
        return "enough devices match each request on its own, but not all requests together: devices are contended"

    def _request_problem(self, ci: int, claim: ResourceClaim, alternatives: list[_Request], node: Node) -> str:
        problems = []
        for request in alternatives:
            free, ruled_out = self._tally(ci, request)
            note = f" (ruled out: {'; '.join(ruled_out)})" if ruled_out else ""
            where = f"claim {claim_ref(claim)}, request {request.name}"
            class_name = request.device_class.metadata.name
            if request.all_devices is not None and not request.all_devices:
                problems.append(
                    f"{where}: asks for all devices of class {class_name}, but none on node {node.name} match"
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
        counts = dict.fromkeys(
            ("in use", "by selectors", "by a selector error", "on other nodes", "by taints", "consume counters"), 0
        )
        free = 0
        for candidate in self.order:
            check = self._first_refusal(ci, request, candidate)
            if check:
                counts[check] += 1
            else:
                free += 1
        ruled_out = [f"{n} {check}" for check, n in counts.items() if n]
        ruled_out += [
            f"pool {p.driver}/{p.name} {'is being updated' if p.incomplete else 'is invalid'}"
            for p in self.pools
            if p.incomplete or p.invalid
        ]
        return free, ruled_out

    def _first_refusal(self, ci: int, request: _Request, candidate: _Candidate) -> str:
        if candidate.id in self.in_use:
            return "in use"
        if self.selectable_or_error(ci, request, candidate) is None:
            return "by a selector error"
        if not self.selectable(ci, request, candidate):
            if candidate.per_device_node and not device_targets(candidate.device, self.node):
                return "on other nodes"
            return "by selectors"
        if taint_blocks(candidate.device, request.spec):
            return "by taints"
        if candidate.device.consumes_counters:
            return "consume counters"
        return ""

    def allocations(self) -> list[ClaimAllocation]:
        node_local = self._node_local_devices()
        return [
            ClaimAllocation(
                claim,
                tuple(self.results[ci]),
                tuple(self._config(ci, claim)),
                any(r.id in node_local for r in self.results[ci]),
            )
            for ci, claim in enumerate(self.claims)
        ]

    def _node_local_devices(self) -> set[DeviceID]:
        """Devices local to one node: by their slice's ``nodeName``, or their own one with per-device selection."""
        return {
            DeviceID(pool.driver, pool.name, d.name)
            for pool in self.pools
            for s in pool.device_slices
            for d in s.spec.devices
            if (d.node_name if s.spec.per_device_node_selection else s.spec.node_name)
        }

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


def allocate(
    claims: Sequence[ResourceClaim],
    classes: Iterable[DeviceClass],
    slices: Iterable[ResourceSlice],
    node: Node,
    in_use: Iterable[DeviceID] = (),
) -> list[ClaimAllocation]:
    """Allocate all ``claims`` together on ``node`` or raise :class:`Unallocatable` with a reason.

    ``in_use`` lists devices already allocated to other claims. Claims that already carry
    ``status.allocation`` are the caller's business: pass :func:`allocated_devices` of them
    as ``in_use``.
    """
    pools = gather_pools(list(slices), node)
    search = _Search(claims, {c.metadata.name: c for c in classes}, pools, set(in_use), node)
    if search.run():
        return search.allocations()
    invalid = [p for p in pools if p.invalid]
    if invalid:
        raise Unallocatable(
            f"invalid resource pools were encountered: {invalid[0].driver}/{invalid[0].name}: {invalid[0].invalid}"
        )
    raise Unallocatable(search.reason(node))
