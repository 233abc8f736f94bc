"""``pci``: functions by vendor/device/class from ``/sys/bus/pci/devices``.

With ``nodes`` a function stays on its host driver (amdgpu, i915, xe, nvidia, intel_vpu, amdxdna,
apex, ...) and a device grants the function's own character devices, found below its sysfs
directory: every class device there (a directory with a ``dev`` file) at the ``/dev`` path its
``uevent`` names (``DEVNAME``). The kernel lays them out as (``drivers/gpu/drm/drm_sysfs.c``,
``drm_sysfs_minor_alloc``; ``drivers/accel/drm_accel.c``, ``accel_devnode``)::

    <function>/drm/card1/dev        DEVNAME=dri/card1        kind card
    <function>/drm/renderD128/dev   DEVNAME=dri/renderD128   kind render
    <function>/accel/accel0/dev     DEVNAME=accel/accel0     kind accel
    <function>/apex/apex_0/dev      DEVNAME=apex_0           another driver's class (kind all)

The walk never enters a child function (a bridge's devices are not the bridge's) nor follows a
symlink (``device``, ``subsystem``). NVIDIA's driver makes no class device: ``/dev/nvidia<minor>``
comes from ``/proc/driver/nvidia/gpus/<address>/information``'s ``Device Minor:`` line
(``kernel-open/nvidia/nv-procfs.c``). A function on no driver, or without a node of each kind
asked for, or whose node is not in ``/dev`` yet, is skipped and named in one warning; a bridge
(a GPU board's own switch ports share its vendor ID) is passed over without one.

``numa_node`` gives topology (-1 means none). With ``vfio`` a device is one IOMMU group: the
kernel isolates groups, not functions, so two functions of one group can never go to two pods.
The group's selected functions become ONE device (ID: its first selected function's address),
granting ``/dev/vfio/<group>`` plus the container node ``/dev/vfio/vfio``; its ``details`` list
every selected function's address for the env. A group is refused while any member is bound to
a host driver (the kernel's VFIO viability rule), and each refusal is reported.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ..errors import FieldProblem
from .base import Found, int_attr, log, stable_key, string_attr
from .fields import HexId, Model, PciClass, each_once
from .hostroot import HostRoot
from .source import Refusal, Source
from .sysfs import attribute, dev_path, numa_nodes, scan_bus

DEVICES = "/sys/bus/pci/devices"
GROUPS = "/sys/kernel/iommu_groups"
VFIO_CONTAINER = "/dev/vfio/vfio"
#: Drivers the kernel lets share a group with a VFIO user (``vfio_driver_allowed`` in
#: drivers/vfio; ``driver_managed_dma`` drivers since Linux 5.19): pci-stub only parks a device,
#: pcieport drives a bridge's port services, not DMA.
_ALLOWED_DRIVERS = frozenset({"pci-stub", "pcieport"})
#: Classes of the kernel's non-normal header types (PCI-to-PCI, CardBus, semi-transparent bridges):
#: "PCI interconnect devices" the kernel lets into a user-owned group whatever their driver.
_BRIDGE_CLASSES = ("0604", "0607", "0609")
#: The kinds ``pci.nodes`` may ask for; ``all`` is every class device below the function and its NVIDIA node.
PciNode = Literal["card", "render", "accel", "nvidia", "all"]
#: A child function's directory (``0000:05:00.0`` below its bridge): never part of the parent's nodes.
_FUNCTION_DIR = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]\Z")
_MAX_DEPTH = 6  # drm/card1/card1-DP-1/drm_dp_aux0 is 4; i2c-5/i2c-dev/i2c-5 is 3
NVIDIA_INFO = "/proc/driver/nvidia/gpus/{address}/information"
#: Where each kind's nodes appear (the ``/dev`` directories watched: sysfs sends no inotify events).
_DEV_PATTERNS = ("/dev/dri/*", "/dev/accel/*", "/dev/*")


class PciConfig(Model):
    """PCI functions by vendor/device/class from ``/sys/bus/pci/devices``; VFIO grants the group node."""

    vendor: HexId
    device: HexId | None = None
    pci_class: PciClass | None = Field(default=None, alias="class")
    vfio: bool = False
    nodes: list[PciNode] | None = Field(default=None, min_length=1)

    @field_validator("nodes")
    @classmethod
    def _each_once(cls, nodes: list[PciNode] | None) -> list[PciNode] | None:
        each_once(list(nodes or ()))
        return nodes

    @model_validator(mode="after")
    def _one_way(self) -> PciConfig:
        if self.vfio and self.nodes is not None:
            raise FieldProblem(
                ("nodes",),
                "grants a function's nodes on its host driver, vfio its IOMMU group on vfio-pci: set one of them",
            )
        return self


def discover(config: PciConfig, host: HostRoot, stem: str) -> list[Found]:
    """Matching devices; one warning says what was skipped and why, or that none is present."""
    found, skipped = scan(config, host)
    wanted = f"{config.vendor}:{config.device or '*'}"
    if skipped:
        log.warning(
            "%s: %d PCI function(s) %s present but not usable %s: %s%s",
            stem,
            len(skipped),
            wanted,
            "for VFIO" if config.vfio else "on their host driver",
            "; ".join(f"{address} {why}" for address, why in skipped),
            "" if found else "; nothing to advertise",
        )
    elif not found:
        log.warning("%s: no PCI function %s present", stem, wanted)
    if found and not config.vfio and config.nodes is None:
        log.warning(
            "%s: PCI functions are advertised without device nodes (vfio is off): a container gets only "
            "the configured mounts, env and annotations; set 'vfio: true' to grant /dev/vfio/<group>, "
            "or 'nodes' to grant the function's own nodes on its host driver",
            stem,
        )
    return found


def scan(config: PciConfig, host: HostRoot) -> tuple[list[Found], list[Refusal]]:
    """The devices to advertise and the selected functions refused (``kubedevice discover`` shows both)."""
    functions = scan_bus(host, DEVICES, lambda address: _read(config, host, address))
    if config.nodes is not None:
        return _with_nodes(config.nodes, host, functions)
    if not config.vfio:
        return functions, []
    skipped: list[Refusal] = []
    groups: dict[str, list[Found]] = {}
    for function in functions:
        group = _group_of(function)
        if group is None:
            skipped.append((_address(function), "has no IOMMU group (IOMMU off?)"))
        else:
            groups.setdefault(group, []).append(function)
    found = [device for group, members in groups.items() if (device := _vanishing(host, group, members, skipped))]
    return found, skipped


def _with_nodes(kinds: list[PciNode], host: HostRoot, functions: list[Found]) -> tuple[list[Found], list[Refusal]]:
    """Each function with the nodes of ``kinds``, or its address and why it has not got them."""
    found: list[Found] = []
    skipped: list[Refusal] = []
    for function in functions:
        if _class(function)[:4] in _BRIDGE_CLASSES:
            continue  # a switch's port shares its GPU's vendor ID; the GPU's nodes are not the port's
        try:
            nodes = _nodes_of(kinds, host, function)
        except OSError:  # unplugged while read: the next event rescans
            continue
        if isinstance(nodes, str):
            skipped.append((_address(function), nodes))
            continue
        details = {**function.details, "nodes": [{"kind": kind, "path": path} for kind, path in nodes]}
        found.append(replace(function, host_paths=tuple(host.resolve(p) for _, p in nodes), details=details))
    return found, skipped


def _nodes_of(kinds: list[PciNode], host: HostRoot, function: Found) -> list[tuple[str, str]] | str:
    """``(kind, /dev path)`` of the nodes asked for, in the order of ``kinds``; or why there are none."""
    driver = _driver(function)
    if driver is None:
        return "is bound to no driver"
    below = _class_nodes(host, str(function.sysfs))
    nvidia = _nvidia_node(host, _address(function))
    nodes: dict[str, str] = {}  # path -> kind: ``[all, card]`` lists a card once
    for kind in kinds:
        picked = [*below, *nvidia] if kind == "all" else [n for n in [*below, *nvidia] if n[0] == kind]
        if not picked:
            return f"has no {'device' if kind == 'all' else kind} node (driver: {driver})"
        for node_kind, path in picked:
            nodes.setdefault(path, node_kind)
    missing = [path for path in nodes if not host.exists(path)]
    if missing:
        return f"lacks {', '.join(missing)} (driver: {driver}; not created yet?)"
    return [(kind, path) for path, kind in nodes.items()]


def _class_nodes(host: HostRoot, sys_dir: str) -> list[tuple[str, str]]:
    """``(kind, /dev path)`` of every class device below the function, in sysfs order.

    ``card``/``render`` are DRM minors, ``accel`` an accel minor; another class device's kind is its
    class directory (``apex``, ``i2c-dev``, ``drm_dp_aux_dev``).
    """
    top = host.local(host.resolve(sys_dir))
    found: list[tuple[str, str]] = []
    for directory, subdirs, files in os.walk(top):
        parts = Path(directory).relative_to(top).parts
        keep = [d for d in subdirs if not _FUNCTION_DIR.match(d)] if len(parts) < _MAX_DEPTH else []
        subdirs[:] = sorted(keep, key=_natural)
        if len(parts) < 2 or "dev" not in files:
            continue
        node = dev_path(Path(directory) / "uevent")
        if node is not None:
            found.append((_kind(parts[-2], parts[-1]), node))
    return found


def _kind(class_dir: str, name: str) -> str:
    if class_dir == "drm":
        return "render" if name.startswith("renderD") else "card" if name.startswith("card") else class_dir
    return class_dir


def _natural(name: str) -> tuple[object, ...]:
    """``card2`` before ``card10``: probe order, as the kernel numbers them."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def _nvidia_node(host: HostRoot, address: str) -> list[tuple[str, str]]:
    """``/dev/nvidia<minor>`` of an NVIDIA GPU, from the driver's procfs entry; empty for any other."""
    try:
        text = host.read(NVIDIA_INFO.format(address=address))
    except OSError:
        return []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Device Minor" and value.strip().isdigit():
            return [("nvidia", f"/dev/nvidia{int(value)}")]
    return []


