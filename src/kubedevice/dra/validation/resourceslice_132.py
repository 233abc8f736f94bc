"""``ValidateResourceSlice`` as 1.31 and 1.32 run it (kubernetes v1.31.14 and v1.32.13
validation.go), whose internal type keeps a device's attributes and capacity under ``basic``, so
every error about them is at ``spec.devices[i].basic``: a device needs ``basic``; a slice is for
exactly one of ``nodeName``, ``nodeSelector`` or ``allNodes`` (plain strings and booleans, whose
zero is unset); there are no counters, taints or per-device node fields."""

from __future__ import annotations

from ...apimachinery import core, meta
from ...apimachinery.field import ErrorList, Path, each_invalid, invalid, required
from .. import features
from ..models import Device, ResourceSlice, ResourceSliceSpec
from .common import (
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_SLICE_DEVICES,
    metadata,
    validate_dns_label,
    validate_driver_name,
    validate_list,
)
from .devices import validate_attributes_and_capacity, validate_pool

_CHOICES = "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required"


def validate_resource_slice_132(obj: ResourceSlice, release: str) -> ErrorList:
    spec, path = obj.spec, Path("spec")
    errors = meta.validate_object_meta(metadata(obj.metadata), Path("metadata"), False, release)
    errors += validate_driver_name(spec.driver, path.child("driver"), release)
    errors += validate_pool(spec.pool, path.child("pool"), release)
    errors += _node_selection(spec, path, release)
    return errors + validate_list(
        spec.devices,
        MAX_SLICE_DEVICES,
        lambda d, p: _validate_device(d, p, release),
        path.child("devices"),
        release=release,
        key=lambda d: d.name,
        key_field="name",
    )


def _node_selection(spec: ResourceSliceSpec, path: Path, release: str) -> ErrorList:
    errors: ErrorList = []
    chosen = 0
    if spec.node_name:
        chosen += 1
        name_errors = meta.name_is_dns_subdomain(spec.node_name, False)  # validateNodeName
        errors += each_invalid(path.child("nodeName"), spec.node_name, name_errors)
    if spec.node_selector is not None:
        chosen += 1
        errors += core.validate_node_selector(spec.node_selector, path.child("nodeSelector"), release)
        if len(spec.node_selector.node_selector_terms) != 1:
            terms = [t.model_dump(by_alias=True) for t in spec.node_selector.node_selector_terms]
            term = "node selector term" if features.at_least(release, "1.32") else "selector term"
            detail = f"must have exactly one {term}"
            errors.append(invalid(path.child("nodeSelector", "nodeSelectorTerms"), terms, detail))
    if spec.all_nodes:
        chosen += 1
    if chosen == 0:
        errors.append(required(path, _CHOICES))
    elif chosen > 1:  # 1.31 shows the whole spec as the bad value, 1.32 nil
        shown = spec.model_dump(by_alias=True, exclude_none=True) if not features.at_least(release, "1.32") else None
        errors.append(invalid(path, shown, _CHOICES))
    return errors


def _validate_device(device: Device, path: Path, release: str) -> ErrorList:
    """``validateDevice`` and ``validateBasicDevice``: the name, then ``basic``'s attributes and
    capacity (any quantity is valid) and their number."""
    errors = validate_dns_label(device.name, path.child("name"))
    basic = path.child("basic")
    if device.basic_missing:
        return [*errors, required(basic)]
    errors += validate_attributes_and_capacity(device, basic, release)
    total = len(device.attributes) + len(device.capacity)
    if total > MAX_ATTRIBUTES_AND_CAPACITIES:
        detail = f"the total number of attributes and capacities must not exceed {MAX_ATTRIBUTES_AND_CAPACITIES}"
        errors.append(invalid(basic, total, detail))
    return errors
