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

``resource.kubernetes.io/numaNode`` follows ``numa_linux.go`` (v0.37.2): the PCI function's own
``numa_node`` file (no ancestor's), none for -1 (it would match every device without NUMA
affinity). The scalar form is an int; the list form (``DRAListTypeAttributes``, which a driver
cannot detect, so its config chooses) is the node first, then the nodes of the same socket at
the smallest SLIT distance from it, or the node alone when the distances cannot be read.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Mapping
from typing import Any, Literal

from ..errors import KubedeviceError
from ..sources.hostroot import HostRoot

PREFIX = "resource.kubernetes.io/"
PCIE_ROOT = PREFIX + "pcieRoot"
PCI_BUS_ID = PREFIX + "pciBusID"
NUMA_NODE = PREFIX + "numaNode"
NumaForm = Literal["scalar", "list"]
_ATOI = re.compile(r"^[+-]?[0-9]+\Z")
_NODE_DIR = "/sys/devices/system/node"
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


def numa_node(host: HostRoot, bus_id: str, form: NumaForm = "scalar") -> dict[str, Any] | None:
    """``GetNUMANodeAttributeByPCIBusID``'s value, or None where it returns an error (no NUMA
    affinity, an unreadable or malformed ``numa_node``): then the attribute is not published."""
    _check_bdf(bus_id)
    path = f"/sys/bus/pci/devices/{bus_id}/numa_node"
    node = _sysfs_int(host, path)
    if node is None:
        raise PciAttributeError(f"failed to read NUMA node for PCI Bus ID {bus_id}: {path}")
    if node < 0:
        return None
    if form == "scalar":
        return {"int": node}
    equidistant = _equidistant_nodes(host, node)
    return {"ints": [node, *(n for n in equidistant if n != node)]}


def _sysfs_int(host: HostRoot, path: str) -> int | None:
    """``readSysfsInt``: ``strconv.Atoi`` of the trimmed file (an int64), None on any error."""
    try:
        text = host.read(path)
    except (OSError, UnicodeDecodeError):
        return None
    if not _ATOI.match(text) or not -(2**63) <= int(text) < 2**63:
        return None
    return int(text)


def _equidistant_nodes(host: HostRoot, node: int) -> list[int]:
    """``getEquidistantNUMANodes``: ``node`` and the nodes at the smallest distance from it, less
    those known to sit on another socket; ``[node]`` when the distance row cannot be used."""
    try:
        fields = host.read(f"{_NODE_DIR}/node{node}/distance").split()
    except (OSError, UnicodeDecodeError):
        return [node]
    if not fields or node >= len(fields) or not all(_ATOI.match(f) for f in fields):
        return [node]
    distances = [int(f) for f in fields]
    others = [d for i, d in enumerate(distances) if i != node]
    if not others:
        return [node]
    nearest = min(others)
    socket = _socket_of(host, node)
    nodes = [
        i
        for i, d in enumerate(distances)
        if i == node or (d == nearest and (socket is None or _socket_of(host, i) in (None, socket)))
    ]
    return sorted(nodes)


def _socket_of(host: HostRoot, node: int) -> int | None:
    """``getSocketForNUMANode``: ``physical_package_id`` of a CPU of the node (None when unknown)."""
    try:
        cpus = _cpulist(host.read(f"{_NODE_DIR}/node{node}/cpulist"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not cpus:
        return None
    return _sysfs_int(host, f"/sys/devices/system/cpu/cpu{min(cpus)}/topology/physical_package_id")


def _cpulist(text: str) -> set[int]:
    """A kernel CPU list (``0-3,8-11``), as ``cpuset.Parse``; ``ValueError`` when malformed."""
    cpus: set[int] = set()
    for part in filter(None, text.strip().split(",")):
        low, dash, high = part.partition("-")
        first, last = int(low), int(high) if dash else int(low)
        if first < 0 or last < first:
            raise ValueError(f"invalid CPU range {part!r}")
        cpus.update(range(first, last + 1))
    return cpus


def standard_attributes(
    host: HostRoot, attributes: Attributes, numa_form: NumaForm = "scalar"
) -> dict[str, dict[str, Any]]:
    """The standard attributes of one device from what discovery found (none for non-PCI devices)."""
    source = attributes.get(_SOURCE_KEY, {}).get("string")
    if not isinstance(source, str):
        return {}
    try:
        _check_bdf(source)
    except PciAttributeError as err:
        log.warning("no %s for %s: %s", PCI_BUS_ID, source, err)
        return {}
    found: dict[str, dict[str, Any]] = {PCI_BUS_ID: {"string": source}}
    try:
        found[PCIE_ROOT] = {"string": pcie_root(host, source)}
    except PciAttributeError as err:
        log.warning("no %s for %s: %s", PCIE_ROOT, source, err)
    try:
        node = numa_node(host, source, numa_form)
    except PciAttributeError as err:
        log.warning("no %s for %s: %s", NUMA_NODE, source, err)
    else:
        if node is not None:
            found[NUMA_NODE] = node
    return found


def with_standard_attributes(
    host: HostRoot, per_device: Mapping[str, Attributes], numa_form: NumaForm = "scalar"
) -> dict[str, dict[str, Mapping[str, Any]]]:
    """``per_device`` (device ID → attributes) with each device's standard attributes beside its own."""
    return {device: {**attrs, **standard_attributes(host, attrs, numa_form)} for device, attrs in per_device.items()}