def _vanishing(host: HostRoot, group: str, selected: list[Found], skipped: list[Refusal]) -> Found | None:
    """:func:`_group_device`, or ``None`` when the group's entries vanish while read (a hot unplug)."""
    try:
        return _group_device(host, group, selected, skipped)
    except OSError:
        return None


def _hex(value: str | None) -> str:
    return (value or "").lower().removeprefix("0x")


def _read(config: PciConfig, host: HostRoot, address: str) -> Found | None:
    """The function at ``address`` if it matches: its attributes, no device nodes yet."""
    sys_dir = f"{DEVICES}/{address}"
    vendor, device = _hex(attribute(host, sys_dir, "vendor")), _hex(attribute(host, sys_dir, "device"))
    pci_class = _hex(attribute(host, sys_dir, "class"))
    if vendor != config.vendor or (config.device is not None and device != config.device):
        return None
    if config.pci_class is not None and not pci_class.startswith(config.pci_class):
        return None
    nodes = numa_nodes(host, sys_dir)
    attributes = {
        "vendor": string_attr(vendor),
        "device": string_attr(device),
        "class": string_attr(pci_class),
        "pciAddress": string_attr(address),
    }
    if nodes:
        attributes["numaNode"] = int_attr(nodes[0])
    driver = host.link_name(f"{sys_dir}/driver")
    if driver:
        attributes["driver"] = string_attr(driver)
    details: dict[str, object] = {"pciAddresses": [address]}
    group = host.link_name(f"{sys_dir}/iommu_group")
    if group is not None:
        attributes["iommuGroup"] = int_attr(int(group)) if group.isdigit() else string_attr(group)
        details["iommuGroup"] = int(group) if group.isdigit() else group
    return Found(stable_key(address), (), nodes, sys_dir, attributes, details=details)


