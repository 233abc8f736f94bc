"""From a resource's config to its physical devices and the advertised (replica) devices."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from ..device import ContainerAllocation, Device, DeviceSpec, Health, Mount
from .base import REPLICA_SEPARATOR, Attributes, Found, int_attr, log, string_attr
from .hostroot import HostRoot
from .schema import ResourceConfig
from .source import Refusal


def find(resource: ResourceConfig, host: HostRoot) -> list[Found]:
    """The physical devices of ``resource`` present under ``host`` now; none while a shared path is
    missing, since every container given a device needs it (its runtime would refuse to start)."""
    source, config = resource.source
    stem = resource.name.rsplit("/", 1)[-1]
    found = source.discover(config, host, stem)
    missing = [path for path in resource.shared_paths if not host.exists(path)]
    if found and missing:
        log.warning("%s: shared_paths missing under host root: %s; nothing to advertise", stem, ", ".join(missing))
        return []
    return found


def watched_patterns(resource: ResourceConfig) -> list[str]:
    """Host path globs whose directories change when a device of ``resource`` comes or goes."""
    source, config = resource.source
    return source.watched(config) + list(resource.shared_paths)


def refused(resource: ResourceConfig, host: HostRoot) -> list[Refusal]:
    """Devices the source saw but cannot advertise, and why (``kubedevice discover`` lists them)."""
    source, config = resource.source
    return source.refused(config, host)


def cdi_name(kind: str, found: Found) -> str:
    """The fully qualified CDI device name, ``vendor.com/class=name``."""
    return f"{kind}={found.key}"


def grant_of(resource: ResourceConfig, found: Found) -> ContainerAllocation:
    """What one physical device gives a container alone: its nodes and mounts, or its CDI name."""
    annotations = dict(resource.annotations)
    if resource.cdi is not None:
        name = cdi_name(resource.cdi_kind, found)
        if resource.cdi.mode == "annotations":
            annotations[f"cdi.k8s.io/kubedevice_{found.key.replace(':', '_')}"] = name
            return ContainerAllocation(annotations=annotations)
        return ContainerAllocation(annotations=annotations, cdi_devices=(name,))
    own = node_grant(resource, found, 0)
    return ContainerAllocation(devices=own.devices, mounts=own.mounts, annotations=annotations)


def node_grant(resource: ResourceConfig, found: Found, index: int) -> ContainerAllocation:
    """The device nodes and mounts of ``found`` as the ``index``-th device of one container.

    The one place container paths are made, so Allocate, CDI specs and ``discover`` agree: a node
    keeps the path it was found by (a symlink's own name), and ``container_path`` renames the node
    of a single-node device; a device of several nodes keeps each node's own path. ``shared_paths``
    follow every device's own nodes; merging the grants of one container keeps each path once.
    """
    fields = path_fields(found, index)
    seen = found.seen_paths
    if resource.container_path is not None and len(seen) == 1:
        seen = (resource.container_path.format_map(fields),)
    shared = tuple(DeviceSpec(p, p, resource.permissions) for p in resource.shared_paths)
    return ContainerAllocation(
        devices=tuple(DeviceSpec(h, c, resource.permissions) for h, c in zip(found.host_paths, seen, strict=True))
        + shared,
        mounts=tuple(
            Mount(m.host_path, m.container_path.format_map(fields) if m.container_path else "", m.read_only)
            for m in resource.mounts
        ),
    )


def path_fields(found: Found, index: int) -> dict[str, object]:
    """``{path}`` (the first node as matched), ``{name}`` (its basename), ``{index}``, ``{devlink}``
    (a udev device's preferred symlink; the schema refuses it for the other sources)."""
    path = found.seen_paths[0] if found.seen_paths else ""
    devlink = found.attributes.get("devlink", {}).get("string", path)
    return {"path": path, "name": PurePosixPath(path).name, "index": index, "devlink": devlink}


def replica_ids(resource: ResourceConfig, found: Found) -> list[str]:
    """``key`` alone, or ``key::0`` … ``key::N-1``: stable across restarts, ≤ 63 characters."""
    if resource.replicas == 1:
        return [found.key]
    return [f"{found.key}{REPLICA_SEPARATOR}{i}" for i in range(resource.replicas)]


def advertised(
    resource: ResourceConfig, found: Sequence[Found], health: Mapping[str, Health] | None = None
) -> list[Device]:
    """The devices to list: one per replica, sharing the physical device's health and grant."""
    health = health or {}
    devices: list[Device] = []
    for item in found:
        grant = grant_of(resource, item)
        state = health.get(item.key, Health.HEALTHY)
        group = item.key if resource.replicas > 1 else None
        devices.extend(Device(i, state, item.numa_nodes, grant, group) for i in replica_ids(resource, item))
    return devices


def dra_attributes(resource: ResourceConfig, found: Sequence[Found]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per advertised ID, the DRA attributes of its physical device (plus the replica index)."""
    result: dict[str, dict[str, dict[str, Any]]] = {}
    for item in found:
        for index, device_id in enumerate(replica_ids(resource, item)):
            attrs: dict[str, dict[str, Any]] = dict(_with_source(resource, item.attributes))
            if resource.replicas > 1:
                attrs["physicalDevice"] = string_attr(item.key)
                attrs["replica"] = int_attr(index)
            result[device_id] = attrs
    return result


def _with_source(resource: ResourceConfig, attributes: Attributes) -> dict[str, dict[str, Any]]:
    return {"source": string_attr(resource.source_kind), **attributes}
