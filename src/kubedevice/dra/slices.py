"""ResourceSlices that describe the devices a kubedevice config discovers on a node.

A DRA driver publishes its node's devices as ResourceSlices; this builds the same objects
from kubedevice's discovery so that DeviceClass selectors can be written, validated and
explained against real hardware before any driver runs. Device IDs become DNS-label device
names (the original ID is kept in the ``id`` attribute); attributes the discovery provides
(vendor/device IDs, serial, ...) are added, and NUMA placement becomes ``numaNode``.
An unhealthy device is published with the taint ``<driver>/unhealthy`` (the effect the
``dra:`` section chooses, ``NoSchedule`` by default), or left out when taints are off.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..device import Device
from .models import (
    GROUP,
    DeviceAttribute,
    DeviceCapacity,
    ObjectMeta,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from .models import Device as SliceDevice
from .validation import (
    MAX_ATTRIBUTE_VALUE_LENGTH,
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_SLICE_DEVICES,
    MAX_SLICE_DEVICES_ADVANCED,
    dns1123_label_messages,
    uses_advanced_features,
)

ResourceInput = tuple[str, Sequence[Device], Mapping[str, Mapping[str, Mapping[str, Any]]]]
_ATTRIBUTE_KEYS = frozenset({"int", "bool", "string", "version", "ints", "bools", "strings", "versions"})
_CAPACITY_KEY = "quantity"
_NOT_LABEL = re.compile(r"[^a-z0-9-]+")
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]+")
_LABEL_MAX = 63
_SUBDOMAIN_MAX = 253
DEFAULT_TAINT_EFFECT = "NoSchedule"


class SliceError(ValueError):
    """Discovered data that cannot be expressed as a ResourceSlice."""


def device_name(device_id: str, prefix: str = "") -> str:
    """A DNS label for a device ID (after ``prefix-``): lower-cased, other characters become ``-``.

    IDs that change under this mapping, or are too long, get a short hash of the original
    so that ``0000:3b:00.0`` and ``0000-3b-00-0`` cannot collide.
    """
    wanted = f"{prefix}-{device_id}" if prefix else device_id
    name = _NOT_LABEL.sub("-", wanted.lower()).strip("-") or "device"
    if name == wanted and not dns1123_label_messages(name):
        return name
    digest = hashlib.sha256(wanted.encode()).hexdigest()[:8]
    return f"{name[: _LABEL_MAX - 9].rstrip('-')}-{digest}"


def attribute_name(name: str) -> str:
    """A C identifier of at most 32 characters (``vendor-id`` → ``vendor_id``), domain kept."""
    domain, slash, ident = name.rpartition("/")
    ident = _NOT_IDENTIFIER.sub("_", ident).strip("_") or "attribute"
    if ident[0].isdigit():
        ident = "_" + ident
    return f"{domain}{slash}{ident[:32]}"


def _standard_attributes(resource: str, device: Device) -> dict[str, DeviceAttribute]:
    attributes = {"id": DeviceAttribute(string=device.id[:64]), "resource": DeviceAttribute(string=resource[:64])}
    if len(device.numa_nodes) == 1:
        attributes["numaNode"] = DeviceAttribute.model_validate({"int": device.numa_nodes[0]})
    if device.group:
        attributes["group"] = DeviceAttribute(string=device.group[:64])
    return attributes


def _extra(
    device: Device, extra: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, DeviceAttribute], dict[str, DeviceCapacity]]:
    attributes: dict[str, DeviceAttribute] = {}
    capacity: dict[str, DeviceCapacity] = {}
    for raw_name, value in extra.items():
        name = attribute_name(raw_name)
        keys = set(value)
        if keys == {_CAPACITY_KEY}:
            capacity[name] = DeviceCapacity(value=str(value[_CAPACITY_KEY]))
        elif len(keys) == 1 and keys <= _ATTRIBUTE_KEYS:
            attributes[name] = DeviceAttribute.model_validate(_shortened(value))
        else:
            raise SliceError(
                f"device {device.id}: attribute {raw_name!r} must have one key of "
                f"{sorted(_ATTRIBUTE_KEYS)} or 'quantity'"
            )
    return attributes, capacity


def _shortened(value: Mapping[str, Any]) -> Mapping[str, Any]:
    """Discovered strings (a long device path) cut to the API's 64 characters, like ``id``."""
    if "string" in value and isinstance(value["string"], str):
        return {"string": value["string"][:MAX_ATTRIBUTE_VALUE_LENGTH]}
    if "strings" in value and isinstance(value["strings"], list):
        return {"strings": [s[:MAX_ATTRIBUTE_VALUE_LENGTH] if isinstance(s, str) else s for s in value["strings"]]}
    return value