def _class(function: Found) -> str:
    return str(function.attributes["class"]["string"])


def _address(function: Found) -> str:
    return str(function.attributes["pciAddress"]["string"])


def _group_of(function: Found) -> str | None:
    group = function.details.get("iommuGroup")
    return str(group) if group is not None else None


def _group_device(host: HostRoot, group: str, selected: list[Found], skipped: list[Refusal]) -> Found | None:
    """One device for an IOMMU group's selected functions, or ``None`` with each refusal in ``skipped``.

    Unselected members (a GPU's audio function, a bridge) are passed with the group whether listed
    or not, so they must be viable too; they are not listed in the env, which names what was asked for.
    """
    paths = (f"/dev/vfio/{group}", VFIO_CONTAINER)
    missing = [p for p in paths if not host.exists(p)]
    if missing:
        skipped.extend((_address(f), f"lacks {', '.join(missing)} (not bound to vfio-pci?)") for f in selected)
        return None
    blockers = _host_bound(host, group)
    if blockers:
        held = "; ".join(f"{member} is bound to host driver {driver}" for member, driver in blockers)
        skipped.extend((_address(f), f"is in IOMMU group {group}, which a pod cannot own: {held}") for f in selected)
        return None
    usable = [f for f in selected if _is_vfio(_driver(f))]
    skipped.extend(
        (_address(f), f"is not bound to vfio-pci (driver: {_driver(f) or 'none'})") for f in selected if f not in usable
    )
    if not usable:
        return None
    first = usable[0]
    nodes = tuple(sorted({n for f in usable for n in f.numa_nodes}))
    details = {**first.details, "pciAddresses": [_address(f) for f in usable]}
    return replace(first, host_paths=paths, numa_nodes=nodes, details=details)


