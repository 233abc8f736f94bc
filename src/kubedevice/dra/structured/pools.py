"""Resource pools as the scheduler's allocator sees them: ``pools_incubating.go``.

``GatherPools`` and its helpers in upstream's order, for the variant the gates pick (the stable
one, ``pools_stable.go``, and 1.36's incubating one differ only where :func:`_relevant` says), and
the one copy of pool grouping and counter sets that ``kubedevice dra available`` uses too.
A device of a usable pool, as the search walks it, is a :class:`DeviceWithID`.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .. import cel
from ..models import Device, NodeSelector, ResourceSlice
from . import consumable_capacity as cap
from .consumable_capacity import Amount, CapacityError, Exact
from .gates import Features
from .types import AllocationError, DeviceID, Node

if TYPE_CHECKING:
    from .shared import Shared

PoolID = tuple[str, str]  # (driver, pool name)
CounterSets = dict[str, dict[str, Amount]]  # counter set -> counter -> value
CounterTotals = dict[tuple[str, str], Exact]  # (counter set, counter) -> value
T = TypeVar("T")
V = TypeVar("V")


# --- node selection -----------------------------------------------------------------------


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
    """``nodeaffinity.NodeSelector.Match``: terms are ORed, requirements within a term ANDed; an
    empty term matches nothing."""
    fields = {"metadata.name": node.name}
    for term in selector.node_selector_terms:
        requirements = [(node.labels, r) for r in term.match_expressions] + [(fields, r) for r in term.match_fields]
        if requirements and all(_requirement_matches(v, r.key, r.operator, r.values) for v, r in requirements):
            return True
    return False


def node_matches(node: Node, name: str | None, all_nodes: bool | None, selector: NodeSelector | None) -> bool:
    """``NodeMatches``: a node name, all nodes, or a node selector."""
    if name:
        return name == node.name
    if all_nodes:
        return True
    return selector is not None and node_selector_matches(selector, node)


def device_matches_node(device: Device, node: Node) -> bool:
    """A ``perDeviceNodeSelection`` device's own node fields (``NodeMatches`` on the device)."""
    return node_matches(node, device.node_name, device.all_nodes, device.node_selector)


# --- pools --------------------------------------------------------------------------------


@dataclass
class Pool:
    """``Pool``: its device slices targeting the node in search order (``DeviceSlicesTargetingNode``).

    ``elsewhere`` are its device slices for other nodes (``DeviceSlicesNotTargetingNode``: their
    allocated devices consume the pool's counters too); ``counters`` the values of its counter sets.
    """

    driver: str
    name: str
    slices: list[ResourceSlice]
    incomplete: bool = False
    invalid: str = ""
    elsewhere: list[ResourceSlice] = field(default_factory=list)
    counters: CounterTotals = field(default_factory=dict)


def _relevant(slice_: ResourceSlice, node: Node, features: Features) -> bool:
    """Whether ``GatherPools`` adds the slice for ``node``.

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
        return node_matches(node, spec.node_name, spec.all_nodes, spec.node_selector)
    if spec.per_device_node_selection:
        return any(device_matches_node(d, node) for d in spec.devices)
    return False


def gather_pools(slices: Sequence[ResourceSlice], node: Node, features: Features | None = None) -> list[Pool]:
    """The pools that serve ``node``, in the scheduler's search order (``GatherPools``).

    Only slices relevant to the node are kept, and of each pool only its newest generation
    among them. A pool is complete when that generation has ``resourceSliceCount`` slices,
    counted on the node first and then, if short, over all slices of every node; a newer
    generation elsewhere makes the pool obsolete and it is ignored. Pools are sorted by driver
    and pool name, those with binding conditions last (not in the stable variant).
    """
    features = features or Features()
    by_pool: dict[PoolID, list[ResourceSlice]] = {}
    for slice_ in slices:
        if _relevant(slice_, node, features):
            add_slice(by_pool, slice_)
    ready: list[Pool] = []
    binding: list[Pool] = []
    for key, pool_slices in by_pool.items():
        pool_meta = pool_slices[0].spec.pool
        everywhere: Sequence[ResourceSlice] = ()
        if len(pool_slices) != pool_meta.resource_slice_count:
            found = check_slices_in_pool(slices, key, pool_meta.generation)
            if found is None:
                continue
            if len(found) != pool_meta.resource_slice_count:
                ready.append(Pool(key[0], key[1], [], incomplete=True))
                continue
            everywhere = found
        pool = build_pool(key, pool_slices, everywhere, features)
        (binding if pool_has_binding_conditions(pool) and not features.stable else ready).append(pool)
    return sort_pools_by_id(ready) + sort_pools_by_id(binding)


def sort_pools_by_id(pools: list[Pool]) -> list[Pool]:
    return sorted(pools, key=lambda p: (p.driver, p.name))


def add_slice(pools: dict[PoolID, list[ResourceSlice]], slice_: ResourceSlice) -> None:
    """``addSlice``: a newer generation replaces the pool's slices, an older one is dropped."""
    key = (slice_.spec.driver, slice_.spec.pool.name)
    known = pools.get(key)
    generation = slice_.spec.pool.generation
    if known is None or generation > known[0].spec.pool.generation:
        pools[key] = [slice_]
    elif generation == known[0].spec.pool.generation:
        known.append(slice_)


