"""``kubedevice dra available``: what is still free, per pool and node, as the scheduler counts it.

The accounting follows the scheduler's DRA plugin and allocator of Kubernetes 1.36
(``k8s.io/dynamic-resource-allocation`` v0.36.x):

- a claim's ``status.allocation.devices.results`` mark devices in use, except results with
  ``adminAccess: true``, which do not consume a device
  (``pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go``,
  ``foreachAllocatedDevice``);
- a result with a ``shareID`` is one share of a device with ``allowMultipleAllocations``, and
  its ``consumedCapacity`` adds up per device (same function, and
  ``structured/schedulerapi/types.go``, ``ConsumedCapacityCollection``);
- a pool is its slices of the newest generation, on whichever nodes they are; the counters of
  its ``sharedCounters`` sets lose the ``consumesCounters`` of every allocated device, once per
  device whatever its number of shares, and may go negative
  (``structured/internal/incubating/allocator_incubating.go``, ``checkAvailableCounters``;
  ``internal.IsDeviceAllocated``); a device that consumes a counter set or counter the pool
  does not have makes the pool invalid (``pools_incubating.go``,
  ``validateDeviceCounterConsumption``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import KubedeviceError
from .models import Device, NodeSelector, ResourceClaim, ResourceSlice
from .structured import consumable_capacity as cap
from .structured.consumable_capacity import Amount, CapacityError
from .structured.pools import (
    CounterSets,
    PoolID,
    add_slice,
    device_consumption,
    get_and_validate_counter_sets,
    node_matches,
    slice_where,
    validate_device_counter_consumption,
)
from .structured.types import Node, claim_ref

FREE, ALLOCATED, SHARED, BLOCKED = "free", "allocated", "shared", "blocked"
ALL_NODES = "<all nodes>"
T = TypeVar("T")


class InputError(KubedeviceError, ValueError):
    """A value the API server would have refused: one line naming the object and field."""


@dataclass
class DeviceUse:
    """What the claims hold of one device: dedicated owners, shares, capacity consumed."""

    owners: list[str] = field(default_factory=list)
    shares: list[str] = field(default_factory=list)
    consumed: dict[str, Amount] = field(default_factory=dict)

    @property
    def allocated(self) -> bool:
        """internal.IsDeviceAllocated: dedicated, or any share or consumed capacity."""
        return bool(self.owners or self.shares or self.consumed)


@dataclass
class DeviceState:
    name: str
    nodes: str
    state: str
    claims: list[str]
    capacity: dict[str, tuple[Amount, Amount]]  # name -> (total, left), allowMultipleAllocations only


@dataclass
class CounterState:
    counter_set: str
    counter: str
    total: Amount
    left: Amount


@dataclass
class PoolState:
    driver: str
    name: str
    generation: int
    slices: int
    slice_count: int
    invalid: str
    devices: list[DeviceState]
    counters: list[CounterState]

    @property
    def complete(self) -> bool:
        return self.slices == self.slice_count


def parse_amount(text: Any, where: str) -> Amount:
    """A quantity as resource.ParseQuantity reads it, or InputError naming ``where``."""
    try:
        return cap.parse(text, where)
    except CapacityError as error:
        raise InputError(str(error)) from None


# --- where devices are available ----------------------------------------------------------


def _selector_text(selector: NodeSelector) -> str:
    terms = []
    for term in selector.node_selector_terms:
        parts = [_requirement_text(r.key, r.operator, r.values) for r in term.match_expressions]
        parts += [_requirement_text(r.key, r.operator, r.values) for r in term.match_fields]
        terms.append(",".join(parts))
    return " or ".join(terms) or "<no node>"


def _requirement_text(key: str, operator: str, values: Sequence[str]) -> str:
    return f"{key} {operator} ({','.join(values)})" if values else f"{key} {operator}"


@dataclass(frozen=True)
class _Target:
    """One of the three ways a slice or device names its nodes (nodeName, allNodes, nodeSelector)."""

    node_name: str | None
    all_nodes: bool | None
    selector: NodeSelector | None

    def text(self) -> str:
        if self.node_name:
            return self.node_name
        if self.all_nodes:
            return ALL_NODES
        return _selector_text(self.selector) if self.selector is not None else "<no node>"

    def reaches(self, node: Node) -> bool:
        return node_matches(node, self.node_name, self.all_nodes, self.selector)


def _target(slice_: ResourceSlice, device: Device) -> _Target:
    """perDeviceNodeSelection moves the node fields onto each device (types.go, ResourceSliceSpec)."""
    spec = slice_.spec
    if spec.per_device_node_selection:
        return _Target(device.node_name, device.all_nodes, device.node_selector)
    return _Target(spec.node_name, spec.all_nodes, spec.node_selector)


# --- what the claims hold -----------------------------------------------------------------


def claim_usage(claims: Iterable[tuple[str, ResourceClaim]]) -> dict[tuple[str, str, str], DeviceUse]:
    """Per (driver, pool, device), what ``foreachAllocatedDevice`` would report; ``str`` is the source."""
    usage: dict[tuple[str, str, str], DeviceUse] = {}
    for source, claim in claims:
        allocation = (claim.status or {}).get("allocation") or {}
        devices = allocation.get("devices") if isinstance(allocation, dict) else None
        results = devices.get("results") if isinstance(devices, dict) else None
        for i, result in enumerate(results if isinstance(results, list) else []):
            where = f'{source}: ResourceClaim "{claim_ref(claim)}": status.allocation.devices.results[{i}]'
            if not isinstance(result, dict):
                raise InputError(f"{where}: expected an object")
            if result.get("adminAccess") is True:
                continue  # allocateddevices.go: "Is not considered as allocated."
            key = (str(result.get("driver", "")), str(result.get("pool", "")), str(result.get("device", "")))
            _record(usage.setdefault(key, DeviceUse()), result, claim_ref(claim), where)
    return usage


def _record(use: DeviceUse, result: Mapping[str, Any], owner: str, where: str) -> None:
    if result.get("shareID") is None:
        use.owners.append(owner)
        return
    use.shares.append(owner)
    consumed = result.get("consumedCapacity") or {}
    if not isinstance(consumed, dict):
        raise InputError(f"{where}.consumedCapacity: expected a map of quantities")
    for name, value in consumed.items():
        amount = parse_amount(value, f"{where}.consumedCapacity[{name}]")
        use.consumed[name] = use.consumed[name].plus(amount) if name in use.consumed else amount


# --- pools --------------------------------------------------------------------------------


def _newest(slices: Iterable[tuple[str, ResourceSlice]]) -> dict[PoolID, list[tuple[str, ResourceSlice]]]:
    """Pools by (driver, name), with only the slices of each pool's newest generation (``addSlice``)."""
    pools: dict[PoolID, list[ResourceSlice]] = {}
    for _, slice_ in slices:
        add_slice(pools, slice_)
    source = {id(slice_): name for name, slice_ in slices}
    return {key: [(source[id(s)], s) for s in members] for key, members in pools.items()}


