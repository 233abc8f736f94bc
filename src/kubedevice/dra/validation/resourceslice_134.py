"""``ValidateResourceSlice`` as 1.33 and 1.34 run it (kubernetes v1.33.13 and v1.34.4
validation.go): a slice may hold devices and the counter sets they consume together, each
consumption must name a set and counters of this slice, counters are limited per device and per
slice rather than per set, a device takes at most 4 taints, and a map key's errors are at
``map[key]``. 1.33 has no binding conditions or request policies: its decoder refuses them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...apimachinery import meta
from ...apimachinery.field import ErrorList, Path, invalid, required
from ..models import CounterSet, Device, ResourceSlice
from .capacity import validate_capacity
from .common import (
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_SLICE_DEVICES,
    metadata,
    validate_dns_label,
    validate_driver_name,
    validate_list,
    validate_taint,
)
from .devices import (
    device_node_errors,
    node_selection_errors,
    validate_attributes_and_capacity,
    validate_binding_parameters,
    validate_counter_map,
    validate_pool,
)

MAX_TAINTS = 4  # DeviceTaintsMaxLength, 16 from 1.35
MAX_COUNTERS_PER_DEVICE = 32  # ResourceSliceMaxCountersPerDevice
MAX_DEVICE_COUNTERS_PER_SLICE = 1024  # ResourceSliceMaxDeviceCountersPerSlice
MAX_SHARED_COUNTERS = 32  # ResourceSliceMaxSharedCounters


def validate_resource_slice_134(obj: ResourceSlice, release: str) -> ErrorList:
    spec, path = obj.spec, Path("spec")
    errors = meta.validate_object_meta(metadata(obj.metadata), Path("metadata"), False, release)
    errors += validate_driver_name(spec.driver, path.child("driver"), release)
    errors += validate_pool(spec.pool, path.child("pool"), release)
    errors += node_selection_errors(spec, path, release)
    counter_sets = spec.shared_counters or []
    names = {str(s.get("name", "")): set(s.get("counters") or {}) for s in counter_sets}
    per_device = bool(spec.per_device_node_selection)
    errors += validate_list(
        spec.devices,
        MAX_SLICE_DEVICES,
        lambda d, p: _validate_device(d, p, names, per_device, release),
        path.child("devices"),
        release=release,
        key=lambda d: d.name,
        key_field="name",
    )
    consumed = sum(len(c.get("counters") or {}) for d in spec.devices for c in d.consumes_counters or [])
    if consumed > MAX_DEVICE_COUNTERS_PER_SLICE:
        detail = f"the total number of counters in devices must not exceed {MAX_DEVICE_COUNTERS_PER_SLICE}"
        errors.append(invalid(path.child("devices"), consumed, detail))
    shared = sum(len(s.get("counters") or {}) for s in counter_sets)
    if shared > MAX_SHARED_COUNTERS:
        detail = f"the total number of shared counters must not exceed {MAX_SHARED_COUNTERS}"
        errors.append(invalid(path.child("sharedCounters"), shared, detail))
    return errors + validate_list(
        counter_sets,
        -1,
        lambda s, p: _validate_counter_set(s, p, release),
        path.child("sharedCounters"),
        release=release,
        key=lambda s: s.get("name", ""),
        key_field="name",
    )


def _validate_counter_set(counter_set: CounterSet, path: Path, release: str) -> ErrorList:
    name = str(counter_set.get("name") or "")
    errors = validate_dns_label(name, path.child("name")) if name else [required(path.child("name"))]
    counters = counter_set.get("counters") or {}
    if not counters:
        return [*errors, required(path.child("counters"))]
    return errors + validate_counter_map(counters, path.child("counters"), release)


def _validate_device(
    device: Device, path: Path, shared: Mapping[str, set[str]], per_device: bool, release: str
) -> ErrorList:
    """``validateDevice``: limits, attributes, capacity, taints, counters and their references, node
    fields, binding conditions."""
    errors = validate_dns_label(device.name, path.child("name"))
    total = len(device.attributes) + len(device.capacity)
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        detail = f"the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
        errors.append(invalid(path, total, detail))
    multiple = bool(device.allow_multiple_allocations)
    errors += validate_attributes_and_capacity(
        device, path, release, lambda capacity, p: validate_capacity(capacity, multiple, p, release)
    )
    errors += validate_list(
        device.taints or [],
        MAX_TAINTS,
        lambda t, p: validate_taint(t, p, release),
        path.child("taints"),
        release=release,
    )
    consumptions = device.consumes_counters or []
    errors += validate_list(
        consumptions,
        -1,
        lambda c, p: _validate_consumption(c, p, release),
        path.child("consumesCounters"),
        release=release,
        key=lambda c: c.get("counterSet", ""),
        key_field="counterSet",
    )
    consumed = sum(len(c.get("counters") or {}) for c in consumptions)
    if consumed > MAX_COUNTERS_PER_DEVICE:
        detail = f"the total number of counters must not exceed {MAX_COUNTERS_PER_DEVICE}"
        errors.append(invalid(path, consumed, detail))
    errors += _references(consumptions, shared, path.child("consumesCounters"))
    errors += device_node_errors(device, path, per_device, release)
    conditions, failures = device.binding_conditions, device.binding_failure_conditions
    return errors + validate_binding_parameters(conditions, failures, path, release)


def _validate_consumption(consumption: Mapping[str, Any], path: Path, release: str) -> ErrorList:
    errors = [] if consumption.get("counterSet") else [required(path.child("counterSet"))]
    counters = consumption.get("counters") or {}
    if not counters:
        return [*errors, required(path.child("counters"))]
    return errors + validate_counter_map(counters, path.child("counters"), release)


def _references(consumptions: Sequence[Mapping[str, Any]], shared: Mapping[str, set[str]], path: Path) -> ErrorList:
    """Each consumption names a counter set of this slice, and counters of that set."""
    errors: ErrorList = []
    for i, consumption in enumerate(consumptions):
        name = str(consumption.get("counterSet", ""))
        if name not in shared:
            detail = "must reference a counterSet defined in the ResourceSlice sharedCounters"
            errors.append(invalid(path.index(i).child("counterSet"), name, detail))
            continue
        for counter in consumption.get("counters") or {}:
            if counter not in shared[name]:
                detail = "must reference a counter defined in the ResourceSlice sharedCounters"
                errors.append(invalid(path.index(i).child("counters"), counter, detail))
    return errors
