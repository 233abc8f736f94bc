"""``ValidateResourceSlice`` (pkg/apis/resource/validation/validation.go): the pool, node selection,
devices with their attributes, capacity, taints, counters and binding conditions, shared counters."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...apimachinery import core, meta
from ...apimachinery.field import ErrorList, Path, duplicate, invalid, required, too_long, too_many
from ...gostrings import go_len
from .. import features
from ..models import Device, DeviceAttribute, ResourceSlice, ResourceSliceSpec
from .capacity import validate_capacity
from .common import (
    MAX_ATTRIBUTE_VALUE_LENGTH,
    MAX_ATTRIBUTE_VALUES,
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_BINDING_CONDITIONS,
    MAX_COUNTER_CONSUMPTIONS,
    MAX_COUNTER_SETS,
    MAX_COUNTERS_PER_CONSUMPTION,
    MAX_COUNTERS_PER_SET,
    MAX_SLICE_DEVICES,
    MAX_SLICE_DEVICES_ADVANCED,
    MAX_TAINTS,
    metadata,
    validate_dns_label,
    validate_dns_subdomain,
    validate_driver_name,
    validate_label_key,
    validate_list,
    validate_pool_name,
    validate_qualified_name,
    validate_taint,
)

_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?\Z",
    re.ASCII,
)
_DEVICE_NODE_CHOICES = (
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` is set "
    "to true in the ResourceSlice spec"
)


def validate_resource_slice(obj: ResourceSlice, release: str = features.NEWEST) -> ErrorList:
    """``ValidateResourceSlice``; gated fields are the strategy's concern (:func:`validate`)."""
    spec, path = obj.spec, Path("spec")
    errors = meta.validate_object_meta(metadata(obj.metadata), Path("metadata"), False, release)
    errors += validate_driver_name(spec.driver, path.child("driver"), release)
    pool_path = path.child("pool")
    errors += validate_pool_name(spec.pool.name, pool_path.child("name"))
    if spec.pool.resource_slice_count <= 0:
        errors.append(
            invalid(pool_path.child("resourceSliceCount"), spec.pool.resource_slice_count, "must be greater than zero")
        )
    if spec.pool.generation < 0:
        errors.append(
            invalid(pool_path.child("generation"), spec.pool.generation, "must be greater than or equal to zero")
        )
    errors += _node_selection_errors(spec, path, release)
    if spec.shared_counters is not None and "devices" in spec.model_fields_set:  # `devices: []` is set too
        errors.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    # 1.34 has one limit; the lower one for devices with taints or counters comes with 1.35.
    advanced = features.at_least(release, "1.35") and any(map(uses_advanced_features, spec.devices))
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
        _validate_counter_set,
        path.child("sharedCounters"),
        release=release,
        key=lambda c: c.get("name", ""),
        key_field="name",
    )
    return errors


def uses_advanced_features(device: Device) -> bool:
    """Taints, counters or a list attribute: a slice holding such a device takes at most 64."""
    return bool(device.taints or device.consumes_counters) or any(
        a.ints is not None or a.bools is not None or a.strings is not None or a.versions is not None
        for a in device.attributes.values()
    )


# --- node selection -----------------------------------------------------------------------


def _node_selection_errors(spec: ResourceSliceSpec, path: Path, release: str) -> ErrorList:
    set_fields: list[str] = []
    errors = _node_name_field(spec.node_name, path, set_fields, "must be either unset or set to a non-empty string")
    if spec.node_selector is not None:
        set_fields.append("`nodeSelector`")
        errors += core.validate_node_selector(spec.node_selector, path.child("nodeSelector"), release)
        if len(spec.node_selector.node_selector_terms) != 1:
            terms = [t.model_dump(by_alias=True) for t in spec.node_selector.node_selector_terms]
            errors.append(
                invalid(
                    path.child("nodeSelector", "nodeSelectorTerms"), terms, "must have exactly one node selector term"
                )
            )
    errors += _true_or_unset("allNodes", spec.all_nodes, path, set_fields)
    errors += _true_or_unset("perDeviceNodeSelection", spec.per_device_node_selection, path, set_fields)
    choices = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    return errors + _exactly_one(path, set_fields, choices, choices + ", but multiple fields are set")