def _read(read: Callable[[], T]) -> T:
    try:
        return read()
    except CapacityError as error:
        raise InputError(str(error)) from None


Consumption = list[tuple[str, str, Amount]]


def _fits(left: CounterSets, consumed: Consumption) -> bool:
    return all(left[s][c].quantity.cmp(amount.quantity) >= 0 for s, c, amount in consumed if c in left.get(s, {}))


def pool_state(
    key: PoolID, slices: Sequence[tuple[str, ResourceSlice]], usage: Mapping[tuple[str, str, str], DeviceUse]
) -> PoolState:
    """Devices, counters left and capacity left of one pool at its newest generation."""
    driver, pool = key
    where = {id(s): slice_where(s, source) for source, s in slices}
    sets, invalid = _read(lambda: get_and_validate_counter_sets((s for _, s in slices), lambda s: where[id(s)]))
    invalid = invalid or validate_device_counter_consumption(sets, (s for _, s in slices))
    left = {name: dict(counters) for name, counters in sets.items()}
    devices = [
        (slice_, device, _consumption(where[id(slice_)], i, device), _capacities(where[id(slice_)], i, device))
        for _, slice_ in slices
        for i, device in enumerate(slice_.spec.devices)
    ]
    for _, device, consumed, _ in devices:
        if usage.get((driver, pool, device.name), DeviceUse()).allocated:
            for counter_set, counter, amount in consumed:
                if counter in left.get(counter_set, {}):
                    left[counter_set][counter] = left[counter_set][counter].minus(amount)
    states = [
        _device_state(slice_, device, usage.get((driver, pool, device.name), DeviceUse()), _fits(left, consumed), caps)
        for slice_, device, consumed, caps in devices
    ]
    counters = [
        CounterState(name, counter, total, left[name][counter])
        for name, counters_of in sets.items()
        for counter, total in counters_of.items()
    ]
    first = slices[0][1].spec.pool
    return PoolState(driver, pool, first.generation, len(slices), first.resource_slice_count, invalid, states, counters)


def _consumption(where: str, index: int, device: Device) -> Consumption:
    return _read(lambda: device_consumption(device, f"{where}: spec.devices[{index}]"))


def _capacities(where: str, index: int, device: Device) -> dict[str, Amount]:
    where = f"{where}: spec.devices[{index}].capacity"
    return {name: parse_amount(capacity.value, f"{where}[{name}].value") for name, capacity in device.capacity.items()}


