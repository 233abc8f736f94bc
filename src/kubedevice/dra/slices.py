"""ResourceSlices that describe the devices a kubedevice config discovers on a node.

A DRA driver publishes its node's devices as ResourceSlices; this builds the same objects
from kubedevice's discovery so that DeviceClass selectors can be written, validated and
explained against real hardware before any driver runs. Device IDs become DNS-label device
names (the original ID is kept in the ``id`` attribute); attributes the discovery provides
(vendor/device IDs, serial, ...) are added, and NUMA placement becomes ``numaNode``.
An unhealthy device is published with the taint ``<driver>/unhealthy`` (the effect the
``dra:`` section chooses, ``NoSchedule`` by default), or left out when taints are off.

A resource with ``replicas: N`` is published as its N replicas (``sharing: replicas``, each an
ordinary device), or (``sharing: capacity``) as one device per physical device that allows
multiple allocations and has a consumable capacity ``replicas`` of N: each claim takes one unit
unless its request asks for more (``capacity.requests``), as consumable capacity (KEP-5075)
lets the scheduler share one device, and a claim never gets two "copies" of the same device.
With ``sharing: counters`` (partitionable devices, KEP-4815) each physical device is published
whole and as its N replicas, all drawing on one counter set of N ``replicas`` (the whole device
takes N, a replica 1), so a claim gets the whole device or a share of it, never both at once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ..device import Device, Health
from ..errors import KubedeviceError
from .models import (
    GROUP,
    CounterSet,
    DeviceAttribute,
    DeviceCapacity,
    DeviceTaint,
    ObjectMeta,
    ResourcePool,
    ResourceSlice,
    ResourceSliceSpec,
)
from .models import Device as SliceDevice
from .validation import (
    MAX_ATTRIBUTE_VALUE_LENGTH,
    MAX_ATTRIBUTES_AND_CAPACITIES,
    MAX_COUNTER_SETS,
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
Sharing = Literal["replicas", "capacity", "counters"]
REPLICAS_CAPACITY = "replicas"
"""The consumable capacity of a device shared as capacity: how many replicas it stands for."""
REPLICAS_COUNTER = "replicas"
"""The counter of a physical device's counter set (``sharing: counters``)."""
_REPLICA_ATTRIBUTE = "replica"


class SliceError(KubedeviceError, ValueError):
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
        kinds = set(value) - {_CAPACITY_KEY}
        if not value or len(kinds) > 1 or not kinds <= _ATTRIBUTE_KEYS:
            raise SliceError(
                f"device {device.id}: attribute {raw_name!r} must have one key of "
                f"{sorted(_ATTRIBUTE_KEYS)}, or 'quantity', or one of each"
            )
        if _CAPACITY_KEY in value:
            capacity[name] = DeviceCapacity(value=str(value[_CAPACITY_KEY]))
        for kind in kinds:  # an attribute and a capacity may share a name, as in the API
            attributes[name] = DeviceAttribute.model_validate(_shortened({kind: value[kind]}))
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


@dataclass(frozen=True, slots=True)
class Published:
    """One device as the slices list it: ``device`` is what they describe, ``granted`` the
    plugin's device whose grant a claim on it gets (for a device shared as capacity, its first
    replica: every replica grants the same physical device), ``replicas`` the capacity (0: none)."""

    device: Device
    granted: Device
    replicas: int = 0
    counter_set: str | None = None
    """``sharing: counters``: the physical device whose counter set this device draws on ``consumes`` of."""
    consumes: int = 0


def published(devices: Sequence[Device], sharing: Sharing = "replicas") -> list[Published]:
    """The devices of one resource as published with ``sharing`` (replicas have ``group`` set)."""
    if sharing == "replicas":
        return [Published(d, d) for d in devices]
    groups: dict[str, list[Device]] = {}
    order: list[Device | str] = []  # a device, or the group standing for its replicas
    for device in devices:
        if device.group is None:
            order.append(device)
            continue
        if device.group not in groups:
            groups[device.group] = []
            order.append(device.group)
        groups[device.group].append(device)
    result: list[Published] = []
    for item in order:
        if isinstance(item, Device):
            result.append(Published(item, item))
        elif sharing == "capacity":
            result.append(Published(_whole(item, groups[item]), groups[item][0], replicas=len(groups[item])))
        else:
            members = groups[item]
            result.append(Published(_whole(item, members), members[0], counter_set=item, consumes=len(members)))
            result.extend(Published(m, m, counter_set=item, consumes=1) for m in members)
    return result


def _whole(group: str, replicas: list[Device]) -> Device:
    """A physical device as one device: unhealthy if any replica is (they share one health)."""
    health = next((r.health for r in replicas if not r.healthy), Health.HEALTHY)
    return replace(replicas[0], id=group, health=health, group=None)


