"""Device discovery from the node (static, glob, usb, pci, udev), always through a host root.

``ConfiguredPlugin`` (in :mod:`kubedevice.sources.configured`) serves one configured resource;
:func:`discover_resources` is the dry run behind ``kubedevice discover`` and ``dra slices``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from ..device import Device
from .base import Found
from .discovery import advertised, dra_attributes, find
from .hostroot import HostRoot, HostRootError
from .schema import ResourceConfig

__all__ = ["HostRoot", "HostRootError", "ResourceConfig", "discover_resources", "survey"]

DraAttributes = dict[str, dict[str, dict[str, Any]]]


class _HasResources(Protocol):
    @property
    def resources(self) -> Sequence[ResourceConfig]: ...


def survey(config: _HasResources, host_root: Path | str) -> list[tuple[ResourceConfig, list[Found], list[Device]]]:
    """Per resource: its config, the physical devices present and the devices it would advertise."""
    host = HostRoot(host_root)
    result = []
    for resource in config.resources:
        found = find(resource, host)
        result.append((resource, found, advertised(resource, found)))
    return result


def discover_resources(config: _HasResources, host_root: Path | str) -> list[tuple[str, list[Device], DraAttributes]]:
    """Per resource: its name, the devices it would advertise, and DRA attributes per device ID."""
    return [
        (resource.name, devices, dra_attributes(resource, found))
        for resource, found, devices in survey(config, host_root)
    ]
