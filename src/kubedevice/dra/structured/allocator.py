"""The search: ``allocator_incubating.go``'s ``Allocate``, ``validateDeviceRequest``, ``allocateOne``,
``isSelectable``, ``allocateDevice``, ``rollbackDevice`` and ``createNodeSelector``, in that order.

One class serves the three variants (``internal/{stable,incubating,experimental}``): where they
differ, :class:`~.gates.Features` says which one the scheduler runs (``stable``, ``before_137``,
``list_type_attributes``). Every claim and request is handled in order, and each needed device is
picked by depth-first search over the pools' devices in their order; within one request the
search tries sets, not orderings (``allocateOne``'s start location), and the first full solution
wins. CEL errors abort with the scheduler's messages.

kubedevice's own parts are apart: the cuts that spare branches the scheduler would walk in vain
(:mod:`.prune`, each with why it cannot change the solution found) and why a claim cannot be
allocated (:mod:`.reasons`). ``shareID``: upstream draws a random UUID per share; ours is a
version-5 UUID of the claim, the request and the device, so the same input gives the same output.
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable, Iterator, Mapping, Sequence

from ..models import DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaim
from . import consumable_capacity as cap
from .allocatedstate import Ledger
from .constraint import Constraint, DistinctAttribute, DistinctAttributeV036, MatchAttribute
from .gates import Features
from .pools import DeviceWithID, Pool, device_matches_node, pool_devices
from .prune import REFUSED, SELECTABLE_WITH_CAPACITY, Pruner
from .shared import Shared
from .taints import taint_prevents_allocation
from .types import (
    MAX_RESULTS,
    AllocationError,
    DeviceRollbackState,
    Node,
    Pick,
    RequestData,
    TooMany,
    claim_ref,
)

_SHARE_NAMESPACE = uuid.UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8")  # RFC 4122's URL namespace


class Allocator:
    """``allocator``: one ``Allocate`` call's state."""

    def __init__(
        self,
        claims: Sequence[ResourceClaim],
        classes: Mapping[str, DeviceClass],
        pools: Sequence[Pool],
        ledger: Ledger,
        *,
        node: Node,
        features: Features,
        shared: Shared,
    ) -> None:
        self.claims, self.shared = claims, shared
        self.classes = classes
        self.pools = pools
        self.node = node
        self.features = features
        self.ledger = ledger
        self.static_fits: dict[tuple[tuple[str, cap.Exact], ...], dict[Hashable, bool]] = {}  # per capacity_key
        # Every device of the usable pools in the order the scheduler tries them, and per pool.
        self.devices_of = {
            id(pool): pool_devices(pool, self.features.consumable_capacity, shared)
            for pool in self.pools
            if not pool.incomplete and not pool.invalid
        }
        self.order = [c for devices in self.devices_of.values() for c in devices]
        for position, candidate in enumerate(self.order):
            candidate.position = position
        self.any_shared = any(c.shared for c in self.order)
        self.by_id = {c.id: c for c in self.order}
        # 1 where the device at that position of ``order`` is not in use: the walk and its count
        # cut look for the next free device with ``bytearray.find`` instead of asking each
        # device in turn (with 100 claims the devices earlier claims hold were most of the walk).
        self.free = bytearray(0 if ledger.device_in_use(c.id) else 1 for c in self.order)
        self.free_count = self.free.count(1)
        self.plan: list[list[list[RequestData]]] = []
        self.constraints: list[list[Constraint]] = []
        for index, claim in enumerate(claims):  # per claim, as upstream reports the first error
            self.plan.append(self.validate_claim(index, claim))
            self.constraints.append(self.claim_constraints(claim))
        self.results: list[list[Pick]] = [[] for _ in claims]
        self.chosen: dict[tuple[int, int], int] = {}  # selectedSubRequestIndex
        self.prune = Pruner(self)

    # --- Allocate's checks and validateDeviceRequest -----------------------------------------

    def validate_claim(self, index: int, claim: ResourceClaim) -> list[list[RequestData]]:
        """Each request's data (one per subrequest), and the claim's limit on results."""
        plan = []
        for request in claim.spec.devices.requests:
            self.check_request_gates(claim, request)
            plan.append(self.validate_request(index, claim, request))
        minimum = sum(min(alt.count for alt in alts) for alts in plan)
        if minimum > MAX_RESULTS:
            raise AllocationError(
                f"claim {claim_ref(claim)}: number of requested devices {minimum} "
                f"exceeds the claim limit of {MAX_RESULTS}"
            )
        return plan

    def check_request_gates(self, claim: ResourceClaim, request: DeviceRequest) -> None:
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

    def validate_request(self, index: int, claim: ResourceClaim, request: DeviceRequest) -> list[RequestData]:
        if request.exactly is not None:
            alternatives = [(request.name, "", request.exactly)]
        else:
            alternatives = [(request.name, sub.name, sub) for sub in request.first_available]
        if not alternatives:
            raise AllocationError(
                f"claim {claim_ref(claim)}, request {request.name}: "
                "missing device class name (unsupported request type?)"
            )
        return [self.validate_device_request(index, claim, base, sub, spec) for base, sub, spec in alternatives]

    def validate_device_request(
        self, index: int, claim: ResourceClaim, base: str, sub: str, spec: ExactDeviceRequest
    ) -> RequestData:
        """``validateDeviceRequest``."""
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
        capacity = _capacity_requests(where, spec) if self.features.consumable_capacity else {}
        request = RequestData(base, sub, spec, device_class, capacity=capacity)
        request.verdicts = self.shared.verdicts(request.expressions)
        request.fits = self.static_fits.setdefault(request.capacity_key, {})
        if spec.allocation_mode == "ExactCount":
            request.count = spec.count
        elif spec.allocation_mode == "All":
            request.all_devices = self.all_devices(index, request, where)
            request.count = len(request.all_devices)
        else:
            raise AllocationError(f"{where}: unsupported count mode {spec.allocation_mode}")
        return request

    def all_devices(self, index: int, request: RequestData, where: str) -> list[DeviceWithID]:
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
            for candidate in self.devices_of[id(pool)]:
                if not self.is_selectable(index, request, candidate):
                    continue
                if self.features.consumable_capacity and not self.cmp_request_over_capacity(
                    where, request, candidate, {}, candidate.device.name
                ):
                    continue
                found.append(candidate)
        return found

    def claim_constraints(self, claim: ResourceClaim) -> list[Constraint]:
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

    # --- allocateOne -------------------------------------------------------------------------

    def allocate_one(self, ci: int, ri: int, di: int, alt: int | None, start: int = 0) -> bool:
        """Device ``di`` of request ``ri`` of claim ``ci``; ``start`` is where in ``order`` to look.

        Devices of one request are picked in ``order`` (each after the one before), so a set
        is tried once, never in each of its orderings (``startLocation``).
        """
        if ci >= len(self.claims):
            return True
        if ri >= len(self.plan[ci]):
            try:
                return self.allocate_one(ci + 1, 0, 0, None)
            except TooMany:
                return False
        if alt is None:
            if len(self.plan[ci][ri]) > 1:
                return self.allocate_subrequests(ci, ri)
            alt = 0  # the loop over one alternative is the alternative itself
        request = self.plan[ci][ri][alt]
        if request.all_devices is not None and not request.all_devices:
            return False
        if di >= request.count:
            return self.allocate_one(ci, ri + 1, 0, None)
        if len(self.results[ci]) + request.count - di > MAX_RESULTS:
            raise TooMany
        if request.all_devices is not None:
            return self._allocate_then_next((ci, ri, di, alt), request, request.all_devices[di], must=True, start=0)
        # The first device that could be taken is tried before anything is counted: where it leads
        # to a solution (most requests), counting ahead would be work for nothing. When it does not,
        # the cuts decide whether the walk goes on (prune.py). Only a request's first device asks
        # first whether more devices are needed than are free (as cheap as a comparison otherwise).
        prune, at = self.prune, (ci, ri, di, alt)
        if di == 0 and not self.any_shared and prune.contended(self, ci, ri, alt, di):
            return False
        prune.forget(request, request.count - di)
        known = prune.statics_of(request)
        first = self.first_walkable(ci, request, start, known)
        if first < 0:
            return False
        if self._allocate_then_next(at, request, self.order[first], must=False, start=first + 1):
            return True
        if prune.capacity_short(self, ci, ri, alt, di) if self.any_shared else prune.contended(self, ci, ri, alt, di):
            return False
        begin = prune.walk_start(self, ci, request, request.count - di, first + 1)
        if begin is None:
            return False
        for position in self.positions(ci, request, begin):
            if (
                known[position] != REFUSED
                and self.walkable(ci, request, position, known)
                and self._allocate_then_next(at, request, self.order[position], must=False, start=position + 1)
            ):
                return True
        return False

    def first_walkable(self, ci: int, request: RequestData, start: int, known: bytearray) -> int:
        """The position of the first device from ``start`` on that the walk would try, or -1."""
        for position in self.positions(ci, request, start):
            if known[position] != REFUSED and self.walkable(ci, request, position, known):
                return position
        return -1

    def walkable(self, ci: int, request: RequestData, position: int, known: bytearray) -> bool:
        """The device at ``position`` passes the walk's checks before ``allocateDevice``: the
        selectors and, with consumable capacity, the capacity left.

        Read from the device's verdict for the request (``known``, kept across claims; worked out
        here if no walk met the device yet), where it settles both: refused, or selectable and,
        taking one allocation at a time, with the capacity (nothing of it is ever held). Else
        (a check failed with an error, DRAPartitionableDevices is off for it, or its capacity is
        shared) the checks themselves run, and raise where upstream's do.
        """
        verdict = known[position] or self.prune.static_verdict(self, known, ci, request, position)
        if verdict == REFUSED:
            return False
        candidate = self.order[position]
        if verdict in SELECTABLE_WITH_CAPACITY and not candidate.shared:
            return True
        if not self.is_selectable(ci, request, candidate):
            return False
        return not self.features.consumable_capacity or self.capacity_left(ci, request, candidate)

    def allocate_subrequests(self, ci: int, ri: int) -> bool:
        """The ``firstAvailable`` loop of ``allocateOne``: the first subrequest that succeeds."""
        all_too_many = True
        for alt in range(len(self.plan[ci][ri])):
            try:
                success = self.allocate_one(ci, ri, 0, alt)
            except TooMany:
                continue
            all_too_many = False
            if success:
                self.chosen[(ci, ri)] = alt
                return True
        if all_too_many:
            raise TooMany
        return False

    def _allocate_then_next(
        self, at: tuple[int, int, int, int], request: RequestData, candidate: DeviceWithID, must: bool, start: int
    ) -> bool:
        """Allocate ``candidate`` for device ``at`` (claim, request, device, alternative) and go on;
        roll it back unless that finds a solution."""
        ci, ri, di, alt = at
        state = self.allocate_device(ci, request, candidate, must)
        if state is None:
            return False
        try:
            done = self.allocate_one(ci, ri, di + 1, alt, start)
        except BaseException:
            self.rollback_device(state)
            raise
        if not done:
            self.rollback_device(state)
        return done

    def positions(self, ci: int, request: RequestData, start: int) -> Iterator[int]:
        """Positions in ``order`` from ``start`` on of the devices not in use for the request: the
        free ones, or for admin access (which takes devices in use) those not allocating to this
        claim ("Checking for "in use" is cheap and thus gets done first")."""
        if request.spec.admin_access:
            order, ledger = self.order, self.ledger
            yield from (p for p in range(start, len(order)) if not ledger.allocating_device_for_claim(order[p].id, ci))
            return
        free = self.free
        position = free.find(1, start)
        while position >= 0:
            yield position
            position = free.find(1, position + 1)

    # --- isSelectable ------------------------------------------------------------------------

    def is_selectable(self, claim_index: int, request: RequestData, candidate: DeviceWithID) -> bool:
        """``isSelectable``: the device's binding conditions, the selectors, the device's own node.

        The selectors' verdict is pure, so it is kept per class and request expressions and
        device (``request.verdicts``, of :mod:`.shared`): the many claims that repeat them, and
        calls that share them, get it worked out once (the scheduler evaluates CEL per claim;
        with 100 claims it was the largest cost in benchmarks/allocate_vs_go.py). Errors are not
        kept: each claim raises its own, naming itself.
        """
        if candidate.device.binding_conditions and not self.features.binding_conditions:
            return False
        key = id(candidate.view)
        held = request.verdicts.get(key)
        if held is None:
            held = request.verdicts[key] = self.shared.selectors_hold(request, self.claims[claim_index], candidate)
        # After the selectors, as in isSelectable: a CEL error on another node's device still counts.
        return held and (not candidate.per_device_node or device_matches_node(candidate.device, self.node))

    def selectable_or_error(self, claim_index: int, request: RequestData, candidate: DeviceWithID) -> bool | None:
        """``is_selectable``, with None for a device whose selectors fail instead of raising.

        For pruning and explaining: the error is the search's to raise, when and if upstream's
        order reaches that device.
        """
        try:
            return self.is_selectable(claim_index, request, candidate)
        except AllocationError:
            return None

    # --- CmpRequestOverCapacity --------------------------------------------------------------

    def cmp_request_over_capacity(
        self, where: str, request: RequestData, candidate: DeviceWithID, held: Mapping[str, cap.Exact], name: str
    ) -> bool:
        """``CmpRequestOverCapacity``; a request that cannot be represented aborts as upstream."""
        try:
            return cap.cmp_request_over_capacity(request.capacity, candidate.capacities, held)
        except cap.CapacityError as error:
            raise AllocationError(f"{where}: checking capacity for device {name}: {error}") from None

    def capacity_left(self, ci: int, request: RequestData, candidate: DeviceWithID) -> bool:
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
        fits = self.cmp_request_over_capacity(where, request, candidate, held, str(candidate.id))
        if not held:
            request.fits[candidate.capacity_key] = fits
        return fits

    # --- allocateDevice and rollbackDevice ---------------------------------------------------

    def taint_prevents_allocation(self, request: RequestData, candidate: DeviceWithID) -> bool:
        """``taintPreventsAllocation`` where the gate is on (most devices have no taints: asked first)."""
        device = candidate.device
        return bool(device.taints) and self.features.device_taints and taint_prevents_allocation(device, request.spec)

    def allocate_device(
        self, claim_index: int, request: RequestData, candidate: DeviceWithID, must: bool
    ) -> DeviceRollbackState | None:
        """``allocateDevice``: tentatively allocate; the caller must roll the state back when backtracking."""
        ledger, device = self.ledger, candidate.device
        shared = candidate.shared
        admin = bool(request.spec.admin_access)
        if not shared and admin and ledger.allocating_device_for_claim(candidate.id, claim_index):
            return None
        if (not admin and (candidate.id in ledger.busy or candidate.id in ledger.exclusive)) or (
            not self.features.partitionable_devices and device.consumes_counters
        ):
            return None
        state = DeviceRollbackState(claim_index, request, candidate)
        if device.consumes_counters and not (shared and ledger.device_capacity_in_use(candidate.id)):
            if not ledger.counters_fit(candidate):
                return None
            ledger.reserve_counters(candidate, 1)
            state.counters = True
        if device.taints and self.taint_prevents_allocation(request, candidate):
            self.rollback_device(state)
            return None
        for constraint in self.constraints[claim_index]:
            if not constraint.add(request.base, request.name, candidate):
                self.rollback_device(state)
                if must:
                    raise AllocationError(
                        f"claim {claim_ref(self.claims[claim_index])}, request {request.name}: cannot add device "
                        f"{candidate.id} because a claim constraint would not be satisfied"
                    )
                return None
            state.constraints += 1
        if not shared:
            self.mark_allocating(candidate, claim_index, True)
            state.marked = True
        result = self._take_share(claim_index, request, candidate, state)
        if result is None:
            self.rollback_device(state)
            return None
        self.results[claim_index].append(result)
        state.result = True
        return state

    def _take_share(
        self, ci: int, request: RequestData, candidate: DeviceWithID, state: DeviceRollbackState
    ) -> Pick | None:
        """The device's result, taking a share of its capacity; None when the capacity is not there."""
        share_id: str | None = None
        consumed: dict[str, cap.Amount] = {}
        if self.features.consumable_capacity:
            held = self.ledger.capacity_held(candidate.id)
            known = None if held else request.fits.get(candidate.capacity_key)
            if known is None:
                where = f"claim {claim_ref(self.claims[ci])}, request {request.name}"
                known = self.cmp_request_over_capacity(where, request, candidate, held, f"{candidate.id} (recheck)")
            if not known:
                return None
            if candidate.shared:
                consumed = cap.get_consumed_capacity_from_request(request.capacity, candidate.capacities) or {}
                claim = self.claims[ci]
                key = (claim.metadata.model_extra or {}).get("uid") or claim_ref(claim)
                share_id = str(uuid.uuid5(_SHARE_NAMESPACE, f"{key}/{request.name}/{candidate.id}"))
                self.ledger.allocating_capacity.setdefault(candidate.id, []).append(
                    {name: a.value for name, a in consumed.items()}
                )
                state.share = True
        written = tuple((name, str(a)) for name, a in consumed.items()) if consumed else ()
        return Pick(request, candidate, share_id, written)

    def mark_allocating(self, candidate: DeviceWithID, claim_index: int, on: bool) -> None:
        """``allocatingDevices``, with the free map and its count kept in step."""
        ledger = self.ledger
        ledger.mark(candidate.id, claim_index, on)
        free = 0 if ledger.device_in_use(candidate.id) else 1
        self.free_count += free - self.free[candidate.position]
        self.free[candidate.position] = free

    def rollback_device(self, state: DeviceRollbackState) -> None:
        """``rollbackDevice``: reverse what ``allocate_device`` recorded, last change first."""
        ledger, candidate = self.ledger, state.candidate
        if state.result:
            self.results[state.claim_index].pop()
        if state.share:
            ledger.allocating_capacity[candidate.id].pop()
        if state.marked:
            self.mark_allocating(candidate, state.claim_index, False)
        for constraint in reversed(self.constraints[state.claim_index][: state.constraints]):
            constraint.remove(state.request.base, state.request.name)
        if state.counters:
            ledger.reserve_counters(candidate, -1)


def _capacity_requests(where: str, spec: ExactDeviceRequest) -> dict[str, cap.Amount]:
    try:
        return cap.requested(spec.capacity.requests if spec.capacity is not None else {}, where)
    except cap.CapacityError as error:
        raise AllocationError(str(error)) from None