def _device_state(
    slice_: ResourceSlice, device: Device, use: DeviceUse, counters_fit: bool, capacity: Mapping[str, Amount]
) -> DeviceState:
    """A shared device stays offerable while it has capacity; a free one needs its counters."""
    if use.owners:
        state = ALLOCATED
    elif use.allocated:
        state = SHARED
    else:
        state = FREE if counters_fit else BLOCKED
    shown: dict[str, tuple[Amount, Amount]] = {}
    if device.allow_multiple_allocations:
        shown = {
            name: (total, total.minus(use.consumed[name]) if name in use.consumed else total)
            for name, total in capacity.items()
        }
    return DeviceState(device.name, _target(slice_, device).text(), state, use.owners + use.shares, shown)


def available(
    slices: Sequence[tuple[str, ResourceSlice]], claims: Sequence[tuple[str, ResourceClaim]], node: Node | None = None
) -> list[PoolState]:
    """Every pool, sorted by driver and name; with ``node``, only the devices that node can use.

    A pool with no device left for the node is dropped; its counters still count the devices
    of other nodes, as the scheduler's do.
    """
    usage = claim_usage(claims)
    states = []
    for key, members in sorted(_newest(slices).items()):
        state = pool_state(key, members, usage)
        if node is not None:
            targets = [_target(s, d) for _, s in members for d in s.spec.devices]  # state.devices' order
            state.devices = [d for d, t in zip(state.devices, targets, strict=True) if t.reaches(node)]
            if not state.devices:
                continue
        states.append(state)
    return states


# --- output -------------------------------------------------------------------------------


def as_json_report(pools: Sequence[PoolState]) -> list[dict[str, Any]]:
    """One object per pool: its devices with state and claims, counters and capacity left."""
    return [
        {
            "driver": p.driver,
            "pool": p.name,
            "generation": p.generation,
            "complete": p.complete,
            **({"invalid": p.invalid} if p.invalid else {}),
            "summary": _summary(p.devices),
            "devices": [_device_json(d) for d in p.devices],
            "counters": [
                {"counterSet": c.counter_set, "counter": c.counter, "total": str(c.total), "left": str(c.left)}
                for c in p.counters
            ],
        }
        for p in pools
    ]


def _device_json(device: DeviceState) -> dict[str, Any]:
    shown: dict[str, Any] = {"name": device.name, "nodes": device.nodes, "state": device.state}
    if device.claims:
        shown["claims"] = device.claims
    if device.capacity:
        shown["capacity"] = {n: {"total": str(t), "left": str(left)} for n, (t, left) in device.capacity.items()}
    return shown


def _summary(devices: Iterable[DeviceState]) -> dict[str, int]:
    counts = {FREE: 0, SHARED: 0, ALLOCATED: 0, BLOCKED: 0}
    for device in devices:
        counts[device.state] += 1
    return counts


def render(pools: Sequence[PoolState]) -> str:
    """A table per (nodes, pool) of device counts, then counters and capacity left where declared."""
    rows = [["NODES", "DRIVER", "POOL", "DEVICES", "FREE", "SHARED", "ALLOCATED", "BLOCKED"]]
    notes = []
    for pool in pools:
        by_nodes: dict[str, list[DeviceState]] = {}
        for device in pool.devices:
            by_nodes.setdefault(device.nodes, []).append(device)
        for nodes, devices in by_nodes.items():
            counts = _summary(devices)
            rows.append([nodes, pool.driver, pool.name, str(len(devices)), *(str(n) for n in counts.values())])
        if not pool.complete:
            notes.append(f"pool {pool.driver}/{pool.name} is incomplete: {pool.slices} of {pool.slice_count} slices")
        if pool.invalid:
            notes.append(f"pool {pool.driver}/{pool.name} is invalid: {pool.invalid}")
    text = _table(rows)
    counters = [
        [p.driver, p.name, c.counter_set, c.counter, str(c.total), str(c.left)] for p in pools for c in p.counters
    ]
    if counters:
        text += "\n" + _table([["DRIVER", "POOL", "COUNTER SET", "COUNTER", "TOTAL", "LEFT"], *counters])
    capacity = [
        [p.driver, p.name, d.name, name, str(total), str(left)]
        for p in pools
        for d in p.devices
        for name, (total, left) in d.capacity.items()
    ]
    if capacity:
        text += "\n" + _table([["DRIVER", "POOL", "DEVICE", "CAPACITY", "TOTAL", "LEFT"], *capacity])
    return text + "".join(f"{note}\n" for note in notes)


def _table(rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n" for row in rows)