def _replica_capacity(count: int) -> DeviceCapacity:
    """Whole units, one by default (a request without ``capacity.requests`` takes one replica)."""
    return DeviceCapacity(
        value=str(count), request_policy={"default": "1", "validRange": {"min": "1", "max": str(count), "step": "1"}}
    )


def _shared_entry(entry: SliceDevice, shown: Published, prefix: str) -> SliceDevice:
    """The slice device of a device standing for replicas: its capacity, or what it consumes."""
    if shown.granted is not shown.device:  # the whole physical device: no single replica's index
        entry.attributes.pop(_REPLICA_ATTRIBUTE, None)
    if shown.replicas:
        entry.capacity[REPLICAS_CAPACITY] = _replica_capacity(shown.replicas)
        entry.allow_multiple_allocations = True
    if shown.counter_set is not None:
        entry.consumes_counters = [
            {
                "counterSet": device_name(shown.counter_set, prefix),
                "counters": {REPLICAS_COUNTER: {"value": str(shown.consumes)}},
            }
        ]
    return entry


def _counter_sets(shown: Sequence[Published], prefix: str) -> list[CounterSet]:
    """One counter set per physical device, named as its whole device, holding its replica count."""
    return [
        {"name": device_name(p.counter_set, prefix), "counters": {REPLICAS_COUNTER: {"value": str(p.consumes)}}}
        for p in shown
        if p.counter_set is not None and p.granted is not p.device
    ]


def slice_name(node: str, driver: str, index: int) -> str:
    """``<node>-<driver>-<index>``, a DNS subdomain of at most 253 characters."""
    suffix = f"-{_NOT_LABEL.sub('-', driver.lower()).strip('-')}-{index}"
    return node[: _SUBDOMAIN_MAX - len(suffix)] + suffix


def unhealthy_taint(driver: str, effect: str) -> DeviceTaint:
    """The taint of an unhealthy device: a key in the driver's own domain, so a toleration can
    name exactly this driver's health (``value`` stays empty; ``timeAdded`` is the server's)."""
    return DeviceTaint(key=f"{driver}/unhealthy", effect=effect)


def slices_for(
    driver: str,
    node: str,
    resources: Sequence[ResourceInput],
    taint_effect: str | None = DEFAULT_TAINT_EFFECT,
    sharing: Sharing = "replicas",
) -> list[ResourceSlice]:
    """The ResourceSlices (one pool named after the node) describing the devices.

    ``resources`` holds, per resource, its name, its devices and per-device extra attributes
    keyed by device ID then attribute name, each value a one-key dict as in the API
    (``{"string": "10de"}``) or ``{"quantity": "16Gi"}`` for a capacity, or one of each for an
    attribute and a capacity of one name (``{"int": 64, "quantity": "64Gi"}``). An unhealthy device
    carries :func:`unhealthy_taint` with ``taint_effect``, or is left out if that is None.
    Devices are split over as many slices as the API's limit requires: 128 per slice, or 64
    when any device of the pool has a taint or a list attribute. ``sharing``: how replicas are
    published (:func:`published`).
    """
    devices: list[SliceDevice] = []
    counter_sets: list[CounterSet] = []
    seen: dict[str, str] = {}
    for resource, resource_devices, extra in resources:
        # Several resources often number their devices alike ("0", "1"): keep names apart.
        prefix = resource.rpartition("/")[2] if len(resources) > 1 else ""
        shown_devices = published(resource_devices, sharing)
        counter_sets += _counter_sets(shown_devices, prefix)
        for shown in shown_devices:
            device = shown.device
            if not device.healthy and taint_effect is None:
                continue
            entry = _slice_device(resource, prefix, device, extra.get(shown.granted.id, {}))
            entry = _shared_entry(entry, shown, prefix)
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
    # A slice holds devices or counter sets, never both, and at most 8 sets (KEP-4815 as of 1.35).
    counters = [counter_sets[i : i + MAX_COUNTER_SETS] for i in range(0, len(counter_sets), MAX_COUNTER_SETS)]
    specs = [ResourceSliceSpec(devices=chunk) for chunk in chunks]
    specs += [ResourceSliceSpec(shared_counters=sets) for sets in counters]
    for spec in specs:
        spec.driver, spec.node_name = driver, node
        spec.pool = ResourcePool(name=node, generation=0, resource_slice_count=len(specs))
    return [
        ResourceSlice(api_version=f"{GROUP}/v1", metadata=ObjectMeta(name=slice_name(node, driver, i)), spec=spec)
        for i, spec in enumerate(specs)
    ]
