"""Kubernetes' standard device attributes, computed from sysfs as upstream computes them.

``resource.kubernetes.io/pciBusID`` and ``resource.kubernetes.io/pcieRoot`` let a claim ask for
devices behind one PCIe root complex (``matchAttribute``) across drivers: a GPU and a NIC
from different vendors only line up if both publish the same names and values. So the values
follow ``k8s.io/dynamic-resource-allocation/deviceattribute/pci_linux.go`` exactly: the bus ID
must be extended BDF (``0000:3b:00.0``, lowercase hex), and the root is the first component
below ``/sys/devices`` of what ``/sys/bus/pci/devices/<bus ID>`` links to (``pci0000:3a``),
where a link that is absolute, leaves ``/sys/devices/pci*`` or does not end in the bus ID is
an error. A device whose root cannot be found still gets its bus ID (upstream's two functions
are independent) and the log says why the root is missing.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Mapping
from typing import Any

from ..errors import KubedeviceError
from ..sources.hostroot import HostRoot

PREFIX = "resource.kubernetes.io/"
PCIE_ROOT = PREFIX + "pcieRoot"
PCI_BUS_ID = PREFIX + "pciBusID"
_BDF = re.compile(r"^([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-9a-f]{1})\Z")
_SOURCE_KEY = "pciAddress"
"""The attribute the PCI source gives every function it finds."""

log = logging.getLogger("kubedevice.dra.deviceattribute")
Attributes = Mapping[str, Mapping[str, Any]]


class PciAttributeError(KubedeviceError, ValueError):
    """A bus ID or sysfs layout from which upstream would return an error."""


def pcie_root(host: HostRoot, bus_id: str) -> str:
    """``resolvePCIeRoot``: ``pci<domain>:<bus>`` of the root complex above ``bus_id``."""
    _check_bdf(bus_id)
    link = f"bus/pci/devices/{bus_id}"
    try:
        target = os.readlink(host.local(f"/sys/{link}"))
    except OSError as err:
        raise PciAttributeError(f"failed to read symlink for PCI Bus ID {link}: {err.strerror}") from None
    if not posixpath.isabs(target):
        target = posixpath.normpath(posixpath.join(posixpath.dirname(link), target))
    if not target.startswith("devices/pci"):
        raise PciAttributeError(
            f"symlink target for PCI Bus ID {bus_id} is invalid: it must start with devices/pci: {target}"
        )
    if posixpath.basename(target) != bus_id:
        raise PciAttributeError(
            f"symlink target for PCI Bus ID {bus_id} is invalid: it must end with {bus_id}: {target}"
        )
    return target.removeprefix("devices/").split("/")[0]


def _check_bdf(bus_id: str) -> None:
    """``verifyPCIBDFFormat``."""
    if not bus_id:
        raise PciAttributeError("PCI Bus ID cannot be empty")
    if not _BDF.match(bus_id):
        raise PciAttributeError(f"invalid PCI Bus ID format: {bus_id}")


def standard_attributes(host: HostRoot, attributes: Attributes) -> dict[str, dict[str, str]]:
    """The standard attributes of one device from what discovery found (none for non-PCI devices)."""
    source = attributes.get(_SOURCE_KEY, {}).get("string")
    if not isinstance(source, str):
        return {}
    try:
        _check_bdf(source)
    except PciAttributeError as err:
        log.warning("no %s for %s: %s", PCI_BUS_ID, source, err)
        return {}
    found = {PCI_BUS_ID: {"string": source}}
    try:
        found[PCIE_ROOT] = {"string": pcie_root(host, source)}
    except PciAttributeError as err:
        log.warning("no %s for %s: %s", PCIE_ROOT, source, err)
    return found


def with_standard_attributes(
    host: HostRoot, per_device: Mapping[str, Attributes]
) -> dict[str, dict[str, Mapping[str, Any]]]:
    """``per_device`` (device ID → attributes) with each device's standard attributes beside its own."""
    return {device: {**attrs, **standard_attributes(host, attrs)} for device, attrs in per_device.items()}