def _device_node_errors(device: Device, path: Path, per_device: bool, release: str) -> ErrorList:
    if not per_device:
        if any(f is not None for f in (device.node_name, device.node_selector, device.all_nodes)):
            detail = (
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to "
                "true in the ResourceSlice spec"
            )
            return [invalid(path, None, detail)]
        return []
    set_fields: list[str] = []
    errors = _node_name_field(device.node_name, path, set_fields, "must not be empty")
    if device.node_selector is not None:
        set_fields.append("`nodeSelector`")
        errors += core.validate_node_selector(device.node_selector, path.child("nodeSelector"), release)
    errors += _true_or_unset("allNodes", device.all_nodes, path, set_fields)
    return errors + _exactly_one(path, set_fields, _DEVICE_NODE_CHOICES, _DEVICE_NODE_CHOICES)


def _node_name_field(name: str | None, path: Path, set_fields: list[str], empty: str) -> ErrorList:
    """A ``nodeName`` of a slice or device: set when non-empty, then a DNS subdomain."""
    if name is None:
        return []
    if not name:
        return [invalid(path.child("nodeName"), "", empty)]
    set_fields.append("`nodeName`")
    return validate_dns_subdomain(name, path.child("nodeName"))


def _true_or_unset(name: str, value: bool | None, path: Path, set_fields: list[str]) -> ErrorList:
    if value is None:
        return []
    if not value:
        return [invalid(path.child(name), False, "must be either unset or set to true")]
    set_fields.append(f"`{name}`")
    return []


def _exactly_one(path: Path, set_fields: list[str], none: str, several: str) -> ErrorList:
    if not set_fields:
        return [required(path, none)]
    if len(set_fields) > 1:
        return [invalid(path, "{" + ", ".join(set_fields) + "}", several)]
    return []


# --- devices ------------------------------------------------------------------------------


def _validate_device(device: Device, path: Path, per_device: bool, release: str) -> ErrorList:
    """``validateDevice`` in its order: limits, attributes, capacity, taints, counters, node
    fields, binding conditions."""
    errors = validate_dns_label(device.name, path.child("name"))
    total = len(device.attributes) + len(device.capacity)
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        detail = f"the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
        errors.append(invalid(path, total, detail))
    values = _attribute_values(device)
    if values > MAX_ATTRIBUTE_VALUES:
        detail = f"the total number of attribute values must not exceed {MAX_ATTRIBUTE_VALUES}"
        errors.append(invalid(path, values, detail))
    for key, attribute in device.attributes.items():
        errors += validate_qualified_name(key, path.child("attributes"), release)
        errors += _validate_attribute(attribute, path.child("attributes").key(key))
    for key, capacity in device.capacity.items():
        errors += validate_qualified_name(key, path.child("capacity"), release)
        errors += validate_capacity(
            capacity, bool(device.allow_multiple_allocations), path.child("capacity").key(key), release
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
        _validate_counter_consumption,
        path.child("consumesCounters"),
        release=release,
        key=lambda c: c.get("counterSet", ""),
        key_field="counterSet",
    )
    errors += _device_node_errors(device, path, per_device, release)
    return errors + _validate_binding_parameters(
        device.binding_conditions, device.binding_failure_conditions, path, release
    )


def _validate_attribute(attribute: DeviceAttribute, path: Path) -> ErrorList:
    errors: ErrorList = []
    set_fields = [name for name, value in attribute.as_value().items() if value is not None]
    if attribute.string is not None and go_len(attribute.string) > MAX_ATTRIBUTE_VALUE_LENGTH:
        errors.append(too_long(path.child("string"), MAX_ATTRIBUTE_VALUE_LENGTH))
    if attribute.version is not None:
        errors += _validate_version(attribute.version, path.child("version"))
    for name in ("bools", "ints", "strings", "versions"):
        values = getattr(attribute, name)
        if values is not None and not values:
            errors.append(invalid(path.child(name), values, "must not be empty if specified"))
    for i, item in enumerate(attribute.strings or ()):
        if go_len(item) > MAX_ATTRIBUTE_VALUE_LENGTH:
            errors.append(too_long(path.child("strings").index(i), MAX_ATTRIBUTE_VALUE_LENGTH))
    for i, item in enumerate(attribute.versions or ()):
        errors += _validate_version(item, path.child("versions").index(i))
    if len(set_fields) != 1:
        value = "" if not set_fields else attribute.as_value()
        errors.append(invalid(path, value, "exactly one value must be specified"))
    return errors