def _host_bound(host: HostRoot, group: str) -> list[tuple[str, str]]:
    """Members of ``group`` on a driver that keeps the kernel from giving the group to a user."""
    members = f"{GROUPS}/{group}/devices"
    blockers = []
    for member in host.listdir(members):
        driver = host.link_name(f"{members}/{member}/driver")
        if driver is None or _is_vfio(driver) or driver in _ALLOWED_DRIVERS:
            continue
        if _hex(attribute(host, f"{members}/{member}", "class"))[:4] in _BRIDGE_CLASSES:
            continue
        blockers.append((member, driver))
    return blockers


def _driver(function: Found) -> str | None:
    value = function.attributes.get("driver")
    return str(value["string"]) if value else None


def _is_vfio(driver: str | None) -> bool:
    """vfio-pci or a vendor's variant of it (``mlx5_vfio_pci``, ``nvgrace_gpu_vfio_pci``, ...)."""
    return driver is not None and (driver == "vfio-pci" or driver.endswith("_vfio_pci"))


def watched(config: PciConfig) -> list[str]:
    """Nodes come and go with their driver's bind and unbind: ``/dev`` sees both, sysfs neither."""
    if config.nodes is not None:
        return [f"{DEVICES}/*", *_DEV_PATTERNS]
    return [f"{DEVICES}/*", "/dev/vfio/*"] if config.vfio else [f"{DEVICES}/*"]


def _not_one_node(config: PciConfig) -> str | None:
    if config.nodes is None:
        return (
            "container_path applies to devices of one node; pci devices have none, or with vfio two "
            "(/dev/vfio/<group> and /dev/vfio/vfio), which keep their own paths"
        )
    if len(config.nodes) > 1 or "all" in config.nodes:
        return (
            f"container_path applies to devices of one node; pci nodes [{', '.join(config.nodes)}] give "
            "each device several, which keep their own paths"
        )
    return None  # a function has one card, one render node, one accel node, one NVIDIA minor


def _several(config: PciConfig) -> str | None:
    return "pci can match several functions"


def _has_paths(config: PciConfig) -> bool:
    return config.nodes is not None


def _nvidia_possible(config: PciConfig) -> bool:
    """NVIDIA's minor comes from procfs, where an unbind sends no event (``nvidia`` or ``all``)."""
    return config.nodes is not None and bool({"nvidia", "all"} & set(config.nodes))


def refused(config: PciConfig, host: HostRoot) -> list[Refusal]:
    """The selected functions that cannot be advertised (a VFIO group a host driver holds, a
    function without the nodes asked for), and why."""
    return scan(config, host)[1]


SOURCE = Source(
    "pci",
    PciConfig,
    discover,
    watched,
    _not_one_node,
    _several,
    refused=refused,
    matched_paths=_has_paths,
    unusable_stays=_has_paths,
    polled=_nvidia_possible,
    sysfs=True,
    product_attribute="device",
)
