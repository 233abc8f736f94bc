"""kubedevice's own cuts in the search, which the scheduler's allocator does not make.

Each cut ends a branch that upstream's ``allocateOne`` would walk to its end and fail, so the
first solution found, or the verdict that there is none, is the same; only the time differs. The
argument is the same for all three:

- **Monotone.** Every check that can refuse a device only gets stricter deeper in a branch:
  devices get busy, counters and capacity get used, a ``matchAttribute`` value gets fixed, a
  ``distinctAttribute`` value gets held. So a device that cannot be taken now cannot be taken
  further down either, and a count of what could be taken now bounds what any deeper step can take.
- **No side effects skipped.** Upstream's walk has side effects a cut must not hide: a selector
  or the capacity arithmetic raising an error (which aborts the whole allocation), and
  ``allocateDevice`` with ``must`` (``All`` requests) raising when a constraint refuses a device.
  A cut is taken only where none of these can happen on the devices the walk would still
  visit; otherwise the walk goes on and raises where the scheduler does.

:meth:`Pruner.walk_start` counts the devices one request could still take; :meth:`Pruner.contended`
counts exclusive devices for all requests still to serve; :meth:`Pruner.capacity_short` sums the
capacity they need against what the shared devices have left.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Hashable
from typing import TYPE_CHECKING

from .consumable_capacity import CapacityError, Exact, get_consumed_capacity_from_request
from .types import AllocationError

if TYPE_CHECKING:
    from .allocator import Allocator
    from .constraint import Constraint
    from .pools import DeviceWithID
    from .types import RequestData

GATE_REFUSAL = "consume counters (DRAPartitionableDevices is off)"

# What a device is to a request whatever the search holds (Pruner.static_verdict): not known
# yet; could be taken; could be taken but for its taints, which are only counted after the checks
# that can fail (the capacity of a shared device, the counters); never taken (the selectors, or
# the capacity of a device that takes one allocation, of which nothing is ever held); refused for
# DRAPartitionableDevices being off; or a check that fails with an error.
UNKNOWN, TAKEABLE, TAINTED, REFUSED, GATED, FAILS = range(6)
SELECTABLE_WITH_CAPACITY = (TAKEABLE, TAINTED)  # for a device that takes one allocation at a time


def gated(alloc: Allocator, candidate: DeviceWithID) -> bool:
    """``allocateDevice`` refuses a device that consumes counters while DRAPartitionableDevices is off."""
    return bool(candidate.device.consumes_counters) and not alloc.features.partitionable_devices


def counters_refuse(alloc: Allocator, candidate: DeviceWithID) -> bool:
    """``checkAvailableCounters`` would refuse the device now (a further share of a shared device
    in use charges nothing)."""
    return (
        bool(candidate.device.consumes_counters)
        and not (candidate.shared and alloc.ledger.device_capacity_in_use(candidate.id))
        and not alloc.ledger.counters_fit(candidate)
    )


def refusal(alloc: Allocator, ci: int, request: RequestData, candidate: DeviceWithID) -> str:
    """What ``allocateDevice`` refuses a selectable device for, now, without changing anything; ""
    when it would take it. In ``allocateDevice``'s order."""
    if gated(alloc, candidate):
        return GATE_REFUSAL
    if alloc.features.consumable_capacity and not alloc.capacity_left(ci, request, candidate):
        return "by capacity"
    if counters_refuse(alloc, candidate):
        return "by counters"
    if alloc.taint_prevents_allocation(request, candidate):
        return "by taints"
    if any(not c.admits(request.base, request.name, candidate) for c in alloc.constraints[ci]):
        return "by constraints"
    return ""


