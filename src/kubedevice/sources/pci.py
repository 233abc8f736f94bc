"""``pci``: functions by vendor/device/class from ``/sys/bus/pci/devices``.

``numa_node`` gives topology (-1 means none). With ``vfio`` a device grants its IOMMU group
node ``/dev/vfio/<group>`` plus the container node ``/dev/vfio/vfio``.
"""

from __future__ import annotations

from .base import Found, int_attr, log, stable_key, string_attr
from .hostroot import HostRoot
from .schema import PciConfig
from .sysfs import attribute, numa_nodes, scan_bus

DEVICES = "/sys/bus/pci/devices"
VFIO_CONTAINER = "/dev/vfio/vfio"


def discover(config: PciConfig, host: HostRoot, stem: str) -> list[Found]:
    """Matching functions; one warning says what was skipped and why, or that none is present."""
    skipped: list[str] = []
    found = scan_bus(host, DEVICES, lambda address: _read(config, host, address, skipped))
    wanted = f"{config.vendor}:{config.device or '*'}"
    if skipped:
        log.warning(
            "%s: %d PCI function(s) %s present but not usable for VFIO: %s%s",
            stem, len(skipped), wanted, "; ".join(skipped), "" if found else "; nothing to advertise",
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


def _hex(value: str | None) -> str:
    return (value or "").lower().removeprefix("0x")


def _read(config: PciConfig, host: HostRoot, address: str, skipped: list[str]) -> Found | None:
    """The function at ``address`` if it matches; a match unusable for VFIO goes to ``skipped``."""
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
    paths: tuple[str, ...] = ()
    group = host.link_name(f"{sys_dir}/iommu_group")
    if group is not None:
        attributes["iommuGroup"] = int_attr(int(group)) if group.isdigit() else string_attr(group)
    if config.vfio:
        if group is None:
            skipped.append(f"{address} has no IOMMU group (IOMMU off?)")
            return None
        paths = (f"/dev/vfio/{group}", VFIO_CONTAINER)
        missing = [p for p in paths if not host.exists(p)]
        if missing:
            skipped.append(f"{address} lacks {', '.join(missing)} (not bound to vfio-pci?)")
            return None
    return Found(stable_key(address), paths, nodes, sys_dir, attributes)


def watched(config: PciConfig) -> list[str]:
    return [f"{DEVICES}/*", "/dev/vfio/*"] if config.vfio else [f"{DEVICES}/*"]
