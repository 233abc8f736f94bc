"""A structured-parameters allocator for one node, like the scheduler's.

Follows ``k8s.io/dynamic-resource-allocation/structured`` (the stable channel): pools are
gathered from the slices that target the node (newest generation only; a pool missing
slices is incomplete), every claim and request is handled in order, each needed device is
picked by depth-first search over the pools' devices in slice order with backtracking, and
the first full solution wins. ``ExactCount``/``All``, ``firstAvailable``, ``matchAttribute``,
device taints and the 32-devices-per-claim limit behave as upstream; CEL errors abort with
the scheduler's messages. When there is no solution the error names the first request or
constraint that cannot be met, which the scheduler does not.

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


def _slice_targets(slice_: ResourceSlice, node: Node) -> bool:
    spec = slice_.spec
    if spec.node_name or spec.all_nodes or spec.node_selector is not None:
        return _targets(node, spec.node_name, spec.all_nodes, spec.node_selector)
    if spec.per_device_node_selection:
        return any(_targets(node, d.node_name, d.all_nodes, d.node_selector) for d in spec.devices)
    return False


@dataclass
class Pool:
    driver: str
    name: str
    slices: list[ResourceSlice]
    incomplete: bool = False
    invalid: str = ""


def gather_pools(slices: Iterable[ResourceSlice], node: Node) -> list[Pool]:
    """Pools with the slices that target ``node``; older generations are dropped (``GatherPools``)."""
    pools: dict[tuple[str, str], Pool] = {}
    for slice_ in slices:
        if not _slice_targets(slice_, node):
            continue
        key = (slice_.spec.driver, slice_.spec.pool.name)
        pool = pools.get(key)
        generation = slice_.spec.pool.generation
        if pool is None:
            pools[key] = Pool(key[0], key[1], [slice_])
        elif generation > pool.slices[0].spec.pool.generation:
            pool.slices = [slice_]
        elif generation == pool.slices[0].spec.pool.generation:
            pool.slices.append(slice_)
    for pool in pools.values():
        pool.incomplete = len(pool.slices) != pool.slices[0].spec.pool.resource_slice_count
        names = [d.name for s in pool.slices for d in s.spec.devices]
        dupes = sorted({n for n in names if names.count(n) > 1})
        pool.invalid = f"duplicate device name {dupes[0]}" if dupes else ""
    return list(pools.values())


# --- constraints --------------------------------------------------------------------------


def lookup_attribute(device: Device, driver: str, name: str) -> DeviceAttribute | None:
    """A fully qualified attribute; a bare key in the device counts for the driver's own domain."""
    if name in device.attributes:
        return device.attributes[name]
    domain, slash, ident = name.partition("/")
    if not slash or domain != driver:
        return None
    return device.attributes.get(ident)


class MatchAttribute:
    """All devices of the constrained requests share one value of the attribute."""

    def __init__(self, attribute: str, requests: Sequence[str]) -> None:
        self.attribute = attribute
        self.requests = set(requests)
        self.value: dict[str, Any] | None = None
        self.count = 0

    def applies(self, base: str, full: str) -> bool:
        return not self.requests or base in self.requests or full in self.requests

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

    def remove(self, base: str, full: str) -> None:
        if self.applies(base, full):
            self.count -= 1


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


@dataclass(frozen=True)
class _Candidate:
    id: DeviceID
    device: Device


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
    ) -> None:
        self.claims = claims
        self.classes = classes
        self.pools = pools
        self.in_use = set(in_use)
        self.allocating: dict[DeviceID, set[int]] = {}
        self.matches: dict[tuple[DeviceID, int, str], bool] = {}
        self.plan = [self._plan_claim(i, c) for i, c in enumerate(claims)]
        self.constraints = [self._constraints(c) for c in claims]
        self.results: list[list[DeviceResult]] = [[] for _ in claims]
        self.chosen: dict[tuple[int, int], int] = {}

    # planning (validateDeviceRequest)

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

    def _constraints(self, claim: ResourceClaim) -> list[MatchAttribute]:
        constraints = []
        for i, constraint in enumerate(claim.spec.devices.constraints):
            if constraint.match_attribute is None:
                raise AllocationError(
                    f"claim {claim_ref(claim)}, constraint #{i}: empty constraint (unsupported constraint type?)"
                )
            constraints.append(MatchAttribute(constraint.match_attribute, constraint.requests))
        return constraints

    # device checks

    @staticmethod
    def _pool_devices(pool: Pool) -> list[_Candidate]:
        return [_Candidate(DeviceID(pool.driver, pool.name, d.name), d) for s in pool.slices for d in s.spec.devices]

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
        return True

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

    def step(self, ci: int, ri: int, di: int, alt: int | None) -> bool:
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
            return self._take((ci, ri, di, alt), request, request.all_devices[di], must=True)
        for pool in self.usable_pools():
            for candidate in self._pool_devices(pool):
                if self._busy(candidate, ci, request) or not self.selectable(ci, request, candidate):
                    continue
                if self._take((ci, ri, di, alt), request, candidate, must=False):
                    return True
        return False

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

    def _take(self, at: tuple[int, int, int, int], request: _Request, candidate: _Candidate, must: bool) -> bool:
        """Allocate ``candidate`` for device ``at`` (claim, request, device, alternative) and go on."""
        ci, ri, di, alt = at
        if not self.try_add(ci, request, candidate, must):
            return False
        try:
            done = self.step(ci, ri, di + 1, alt)
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
                names = ", ".join(c.match_attribute or "" for c in claim.spec.devices.constraints)
                return (
                    f"claim {claim_ref(claim)}: enough devices match each request, but no combination of them "
                    f"satisfies the constraints (matchAttribute {names})"
                )
        return "enough devices match each request on its own, but not all requests together: devices are contended"

    def _request_problem(self, ci: int, claim: ResourceClaim, alternatives: list[_Request], node: Node) -> str:
        problems = []
        for request in alternatives:
            free = [
                c
                for pool in self.usable_pools()
                for c in self._pool_devices(pool)
                if self.selectable(ci, request, c)
                and c.id not in self.in_use
                and not taint_blocks(c.device, request.spec)
                and not c.device.consumes_counters
            ]
            where = f"claim {claim_ref(claim)}, request {request.name}"
            class_name = request.device_class.metadata.name
            if request.all_devices is not None and not request.all_devices:
                problems.append(
                    f"{where}: asks for all devices of class {class_name}, but none on node {node.name} match"
                )
            elif len(free) < request.count:
                problems.append(
                    f"{where}: needs {request.count} device(s) of class {class_name}, but only {len(free)} "
                    f"on node {node.name} match its selectors and are free"
                )
            else:
                return ""
        return "; ".join(problems)

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
        return {
            c.id for pool in self.pools for s in pool.slices if s.spec.node_name for c in self._pool_devices_of(pool, s)
        }

    @staticmethod
    def _pool_devices_of(pool: Pool, slice_: ResourceSlice) -> list[_Candidate]:
        return [_Candidate(DeviceID(pool.driver, pool.name, d.name), d) for d in slice_.spec.devices]

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
    ``status.allocation`` are the caller's business: pass their devices as ``in_use``.
    """
    pools = gather_pools(slices, node)
    search = _Search(claims, {c.metadata.name: c for c in classes}, pools, set(in_use))
    if search.run():
        return search.allocations()
    invalid = [p for p in pools if p.invalid]
    if invalid:
        raise Unallocatable(
            f"invalid resource pools were encountered: {invalid[0].driver}/{invalid[0].name}: {invalid[0].invalid}"
        )
    raise Unallocatable(search.reason(node))
