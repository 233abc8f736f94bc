"""``ValidateResourceSlice`` (pkg/apis/resource/validation/validation.go): the pool, node selection,
devices with their attributes, capacity, taints, counters and binding conditions, shared counters.

This module is 1.35 on, where a slice holds devices or shared counters, never both; 1.33 and 1.34
(:mod:`.resourceslice_134`) let devices consume the slice's own counters, and 1.31 and 1.32
(:mod:`.resourceslice_132`) keep a device's fields under ``basic``.
"""

from __future__ import annotations

from ...apimachinery import meta
from ...apimachinery.field import ErrorList, Path, invalid
from .. import features
from ..models import Device, ResourceSlice
from .capacity import validate_capacity
from .common import (
    MAX_ATTRIBUTE_VALUES,
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_COUNTER_CONSUMPTIONS,
    MAX_COUNTER_SETS,
    MAX_SLICE_DEVICES,
    MAX_SLICE_DEVICES_ADVANCED,
    MAX_TAINTS,
    metadata,
    validate_dns_label,
    validate_driver_name,
    validate_list,
    validate_taint,
)
from .devices import (
    attribute_values,
    device_node_errors,
    node_selection_errors,
    validate_attributes_and_capacity,
    validate_binding_parameters,
    validate_counter_consumption,
    validate_counter_set,
    validate_node_allocatable,
    validate_pool,
)
from .resourceslice_132 import validate_resource_slice_132
from .resourceslice_134 import validate_resource_slice_134


def validate_resource_slice(obj: ResourceSlice, release: str = features.NEWEST) -> ErrorList:
    """``ValidateResourceSlice`` of the release; gated fields are the strategy's concern (:func:`validate`)."""
    if not features.at_least(release, "1.33"):
        return validate_resource_slice_132(obj, release)
    if not features.at_least(release, "1.35"):
        return validate_resource_slice_134(obj, release)
    spec, path = obj.spec, Path("spec")
    errors = meta.validate_object_meta(metadata(obj.metadata), Path("metadata"), False, release)
    errors += validate_driver_name(spec.driver, path.child("driver"), release)
    errors += validate_pool(spec.pool, path.child("pool"), release)
    errors += node_selection_errors(spec, path, release)
    if spec.shared_counters is not None and "devices" in spec.model_fields_set:  # `devices: []` is set too
        errors.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    advanced = any(map(uses_advanced_features, spec.devices))
    per_device = bool(spec.per_device_node_selection)
    errors += validate_list(
        spec.devices,
        MAX_SLICE_DEVICES_ADVANCED if advanced else MAX_SLICE_DEVICES,
        lambda d, p: _validate_device(d, p, per_device, release),
        path.child("devices"),
        release=release,
        key=lambda d: d.name,
        key_field="name",
    )
    errors += validate_list(
        spec.shared_counters or [],
        MAX_COUNTER_SETS,
        validate_counter_set,
        path.child("sharedCounters"),
        release=release,
        key=lambda c: c.get("name", ""),
        key_field="name",
    )
    return errors


def uses_advanced_features(device: Device) -> bool:
    """Taints, counters or a list attribute: a slice holding such a device takes at most 64 (1.35 on)."""
    return bool(device.taints or device.consumes_counters) or any(
        a.ints is not None or a.bools is not None or a.strings is not None or a.versions is not None
        for a in device.attributes.values()
    )


def _validate_device(device: Device, path: Path, per_device: bool, release: str) -> ErrorList:
    """``validateDevice`` in its order: limits, attributes, capacity, taints, counters, node
    fields, binding conditions, node-allocatable resources."""
    errors = validate_dns_label(device.name, path.child("name"))
    total = len(device.attributes) + len(device.capacity)
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        detail = f"the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
        errors.append(invalid(path, total, detail))
    values = attribute_values(device)
    if values > MAX_ATTRIBUTE_VALUES:
        detail = f"the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}"
        errors.append(invalid(path, values, detail))
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
    errors += validate_list(
        device.consumes_counters or [],
        MAX_COUNTER_CONSUMPTIONS,
        validate_counter_consumption,
        path.child("consumesCounters"),
        release=release,
        key=lambda c: c.get("counterSet", ""),
        key_field="counterSet",
    )
    errors += device_node_errors(device, path, per_device, release)
    errors += validate_binding_parameters(device.binding_conditions, device.binding_failure_conditions, path, release)
    return errors + validate_node_allocatable(device, path)