class Pruner:
    """The cuts, with what they work out once per ``Allocate`` (after planning)."""

    def __init__(self, alloc: Allocator) -> None:
        """Worked out from the allocator's plan; the allocator is passed to each cut rather than
        kept, so that the two make no reference cycle (garbage only a full collection frees)."""
        self.need_after = self._need_after(alloc)
        self.devices = len(alloc.order)
        self.must_add_after = self._must_add_after(alloc)
        self.least_takes: dict[tuple[int, str, str], Exact | None] = {}
        self.statics: dict[Hashable, bytearray] = {}
        # Per request (its id) and devices still needed: the devices walk_start counted, and
        # the changes that could narrow them, summed, then.
        self.counted: dict[tuple[int, int], tuple[list[int], int]] = {}
        self.governing: dict[int, list[Constraint]] = {}  # the constraints on each request (its id)
        # 1 where what the search holds can refuse the device: it consumes counters, or takes
        # several allocations (its capacity is shared).
        self.dynamic = bytearray(1 if c.device.consumes_counters or c.shared else 0 for c in alloc.order)

    @staticmethod
    def _need_after(alloc: Allocator) -> dict[tuple[int, int], int]:
        """Per (claim, request): the fewest exclusive devices all later requests need together.

        Admin access shares devices, so such alternatives count as needing none.
        """
        plan = alloc.plan
        need_after: dict[tuple[int, int], int] = {}
        total = 0
        for ci in reversed(range(len(plan))):
            for ri in reversed(range(len(plan[ci]))):
                need_after[(ci, ri)] = total
                total += min(0 if alt.spec.admin_access else alt.count for alt in plan[ci][ri])
        return need_after

    @staticmethod
    def _must_add_after(alloc: Allocator) -> set[tuple[int, int]]:
        """The (claim, request) positions after which an ``All`` request of a claim with constraints waits.

        ``allocateDevice`` with ``must`` aborts the whole allocation when a constraint refuses one
        of the devices an ``All`` request needs, and it does so as soon as it meets that device,
        before it reaches a device in use that would have failed the branch quietly. A count
        alone cannot tell which comes first, so the counting cuts (:meth:`contended`,
        :meth:`capacity_short`) are not taken at these positions.
        """
        plan, constraints = alloc.plan, alloc.constraints
        after: set[tuple[int, int]] = set()
        pending = False
        for ci in reversed(range(len(plan))):
            constrained = bool(constraints[ci])
            for ri in reversed(range(len(plan[ci]))):
                if pending:
                    after.add((ci, ri))
                pending = pending or (constrained and any(a.all_devices for a in plan[ci][ri]))
        return after

    def walk_start(self, alloc: Allocator, ci: int, request: RequestData, needed: int, start: int) -> int | None:
        """None when fewer devices from ``start`` on could still be taken than the request needs,
        else where the walk may begin: the first device that could be taken now.

        Safe by monotony: a device that cannot be taken now cannot be taken deeper in the
        branch. Upstream's walk would evaluate the selectors and capacity of every device left
        that is not in use, so when one of them fails there is no cut: the walk goes on from
        ``start`` and raises that error where the scheduler does.

        The devices before the first that could be taken are ones the walk would pass over
        without a side effect or an error, so it need not visit them again. All but one:
        a device refused because DRAPartitionableDevices is off, which the walk meets only
        after its capacity check (that may fail), so the walk begins there at the latest.

        What does not depend on what the search holds is worked out once per device and
        :attr:`~.types.RequestData.static_key` (:meth:`static_verdict`); only counters, the capacity of
        shared devices and the claim's constraints are checked again. This runs at every device
        of every request, so it is written for the fewest steps per device.

        The devices counted for the request's previous device are counted again only when
        something may have narrowed since (a constraint of the request took a value, or a device
        took counters: ``narrowed`` and ``counters_taken`` never go down). That count is kept
        for the next call only (each call drops its own): between the two, the walk took one
        device, before ``start``, and took back whatever else it tried, so those counted after
        it can still be taken, and those between were refused then and still are.
        """
        counts, key = self.counted, (id(request), needed)
        counts.pop(key, None)  # only the call for the next device may read it
        constraints = self.governing.get(key[0])
        if constraints is None:
            constraints = self.governing[key[0]] = [
                c for c in alloc.constraints[ci] if c.matches(request.base, request.name)
            ]
        changes = alloc.ledger.counters_taken
        for constraint in constraints:
            changes += constraint.narrowed
        earlier = counts.get((key[0], needed + 1))
        if earlier is not None and earlier[1] == changes:
            left = earlier[0][bisect_left(earlier[0], start) :]
            if len(left) >= needed:
                counts[key] = left, changes
                return left[0]
        order, statics, dynamic = alloc.order, self.statics_of(request), self.dynamic
        counted: list[int] = []
        begin: int | None = None
        for position in alloc.positions(ci, request, start):
            verdict = statics[position] or self.static_verdict(alloc, statics, ci, request, position)
            if verdict == REFUSED:
                continue
            if verdict == GATED:
                begin = position if begin is None else begin
                changes = -1  # the walk must begin there: what was counted is no start for the next device
                continue
            if verdict == FAILS:
                return start
            candidate = order[position]
            if dynamic[position]:
                takeable = self._dynamic_checks(alloc, ci, request, candidate)
                if takeable is None:
                    return start
                if not takeable:
                    continue
            if verdict == TAINTED:
                continue
            for constraint in constraints:
                if not constraint.admits(request.base, request.name, candidate):
                    break
            else:
                counted.append(position)
                begin = position if begin is None else begin
                if len(counted) >= needed:
                    counts[key] = counted, changes
                    return begin
        return None

    def forget(self, request: RequestData, needed: int) -> None:
        """Drop what walk_start counted for the request with ``needed`` devices to go: a new walk
        at that device begins, and its next device may read only what this walk counts."""
        self.counted.pop((id(request), needed), None)

    def statics_of(self, request: RequestData) -> bytearray:
        """The static verdicts for the request's :attr:`~RequestData.static_key`, one per device."""
        statics = self.statics.get(request.static_key)
        if statics is None:
            statics = self.statics[request.static_key] = bytearray(self.devices)
        return statics

    @staticmethod
    def static_verdict(alloc: Allocator, statics: bytearray, ci: int, request: RequestData, position: int) -> int:
        """The device's verdict whatever the search holds, in ``refusal``'s order, kept."""
        candidate = alloc.order[position]
        selectable = alloc.selectable_or_error(ci, request, candidate)
        if selectable is None:
            verdict = FAILS
        elif not selectable:
            verdict = REFUSED
        elif gated(alloc, candidate):
            verdict = GATED
        else:
            verdict = TAKEABLE
            if alloc.features.consumable_capacity and not candidate.shared:
                try:  # nothing is ever held of a device that takes one allocation at a time
                    verdict = TAKEABLE if alloc.capacity_left(ci, request, candidate) else REFUSED
                except AllocationError:
                    verdict = FAILS
            if verdict == TAKEABLE and alloc.taint_prevents_allocation(request, candidate):
                verdict = TAINTED
        statics[position] = verdict
        return verdict

    @staticmethod
    def _dynamic_checks(alloc: Allocator, ci: int, request: RequestData, candidate: DeviceWithID) -> bool | None:
        """The capacity of a shared device and the counters, which what the search holds decides,
        in ``refusal``'s order; None for an error."""
        try:
            if candidate.shared and not alloc.capacity_left(ci, request, candidate):
                return False
            return not counters_refuse(alloc, candidate)
        except AllocationError:
            return None

    def contended(self, alloc: Allocator, ci: int, ri: int, alt: int, di: int) -> bool:
        """All requests still to serve need more exclusive devices than are free: none can succeed.

        Safe by monotony: free devices only get fewer deeper in the branch. This cut skips CEL on
        devices upstream's walk would still try, so it is only taken when no selector of a
        request still to serve fails on a device it could reach; otherwise the walk goes on and
        raises that error where the scheduler does. A device that takes several allocations can
        serve any number of requests, so with one in the pools there is no cut.
        """
        if alloc.any_shared or (ci, ri) in self.must_add_after:
            return False
        request = alloc.plan[ci][ri][alt]
        need = self.need_after[(ci, ri)] + (0 if request.spec.admin_access else request.count - di)
        if need <= alloc.free_count:
            return False
        free = [c for c in alloc.order if not alloc.ledger.device_in_use(c.id)]
        pending = [(ci, request)] + [
            (cj, later)
            for cj in range(ci, len(alloc.plan))
            for rj, alternatives in enumerate(alloc.plan[cj])
            if cj > ci or rj > ri
            for later in alternatives
            if later.all_devices is None
        ]
        return all(
            alloc.selectable_or_error(cj, later, c) is not None
            for cj, later in pending
            for c in (alloc.order if later.spec.admin_access else free)
        )

    def capacity_short(self, alloc: Allocator, ci: int, ri: int, alt: int, di: int) -> bool:
        """The requests still to serve need more of some capacity than all devices have left.

        The cut for devices shared by many allocations, where counting devices cannot see that
        "21 units on 10 devices of 2" fails. Each allocation of a request takes at least the
        least any selectable device would give it (its request rounded by that device's policy,
        or the default, or the whole capacity), every device has at most its value less what is
        held of it, so when the sum of the least takes passes the sum of what is left, no branch
        succeeds (and what is held only grows deeper). Only taken when every device has the
        capacity, no request still to serve has admin access (it reuses exclusive devices), and
        neither a selector nor the capacity arithmetic fails on a device upstream's walk would
        try, so the scheduler's errors stay.
        """
        if not alloc.any_shared or (ci, ri) in self.must_add_after:
            return False
        request = alloc.plan[ci][ri][alt]
        groups = [[(ci, request, request.count - di)]] + [
            [(cj, later, later.count) for later in alternatives]
            for cj in range(ci, len(alloc.plan))
            for rj, alternatives in enumerate(alloc.plan[cj])
            if cj > ci or rj > ri
        ]
        if any(r.spec.admin_access for group in groups for _, r, _ in group):
            return False
        names = set.intersection(*(set(c.capacities) for c in alloc.order)) if alloc.order else set()
        for name in sorted(names):
            left = sum(
                c.capacities[name].value.value - alloc.ledger.capacity_held(c.id).get(name, 0) for c in alloc.order
            )
            need: Exact = 0
            for group in groups:
                takes = [self._least_take(alloc, cj, r, name) for cj, r, _ in group]
                if any(t is None for t in takes):
                    return False
                need += min(count * (t or 0) for (_, _, count), t in zip(group, takes, strict=True))
            if need > left:
                return True
        return False

    def _least_take(self, alloc: Allocator, ci: int, request: RequestData, name: str) -> Exact | None:
        """The least of capacity ``name`` one allocation of the request takes; None when a selector
        or the capacity arithmetic fails on some device (then the walk must go on and meet it).

        Depends on nothing the search changes, so it is worked out once."""
        key = (ci, request.name, name)
        if key not in self.least_takes:
            self.least_takes[key] = self._least_take_of(alloc, ci, request, name)
        return self.least_takes[key]

    @staticmethod
    def _least_take_of(alloc: Allocator, ci: int, request: RequestData, name: str) -> Exact | None:
        least: Exact | None = None
        for candidate in alloc.order:
            selectable = alloc.selectable_or_error(ci, request, candidate)
            if selectable is None:
                return None
            if not selectable:
                continue
            try:
                consumed = get_consumed_capacity_from_request(request.capacity, candidate.capacities)
            except (CapacityError, AllocationError):
                return None
            if consumed is not None and (least is None or consumed[name].value < least):
                least = consumed[name].value
        return least if least is not None else 0
