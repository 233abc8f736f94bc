"""What is held of each device: ``AllocatedState`` (``internal/allocatedstate.go``, gathered as the
scheduler's ``foreachAllocatedDevice`` does) plus what ``allocator_incubating.go`` tracks while it
allocates: ``allocatingDevices``, ``allocatingCapacity`` and the pools' counters
(``checkAvailableCounters``, ``deallocateCountersForDevice``)."""

from __future__ import annotations

from collections.abc import Iterable

from ..models import ResourceClaim
from . import consumable_capacity as cap
from .consumable_capacity import CapacityError, Exact
from .pools import CounterTotals, DeviceWithID, Pool, device_consumption, slice_where
from .types import AllocationError, DeviceID, SharedDevice


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


class Ledger:
    """What is held of each device: by allocated claims, and by the claims being allocated.

    Exclusive devices, shares of ``allowMultipleAllocations`` devices with the capacity they
    consume, and the counters of each pool.
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
        self.held_capacity: dict[DeviceID, dict[str, Exact]] = {}
        for item in in_use:
            if isinstance(item, SharedDevice):
                if shares:
                    self._add_share(item)
            else:
                self.exclusive.add(item)
        self.allocating: dict[DeviceID, set[int]] = {}
        self.busy: set[DeviceID] = set()  # allocating to some claim
        self.allocating_capacity: dict[DeviceID, list[dict[str, Exact]]] = {}
        # Per pool: its counters' values less all that consumes them, and those left below zero.
        self.left: dict[tuple[str, str], tuple[CounterTotals, set[tuple[str, str]]]] = {}
        self.counters_taken = 0  # how many times a device took counters; never goes down

    def _add_share(self, item: SharedDevice) -> None:
        """``AggregatedCapacity``: what the shares of a device consume, summed."""
        self.shared.add(item.id)
        if not item.consumed:
            return
        totals = self.held_capacity.setdefault(item.id, {})
        for name, value in item.consumed.items():
            try:
                amount = cap.parse(value, f"consumedCapacity of {item.id}: {name}").value
            except CapacityError as error:
                raise AllocationError(str(error)) from None
            totals[name] = totals.get(name, 0) + amount

    def is_device_allocated(self, device: DeviceID) -> bool:
        """``IsDeviceAllocated``: held by an allocated claim, exclusively or as a share."""
        return device in self.exclusive or device in self.shared or device in self.held_capacity

    def device_in_use(self, device: DeviceID) -> bool:
        """``deviceInUse``: exclusively held, or being allocated to a claim."""
        return device in self.exclusive or device in self.busy

    def allocating_device_for_claim(self, device: DeviceID, claim_index: int) -> bool:
        """``allocatingDeviceForClaim``."""
        return claim_index in self.allocating.get(device, ())

    def mark(self, device: DeviceID, claim_index: int, on: bool) -> None:
        """Allocating the device to the claim, or no longer (``allocatingDevices``); ``busy`` follows."""
        owners = self.allocating.get(device)
        if owners is None:
            owners = self.allocating[device] = set()
        if on:
            owners.add(claim_index)
            self.busy.add(device)
        else:
            owners.discard(claim_index)
            if not owners:
                self.busy.discard(device)

    def device_capacity_in_use(self, device: DeviceID) -> bool:
        """``deviceCapacityInUse``: some share of the device is held or being allocated."""
        return device in self.held_capacity or device in self.shared or bool(self.allocating_capacity.get(device))

    def capacity_held(self, device: DeviceID) -> dict[str, Exact]:
        """Capacity taken by allocated claims' shares and by those being allocated."""
        if device not in self.held_capacity and not self.allocating_capacity.get(device):
            return {}  # every exclusive device: the walk asks this of each device it meets
        held = dict(self.held_capacity.get(device, {}))
        for share in self.allocating_capacity.get(device, []):
            for name, value in share.items():
                held[name] = held.get(name, 0) + value
        return held

    def _key(self, pool: Pool) -> tuple[str, str]:
        return ("", pool.name) if self.by_pool_name else (pool.driver, pool.name)

    def available_counters(self, pool: Pool) -> tuple[CounterTotals, set[tuple[str, str]]]:
        """What is left of the pool's counters, and which are overdrawn.

        Starts as the counters less what allocated devices, on any node, consume
        (``checkAvailableCounters``' ``availableCounters``); :meth:`reserve_counters` then takes
        and gives back what the devices being allocated consume. Kept up to date instead of
        summed on every check: the walk checks the counters of every device it meets, for every
        claim.
        """
        key = self._key(pool)
        known = self.left.get(key)
        if known is not None:
            return known
        left = dict(pool.counters)
        for slice_ in pool.slices + pool.elsewhere:
            for index, device in enumerate(slice_.spec.devices):
                if not self.is_device_allocated(DeviceID(pool.driver, pool.name, device.name)):
                    continue
                try:
                    consumed = device_consumption(device, f"{slice_where(slice_)}: spec.devices[{index}]")
                except CapacityError as error:
                    raise AllocationError(str(error)) from None
                for counter_set, counter, amount in consumed:
                    if (counter_set, counter) in left:
                        left[(counter_set, counter)] -= amount.value
        self.left[key] = left, {name for name, value in left.items() if value < 0}
        return self.left[key]

    def counters_fit(self, candidate: DeviceWithID) -> bool:
        """``checkAvailableCounters``' verdict: the pool's counters, every one of them, stay covered
        with the device added.

        Upstream compares every counter of the pool, not only those the device consumes, so a
        counter already overdrawn (by allocated devices) blocks every device of the pool. A
        counter the pool lacks is not compared, as upstream ranges over the pool's counters.
        """
        takes = candidate.counter_totals
        left, overdrawn = self.available_counters(candidate.pool)
        if overdrawn and not overdrawn <= takes.keys():
            return False
        for name, value in takes.items():
            have = left.get(name)
            if have is not None and have < value:
                return False
        return True

    def reserve_counters(self, candidate: DeviceWithID, sign: int) -> None:
        """Take (``sign`` 1: ``checkAvailableCounters``) or give back (-1:
        ``deallocateCountersForDevice``) what the device consumes of the pool's counters."""
        left, overdrawn = self.available_counters(candidate.pool)
        self.counters_taken += sign > 0
        for name, value in candidate.counter_totals.items():
            if name not in left:
                continue
            left[name] -= sign * value
            if left[name] < 0:
                overdrawn.add(name)
            else:
                overdrawn.discard(name)