def _slice_device(resource: str, prefix: str, device: Device, extra: Mapping[str, Mapping[str, Any]]) -> SliceDevice:
    attributes = _standard_attributes(resource, device)
    more_attributes, capacity = _extra(device, extra)
    attributes.update(more_attributes)
    if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
        raise SliceError(f"device {device.id}: more than {MAX_ATTRIBUTES_AND_CAPACITIES} attributes and capacities")
    return SliceDevice(name=device_name(device.id, prefix), attributes=attributes, capacity=capacity)


def slice_name(node: str, driver: str, index: int) -> str:
    """``<node>-<driver>-<index>``, a DNS subdomain of at most 253 characters."""
    suffix = f"-{_NOT_LABEL.sub('-', driver.lower()).strip('-')}-{index}"
    return node[: _SUBDOMAIN_MAX - len(suffix)] + suffix


def unhealthy_taint(driver: str, effect: str) -> dict[str, str]:
    """The taint of an unhealthy device: a key in the driver's own domain, so a toleration can
    name exactly this driver's health (``value`` stays empty; ``timeAdded`` is the server's)."""
    return {"key": f"{driver}/unhealthy", "effect": effect}


def slices_for(
    driver: str, node: str, resources: Sequence[ResourceInput], taint_effect: str | None = DEFAULT_TAINT_EFFECT
) -> list[ResourceSlice]:
    """The ResourceSlices (one pool named after the node) describing the devices.

    ``resources`` holds, per resource, its name, its devices and per-device extra attributes
    keyed by device ID then attribute name, each value a one-key dict as in the API
    (``{"string": "10de"}``) or ``{"quantity": "16Gi"}`` for a capacity. An unhealthy device
    carries :func:`unhealthy_taint` with ``taint_effect``, or is left out if that is None.
    Devices are split over as many slices as the API's limit requires: 128 per slice, or 64
    when any device of the pool has a taint or a list attribute.
    """
    devices: list[SliceDevice] = []
    seen: dict[str, str] = {}
    for resource, resource_devices, extra in resources:
        # Several resources often number their devices alike ("0", "1"): keep names apart.
        prefix = resource.rpartition("/")[2] if len(resources) > 1 else ""
        for device in resource_devices:
            if not device.healthy and taint_effect is None:
                continue
            entry = _slice_device(resource, prefix, device, extra.get(device.id, {}))
            if not device.healthy:
                entry.taints = [unhealthy_taint(driver, str(taint_effect))]
            if entry.name in seen:
                raise SliceError(
                    f"devices {seen[entry.name]!r} and {device.id!r} both map to device name {entry.name!r}"
                )
            seen[entry.name] = device.id
            devices.append(entry)
    size = MAX_SLICE_DEVICES_ADVANCED if any(map(uses_advanced_features, devices)) else MAX_SLICE_DEVICES
    chunks = [devices[i : i + size] for i in range(0, len(devices), size)] or [[]]
    return [
        ResourceSlice(
            api_version=f"{GROUP}/v1",
            metadata=ObjectMeta(name=slice_name(node, driver, i)),
            spec=ResourceSliceSpec(
                driver=driver,
                pool=ResourcePool(name=node, generation=0, resource_slice_count=len(chunks)),
                node_name=node,
                devices=chunk,
            ),
        )
        for i, chunk in enumerate(chunks)
    ]
