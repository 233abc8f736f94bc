"""What every release's ResourceSlice validation shares about devices
(pkg/apis/resource/validation/validation.go): the pool, node selection (slice and device, 1.33
on), attributes, binding conditions (1.34 on) and counters, each release's wording where it
differs. The spec and device functions of each generation are in :mod:`.resourceslice` (1.35 on),
:mod:`.resourceslice_134` (1.33, 1.34) and :mod:`.resourceslice_132` (1.31, 1.32: under ``basic``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ...apimachinery import core
from ...apimachinery.field import (
    ErrorList,
    Path,
    duplicate,
    invalid,
    not_found,
    required,
    too_long,
    too_long_max_length,
    too_many,
)
from ...gostrings import go_len
from .. import features
from ..models import Device, DeviceAttribute, DeviceCapacity, ResourcePool, ResourceSliceSpec
from .capacity import amount
from .common import (
    MAX_ATTRIBUTE_VALUE_LENGTH,
    MAX_BINDING_CONDITIONS,
    MAX_COUNTERS_PER_CONSUMPTION,
    MAX_COUNTERS_PER_SET,
    map_paths,
    validate_dns_label,
    validate_dns_subdomain,
    validate_label_key,
    validate_list,
    validate_pool_name,
    validate_qualified_name,
)

MAX_KEY_LENGTH = 63 + 1 + 32  # attributeAndCapacityMaxKeyLength: domain/ID
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


def validate_pool(pool: ResourcePool, path: Path, release: str) -> ErrorList:
    """``validateResourcePool``."""
    errors = validate_pool_name(pool.name, path.child("name"), release)
    if pool.resource_slice_count <= 0:
        errors.append(invalid(path.child("resourceSliceCount"), pool.resource_slice_count, "must be greater than zero"))
    if pool.generation < 0:
        errors.append(invalid(path.child("generation"), pool.generation, "must be greater than or equal to zero"))
    return errors


def validate_attributes_and_capacity(
    device: Device,
    path: Path,
    release: str,
    capacity: Callable[[DeviceCapacity, Path], ErrorList] = lambda _c, _p: [],
) -> ErrorList:
    """The two ``validateMap`` calls of ``validateDevice``: names and values, at each release's paths."""
    errors: ErrorList = []
    for key, attribute in device.attributes.items():
        key_path, item_path = map_paths(path.child("attributes"), key, MAX_KEY_LENGTH, release)
        errors += validate_qualified_name(key, key_path, release)
        errors += validate_attribute(attribute, item_path, release)
    for key, value in device.capacity.items():
        key_path, item_path = map_paths(path.child("capacity"), key, MAX_KEY_LENGTH, release)
        errors += validate_qualified_name(key, key_path, release)
        errors += capacity(value, item_path)
    return errors


def validate_counter_map(counters: Mapping[str, Any], path: Path, release: str) -> ErrorList:
    """``validateMap`` of a counter set or consumption (1.33, 1.34): names DNS labels, no limit."""
    errors: ErrorList = []
    for name in counters:
        key_path, _ = map_paths(path, str(name), 63, release)
        errors += validate_dns_label(str(name), key_path)
    return errors


def validate_node_allocatable(device: Device, path: Path) -> ErrorList:
    """1.36's ``nodeAllocatableResourceMappings`` and 1.37's ``nodeAllocatableResources``
    (DRANodeAllocatableResources; kubernetes v1.36.3 and v1.37.2 validation.go, the handwritten
    part): node resources a device's capacity stands for."""
    errors: ErrorList = []
    for name, old in (device.node_allocatable_resource_mappings or {}).items():
        key = path.child("nodeAllocatableResourceMappings").key(name)
        if not core.is_native_resource(name):
            errors.append(invalid(key, name, "must be a node allocatable resource name"))
        multiplier, capacity_key = old.get("allocationMultiplier"), old.get("capacityKey")
        if multiplier is None and capacity_key is None:
            errors.append(invalid(key, "", "at least one of allocationMultiplier or capacityKey must be set"))
            continue
        errors += _positive(multiplier, key.child("allocationMultiplier"), "must be positive")
        errors += _capacity_key(capacity_key, device, key.child("capacityKey"))
    for name, resource in (device.node_allocatable_resources or {}).items():
        key = path.child("nodeAllocatableResources").key(name)
        if not core.is_node_allocatable_resource_name(name):
            errors.append(invalid(key, name, "must be a node allocatable resource name"))
        mapping, overhead = resource.get("mapping"), resource.get("overhead")
        if mapping is None and overhead is None:
            errors.append(required(key, "at least one of mapping or overhead must be set"))
        if mapping is not None:
            errors += _mapping(mapping, device, key.child("mapping"))
        if overhead is not None:
            errors += _overhead(overhead, key.child("overhead"))
    return errors