def _validate_version(version: str, path: Path) -> ErrorList:
    errors: ErrorList = []
    if not _SEMVER.match(version):
        errors.append(invalid(path, version, "must be a string compatible with semver.org spec 2.0.0"))
    if go_len(version) > MAX_ATTRIBUTE_VALUE_LENGTH:
        errors.append(too_long(path, MAX_ATTRIBUTE_VALUE_LENGTH))
    return errors


def _attribute_values(device: Device) -> int:
    """``numEntriesDeviceAttribute``: a list value counts each item, a scalar one."""
    total = 0
    for attribute in device.attributes.values():
        items = sum(len(getattr(attribute, name) or ()) for name in ("bools", "ints", "strings", "versions"))
        total += items or 1
    return total


def _validate_binding_parameters(
    given: list[str] | None, given_failures: list[str] | None, path: Path, release: str
) -> ErrorList:
    """``validateDeviceBindingParameters``: at most 4 each, label names, no duplicates or overlap,
    and one kind only together with the other. A missing list is Go's nil slice, shown as
    ``null``; ``[]`` stays ``[]`` (json.Marshal of the bad value)."""
    conditions, failures = given or [], given_failures or []
    errors = validate_list(
        conditions,
        MAX_BINDING_CONDITIONS,
        lambda c, p: validate_label_key(c, p, release),
        path.child("bindingConditions"),
        release=release,
    )
    errors += validate_list(
        failures,
        MAX_BINDING_CONDITIONS,
        lambda c, p: validate_label_key(c, p, release),
        path.child("bindingFailureConditions"),
        release=release,
    )
    seen: set[str] = set()
    for i, condition in enumerate(conditions):
        if condition in seen:
            errors.append(duplicate(path.child("bindingConditions").index(i), condition))
        seen.add(condition)
    seen_failures: set[str] = set()
    for i, condition in enumerate(failures):
        if condition in seen_failures:
            errors.append(duplicate(path.child("bindingFailureConditions").index(i), condition))
        seen_failures.add(condition)
        if condition in seen:
            detail = "bindingFailureConditions must not overlap with bindingConditions"
            errors.append(invalid(path.child("bindingFailureConditions").index(i), condition, detail))
    if not conditions and failures:
        detail = "bindingConditions are required to use bindingFailureConditions"
        errors.append(invalid(path.child("bindingConditions"), given, detail))
    if not failures and conditions:
        detail = "bindingFailureConditions are required to use bindingConditions"
        errors.append(invalid(path.child("bindingFailureConditions"), given_failures, detail))
    return errors


# --- counters -----------------------------------------------------------------------------


def _validate_counters(counters: Any, limit: int, path: Path) -> ErrorList:
    """A counter map: required, at most ``limit`` entries (short-circuits), names DNS labels."""
    if not counters:
        return [required(path)]
    if len(counters) > limit:
        return [too_many(path, len(counters), limit)]
    errors: ErrorList = []
    for name in counters:
        errors += validate_dns_label(str(name), path)
    return errors


def _validate_named_counters(name: Any, counters: Any, limit: int, path: Path, name_field: str) -> ErrorList:
    errors = validate_dns_label(str(name), path.child(name_field)) if name else [required(path.child(name_field))]
    return errors + _validate_counters(counters, limit, path.child("counters"))


def _validate_counter_set(counter_set: Mapping[str, Any], path: Path) -> ErrorList:
    """``validateCounterSet``."""
    return _validate_named_counters(
        counter_set.get("name"), counter_set.get("counters"), MAX_COUNTERS_PER_SET, path, "name"
    )


def _validate_counter_consumption(consumption: Mapping[str, Any], path: Path) -> ErrorList:
    """``validateDeviceCounterConsumption``."""
    return _validate_named_counters(
        consumption.get("counterSet"), consumption.get("counters"), MAX_COUNTERS_PER_CONSUMPTION, path, "counterSet"
    )
