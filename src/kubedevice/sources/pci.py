"""``pci``: functions by vendor/device/class from ``/sys/bus/pci/devices``.

``numa_node`` gives topology (-1 means none). With ``vfio`` a device is one IOMMU group: the
kernel isolates groups, not functions, so two functions of one group can never go to two pods.
The group's selected functions become ONE device (ID: its first selected function's address),
granting ``/dev/vfio/<group>`` plus the container node ``/dev/vfio/vfio``; its ``details`` list
every selected function's address for the env. A group is refused while any member is bound to
a host driver (the kernel's VFIO viability rule), and each refusal is reported.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import Field

from .base import Found, int_attr, log, stable_key, string_attr
from .fields import HexId, Model, PciClass
from .hostroot import HostRoot
from .source import Refusal, Source
from .sysfs import attribute, numa_nodes, scan_bus

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


class PciConfig(Model):
    """PCI functions by vendor/device/class from ``/sys/bus/pci/devices``; VFIO grants the group node."""

    vendor: HexId
    device: HexId | None = None
    pci_class: PciClass | None = Field(default=None, alias="class")
    vfio: bool = False


def discover(config: PciConfig, host: HostRoot, stem: str) -> list[Found]:
    """Matching devices; one warning says what was skipped and why, or that none is present."""
    found, skipped = scan(config, host)
    wanted = f"{config.vendor}:{config.device or '*'}"
    if skipped:
        log.warning(
            "%s: %d PCI function(s) %s present but not usable for VFIO: %s%s",
            stem,
            len(skipped),
            wanted,
            "; ".join(f"{address} {why}" for address, why in skipped),
            "" if found else "; nothing to advertise",
        )
    elif not found:
        log.warning("%s: no PCI function %s present", stem, wanted)
    if found and not config.vfio:
        log.warning(
            "%s: PCI functions are advertised without device nodes (vfio is off): a container gets only "
            "the configured mounts, env and annotations; set 'vfio: true' to grant /dev/vfio/<group>",
            stem,
        )
    return found


def scan(config: PciConfig, host: HostRoot) -> tuple[list[Found], list[Refusal]]:
    """The devices to advertise and the selected functions refused (``kubedevice discover`` shows both)."""
    functions = scan_bus(host, DEVICES, lambda address: _read(config, host, address))
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
    return [f"{DEVICES}/*", "/dev/vfio/*"] if config.vfio else [f"{DEVICES}/*"]


def _not_one_node(config: PciConfig) -> str | None:
    return (
        "container_path applies to devices of one node; pci devices have none, or with vfio two "
        "(/dev/vfio/<group> and /dev/vfio/vfio), which keep their own paths"
    )


def refused(config: PciConfig, host: HostRoot) -> list[Refusal]:
    """A VFIO resource's selected functions that cannot be advertised, and why."""
    return scan(config, host)[1] if config.vfio else []


SOURCE = Source(
    "pci",
    PciConfig,
    discover,
    watched,
    _not_one_node,
    refused=refused,
    matched_paths=False,
    sysfs=True,
    product_attribute="device",
)