def _mapping(mapping: Mapping[str, Any], device: Device, path: Path) -> ErrorList:
    capacity_key, multiplier = mapping.get("capacityKey"), mapping.get("capacityMultiplier")
    errors: ErrorList = []
    if capacity_key is not None:
        errors += _capacity_key(capacity_key, device, path.child("capacityKey"))
        if multiplier is None:
            detail = "capacityMultiplier is required when capacityKey is set"
            errors.append(required(path.child("capacityMultiplier"), detail))
        else:
            errors += _positive(multiplier, path.child("capacityMultiplier"), "must be positive")
    errors += _positive(mapping.get("deviceMultiplier"), path.child("deviceMultiplier"), "must be positive")
    if multiplier is not None and capacity_key is None:
        errors.append(required(path.child("capacityKey"), "capacityKey is required when capacityMultiplier is set"))
    return errors


def _overhead(overhead: Mapping[str, Any], path: Path) -> ErrorList:
    per_pod, per_container = overhead.get("perPod"), overhead.get("perContainer")
    if per_pod is None and per_container is None:
        return [invalid(path, "", "at least one of perPod or perContainer must be set")]
    errors = _positive(per_pod, path.child("perPod"), "must be non-negative", strict=False)
    return errors + _positive(per_container, path.child("perContainer"), "must be non-negative", strict=False)


def _capacity_key(key: str | None, device: Device, path: Path) -> ErrorList:
    if key is None:
        return []
    if key == "":
        return [invalid(path, "", "capacityKey must not be an empty string")]
    return [] if key in device.capacity else [not_found(path, key)]


def _positive(quantity: str | None, path: Path, detail: str, strict: bool = True) -> ErrorList:
    """A quantity above zero (``strict``) or at least zero, shown as ``Quantity.String()`` says it."""
    value = amount(quantity) if quantity is not None else None
    if value is None:
        return []
    sign = value.quantity.value.numerator
    return [invalid(path, str(value), detail)] if sign < 0 or (strict and sign == 0) else []


# --- node selection -----------------------------------------------------------------------


def node_selection_errors(spec: ResourceSliceSpec, path: Path, release: str) -> ErrorList:
    """A slice's node selection from 1.33 (pointers: unset, or set to a non-empty name, or true)."""
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


def device_node_errors(device: Device, path: Path, per_device: bool, release: str) -> ErrorList:
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


def validate_attribute(attribute: DeviceAttribute, path: Path, release: str) -> ErrorList:
    """``validateDeviceAttribute``: lengths and formats of each value, then exactly one value: none is
    required up to 1.35 and invalid from 1.36; more than one is "exactly one field" in 1.31."""
    errors: ErrorList = []
    set_fields = [name for name, value in attribute.as_value().items() if value is not None]
    if attribute.string is not None and go_len(attribute.string) > MAX_ATTRIBUTE_VALUE_LENGTH:
        errors.append(too_long_max_length(path.child("string"), MAX_ATTRIBUTE_VALUE_LENGTH, release))
    if attribute.version is not None:
        errors += _validate_version(attribute.version, path.child("version"), release)
    for name in ("bools", "ints", "strings", "versions"):
        values = getattr(attribute, name)
        if values is not None and not values:
            errors.append(invalid(path.child(name), values, "must not be empty if specified"))
    for i, item in enumerate(attribute.strings or ()):
        if go_len(item) > MAX_ATTRIBUTE_VALUE_LENGTH:
            errors.append(too_long(path.child("strings").index(i), MAX_ATTRIBUTE_VALUE_LENGTH, release))
    for i, item in enumerate(attribute.versions or ()):
        errors += _validate_version(item, path.child("versions").index(i), release)
    if not set_fields:
        detail = "exactly one value must be specified"
        errors.append(invalid(path, "", detail) if features.at_least(release, "1.36") else required(path, detail))
    elif len(set_fields) > 1:
        value = "field" if not features.at_least(release, "1.32") else "value"
        errors.append(invalid(path, attribute.as_value(), f"exactly one {value} must be specified"))
    return errors


def _validate_version(version: str, path: Path, release: str) -> ErrorList:
    errors: ErrorList = []
    if not _SEMVER.match(version):
        errors.append(invalid(path, version, "must be a string compatible with semver.org spec 2.0.0"))
    if go_len(version) > MAX_ATTRIBUTE_VALUE_LENGTH:
        errors.append(too_long_max_length(path, MAX_ATTRIBUTE_VALUE_LENGTH, release))
    return errors


def attribute_values(device: Device) -> int:
    """``numEntriesDeviceAttribute``: a list value counts each item, a scalar one."""
    total = 0
    for attribute in device.attributes.values():
        items = sum(len(getattr(attribute, name) or ()) for name in ("bools", "ints", "strings", "versions"))
        total += items or 1
    return total


def validate_binding_parameters(
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


# --- counters (1.35 on) ----------------------------------------------------------------------


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


def validate_counter_set(counter_set: Mapping[str, Any], path: Path) -> ErrorList:
    """``validateCounterSet``."""
    return _validate_named_counters(
        counter_set.get("name"), counter_set.get("counters"), MAX_COUNTERS_PER_SET, path, "name"
    )


def validate_counter_consumption(consumption: Mapping[str, Any], path: Path) -> ErrorList:
    """``validateDeviceCounterConsumption``."""
    return _validate_named_counters(
        consumption.get("counterSet"), consumption.get("counters"), MAX_COUNTERS_PER_CONSUMPTION, path, "counterSet"
    )