def build_pool(
    key: PoolID, slices: list[ResourceSlice], everywhere: Sequence[ResourceSlice], features: Features
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
    invalid = validate_device_names(device_slices)
    if invalid:
        return Pool(key[0], key[1], [], invalid=invalid)
    if not features.partitionable_devices:
        return Pool(key[0], key[1], device_slices)
    sets, invalid = _allocator_error(lambda: get_and_validate_counter_sets(counter_slices))
    invalid = (
        invalid
        or validate_device_counter_consumption(sets, device_slices)
        or validate_device_counter_consumption(sets, elsewhere)
    )
    if invalid:
        return Pool(key[0], key[1], [], invalid=invalid)
    totals = {(name, counter): amount.value for name, counters in sets.items() for counter, amount in counters.items()}
    return Pool(key[0], key[1], device_slices, elsewhere=elsewhere, counters=totals)


def _allocator_error(read: Callable[[], T]) -> T:
    """A quantity that does not parse aborts the allocation, naming where it is."""
    try:
        return read()
    except CapacityError as error:
        raise AllocationError(str(error)) from None


def slice_where(slice_: ResourceSlice, source: str = "") -> str:
    """``ResourceSlice "name"``, after the file it came from if known: what messages name."""
    return f'{source}: ResourceSlice "{slice_.metadata.name}"' if source else f'ResourceSlice "{slice_.metadata.name}"'


def get_and_validate_counter_sets(
    slices: Iterable[ResourceSlice], where: Callable[[ResourceSlice], str] = slice_where
) -> tuple[CounterSets, str]:
    """``getAndValidateCounterSets``: every counter's value, and the first error (a repeated set name),
    where reading stops. A value that does not parse raises :class:`CapacityError` naming ``where``."""
    sets: CounterSets = {}
    for slice_ in slices:
        for i, counter_set in enumerate(slice_.spec.shared_counters or []):
            name = str(counter_set.get("name", ""))
            if name in sets:
                return sets, f"duplicate counter set name {name}"
            path = f"{where(slice_)}: spec.sharedCounters[{i}].counters"
            sets[name] = {
                counter: counter_value(spec, f"{path}[{counter}]")
                for counter, spec in (counter_set.get("counters") or {}).items()
            }
    return sets, ""


def counter_value(counter: Mapping[str, Any], where: str) -> Amount:
    """A ``Counter``'s value (the API server requires one)."""
    if "value" not in counter:
        raise CapacityError(f"{where}.value: Required value")
    return cap.parse(counter["value"], f"{where}.value")


def validate_device_names(slices: Iterable[ResourceSlice]) -> str:
    """``validateDeviceNames``: the first repeated device name."""
    seen: set[str] = set()
    for device in (d for s in slices for d in s.spec.devices):
        if device.name in seen:
            return f"duplicate device name {device.name}"
        seen.add(device.name)
    return ""


def validate_device_counter_consumption(sets: Mapping[str, Mapping[str, Any]], slices: Iterable[ResourceSlice]) -> str:
    """``validateDeviceCounterConsumption``'s first error, word for word."""
    for slice_ in slices:
        for device in slice_.spec.devices:
            for entry in device.consumes_counters or []:
                counter_set = str(entry.get("counterSet", ""))
                if counter_set not in sets:
                    return f"counter set {counter_set} not found"
                for counter in entry.get("counters") or {}:
                    if counter not in sets[counter_set]:
                        return f"counter {counter} not found in counter set {counter_set}"
    return ""


def device_consumption(device: Device, where: str) -> list[tuple[str, str, Amount]]:
    """(counter set, counter, amount) for each counter the device consumes; ``where`` names the device."""
    return [
        (
            str(entry.get("counterSet", "")),
            counter,
            counter_value(spec, f"{where}.consumesCounters[{i}].counters[{counter}]"),
        )
        for i, entry in enumerate(device.consumes_counters or [])
        for counter, spec in (entry.get("counters") or {}).items()
    ]


def pool_has_binding_conditions(pool: Pool) -> bool:
    """``poolHasBindingConditions``: such pools are tried after all others."""
    return any(d.binding_conditions is not None for s in pool.slices for d in s.spec.devices)


def check_slices_in_pool(slices: Sequence[ResourceSlice], key: PoolID, generation: int) -> list[ResourceSlice] | None:
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


# --- the devices of a pool, as the search walks them ----------------------------------------


def lookup_attribute(attributes: Mapping[str, V], driver: str, name: str) -> V | None:
    """``lookupAttribute``: a fully qualified attribute; a bare key in the device counts for the
    driver's own domain."""
    if name in attributes:
        return attributes[name]
    domain, slash, ident = name.partition("/")
    if not slash or domain != driver:
        return None
    return attributes.get(ident)


class DeviceWithID:
    """``deviceWithID``: one device of a usable pool, with what the search needs of its slice and pool.

    What is derived from the device is worked out when first asked and kept. Slots and plain
    attributes rather than a dataclass of ``cached_property``: a search meets every device of
    the node, and making one and first asking each property was a large part of meeting it
    (benchmarks/allocate_vs_go.py).
    """

    __slots__ = (
        "_attributes",
        "_capacities",
        "_capacity_key",
        "_counters",
        "_view",
        "device",
        "id",
        "index",
        "per_device_node",
        "pool",
        "position",
        "shared",
        "slice_",
        "views",
    )

    def __init__(
        self,
        id: DeviceID,
        device: Device,
        slice_: ResourceSlice,
        pool: Pool,
        index: int,
        *,
        consumable: bool,
        views: Shared,
    ) -> None:
        """``consumable``: whether DRAConsumableCapacity is on, without which no device is shared;
        ``views``: where its CEL view is kept (:mod:`.shared`)."""
        self.id = id
        self.views = views
        self.device = device
        self.slice_ = slice_
        self.pool = pool
        self.index = index  # in the slice's devices, for messages
        self.per_device_node = bool(slice_.spec.per_device_node_selection)
        self.position = -1  # in the allocator's order of all devices, once it has one
        # Takes several allocations (``allowMultipleAllocations`` with the gate on).
        self.shared = consumable and bool(device.allow_multiple_allocations)
        self._view: cel.DeviceInput | None = None
        self._attributes: dict[str, Mapping[str, Any] | None] | None = None
        self._counters: CounterTotals | None = None
        self._capacity_key: Hashable | None = None
        self._capacities: dict[str, cap.Capacity] | None = None

    @property
    def view(self) -> cel.DeviceInput:
        """The device as CEL sees it, built once: every claim's selectors read the same view."""
        view = self._view
        if view is None:
            view = self._view = self.views.view(self.id.driver, self.device)
        return view

    def attribute(self, name: str) -> Mapping[str, Any] | None:
        """The attribute's one-key value (``{"int": 5}``), None when the device lacks it.

        Kept per name: constraints ask it of the same device at every step of the walk. Read
        from the model, as the CEL view converts it. Callers must not change the dict.
        """
        values = self._attributes
        if values is None:
            values = self._attributes = {}
        if name not in values:
            found = lookup_attribute(self.device.attributes, self.id.driver, name)
            values[name] = None if found is None else found.as_value()
        return values[name]

    @property
    def where(self) -> str:
        return f"{slice_where(self.slice_)}: spec.devices[{self.index}]"

    @property
    def counter_totals(self) -> CounterTotals:
        """What the device consumes of each counter, summed over its ``consumesCounters`` entries."""
        if self._counters is None:
            totals: CounterTotals = {}
            for counter_set, counter, amount in _allocator_error(lambda: device_consumption(self.device, self.where)):
                totals[(counter_set, counter)] = totals.get((counter_set, counter), 0) + amount.value
            self._counters = totals
        return self._counters

    @property
    def capacity_key(self) -> Hashable:
        """What decides whether a request's share fits the device while none of it is held: the
        capacities' values when none has a request policy (a pool's devices mostly repeat them,
        so the check runs once for all of them), else the device itself."""
        key = self._capacity_key
        if key is None:
            values = []
            for name, capacity in self.device.capacity.items():
                if capacity.request_policy is not None:
                    key = self.id
                    break
                values.append((name, capacity.value))
            key = self._capacity_key = key or tuple(values)
        return key

    @property
    def capacities(self) -> dict[str, cap.Capacity]:
        if self._capacities is None:
            where = f"ResourceSlice {self.slice_.metadata.name}: device {self.device.name}: capacity"
            self._capacities = _allocator_error(lambda: cap.capacities_of(self.device.capacity, where))
        return self._capacities


def pool_devices(pool: Pool, consumable: bool, views: Shared) -> list[DeviceWithID]:
    """The pool's devices on the node in search order: slice by slice, device by device."""
    return [
        DeviceWithID(DeviceID(pool.driver, pool.name, d.name), d, s, pool, i, consumable=consumable, views=views)
        for s in pool.slices
        for i, d in enumerate(s.spec.devices)
    ]
